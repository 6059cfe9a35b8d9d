//! The distributed vector store as configured by `qdrant_url`, against the
//! real Qdrant (`RONCHO_TEST_QDRANT_URL`; scripts/test.sh starts it): start-up
//! stops on an embedder whose size differs from the collection's, and
//! `roncho status` reports Qdrant, degraded when it cannot be reached (a
//! relay the test cuts).

use roncho::config::{Config, ConfigLayer, EmbeddingProvider};

use crate::processes;
use crate::support;

fn config(data_dir: &std::path::Path, qdrant_url: String, collection: &str, dimensions: usize) -> Config {
    let mut flags = ConfigLayer::default();
    flags.store.data_dir = Some(data_dir.to_owned());
    flags.search.qdrant_url = Some(qdrant_url);
    flags.search.qdrant_collection = Some(collection.to_owned());
    flags.search.embedding_provider = Some(EmbeddingProvider::TestHashing);
    flags.search.embedding_dimensions = Some(dimensions);
    Config::resolve(ConfigLayer::default(), ConfigLayer::default(), flags).unwrap()
}

#[tokio::test]
async fn start_up_checks_the_collection_size_and_status_reports_qdrant() {
    let Some(qdrant_url) = roncho_store::testing::integration_env(roncho_store::testing::QDRANT_URL_VAR) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let relay = support::Relay::start(
        qdrant_url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned(),
    )
    .await;
    let url = format!("http://{}", relay.address);
    let collection = format!("startup_{}", roncho_store::testing::unique_name());

    let first = config(dir.path(), url.clone(), &collection, 64);
    let runtime = roncho::wiring::build(&first).await.unwrap();
    assert!(
        runtime.embedder_description.contains("qdrant"),
        "{}",
        runtime.embedder_description
    );
    runtime.store.close().await;

    let error = roncho::wiring::build(&config(dir.path(), url.clone(), &collection, 32))
        .await
        .expect_err("another size must stop start-up");
    let message = format!("{error:#}");
    assert!(message.contains("64") && message.contains("32"), "{message}");

    let checks = roncho::status::checks(&first).await;
    let vector_store = checks.iter().find(|check| check.name == "vector store").unwrap();
    assert!(
        vector_store.ok && vector_store.detail.contains("qdrant 1.") && vector_store.detail.contains(&collection),
        "{vector_store:?}"
    );

    relay.set_up(false);
    let checks = roncho::status::checks(&first).await;
    let vector_store = checks.iter().find(|check| check.name == "vector store").unwrap();
    assert!(
        !vector_store.ok && vector_store.detail.contains("degraded"),
        "{vector_store:?}"
    );
    relay.set_up(true);
    let mut options = roncho_qdrant::QdrantOptions::new(qdrant_url);
    options.collection = collection;
    roncho_qdrant::QdrantVectorStore::connect(&options)
        .unwrap()
        .drop_collection()
        .await
        .unwrap();
}

/// Separate processes over Postgres and the real Qdrant: an `ingest,recall`
/// process takes the writes and searches, a `reconciler` process embeds
/// them into Qdrant; search becomes hybrid over what the other process
/// synced, and a delete leaves Qdrant once the reconciler applies it (the
/// receipt's `vectors_pending` reaches 0).
#[tokio::test]
async fn an_ingest_process_and_a_reconciler_process_keep_qdrant_in_step() {
    use roncho_proto::v1 as pb;
    use roncho_proto::v1::ingest_service_client::IngestServiceClient;
    use roncho_proto::v1::recall_service_client::RecallServiceClient;
    use std::time::{Duration, Instant};

    let Some((database, qdrant_url)) = support::postgres_and_qdrant().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let collection = format!("processes_{}", roncho_store::testing::unique_name());
    let spawn = |roles: &str, listen: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_roncho"))
            .args(["serve", "--roles", roles, "--listen", listen, "--log", "warn"])
            .env("RONCHO_DATABASE_URL", &database.url)
            .env("RONCHO_QDRANT_URL", &qdrant_url)
            .env("RONCHO_QDRANT_COLLECTION", &collection)
            .env("RONCHO_EMBEDDING_PROVIDER", "test-hashing")
            .env("RONCHO_EMBEDDING_DIMENSIONS", "64")
            .env("RONCHO_RECONCILER_INTERVAL_MS", "200")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join(format!("{roles}.log"))).unwrap())
            .spawn()
            .expect("starting a roncho process")
    };
    let front = processes::free_address();
    let mut serving = spawn("ingest,recall", &front);
    let channel = processes::connect(&front).await;
    let mut reconciling = spawn("reconciler", &processes::free_address());
    let (mut ingest, mut recall) = (
        IngestServiceClient::new(channel.clone()),
        RecallServiceClient::new(channel.clone()),
    );
    let texts = [
        "I drink espresso every morning",
        "We hiked the ridge trail on Sunday",
        "My sister plays the cello",
        "The bakery on Elm street closed",
        "Tax forms are due in April",
    ];
    let created = support::write_as(&channel, "alice", &texts).await;
    let mut options = roncho_qdrant::QdrantOptions::new(qdrant_url.clone());
    options.collection = collection.clone();
    let qdrant = roncho_qdrant::QdrantVectorStore::connect(&options).unwrap();
    let in_qdrant = |want: usize| {
        let qdrant = &qdrant;
        async move {
            let started = Instant::now();
            loop {
                let points = qdrant.scroll("msg/w").await.unwrap_or_default();
                if points.len() == want {
                    return points;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "{} points, want {want}",
                    points.len()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    in_qdrant(texts.len()).await;

    let found = recall
        .search_messages(pb::SearchMessagesRequest {
            workspace_id: "w".into(),
            query: "espresso morning".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(found.mode, "hybrid", "{found:?}");
    assert_eq!(found.messages[0].id, created[0].id, "{found:?}");

    let receipt = ingest
        .delete_message(pb::DeleteMessageRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            message_id: created[0].id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .receipt
        .unwrap();
    let started = Instant::now();
    loop {
        let now = recall
            .get_erasure_receipt(pb::GetErasureReceiptRequest {
                workspace_id: "w".into(),
                receipt_id: receipt.id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        if now.vectors_pending == 0 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The next turn is embedded again without the erased one: still 4 points.
    let points = in_qdrant(texts.len() - 1).await;
    assert!(
        points.iter().all(|(id, _)| *id != created[0].id),
        "the erased message's point is gone"
    );

    for process in [&mut serving, &mut reconciling] {
        assert!(processes::terminate(process, Duration::from_secs(10)).await.success());
    }
    qdrant.drop_collection().await.unwrap();
    database.drop_database().await;
}
