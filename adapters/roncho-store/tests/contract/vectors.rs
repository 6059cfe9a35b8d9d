//! The `VectorStore` contract suite, run against the exact store on SQLite
//! (cached namespaces) and on Postgres (read per query).

use std::sync::Arc;

use roncho_core::vector::contract::Check;
use roncho_core::vector::{VectorFilter, VectorRecord, VectorStore};
use roncho_store::testing::FreshDatabase;
use roncho_store::{SqlStore, SqlVectorStore, StoreOptions};

async fn open(url: String) -> (Arc<SqlStore>, SqlVectorStore) {
    let store = Arc::new(roncho_store::connect(&StoreOptions::new(url)).await.expect("connect"));
    roncho_store::migrate(&store).await.expect("migrate");
    let vectors = SqlVectorStore::new(store.clone());
    (store, vectors)
}

async fn on_sqlite(check: Check) {
    let dir = tempfile::tempdir().unwrap();
    let (store, vectors) = open(StoreOptions::embedded(dir.path()).database_url).await;
    check(&vectors).await;
    store.close().await;
}

async fn on_postgres(check: Check) {
    let Some(database) = FreshDatabase::create().await else {
        return;
    };
    let (store, vectors) = open(database.url.clone()).await;
    check(&vectors).await;
    store.close().await;
    database.drop_database().await;
}

roncho_core::vector_store_contract!(sqlite, super::on_sqlite);
roncho_core::vector_store_contract!(postgres, super::on_postgres);

/// Vectors of namespaces larger than one read (20,000 rows) and beside a
/// smaller one, as a restart finds them: every one loads once, in the
/// table's order (SQLite, most of the table) or by its key (a small
/// namespace; Postgres, read per query).
async fn namespaces_load_whole_after_a_restart(url: String, warm: bool) {
    const LARGE: usize = 45_001;
    let record = |id: String, at: usize, session: &str| VectorRecord {
        id,
        vector: vec![(at as f32).cos(), (at as f32).sin(), 0.5],
        session_id: Some(session.to_owned()),
        peer_id: Some("alice".to_owned()),
        level: None,
        lexical: None,
        passages: Vec::new(),
    };
    let (store, vectors) = open(url.clone()).await;
    for (namespace, count) in [("msg/w", LARGE), ("doc/w/a/b", 50)] {
        for first in (0..count).step_by(1_000) {
            let records = (first..(first + 1_000).min(count))
                .map(|at| record(format!("{namespace}-{at:05}"), at, "s1"))
                .collect();
            vectors.upsert(namespace, records).await.expect("upsert");
        }
    }
    store.close().await;
    let (store, vectors) = open(url).await;
    if warm {
        vectors.warm().await.expect("warm");
    }
    let everything = VectorFilter::default();
    for (namespace, count) in [("msg/w", LARGE), ("doc/w/a/b", 50)] {
        let hits = vectors
            .query(namespace, &[1.0, 0.0, 0.5], count + 10, &everything, None)
            .await
            .expect("query");
        let mut ids: Vec<&str> = hits.iter().map(|hit| hit.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), count, "{namespace}: every vector once");
        assert_eq!(
            hits[0].id,
            format!("{namespace}-00000"),
            "{namespace}: the nearest first"
        );
    }
    // The loaded namespace keeps taking writes.
    vectors
        .upsert("msg/w", vec![record("msg/w-new".to_owned(), 0, "s2")])
        .await
        .expect("upsert");
    let in_s2 = VectorFilter {
        session_ids: Some(vec!["s2".to_owned()]),
        ..VectorFilter::default()
    };
    let hits = vectors
        .query("msg/w", &[1.0, 0.0, 0.5], 5, &in_s2, None)
        .await
        .expect("query");
    assert_eq!(
        hits.iter().map(|hit| hit.id.as_str()).collect::<Vec<_>>(),
        ["msg/w-new"]
    );
    store.close().await;
}

#[tokio::test]
async fn sqlite_namespaces_load_whole_after_a_restart() {
    for warm in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        namespaces_load_whole_after_a_restart(StoreOptions::embedded(dir.path()).database_url, warm).await;
    }
}

#[tokio::test]
async fn postgres_namespaces_load_whole_after_a_restart() {
    let Some(database) = FreshDatabase::create().await else {
        return;
    };
    namespaces_load_whole_after_a_restart(database.url.clone(), true).await;
    database.drop_database().await;
}
