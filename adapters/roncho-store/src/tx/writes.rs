//! Appending messages in the caller's transaction (or SQLite's group
//! commit): sequence numbers, memberships, idempotency records and the work
//! the messages cause, all or nothing.

use crate::db::execute;
use crate::db::fetch_all;
use crate::db::fetch_optional;
use crate::db::{SqlStore, Transactions, Waiting, abandon, db_error, to_json};
use crate::rows;
use crate::sql::{Dialect, Sql};
use crate::tx::entities::ensure_session;
use crate::tx::entities::{ensure_peer, ensure_workspace, load_members, load_session, upsert_member};
use roncho_core::derivation::{Settings, Stored, tasks_for_messages};
use roncho_core::idempotency::Once;
use roncho_core::model::Session;
use roncho_core::model::{JsonObject, Message, NewMessage, new_public_id, now_micros};
use roncho_core::store::Messages;
use roncho_core::{Error, Result};
use sqlx::AnyConnection;
use tokio::sync::Mutex;

/// Messages per INSERT statement: 10 bound values each keeps a statement far
/// below SQLite's 32,766 and Postgres' 65,535 bound values.
pub(crate) const MESSAGES_PER_STATEMENT: usize = 1_000;

/// A session or a peer: `(workspace, name)`.
pub(crate) type Parent<'a> = (&'a str, &'a str);

/// Where a batch of messages comes from.
pub(crate) enum Origin<'a> {
    /// A client's CreateMessages: new ids, its work queued; with a key, only
    /// the first time the key is seen.
    Client(Option<&'a Once>),
    /// `roncho import`: the ids given (one per message), already held ones
    /// skipped; work queued only when `derive`.
    Import { ids: Vec<String>, derive: bool },
}

/// A batch of messages to write: with their ids, whether their work is
/// queued, and whether the workspace and session are created when absent.
pub(crate) struct Batch {
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

impl SqlStore {
    /// Appends `messages` with their work, as `origin` says.
    pub(crate) async fn append_messages(
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
                    if let crate::tx::idempotency::Claim::Done(ids) =
                        crate::tx::idempotency::claim(tx.conn(), workspace_id, Some(session_id), once).await?
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
    pub(crate) async fn group_commit(
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
            creator: roncho_core::store::creator(),
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
    pub(crate) async fn write_group(&self, guard: &mut Option<AnyConnection>, group: Vec<Waiting>) {
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
            creator,
            done,
        } in group
        {
            let written = if failed.is_some() {
                Err(Error::Unavailable("the transaction of the batch's group failed".into()))
            } else {
                let batch = Batch::from_client(messages);
                let write = write_in_savepoint(connection, &workspace_id, &session_id, batch);
                match roncho_core::store::creating_as(creator, write).await {
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

    /// The messages of `ids` still stored in `session_id`, in session order.
    pub(crate) async fn replay_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        ids: &[String],
    ) -> Result<Vec<Message>> {
        let mut found = self
            .messages_by_ids(workspace_id, ids, &roncho_core::filter::Filter::All, None)
            .await?;
        found.retain(|message| message.session_id == session_id);
        found.sort_by_key(|message| message.seq_in_session);
        Ok(found)
    }
}

/// Inserts messages (with their `seq_in_session` set), a statement per
/// [`MESSAGES_PER_STATEMENT`], inside the caller's transaction.
pub(crate) async fn insert_messages(
    conn: &mut AnyConnection,
    messages: &[Message],
    configurations: &[String],
) -> Result<()> {
    for (messages, configurations) in messages
        .chunks(MESSAGES_PER_STATEMENT)
        .zip(configurations.chunks(MESSAGES_PER_STATEMENT))
    {
        insert_message_rows(conn, messages, configurations).await?;
    }
    Ok(())
}

/// The sessions and the peers of `messages`, each once.
pub(crate) fn message_parents(messages: &[Message]) -> (Vec<Parent<'_>>, Vec<Parent<'_>>) {
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
pub(crate) fn push_parents_locked(sql: &mut Sql, table: &str, parents: &[Parent<'_>]) {
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
pub(crate) async fn insert_message_rows(
    conn: &mut AnyConnection,
    messages: &[Message],
    configurations: &[String],
) -> Result<()> {
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
pub(crate) async fn missing_parent(conn: &mut AnyConnection, sessions: &[Parent<'_>], peers: &[Parent<'_>]) -> Error {
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
pub(crate) async fn allocate_seq(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    count: i64,
) -> Result<i64> {
    let mut sql = Sql::new("UPDATE sessions SET last_seq = last_seq + ");
    sql.bind(count)
        .push(", message_count = message_count + ")
        .bind(count)
        .push(" WHERE workspace_name = ")
        .bind(workspace_id)
        .push(" AND name = ")
        .bind(session_id);
    // Asked again here: on Postgres a write that waited for an erasure's
    // `is_active = 0` sees it now, and writes nothing into what it erases.
    sql.push(" AND is_active = 1 RETURNING last_seq");
    let row = fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::not_found("session", session_id))?;
    let last: i64 = sqlx::Row::try_get(&row, "last_seq").map_err(db_error)?;
    Ok(last - count + 1)
}

/// Adds `next` to `seen` unless it is there: the distinct authors of a batch, in order.
fn distinct<'a>(mut seen: Vec<&'a str>, next: &'a str) -> Vec<&'a str> {
    if !seen.contains(&next) {
        seen.push(next);
    }
    seen
}

/// The session a batch of messages is written to, with its workspace's
/// configuration, in one query; with `create`, the workspace and session
/// are created first when absent (Honcho's get-or-create on write). An
/// inactive (deleted) session is `NOT_FOUND`.
pub(crate) async fn writable_session(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    create: bool,
) -> Result<(JsonObject, Session)> {
    crate::tx::entities::refuse_unless_caller_holds(conn, workspace_id).await?;
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
pub(crate) async fn held_message_ids(
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
            if workspace != workspace_id {
                // Another tenant's: named by nothing of theirs.
                return Err(Error::FailedPrecondition(format!("message id `{id}` is taken")));
            }
            if session != session_id {
                return Err(Error::FailedPrecondition(format!(
                    "message `{id}` is already stored in session `{session}`"
                )));
            }
            held.insert(id);
        }
    }
    Ok(held)
}

/// Writes one batch in a savepoint of the open transaction: its outcome,
/// or the error that ends the transaction.
pub(crate) async fn write_in_savepoint(
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

/// Writes `batch` to a session in the caller's transaction: the messages
/// in order with new sequence numbers, their key's record with `once`, and
/// with `derive` their work, so nothing is lost between them.
pub(crate) async fn write_messages(
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
    let authors = messages
        .iter()
        .map(|message| message.peer_id.as_str())
        .fold(Vec::new(), distinct);
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
    // An author being erased writes nothing (its erasure would take it).
    // Asked after the rows: on Postgres their foreign keys hold the
    // authors' rows, which `begin_erasure` locks, so an erasure that began
    // first is seen here and one that begins later waits for this commit.
    let authors = created
        .iter()
        .map(|message| message.peer_id.as_str())
        .fold(Vec::new(), distinct);
    crate::tx::erasing::refuse_erasing(conn, workspace_id, &authors).await?;
    if let Some(once) = once {
        let ids: Vec<String> = created.iter().map(|message| message.id.clone()).collect();
        crate::tx::idempotency::record(conn, workspace_id, once, &ids).await?;
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
    crate::tx::tasks::insert_tasks(conn, &tasks_for_messages(&stored, &members)).await?;
    Ok(created)
}
