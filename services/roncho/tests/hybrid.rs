//! Semantic search end to end over gRPC: with the embedder down, writes still
//! succeed, rows stay pending and search answers from full text saying why;
//! once it returns, the reconciler syncs every row and search is hybrid.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use roncho::config::Role;
use roncho::server::Services;
use roncho_core::embed::Embedder;
use roncho_core::model::SyncKind;
use roncho_core::store::Store;
use roncho_core::{Error, Result};
use roncho_embed::hashing::TestHashingEmbedder;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use roncho_reconciler::{Reconciler, ReconcilerConfig};
use tokio_util::sync::CancellationToken;

/// An embedder that can be switched off, like a provider going down.
struct Switchable {
    inner: TestHashingEmbedder,
    up: AtomicBool,
}

#[async_trait]
impl Embedder for Switchable {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if !self.up.load(Ordering::SeqCst) {
            return Err(Error::Unavailable("embedder: connection refused".into()));
        }
        self.inner.embed(texts).await
    }
    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }
    fn model_id(&self) -> String {
        self.inner.model_id()
    }
}

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
    let store = Arc::new(
        roncho_store::connect(&roncho_store::StoreOptions::embedded(dir.path()))
            .await
            .unwrap(),
    );
    roncho_store::migrate(&store).await.unwrap();
    let vectors = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    let embedder = Arc::new(Switchable {
        inner: TestHashingEmbedder::new(128),
        up: AtomicBool::new(false),
    });
    let config = ReconcilerConfig {
        backoff: Duration::ZERO,
        ..ReconcilerConfig::default()
    };
    let dyn_store: Arc<dyn Store> = store.clone();
    let reconciler = Arc::new(Reconciler::new(
        dyn_store.clone(),
        embedder.clone(),
        vectors.clone(),
        config,
    ));
    let nudged = reconciler.clone();
    let services = Services {
        store: dyn_store,
        semantic: Some(roncho_recall::Semantic {
            embedder: embedder.clone(),
            vectors,
        }),
        after_write: Some(Arc::new(move || nudged.nudge())),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let server = tokio::spawn(async move { roncho::server::run(listener, services, &Role::ALL, token).await });
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
        })
        .await
        .expect("a write never fails because the embedder is down");
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

    embedder.up.store(true, Ordering::SeqCst);
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

    shutdown.cancel();
    server.await.unwrap().unwrap();
}
