//! Conversions between `roncho.v1` messages and domain types: requests in
//! ([`FromWire`]), replies out ([`IntoWire`]). Nothing here validates; the
//! services do, so every edge gets the same checks and field names.

use std::collections::{BTreeMap, HashMap};

use roncho_core::model::{
    Conclusion, ErasureReceipt, ErasureScope, ErasureState, JsonObject, Message, Page, Peer, Scope, ScopeBackfill,
    Session, SessionPeerConfig, SessionSummary, WebhookEndpoint, Workspace,
};
use roncho_core::queue::task_type;
use roncho_deriver::{Derivation, QueueReport};
use roncho_proto::v1 as pb;
use roncho_search::context::SessionContext;
use roncho_search::messages::SearchResults;

use crate::json::{json_to_struct, struct_to_json};
use roncho_gate::keys::{AssignWorkspace, Assigned, CreateKey, IssuedKey};

/// A wire value that becomes a domain value.
pub trait FromWire<W>: Sized {
    fn from_wire(wire: W) -> Self;
}

/// A domain value that becomes a wire value.
pub trait IntoWire<W> {
    fn into_wire(self) -> W;
}

impl<T> FromWire<T> for T {
    fn from_wire(wire: T) -> Self {
        wire
    }
}

impl FromWire<Option<prost_types::Struct>> for Option<JsonObject> {
    fn from_wire(wire: Option<prost_types::Struct>) -> Self {
        wire.map(|fields| struct_to_json(&fields))
    }
}

impl FromWire<Option<prost_types::Timestamp>> for Option<i64> {
    fn from_wire(wire: Option<prost_types::Timestamp>) -> Self {
        wire.as_ref().map(micros)
    }
}

impl FromWire<HashMap<String, pb::SessionPeerConfig>> for BTreeMap<String, SessionPeerConfig> {
    fn from_wire(wire: HashMap<String, pb::SessionPeerConfig>) -> Self {
        wire.into_iter()
            .map(|(peer_id, config)| (peer_id, SessionPeerConfig::from_wire(config)))
            .collect()
    }
}

impl FromWire<pb::SessionPeerConfig> for SessionPeerConfig {
    fn from_wire(wire: pb::SessionPeerConfig) -> Self {
        SessionPeerConfig {
            observe_me: wire.observe_me,
            observe_others: wire.observe_others,
        }
    }
}

impl FromWire<Vec<pb::MessageCreate>> for Vec<roncho_ingest::MessageInput> {
    fn from_wire(wire: Vec<pb::MessageCreate>) -> Self {
        wire.into_iter()
            .map(|message| roncho_ingest::MessageInput {
                peer_id: message.peer_id,
                content: message.content,
                metadata: FromWire::from_wire(message.metadata),
                configuration: FromWire::from_wire(message.configuration),
                created_at: FromWire::from_wire(message.created_at),
            })
            .collect()
    }
}

impl FromWire<Vec<pb::ConclusionCreate>> for Vec<roncho_ingest::ConclusionInput> {
    fn from_wire(wire: Vec<pb::ConclusionCreate>) -> Self {
        wire.into_iter()
            .map(|conclusion| roncho_ingest::ConclusionInput {
                content: conclusion.content,
                observer_id: conclusion.observer_id,
                observed_id: conclusion.observed_id,
                session_id: conclusion.session_id,
                source_message_ids: conclusion.source_message_ids,
            })
            .collect()
    }
}

/// Requests whose fields carry over one for one.
macro_rules! from_wire {
    ($($wire:ident => $domain:path { $($field:ident),* $(,)? })*) => {$(
        impl FromWire<pb::$wire> for $domain {
            fn from_wire(wire: pb::$wire) -> Self {
                Self { $($field: FromWire::from_wire(wire.$field),)* }
            }
        }
    )*};
}

/// Requests of lists: their fields carry over, `page`, `size` and `reverse` become `paging`.
macro_rules! from_wire_paged {
    ($($wire:ident => $domain:path { $($field:ident),* $(,)? })*) => {$(
        impl FromWire<pb::$wire> for $domain {
            fn from_wire(wire: pb::$wire) -> Self {
                Self {
                    $($field: FromWire::from_wire(wire.$field),)*
                    paging: roncho_recall::Paging { page: wire.page, size: wire.size, reverse: wire.reverse },
                }
            }
        }
    )*};
}

from_wire! {
    GetOrCreateWorkspaceRequest => roncho_ingest::GetOrCreateWorkspace { id, metadata, configuration }
    UpdateWorkspaceRequest => roncho_ingest::UpdateWorkspace { workspace_id, metadata, configuration }
    GetOrCreatePeerRequest => roncho_ingest::GetOrCreatePeer { workspace_id, id, metadata, configuration }
    UpdatePeerRequest => roncho_ingest::UpdatePeer { workspace_id, peer_id, metadata, configuration }
    DeletePeerRequest => roncho_ingest::DeletePeer { workspace_id, peer_id }
    GetOrCreateSessionRequest => roncho_ingest::GetOrCreateSession {
        workspace_id, id, metadata, configuration, peers, scopes
    }
    UpdateSessionRequest => roncho_ingest::UpdateSession { workspace_id, session_id, metadata, configuration }
    DeleteSessionRequest => roncho_ingest::DeleteSession { workspace_id, session_id }
    CloneSessionRequest => roncho_ingest::CloneSession { workspace_id, session_id, message_id }
    AddSessionPeersRequest => roncho_ingest::ChangeSessionPeers { workspace_id, session_id, peers }
    SetSessionPeersRequest => roncho_ingest::ChangeSessionPeers { workspace_id, session_id, peers }
    RemoveSessionPeersRequest => roncho_ingest::RemoveSessionPeers { workspace_id, session_id, peer_ids }
    CreateMessagesRequest => roncho_ingest::CreateMessages { workspace_id, session_id, messages, idempotency_key }
    UploadFileRequest => roncho_ingest::UploadFile {
        workspace_id, session_id, peer_id, file, filename, content_type, metadata, configuration, created_at,
        idempotency_key
    }
    UpdateMessageRequest => roncho_ingest::UpdateMessage { workspace_id, session_id, message_id, metadata }
    DeleteMessageRequest => roncho_ingest::DeleteMessage { workspace_id, session_id, message_id }
    CreateConclusionsRequest => roncho_ingest::CreateConclusions { workspace_id, conclusions, idempotency_key }
    DeleteConclusionRequest => roncho_ingest::DeleteConclusion { workspace_id, conclusion_id }
    SetPeerCardRequest => roncho_ingest::SetPeerCard { workspace_id, peer_id, target, peer_card }
    CreateWebhookRequest => roncho_ingest::CreateWebhook { workspace_id, url }
    DeleteWebhookRequest => roncho_ingest::DeleteWebhook { workspace_id, endpoint_id }
    TestWebhookRequest => roncho_ingest::TestWebhook { workspace_id }
    GetSessionPeerConfigRequest => roncho_recall::GetSessionPeerConfig { workspace_id, session_id, peer_id }
    GetMessageRequest => roncho_recall::GetMessage { workspace_id, session_id, message_id }
    SearchMessagesRequest => roncho_recall::SearchMessages {
        workspace_id, session_id, peer_id, query, filters, limit, scopes
    }
    GetSessionContextRequest => roncho_recall::GetSessionContext {
        workspace_id, session_id, tokens, summary, search_query, peer_target, peer_perspective, sessions,
        limit_to_session, search_top_k, search_max_distance, include_most_frequent, max_conclusions, scope
    }
    GetSessionSummariesRequest => roncho_recall::GetSessionSummaries { workspace_id, session_id }
    GetPeerContextRequest => roncho_recall::GetPeerContext {
        workspace_id, peer_id, target, search_query, search_top_k, search_max_distance, include_most_frequent,
        max_conclusions, tokens
    }
    GetRepresentationRequest => roncho_recall::GetRepresentation {
        workspace_id, peer_id, session_id, filters, target, search_query, search_top_k, search_max_distance,
        include_most_frequent, max_conclusions, scopes, tokens, scopes_as_list
    }
    GetPeerCardRequest => roncho_recall::GetPeerCard { workspace_id, peer_id, target }
    GetErasureReceiptRequest => roncho_recall::GetErasureReceipt { workspace_id, receipt_id }
    GetConclusionRequest => roncho_recall::GetConclusion { workspace_id, conclusion_id }
    QueryConclusionsRequest => roncho_recall::QueryConclusions { workspace_id, query, top_k, distance, filters }
    ChatRequest => roncho_dialectic::Chat {
        workspace_id, peer_id, query, session_id, target, reasoning_level, filters, response_format, scopes,
        include_evidence, scopes_as_list
    }
    GetQueueStatusRequest => roncho_deriver::GetQueueStatus {
        workspace_id, observer_id, sender_id, session_id, include_history
    }
    RetryFailedWorkRequest => roncho_deriver::RetryFailedWork { workspace_id, session_id, task_type }
    ScheduleDreamRequest => roncho_dreamer::ScheduleDream {
        workspace_id, observer, observed, dream_type, session_id, rebuild
    }
    CreateKeyRequest => CreateKey { workspace_id, peer_id, session_id, expires_at, tenant_id }
    AssignWorkspaceRequest => AssignWorkspace { workspace_id, tenant_id }
    GetOrCreateScopeRequest => roncho_ingest::GetOrCreateScope { workspace_id, id, metadata }
    AddScopeSessionsRequest => roncho_ingest::AddScopeSessions { workspace_id, scope_id, session_ids }
    RemoveScopeSessionRequest => roncho_ingest::RemoveScopeSession { workspace_id, scope_id, session_id }
    ExportWorkspaceRequest => roncho_recall::ExportWorkspace { workspace_id, peer_id, session_id }
    GetReasoningTraceRequest => roncho_dialectic::GetReasoningTrace { workspace_id, trace_id }
    ImportRecordsRequest => roncho_ingest::ImportRecords { workspace_id, records, derive }
}

impl FromWire<pb::GetScopeRequest> for roncho_recall::GetScope {
    fn from_wire(wire: pb::GetScopeRequest) -> Self {
        Self {
            workspace_id: wire.workspace_id,
            scope_id: wire.scope_id,
            paging: roncho_recall::Paging::default(),
        }
    }
}

/// gRPC deletes a workspace whatever it holds (Honcho's REST answers 409
/// while sessions are active; its edge asks for that).
impl FromWire<pb::DeleteWorkspaceRequest> for roncho_ingest::DeleteWorkspace {
    fn from_wire(wire: pb::DeleteWorkspaceRequest) -> Self {
        Self {
            workspace_id: wire.workspace_id,
            refuse_active_sessions: false,
        }
    }
}

from_wire_paged! {
    ListPeersRequest => roncho_recall::ListPeers { workspace_id, kind, filters }
    ListSessionsRequest => roncho_recall::ListSessions { workspace_id, filters }
    ListPeerSessionsRequest => roncho_recall::ListPeerSessions { workspace_id, peer_id, filters }
    ListSessionPeersRequest => roncho_recall::ListSessionPeers { workspace_id, session_id }
    ListMessagesRequest => roncho_recall::ListMessages { workspace_id, session_id, filters }
    ListConclusionsRequest => roncho_recall::ListConclusions { workspace_id, filters }
    ListScopesRequest => roncho_recall::ListScopes { workspace_id }
    ListScopeSessionsRequest => roncho_recall::GetScope { workspace_id, scope_id }
}

impl FromWire<pb::SetSessionPeerConfigRequest> for roncho_ingest::SetSessionPeerConfig {
    fn from_wire(wire: pb::SetSessionPeerConfigRequest) -> Self {
        Self {
            workspace_id: wire.workspace_id,
            session_id: wire.session_id,
            peer_id: wire.peer_id,
            config: SessionPeerConfig {
                observe_me: wire.observe_me,
                observe_others: wire.observe_others,
            },
        }
    }
}

impl FromWire<pb::ListWebhooksRequest> for roncho_recall::ListWebhooks {
    fn from_wire(wire: pb::ListWebhooksRequest) -> Self {
        Self {
            workspace_id: wire.workspace_id,
            paging: roncho_recall::Paging {
                page: wire.page,
                size: wire.size,
                reverse: false,
            },
        }
    }
}

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

impl IntoWire<pb::Workspace> for Workspace {
    fn into_wire(self) -> pb::Workspace {
        pb::Workspace {
            uid: self.uid(),
            id: self.id,
            metadata: Some(json_to_struct(&self.metadata)),
            configuration: Some(json_to_struct(&self.configuration)),
            created_at: Some(timestamp(self.created_at)),
        }
    }
}

impl IntoWire<pb::Peer> for Peer {
    fn into_wire(self) -> pb::Peer {
        pb::Peer {
            uid: self.uid(),
            id: self.id,
            workspace_id: self.workspace_id,
            metadata: Some(json_to_struct(&self.metadata)),
            configuration: Some(json_to_struct(&self.configuration)),
            created_at: Some(timestamp(self.created_at)),
        }
    }
}

impl IntoWire<pb::Session> for Session {
    fn into_wire(self) -> pb::Session {
        pb::Session {
            uid: self.uid(),
            id: self.id,
            workspace_id: self.workspace_id,
            is_active: self.is_active,
            metadata: Some(json_to_struct(&self.metadata)),
            configuration: Some(json_to_struct(&self.configuration)),
            created_at: Some(timestamp(self.created_at)),
        }
    }
}

impl IntoWire<pb::Message> for Message {
    fn into_wire(self) -> pb::Message {
        pb::Message {
            id: self.id,
            workspace_id: self.workspace_id,
            session_id: self.session_id,
            peer_id: self.peer_id,
            content: self.content,
            metadata: Some(json_to_struct(&self.metadata)),
            created_at: Some(timestamp(self.created_at)),
            token_count: self.token_count,
            seq_in_session: self.seq_in_session,
        }
    }
}

impl IntoWire<pb::Summary> for SessionSummary {
    fn into_wire(self) -> pb::Summary {
        pb::Summary {
            content: self.content,
            message_id: self.message_id,
            summary_type: self.kind.name().to_owned(),
            created_at: Some(timestamp(self.created_at)),
            token_count: self.token_count,
        }
    }
}

impl IntoWire<pb::Conclusion> for Conclusion {
    fn into_wire(self) -> pb::Conclusion {
        pb::Conclusion {
            id: self.id,
            content: self.content,
            observer_id: self.observer_id,
            observed_id: self.observed_id,
            session_id: self.session_id,
            level: self.level,
            created_at: Some(timestamp(self.created_at)),
            workspace_id: self.workspace_id,
            source_ids: self.source_ids,
            times_derived: self.times_derived,
        }
    }
}

impl IntoWire<pb::WebhookEndpoint> for WebhookEndpoint {
    fn into_wire(self) -> pb::WebhookEndpoint {
        pb::WebhookEndpoint {
            id: self.id,
            workspace_id: self.workspace_id,
            url: self.url,
            created_at: Some(timestamp(self.created_at)),
        }
    }
}

impl IntoWire<pb::SessionPeerConfig> for SessionPeerConfig {
    fn into_wire(self) -> pb::SessionPeerConfig {
        pb::SessionPeerConfig {
            observe_me: self.observe_me,
            observe_others: self.observe_others,
        }
    }
}

impl IntoWire<pb::Scope> for Scope {
    fn into_wire(self) -> pb::Scope {
        pb::Scope {
            id: self.id,
            workspace_id: self.workspace_id,
            metadata: Some(json_to_struct(&self.metadata)),
            created_at: Some(timestamp(self.created_at)),
        }
    }
}

impl IntoWire<pb::ScopeStatus> for Vec<ScopeBackfill> {
    fn into_wire(self) -> pb::ScopeStatus {
        pb::ScopeStatus {
            sessions: self
                .into_iter()
                .map(|backfill| pb::ScopeBackfill {
                    session_id: backfill.session_id,
                    state: backfill.state.name().to_owned(),
                    docs_copied: backfill.docs_copied,
                    error: backfill.error,
                    updated_at: Some(timestamp(backfill.updated_at)),
                })
                .collect(),
        }
    }
}

fn wire_list<D: IntoWire<W>, W>(items: Vec<D>) -> Vec<W> {
    items.into_iter().map(IntoWire::into_wire).collect()
}

/// Pages: items converted, counts clamped to the wire's widths.
macro_rules! page_into_wire {
    ($($domain:ty => $wire:ident),* $(,)?) => {$(
        impl IntoWire<pb::$wire> for Page<$domain> {
            fn into_wire(self) -> pb::$wire {
                let clamp = |value: i64| i32::try_from(value).unwrap_or(i32::MAX);
                pb::$wire {
                    items: wire_list(self.items),
                    total: self.total,
                    page: clamp(self.page),
                    size: clamp(self.size),
                    pages: clamp(self.pages),
                }
            }
        }
    )*};
}

page_into_wire! {
    Workspace => ListWorkspacesResponse,
    Peer => ListPeersResponse,
    Session => ListSessionsResponse,
    Message => ListMessagesResponse,
    Conclusion => ListConclusionsResponse,
    WebhookEndpoint => ListWebhooksResponse,
    Scope => ListScopesResponse,
}

/// Replies that say only that it worked.
macro_rules! unit_into_wire {
    ($($wire:ident),* $(,)?) => {$(
        impl IntoWire<pb::$wire> for () {
            fn into_wire(self) -> pb::$wire {
                pb::$wire {}
            }
        }
    )*};
}

unit_into_wire! {
    SetSessionPeerConfigResponse, DeleteConclusionResponse, DeleteWebhookResponse, AddScopeSessionsResponse,
}

impl IntoWire<pb::ErasureReceipt> for ErasureReceipt {
    fn into_wire(self) -> pb::ErasureReceipt {
        let c = self.counts;
        pb::ErasureReceipt {
            scope: self.scope.kind().to_owned(),
            target_id: self.scope.target(&self.workspace_id).to_owned(),
            session_id: match &self.scope {
                ErasureScope::Message { session_id, .. } | ErasureScope::ScopeSession { session_id, .. } => {
                    Some(session_id.clone())
                }
                _ => None,
            },
            id: self.id,
            workspace_id: self.workspace_id,
            state: match self.state {
                ErasureState::Running => pb::ErasureState::Running,
                ErasureState::Complete => pb::ErasureState::Complete,
            }
            .into(),
            counts: Some(pb::ErasureCounts {
                messages: c.messages,
                message_vectors: c.message_vectors,
                conclusions: c.conclusions,
                conclusion_vectors: c.conclusion_vectors,
                conclusions_trimmed: c.conclusions_trimmed,
                summaries_rebuilt: c.summaries_rebuilt,
                messages_reembedded: c.messages_reembedded,
                tasks_dropped: c.tasks_dropped,
                idempotency_keys: c.idempotency_keys,
                peer_cards: c.peer_cards,
                sessions: c.sessions,
                peers: c.peers,
                webhooks: c.webhooks,
                workspaces: c.workspaces,
            }),
            vectors_pending: self.vectors_pending,
            created_at: Some(timestamp(self.created_at)),
            finished_at: self.finished_at.map(timestamp),
            bytes_overwritten_at: self.overwritten_at.map(timestamp),
        }
    }
}

/// Delete replies: the erasure's receipt.
macro_rules! receipt_into_wire {
    ($($wire:ident),* $(,)?) => {$(
        impl IntoWire<pb::$wire> for ErasureReceipt {
            fn into_wire(self) -> pb::$wire {
                pb::$wire { receipt: Some(self.into_wire()) }
            }
        }
    )*};
}

receipt_into_wire! {
    DeleteWorkspaceResponse, DeletePeerResponse, DeleteSessionResponse, DeleteMessageResponse,
    RemoveScopeSessionResponse,
}

/// Get-or-create replies: the resource and whether it was created.
macro_rules! created_into_wire {
    ($($domain:ty => $wire:ident . $field:ident),* $(,)?) => {$(
        impl IntoWire<pb::$wire> for ($domain, bool) {
            fn into_wire(self) -> pb::$wire {
                pb::$wire { $field: Some(self.0.into_wire()), created: self.1 }
            }
        }
    )*};
}

created_into_wire! {
    Workspace => GetOrCreateWorkspaceResponse.workspace,
    Peer => GetOrCreatePeerResponse.peer,
    Session => GetOrCreateSessionResponse.session,
    WebhookEndpoint => CreateWebhookResponse.webhook,
    Scope => GetOrCreateScopeResponse.scope,
}

impl IntoWire<pb::TestWebhookResponse> for u64 {
    fn into_wire(self) -> pb::TestWebhookResponse {
        pb::TestWebhookResponse {
            endpoints: i64::try_from(self).unwrap_or(i64::MAX),
        }
    }
}

impl IntoWire<pb::CreateMessagesResponse> for Vec<Message> {
    fn into_wire(self) -> pb::CreateMessagesResponse {
        pb::CreateMessagesResponse {
            messages: wire_list(self),
        }
    }
}

impl IntoWire<pb::UploadFileResponse> for Vec<Message> {
    fn into_wire(self) -> pb::UploadFileResponse {
        pb::UploadFileResponse {
            messages: wire_list(self),
        }
    }
}

impl IntoWire<pb::CreateConclusionsResponse> for Vec<Conclusion> {
    fn into_wire(self) -> pb::CreateConclusionsResponse {
        pb::CreateConclusionsResponse {
            conclusions: wire_list(self),
        }
    }
}

impl IntoWire<pb::QueryConclusionsResponse> for Vec<Conclusion> {
    fn into_wire(self) -> pb::QueryConclusionsResponse {
        pb::QueryConclusionsResponse {
            conclusions: wire_list(self),
        }
    }
}

impl IntoWire<pb::PeerCardResponse> for Option<Vec<String>> {
    fn into_wire(self) -> pb::PeerCardResponse {
        pb::PeerCardResponse {
            exists: self.is_some(),
            peer_card: self.unwrap_or_default(),
        }
    }
}

impl IntoWire<pb::SearchMessagesResponse> for SearchResults {
    fn into_wire(self) -> pb::SearchMessagesResponse {
        let lag = self.meaning_lag.unwrap_or_default();
        pb::SearchMessagesResponse {
            messages: wire_list(self.messages),
            mode: self.mode.name().to_owned(),
            degraded_reason: self.degraded_reason,
            matches: self
                .matches
                .into_iter()
                .map(|found| pb::SearchMatch {
                    message_id: found.message_id,
                    by_words: found.by_words,
                    by_meaning: found.by_meaning.is_some(),
                    passage: found.by_meaning.unwrap_or(0),
                })
                .collect(),
            unembedded_messages: lag.messages,
            unembedded_at_least: lag.at_least,
            meaning_lag_seconds: lag.seconds(roncho_core::model::now_micros()),
        }
    }
}

impl IntoWire<pb::SessionContext> for SessionContext {
    fn into_wire(self) -> pb::SessionContext {
        pb::SessionContext {
            id: self.id,
            messages: wire_list(self.messages),
            summary: self.summary.map(IntoWire::into_wire),
            peer_representation: self.representation,
            peer_card: self.peer_card.unwrap_or_default(),
            omitted_conclusions: self.omitted.conclusions,
            omitted_peer_card_lines: self.omitted.card_lines,
        }
    }
}

impl IntoWire<pb::SessionSummaries> for roncho_recall::SessionSummaries {
    fn into_wire(self) -> pb::SessionSummaries {
        pb::SessionSummaries {
            id: self.id,
            short_summary: self.short.map(IntoWire::into_wire),
            long_summary: self.long.map(IntoWire::into_wire),
        }
    }
}

impl IntoWire<pb::PeerContext> for roncho_recall::PeerContext {
    fn into_wire(self) -> pb::PeerContext {
        pb::PeerContext {
            peer_id: self.peer_id,
            target_id: self.target_id,
            representation: self.representation,
            peer_card: self.peer_card.unwrap_or_default(),
            omitted_conclusions: self.omitted.conclusions,
            omitted_peer_card_lines: self.omitted.card_lines,
        }
    }
}

impl IntoWire<pb::GetRepresentationResponse> for roncho_recall::Representation {
    fn into_wire(self) -> pb::GetRepresentationResponse {
        pb::GetRepresentationResponse {
            representation: self.markdown,
            omitted_conclusions: self.omitted.conclusions,
        }
    }
}

impl IntoWire<pb::ChatResponse> for roncho_dialectic::Answer {
    fn into_wire(self) -> pb::ChatResponse {
        pb::ChatResponse {
            content: self.content,
            evidence: self.evidence.map(IntoWire::into_wire),
        }
    }
}

impl IntoWire<pb::ChatStreamResponse> for roncho_dialectic::ChatPiece {
    fn into_wire(self) -> pb::ChatStreamResponse {
        pb::ChatStreamResponse {
            delta: self.delta,
            done: self.done,
            evidence: self.evidence.map(IntoWire::into_wire),
        }
    }
}

impl IntoWire<pb::RetryFailedWorkResponse> for u64 {
    fn into_wire(self) -> pb::RetryFailedWorkResponse {
        pb::RetryFailedWorkResponse {
            retried: i64::try_from(self).unwrap_or(i64::MAX),
        }
    }
}

impl IntoWire<pb::ScheduleDreamResponse> for bool {
    fn into_wire(self) -> pb::ScheduleDreamResponse {
        pb::ScheduleDreamResponse { scheduled: self }
    }
}

impl IntoWire<pb::AssignWorkspaceResponse> for Assigned {
    fn into_wire(self) -> pb::AssignWorkspaceResponse {
        pb::AssignWorkspaceResponse {
            workspace_id: self.workspace_id,
            tenant_id: self.tenant_id,
            previous_tenant_id: self.previous_tenant_id,
        }
    }
}

/// A listing's tenant is the gate's to set, never the client's.
impl FromWire<pb::ListWorkspacesRequest> for roncho_recall::ListWorkspaces {
    fn from_wire(wire: pb::ListWorkspacesRequest) -> Self {
        Self {
            filters: FromWire::from_wire(wire.filters),
            paging: roncho_recall::Paging {
                page: wire.page,
                size: wire.size,
                reverse: wire.reverse,
            },
            tenant: None,
        }
    }
}

impl IntoWire<pb::CreateKeyResponse> for IssuedKey {
    fn into_wire(self) -> pb::CreateKeyResponse {
        pb::CreateKeyResponse {
            key: self.key,
            expires_at: self.expires_at.map(timestamp),
        }
    }
}

fn mode(model: &Option<String>) -> pb::DerivationMode {
    match model {
        Some(_) => pb::DerivationMode::Llm,
        None => pb::DerivationMode::Extractive,
    }
}

impl IntoWire<pb::QueueStatus> for QueueReport {
    fn into_wire(self) -> pb::QueueStatus {
        let QueueReport {
            status,
            by_session,
            derivation,
            degraded,
            history,
        } = self;
        let counts = status.counts;
        let Derivation {
            observations,
            summaries,
        } = &derivation;
        let mut wire = pb::QueueStatus {
            total_work_units: counts.total,
            completed_work_units: counts.completed,
            in_progress_work_units: counts.in_progress,
            pending_work_units: counts.pending,
            failed_work_units: counts.failed,
            sessions: if by_session {
                status
                    .sessions
                    .into_iter()
                    .map(|(session_id, counts)| {
                        let entry = pb::SessionQueueStatus {
                            session_id: session_id.clone(),
                            total_work_units: counts.total,
                            completed_work_units: counts.completed,
                            in_progress_work_units: counts.in_progress,
                            pending_work_units: counts.pending,
                            failed_work_units: counts.failed,
                            postponed_work_units: counts.postponed,
                        };
                        (session_id, entry)
                    })
                    .collect()
            } else {
                HashMap::new()
            },
            failures: status
                .failures
                .into_iter()
                .map(|failure| pb::FailedWorkUnit {
                    task_type: task_type(&failure.work_unit_key).to_owned(),
                    work_unit_key: failure.work_unit_key,
                    attempts: i32::try_from(failure.attempts).unwrap_or(i32::MAX),
                    last_error: failure.last_error,
                })
                .collect(),
            postponed_work_units: counts.postponed,
            postponed: status
                .postponed
                .into_iter()
                .map(|task| pb::PostponedWorkUnit {
                    task_type: task_type(&task.work_unit_key).to_owned(),
                    work_unit_key: task.work_unit_key,
                    deferrals: i32::try_from(task.deferrals).unwrap_or(i32::MAX),
                    reason: task.reason,
                    retry_at: Some(timestamp(task.ready_at)),
                })
                .collect(),
            derivation_detail: derivation.describe(),
            dreams_waiting: status.dreams.waiting,
            dreams_ready: status.dreams.ready,
            oldest_dream_due_at: status.dreams.oldest_due_at.map(timestamp),
            degraded_reason: degraded,
            history: history
                .into_iter()
                .map(|sample| pb::QueueSample {
                    at: Some(timestamp(sample.at)),
                    waiting_work_units: sample.waiting,
                    done_work_units: sample.done,
                    latency_p50_ms: sample.latency_p50_ms,
                    latency_max_ms: sample.latency_max_ms,
                })
                .collect(),
            ..pb::QueueStatus::default()
        };
        wire.set_observation_mode(mode(observations));
        wire.set_summary_mode(mode(summaries));
        wire
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

    #[test]
    fn list_requests_carry_their_paging() {
        let request = roncho_recall::ListPeers::from_wire(pb::ListPeersRequest {
            workspace_id: "w".into(),
            filters: None,
            page: 3,
            size: 7,
            reverse: true,
            kind: "scope".into(),
        });
        assert_eq!((request.workspace_id.as_str(), request.kind.as_str()), ("w", "scope"));
        assert_eq!(
            (request.paging.page, request.paging.size, request.paging.reverse),
            (3, 7, true)
        );
    }
}
