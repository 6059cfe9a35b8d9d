//! In a process that takes writes, background work yields to them: the
//! ingest service marks each CreateMessages, the reconciler and the deriver
//! wait for a burst to pause, and the vectors are all synced and the
//! messages derived once it has. Background work in a process of its own,
//! or with `background_yield_ms = 0`, never waits.

use std::sync::Arc;
use std::time::Duration;

use roncho::config::{Config, ConfigLayer, EmbeddingProvider, Role};
use roncho_core::model::SyncKind;
use roncho_core::queue::WorkQueue;
use roncho_core::store::SyncLedger;

use crate::support;

fn config(data_dir: &std::path::Path, roles: &str, yield_ms: Option<u64>) -> Config {
    let mut flags = ConfigLayer::default();
    flags.store.data_dir = Some(data_dir.to_owned());
    flags.server.roles = Some(roles.into());
    flags.search.embedding_provider = Some(EmbeddingProvider::TestHashing);
    flags.search.embedding_dimensions = Some(32);
    flags.queue.background_yield_ms = yield_ms;
    Config::resolve(ConfigLayer::default(), ConfigLayer::default(), flags).unwrap()
}

#[tokio::test]
async fn the_reconciler_and_deriver_beside_ingest_wait_for_a_burst_then_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "ingest,recall,reconciler", None);
    let runtime = roncho::wiring::build(&config).await.unwrap();
    let reconciler = runtime.reconciler.clone().expect("a reconciler role with an embedder");
    assert!(
        runtime.write_activity.is_some(),
        "ingest and reconciler share the process"
    );
    let store = runtime.store.clone();
    let activity = runtime
        .write_activity
        .clone()
        .expect("ingest and reconciler share the process");
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(runtime.store.clone()));
    let deriving = roncho::wiring::yielding_to(&activity, &config);
    let deriver = Arc::new(roncho_deriver::worker::Worker::new(
        store.clone(),
        queue.clone(),
        roncho_deriver::worker::WorkerConfig {
            yielding: Some(deriving.clone()),
            ..roncho_deriver::worker::WorkerConfig::default()
        },
    ));
    let (nudged, derives) = (reconciler.clone(), deriver.clone());
    let mut services = roncho::server::Serving::store_only(store.clone());
    services.domain.semantic = runtime.semantic.clone();
    services.domain.write_activity = Some(activity);
    services.domain.after_write = Some(Arc::new(move || {
        nudged.nudge();
        derives.nudge();
    }));
    let served = support::serve(services, &[Role::Ingest]).await;
    tokio::spawn(reconciler.clone().run(served.shutdown.clone()));
    tokio::spawn(deriver.clone().run(served.shutdown.clone()));

    // A burst: batch after batch, each nudging the reconciler.
    for batch in 0..20 {
        let texts: Vec<String> = (0..10)
            .map(|index| format!("batch {batch} message {index}: bees on the roof"))
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        support::write_as(&served.channel, "alice", &texts).await;
    }
    // Once the burst has paused, every vector is synced.
    let mut counts = store.sync_counts(SyncKind::Message).await.unwrap();
    for _ in 0..300 {
        if counts.pending == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        counts = store.sync_counts(SyncKind::Message).await.unwrap();
    }
    assert_eq!((counts.synced, counts.pending, counts.failed), (200, 0, 0));
    assert!(
        reconciler.yielded_total() > Duration::ZERO,
        "nudged by each write, it waited for the burst to pause"
    );
    // And every message derived (alice observes herself, Honcho's default).
    let mut totals = roncho_store::SqlWorkQueue::new(runtime.store.clone())
        .totals()
        .await
        .unwrap();
    for _ in 0..300 {
        if totals.pending == 0 && totals.in_progress == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        totals = roncho_store::SqlWorkQueue::new(runtime.store.clone())
            .totals()
            .await
            .unwrap();
    }
    assert_eq!((totals.pending, totals.in_progress, totals.failed), (0, 0, 0));
    assert!(totals.completed > 0, "{totals:?}");
    assert!(
        deriving.total() > Duration::ZERO,
        "the deriver waited for the burst to pause"
    );
    served.shutdown.cancel();
}

#[tokio::test]
async fn background_work_without_writes_beside_it_or_with_no_budget_never_waits() {
    for (roles, yield_ms) in [
        ("reconciler", None),
        ("ingest,recall,reconciler", Some(0)),
        ("ingest,recall", None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let runtime = roncho::wiring::build(&config(dir.path(), roles, yield_ms))
            .await
            .unwrap();
        assert!(runtime.write_activity.is_none(), "{roles}, {yield_ms:?}");
    }
}
