//! A session leaving a scope.

use crate::db::execute;
use crate::sql::Sql;
use crate::tx::entities::{load_scope, load_session};
use roncho_core::model::scope_peer;
use roncho_core::{Error, Result};
use sqlx::AnyConnection;

/// Takes a session out of a scope at once: the scope's peer is no longer a
/// member (so it observes nothing more there) and the backfill goes; what
/// it observed there is the erasure's to remove.
pub(crate) async fn leave_scope(
    conn: &mut AnyConnection,
    workspace_id: &str,
    scope_id: &str,
    session_id: &str,
) -> Result<()> {
    load_scope(conn, workspace_id, scope_id).await?;
    load_session(conn, workspace_id, session_id).await?;
    let peer_id = scope_peer(scope_id);
    let mut membership = Sql::new("DELETE FROM session_peers WHERE workspace_name = ");
    membership
        .bind(workspace_id)
        .push(" AND session_name = ")
        .bind(session_id)
        .push(" AND peer_name = ")
        .bind(peer_id.as_str());
    if execute(conn, &membership).await? == 0 {
        return Err(Error::not_found("session in scope", format!("{scope_id}/{session_id}")));
    }
    let mut backfill = Sql::new("DELETE FROM scope_backfills WHERE workspace_name = ");
    backfill
        .bind(workspace_id)
        .push(" AND scope_peer = ")
        .bind(peer_id.as_str())
        .push(" AND session_name = ")
        .bind(session_id);
    execute(conn, &backfill).await?;
    Ok(())
}
