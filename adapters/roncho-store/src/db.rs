//! The ground floor: the pool, SQLite's single writer, write transactions
//! and the mapping of database errors; statements run through here.

use crate::rows;
use crate::sql::{Alias, Bind, Dialect, Sql, render_filter};
use roncho_core::filter::Filter;
use roncho_core::model::{JsonObject, Message, NewMessage, Page, PageRequest};
use roncho_core::{Error, Result};
use sqlx::any::AnyRow;
use sqlx::{Any, AnyConnection, AnyPool, Transaction};
use std::sync::Arc;
use tokio::sync::{Mutex, MutexGuard};

/// The relational store of both modes.
#[derive(Debug)]
pub struct SqlStore {
    pub(crate) pool: AnyPool,
    /// SQLite: the connections the background roles read on (see
    /// [`SqlStore::reads`]); `None` on Postgres, whose statements run in
    /// the server's processes.
    pub(crate) background_reads: Option<AnyPool>,
    pub(crate) dialect: Dialect,
    pub(crate) location: String,
    /// SQLite has one writer: a connection of its own (opened at the first
    /// write), which writers take in turn. Its page cache stays warm from one
    /// transaction to the next, where a pooled connection's is dropped
    /// whenever another connection has committed; and queueing writers here
    /// is cheaper and fairer than SQLite's sleeping busy handler. `None` on
    /// Postgres, which locks rows.
    pub(crate) writer: Option<Mutex<Option<AnyConnection>>>,
    /// Client batches waiting for SQLite's writer, written as one group.
    pub(crate) waiting: std::sync::Mutex<Vec<Waiting>>,
    /// Group commits run, and the batches they wrote.
    pub(crate) write_groups: std::sync::atomic::AtomicU64,
    pub(crate) grouped_writes: std::sync::atomic::AtomicU64,
    /// SQLite: whether FTS5 indexes messages (see [`SqlStore::maintain_full_text_index`]).
    pub(crate) full_text_maintained: std::sync::atomic::AtomicBool,
    /// Erasures committed, for the checkpointer that overwrites their bytes.
    pub(crate) erased_bytes: Arc<ErasedBytes>,
    /// Rows taken off the sync and text-index queues (Postgres), for the
    /// vacuumer that clears what they leave dead.
    pub(crate) queue_removals: Arc<QueueRemovals>,
}

/// Rows deleted from Postgres' queue tables (`message_sync`,
/// `message_unindexed`) by this process, and how many of them the last
/// vacuum covered. Every synced or indexed message leaves a dead row there,
/// and until a vacuum each one costs every "is anything behind?" probe of
/// a search (a million of them: 55 ms a search, with Postgres' autovacuum
/// off or behind).
#[derive(Debug, Default)]
pub(crate) struct QueueRemovals {
    removed: std::sync::atomic::AtomicU64,
    vacuumed: std::sync::atomic::AtomicU64,
    /// `removed` at the previous [`QueueRemovals::due`].
    seen: std::sync::atomic::AtomicU64,
}

impl QueueRemovals {
    /// Records `rows` deleted from a queue table (committed).
    pub(crate) fn note(&self, rows: u64) {
        self.removed.fetch_add(rows, std::sync::atomic::Ordering::SeqCst);
    }

    /// The rows deleted so far, if at least `threshold` of them came since
    /// the last vacuum, or if some did and none since the previous call:
    /// the queue has gone quiet, and the last rows of a sync would
    /// otherwise stay dead until the next `threshold` (a million synced
    /// messages left 1,106 pages of them, each search's probes reading
    /// them; docs/benchmarks.md).
    pub(crate) fn due(&self, threshold: u64) -> Option<u64> {
        let removed = self.removed.load(std::sync::atomic::Ordering::SeqCst);
        let waiting = removed - self.vacuumed.load(std::sync::atomic::Ordering::SeqCst);
        let quiet = self.seen.swap(removed, std::sync::atomic::Ordering::SeqCst) == removed;
        (waiting >= threshold || (waiting > 0 && quiet)).then_some(removed)
    }

    /// Records that a vacuum begun after `removed` deletions covered them.
    pub(crate) fn covered(&self, removed: u64) {
        self.vacuumed.fetch_max(removed, std::sync::atomic::Ordering::SeqCst);
    }
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

pub(crate) enum Writing<'a> {
    Pooled(Transaction<'static, Any>),
    /// SQLite's writer connection, in a transaction.
    Writer(MutexGuard<'a, Option<AnyConnection>>),
}

pub(crate) type Transactions = <Any as sqlx::Database>::TransactionManager;

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

/// A client's batch waiting for SQLite's writer.
#[derive(Debug)]
pub(crate) struct Waiting {
    pub(crate) workspace_id: String,
    pub(crate) session_id: String,
    pub(crate) messages: Vec<NewMessage>,
    /// Whom the batch's call creates workspaces for
    /// ([`roncho_core::store::creator`]): the group runs on another call's task.
    pub(crate) creator: Option<roncho_core::store::Creator>,
    pub(crate) done: tokio::sync::oneshot::Sender<Result<Vec<Message>>>,
}

impl SqlStore {
    pub(crate) fn new(pool: AnyPool, dialect: Dialect, location: String) -> Self {
        let writer = (dialect == Dialect::Sqlite).then(|| Mutex::new(None));
        Self {
            pool,
            background_reads: None,
            dialect,
            location,
            writer,
            waiting: std::sync::Mutex::default(),
            write_groups: std::sync::atomic::AtomicU64::default(),
            grouped_writes: std::sync::atomic::AtomicU64::default(),
            full_text_maintained: std::sync::atomic::AtomicBool::new(true),
            erased_bytes: Arc::default(),
            queue_removals: Arc::default(),
        }
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

    /// The pool a read on the calling thread takes its connection from.
    ///
    /// On SQLite each connection runs its statements on a thread of its
    /// own, at the priority of the thread that opened it. The requests'
    /// connections are opened at start-up, at the process's priority; the
    /// background roles' threads (below it, `roncho_core::activity`) read
    /// on connections of their own, opened by those threads when first
    /// needed and so run below it too: a deriver working through a backlog
    /// no longer takes the cores from a context call at equal priority
    /// (issue 58, docs/benchmarks.md). Writes share SQLite's one writer.
    pub(crate) fn reads(&self) -> &AnyPool {
        match &self.background_reads {
            Some(background) if roncho_core::activity::on_background_thread() => background,
            _ => &self.pool,
        }
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
        if let Some(background) = &self.background_reads {
            background.close().await;
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

    /// SQLite: opens the writer connection and `pooled` connections for
    /// reads now, on the calling thread, where otherwise each would be
    /// opened by the first caller that needs it. SQLite runs each
    /// connection on a thread of its own, started by the thread that opens
    /// it, and a thread starts at its parent's priority (Linux): opened by
    /// a background role, whose threads run below the requests' priority, a
    /// connection would serve requests at that priority for the life of the
    /// process. Opened by start-up, every one runs at the process's.
    pub(crate) async fn open_every_connection(&self, pooled: u32) -> Result<()> {
        if let Some(writer) = &self.writer {
            self.open_writer(&mut *writer.lock().await).await?;
        }
        let mut opened = Vec::with_capacity(pooled as usize);
        for _ in 0..pooled {
            opened.push(self.pool.acquire().await.map_err(db_error)?);
        }
        Ok(())
    }

    /// SQLite's writer connection, opened if it is not.
    async fn open_writer<'g>(&self, guard: &'g mut Option<AnyConnection>) -> Result<&'g mut AnyConnection> {
        if guard.is_none() {
            // The pool's connection, with its pragmas, becomes the writer's own.
            *guard = Some(self.pool.acquire().await.map_err(db_error)?.detach());
        }
        Ok(guard.as_mut().expect("the writer connection was just opened"))
    }

    /// Begins a write transaction on SQLite's writer connection (opening it
    /// at the first write), and returns the connection.
    pub(crate) async fn begin_on_writer<'g>(
        &self,
        guard: &'g mut Option<AnyConnection>,
    ) -> Result<&'g mut AnyConnection> {
        let connection = self.open_writer(guard).await?;
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
        sql.query(self.dialect)?.fetch_all(self.reads()).await.map_err(db_error)
    }

    pub(crate) async fn read_optional(&self, sql: &Sql) -> Result<Option<AnyRow>> {
        sql.query(self.dialect)?
            .fetch_optional(self.reads())
            .await
            .map_err(db_error)
    }

    /// The messages of `from_where` (`messages m WHERE …`, no `LIMIT`) in
    /// `order_by`'s order. On SQLite they come back in one row, as one JSON
    /// array: sqlx's SQLite driver hands each row from its connection's
    /// thread to the caller's task, two thread switches a row, which cost a
    /// page of 100 messages more than all the rest of its work (issue 37,
    /// docs/benchmarks.md).
    pub(crate) async fn read_messages(&self, from_where: Sql, order_by: &str) -> Result<Vec<Message>> {
        if self.dialect != Dialect::Sqlite {
            // Rows as they are: Postgres builds a page of 100 as JSON slower
            // than it sends the rows (a list took 0.1–0.3 ms longer).
            let select = Sql {
                text: format!(
                    "SELECT {} FROM {} ORDER BY {order_by}",
                    rows::MESSAGE_COLUMNS,
                    from_where.text
                ),
                binds: from_where.binds,
            };
            return self.read(&select).await?.iter().map(rows::message).collect();
        }
        let select = Sql {
            text: format!(
                "SELECT {} AS page FROM {}",
                self.dialect
                    .json_rows(rows::message_json_columns(self.dialect), order_by),
                from_where.text
            ),
            binds: from_where.binds,
        };
        match self.read_optional(&select).await? {
            Some(row) => rows::messages_from_json(&rows::get::<String>(&row, "page")?),
            None => Ok(Vec::new()),
        }
    }

    /// `(seq_in_session, token_count)` of the messages of `from_where`
    /// (`messages m WHERE …`), newest first, `limit` at most; on SQLite in
    /// one row, as [`SqlStore::read_messages`] reads them.
    pub(crate) async fn read_token_counts(&self, from_where: Sql, limit: i64) -> Result<Vec<(i64, i64)>> {
        let text = format!(
            "SELECT m.seq_in_session AS seq, m.token_count AS tokens FROM {} ORDER BY m.seq_in_session DESC LIMIT ",
            from_where.text
        );
        let mut select = Sql {
            text,
            binds: from_where.binds,
        };
        select.bind(limit);
        if self.dialect != Dialect::Sqlite {
            return self
                .read(&select)
                .await?
                .iter()
                .map(|row| Ok((rows::get(row, "seq")?, rows::get(row, "tokens")?)))
                .collect();
        }
        select.text = format!(
            "SELECT json_group_array(json_array(seq, tokens) ORDER BY seq DESC) AS walk FROM ({}) walked",
            select.text
        );
        match self.read_optional(&select).await? {
            Some(row) => serde_json::from_str(&rows::get::<String>(&row, "walk")?)
                .map_err(|error| Error::Internal(format!("decoding token counts: {error}"))),
            None => Ok(Vec::new()),
        }
    }

    /// Reads the page of `FROM ... WHERE ...` in `from_where` and the count
    /// of all its rows in one statement: one snapshot, so under concurrent
    /// writes `total` counts the rows the page was cut from (as two
    /// statements, 7-9 % of the lists an outside churn test read disagreed
    /// with their own items). The page is numbered in `order_by`'s order
    /// (`page_rank`) and joined to the count, which gives the one row of a
    /// page past the end.
    pub(crate) async fn paged<T>(
        &self,
        columns: &str,
        from_where: Sql,
        order_by: &str,
        page: PageRequest,
        decode: fn(&AnyRow) -> Result<T>,
    ) -> Result<Page<T>> {
        let mut select = Sql {
            text: format!(
                "SELECT c.page_total, p.* FROM (SELECT COUNT(*) AS page_total FROM {from}) c \
                 LEFT JOIN (SELECT {columns}, ROW_NUMBER() OVER (ORDER BY {order_by}) AS page_rank \
                 FROM {from} ORDER BY {order_by} LIMIT ",
                from = from_where.text
            ),
            binds: from_where.binds,
        };
        select
            .bind(page.size)
            .push(" OFFSET ")
            .bind(page.offset())
            .push(") p ON 1 = 1 ORDER BY p.page_rank");
        let found = self.read(&select).await?;
        let total = match found.first() {
            Some(row) => rows::get::<i64>(row, "page_total")?,
            None => 0,
        };
        let mut items = Vec::with_capacity(found.len());
        for row in &found {
            if rows::get::<Option<i64>>(row, "page_rank")?.is_some() {
                items.push(decode(row)?);
            }
        }
        Ok(Page::new(items, total, page))
    }

    pub(crate) fn push_filter(&self, sql: &mut Sql, filter: &Filter, alias: Alias) -> Result<()> {
        sql.push(" AND ");
        render_filter(sql, self.dialect, filter, alias)
    }

    /// How many group commits ran, and how many batches they wrote (SQLite).
    pub fn write_groups(&self) -> (u64, u64) {
        (
            self.write_groups.load(std::sync::atomic::Ordering::Relaxed),
            self.grouped_writes.load(std::sync::atomic::Ordering::Relaxed),
        )
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
pub(crate) fn is_transient(code: &str) -> bool {
    code.starts_with("08")
        || matches!(code, "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01")
        || matches!(code, "5" | "6" | "517" | "261")
}

pub(crate) fn to_json(object: &JsonObject) -> String {
    serde_json::Value::Object(object.clone()).to_string()
}

pub(crate) fn flag(value: Option<bool>) -> Bind {
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

/// Returns "ASC" or "DESC" for a page's direction.
pub(crate) fn direction(page: PageRequest) -> &'static str {
    if page.reverse { "DESC" } else { "ASC" }
}

/// Rolls back whatever transaction (and savepoints) `connection` holds:
/// queued now, run before its next statement.
pub(crate) fn abandon(connection: &mut AnyConnection) {
    use sqlx_core::transaction::TransactionManager;
    // One rollback per level; each is queued, and the depth falls as they run.
    for _ in 0..<Transactions as TransactionManager>::get_transaction_depth(connection) {
        <Transactions as TransactionManager>::start_rollback(connection);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn queue_tables_are_due_past_the_threshold_or_once_removals_stop() {
        let queues = super::QueueRemovals::default();
        assert_eq!(queues.due(10), None, "nothing removed");
        queues.note(3);
        assert_eq!(queues.due(10), None, "removals going on");
        queues.note(3);
        assert_eq!(queues.due(10), None, "still going on");
        assert_eq!(queues.due(10), Some(6), "quiet since the last look");
        queues.covered(6);
        assert_eq!(queues.due(10), None, "all covered");
        queues.note(12);
        assert_eq!(queues.due(10), Some(18), "past the threshold, though not quiet");
        queues.covered(18);
        assert_eq!(queues.due(10), None);
    }

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
