//! Background work that lets the writes of its process pass first.
//!
//! A process that acknowledges writes and runs background work on the same
//! cores (`roncho serve` embedded; the ingest role beside the reconciler or
//! the deriver) makes the background wait while a burst of writes arrives:
//! an acknowledgement is what a client waits for; a vector or an
//! observation a moment later is not. The wait is bounded: past a budget,
//! spent in all until the work next catches up, it runs at full speed
//! whatever the writes, so under a sustained load its lag stays bounded and
//! the writes slow instead (docs/operations.md, "Background work yields to
//! writes").

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use roncho_core::activity::WriteActivity;
use tokio_util::sync::CancellationToken;

/// How long a write burst must have paused before background work takes
/// the cores: longer than a client's gap between two batches, short
/// against the background's own lag.
pub const QUIET_BEFORE_BACKGROUND: Duration = Duration::from_millis(50);

/// Waits for the writes `activity` watches to pause, within a budget.
#[derive(Debug)]
pub struct YieldToWrites {
    activity: Arc<WriteActivity>,
    quiet: Duration,
    budget: Duration,
    /// Nanoseconds waited since the work last caught up.
    spent: AtomicU64,
    /// Nanoseconds waited in all (a metric).
    total: AtomicU64,
}

impl YieldToWrites {
    /// Waits until no write has been in flight for `quiet`, for at most
    /// `budget` in all between two catch-ups.
    pub fn new(activity: Arc<WriteActivity>, quiet: Duration, budget: Duration) -> Self {
        Self {
            activity,
            quiet,
            budget,
            spent: AtomicU64::new(0),
            total: AtomicU64::new(0),
        }
    }

    /// Waits while writes are in flight or paused for less than the quiet
    /// time, within what is left of the budget (or until `shutdown`).
    pub async fn wait(&self, shutdown: &CancellationToken) {
        loop {
            let idle = self.activity.idle_for();
            let spent = Duration::from_nanos(self.spent.load(Ordering::Relaxed));
            if idle >= self.quiet || spent >= self.budget {
                return;
            }
            let wait = (self.quiet - idle).min(self.budget - spent);
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
            self.spent.fetch_add(nanos, Ordering::Relaxed);
            self.total.fetch_add(nanos, Ordering::Relaxed);
        }
    }

    /// The work has nothing due: the next burst gets a fresh budget.
    pub fn caught_up(&self) {
        self.spent.store(0, Ordering::Relaxed);
    }

    /// How long it has waited, in all.
    pub fn total(&self) -> Duration {
        Duration::from_nanos(self.total.load(Ordering::Relaxed))
    }
}
