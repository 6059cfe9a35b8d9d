//! Honcho v3's JSON shapes (honcho-v3.md §2.1) and their conversions from
//! and to domain types.

use std::collections::BTreeMap;

use roncho_core::model::{self, JsonObject};
use roncho_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Formats microseconds since the epoch as Honcho's serializer does: ISO
/// 8601 in UTC with a `Z`, microseconds when there are any.
pub fn timestamp(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let Ok(moment) = time::OffsetDateTime::from_unix_timestamp(seconds) else {
        return String::new();
    };
    let (year, month, day) = (moment.year(), u8::from(moment.month()), moment.day());
    let (hour, minute, second) = (moment.hour(), moment.minute(), moment.second());
    let base = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}");
    if fraction == 0 {
        format!("{base}Z")
    } else {
        format!("{base}.{fraction:06}Z")
    }
}

/// Parses a request's ISO 8601 timestamp into microseconds since the epoch.
pub fn parse_timestamp(field: &str, text: &str) -> Result<i64> {
    roncho_core::filter::parse_timestamp(text)
        .ok_or_else(|| Error::invalid(field, format!("`{text}` is not an ISO 8601 datetime")))
}

#[derive(Debug, Serialize)]
pub struct Workspace {
    pub id: String,
    pub metadata: JsonObject,
    pub configuration: JsonObject,
    pub created_at: String,
}

impl From<model::Workspace> for Workspace {
    fn from(workspace: model::Workspace) -> Self {
        Self {
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
    pub workspace_id: String,
    pub created_at: String,
    pub metadata: JsonObject,
    pub configuration: JsonObject,
}

impl From<model::Peer> for Peer {
    fn from(peer: model::Peer) -> Self {
        Self {
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
    pub is_active: bool,
    pub workspace_id: String,
    pub metadata: JsonObject,
    pub configuration: JsonObject,
    pub created_at: String,
}

impl From<model::Session> for Session {
    fn from(session: model::Session) -> Self {
        Self {
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
    #[serde(default)]
    pub observe_me: Option<bool>,
    #[serde(default)]
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
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub metadata: Option<JsonObject>,
    #[serde(default)]
    pub configuration: Option<JsonObject>,
}

/// `SessionCreate`.
#[derive(Debug, Default, Deserialize)]
pub struct SessionCreate {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub metadata: Option<JsonObject>,
    #[serde(default)]
    pub configuration: Option<JsonObject>,
    #[serde(default)]
    pub peers: Option<SessionPeers>,
}

/// `WorkspaceUpdate`, `PeerUpdate`, `SessionUpdate`.
#[derive(Debug, Default, Deserialize)]
pub struct Update {
    #[serde(default)]
    pub metadata: Option<JsonObject>,
    #[serde(default)]
    pub configuration: Option<JsonObject>,
}

/// The body of a `…/list` route: `{filters?}`, or none.
#[derive(Debug, Default, Deserialize)]
pub struct ListBody {
    #[serde(default)]
    pub filters: Option<JsonObject>,
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
    #[serde(default)]
    pub metadata: Option<JsonObject>,
    #[serde(default)]
    pub configuration: Option<JsonObject>,
    #[serde(default)]
    pub created_at: Option<String>,
}

/// `MessageUpdate`.
#[derive(Debug, Default, Deserialize)]
pub struct MessageUpdate {
    #[serde(default)]
    pub metadata: Option<JsonObject>,
}

/// `MessageSearchOptions`.
#[derive(Debug, Deserialize)]
pub struct SearchOptions {
    pub query: String,
    #[serde(default)]
    pub filters: Option<JsonObject>,
    #[serde(default = "default_search_limit")]
    pub limit: i32,
}

fn default_search_limit() -> i32 {
    10
}

/// `?page&size&reverse` of a list route.
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    #[serde(default)]
    pub page: Option<i32>,
    #[serde(default)]
    pub size: Option<i32>,
    #[serde(default)]
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
    #[serde(default)]
    pub message_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_utc_with_microseconds_when_there_are_any() {
        assert_eq!(timestamp(1_764_083_091_000_000), "2025-11-25T15:04:51Z");
        assert_eq!(timestamp(1_764_083_091_000_042), "2025-11-25T15:04:51.000042Z");
        assert_eq!(
            parse_timestamp("created_at", &timestamp(1_764_083_091_123_456)).unwrap(),
            1_764_083_091_123_456
        );
    }

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
