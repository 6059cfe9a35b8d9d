//! The distributed vector store as configured by `qdrant_url`: `roncho
//! status` reports Qdrant, and start-up stops on an embedder whose size
//! differs from the collection's (Qdrant is the local stand-in).

use roncho::config::{Config, ConfigLayer, EmbeddingProvider};
use roncho_qdrant::standin::StandIn;

fn config(data_dir: &std::path::Path, qdrant_url: String, dimensions: usize) -> Config {
    let flags = ConfigLayer {
        data_dir: Some(data_dir.to_owned()),
        qdrant_url: Some(qdrant_url),
        embedding_provider: Some(EmbeddingProvider::TestHashing),
        embedding_dimensions: Some(dimensions),
        ..ConfigLayer::default()
    };
    Config::resolve(ConfigLayer::default(), ConfigLayer::default(), flags).unwrap()
}

#[tokio::test]
async fn start_up_checks_the_collection_size_and_status_reports_qdrant() {
    let dir = tempfile::tempdir().unwrap();
    let qdrant = StandIn::start().await.unwrap();

    let first = config(dir.path(), qdrant.url(), 64);
    let runtime = roncho::wiring::build(&first).await.unwrap();
    assert!(
        runtime.embedder_description.contains("qdrant"),
        "{}",
        runtime.embedder_description
    );
    runtime.store.close().await;

    let error = roncho::wiring::build(&config(dir.path(), qdrant.url(), 32))
        .await
        .expect_err("another size must stop start-up");
    let message = format!("{error:#}");
    assert!(message.contains("64") && message.contains("32"), "{message}");

    let checks = roncho::status::checks(&first).await;
    let vector_store = checks.iter().find(|check| check.name == "vector store").unwrap();
    assert!(
        vector_store.ok && vector_store.detail.contains("standin"),
        "{vector_store:?}"
    );

    qdrant.set_down(true);
    let checks = roncho::status::checks(&first).await;
    let vector_store = checks.iter().find(|check| check.name == "vector store").unwrap();
    assert!(
        !vector_store.ok && vector_store.detail.contains("degraded"),
        "{vector_store:?}"
    );
    qdrant.stop().await;
}
