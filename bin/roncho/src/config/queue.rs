//! The `[queue]` section: how background work is queued, taken and paced.

use std::time::Duration;

use anyhow::bail;
use serde::Serialize;

use super::store::StoreConfig;

section! {
    /// `[queue]` as one layer gives it.
    QueueLayer {
        nats_url: String,
        nats_prefix: String,
        nats_partitions: u32,
        nats_ack_wait_secs: u64,
        /// How long a published task may go held by no consumer before it is
        /// taken for lost and published again.
        nats_redeliver_after_secs: u64,
        deriver_lease_secs: u64,
        worker_outage_backoff_secs: u64,
        worker_outage_backoff_max_secs: u64,
        reconciler_interval_ms: u64,
        background_yield_ms: u64,
        dream_document_threshold: u64,
        dream_min_hours: u64,
        dream_idle_minutes: u64,
        /// Longest a due dream waits for its peer to be quiet.
        dream_max_delay_minutes: u64,
    }
}

/// How background work is queued, taken and paced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueConfig {
    /// NATS JetStream for background work; `None`: the SQL queue in the store.
    pub nats: Option<NatsConfig>,
    /// How long a deriver holds a work unit without renewing; a killed worker's
    /// units are taken over after it.
    pub deriver_lease: Duration,
    /// First wait of a task postponed by an outage (a model unavailable,
    /// rate limited or timing out); doubled per outage, with jitter.
    pub worker_outage_backoff: Duration,
    /// Longest wait after an outage, and the most a provider's `Retry-After`
    /// can ask for.
    pub worker_outage_backoff_max: Duration,
    /// How often the reconciler looks for rows to embed when nobody nudges
    /// it (a deriver or ingest in its own process nudges it at once).
    pub reconciler_interval: Duration,
    /// How long, in all, the reconciler and the deriver in a process that
    /// also takes writes wait for write bursts to pause before they catch
    /// up at full speed whatever the writes (`Duration::ZERO`: they never wait).
    pub background_yield: Duration,
    /// When the deriver schedules dreams (with a dream model configured).
    pub dreams: DreamConfig,
}

/// When a collection is due a dream (Honcho's thresholds).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DreamConfig {
    /// New explicit observations since the collection's last dream.
    pub document_threshold: u64,
    /// Least time between two dreams of a collection.
    pub min_between: Duration,
    /// How long the observed peer must be quiet before a due dream runs.
    pub idle: Duration,
    /// Longest a due dream waits for quiet before it runs anyway.
    pub max_delay: Duration,
}

/// The distributed mode's work queue (see `roncho_nats`).
#[derive(Clone, PartialEq, Serialize)]
pub struct NatsConfig {
    /// `nats://host:4222`.
    pub url: String,
    /// Names the stream, consumers and lease bucket.
    pub prefix: String,
    /// Partitions per task type: the most deriver processes that share the work.
    pub partitions: u32,
    /// Redelivery delay of unacked work, also the partition lease TTL: how
    /// soon a killed process's work moves on.
    pub ack_wait: Duration,
    /// When pending work no consumer holds is republished (the stream lost it).
    pub redeliver_after: Duration,
}

debug_redacted!(NatsConfig);

impl QueueLayer {
    pub(super) fn resolve(self, store: &StoreConfig) -> anyhow::Result<QueueConfig> {
        let nats = match self.nats_url {
            None => None,
            Some(_) if store.database_url.is_none() => bail!(
                "nats_url needs database_url (Postgres): every process shares the task ledger, which the embedded SQLite file cannot be"
            ),
            Some(url) => Some(NatsConfig {
                url,
                prefix: self.nats_prefix.unwrap_or_else(|| "roncho".to_owned()),
                partitions: self.nats_partitions.unwrap_or(16).max(1),
                ack_wait: Duration::from_secs(self.nats_ack_wait_secs.unwrap_or(30).max(1)),
                redeliver_after: Duration::from_secs(self.nats_redeliver_after_secs.unwrap_or(120).max(1)),
            }),
        };
        let backoff = Duration::from_secs(self.worker_outage_backoff_secs.unwrap_or(5).max(1));
        Ok(QueueConfig {
            nats,
            deriver_lease: Duration::from_secs(self.deriver_lease_secs.unwrap_or(60).max(1)),
            worker_outage_backoff: backoff,
            worker_outage_backoff_max: Duration::from_secs(self.worker_outage_backoff_max_secs.unwrap_or(300))
                .max(backoff),
            reconciler_interval: Duration::from_millis(self.reconciler_interval_ms.unwrap_or(1_000).max(50)),
            background_yield: Duration::from_millis(self.background_yield_ms.unwrap_or(5_000)),
            dreams: DreamConfig {
                document_threshold: self.dream_document_threshold.unwrap_or(50).max(1),
                min_between: Duration::from_secs(self.dream_min_hours.unwrap_or(8) * 3600),
                idle: Duration::from_secs(self.dream_idle_minutes.unwrap_or(60) * 60),
                max_delay: Duration::from_secs(self.dream_max_delay_minutes.unwrap_or(240).max(1) * 60),
            },
        })
    }
}

impl NatsConfig {
    /// The queue options these settings give (a process that consumes
    /// nothing and relays; callers adjust).
    pub fn options(&self) -> roncho_nats::NatsOptions {
        let mut options = roncho_nats::NatsOptions::new(&self.url);
        options.prefix = self.prefix.clone();
        options.partitions = self.partitions;
        options.ack_wait = self.ack_wait;
        options.lease_ttl = self.ack_wait;
        options.redeliver_after = self.redeliver_after;
        options
    }
}
