//! One trace across processes: a client's CreateMessages (with W3C
//! `traceparent` metadata) reaches a `--roles ingest` process, whose work
//! travels over NATS to a `--roles deriver` process that calls a model and
//! stores conclusions. Both export spans over OTLP to a stand-in collector;
//! the batch delay is a minute, so spans arrive only because SIGTERM
//! flushes them. The spans must form one tree:
//! client → CreateMessages → store.create_messages → publish work →
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

fn serve(roles: &str, listen: &str, env: &[(&str, &str)], log: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_roncho"))
        .args(["serve", "--roles", roles, "--listen", listen, "--log", "info"])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("starting a roncho process")
}

// The collector must answer while this test waits for the processes to exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_runs_from_create_messages_through_nats_to_the_deriver_and_its_store_writes() {
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
    let mut ingest_process = serve("ingest", &ingest_address, &env, &logs.path().join("ingest.log"));
    let mut deriver_process = serve("deriver", "127.0.0.1:0", &env, &logs.path().join("deriver.log"));

    // The caller's span: a trace id and span id of our own, sampled.
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span_id = "00f067aa0ba902b7";
    let mut ingest = IngestServiceClient::new(connect(&ingest_address).await);
    let mut request = tonic::Request::new(pb::CreateMessagesRequest {
        workspace_id: "w".into(),
        session_id: "s".into(),
        messages: ["I keep bees on my roof.", "My hives are on the north side."]
            .into_iter()
            .map(|content| pb::MessageCreate {
                peer_id: "alice".into(),
                content: content.into(),
                ..Default::default()
            })
            .collect(),
        idempotency_key: None,
    });
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-{client_span_id}-01").parse().unwrap(),
    );
    ingest.create_messages(request).await.unwrap();

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
    let spans: Vec<Received> = collector
        .spans
        .lock()
        .unwrap()
        .iter()
        .filter(|span| span.trace_id == trace_id)
        .cloned()
        .collect();
    let by_id: HashMap<&str, &Received> = spans.iter().map(|span| (span.span_id.as_str(), span)).collect();
    let described = || {
        spans
            .iter()
            .map(|span| {
                format!(
                    "{} {} {} <- {}",
                    span.service, span.name, span.span_id, span.parent_span_id
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let find = |service: &str, name: &str, kind: SpanKind| {
        spans
            .iter()
            .find(|span| span.service == service && span.name == name && span.kind == kind as i32)
            .unwrap_or_else(|| panic!("no {kind:?} span {name} from {service} in the trace:\n{}", described()))
    };
    let rpc = find(
        "roncho-ingest",
        "roncho.v1.IngestService/CreateMessages",
        SpanKind::Server,
    );
    assert_eq!(
        rpc.parent_span_id, client_span_id,
        "the RPC continues the caller's span"
    );
    let write = find("roncho-ingest", "store.create_messages", SpanKind::Internal);
    assert_eq!(write.parent_span_id, rpc.span_id);
    let publish = find("roncho-ingest", "publish work", SpanKind::Producer);
    assert_eq!(
        publish.parent_span_id, write.span_id,
        "the work was enqueued in the write"
    );
    let process = find("roncho-deriver", "process work", SpanKind::Consumer);
    assert_eq!(
        process.parent_span_id, publish.span_id,
        "the deriver's work continues the context its NATS message carried"
    );
    // Below the work: the model call and the conclusions' write.
    let descends_from_process = |span: &Received| {
        let mut parent = span.parent_span_id.as_str();
        while let Some(above) = by_id.get(parent) {
            if above.span_id == process.span_id {
                return true;
            }
            parent = above.parent_span_id.as_str();
        }
        false
    };
    let llm = find("roncho-deriver", "chat", SpanKind::Client);
    assert!(descends_from_process(llm), "{}", described());
    let conclusions = find("roncho-deriver", "store.create_conclusions", SpanKind::Internal);
    assert!(descends_from_process(conclusions), "{}", described());
    // And the model's HTTP request carried the trace on, from the LLM span.
    let sent = traceparents.lock().unwrap().clone();
    assert!(sent.contains(&format!("00-{trace_id}-{}-01", llm.span_id)), "{sent:?}");
}
