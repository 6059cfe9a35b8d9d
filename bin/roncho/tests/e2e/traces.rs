//! One trace across processes, from each wire: a client's write of
//! messages (with a W3C `traceparent`) over gRPC, over REST and as an MCP
//! tool call reaches a `--roles ingest` process, whose work travels over
//! NATS to a `--roles deriver` process that calls a model and stores
//! conclusions. Both export spans over OTLP to a stand-in collector; the
//! batch delay is a minute, so spans arrive only because SIGTERM flushes
//! them. Each wire's spans must form one tree:
//! client → the call → store.create_messages → publish work →
//! process work → llm chat, store.create_conclusions.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use serde_json::Value;

use crate::processes;
use processes::{connect, free_address};

/// A span as the collector received it, with its process's service name.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    name: String,
    kind: i32,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
}

/// The stand-in OpenTelemetry collector: keeps every exported span.
#[derive(Debug, Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Received>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|resource| &resource.attributes)
                .find(|attribute| attribute.key == "service.name")
                .and_then(|attribute| match attribute.value.as_ref()?.value.as_ref()? {
                    any_value::Value::StringValue(name) => Some(name.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for span in resource_spans.scope_spans.into_iter().flat_map(|scope| scope.spans) {
                spans.push(Received {
                    service: service.clone(),
                    name: span.name,
                    kind: span.kind,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                });
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A model that states one fact per transcript line and records the
/// `traceparent` each request carried.
async fn completions(
    State(traceparents): State<Arc<Mutex<Vec<String>>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    if let Some(value) = headers.get("traceparent").and_then(|value| value.to_str().ok()) {
        traceparents.lock().unwrap().push(value.to_owned());
    }
    Json(processes::facts_reply(&body))
}

fn serve(roles: &str, listen: &str, rest: &str, env: &[(&str, &str)], log: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_roncho"))
        .args([
            "serve",
            "--roles",
            roles,
            "--listen",
            listen,
            "--rest-listen",
            rest,
            "--log",
            "info",
        ])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("starting a roncho process")
}

// The collector must answer while this test waits for the processes to exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_runs_from_each_wire_through_nats_to_the_deriver_and_its_store_writes() {
    let Some(nats_url) = roncho_store::testing::integration_env(roncho_store::testing::NATS_URL_VAR) else {
        return;
    };
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let collector = Collector::default();
    let collector_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector_url = format!("http://{}", collector_listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(collector_listener)),
    );
    let traceparents = Arc::new(Mutex::new(Vec::new()));
    let model = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(traceparents.clone());
    let llm_url = format!("{}/v1", roncho_http::serve_for_test(model).await);
    let prefix = roncho_store::testing::unique_name();
    let env = [
        ("RONCHO_DATABASE_URL", database.url.as_str()),
        ("RONCHO_NATS_URL", nats_url.as_str()),
        ("RONCHO_NATS_PREFIX", prefix.as_str()),
        ("RONCHO_NATS_PARTITIONS", "2"),
        ("RONCHO_EMBEDDING_PROVIDER", "none"),
        ("RONCHO_LLM_BASE_URL", llm_url.as_str()),
        ("RONCHO_LLM_MODEL", "scripted"),
        ("RONCHO_OTLP_ENDPOINT", collector_url.as_str()),
        // Spans leave the process only when it flushes at shutdown.
        ("OTEL_BSP_SCHEDULE_DELAY", "60000"),
    ];
    let logs = tempfile::tempdir().unwrap();
    let ingest_address = free_address();
    let rest_address = free_address();
    let mut ingest_process = serve(
        "ingest",
        &ingest_address,
        &rest_address,
        &env,
        &logs.path().join("ingest.log"),
    );
    let mut deriver_process = serve("deriver", "127.0.0.1:0", "off", &env, &logs.path().join("deriver.log"));

    // Each wire's caller has a span of its own: a trace id and span id, sampled.
    let wires = [
        Wire {
            name: "gRPC",
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
            client_span_id: "00f067aa0ba902b7",
            server_span: "roncho.v1.IngestService/CreateMessages",
        },
        Wire {
            name: "REST",
            trace_id: "5bf92f3577b34da6a3ce929d0e0e4737",
            client_span_id: "10f067aa0ba902b8",
            server_span: "POST /v3/workspaces/{workspace_id}/sessions/{session_id}/messages",
        },
        Wire {
            name: "MCP",
            trace_id: "6bf92f3577b34da6a3ce929d0e0e4738",
            client_span_id: "20f067aa0ba902b9",
            server_span: "tools/call add_messages_to_session",
        },
    ];
    let traceparent = |wire: &Wire| format!("00-{}-{}-01", wire.trace_id, wire.client_span_id);
    let facts = ["I keep bees on my roof.", "My hives are on the north side."];
    let mut ingest = IngestServiceClient::new(connect(&ingest_address).await);
    let mut request = tonic::Request::new(pb::CreateMessagesRequest {
        workspace_id: "w-grpc".into(),
        session_id: "s".into(),
        messages: facts
            .into_iter()
            .map(|content| pb::MessageCreate {
                peer_id: "alice".into(),
                content: content.into(),
                ..Default::default()
            })
            .collect(),
        idempotency_key: None,
    });
    request
        .metadata_mut()
        .insert("traceparent", traceparent(&wires[0]).parse().unwrap());
    ingest.create_messages(request).await.unwrap();

    let http = reqwest::Client::new();
    let rest = format!("http://{rest_address}");
    let post = |path: &str, body: Value, parent: Option<String>| {
        let mut request = http
            .post(format!("{rest}{path}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(parent) = parent {
            request = request.header("traceparent", parent);
        }
        async move {
            let reply = request.send().await.unwrap();
            let status = reply.status();
            let text = reply.text().await.unwrap();
            assert!(status.is_success(), "{status}: {text}");
            text
        }
    };
    let messages: Vec<Value> = facts
        .iter()
        .map(|content| serde_json::json!({"peer_id": "alice", "content": content}))
        .collect();
    post("/v3/workspaces", serde_json::json!({"id": "w-rest"}), None).await;
    post("/v3/workspaces/w-rest/sessions", serde_json::json!({"id": "s"}), None).await;
    post(
        "/v3/workspaces/w-rest/sessions/s/messages",
        serde_json::json!({"messages": messages}),
        Some(traceparent(&wires[1])),
    )
    .await;
    let added = post(
        "/mcp",
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "add_messages_to_session",
            "arguments": {"workspace_id": "w-mcp", "session_id": "s", "messages": messages}}}),
        Some(traceparent(&wires[2])),
    )
    .await;
    assert!(added.contains("Messages added to session successfully"), "{added}");

    // Wait for the derivation to finish: its conclusions are stored.
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let queue = roncho_store::SqlWorkQueue::new(store.clone());
    let started = Instant::now();
    loop {
        let counts = queue.totals().await.unwrap();
        if counts.total > 0 && counts.completed == counts.total {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the derivation did not finish: {counts:?}\n{}",
            std::fs::read_to_string(logs.path().join("deriver.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        collector.spans.lock().unwrap().is_empty(),
        "nothing is exported before the batch delay or a flush"
    );
    for process in [&mut deriver_process, &mut ingest_process] {
        let status = processes::terminate(process, Duration::from_secs(30)).await;
        assert!(status.success(), "exit status {status} after SIGTERM");
    }
    store.close().await;
    database.drop_database().await;

    // Shown when an assertion below fails.
    for name in ["ingest.log", "deriver.log"] {
        eprintln!(
            "== {name}\n{}",
            std::fs::read_to_string(logs.path().join(name)).unwrap_or_default()
        );
    }
    eprintln!("== every span received\n{:#?}", collector.spans.lock().unwrap());
    let received = collector.spans.lock().unwrap().clone();
    let sent = traceparents.lock().unwrap().clone();
    for wire in &wires {
        assert_one_trace(&received, wire, &sent);
    }
}

/// A wire's call in the test: the caller's trace and span, and the name of
/// the server's span for the call.
struct Wire {
    name: &'static str,
    trace_id: &'static str,
    client_span_id: &'static str,
    server_span: &'static str,
}

/// Asserts that `wire`'s trace runs from its caller through the ingest
/// process's write and NATS to the deriver's model call (whose request
/// carried it on, as `sent` shows) and its write.
fn assert_one_trace(received: &[Received], wire: &Wire, sent: &[String]) {
    let trace_id = wire.trace_id;
    let spans: Vec<Received> = received
        .iter()
        .filter(|span| span.trace_id == trace_id)
        .cloned()
        .collect();
    let by_id: HashMap<&str, &Received> = spans.iter().map(|span| (span.span_id.as_str(), span)).collect();
    let described = || {
        let spans = spans
            .iter()
            .map(|span| {
                format!(
                    "{} {} {} <- {}",
                    span.service, span.name, span.span_id, span.parent_span_id
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        format!("{}:\n{spans}", wire.name)
    };
    let find = |service: &str, name: &str, kind: SpanKind| {
        spans
            .iter()
            .find(|span| span.service == service && span.name == name && span.kind == kind as i32)
            .unwrap_or_else(|| panic!("no {kind:?} span {name} from {service} in the trace of {}", described()))
    };
    let descends_from = |span: &Received, ancestor: &Received| {
        let mut parent = span.parent_span_id.as_str();
        while let Some(above) = by_id.get(parent) {
            if above.span_id == ancestor.span_id {
                return true;
            }
            parent = above.parent_span_id.as_str();
        }
        false
    };
    let call = find("roncho-ingest", wire.server_span, SpanKind::Server);
    assert_eq!(
        call.parent_span_id,
        wire.client_span_id,
        "the call continues the caller's span: {}",
        described()
    );
    let write = find("roncho-ingest", "store.create_messages", SpanKind::Internal);
    assert!(descends_from(write, call), "{}", described());
    let publish = find("roncho-ingest", "publish work", SpanKind::Producer);
    assert_eq!(
        publish.parent_span_id,
        write.span_id,
        "the work was enqueued in the write: {}",
        described()
    );
    let process = find("roncho-deriver", "process work", SpanKind::Consumer);
    assert_eq!(
        process.parent_span_id,
        publish.span_id,
        "the deriver's work continues the context its NATS message carried: {}",
        described()
    );
    // Below the work: the model call and the conclusions' write.
    let llm = find("roncho-deriver", "chat", SpanKind::Client);
    assert!(descends_from(llm, process), "{}", described());
    let conclusions = find("roncho-deriver", "store.create_conclusions", SpanKind::Internal);
    assert!(descends_from(conclusions, process), "{}", described());
    // And the model's HTTP request carried the trace on, from the LLM span.
    assert!(sent.contains(&format!("00-{trace_id}-{}-01", llm.span_id)), "{sent:?}");
}
