//! In a process that takes writes, the reconciler role yields to them: the
//! ingest service marks each CreateMessages, the reconciler waits for a
//! burst to pause, and the vectors are all synced once it has. A reconciler
//! in a process of its own, or with `reconciler_yield_ms = 0`, never waits.

use std::sync::Arc;
use std::time::Duration;

use roncho::config::{Config, ConfigLayer, EmbeddingProvider, Role};
use roncho_core::model::SyncKind;
use roncho_core::store::Store;

mod support;

fn config(data_dir: &std::path::Path, roles: &str, yield_ms: Option<u64>) -> Config {
    let flags = ConfigLayer {
        data_dir: Some(data_dir.to_owned()),
        roles: Some(roles.into()),
        embedding_provider: Some(EmbeddingProvider::TestHashing),
        embedding_dimensions: Some(32),
        reconciler_yield_ms: yield_ms,
        ..ConfigLayer::default()
    };
    Config::resolve(ConfigLayer::default(), ConfigLayer::default(), flags).unwrap()
}

#[tokio::test]
async fn the_reconciler_beside_ingest_waits_for_a_burst_then_syncs_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), "ingest,recall,reconciler", None);
    let runtime = roncho::wiring::build(&config).await.unwrap();
    let reconciler = runtime.reconciler.clone().expect("a reconciler role with an embedder");
    assert!(
        runtime.write_activity.is_some(),
        "ingest and reconciler share the process"
    );
    let store: Arc<dyn Store> = runtime.store.clone();
    let nudged = reconciler.clone();
    let services = roncho::server::Services {
        semantic: runtime.semantic.clone(),
        write_activity: runtime.write_activity.clone(),
        after_write: Some(Arc::new(move || nudged.nudge())),
        ..roncho::server::Services::store_only(store.clone())
    };
    let served = support::serve(services, &[Role::Ingest]).await;
    tokio::spawn(reconciler.clone().run(served.shutdown.clone()));

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
    served.shutdown.cancel();
}

#[tokio::test]
async fn a_reconciler_without_writes_beside_it_or_with_no_budget_never_waits() {
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
