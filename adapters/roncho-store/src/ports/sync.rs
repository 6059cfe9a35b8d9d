//! [`SyncLedger`]: Sync state of vectors: which messages and conclusions still need one,
//! marking them synced or failed, and tombstones of deleted rows whose
//! vectors must be removed.

use crate::db::SqlStore;
use crate::db::db_error;
use crate::db::execute;
use crate::rows;
use crate::sql::Dialect;
use crate::sql::Sql;
use crate::tx::vectors::message_row_ids;
use crate::tx::vectors::spoken;
use async_trait::async_trait;
use roncho_core::Result;
use roncho_core::model::SyncCounts;
use roncho_core::model::Tombstone;
use roncho_core::model::now_micros;
use roncho_core::model::{SyncItem, SyncKind};
use roncho_core::store::SyncLedger;
use roncho_core::vector::documents_namespace;
use roncho_core::vector::messages_namespace;
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet};

/// The term counting a message itself in `message_terms` and `workspace_terms`
/// (a term dimension is a `u32`, never negative): its row counts the
/// workspace's counted messages.
pub(crate) const MESSAGE_TERM: i64 = -1;

/// Rows of `workspace_terms` written by one statement (three binds each).
const TERM_ROWS_PER_STATEMENT: usize = 1_000;

/// Where a kind's vector sync state lives: messages in their queue
/// (`message_sync`, a row while not synced; migration 0019), conclusions
/// in their own row.
struct SyncColumns {
    table: &'static str,
    state: &'static str,
    attempts: &'static str,
    last_sync_at: &'static str,
    error: &'static str,
}

impl SyncColumns {
    const QUEUE: Self = Self {
        table: "message_sync",
        state: "state",
        attempts: "attempts",
        last_sync_at: "last_sync_at",
        error: "error",
    };
    const DOCUMENTS: Self = Self {
        table: "documents",
        state: "sync_state",
        attempts: "sync_attempts",
        last_sync_at: "last_sync_at",
        error: "sync_error",
    };
}

#[async_trait]
impl SyncLedger for SqlStore {
    async fn unsynced(&self, kind: SyncKind, limit: i64, now: i64, backoff_micros: i64) -> Result<Vec<SyncItem>> {
        let (sql, queued) = match kind {
            SyncKind::Message => {
                let due = self.due_messages(limit, now, backoff_micros).await?;
                if due.is_empty() {
                    return Ok(Vec::new());
                }
                // Each due message by primary key, with the turn it answers
                // looked up by its unique key: index probes whatever the
                // planner knows (a join became a hash join over the table
                // once a plan made while it was small was cached).
                let mut sql = Sql::new(
                    "SELECT m.id AS row_id, m.public_id, m.workspace_name, m.session_name, m.peer_name, m.content, \
                     NULL AS observer, NULL AS observed, NULL AS level, \
                     (SELECT p.peer_name FROM messages p WHERE p.workspace_name = m.workspace_name \
                      AND p.session_name = m.session_name AND p.seq_in_session = m.seq_in_session - 1) AS previous_peer, \
                     (SELECT p.content FROM messages p WHERE p.workspace_name = m.workspace_name \
                      AND p.session_name = m.session_name AND p.seq_in_session = m.seq_in_session - 1) AS previous_content \
                     FROM messages m WHERE m.id IN ",
                );
                sql.push_list(&due.keys().copied().collect::<Vec<i64>>())
                    .push(" ORDER BY m.id");
                (sql, Some(due))
            }
            SyncKind::Conclusion => {
                // `sync_state <> 'synced'` repeats the partial index's condition: SQLite uses a
                // partial index only when the query states its WHERE, and without it each
                // batch scanned the whole table (sync slowed from 4k to 1k rows/s by 600k rows).
                let mut sql = Sql::new(
                    "SELECT id AS row_id, public_id, workspace_name, session_name, NULL AS peer_name, content, \
                     sync_attempts, observer, observed, level, NULL AS previous_peer, NULL AS previous_content \
                     FROM documents WHERE deleted_at IS NULL AND sync_state <> 'synced' AND sync_state = 'pending'",
                );
                // Quadratic backoff in portable arithmetic: attempt n waits backoff × n².
                sql.push(" AND (last_sync_at IS NULL OR last_sync_at + ")
                    .bind(backoff_micros);
                sql.push(" * sync_attempts * sync_attempts <= ")
                    .bind(now)
                    .push(") ORDER BY id LIMIT ")
                    .bind(limit);
                (sql, None)
            }
        };
        let mut items = Vec::new();
        for row in self.read(&sql).await? {
            let text = |column: &str| row.try_get::<Option<String>, _>(column).map_err(db_error);
            let workspace: String = row.try_get("workspace_name").map_err(db_error)?;
            let content: String = row.try_get("content").map_err(db_error)?;
            let peer_id = text("peer_name")?;
            let (namespace, (text_to_embed, context)) = match kind {
                SyncKind::Message => (
                    messages_namespace(&workspace),
                    message_texts(
                        text("previous_peer")?,
                        text("previous_content")?,
                        peer_id.as_deref(),
                        &content,
                    ),
                ),
                SyncKind::Conclusion => (
                    documents_namespace(
                        &workspace,
                        &text("observer")?.unwrap_or_default(),
                        &text("observed")?.unwrap_or_default(),
                    ),
                    (content, None),
                ),
            };
            let (attempts, version) = match &queued {
                Some(due) => {
                    let row_id: i64 = row.try_get("row_id").map_err(db_error)?;
                    due.get(&row_id).copied().unwrap_or_default()
                }
                None => (row.try_get("sync_attempts").map_err(db_error)?, 0),
            };
            items.push(SyncItem {
                kind,
                id: row.try_get("public_id").map_err(db_error)?,
                namespace,
                text: text_to_embed,
                context,
                session_id: text("session_name")?,
                peer_id,
                level: text("level")?,
                attempts,
                version,
            });
        }
        Ok(items)
    }

    async fn mark_synced(&self, kind: SyncKind, synced: &[(String, i64)]) -> Result<()> {
        if synced.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_rebuildable().await?;
        if kind == SyncKind::Conclusion {
            let mut sql = Sql::new("UPDATE documents SET sync_state = 'synced', sync_error = NULL, last_sync_at = ");
            sql.bind(now_micros()).push(" WHERE public_id IN ");
            sql.push_list(&synced.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>());
            execute(tx.conn(), &sql).await?;
            return tx.commit().await;
        }
        // A synced message leaves the queue, unless it was queued again
        // (another version) since the reconciler read it.
        let versions: BTreeMap<&str, i64> = synced.iter().map(|(id, version)| (id.as_str(), *version)).collect();
        let rows = message_row_ids(tx.conn(), versions.keys().copied()).await?;
        let mut by_version: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for (public_id, row_id) in &rows {
            by_version
                .entry(versions[public_id.as_str()])
                .or_default()
                .push(*row_id);
        }
        let mut removed = 0;
        for (version, row_ids) in &by_version {
            let mut sql = Sql::new("DELETE FROM message_sync WHERE version = ");
            sql.bind(*version).push(" AND message_id IN ").push_list(row_ids);
            removed += execute(tx.conn(), &sql).await?;
        }
        if self.dialect() == Dialect::Postgres && !rows.is_empty() {
            // The words of those the text indexer has not reached are indexed
            // now, by whoever takes them off the queue first.
            let mut sql = Sql::new("WITH taken AS (DELETE FROM message_unindexed WHERE message_id IN ");
            sql.push_list(&rows.iter().map(|(_, row_id)| *row_id).collect::<Vec<i64>>());
            sql.push(" RETURNING message_id) ");
            push_index_taken(&mut sql);
            removed += execute(tx.conn(), &sql).await?;
        }
        tx.commit().await?;
        if self.dialect() == Dialect::Postgres {
            self.queue_removals.note(removed);
        }
        Ok(())
    }

    #[tracing::instrument(name = "store.count_terms", skip_all, fields(messages = messages.len()))]
    async fn count_terms(&self, messages: &[(String, Vec<u32>)]) -> Result<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_rebuildable().await?;
        let mut sql = Sql::new("SELECT public_id, id, workspace_name FROM messages WHERE public_id IN ");
        sql.push_list(&messages.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>());
        let read = |found: Vec<sqlx::any::AnyRow>| {
            found
                .iter()
                .map(|row| {
                    let public_id: String = rows::get(row, "public_id")?;
                    Ok((public_id, (rows::get(row, "id")?, rows::get(row, "workspace_name")?)))
                })
                .collect::<Result<BTreeMap<String, (i64, String)>>>()
        };
        let mut messages_found = read(crate::db::fetch_all(tx.conn(), &sql).await?)?;
        if self.dialect() == Dialect::Postgres && !messages_found.is_empty() {
            // Serialised per workspace, in one order, with the uncounting of
            // deletes (migration 0024's trigger): no row locks are held while
            // waiting, and the rows read again after it are those no delete
            // removed. One deleted later is uncounted by its trigger.
            let workspaces: BTreeSet<&str> = messages_found
                .values()
                .map(|(_, workspace)| workspace.as_str())
                .collect();
            for workspace in workspaces {
                let mut lock = Sql::new("SELECT pg_advisory_xact_lock(hashtextextended('workspace_terms/' || ");
                lock.bind(workspace).push(", 0))");
                execute(tx.conn(), &lock).await?;
            }
            messages_found = read(crate::db::fetch_all(tx.conn(), &sql).await?)?;
        }
        // Each message's terms, and itself (MESSAGE_TERM).
        let mut counted: BTreeMap<i64, (&str, Vec<i64>)> = BTreeMap::new();
        for (id, terms) in messages {
            if let Some((row_id, workspace)) = messages_found.get(id) {
                let terms = std::iter::once(MESSAGE_TERM).chain(terms.iter().map(|&term| i64::from(term)));
                counted.insert(*row_id, (workspace.as_str(), terms.collect()));
            }
        }
        if counted.is_empty() {
            return tx.commit().await;
        }
        let mut sql = Sql::new("INSERT INTO message_terms (message_id, terms) VALUES ");
        for (at, (row_id, (_, terms))) in counted.iter().enumerate() {
            let json = serde_json::to_string(terms).map_err(|error| roncho_core::Error::Internal(error.to_string()))?;
            sql.push(if at == 0 { "(" } else { ", (" });
            sql.bind(*row_id).push(", ").bind(json).push(")");
        }
        // Counted once, however often it is synced: only new rows come back.
        sql.push(" ON CONFLICT (message_id) DO NOTHING RETURNING message_id");
        let mut held: BTreeMap<(&str, i64), i64> = BTreeMap::new();
        for row in crate::db::fetch_all(tx.conn(), &sql).await? {
            let (workspace, terms) = &counted[&rows::get::<i64>(&row, "message_id")?];
            for term in terms {
                *held.entry((workspace, *term)).or_default() += 1;
            }
        }
        let held: Vec<((&str, i64), i64)> = held.into_iter().collect();
        for chunk in held.chunks(TERM_ROWS_PER_STATEMENT) {
            let mut sql = Sql::new("INSERT INTO workspace_terms (workspace_name, term, documents) VALUES ");
            for (at, ((workspace, term), documents)) in chunk.iter().enumerate() {
                sql.push(if at == 0 { "(" } else { ", (" });
                sql.bind(*workspace)
                    .push(", ")
                    .bind(*term)
                    .push(", ")
                    .bind(*documents)
                    .push(")");
            }
            sql.push(
                " ON CONFLICT (workspace_name, term) DO UPDATE \
                 SET documents = workspace_terms.documents + excluded.documents",
            );
            execute(tx.conn(), &sql).await?;
        }
        tx.commit().await
    }

    async fn mark_sync_failed(&self, kind: SyncKind, ids: &[String], error: &str, max_attempts: i64) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let state = match kind {
            SyncKind::Message => SyncColumns::QUEUE,
            SyncKind::Conclusion => SyncColumns::DOCUMENTS,
        };
        let mut tx = self.begin_rebuildable().await?;
        let mut sql = Sql::new(&format!(
            "UPDATE {table} SET {attempts} = {attempts} + 1, {last} = ",
            table = state.table,
            attempts = state.attempts,
            last = state.last_sync_at
        ));
        sql.bind(now_micros())
            .push(&format!(", {} = ", state.error))
            .bind(error.chars().take(1000).collect::<String>());
        sql.push(&format!(
            ", {state} = CASE WHEN {attempts} + 1 >= ",
            state = state.state,
            attempts = state.attempts
        ))
        .bind(max_attempts);
        sql.push(&format!(
            " THEN 'failed' ELSE 'pending' END WHERE {} = 'pending' AND ",
            state.state
        ));
        match kind {
            SyncKind::Message => {
                let rows = message_row_ids(tx.conn(), ids.iter().map(String::as_str)).await?;
                if rows.is_empty() {
                    return tx.commit().await;
                }
                sql.push("message_id IN ")
                    .push_list(&rows.iter().map(|(_, row_id)| *row_id).collect::<Vec<i64>>());
            }
            SyncKind::Conclusion => {
                sql.push("public_id IN ").push_list(ids);
            }
        }
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }

    async fn sync_counts(&self, kind: SyncKind) -> Result<SyncCounts> {
        let sql = Sql::new(match kind {
            // A message is synced when it is not queued (one statement: one snapshot).
            SyncKind::Message => {
                "SELECT (SELECT COUNT(*) FROM messages) AS total, \
                 (SELECT COUNT(*) FROM message_sync WHERE state = 'pending') AS pending, \
                 (SELECT COUNT(*) FROM message_sync WHERE state = 'failed') AS failed, \
                 (SELECT MIN(queued_at) FROM message_sync WHERE state = 'pending') AS oldest"
            }
            SyncKind::Conclusion => {
                "SELECT COUNT(*) AS total, \
                 COALESCE(SUM(CASE WHEN sync_state = 'pending' THEN 1 ELSE 0 END), 0) AS pending, \
                 COALESCE(SUM(CASE WHEN sync_state = 'failed' THEN 1 ELSE 0 END), 0) AS failed, \
                 MIN(CASE WHEN sync_state = 'pending' THEN created_at END) AS oldest \
                 FROM documents WHERE deleted_at IS NULL"
            }
        });
        let Some(row) = self.read_optional(&sql).await? else {
            return Ok(SyncCounts::default());
        };
        let get = |column: &str| row.try_get::<i64, _>(column).map_err(db_error);
        let (total, pending, failed) = (get("total")?, get("pending")?, get("failed")?);
        Ok(SyncCounts {
            pending,
            failed,
            synced: total.saturating_sub(pending + failed).max(0),
            oldest_pending_at: row.try_get::<Option<i64>, _>("oldest").map_err(db_error)?,
        })
    }

    async fn text_index_mark(&self) -> Result<Option<i64>> {
        if self.dialect() != Dialect::Postgres {
            return Ok(None);
        }
        let row = self
            .read_optional(&Sql::new("SELECT MAX(id) AS n FROM messages"))
            .await?;
        Ok(match row {
            Some(row) => row.try_get::<Option<i64>, _>("n").map_err(db_error)?.or(Some(0)),
            None => Some(0),
        })
    }

    #[tracing::instrument(name = "store.index_text", skip_all, fields(up_to, limit))]
    async fn index_text(&self, up_to: i64, limit: i64) -> Result<u64> {
        if self.dialect() != Dialect::Postgres {
            return Ok(0);
        }
        // SKIP LOCKED: rows the reconciler is taking off the queue right now
        // (to index them itself) are left to it.
        let mut sql = Sql::new(
            "WITH taken AS (DELETE FROM message_unindexed WHERE message_id = ANY(ARRAY\
             (SELECT message_id FROM message_unindexed WHERE message_id <= ",
        );
        sql.bind(up_to)
            .push(" ORDER BY message_id LIMIT ")
            .bind(limit)
            .push(" FOR UPDATE SKIP LOCKED)) RETURNING message_id) ");
        push_index_taken(&mut sql);
        let mut tx = self.begin_rebuildable().await?;
        let indexed = execute(tx.conn(), &sql).await?;
        tx.commit().await?;
        self.queue_removals.note(indexed);
        Ok(indexed)
    }

    async fn text_index_backlog(&self) -> Result<i64> {
        if self.dialect() != Dialect::Postgres {
            return Ok(0);
        }
        let sql = Sql::new("SELECT COUNT(*) AS n FROM message_unindexed");
        match self.read_optional(&sql).await? {
            Some(row) => rows::count(&row),
            None => Ok(0),
        }
    }

    async fn tombstones(&self, limit: i64) -> Result<Vec<Tombstone>> {
        let mut sql = Sql::new("SELECT namespace, id FROM vector_tombstones ORDER BY deleted_at LIMIT ");
        sql.bind(limit);
        self.read(&sql)
            .await?
            .iter()
            .map(|row| {
                Ok(Tombstone {
                    namespace: row.try_get("namespace").map_err(db_error)?,
                    id: row.try_get("id").map_err(db_error)?,
                })
            })
            .collect()
    }

    async fn clear_tombstones(&self, tombstones: &[Tombstone]) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for tombstone in tombstones {
            let mut sql = Sql::new("DELETE FROM vector_tombstones WHERE namespace = ");
            sql.bind(tombstone.namespace.as_str())
                .push(" AND id = ")
                .bind(tombstone.id.as_str());
            execute(tx.conn(), &sql).await?;
        }
        tx.commit().await?;
        // The last step of an erasure: its receipt may now be overwritten.
        self.erased_bytes.note();
        Ok(())
    }
}

impl SqlStore {
    /// The oldest `limit` messages whose vectors are due: pending, and past
    /// their backoff (attempt n waits `backoff × n²`), as `row id →
    /// (attempts, version)`. The queue is read along its key in windows, an
    /// ordered index range whatever the planner knows of the table (a
    /// filtered `ORDER BY … LIMIT` without statistics became a scan and a
    /// sort of the whole queue); failed rows and rows backing off are
    /// stepped over here.
    async fn due_messages(&self, limit: i64, now: i64, backoff_micros: i64) -> Result<BTreeMap<i64, (i64, i64)>> {
        const WINDOW: i64 = 512;
        let mut due = BTreeMap::new();
        let mut after = 0_i64;
        loop {
            let mut sql = Sql::new(
                "SELECT message_id, state, attempts, last_sync_at, version FROM message_sync WHERE message_id > ",
            );
            sql.bind(after).push(" ORDER BY message_id LIMIT ").bind(WINDOW);
            let rows = self.read(&sql).await?;
            for row in &rows {
                let get = |column: &str| row.try_get::<i64, _>(column).map_err(db_error);
                after = get("message_id")?;
                let state: String = row.try_get("state").map_err(db_error)?;
                let attempts = get("attempts")?;
                let last: Option<i64> = row.try_get("last_sync_at").map_err(db_error)?;
                let waited = last.is_none_or(|last| {
                    last.saturating_add(backoff_micros.saturating_mul(attempts).saturating_mul(attempts)) <= now
                });
                if state == "pending" && waited {
                    due.insert(after, (attempts, get("version")?));
                    if i64::try_from(due.len()).unwrap_or(i64::MAX) >= limit {
                        return Ok(due);
                    }
                }
            }
            if i64::try_from(rows.len()).unwrap_or(0) < WINDOW {
                return Ok(due);
            }
        }
    }
}

/// Indexes the words of the messages in the CTE `taken` (Postgres).
fn push_index_taken(sql: &mut Sql) {
    sql.push(&format!(
        "INSERT INTO message_text (message_id, workspace_name, session_name, search_vector) \
         SELECT m.id, m.workspace_name, m.session_name, {} FROM messages m \
         JOIN taken ON m.id = taken.message_id ON CONFLICT (message_id) DO NOTHING",
        crate::tx::vectors::text_vector("m")
    ));
}

/// Returns what a message says and the turn it answers, each as
/// `speaker: text` (the speaker doubles vector recall: "who said it" is
/// often the question). The reconciler mixes the context's meaning into the
/// message's vector (see roncho-reconciler's `CONTEXT_WEIGHT`).
fn message_texts(
    previous_peer: Option<String>,
    previous_content: Option<String>,
    peer: Option<&str>,
    content: &str,
) -> (String, Option<String>) {
    let speaker = peer.unwrap_or_default();
    let context = match (previous_peer, previous_content) {
        (Some(previous_peer), Some(previous_content)) => Some(format!("{previous_peer}: {previous_content}")),
        _ => None,
    };
    (spoken(speaker, content), context)
}
