//! The gRPC server end to end, in process: health, reflection-free calls
//! through the generated Rust client, error details, and graceful shutdown.

use roncho_core::store::{Memory, Messages};
use std::sync::Arc;

use roncho::config::Role;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use tokio_util::sync::CancellationToken;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt;

use crate::support;

struct Server {
    channel: tonic::transport::Channel,
    store: Arc<roncho_store::SqlStore>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    _dir: tempfile::TempDir,
}

async fn start(roles: &[Role]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = support::embedded_store(dir.path()).await;
    let served = store.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let roles = roles.to_vec();
    let token = shutdown.clone();
    let task = tokio::spawn(async move {
        let mut services = roncho::server::Serving::store_only(served.clone());
        services.domain.queue = Some(Arc::new(roncho_store::SqlWorkQueue::new(served.clone())));
        roncho::server::run(Some(listener), services, &roles, token).await
    });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    Server {
        channel,
        store,
        shutdown,
        task,
        _dir: dir,
    }
}

fn message(peer_id: &str, content: &str) -> pb::MessageCreate {
    pb::MessageCreate {
        peer_id: peer_id.into(),
        content: content.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn writes_reads_errors_and_shutdown() {
    let server = start(&Role::ALL).await;
    let mut health = HealthClient::new(server.channel.clone());
    let status = health
        .check(HealthCheckRequest {
            service: "roncho.v1.IngestService".into(),
        })
        .await
        .unwrap();
    assert_eq!(
        status.into_inner().status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    let mut ingest = IngestServiceClient::new(server.channel.clone());
    let mut recall = RecallServiceClient::new(server.channel.clone());
    let created = ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages: vec![message("alice", "hello world"), message("bob", "hi")],
            idempotency_key: None,
        })
        .await
        .unwrap()
        .into_inner()
        .messages;
    assert_eq!(
        created.iter().map(|m| m.token_count).collect::<Vec<_>>(),
        [2, 1],
        "o200k_base token counts"
    );

    let error = ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages: vec![message("alice", "fine"), message("bad id", "x")],
            idempotency_key: None,
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument);
    let bad_request = error.get_details_bad_request().expect("BadRequest details");
    assert_eq!(bad_request.field_violations[0].field, "messages[1].peer_id");

    let listed = recall
        .list_messages(pb::ListMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.total, 2, "the rejected batch wrote nothing");
    assert_eq!((listed.page, listed.size, listed.pages), (1, 50, 1));

    let missing = recall
        .get_message(pb::GetMessageRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            message_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
    let found = recall
        .search_messages(pb::SearchMessagesRequest {
            workspace_id: "w".into(),
            query: "Hello, world?".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        found.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["hello world"]
    );
    assert_eq!(found.mode, "full_text");
    assert!(!found.degraded_reason.is_empty(), "degraded search says so");
    let later = recall
        .query_conclusions(pb::QueryConclusionsRequest {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await;
    assert_eq!(
        later.unwrap_err().code(),
        tonic::Code::InvalidArgument,
        "a query without text or collection is refused"
    );

    server.shutdown.cancel();
    server.task.await.unwrap().unwrap();
}

/// The session allowlists (context `sessions`, `filters.session_id` of
/// QueryConclusions and Chat) take 1,000 ids; one more is INVALID_ARGUMENT
/// naming the field and the limit.
#[tokio::test]
async fn a_session_allowlist_just_over_its_bound_is_refused() {
    use roncho_proto::v1::dialectic_service_client::DialecticServiceClient;
    let server = start(&Role::ALL).await;
    let mut ingest = IngestServiceClient::new(server.channel.clone());
    ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages: vec![message("alice", "hello")],
            ..Default::default()
        })
        .await
        .unwrap();
    let limit = roncho_search::context::MAX_ALLOWLIST;
    let ids = |n: usize| -> Vec<String> {
        std::iter::once("s".to_owned())
            .chain((1..n).map(|i| format!("s{i}")))
            .collect()
    };
    let as_filter = |n: usize, collection: bool| {
        let mut filters = serde_json::json!({"session_id": ids(n)});
        if collection {
            filters["observer_id"] = "alice".into();
            filters["observed_id"] = "alice".into();
        }
        Some(roncho_api::json::json_to_struct(filters.as_object().unwrap()))
    };
    let assert_refused = |result: Result<tonic::Status, String>, field: &str| {
        let status = result.unwrap();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        let violation = &status
            .get_details_bad_request()
            .expect("BadRequest details")
            .field_violations[0];
        assert_eq!(violation.field, field, "{status:?}");
        assert!(violation.description.contains(&limit.to_string()), "{violation:?}");
    };
    let mut recall = RecallServiceClient::new(server.channel.clone());
    let context = |n: usize| pb::GetSessionContextRequest {
        workspace_id: "w".into(),
        session_id: "s".into(),
        peer_target: Some("alice".into()),
        sessions: ids(n),
        ..Default::default()
    };
    recall.get_session_context(context(limit)).await.unwrap();
    assert_refused(
        recall
            .get_session_context(context(limit + 1))
            .await
            .map(|_| ())
            .err()
            .ok_or_else(|| "accepted".to_owned()),
        "sessions",
    );
    let query = pb::QueryConclusionsRequest {
        workspace_id: "w".into(),
        query: "hello".into(),
        filters: as_filter(limit + 1, true),
        ..Default::default()
    };
    assert_refused(
        recall
            .query_conclusions(query)
            .await
            .map(|_| ())
            .err()
            .ok_or_else(|| "accepted".to_owned()),
        "filters.session_id",
    );
    let mut dialectic = DialecticServiceClient::new(server.channel.clone());
    let chat = |n: usize| pb::ChatRequest {
        workspace_id: "w".into(),
        peer_id: "alice".into(),
        query: "what did alice say?".into(),
        filters: as_filter(n, false),
        ..Default::default()
    };
    dialectic.chat(chat(limit)).await.unwrap();
    assert_refused(
        dialectic
            .chat(chat(limit + 1))
            .await
            .map(|_| ())
            .err()
            .ok_or_else(|| "accepted".to_owned()),
        "filters.session_id",
    );
    server.shutdown.cancel();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn only_the_chosen_roles_are_served() {
    let server = start(&[Role::Recall]).await;
    let mut ingest = IngestServiceClient::new(server.channel.clone());
    let error = ingest
        .get_or_create_workspace(pb::GetOrCreateWorkspaceRequest {
            id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        error.code(),
        tonic::Code::Unimplemented,
        "ingest is not mounted on a recall-only process"
    );
    let mut health = HealthClient::new(server.channel.clone());
    let unknown = health
        .check(HealthCheckRequest {
            service: "roncho.v1.IngestService".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    server.shutdown.cancel();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn reflection_lists_every_role_service() {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let server = start(&Role::ALL).await;
    let mut reflection = ServerReflectionClient::new(server.channel.clone());
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter(vec![request]))
        .await
        .unwrap()
        .into_inner();
    let response = responses.message().await.unwrap().expect("one response");
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection response {response:?}")
    };
    let names: Vec<String> = list.service.into_iter().map(|service| service.name).collect();
    for expected in [
        "roncho.v1.IngestService",
        "roncho.v1.RecallService",
        "roncho.v1.DialecticService",
        "roncho.v1.DeriverService",
        "roncho.v1.DreamerService",
        "grpc.health.v1.Health",
    ] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} missing from {names:?}"
        );
    }
    server.shutdown.cancel();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn summaries_are_served_and_bound_the_context() {
    use roncho_core::model::SummaryKind;

    let server = start(&Role::ALL).await;
    let mut ingest = IngestServiceClient::new(server.channel.clone());
    let mut recall = RecallServiceClient::new(server.channel.clone());
    let created = ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages: (0..6).map(|i| message("alice", &format!("turn number {i}"))).collect(),
            idempotency_key: None,
        })
        .await
        .unwrap()
        .into_inner()
        .messages;
    let summaries = || {
        let mut recall = recall.clone();
        async move {
            recall
                .get_session_summaries(pb::GetSessionSummariesRequest {
                    workspace_id: "w".into(),
                    session_id: "s".into(),
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let none = summaries().await;
    assert_eq!(
        (none.short_summary, none.long_summary),
        (None, None),
        "none written yet"
    );

    // The summariser's write, through the store.
    server
        .store
        .set_session_summary(
            "w",
            "s",
            SummaryKind::Short,
            "alice counted turns",
            &created[3].id,
            4,
            None,
        )
        .await
        .unwrap();
    let got = summaries().await;
    let short = got.short_summary.expect("short summary");
    assert_eq!(
        (
            short.content.as_str(),
            short.message_id.as_str(),
            short.summary_type.as_str()
        ),
        (
            "alice counted turns",
            created[3].id.as_str(),
            "honcho_chat_summary_short"
        )
    );
    assert!(got.long_summary.is_none());

    let context = |summary: Option<bool>| {
        let mut recall = recall.clone();
        async move {
            recall
                .get_session_context(pb::GetSessionContextRequest {
                    workspace_id: "w".into(),
                    session_id: "s".into(),
                    tokens: Some(1000),
                    summary,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
        }
    };
    let with = context(None).await;
    assert_eq!(with.summary.map(|s| s.content).as_deref(), Some("alice counted turns"));
    assert_eq!(
        with.messages.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        created[3..].iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
        "messages start at the summary's last message, repeated"
    );
    let without = context(Some(false)).await;
    assert!(without.summary.is_none());
    assert_eq!(without.messages.len(), 6);

    let missing = recall
        .get_session_summaries(pb::GetSessionSummariesRequest {
            workspace_id: "w".into(),
            session_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
    server.shutdown.cancel();
    server.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn queue_status_counts_the_work_messages_create() {
    use roncho_proto::v1::deriver_service_client::DeriverServiceClient;

    let server = start(&Role::ALL).await;
    let mut ingest = IngestServiceClient::new(server.channel.clone());
    let mut deriver = DeriverServiceClient::new(server.channel.clone());
    ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages: (0..20)
                .map(|i| message(["alice", "bob"][i % 2], "hello there"))
                .collect(),
            idempotency_key: None,
        })
        .await
        .unwrap();
    let status = deriver
        .get_queue_status(pb::GetQueueStatusRequest {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    // 20 representation tasks and a short summary at message 20; no worker yet.
    assert_eq!((status.total_work_units, status.pending_work_units), (21, 21));
    assert_eq!(status.sessions["s"].pending_work_units, 21);
    assert_eq!(
        (status.observation_mode(), status.summary_mode()),
        (pb::DerivationMode::Extractive, pb::DerivationMode::Extractive),
        "no LLM configured: said so, not hidden"
    );
    assert!(
        status.derivation_detail.contains("no LLM configured"),
        "{}",
        status.derivation_detail
    );
    let by_sender = deriver
        .get_queue_status(pb::GetQueueStatusRequest {
            workspace_id: "w".into(),
            sender_id: Some("bob".into()),
            session_id: Some("s".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        by_sender.total_work_units, 11,
        "bob's 10 messages and the summary his 20th triggered"
    );
    assert!(
        by_sender.sessions.is_empty(),
        "no per-session map under a session filter"
    );
    let bad = deriver
        .get_queue_status(pb::GetQueueStatusRequest {
            workspace_id: String::new(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    server.shutdown.cancel();
    server.task.await.unwrap().unwrap();
}

/// The embedded pipeline without an LLM: messages → queued work → the
/// extractive deriver → conclusions in each observer's collection and a
/// summary; a redelivered task adds nothing; the queue drains.
#[tokio::test]
async fn the_extractive_deriver_derives_observations_and_summaries() {
    use roncho_core::queue::{NewTask, WorkQueue};

    use roncho_deriver::worker::{Worker, WorkerConfig};
    use roncho_proto::v1::deriver_service_client::DeriverServiceClient;

    let server = start(&Role::ALL).await;
    let mut ingest = IngestServiceClient::new(server.channel.clone());
    let recall = RecallServiceClient::new(server.channel.clone());
    support::session_observed_by(&server.channel, "w", "s", "bob").await;
    // Alice says something new each time; Bob repeats himself.
    ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages: (0..20)
                .map(|i| match i % 2 {
                    0 => message("alice", &format!("I moved to Berlin in {}.", 2000 + i)),
                    _ => message("bob", "That sounds like a big change!"),
                })
                .collect(),
            idempotency_key: None,
        })
        .await
        .unwrap();
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(server.store.clone()));
    let store = server.store.clone();
    let worker = Worker::new(store, queue.clone(), WorkerConfig::default());
    while worker.run_once().await.unwrap() {}

    let conclusions = |observer: &str, observed: &str| {
        let mut recall = recall.clone();
        let filters = roncho_api::json::json_to_struct(
            serde_json::json!({"observer_id": observer, "observed_id": observed})
                .as_object()
                .unwrap(),
        );
        async move {
            recall
                .list_conclusions(pb::ListConclusionsRequest {
                    workspace_id: "w".into(),
                    filters: Some(filters),
                    size: 100,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner()
                .items
        }
    };
    let alice_by_alice = conclusions("alice", "alice").await;
    assert_eq!(alice_by_alice.len(), 10, "one per message: {alice_by_alice:?}");
    assert!(
        alice_by_alice
            .iter()
            .any(|c| c.content == "alice said: \"I moved to Berlin in 2000.\""),
        "{alice_by_alice:?}"
    );
    assert_eq!(conclusions("bob", "alice").await.len(), 10, "bob observes others");
    let bob_by_bob = conclusions("bob", "bob").await;
    let stored = server
        .store
        .conclusions_by_ids("w", &[bob_by_bob[0].id.clone()])
        .await
        .unwrap();
    assert_eq!(
        (bob_by_bob.len(), stored[0].times_derived),
        (1, 10),
        "a repeated statement is one fact derived ten times"
    );
    assert!(
        conclusions("alice", "bob").await.is_empty(),
        "alice does not observe others"
    );

    let summaries = recall
        .clone()
        .get_session_summaries(pb::GetSessionSummariesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let short = summaries.short_summary.expect("a short summary at message 20");
    assert!(
        short.content.starts_with("Extractive summary (no LLM configured)"),
        "{}",
        short.content
    );
    assert!(short.content.contains("bob: That sounds like a big change!"));

    // A redelivered task (same message, new delivery) adds no duplicates.
    let first = &alice_by_alice[0];
    let source = server
        .store
        .conclusions_by_ids("w", std::slice::from_ref(&first.id))
        .await
        .unwrap()
        .remove(0)
        .source_ids
        .remove(0);
    queue
        .enqueue(vec![NewTask {
            work_unit_key: "representation:w:s:alice".into(),
            dedup_id: "redelivery-1".into(),
            workspace_id: "w".into(),
            session_id: Some("s".into()),
            observer_id: None,
            sender_id: Some("alice".into()),
            payload: serde_json::json!({"message_id": source, "observers": ["alice", "bob"], "observed": "alice"}),
            items: 1,
        }])
        .await
        .unwrap();
    while worker.run_once().await.unwrap() {}
    assert_eq!(conclusions("alice", "alice").await.len(), 10);

    let status = DeriverServiceClient::new(server.channel.clone())
        .get_queue_status(pb::GetQueueStatusRequest {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            status.total_work_units,
            status.completed_work_units,
            status.pending_work_units
        ),
        (22, 22, 0),
        "drained"
    );
    server.shutdown.cancel();
    server.task.await.unwrap().unwrap();
}
