//! The recall role: `roncho.v1.RecallService`, every read.
//!
//! Lists, lookups and filters work now; search, context, representations,
//! peer cards and conclusions arrive with the recall milestone and answer
//! `UNIMPLEMENTED` until then.

use std::sync::Arc;

use roncho_core::convert::{PageParts, page_parts};
use roncho_core::filter::{self, Filter, Schema};
use roncho_core::json::struct_to_json;
use roncho_core::model::PageRequest;
use roncho_core::rpc::{RpcResult, not_yet, reply};
use roncho_core::store::Store;
use roncho_core::{Result, validate};
use roncho_proto::v1 as pb;
use roncho_proto::v1::recall_service_server::RecallService;
use tonic::Request;

/// Serves `RecallService` over a store.
#[derive(Clone)]
pub struct Recall {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for Recall {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Recall").finish_non_exhaustive()
    }
}

impl Recall {
    /// Returns the recall service over `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }
}

fn parse_filters(schema: &Schema, filters: Option<prost_types::Struct>) -> Result<Filter> {
    let object = filters.map(|fields| struct_to_json(&fields));
    filter::parse(schema, object.as_ref())
}

/// Builds a paged response message from a domain page.
macro_rules! paged_response {
    ($response:ident, $page:expr) => {{
        let PageParts {
            items,
            total,
            page,
            size,
            pages,
        } = page_parts($page);
        pb::$response {
            items,
            total,
            page,
            size,
            pages,
        }
    }};
}

#[tonic::async_trait]
impl RecallService for Recall {
    async fn list_workspaces(
        &self,
        request: Request<pb::ListWorkspacesRequest>,
    ) -> RpcResult<pb::ListWorkspacesResponse> {
        let request = request.into_inner();
        reply(
            async {
                let filter = parse_filters(&filter::WORKSPACE, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListWorkspacesResponse,
                    self.store.list_workspaces(&filter, page).await?
                ))
            }
            .await,
        )
    }

    async fn list_peers(&self, request: Request<pb::ListPeersRequest>) -> RpcResult<pb::ListPeersResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let filter = parse_filters(&filter::PEER, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListPeersResponse,
                    self.store.list_peers(&workspace_id, &filter, page).await?
                ))
            }
            .await,
        )
    }

    async fn list_sessions(&self, request: Request<pb::ListSessionsRequest>) -> RpcResult<pb::ListSessionsResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let filter = parse_filters(&filter::SESSION, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListSessionsResponse,
                    self.store.list_sessions(&workspace_id, &filter, page).await?
                ))
            }
            .await,
        )
    }

    async fn list_peer_sessions(
        &self,
        request: Request<pb::ListPeerSessionsRequest>,
    ) -> RpcResult<pb::ListSessionsResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let peer_id = validate::reference_id("peer_id", &request.peer_id)?;
                let filter = parse_filters(&filter::SESSION, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                let sessions = self
                    .store
                    .list_peer_sessions(&workspace_id, &peer_id, &filter, page)
                    .await?;
                Ok(paged_response!(ListSessionsResponse, sessions))
            }
            .await,
        )
    }

    async fn list_session_peers(
        &self,
        request: Request<pb::ListSessionPeersRequest>,
    ) -> RpcResult<pb::ListPeersResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListPeersResponse,
                    self.store.list_session_peers(&workspace_id, &session_id, page).await?
                ))
            }
            .await,
        )
    }

    async fn get_session_peer_config(
        &self,
        request: Request<pb::GetSessionPeerConfigRequest>,
    ) -> RpcResult<pb::SessionPeerConfig> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let peer_id = validate::reference_id("peer_id", &request.peer_id)?;
                Ok(self
                    .store
                    .get_session_peer_config(&workspace_id, &session_id, &peer_id)
                    .await?
                    .into())
            }
            .await,
        )
    }

    async fn list_messages(&self, request: Request<pb::ListMessagesRequest>) -> RpcResult<pb::ListMessagesResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let filter = parse_filters(&filter::MESSAGE, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListMessagesResponse,
                    self.store
                        .list_messages(&workspace_id, &session_id, &filter, page)
                        .await?
                ))
            }
            .await,
        )
    }

    async fn get_message(&self, request: Request<pb::GetMessageRequest>) -> RpcResult<pb::Message> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let id = validate::reference_id("message_id", &request.message_id)?;
                Ok(self.store.get_message(&workspace_id, &session_id, &id).await?.into())
            }
            .await,
        )
    }

    async fn search_messages(&self, _: Request<pb::SearchMessagesRequest>) -> RpcResult<pb::SearchMessagesResponse> {
        not_yet("SearchMessages")
    }

    async fn get_session_context(&self, _: Request<pb::GetSessionContextRequest>) -> RpcResult<pb::SessionContext> {
        not_yet("GetSessionContext")
    }

    async fn get_session_summaries(
        &self,
        _: Request<pb::GetSessionSummariesRequest>,
    ) -> RpcResult<pb::SessionSummaries> {
        not_yet("GetSessionSummaries")
    }

    async fn get_peer_context(&self, _: Request<pb::GetPeerContextRequest>) -> RpcResult<pb::PeerContext> {
        not_yet("GetPeerContext")
    }

    async fn get_representation(
        &self,
        _: Request<pb::GetRepresentationRequest>,
    ) -> RpcResult<pb::GetRepresentationResponse> {
        not_yet("GetRepresentation")
    }

    async fn get_peer_card(&self, _: Request<pb::GetPeerCardRequest>) -> RpcResult<pb::PeerCardResponse> {
        not_yet("GetPeerCard")
    }

    async fn list_conclusions(&self, _: Request<pb::ListConclusionsRequest>) -> RpcResult<pb::ListConclusionsResponse> {
        not_yet("ListConclusions")
    }

    async fn query_conclusions(
        &self,
        _: Request<pb::QueryConclusionsRequest>,
    ) -> RpcResult<pb::QueryConclusionsResponse> {
        not_yet("QueryConclusions")
    }

    async fn list_webhooks(&self, request: Request<pb::ListWebhooksRequest>) -> RpcResult<pb::ListWebhooksResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let page = PageRequest::from_wire(request.page, request.size, false)?;
                Ok(paged_response!(
                    ListWebhooksResponse,
                    self.store.list_webhooks(&workspace_id, page).await?
                ))
            }
            .await,
        )
    }
}
