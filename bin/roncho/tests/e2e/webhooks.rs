//! Webhook delivery end to end: a receiver over real HTTP gets Honcho's
//! signed `queue.empty` once a work unit drains, and a `test.event`
//! (TestWebhook) reaches it on a retry after it was down; an endpoint that
//! stays down leaves a dead task whose error queue status shows.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use roncho::config::Role;
use roncho_core::queue::{StatusFilter, WorkQueue};
use roncho_deriver::webhooks::{LaneLimits, WebhookLane};
use roncho_deriver::worker::{Worker, WorkerConfig};
use roncho_proto::v1 as pb;
use roncho_proto::v1::deriver_service_client::DeriverServiceClient;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_webhook::WebhookSender;

use crate::support;

const SECRET: &str = "the-webhook-signing-secret";

/// What a receiver got: each request's signature header and body.
type Received = Arc<Mutex<Vec<(Option<String>, String)>>>;

/// Serves a receiver on `listener` that records every POST and answers 200.
fn receive(listener: tokio::net::TcpListener, received: Received) {
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let received = received.clone();
            async move {
                let signature = headers
                    .get("x-honcho-signature")
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned);
                received.lock().unwrap().push((signature, body));
                "ok"
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
}

/// Checks the signature independently of roncho's code: HMAC-SHA256 of the
/// exact body under the secret, hex.
fn signed(signature: Option<&str>, body: &str) -> bool {
    let Some(hex) = signature else { return false };
    let Some(bytes) = (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()
    else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET.as_bytes());
    ring::hmac::verify(&key, body.as_bytes(), &bytes).is_ok()
}

struct World {
    queue: Arc<dyn WorkQueue>,
    worker: Worker,
    lane: WebhookLane,
    served: support::Served,
    _dir: tempfile::TempDir,
}

async fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let mut services = roncho::server::Serving::store_only(store.clone());
    services.domain.queue = Some(queue.clone());
    // The receivers listen on loopback.
    services.domain.allow_private_webhooks = true;
    let served = support::serve(services, &Role::ALL).await;
    let config = WorkerConfig {
        retry_after: Duration::from_millis(50),
        max_attempts: 3,
        ..WorkerConfig::default()
    };
    let dyn_store = store.clone();
    let lane = WebhookLane::new(
        store.clone(),
        queue.clone(),
        Arc::new(WebhookSender::new(Some(SECRET), Duration::from_secs(5), true).unwrap()),
        config.clone(),
        LaneLimits::default(),
    );
    let worker = Worker::new(dyn_store, queue.clone(), config);
    World {
        queue,
        worker,
        lane,
        served,
        _dir: dir,
    }
}

impl World {
    async fn register(&self, url: &str) {
        IngestServiceClient::new(self.served.channel.clone())
            .create_webhook(pb::CreateWebhookRequest {
                workspace_id: "w".into(),
                url: url.into(),
            })
            .await
            .unwrap();
    }

    /// Runs the worker and the webhook lane until nothing is ready.
    async fn drain(&self) {
        while self.worker.run_once().await.unwrap() || self.lane.run_once().await.unwrap() {}
    }

    async fn status(&self) -> roncho_core::queue::QueueStatus {
        self.queue
            .status(&StatusFilter {
                workspace_id: "w".into(),
                ..Default::default()
            })
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn a_signed_queue_empty_arrives_once_each_unit_drains() {
    let world = world().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let received = Received::default();
    receive(listener, received.clone());
    world.register(&url).await;

    let mut ingest = IngestServiceClient::new(world.served.channel.clone());
    support::session_observed_by(&world.served.channel, "w", "s", "bob").await;
    let messages = (0..20)
        .map(|i| pb::MessageCreate {
            peer_id: ["alice", "bob"][i % 2].into(),
            content: format!("Turn {i}: we talked about the mountains at length."),
            ..Default::default()
        })
        .collect();
    ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages,
            idempotency_key: None,
        })
        .await
        .unwrap();
    world.drain().await;

    let events = received.lock().unwrap().clone();
    let mut units = Vec::new();
    for (signature, body) in &events {
        assert!(
            signed(signature.as_deref(), body),
            "signature {signature:?} over {body}"
        );
        let event: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(event["type"], "queue.empty", "{body}");
        assert!(
            body.starts_with(r#"{"data":{"observed":"#) && body.contains(r#""timestamp":"#),
            "compact, keys sorted: {body}"
        );
        let data = &event["data"];
        assert_eq!((&data["workspace_id"], &data["session_id"]), (&"w".into(), &"s".into()));
        units.push(format!("{}:{}", data["queue_type"], data["observed"]));
    }
    units.sort();
    let mut distinct = units.clone();
    distinct.dedup();
    assert_eq!(units, distinct, "one event per drained unit");
    assert!(
        units
            .iter()
            .any(|unit| unit.starts_with("\"representation\":\"alice\""))
            && units.iter().any(|unit| unit.starts_with("\"summary\":null")),
        "{units:?}"
    );
    let status = world.status().await;
    assert_eq!((status.counts.pending, status.counts.failed), (0, 0), "{status:?}");

    // Nothing new to drain: no new event.
    world.drain().await;
    assert_eq!(received.lock().unwrap().len(), events.len());
    world.served.shutdown.cancel();
}

#[tokio::test]
async fn a_receiver_that_was_down_gets_the_event_on_a_retry_and_one_that_stays_down_is_dead() {
    let world = world().await;
    // Addresses nobody listens on yet: connections are refused.
    let (later, never) = {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        (a.local_addr().unwrap(), b.local_addr().unwrap())
    };
    world.register(&format!("http://{later}/hook")).await;
    world.register(&format!("http://{never}/hook")).await;
    let queued = IngestServiceClient::new(world.served.channel.clone())
        .test_webhook(pb::TestWebhookRequest {
            workspace_id: "w".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(queued.endpoints, 2);

    // Both down: the first attempts fail and wait for a retry.
    world.drain().await;
    let status = world.status().await;
    assert_eq!((status.counts.pending, status.counts.failed), (2, 0), "{status:?}");

    // One comes up; the retry reaches it, the other runs out of attempts.
    let received = Received::default();
    receive(tokio::net::TcpListener::bind(later).await.unwrap(), received.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        world.drain().await;
        let status = world.status().await;
        if status.counts.pending == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "still pending: {status:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let events = received.lock().unwrap().clone();
    assert_eq!(events.len(), 1, "{events:?}");
    let (signature, body) = &events[0];
    assert!(signed(signature.as_deref(), body), "{body}");
    let event: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(event["type"], "test.event");
    assert_eq!(event["data"]["workspace_id"], "w");

    // The dead one, with its error, over the API.
    let status = DeriverServiceClient::new(world.served.channel.clone())
        .get_queue_status(pb::GetQueueStatusRequest {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.failures.len(), 1, "{status:?}");
    let failure = &status.failures[0];
    assert!(
        failure.last_error.contains("webhook test.event") && failure.last_error.contains("not delivered"),
        "{failure:?}"
    );
    assert_eq!((failure.task_type.as_str(), failure.attempts), ("webhook", 3));
    assert!(
        !failure.last_error.contains(&never.port().to_string()),
        "the URL stays out of the error: {failure:?}"
    );
    world.served.shutdown.cancel();
}
