//! The reconciler role: brings vector state in line with relational state.
//!
//! Every message and conclusion is written with `sync_state = pending`; a
//! write never waits for, or fails because of, the embedder or the vector
//! store. The [`Reconciler`] embeds pending rows in batches and upserts their
//! vectors, marks them `synced`, retries failures with quadratic backoff and
//! marks rows `failed` after the configured attempts (visible in `roncho
//! status`), and removes the vectors of deleted rows (tombstones). Writers
//! [`Reconciler::nudge`] it for an immediate pass; it also runs on a timer,
//! so a separate `--roles reconciler` process picks up other processes' writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use roncho_core::Result;
use roncho_core::embed::Embedder;
use roncho_core::model::{SyncItem, SyncKind, now_micros};
use roncho_core::store::Store;
use roncho_core::vector::{VectorRecord, VectorStore};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How the reconciler paces itself.
#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// Rows embedded per call.
    pub batch_size: i64,
    /// Attempts before a row is marked `failed`.
    pub max_attempts: i64,
    /// Attempt n of a row waits `backoff × n²` after the previous one.
    pub backoff: Duration,
    /// Time between passes when nobody nudges.
    pub interval: Duration,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        Self {
            batch_size: 64,
            max_attempts: 20,
            backoff: Duration::from_secs(5),
            interval: Duration::from_secs(1),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassReport {
    pub synced: usize,
    pub failed: usize,
    pub removed: usize,
}

/// Syncs vectors of pending rows and removes those of deleted rows.
pub struct Reconciler {
    store: Arc<dyn Store>,
    embedder: Arc<dyn Embedder>,
    vectors: Arc<dyn VectorStore>,
    config: ReconcilerConfig,
    wake: Notify,
}

impl std::fmt::Debug for Reconciler {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Reconciler")
            .field("model", &self.embedder.model_id())
            .finish_non_exhaustive()
    }
}

impl Reconciler {
    /// Returns a reconciler over the given ports.
    pub fn new(
        store: Arc<dyn Store>,
        embedder: Arc<dyn Embedder>,
        vectors: Arc<dyn VectorStore>,
        config: ReconcilerConfig,
    ) -> Self {
        Self {
            store,
            embedder,
            vectors,
            config,
            wake: Notify::new(),
        }
    }

    /// Asks for a pass now (called after writes).
    pub fn nudge(&self) {
        self.wake.notify_one();
    }

    /// Runs passes until `shutdown`, on every nudge and every `interval`.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            match self.pass_until(&shutdown).await {
                Ok(report) if report != PassReport::default() => {
                    tracing::debug!(
                        synced = report.synced,
                        failed = report.failed,
                        removed = report.removed,
                        "reconciler pass"
                    );
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "reconciler pass failed"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(self.config.interval) => {}
            }
        }
    }

    /// Runs one pass: tombstones first, then pending messages and conclusions
    /// until none is due.
    pub async fn pass(&self) -> Result<PassReport> {
        self.pass_until(&CancellationToken::new()).await
    }

    /// Runs a pass that stops between batches once `shutdown` is cancelled.
    async fn pass_until(&self, shutdown: &CancellationToken) -> Result<PassReport> {
        let mut report = PassReport::default();
        loop {
            let tombstones = self.store.tombstones(500).await?;
            if tombstones.is_empty() {
                break;
            }
            let mut by_namespace: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            for tombstone in &tombstones {
                by_namespace
                    .entry(tombstone.namespace.as_str())
                    .or_default()
                    .push(tombstone.id.clone());
            }
            for (namespace, ids) in by_namespace {
                self.vectors.delete(namespace, &ids).await?;
            }
            self.store.clear_tombstones(&tombstones).await?;
            report.removed += tombstones.len();
        }
        let backoff = i64::try_from(self.config.backoff.as_micros()).unwrap_or(i64::MAX);
        for kind in [SyncKind::Message, SyncKind::Conclusion] {
            while !shutdown.is_cancelled() {
                let items = self
                    .store
                    .unsynced(kind, self.config.batch_size, now_micros(), backoff)
                    .await?;
                if items.is_empty() {
                    break;
                }
                match self.sync(&items).await {
                    Ok(()) => report.synced += items.len(),
                    Err(error) => {
                        tracing::warn!(kind = kind.name(), rows = items.len(), %error, "vector sync failed; will retry");
                        let ids: Vec<String> = items.iter().map(|item| item.id.clone()).collect();
                        self.store
                            .mark_sync_failed(kind, &ids, &error.to_string(), self.config.max_attempts)
                            .await?;
                        report.failed += items.len();
                        // The dependency is likely down: leave the rest for the next pass.
                        break;
                    }
                }
            }
        }
        Ok(report)
    }

    async fn sync(&self, items: &[SyncItem]) -> Result<()> {
        let texts: Vec<String> = items.iter().map(|item| item.text.clone()).collect();
        let vectors = self.embedder.embed(&texts).await?;
        let mut by_namespace: BTreeMap<&str, Vec<VectorRecord>> = BTreeMap::new();
        for (item, vector) in items.iter().zip(vectors) {
            by_namespace
                .entry(item.namespace.as_str())
                .or_default()
                .push(VectorRecord {
                    id: item.id.clone(),
                    vector,
                    session_id: item.session_id.clone(),
                    peer_id: item.peer_id.clone(),
                    level: item.level.clone(),
                });
        }
        for (namespace, records) in by_namespace {
            self.vectors.upsert(namespace, records).await?;
        }
        let kind = items[0].kind;
        let synced: Vec<(String, i64)> = items.iter().map(|item| (item.id.clone(), item.version)).collect();
        self.store.mark_synced(kind, &synced).await
    }
}
