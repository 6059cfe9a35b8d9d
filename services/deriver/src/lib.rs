//! The deriver role: background derivation of observations and summaries,
//! and `roncho.v1.DeriverService` for queue status. The pipeline arrives with
//! the derivation milestone; until then `GetQueueStatus` answers
//! `UNIMPLEMENTED` rather than an empty, misleading status.

use roncho_core::rpc::{RpcResult, not_yet};
use roncho_proto::v1 as pb;
use roncho_proto::v1::deriver_service_server::DeriverService;
use tonic::Request;

/// Serves `DeriverService`.
#[derive(Debug, Clone, Default)]
pub struct Deriver;

#[tonic::async_trait]
impl DeriverService for Deriver {
    async fn get_queue_status(&self, _: Request<pb::GetQueueStatusRequest>) -> RpcResult<pb::QueueStatus> {
        not_yet("GetQueueStatus")
    }
}
