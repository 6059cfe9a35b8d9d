//! Client writes in flight in this process, for background work that
//! yields to them.
//!
//! A process that both acknowledges writes and runs background work on the
//! same cores (`roncho serve` embedded, or the ingest and reconciler roles
//! together) lets the background wait while writes arrive: an
//! acknowledgement is what a client waits for; a vector becoming searchable
//! a moment later is not (docs/operations.md, "Background work yields to
//! writes"). The writer marks each write with [`WriteActivity::begin`]; the
//! background asks [`WriteActivity::idle_for`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Counts the writes in flight and remembers when the last one ended.
#[derive(Debug)]
pub struct WriteActivity {
    started: Instant,
    in_flight: AtomicUsize,
    /// Nanoseconds after `started` at which the last write ended;
    /// `NEVER` before the first.
    last_end: AtomicU64,
}

const NEVER: u64 = u64::MAX;

thread_local! {
    static BACKGROUND_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as one the background roles run on, below
/// the requests' priority. What such a thread opens runs at its priority
/// too (a SQLite connection's thread is started by the thread that opens
/// it), so a store keeps what the background opens for the background
/// ([`on_background_thread`]).
pub fn mark_background_thread() {
    BACKGROUND_THREAD.set(true);
}

/// Whether the calling thread was marked with [`mark_background_thread`].
pub fn on_background_thread() -> bool {
    BACKGROUND_THREAD.get()
}

impl Default for WriteActivity {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_end: AtomicU64::new(NEVER),
        }
    }
}

/// A write in flight; dropping it ends the write.
#[derive(Debug)]
pub struct Writing<'a>(&'a WriteActivity);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        let activity = self.0;
        activity.last_end.store(activity.now(), Ordering::Release);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl WriteActivity {
    /// Marks a write in flight until the returned guard drops.
    pub fn begin(&self) -> Writing<'_> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Writing(self)
    }

    /// How long no write has been in flight: zero while one is, and
    /// `Duration::MAX` when none ever was.
    pub fn idle_for(&self) -> Duration {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        match self.last_end.load(Ordering::Acquire) {
            NEVER => Duration::MAX,
            last_end => Duration::from_nanos(self.now().saturating_sub(last_end)),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(NEVER - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::WriteActivity;
    use std::time::Duration;

    #[test]
    fn idle_only_once_every_write_has_ended() {
        let activity = WriteActivity::default();
        assert_eq!(activity.idle_for(), Duration::MAX, "no write yet: idle");
        let first = activity.begin();
        let second = activity.begin();
        assert_eq!(activity.idle_for(), Duration::ZERO);
        drop(first);
        assert_eq!(activity.idle_for(), Duration::ZERO, "one is still in flight");
        drop(second);
        std::thread::sleep(Duration::from_millis(5));
        let idle = activity.idle_for();
        assert!(
            idle >= Duration::from_millis(5) && idle < Duration::from_secs(5),
            "{idle:?}"
        );
    }
}
