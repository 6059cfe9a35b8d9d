//! The deriver role: background derivation of observations and summaries,
//! and queue status ([`DeriverApi`]).
//!
//! Writing messages enqueues their work (representation and summary tasks,
//! by Honcho's observer rules) in the same transaction; the [`worker`]
//! processes it and `GetQueueStatus` reports the queue. The same worker
//! carries large erasures on; webhook events have a lane of their own
//! ([`webhooks`]).

use std::sync::Arc;

mod dedup;
mod extractive;
pub mod webhooks;
pub mod worker;

use roncho_core::queue::{QueueSample, QueueStatus, RetryFilter, StatusFilter, WorkQueue};
use roncho_core::store::DerivationHealth;
use roncho_core::{Error, Result, validate};

/// How the deriver works, for queue status.
#[derive(Debug, Clone, Default, PartialEq)]
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

/// Names a workspace's queue, narrowed to a session, observer or sender.
#[derive(Debug, Clone, Default)]
pub struct GetQueueStatus {
    pub workspace_id: String,
    pub observer_id: Option<String>,
    pub sender_id: Option<String>,
    pub session_id: Option<String>,
    /// Also the last hour, minute by minute ([`QueueReport::history`]).
    pub include_history: bool,
}

/// The window and steps of a queue status' history: the last hour, by minute.
pub const HISTORY_WINDOW: std::time::Duration = std::time::Duration::from_secs(3600);
pub const HISTORY_STEPS: usize = 60;

/// Queue status and how the deriver works.
#[derive(Debug, Clone)]
pub struct QueueReport {
    pub status: QueueStatus,
    /// Whether per-session counts are reported (not when filtered by session).
    pub by_session: bool,
    pub derivation: Derivation,
    /// Why the workspace's derivations are degraded (they keep giving no
    /// observations), `None` while they are not.
    pub degraded: Option<String>,
    /// The last hour by minute, oldest first, when asked for: what waited,
    /// what was done and how long it took.
    pub history: Vec<QueueSample>,
}

/// Names dead work to run again: a workspace's, narrowed to a session or a task type.
#[derive(Debug, Clone, Default)]
pub struct RetryFailedWork {
    pub workspace_id: String,
    pub session_id: Option<String>,
    pub task_type: Option<String>,
}

/// Queue status and dead work, as every edge calls them.
#[async_trait::async_trait]
pub trait DeriverApi: Send + Sync {
    async fn get_queue_status(&self, request: GetQueueStatus) -> Result<QueueReport>;
    /// Returns how many dead tasks run again.
    async fn retry_failed_work(&self, request: RetryFailedWork) -> Result<u64>;
}

/// The queue status service.
#[derive(Clone)]
pub struct Deriver {
    queue: Option<Arc<dyn WorkQueue>>,
    derivation: Derivation,
    health: Option<Arc<dyn DerivationHealth>>,
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
        Self {
            queue,
            derivation,
            health: None,
        }
    }

    /// Reports whether each workspace's derivations are degraded, as the
    /// deriver workers record them.
    pub fn with_health(mut self, health: Arc<dyn DerivationHealth>) -> Self {
        self.health = Some(health);
        self
    }
}

#[async_trait::async_trait]
impl DeriverApi for Deriver {
    async fn get_queue_status(&self, request: GetQueueStatus) -> Result<QueueReport> {
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
        let degraded = match &self.health {
            Some(health) => health
                .derivation_health(&filter.workspace_id)
                .await?
                .and_then(|record| record.degraded()),
            None => None,
        };
        let history = match request.include_history {
            true => queue.history(&filter, HISTORY_WINDOW, HISTORY_STEPS).await?,
            false => Vec::new(),
        };
        Ok(QueueReport {
            status: queue.status(&filter).await?,
            by_session,
            derivation: self.derivation.clone(),
            degraded,
            history,
        })
    }

    async fn retry_failed_work(&self, request: RetryFailedWork) -> Result<u64> {
        let filter = RetryFilter {
            workspace_id: validate::reference_id("workspace_id", &request.workspace_id)?,
            session_id: request
                .session_id
                .filter(|id| !id.is_empty())
                .map(|id| validate::reference_id("session_id", &id))
                .transpose()?,
            task_type: match request.task_type.filter(|kind| !kind.is_empty()) {
                Some(kind) if roncho_core::queue::TASK_TYPES.contains(&kind.as_str()) || kind == "dream" => Some(kind),
                Some(kind) => {
                    return Err(Error::invalid(
                        "task_type",
                        format!("`{kind}` is not representation, summary or dream"),
                    ));
                }
                None => None,
            },
        };
        let queue = self.queue.as_ref().ok_or_else(|| {
            Error::FailedPrecondition("this process has no work queue configured (see roncho status)".into())
        })?;
        let retried = queue.retry_dead(&filter).await?;
        tracing::info!(
            workspace = %filter.workspace_id,
            session = ?filter.session_id,
            task_type = ?filter.task_type,
            retried,
            "dead work runs again"
        );
        Ok(retried)
    }
}
