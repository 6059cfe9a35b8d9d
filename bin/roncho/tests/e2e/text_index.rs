//! Postgres indexes message text off the write path: the reconciler role
//! indexes it, with or without an embedder, and `roncho status` shows what
//! waits. SQLite indexes as it writes and has no text indexer.

use std::time::Duration;

use roncho::config::{Config, ConfigLayer, EmbeddingProvider};
use roncho_core::filter::Filter;
use roncho_core::model::{JsonObject, MessageQuery, NewMessage};
use roncho_core::store::{Messages, Store, SyncLedger};

fn message(content: String) -> NewMessage {
    NewMessage {
        peer_id: "alice".into(),
        content,
        metadata: JsonObject::new(),
        configuration: JsonObject::new(),
        created_at: None,
        token_count: 2,
    }
}

fn config(database_url: Option<String>, data_dir: &std::path::Path, provider: EmbeddingProvider) -> Config {
    let mut flags = ConfigLayer::default();
    flags.store.database_url = database_url;
    flags.store.data_dir = Some(data_dir.to_owned());
    flags.server.roles = Some("ingest,recall,reconciler".into());
    flags.search.embedding_provider = Some(provider);
    flags.search.embedding_dimensions = Some(32);
    Config::resolve(ConfigLayer::default(), ConfigLayer::default(), flags).unwrap()
}

async fn text_index_line(config: &Config) -> Option<String> {
    roncho::status::checks(config)
        .await
        .into_iter()
        .find(|check| check.name == "message text index")
        .map(|check| check.detail)
}

async fn found(store: &dyn Store, word: &str) -> usize {
    let search = MessageQuery {
        terms: vec![word.to_owned()],
        session_ids: None,
        peer_id: None,
        peer_perspective: None,
        limit: 10,
    };
    store.search_messages("w", &search, &Filter::All).await.unwrap().len()
}

#[tokio::test]
async fn without_an_embedder_the_reconciler_role_indexes_postgres_text_at_once() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = config(Some(database.url.clone()), dir.path(), EmbeddingProvider::None);
    let runtime = roncho::wiring::build(&config).await.unwrap();
    assert!(runtime.reconciler.is_none(), "no embedder, no vectors to sync");
    let indexer = runtime.text_indexer.clone().expect("a text indexer on Postgres");
    assert_eq!(indexer.grace(), Duration::ZERO);

    // The oldest message falls out of the tail that search matches on the fly.
    let count = roncho_store::TEXT_TAIL + 1;
    let messages = (0..count)
        .map(|n| {
            message(if n == 0 {
                "a quokka smiled".into()
            } else {
                format!("line {n}")
            })
        })
        .collect();
    runtime.store.create_messages("w", "s", messages).await.unwrap();
    assert_eq!(found(&*runtime.store, "quokka").await, 0);
    let waiting = text_index_line(&config).await.expect("a text index line on Postgres");
    assert!(waiting.starts_with(&format!("{count} messages waiting")), "{waiting}");

    assert_eq!(indexer.pass().await.unwrap(), u64::try_from(count).unwrap());
    assert_eq!(found(&*runtime.store, "quokka").await, 1);
    assert_eq!(
        text_index_line(&config).await.as_deref(),
        Some("every message's words are indexed")
    );
    runtime.store.close().await;
    database.drop_database().await;
}

#[tokio::test]
async fn beside_a_vector_reconciler_the_text_indexer_waits_its_grace() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = config(Some(database.url.clone()), dir.path(), EmbeddingProvider::TestHashing);
    let runtime = roncho::wiring::build(&config).await.unwrap();
    let indexer = runtime.text_indexer.clone().expect("a text indexer on Postgres");
    assert_eq!(indexer.grace(), roncho_reconciler::GRACE_WITH_RECONCILER);
    let reconciler = runtime.reconciler.clone().expect("a vector reconciler");

    let store = &runtime.store;
    store
        .create_messages("w", "s", vec![message("a wombat dug".into())])
        .await
        .unwrap();
    assert_eq!(
        indexer.pass().await.unwrap(),
        0,
        "left to the reconciler within the grace"
    );
    // The reconciler indexes the words as it marks the vector synced.
    reconciler.pass().await.unwrap();
    assert_eq!(store.text_index_backlog().await.unwrap(), 0);

    // What the reconciler does not reach (its embedder failing, say) the
    // indexer takes once the grace has passed.
    store
        .create_messages("w", "s", vec![message("a numbat ate".into())])
        .await
        .unwrap();
    assert_eq!(indexer.pass().await.unwrap(), 0);
    tokio::time::sleep(indexer.grace()).await;
    assert_eq!(indexer.pass().await.unwrap(), 1);
    assert_eq!(store.text_index_backlog().await.unwrap(), 0);
    assert_eq!(found(&**store, "numbat").await, 1);
    store.close().await;
    database.drop_database().await;
}

#[tokio::test]
async fn sqlite_indexes_as_it_writes_and_runs_no_text_indexer() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(None, dir.path(), EmbeddingProvider::None);
    let runtime = roncho::wiring::build(&config).await.unwrap();
    assert!(runtime.text_indexer.is_none());
    runtime
        .store
        .create_messages("w", "s", vec![message("a quokka smiled".into())])
        .await
        .unwrap();
    assert_eq!(found(&*runtime.store, "quokka").await, 1);
    assert_eq!(text_index_line(&config).await, None);
    runtime.store.close().await;
}
