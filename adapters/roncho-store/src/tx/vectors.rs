//! Vector sync state and tombstones written in a transaction, and the text
//! of a message as its words are indexed.

use crate::db::execute;
use crate::rows;
use crate::sql::Sql;
use roncho_core::Result;
use roncho_core::model::now_micros;
use sqlx::AnyConnection;

/// The newest messages (by row id) that Postgres full-text search matches
/// on the fly while the text indexer has not reached them: 10–25 µs each
/// (20–40 words), so at most a few milliseconds of a search while ingest
/// outruns the indexer. At 1,000 a search at 100k messages right after a
/// bulk write took p50 25 ms instead of 17 (docs/benchmarks.md). Older
/// unindexed rows wait for the indexer (see `roncho status`).
pub const TEXT_TAIL: i64 = 256;

/// A message's full-text vector as Postgres indexes it, computed from the
/// row `alias` (what the text indexer stores in `message_text`).
pub(crate) fn text_vector(alias: &str) -> String {
    format!("to_tsvector('english', {alias}.peer_name || ' ' || {alias}.content)")
}

pub(crate) fn push_perspective(sql: &mut Sql, observer: &str) {
    sql.push(
        " AND EXISTS (SELECT 1 FROM session_peers sp WHERE sp.workspace_name = m.workspace_name \
         AND sp.session_name = m.session_name AND sp.peer_name = ",
    );
    sql.bind(observer)
        .push(" AND (sp.left_at IS NULL OR m.created_at <= sp.left_at))");
}

/// The row ids (the queues' keys) of the messages with these public ids,
/// looked up by their unique index.
pub(crate) async fn message_row_ids<'a>(
    conn: &mut AnyConnection,
    public_ids: impl Iterator<Item = &'a str>,
) -> Result<Vec<(String, i64)>> {
    let public_ids: Vec<String> = public_ids.map(str::to_owned).collect();
    if public_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = Sql::new("SELECT public_id, id FROM messages WHERE public_id IN ");
    sql.push_list(&public_ids);
    crate::db::fetch_all(conn, &sql)
        .await?
        .iter()
        .map(|row| Ok((rows::get(row, "public_id")?, rows::get(row, "id")?)))
        .collect()
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

/// Queues the messages that `condition` selects (over `messages`, unaliased)
/// to be embedded again, each with a new version so that a reconciler
/// holding its old text does not mark it done. Returns how many were not
/// queued already (synced, or failed).
pub(crate) async fn requeue_messages(conn: &mut AnyConnection, condition: &(dyn Fn(&mut Sql) + Sync)) -> Result<u64> {
    let version = now_micros();
    let mut requeued = 0;
    for (state, counted) in [("failed", true), ("pending", false)] {
        let mut sql = Sql::new("UPDATE message_sync SET state = 'pending', attempts = 0, error = NULL, version = ");
        sql.bind(version);
        if counted {
            // Back from failed: waiting again from now. A pending row keeps its wait.
            sql.push(", queued_at = ").bind(version);
        }
        sql.push(" WHERE state = ").bind(state);
        sql.push(" AND message_id IN (SELECT id FROM messages WHERE ");
        condition(&mut sql);
        sql.push(")");
        let changed = execute(conn, &sql).await?;
        if counted {
            requeued += changed;
        }
    }
    let mut sql = Sql::new("INSERT INTO message_sync (message_id, version, queued_at) SELECT id, ");
    sql.bind(version).push(", ").bind(version).push(" FROM messages WHERE ");
    condition(&mut sql);
    sql.push(" AND NOT EXISTS (SELECT 1 FROM message_sync q WHERE q.message_id = messages.id)");
    Ok(requeued + execute(conn, &sql).await?)
}

/// A message as it is embedded and indexed by its words: `speaker: text`.
pub(crate) fn spoken(speaker: &str, content: &str) -> String {
    format!("{speaker}: {content}")
}
