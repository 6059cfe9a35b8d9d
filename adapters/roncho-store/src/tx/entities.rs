//! Workspaces, peers, sessions, members and scopes read or created in a
//! transaction.

use crate::db::db_error;
use crate::db::flag;
use crate::db::{SqlStore, direction, execute, fetch_optional, to_json};
use crate::rows;
use crate::sql::Dialect;
use crate::sql::Sql;
use crate::tx::erasing::{self, push_not_erasing};
use roncho_core::derivation::Member;
use roncho_core::filter::Filter;
use roncho_core::model::Message;
use roncho_core::model::Scope;
use roncho_core::model::scope_of_peer;
use roncho_core::model::scope_peer;
use roncho_core::model::{JsonObject, Peer, SCOPE_PEER_PREFIX, Session, SessionPeerConfig, Workspace, now_micros};
use roncho_core::model::{Page, PageRequest};
use roncho_core::store::Creator;
use roncho_core::validate::MAX_SESSION_OBSERVERS;
use roncho_core::{Error, Result};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

/// The membership of a scope's peer: it observes the others, never itself.
pub(crate) const SCOPE_MEMBER: SessionPeerConfig = SessionPeerConfig {
    observe_me: Some(false),
    observe_others: Some(true),
};

/// The live workspaces matching `filter`, only those `tenant` holds when given.
pub(crate) async fn list_workspaces_of(
    store: &SqlStore,
    tenant: Option<&str>,
    filter: &Filter,
    page: PageRequest,
) -> Result<Page<Workspace>> {
    let mut from_where = Sql::new("workspaces WHERE 1=1");
    push_not_erasing(&mut from_where, erasing::WORKSPACE);
    if let Some(tenant) = tenant {
        from_where
            .push(" AND name IN (SELECT workspace_name FROM workspace_tenants WHERE tenant = ")
            .bind(tenant)
            .push(")");
    }
    store.push_filter(&mut from_where, filter, "")?;
    let dir = direction(page);
    store
        .paged(
            rows::WORKSPACE_COLUMNS,
            from_where,
            &format!("created_at {dir}, name {dir}"),
            page,
            rows::workspace,
        )
        .await
}

/// Creates the workspace when absent; returns whether it was created.
///
/// As [`roncho_core::store::creator`] says: a call of a multi-tenant
/// server makes a workspace only under an id its caller holds (taking a
/// free one here), so a write authorized while the workspace existed
/// cannot make it again, after its tenant erased it, with someone else's
/// data; the server's own work makes none (`NOT_FOUND`).
pub(crate) async fn ensure_workspace(
    conn: &mut AnyConnection,
    id: &str,
    metadata: &JsonObject,
    configuration: &JsonObject,
) -> Result<bool> {
    erasing::refuse_erasing(conn, id, &[]).await?;
    let mut sql = Sql::new("INSERT INTO workspaces (name, metadata, configuration, created_at) VALUES (");
    sql.bind(id)
        .push(", ")
        .bind(to_json(metadata))
        .push(", ")
        .bind(to_json(configuration))
        .push(", ")
        .bind(now_micros());
    sql.push(") ON CONFLICT (name) DO NOTHING");
    let created = execute(conn, &sql).await? == 1;
    match roncho_core::store::creator() {
        Some(Creator::Caller(creator)) if created => refuse_held_by_another(conn, id, &creator).await?,
        Some(Creator::Work) if created => return Err(Error::not_found("workspace", id)),
        _ => refuse_unless_caller_holds(conn, id).await?,
    }
    Ok(created)
}

/// Within a tenant's call ([`roncho_core::store::creator`]), refuses a
/// workspace its tenant no longer holds: the operator may have given the
/// id to another tenant since the call was let through, and that tenant
/// made a workspace under it; the call's writes must not land there. The
/// operator reaches every workspace; nothing else is checked.
pub(crate) async fn refuse_unless_caller_holds(conn: &mut AnyConnection, id: &str) -> Result<()> {
    let Some(Creator::Caller(tenant)) = roncho_core::store::creator() else {
        return Ok(());
    };
    if tenant == roncho_core::store::OPERATOR {
        return Ok(());
    }
    let mut holder = Sql::new("SELECT tenant FROM workspace_tenants WHERE workspace_name = ");
    holder.bind(id);
    let holder = match fetch_optional(conn, &holder).await? {
        Some(row) => Some(rows::get::<String>(&row, "tenant")?),
        None => None,
    };
    match holder == Some(tenant) {
        true => Ok(()),
        false => Err(Error::PermissionDenied(format!(
            "a key of this tenant does not reach workspace `{id}`"
        ))),
    }
}

/// Takes `id` for `creator` unless someone else holds it, which is refused:
/// the operator in words that name the tenant (its gate's), a tenant in
/// the words of a workspace outside its reach.
async fn refuse_held_by_another(conn: &mut AnyConnection, id: &str, creator: &str) -> Result<()> {
    let mut take = Sql::new("INSERT INTO workspace_tenants (workspace_name, tenant, created_at) VALUES (");
    take.bind(id)
        .push(", ")
        .bind(creator)
        .push(", ")
        .bind(now_micros())
        .push(") ON CONFLICT (workspace_name) DO NOTHING");
    if execute(conn, &take).await? == 1 {
        return Ok(());
    }
    let mut holder = Sql::new("SELECT tenant FROM workspace_tenants WHERE workspace_name = ");
    holder.bind(id);
    let holder = match fetch_optional(conn, &holder).await? {
        Some(row) => rows::get::<String>(&row, "tenant")?,
        None => {
            return Err(Error::Internal(format!(
                "workspace id `{id}` has no holder after its take"
            )));
        }
    };
    if holder == creator {
        return Ok(());
    }
    Err(match creator == roncho_core::store::OPERATOR {
        true => Error::FailedPrecondition(format!(
            "workspace id `{id}` is held by tenant `{holder}` and has no workspace: what this call made would be \
             that tenant's; give the id to its owner first (AssignWorkspace)"
        )),
        false => Error::PermissionDenied(format!("a key of this tenant does not reach workspace `{id}`")),
    })
}

/// Loads workspace `id`; `NOT_FOUND` when absent or being erased.
pub(crate) async fn load_workspace(conn: &mut AnyConnection, id: &str) -> Result<Workspace> {
    let mut sql = Sql::new(&format!(
        "SELECT {} FROM workspaces WHERE name = ",
        rows::WORKSPACE_COLUMNS
    ));
    sql.bind(id);
    push_not_erasing(&mut sql, erasing::WORKSPACE);
    let row = fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::not_found("workspace", id))?;
    rows::workspace(&row)
}

/// Creates a peer or session (`table`) when absent; returns whether it was created.
pub(crate) async fn ensure_named(
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
    // Sessions are refused by their own reads (`load_session`); a peer is
    // named by writes anywhere in its workspace.
    erasing::refuse_erasing(conn, workspace_id, &[id]).await?;
    let created = ensure_named(conn, "peers", workspace_id, id, metadata, configuration).await?;
    // The server's own work makes no peer: one erased while it ran stays erased.
    if created && roncho_core::store::creator() == Some(Creator::Work) {
        return Err(Error::not_found("peer", id));
    }
    Ok(created)
}

/// Loads a peer; `NOT_FOUND` when absent or being erased.
pub(crate) async fn load_peer(conn: &mut AnyConnection, workspace_id: &str, id: &str) -> Result<Peer> {
    let mut sql = Sql::new(&format!(
        "SELECT {} FROM peers p WHERE p.workspace_name = ",
        rows::PEER_COLUMNS
    ));
    sql.bind(workspace_id).push(" AND p.name = ").bind(id);
    push_not_erasing(&mut sql, erasing::PEER);
    let row = fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::not_found("peer", id))?;
    rows::peer(&row)
}

pub(crate) async fn ensure_session(
    conn: &mut AnyConnection,
    workspace_id: &str,
    id: &str,
    metadata: &JsonObject,
    configuration: &JsonObject,
) -> Result<bool> {
    ensure_named(conn, "sessions", workspace_id, id, metadata, configuration).await
}

/// Loads a session; `NOT_FOUND` when absent, inactive or being erased.
pub(crate) async fn load_session(conn: &mut AnyConnection, workspace_id: &str, id: &str) -> Result<Session> {
    let mut sql = Sql::new(&format!(
        "SELECT {} FROM sessions s WHERE s.workspace_name = ",
        rows::SESSION_COLUMNS
    ));
    sql.bind(workspace_id).push(" AND s.name = ").bind(id);
    push_not_erasing(&mut sql, erasing::SESSION);
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
pub(crate) async fn load_members(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
) -> Result<Vec<Member>> {
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

/// Refuses more than ten active members that observe others.
pub(crate) async fn check_observer_limit(conn: &mut AnyConnection, workspace_id: &str, session_id: &str) -> Result<()> {
    let mut sql = Sql::new("SELECT COUNT(*) AS n FROM session_peers WHERE workspace_name = ");
    sql.bind(workspace_id).push(" AND session_name = ").bind(session_id);
    sql.push(" AND left_at IS NULL AND observe_others = 1 AND peer_name NOT LIKE ")
        .bind(crate::tx::entities::scope_pattern());
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

/// Loads a message; `NOT_FOUND` when absent or being erased.
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
    push_not_erasing(&mut sql, erasing::MESSAGE);
    let row = fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::not_found("message", id))?;
    rows::message(&row)
}

/// The scope a peer row is.
pub(crate) fn scope_from_peer(peer: Peer) -> Result<Scope> {
    let id = scope_of_peer(&peer.id)
        .ok_or_else(|| Error::Internal(format!("peer `{}` is not a scope", peer.id)))?
        .to_owned();
    Ok(Scope {
        id,
        workspace_id: peer.workspace_id,
        metadata: peer.metadata,
        created_at: peer.created_at,
    })
}

pub(crate) fn scope_row(row: &AnyRow) -> Result<Scope> {
    scope_from_peer(rows::peer(row)?)
}

/// `LIKE` pattern of every scope's peer name (`.` is not special in LIKE).
pub(crate) fn scope_pattern() -> String {
    format!("{SCOPE_PEER_PREFIX}%")
}

/// Loads scope `id`; `NOT_FOUND` names the scope.
pub(crate) async fn load_scope(conn: &mut AnyConnection, workspace_id: &str, id: &str) -> Result<Scope> {
    match load_peer(conn, workspace_id, &scope_peer(id)).await {
        Ok(peer) => scope_from_peer(peer),
        Err(Error::NotFound { .. }) => Err(Error::not_found("scope", id)),
        Err(error) => Err(error),
    }
}
