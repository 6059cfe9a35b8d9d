//! Honcho v3's JSON shapes (honcho-v3.md §2.1) and their conversions from
//! and to domain types.

use std::collections::BTreeMap;

use roncho_core::model::{self, JsonObject};
use roncho_core::{Error, Result};
use serde::{Deserialize, Serialize};

mod lax;
mod queue;
mod timestamp;
use lax::optional_bool;
pub use lax::{boolean, parse_bool};
pub use queue::*;
pub use timestamp::{parse_timestamp, timestamp};

#[derive(Debug, Serialize)]
pub struct Workspace {
    pub id: String,
    pub uid: String,
    pub metadata: JsonObject,
    pub configuration: JsonObject,
    pub created_at: String,
}

impl From<model::Workspace> for Workspace {
    fn from(workspace: model::Workspace) -> Self {
        Self {
            uid: workspace.uid(),
            id: workspace.id,
            metadata: workspace.metadata,
            configuration: workspace.configuration,
            created_at: timestamp(workspace.created_at),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Peer {
    pub id: String,
    pub uid: String,
    pub workspace_id: String,
    pub created_at: String,
    pub metadata: JsonObject,
    pub configuration: JsonObject,
}

impl From<model::Peer> for Peer {
    fn from(peer: model::Peer) -> Self {
        Self {
            uid: peer.uid(),
            id: peer.id,
            workspace_id: peer.workspace_id,
            created_at: timestamp(peer.created_at),
            metadata: peer.metadata,
            configuration: peer.configuration,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Session {
    pub id: String,
    pub uid: String,
    pub is_active: bool,
    pub workspace_id: String,
    pub metadata: JsonObject,
    pub configuration: JsonObject,
    pub created_at: String,
}

impl From<model::Session> for Session {
    fn from(session: model::Session) -> Self {
        Self {
            uid: session.uid(),
            id: session.id,
            is_active: session.is_active,
            workspace_id: session.workspace_id,
            metadata: session.metadata,
            configuration: session.configuration,
            created_at: timestamp(session.created_at),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Message {
    pub id: String,
    pub content: String,
    pub peer_id: String,
    pub session_id: String,
    pub metadata: JsonObject,
    pub created_at: String,
    pub workspace_id: String,
    pub token_count: i64,
}

impl From<model::Message> for Message {
    fn from(message: model::Message) -> Self {
        Self {
            id: message.id,
            content: message.content,
            peer_id: message.peer_id,
            session_id: message.session_id,
            metadata: message.metadata,
            created_at: timestamp(message.created_at),
            workspace_id: message.workspace_id,
            token_count: message.token_count,
        }
    }
}

/// One page of a list (fastapi-pagination's `Page`).
#[derive(Debug, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: i64,
    pub page: i64,
    pub size: i64,
    pub pages: i64,
}

impl<D, T: From<D>> From<model::Page<D>> for Page<T> {
    fn from(page: model::Page<D>) -> Self {
        Self {
            items: page.items.into_iter().map(T::from).collect(),
            total: page.total,
            page: page.page,
            size: page.size,
            pages: page.pages,
        }
    }
}

/// A member's observation settings in a session.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct SessionPeerConfig {
    #[serde(default, deserialize_with = "optional_bool")]
    pub observe_me: Option<bool>,
    #[serde(default, deserialize_with = "optional_bool")]
    pub observe_others: Option<bool>,
}

impl From<SessionPeerConfig> for model::SessionPeerConfig {
    fn from(config: SessionPeerConfig) -> Self {
        Self {
            observe_me: config.observe_me,
            observe_others: config.observe_others,
        }
    }
}

impl From<model::SessionPeerConfig> for SessionPeerConfig {
    fn from(config: model::SessionPeerConfig) -> Self {
        Self {
            observe_me: config.observe_me,
            observe_others: config.observe_others,
        }
    }
}

/// Members and their settings, as a body maps them.
pub type SessionPeers = BTreeMap<String, SessionPeerConfig>;

/// Converts members' settings to the domain's.
pub fn session_peers(peers: SessionPeers) -> BTreeMap<String, model::SessionPeerConfig> {
    peers.into_iter().map(|(peer, config)| (peer, config.into())).collect()
}

/// `WorkspaceCreate`, `PeerCreate`: an id (the key's own when left out),
/// metadata and configuration.
#[derive(Debug, Default, Deserialize)]
pub struct Create {
    pub id: Option<String>,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
}

/// `SessionCreate`.
#[derive(Debug, Default, Deserialize)]
pub struct SessionCreate {
    pub id: Option<String>,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
    pub peers: Option<SessionPeers>,
    /// Scopes to add the session to.
    pub scopes: Option<Vec<String>>,
}

/// `WorkspaceUpdate`, `PeerUpdate`, `SessionUpdate`.
#[derive(Debug, Default, Deserialize)]
pub struct Update {
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
}

/// The body of a `…/list` route: `{filters?}`, or none.
#[derive(Debug, Default, Deserialize)]
pub struct ListBody {
    pub filters: Option<JsonObject>,
}

/// `PeerGet`: filters, and which kind of peer (`peer`, `scope` or `all`).
#[derive(Debug, Default, Deserialize)]
pub struct PeerList {
    pub filters: Option<JsonObject>,
    pub kind: Option<String>,
}

/// Honcho's `scope` option: one scope id or a list of them.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Scopes {
    One(String),
    Many(Vec<String>),
}

/// Whether `scope` was sent as a list (even of one).
pub fn scopes_as_list(scope: &Option<Scopes>) -> bool {
    matches!(scope, Some(Scopes::Many(_)))
}

/// The scopes an optional `scope` names (none when absent).
pub fn scopes(scope: Option<Scopes>) -> Result<Vec<String>> {
    match scope {
        None => Ok(Vec::new()),
        Some(Scopes::One(id)) => Ok(vec![id]),
        Some(Scopes::Many(ids)) if ids.is_empty() => Err(Error::invalid("scope", "must name at least one scope")),
        Some(Scopes::Many(ids)) => Ok(ids),
    }
}

/// `ScopeCreate`.
#[derive(Debug, Deserialize)]
pub struct ScopeCreate {
    pub id: String,
    pub metadata: Option<JsonObject>,
}

/// `ScopeSessionsAdd`.
#[derive(Debug, Deserialize)]
pub struct ScopeSessionsAdd {
    pub session_ids: Vec<String>,
}

/// `Scope`: its own id (without the peer's `scope.`).
#[derive(Debug, Serialize)]
pub struct Scope {
    pub id: String,
    pub metadata: JsonObject,
    pub created_at: String,
}

impl From<model::Scope> for Scope {
    fn from(scope: model::Scope) -> Self {
        Self {
            id: scope.id,
            metadata: scope.metadata,
            created_at: timestamp(scope.created_at),
        }
    }
}

/// One session's backfill in `ScopeStatus`.
#[derive(Debug, Serialize)]
pub struct BackfillStatus {
    pub state: &'static str,
    pub updated_at: String,
    pub docs_copied: i64,
    /// Why the last attempt failed (roncho's addition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `ScopeStatus`: `{backfill_status: {<session>: ...}}`.
#[derive(Debug, Serialize)]
pub struct ScopeStatus {
    pub backfill_status: BTreeMap<String, BackfillStatus>,
}

impl From<Vec<model::ScopeBackfill>> for ScopeStatus {
    fn from(backfills: Vec<model::ScopeBackfill>) -> Self {
        Self {
            backfill_status: backfills
                .into_iter()
                .map(|backfill| {
                    (
                        backfill.session_id,
                        BackfillStatus {
                            state: backfill.state.name(),
                            updated_at: timestamp(backfill.updated_at),
                            docs_copied: backfill.docs_copied,
                            error: backfill.error,
                        },
                    )
                })
                .collect(),
        }
    }
}

/// `MessageBatchCreate`.
#[derive(Debug, Deserialize)]
pub struct MessageBatch {
    pub messages: Vec<MessageCreate>,
}

/// `MessageCreate`.
#[derive(Debug, Deserialize)]
pub struct MessageCreate {
    pub content: String,
    pub peer_id: String,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
    pub created_at: Option<String>,
}

/// `MessageUpdate`.
#[derive(Debug, Default, Deserialize)]
pub struct MessageUpdate {
    pub metadata: Option<JsonObject>,
}

/// `MessageSearchOptions`.
#[derive(Debug, Deserialize)]
pub struct SearchOptions {
    pub query: String,
    pub filters: Option<JsonObject>,
    #[serde(default = "default_search_limit")]
    pub limit: i32,
    /// Only the sessions of these scopes (workspace search).
    pub scope: Option<Scopes>,
}

fn default_search_limit() -> i32 {
    10
}

/// `?page&size&reverse` of a list route.
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    pub page: Option<i32>,
    pub size: Option<i32>,
    #[serde(default, deserialize_with = "optional_bool")]
    pub reverse: Option<bool>,
}

impl PageQuery {
    /// The domain's paging: page 1 and 50 rows unless asked otherwise.
    pub fn paging(&self) -> Result<roncho_recall::Paging> {
        let page = self.page.unwrap_or(1);
        let size = self.size.unwrap_or(50);
        if page < 1 {
            return Err(Error::invalid("page", "must be at least 1"));
        }
        if size < 1 {
            return Err(Error::invalid("size", "must be at least 1"));
        }
        Ok(roncho_recall::Paging {
            page,
            size,
            reverse: self.reverse.unwrap_or(false),
        })
    }
}

/// `?message_id` of a clone.
#[derive(Debug, Default, Deserialize)]
pub struct CloneQuery {
    pub message_id: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Conclusion {
    pub id: String,
    pub content: String,
    pub observer_id: String,
    pub observed_id: String,
    pub session_id: Option<String>,
    pub level: String,
    pub created_at: String,
    /// Honcho 3.1: what it came from, and how often it was derived again.
    pub source_ids: Vec<String>,
    pub times_derived: i64,
    /// Honcho 3.3: the messages it was learned from (an explicit
    /// conclusion's sources; a deduction's are conclusions).
    pub source_message_ids: Vec<String>,
}

impl From<model::Conclusion> for Conclusion {
    fn from(conclusion: model::Conclusion) -> Self {
        let source_message_ids = conclusion.source_message_ids().to_vec();
        Self {
            id: conclusion.id,
            content: conclusion.content,
            observer_id: conclusion.observer_id,
            observed_id: conclusion.observed_id,
            session_id: conclusion.session_id,
            level: conclusion.level,
            created_at: timestamp(conclusion.created_at),
            source_message_ids,
            source_ids: conclusion.source_ids,
            times_derived: conclusion.times_derived,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub content: String,
    pub message_id: String,
    pub summary_type: &'static str,
    pub created_at: String,
    pub token_count: i64,
}

impl From<model::SessionSummary> for Summary {
    fn from(summary: model::SessionSummary) -> Self {
        Self {
            content: summary.content,
            message_id: summary.message_id,
            summary_type: summary.kind.name(),
            created_at: timestamp(summary.created_at),
            token_count: summary.token_count,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct WebhookEndpoint {
    pub id: String,
    pub workspace_id: String,
    pub url: String,
    pub created_at: String,
}

impl From<model::WebhookEndpoint> for WebhookEndpoint {
    fn from(endpoint: model::WebhookEndpoint) -> Self {
        Self {
            id: endpoint.id,
            workspace_id: endpoint.workspace_id,
            url: endpoint.url,
            created_at: timestamp(endpoint.created_at),
        }
    }
}

/// `ConclusionBatchCreate`: `conclusions`, or Honcho's older `observations`.
#[derive(Debug, Deserialize)]
pub struct ConclusionBatch {
    #[serde(alias = "observations")]
    pub conclusions: Vec<ConclusionCreate>,
}

#[derive(Debug, Deserialize)]
pub struct ConclusionCreate {
    pub content: String,
    pub observer_id: String,
    pub observed_id: String,
    pub session_id: Option<String>,
    /// Honcho 3.3: the messages it was learned from.
    pub source_message_ids: Option<Vec<String>>,
}

/// `ConclusionQuery`.
#[derive(Debug, Deserialize)]
pub struct ConclusionQuery {
    pub query: String,
    pub top_k: Option<i32>,
    pub distance: Option<f64>,
    pub filters: Option<JsonObject>,
}

/// `PeerCardSet`.
#[derive(Debug, Deserialize)]
pub struct PeerCardSet {
    pub peer_card: Vec<String>,
}

/// `?target` of the card routes.
#[derive(Debug, Default, Deserialize)]
pub struct TargetQuery {
    pub target: Option<String>,
}

/// How a representation is curated: whose view of whom, and which
/// conclusions (`?target&search_query&…` of peer context).
#[derive(Debug, Default, Deserialize)]
pub struct Curation {
    pub target: Option<String>,
    pub search_query: Option<String>,
    pub search_top_k: Option<i32>,
    pub search_max_distance: Option<f64>,
    #[serde(default, deserialize_with = "optional_bool")]
    pub include_most_frequent: Option<bool>,
    pub max_conclusions: Option<i32>,
    /// Bounds the representation and the card (beyond Honcho).
    pub tokens: Option<i32>,
}

/// `PeerRepresentationGet`: a curation, within a session or sessions.
#[derive(Debug, Default, Deserialize)]
pub struct RepresentationOptions {
    pub session_id: Option<String>,
    pub filters: Option<JsonObject>,
    pub scope: Option<Scopes>,
    #[serde(flatten)]
    pub curation: Curation,
}

/// `ScheduleDreamRequest`.
#[derive(Debug, Deserialize)]
pub struct ScheduleDream {
    pub observer: String,
    pub observed: Option<String>,
    #[serde(default = "default_dream_type")]
    pub dream_type: String,
    pub session_id: Option<String>,
    #[serde(default, deserialize_with = "boolean")]
    pub rebuild: bool,
}

fn default_dream_type() -> String {
    "omni".to_owned()
}

/// `?workspace_id&peer_id&session_id&expires_at&tenant_id` of `POST /v3/keys`.
#[derive(Debug, Default, Deserialize)]
pub struct KeyQuery {
    pub workspace_id: Option<String>,
    pub peer_id: Option<String>,
    pub session_id: Option<String>,
    pub expires_at: Option<String>,
    /// The key's tenant (`tn`), on a multi-tenant server: roncho's, not Honcho's.
    pub tenant_id: Option<String>,
}

/// `{"tenant_id": …}` of `PUT /v3/workspaces/{w}/tenant` (roncho's).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantAssignment {
    pub tenant_id: String,
}

/// `WebhookEndpointCreate`.
#[derive(Debug, Deserialize)]
pub struct WebhookCreate {
    pub url: String,
}

/// `DialecticOptions`.
#[derive(Debug, Deserialize)]
pub struct ChatOptions {
    pub query: String,
    pub session_id: Option<String>,
    pub target: Option<String>,
    #[serde(default, deserialize_with = "boolean")]
    pub stream: bool,
    #[serde(default = "default_reasoning_level")]
    pub reasoning_level: String,
    pub filters: Option<JsonObject>,
    pub response_format: Option<serde_json::Value>,
    pub scope: Option<Scopes>,
    #[serde(default, deserialize_with = "boolean")]
    pub include_evidence: bool,
}

/// `WorkspaceChatOptions` (Honcho 3.1): a question to the whole workspace.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceChatOptions {
    pub query: String,
    pub session_id: Option<String>,
    #[serde(default, deserialize_with = "boolean")]
    pub stream: bool,
    #[serde(default = "default_reasoning_level")]
    pub reasoning_level: String,
    pub response_format: Option<serde_json::Value>,
    pub scope: Option<Scopes>,
    #[serde(default, deserialize_with = "boolean")]
    pub include_evidence: bool,
}

/// `Evidence`: what an answer read, in Honcho's shape.
pub fn evidence(evidence: &roncho_dialectic::Evidence) -> serde_json::Value {
    let conclusions: Vec<serde_json::Value> = evidence
        .conclusions
        .iter()
        .map(|conclusion| {
            serde_json::json!({
                "id": conclusion.id,
                "level": conclusion.level,
                "content": conclusion.content,
                "created_at": timestamp(conclusion.created_at),
                "session_id": conclusion.session_id,
                "observer_id": conclusion.observer_id,
                "observed_id": conclusion.observed_id,
                "source_ids": conclusion.source_ids,
            })
        })
        .collect();
    let messages: Vec<serde_json::Value> = evidence
        .messages
        .iter()
        .map(|message| {
            serde_json::json!({
                "id": message.id,
                "session_id": message.session_id,
                "peer_id": message.peer_id,
                "created_at": timestamp(message.created_at),
            })
        })
        .collect();
    let tool_calls: Vec<serde_json::Value> = evidence
        .tool_calls
        .iter()
        .map(|(name, input)| serde_json::json!({ "tool_name": name, "tool_input": input }))
        .collect();
    serde_json::json!({
        "conclusions": conclusions,
        "messages": messages,
        "tool_calls": tool_calls,
        "reasoning_trace_id": evidence.reasoning_trace_id,
    })
}

fn default_reasoning_level() -> String {
    "low".to_owned()
}

/// An erasure's receipt (roncho's own shape: Honcho has none).
#[derive(Debug, Serialize)]
pub struct Receipt {
    pub id: String,
    pub workspace_id: String,
    /// What was erased: `{kind, session_id?, message_id?, peer_id?, scope_id?}`.
    pub scope: serde_json::Value,
    /// `running` until every derived row and vector is gone, then `complete`.
    pub state: &'static str,
    pub counts: model::ErasureCounts,
    pub vectors_pending: i64,
    pub created_at: String,
    pub finished_at: Option<String>,
    /// When the erased bytes were overwritten in the store's files.
    pub bytes_overwritten_at: Option<String>,
}

impl From<model::ErasureReceipt> for Receipt {
    fn from(receipt: model::ErasureReceipt) -> Self {
        let mut scope = serde_json::json!({ "kind": receipt.scope.kind() });
        match &receipt.scope {
            model::ErasureScope::Message { session_id, message_id } => {
                scope["session_id"] = session_id.clone().into();
                scope["message_id"] = message_id.clone().into();
            }
            model::ErasureScope::Session { session_id } => scope["session_id"] = session_id.clone().into(),
            model::ErasureScope::Peer { peer_id } => scope["peer_id"] = peer_id.clone().into(),
            model::ErasureScope::Workspace => {}
            model::ErasureScope::ScopeSession { scope_id, session_id } => {
                scope["scope_id"] = scope_id.clone().into();
                scope["session_id"] = session_id.clone().into();
            }
        }
        Self {
            id: receipt.id,
            workspace_id: receipt.workspace_id,
            scope,
            state: receipt.state.name(),
            counts: receipt.counts,
            vectors_pending: receipt.vectors_pending,
            created_at: timestamp(receipt.created_at),
            finished_at: receipt.finished_at.map(timestamp),
            bytes_overwritten_at: receipt.overwritten_at.map(timestamp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_start_at_one_and_hold_fifty() {
        let paging = PageQuery::default().paging().unwrap();
        assert_eq!((paging.page, paging.size, paging.reverse), (1, 50, false));
        assert!(
            PageQuery {
                page: Some(0),
                ..Default::default()
            }
            .paging()
            .is_err()
        );
    }
}
