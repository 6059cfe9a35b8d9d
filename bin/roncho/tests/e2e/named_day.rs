//! A query that names a calendar day ("What painting did I show on October
//! 13, 2023?") finds first what was written on that day, though other
//! days' messages share more of its words; the same query without the day
//! ranks by words and meaning alone. Over gRPC, on every store a user
//! runs: SQLite with the embedded vector store (score fusion), Postgres
//! with its own full text (rank fusion) and Postgres with the real Qdrant.

use std::sync::Arc;

use roncho_core::embed::Embedder;
use roncho_core::vector::VectorStore;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;

use crate::support;

/// 2023-10-13T00:00:00Z, in seconds.
const OCTOBER_13: i64 = 1_697_155_200;
const DAY: i64 = 86_400;

/// Messages and when they were written (seconds from [`OCTOBER_13`]'s
/// midnight, UTC): the painting of the named day says "painting" once;
/// those of the days around it say it, and "show", more often.
const WRITTEN: [(&str, i64); 6] = [
    (
        "Did I show you my painting? I show every painting I finish, and this painting too.",
        -3 * DAY,
    ),
    (
        "I showed my sister the painting and she loved the painting and the frame.",
        7 * DAY,
    ),
    ("Here is the painting of the lake I did in oils.", 15 * 3600),
    (
        "My painting class showed paintings of sunsets; I showed a painting of mine.",
        DAY + 8 * 3600,
    ),
    ("The bus was late again this morning.", 9 * 3600),
    (
        "We should show the painting at the fair, the painting of the barn.",
        -DAY,
    ),
];

/// The message of the named day the query asks about.
const ANSWER: &str = "Here is the painting of the lake I did in oils.";

async fn the_named_day_leads(
    store: Arc<roncho_store::SqlStore>,
    embedder: Arc<dyn Embedder>,
    vectors: Arc<dyn VectorStore>,
    fusion: &str,
) {
    let (served, reconciler) = support::serve_semantic(store, embedder, vectors).await;
    IngestServiceClient::new(served.channel.clone())
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages: WRITTEN
                .iter()
                .map(|&(content, at)| pb::MessageCreate {
                    peer_id: "user".into(),
                    content: content.into(),
                    created_at: Some(prost_types::Timestamp {
                        seconds: OCTOBER_13 + at,
                        nanos: 0,
                    }),
                    ..Default::default()
                })
                .collect(),
            idempotency_key: None,
        })
        .await
        .unwrap();
    let report = reconciler.pass().await.unwrap();
    assert_eq!(report.failed, 0, "{report:?}");
    let search = |query: &str| {
        let channel = served.channel.clone();
        let request = pb::SearchMessagesRequest {
            workspace_id: "w".into(),
            query: query.into(),
            limit: 10,
            ..Default::default()
        };
        async move {
            let found = RecallServiceClient::new(channel)
                .search_messages(request)
                .await
                .unwrap()
                .into_inner();
            assert_eq!(found.mode, "hybrid", "{found:?}");
            found
                .messages
                .into_iter()
                .map(|message| message.content)
                .collect::<Vec<_>>()
        }
    };

    let undated = search("What painting did I show?").await;
    assert!(!leads(&undated), "{fusion}: {undated:#?}");
    for query in [
        "What painting did I show on October 13, 2023?",
        "What painting did I show on 13 Oct 2023?",
        "What painting did I show on 2023-10-13?",
    ] {
        let dated = search(query).await;
        assert!(leads(&dated), "{fusion}, {query}: {dated:#?}");
        // Reordered: nothing added or dropped.
        let (mut before, mut after) = (undated.clone(), dated.clone());
        before.sort();
        after.sort();
        assert_eq!(before, after, "{fusion}, {query}");
    }
    // Another day's date is no help to it, nor the next UTC day's.
    for query in [
        "What painting did I show on March 2, 2021?",
        "What painting did I show on October 14, 2023?",
    ] {
        let other = search(query).await;
        assert!(!leads(&other), "{fusion}, {query}: {other:#?}");
    }
    served.shutdown.cancel();
}

/// Whether [`ANSWER`] is the first of `found`.
fn leads(found: &[String]) -> bool {
    found.first().is_some_and(|first| first == ANSWER)
}

fn embedder() -> Arc<dyn Embedder> {
    Arc::new(roncho_embed::hashing::TestHashingEmbedder::new(64))
}

#[tokio::test]
async fn a_named_day_leads_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let vectors = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    the_named_day_leads(store, embedder(), vectors, "score fusion on SQLite").await;
}

#[tokio::test]
async fn a_named_day_leads_on_postgres() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let vectors = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    the_named_day_leads(store.clone(), embedder(), vectors, "rank fusion on Postgres").await;
    store.close().await;
    database.drop_database().await;
}

#[tokio::test]
async fn a_named_day_leads_on_postgres_and_qdrant() {
    let Some(backends) = support::Distributed::open("named_day").await else {
        return;
    };
    let (store, qdrant) = (backends.store.clone(), backends.qdrant.clone());
    the_named_day_leads(store, embedder(), qdrant, "score fusion on Qdrant").await;
    backends.close().await;
}
