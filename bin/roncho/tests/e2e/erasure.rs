//! Deleting a message whose text was derived, summarised and embedded
//! erases it from everything: after the delete (and the background work it
//! queues), neither SearchMessages, QueryConclusions, GetSessionContext,
//! GetRepresentation, the summaries nor the vector store (a Qdrant scroll)
//! holds the text, and the receipt counts exactly what was there. On SQLite
//! with the embedded vector store, and on Postgres with the real Qdrant
//! (`RONCHO_TEST_QDRANT_URL`, which `scripts/test.sh` sets when it starts it).

use std::sync::Arc;
use std::time::Duration;

use roncho::config::Role;
use roncho::server::Serving;
use roncho_core::embed::Embedder;
use roncho_core::queue::WorkQueue;
use roncho_core::store::{Erasure, Memory, Messages};
use roncho_core::vector::{VectorFilter, VectorStore};
use roncho_deriver::worker::{Worker, WorkerConfig};
use roncho_embed::testing::SwitchableTestEmbedder;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use roncho_qdrant::{QdrantOptions, QdrantVectorStore};
use roncho_reconciler::{Reconciler, ReconcilerConfig};

use crate::support;

const SECRET: &str = "My locker code is zebra-4417, keep it between us.";
const REPLY: &str = "Got it, I will keep it safe.";

#[tokio::test]
async fn a_deleted_message_leaves_no_trace_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let vectors = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    erase_and_look_everywhere(store, vectors, None).await;
}

#[tokio::test]
async fn a_deleted_message_leaves_no_trace_on_postgres_and_qdrant() {
    let Some((database, url)) = support::postgres_and_qdrant().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let mut options = QdrantOptions::new(url);
    options.collection = format!("erasure_{}", roncho_store::testing::unique_name());
    let qdrant = Arc::new(
        QdrantVectorStore::connect(&options)
            .unwrap()
            .counting_terms_in(store.clone()),
    );
    erase_and_look_everywhere(store.clone(), qdrant.clone(), Some(qdrant.clone())).await;
    qdrant.drop_collection().await.unwrap();
    store.close().await;
    database.drop_database().await;
}

/// Whether `text` mentions the secret.
fn leaks(text: &str) -> bool {
    text.contains("zebra")
}

async fn erase_and_look_everywhere(
    store: Arc<roncho_store::SqlStore>,
    vectors: Arc<dyn VectorStore>,
    qdrant: Option<Arc<QdrantVectorStore>>,
) {
    let embedder = Arc::new(SwitchableTestEmbedder::down(64));
    embedder.set_up(true);
    let dyn_store = store.clone();
    let reconciler = Reconciler::new(
        dyn_store.clone(),
        embedder.clone(),
        vectors.clone(),
        ReconcilerConfig {
            backoff: Duration::ZERO,
            ..ReconcilerConfig::default()
        },
    );
    let mut services = Serving::store_only(dyn_store.clone());
    services.domain.semantic = Some(roncho_search::Semantic::new(embedder.clone(), vectors.clone()));
    let served = support::serve(services, &Role::ALL).await;
    let mut ingest = IngestServiceClient::new(served.channel.clone());
    let mut recall = RecallServiceClient::new(served.channel.clone());
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let worker = Worker::new(dyn_store.clone(), queue, WorkerConfig::default());
    let settle = || async {
        while worker.run_once().await.unwrap() {}
        reconciler.pass().await.unwrap();
    };

    // Alice tells bob a secret; bob observes others; twenty turns make a summary.
    support::session_observed_by(&served.channel, "w", "s", "bob").await;
    let mut turns = vec![("alice", SECRET.to_owned()), ("bob", REPLY.to_owned())];
    turns.extend((2..20).map(|i| (["alice", "bob"][i % 2], format!("Turn {i}: the weather is mild today."))));
    let created = ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages: turns
                .iter()
                .map(|(peer, content)| pb::MessageCreate {
                    peer_id: (*peer).into(),
                    content: content.clone(),
                    ..Default::default()
                })
                .collect(),
            idempotency_key: Some("conversation-1".into()),
        })
        .await
        .unwrap()
        .into_inner()
        .messages;
    let (secret, reply) = (created[0].id.clone(), created[1].id.clone());
    settle().await;

    // What is there: the text in every place it reaches.
    let conclusions = all_conclusions(&store).await;
    let citing: Vec<_> = conclusions.iter().filter(|c| c.source_ids.contains(&secret)).collect();
    let only_from_secret = citing.iter().filter(|c| c.source_ids == [secret.clone()]).count();
    assert!(only_from_secret >= 2, "alice and bob each concluded it: {citing:?}");
    assert!(citing.iter().all(|c| leaks(&c.content)));
    let summaries = store.session_summaries("w", "s").await.unwrap();
    assert!(summaries.iter().any(|summary| leaks(&summary.content)), "{summaries:?}");
    assert!(search_hits(&mut recall).await.iter().any(|m| m.id == secret));
    assert!(leaks(&representation(&mut recall).await));
    // The secret's vector, and the reply's with the secret mixed in as its context.
    let own = embedder
        .embed(&[format!("alice: {SECRET}"), format!("bob: {REPLY}")])
        .await
        .unwrap();
    let old_vectors = [
        own[0].clone(),
        roncho_reconciler::mix(&own[1], &own[0], roncho_reconciler::CONTEXT_WEIGHT),
    ];
    assert_eq!(
        nearest(&*vectors, "msg/w", &old_vectors[0]).await.as_deref(),
        Some(secret.as_str())
    );
    assert_eq!(
        nearest(&*vectors, "msg/w", &old_vectors[1]).await.as_deref(),
        Some(reply.as_str())
    );

    let receipt = ingest
        .delete_message(pb::DeleteMessageRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            message_id: secret.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .receipt
        .unwrap();
    assert_eq!(receipt.state(), pb::ErasureState::Complete);
    let counts = receipt.counts.unwrap();
    assert_eq!(
        (counts.messages, counts.message_vectors),
        (1, 1),
        "the message and its vector: {counts:?}"
    );
    assert_eq!(
        (counts.conclusions, counts.conclusion_vectors),
        (only_from_secret as i64, only_from_secret as i64),
        "each conclusion from it alone, with its vector: {counts:?}"
    );
    assert_eq!(
        counts.conclusions_trimmed,
        (citing.len() - only_from_secret) as i64,
        "{counts:?}"
    );
    let covering = summaries.iter().filter(|summary| summary.message_seq >= 1).count();
    assert_eq!(
        (
            counts.summaries_rebuilt,
            counts.messages_reembedded,
            counts.idempotency_keys
        ),
        (covering as i64, 1, 1),
        "its summaries, the reply embedded with it, the key of its batch: {counts:?}"
    );
    assert!(receipt.vectors_pending > 0);

    // The background work the erasure queued: summaries written again, the
    // reply embedded again, the tombstoned vectors removed.
    settle().await;
    let later = recall
        .get_erasure_receipt(pb::GetErasureReceiptRequest {
            workspace_id: "w".into(),
            receipt_id: receipt.id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((later.counts, later.vectors_pending), (Some(counts), 0));

    // Nowhere to be found.
    let hits = search_hits(&mut recall).await;
    assert!(hits.iter().all(|m| m.id != secret && !leaks(&m.content)), "{hits:?}");
    let queried = recall
        .query_conclusions(pb::QueryConclusionsRequest {
            workspace_id: "w".into(),
            query: "locker code zebra".into(),
            top_k: Some(100),
            filters: Some(struct_of(
                serde_json::json!({"observer_id": "bob", "observed_id": "alice"}),
            )),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .conclusions;
    assert!(!queried.is_empty(), "the other conclusions are still there");
    assert!(queried.iter().all(|c| !leaks(&c.content)), "{queried:?}");
    assert!(
        all_conclusions(&store)
            .await
            .iter()
            .all(|c| !leaks(&c.content) && !c.source_ids.contains(&secret))
    );
    let context = recall
        .get_session_context(pb::GetSessionContextRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            peer_target: Some("alice".into()),
            peer_perspective: Some("bob".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!leaks(&format!("{context:?}")), "{context:?}");
    assert!(!leaks(&representation(&mut recall).await));
    let summaries = recall
        .get_session_summaries(pb::GetSessionSummariesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let short = summaries.short_summary.clone().expect("the short summary, rebuilt");
    assert!(!leaks(&format!("{summaries:?}")), "{summaries:?}");
    assert!(short.content.contains(REPLY), "{}", short.content);
    // The vector store: no point of the message, no vector embedded with its text.
    for old in &old_vectors {
        let near = vectors
            .query("msg/w", old, 100, &VectorFilter::default(), None)
            .await
            .unwrap();
        assert!(near.iter().all(|hit| hit.id != secret), "{near:?}");
        assert!(
            near.iter().all(|hit| hit.distance > 1e-4),
            "a vector of the old text remains: {near:?}"
        );
    }
    let renewed = embedder.embed(&[format!("bob: {REPLY}")]).await.unwrap();
    assert_eq!(
        nearest(&*vectors, "msg/w", &renewed[0]).await.as_deref(),
        Some(reply.as_str())
    );
    if let Some(qdrant) = qdrant {
        let erased: Vec<&str> = std::iter::once(secret.as_str())
            .chain(
                citing
                    .iter()
                    .filter(|c| c.source_ids == [secret.clone()])
                    .map(|c| c.id.as_str()),
            )
            .collect();
        let mut namespaces = vec!["msg/w".to_owned()];
        namespaces.extend(["alice/alice", "bob/alice"].map(|pair| format!("doc/w/{pair}")));
        let mut points = 0;
        for namespace in namespaces {
            for (id, vector) in qdrant.scroll(&namespace).await.unwrap() {
                points += 1;
                assert!(!erased.contains(&id.as_str()), "{id} is still in Qdrant ({namespace})");
                for old in &old_vectors {
                    assert_ne!(&vector, old, "{id} holds a vector of the erased text");
                }
            }
        }
        assert!(points >= 19, "the scroll read the other points: {points}");
    }
    served.shutdown.cancel();
}

async fn all_conclusions(store: &roncho_store::SqlStore) -> Vec<roncho_core::model::Conclusion> {
    let page = roncho_core::model::PageRequest::from_wire(1, 100, true).unwrap();
    store
        .list_conclusions("w", &roncho_core::filter::Filter::All, page)
        .await
        .unwrap()
        .items
}

fn struct_of(value: serde_json::Value) -> prost_types::Struct {
    roncho_api::json::json_to_struct(value.as_object().unwrap())
}

async fn search_hits(recall: &mut RecallServiceClient<tonic::transport::Channel>) -> Vec<pb::Message> {
    recall
        .search_messages(pb::SearchMessagesRequest {
            workspace_id: "w".into(),
            query: "locker code zebra".into(),
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .messages
}

async fn representation(recall: &mut RecallServiceClient<tonic::transport::Channel>) -> String {
    recall
        .get_representation(pb::GetRepresentationRequest {
            workspace_id: "w".into(),
            peer_id: "bob".into(),
            target: Some("alice".into()),
            max_conclusions: Some(100),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .representation
}

/// The id of the vector nearest to `vector` in `namespace`.
async fn nearest(vectors: &dyn VectorStore, namespace: &str, vector: &[f32]) -> Option<String> {
    vectors
        .query(namespace, vector, 1, &VectorFilter::default(), None)
        .await
        .unwrap()
        .into_iter()
        .next()
        .map(|hit| hit.id)
}

/// A delete bigger than the request's budget returns a running receipt;
/// the `deletion` task finishes it in the background, and queue status and
/// the receipt show it.
#[tokio::test]
async fn a_large_delete_finishes_in_the_background() {
    use roncho_ingest::IngestApi;
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let dyn_store = store.clone();
    for batch in 0..6 {
        let messages = (0..100)
            .map(|i| roncho_core::model::NewMessage {
                peer_id: "alice".into(),
                content: format!("batch {batch} line {i}"),
                metadata: Default::default(),
                configuration: Default::default(),
                created_at: None,
                token_count: 4,
            })
            .collect();
        store.create_messages("w", "big", messages).await.unwrap();
    }
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let worker = Worker::new(dyn_store.clone(), queue.clone(), WorkerConfig::default());
    while worker.run_once().await.unwrap() {}

    let ingest = roncho_ingest::Ingest::new(dyn_store.clone()).with_erasure_budget(Duration::ZERO);
    let request = roncho_ingest::DeleteSession {
        workspace_id: "w".into(),
        session_id: "big".into(),
    };
    let receipt = ingest.delete_session(request.clone()).await.unwrap();
    assert_eq!(receipt.state, roncho_core::model::ErasureState::Running);
    assert_eq!(receipt.counts.messages, 500, "one chunk within the request");
    let again = ingest.delete_session(request).await.unwrap();
    assert_eq!(again.id, receipt.id, "a repeated delete joins the running erasure");
    let status = queue
        .status(&roncho_core::queue::StatusFilter {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        status.counts.pending >= 1,
        "the deletion task waits in the queue: {status:?}"
    );

    while worker.run_once().await.unwrap() {}
    let done = store.erasure_receipt("w", &receipt.id).await.unwrap();
    assert_eq!(done.state, roncho_core::model::ErasureState::Complete);
    assert_eq!((done.counts.messages, done.counts.sessions), (600, 1));
    let status = queue
        .status(&roncho_core::queue::StatusFilter {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((status.counts.pending, status.counts.failed), (0, 0), "{status:?}");
}
