//! Conversions from domain types to `roncho.v1` messages.

use roncho_proto::v1 as pb;

use crate::json::json_to_struct;
use crate::model::{
    Conclusion, Message, Page, Peer, Session, SessionPeerConfig, SessionSummary, WebhookEndpoint, Workspace,
};

/// Returns the protobuf timestamp of microseconds since the epoch.
pub fn timestamp(micros: i64) -> prost_types::Timestamp {
    let nanos = i32::try_from(micros.rem_euclid(1_000_000) * 1_000).unwrap_or_default();
    prost_types::Timestamp {
        seconds: micros.div_euclid(1_000_000),
        nanos,
    }
}

/// Returns microseconds since the epoch of a protobuf timestamp.
pub fn micros(timestamp: &prost_types::Timestamp) -> i64 {
    timestamp
        .seconds
        .saturating_mul(1_000_000)
        .saturating_add(i64::from(timestamp.nanos / 1_000))
}

impl From<Workspace> for pb::Workspace {
    fn from(workspace: Workspace) -> Self {
        pb::Workspace {
            id: workspace.id,
            metadata: Some(json_to_struct(&workspace.metadata)),
            configuration: Some(json_to_struct(&workspace.configuration)),
            created_at: Some(timestamp(workspace.created_at)),
        }
    }
}

impl From<Peer> for pb::Peer {
    fn from(peer: Peer) -> Self {
        pb::Peer {
            id: peer.id,
            workspace_id: peer.workspace_id,
            metadata: Some(json_to_struct(&peer.metadata)),
            configuration: Some(json_to_struct(&peer.configuration)),
            created_at: Some(timestamp(peer.created_at)),
        }
    }
}

impl From<Session> for pb::Session {
    fn from(session: Session) -> Self {
        pb::Session {
            id: session.id,
            workspace_id: session.workspace_id,
            is_active: session.is_active,
            metadata: Some(json_to_struct(&session.metadata)),
            configuration: Some(json_to_struct(&session.configuration)),
            created_at: Some(timestamp(session.created_at)),
        }
    }
}

impl From<Message> for pb::Message {
    fn from(message: Message) -> Self {
        pb::Message {
            id: message.id,
            workspace_id: message.workspace_id,
            session_id: message.session_id,
            peer_id: message.peer_id,
            content: message.content,
            metadata: Some(json_to_struct(&message.metadata)),
            created_at: Some(timestamp(message.created_at)),
            token_count: message.token_count,
            seq_in_session: message.seq_in_session,
        }
    }
}

impl From<SessionSummary> for pb::Summary {
    fn from(summary: SessionSummary) -> Self {
        pb::Summary {
            content: summary.content,
            message_id: summary.message_id,
            summary_type: summary.kind.name().to_owned(),
            created_at: Some(timestamp(summary.created_at)),
            token_count: summary.token_count,
        }
    }
}

impl From<Conclusion> for pb::Conclusion {
    fn from(conclusion: Conclusion) -> Self {
        pb::Conclusion {
            id: conclusion.id,
            content: conclusion.content,
            observer_id: conclusion.observer_id,
            observed_id: conclusion.observed_id,
            session_id: conclusion.session_id,
            level: conclusion.level,
            created_at: Some(timestamp(conclusion.created_at)),
            workspace_id: conclusion.workspace_id,
        }
    }
}

impl From<WebhookEndpoint> for pb::WebhookEndpoint {
    fn from(endpoint: WebhookEndpoint) -> Self {
        pb::WebhookEndpoint {
            id: endpoint.id,
            workspace_id: endpoint.workspace_id,
            url: endpoint.url,
            created_at: Some(timestamp(endpoint.created_at)),
        }
    }
}

impl From<SessionPeerConfig> for pb::SessionPeerConfig {
    fn from(config: SessionPeerConfig) -> Self {
        pb::SessionPeerConfig {
            observe_me: config.observe_me,
            observe_others: config.observe_others,
        }
    }
}

impl From<pb::SessionPeerConfig> for SessionPeerConfig {
    fn from(config: pb::SessionPeerConfig) -> Self {
        SessionPeerConfig {
            observe_me: config.observe_me,
            observe_others: config.observe_others,
        }
    }
}

/// The parts of a paged response, with items converted to protobuf.
#[derive(Debug)]
pub struct PageParts<T> {
    pub items: Vec<T>,
    pub total: i64,
    pub page: i32,
    pub size: i32,
    pub pages: i32,
}

/// Returns the wire parts of a page.
pub fn page_parts<D, P: From<D>>(page: Page<D>) -> PageParts<P> {
    let clamp = |value: i64| i32::try_from(value).unwrap_or(i32::MAX);
    PageParts {
        items: page.items.into_iter().map(P::from).collect(),
        total: page.total,
        page: clamp(page.page),
        size: clamp(page.size),
        pages: clamp(page.pages),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_including_before_epoch() {
        for value in [0, 1, 1_700_000_000_123_456, -1, -1_500_000] {
            assert_eq!(micros(&timestamp(value)), value);
        }
    }
}
