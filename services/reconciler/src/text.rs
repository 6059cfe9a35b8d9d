//! The text indexer: indexes the words of messages the store left unindexed
//! at write time (Postgres, migration 0016), off the write path.
//!
//! Where a vector [`crate::Reconciler`] runs beside it, a message's words are
//! indexed in the same row update that marks its vector synced, so the
//! indexer waits [`TextIndexer::grace`] before taking a message: it takes
//! only what the reconciler did not reach (a slow or failing embedder, rows
//! marked failed). Without an embedder it takes every message at once.
//! Meanwhile search matches the newest unindexed messages on the fly.
//!
//! Beside the writes of its own process it also lets write bursts pass: while
//! writes arrive it takes only messages written [`LAG_UNDER_WRITES`] ago, so
//! a burst's words are indexed within about a second, mostly after it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roncho_core::Result;
use roncho_core::activity::WriteActivity;
use roncho_core::store::SyncLedger;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Messages indexed per statement (one transaction each).
const BATCH: i64 = 500;

/// How long the indexer leaves a message to a vector reconciler in the same
/// process: the reconciler indexes it in the update that marks it synced (one
/// row version instead of two). Search finds it meanwhile on the fly.
pub const GRACE_WITH_RECONCILER: Duration = Duration::from_millis(500);

/// How long the indexer leaves a message while writes in its process arrive
/// (the words of older ones wait at most a poll more, a quarter of it).
pub const LAG_UNDER_WRITES: Duration = Duration::from_millis(750);

/// Indexes the words of messages written without them.
pub struct TextIndexer {
    store: Arc<dyn SyncLedger>,
    interval: Duration,
    wake: Notify,
    grace: Duration,
    /// The writes it lets pass, and the pause that ends a burst.
    yielding: Option<(Arc<WriteActivity>, Duration)>,
    marks: Mutex<Marks>,
}

impl std::fmt::Debug for TextIndexer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TextIndexer")
            .field("grace", &self.grace())
            .finish_non_exhaustive()
    }
}

impl TextIndexer {
    /// Returns an indexer that takes messages written at least `grace` ago
    /// and runs every `interval` (and on every nudge when `grace` is zero).
    pub fn new(store: Arc<dyn SyncLedger>, grace: Duration, interval: Duration) -> Self {
        Self {
            store,
            interval,
            wake: Notify::new(),
            grace,
            yielding: None,
            marks: Mutex::new(Marks { seen: VecDeque::new() }),
        }
    }

    /// Returns the indexer leaving messages for [`LAG_UNDER_WRITES`] while
    /// `activity` shows writes, until they have paused for `quiet`.
    pub fn yielding_to_writes(mut self, activity: Arc<WriteActivity>, quiet: Duration) -> Self {
        self.yielding = Some((activity, quiet));
        self
    }

    /// How long a message is left to the vector reconciler.
    pub fn grace(&self) -> Duration {
        self.grace
    }

    /// Asks for a pass now (called after writes).
    pub fn nudge(&self) {
        self.wake.notify_one();
    }

    /// Runs passes until `shutdown`: every `interval` and on every nudge, or,
    /// within a grace, every half grace (when the marks come due).
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let grace = self.grace();
        let longest = match self.yielding {
            Some(_) => grace.max(LAG_UNDER_WRITES),
            None => grace,
        };
        let pause = if longest.is_zero() {
            self.interval
        } else if grace.is_zero() {
            self.interval.min(longest / 3)
        } else {
            self.interval.min(grace / 2).min(longest / 3)
        };
        loop {
            match self.pass().await {
                Ok(0) => {}
                Ok(indexed) => tracing::debug!(indexed, "text indexer pass"),
                Err(error) => tracing::warn!(%error, "text indexer pass failed; will retry"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.wake.notified(), if grace.is_zero() => {}
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Indexes every message due (written `grace` ago or earlier); returns
    /// how many it indexed.
    pub async fn pass(&self) -> Result<u64> {
        let Some(mark) = self.store.text_index_mark().await? else {
            return Ok(0);
        };
        let due = self
            .marks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .due(Instant::now(), mark, wait_now(self.grace, self.yielding.as_ref()));
        let Some(up_to) = due else {
            return Ok(0);
        };
        let mut indexed = 0;
        loop {
            let done = self.store.index_text(up_to, BATCH).await?;
            indexed += done;
            if done < BATCH.unsigned_abs() {
                return Ok(indexed);
            }
        }
    }
}

/// How long a message is left now: the `grace`, or while the writes it
/// yields to arrive, at least [`LAG_UNDER_WRITES`].
fn wait_now(grace: Duration, yielding: Option<&(Arc<WriteActivity>, Duration)>) -> Duration {
    match yielding {
        Some((activity, quiet)) if activity.idle_for() < *quiet => grace.max(LAG_UNDER_WRITES),
        _ => grace,
    }
}

/// The marks passes saw, oldest first, with when each was seen.
#[derive(Debug)]
struct Marks {
    seen: VecDeque<(Instant, i64)>,
}

impl Marks {
    /// Records `mark` as seen `now` and returns the newest mark seen at
    /// least `grace` ago, if any.
    fn due(&mut self, now: Instant, mark: i64, grace: Duration) -> Option<i64> {
        if grace.is_zero() {
            return Some(mark);
        }
        if self.seen.back().is_none_or(|&(_, last)| last != mark) {
            self.seen.push_back((now, mark));
        }
        let mut due = None;
        while let Some(&(seen, oldest)) = self.seen.front() {
            if now.duration_since(seen) < grace {
                break;
            }
            due = Some(oldest);
            self.seen.pop_front();
        }
        if let Some(due) = due {
            // The mark stays due for the next pass: rows below it that were
            // not committed yet at this one are still to be indexed.
            self.seen.push_front((now.checked_sub(grace).unwrap_or(now), due));
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks() -> Marks {
        Marks { seen: VecDeque::new() }
    }

    #[test]
    fn a_mark_comes_due_after_the_grace_and_stays_due() {
        let mut marks = marks();
        let grace = Duration::from_millis(500);
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(marks.due(at(0), 10, grace), None);
        assert_eq!(marks.due(at(300), 20, grace), None);
        assert_eq!(marks.due(at(500), 30, grace), Some(10));
        assert_eq!(marks.due(at(700), 30, grace), Some(10));
        assert_eq!(marks.due(at(800), 30, grace), Some(20));
        assert_eq!(marks.due(at(2000), 30, grace), Some(30));
        assert_eq!(marks.due(at(2100), 31, grace), Some(30));
    }

    #[test]
    fn without_a_grace_everything_is_due_at_once() {
        assert_eq!(marks().due(Instant::now(), 42, Duration::ZERO), Some(42));
    }

    #[test]
    fn while_writes_arrive_a_message_waits_longer() {
        let activity = Arc::new(WriteActivity::default());
        let quiet = Duration::from_millis(50);
        let yielding = Some((activity.clone(), quiet));
        std::thread::sleep(quiet);
        assert_eq!(
            wait_now(Duration::ZERO, yielding.as_ref()),
            Duration::ZERO,
            "no writes: at once"
        );
        let writing = activity.begin();
        assert_eq!(wait_now(Duration::ZERO, yielding.as_ref()), LAG_UNDER_WRITES);
        assert_eq!(wait_now(Duration::ZERO, None), Duration::ZERO, "not yielding: at once");
        drop(writing);
        assert_eq!(
            wait_now(Duration::ZERO, yielding.as_ref()),
            LAG_UNDER_WRITES,
            "a pause shorter than the quiet time"
        );
        std::thread::sleep(quiet);
        assert_eq!(wait_now(Duration::ZERO, yielding.as_ref()), Duration::ZERO);
        assert_eq!(
            wait_now(GRACE_WITH_RECONCILER, yielding.as_ref()),
            GRACE_WITH_RECONCILER
        );
        let _writing = activity.begin();
        assert_eq!(wait_now(GRACE_WITH_RECONCILER, yielding.as_ref()), LAG_UNDER_WRITES);
    }
}
