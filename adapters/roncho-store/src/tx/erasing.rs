//! What an erasure still running has yet to remove, kept out of reads.
//!
//! A session, peer or workspace is erased chunk by chunk, and after a
//! crash only once its `deletion` task runs again; its rows stay until
//! then. From the moment the delete is accepted (its receipt `running`,
//! committed with the `deletion` task) every read leaves them out, so an
//! erased resource is gone from every read at once (docs/security.md).
//! The probe is one lookup in the partial index of running receipts
//! (migration 0028), empty but while an erasure runs.

use crate::db::fetch_optional;
use crate::sql::Sql;
use roncho_core::model::SCOPE_PEER_PREFIX;
use roncho_core::{Error, Result};
use sqlx::AnyConnection;

/// The columns of a row that say whose it is, qualified by the read's alias.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owner {
    pub(crate) workspace: &'static str,
    pub(crate) session: Option<&'static str>,
    /// The peers whose erasure takes the row (a message's sender, a
    /// conclusion's observer and observed).
    pub(crate) peers: &'static [&'static str],
    /// The observer column of what a scope observed (conclusions): a
    /// session taken out of a scope takes them with it.
    pub(crate) scope_observer: Option<&'static str>,
}

/// A message `m`.
pub(crate) const MESSAGE: Owner = Owner {
    workspace: "m.workspace_name",
    session: Some("m.session_name"),
    peers: &["m.peer_name"],
    scope_observer: None,
};

/// A conclusion `d` (a row of `documents`).
pub(crate) const CONCLUSION: Owner = Owner {
    workspace: "d.workspace_name",
    session: Some("d.session_name"),
    peers: &["d.observer", "d.observed"],
    scope_observer: Some("d.observer"),
};

/// A session `s`.
pub(crate) const SESSION: Owner = Owner {
    workspace: "s.workspace_name",
    session: Some("s.name"),
    peers: &[],
    scope_observer: None,
};

/// A peer `p`.
pub(crate) const PEER: Owner = Owner {
    workspace: "p.workspace_name",
    session: None,
    peers: &["p.name"],
    scope_observer: None,
};

/// A reasoning trace `t`: its observer and target, its session.
pub(crate) const TRACE: Owner = Owner {
    workspace: "t.workspace_name",
    session: Some("t.session_name"),
    peers: &["t.observer", "t.observed"],
    scope_observer: None,
};

/// A row of `peer_cards`, unaliased.
pub(crate) const PEER_CARD: Owner = Owner {
    workspace: "peer_cards.workspace_name",
    session: None,
    peers: &["peer_cards.observer", "peer_cards.observed"],
    scope_observer: None,
};

/// A row of `webhook_endpoints`, unaliased.
pub(crate) const WEBHOOK: Owner = Owner {
    workspace: "webhook_endpoints.workspace_name",
    session: None,
    peers: &[],
    scope_observer: None,
};

/// A row of `workspaces`, unaliased.
pub(crate) const WORKSPACE: Owner = Owner {
    workspace: "workspaces.name",
    session: None,
    peers: &[],
    scope_observer: None,
};

/// Appends ` AND` the condition that the row `owner` describes belongs to
/// no erasure still running. Whether any erasure runs at all is asked
/// first, once per statement (the probe names no column of the row, so
/// SQLite and Postgres evaluate it once): only while one runs is each row
/// asked after, a lookup per row that a read of many rows would pay.
pub(crate) fn push_not_erasing(sql: &mut Sql, owner: Owner) {
    sql.push(&format!(
        " AND (NOT EXISTS (SELECT 1 FROM erasure_receipts WHERE state = 'running') \
         OR NOT EXISTS (SELECT 1 FROM erasure_receipts e WHERE e.state = 'running' \
         AND e.workspace_name = {} AND (e.scope = 'workspace'",
        owner.workspace
    ));
    if let Some(session) = owner.session {
        sql.push(&format!(" OR (e.scope = 'session' AND e.target = {session})"));
    }
    if !owner.peers.is_empty() {
        sql.push(&format!(
            " OR (e.scope = 'peer' AND e.target IN ({}))",
            owner.peers.join(", ")
        ));
    }
    if let (Some(observer), Some(session)) = (owner.scope_observer, owner.session) {
        sql.push(&format!(
            " OR (e.scope = 'scope_session' AND e.session_name = {session} AND {observer} = "
        ))
        .bind(SCOPE_PEER_PREFIX)
        .push(" || e.target)");
    }
    sql.push(")))");
}

/// Refuses a write into `workspace` that names `peers` while an erasure of
/// the workspace or of one of them runs: what is written there would be
/// hidden at once and erased with it, an empty success. `NOT_FOUND`, as
/// reads answer.
pub(crate) async fn refuse_erasing(conn: &mut AnyConnection, workspace: &str, peers: &[&str]) -> Result<()> {
    let mut sql =
        Sql::new("SELECT e.scope, e.target FROM erasure_receipts e WHERE e.state = 'running' AND e.workspace_name = ");
    sql.bind(workspace).push(" AND (e.scope = 'workspace'");
    if !peers.is_empty() {
        sql.push(" OR (e.scope = 'peer' AND e.target IN (");
        for (index, peer) in peers.iter().enumerate() {
            if index > 0 {
                sql.push(", ");
            }
            sql.bind(*peer);
        }
        sql.push("))");
    }
    sql.push(") LIMIT 1");
    let Some(row) = fetch_optional(conn, &sql).await? else {
        return Ok(());
    };
    let target: String = crate::rows::get(&row, "target")?;
    Err(match crate::rows::get::<String>(&row, "scope")?.as_str() {
        "peer" => Error::not_found("peer", &target),
        _ => Error::not_found("workspace", workspace),
    })
}
