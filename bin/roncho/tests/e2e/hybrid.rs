//! Semantic search end to end over gRPC: with the embedder down, writes still
//! succeed, rows stay pending and search answers from full text saying why;
//! once it returns, the reconciler syncs every row and search is hybrid. The
//! same holds with Qdrant down in the distributed mode (Postgres and the
//! real Qdrant behind a relay the test cuts).

use std::sync::Arc;
use std::time::Duration;

use roncho::config::Role;
use roncho::server::Serving;
use roncho_core::embed::Embedder;
use roncho_core::model::SyncKind;
use roncho_core::store::SyncLedger;
use roncho_core::vector::VectorStore;
use roncho_embed::testing::SwitchableTestEmbedder;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use roncho_qdrant::{QdrantOptions, QdrantVectorStore};
use roncho_reconciler::{Reconciler, ReconcilerConfig};
use tokio_util::sync::CancellationToken;

use crate::support;

async fn search(
    recall: &mut RecallServiceClient<tonic::transport::Channel>,
    query: &str,
) -> pb::SearchMessagesResponse {
    recall
        .search_messages(pb::SearchMessagesRequest {
            workspace_id: "w".into(),
            query: query.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test]
async fn embedder_outage_degrades_search_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let vectors = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    let embedder = Arc::new(SwitchableTestEmbedder::down(128));
    let switch = embedder.clone();
    outage_degrades_search_and_loses_nothing(store, vectors, embedder, move |down| switch.set_up(!down)).await;
}

/// The distributed mode's backends: Postgres and the real Qdrant, reached
/// through a relay the test cuts for the outage.
#[tokio::test]
async fn qdrant_outage_on_postgres_degrades_search_and_loses_nothing() {
    let Some((database, qdrant_url)) = support::postgres_and_qdrant().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let upstream = qdrant_url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let relay = Arc::new(support::Relay::start(upstream).await);
    let mut options = QdrantOptions::new(format!("http://{}", relay.address));
    options.collection = format!("hybrid_{}", roncho_store::testing::unique_name());
    let qdrant = Arc::new(
        QdrantVectorStore::connect(&options)
            .unwrap()
            .counting_terms_in(store.clone()),
    );
    let embedder = Arc::new(SwitchableTestEmbedder::down(128));
    embedder.set_up(true);
    relay.set_up(false);
    let switch = relay.clone();
    outage_degrades_search_and_loses_nothing(store.clone(), qdrant.clone(), embedder, move |down| {
        switch.set_up(!down)
    })
    .await;
    let points = qdrant.scroll("msg/w").await.unwrap();
    assert_eq!(points.len(), 3, "every message lives in Qdrant: {points:?}");
    qdrant.drop_collection().await.unwrap();
    store.close().await;
    database.drop_database().await;
}

/// Runs the scenario with the outage on; `set_down(false)` ends it.
async fn outage_degrades_search_and_loses_nothing(
    store: Arc<roncho_store::SqlStore>,
    vectors: Arc<dyn VectorStore>,
    embedder: Arc<dyn Embedder>,
    set_down: impl Fn(bool),
) {
    let config = ReconcilerConfig {
        backoff: Duration::ZERO,
        ..ReconcilerConfig::default()
    };
    let dyn_store = store.clone();
    let reconciler = Arc::new(Reconciler::new(
        dyn_store.clone(),
        embedder.clone(),
        vectors.clone(),
        config,
    ));
    let nudged = reconciler.clone();
    let mut services = Serving::store_only(dyn_store);
    services.domain.semantic = Some(roncho_search::Semantic::new(embedder.clone(), vectors));
    services.domain.after_write = Some(Arc::new(move || nudged.nudge()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let server = tokio::spawn(async move { roncho::server::run(Some(listener), services, &Role::ALL, token).await });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut ingest = IngestServiceClient::new(channel.clone());
    let mut recall = RecallServiceClient::new(channel);

    let messages = [
        "I drink espresso every morning",
        "We hiked the ridge trail on Sunday",
        "My sister plays the cello",
    ]
    .iter()
    .map(|content| pb::MessageCreate {
        peer_id: "alice".into(),
        content: (*content).into(),
        ..Default::default()
    })
    .collect();
    ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages,
            idempotency_key: None,
        })
        .await
        .expect("a write never fails because the embedder or vector store is down");
    reconciler.pass().await.unwrap();
    let counts = store.sync_counts(SyncKind::Message).await.unwrap();
    assert_eq!((counts.pending, counts.synced), (3, 0), "rows wait, pending");

    let degraded = search(&mut recall, "espresso").await;
    assert_eq!(degraded.mode, "full_text");
    assert!(
        degraded.degraded_reason.contains("semantic search unavailable"),
        "{}",
        degraded.degraded_reason
    );
    assert_eq!(degraded.messages[0].content, "I drink espresso every morning");

    set_down(false);
    reconciler.pass().await.unwrap();
    assert_eq!(
        store.sync_counts(SyncKind::Message).await.unwrap().synced,
        3,
        "everything syncs once it returns"
    );
    let hybrid = search(&mut recall, "cello sister").await;
    assert_eq!(hybrid.mode, "hybrid");
    assert!(hybrid.degraded_reason.is_empty());
    assert_eq!(hybrid.messages[0].content, "My sister plays the cello");

    ingest
        .create_conclusions(pb::CreateConclusionsRequest {
            workspace_id: "w".into(),
            conclusions: vec![
                pb::ConclusionCreate {
                    observer_id: "alice".into(),
                    observed_id: "alice".into(),
                    content: "I play no instrument".into(),
                    session_id: None,
                    source_message_ids: Vec::new(),
                },
                pb::ConclusionCreate {
                    observer_id: "alice".into(),
                    observed_id: "alice".into(),
                    content: "My sister plays cello".into(),
                    session_id: None,
                    source_message_ids: Vec::new(),
                },
            ],
            idempotency_key: None,
        })
        .await
        .unwrap();
    reconciler.pass().await.unwrap();
    assert_eq!(store.sync_counts(SyncKind::Conclusion).await.unwrap().synced, 2);
    let filters = roncho_api::json::json_to_struct(
        serde_json::json!({"observer_id": "alice", "observed_id": "alice"})
            .as_object()
            .unwrap(),
    );
    let nearest = recall
        .query_conclusions(pb::QueryConclusionsRequest {
            workspace_id: "w".into(),
            query: "sister cello".into(),
            top_k: Some(1),
            distance: None,
            filters: Some(filters),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        nearest
            .conclusions
            .iter()
            .map(|c| c.content.as_str())
            .collect::<Vec<_>>(),
        ["My sister plays cello"]
    );

    shutdown.cancel();
    server.await.unwrap().unwrap();
}

/// Counts the texts it embeds, then embeds as the test embedder does.
struct Counting {
    inner: roncho_embed::hashing::TestHashingEmbedder,
    texts: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl Embedder for Counting {
    async fn embed(&self, texts: &[String]) -> roncho_core::Result<Vec<Vec<f32>>> {
        self.texts.fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
        self.inner.embed(texts).await
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    fn model_id(&self) -> String {
        self.inner.model_id()
    }
}

/// A query asked again in its workspace is not embedded again (the query
/// cache), and answers the same; the same words in another workspace are
/// embedded for it (no workspace learns another's queries from timing).
#[tokio::test]
async fn a_repeated_query_is_embedded_once_per_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let counting = Arc::new(Counting {
        inner: roncho_embed::hashing::TestHashingEmbedder::new(64),
        texts: Default::default(),
    });
    let vectors: Arc<dyn VectorStore> = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    let semantic = roncho_search::Semantic::new(counting.clone(), vectors);
    let mut services = Serving::store_only(store.clone());
    services.domain.semantic = Some(semantic);
    let served = support::serve(services, &Role::ALL).await;
    support::write_as(&served.channel, "alice", &["We adopted a kitten from the shelter."]).await;
    let search = |workspace: &str| {
        let channel = served.channel.clone();
        let request = pb::SearchMessagesRequest {
            workspace_id: workspace.into(),
            query: "kitten shelter".into(),
            limit: 5,
            ..Default::default()
        };
        async move {
            RecallServiceClient::new(channel)
                .search_messages(request)
                .await
                .unwrap()
                .into_inner()
        }
    };
    let embedded = || counting.texts.load(std::sync::atomic::Ordering::SeqCst);
    let first = search("w").await;
    let after_first = embedded();
    let again = search("w").await;
    assert_eq!(
        embedded(),
        after_first,
        "the same query in the same workspace is not embedded again"
    );
    assert_eq!(
        first.messages.iter().map(|m| &m.id).collect::<Vec<_>>(),
        again.messages.iter().map(|m| &m.id).collect::<Vec<_>>()
    );
    let _ = search("other").await;
    assert_eq!(embedded(), after_first + 1, "another workspace's query is its own");
    served.shutdown.cancel();
}
