//! The `VectorStore` contract suite, run against the exact store on SQLite
//! (cached namespaces) and on Postgres (read per query).

use std::sync::Arc;

use roncho_core::vector::contract::Check;
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
