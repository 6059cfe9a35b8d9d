//! Idempotency keys in the relational store: a write claims its key in its
//! own transaction, so the key and what the write made commit together or
//! not at all. A twin running at the same time waits on the key's row
//! (Postgres) or the single writer's lock (SQLite) and then replays.

use crate::db::execute;
use crate::db::fetch_optional;
use crate::rows;
use crate::sql::Sql;
use roncho_core::Error;
use roncho_core::Result;
use roncho_core::idempotency::Once;
use roncho_core::model::now_micros;
use sqlx::AnyConnection;

/// What claiming a key found.
pub(crate) enum Claim {
    /// The key is new: this transaction does the write and records it.
    New,
    /// An earlier call did the write: the ids it made.
    Done(Vec<String>),
}

pub(crate) fn key_filter(sql: &mut Sql, workspace_id: &str, once: &Once) {
    sql.push(" WHERE workspace_name = ")
        .bind(workspace_id)
        .push(" AND operation = ")
        .bind(once.operation)
        .push(" AND idempotency_key = ")
        .bind(once.key.as_str());
}

/// Claims `once`'s key in the caller's transaction, forgetting the
/// workspace's expired keys first. `session`: where the write goes (an
/// erasure there forgets the key).
pub(crate) async fn claim(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session: Option<&str>,
    once: &Once,
) -> Result<Claim> {
    let now = now_micros();
    let mut sql = Sql::new("DELETE FROM idempotency_keys WHERE workspace_name = ");
    sql.bind(workspace_id).push(" AND expires_at <= ").bind(now);
    execute(conn, &sql).await?;
    let window = i64::try_from(once.window.as_micros()).unwrap_or(i64::MAX / 4);
    let mut sql = Sql::new(
        "INSERT INTO idempotency_keys (workspace_name, operation, idempotency_key, fingerprint, result_ids, \
         created_at, expires_at, session_name) VALUES (",
    );
    sql.bind(workspace_id)
        .push(", ")
        .bind(once.operation)
        .push(", ")
        .bind(once.key.as_str())
        .push(", ")
        .bind(once.fingerprint.as_str())
        .push(", '[]', ")
        .bind(now)
        .push(", ")
        .bind(now.saturating_add(window))
        .push(", ");
    match session {
        Some(session) => sql.bind(session),
        None => sql.push("NULL"),
    };
    sql.push(") ON CONFLICT DO NOTHING");
    if execute(conn, &sql).await? == 1 {
        return Ok(Claim::New);
    }
    match lookup(conn, workspace_id, once).await? {
        Some(ids) => Ok(Claim::Done(ids)),
        // Claimed and gone between the two statements: only an expiry
        // racing this call does that.
        None => Err(Error::Unavailable(format!(
            "idempotency key `{}` expired while in use; send the request again",
            once.key
        ))),
    }
}

/// The ids the write under `once`'s key made, if it is remembered;
/// `FAILED_PRECONDITION` when it was another request. A key disarmed by an
/// erasure has no digest left to compare: any request with it gets the ids.
pub(crate) async fn lookup(conn: &mut AnyConnection, workspace_id: &str, once: &Once) -> Result<Option<Vec<String>>> {
    let mut sql = Sql::new("SELECT fingerprint, result_ids, erased_by FROM idempotency_keys");
    key_filter(&mut sql, workspace_id, once);
    sql.push(" AND expires_at > ").bind(now_micros());
    let Some(row) = fetch_optional(conn, &sql).await? else {
        return Ok(None);
    };
    let fingerprint: String = rows::get(&row, "fingerprint")?;
    let erased_by: Option<String> = rows::get(&row, "erased_by")?;
    if erased_by.is_none() && fingerprint != once.fingerprint {
        return Err(once.mismatch());
    }
    let ids: String = rows::get(&row, "result_ids")?;
    serde_json::from_str(&ids)
        .map(Some)
        .map_err(|error| Error::Internal(format!("idempotency key ids are not JSON: {error}")))
}

/// Records what the write under `once`'s key made.
pub(crate) async fn record(conn: &mut AnyConnection, workspace_id: &str, once: &Once, ids: &[String]) -> Result<()> {
    let ids = serde_json::to_string(ids).map_err(|error| Error::Internal(error.to_string()))?;
    let mut sql = Sql::new("UPDATE idempotency_keys SET result_ids = ");
    sql.bind(ids);
    key_filter(&mut sql, workspace_id, once);
    execute(conn, &sql).await?;
    Ok(())
}
