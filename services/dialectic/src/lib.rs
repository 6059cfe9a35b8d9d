//! The dialectic role: `roncho.v1.DialecticService`, natural-language answers
//! about a peer. The agent arrives with the dialectic milestone; until then
//! both RPCs answer `UNIMPLEMENTED` with the reason.

use roncho_core::Error;
use roncho_proto::v1 as pb;
use roncho_proto::v1::dialectic_service_server::DialecticService;
use tonic::{Request, Response, Status};

/// Serves `DialecticService`.
#[derive(Debug, Clone, Default)]
pub struct Dialectic;

#[tonic::async_trait]
impl DialecticService for Dialectic {
    type ChatStreamStream = futures::stream::BoxStream<'static, Result<pb::ChatStreamResponse, Status>>;

    async fn chat(&self, _: Request<pb::ChatRequest>) -> Result<Response<pb::ChatResponse>, Status> {
        Err(Error::Unimplemented("Chat").into())
    }

    async fn chat_stream(&self, _: Request<pb::ChatRequest>) -> Result<Response<Self::ChatStreamStream>, Status> {
        Err(Error::Unimplemented("ChatStream").into())
    }
}
