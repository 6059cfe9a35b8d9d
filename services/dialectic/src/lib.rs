//! The dialectic role: `roncho.v1.DialecticService`, natural-language answers
//! about a peer. The agent arrives with the dialectic milestone; until then
//! both RPCs answer `UNIMPLEMENTED` with the reason.

use roncho_core::rpc::{RpcResult, not_yet};
use roncho_proto::v1 as pb;
use roncho_proto::v1::dialectic_service_server::DialecticService;
use tonic::{Request, Status};

/// Serves `DialecticService`.
#[derive(Debug, Clone, Default)]
pub struct Dialectic;

#[tonic::async_trait]
impl DialecticService for Dialectic {
    type ChatStreamStream = futures::stream::BoxStream<'static, Result<pb::ChatStreamResponse, Status>>;

    async fn chat(&self, _: Request<pb::ChatRequest>) -> RpcResult<pb::ChatResponse> {
        not_yet("Chat")
    }

    async fn chat_stream(&self, _: Request<pb::ChatRequest>) -> RpcResult<Self::ChatStreamStream> {
        not_yet("ChatStream")
    }
}
