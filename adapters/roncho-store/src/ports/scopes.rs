//! Scopes (honcho-v3 §2.2): a scope is the peer `scope.<id>` (peer ids
//! cannot hold a `.`, so no participant is one), a member of its sessions
//! that observes the others and is never observed. Derivation then writes
//! what is said in those sessions into the scope's own collections, so its
//! memory is exactly theirs.
//!
//! A session added to a scope gets a backfill: the explicit observations
//! each peer's own collection holds from that session, copied into the
//! scope's collection about that peer, a chunk per transaction, skipping
//! what the scope already holds (so retries, a second backfill and the
//! deriver's own writes never double an observation). A session leaves a
//! scope through an erasure ([`ErasureScope::ScopeSession`]): the membership
//! row goes at once, then what the scope observed there.
//!
//! [`ErasureScope::ScopeSession`]: roncho_core::model::ErasureScope::ScopeSession

use crate::db::fetch_all;
use crate::db::{SqlStore, direction, execute, fetch_optional, to_json};
use crate::rows;
use crate::sql::{Dialect, Sql};
use crate::tx::entities::{
    SCOPE_MEMBER, ensure_peer, ensure_workspace, load_scope, load_session, scope_pattern, scope_row, upsert_member,
};
use crate::tx::erasing::{self, push_not_erasing};
use crate::tx::tasks::backfill_task;
use async_trait::async_trait;
use roncho_core::model::{
    BackfillState, JsonObject, NewConclusion, Page, PageRequest, Scope, ScopeBackfill, Session, new_public_id,
    now_micros, scope_peer,
};
use roncho_core::store::{MAX_SESSIONS_PER_SCOPE, Scopes};
use roncho_core::{Error, Result};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

const BACKFILL_COLUMNS: &str = "session_name, state, docs_copied, error, updated_at";

/// A source observation of a backfill.
struct Source {
    row_id: i64,
    conclusion: NewConclusion,
    times_derived: i64,
    created_at: i64,
}

#[async_trait]
impl Scopes for SqlStore {
    async fn get_or_create_scope(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
    ) -> Result<(Scope, bool)> {
        let peer_id = scope_peer(id);
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
        let mut configuration = JsonObject::new();
        configuration.insert("observe_me".into(), false.into());
        let created = ensure_peer(
            tx.conn(),
            workspace_id,
            &peer_id,
            metadata.as_ref().unwrap_or(&JsonObject::new()),
            &configuration,
        )
        .await?;
        if let (false, Some(metadata)) = (created, &metadata) {
            let mut sql = Sql::new("UPDATE peers SET metadata = ");
            sql.bind(to_json(metadata))
                .push(" WHERE workspace_name = ")
                .bind(workspace_id)
                .push(" AND name = ")
                .bind(peer_id.as_str());
            execute(tx.conn(), &sql).await?;
        }
        let scope = load_scope(tx.conn(), workspace_id, id).await?;
        tx.commit().await?;
        Ok((scope, created))
    }

    async fn get_scope(&self, workspace_id: &str, id: &str) -> Result<Scope> {
        let mut conn = self.reads().acquire().await.map_err(crate::db::db_error)?;
        load_scope(&mut conn, workspace_id, id).await
    }

    async fn list_scopes(&self, workspace_id: &str, page: PageRequest) -> Result<Page<Scope>> {
        let mut from_where = Sql::new("peers p WHERE p.workspace_name = ");
        from_where
            .bind(workspace_id)
            .push(" AND p.name LIKE ")
            .bind(scope_pattern());
        push_not_erasing(&mut from_where, erasing::PEER);
        let dir = direction(page);
        self.paged(
            rows::PEER_COLUMNS,
            from_where,
            &format!("p.created_at {dir}, p.name {dir}"),
            page,
            scope_row,
        )
        .await
    }

    async fn add_scope_sessions(&self, workspace_id: &str, id: &str, session_ids: &[String]) -> Result<()> {
        let peer_id = scope_peer(id);
        let mut tx = self.begin_write().await?;
        load_scope(tx.conn(), workspace_id, id).await?;
        for session_id in session_ids {
            load_session(tx.conn(), workspace_id, session_id).await?;
            upsert_member(tx.conn(), workspace_id, session_id, &peer_id, Some(SCOPE_MEMBER)).await?;
            start_backfill(tx.conn(), workspace_id, &peer_id, session_id).await?;
        }
        let mut count = Sql::new("SELECT COUNT(*) AS n FROM session_peers WHERE workspace_name = ");
        count
            .bind(workspace_id)
            .push(" AND peer_name = ")
            .bind(peer_id.as_str())
            .push(" AND left_at IS NULL");
        let sessions = match fetch_optional(tx.conn(), &count).await? {
            Some(row) => rows::count(&row)?,
            None => 0,
        };
        if sessions > MAX_SESSIONS_PER_SCOPE {
            return Err(Error::invalid(
                "session_ids",
                format!("scope `{id}` would hold {sessions} sessions, at most {MAX_SESSIONS_PER_SCOPE} are allowed"),
            ));
        }
        tx.commit().await
    }

    async fn list_scope_sessions(&self, workspace_id: &str, id: &str, page: PageRequest) -> Result<Page<Session>> {
        self.get_scope(workspace_id, id).await?;
        let dir = direction(page);
        // Honcho's order: membership age, longest first.
        self.paged(
            rows::SESSION_COLUMNS,
            Self::scope_sessions_from(workspace_id, &[scope_peer(id)]),
            &format!("sp.joined_at {dir}, s.name {dir}"),
            page,
            rows::session,
        )
        .await
    }

    async fn scope_session_ids(&self, workspace_id: &str, ids: &[String]) -> Result<Vec<String>> {
        let mut peers = Vec::with_capacity(ids.len());
        for id in ids {
            self.get_scope(workspace_id, id).await?;
            peers.push(scope_peer(id));
        }
        if peers.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new("SELECT DISTINCT s.name FROM ");
        let from_where = Self::scope_sessions_from(workspace_id, &peers);
        sql.text.push_str(&from_where.text);
        sql.binds = from_where.binds;
        sql.push(" ORDER BY s.name");
        self.read(&sql)
            .await?
            .iter()
            .map(|row| rows::get(row, "name"))
            .collect()
    }

    async fn scope_backfills(&self, workspace_id: &str, id: &str) -> Result<Vec<ScopeBackfill>> {
        self.get_scope(workspace_id, id).await?;
        let mut sql = Sql::new(&format!(
            "SELECT {BACKFILL_COLUMNS} FROM scope_backfills WHERE workspace_name = "
        ));
        sql.bind(workspace_id)
            .push(" AND scope_peer = ")
            .bind(scope_peer(id))
            .push(" ORDER BY session_name");
        self.read(&sql).await?.iter().map(backfill_row).collect()
    }

    #[tracing::instrument(name = "store.continue_scope_backfill", skip(self))]
    async fn continue_scope_backfill(
        &self,
        workspace_id: &str,
        id: &str,
        session_id: &str,
        max_rows: i64,
    ) -> Result<ScopeBackfill> {
        let peer_id = scope_peer(id);
        let mut tx = self.begin_write().await?;
        let mut sql = Sql::new(&format!(
            "SELECT {BACKFILL_COLUMNS}, last_document FROM scope_backfills WHERE workspace_name = "
        ));
        sql.bind(workspace_id)
            .push(" AND scope_peer = ")
            .bind(peer_id.as_str())
            .push(" AND session_name = ")
            .bind(session_id);
        if self.dialect() == Dialect::Postgres {
            sql.push(" FOR UPDATE");
        }
        let row = fetch_optional(tx.conn(), &sql)
            .await?
            .ok_or_else(|| Error::not_found("scope backfill", format!("{id}/{session_id}")))?;
        let backfill = backfill_row(&row)?;
        if backfill.state == BackfillState::Completed {
            return Ok(backfill);
        }
        let last_document: i64 = rows::get(&row, "last_document")?;
        let max_rows = max_rows.clamp(1, crate::tx::conclusions::CHUNK);
        let sources = next_sources(tx.conn(), workspace_id, session_id, &peer_id, last_document, max_rows).await?;
        let news: Vec<NewConclusion> = sources.iter().map(|source| source.conclusion.clone()).collect();
        let live = crate::tx::conclusions::live_sources(tx.conn(), self.dialect(), workspace_id, &news).await?;
        let mut copied = 0;
        let mut last = last_document;
        for source in &sources {
            last = source.row_id;
            let mut copy = source.conclusion.clone();
            copy.observer_id = peer_id.clone();
            if scope_holds(tx.conn(), workspace_id, &peer_id, &copy).await? {
                continue;
            }
            let id = new_public_id();
            if crate::tx::conclusions::insert_conclusion(
                tx.conn(),
                workspace_id,
                id,
                copy,
                source.times_derived,
                source.created_at,
                &live,
            )
            .await?
            .is_some()
            {
                copied += 1;
            }
        }
        let state = if i64::try_from(sources.len()).unwrap_or(i64::MAX) < max_rows {
            BackfillState::Completed
        } else {
            BackfillState::Pending
        };
        let now = now_micros();
        let mut update = Sql::new("UPDATE scope_backfills SET state = ");
        update
            .bind(state.name())
            .push(", docs_copied = docs_copied + ")
            .bind(copied)
            .push(", last_document = ")
            .bind(last)
            .push(", error = NULL, updated_at = ")
            .bind(now);
        update
            .push(" WHERE workspace_name = ")
            .bind(workspace_id)
            .push(" AND scope_peer = ")
            .bind(peer_id.as_str())
            .push(" AND session_name = ")
            .bind(session_id);
        execute(tx.conn(), &update).await?;
        tx.commit().await?;
        Ok(ScopeBackfill {
            state,
            docs_copied: backfill.docs_copied + copied,
            error: None,
            updated_at: now,
            ..backfill
        })
    }

    async fn fail_scope_backfill(&self, workspace_id: &str, id: &str, session_id: &str, error: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let mut sql = Sql::new("UPDATE scope_backfills SET state = 'failed', error = ");
        sql.bind(error)
            .push(", updated_at = ")
            .bind(now_micros())
            .push(" WHERE workspace_name = ")
            .bind(workspace_id);
        sql.push(" AND scope_peer = ")
            .bind(scope_peer(id))
            .push(" AND session_name = ")
            .bind(session_id)
            .push(" AND state <> 'completed'");
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }
}

impl SqlStore {
    /// `FROM ... WHERE` of a scope's active sessions.
    fn scope_sessions_from(workspace_id: &str, scope_peers: &[String]) -> Sql {
        let mut from_where = Sql::new(
            "sessions s JOIN session_peers sp ON sp.workspace_name = s.workspace_name AND sp.session_name = s.name \
             WHERE s.is_active = 1 AND sp.left_at IS NULL AND s.workspace_name = ",
        );
        from_where
            .bind(workspace_id)
            .push(" AND sp.peer_name IN ")
            .push_list(scope_peers);
        push_not_erasing(&mut from_where, erasing::SESSION);
        from_where
    }
}

fn backfill_row(row: &AnyRow) -> Result<ScopeBackfill> {
    Ok(ScopeBackfill {
        session_id: rows::get(row, "session_name")?,
        state: BackfillState::parse(&rows::get::<String>(row, "state")?)?,
        docs_copied: rows::get(row, "docs_copied")?,
        error: rows::get(row, "error")?,
        updated_at: rows::get(row, "updated_at")?,
    })
}

/// Whether the session holds any message.
async fn has_messages(conn: &mut AnyConnection, workspace_id: &str, session_id: &str) -> Result<bool> {
    let mut sql = Sql::new("SELECT 1 AS found FROM messages WHERE workspace_name = ");
    sql.bind(workspace_id)
        .push(" AND session_name = ")
        .bind(session_id)
        .push(" LIMIT 1");
    Ok(fetch_optional(conn, &sql).await?.is_some())
}

/// Starts (or restarts) a session's backfill into a scope, with its task;
/// a session without messages has nothing to copy and is completed at once.
async fn start_backfill(
    conn: &mut AnyConnection,
    workspace_id: &str,
    scope_peer: &str,
    session_id: &str,
) -> Result<()> {
    let pending = has_messages(conn, workspace_id, session_id).await?;
    let state = if pending {
        BackfillState::Pending
    } else {
        BackfillState::Completed
    };
    let mut sql = Sql::new(
        "INSERT INTO scope_backfills (workspace_name, scope_peer, session_name, state, docs_copied, last_document, \
         error, updated_at) VALUES (",
    );
    sql.bind(workspace_id)
        .push(", ")
        .bind(scope_peer)
        .push(", ")
        .bind(session_id)
        .push(", ")
        .bind(state.name())
        .push(", 0, 0, NULL, ")
        .bind(now_micros())
        .push(
            ") ON CONFLICT (workspace_name, scope_peer, session_name) DO UPDATE SET state = excluded.state, \
             last_document = 0, error = NULL, updated_at = excluded.updated_at",
        );
    execute(conn, &sql).await?;
    if pending {
        crate::tx::tasks::insert_tasks(conn, &[backfill_task(workspace_id, scope_peer, session_id)]).await?;
    }
    Ok(())
}

/// Whether the scope's collection about `observed` already holds `content`
/// from `session_id`.
async fn scope_holds(
    conn: &mut AnyConnection,
    workspace_id: &str,
    scope_peer: &str,
    source: &NewConclusion,
) -> Result<bool> {
    let mut sql = Sql::new("SELECT 1 AS found FROM documents WHERE workspace_name = ");
    sql.bind(workspace_id)
        .push(" AND observer = ")
        .bind(scope_peer)
        .push(" AND observed = ")
        .bind(source.observed_id.as_str())
        .push(" AND session_name = ")
        .bind(source.session_id.as_deref().unwrap_or_default())
        .push(" AND content = ")
        .bind(source.content.as_str())
        .push(" AND deleted_at IS NULL LIMIT 1");
    Ok(fetch_optional(conn, &sql).await?.is_some())
}

/// The next observations a backfill copies: explicit ones of the session,
/// each from its peer's own collection (where derivation always puts what a
/// peer says), after row `after`, in order.
async fn next_sources(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session_id: &str,
    scope_peer: &str,
    after: i64,
    limit: i64,
) -> Result<Vec<Source>> {
    let mut sql = Sql::new(
        "SELECT d.id, d.observed, d.level, d.content, d.premises, d.source_ids, d.times_derived, d.metadata, \
         d.created_at FROM documents d WHERE d.workspace_name = ",
    );
    sql.bind(workspace_id)
        .push(" AND d.session_name = ")
        .bind(session_id)
        .push(" AND d.id > ")
        .bind(after)
        .push(" AND d.deleted_at IS NULL AND d.level = 'explicit' AND d.observer = d.observed AND d.observer <> ")
        .bind(scope_peer)
        .push(" ORDER BY d.id LIMIT ")
        .bind(limit);
    fetch_all(conn, &sql)
        .await?
        .iter()
        .map(|row| {
            Ok(Source {
                row_id: rows::get(row, "id")?,
                conclusion: NewConclusion {
                    observer_id: String::new(),
                    observed_id: rows::get(row, "observed")?,
                    session_id: Some(session_id.to_owned()),
                    level: rows::get(row, "level")?,
                    content: rows::get(row, "content")?,
                    premises: rows::string_list(row, "premises")?,
                    source_ids: rows::string_list(row, "source_ids")?,
                    metadata: rows::json(row, "metadata")?,
                },
                times_derived: rows::get(row, "times_derived")?,
                created_at: rows::get(row, "created_at")?,
            })
        })
        .collect()
}
