//! The `VectorStore` contract suite against the Qdrant adapter over the real
//! Qdrant (`RONCHO_TEST_QDRANT_URL`, e.g. `http://127.0.0.1:6334`;
//! scripts/test.sh starts it; required under RONCHO_REQUIRE_INTEGRATION=1).
//! The in-process stand-in serves only the tests of faults: a second model
//! with another size, an outage, an unreachable server.

use std::time::{SystemTime, UNIX_EPOCH};

use roncho_core::Error;
use roncho_core::vector::contract::Check;
use roncho_core::vector::{VectorFilter, VectorRecord, VectorStore};
use roncho_qdrant::standin::StandIn;
use roncho_qdrant::{QdrantOptions, QdrantVectorStore};

fn options(url: String) -> QdrantOptions {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    QdrantOptions {
        collection: format!("roncho_test_{}_{nanos}", std::process::id()),
        ..QdrantOptions::new(url)
    }
}

async fn on_real_qdrant(check: Check) {
    let Some(url) = std::env::var("RONCHO_TEST_QDRANT_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        assert!(
            std::env::var("RONCHO_REQUIRE_INTEGRATION").as_deref() != Ok("1"),
            "RONCHO_TEST_QDRANT_URL is not set and RONCHO_REQUIRE_INTEGRATION=1: the contract must run on the real Qdrant"
        );
        eprintln!("RONCHO_TEST_QDRANT_URL is not set: skipping the real-Qdrant run");
        return;
    };
    let vectors = QdrantVectorStore::connect(&options(url)).unwrap();
    check(&vectors).await;
    vectors.drop_collection().await.unwrap();
}

roncho_core::vector_store_contract!(real_qdrant, super::on_real_qdrant);

fn record(id: &str, vector: Vec<f32>) -> VectorRecord {
    VectorRecord {
        id: id.into(),
        vector,
        session_id: None,
        peer_id: None,
        level: None,
    }
}

#[tokio::test]
async fn a_second_process_with_another_model_is_refused() {
    let standin = StandIn::start().await.unwrap();
    let options = options(standin.url());
    let first = QdrantVectorStore::connect(&options).unwrap();
    first.check_dimensions(384, "local/all-MiniLM-L6-v2").await.unwrap();
    first
        .upsert("msg/ws", vec![record("m1", vec![1.0; 384])])
        .await
        .unwrap();

    let second = QdrantVectorStore::connect(&options).unwrap();
    let error = second
        .check_dimensions(768, "openai-compatible/nomic")
        .await
        .unwrap_err();
    match &error {
        Error::FailedPrecondition(message) => {
            assert!(message.contains("384") && message.contains("768"), "{message}");
            assert!(
                message.contains("all-MiniLM-L6-v2"),
                "names the stored model: {message}"
            );
        }
        other => panic!("expected FailedPrecondition, got {other:?}"),
    }
    let wrong = second
        .upsert("msg/ws", vec![record("m2", vec![1.0; 768])])
        .await
        .unwrap_err();
    assert!(matches!(wrong, Error::FailedPrecondition(_)), "{wrong:?}");
    assert_eq!(standin.point_count(&options.collection), 1);
    standin.stop().await;
}

#[tokio::test]
async fn an_outage_is_unavailable_and_passes() {
    let standin = StandIn::start().await.unwrap();
    let vectors = QdrantVectorStore::connect(&options(standin.url())).unwrap();
    vectors.check_dimensions(2, "test").await.unwrap();
    assert!(vectors.health().await.unwrap().contains("standin"));

    standin.set_down(true);
    let error = vectors
        .upsert("ns", vec![record("a", vec![1.0, 0.0])])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
    let error = vectors
        .query("ns", &[1.0, 0.0], 5, &VectorFilter::default(), None)
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");

    standin.set_down(false);
    vectors.upsert("ns", vec![record("a", vec![1.0, 0.0])]).await.unwrap();
    let hits = vectors
        .query("ns", &[1.0, 0.0], 5, &VectorFilter::default(), None)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert!(hits[0].distance.abs() < 1e-6);
    standin.stop().await;
}

#[tokio::test]
async fn an_unreachable_qdrant_is_unavailable() {
    let standin = StandIn::start().await.unwrap();
    let url = standin.url();
    standin.stop().await;
    let vectors = QdrantVectorStore::connect(&options(url)).unwrap();
    let error = vectors.check_dimensions(3, "test").await.unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
}
