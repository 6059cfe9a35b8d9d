//! The `VectorStore` port: vectors of messages and conclusions, in
//! namespaces per workspace (messages) and per collection (conclusions).

use async_trait::async_trait;

use crate::Result;
use crate::filter::Filter;
use crate::lexical::SparseVector;
use crate::model::{Message, MessageQuery};
use crate::store::TextSearch;

/// Returns the namespace of a workspace's message vectors.
pub fn messages_namespace(workspace_id: &str) -> String {
    format!("msg/{workspace_id}")
}

/// The workspace whose messages `namespace` holds; `None` for a namespace
/// of conclusions. The one inverse of [`messages_namespace`].
pub fn messages_workspace(namespace: &str) -> Option<&str> {
    namespace.strip_prefix("msg/")
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
    /// for stores that rank full text ([`VectorStore::search`]).
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

/// The store's newest messages, of which those not synced yet are searched
/// in the database when a store ranks the words of the synced ones
/// ([`Words::Synced`]): a message is searchable by its words as soon as it
/// is written, at a cost bounded by this many rows.
pub const UNSYNCED_SCAN: i64 = 2_000;

/// A search of a workspace's messages, as the vector store is given it: the
/// store plans how its words and meaning are ranked (in its own indexes, or
/// by the database where it has none), so no caller asks what it talks to.
pub struct SearchPlan<'a> {
    pub workspace_id: &'a str,
    /// The query's words, each 1 ([`crate::lexical::query`]).
    pub words: SparseVector,
    /// Candidates wanted from each list.
    pub top_k: usize,
    /// The scope every candidate is drawn from.
    pub scope: VectorFilter,
    /// The search as the database runs it (for what the store leaves to it):
    /// its scope, its candidates' count, and the rows' filter.
    pub search: &'a MessageQuery,
    pub filter: &'a Filter,
    pub database: &'a dyn TextSearch,
    /// What the store may ask of the query beyond its words; nothing is
    /// computed that it does not ask for.
    pub query: &'a dyn QueryParts,
}

/// The parts of a query a vector store may need, computed when it asks.
#[async_trait]
pub trait QueryParts: Send + Sync {
    /// The query's embedding.
    async fn meaning(&self) -> Result<Vec<f32>>;
    /// The ids of the workspace's peers the query names.
    async fn names(&self) -> Result<Vec<String>>;
}

/// A query's parts that are given, not computed (tests; callers with an
/// embedding at hand).
#[derive(Debug, Clone, Default)]
pub struct GivenQuery {
    /// The embedding; `None` answers `meaning` with `Unavailable`.
    pub meaning: Option<Vec<f32>>,
    pub names: Vec<String>,
}

#[async_trait]
impl QueryParts for GivenQuery {
    async fn meaning(&self) -> Result<Vec<f32>> {
        self.meaning
            .clone()
            .ok_or_else(|| crate::Error::Unavailable("the query has no embedding".into()))
    }

    async fn names(&self) -> Result<Vec<String>> {
        Ok(self.names.clone())
    }
}

/// The candidates of a [`SearchPlan`], best first in each list.
#[derive(Debug)]
pub struct Found {
    /// Best by the query's words.
    pub words: Words,
    /// Nearest by the query's meaning, or why there are none: the query
    /// could not be embedded, or not ranked by meaning. The words stand.
    pub meaning: std::result::Result<Vec<VectorHit>, crate::Error>,
}

/// Who ranked a query's words, and over which messages.
#[derive(Debug)]
pub enum Words {
    /// The store, by BM25 (`distance` is the negated score), over every
    /// message written (the embedded store indexes the rows themselves).
    Ranked(Vec<VectorHit>),
    /// The store, by BM25, over the messages synced to it; the database's
    /// matches among the newest [`UNSYNCED_SCAN`] that are not, by rank;
    /// and how many messages of the scope beyond those it left out.
    Synced {
        hits: Vec<VectorHit>,
        unsynced: Vec<Message>,
        gap: i64,
    },
    /// The database, by its own full-text search (ranks, no comparable
    /// scores), where the store ranks no words; and how many messages of
    /// the scope its text index has not reached.
    Database { messages: Vec<Message>, gap: i64 },
}

/// Why a [`SearchPlan`] found nothing: the store could not answer (search
/// then answers from the database's full text, and says so), or the
/// database could not (the search fails with its error, as any read does).
#[derive(Debug)]
pub enum SearchFailure {
    Store(crate::Error),
    Database(crate::Error),
}

impl From<crate::Error> for SearchFailure {
    /// A store's own error.
    fn from(error: crate::Error) -> Self {
        SearchFailure::Store(error)
    }
}

impl std::fmt::Display for SearchFailure {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchFailure::Store(error) | SearchFailure::Database(error) => error.fmt(formatter),
        }
    }
}

impl SearchPlan<'_> {
    /// The database's full-text matches: for a store that ranks no words.
    pub async fn database_words(&self) -> std::result::Result<Words, SearchFailure> {
        let (messages, gap) = futures::join!(
            self.database
                .search_messages(self.workspace_id, self.search, self.filter),
            self.database.text_index_gap(self.workspace_id, self.search),
        );
        Ok(Words::Database {
            messages: messages.map_err(SearchFailure::Database)?,
            gap: gap.map_err(SearchFailure::Database)?,
        })
    }

    /// `hits` ranked by a store over the messages synced to it, with the
    /// database's matches among those not synced yet.
    pub async fn with_unsynced(
        &self,
        hits: impl Future<Output = Result<Vec<VectorHit>>>,
    ) -> std::result::Result<Words, SearchFailure> {
        let (hits, unsynced, gap) = futures::join!(
            hits,
            self.database
                .search_unsynced_messages(self.workspace_id, self.search, self.filter, UNSYNCED_SCAN),
            self.database
                .vector_sync_gap(self.workspace_id, self.search, UNSYNCED_SCAN),
        );
        Ok(Words::Synced {
            hits: hits?,
            unsynced: unsynced.map_err(SearchFailure::Database)?,
            gap: gap.map_err(SearchFailure::Database)?,
        })
    }
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
    /// Ranks a message search's candidates by words and by meaning, as
    /// the store plans it ([`SearchPlan`]). A meaning that cannot be had is
    /// said in [`Found::meaning`]; the whole search fails when the store
    /// cannot rank at all ([`SearchFailure::Store`]: search falls back to
    /// the database's full text) or the database's part fails
    /// ([`SearchFailure::Database`]).
    async fn search(&self, plan: &SearchPlan<'_>) -> std::result::Result<Found, SearchFailure>;
    /// Removes records by id; absent ids are ignored.
    async fn delete(&self, namespace: &str, ids: &[String]) -> Result<()>;
    /// Removes a whole namespace.
    async fn delete_namespace(&self, namespace: &str) -> Result<()>;
}

#[cfg(feature = "testing")]
pub mod contract;

#[cfg(test)]
mod tests {
    use futures::executor::block_on;

    use super::*;
    use crate::Error;
    use crate::lexical::TermCounts;
    use crate::model::MeaningLag;

    /// A database whose every read fails.
    struct Down;

    fn down<T>() -> Result<T> {
        Err(Error::Unavailable("the database is down".into()))
    }

    #[async_trait]
    impl TextSearch for Down {
        async fn search_messages(&self, _: &str, _: &MessageQuery, _: &Filter) -> Result<Vec<Message>> {
            down()
        }
        async fn search_unsynced_messages(
            &self,
            _: &str,
            _: &MessageQuery,
            _: &Filter,
            _: i64,
        ) -> Result<Vec<Message>> {
            down()
        }
        async fn text_index_gap(&self, _: &str, _: &MessageQuery) -> Result<i64> {
            down()
        }
        async fn vector_sync_gap(&self, _: &str, _: &MessageQuery, _: i64) -> Result<i64> {
            down()
        }
        async fn meaning_lag(&self, _: &str) -> Result<MeaningLag> {
            down()
        }
        async fn term_counts(&self, _: &str, _: &[u32]) -> Result<TermCounts> {
            down()
        }
    }

    #[test]
    fn a_messages_namespace_names_its_workspace_back() {
        assert_eq!(messages_workspace(&messages_namespace("w/x")), Some("w/x"));
        assert_eq!(messages_workspace(&documents_namespace("msg", "a", "b")), None);
    }

    #[test]
    fn the_databases_part_of_a_plan_fails_as_the_databases_and_the_stores_as_the_stores() {
        let search = MessageQuery {
            terms: vec!["kitten".into()],
            session_ids: None,
            peer_id: None,
            peer_perspective: None,
            limit: 10,
        };
        let query = GivenQuery::default();
        let plan = SearchPlan {
            workspace_id: "w",
            words: crate::lexical::of_terms(&search.terms),
            top_k: 10,
            scope: VectorFilter::default(),
            search: &search,
            filter: &Filter::All,
            database: &Down,
            query: &query,
        };
        // Search fails with the database's error (as any read), not degraded to it.
        assert!(matches!(
            block_on(plan.database_words()),
            Err(SearchFailure::Database(_))
        ));
        let ranked = async { Ok(Vec::new()) };
        assert!(matches!(
            block_on(plan.with_unsynced(ranked)),
            Err(SearchFailure::Database(_))
        ));
        // The store's own failure is the store's: search answers from full text.
        let refused = async { Err(Error::Unavailable("qdrant is down".into())) };
        assert!(matches!(
            block_on(plan.with_unsynced(refused)),
            Err(SearchFailure::Store(_))
        ));
    }
}
