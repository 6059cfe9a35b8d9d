//! The dreamer role: consolidation of what the deriver wrote. A dream is
//! work on the queue (`dream:{type}:{workspace}:{observer}:{observed}`, at
//! most one pending per key), so dreams scale and survive crashes like the
//! rest of the pipeline; [`worker`] runs them. `DreamerService.ScheduleDream`
//! asks for one.

use std::sync::Arc;

pub mod worker;

use roncho_core::queue::{NewTask, WorkQueue};
use roncho_core::rpc::{RpcResult, reply};
use roncho_core::store::Store;
use roncho_core::{Error, Result, validate};
use roncho_proto::v1 as pb;
use roncho_proto::v1::dreamer_service_server::DreamerService;
use serde_json::json;
use tonic::Request;

/// Dream types.
pub const DREAM_TYPES: [&str; 2] = ["omni", "card_refresh"];

/// A dream to schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct DreamRequest {
    pub workspace: String,
    pub observer: String,
    pub observed: String,
    pub dream_type: String,
    pub session: Option<String>,
    pub rebuild: bool,
    /// Why (logged and kept in the task): `manual`, `threshold`, ...
    pub reason: String,
}

/// Returns the work unit key of a dream.
pub fn dream_key(request: &DreamRequest) -> String {
    format!(
        "dream:{}:{}:{}:{}",
        request.dream_type, request.workspace, request.observer, request.observed
    )
}

/// Enqueues a dream; `false` when one of this key is already pending.
pub async fn schedule(queue: &dyn WorkQueue, request: &DreamRequest) -> Result<bool> {
    let key = dream_key(request);
    let added = queue
        .enqueue(vec![NewTask {
            dedup_id: format!("{key}#{}", nanoid::nanoid!()),
            work_unit_key: key,
            workspace_id: request.workspace.clone(),
            session_id: request.session.clone(),
            observer_id: Some(request.observer.clone()),
            sender_id: None,
            payload: json!({
                "dream_type": request.dream_type,
                "observer": request.observer,
                "observed": request.observed,
                "session_name": request.session,
                "rebuild": request.rebuild,
                "trigger_reason": request.reason,
            }),
        }])
        .await?;
    Ok(added == 1)
}

/// Serves `DreamerService`.
#[derive(Clone)]
pub struct Dreamer {
    store: Arc<dyn Store>,
    queue: Option<Arc<dyn WorkQueue>>,
    /// The dream model's id; `None`: dreams cannot run.
    model: Option<String>,
}

impl std::fmt::Debug for Dreamer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Dreamer")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Dreamer {
    pub fn new(store: Arc<dyn Store>, queue: Option<Arc<dyn WorkQueue>>, model: Option<String>) -> Self {
        Self { store, queue, model }
    }

    async fn schedule_dream(&self, request: pb::ScheduleDreamRequest) -> Result<pb::ScheduleDreamResponse> {
        let workspace = validate::reference_id("workspace_id", &request.workspace_id)?;
        let observer = validate::reference_id("observer", &request.observer)?;
        let observed = match request.observed.filter(|observed| !observed.is_empty()) {
            Some(observed) => validate::reference_id("observed", &observed)?,
            None => observer.clone(),
        };
        let dream_type = match request.dream_type.as_str() {
            "" | "omni" => "omni",
            "card_refresh" => "card_refresh",
            other => {
                return Err(Error::invalid(
                    "dream_type",
                    format!("`{other}` is not omni or card_refresh"),
                ));
            }
        };
        if request.rebuild && dream_type != "card_refresh" {
            return Err(Error::invalid("rebuild", "applies to card_refresh dreams only"));
        }
        let session = match request.session_id.filter(|session| !session.is_empty()) {
            Some(session) => Some(validate::reference_id("session_id", &session)?),
            None => None,
        };
        let queue = self.queue.as_ref().ok_or_else(|| {
            Error::FailedPrecondition("this process has no work queue configured (see roncho status)".into())
        })?;
        if self.model.is_none() {
            return Err(Error::FailedPrecondition(
                "dreams need an LLM and none is configured for the dreamer (dream_model or llm_model)".into(),
            ));
        }
        // Both peers must exist: NOT_FOUND names the missing one.
        self.store.dream_state(&workspace, &observer, &observed).await?;
        for peer in [&observer, &observed] {
            self.store.get_peer_card(&workspace, peer, peer).await?;
        }
        let scheduled = schedule(
            queue.as_ref(),
            &DreamRequest {
                workspace,
                observer,
                observed,
                dream_type: dream_type.to_owned(),
                session,
                rebuild: request.rebuild,
                reason: "manual".into(),
            },
        )
        .await?;
        Ok(pb::ScheduleDreamResponse { scheduled })
    }
}

#[tonic::async_trait]
impl DreamerService for Dreamer {
    async fn schedule_dream(&self, request: Request<pb::ScheduleDreamRequest>) -> RpcResult<pb::ScheduleDreamResponse> {
        reply(self.schedule_dream(request.into_inner()).await)
    }
}
