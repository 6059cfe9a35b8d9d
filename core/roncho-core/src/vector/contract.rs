//! The `VectorStore` contract suite (feature `testing`): every implementation
//! runs these same checks through [`vector_store_contract!`](crate::vector_store_contract).
//!
//! Each check starts from an empty store and uses the namespaces `ns`,
//! `other` and `msg/contract` only.

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;

use crate::filter::Filter;
use crate::lexical::TermCounts;
use crate::model::{MeaningLag, Message, MessageQuery};
use crate::store::TextSearch;
use crate::vector::{GivenQuery, SearchPlan, VectorFilter, VectorHit, VectorRecord, VectorStore, Words};
use crate::{Error, Result};

/// One contract check over a store the caller provides.
pub type Check = for<'a> fn(&'a dyn VectorStore) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Generates one `#[tokio::test]` per contract check in module `$module`,
/// each calling `$run(check).await`, where `$run` builds a fresh store,
/// runs the [`Check`] on it and cleans up.
#[macro_export]
macro_rules! vector_store_contract {
    ($module:ident, $run:path) => {
        mod $module {
            $crate::vector_store_contract!(@tests $run;
                nearest_first_with_filters_and_distance,
                upsert_replaces_and_delete_removes,
                namespaces_are_separate_and_deletable,
                dimensions_are_recorded_and_checked,
                a_record_is_found_by_its_nearest_passage_and_deleted_whole,
                a_search_plan_keeps_its_scope_and_ranks_by_meaning_as_a_query_does,
                the_nearest_are_the_exact_nearest_to_the_last,
            );
        }
    };
    (@tests $run:path; $($check:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $check() {
                $run(|store| Box::pin($crate::vector::contract::$check(store))).await;
            }
        )*
    };
}

fn unit(x: f32, y: f32, z: f32) -> Vec<f32> {
    let norm = (x * x + y * y + z * z).sqrt();
    vec![x / norm, y / norm, z / norm]
}

fn record(id: &str, vector: Vec<f32>, session: &str, peer: &str, level: &str) -> VectorRecord {
    VectorRecord {
        id: id.into(),
        vector,
        session_id: Some(session.into()),
        peer_id: Some(peer.into()),
        level: Some(level.into()),
        lexical: None,
        passages: Vec::new(),
    }
}

fn ids(hits: &[VectorHit]) -> Vec<&str> {
    hits.iter().map(|hit| hit.id.as_str()).collect()
}

async fn seed(vectors: &dyn VectorStore) {
    vectors
        .upsert(
            "ns",
            vec![
                record("a", unit(1.0, 0.0, 0.0), "s1", "alice", "explicit"),
                record("b", unit(0.9, 0.1, 0.0), "s2", "bob", "explicit"),
                record("c", unit(0.0, 1.0, 0.0), "s1", "bob", "deductive"),
                record("d", unit(0.0, 0.0, 1.0), "s2", "alice", "inductive"),
            ],
        )
        .await
        .unwrap();
}

pub async fn nearest_first_with_filters_and_distance(vectors: &dyn VectorStore) {
    seed(vectors).await;
    let query = unit(1.0, 0.05, 0.0);
    let all = vectors
        .query("ns", &query, 10, &VectorFilter::default(), None)
        .await
        .unwrap();
    assert_eq!(ids(&all), ["a", "b", "c", "d"]);
    assert!(all[0].distance < all[1].distance && all[1].distance < all[2].distance);
    assert_eq!(
        ids(&vectors
            .query("ns", &query, 2, &VectorFilter::default(), None)
            .await
            .unwrap()),
        ["a", "b"]
    );
    let session = VectorFilter {
        session_ids: Some(vec!["s2".into()]),
        ..VectorFilter::default()
    };
    assert_eq!(
        ids(&vectors.query("ns", &query, 10, &session, None).await.unwrap()),
        ["b", "d"]
    );
    let peer = VectorFilter {
        peer_id: Some("bob".into()),
        ..VectorFilter::default()
    };
    assert_eq!(
        ids(&vectors.query("ns", &query, 10, &peer, None).await.unwrap()),
        ["b", "c"]
    );
    let levels = VectorFilter {
        levels: Some(vec!["deductive".into(), "inductive".into()]),
        ..VectorFilter::default()
    };
    assert_eq!(
        ids(&vectors.query("ns", &query, 10, &levels, None).await.unwrap()),
        ["c", "d"]
    );
    assert_eq!(
        ids(&vectors
            .query("ns", &query, 10, &VectorFilter::default(), Some(0.05))
            .await
            .unwrap()),
        ["a", "b"]
    );
    assert!(
        vectors
            .query("missing", &query, 10, &VectorFilter::default(), None)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Deterministic unit vectors of `dimensions`, from `seed` (an LCG: the
/// same on every run and every store), each a shared direction plus
/// `spread` of noise: like a text model's vectors, which lie in a narrow
/// cone, so that near the end of a long list neighbours are close.
fn scattered(count: usize, dimensions: usize, seed: u64, spread: f32) -> Vec<Vec<f32>> {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) as f32 - 0.5
    };
    (0..count)
        .map(|_| {
            let vector: Vec<f32> = (0..dimensions)
                .map(|at| if at % 2 == 0 { 0.1 } else { 0.0 } + spread * next())
                .collect();
            let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
            vector.into_iter().map(|x| x / norm).collect()
        })
        .collect()
}

/// The vectors of [`the_nearest_are_the_exact_nearest_to_the_last`]: 384
/// dimensions (bge-small's), close together.
fn close_together(count: usize, seed: u64) -> Vec<Vec<f32>> {
    scattered(count, 384, seed, 0.15)
}

/// Stores `points` in `namespace` as records `p0`, `p1`, … (session `s1`).
async fn store_points(vectors: &dyn VectorStore, namespace: &str, points: &[Vec<f32>]) {
    let records: Vec<VectorRecord> = points
        .iter()
        .enumerate()
        .map(|(index, vector)| record(&format!("p{index}"), vector.clone(), "s1", "alice", "explicit"))
        .collect();
    for chunk in records.chunks(500) {
        vectors.upsert(namespace, chunk.to_vec()).await.unwrap();
    }
}

/// Asserts that the `top` nearest of `points` (stored in `namespace` by
/// [`store_points`]) that the store answers for each of five queries are
/// the exact nearest, to the last, at their exact distances.
async fn assert_exact_nearest(vectors: &dyn VectorStore, namespace: &str, points: &[Vec<f32>], top: usize) {
    for query in close_together(5, 11) {
        let mut exact: Vec<(f64, String)> = points
            .iter()
            .enumerate()
            .map(|(index, vector)| {
                let dot: f64 = vector
                    .iter()
                    .zip(&query)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                (1.0 - dot, format!("p{index}"))
            })
            .collect();
        exact.sort_by(|a, b| a.0.total_cmp(&b.0));
        let found = vectors
            .query(namespace, &query, top, &VectorFilter::default(), None)
            .await
            .unwrap();
        assert_eq!(found.len(), top);
        let mut found_ids: Vec<&str> = ids(&found);
        let mut exact_ids: Vec<&str> = exact[..top].iter().map(|(_, id)| id.as_str()).collect();
        let (last, after) = (exact[top - 1].0, exact[top].0);
        found_ids.sort_unstable();
        exact_ids.sort_unstable();
        assert_eq!(
            found_ids,
            exact_ids,
            "the {top} nearest of {}, to the last (exact distance {last:.5}, the next {after:.5})",
            points.len()
        );
        let worst = found.iter().map(|hit| f64::from(hit.distance)).fold(f64::MIN, f64::max);
        assert!(
            (worst - last).abs() < 1e-4,
            "the list's worst distance is the exact one: {worst} against {last}"
        );
    }
}

/// A store answers with the exact nearest, to the last one asked for, at
/// their exact distances: a store that narrows by compressed vectors (the
/// in-process store's int8 scan, Qdrant's int8 codes) rescores enough of
/// them that the list's end is not decided by the codes' error. Score
/// fusion scales every score of the list by its worst, so a wrong end
/// reorders the whole list (the same data ranked differently on Postgres +
/// Qdrant than embedded before Qdrant read its codes 4-fold; Qdrant builds
/// its codes only for segments past its indexing threshold, which these
/// 1,500 vectors do not reach, so there it checks the float scan).
pub async fn the_nearest_are_the_exact_nearest_to_the_last(vectors: &dyn VectorStore) {
    let points = close_together(1_500, 7);
    store_points(vectors, "ns", &points).await;
    assert_exact_nearest(vectors, "ns", &points, 100).await;
}

pub async fn upsert_replaces_and_delete_removes(vectors: &dyn VectorStore) {
    seed(vectors).await;
    // Query first so a cached namespace must follow the writes.
    vectors
        .query("ns", &unit(1.0, 0.0, 0.0), 1, &VectorFilter::default(), None)
        .await
        .unwrap();
    vectors
        .upsert("ns", vec![record("a", unit(0.0, 0.0, 1.0), "s1", "alice", "explicit")])
        .await
        .unwrap();
    let hits = vectors
        .query("ns", &unit(0.0, 0.0, 1.0), 2, &VectorFilter::default(), None)
        .await
        .unwrap();
    assert_eq!(hits.len(), 2);
    assert!(
        hits.iter().any(|hit| hit.id == "a" && hit.distance < 1e-5),
        "replaced, not duplicated"
    );
    vectors.delete("ns", &["a".into(), "zzz".into()]).await.unwrap();
    let rest = vectors
        .query("ns", &unit(0.0, 0.0, 1.0), 10, &VectorFilter::default(), None)
        .await
        .unwrap();
    assert_eq!(rest.len(), 3);
    assert!(rest.iter().all(|hit| hit.id != "a"));
}

pub async fn namespaces_are_separate_and_deletable(vectors: &dyn VectorStore) {
    seed(vectors).await;
    vectors
        .upsert("other", vec![record("a", unit(0.0, 1.0, 0.0), "s", "p", "explicit")])
        .await
        .unwrap();
    assert_eq!(
        vectors
            .query("other", &unit(1.0, 0.0, 0.0), 10, &VectorFilter::default(), None)
            .await
            .unwrap()
            .len(),
        1
    );
    vectors.delete_namespace("ns").await.unwrap();
    assert!(
        vectors
            .query("ns", &unit(1.0, 0.0, 0.0), 10, &VectorFilter::default(), None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        vectors
            .query("other", &unit(1.0, 0.0, 0.0), 10, &VectorFilter::default(), None)
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn dimensions_are_recorded_and_checked(vectors: &dyn VectorStore) {
    vectors.check_dimensions(384, "local/all-MiniLM-L6-v2").await.unwrap();
    vectors.check_dimensions(384, "local/all-MiniLM-L6-v2").await.unwrap();
    let error = vectors
        .check_dimensions(1536, "openai-compatible/text-embedding-3-small")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::FailedPrecondition(message) if message.contains("384") && message.contains("1536")),
        "{error}"
    );
}

async fn near(vectors: &dyn VectorStore, query: Vec<f32>, top_k: usize, filter: VectorFilter) -> Vec<VectorHit> {
    vectors.query("ns", &query, top_k, &filter, None).await.unwrap()
}

/// A record of a long text: its first passage's vector and the later ones'.
fn long_record(id: &str, vector: Vec<f32>, passages: Vec<Vec<f32>>, session: &str) -> VectorRecord {
    VectorRecord {
        passages,
        ..record(id, vector, session, "alice", "explicit")
    }
}

pub async fn a_record_is_found_by_its_nearest_passage_and_deleted_whole(vectors: &dyn VectorStore) {
    let all = VectorFilter::default();
    vectors
        .upsert(
            "ns",
            vec![
                record("a", unit(1.0, 0.0, 0.0), "s1", "alice", "explicit"),
                record("c", unit(0.5, 0.0, 1.0), "s1", "bob", "explicit"),
                long_record(
                    "long",
                    unit(0.0, 1.0, 0.0),
                    vec![unit(0.0, 0.05, 1.0), unit(0.0, 0.1, 1.0), unit(0.0, 0.15, 1.0)],
                    "s2",
                ),
            ],
        )
        .await
        .unwrap();
    // Its third passage is nearest: the record leads, once, and says which passage.
    let hits = near(vectors, unit(0.0, 0.0, 1.0), 2, all.clone()).await;
    assert_eq!(ids(&hits), ["long", "c"], "{hits:?}");
    assert_eq!(hits[0].passage, 1, "{hits:?}");
    assert_eq!(hits[1].passage, 0, "{hits:?}");
    // Scored by its nearest passage, allowing for the chance that one of
    // four passages is that near.
    let nearest = 1.0 - 1.0 / (1.0_f32 + 0.05 * 0.05).sqrt();
    let expected = nearest + super::passage_chance(4);
    assert!((hits[0].distance - expected).abs() < 1e-3, "{expected}: {hits:?}");
    let hits = near(vectors, unit(0.0, 0.0, 1.0), 10, all.clone()).await;
    assert_eq!(ids(&hits), ["long", "c", "a"], "each record once: {hits:?}");
    let hits = near(vectors, unit(0.0, 0.15, 1.0), 1, all.clone()).await;
    assert_eq!((hits[0].id.as_str(), hits[0].passage), ("long", 3), "{hits:?}");
    // Its start is a passage too; filters apply to every passage.
    let hits = near(vectors, unit(0.0, 1.0, 0.0), 1, all.clone()).await;
    assert_eq!((hits[0].id.as_str(), hits[0].passage), ("long", 0), "{hits:?}");
    let only_s1 = VectorFilter {
        session_ids: Some(vec!["s1".into()]),
        ..VectorFilter::default()
    };
    assert_eq!(ids(&near(vectors, unit(0.0, 0.0, 1.0), 10, only_s1).await), ["c", "a"]);
    // A text of one passage a little farther than the long record's
    // nearest passage, but nearer than that allowance, ranks first.
    let short = unit(0.0, 0.1, 1.0);
    vectors
        .upsert("ns", vec![record("short", short, "s1", "bob", "explicit")])
        .await
        .unwrap();
    let hits = near(vectors, unit(0.0, 0.0, 1.0), 10, all.clone()).await;
    assert_eq!(ids(&hits), ["short", "long", "c", "a"], "{hits:?}");
    // Asked for one, the store looks past the long record's nearer passages.
    let hits = near(vectors, unit(0.0, 0.0, 1.0), 1, all.clone()).await;
    assert_eq!(ids(&hits), ["short"], "{hits:?}");
    // A distance limit holds with the allowance: the long record's nearest
    // passage is within it, the record is not.
    let hits = vectors
        .query("ns", &unit(0.0, 0.0, 1.0), 10, &all, Some(0.02))
        .await
        .unwrap();
    assert_eq!(ids(&hits), ["short"], "{hits:?}");
    // Deleting the record deletes every passage.
    vectors.delete("ns", &["long".into()]).await.unwrap();
    for query in [unit(0.0, 0.0, 1.0), unit(0.0, 0.15, 1.0), unit(0.0, 1.0, 0.0)] {
        let hits = near(vectors, query, 10, all.clone()).await;
        let mut found = ids(&hits);
        found.sort_unstable();
        assert_eq!(found, ["a", "c", "short"], "no passage outlives its record: {hits:?}");
    }
}

/// A database that holds no message row: what a search plan leaves to it
/// finds nothing, every message is synced, and each workspace's terms are
/// counted as given (for a store that weighs words by them).
#[derive(Debug, Clone, Default)]
pub struct EmptyDatabase {
    pub term_counts: TermCounts,
}

#[async_trait]
impl TextSearch for EmptyDatabase {
    async fn search_messages(&self, _: &str, _: &MessageQuery, _: &Filter) -> Result<Vec<Message>> {
        Ok(Vec::new())
    }
    async fn search_unsynced_messages(&self, _: &str, _: &MessageQuery, _: &Filter, _: i64) -> Result<Vec<Message>> {
        Ok(Vec::new())
    }
    async fn text_index_gap(&self, _: &str, _: &MessageQuery) -> Result<i64> {
        Ok(0)
    }
    async fn vector_sync_gap(&self, _: &str, _: &MessageQuery, _: i64) -> Result<i64> {
        Ok(0)
    }
    async fn meaning_lag(&self, _: &str) -> Result<MeaningLag> {
        Ok(MeaningLag::default())
    }
    async fn term_counts(&self, _: &str, _: &[u32]) -> Result<TermCounts> {
        Ok(self.term_counts.clone())
    }
}

pub async fn a_search_plan_keeps_its_scope_and_ranks_by_meaning_as_a_query_does(vectors: &dyn VectorStore) {
    let namespace = crate::vector::messages_namespace("contract");
    vectors
        .upsert(
            &namespace,
            vec![
                record("a", unit(1.0, 0.0, 0.0), "s1", "alice", "explicit"),
                record("b", unit(0.95, 0.05, 0.0), "s2", "bob", "explicit"),
                record("c", unit(0.0, 1.0, 0.0), "s1", "bob", "explicit"),
            ],
        )
        .await
        .unwrap();
    let search = MessageQuery {
        terms: vec!["kitten".into()],
        session_ids: Some(vec!["s1".into()]),
        peer_id: None,
        peer_perspective: None,
        limit: 10,
    };
    let scope = VectorFilter {
        session_ids: Some(vec!["s1".into()]),
        ..VectorFilter::default()
    };
    let found = |meaning: Option<Vec<f32>>| {
        let (search, scope) = (&search, scope.clone());
        async move {
            let query = GivenQuery {
                meaning,
                names: Vec::new(),
            };
            let plan = SearchPlan {
                workspace_id: "contract",
                words: crate::lexical::of_terms(&search.terms),
                top_k: 10,
                scope,
                search,
                filter: &Filter::All,
                database: &EmptyDatabase::default(),
                query: &query,
            };
            vectors.search(&plan).await.unwrap()
        }
    };
    let nearest = vectors
        .query(&namespace, &unit(1.0, 0.0, 0.0), 10, &scope, None)
        .await
        .unwrap();
    let by_meaning = found(Some(unit(1.0, 0.0, 0.0))).await;
    assert_eq!(
        ids(&by_meaning.meaning.unwrap()),
        ids(&nearest),
        "a plan's meaning is a nearest-neighbour query in its scope"
    );
    assert_eq!(ids(&nearest), ["a", "c"], "b is nearer, and outside the scope");
    // Without the query's embedding the meaning says why, and the words stand.
    let without = found(None).await;
    assert!(without.meaning.is_err());
    let words = match without.words {
        Words::Ranked(hits) | Words::Synced { hits, .. } => hits,
        Words::Database { messages, .. } => {
            assert!(messages.is_empty(), "the database holds nothing");
            Vec::new()
        }
    };
    assert!(words.iter().all(|hit| hit.id != "b"), "words in scope only: {words:?}");
    vectors.delete_namespace(&namespace).await.unwrap();
}
