//! The webhook lane: delivers the `webhook` tasks the queue holds (one per
//! endpoint and event, see roncho-store's `webhooks`), the event's
//! envelope, signed, to the endpoint's URL as it is now. A delivery that
//! fails fails its task, so the queue retries it with growing delays and,
//! after its attempts, keeps it dead with the error (queue status shows
//! both).
//!
//! Deliveries wait on receivers the workspaces chose, so they run in a
//! lane of their own, never in the derivation worker: one dispatcher
//! claims a unit whenever one of the lane's places is free and delivers it
//! in a task of its own, with at most so many deliveries in flight per
//! workspace and per receiver (`host:port`). A unit over either bound is
//! put back for a moment without spending an attempt, and the queue's
//! turns hand the dispatcher another workspace's: one tenant's slow
//! receivers delay neither another's derivation nor its webhooks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roncho_core::model::{PageRequest, WebhookEndpoint};
use roncho_core::queue::{Claim, Task, WorkQueue, workspace_of};
use roncho_core::store::Webhooks;
use roncho_core::validate::MAX_WEBHOOKS_PER_WORKSPACE;
use roncho_core::webhook::{WebhookDelivery, envelope, timestamp};
use roncho_core::{Error, Result};
use roncho_worker::WorkerConfig;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The task types the lane handles.
pub const TASK_TYPES: [&str; 1] = ["webhook"];

/// How many deliveries run at once, in a process and per workspace and receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LaneLimits {
    /// Loops delivering at once in the process.
    pub concurrency: usize,
    /// Deliveries in flight for one workspace.
    pub per_workspace: usize,
    /// Deliveries in flight to one receiver (`host:port`), whoever registered it.
    pub per_target: usize,
}

impl Default for LaneLimits {
    fn default() -> Self {
        Self {
            concurrency: 32,
            per_workspace: 2,
            per_target: 2,
        }
    }
}

/// How long a unit over a bound waits before it is looked at again.
const BUSY_RETRY: Duration = Duration::from_secs(1);

/// Delivers webhook events, apart from derivation.
pub struct WebhookLane {
    store: Arc<dyn Webhooks>,
    queue: Arc<dyn WorkQueue>,
    sender: Arc<dyn WebhookDelivery>,
    config: WorkerConfig,
    limits: LaneLimits,
    /// Deliveries in flight by workspace (`w:…`) and by receiver (`t:…`).
    busy: Mutex<HashMap<String, usize>>,
    wake: Notify,
}

impl std::fmt::Debug for WebhookLane {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("WebhookLane")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl WebhookLane {
    /// Returns the lane delivering with `sender` within `limits`; `config`
    /// is its loops' (its batch is one unit's first task).
    pub fn new(
        store: Arc<dyn Webhooks>,
        queue: Arc<dyn WorkQueue>,
        sender: Arc<dyn WebhookDelivery>,
        config: WorkerConfig,
        limits: LaneLimits,
    ) -> Self {
        let config = WorkerConfig {
            batch: 1,
            // A unit over a bound is looked at again soon; a receiver that
            // keeps failing spends attempts, as any failure does.
            outage_backoff: BUSY_RETRY,
            outage_backoff_max: BUSY_RETRY * 8,
            ..config
        };
        Self {
            store,
            queue,
            sender,
            config,
            limits,
            busy: Mutex::new(HashMap::new()),
            wake: Notify::new(),
        }
    }

    /// Wakes the lane when idle (new work was written).
    pub fn nudge(&self) {
        self.wake.notify_one();
    }

    /// Claims one unit and delivers it; returns whether there was one.
    pub async fn run_once(&self) -> Result<bool> {
        roncho_worker::run_once(self.queue.as_ref(), &self.config, self).await
    }

    /// Delivers until `shutdown`, up to the lane's concurrency at once:
    /// claims a unit whenever a place is free and delivers it in a task of
    /// its own; deliveries in hand are finished first. Idle, it looks for
    /// work once a poll (or when nudged).
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let limit = self.limits.concurrency.max(1);
        let mut running = tokio::task::JoinSet::new();
        let mut idle = false;
        while !shutdown.is_cancelled() {
            if !idle && running.len() < limit {
                // Claims, like every background worker's, let the process's writes pass.
                if let Some(yielding) = &self.config.yielding {
                    yielding.wait(&shutdown).await;
                }
                let claimed = self
                    .queue
                    .claim(
                        &self.config.worker_id,
                        &TASK_TYPES,
                        self.config.batch,
                        self.config.lease,
                    )
                    .await;
                match claimed {
                    Ok(Some(claim)) => {
                        let lane = self.clone();
                        running.spawn(async move {
                            let outcome =
                                roncho_worker::process(lane.queue.as_ref(), &lane.config, lane.as_ref(), &claim).await;
                            if let Err(error) = outcome {
                                tracing::error!(%error, "webhook lane: queue error");
                            }
                        });
                    }
                    Ok(None) => {
                        idle = true;
                        if let Some(yielding) = &self.config.yielding {
                            yielding.caught_up();
                        }
                    }
                    Err(error) => {
                        tracing::error!(%error, "webhook lane: queue error");
                        idle = true;
                    }
                }
                continue;
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                Some(_) = running.join_next(), if !running.is_empty() => {}
                () = self.wake.notified() => idle = false,
                () = self.queue.work_arrived() => idle = false,
                () = tokio::time::sleep(self.config.idle_poll), if idle => idle = false,
            }
        }
        while running.join_next().await.is_some() {}
    }

    /// Takes a place for a delivery of `workspace` to `target`, unless
    /// either is at its bound.
    fn take(&self, workspace: &str, target: &str) -> Option<Places<'_>> {
        let keys = [format!("w:{workspace}"), format!("t:{target}")];
        let mut busy = self.busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let at = |key: &String| busy.get(key).copied().unwrap_or(0);
        if at(&keys[0]) >= self.limits.per_workspace || at(&keys[1]) >= self.limits.per_target {
            return None;
        }
        for key in &keys {
            *busy.entry(key.clone()).or_default() += 1;
        }
        Some(Places { lane: self, keys })
    }
}

/// A delivery's places, given back when dropped.
struct Places<'a> {
    lane: &'a WebhookLane,
    keys: [String; 2],
}

impl Drop for Places<'_> {
    fn drop(&mut self) {
        let mut busy = self.lane.busy.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for key in &self.keys {
            if let Some(count) = busy.get_mut(key) {
                *count -= 1;
                if *count == 0 {
                    busy.remove(key);
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl roncho_worker::Handler for WebhookLane {
    fn task_types(&self) -> &[&'static str] {
        &TASK_TYPES
    }

    /// Delivers a claim's events (`webhook:{workspace}:{endpoint}`) in
    /// order; those delivered before one fails are completed at once, so
    /// the retry sends only the rest.
    async fn process(&self, claim: &Claim) -> Result<()> {
        let workspace = workspace_of(&claim.work_unit_key);
        let mut delivered = Vec::new();
        for task in &claim.tasks {
            let Some(endpoint) = endpoint_of(self.store.as_ref(), workspace, task).await? else {
                delivered.push(task.id);
                continue;
            };
            let Some(_places) = self.take(workspace, &target_of(&endpoint.url)) else {
                if !delivered.is_empty() {
                    self.queue.complete(claim, &delivered).await?;
                }
                // Not a failure: the unit waits its turn, spending no attempt.
                return Err(Error::Throttled {
                    reason: "this workspace's or this receiver's webhook deliveries are at their limit".to_owned(),
                    retry_after: BUSY_RETRY,
                });
            };
            if let Err(error) = deliver_to(self.sender.as_ref(), &endpoint, task).await {
                if !delivered.is_empty() {
                    self.queue.complete(claim, &delivered).await?;
                }
                return Err(error);
            }
            delivered.push(task.id);
        }
        Ok(())
    }
}

/// Returns the receiver a URL names, as `host:port`, for the per-receiver bound.
fn target_of(url: &str) -> String {
    roncho_core::validate::webhook_url("url", url, true)
        .map(|checked| format!("{}:{}", checked.host, checked.port))
        .unwrap_or_else(|_| url.to_owned())
}

/// Returns the endpoint a webhook task of `workspace` goes to; `None` when
/// it was deleted since the event was queued (the event is dropped).
async fn endpoint_of(store: &dyn Webhooks, workspace: &str, task: &Task) -> Result<Option<WebhookEndpoint>> {
    let endpoint_id = payload_field(task, "endpoint_id")?;
    let size = i32::try_from(MAX_WEBHOOKS_PER_WORKSPACE).unwrap_or(100);
    let endpoints = store
        .list_webhooks(workspace, PageRequest::from_wire(1, size, false)?)
        .await?;
    let endpoint = endpoints.items.into_iter().find(|endpoint| endpoint.id == endpoint_id);
    if endpoint.is_none() {
        tracing::info!(workspace, endpoint_id, "webhook endpoint deleted; event dropped");
    }
    Ok(endpoint)
}

fn payload_field<'a>(task: &'a Task, key: &str) -> Result<&'a str> {
    task.payload[key]
        .as_str()
        .ok_or_else(|| Error::Internal(format!("webhook task {} has no `{key}`", task.dedup_id)))
}

/// Delivers one webhook task to `endpoint`.
async fn deliver_to(sender: &dyn WebhookDelivery, endpoint: &WebhookEndpoint, task: &Task) -> Result<()> {
    let event_type = payload_field(task, "event_type")?;
    let at = task.payload["timestamp"].as_i64().unwrap_or_default();
    let body = envelope(event_type, &task.payload["data"], &timestamp(at));
    sender.deliver(&endpoint.url, &body).await.map_err(|error| {
        // Not an outage to wait out without limit: each failure spends an
        // attempt, and the endpoint's event dies after the last one.
        Error::FailedPrecondition(format!("webhook {event_type} to endpoint {}: {error}", endpoint.id))
    })?;
    tracing::debug!(
        workspace = endpoint.workspace_id,
        endpoint_id = endpoint.id,
        event_type,
        "webhook delivered"
    );
    Ok(())
}
