//! The `WorkQueue` port: background work (derivation, summaries, dreams,
//! deletions, webhooks) grouped by Honcho's `work_unit_key`.
//!
//! Guarantees every implementation keeps (checked by the contract suite,
//! feature `testing`):
//! - enqueueing is idempotent by `dedup_id`;
//! - delivery is at least once: a claim that is not completed (the worker
//!   died, or its lease ran out) is claimed again;
//! - at most one worker holds a work unit at a time, and it gets the unit's
//!   tasks in enqueue order; a task waiting for a retry holds back the tasks
//!   behind it;
//! - a task that keeps failing becomes `dead` after the allowed attempts,
//!   with its last error kept and shown in the status;
//! - claims are fair ([`Turns`]): erasures first, then the workspaces with
//!   ready work take turns, so one workspace's backlog delays another's
//!   work by at most the unit in hand.

use std::time::Duration;

use async_trait::async_trait;

use crate::Result;

#[cfg(feature = "testing")]
pub mod contract;
pub mod history;

/// The kinds of work, as the first segment of a `work_unit_key`.
pub const TASK_TYPES: [&str; 6] = [
    "representation",
    "summary",
    "dream",
    "deletion",
    "webhook",
    "scope_backfill",
];

/// Returns the task type of a work unit key (`representation:ws:s:peer` → `representation`).
pub fn task_type(work_unit_key: &str) -> &str {
    work_unit_key.split(':').next().unwrap_or_default()
}

/// Returns the workspace of a work unit key (its second segment).
pub fn workspace_of(work_unit_key: &str) -> &str {
    work_unit_key.split(':').nth(1).unwrap_or_default()
}

/// The task type claimed before any other: an erasure hides nothing until
/// it runs to the end, and a tenant's neighbours' work must not hold it up.
pub const FIRST: &str = "deletion";

/// Whose turn it is: the workspace that had the last claim of a queue (in
/// this process), from which the next claim looks on, wrapping around.
#[derive(Debug, Default)]
pub struct Turns(std::sync::Mutex<Option<String>>);

impl Turns {
    /// Returns the workspace that had the last claim.
    pub fn last(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Records that a unit of `work_unit_key`'s workspace was claimed.
    pub fn claimed(&self, work_unit_key: &str) {
        if task_type(work_unit_key) == FIRST {
            return;
        }
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(workspace_of(work_unit_key).to_owned());
    }

    /// Orders ready units (work unit key, first task id) for claiming:
    /// erasures first, oldest first; then the workspace after the last
    /// one claimed, and so on around, each workspace's units oldest first
    /// (before any claim, the oldest unit).
    pub fn order<T>(&self, mut units: Vec<T>, key: impl Fn(&T) -> (&str, i64)) -> Vec<T> {
        let last = self.last();
        units.sort_by_cached_key(|unit| {
            let (work_unit_key, first) = key(unit);
            let workspace = workspace_of(work_unit_key);
            // Erasures, then the workspaces after the last one, then the rest.
            match (task_type(work_unit_key) == FIRST, &last) {
                (true, _) => (0, String::new(), first),
                (false, None) => (1, String::new(), first),
                (false, Some(last)) if workspace > last.as_str() => (1, workspace.to_owned(), first),
                (false, Some(_)) => (2, workspace.to_owned(), first),
            }
        });
        units
    }
}

/// A task to enqueue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// Honcho's key, e.g. `representation:{workspace}:{session}:{observed}`.
    pub work_unit_key: String,
    /// Enqueueing the same id again does nothing (a retried publish, a replay).
    pub dedup_id: String,
    pub workspace_id: String,
    pub session_id: Option<String>,
    /// For status filters: who observes and who sent the message.
    pub observer_id: Option<String>,
    pub sender_id: Option<String>,
    pub payload: serde_json::Value,
    /// What the task stands for in queue status, which counts as Honcho
    /// does, one per message: a representation task carries every message
    /// of one peer in a batch; any other task is 1.
    pub items: i64,
}

/// A claimed task.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: i64,
    pub dedup_id: String,
    pub payload: serde_json::Value,
    /// Failed attempts so far.
    pub attempts: i64,
    /// Times an outage postponed it so far (no attempt spent).
    pub deferrals: i64,
    /// The trace of the request that enqueued it (when traced), which the
    /// work joins.
    pub trace: Option<crate::trace::TraceContext>,
}

/// A work unit leased to one worker, with its next tasks in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub work_unit_key: String,
    /// Identifies this lease; a stale holder's calls fail.
    pub token: String,
    pub tasks: Vec<Task>,
}

/// Which tasks a status covers; unset fields do not restrict.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusFilter {
    pub workspace_id: String,
    pub session_id: Option<String>,
    pub observer_id: Option<String>,
    pub sender_id: Option<String>,
}

/// Task counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: i64,
    pub completed: i64,
    /// Pending tasks of work units a worker holds now.
    pub in_progress: i64,
    pub pending: i64,
    /// Dead: out of attempts.
    pub failed: i64,
    /// Of the pending, those waiting out an outage (postponed, not failed).
    pub postponed: i64,
}

/// A dead task and why.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedTask {
    pub work_unit_key: String,
    pub dedup_id: String,
    pub attempts: i64,
    pub last_error: String,
}

/// A task an outage postponed, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct PostponedTask {
    pub work_unit_key: String,
    pub dedup_id: String,
    /// Postponements so far.
    pub deferrals: i64,
    pub reason: String,
    /// When it is tried again, in microseconds since the epoch.
    pub ready_at: i64,
}

/// Which dead tasks to run again; unset fields do not restrict.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RetryFilter {
    pub workspace_id: String,
    pub session_id: Option<String>,
    /// `representation`, `summary`, `dream`, ...
    pub task_type: Option<String>,
}

/// The queue as a status filter sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueStatus {
    pub counts: Counts,
    /// Per session, by session id (tasks without a session are left out).
    pub sessions: Vec<(String, Counts)>,
    /// The most recent dead tasks, newest first (at most 100).
    pub failures: Vec<FailedTask>,
    /// Postponed tasks, soonest ready first (at most 100).
    pub postponed: Vec<PostponedTask>,
    /// Due dreams, of the workspace whatever the other filters.
    pub dreams: DreamCounts,
}

/// The queue over one step of a past window (see [`WorkQueue::history`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSample {
    /// The step's end, in microseconds since the epoch.
    pub at: i64,
    /// Work waiting at `at`: enqueued, and neither done nor dead yet.
    pub waiting: i64,
    /// Work done within the step.
    pub done: i64,
    /// Of the work done within the step, the median and the longest time
    /// from enqueueing to done, in milliseconds; `None` when none was done.
    pub latency_p50_ms: Option<i64>,
    pub latency_max_ms: Option<i64>,
}

/// Most tasks [`WorkQueue::history`] reads; beyond them the window is
/// shortened to the newest it can show.
pub const HISTORY_MAX_TASKS: i64 = 200_000;

/// Due dreams not yet run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DreamCounts {
    /// Waiting for their peer to be quiet (at most the longest delay).
    pub waiting: i64,
    /// Ready to run, waiting for a dreamer.
    pub ready: i64,
    /// When the longest-waiting one became due, in microseconds since the
    /// epoch; `None` without any.
    pub oldest_due_at: Option<i64>,
}

#[async_trait]
pub trait WorkQueue: Send + Sync + 'static {
    /// Enqueues tasks and returns how many were new (not seen by `dedup_id`).
    /// Each keeps the trace context of the span enqueueing it.
    async fn enqueue(&self, tasks: Vec<NewTask>) -> Result<usize>;

    /// Enqueues tasks that become ready `delay` from now (a dream waiting
    /// for its peer to go quiet); otherwise as [`WorkQueue::enqueue`].
    async fn enqueue_delayed(&self, tasks: Vec<NewTask>, delay: Duration) -> Result<usize>;

    /// Makes the pending tasks of `work_unit_key` ready no sooner than
    /// `delay` from now, yet never later than `latest` after each was
    /// enqueued (and never sooner than they were); returns how many moved.
    /// Work that waits for quiet (a dream) thus cannot be put off forever.
    async fn postpone(&self, work_unit_key: &str, delay: Duration, latest: Duration) -> Result<u64>;

    /// Leases the work unit of `task_types` whose next task is oldest and
    /// ready, to `worker` for `lease`, and returns its tasks in order, up to
    /// `max` items ([`NewTask::items`]; at least one task); `None` when
    /// nothing is ready.
    async fn claim(&self, worker: &str, task_types: &[&str], max: usize, lease: Duration) -> Result<Option<Claim>>;

    /// Extends the lease (a heartbeat during long work); `FAILED_PRECONDITION`
    /// when it was lost, after which the worker must stop.
    async fn renew(&self, claim: &Claim, lease: Duration) -> Result<()>;

    /// Marks tasks done; `FAILED_PRECONDITION` when the lease was lost.
    async fn complete(&self, claim: &Claim, task_ids: &[i64]) -> Result<()>;

    /// Records a failed attempt of tasks: each is retried after `retry_after`,
    /// or becomes dead at `max_attempts`.
    async fn fail(
        &self,
        claim: &Claim,
        task_ids: &[i64],
        error: &str,
        retry_after: Duration,
        max_attempts: i64,
    ) -> Result<()>;

    /// Postpones tasks an outage stopped (a model or dependency unavailable,
    /// rate limited, timed out) without spending an attempt: ready again
    /// after `delay`, their deferrals counted and `reason` kept for status.
    async fn defer(&self, claim: &Claim, task_ids: &[i64], reason: &str, delay: Duration) -> Result<()>;

    /// Runs dead tasks again (pending, ready now, attempts and deferrals
    /// reset; their last error kept until they run); returns how many, by
    /// their items as status counts them.
    async fn retry_dead(&self, filter: &RetryFilter) -> Result<u64>;

    /// Gives the work unit back (its remaining tasks wait for the next claim).
    async fn release(&self, claim: &Claim) -> Result<()>;

    /// Gives back every unit `worker` holds, its claims' tasks not done (a
    /// worker stopped mid-task at shutdown): the next claim takes them at
    /// once instead of after the lease runs out; `worker`'s calls on those
    /// claims fail from then on. Returns how many units it held.
    async fn release_worker(&self, worker: &str) -> Result<u64>;

    /// Counts tasks by state.
    async fn status(&self, filter: &StatusFilter) -> Result<QueueStatus>;

    /// Deletes done tasks finished more than `done_age` ago and dead ones
    /// more than `dead_age` ago; returns how many. Pending work is never
    /// removed. (A `dedup_id` is remembered only while its task is kept.)
    async fn purge(&self, done_age: Duration, dead_age: Duration) -> Result<u64>;

    /// The queue of `filter` over the last `window`, in `steps` equal
    /// steps, oldest first: what waited at the end of each, what was done
    /// within it and how long that took. Read from the tasks the queue
    /// keeps (done ones for a week), so it needs no sampling.
    async fn history(&self, filter: &StatusFilter, window: Duration, steps: usize) -> Result<Vec<QueueSample>>;

    /// Resolves when new work may have arrived (a delivery from a broker),
    /// so an idle worker claims again before its poll interval; queues
    /// without such a signal never resolve it.
    async fn work_arrived(&self) {
        std::future::pending::<()>().await;
    }

    /// Stops background delivery and hands undelivered work back to the
    /// other workers (on shutdown, after the last claim is released).
    async fn close(&self) {}
}

/// A task of the outbox, not yet published to a delivery stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpublished {
    pub id: i64,
    pub work_unit_key: String,
    /// The trace it joins, sent with it as message headers.
    pub trace: Option<crate::trace::TraceContext>,
}

/// The task ledger under a queue that delivers through a stream (NATS
/// JetStream): the ledger stays the truth of every task, and the stream
/// only says which worker should look at which unit. What the stream needs
/// of the ledger beyond [`WorkQueue`]: the outbox, the deliveries seen, the
/// tasks the stream lost, and claims among the tasks delivered.
#[async_trait]
pub trait DeliveryLedger: WorkQueue {
    /// This database's installation id: stream message ids carry it, so a
    /// new or recreated database never repeats ids a stream has seen.
    async fn installation(&self) -> Result<String>;
    /// Up to `limit` pending tasks not yet published (the outbox), oldest
    /// first; `older_than` (micros since the epoch) leaves out tasks written
    /// since, which their writer publishes.
    async fn unpublished(&self, limit: i64, older_than: Option<i64>) -> Result<Vec<Unpublished>>;
    /// Marks tasks as published to the stream.
    async fn mark_published(&self, task_ids: &[i64]) -> Result<()>;
    /// Records that a consumer holds deliveries of `task_ids` now.
    async fn mark_seen(&self, task_ids: &[i64]) -> Result<()>;
    /// Takes up to `limit` tasks the stream lost: pending, published, of a
    /// unit nobody holds, and held by no consumer for `quiet` times one more
    /// than their republications so far (at most 7 times). Marks them
    /// published again and returns them with how often they have been.
    async fn take_lost(&self, limit: i64, quiet: Duration) -> Result<Vec<(Unpublished, i64)>>;
    /// Which of `task_ids` are still pending (the rest are done, dead or
    /// purged: a delivery of them is stale).
    async fn pending_among(&self, task_ids: &[i64]) -> Result<std::collections::BTreeSet<i64>>;
    /// Leases the first of `candidates` — work unit keys with the ids of
    /// their tasks that were delivered to this worker — whose next pending
    /// task is delivered and ready; see [`WorkQueue::claim`]. Tasks are
    /// handed out in ledger order, so a task published late holds back the
    /// ones behind it until it arrives.
    async fn claim_delivered(
        &self,
        worker: &str,
        candidates: &[(String, std::collections::BTreeSet<i64>)],
        max: usize,
        lease: Duration,
    ) -> Result<Option<Claim>>;
    /// Gives back every unit `worker` holds and returns their keys (see
    /// [`WorkQueue::release_worker`]).
    async fn release_units_of(&self, worker: &str) -> Result<Vec<String>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erasures_go_first_then_workspaces_take_turns() {
        let turns = Turns::default();
        let units = vec![
            ("representation:big:s:p1", 1),
            ("representation:big:s:p2", 2),
            ("summary:big:s2:x", 3),
            ("representation:small:s:p", 40),
            ("webhook:alpha:e1", 50),
            ("deletion:zed:session:s", 60),
        ];
        let order = |turns: &Turns| -> Vec<&str> {
            turns
                .order(units.clone(), |unit| (unit.0, unit.1))
                .into_iter()
                .map(|unit| unit.0)
                .collect()
        };
        let first = order(&turns);
        assert_eq!(first[0], "deletion:zed:session:s");
        assert_eq!(first[1], "representation:big:s:p1", "no turn yet: the oldest");
        turns.claimed("representation:big:s:p1");
        let next = order(&turns);
        assert_eq!(
            &next[..2],
            ["deletion:zed:session:s", "representation:small:s:p"],
            "{next:?}"
        );
        turns.claimed("representation:small:s:p");
        let wrapped = order(&turns);
        assert_eq!(
            &wrapped[..3],
            ["deletion:zed:session:s", "webhook:alpha:e1", "representation:big:s:p1"],
            "{wrapped:?}"
        );
        turns.claimed("deletion:zed:session:s");
        assert_eq!(turns.last().as_deref(), Some("small"), "an erasure takes no turn");
    }
}
