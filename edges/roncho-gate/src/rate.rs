//! Per-workspace rates: [`RateLimiter`] holds a token bucket per workspace
//! for each call that costs model tokens or heavy work; an empty bucket
//! refuses the call, with the time until it refills, before anything is
//! written. Limits are per process: N replicas admit N times as much.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use roncho_core::{Error, Result};

/// A kind of call metered per workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RateClass {
    /// `Chat`, `ChatStream`: a model answers.
    Chat,
    /// `CreateMessages`, counted in messages, when a model derives from them.
    Messages,
    /// `UploadFile`: parsing and many messages.
    Uploads,
    /// `ScheduleDream`: a long model run.
    Dreams,
    /// `CloneSession`: copies a whole session.
    Clones,
    /// `TestWebhook`, `CreateWebhook`: requests to the network (deliveries
    /// to every endpoint, a name looked up).
    Webhooks,
    /// Background work a call leaves behind: erasures (`Delete*`,
    /// `RemoveScopeSession`) and scope backfills (`AddScopeSessions`).
    Jobs,
}

impl RateClass {
    pub const ALL: [RateClass; 7] = [
        RateClass::Chat,
        RateClass::Messages,
        RateClass::Uploads,
        RateClass::Dreams,
        RateClass::Clones,
        RateClass::Webhooks,
        RateClass::Jobs,
    ];

    /// Returns the class's name in configuration and metrics.
    pub fn name(self) -> &'static str {
        match self {
            RateClass::Chat => "chat",
            RateClass::Messages => "messages",
            RateClass::Uploads => "uploads",
            RateClass::Dreams => "dreams",
            RateClass::Clones => "clones",
            RateClass::Webhooks => "webhooks",
            RateClass::Jobs => "jobs",
        }
    }
}

/// A metered call: its class, workspace and cost in tokens of the bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate<'a> {
    pub class: RateClass,
    pub workspace: &'a str,
    pub cost: u32,
}

/// A token bucket: `capacity` tokens, refilled evenly over a minute.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// Most buckets kept before full ones (as good as absent) are dropped.
const MAX_BUCKETS: usize = 10_000;

/// Per-workspace token buckets of the metered calls.
#[derive(Debug, Default)]
pub struct RateLimiter {
    /// Per class, the bucket size and per-minute refill; absent: unmetered.
    per_minute: HashMap<RateClass, u32>,
    buckets: Mutex<HashMap<(RateClass, String), Bucket>>,
    refused: Mutex<HashMap<RateClass, u64>>,
}

impl RateLimiter {
    /// Returns the limiter admitting `per_minute` of each class per workspace
    /// (0 or absent: unmetered).
    pub fn new(per_minute: impl IntoIterator<Item = (RateClass, u32)>) -> Self {
        Self {
            per_minute: per_minute.into_iter().filter(|(_, rate)| *rate > 0).collect(),
            ..Self::default()
        }
    }

    /// Takes `rate.cost` tokens from the workspace's bucket, or refuses with
    /// the time until there are enough.
    pub fn admit(&self, rate: Rate<'_>) -> Result<()> {
        self.admit_at(rate, Instant::now())
    }

    /// Admits a call that draws on several buckets: all of them, or none
    /// (a refused call spends nothing).
    pub fn admit_all(&self, rates: &[Rate<'_>]) -> Result<()> {
        let now = Instant::now();
        for (index, rate) in rates.iter().enumerate() {
            if let Err(error) = self.admit_at(*rate, now) {
                for taken in &rates[..index] {
                    self.give_back(*taken);
                }
                return Err(error);
            }
        }
        Ok(())
    }

    /// Returns tokens a refused call took.
    fn give_back(&self, rate: Rate<'_>) {
        let Some(&per_minute) = self.per_minute.get(&rate.class) else {
            return;
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(bucket) = buckets.get_mut(&(rate.class, rate.workspace.to_owned())) {
            bucket.tokens = (bucket.tokens + f64::from(rate.cost)).min(f64::from(per_minute));
        }
    }

    fn admit_at(&self, rate: Rate<'_>, now: Instant) -> Result<()> {
        let Some(&per_minute) = self.per_minute.get(&rate.class) else {
            return Ok(());
        };
        let capacity = f64::from(per_minute);
        let cost = f64::from(rate.cost);
        if cost > capacity {
            return Err(Error::invalid(
                "request",
                format!(
                    "costs {} {}, more than the {} a workspace may spend per minute",
                    rate.cost,
                    rate.class.name(),
                    per_minute
                ),
            ));
        }
        let per_second = capacity / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if buckets.len() >= MAX_BUCKETS {
            // A bucket that would be full by now is as good as absent; past
            // that, the longest idle go (they come back full: a small gift).
            buckets.retain(|(class, _), bucket| {
                let capacity = f64::from(self.per_minute.get(class).copied().unwrap_or(0));
                bucket.tokens + now.duration_since(bucket.updated).as_secs_f64() * capacity / 60.0 < capacity
            });
            if buckets.len() >= MAX_BUCKETS {
                let mut idle: Vec<Instant> = buckets.values().map(|bucket| bucket.updated).collect();
                idle.sort_unstable();
                let cutoff = idle[idle.len() / 2];
                buckets.retain(|_, bucket| bucket.updated > cutoff);
            }
        }
        let bucket = buckets
            .entry((rate.class, rate.workspace.to_owned()))
            .or_insert(Bucket {
                tokens: capacity,
                updated: now,
            });
        bucket.tokens = (bucket.tokens + now.duration_since(bucket.updated).as_secs_f64() * per_second).min(capacity);
        bucket.updated = now;
        if bucket.tokens >= cost {
            bucket.tokens -= cost;
            return Ok(());
        }
        let wait = Duration::from_secs_f64((cost - bucket.tokens) / per_second);
        drop(buckets);
        *self
            .refused
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(rate.class)
            .or_default() += 1;
        Err(Error::Throttled {
            reason: format!(
                "workspace `{}` is over its rate of {} {} per minute",
                rate.workspace,
                per_minute,
                rate.class.name()
            ),
            retry_after: wait.max(Duration::from_millis(1)),
        })
    }

    /// Calls refused so far, by class.
    pub fn refused(&self) -> Vec<(RateClass, u64)> {
        let refused = self.refused.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        RateClass::ALL
            .into_iter()
            .map(|class| (class, refused.get(&class).copied().unwrap_or(0)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_refill_over_a_minute_and_refuse_with_the_wait() {
        let limiter = RateLimiter::new([(RateClass::Chat, 60)]);
        let start = Instant::now();
        let chat = |workspace| Rate {
            class: RateClass::Chat,
            workspace,
            cost: 1,
        };
        for _ in 0..60 {
            limiter.admit_at(chat("w"), start).unwrap();
        }
        match limiter.admit_at(chat("w"), start) {
            Err(Error::Throttled { retry_after, .. }) => {
                assert!((retry_after.as_secs_f64() - 1.0).abs() < 0.01, "{retry_after:?}");
            }
            other => panic!("expected throttling, got {other:?}"),
        }
        limiter
            .admit_at(chat("other"), start)
            .expect("workspaces have their own buckets");
        limiter
            .admit_at(chat("w"), start + Duration::from_secs(1))
            .expect("one token a second");
        assert_eq!(limiter.refused()[0], (RateClass::Chat, 1));
        // Unmetered classes pass.
        let dreams = Rate {
            class: RateClass::Dreams,
            workspace: "w",
            cost: 1_000,
        };
        limiter.admit_at(dreams, start).unwrap();
    }

    #[test]
    fn evicting_buckets_keeps_the_partly_spent_ones_of_every_class() {
        let limiter = RateLimiter::new([(RateClass::Messages, 6_000), (RateClass::Chat, 120)]);
        let start = Instant::now();
        let spend = |class, workspace: &str, cost| limiter.admit_at(Rate { class, workspace, cost }, start);
        // A messages bucket spent down, then enough chat traffic to force eviction.
        spend(RateClass::Messages, "heavy", 1_000).unwrap();
        for index in 0..MAX_BUCKETS {
            spend(RateClass::Chat, &format!("w{index}"), 0).unwrap();
        }
        assert!(
            matches!(spend(RateClass::Messages, "heavy", 5_001), Err(Error::Throttled { .. })),
            "evicting must not refill a partly spent bucket of another class"
        );
    }

    #[test]
    fn a_call_refused_by_one_bucket_spends_nothing_from_the_others() {
        let limiter = RateLimiter::new([(RateClass::Uploads, 10), (RateClass::Messages, 100)]);
        let upload = |messages| {
            [
                Rate {
                    class: RateClass::Uploads,
                    workspace: "w",
                    cost: 1,
                },
                Rate {
                    class: RateClass::Messages,
                    workspace: "w",
                    cost: messages,
                },
            ]
        };
        limiter.admit_all(&upload(90)).unwrap();
        assert!(matches!(limiter.admit_all(&upload(20)), Err(Error::Throttled { .. })));
        // The refused upload's token came back: nine more fit.
        for _ in 0..9 {
            limiter.admit_all(&upload(1)).unwrap();
        }
        assert!(limiter.admit_all(&upload(1)).is_err(), "ten uploads a minute");
    }

    #[test]
    fn a_batch_larger_than_the_bucket_is_invalid_not_throttled() {
        let limiter = RateLimiter::new([(RateClass::Messages, 50)]);
        let batch = Rate {
            class: RateClass::Messages,
            workspace: "w",
            cost: 51,
        };
        assert!(matches!(limiter.admit(batch), Err(Error::InvalidArgument { .. })));
    }
}
