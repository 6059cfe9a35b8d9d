//! The dreamer role: consolidation of observations into deductions, patterns
//! and peer cards, and `roncho.v1.DreamerService`. The dreamer arrives with
//! the dialectic and dreamer milestone; until then `ScheduleDream` answers
//! `UNIMPLEMENTED`.

use roncho_core::rpc::{RpcResult, not_yet};
use roncho_proto::v1 as pb;
use roncho_proto::v1::dreamer_service_server::DreamerService;
use tonic::Request;

/// Serves `DreamerService`.
#[derive(Debug, Clone, Default)]
pub struct Dreamer;

#[tonic::async_trait]
impl DreamerService for Dreamer {
    async fn schedule_dream(&self, _: Request<pb::ScheduleDreamRequest>) -> RpcResult<pb::ScheduleDreamResponse> {
        not_yet("ScheduleDream")
    }
}
