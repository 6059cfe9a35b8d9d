//! The `VectorStore` port: vectors of messages and conclusions, in
//! namespaces per workspace (messages) and per collection (conclusions).

use async_trait::async_trait;

use crate::Result;
use crate::lexical::SparseVector;

/// Returns the namespace of a workspace's message vectors.
pub fn messages_namespace(workspace_id: &str) -> String {
    format!("msg/{workspace_id}")
}

/// Returns the namespace of one collection's conclusion vectors.
pub fn documents_namespace(workspace_id: &str, observer_id: &str, observed_id: &str) -> String {
    format!("doc/{workspace_id}/{observer_id}/{observed_id}")
}

/// A vector with the fields a query may filter on.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorRecord {
    /// The public id of the message or conclusion.
    pub id: String,
    pub vector: Vec<f32>,
    pub session_id: Option<String>,
    pub peer_id: Option<String>,
    pub level: Option<String>,
    /// The words of a message as BM25 term weights ([`crate::lexical`]),
    /// for stores that rank full text ([`VectorStore::hybrid_query`]).
    pub lexical: Option<SparseVector>,
    /// The vectors of the passages after the first, in order, when the
    /// text is longer than the embedder reads at once
    /// ([`crate::embed::Embedder::passages`]): `vector` is its start's
    /// (passage 0). A query scores the record by its nearest passage and
    /// says which ([`VectorHit::passage`]); deleting the record deletes
    /// every passage.
    pub passages: Vec<Vec<f32>>,
}

impl VectorRecord {
    /// Every vector of the record, the first passage's first.
    pub fn vectors(&self) -> impl Iterator<Item = &[f32]> {
        std::iter::once(self.vector.as_slice()).chain(self.passages.iter().map(Vec::as_slice))
    }
}

/// Restrictions on a vector query; unset fields do not restrict.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VectorFilter {
    pub session_ids: Option<Vec<String>>,
    pub peer_id: Option<String>,
    pub levels: Option<Vec<String>>,
}

impl VectorFilter {
    /// Returns whether a record passes the filter.
    pub fn matches(&self, session_id: Option<&str>, peer_id: Option<&str>, level: Option<&str>) -> bool {
        let within = |allowed: &Option<Vec<String>>, value: Option<&str>| {
            allowed
                .as_ref()
                .is_none_or(|allowed| value.is_some_and(|value| allowed.iter().any(|a| a == value)))
        };
        within(&self.session_ids, session_id)
            && self.peer_id.as_deref().is_none_or(|wanted| peer_id == Some(wanted))
            && within(&self.levels, level)
    }
}

/// A query hit: the record's id and its cosine distance (0 = same
/// direction), plus, for a record of several passages ranked by its
/// nearest, the allowance for their number ([`passage_chance`]).
#[derive(Debug, Clone, PartialEq)]
pub struct VectorHit {
    pub id: String,
    pub distance: f32,
    /// Which of the record's passages is nearest (0: its start, the only
    /// one of a text the embedder reads whole).
    pub passage: u32,
}

impl VectorHit {
    /// A hit on the start of record `id`.
    pub fn new(id: impl Into<String>, distance: f32) -> Self {
        Self {
            id: id.into(),
            distance,
            passage: 0,
        }
    }
}

/// About one standard deviation of a query's cosine similarity to passages
/// that do not answer it: how much the nearest of a record's passages is
/// nearer than a single passage by chance grows in steps of this
/// ([`passage_chance`]). On the long-conversation development set (issue
/// 58, embedded, bge-small) 0.02, 0.04 and 0.06 each raised recall@10 of
/// both folds and left the chat-sized set (no message of several
/// passages) unchanged; 0.04 ranked a long plan whose last
/// passage answers below unrelated one-line messages (e2e
/// `long_message`), so the smallest of them (docs/benchmarks.md, "The
/// nearest of many passages").
const PASSAGE_SPREAD: f32 = 0.02;

/// The distance added to a record of `passages` passages (1: a text the
/// embedder reads whole) when it is ranked by its nearest: the expected
/// maximum of `n` draws of noise is about `sqrt(2 ln n)` standard
/// deviations above one draw, so without it a long message's many
/// passages win by chance against a short message that answers — on the
/// long-conversation development set, late passages of long replies that
/// never mention the subject were ranked first.
pub fn passage_chance(passages: u32) -> f32 {
    if passages <= 1 {
        return 0.0;
    }
    PASSAGE_SPREAD * (2.0 * (passages as f32).ln()).sqrt()
}

/// Keeps each record's best hit of `hits` (nearest first), `top_k` records
/// at most, each record's distance raised by [`passage_chance`] of its
/// `passages` count and none of them then further than `max_distance`: a
/// store holding a record's passages as separate entries ranks them as
/// one. Returns the kept hits, nearest first, and whether `hits` (asked for
/// `asked` entries) may have left out records that belong in the top
/// `top_k`, so the store asks again for more: it was full, and fewer than
/// `top_k` kept records are nearer than the last hit — a record not
/// fetched is at least that far, and may outrank one that its allowance
/// moved back.
pub fn best_per_record(
    hits: Vec<VectorHit>,
    top_k: usize,
    asked: usize,
    max_distance: Option<f32>,
    passages: impl Fn(&str) -> u32,
) -> (Vec<VectorHit>, bool) {
    let full = hits.len() >= asked;
    let beyond = hits.last().map_or(f32::INFINITY, |hit| hit.distance);
    let mut seen = std::collections::HashSet::with_capacity(hits.len());
    let mut kept = Vec::with_capacity(hits.len());
    for mut hit in hits {
        if seen.insert(hit.id.clone()) {
            hit.distance += passage_chance(passages(&hit.id));
            if max_distance.is_none_or(|limit| hit.distance <= limit) {
                kept.push(hit);
            }
        }
    }
    kept.sort_by(|a, b| a.distance.total_cmp(&b.distance));
    let settled = kept.iter().take_while(|hit| hit.distance <= beyond).count();
    let short = full && settled < top_k;
    kept.truncate(top_k);
    (kept, short)
}

/// The two candidate lists of a hybrid query, best first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HybridHits {
    /// Nearest by the dense vector.
    pub dense: Vec<VectorHit>,
    /// Best by BM25 over the records' lexical vectors (`distance` is the
    /// negated score).
    pub lexical: Vec<VectorHit>,
}

/// Where the inverse document frequencies of a hybrid query's BM25 come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermWeighting {
    /// The store counts them over the queried namespace (the embedded store).
    Namespace,
    /// The store counts them over every namespace: a Qdrant collection made
    /// with the `Idf` modifier, before per-workspace counts (all workspaces).
    Collection,
    /// The query carries them: the store applies none; the reconciler counts
    /// terms per workspace ([`crate::store::SyncLedger::count_terms`]) and
    /// search weighs a query by them ([`crate::lexical::weighted`]).
    Query,
}

#[async_trait]
pub trait VectorStore: Send + Sync + 'static {
    /// Checks that stored vectors have `dimensions` and records it for a new
    /// store; a mismatch is `FAILED_PRECONDITION` naming both sizes.
    async fn check_dimensions(&self, dimensions: usize, model_id: &str) -> Result<()>;
    /// Inserts or replaces records.
    async fn upsert(&self, namespace: &str, records: Vec<VectorRecord>) -> Result<()>;
    /// Returns up to `top_k` nearest records passing `filter`, nearest first,
    /// none further than `max_distance` when given.
    async fn query(
        &self,
        namespace: &str,
        vector: &[f32],
        top_k: usize,
        filter: &VectorFilter,
        max_distance: Option<f32>,
    ) -> Result<Vec<VectorHit>>;
    /// Whether [`VectorStore::hybrid_query`] ranks full text: the store
    /// indexes records' lexical vectors. Stores that do not leave full-text
    /// ranking to the database.
    async fn ranks_full_text(&self) -> Result<bool> {
        Ok(false)
    }
    /// Whether the full text [`VectorStore::hybrid_query`] ranks covers every
    /// message as soon as it is written (the embedded store indexes the rows
    /// themselves), rather than the messages whose vectors are synced.
    fn indexes_text_at_once(&self) -> bool {
        false
    }
    /// Whether [`VectorStore::hybrid_query`] ranks in process, where a
    /// list's rows are best read as soon as it is ranked: search then reads
    /// the rows of a query's words while it embeds the query, and those of
    /// a remote store's two lists in one read after both.
    fn ranks_in_process(&self) -> bool {
        false
    }
    /// Where [`VectorStore::hybrid_query`]'s BM25 takes each term's inverse
    /// document frequency from.
    async fn term_weighting(&self) -> Result<TermWeighting> {
        Ok(TermWeighting::Namespace)
    }
    /// Returns, in one request, the `top_k` nearest records by `dense` (none
    /// without it: the embedder failed) and the `top_k` best by BM25 for
    /// `lexical`, both passing `filter`; `None` from a store that does not
    /// rank full text.
    async fn hybrid_query(
        &self,
        _namespace: &str,
        _dense: Option<&[f32]>,
        _lexical: &SparseVector,
        _top_k: usize,
        _filter: &VectorFilter,
    ) -> Result<Option<HybridHits>> {
        Ok(None)
    }
    /// Removes records by id; absent ids are ignored.
    async fn delete(&self, namespace: &str, ids: &[String]) -> Result<()>;
    /// Removes a whole namespace.
    async fn delete_namespace(&self, namespace: &str) -> Result<()>;
}

#[cfg(feature = "testing")]
pub mod contract;
