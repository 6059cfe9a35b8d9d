//! The deriver role: background derivation of observations and summaries,
//! and `roncho.v1.DeriverService` for queue status.
//!
//! Writing messages enqueues their work (representation and summary tasks,
//! by Honcho's observer rules) in the same transaction; the [`worker`]
//! processes it and `GetQueueStatus` reports the queue.

use std::sync::Arc;

pub mod runner;
pub mod worker;

use roncho_core::queue::{Counts, QueueStatus, StatusFilter, WorkQueue, task_type};
use roncho_core::rpc::{RpcResult, reply};
use roncho_core::{Error, Result, validate};
use roncho_proto::v1 as pb;
use roncho_proto::v1::deriver_service_server::DeriverService;
use tonic::Request;

/// How the deriver works, for queue status.
#[derive(Debug, Clone, PartialEq)]
pub struct Derivation {
    /// The deriver's model, `None`: extractive observations.
    pub observations: Option<String>,
    /// The summariser's model, `None`: extractive summaries.
    pub summaries: Option<String>,
}

impl Derivation {
    /// Says which models run, or that the work is extractive.
    pub fn describe(&self) -> String {
        match (&self.observations, &self.summaries) {
            (None, None) => {
                "extractive (no LLM configured): observations quote the messages, summaries list the turns".to_owned()
            }
            (observations, summaries) => {
                let name = |model: &Option<String>| model.clone().unwrap_or_else(|| "extractive".to_owned());
                format!("observations: {}; summaries: {}", name(observations), name(summaries))
            }
        }
    }
}

fn mode(model: &Option<String>) -> pb::DerivationMode {
    match model {
        Some(_) => pb::DerivationMode::Llm,
        None => pb::DerivationMode::Extractive,
    }
}

/// Serves `DeriverService`.
#[derive(Clone)]
pub struct Deriver {
    queue: Option<Arc<dyn WorkQueue>>,
    derivation: Derivation,
}

impl std::fmt::Debug for Deriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deriver").field("queue", &self.queue.is_some()).finish()
    }
}

impl Deriver {
    /// Returns the service over `queue`; without one, status calls fail
    /// with `FAILED_PRECONDITION` saying so.
    pub fn new(queue: Option<Arc<dyn WorkQueue>>, derivation: Derivation) -> Self {
        Self { queue, derivation }
    }

    async fn queue_status(&self, request: pb::GetQueueStatusRequest) -> Result<pb::QueueStatus> {
        let optional = |field: &str, value: Option<String>| {
            value
                .filter(|value| !value.is_empty())
                .map(|value| validate::reference_id(field, &value))
                .transpose()
        };
        let filter = StatusFilter {
            workspace_id: validate::reference_id("workspace_id", &request.workspace_id)?,
            session_id: optional("session_id", request.session_id)?,
            observer_id: optional("observer_id", request.observer_id)?,
            sender_id: optional("sender_id", request.sender_id)?,
        };
        let queue = self.queue.as_ref().ok_or_else(|| {
            Error::FailedPrecondition("this process has no work queue configured (see roncho status)".into())
        })?;
        let by_session = filter.session_id.is_none();
        let mut status = to_proto(queue.status(&filter).await?, by_session);
        status.set_observation_mode(mode(&self.derivation.observations));
        status.set_summary_mode(mode(&self.derivation.summaries));
        status.derivation_detail = self.derivation.describe();
        Ok(status)
    }
}

fn to_proto(status: QueueStatus, by_session: bool) -> pb::QueueStatus {
    let Counts {
        total,
        completed,
        in_progress,
        pending,
        failed,
    } = status.counts;
    pb::QueueStatus {
        total_work_units: total,
        completed_work_units: completed,
        in_progress_work_units: in_progress,
        pending_work_units: pending,
        failed_work_units: failed,
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
                    };
                    (session_id, entry)
                })
                .collect()
        } else {
            Default::default()
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
        ..pb::QueueStatus::default()
    }
}

#[tonic::async_trait]
impl DeriverService for Deriver {
    async fn get_queue_status(&self, request: Request<pb::GetQueueStatusRequest>) -> RpcResult<pb::QueueStatus> {
        reply(self.queue_status(request.into_inner()).await)
    }
}
