//! The loop every background worker runs (the deriver, the dreamer): claim
//! a work unit of its task types, process it while renewing the lease,
//! complete it or record the failure (retried with growing delays, dead
//! after the allowed attempts), and wait for more when idle.
//!
//! Shared by the worker roles, so none of them imports another; so is
//! [`yielding`], how background work lets the writes of its process pass.

use std::collections::BTreeSet;
use std::time::Duration;

use roncho_core::Result;
use roncho_core::queue::{Claim, WorkQueue, task_type};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub mod yielding;

/// Worker settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Names this worker in leases and logs.
    pub worker_id: String,
    /// Items taken per claim: tasks, counting a representation task's
    /// messages (at least one task).
    pub batch: usize,
    pub lease: Duration,
    /// How long an idle worker waits before looking again (a nudge wakes it sooner).
    pub idle_poll: Duration,
    /// Attempts before a task is dead.
    pub max_attempts: i64,
    /// Done tasks are kept this long (status counts them), dead ones `keep_dead`.
    pub keep_done: Duration,
    pub keep_dead: Duration,
    /// Wait before a failed task is retried, times its attempts.
    pub retry_after: Duration,
    /// First wait after an outage (a model unavailable, rate limited, timed
    /// out); it doubles with each postponement of the task, with jitter.
    pub outage_backoff: Duration,
    /// Longest wait after an outage, and the most a provider's
    /// `Retry-After` is honoured.
    pub outage_backoff_max: Duration,
    /// The writes of its process the worker lets pass before each claim.
    pub yielding: Option<std::sync::Arc<yielding::YieldToWrites>>,
}

/// A worker id no other process has: `{kind}-{pid}-{random}`. Leases are
/// given back by owner at shutdown, and in containers every process is PID 1.
pub fn unique_worker_id(kind: &str) -> String {
    format!("{kind}-{}-{}", std::process::id(), roncho_core::model::new_public_id())
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            worker_id: unique_worker_id("deriver"),
            batch: 32,
            lease: Duration::from_secs(60),
            idle_poll: Duration::from_secs(1),
            max_attempts: 5,
            keep_done: Duration::from_secs(7 * 24 * 3600),
            keep_dead: Duration::from_secs(30 * 24 * 3600),
            retry_after: Duration::from_secs(5),
            outage_backoff: Duration::from_secs(5),
            outage_backoff_max: Duration::from_secs(300),
            yielding: None,
        }
    }
}

/// Told when a collection gained observations (the deriver tells the dream scheduler).
#[async_trait::async_trait]
pub trait CollectionListener: Send + Sync {
    /// `observer`'s collection about `observed` has new observations.
    async fn gained(&self, workspace: &str, observer: &str, observed: &str);
}

/// How often a worker purges finished tasks past their retention.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// What a worker does with the work units it claims.
#[async_trait::async_trait]
pub trait Handler: Send + Sync {
    /// The task types it claims.
    fn task_types(&self) -> &[&'static str];
    /// Processes a claimed unit's tasks; an error fails them all (retried).
    async fn process(&self, claim: &Claim) -> Result<()>;
}

/// Claims one work unit and processes it; returns whether there was one.
pub async fn run_once(queue: &dyn WorkQueue, config: &WorkerConfig, handler: &dyn Handler) -> Result<bool> {
    let Some(claim) = queue
        .claim(&config.worker_id, handler.task_types(), config.batch, config.lease)
        .await?
    else {
        return Ok(false);
    };
    process(queue, config, handler, &claim).await.map(|()| true)
}

/// Processes a claimed unit in its span (the trace of the request that
/// enqueued it), renewing its lease, then completes it or records the
/// failure: what [`run_once`] does after its claim, for a caller that
/// claims itself (several units at once).
pub async fn process(queue: &dyn WorkQueue, config: &WorkerConfig, handler: &dyn Handler, claim: &Claim) -> Result<()> {
    let span = work_span(claim, &config.worker_id);
    let outcome = process_claimed(queue, config, handler, claim)
        .instrument(span.clone())
        .await;
    if outcome.is_err() {
        span.record("otel.status_code", "error");
    }
    outcome
}

/// Returns the span of a claim's processing: a child of the trace of the
/// request that enqueued its first task, linked to the other tasks' traces.
fn work_span(claim: &Claim, worker_id: &str) -> tracing::Span {
    let span = tracing::info_span!(
        "process work",
        otel.kind = "consumer",
        otel.status_code = tracing::field::Empty,
        work_unit_key = %claim.work_unit_key,
        task_type = task_type(&claim.work_unit_key),
        tasks = claim.tasks.len(),
        worker = worker_id,
    );
    let mut seen = BTreeSet::new();
    let mut traces = claim
        .tasks
        .iter()
        .filter_map(|task| task.trace.as_ref())
        .filter(|trace| seen.insert(trace.traceparent.as_str()));
    if let Some(parent) = traces.next() {
        parent.set_parent_of(&span);
    }
    for other in traces {
        other.link_from(&span);
    }
    span
}

/// Processes a claimed unit while renewing its lease, then completes it or
/// records the failure, and gives the unit back.
async fn process_claimed(
    queue: &dyn WorkQueue,
    config: &WorkerConfig,
    handler: &dyn Handler,
    claim: &Claim,
) -> Result<()> {
    // Renew the lease every third of it while the work runs (LLM calls can
    // be long). The renewals run beside the work, both polled: a renewal
    // that waits for the store's writer, which the work may hold in the
    // middle of a transaction (SQLite has one), must not stop the work from
    // finishing that transaction.
    let renewals = async {
        let mut heartbeat = tokio::time::interval(config.lease / 3);
        heartbeat.tick().await;
        loop {
            heartbeat.tick().await;
            if let Err(error) = queue.renew(claim, config.lease).await {
                tracing::warn!(work_unit = %claim.work_unit_key, %error, "could not renew the lease");
            }
        }
    };
    // The server's own work makes no workspace or peer: one erased while
    // it ran stays erased.
    let work = roncho_core::store::creating_as(Some(roncho_core::store::Creator::Work), handler.process(claim));
    let outcome = tokio::select! {
        outcome = work => outcome,
        never = renewals => never,
    };
    let ids: Vec<i64> = claim.tasks.iter().map(|task| task.id).collect();
    match outcome {
        Ok(()) => queue.complete(claim, &ids).await?,
        Err(error) if is_outage(&error) => {
            let deferrals = claim.tasks.first().map_or(0, |task| task.deferrals);
            let delay = outage_delay(config, deferrals, &error);
            if matches!(error, roncho_core::Error::Throttled { .. }) {
                // A limit doing its work (a busy receiver, a rate), not an outage.
                tracing::debug!(work_unit = %claim.work_unit_key, %error, retry_in = ?delay, "work waits its turn");
            } else {
                tracing::warn!(
                    work_unit = %claim.work_unit_key,
                    %error,
                    deferrals,
                    retry_in = ?delay,
                    "an outage stopped the work; postponed without spending an attempt"
                );
            }
            queue.defer(claim, &ids, &error.to_string(), delay).await?;
        }
        Err(error) => {
            tracing::warn!(work_unit = %claim.work_unit_key, %error, "work failed; will retry");
            tracing::Span::current().record("otel.status_code", "error");
            let attempts = claim.tasks.first().map_or(0, |task| task.attempts);
            let retry_after = config.retry_after * u32::try_from(attempts + 1).unwrap_or(u32::MAX);
            queue
                .fail(claim, &ids, &error.to_string(), retry_after, config.max_attempts)
                .await?;
        }
    }
    queue.release(claim).await?;
    Ok(())
}

/// Whether a failure is an outage to wait out (a model or dependency that
/// is unavailable, rate limited or too slow) rather than one the work or
/// its data caused, which spends an attempt.
pub fn is_outage(error: &roncho_core::Error) -> bool {
    use roncho_core::Error;
    matches!(
        error,
        Error::Unavailable(_) | Error::ResourceExhausted(_) | Error::Throttled { .. } | Error::DeadlineExceeded(_)
    )
}

/// How long to wait after the `deferrals`-th outage: the backoff doubled per
/// postponement, jittered by ±25 %, at least what the provider asked for
/// (`Retry-After`), at most `outage_backoff_max`.
fn outage_delay(config: &WorkerConfig, deferrals: i64, error: &roncho_core::Error) -> Duration {
    let doubled = config
        .outage_backoff
        .saturating_mul(1u32 << deferrals.clamp(0, 16))
        .min(config.outage_backoff_max);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    let jitter = 0.75 + f64::from(nanos % 1_000) / 2_000.0;
    let asked = match error {
        roncho_core::Error::Throttled { retry_after, .. } => *retry_after,
        _ => Duration::ZERO,
    };
    doubled.mul_f64(jitter).max(asked).min(config.outage_backoff_max)
}

/// Processes work until `shutdown`; a unit in hand is finished first.
pub async fn run(
    queue: &dyn WorkQueue,
    config: &WorkerConfig,
    handler: &dyn Handler,
    wake: &Notify,
    shutdown: CancellationToken,
) {
    let mut purged_at = tokio::time::Instant::now();
    while !shutdown.is_cancelled() {
        if purged_at.elapsed() >= PURGE_EVERY {
            purged_at = tokio::time::Instant::now();
            match queue.purge(config.keep_done, config.keep_dead).await {
                Ok(0) => {}
                Ok(purged) => tracing::info!(purged, "purged finished work"),
                Err(error) => tracing::warn!(%error, "purging finished work failed"),
            }
        }
        if let Some(yielding) = &config.yielding {
            yielding.wait(&shutdown).await;
        }
        match run_once(queue, config, handler).await {
            Ok(true) => continue,
            Ok(false) => {
                // Nothing to claim: the next burst of writes gets a fresh budget.
                if let Some(yielding) = &config.yielding {
                    yielding.caught_up();
                }
            }
            Err(error) => tracing::error!(%error, worker = %config.worker_id, "worker: queue error"),
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = wake.notified() => {}
            () = queue.work_arrived() => {}
            () = tokio::time::sleep(config.idle_poll) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roncho_core::Error;

    #[test]
    fn outages_wait_longer_each_time_within_the_cap_and_honour_retry_after() {
        let config = WorkerConfig::default();
        let unavailable = Error::Unavailable("HTTP 503".into());
        let first = outage_delay(&config, 0, &unavailable);
        assert!(
            first >= Duration::from_millis(3_750) && first <= Duration::from_millis(6_250),
            "{first:?}"
        );
        let fourth = outage_delay(&config, 3, &unavailable);
        assert!(
            fourth >= Duration::from_secs(30) && fourth <= Duration::from_secs(50),
            "{fourth:?}"
        );
        assert!(outage_delay(&config, 40, &unavailable) <= config.outage_backoff_max);
        let asked = Error::Throttled {
            reason: "rate limited".into(),
            retry_after: Duration::from_secs(120),
        };
        assert!(
            outage_delay(&config, 0, &asked) >= Duration::from_secs(120),
            "Retry-After honoured"
        );
        let greedy = Error::Throttled {
            reason: "rate limited".into(),
            retry_after: Duration::from_secs(86_400),
        };
        assert_eq!(
            outage_delay(&config, 0, &greedy),
            config.outage_backoff_max,
            "up to the cap"
        );
        assert!(is_outage(&unavailable) && is_outage(&asked));
        assert!(!is_outage(&Error::Internal("malformed reply".into())));
        assert!(!is_outage(&Error::invalid("content", "bad")));
    }
}
