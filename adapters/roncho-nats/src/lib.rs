//! `NatsWorkQueue`: the distributed mode's `WorkQueue` — tasks travel over
//! NATS JetStream, keyed by Honcho's `work_unit_key`; their state lives in
//! the SQL task ledger (`work_tasks` in Postgres, the same rows the message
//! transaction writes).
//!
//! How the pieces divide the work (docs/adr/0005-nats-work-queue.md):
//! - **Ledger (SQL)** — the truth: order, attempts, dead letters and their
//!   errors, queue status, retention, and the unit lease that lets one
//!   worker at a time hold a work unit. Ingest writes tasks in the message
//!   transaction (the outbox), so a message is never stored without its work.
//! - **Relay** — publishes unpublished ledger rows to the stream
//!   (`Nats-Msg-Id` = the database's installation id and the task id, so a
//!   republish is dropped by JetStream's duplicate window while another
//!   database's ids never collide) and marks them published; every process
//!   sweeps for rows a dead publisher left behind. A publication the stream
//!   calls a duplicate of a task the ledger never published (a restored
//!   database) is published again under a fresh id.
//! - **Sweeper** — the ledger heals the stream: pending tasks published but
//!   held by no consumer for a while (consumers record when they hold a
//!   delivery) and of no held unit are republished under a fresh id, so
//!   whatever the stream lost or dropped is delivered again.
//! - **Stream** `{prefix}_work` (work-queue retention) on subjects
//!   `{prefix}.work.{type}.{partition}.{key hash}` ([`subjects`]), one
//!   durable pull consumer per partition.
//! - **Partition leases** in the KV bucket `{prefix}_leases` (created by hand:
//!   async-nats's `create_key_value` fails on nats-server 2.9): a process
//!   consumes a partition only while it holds its lease, takes at most its
//!   fair share of each task type's partitions (partitions / live workers), renews every third of the TTL
//!   and hands partitions to newcomers. Deliveries are buffered per work
//!   unit and kept alive with in-progress acks while buffered.
//! - **Claims** hand out a unit's delivered tasks in ledger order; a task
//!   that was published late holds back the ones behind it. A task is acked
//!   on the stream once the ledger records it done; a redelivered task the
//!   ledger already finished is acked and dropped, so a worker killed
//!   between the two loses nothing and repeats nothing.

pub mod subjects;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer, kv, message::Acker, stream};
use async_trait::async_trait;
use futures::StreamExt;
use roncho_core::model::now_micros;
use roncho_core::queue::{
    Claim, DeliveryLedger, NewTask, QueueSample, QueueStatus, RetryFilter, StatusFilter, Unpublished, WorkQueue,
};
use roncho_core::trace::TraceContext;
use roncho_core::{Error, Result};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Units a claim considers at once.
const CANDIDATES: usize = 16;
/// Rows the relay publishes per round.
const RELAY_BATCH: i64 = 256;
/// How often a worker renews its leases and rebalances, at most.
const REBALANCE_EVERY: Duration = Duration::from_secs(2);
/// How long one pull request waits at the server.
const PULL_EXPIRES: Duration = Duration::from_secs(3);
/// How often every process sweeps the outbox for rows a dead publisher left.
const RELAY_SWEEP: Duration = Duration::from_secs(2);
/// Lost tasks republished per round, at most.
const LOST_BATCH: i64 = 256;

/// How the queue connects and behaves.
#[derive(Debug, Clone)]
pub struct NatsOptions {
    /// `nats://host:4222`.
    pub url: String,
    /// Names the stream, consumers and bucket (`[A-Za-z0-9_-]+`), so several
    /// deployments can share one NATS.
    pub prefix: String,
    /// Partitions per task type: the most processes that can share one task
    /// type's work. Fixed for the life of the stream.
    pub partitions: u32,
    /// Task types this process works on (none: it only enqueues).
    pub consume: Vec<String>,
    /// How long a delivery may go without an ack or in-progress ack before
    /// the stream redelivers it (a dead process's work moves on after this).
    pub ack_wait: Duration,
    /// How long a partition lease lives without renewal. Set by the first
    /// process that creates the bucket; no shorter than `ack_wait`.
    pub lease_ttl: Duration,
    /// Unacked deliveries per partition (the consumer's `max_ack_pending`).
    pub max_buffered: i64,
    /// How long a claim that finds nothing waits for deliveries in flight.
    pub arrival_wait: Duration,
    /// Stream and bucket replicas (3 on a clustered NATS).
    pub replicas: usize,
    /// Identifies this process in leases and logs.
    pub instance: String,
    /// Whether this process publishes the outbox (off for observers such as
    /// `roncho status`).
    pub relay: bool,
    /// How long a published task may go held by no consumer before the
    /// sweeper takes it for lost and publishes it again (longer after each
    /// republication).
    pub redeliver_after: Duration,
}

impl NatsOptions {
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            prefix: "roncho".into(),
            partitions: 16,
            consume: Vec::new(),
            ack_wait: Duration::from_secs(30),
            lease_ttl: Duration::from_secs(30),
            max_buffered: 256,
            arrival_wait: Duration::from_millis(500),
            replicas: 1,
            instance: format!("{}-{}", std::process::id(), roncho_core::model::new_public_id()),
            relay: true,
            redeliver_after: Duration::from_secs(120),
        }
    }

    fn stream_name(&self) -> String {
        format!("{}_work", self.prefix)
    }

    fn bucket(&self) -> String {
        format!("{}_leases", self.prefix)
    }
}

/// The NATS JetStream work queue over a SQL ledger.
#[derive(Clone)]
pub struct NatsWorkQueue {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for NatsWorkQueue {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("NatsWorkQueue")
            .field("url", &self.inner.options.url)
            .field("prefix", &self.inner.options.prefix)
            .finish_non_exhaustive()
    }
}

struct Inner {
    options: NatsOptions,
    ledger: Arc<dyn DeliveryLedger>,
    /// The ledger database's installation id, in every message id and envelope.
    installation: String,
    jetstream: jetstream::Context,
    stream: stream::Stream,
    leases: kv::Store,
    buffer: Mutex<Buffer>,
    arrived: Notify,
    relay_kick: Notify,
    /// Serialises this process's relay rounds.
    relaying: tokio::sync::Mutex<()>,
    /// Partition leases held: lease key → (revision, its consumer's stop token).
    owned: tokio::sync::Mutex<BTreeMap<String, (u64, CancellationToken)>>,
    shutdown: CancellationToken,
}

/// Deliveries not yet acked, by work unit, and this process's unit claims.
/// A unit's deliveries by task id.
type Deliveries = BTreeMap<i64, Delivery>;

/// A delivered task: how to ack it, and the trace its message headers carry.
struct Delivery {
    acker: Arc<Acker>,
    trace: Option<TraceContext>,
}

#[derive(Default)]
struct Buffer {
    units: HashMap<String, Deliveries>,
    /// Units claimed here: key → lease deadline.
    held: HashMap<String, Instant>,
    /// Which workspace had the last claim here: erasures first, then the
    /// workspaces take turns.
    turns: roncho_core::queue::Turns,
}

impl Buffer {
    fn candidates(&self, task_types: &[&str], now: Instant) -> Vec<(String, BTreeSet<i64>)> {
        let mut units: Vec<(i64, &String, &Deliveries)> = self
            .units
            .iter()
            .filter(|(key, _)| task_types.contains(&roncho_core::queue::task_type(key)))
            .filter(|(key, _)| self.held.get(*key).is_none_or(|deadline| *deadline <= now))
            .filter_map(|(key, tasks)| Some((*tasks.keys().next()?, key, tasks)))
            .collect();
        units = self.turns.order(units, |(first, key, _)| (key.as_str(), *first));
        units
            .into_iter()
            .take(CANDIDATES)
            .map(|(_, key, tasks)| (key.clone(), tasks.keys().copied().collect()))
            .collect()
    }

    /// Takes the ackers of `ids` of unit `key` out of the buffer.
    fn take(&mut self, key: &str, ids: impl IntoIterator<Item = i64>) -> Vec<Arc<Acker>> {
        let Some(tasks) = self.units.get_mut(key) else {
            return Vec::new();
        };
        let taken = ids
            .into_iter()
            .filter_map(|id| tasks.remove(&id))
            .map(|delivery| delivery.acker)
            .collect();
        if tasks.is_empty() {
            self.units.remove(key);
        }
        taken
    }

    /// Takes every delivery of the partitions `lease_keys`.
    fn take_partitions(&mut self, lease_keys: &BTreeSet<String>, partitions: u32) -> Vec<Arc<Acker>> {
        let keys: Vec<String> = self
            .units
            .keys()
            .filter(|key| lease_keys.contains(&subjects::lease_key_of(key, partitions)))
            .cloned()
            .collect();
        keys.iter()
            .filter_map(|key| self.units.remove(key))
            .flat_map(BTreeMap::into_values)
            .map(|delivery| delivery.acker)
            .collect()
    }
}

/// What a published task carries; the ledger row holds the rest.
#[derive(serde::Serialize, serde::Deserialize)]
struct Envelope {
    id: i64,
    key: String,
    /// The ledger database's installation id (absent in messages published
    /// before it existed: taken as this ledger's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    installation: Option<String>,
}

fn unavailable(what: &str, error: impl std::fmt::Display) -> Error {
    Error::Unavailable(format!("NATS: {what}: {error}"))
}

/// Naks released deliveries once this process's pull requests have
/// expired, so the partition's new owner gets them right away.
async fn give_back(ackers: Vec<Arc<Acker>>) {
    if ackers.is_empty() {
        return;
    }
    tokio::time::sleep(PULL_EXPIRES + Duration::from_millis(500)).await;
    settle(ackers, AckKind::Nak(None)).await;
}

/// Acks (or naks) deliveries, logging failures: an unacked delivery is
/// redelivered and found stale, so nothing is lost by a failed ack.
async fn settle(ackers: Vec<Arc<Acker>>, kind: AckKind) {
    for acker in ackers {
        if let Err(error) = acker.ack_with(kind).await {
            tracing::debug!(%error, "NATS ack failed; the delivery will come back and be dropped");
        }
    }
}

impl NatsWorkQueue {
    /// Connects, creates the stream and lease bucket if missing, takes this
    /// process's share of partitions and starts delivery and the relay.
    pub async fn connect(options: NatsOptions, ledger: Arc<dyn DeliveryLedger>) -> Result<Self> {
        if !subjects::valid_token(&options.prefix) {
            return Err(Error::invalid(
                "nats_prefix",
                format!("{:?} must be letters, digits, `_` or `-`", options.prefix),
            ));
        }
        if options.lease_ttl < options.ack_wait {
            return Err(Error::invalid(
                "lease_ttl",
                format!(
                    "the NATS partition lease ({:?}) must be no shorter than ack_wait ({:?}): a new owner would \
                     see newer work before the old owner's unacked work",
                    options.lease_ttl, options.ack_wait
                ),
            ));
        }
        let client = async_nats::ConnectOptions::new()
            .name(format!("roncho {}", options.instance))
            .connection_timeout(Duration::from_secs(5))
            .connect(options.url.as_str())
            .await
            .map_err(|error| unavailable(&format!("cannot connect to {}", options.url), error))?;
        let jetstream = jetstream::new(client);
        let stream = jetstream
            .get_or_create_stream(stream::Config {
                name: options.stream_name(),
                subjects: vec![format!("{}.work.>", options.prefix)],
                retention: stream::RetentionPolicy::WorkQueue,
                storage: stream::StorageType::File,
                duplicate_window: Duration::from_secs(600),
                num_replicas: options.replicas,
                ..stream::Config::default()
            })
            .await
            .map_err(|error| unavailable("creating the work stream", error))?;
        let leases = lease_bucket(&jetstream, &options).await?;
        let installation = ledger.installation().await?;
        let inner = Arc::new(Inner {
            options,
            installation,
            ledger,
            jetstream,
            stream,
            leases,
            buffer: Mutex::new(Buffer::default()),
            arrived: Notify::new(),
            relay_kick: Notify::new(),
            relaying: tokio::sync::Mutex::new(()),
            owned: tokio::sync::Mutex::new(BTreeMap::new()),
            shutdown: CancellationToken::new(),
        });
        if !inner.options.consume.is_empty() {
            inner.maintain().await?;
            tokio::spawn(inner.clone().maintain_loop());
            tokio::spawn(inner.clone().progress_loop());
        }
        if inner.options.relay {
            tokio::spawn(inner.clone().relay_loop());
        }
        Ok(Self { inner })
    }

    /// Publishes tasks the message transaction wrote (call after a write;
    /// cheap when there are none).
    pub fn kick(&self) {
        self.inner.relay_kick.notify_one();
    }

    /// Publishes every unpublished task now; returns how many.
    pub async fn relay(&self) -> Result<usize> {
        self.inner.relay(None).await
    }

    /// Stops every background loop the way a killed process stops: no lease
    /// renewal, no release, no in-progress acks (for failover tests).
    pub fn abandon(&self) {
        self.inner.shutdown.cancel();
    }

    /// The partitions this process holds (`type.p`), for status and tests.
    pub async fn owned_partitions(&self) -> Vec<String> {
        self.inner.owned.lock().await.keys().cloned().collect()
    }

    /// Deletes the stream and the lease bucket (tests, teardown).
    pub async fn delete_streams(&self) -> Result<()> {
        self.close().await;
        for name in [
            self.inner.options.stream_name(),
            format!("KV_{}", self.inner.options.bucket()),
        ] {
            self.inner
                .jetstream
                .delete_stream(&name)
                .await
                .map_err(|error| unavailable(&format!("deleting stream {name}"), error))?;
        }
        Ok(())
    }

    /// Returns whether the connection to NATS is up (it reconnects by itself).
    pub fn connected(&self) -> bool {
        self.inner.jetstream.client().connection_state() == async_nats::connection::State::Connected
    }

    /// Messages waiting in the stream (published, not yet acked).
    pub async fn stream_messages(&self) -> Result<u64> {
        Ok(self.stream_state().await?.messages)
    }

    /// The stream's state: messages waiting, sequence numbers (published so far).
    pub async fn stream_state(&self) -> Result<stream::State> {
        let mut stream = self.inner.stream.clone();
        let info = stream.info().await.map_err(|error| unavailable("stream info", error))?;
        Ok(info.state.clone())
    }
}

/// Creates the lease bucket's stream by hand (async-nats's
/// `create_key_value` fails on nats-server 2.9: rust-stack §4.1) and binds it.
async fn lease_bucket(jetstream: &jetstream::Context, options: &NatsOptions) -> Result<kv::Store> {
    let bucket = options.bucket();
    let created = jetstream
        .get_or_create_stream(stream::Config {
            name: format!("KV_{bucket}"),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            max_age: options.lease_ttl,
            discard: stream::DiscardPolicy::New,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            storage: stream::StorageType::File,
            num_replicas: options.replicas,
            ..stream::Config::default()
        })
        .await
        .map_err(|error| unavailable("creating the lease bucket", error))?;
    let ttl = created.cached_info().config.max_age;
    if ttl != options.lease_ttl {
        tracing::warn!(bucket, existing = ?ttl, configured = ?options.lease_ttl, "the lease bucket exists with another TTL; using the existing one");
    }
    jetstream
        .get_key_value(&bucket)
        .await
        .map_err(|error| unavailable("binding the lease bucket", error))
}

impl Inner {
    fn lease_ttl(&self) -> Duration {
        self.options.lease_ttl
    }

    /// Every partition lease key of the consumed task types.
    fn partition_keys(&self) -> Vec<(String, String, u32)> {
        self.options
            .consume
            .iter()
            .flat_map(|kind| (0..self.options.partitions).map(move |p| (subjects::lease_key(kind, p), kind.clone(), p)))
            .collect()
    }

    async fn maintain_loop(self: Arc<Self>) {
        // Renewal needs a third of the TTL; rebalancing when workers come
        // and go wants more often than that.
        let mut tick = tokio::time::interval((self.lease_ttl() / 3).min(REBALANCE_EVERY));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(error) = self.maintain().await {
                tracing::warn!(%error, "NATS partition leases: maintenance failed");
            }
        }
    }

    /// Registers this worker, renews its leases, then gives up or takes
    /// partitions to hold its fair share.
    async fn maintain(self: &Arc<Self>) -> Result<()> {
        let me = self.options.instance.clone();
        self.leases
            .put(format!("workers.{me}"), me.clone().into())
            .await
            .map_err(|error| unavailable("registering the worker", error))?;
        let mut owned = self.owned.lock().await;
        let mut lost = BTreeSet::new();
        for (key, (revision, _)) in owned.iter_mut() {
            match self.leases.update(key, me.clone().into(), *revision).await {
                Ok(next) => *revision = next,
                Err(error) => {
                    tracing::warn!(partition = %key, %error, "lost a partition lease; dropping its deliveries");
                    lost.insert(key.clone());
                }
            }
        }
        for key in &lost {
            if let Some((_, stop)) = owned.remove(key) {
                stop.cancel();
            }
        }
        // Deliveries of a lost partition go back: its new owner gets them.
        let dropped = self
            .buffer
            .lock()
            .expect("buffer lock")
            .take_partitions(&lost, self.options.partitions);
        tokio::spawn(give_back(dropped));

        // A fair share of each task type's partitions, so that every worker
        // takes part in every kind of work (not one holding all of the
        // derivation while another holds the webhooks).
        let live = self.live_workers().await?.max(1);
        let share = usize::try_from(self.options.partitions)
            .unwrap_or(usize::MAX)
            .div_ceil(live);
        let kind_of = |key: &str| key.rsplit_once('.').map_or(key, |(kind, _)| kind).to_owned();
        let held_partitions: BTreeSet<String> = {
            let buffer = self.buffer.lock().expect("buffer lock");
            buffer
                .held
                .keys()
                .map(|key| subjects::lease_key_of(key, self.options.partitions))
                .collect()
        };
        let mut owned_by_kind: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for key in owned.keys() {
            owned_by_kind.entry(kind_of(key)).or_default().push(key.clone());
        }
        for keys in owned_by_kind.values() {
            let extra: Vec<String> = keys
                .iter()
                .filter(|key| !held_partitions.contains(*key))
                .rev()
                .take(keys.len().saturating_sub(share))
                .cloned()
                .collect();
            for key in extra {
                if let Some((revision, stop)) = owned.remove(&key) {
                    tokio::spawn(give_back(self.release_partition(&key, revision, stop).await));
                    tracing::info!(partition = %key, live, share, "handed a partition to another worker");
                }
            }
        }
        let keys = self.partition_keys();
        // Start at an offset of our own so workers do not all race for partition 0.
        let offset = subjects::partition(&me, self.options.partitions.max(1)) as usize;
        let per_kind = usize::try_from(self.options.partitions).unwrap_or(usize::MAX).max(1);
        for kind_keys in keys.chunks(per_kind) {
            let mut held = kind_keys.iter().filter(|(key, ..)| owned.contains_key(key)).count();
            for index in 0..kind_keys.len() {
                let (key, kind, partition) = &kind_keys[(offset + index) % kind_keys.len()];
                if held >= share {
                    break;
                }
                if owned.contains_key(key) {
                    continue;
                }
                match self.leases.create(key, me.clone().into()).await {
                    Ok(revision) => {
                        let stop = self.shutdown.child_token();
                        tokio::spawn(self.clone().consume(kind.clone(), *partition, stop.clone()));
                        owned.insert(key.clone(), (revision, stop));
                        held += 1;
                        tracing::debug!(partition = %key, "took a partition");
                    }
                    Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {}
                    Err(error) => return Err(unavailable("taking a partition lease", error)),
                }
            }
        }
        Ok(())
    }

    async fn live_workers(&self) -> Result<usize> {
        let mut keys = self
            .leases
            .keys()
            .await
            .map_err(|error| unavailable("listing workers", error))?;
        let mut live = 0;
        while let Some(key) = keys.next().await {
            if key
                .map_err(|error| unavailable("listing workers", error))?
                .starts_with("workers.")
            {
                live += 1;
            }
        }
        Ok(live)
    }

    /// Stops consuming a partition and frees its lease at once; returns its
    /// buffered deliveries, to give back with [`give_back`] — not before
    /// this process's last pull request on the partition has expired, or
    /// the server would redeliver them into that dead request and they
    /// would wait out the whole ack wait.
    async fn release_partition(&self, key: &str, revision: u64, stop: CancellationToken) -> Vec<Arc<Acker>> {
        stop.cancel();
        let dropped = self
            .buffer
            .lock()
            .expect("buffer lock")
            .take_partitions(&BTreeSet::from([key.to_owned()]), self.options.partitions);
        if let Err(error) = self.leases.delete_expect_revision(key, Some(revision)).await {
            tracing::debug!(partition = %key, %error, "releasing a partition lease failed; it expires");
        }
        dropped
    }

    /// Pulls one partition's deliveries into the buffer until `stop`.
    async fn consume(self: Arc<Self>, kind: String, partition: u32, stop: CancellationToken) {
        let name = format!("{}_{}_{partition}", self.options.stream_name(), kind);
        let config = consumer::pull::Config {
            durable_name: Some(name.clone()),
            filter_subject: format!("{}.work.{kind}.{partition}.>", self.options.prefix),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: self.options.ack_wait,
            max_ack_pending: self.options.max_buffered,
            max_deliver: -1,
            ..consumer::pull::Config::default()
        };
        while !stop.is_cancelled() {
            let messages = async {
                let consumer = self
                    .stream
                    .get_or_create_consumer(&name, config.clone())
                    .await
                    .map_err(|error| error.to_string())?;
                consumer
                    .stream()
                    .max_messages_per_batch(64)
                    .expires(PULL_EXPIRES)
                    .heartbeat(PULL_EXPIRES / 3)
                    .messages()
                    .await
                    .map_err(|error| error.to_string())
            };
            let mut messages = tokio::select! {
                () = stop.cancelled() => return,
                messages = messages => match messages {
                    Ok(messages) => messages,
                    Err(error) => {
                        tracing::warn!(consumer = %name, %error, "NATS consumer unavailable; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                },
            };
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => return,
                    next = messages.next() => next,
                };
                match next {
                    Some(Ok(message)) => self.deliver(message).await,
                    Some(Err(error)) => {
                        tracing::warn!(consumer = %name, %error, "NATS delivery failed; pulling again");
                        break;
                    }
                    None => break,
                }
            }
        }
    }

    async fn deliver(&self, message: jetstream::Message) {
        let (message, acker) = message.split();
        let trace = message.headers.as_ref().and_then(|headers| {
            TraceContext::from_headers(|name| headers.get(name).map(async_nats::HeaderValue::as_str))
        });
        let Ok(envelope) = serde_json::from_slice::<Envelope>(&message.payload) else {
            tracing::error!(subject = %message.subject, "dropping a work message that is not a task envelope");
            settle(vec![Arc::new(acker)], AckKind::Term).await;
            return;
        };
        if let Some(installation) = envelope.installation.as_ref().filter(|id| **id != self.installation) {
            // Another database's task (one this stream served before, or a
            // second deployment on the same nats_prefix): not this ledger's.
            tracing::warn!(
                installation,
                ours = %self.installation,
                task_id = envelope.id,
                "dropping a work message of another database; do two deployments share nats_prefix?"
            );
            settle(vec![Arc::new(acker)], AckKind::Term).await;
            return;
        }
        let duplicate = {
            let mut buffer = self.buffer.lock().expect("buffer lock");
            match buffer.units.entry(envelope.key).or_default().entry(envelope.id) {
                std::collections::btree_map::Entry::Occupied(_) => Some(acker),
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(Delivery {
                        acker: Arc::new(acker),
                        trace,
                    });
                    None
                }
            }
        };
        match duplicate {
            // A republished copy of a task already here: the one held stands.
            Some(acker) => settle(vec![Arc::new(acker)], AckKind::Ack).await,
            None => self.arrived.notify_one(),
        }
    }

    /// Keeps buffered deliveries from being redelivered while they wait.
    async fn progress_loop(self: Arc<Self>) {
        let mut tick = tokio::time::interval(self.options.ack_wait / 3);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let (ackers, held): (Vec<Arc<Acker>>, Vec<i64>) = self
                .buffer
                .lock()
                .expect("buffer lock")
                .units
                .values()
                .flat_map(|tasks| tasks.iter().map(|(id, delivery)| (delivery.acker.clone(), *id)))
                .unzip();
            settle(ackers, AckKind::Progress).await;
            // The sweeper leaves tasks a consumer holds alone.
            if let Err(error) = self.ledger.mark_seen(&held).await {
                tracing::debug!(%error, "recording held deliveries failed; the sweeper may republish them");
            }
        }
    }

    async fn relay_loop(self: Arc<Self>) {
        let lost_every = (self.options.redeliver_after / 4).clamp(Duration::from_millis(200), Duration::from_secs(15));
        let mut lost_swept = Instant::now();
        loop {
            let older_than = tokio::select! {
                () = self.shutdown.cancelled() => return,
                () = self.relay_kick.notified() => None,
                () = tokio::time::sleep(RELAY_SWEEP.min(lost_every)) => Some(now_micros() - micros(RELAY_SWEEP)),
            };
            if let Err(error) = self.relay(older_than).await {
                tracing::warn!(%error, "publishing queued work to NATS failed; it stays in the outbox and is retried");
            }
            if lost_swept.elapsed() >= lost_every {
                lost_swept = Instant::now();
                match self.republish_lost().await {
                    Ok(0) => {}
                    Ok(republished) => tracing::warn!(
                        republished,
                        "republished pending work no consumer held (lost or dropped by the stream)"
                    ),
                    Err(error) => tracing::warn!(%error, "sweeping for lost work failed; trying again"),
                }
            }
        }
    }

    /// Publishes again, under fresh ids, the tasks the ledger finds lost
    /// (see [`DeliveryLedger::take_lost`]); returns how many.
    async fn republish_lost(&self) -> Result<usize> {
        let _round = self.relaying.lock().await;
        let lost = self.ledger.take_lost(LOST_BATCH, self.options.redeliver_after).await?;
        for (task, republished) in &lost {
            let ack = self.publish(task, &format!("r{republished}")).await?;
            ack.await
                .map_err(|error| unavailable("republishing lost work (no ack)", error))?;
        }
        Ok(lost.len())
    }

    /// Publishes one task; `suffix` makes the message id fresh (`""`: the
    /// task's first publication).
    async fn publish(
        &self,
        row: &Unpublished,
        suffix: &str,
    ) -> Result<async_nats::jetstream::context::PublishAckFuture> {
        let id = row.id;
        let mut headers = async_nats::HeaderMap::new();
        let message_id = match suffix {
            "" => format!("{}-{id}", self.installation),
            suffix => format!("{}-{id}-{suffix}", self.installation),
        };
        headers.insert(async_nats::header::NATS_MESSAGE_ID, message_id.as_str());
        // A traced task's publication is a span of its trace, and the
        // message carries that span's context to whoever consumes it.
        let _publishing = row.trace.as_ref().map(|trace| {
            let span = tracing::info_span!(
                "publish work",
                otel.kind = "producer",
                messaging.system = "nats",
                work_unit_key = %row.work_unit_key,
                task_id = id,
            );
            trace.set_parent_of(&span);
            for (name, value) in TraceContext::of(&span).as_ref().unwrap_or(trace).headers() {
                headers.insert(name, value);
            }
            span
        });
        let payload = serde_json::to_vec(&Envelope {
            id,
            key: row.work_unit_key.clone(),
            installation: Some(self.installation.clone()),
        })
        .map_err(|error| Error::Internal(error.to_string()))?;
        let subject = subjects::subject(&self.options.prefix, &row.work_unit_key, self.options.partitions);
        self.jetstream
            .publish_with_headers(subject, headers, payload.into())
            .await
            .map_err(|error| unavailable("publishing work", error))
    }

    /// Publishes unpublished ledger rows (written before `older_than`, if
    /// set) and marks them published.
    async fn relay(&self, older_than: Option<i64>) -> Result<usize> {
        let _round = self.relaying.lock().await;
        let mut total = 0;
        loop {
            let rows = self.ledger.unpublished(RELAY_BATCH, older_than).await?;
            let mut acks = Vec::with_capacity(rows.len());
            let mut failure = None;
            for row in &rows {
                match self.publish(row, "").await {
                    Ok(ack) => acks.push((row, ack)),
                    Err(error) => {
                        failure = Some(error);
                        break;
                    }
                }
            }
            let mut published = Vec::with_capacity(acks.len());
            for (row, ack) in acks {
                match ack.await {
                    // The stream saw this id before, yet the ledger never
                    // published the task: another database used it (a
                    // restore). Published again under a fresh id.
                    Ok(ack) if ack.duplicate => {
                        tracing::warn!(
                            task_id = row.id,
                            "the stream had already seen this task's message id; publishing it under a fresh one"
                        );
                        match self.publish(row, &format!("d{}", now_micros())).await {
                            Ok(again) => match again.await {
                                Ok(_) => published.push(row.id),
                                Err(error) => failure = Some(unavailable("publishing work (no ack)", error)),
                            },
                            Err(error) => failure = Some(error),
                        }
                    }
                    Ok(_) => published.push(row.id),
                    Err(error) => failure = Some(unavailable("publishing work (no ack)", error)),
                }
            }
            self.ledger.mark_published(&published).await?;
            total += published.len();
            if let Some(error) = failure {
                return Err(error);
            }
            if rows.len() < usize::try_from(RELAY_BATCH).unwrap_or(usize::MAX) {
                return Ok(total);
            }
        }
    }

    /// One claim attempt over what is buffered now.
    async fn try_claim(&self, worker: &str, task_types: &[&str], max: usize, lease: Duration) -> Result<Option<Claim>> {
        let candidates = self
            .buffer
            .lock()
            .expect("buffer lock")
            .candidates(task_types, Instant::now());
        if candidates.is_empty() {
            return Ok(None);
        }
        let ids: Vec<i64> = candidates.iter().flat_map(|(_, ids)| ids.iter().copied()).collect();
        let pending = self.ledger.pending_among(&ids).await?;
        let mut stale = Vec::new();
        let mut live = Vec::with_capacity(candidates.len());
        {
            let mut buffer = self.buffer.lock().expect("buffer lock");
            for (key, ids) in candidates {
                let (still, done): (BTreeSet<i64>, BTreeSet<i64>) =
                    ids.into_iter().partition(|id| pending.contains(id));
                stale.extend(buffer.take(&key, done));
                if !still.is_empty() {
                    live.push((key, still));
                }
            }
        }
        // Deliveries of tasks the ledger already finished (a worker died
        // between the two): acknowledged, not repeated.
        settle(stale, AckKind::Ack).await;
        let mut claim = self.ledger.claim_delivered(worker, &live, max, lease).await?;
        if let Some(claim) = &mut claim {
            let mut buffer = self.buffer.lock().expect("buffer lock");
            // The work joins the trace its message carried.
            if let Some(deliveries) = buffer.units.get(&claim.work_unit_key) {
                for task in &mut claim.tasks {
                    if let Some(trace) = deliveries.get(&task.id).and_then(|delivery| delivery.trace.clone()) {
                        task.trace = Some(trace);
                    }
                }
            }
            buffer.held.insert(claim.work_unit_key.clone(), Instant::now() + lease);
            buffer.turns.claimed(&claim.work_unit_key);
        }
        Ok(claim)
    }
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

#[async_trait]
impl WorkQueue for NatsWorkQueue {
    async fn enqueue(&self, tasks: Vec<NewTask>) -> Result<usize> {
        self.enqueue_delayed(tasks, Duration::ZERO).await
    }

    /// The message is published at once; the ledger's ready time holds the
    /// delivered task back until then.
    async fn enqueue_delayed(&self, tasks: Vec<NewTask>, delay: Duration) -> Result<usize> {
        let added = self.inner.ledger.enqueue_delayed(tasks, delay).await?;
        if added > 0 {
            // Published before returning; if NATS is down they wait in the outbox.
            if let Err(error) = self.inner.relay(None).await {
                tracing::warn!(%error, "queued work waits in the outbox until NATS is back");
            }
        }
        Ok(added)
    }

    async fn claim(&self, worker: &str, task_types: &[&str], max: usize, lease: Duration) -> Result<Option<Claim>> {
        let consumed: Vec<&str> = task_types
            .iter()
            .copied()
            .filter(|kind| self.inner.options.consume.iter().any(|consumed| consumed == kind))
            .collect();
        if consumed.is_empty() || max == 0 {
            return Ok(None);
        }
        let deadline = Instant::now() + self.inner.options.arrival_wait;
        loop {
            let arrived = self.inner.arrived.notified();
            if let Some(claim) = self.inner.try_claim(worker, &consumed, max, lease).await? {
                return Ok(Some(claim));
            }
            tokio::select! {
                () = arrived => {}
                () = tokio::time::sleep_until(deadline) => return Ok(None),
            }
        }
    }

    async fn renew(&self, claim: &Claim, lease: Duration) -> Result<()> {
        self.inner.ledger.renew(claim, lease).await?;
        self.inner
            .buffer
            .lock()
            .expect("buffer lock")
            .held
            .insert(claim.work_unit_key.clone(), Instant::now() + lease);
        Ok(())
    }

    async fn complete(&self, claim: &Claim, task_ids: &[i64]) -> Result<()> {
        self.inner.ledger.complete(claim, task_ids).await?;
        let done = self
            .inner
            .buffer
            .lock()
            .expect("buffer lock")
            .take(&claim.work_unit_key, task_ids.iter().copied());
        settle(done, AckKind::Ack).await;
        Ok(())
    }

    async fn fail(
        &self,
        claim: &Claim,
        task_ids: &[i64],
        error: &str,
        retry_after: Duration,
        max_attempts: i64,
    ) -> Result<()> {
        // Retried tasks stay buffered (kept alive by in-progress acks); dead
        // ones are found finished by the next claim and acked.
        self.inner
            .ledger
            .fail(claim, task_ids, error, retry_after, max_attempts)
            .await
    }

    /// Postponed tasks stay buffered (kept alive by in-progress acks) until
    /// the ledger makes them ready again.
    async fn defer(&self, claim: &Claim, task_ids: &[i64], reason: &str, delay: Duration) -> Result<()> {
        self.inner.ledger.defer(claim, task_ids, reason, delay).await
    }

    /// Revived tasks go back to the outbox and are published again.
    async fn retry_dead(&self, filter: &RetryFilter) -> Result<u64> {
        let retried = self.inner.ledger.retry_dead(filter).await?;
        if retried > 0 {
            self.kick();
        }
        Ok(retried)
    }

    async fn release(&self, claim: &Claim) -> Result<()> {
        self.inner
            .buffer
            .lock()
            .expect("buffer lock")
            .held
            .remove(&claim.work_unit_key);
        self.inner.ledger.release(claim).await?;
        // The unit may have more buffered work for the next claim.
        self.inner.arrived.notify_one();
        Ok(())
    }

    /// The units' deliveries stay buffered here until [`WorkQueue::close`]
    /// hands them on with the partitions.
    async fn release_worker(&self, worker: &str) -> Result<u64> {
        let released = self.inner.ledger.release_units_of(worker).await?;
        let mut buffer = self.inner.buffer.lock().expect("buffer lock");
        for key in &released {
            buffer.held.remove(key);
        }
        drop(buffer);
        self.inner.arrived.notify_one();
        Ok(released.len() as u64)
    }

    async fn postpone(&self, work_unit_key: &str, delay: Duration, latest: Duration) -> Result<u64> {
        self.inner.ledger.postpone(work_unit_key, delay, latest).await
    }

    async fn status(&self, filter: &StatusFilter) -> Result<QueueStatus> {
        self.inner.ledger.status(filter).await
    }

    async fn history(&self, filter: &StatusFilter, window: Duration, steps: usize) -> Result<Vec<QueueSample>> {
        self.inner.ledger.history(filter, window, steps).await
    }

    async fn purge(&self, done_age: Duration, dead_age: Duration) -> Result<u64> {
        self.inner.ledger.purge(done_age, dead_age).await
    }

    async fn work_arrived(&self) {
        self.inner.arrived.notified().await;
    }

    async fn close(&self) {
        let inner = &self.inner;
        inner.shutdown.cancel();
        let owned = std::mem::take(&mut *inner.owned.lock().await);
        let mut released = Vec::new();
        for (key, (revision, stop)) in owned {
            released.extend(inner.release_partition(&key, revision, stop).await);
        }
        give_back(released).await;
        if !inner.options.consume.is_empty() {
            let _ = inner.leases.purge(format!("workers.{}", inner.options.instance)).await;
        }
    }
}
