//! Readiness follows the store: a Postgres outage turns the `readiness`
//! health service (and the role services) NOT_SERVING while `liveness`
//! stays SERVING, so Kubernetes stops routing to the pod without
//! restarting it; when the database is back the pod is ready again. A
//! process consuming work from NATS also follows its NATS connection.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tonic_health::ServingStatus;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::support;

async fn status(client: &mut HealthClient<tonic::transport::Channel>, service: &str) -> i32 {
    client
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status
}

/// Polls until `service` reports `wanted`, failing after 20 s.
async fn wait_for(client: &mut HealthClient<tonic::transport::Channel>, service: &str, wanted: ServingStatus) {
    let started = Instant::now();
    while status(client, service).await != wanted as i32 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{service} never became {wanted:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Serves `role` on a loopback port with readiness checked every 200 ms;
/// returns a health client, the shutdown token and the server task.
async fn serve(
    services: roncho::server::Serving,
    role: roncho::config::Role,
) -> (
    HealthClient<tonic::transport::Channel>,
    CancellationToken,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let mut services = services;
    services.readiness.interval = Duration::from_millis(200);
    let server = tokio::spawn(async move { roncho::server::run(Some(listener), services, &[role], token).await });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    (HealthClient::new(channel), shutdown, server)
}

#[tokio::test]
async fn a_database_outage_makes_the_process_unready_not_dead() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let (mut health, shutdown, server) = serve(
        roncho::server::Serving::store_only(store.clone()),
        roncho::config::Role::Recall,
    )
    .await;
    let recall = "roncho.v1.RecallService";
    for service in ["", "readiness", "liveness", recall] {
        assert_eq!(
            status(&mut health, service).await,
            ServingStatus::Serving as i32,
            "{service}"
        );
    }

    database.set_available(false).await;
    wait_for(&mut health, "readiness", ServingStatus::NotServing).await;
    for service in ["", recall] {
        assert_eq!(
            status(&mut health, service).await,
            ServingStatus::NotServing as i32,
            "{service}"
        );
    }
    assert_eq!(
        status(&mut health, "liveness").await,
        ServingStatus::Serving as i32,
        "alive: a restart would not bring the database back"
    );

    database.set_available(true).await;
    wait_for(&mut health, "readiness", ServingStatus::Serving).await;
    assert_eq!(status(&mut health, recall).await, ServingStatus::Serving as i32);

    shutdown.cancel();
    server.await.unwrap().unwrap();
    store.close().await;
    database.drop_database().await;
}

#[tokio::test]
async fn a_process_started_before_its_database_waits_for_it() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    database.set_available(false).await;
    let address = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().to_string()
    };
    let logs = tempfile::tempdir().unwrap();
    let mut process = std::process::Command::new(env!("CARGO_BIN_EXE_roncho"))
        .args(["serve", "--roles", "recall", "--listen", &address])
        .env("RONCHO_DATABASE_URL", &database.url)
        .env("RONCHO_EMBEDDING_PROVIDER", "none")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(logs.path().join("recall.log")).unwrap())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        process.try_wait().unwrap().is_none(),
        "still waiting, not crashed: {}",
        std::fs::read_to_string(logs.path().join("recall.log")).unwrap_or_default()
    );
    database.set_available(true).await;
    let started = Instant::now();
    let mut health = loop {
        if let Ok(channel) = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .unwrap()
            .connect()
            .await
        {
            break HealthClient::new(channel);
        }
        assert!(started.elapsed() < Duration::from_secs(30), "never came up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status(&mut health, "readiness").await, ServingStatus::Serving as i32);
    let log = std::fs::read_to_string(logs.path().join("recall.log")).unwrap_or_default();
    assert!(log.contains("not reachable yet; retrying"), "{log}");
    process.kill().ok();
    process.wait().ok();
    database.drop_database().await;
}

#[tokio::test]
async fn a_deriver_that_loses_nats_is_unready_until_it_reconnects() {
    let Some(nats_url) = roncho_store::testing::integration_env(roncho_store::testing::NATS_URL_VAR) else {
        return;
    };
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let relay = support::Relay::start(nats_url.trim_start_matches("nats://").to_owned()).await;
    let mut options = roncho_nats::NatsOptions::new(format!("nats://{}", relay.address));
    options.prefix = roncho_store::testing::unique_name();
    options.consume = vec!["representation".into(), "summary".into()];
    let queue = roncho_nats::NatsWorkQueue::connect(
        options,
        std::sync::Arc::new(roncho_store::SqlWorkQueue::new(store.clone())),
    )
    .await
    .unwrap();
    let mut services = roncho::server::Serving::store_only(store.clone());
    services.readiness.dependencies = vec![roncho::server::Dependency::nats(queue.clone())];
    let (mut health, shutdown, server) = serve(services, roncho::config::Role::Deriver).await;
    assert_eq!(status(&mut health, "readiness").await, ServingStatus::Serving as i32);

    relay.set_up(false);
    wait_for(&mut health, "readiness", ServingStatus::NotServing).await;
    assert_eq!(status(&mut health, "liveness").await, ServingStatus::Serving as i32);
    relay.set_up(true);
    wait_for(&mut health, "readiness", ServingStatus::Serving).await;

    shutdown.cancel();
    server.await.unwrap().unwrap();
    queue.delete_streams().await.unwrap();
    roncho_core::queue::WorkQueue::close(&queue).await;
    store.close().await;
    database.drop_database().await;
}
