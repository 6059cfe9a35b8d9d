//! `Store` over sqlx `Any`: the same statements run on SQLite and Postgres;
//! the few places where the dialects differ are in [`crate::sql`].

use std::sync::Arc;

use async_trait::async_trait;
use roncho_core::derivation::{Member, Settings, Stored, tasks_for_messages};
use roncho_core::filter::Filter;
use roncho_core::idempotency::Once;
use roncho_core::model::{
    CollectionQuery, Conclusion, DreamState, ErasureReceipt, ErasureScope, ImportedConclusion, ImportedMessage,
    JsonObject, Message, MessageScan, MessageSearch, NewConclusion, NewMessage, Page, PageRequest, Peer, PeerKind,
    Scope, ScopeBackfill, Session, SessionPeerConfig, SessionSummary, SummaryKind, SyncCounts, SyncItem, SyncKind,
    Tombstone, WebhookEndpoint, Workspace, new_public_id, now_micros, shallow_merge,
};
use roncho_core::store::{SessionPeers, Store, StoreInfo};
use roncho_core::validate::{MAX_SESSION_OBSERVERS, MAX_WEBHOOKS_PER_WORKSPACE};
use roncho_core::{Error, Result};
use sqlx::any::AnyRow;
use sqlx::{Any, AnyConnection, AnyPool, Transaction};
use tokio::sync::{Mutex, MutexGuard};

use crate::rows;
use crate::sql::{Bind, ColumnOf, Dialect, Sql, render_filter};

/// The relational store of both modes.
#[derive(Debug)]
pub struct SqlStore {
    pool: AnyPool,
    dialect: Dialect,
    location: String,
    /// SQLite has one writer: a connection of its own (opened at the first
    /// write), which writers take in turn. Its page cache stays warm from one
    /// transaction to the next, where a pooled connection's is dropped
    /// whenever another connection has committed; and queueing writers here
    /// is cheaper and fairer than SQLite's sleeping busy handler. `None` on
    /// Postgres, which locks rows.
    writer: Option<Mutex<Option<AnyConnection>>>,
    /// Client batches waiting for SQLite's writer, written as one group.
    waiting: std::sync::Mutex<Vec<Waiting>>,
    /// Group commits run, and the batches they wrote.
    write_groups: std::sync::atomic::AtomicU64,
    grouped_writes: std::sync::atomic::AtomicU64,
    /// SQLite: whether FTS5 indexes messages (see [`SqlStore::maintain_full_text_index`]).
    full_text_maintained: std::sync::atomic::AtomicBool,
    /// Erasures committed, for the checkpointer that overwrites their bytes.
    pub(crate) erased_bytes: Arc<ErasedBytes>,
}

/// Deletes of erased data committed, and how many of them a truncating
/// checkpoint has since pushed out of SQLite's WAL (where the deleted
/// text still stands in the frames written before the delete).
#[derive(Debug, Default)]
pub(crate) struct ErasedBytes {
    committed: std::sync::atomic::AtomicU64,
    overwritten: std::sync::atomic::AtomicU64,
}

impl ErasedBytes {
    /// Records that a delete of erased data (rows, vectors, tombstones) committed.
    pub(crate) fn note(&self) {
        self.committed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The deletes committed so far, if a checkpoint has not covered them yet.
    pub(crate) fn uncovered(&self) -> Option<u64> {
        let committed = self.committed.load(std::sync::atomic::Ordering::SeqCst);
        (committed > self.overwritten.load(std::sync::atomic::Ordering::SeqCst)).then_some(committed)
    }

    /// Records that a checkpoint begun after `committed` deletes covered them.
    pub(crate) fn covered(&self, committed: u64) {
        self.overwritten
            .fetch_max(committed, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A write transaction: SQLite's writer connection, held while it lives, or
/// a pooled Postgres connection. Dropped before its commit, it rolls back.
pub(crate) struct WriteTx<'a> {
    /// `None` once committed.
    inner: Option<Writing<'a>>,
}

enum Writing<'a> {
    Pooled(Transaction<'static, Any>),
    /// SQLite's writer connection, in a transaction.
    Writer(MutexGuard<'a, Option<AnyConnection>>),
}

type Transactions = <Any as sqlx::Database>::TransactionManager;

impl WriteTx<'_> {
    pub(crate) fn conn(&mut self) -> &mut AnyConnection {
        match self.inner.as_mut().expect("a transaction is used until its commit") {
            Writing::Pooled(tx) => tx,
            Writing::Writer(connection) => connection.as_mut().expect("the writer connection is open"),
        }
    }

    pub(crate) async fn commit(mut self) -> Result<()> {
        match self.inner.take() {
            Some(Writing::Pooled(tx)) => tx.commit().await.map_err(db_error),
            Some(Writing::Writer(mut guard)) => {
                let Some(connection) = guard.as_mut() else {
                    return Err(Error::Internal("the writer connection is gone".into()));
                };
                let committed = <Transactions as sqlx_core::transaction::TransactionManager>::commit(connection).await;
                if committed.is_err() {
                    <Transactions as sqlx_core::transaction::TransactionManager>::start_rollback(connection);
                }
                committed.map_err(db_error)
            }
            None => Ok(()),
        }
    }
}

impl Drop for WriteTx<'_> {
    /// The writer's transaction is rolled back: queued on the connection
    /// now, run before its next statement (a pooled one rolls back itself).
    fn drop(&mut self) {
        if let Some(Writing::Writer(mut guard)) = self.inner.take()
            && let Some(connection) = guard.as_mut()
        {
            <Transactions as sqlx_core::transaction::TransactionManager>::start_rollback(connection);
        }
    }
}

/// Maps a sqlx error to the domain: lost connections are `Unavailable`.
pub(crate) fn db_error(error: sqlx::Error) -> Error {
    match error {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::Tls(_) => {
            Error::Unavailable(format!("database: {error}"))
        }
        sqlx::Error::Database(ref database) if database.code().is_some_and(|code| is_transient(&code)) => {
            Error::Unavailable(format!("database: {error}"))
        }
        // A write that refers to a row deleted meanwhile (a session or peer
        // deleted while a batch joined it): the caller's state, not a fault.
        sqlx::Error::Database(ref database)
            if database
                .code()
                .is_some_and(|code| matches!(code.as_ref(), "23503" | "787")) =>
        {
            Error::FailedPrecondition(format!(
                "something this write refers to was deleted meanwhile (database: {error})"
            ))
        }
        other => Error::Internal(format!("database: {other}")),
    }
}

/// Whether a database error code says "try again": the server is shutting
/// down or starting (a restart, a failover), the connection broke, too
/// many connections, a serialization failure or deadlock (Postgres
/// SQLSTATE 08xxx, 57P01-57P03, 53300, 40001, 40P01), or SQLite is busy.
/// Clients get UNAVAILABLE and workers postpone, rather than INTERNAL and a
/// spent attempt (found by loadtests/run-chaos.sh restarting Postgres).
fn is_transient(code: &str) -> bool {
    code.starts_with("08")
        || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01")
        || matches!(code, "5" | "6" | "517" | "261")
}

pub(crate) fn to_json(object: &JsonObject) -> String {
    serde_json::Value::Object(object.clone()).to_string()
}

fn flag(value: Option<bool>) -> Bind {
    Bind::from(value.map(i64::from))
}

pub(crate) async fn fetch_all(conn: &mut AnyConnection, sql: &Sql) -> Result<Vec<AnyRow>> {
    sql.query(Dialect::of(conn))?.fetch_all(conn).await.map_err(db_error)
}

pub(crate) async fn fetch_optional(conn: &mut AnyConnection, sql: &Sql) -> Result<Option<AnyRow>> {
    sql.query(Dialect::of(conn))?
        .fetch_optional(conn)
        .await
        .map_err(db_error)
}

pub(crate) async fn execute(conn: &mut AnyConnection, sql: &Sql) -> Result<u64> {
    Ok(sql
        .query(Dialect::of(conn))?
        .execute(conn)
        .await
        .map_err(db_error)?
        .rows_affected())
}

fn workspace_column(key: &str) -> &'static str {
    match key {
        "id" => "name",
        "created_at" => "created_at",
        _ => "metadata",
    }
}

fn peer_column(key: &str) -> &'static str {
    match key {
        "id" => "p.name",
        "workspace_id" => "p.workspace_name",
        "created_at" => "p.created_at",
        _ => "p.metadata",
    }
}

fn session_column(key: &str) -> &'static str {
    match key {
        "id" => "s.name",
        "workspace_id" => "s.workspace_name",
        "is_active" => "s.is_active",
        "created_at" => "s.created_at",
        _ => "s.metadata",
    }
}

pub(crate) fn message_column(key: &str) -> &'static str {
    match key {
        "id" => "m.public_id",
        "workspace_id" => "m.workspace_name",
        "session_id" => "m.session_name",
        "peer_id" => "m.peer_name",
        "token_count" => "m.token_count",
        "created_at" => "m.created_at",
        _ => "m.metadata",
    }
}

/// Returns "ASC" or "DESC" for a page's direction.
pub(crate) fn direction(page: PageRequest) -> &'static str {
    if page.reverse { "DESC" } else { "ASC" }
}

impl SqlStore {
    pub(crate) fn new(pool: AnyPool, dialect: Dialect, location: String) -> Self {
        let writer = (dialect == Dialect::Sqlite).then(|| Mutex::new(None));
        Self {
            pool,
            dialect,
            location,
            writer,
            waiting: std::sync::Mutex::default(),
            write_groups: std::sync::atomic::AtomicU64::default(),
            grouped_writes: std::sync::atomic::AtomicU64::default(),
            full_text_maintained: std::sync::atomic::AtomicBool::new(true),
            erased_bytes: Arc::default(),
        }
    }

    /// SQLite: keeps FTS5's index of messages (`maintained`) or drops it.
    /// FTS5 ranks messages by their words only without an embedder; with
    /// one, the embedded vector store ranks them with an index of its own
    /// (ADR 0008), and FTS5's triggers cost every write a fifth or more.
    /// Turned off, the index is emptied (no word of an erased message
    /// stays in it); turned on, it is rebuilt from the rows, in the same
    /// transaction. Returns whether it changed. Postgres: nothing to do.
    pub async fn maintain_full_text_index(&self, maintained: bool) -> Result<bool> {
        if self.dialect != Dialect::Sqlite {
            return Ok(false);
        }
        let mut tx = self.begin_write().await?;
        let row = fetch_optional(tx.conn(), &Sql::new("SELECT maintained FROM full_text_state"))
            .await?
            .ok_or_else(|| Error::Internal("full_text_state has no row".into()))?;
        let was = rows::get::<i64>(&row, "maintained")? == 1;
        if was != maintained {
            let command = if maintained { "rebuild" } else { "delete-all" };
            let started = std::time::Instant::now();
            let mut sql = Sql::new("UPDATE full_text_state SET maintained = ");
            sql.bind(i64::from(maintained));
            execute(tx.conn(), &sql).await?;
            execute(
                tx.conn(),
                &Sql::new(&format!("INSERT INTO messages_fts (messages_fts) VALUES ('{command}')")),
            )
            .await?;
            tx.commit().await?;
            tracing::info!(
                maintained,
                seconds = started.elapsed().as_secs_f64(),
                "SQLite full-text index (FTS5) {}",
                if maintained {
                    "rebuilt from the rows"
                } else {
                    "emptied: the vector store ranks words"
                }
            );
        }
        self.full_text_maintained
            .store(maintained, std::sync::atomic::Ordering::Relaxed);
        Ok(was != maintained)
    }

    /// SQLite: whether FTS5 indexes messages now.
    pub(crate) fn full_text_maintained(&self) -> bool {
        self.full_text_maintained.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Returns the dialect this store speaks.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Returns the connection pool (migrations, tests).
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Closes every pooled connection.
    pub async fn close(&self) {
        if let Some(writer) = &self.writer
            && let Some(connection) = writer.lock().await.take()
        {
            use sqlx::Connection;
            if let Err(error) = connection.close().await {
                tracing::warn!(%error, "closing the SQLite writer connection");
            }
        }
        self.pool.close().await;
    }

    pub(crate) async fn begin_write(&self) -> Result<WriteTx<'_>> {
        let Some(writer) = &self.writer else {
            let tx = self.pool.begin().await.map_err(db_error)?;
            return Ok(WriteTx {
                inner: Some(Writing::Pooled(tx)),
            });
        };
        let mut guard = writer.lock().await;
        self.begin_on_writer(&mut guard).await?;
        Ok(WriteTx {
            inner: Some(Writing::Writer(guard)),
        })
    }

    /// Begins a write of what is derived from the rows and written again
    /// when missing (vectors, the text index, sync marks): on Postgres its
    /// commit does not wait for the WAL to reach disk. A crash may lose the
    /// last such commits (the rows are then synced or indexed again), never
    /// one a later durable commit saw: the WAL is flushed in order.
    pub(crate) async fn begin_rebuildable(&self) -> Result<WriteTx<'_>> {
        if self.writer.is_none() && self.dialect == Dialect::Postgres {
            let tx = self
                .pool
                .begin_with("BEGIN; SET LOCAL synchronous_commit = off")
                .await
                .map_err(db_error)?;
            return Ok(WriteTx {
                inner: Some(Writing::Pooled(tx)),
            });
        }
        self.begin_write().await
    }

    /// Begins a write transaction on SQLite's writer connection (opening it
    /// at the first write), and returns the connection.
    async fn begin_on_writer<'g>(&self, guard: &'g mut Option<AnyConnection>) -> Result<&'g mut AnyConnection> {
        if guard.is_none() {
            // The pool's connection, with its pragmas, becomes the writer's own.
            *guard = Some(self.pool.acquire().await.map_err(db_error)?.detach());
        }
        let connection = guard.as_mut().expect("the writer connection was just opened");
        // A transaction left open (its writer's future was dropped midway) is rolled back first.
        abandon(connection);
        // IMMEDIATE takes the write lock up front instead of failing to upgrade later.
        let begun = <Transactions as sqlx_core::transaction::TransactionManager>::begin(
            connection,
            Some(sqlx::SqlSafeStr::into_sql_str("BEGIN IMMEDIATE")),
        )
        .await;
        if let Err(error) = begun {
            // Whatever broke, the next write starts on a fresh connection.
            guard.take();
            return Err(db_error(error));
        }
        Ok(guard.as_mut().expect("the writer connection is open"))
    }

    pub(crate) async fn read(&self, sql: &Sql) -> Result<Vec<AnyRow>> {
        sql.query(self.dialect)?.fetch_all(&self.pool).await.map_err(db_error)
    }

    pub(crate) async fn read_optional(&self, sql: &Sql) -> Result<Option<AnyRow>> {
        sql.query(self.dialect)?
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error)
    }

    /// Runs the count and the page query of `FROM ... WHERE ...` in `from_where`.
    pub(crate) async fn paged<T>(
        &self,
        columns: &str,
        from_where: Sql,
        order_by: &str,
        page: PageRequest,
        decode: fn(&AnyRow) -> Result<T>,
    ) -> Result<Page<T>> {
        let count = Sql {
            text: format!("SELECT COUNT(*) AS n FROM {}", from_where.text),
            binds: from_where.binds.clone(),
        };
        let total = match self.read_optional(&count).await? {
            Some(row) => rows::count(&row)?,
            None => 0,
        };
        let mut select = Sql {
            text: format!("SELECT {columns} FROM {} ORDER BY {order_by} LIMIT ", from_where.text),
            binds: from_where.binds,
        };
        select.bind(page.size).push(" OFFSET ").bind(page.offset());
        let items = self
            .read(&select)
            .await?
            .iter()
            .map(decode)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::new(items, total, page))
    }

    fn push_filter(&self, sql: &mut Sql, filter: &Filter, column_of: ColumnOf) -> Result<()> {
        sql.push(" AND ");
        render_filter(sql, self.dialect, filter, column_of)
    }
}

/// Creates the workspace when absent; returns whether it was created.
pub(crate) async fn ensure_workspace(
    conn: &mut AnyConnection,
    id: &str,
    metadata: &JsonObject,
    configuration: &JsonObject,
) -> Result<bool> {
    let mut sql = Sql::new("INSERT INTO workspaces (name, metadata, configuration, created_at) VALUES (");
    sql.bind(id)
        .push(", ")
        .bind(to_json(metadata))
        .push(", ")
        .bind(to_json(configuration))
        .push(", ")
        .bind(now_micros());
    sql.push(") ON CONFLICT (name) DO NOTHING");
    Ok(execute(conn, &sql).await? == 1)
}

pub(crate) async fn load_workspace(conn: &mut AnyConnection, id: &str) -> Result<Workspace> {
    let mut sql = Sql::new(&format!(
        "SELECT {} FROM workspaces WHERE name = ",
        rows::WORKSPACE_COLUMNS
    ));
    sql.bind(id);
    let row = fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::not_found("workspace", id))?;
    rows::workspace(&row)
}

/// Creates a peer or session (`table`) when absent; returns whether it was created.
async fn ensure_named(
    conn: &mut AnyConnection,
    table: &'static str,
    workspace_id: &str,
    id: &str,
    metadata: &JsonObject,
    configuration: &JsonObject,
) -> Result<bool> {
    let mut sql = Sql::new(&format!(
        "INSERT INTO {table} (workspace_name, name, metadata, configuration, created_at) VALUES ("
    ));
    sql.bind(workspace_id)
        .push(", ")
        .bind(id)
        .push(", ")
        .bind(to_json(metadata))
        .push(", ")
        .bind(to_json(configuration));
    sql.push(", ")
        .bind(now_micros())
        .push(") ON CONFLICT (workspace_name, name) DO NOTHING");
    Ok(execute(conn, &sql).await? == 1)
}

pub(crate) async fn ensure_peer(
    conn: &mut AnyConnection,
    workspace_id: &str,
    id: &str,
    metadata: &JsonObject,
    configuration: &JsonObject,
) -> Result<bool> {
    ensure_named(conn, "peers", workspace_id, id, metadata, configuration).await
}

pub(crate) async fn load_peer(conn: &mut AnyConnection, workspace_id: &str, id: &str) -> Result<Peer> {
    let mut sql = Sql::new(&format!(
        "SELECT {} FROM peers p WHERE p.workspace_name = ",
        rows::PEER_COLUMNS
    ));
    sql.bind(workspace_id).push(" AND p.name = ").bind(id);
    let row = fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::not_found("peer", id))?;
    rows::peer(&row)
}

async fn ensure_session(
    conn: &mut AnyConnection,
    workspace_id: &str,
    id: &str,
    metadata: &JsonObject,
    configuration: &JsonObject,
) -> Result<bool> {
    ensure_named(conn, "sessions", workspace_id, id, metadata, configuration).await
}

pub(crate) async fn load_session(conn: &mut AnyConnection, workspace_id: &str, id: &str) -> Result<Session> {
    let mut sql = Sql::new(&format!(
        "SELECT {} FROM sessions s WHERE s.workspace_name = ",
        rows::SESSION_COLUMNS
    ));
    sql.bind(workspace_id).push(" AND s.name = ").bind(id);
    let row = fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::not_found("session", id))?;
    let session = rows::session(&row)?;
    if !session.is_active {
        return Err(Error::not_found("session", id));
    }
    Ok(session)
}

/// Every member of a session (active or not) with the settings derivation needs.
async fn load_members(conn: &mut AnyConnection, workspace_id: &str, session_id: &str) -> Result<Vec<Member>> {
    let mut sql = Sql::new(
        "SELECT sp.peer_name, sp.observe_me, sp.observe_others, sp.left_at, p.configuration FROM session_peers sp \
         JOIN peers p ON p.workspace_name = sp.workspace_name AND p.name = sp.peer_name WHERE sp.workspace_name = ",
    );
    sql.bind(workspace_id)
        .push(" AND sp.session_name = ")
        .bind(session_id)
        .push(" ORDER BY sp.joined_at, sp.peer_name");
    let rows = sql.query(Dialect::of(conn))?.fetch_all(conn).await.map_err(db_error)?;
    rows.iter()
        .map(|row| {
            Ok(Member {
                peer_id: sqlx::Row::try_get(row, "peer_name").map_err(db_error)?,
                peer_configuration: rows::json(row, "configuration")?,
                session_config: rows::session_peer_config(row)?,
                active: sqlx::Row::try_get::<Option<i64>, _>(row, "left_at")
                    .map_err(db_error)?
                    .is_none(),
            })
        })
        .collect()
}

/// Adds or re-activates a member; `config` `None` keeps an existing member's config.
pub(crate) async fn upsert_member(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    peer_id: &str,
    config: Option<SessionPeerConfig>,
) -> Result<()> {
    let config_given = config.is_some();
    let config = config.unwrap_or_default();
    let mut sql = Sql::new(
        "INSERT INTO session_peers (workspace_name, session_name, peer_name, observe_me, observe_others, joined_at, left_at) VALUES (",
    );
    sql.bind(workspace_id)
        .push(", ")
        .bind(session_id)
        .push(", ")
        .bind(peer_id)
        .push(", ");
    sql.bind(flag(config.observe_me))
        .push(", ")
        .bind(flag(config.observe_others))
        .push(", ")
        .bind(now_micros());
    sql.push(
        ", NULL) ON CONFLICT (workspace_name, session_name, peer_name) DO UPDATE SET \
         joined_at = CASE WHEN session_peers.left_at IS NULL THEN session_peers.joined_at ELSE excluded.joined_at END, \
         left_at = NULL",
    );
    if config_given {
        sql.push(", observe_me = excluded.observe_me, observe_others = excluded.observe_others");
    }
    execute(conn, &sql).await?;
    Ok(())
}

async fn add_members(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    peers: &SessionPeers,
) -> Result<()> {
    for (peer_id, config) in peers {
        ensure_peer(conn, workspace_id, peer_id, &JsonObject::new(), &JsonObject::new()).await?;
        upsert_member(conn, workspace_id, session_id, peer_id, Some(*config)).await?;
    }
    check_observer_limit(conn, workspace_id, session_id).await
}

/// Refuses more than ten active members that observe others.
async fn check_observer_limit(conn: &mut AnyConnection, workspace_id: &str, session_id: &str) -> Result<()> {
    let mut sql = Sql::new("SELECT COUNT(*) AS n FROM session_peers WHERE workspace_name = ");
    sql.bind(workspace_id).push(" AND session_name = ").bind(session_id);
    sql.push(" AND left_at IS NULL AND observe_others = 1 AND peer_name NOT LIKE ")
        .bind(crate::scopes::scope_pattern());
    let observers = match fetch_optional(conn, &sql).await? {
        Some(row) => rows::count(&row)?,
        None => 0,
    };
    if observers > i64::try_from(MAX_SESSION_OBSERVERS).unwrap_or(i64::MAX) {
        return Err(Error::invalid(
            "peers",
            format!(
                "session `{session_id}` would have {observers} peers with observe_others, at most {MAX_SESSION_OBSERVERS} are allowed"
            ),
        ));
    }
    Ok(())
}

/// Most messages one CloneSession copies.
pub const MAX_CLONE_MESSAGES: i64 = 100_000;

/// Messages per INSERT statement: 10 bound values each keeps a statement far
/// below SQLite's 32,766 and Postgres' 65,535 bound values.
const MESSAGES_PER_STATEMENT: usize = 1_000;

/// Inserts messages (with their `seq_in_session` set), a statement per
/// [`MESSAGES_PER_STATEMENT`], inside the caller's transaction.
async fn insert_messages(conn: &mut AnyConnection, messages: &[Message], configurations: &[String]) -> Result<()> {
    for (messages, configurations) in messages
        .chunks(MESSAGES_PER_STATEMENT)
        .zip(configurations.chunks(MESSAGES_PER_STATEMENT))
    {
        insert_message_rows(conn, messages, configurations).await?;
    }
    Ok(())
}

/// A session or a peer: `(workspace, name)`.
type Parent<'a> = (&'a str, &'a str);

/// The sessions and the peers of `messages`, each once.
fn message_parents(messages: &[Message]) -> (Vec<Parent<'_>>, Vec<Parent<'_>>) {
    let mut sessions: Vec<Parent<'_>> = Vec::new();
    let mut peers: Vec<Parent<'_>> = Vec::new();
    for message in messages {
        let session = (message.workspace_id.as_str(), message.session_id.as_str());
        if !sessions.contains(&session) {
            sessions.push(session);
        }
        let peer = (message.workspace_id.as_str(), message.peer_id.as_str());
        if !peers.contains(&peer) {
            peers.push(peer);
        }
    }
    (sessions, peers)
}

/// `(SELECT 1 FROM table WHERE (workspace_name, name) IN ((…), …) FOR KEY SHARE)`
fn push_parents_locked(sql: &mut Sql, table: &str, parents: &[Parent<'_>]) {
    sql.push(&format!(
        "(SELECT workspace_name, name FROM {table} WHERE (workspace_name, name) IN ("
    ));
    for (index, (workspace, name)) in parents.iter().enumerate() {
        if index > 0 {
            sql.push(", ");
        }
        sql.push("(").bind(*workspace).push(", ").bind(*name).push(")");
    }
    sql.push(") FOR KEY SHARE)");
}

/// Inserts one statement's messages. On Postgres the same statement locks
/// their sessions and peers (KEY SHARE) until the transaction ends, so that
/// none is deleted before the messages commit: a delete waits for the
/// commit, and its trigger then deletes the messages with it (migration
/// 0017); it inserts nothing when one of them is gone (deleted since the
/// batch read it: `NOT_FOUND`); and it queues the messages for their vectors
/// and their words (migration 0019). Foreign keys looked up and locked both for
/// every row, a third of the write's time in Postgres. SQLite checks its
/// foreign keys itself, and has one writer.
async fn insert_message_rows(conn: &mut AnyConnection, messages: &[Message], configurations: &[String]) -> Result<()> {
    const COLUMNS: &str = "public_id, workspace_name, session_name, peer_name, seq_in_session, content, metadata, configuration, token_count, created_at";
    let postgres = Dialect::of(conn) == Dialect::Postgres;
    let (sessions, peers) = message_parents(messages);
    let mut sql = if postgres {
        let mut sql = Sql::new("WITH s AS ");
        push_parents_locked(&mut sql, "sessions", &sessions);
        sql.push(", p AS ");
        push_parents_locked(&mut sql, "peers", &peers);
        sql.push(&format!(
            ", m AS (INSERT INTO messages ({COLUMNS}) SELECT * FROM (VALUES "
        ));
        sql
    } else {
        Sql::new(&format!("INSERT INTO messages ({COLUMNS}) VALUES "))
    };
    for (index, (message, configuration)) in messages.iter().zip(configurations).enumerate() {
        if index > 0 {
            sql.push(", ");
        }
        sql.push("(")
            .bind(message.id.as_str())
            .push(", ")
            .bind(message.workspace_id.as_str())
            .push(", ");
        sql.bind(message.session_id.as_str())
            .push(", ")
            .bind(message.peer_id.as_str())
            .push(", ");
        sql.bind(message.seq_in_session)
            .push(", ")
            .bind(message.content.as_str())
            .push(", ");
        sql.bind(to_json(&message.metadata))
            .push(", ")
            .bind(configuration.as_str())
            .push(", ");
        sql.bind(message.token_count)
            .push(", ")
            .bind(message.created_at)
            .push(")");
    }
    if postgres {
        sql.push(&format!(") AS v ({COLUMNS}) WHERE (SELECT COUNT(*) FROM s) = "))
            .bind(i64::try_from(sessions.len()).unwrap_or(i64::MAX));
        sql.push(" AND (SELECT COUNT(*) FROM p) = ")
            .bind(i64::try_from(peers.len()).unwrap_or(i64::MAX));
        // Each message's vector and words wait in their queues (migration
        // 0019); SQLite's trigger queues the vector.
        sql.push(
            " RETURNING id), q AS (INSERT INTO message_sync (message_id) SELECT id FROM m) \
             INSERT INTO message_unindexed (message_id) SELECT id FROM m",
        );
    }
    let inserted = execute(conn, &sql).await?;
    if inserted != messages.len() as u64 {
        return Err(missing_parent(conn, &sessions, &peers).await);
    }
    Ok(())
}

/// Which of `sessions` and `peers` is gone, as `NOT_FOUND`.
async fn missing_parent(conn: &mut AnyConnection, sessions: &[Parent<'_>], peers: &[Parent<'_>]) -> Error {
    for (table, kind, parents) in [("sessions", "session", sessions), ("peers", "peer", peers)] {
        for (workspace, name) in parents {
            let mut sql = Sql::new(&format!("SELECT COUNT(*) AS n FROM {table} WHERE workspace_name = "));
            sql.bind(*workspace).push(" AND name = ").bind(*name);
            match fetch_optional(conn, &sql).await {
                Ok(Some(row)) if rows::count(&row).unwrap_or(0) > 0 => {}
                Ok(_) => return Error::not_found(kind, *name),
                Err(error) => return error,
            }
        }
    }
    Error::Internal("messages were not stored, and their sessions and peers exist".into())
}

/// Hands out `count` new sequence numbers of a session; returns the first.
async fn allocate_seq(conn: &mut AnyConnection, workspace_id: &str, session_id: &str, count: i64) -> Result<i64> {
    let mut sql = Sql::new("UPDATE sessions SET last_seq = last_seq + ");
    sql.bind(count)
        .push(" WHERE workspace_name = ")
        .bind(workspace_id)
        .push(" AND name = ")
        .bind(session_id);
    sql.push(" RETURNING last_seq");
    let row = fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::not_found("session", session_id))?;
    let last: i64 = sqlx::Row::try_get(&row, "last_seq").map_err(db_error)?;
    Ok(last - count + 1)
}

pub(crate) async fn load_message(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    id: &str,
) -> Result<Message> {
    let mut sql = Sql::new(&format!(
        "SELECT {} FROM messages m WHERE m.workspace_name = ",
        rows::MESSAGE_COLUMNS
    ));
    sql.bind(workspace_id)
        .push(" AND m.session_name = ")
        .bind(session_id)
        .push(" AND m.public_id = ")
        .bind(id);
    let row = fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::not_found("message", id))?;
    rows::message(&row)
}

/// Where a batch of messages comes from.
enum Origin<'a> {
    /// A client's CreateMessages: new ids, its work queued; with a key, only
    /// the first time the key is seen.
    Client(Option<&'a Once>),
    /// `roncho import`: the ids given (one per message), already held ones
    /// skipped; work queued only when `derive`.
    Import { ids: Vec<String>, derive: bool },
}

/// The session a batch of messages is written to, with its workspace's
/// configuration, in one query; with `create`, the workspace and session
/// are created first when absent (Honcho's get-or-create on write). An
/// inactive (deleted) session is `NOT_FOUND`.
async fn writable_session(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    create: bool,
) -> Result<(JsonObject, Session)> {
    let mut sql = Sql::new(&format!(
        "SELECT {}, w.configuration AS workspace_configuration FROM sessions s \
         JOIN workspaces w ON w.name = s.workspace_name WHERE s.workspace_name = ",
        rows::SESSION_COLUMNS
    ));
    sql.bind(workspace_id).push(" AND s.name = ").bind(session_id);
    let row = match fetch_optional(conn, &sql).await? {
        Some(row) => row,
        None if create => {
            ensure_workspace(conn, workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
            ensure_session(conn, workspace_id, session_id, &JsonObject::new(), &JsonObject::new()).await?;
            fetch_optional(conn, &sql)
                .await?
                .ok_or_else(|| Error::not_found("session", session_id))?
        }
        None => return Err(Error::not_found("session", session_id)),
    };
    let session = rows::session(&row)?;
    if !session.is_active {
        return Err(Error::not_found("session", session_id));
    }
    Ok((rows::json(&row, "workspace_configuration")?, session))
}

/// Which of `ids` this session already holds; `FAILED_PRECONDITION` when one
/// is held anywhere else (ids are unique across the store).
async fn held_message_ids(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    ids: &[String],
) -> Result<std::collections::BTreeSet<String>> {
    let mut held = std::collections::BTreeSet::new();
    for chunk in ids.chunks(MESSAGES_PER_STATEMENT) {
        let mut sql = Sql::new("SELECT public_id, workspace_name, session_name FROM messages WHERE public_id IN ");
        sql.push_list(chunk);
        for row in fetch_all(conn, &sql).await? {
            let id: String = rows::get(&row, "public_id")?;
            let workspace: String = rows::get(&row, "workspace_name")?;
            let session: String = rows::get(&row, "session_name")?;
            if workspace != workspace_id || session != session_id {
                return Err(Error::FailedPrecondition(format!(
                    "message `{id}` is already stored in another session ({workspace}/{session})"
                )));
            }
            held.insert(id);
        }
    }
    Ok(held)
}

impl SqlStore {
    /// Appends `messages` with their work, as `origin` says.
    async fn create_messages_impl(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<NewMessage>,
        origin: Origin<'_>,
    ) -> Result<Vec<Message>> {
        if let (Origin::Client(None), Some(writer)) = (&origin, &self.writer) {
            return self.group_commit(writer, workspace_id, session_id, messages).await;
        }
        let mut tx = self.begin_write().await?;
        let once = match &origin {
            Origin::Client(once) => *once,
            Origin::Import { .. } => None,
        };
        let batch = match origin {
            Origin::Client(_) => {
                if let Some(once) = once {
                    // The key is the workspace's.
                    ensure_workspace(tx.conn(), workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
                    if let crate::idempotency::Claim::Done(ids) =
                        crate::idempotency::claim(tx.conn(), workspace_id, Some(session_id), once).await?
                    {
                        drop(tx);
                        return self.replay_messages(workspace_id, session_id, &ids).await;
                    }
                }
                Batch::from_client(messages)
            }
            Origin::Import { ids, derive } => {
                load_session(tx.conn(), workspace_id, session_id).await?;
                let held = held_message_ids(tx.conn(), workspace_id, session_id, &ids).await?;
                let (ids, messages): (Vec<String>, Vec<NewMessage>) = ids
                    .into_iter()
                    .zip(messages)
                    .filter(|(id, _)| !held.contains(id))
                    .unzip();
                if messages.is_empty() {
                    return Ok(Vec::new());
                }
                Batch {
                    messages,
                    ids,
                    derive,
                    create: false,
                }
            }
        };
        let created = write_messages(tx.conn(), workspace_id, session_id, batch, once).await?;
        tx.commit().await?;
        Ok(created)
    }

    /// Writes a client's batch on SQLite's writer together with the batches
    /// of other callers waiting for it (group commit): the first caller to
    /// take the writer runs every waiting batch in one transaction, each in
    /// a savepoint of its own (a failing batch is rolled back alone), and
    /// answers each caller once the transaction has committed, so an
    /// acknowledgement still means the batch is durable. One writer, one
    /// commit and one WAL write for many batches instead of one each.
    async fn group_commit(
        &self,
        writer: &Mutex<Option<AnyConnection>>,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Message>> {
        let (done, mut answer) = tokio::sync::oneshot::channel();
        self.waiting.lock().expect("waiting batches").push(Waiting {
            workspace_id: workspace_id.to_owned(),
            session_id: session_id.to_owned(),
            messages,
            done,
        });
        loop {
            tokio::select! {
                biased;
                answer = &mut answer => {
                    // The group's writer went away midway (its caller left): nothing of it was committed.
                    return answer.unwrap_or_else(|_| {
                        Err(Error::Unavailable("the write was interrupted before its commit; retry it".into()))
                    });
                }
                mut guard = writer.lock() => {
                    let group = std::mem::take(&mut *self.waiting.lock().expect("waiting batches"));
                    // Empty: a group before this one took the batch; its answer is on the way.
                    if !group.is_empty() {
                        self.write_group(&mut guard, group).await;
                    }
                }
            }
        }
    }

    /// Runs `group` in one transaction on the writer and answers each batch.
    async fn write_group(&self, guard: &mut Option<AnyConnection>, group: Vec<Waiting>) {
        self.write_groups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.grouped_writes
            .fetch_add(group.len() as u64, std::sync::atomic::Ordering::Relaxed);
        tracing::debug!(batches = group.len(), "group commit");
        let connection = match self.begin_on_writer(guard).await {
            Ok(connection) => connection,
            Err(error) => {
                for waiting in group {
                    let _ = waiting.done.send(Err(error.clone()));
                }
                return;
            }
        };
        let mut answers = Vec::with_capacity(group.len());
        let mut failed: Option<Error> = None;
        for Waiting {
            workspace_id,
            session_id,
            messages,
            done,
        } in group
        {
            let written = if failed.is_some() {
                Err(Error::Unavailable("the transaction of the batch's group failed".into()))
            } else {
                let batch = Batch::from_client(messages);
                match write_in_savepoint(connection, &workspace_id, &session_id, batch).await {
                    Ok(written) => written,
                    // The savepoint itself failed: the transaction cannot go on.
                    Err(error) => {
                        failed = Some(error.clone());
                        Err(error)
                    }
                }
            };
            answers.push((done, written));
        }
        let committed = match failed {
            Some(error) => {
                abandon(connection);
                Err(error)
            }
            None => {
                let committed = <Transactions as sqlx_core::transaction::TransactionManager>::commit(connection).await;
                if committed.is_err() {
                    abandon(connection);
                }
                committed.map_err(db_error)
            }
        };
        for (done, written) in answers {
            let answer = match (&committed, written) {
                (Ok(()), written) => written,
                (Err(error), Ok(_)) => Err(error.clone()),
                (Err(_), Err(error)) => Err(error),
            };
            let _ = done.send(answer);
        }
    }

    /// How many group commits ran, and how many batches they wrote (SQLite).
    pub fn write_groups(&self) -> (u64, u64) {
        (
            self.write_groups.load(std::sync::atomic::Ordering::Relaxed),
            self.grouped_writes.load(std::sync::atomic::Ordering::Relaxed),
        )
    }
}

/// Rolls back whatever transaction (and savepoints) `connection` holds:
/// queued now, run before its next statement.
fn abandon(connection: &mut AnyConnection) {
    use sqlx_core::transaction::TransactionManager;
    // One rollback per level; each is queued, and the depth falls as they run.
    for _ in 0..<Transactions as TransactionManager>::get_transaction_depth(connection) {
        <Transactions as TransactionManager>::start_rollback(connection);
    }
}

/// A client's batch waiting for SQLite's writer.
#[derive(Debug)]
struct Waiting {
    workspace_id: String,
    session_id: String,
    messages: Vec<NewMessage>,
    done: tokio::sync::oneshot::Sender<Result<Vec<Message>>>,
}

/// Writes one batch in a savepoint of the open transaction: its outcome,
/// or the error that ends the transaction.
async fn write_in_savepoint(
    connection: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    batch: Batch,
) -> Result<Result<Vec<Message>>> {
    use sqlx_core::transaction::TransactionManager;
    <Transactions as TransactionManager>::begin(connection, None)
        .await
        .map_err(db_error)?;
    match write_messages(connection, workspace_id, session_id, batch, None).await {
        Ok(created) => {
            <Transactions as TransactionManager>::commit(connection)
                .await
                .map_err(db_error)?;
            Ok(Ok(created))
        }
        Err(error) => {
            <Transactions as TransactionManager>::rollback(connection)
                .await
                .map_err(db_error)?;
            Ok(Err(error))
        }
    }
}

/// A batch of messages to write: with their ids, whether their work is
/// queued, and whether the workspace and session are created when absent.
struct Batch {
    messages: Vec<NewMessage>,
    ids: Vec<String>,
    derive: bool,
    create: bool,
}

impl Batch {
    /// A client's batch: new ids, work queued, get-or-create.
    fn from_client(messages: Vec<NewMessage>) -> Self {
        let ids = messages.iter().map(|_| new_public_id()).collect();
        Batch {
            messages,
            ids,
            derive: true,
            create: true,
        }
    }
}

/// Writes `batch` to a session in the caller's transaction: the messages
/// in order with new sequence numbers, their key's record with `once`, and
/// with `derive` their work, so nothing is lost between them.
async fn write_messages(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    batch: Batch,
    once: Option<&Once>,
) -> Result<Vec<Message>> {
    let now = now_micros();
    let Batch {
        messages,
        ids,
        derive,
        create,
    } = batch;
    let count = i64::try_from(messages.len()).unwrap_or(i64::MAX);
    // What exists is read, and written only when missing: a batch to a
    // session whose writers are members costs no statement that changes
    // nothing (an upsert writes a new row version even then).
    let (workspace_configuration, session) = writable_session(conn, workspace_id, session_id, create).await?;
    let mut authors: Vec<&str> = Vec::new();
    for message in &messages {
        if !authors.contains(&message.peer_id.as_str()) {
            authors.push(&message.peer_id);
        }
    }
    let mut members = load_members(conn, workspace_id, session_id).await?;
    let mut joined = false;
    for author in &authors {
        if !members.iter().any(|member| member.active && member.peer_id == *author) {
            ensure_peer(conn, workspace_id, author, &JsonObject::new(), &JsonObject::new()).await?;
            upsert_member(conn, workspace_id, session_id, author, None).await?;
            joined = true;
        }
    }
    if joined {
        members = load_members(conn, workspace_id, session_id).await?;
    }
    let first_seq = allocate_seq(conn, workspace_id, session_id, count).await?;
    let mut configurations = Vec::with_capacity(messages.len());
    let mut message_settings = Vec::with_capacity(messages.len());
    let created: Vec<Message> = messages
        .into_iter()
        .zip(ids)
        .zip(first_seq..)
        .map(|((new, id), seq_in_session)| {
            configurations.push(to_json(&new.configuration));
            message_settings.push(new.configuration.clone());
            Message {
                id,
                workspace_id: workspace_id.to_owned(),
                session_id: session_id.to_owned(),
                peer_id: new.peer_id,
                content: new.content,
                metadata: new.metadata,
                created_at: new.created_at.unwrap_or(now),
                token_count: new.token_count,
                seq_in_session,
            }
        })
        .collect();
    insert_messages(conn, &created, &configurations).await?;
    if let Some(once) = once {
        let ids: Vec<String> = created.iter().map(|message| message.id.clone()).collect();
        crate::idempotency::record(conn, workspace_id, once, &ids).await?;
    }
    if !derive {
        return Ok(created);
    }
    // The messages' background work commits with them: nothing is lost between.
    let none = JsonObject::new();
    let stored: Vec<Stored<'_>> = created
        .iter()
        .zip(&message_settings)
        .map(|(message, configuration)| Stored {
            message,
            sender_configuration: members
                .iter()
                .find(|member| member.peer_id == message.peer_id)
                .map_or(&none, |member| &member.peer_configuration),
            settings: Settings::resolve(&workspace_configuration, &session.configuration, configuration),
        })
        .collect();
    crate::queue::insert_tasks(conn, &tasks_for_messages(&stored, &members)).await?;
    Ok(created)
}

#[async_trait]
impl Store for SqlStore {
    async fn info(&self) -> Result<StoreInfo> {
        let backend = match self.dialect {
            Dialect::Postgres => "postgres",
            Dialect::Sqlite => "sqlite",
        };
        let version = self
            .read_optional(&Sql::new(
                "SELECT MAX(version) AS n FROM _sqlx_migrations WHERE success",
            ))
            .await
            .ok()
            .flatten()
            .and_then(|row| sqlx::Row::try_get::<Option<i64>, _>(&row, "n").ok().flatten());
        Ok(StoreInfo {
            backend,
            location: self.location.clone(),
            schema_version: version,
        })
    }

    async fn ping(&self) -> Result<()> {
        self.read(&Sql::new("SELECT 1 AS one")).await.map(drop)
    }

    async fn get_or_create_workspace(
        &self,
        id: &str,
        metadata: JsonObject,
        configuration: JsonObject,
    ) -> Result<(Workspace, bool)> {
        let mut tx = self.begin_write().await?;
        let created = ensure_workspace(tx.conn(), id, &metadata, &configuration).await?;
        let workspace = load_workspace(tx.conn(), id).await?;
        tx.commit().await?;
        Ok((workspace, created))
    }

    async fn update_workspace(
        &self,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
    ) -> Result<Workspace> {
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), id, &JsonObject::new(), &JsonObject::new()).await?;
        let mut workspace = load_workspace(tx.conn(), id).await?;
        if let Some(metadata) = metadata {
            workspace.metadata = metadata;
        }
        if let Some(configuration) = configuration {
            workspace.configuration = shallow_merge(workspace.configuration, configuration);
        }
        let mut sql = Sql::new("UPDATE workspaces SET metadata = ");
        sql.bind(to_json(&workspace.metadata))
            .push(", configuration = ")
            .bind(to_json(&workspace.configuration));
        sql.push(" WHERE name = ").bind(id);
        execute(tx.conn(), &sql).await?;
        tx.commit().await?;
        Ok(workspace)
    }

    async fn list_workspaces(&self, filter: &Filter, page: PageRequest) -> Result<Page<Workspace>> {
        let mut from_where = Sql::new("workspaces WHERE 1=1");
        self.push_filter(&mut from_where, filter, workspace_column)?;
        let dir = direction(page);
        self.paged(
            rows::WORKSPACE_COLUMNS,
            from_where,
            &format!("created_at {dir}, name {dir}"),
            page,
            rows::workspace,
        )
        .await
    }

    async fn get_or_create_peer(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
    ) -> Result<(Peer, bool)> {
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
        let created = ensure_peer(
            tx.conn(),
            workspace_id,
            id,
            metadata.as_ref().unwrap_or(&JsonObject::new()),
            configuration.as_ref().unwrap_or(&JsonObject::new()),
        )
        .await?;
        if !created && (metadata.is_some() || configuration.is_some()) {
            let mut sql = Sql::new("UPDATE peers SET name = name");
            if let Some(metadata) = &metadata {
                sql.push(", metadata = ").bind(to_json(metadata));
            }
            if let Some(configuration) = &configuration {
                sql.push(", configuration = ").bind(to_json(configuration));
            }
            sql.push(" WHERE workspace_name = ")
                .bind(workspace_id)
                .push(" AND name = ")
                .bind(id);
            execute(tx.conn(), &sql).await?;
        }
        let peer = load_peer(tx.conn(), workspace_id, id).await?;
        tx.commit().await?;
        Ok((peer, created))
    }

    async fn list_peers(
        &self,
        workspace_id: &str,
        kind: PeerKind,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Peer>> {
        let mut from_where = Sql::new("peers p WHERE p.workspace_name = ");
        from_where.bind(workspace_id);
        match kind {
            PeerKind::Peer => {
                from_where
                    .push(" AND p.name NOT LIKE ")
                    .bind(crate::scopes::scope_pattern());
            }
            PeerKind::Scope => {
                from_where
                    .push(" AND p.name LIKE ")
                    .bind(crate::scopes::scope_pattern());
            }
            PeerKind::All => {}
        }
        self.push_filter(&mut from_where, filter, peer_column)?;
        let dir = direction(page);
        self.paged(
            rows::PEER_COLUMNS,
            from_where,
            &format!("p.created_at {dir}, p.name {dir}"),
            page,
            rows::peer,
        )
        .await
    }

    async fn get_or_create_session(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
        peers: SessionPeers,
    ) -> Result<(Session, bool)> {
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
        let created = ensure_session(
            tx.conn(),
            workspace_id,
            id,
            metadata.as_ref().unwrap_or(&JsonObject::new()),
            configuration.as_ref().unwrap_or(&JsonObject::new()),
        )
        .await?;
        let mut session = load_session(tx.conn(), workspace_id, id).await?;
        if !created && (metadata.is_some() || configuration.is_some()) {
            if let Some(metadata) = metadata {
                session.metadata = metadata;
            }
            if let Some(configuration) = configuration {
                session.configuration = shallow_merge(session.configuration, configuration);
            }
            let mut sql = Sql::new("UPDATE sessions SET metadata = ");
            sql.bind(to_json(&session.metadata))
                .push(", configuration = ")
                .bind(to_json(&session.configuration));
            sql.push(" WHERE workspace_name = ")
                .bind(workspace_id)
                .push(" AND name = ")
                .bind(id);
            execute(tx.conn(), &sql).await?;
        }
        add_members(tx.conn(), workspace_id, id, &peers).await?;
        tx.commit().await?;
        Ok((session, created))
    }

    async fn clone_session(&self, workspace_id: &str, id: &str, cutoff_message_id: Option<&str>) -> Result<Session> {
        let mut tx = self.begin_write().await?;
        let original = load_session(tx.conn(), workspace_id, id).await?;
        let cutoff_seq = match cutoff_message_id {
            Some(message_id) => Some(
                load_message(tx.conn(), workspace_id, id, message_id)
                    .await?
                    .seq_in_session,
            ),
            None => None,
        };
        let clone_id = new_public_id();
        ensure_session(
            tx.conn(),
            workspace_id,
            &clone_id,
            &original.metadata,
            &original.configuration,
        )
        .await?;

        let mut members = Sql::new(
            "INSERT INTO session_peers (workspace_name, session_name, peer_name, observe_me, observe_others, joined_at, left_at) \
             SELECT workspace_name, ",
        );
        members.bind(clone_id.as_str()).push(
            ", peer_name, observe_me, observe_others, joined_at, left_at FROM session_peers WHERE workspace_name = ",
        );
        members.bind(workspace_id).push(" AND session_name = ").bind(id);
        // A clone is in no scope until added to one.
        members
            .push(" AND peer_name NOT LIKE ")
            .bind(crate::scopes::scope_pattern());
        execute(tx.conn(), &members).await?;

        // Copied a page at a time: memory stays bounded whatever the session's size.
        let mut count = Sql::new("SELECT COUNT(*) AS n FROM messages WHERE workspace_name = ");
        count.bind(workspace_id).push(" AND session_name = ").bind(id);
        if let Some(cutoff) = cutoff_seq {
            count.push(" AND seq_in_session <= ").bind(cutoff);
        }
        let total: i64 = fetch_all(tx.conn(), &count)
            .await?
            .first()
            .map_or(Ok(0), |row| sqlx::Row::try_get(row, "n"))
            .map_err(db_error)?;
        if total > MAX_CLONE_MESSAGES {
            return Err(Error::invalid(
                "session_id",
                format!("holds {total} messages, at most {MAX_CLONE_MESSAGES} are cloned at once"),
            ));
        }
        let mut copied: i64 = 0;
        let mut after_seq: i64 = 0;
        loop {
            let mut select = Sql::new(&format!(
                "SELECT {}, m.configuration FROM messages m WHERE m.workspace_name = ",
                rows::MESSAGE_COLUMNS
            ));
            select
                .bind(workspace_id)
                .push(" AND m.session_name = ")
                .bind(id)
                .push(" AND m.seq_in_session > ")
                .bind(after_seq);
            if let Some(cutoff) = cutoff_seq {
                select.push(" AND m.seq_in_session <= ").bind(cutoff);
            }
            select
                .push(" ORDER BY m.seq_in_session LIMIT ")
                .bind(i64::try_from(MESSAGES_PER_STATEMENT).unwrap_or(1_000));
            let source_rows = fetch_all(tx.conn(), &select).await?;
            if source_rows.is_empty() {
                break;
            }
            let mut copies = Vec::with_capacity(source_rows.len());
            let mut configurations = Vec::with_capacity(source_rows.len());
            for row in &source_rows {
                let mut message = rows::message(row)?;
                after_seq = message.seq_in_session;
                copied += 1;
                message.id = new_public_id();
                message.session_id = clone_id.clone();
                message.seq_in_session = copied;
                copies.push(message);
                configurations.push(sqlx::Row::try_get::<String, _>(row, "configuration").map_err(db_error)?);
            }
            insert_messages(tx.conn(), &copies, &configurations).await?;
        }
        let mut last_seq = Sql::new("UPDATE sessions SET last_seq = ");
        last_seq.bind(copied);
        last_seq
            .push(" WHERE workspace_name = ")
            .bind(workspace_id)
            .push(" AND name = ")
            .bind(clone_id.as_str());
        execute(tx.conn(), &last_seq).await?;
        let clone = load_session(tx.conn(), workspace_id, &clone_id).await?;
        tx.commit().await?;
        Ok(clone)
    }

    async fn add_session_peers(&self, workspace_id: &str, session_id: &str, peers: SessionPeers) -> Result<Session> {
        let mut tx = self.begin_write().await?;
        let session = load_session(tx.conn(), workspace_id, session_id).await?;
        add_members(tx.conn(), workspace_id, session_id, &peers).await?;
        tx.commit().await?;
        Ok(session)
    }

    async fn set_session_peers(&self, workspace_id: &str, session_id: &str, peers: SessionPeers) -> Result<Session> {
        let mut tx = self.begin_write().await?;
        let session = load_session(tx.conn(), workspace_id, session_id).await?;
        let mut leave = Sql::new("UPDATE session_peers SET left_at = ");
        leave
            .bind(now_micros())
            .push(" WHERE workspace_name = ")
            .bind(workspace_id);
        leave
            .push(" AND session_name = ")
            .bind(session_id)
            .push(" AND left_at IS NULL AND peer_name NOT LIKE ")
            .bind(crate::scopes::scope_pattern());
        if !peers.is_empty() {
            leave.push(" AND peer_name NOT IN (");
            for (index, (peer_id, _)) in peers.iter().enumerate() {
                if index > 0 {
                    leave.push(", ");
                }
                leave.bind(peer_id.as_str());
            }
            leave.push(")");
        }
        execute(tx.conn(), &leave).await?;
        add_members(tx.conn(), workspace_id, session_id, &peers).await?;
        tx.commit().await?;
        Ok(session)
    }

    async fn remove_session_peers(&self, workspace_id: &str, session_id: &str, peer_ids: &[String]) -> Result<Session> {
        let mut tx = self.begin_write().await?;
        let session = load_session(tx.conn(), workspace_id, session_id).await?;
        if !peer_ids.is_empty() {
            let mut leave = Sql::new("UPDATE session_peers SET left_at = ");
            leave
                .bind(now_micros())
                .push(" WHERE workspace_name = ")
                .bind(workspace_id);
            leave
                .push(" AND session_name = ")
                .bind(session_id)
                .push(" AND left_at IS NULL AND peer_name IN (");
            for (index, peer_id) in peer_ids.iter().enumerate() {
                if index > 0 {
                    leave.push(", ");
                }
                leave.bind(peer_id.as_str());
            }
            leave.push(")");
            execute(tx.conn(), &leave).await?;
        }
        tx.commit().await?;
        Ok(session)
    }

    async fn set_session_peer_config(
        &self,
        workspace_id: &str,
        session_id: &str,
        peer_id: &str,
        config: SessionPeerConfig,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        load_session(tx.conn(), workspace_id, session_id).await?;
        let mut sql = Sql::new("UPDATE session_peers SET observe_me = COALESCE(");
        sql.bind(flag(config.observe_me))
            .push(", observe_me), observe_others = COALESCE(");
        sql.bind(flag(config.observe_others))
            .push(", observe_others) WHERE workspace_name = ")
            .bind(workspace_id);
        sql.push(" AND session_name = ")
            .bind(session_id)
            .push(" AND peer_name = ")
            .bind(peer_id)
            .push(" AND left_at IS NULL");
        if execute(tx.conn(), &sql).await? == 0 {
            return Err(Error::not_found("session peer", peer_id));
        }
        check_observer_limit(tx.conn(), workspace_id, session_id).await?;
        tx.commit().await
    }

    async fn get_session_peer_config(
        &self,
        workspace_id: &str,
        session_id: &str,
        peer_id: &str,
    ) -> Result<SessionPeerConfig> {
        let mut sql = Sql::new("SELECT observe_me, observe_others FROM session_peers WHERE workspace_name = ");
        sql.bind(workspace_id)
            .push(" AND session_name = ")
            .bind(session_id)
            .push(" AND peer_name = ")
            .bind(peer_id);
        sql.push(" AND left_at IS NULL");
        let row = self
            .read_optional(&sql)
            .await?
            .ok_or_else(|| Error::not_found("session peer", peer_id))?;
        rows::session_peer_config(&row)
    }

    async fn list_sessions(&self, workspace_id: &str, filter: &Filter, page: PageRequest) -> Result<Page<Session>> {
        let mut from_where = Sql::new("sessions s WHERE s.is_active = 1 AND s.workspace_name = ");
        from_where.bind(workspace_id);
        self.push_filter(&mut from_where, filter, session_column)?;
        let dir = direction(page);
        self.paged(
            rows::SESSION_COLUMNS,
            from_where,
            &format!("s.created_at {dir}, s.name {dir}"),
            page,
            rows::session,
        )
        .await
    }

    async fn list_peer_sessions(
        &self,
        workspace_id: &str,
        peer_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Session>> {
        {
            let mut conn = self.pool.acquire().await.map_err(db_error)?;
            load_peer(&mut conn, workspace_id, peer_id).await?;
        }
        let mut from_where = Sql::new("sessions s WHERE s.is_active = 1 AND s.workspace_name = ");
        from_where.bind(workspace_id);
        from_where.push(" AND EXISTS (SELECT 1 FROM session_peers sp WHERE sp.workspace_name = s.workspace_name AND sp.session_name = s.name AND sp.peer_name = ");
        from_where.bind(peer_id).push(")");
        self.push_filter(&mut from_where, filter, session_column)?;
        let dir = direction(page);
        self.paged(
            rows::SESSION_COLUMNS,
            from_where,
            &format!("s.created_at {dir}, s.name {dir}"),
            page,
            rows::session,
        )
        .await
    }

    async fn list_session_peers(&self, workspace_id: &str, session_id: &str, page: PageRequest) -> Result<Page<Peer>> {
        {
            let mut conn = self.pool.acquire().await.map_err(db_error)?;
            load_session(&mut conn, workspace_id, session_id).await?;
        }
        let mut from_where = Sql::new(
            "peers p JOIN session_peers sp ON sp.workspace_name = p.workspace_name AND sp.peer_name = p.name \
             WHERE sp.left_at IS NULL AND p.workspace_name = ",
        );
        from_where
            .bind(workspace_id)
            .push(" AND sp.session_name = ")
            .bind(session_id)
            .push(" AND p.name NOT LIKE ")
            .bind(crate::scopes::scope_pattern());
        let dir = direction(page);
        self.paged(
            rows::PEER_COLUMNS,
            from_where,
            &format!("sp.joined_at {dir}, p.name {dir}"),
            page,
            rows::peer,
        )
        .await
    }

    #[tracing::instrument(name = "store.create_messages", skip_all, fields(workspace_id = %workspace_id, session_id = %session_id, messages = messages.len()))]
    async fn create_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Message>> {
        self.create_messages_impl(workspace_id, session_id, messages, Origin::Client(None))
            .await
    }

    async fn create_messages_once(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<NewMessage>,
        once: &Once,
    ) -> Result<Vec<Message>> {
        self.create_messages_impl(workspace_id, session_id, messages, Origin::Client(Some(once)))
            .await
    }

    #[tracing::instrument(name = "store.import_messages", skip_all, fields(workspace_id = %workspace_id, session_id = %session_id, messages = messages.len()))]
    async fn import_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<ImportedMessage>,
        derive: bool,
    ) -> Result<u64> {
        let (ids, messages): (Vec<String>, Vec<NewMessage>) = messages
            .into_iter()
            .map(|imported| (imported.id, imported.message))
            .unzip();
        let created = self
            .create_messages_impl(workspace_id, session_id, messages, Origin::Import { ids, derive })
            .await?;
        Ok(created.len() as u64)
    }

    #[tracing::instrument(name = "store.import_conclusions", skip_all, fields(workspace_id = %workspace_id, conclusions = conclusions.len()))]
    async fn import_conclusions(&self, workspace_id: &str, conclusions: Vec<ImportedConclusion>) -> Result<u64> {
        self.import_conclusions_impl(workspace_id, conclusions).await
    }

    async fn get_or_create_scope(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
    ) -> Result<(Scope, bool)> {
        self.get_or_create_scope_impl(workspace_id, id, metadata).await
    }

    async fn get_scope(&self, workspace_id: &str, id: &str) -> Result<Scope> {
        self.get_scope_impl(workspace_id, id).await
    }

    async fn list_scopes(&self, workspace_id: &str, page: PageRequest) -> Result<Page<Scope>> {
        self.list_scopes_impl(workspace_id, page).await
    }

    async fn add_scope_sessions(&self, workspace_id: &str, id: &str, session_ids: &[String]) -> Result<()> {
        self.add_scope_sessions_impl(workspace_id, id, session_ids).await
    }

    async fn list_scope_sessions(&self, workspace_id: &str, id: &str, page: PageRequest) -> Result<Page<Session>> {
        self.list_scope_sessions_impl(workspace_id, id, page).await
    }

    async fn scope_session_ids(&self, workspace_id: &str, ids: &[String]) -> Result<Vec<String>> {
        self.scope_session_ids_impl(workspace_id, ids).await
    }

    async fn scope_backfills(&self, workspace_id: &str, id: &str) -> Result<Vec<ScopeBackfill>> {
        self.scope_backfills_impl(workspace_id, id).await
    }

    #[tracing::instrument(name = "store.continue_scope_backfill", skip(self))]
    async fn continue_scope_backfill(
        &self,
        workspace_id: &str,
        id: &str,
        session_id: &str,
        max_rows: i64,
    ) -> Result<ScopeBackfill> {
        self.continue_scope_backfill_impl(workspace_id, id, session_id, max_rows)
            .await
    }

    async fn fail_scope_backfill(&self, workspace_id: &str, id: &str, session_id: &str, error: &str) -> Result<()> {
        self.fail_scope_backfill_impl(workspace_id, id, session_id, error).await
    }

    async fn replayed_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        once: &Once,
    ) -> Result<Option<Vec<Message>>> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        let Some(ids) = crate::idempotency::lookup(&mut conn, workspace_id, once).await? else {
            return Ok(None);
        };
        drop(conn);
        self.replay_messages(workspace_id, session_id, &ids).await.map(Some)
    }

    async fn get_message(&self, workspace_id: &str, session_id: &str, id: &str) -> Result<Message> {
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        load_message(&mut conn, workspace_id, session_id, id).await
    }

    async fn update_message(
        &self,
        workspace_id: &str,
        session_id: &str,
        id: &str,
        metadata: JsonObject,
    ) -> Result<Message> {
        let mut tx = self.begin_write().await?;
        let mut sql = Sql::new("UPDATE messages SET metadata = ");
        sql.bind(to_json(&metadata))
            .push(" WHERE workspace_name = ")
            .bind(workspace_id);
        sql.push(" AND session_name = ")
            .bind(session_id)
            .push(" AND public_id = ")
            .bind(id);
        if execute(tx.conn(), &sql).await? == 0 {
            return Err(Error::not_found("message", id));
        }
        let message = load_message(tx.conn(), workspace_id, session_id, id).await?;
        tx.commit().await?;
        Ok(message)
    }

    async fn delete_message(&self, workspace_id: &str, session_id: &str, id: &str) -> Result<ErasureReceipt> {
        self.erase_message(workspace_id, session_id, id).await
    }

    async fn begin_erasure(&self, workspace_id: &str, scope: &ErasureScope) -> Result<ErasureReceipt> {
        self.begin_erasure_impl(workspace_id, scope).await
    }

    async fn continue_erasure(&self, workspace_id: &str, receipt_id: &str, max_rows: i64) -> Result<ErasureReceipt> {
        self.continue_erasure_impl(workspace_id, receipt_id, max_rows).await
    }

    async fn erasure_receipt(&self, workspace_id: &str, id: &str) -> Result<ErasureReceipt> {
        self.erasure_receipt_impl(workspace_id, id).await
    }

    async fn list_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Message>> {
        {
            let mut conn = self.pool.acquire().await.map_err(db_error)?;
            load_session(&mut conn, workspace_id, session_id).await?;
        }
        let mut from_where = Sql::new("messages m WHERE m.workspace_name = ");
        from_where
            .bind(workspace_id)
            .push(" AND m.session_name = ")
            .bind(session_id);
        self.push_filter(&mut from_where, filter, message_column)?;
        let order = format!("m.seq_in_session {}", direction(page));
        self.paged(rows::MESSAGE_COLUMNS, from_where, &order, page, rows::message)
            .await
    }

    async fn create_webhook(&self, workspace_id: &str, url: &str) -> Result<(WebhookEndpoint, bool)> {
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
        let mut existing = Sql::new(&format!(
            "SELECT {} FROM webhook_endpoints WHERE workspace_name = ",
            rows::WEBHOOK_COLUMNS
        ));
        existing.bind(workspace_id).push(" AND url = ").bind(url);
        if let Some(row) = fetch_optional(tx.conn(), &existing).await? {
            return Ok((rows::webhook(&row)?, false));
        }
        let mut count = Sql::new("SELECT COUNT(*) AS n FROM webhook_endpoints WHERE workspace_name = ");
        count.bind(workspace_id);
        let endpoints = match fetch_optional(tx.conn(), &count).await? {
            Some(row) => rows::count(&row)?,
            None => 0,
        };
        if endpoints >= MAX_WEBHOOKS_PER_WORKSPACE {
            return Err(Error::ResourceExhausted(format!(
                "workspace `{workspace_id}` already has {MAX_WEBHOOKS_PER_WORKSPACE} webhook endpoints"
            )));
        }
        let endpoint = WebhookEndpoint {
            id: new_public_id(),
            workspace_id: workspace_id.to_owned(),
            url: url.to_owned(),
            created_at: now_micros(),
        };
        let mut insert = Sql::new("INSERT INTO webhook_endpoints (id, workspace_name, url, created_at) VALUES (");
        insert
            .bind(endpoint.id.as_str())
            .push(", ")
            .bind(workspace_id)
            .push(", ")
            .bind(url)
            .push(", ")
            .bind(endpoint.created_at)
            .push(")");
        execute(tx.conn(), &insert).await?;
        tx.commit().await?;
        Ok((endpoint, true))
    }

    async fn delete_webhook(&self, workspace_id: &str, id: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let mut sql = Sql::new("DELETE FROM webhook_endpoints WHERE workspace_name = ");
        sql.bind(workspace_id).push(" AND id = ").bind(id);
        if execute(tx.conn(), &sql).await? == 0 {
            return Err(Error::not_found("webhook", id));
        }
        tx.commit().await
    }

    async fn list_webhooks(&self, workspace_id: &str, page: PageRequest) -> Result<Page<WebhookEndpoint>> {
        let mut from_where = Sql::new("webhook_endpoints WHERE workspace_name = ");
        from_where.bind(workspace_id);
        let dir = direction(page);
        self.paged(
            rows::WEBHOOK_COLUMNS,
            from_where,
            &format!("created_at {dir}, id {dir}"),
            page,
            rows::webhook,
        )
        .await
    }

    async fn queue_test_webhook(&self, workspace_id: &str) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        load_workspace(tx.conn(), workspace_id).await?;
        let queued = crate::webhooks::queue_test_event(tx.conn(), workspace_id).await?;
        tx.commit().await?;
        Ok(queued)
    }

    #[tracing::instrument(name = "store.context_messages", skip_all, fields(workspace_id = %workspace_id, session_id = %session_id))]
    async fn context_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        token_budget: i64,
        from_seq: i64,
    ) -> Result<Vec<Message>> {
        self.context_messages_impl(workspace_id, session_id, token_budget, from_seq)
            .await
    }

    async fn session_summaries(&self, workspace_id: &str, session_id: &str) -> Result<Vec<SessionSummary>> {
        self.session_summaries_impl(workspace_id, session_id).await
    }

    #[tracing::instrument(name = "store.set_session_summary", skip_all, fields(workspace_id = %workspace_id, session_id = %session_id))]
    async fn set_session_summary(
        &self,
        workspace_id: &str,
        session_id: &str,
        kind: SummaryKind,
        content: &str,
        message_id: &str,
        token_count: i64,
    ) -> Result<SessionSummary> {
        self.set_session_summary_impl(workspace_id, session_id, kind, content, message_id, token_count)
            .await
    }

    #[tracing::instrument(name = "store.search_messages", skip_all, fields(workspace_id = %workspace_id))]
    async fn search_messages(
        &self,
        workspace_id: &str,
        search: &MessageSearch,
        filter: &Filter,
    ) -> Result<Vec<Message>> {
        self.search_messages_impl(workspace_id, search, filter, None).await
    }

    async fn search_unsynced_messages(
        &self,
        workspace_id: &str,
        search: &MessageSearch,
        filter: &Filter,
        newest: i64,
    ) -> Result<Vec<Message>> {
        self.search_messages_impl(workspace_id, search, filter, Some(newest))
            .await
    }

    #[tracing::instrument(name = "store.create_conclusions", skip_all, fields(workspace_id = %workspace_id, conclusions = conclusions.len()))]
    async fn create_conclusions(&self, workspace_id: &str, conclusions: Vec<NewConclusion>) -> Result<Vec<Conclusion>> {
        self.create_conclusions_impl(workspace_id, conclusions, None).await
    }

    async fn create_conclusions_once(
        &self,
        workspace_id: &str,
        conclusions: Vec<NewConclusion>,
        once: &Once,
    ) -> Result<Vec<Conclusion>> {
        self.create_conclusions_impl(workspace_id, conclusions, Some(once))
            .await
    }

    async fn list_conclusions(
        &self,
        workspace_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Conclusion>> {
        self.list_conclusions_impl(workspace_id, filter, page).await
    }

    #[tracing::instrument(name = "store.increment_times_derived", skip_all, fields(workspace_id = %workspace_id, conclusions = ids.len()))]
    async fn increment_times_derived(&self, workspace_id: &str, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        let mut sql = Sql::new("UPDATE documents SET times_derived = times_derived + 1 WHERE deleted_at IS NULL AND ");
        sql.push(&self.dialect().unindexed("workspace_name"))
            .push(" = ")
            .bind(workspace_id)
            .push(" AND public_id IN ")
            .push_list(ids);
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }

    async fn delete_conclusion(&self, workspace_id: &str, id: &str) -> Result<()> {
        self.delete_conclusion_impl(workspace_id, id).await
    }

    #[tracing::instrument(name = "store.supersede_conclusion", skip_all, fields(workspace_id = %workspace_id))]
    async fn supersede_conclusion(&self, workspace_id: &str, old_id: &str, new: NewConclusion) -> Result<Conclusion> {
        self.supersede_conclusion_impl(workspace_id, old_id, new).await
    }

    async fn collection_conclusions(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        query: &CollectionQuery,
    ) -> Result<Vec<Conclusion>> {
        self.collection_conclusions_impl(workspace_id, observer_id, observed_id, query)
            .await
    }

    async fn get_peer_card(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
    ) -> Result<Option<Vec<String>>> {
        self.get_peer_card_impl(workspace_id, observer_id, observed_id).await
    }

    #[tracing::instrument(name = "store.set_peer_card", skip_all, fields(workspace_id = %workspace_id, observer_id = %observer_id, observed_id = %observed_id))]
    async fn set_peer_card(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        card: Vec<String>,
    ) -> Result<()> {
        self.set_peer_card_impl(workspace_id, observer_id, observed_id, card)
            .await
    }

    async fn messages_by_ids(
        &self,
        workspace_id: &str,
        ids: &[String],
        filter: &Filter,
        peer_perspective: Option<&str>,
    ) -> Result<Vec<Message>> {
        self.messages_by_ids_impl(workspace_id, ids, filter, peer_perspective)
            .await
    }

    async fn unsynced(&self, kind: SyncKind, limit: i64, now: i64, backoff_micros: i64) -> Result<Vec<SyncItem>> {
        self.unsynced_impl(kind, limit, now, backoff_micros).await
    }

    async fn mark_synced(&self, kind: SyncKind, rows: &[(String, i64)]) -> Result<()> {
        self.mark_synced_impl(kind, rows).await
    }

    async fn mark_sync_failed(&self, kind: SyncKind, ids: &[String], error: &str, max_attempts: i64) -> Result<()> {
        self.mark_sync_failed_impl(kind, ids, error, max_attempts).await
    }

    async fn sync_counts(&self, kind: SyncKind) -> Result<SyncCounts> {
        self.sync_counts_impl(kind).await
    }

    async fn text_index_mark(&self) -> Result<Option<i64>> {
        self.text_index_mark_impl().await
    }

    #[tracing::instrument(name = "store.index_text", skip_all, fields(up_to, limit))]
    async fn index_text(&self, up_to: i64, limit: i64) -> Result<u64> {
        self.index_text_impl(up_to, limit).await
    }

    async fn text_index_backlog(&self) -> Result<i64> {
        self.text_index_backlog_impl().await
    }

    async fn text_index_gap(&self, workspace_id: &str, search: &MessageSearch) -> Result<i64> {
        self.text_index_gap_impl(workspace_id, search).await
    }

    async fn vector_sync_gap(&self, workspace_id: &str, search: &MessageSearch, newest: i64) -> Result<i64> {
        self.vector_sync_gap_impl(workspace_id, search, newest).await
    }

    async fn tombstones(&self, limit: i64) -> Result<Vec<Tombstone>> {
        self.tombstones_impl(limit).await
    }

    async fn clear_tombstones(&self, tombstones: &[Tombstone]) -> Result<()> {
        self.clear_tombstones_impl(tombstones).await
    }

    async fn conclusions_by_ids(&self, workspace_id: &str, ids: &[String]) -> Result<Vec<Conclusion>> {
        self.conclusions_by_ids_impl(workspace_id, ids).await
    }

    async fn conclusions_citing(&self, workspace_id: &str, id: &str) -> Result<Vec<Conclusion>> {
        self.conclusions_citing_impl(workspace_id, id).await
    }

    async fn dream_state(&self, workspace_id: &str, observer_id: &str, observed_id: &str) -> Result<DreamState> {
        self.dream_state_impl(workspace_id, observer_id, observed_id).await
    }

    async fn record_dream(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        document_count: i64,
    ) -> Result<()> {
        self.record_dream_impl(workspace_id, observer_id, observed_id, document_count)
            .await
    }

    async fn scan_messages(&self, workspace_id: &str, scan: &MessageScan) -> Result<Vec<Message>> {
        self.scan_messages_impl(workspace_id, scan).await
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn restarts_and_broken_connections_are_transient_other_errors_are_not() {
        for code in ["57P01", "57P03", "08006", "08001", "53300", "40001", "40P01", "5"] {
            assert!(super::is_transient(code), "{code}");
        }
        for code in ["23505", "42601", "22021", "42P01", "55000"] {
            assert!(!super::is_transient(code), "{code}");
        }
    }
}
