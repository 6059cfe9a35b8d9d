//! The reconciler over the real store (SQLite) and the exact vector store:
//! writes land pending while the embedder is down, nothing is lost, and
//! everything syncs when it returns; deleted rows lose their vectors.

use std::sync::Arc;
use std::time::Duration;

use roncho_core::Error;
use roncho_core::activity::WriteActivity;
use roncho_core::embed::Embedder;
use roncho_core::model::{JsonObject, NewMessage, SyncKind};
use roncho_core::store::{Erasure, Messages, SyncLedger};
use roncho_core::vector::{VectorFilter, VectorStore, messages_namespace};
use roncho_embed::testing::SwitchableTestEmbedder;
use roncho_reconciler::{Reconciler, ReconcilerConfig};
use roncho_store::{SqlVectorStore, StoreOptions};
use roncho_worker::yielding::YieldToWrites;

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

/// A reconciler beside the writes of its process leaves the cores to them:
/// it syncs nothing while a write is in flight, syncs once writes pause,
/// and, once it has waited its budget, syncs whatever the writes.
#[tokio::test]
async fn a_reconciler_beside_writes_waits_for_them_to_pause_within_its_budget() {
    let Setup {
        _dir,
        store,
        vectors,
        embedder,
        reconciler: _,
    } = setup(32, 3).await;
    embedder.set_up(true);
    vectors.check_dimensions(32, &embedder.model_id()).await.unwrap();
    let activity = Arc::new(WriteActivity::default());
    let yielding = |budget| {
        Arc::new(
            Reconciler::new(
                store.clone(),
                embedder.clone(),
                vectors.clone(),
                ReconcilerConfig::default(),
            )
            .yielding_to_writes(Arc::new(YieldToWrites::new(
                activity.clone(),
                Duration::from_millis(50),
                budget,
            ))),
        )
    };
    let pending = || async { store.sync_counts(SyncKind::Message).await.unwrap().pending };

    // A burst in flight: the pass waits, the messages stay pending.
    let patient = yielding(Duration::from_secs(600));
    store
        .create_messages("w", "s", vec![message("alice", "espresso"), message("bob", "tea")])
        .await
        .unwrap();
    let burst = activity.begin();
    let pass = tokio::spawn({
        let patient = patient.clone();
        async move { patient.pass().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!pass.is_finished(), "the pass waits while a write is in flight");
    assert_eq!(pending().await, 2);
    // The burst pauses: the pass syncs.
    drop(burst);
    let report = tokio::time::timeout(Duration::from_secs(30), pass)
        .await
        .expect("the pass ends once writes pause")
        .unwrap()
        .unwrap();
    assert_eq!(report.synced, 2);
    assert_eq!(pending().await, 0);
    assert!(
        patient.yielded_total() >= Duration::from_millis(250),
        "{:?}",
        patient.yielded_total()
    );

    // Writes that never pause: the pass waits its budget, then syncs.
    let budget = Duration::from_millis(200);
    let bounded = yielding(budget);
    store
        .create_messages("w", "s", vec![message("alice", "a flat white")])
        .await
        .unwrap();
    let _endless = activity.begin();
    let report = tokio::time::timeout(Duration::from_secs(30), bounded.pass())
        .await
        .expect("the budget bounds the wait")
        .unwrap();
    assert_eq!(report.synced, 1, "synced with a write still in flight");
    assert_eq!(pending().await, 0);
    assert!(bounded.yielded_total() >= budget, "{:?}", bounded.yielded_total());
    // Caught up: the next burst is yielded to again, within a fresh budget.
    store
        .create_messages("w", "s", vec![message("bob", "green tea")])
        .await
        .unwrap();
    let pass = tokio::spawn({
        let bounded = bounded.clone();
        async move { bounded.pass().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!pass.is_finished(), "a fresh budget: the pass waits again");
    let report = tokio::time::timeout(Duration::from_secs(30), pass)
        .await
        .expect("the budget bounds the wait")
        .unwrap()
        .unwrap();
    assert_eq!(report.synced, 1);
}
