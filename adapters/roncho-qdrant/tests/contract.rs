//! The `VectorStore` contract suite against the Qdrant adapter over the real
//! Qdrant (`RONCHO_TEST_QDRANT_URL`, e.g. `http://127.0.0.1:6334`;
//! scripts/test.sh starts it; required under RONCHO_REQUIRE_INTEGRATION=1).
//! The in-process stand-in serves only the tests of faults: a second model
//! with another size, an outage, an unreachable server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use roncho_core::filter::Filter;
use roncho_core::lexical;
use roncho_core::model::MessageQuery;
use roncho_core::store::TermCounter;
use roncho_core::vector::contract::{Check, EmptyDatabase};
use roncho_core::vector::{Found, GivenQuery, SearchPlan, VectorFilter, VectorHit, VectorRecord, VectorStore, Words};
use roncho_core::{Error, Result};
use roncho_qdrant::standin::StandIn;
use roncho_qdrant::{QdrantOptions, QdrantVectorStore, WordRanking};

fn options(url: String) -> QdrantOptions {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    QdrantOptions {
        collection: format!("roncho_test_{}_{nanos}", std::process::id()),
        ..QdrantOptions::new(url)
    }
}

/// The real Qdrant's URL; `None` (skip) when unset, a failure under RONCHO_REQUIRE_INTEGRATION=1.
fn real_qdrant_url() -> Option<String> {
    let url = std::env::var("RONCHO_TEST_QDRANT_URL")
        .ok()
        .filter(|url| !url.is_empty());
    if url.is_none() {
        assert!(
            std::env::var("RONCHO_REQUIRE_INTEGRATION").as_deref() != Ok("1"),
            "RONCHO_TEST_QDRANT_URL is not set and RONCHO_REQUIRE_INTEGRATION=1: the contract must run on the real Qdrant"
        );
        eprintln!("RONCHO_TEST_QDRANT_URL is not set: skipping the real-Qdrant run");
    }
    url
}

async fn on_real_qdrant(check: Check) {
    let Some(url) = real_qdrant_url() else { return };
    let vectors = QdrantVectorStore::connect(&options(url)).unwrap();
    check(&vectors).await;
    vectors.drop_collection().await.unwrap();
}

roncho_core::vector_store_contract!(real_qdrant, super::on_real_qdrant);

fn record(id: &str, vector: Vec<f32>) -> VectorRecord {
    VectorRecord {
        id: id.into(),
        vector,
        session_id: None,
        peer_id: None,
        level: None,
        lexical: None,
        passages: Vec::new(),
    }
}

#[tokio::test]
async fn a_second_process_with_another_model_is_refused_by_the_real_qdrant() {
    let Some(url) = real_qdrant_url() else { return };
    let options = options(url);
    let first = QdrantVectorStore::connect(&options).unwrap();
    first.check_dimensions(384, "local/all-MiniLM-L6-v2").await.unwrap();
    first
        .upsert("msg/ws", vec![record("m1", vec![1.0; 384])])
        .await
        .unwrap();

    let second = QdrantVectorStore::connect(&options).unwrap();
    let error = second
        .check_dimensions(768, "openai-compatible/nomic")
        .await
        .unwrap_err();
    match &error {
        Error::FailedPrecondition(message) => {
            assert!(message.contains("384") && message.contains("768"), "{message}");
            assert!(
                message.contains("all-MiniLM-L6-v2"),
                "names the stored model: {message}"
            );
        }
        other => panic!("expected FailedPrecondition, got {other:?}"),
    }
    // The same size from another model is refused too: its vectors would be noise to this one's queries.
    match second
        .check_dimensions(384, "local/bge-small-en-v1.5")
        .await
        .unwrap_err()
    {
        Error::FailedPrecondition(message) => assert!(
            message.contains("all-MiniLM-L6-v2") && message.contains("bge-small-en-v1.5"),
            "{message}"
        ),
        other => panic!("expected FailedPrecondition, got {other:?}"),
    }
    first.check_dimensions(384, "local/all-MiniLM-L6-v2").await.unwrap();
    let wrong = second
        .upsert("msg/ws", vec![record("m2", vec![1.0; 768])])
        .await
        .unwrap_err();
    assert!(matches!(wrong, Error::FailedPrecondition(_)), "{wrong:?}");
    let stored = first
        .query("msg/ws", &vec![1.0; 384], 10, &VectorFilter::default(), None)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1, "nothing of the refused process was stored");
    first.drop_collection().await.unwrap();
}

#[tokio::test]
async fn an_outage_is_unavailable_and_passes() {
    let standin = StandIn::start().await.unwrap();
    let vectors = QdrantVectorStore::connect(&options(standin.url())).unwrap();
    vectors.check_dimensions(2, "test").await.unwrap();
    assert!(vectors.health().await.unwrap().contains("standin"));

    standin.set_down(true);
    let error = vectors
        .upsert("ns", vec![record("a", vec![1.0, 0.0])])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
    let error = vectors
        .query("ns", &[1.0, 0.0], 5, &VectorFilter::default(), None)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");

    standin.set_down(false);
    vectors.upsert("ns", vec![record("a", vec![1.0, 0.0])]).await.unwrap();
    let hits = vectors
        .query("ns", &[1.0, 0.0], 5, &VectorFilter::default(), None)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].distance.abs() < 1e-6);
    standin.stop().await;
}

#[tokio::test]
async fn an_unreachable_qdrant_is_unavailable() {
    let standin = StandIn::start().await.unwrap();
    let url = standin.url();
    standin.stop().await;
    let vectors = QdrantVectorStore::connect(&options(url)).unwrap();
    let error = vectors.check_dimensions(3, "test").await.unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
}

fn hit_ids(hits: &[VectorHit]) -> Vec<&str> {
    hits.iter().map(|hit| hit.id.as_str()).collect()
}

/// The ledger a Qdrant store counts terms in, remembering what it was given.
#[derive(Default)]
struct CountedTerms(Mutex<Vec<(String, Vec<u32>)>>);

#[async_trait]
impl TermCounter for CountedTerms {
    async fn count(&self, messages: &[(String, Vec<u32>)]) -> Result<()> {
        self.0.lock().unwrap().extend_from_slice(messages);
        Ok(())
    }
}

/// What `vectors` finds in workspace `ws` for `query` under `scope`.
async fn planned(
    vectors: &QdrantVectorStore,
    database: &EmptyDatabase,
    query: &str,
    scope: &VectorFilter,
    meaning: Option<Vec<f32>>,
) -> Found {
    let search = MessageQuery {
        terms: roncho_core::search::terms(query),
        session_ids: None,
        peer_id: None,
        peer_perspective: None,
        limit: 5,
    };
    let parts = GivenQuery {
        meaning,
        names: Vec::new(),
    };
    let plan = SearchPlan {
        workspace_id: "ws",
        words: lexical::query(query),
        top_k: 5,
        scope: scope.clone(),
        search: &search,
        filter: &Filter::All,
        database,
        query: &parts,
    };
    vectors.search(&plan).await.unwrap()
}

/// The hits Qdrant ranked by words, and those by meaning.
fn lists(found: Found) -> (Vec<VectorHit>, Result<Vec<VectorHit>>) {
    match found.words {
        Words::Synced { hits, unsynced, gap } => {
            assert!(unsynced.is_empty() && gap == 0, "{unsynced:?} {gap}");
            (hits, found.meaning)
        }
        other => panic!("qdrant ranks the words of what is synced: {other:?}"),
    }
}

#[tokio::test]
async fn a_search_ranks_words_by_bm25_and_vectors_by_distance_side_by_side() {
    let Some(url) = real_qdrant_url() else { return };
    let options = options(url);
    let counted = Arc::new(CountedTerms::default());
    let vectors = QdrantVectorStore::connect(&options)
        .unwrap()
        .counting_terms_in(counted.clone());
    vectors.check_dimensions(2, "test").await.unwrap();
    assert_eq!(
        vectors.word_ranking().await.unwrap(),
        WordRanking::Workspace,
        "a new collection has the `text` vector, weighed by the workspace's counts"
    );
    let message = |id: &str, session: &str, vector: Vec<f32>, text: &str| VectorRecord {
        session_id: Some(session.into()),
        lexical: Some(lexical::document(text)),
        passages: Vec::new(),
        ..record(id, vector)
    };
    let mut records = vec![
        message("kitten-once", "s1", vec![0.0, 1.0], "alice: a kitten on the sofa"),
        message(
            "kittens",
            "s1",
            vec![0.2, 1.0],
            "alice: kittens, kittens, more kittens on the sofa",
        ),
        message(
            "elsewhere",
            "s2",
            vec![0.1, 1.0],
            "bob: my kitten is on the sofa at home",
        ),
    ];
    for i in 0..6 {
        records.push(message(
            &format!("sofa-{i}"),
            "s1",
            vec![1.0, 0.1 * i as f32],
            "alice: the red sofa",
        ));
    }
    // A conclusion: searched by meaning only.
    records.push(record("conclusion", vec![0.0, 1.0]));
    // Without a ledger to count them in, words that would match nothing are refused.
    let uncounted = QdrantVectorStore::connect(&options).unwrap();
    let refused = uncounted.upsert("msg/ws", records.clone()).await.unwrap_err();
    assert!(matches!(refused, Error::FailedPrecondition(_)), "{refused:?}");
    vectors.upsert("msg/ws", records).await.unwrap();
    vectors
        .upsert(
            "msg/other",
            vec![message("other-workspace", "s1", vec![0.0, 1.0], "kitten kitten")],
        )
        .await
        .unwrap();
    // Each message's terms counted as Qdrant took it; the conclusion has no words.
    let mut ids: Vec<String> = counted.0.lock().unwrap().iter().map(|(id, _)| id.clone()).collect();
    ids.sort();
    assert_eq!(ids.len(), 10, "{ids:?}");
    assert!(ids.contains(&"kittens".to_owned()) && !ids.contains(&"conclusion".to_owned()));

    // Weighed by the workspace's counts (9 messages), read from the database.
    let word = |word: &str| lexical::query(word).indices[0];
    let database = EmptyDatabase {
        term_counts: lexical::TermCounts {
            documents: 9,
            frequencies: HashMap::from([(word("kitten"), 3), (word("sofa"), 9)]),
        },
    };
    let query = "Kittens on a sofa?";
    let all = VectorFilter::default();
    let (hits, meaning) = lists(planned(&vectors, &database, query, &all, Some(vec![0.0, 1.0])).await);
    assert_eq!(
        hit_ids(&meaning.unwrap()),
        hit_ids(&vectors.query("msg/ws", &[0.0, 1.0], 5, &all, None).await.unwrap()),
        "the list by meaning is a plain nearest-neighbour query"
    );
    let words = hit_ids(&hits);
    assert_eq!(words.len(), 5, "{words:?}");
    // "kitten" is in 3 of 9 messages, "sofa" in all: repeated kittens first, then
    // one kitten in a short text, and a sofa alone last.
    assert_eq!(words[..3], ["kittens", "kitten-once", "elsewhere"], "{words:?}");
    assert!(words[3..].iter().all(|id| id.starts_with("sofa-")), "{words:?}");
    assert!(!words.contains(&"conclusion") && !words.contains(&"other-workspace"));
    assert!(
        hits.windows(2).all(|pair| pair[0].distance <= pair[1].distance),
        "best first: {hits:?}"
    );

    let in_s2 = VectorFilter {
        session_ids: Some(vec!["s2".into()]),
        ..VectorFilter::default()
    };
    let (words, meaning) = lists(planned(&vectors, &database, query, &in_s2, Some(vec![0.0, 1.0])).await);
    assert_eq!(hit_ids(&words), ["elsewhere"]);
    assert_eq!(hit_ids(&meaning.unwrap()), ["elsewhere"]);

    // Without a query vector (the embedder is down): words alone.
    let (words, meaning) = lists(planned(&vectors, &database, query, &all, None).await);
    assert!(meaning.is_err());
    assert_eq!(hit_ids(&words)[..3], ["kittens", "kitten-once", "elsewhere"]);
    vectors.drop_collection().await.unwrap();
}

/// A collection made before per-workspace term counts has Qdrant's `Idf`
/// modifier on its `text` vector: its points' words were never counted in
/// the database, so it keeps weighing words over the collection (search then
/// leaves the names a query asks about out of its words) until it is moved
/// to a new one (docs/operations.md).
#[tokio::test]
async fn a_collection_made_with_the_idf_modifier_keeps_weighing_over_the_collection() {
    use qdrant_client::qdrant::{
        CreateCollection, Distance, Modifier, SparseVectorConfig, SparseVectorParams, VectorParams, VectorsConfig,
        vectors_config,
    };
    let Some(url) = real_qdrant_url() else { return };
    let options = options(url.clone());
    let client = qdrant_client::Qdrant::from_url(&url)
        .skip_compatibility_check()
        .build()
        .unwrap();
    client
        .create_collection(CreateCollection {
            collection_name: options.collection.clone(),
            vectors_config: Some(VectorsConfig {
                config: Some(vectors_config::Config::Params(VectorParams {
                    size: 2,
                    distance: Distance::Cosine.into(),
                    ..Default::default()
                })),
            }),
            sparse_vectors_config: Some(SparseVectorConfig {
                map: HashMap::from([(
                    "text".to_owned(),
                    SparseVectorParams {
                        modifier: Some(Modifier::Idf.into()),
                        ..Default::default()
                    },
                )]),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let vectors = QdrantVectorStore::connect(&options).unwrap();
    assert_eq!(vectors.word_ranking().await.unwrap(), WordRanking::Collection);
    vectors.drop_collection().await.unwrap();
}
