//! The reconciler over the real store (SQLite) and the exact vector store:
//! writes land pending while the embedder is down, nothing is lost, and
//! everything syncs when it returns; deleted rows lose their vectors.

use std::sync::Arc;
use std::time::Duration;

use roncho_core::Error;
use roncho_core::embed::Embedder;
use roncho_core::model::{JsonObject, NewMessage, SyncKind};
use roncho_core::store::Store;
use roncho_core::vector::{VectorFilter, VectorStore, messages_namespace};
use roncho_embed::testing::SwitchableTestEmbedder;
use roncho_reconciler::{Reconciler, ReconcilerConfig};
use roncho_store::{SqlVectorStore, StoreOptions};

fn message(peer: &str, content: &str) -> NewMessage {
    NewMessage {
        peer_id: peer.into(),
        content: content.into(),
        metadata: JsonObject::new(),
        configuration: JsonObject::new(),
        created_at: None,
        token_count: 1,
    }
}

/// A SQLite store, its exact vector store, a switched-off embedder and a
/// reconciler without backoff.
struct Setup {
    _dir: tempfile::TempDir,
    store: Arc<roncho_store::SqlStore>,
    vectors: Arc<SqlVectorStore>,
    embedder: Arc<SwitchableTestEmbedder>,
    reconciler: Reconciler,
}

async fn setup(dimensions: usize, max_attempts: i64) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        roncho_store::connect(&StoreOptions::embedded(dir.path()))
            .await
            .unwrap(),
    );
    roncho_store::migrate(&store).await.unwrap();
    let vectors = Arc::new(SqlVectorStore::new(store.clone()));
    let embedder = Arc::new(SwitchableTestEmbedder::down(dimensions));
    let config = ReconcilerConfig {
        backoff: Duration::ZERO,
        max_attempts,
        ..ReconcilerConfig::default()
    };
    let reconciler = Reconciler::new(store.clone(), embedder.clone(), vectors.clone(), config);
    Setup {
        _dir: dir,
        store,
        vectors,
        embedder,
        reconciler,
    }
}

#[tokio::test]
async fn writes_survive_an_embedder_outage_and_sync_when_it_returns() {
    let Setup {
        _dir,
        store,
        vectors,
        embedder,
        reconciler,
    } = setup(64, 3).await;
    vectors.check_dimensions(64, &embedder.model_id()).await.unwrap();

    let created = store
        .create_messages(
            "w",
            "s",
            vec![message("alice", "espresso every morning"), message("bob", "tea")],
        )
        .await
        .unwrap();
    let report = reconciler.pass().await.unwrap();
    assert_eq!((report.synced, report.failed), (0, 2));
    let counts = store.sync_counts(SyncKind::Message).await.unwrap();
    assert_eq!(
        (counts.pending, counts.synced, counts.failed),
        (2, 0, 0),
        "still pending after one failure"
    );
    assert_eq!(
        store
            .list_messages("w", "s", &roncho_core::filter::Filter::All, Default::default())
            .await
            .unwrap()
            .total,
        2,
        "no write lost"
    );

    embedder.set_up(true);
    let report = reconciler.pass().await.unwrap();
    assert_eq!(report.synced, 2);
    assert_eq!(store.sync_counts(SyncKind::Message).await.unwrap().synced, 2);
    let query = embedder.inner.embed_one("alice: espresso every morning");
    let hits = vectors
        .query(&messages_namespace("w"), &query, 5, &VectorFilter::default(), None)
        .await
        .unwrap();
    assert_eq!(hits[0].id, created[0].id);
    assert!(hits[0].distance < 1e-4);

    store.delete_message("w", "s", &created[0].id).await.unwrap();
    assert_eq!(reconciler.pass().await.unwrap().removed, 1);
    let hits = vectors
        .query(&messages_namespace("w"), &query, 5, &VectorFilter::default(), None)
        .await
        .unwrap();
    assert!(
        hits.iter().all(|hit| hit.id != created[0].id),
        "the deleted message's vector is gone"
    );
}

#[tokio::test]
async fn rows_fail_after_the_configured_attempts_and_dimensions_are_checked() {
    let Setup {
        _dir,
        store,
        vectors,
        embedder: _,
        reconciler,
    } = setup(32, 2).await;
    store.create_messages("w", "s", vec![message("a", "x")]).await.unwrap();
    reconciler.pass().await.unwrap();
    reconciler.pass().await.unwrap();
    let counts = store.sync_counts(SyncKind::Message).await.unwrap();
    assert_eq!((counts.pending, counts.failed), (0, 1));

    vectors.check_dimensions(32, "model-a").await.unwrap();
    vectors.check_dimensions(32, "model-a").await.unwrap();
    let error = vectors.check_dimensions(384, "model-b").await.unwrap_err();
    assert!(
        matches!(&error, Error::FailedPrecondition(message) if message.contains("32") && message.contains("384")),
        "{error}"
    );
}
