//! The `WorkQueue` contract suite against the SQL queue on SQLite (the
//! embedded mode's queue) and on Postgres.

use std::sync::Arc;

use roncho_core::queue::contract::Check;
use roncho_store::testing::FreshDatabase;
use roncho_store::{SqlStore, SqlWorkQueue, StoreOptions};

async fn open(url: String) -> (Arc<SqlStore>, SqlWorkQueue) {
    let store = Arc::new(roncho_store::connect(&StoreOptions::new(url)).await.expect("connect"));
    roncho_store::migrate(&store).await.expect("migrate");
    let queue = SqlWorkQueue::new(store.clone());
    (store, queue)
}

async fn on_sqlite(check: Check) {
    let dir = tempfile::tempdir().unwrap();
    let (store, queue) = open(StoreOptions::embedded(dir.path()).database_url).await;
    check(&queue).await;
    store.close().await;
}

async fn on_postgres(check: Check) {
    let Some(database) = FreshDatabase::create().await else {
        return;
    };
    let (store, queue) = open(database.url.clone()).await;
    check(&queue).await;
    store.close().await;
    database.drop_database().await;
}

roncho_core::work_queue_contract!(sqlite, super::on_sqlite);
roncho_core::work_queue_contract!(postgres, super::on_postgres);
