//! The requests of every write, as the edges hand them to [`crate::IngestApi`].

use std::collections::BTreeMap;

use roncho_core::model::{JsonObject, SessionPeerConfig};

/// Names a workspace (`id`) with metadata and configuration to set when it is created.
#[derive(Debug, Clone, Default)]
pub struct GetOrCreateWorkspace {
    pub id: String,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
}

/// Replaces a workspace's metadata and merges its configuration (each when set).
#[derive(Debug, Clone, Default)]
pub struct UpdateWorkspace {
    pub workspace_id: String,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
}

/// Names a workspace to delete, with everything in it.
#[derive(Debug, Clone, Default)]
pub struct DeleteWorkspace {
    pub workspace_id: String,
    /// Refuse (`FAILED_PRECONDITION`) while the workspace has active
    /// sessions, as Honcho's REST API does (409).
    pub refuse_active_sessions: bool,
}

/// Names a peer (`id`) with metadata and configuration to set.
#[derive(Debug, Clone, Default)]
pub struct GetOrCreatePeer {
    pub workspace_id: String,
    pub id: String,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
}

/// Replaces a peer's metadata and configuration (each when set); creates it when missing.
#[derive(Debug, Clone, Default)]
pub struct UpdatePeer {
    pub workspace_id: String,
    pub peer_id: String,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
}

/// Names a peer to delete.
#[derive(Debug, Clone, Default)]
pub struct DeletePeer {
    pub workspace_id: String,
    pub peer_id: String,
}

/// Names a session (`id`) with metadata, configuration and peers to add.
#[derive(Debug, Clone, Default)]
pub struct GetOrCreateSession {
    pub workspace_id: String,
    pub id: String,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
    pub peers: BTreeMap<String, SessionPeerConfig>,
    /// Scopes (got or created) the session is added to.
    pub scopes: Vec<String>,
}

/// Replaces a session's metadata and merges its configuration (each when set).
#[derive(Debug, Clone, Default)]
pub struct UpdateSession {
    pub workspace_id: String,
    pub session_id: String,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
}

/// Names a session to delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteSession {
    pub workspace_id: String,
    pub session_id: String,
}

/// Names a session to copy, up to and including `message_id` when set.
#[derive(Debug, Clone, Default)]
pub struct CloneSession {
    pub workspace_id: String,
    pub session_id: String,
    pub message_id: Option<String>,
}

/// Peers to add to a session, or to make its whole membership.
#[derive(Debug, Clone, Default)]
pub struct ChangeSessionPeers {
    pub workspace_id: String,
    pub session_id: String,
    pub peers: BTreeMap<String, SessionPeerConfig>,
}

/// Peers to take out of a session.
#[derive(Debug, Clone, Default)]
pub struct RemoveSessionPeers {
    pub workspace_id: String,
    pub session_id: String,
    pub peer_ids: Vec<String>,
}

/// A member's observation settings in one session.
#[derive(Debug, Clone, Default)]
pub struct SetSessionPeerConfig {
    pub workspace_id: String,
    pub session_id: String,
    pub peer_id: String,
    pub config: SessionPeerConfig,
}

/// One message to write.
#[derive(Debug, Clone, Default)]
pub struct MessageInput {
    pub peer_id: String,
    pub content: String,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
    /// Microseconds since the epoch; now when unset.
    pub created_at: Option<i64>,
}

/// A batch of messages for one session, written atomically.
#[derive(Debug, Clone, Default)]
pub struct CreateMessages {
    pub workspace_id: String,
    pub session_id: String,
    pub messages: Vec<MessageInput>,
    /// A repeat with the same key returns the first call's messages.
    pub idempotency_key: Option<String>,
}

/// A file whose text becomes messages of `peer_id`.
#[derive(Debug, Clone, Default)]
pub struct UploadFile {
    pub workspace_id: String,
    pub session_id: String,
    pub peer_id: String,
    pub file: Vec<u8>,
    pub filename: String,
    pub content_type: String,
    pub metadata: Option<JsonObject>,
    pub configuration: Option<JsonObject>,
    pub created_at: Option<i64>,
    /// A repeat with the same key returns the first call's messages.
    pub idempotency_key: Option<String>,
}

/// A message's new metadata.
#[derive(Debug, Clone, Default)]
pub struct UpdateMessage {
    pub workspace_id: String,
    pub session_id: String,
    pub message_id: String,
    pub metadata: Option<JsonObject>,
}

/// Names a message to delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteMessage {
    pub workspace_id: String,
    pub session_id: String,
    pub message_id: String,
}

/// One conclusion to write.
#[derive(Debug, Clone, Default)]
pub struct ConclusionInput {
    pub content: String,
    pub observer_id: String,
    pub observed_id: String,
    pub session_id: Option<String>,
    /// The messages it was learned from (Honcho 3.3's `source_message_ids`):
    /// each must exist in the workspace.
    pub source_message_ids: Vec<String>,
}

/// A batch of explicit conclusions.
#[derive(Debug, Clone, Default)]
pub struct CreateConclusions {
    pub workspace_id: String,
    pub conclusions: Vec<ConclusionInput>,
    /// A repeat with the same key returns the first call's conclusions.
    pub idempotency_key: Option<String>,
}

/// Names a conclusion to delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteConclusion {
    pub workspace_id: String,
    pub conclusion_id: String,
}

/// The card `peer_id` holds about `target` (itself when unset).
#[derive(Debug, Clone, Default)]
pub struct SetPeerCard {
    pub workspace_id: String,
    pub peer_id: String,
    pub target: Option<String>,
    pub peer_card: Vec<String>,
}

/// A webhook endpoint to register.
#[derive(Debug, Clone, Default)]
pub struct CreateWebhook {
    pub workspace_id: String,
    pub url: String,
}

/// Names a webhook endpoint to delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteWebhook {
    pub workspace_id: String,
    pub endpoint_id: String,
}

/// Names the workspace whose endpoints get a `test.event`.
#[derive(Debug, Clone, Default)]
pub struct TestWebhook {
    pub workspace_id: String,
}
/// Names a scope (`id`), with metadata to set.
#[derive(Debug, Clone, Default)]
pub struct GetOrCreateScope {
    pub workspace_id: String,
    pub id: String,
    pub metadata: Option<JsonObject>,
}

/// Sessions to add to a scope.
#[derive(Debug, Clone, Default)]
pub struct AddScopeSessions {
    pub workspace_id: String,
    pub scope_id: String,
    pub session_ids: Vec<String>,
}

/// A session to take out of a scope.
#[derive(Debug, Clone, Default)]
pub struct RemoveScopeSession {
    pub workspace_id: String,
    pub scope_id: String,
    pub session_id: String,
}

/// Export records to import into a workspace, in the order of their file
/// (at most [`roncho_core::export::MAX_IMPORT_RECORDS`] a call).
#[derive(Debug, Clone, Default)]
pub struct ImportRecords {
    pub workspace_id: String,
    /// One JSON record each, as `roncho export` writes its lines.
    pub records: Vec<String>,
    /// Queue derivation for the imported messages as if just written
    /// (off: the export's conclusions come with it).
    pub derive: bool,
}
