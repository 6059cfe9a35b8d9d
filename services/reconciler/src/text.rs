//! The text indexer: indexes the words of messages the store left unindexed
//! at write time (Postgres, migration 0016), off the write path.
//!
//! Where a vector [`crate::Reconciler`] runs beside it, a message's words are
//! indexed in the same row update that marks its vector synced, so the
//! indexer waits [`TextIndexer::grace`] before taking a message: it takes
//! only what the reconciler did not reach (a slow or failing embedder, rows
//! marked failed). Without an embedder it takes every message at once.
//! Meanwhile search matches the newest unindexed messages on the fly.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roncho_core::Result;
use roncho_core::store::Store;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Messages indexed per statement (one transaction each).
const BATCH: i64 = 500;

/// How long the indexer leaves a message to a vector reconciler in the same
/// process: the reconciler indexes it in the update that marks it synced (one
/// row version instead of two). Search finds it meanwhile on the fly.
pub const GRACE_WITH_RECONCILER: Duration = Duration::from_millis(500);

/// Indexes the words of messages written without them.
pub struct TextIndexer {
    store: Arc<dyn Store>,
    interval: Duration,
    wake: Notify,
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
    pub fn new(store: Arc<dyn Store>, grace: Duration, interval: Duration) -> Self {
        Self {
            store,
            interval,
            wake: Notify::new(),
            marks: Mutex::new(Marks {
                grace,
                seen: VecDeque::new(),
            }),
        }
    }

    /// How long a message is left to the vector reconciler.
    pub fn grace(&self) -> Duration {
        self.marks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .grace
    }

    /// Asks for a pass now (called after writes).
    pub fn nudge(&self) {
        self.wake.notify_one();
    }

    /// Runs passes until `shutdown`: every `interval` and on every nudge, or,
    /// within a grace, every half grace (when the marks come due).
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let grace = self.grace();
        let pause = if grace.is_zero() {
            self.interval
        } else {
            self.interval.min(grace / 2)
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
            .due(Instant::now(), mark);
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

/// The marks passes saw, oldest first, with when each was seen.
#[derive(Debug)]
struct Marks {
    grace: Duration,
    seen: VecDeque<(Instant, i64)>,
}

impl Marks {
    /// Records `mark` as seen `now` and returns the newest mark seen at
    /// least `grace` ago, if any.
    fn due(&mut self, now: Instant, mark: i64) -> Option<i64> {
        if self.grace.is_zero() {
            return Some(mark);
        }
        if self.seen.back().is_none_or(|&(_, last)| last != mark) {
            self.seen.push_back((now, mark));
        }
        let mut due = None;
        while let Some(&(seen, oldest)) = self.seen.front() {
            if now.duration_since(seen) < self.grace {
                break;
            }
            due = Some(oldest);
            self.seen.pop_front();
        }
        if let Some(due) = due {
            // The mark stays due for the next pass: rows below it that were
            // not committed yet at this one are still to be indexed.
            self.seen.push_front((now.checked_sub(self.grace).unwrap_or(now), due));
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(grace: Duration) -> Marks {
        Marks {
            grace,
            seen: VecDeque::new(),
        }
    }

    #[test]
    fn a_mark_comes_due_after_the_grace_and_stays_due() {
        let mut marks = marks(Duration::from_millis(500));
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(marks.due(at(0), 10), None);
        assert_eq!(marks.due(at(300), 20), None);
        assert_eq!(marks.due(at(500), 30), Some(10));
        assert_eq!(marks.due(at(700), 30), Some(10));
        assert_eq!(marks.due(at(800), 30), Some(20));
        assert_eq!(marks.due(at(2000), 30), Some(30));
        assert_eq!(marks.due(at(2100), 31), Some(30));
    }

    #[test]
    fn without_a_grace_everything_is_due_at_once() {
        assert_eq!(marks(Duration::ZERO).due(Instant::now(), 42), Some(42));
    }
}
