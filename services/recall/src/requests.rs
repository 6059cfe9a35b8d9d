//! The requests of every read, as the edges hand them to [`crate::RecallApi`].

use roncho_core::model::{JsonObject, PageRequest, SessionSummary};
use roncho_core::{Error, Result};
use roncho_search::context::Omitted;
use serde_json::Value;

/// Paging of a list: 1-based page, page size (0: the default), order.
#[derive(Debug, Clone, Copy, Default)]
pub struct Paging {
    pub page: i32,
    pub size: i32,
    pub reverse: bool,
}

impl Paging {
    pub(crate) fn request(self) -> Result<PageRequest> {
        PageRequest::from_wire(self.page, self.size, self.reverse)
    }
}

/// Lists workspaces (admin).
#[derive(Debug, Clone, Default)]
pub struct ListWorkspaces {
    pub filters: Option<JsonObject>,
    pub paging: Paging,
    /// Only the workspaces this tenant holds: set by the gate for a
    /// tenant's admin key, never by a client.
    pub tenant: Option<String>,
}

/// Lists the peers of a workspace: participants by default, or scopes.
#[derive(Debug, Clone, Default)]
pub struct ListPeers {
    pub workspace_id: String,
    /// "peer" (or empty), "scope" or "all".
    pub kind: String,
    pub filters: Option<JsonObject>,
    pub paging: Paging,
}

/// Lists the active sessions of a workspace.
#[derive(Debug, Clone, Default)]
pub struct ListSessions {
    pub workspace_id: String,
    pub filters: Option<JsonObject>,
    pub paging: Paging,
}

/// Lists the sessions a peer is or was a member of.
#[derive(Debug, Clone, Default)]
pub struct ListPeerSessions {
    pub workspace_id: String,
    pub peer_id: String,
    pub filters: Option<JsonObject>,
    pub paging: Paging,
}

/// Lists the members of a session.
#[derive(Debug, Clone, Default)]
pub struct ListSessionPeers {
    pub workspace_id: String,
    pub session_id: String,
    pub paging: Paging,
}

/// Names one member of a session.
#[derive(Debug, Clone, Default)]
pub struct GetSessionPeerConfig {
    pub workspace_id: String,
    pub session_id: String,
    pub peer_id: String,
}

/// Lists the messages of a session.
#[derive(Debug, Clone, Default)]
pub struct ListMessages {
    pub workspace_id: String,
    pub session_id: String,
    pub filters: Option<JsonObject>,
    pub paging: Paging,
}

/// Names one message.
#[derive(Debug, Clone, Default)]
pub struct GetMessage {
    pub workspace_id: String,
    pub session_id: String,
    pub message_id: String,
}

/// Searches messages of a workspace, a session or a peer.
#[derive(Debug, Clone, Default)]
pub struct SearchMessages {
    pub workspace_id: String,
    pub session_id: Option<String>,
    pub peer_id: Option<String>,
    pub query: String,
    pub filters: Option<JsonObject>,
    /// 1..100; 0: the default, 10.
    pub limit: i32,
    /// Only the sessions of these scopes (not with a session).
    pub scopes: Vec<String>,
}

impl SearchMessages {
    /// Returns the `peer_perspective` of the filters: only sessions this
    /// peer is or was in. One that is not a string is refused here, for
    /// authorization and search alike.
    pub fn peer_perspective(&self) -> Result<Option<&str>> {
        match self
            .filters
            .as_ref()
            .and_then(|filters| filters.get("peer_perspective"))
        {
            None => Ok(None),
            Some(Value::String(peer)) => Ok(Some(peer)),
            Some(_) => Err(Error::invalid("filters.peer_perspective", "must be a peer id")),
        }
    }
}

/// Asks for a session's context under a token budget (honcho-v3 §3.1).
#[derive(Debug, Clone, Default)]
pub struct GetSessionContext {
    pub workspace_id: String,
    pub session_id: String,
    pub tokens: Option<i32>,
    pub summary: Option<bool>,
    pub search_query: Option<String>,
    pub peer_target: Option<String>,
    pub peer_perspective: Option<String>,
    pub sessions: Vec<String>,
    pub limit_to_session: bool,
    /// Read the memory of this scope about `peer_target` (not with
    /// `peer_perspective` or `sessions`).
    pub scope: Option<String>,
    pub search_top_k: Option<i32>,
    pub search_max_distance: Option<f64>,
    pub include_most_frequent: Option<bool>,
    pub max_conclusions: Option<i32>,
}

impl GetSessionContext {
    /// Returns the peer whose memory the context reads, when it reads any
    /// (with a scope, the scope's instead).
    pub fn observer(&self) -> Option<&str> {
        let target = self.peer_target.as_deref()?;
        Some(self.peer_perspective.as_deref().unwrap_or(target))
    }

    /// Returns the sessions the representation is limited to; `None`: all of the observer's.
    pub fn memory_sessions(&self) -> Option<Vec<&str>> {
        if !self.sessions.is_empty() {
            Some(self.sessions.iter().map(String::as_str).collect())
        } else if self.limit_to_session {
            Some(vec![self.session_id.as_str()])
        } else {
            None
        }
    }
}

/// Names a session.
#[derive(Debug, Clone, Default)]
pub struct GetSessionSummaries {
    pub workspace_id: String,
    pub session_id: String,
}

/// A session's short and long summaries.
#[derive(Debug, Clone, Default)]
pub struct SessionSummaries {
    pub id: String,
    pub short: Option<SessionSummary>,
    pub long: Option<SessionSummary>,
}

/// Asks for what `peer_id` knows about `target` (itself when unset), across sessions.
#[derive(Debug, Clone, Default)]
pub struct GetPeerContext {
    pub workspace_id: String,
    pub peer_id: String,
    pub target: Option<String>,
    pub search_query: Option<String>,
    pub search_top_k: Option<i32>,
    pub search_max_distance: Option<f64>,
    pub include_most_frequent: Option<bool>,
    pub max_conclusions: Option<i32>,
    /// Bounds the representation and the card together (beyond Honcho).
    pub tokens: Option<i32>,
}

/// A peer's representation of and card about a target.
#[derive(Debug, Clone, Default)]
pub struct PeerContext {
    pub peer_id: String,
    pub target_id: String,
    pub representation: Option<String>,
    pub peer_card: Option<Vec<String>>,
    /// What `tokens` left out.
    pub omitted: Omitted,
}

/// A representation as markdown, and what `tokens` left out of it.
#[derive(Debug, Clone, Default)]
pub struct Representation {
    pub markdown: String,
    pub omitted: Omitted,
}

/// Asks for the representation `peer_id` holds of `target`.
#[derive(Debug, Clone, Default)]
pub struct GetRepresentation {
    pub workspace_id: String,
    pub peer_id: String,
    pub session_id: Option<String>,
    pub filters: Option<JsonObject>,
    pub target: Option<String>,
    pub search_query: Option<String>,
    pub search_top_k: Option<i32>,
    pub search_max_distance: Option<f64>,
    pub include_most_frequent: Option<bool>,
    pub max_conclusions: Option<i32>,
    /// One scope: the scope's memory of the target; several: the peer's,
    /// limited to their sessions (not with `session_id` or `filters`).
    pub scopes: Vec<String>,
    /// `scopes` was sent as a list: even one reads as the peer's memory
    /// limited to its sessions (Honcho 3.1).
    pub scopes_as_list: bool,
    /// Bounds the representation (beyond Honcho).
    pub tokens: Option<i32>,
}

/// Names the card `peer_id` holds about `target` (itself when unset).
#[derive(Debug, Clone, Default)]
pub struct GetPeerCard {
    pub workspace_id: String,
    pub peer_id: String,
    pub target: Option<String>,
}

/// Lists live conclusions.
#[derive(Debug, Clone, Default)]
pub struct ListConclusions {
    pub workspace_id: String,
    pub filters: Option<JsonObject>,
    pub paging: Paging,
}

/// Names one conclusion.
#[derive(Debug, Clone, Default)]
pub struct GetConclusion {
    pub workspace_id: String,
    pub conclusion_id: String,
}

/// Finds the conclusions of one collection nearest a query.
#[derive(Debug, Clone, Default)]
pub struct QueryConclusions {
    pub workspace_id: String,
    pub query: String,
    pub top_k: Option<i32>,
    pub distance: Option<f64>,
    pub filters: Option<JsonObject>,
}

/// Lists a workspace's webhook endpoints.
#[derive(Debug, Clone, Default)]
pub struct ListWebhooks {
    pub workspace_id: String,
    pub paging: Paging,
}

/// Names an erasure's receipt.
#[derive(Debug, Clone, Default)]
pub struct GetErasureReceipt {
    pub workspace_id: String,
    pub receipt_id: String,
}

/// Lists the scopes of a workspace.
#[derive(Debug, Clone, Default)]
pub struct ListScopes {
    pub workspace_id: String,
    pub paging: Paging,
}

/// Names a scope (its status, or its sessions with `paging`).
#[derive(Debug, Clone, Default)]
pub struct GetScope {
    pub workspace_id: String,
    pub scope_id: String,
    pub paging: Paging,
}

/// Names what to export: a workspace, or one peer's or one session's part
/// of it (at most one of the two).
#[derive(Debug, Clone, Default)]
pub struct ExportWorkspace {
    pub workspace_id: String,
    pub peer_id: Option<String>,
    pub session_id: Option<String>,
}
