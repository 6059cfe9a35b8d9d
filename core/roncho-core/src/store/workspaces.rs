//! Workspaces, peers and sessions with their memberships: the directory every other
//! resource hangs from.

use async_trait::async_trait;

use crate::Result;
use crate::filter::Filter;
use crate::model::{JsonObject, Page, PageRequest, Peer, PeerKind, Session, SessionPeerConfig, Workspace};

#[async_trait]
pub trait Workspaces: Send + Sync + 'static {
    /// Returns the workspace, creating it with `metadata` and `configuration` when absent.
    async fn get_or_create_workspace(
        &self,
        id: &str,
        metadata: JsonObject,
        configuration: JsonObject,
    ) -> Result<(Workspace, bool)>;
    /// Replaces metadata and merges configuration when given; creates when absent.
    async fn update_workspace(
        &self,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
    ) -> Result<Workspace>;
    async fn list_workspaces(&self, filter: &Filter, page: PageRequest) -> Result<Page<Workspace>>;
    /// Returns the peer, creating it (and the workspace) when absent; given
    /// metadata and configuration replace those of an existing peer.
    async fn get_or_create_peer(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
    ) -> Result<(Peer, bool)>;
    /// Lists the peers of `kind` (scopes are peers named `scope.<id>`).
    async fn list_peers(
        &self,
        workspace_id: &str,
        kind: PeerKind,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Peer>>;
    /// Returns the session, creating it when absent; on an existing session
    /// replaces metadata, merges configuration, and ensures `peers`.
    async fn get_or_create_session(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
        peers: SessionPeers,
    ) -> Result<(Session, bool)>;
    /// Copies a session with messages up to the inclusive cutoff into a new session.
    async fn clone_session(&self, workspace_id: &str, id: &str, cutoff_message_id: Option<&str>) -> Result<Session>;
    /// Adds (or re-activates) members with their configs.
    async fn add_session_peers(&self, workspace_id: &str, session_id: &str, peers: SessionPeers) -> Result<Session>;
    /// Makes `peers` the exact set of active members.
    async fn set_session_peers(&self, workspace_id: &str, session_id: &str, peers: SessionPeers) -> Result<Session>;
    /// Marks members as having left.
    async fn remove_session_peers(&self, workspace_id: &str, session_id: &str, peer_ids: &[String]) -> Result<Session>;
    /// Sets one member's config; `None` fields keep their value.
    async fn set_session_peer_config(
        &self,
        workspace_id: &str,
        session_id: &str,
        peer_id: &str,
        config: SessionPeerConfig,
    ) -> Result<()>;
    /// Returns one active member's config.
    async fn get_session_peer_config(
        &self,
        workspace_id: &str,
        session_id: &str,
        peer_id: &str,
    ) -> Result<SessionPeerConfig>;
    async fn list_sessions(&self, workspace_id: &str, filter: &Filter, page: PageRequest) -> Result<Page<Session>>;
    /// Sessions the peer is or was a member of.
    async fn list_peer_sessions(
        &self,
        workspace_id: &str,
        peer_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Session>>;
    /// Active members of a session, in joining order.
    async fn list_session_peers(&self, workspace_id: &str, session_id: &str, page: PageRequest) -> Result<Page<Peer>>;
}

/// Peers to add to a session with their configs, in request order.
pub type SessionPeers = Vec<(String, SessionPeerConfig)>;
