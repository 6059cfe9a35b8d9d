//! Sync state of vectors: which messages and conclusions still need one,
//! marking them synced or failed, and tombstones of deleted rows whose
//! vectors must be removed.

use roncho_core::filter::Filter;
use roncho_core::model::{Message, SyncCounts, SyncItem, SyncKind, Tombstone, now_micros};
use roncho_core::vector::{documents_namespace, messages_namespace};
use roncho_core::{Error, Result};
use sqlx::AnyConnection;
use sqlx::Row;

use crate::rows;
use crate::sql::{Dialect, Sql, render_filter};
use crate::store::{SqlStore, db_error, execute, message_column};

fn table(kind: SyncKind) -> &'static str {
    match kind {
        SyncKind::Message => "messages",
        SyncKind::Conclusion => "documents",
    }
}

/// Records tombstones for the conclusion vectors selected by `condition` (over `documents d`).
pub(crate) async fn tombstone_documents(conn: &mut AnyConnection, condition: impl FnOnce(&mut Sql)) -> Result<()> {
    let mut sql = Sql::new(
        "INSERT INTO vector_tombstones (namespace, id, deleted_at) \
         SELECT 'doc/' || d.workspace_name || '/' || d.observer || '/' || d.observed, d.public_id, ",
    );
    sql.bind(now_micros()).push(" FROM documents d WHERE ");
    condition(&mut sql);
    sql.push(" ON CONFLICT (namespace, id) DO NOTHING");
    execute(conn, &sql).await?;
    Ok(())
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

/// A message as it is embedded and indexed by its words: `speaker: text`.
pub(crate) fn spoken(speaker: &str, content: &str) -> String {
    format!("{speaker}: {content}")
}

/// The newest messages (by row id) that Postgres full-text search matches
/// on the fly while the text indexer has not reached them: 10–25 µs each
/// (20–40 words), so at most a few milliseconds of a search while ingest
/// outruns the indexer. At 1,000 a search at 100k messages right after a
/// bulk write took p50 25 ms instead of 17 (docs/benchmarks.md). Older
/// unindexed rows wait for the indexer (see `roncho status`).
pub const TEXT_TAIL: i64 = 256;

impl SqlStore {
    pub(crate) async fn messages_by_ids_impl(
        &self,
        workspace_id: &str,
        ids: &[String],
        filter: &Filter,
        peer_perspective: Option<&str>,
    ) -> Result<Vec<Message>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new(&format!(
            "SELECT {} FROM messages m WHERE {} = ",
            rows::MESSAGE_COLUMNS,
            self.dialect().unindexed("m.workspace_name")
        ));
        sql.bind(workspace_id).push(" AND m.public_id IN ");
        sql.push_list(ids);
        if let Some(observer) = peer_perspective {
            crate::recall::push_perspective(&mut sql, observer);
        }
        sql.push(" AND ");
        render_filter(&mut sql, self.dialect(), filter, message_column)?;
        self.read(&sql).await?.iter().map(rows::message).collect()
    }

    pub(crate) async fn unsynced_impl(
        &self,
        kind: SyncKind,
        limit: i64,
        now: i64,
        backoff_micros: i64,
    ) -> Result<Vec<SyncItem>> {
        let mut sql = match kind {
            SyncKind::Message => Sql::new(
                "SELECT public_id, workspace_name, session_name, peer_name, content, sync_attempts, sync_version, \
                 NULL AS observer, NULL AS observed, NULL AS level, \
                 (SELECT p.peer_name FROM messages p WHERE p.workspace_name = messages.workspace_name \
                  AND p.session_name = messages.session_name AND p.seq_in_session = messages.seq_in_session - 1) AS previous_peer, \
                 (SELECT p.content FROM messages p WHERE p.workspace_name = messages.workspace_name \
                  AND p.session_name = messages.session_name AND p.seq_in_session = messages.seq_in_session - 1) AS previous_content \
                 FROM messages WHERE sync_state <> 'synced' AND sync_state = 'pending'",
            ),
            SyncKind::Conclusion => Sql::new(
                "SELECT public_id, workspace_name, session_name, NULL AS peer_name, content, sync_attempts, \
                 CAST(0 AS BIGINT) AS sync_version, observer, observed, level, NULL AS previous_peer, NULL AS previous_content FROM documents WHERE deleted_at IS NULL AND sync_state <> 'synced' AND sync_state = 'pending'",
            ),
        };
        // `sync_state <> 'synced'` repeats the partial index's condition: SQLite uses a
        // partial index only when the query states its WHERE, and without it each
        // batch scanned the whole table (sync slowed from 4k to 1k rows/s by 600k rows).
        // Quadratic backoff in portable arithmetic: attempt n waits backoff × n².
        sql.push(" AND (last_sync_at IS NULL OR last_sync_at + ")
            .bind(backoff_micros);
        sql.push(" * sync_attempts * sync_attempts <= ")
            .bind(now)
            .push(") ORDER BY id LIMIT ")
            .bind(limit);
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
            items.push(SyncItem {
                kind,
                id: row.try_get("public_id").map_err(db_error)?,
                namespace,
                text: text_to_embed,
                context,
                session_id: text("session_name")?,
                peer_id,
                level: text("level")?,
                attempts: row.try_get("sync_attempts").map_err(db_error)?,
                version: row.try_get("sync_version").map_err(db_error)?,
            });
        }
        Ok(items)
    }

    pub(crate) async fn mark_synced_impl(&self, kind: SyncKind, synced: &[(String, i64)]) -> Result<()> {
        if synced.is_empty() {
            return Ok(());
        }
        let mut by_version: std::collections::BTreeMap<i64, Vec<String>> = std::collections::BTreeMap::new();
        for (id, version) in synced {
            by_version.entry(*version).or_default().push(id.clone());
        }
        let now = now_micros();
        let mut tx = self.begin_rebuildable().await?;
        for (version, ids) in by_version {
            let mut sql = Sql::new(&format!(
                "UPDATE {} SET sync_state = 'synced', sync_error = NULL, last_sync_at = ",
                table(kind)
            ));
            sql.bind(now);
            if kind == SyncKind::Message && self.dialect() == Dialect::Postgres {
                // The row is rewritten anyway: its text is indexed in the same
                // version, so the text indexer has nothing left to do for it.
                sql.push(&format!(
                    ", search_vector = COALESCE(search_vector, {})",
                    crate::recall::text_vector("messages")
                ));
            }
            sql.push(" WHERE public_id IN ");
            sql.push_list(&ids);
            if kind == SyncKind::Message {
                sql.push(" AND sync_version = ").bind(version);
            }
            execute(tx.conn(), &sql).await?;
        }
        tx.commit().await
    }

    pub(crate) async fn mark_sync_failed_impl(
        &self,
        kind: SyncKind,
        ids: &[String],
        error: &str,
        max_attempts: i64,
    ) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_rebuildable().await?;
        let mut sql = Sql::new(&format!(
            "UPDATE {} SET sync_attempts = sync_attempts + 1, last_sync_at = ",
            table(kind)
        ));
        sql.bind(now_micros())
            .push(", sync_error = ")
            .bind(error.chars().take(1000).collect::<String>());
        sql.push(", sync_state = CASE WHEN sync_attempts + 1 >= ")
            .bind(max_attempts);
        sql.push(" THEN 'failed' ELSE 'pending' END WHERE sync_state = 'pending' AND public_id IN ");
        sql.push_list(ids);
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }

    pub(crate) async fn sync_counts_impl(&self, kind: SyncKind) -> Result<SyncCounts> {
        let live = if kind == SyncKind::Conclusion {
            " WHERE deleted_at IS NULL"
        } else {
            ""
        };
        let sql = Sql::new(&format!(
            "SELECT sync_state, COUNT(*) AS n FROM {}{live} GROUP BY sync_state",
            table(kind)
        ));
        let mut counts = SyncCounts::default();
        for row in self.read(&sql).await? {
            let state: String = row.try_get("sync_state").map_err(db_error)?;
            let n = rows::count(&row)?;
            match state.as_str() {
                "pending" => counts.pending = n,
                "synced" => counts.synced = n,
                "failed" => counts.failed = n,
                other => return Err(Error::Internal(format!("unknown sync_state `{other}`"))),
            }
        }
        Ok(counts)
    }

    /// See [`roncho_core::store::Store::text_index_mark`].
    pub(crate) async fn text_index_mark_impl(&self) -> Result<Option<i64>> {
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

    /// See [`roncho_core::store::Store::index_text`].
    pub(crate) async fn index_text_impl(&self, up_to: i64, limit: i64) -> Result<u64> {
        if self.dialect() != Dialect::Postgres {
            return Ok(0);
        }
        // SKIP LOCKED: rows the reconciler is marking synced (and indexing)
        // right now are left to it.
        let mut sql = Sql::new(&format!(
            "UPDATE messages SET search_vector = {} WHERE id IN \
             (SELECT id FROM messages WHERE search_vector IS NULL AND id <= ",
            crate::recall::text_vector("messages")
        ));
        sql.bind(up_to)
            .push(" ORDER BY id LIMIT ")
            .bind(limit)
            .push(" FOR UPDATE SKIP LOCKED)");
        let mut tx = self.begin_rebuildable().await?;
        let indexed = execute(tx.conn(), &sql).await?;
        tx.commit().await?;
        Ok(indexed)
    }

    /// See [`roncho_core::store::Store::text_index_backlog`].
    pub(crate) async fn text_index_backlog_impl(&self) -> Result<i64> {
        if self.dialect() != Dialect::Postgres {
            return Ok(0);
        }
        let sql = Sql::new("SELECT COUNT(*) AS n FROM messages WHERE search_vector IS NULL");
        match self.read_optional(&sql).await? {
            Some(row) => rows::count(&row),
            None => Ok(0),
        }
    }

    pub(crate) async fn tombstones_impl(&self, limit: i64) -> Result<Vec<Tombstone>> {
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

    pub(crate) async fn clear_tombstones_impl(&self, tombstones: &[Tombstone]) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for tombstone in tombstones {
            let mut sql = Sql::new("DELETE FROM vector_tombstones WHERE namespace = ");
            sql.bind(tombstone.namespace.as_str())
                .push(" AND id = ")
                .bind(tombstone.id.as_str());
            execute(tx.conn(), &sql).await?;
        }
        tx.commit().await
    }
}
