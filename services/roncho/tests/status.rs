//! `roncho status` reports the work queue: pending work and failures.

use roncho::config::{Config, ConfigLayer, EmbeddingProvider};
use roncho_core::model::{JsonObject, NewMessage};
use roncho_core::store::Store;

#[tokio::test]
async fn status_counts_queued_work() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ConfigLayer {
        data_dir: Some(dir.path().to_owned()),
        embedding_provider: Some(EmbeddingProvider::None),
        ..ConfigLayer::default()
    };
    let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), flags).unwrap();
    let store = roncho_store::connect(&config.store_options()).await.unwrap();
    roncho_store::migrate(&store).await.unwrap();
    let messages = (0..3)
        .map(|i| NewMessage {
            peer_id: "alice".into(),
            content: format!("message {i}"),
            metadata: JsonObject::new(),
            configuration: JsonObject::new(),
            created_at: None,
            token_count: 2,
        })
        .collect();
    store.create_messages("w", "s", messages).await.unwrap();
    store.close().await;

    let checks = roncho::status::checks(&config).await;
    let queue = checks
        .iter()
        .find(|check| check.name == "work queue")
        .expect("a work queue line");
    assert!(queue.ok, "{queue:?}");
    assert_eq!(queue.detail, "3 pending, 0 in progress, 0 completed, 0 failed");
}
