//! The reconciler role: brings vector state in line with relational state.
//!
//! Every message and conclusion is written pending its vector (a message
//! with a row in `message_sync`, a conclusion with `sync_state`); a
//! write never waits for, or fails because of, the embedder or the vector
//! store. The [`Reconciler`] embeds pending rows in batches and upserts their
//! vectors, marks them `synced`, retries failures with quadratic backoff and
//! marks rows `failed` after the configured attempts (visible in `roncho
//! status`), and removes the vectors of deleted rows (tombstones). Writers
//! [`Reconciler::nudge`] it for an immediate pass; it also runs on a timer,
//! so a separate `--roles reconciler` process picks up other processes' writes.
//!
//! On Postgres the role also indexes message text for full-text search, off
//! the write path: marking a message's vector synced indexes its words in the
//! same transaction (ADR 0012), and the [`TextIndexer`] indexes those nothing else will
//! (no embedder configured, a failing or lagging one).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use roncho_core::Result;
use roncho_core::embed::Embedder;
use roncho_core::lexical;
use roncho_core::model::{SyncItem, SyncKind, now_micros};
use roncho_core::store::SyncLedger;
use roncho_core::vector::{VectorRecord, VectorStore};
use roncho_worker::yielding::YieldToWrites;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

mod text;
pub use text::{GRACE_WITH_RECONCILER, LAG_UNDER_WRITES, TextIndexer};

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
    store: Arc<dyn SyncLedger>,
    embedder: Arc<dyn Embedder>,
    vectors: Arc<dyn VectorStore>,
    config: ReconcilerConfig,
    wake: Notify,
    /// The writes of its process it lets pass first.
    yielding: Option<Arc<YieldToWrites>>,
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
        store: Arc<dyn SyncLedger>,
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
            yielding: None,
        }
    }

    /// Returns the reconciler waiting, before each batch, for the writes
    /// `yielding` watches to pause.
    pub fn yielding_to_writes(mut self, yielding: Arc<YieldToWrites>) -> Self {
        self.yielding = Some(yielding);
        self
    }

    /// How long it has waited for writes to pause, in all.
    pub fn yielded_total(&self) -> Duration {
        self.yielding
            .as_ref()
            .map_or(Duration::ZERO, |yielding| yielding.total())
    }

    /// What it waits for writes with, if it does.
    pub fn yielding(&self) -> Option<Arc<YieldToWrites>> {
        self.yielding.clone()
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
        let mut caught_up = true;
        for kind in [SyncKind::Message, SyncKind::Conclusion] {
            while !shutdown.is_cancelled() {
                if let Some(yielding) = &self.yielding {
                    yielding.wait(shutdown).await;
                }
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
                        caught_up = false;
                        // The dependency is likely down: leave the rest for the next pass.
                        break;
                    }
                }
            }
        }
        if let (true, false, Some(yielding)) = (caught_up, shutdown.is_cancelled(), &self.yielding) {
            // Nothing due: the next burst may be yielded to again.
            yielding.caught_up();
        }
        Ok(report)
    }

    async fn sync(&self, items: &[SyncItem]) -> Result<()> {
        let vectors = self.vectors_of(items).await?;
        let mut by_namespace: BTreeMap<&str, Vec<VectorRecord>> = BTreeMap::new();
        for (item, (vector, passages)) in items.iter().zip(vectors) {
            by_namespace
                .entry(item.namespace.as_str())
                .or_default()
                .push(VectorRecord {
                    id: item.id.clone(),
                    vector,
                    passages,
                    session_id: item.session_id.clone(),
                    peer_id: item.peer_id.clone(),
                    level: item.level.clone(),
                    // Messages are searched by their words too; conclusions by meaning alone.
                    lexical: (item.kind == SyncKind::Message).then(|| lexical::document(&item.text)),
                });
        }
        // A store that keeps term statistics in the database counts them as
        // it takes the vectors (Qdrant, `counting_terms_in`).
        for (namespace, records) in by_namespace {
            self.vectors.upsert(namespace, records).await?;
        }
        let kind = items[0].kind;
        let synced: Vec<(String, i64)> = items.iter().map(|item| (item.id.clone(), item.version)).collect();
        self.store.mark_synced(kind, &synced).await
    }

    /// The vectors of each item: what its start says, with a message's
    /// context turn mixed in at [`CONTEXT_WEIGHT`] (`normalize(text + w ·
    /// context)`), and, for a message longer than the embedder reads at
    /// once, each later passage's own. Each distinct text is embedded once
    /// (a batch's consecutive messages are each other's context).
    async fn vectors_of(&self, items: &[SyncItem]) -> Result<Vec<(Vec<f32>, Vec<Vec<f32>>)>> {
        // A message's text never changes, so neither do its passages; a
        // conclusion's may, and is short: it keeps one vector. Cutting a
        // text into passages tokenizes all of it: off the async runtime.
        let messages: Vec<Option<String>> = items
            .iter()
            .map(|item| (item.kind == SyncKind::Message).then(|| item.text.clone()))
            .collect();
        let embedder = self.embedder.clone();
        let ranges = tokio::task::spawn_blocking(move || {
            messages
                .iter()
                .map(|text| text.as_deref().map(|text| embedder.passages(text)).unwrap_or_default())
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|error| roncho_core::Error::Internal(format!("cutting texts into passages failed: {error}")))?;
        let passages: Vec<Vec<&str>> = items
            .iter()
            .zip(&ranges)
            .map(|(item, ranges)| {
                ranges
                    .iter()
                    .skip(1)
                    .map(|range| on_characters(&item.text, range.clone()))
                    .collect()
            })
            .collect();
        let mut texts: Vec<String> = Vec::new();
        let mut index: BTreeMap<&str, usize> = BTreeMap::new();
        for text in items.iter().zip(&passages).flat_map(|(item, passages)| {
            std::iter::once(item.text.as_str())
                .chain(item.context.as_deref())
                .chain(passages.iter().copied())
        }) {
            if !index.contains_key(text) {
                index.insert(text, texts.len());
                texts.push(text.to_owned());
            }
        }
        let embedded = self.embedder.embed(&texts).await?;
        Ok(items
            .iter()
            .zip(&passages)
            .map(|(item, passages)| {
                let own = &embedded[index[item.text.as_str()]];
                let start = match &item.context {
                    Some(context) => mix(own, &embedded[index[context.as_str()]], CONTEXT_WEIGHT),
                    None => own.clone(),
                };
                let later = passages.iter().map(|text| embedded[index[text]].clone()).collect();
                (start, later)
            })
            .collect())
    }
}

/// The part of `text` within `range`, widened to the characters it cuts
/// into (a passage is never dropped, so the numbers of those after it hold).
fn on_characters(text: &str, range: std::ops::Range<usize>) -> &str {
    let mut start = range.start.min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = range.end.clamp(start, text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    &text[start..end]
}

/// How much of the turn a message answers goes into its vector. A reply
/// such as "Yes, last Sunday!" means little alone, but a message embedded
/// together with its predecessor's text lent its meaning to the next turn
/// and was diluted itself: "pet cat" found the turn after the kitten.
/// Mixing the two vectors, the message's own weighing more, keeps each
/// message nearest to its own meaning. At 0.85 (the best of 0.3–1.0 on the
/// development set with MiniLM) small talk right after a line still took
/// its meaning and outranked it in variants of that conversation; at 0.5,
/// with search lending a hit's score to its neighbours instead
/// (`roncho_search::messages`), every variant finds the line that says it,
/// and both cross-validation folds of the development set gained
/// (docs/benchmarks.md, "Own meaning first").
pub const CONTEXT_WEIGHT: f32 = 0.5;

/// Returns `normalize(own + weight · context)`.
pub fn mix(own: &[f32], context: &[f32], weight: f32) -> Vec<f32> {
    let mixed: Vec<f32> = own.iter().zip(context).map(|(a, b)| a + weight * b).collect();
    let norm = mixed.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        mixed.iter().map(|x| x / norm).collect()
    } else {
        own.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::mix;

    #[test]
    fn a_passage_cut_inside_a_character_takes_all_of_it() {
        let text = "ab日本cd";
        assert_eq!(super::on_characters(text, 2..5), "日");
        assert_eq!(super::on_characters(text, 3..6), "日本");
        assert_eq!(super::on_characters(text, 1..3), "b日");
        assert_eq!(super::on_characters(text, 0..99), text);
        assert_eq!(super::on_characters(text, 99..120), "");
    }

    #[test]
    fn a_mixed_vector_is_unit_length_and_leans_to_its_own_meaning() {
        let own = [1.0, 0.0];
        let context = [0.0, 1.0];
        let mixed = mix(&own, &context, super::CONTEXT_WEIGHT);
        let norm: f32 = mixed.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6, "{mixed:?}");
        assert!(mixed[0] > mixed[1], "its own meaning weighs more: {mixed:?}");
        assert_eq!(mix(&own, &[-1.0, 0.0], 1.0), own.to_vec(), "a zero sum keeps its own");
    }
}
