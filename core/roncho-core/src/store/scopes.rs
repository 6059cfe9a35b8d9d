//! Scopes: peers that observe a set of sessions, with the backfill of what was
//! observed there before they joined.

use async_trait::async_trait;

use crate::Result;
use crate::model::{JsonObject, Page, PageRequest, Scope, ScopeBackfill, Session};

#[async_trait]
pub trait Scopes: Send + Sync + 'static {
    /// Returns the scope, creating it (and the workspace) when absent: its
    /// peer, which observes others and is never observed. Given metadata
    /// replaces an existing scope's.
    async fn get_or_create_scope(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
    ) -> Result<(Scope, bool)>;
    async fn get_scope(&self, workspace_id: &str, id: &str) -> Result<Scope>;
    async fn list_scopes(&self, workspace_id: &str, page: PageRequest) -> Result<Page<Scope>>;
    /// Adds sessions (which must exist) to a scope: its peer joins each,
    /// and a backfill copying what was observed there before is queued for
    /// each (again for a session already in the scope, catching up on what
    /// was derived since). At most [`MAX_SESSIONS_PER_SCOPE`] sessions.
    async fn add_scope_sessions(&self, workspace_id: &str, id: &str, session_ids: &[String]) -> Result<()>;
    /// Lists the active sessions of a scope.
    async fn list_scope_sessions(&self, workspace_id: &str, id: &str, page: PageRequest) -> Result<Page<Session>>;
    /// Returns the ids of every active session of the scopes `ids` (which
    /// must exist), without repeats.
    async fn scope_session_ids(&self, workspace_id: &str, ids: &[String]) -> Result<Vec<String>>;
    /// Returns the backfill of each session of a scope.
    async fn scope_backfills(&self, workspace_id: &str, id: &str) -> Result<Vec<ScopeBackfill>>;
    /// Copies the next observations (at most `max_rows`) of a pending
    /// backfill into the scope, in one transaction; returns the backfill.
    /// The copies skip what the scope already holds, so a retry or a
    /// second backfill never doubles an observation.
    async fn continue_scope_backfill(
        &self,
        workspace_id: &str,
        id: &str,
        session_id: &str,
        max_rows: i64,
    ) -> Result<ScopeBackfill>;
    /// Records that a backfill's last attempt failed, with why (it stays
    /// retried by the queue; a later attempt sets it pending again).
    async fn fail_scope_backfill(&self, workspace_id: &str, id: &str, session_id: &str, error: &str) -> Result<()>;
}

/// Most sessions in one scope: a scope's sessions are one allowlist in
/// search and memory reads.
pub const MAX_SESSIONS_PER_SCOPE: i64 = 10_000;
