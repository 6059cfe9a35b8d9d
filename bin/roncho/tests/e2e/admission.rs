//! Admission control end to end: a server at its limit of requests in
//! flight sheds the excess at once with a retry delay (health checks still
//! answer), and a workspace over its rate is refused before anything is
//! written.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use roncho::config::Role;
use roncho_gate::admission::{Admission, Limits};
use roncho_gate::rate::{RateClass, RateLimiter};
use roncho_proto::v1 as pb;
use roncho_proto::v1::dialectic_service_client::DialecticServiceClient;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;

use crate::support;

/// A model speaking the OpenAI chat format that takes `delay` to answer.
async fn slow_model(delay: Duration) -> Arc<dyn roncho_llm::Llm> {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |Json(_): Json<Value>| async move {
            tokio::time::sleep(delay).await;
            Json(json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "Alice likes tea."}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 5}
            }))
        }),
    );
    let base = format!("{}/v1", roncho_http::serve_for_test(app).await);
    let mut config = roncho_llm::openai::OpenAiChatConfig::new(&base, "slow");
    config.retry.max_retries = 0;
    Arc::new(roncho_llm::openai::OpenAiChat::new(config).unwrap())
}

struct Server {
    channel: tonic::transport::Channel,
    address: std::net::SocketAddr,
    metrics: Arc<roncho::metrics::Metrics>,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

async fn start(limits: Limits, rates: RateLimiter) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let llm = slow_model(Duration::from_millis(1500)).await;
    let mut dialectic = roncho_dialectic::Dialectic::new(store.clone(), None);
    for level in roncho_dialectic::agent::Level::ALL {
        dialectic = dialectic.with_model(level, llm.clone(), 100);
    }
    let admission = Admission::new(limits);
    let rates = Arc::new(rates);
    let metrics = Arc::new(roncho::metrics::Metrics::new());
    metrics.watch_admission(admission.stats(), rates.clone());
    let mut services = roncho::server::Serving::store_only(store);
    services.domain.dialectic = Some(dialectic);
    services.gate.admission = admission;
    services.gate.rates = rates;
    services.gate.metrics = Some(metrics.clone());
    let support::Served {
        channel,
        address,
        shutdown,
    } = support::serve(services, &Role::ALL).await;
    Server {
        channel,
        address,
        metrics,
        shutdown,
        _dir: dir,
    }
}

fn chat() -> pb::ChatRequest {
    pb::ChatRequest {
        workspace_id: "w".into(),
        peer_id: "alice".into(),
        query: "what does alice like?".into(),
        ..Default::default()
    }
}

async fn seed_alice(channel: &tonic::transport::Channel) {
    IngestServiceClient::new(channel.clone())
        .get_or_create_peer(pb::GetOrCreatePeerRequest {
            workspace_id: "w".into(),
            id: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_server_at_its_limit_sheds_the_excess_with_a_retry_delay() {
    let limits = Limits {
        max_in_flight: 2,
        max_in_flight_per_connection: 8,
        ..Limits::default()
    };
    let server = start(limits, RateLimiter::default()).await;
    seed_alice(&server.channel).await;
    // Two slow answers take both places.
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let mut client = DialecticServiceClient::new(server.channel.clone());
            tokio::spawn(async move { client.chat(chat()).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let shed = RecallServiceClient::new(server.channel.clone())
        .list_peers(pb::ListPeersRequest {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(shed.code(), Code::ResourceExhausted, "{shed:?}");
    let retry = shed.get_details_retry_info().expect("a retry delay");
    assert!(retry.retry_delay.is_some_and(|delay| delay > Duration::ZERO));
    // Probes are never shed.
    HealthClient::new(server.channel.clone())
        .check(HealthCheckRequest { service: String::new() })
        .await
        .unwrap();
    for call in busy {
        call.await.unwrap().expect("the admitted calls finish");
    }
    assert!(
        server
            .metrics
            .encode()
            .contains("roncho_requests_shed_total{reason=\"process\"} 1"),
        "{}",
        server.metrics.encode()
    );
    // With the places free again, the same call is served.
    RecallServiceClient::new(server.channel.clone())
        .list_peers(pb::ListPeersRequest {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    server.shutdown.cancel();
}

#[tokio::test]
async fn one_connection_cannot_take_every_place() {
    let limits = Limits {
        max_in_flight: 100,
        max_in_flight_per_connection: 1,
        ..Limits::default()
    };
    let server = start(limits, RateLimiter::default()).await;
    seed_alice(&server.channel).await;
    let mut greedy = DialecticServiceClient::new(server.channel.clone());
    let held = tokio::spawn(async move { greedy.chat(chat()).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let status = DialecticServiceClient::new(server.channel.clone())
        .chat(chat())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("connection"), "{status:?}");
    // Another connection still gets in meanwhile.
    let other = tonic::transport::Endpoint::from_shared(format!("http://{}", server.address))
        .unwrap()
        .connect()
        .await
        .unwrap();
    RecallServiceClient::new(other)
        .list_peers(pb::ListPeersRequest {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    held.await.unwrap().unwrap();
    server.shutdown.cancel();
}

#[tokio::test]
async fn a_workspace_over_its_rate_is_refused_before_anything_is_written() {
    let rates = RateLimiter::new([(RateClass::Messages, 5), (RateClass::Chat, 2)]);
    let server = start(Limits::default(), rates).await;
    seed_alice(&server.channel).await;
    let mut ingest = IngestServiceClient::new(server.channel.clone());
    let batch = |count: usize, tag: &str| pb::CreateMessagesRequest {
        workspace_id: "w".into(),
        session_id: "s".into(),
        messages: (0..count)
            .map(|index| pb::MessageCreate {
                peer_id: "alice".into(),
                content: format!("{tag} {index}"),
                ..Default::default()
            })
            .collect(),
        idempotency_key: None,
    };
    ingest.create_messages(batch(3, "first")).await.unwrap();
    let status = ingest.create_messages(batch(3, "second")).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let retry = status
        .get_details_retry_info()
        .expect("a retry delay")
        .retry_delay
        .unwrap();
    // One message's worth is missing: 5 per minute refill one every 12 s.
    assert!(
        retry > Duration::from_secs(5) && retry <= Duration::from_secs(12),
        "{retry:?}"
    );
    let listed = RecallServiceClient::new(server.channel.clone())
        .list_messages(pb::ListMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let contents: Vec<&str> = listed.items.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(
        contents,
        ["first 0", "first 1", "first 2"],
        "nothing of the refused batch"
    );
    // Another workspace has its own bucket.
    let mut elsewhere = batch(3, "elsewhere");
    elsewhere.workspace_id = "other".into();
    ingest.create_messages(elsewhere).await.unwrap();

    let mut dialectic = DialecticServiceClient::new(server.channel.clone());
    dialectic.chat(chat()).await.unwrap();
    dialectic.chat(chat()).await.unwrap();
    let status = dialectic.chat(chat()).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("chat"), "{status:?}");
    let text = server.metrics.encode();
    assert!(
        text.contains("roncho_rate_limited_total{limit=\"messages\"} 1"),
        "{text}"
    );
    assert!(text.contains("roncho_rate_limited_total{limit=\"chat\"} 1"), "{text}");
    server.shutdown.cancel();
}
