//! Prometheus metrics: calls on every wire (gRPC, REST, MCP) by route and
//! status class with latency, queue depth by task type and state, vector
//! sync state, LLM calls and tokens by model; served over HTTP at /metrics.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use roncho::metrics::Metrics;
use roncho::observe::ObservedLlm;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// The value of the sample whose line starts with `series`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|line| line.starts_with(series))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

#[tokio::test]
async fn requests_queue_sync_and_llm_calls_are_measured_and_served() {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let metrics = Arc::new(Metrics::new());
    let dyn_store = store.clone();
    let rest = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let rest_address = rest.local_addr().unwrap();
    let mut services = roncho::server::Serving::store_only(dyn_store.clone());
    services.gate.metrics = Some(metrics.clone());
    services.listeners.rest = Some(roncho::server::RestEdge::Listener(Arc::new(rest)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    tokio::spawn(
        async move { roncho::server::run(Some(listener), services, &[roncho::config::Role::Ingest], token).await },
    );
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    // A made-up method: answered UNIMPLEMENTED, counted as `unknown`, its
    // name kept out of the labels.
    let mut raw = tonic::client::Grpc::new(channel.clone());
    raw.ready().await.unwrap();
    let made_up = raw
        .unary(
            tonic::Request::new(pb::ListPeersRequest::default()),
            http::uri::PathAndQuery::from_static("/roncho.v1.IngestService/MadeUpMethodName"),
            tonic_prost::ProstCodec::<pb::ListPeersRequest, pb::ListPeersResponse>::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(made_up.code(), tonic::Code::Unimplemented);
    let mut ingest = IngestServiceClient::new(channel);
    for _ in 0..2 {
        ingest
            .get_or_create_workspace(pb::GetOrCreateWorkspaceRequest {
                id: "w".into(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    ingest
        .get_or_create_workspace(pb::GetOrCreateWorkspaceRequest {
            id: "no spaces allowed".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages: vec![pb::MessageCreate {
                peer_id: "alice".into(),
                content: "I keep bees on my roof.".into(),
                ..Default::default()
            }],
            idempotency_key: None,
        })
        .await
        .unwrap();

    // REST: a workspace made, one refused for its id, and a path no route has.
    let http = reqwest::Client::new();
    let rest_url = format!("http://{rest_address}");
    for (body, expected) in [(r#"{"id":"w2"}"#, 201), (r#"{"id":"no spaces allowed"}"#, 422)] {
        let reply = http
            .post(format!("{rest_url}/v3/workspaces"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status().as_u16(), expected, "{body}");
    }
    // Paths no route has: counted under `unknown`, never under what the client sent.
    for path in ["/v3/no-such-route", "/v3/%2e%2e/admin/x/y/z", "/mcp/"] {
        let missing = http.get(format!("{rest_url}{path}")).send().await.unwrap();
        assert_eq!(missing.status().as_u16(), 404, "{path}");
    }
    // A web page of another origin, refused by the browser rules before the gate.
    for path in ["/v3/workspaces/list", "/mcp"] {
        let refused = http
            .post(format!("{rest_url}{path}"))
            .header("content-type", "application/json")
            .header("origin", "https://evil.example")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status().as_u16(), 403, "{path}");
    }
    // MCP over HTTP: a tool call, whose REST calls in process are its own.
    let mcp = |body: String| {
        let request = http
            .post(format!("{rest_url}/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        async move {
            let reply = request.send().await.unwrap();
            (reply.status().as_u16(), reply.text().await.unwrap())
        }
    };
    let (status, reply) = mcp(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "add_messages_to_session",
        "arguments": {"workspace_id": "w", "session_id": "s-mcp",
                      "messages": [{"peer_id": "alice", "content": "I moved to Lisbon."}]}}})
    .to_string())
    .await;
    assert_eq!(status, 200);
    assert!(reply.contains("Messages added to session successfully"), "{reply}");
    mcp(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "drop_every_table_42", "arguments": {}}})
    .to_string())
    .await;
    // JSON-RPC errors before any tool runs, answered 200 as successes are:
    // a method no server has, a tool call without its name, a method name
    // of 100 KB that the error echoes.
    for call in [
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/erase_everything", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "x".repeat(100_000), "params": {}}),
    ] {
        let call = call.to_string();
        let (status, reply) = mcp(call.clone()).await;
        assert!(
            status == 200 && reply.contains("\"error\""),
            "{}: {status} {reply:.200}",
            &call[..80.min(call.len())]
        );
        // The error's message does not echo the caller's text whole.
        assert!(reply.len() < 2_000, "{} bytes: {reply:.200}", reply.len());
    }
    // Bodies that are not one JSON-RPC message: malformed, a batch.
    for body in [
        r#"{"jsonrpc": "2.0", "id": 6, "meth"#,
        r#"[{"jsonrpc":"2.0","id":7,"method":"ping"}]"#,
    ] {
        let (status, reply) = mcp(body.to_owned()).await;
        assert_eq!(status, 400, "{body}");
        assert!(reply.contains("-32700"), "{body}");
    }
    // A body the client breaks off with a malformed chunk: its failure,
    // answered 400 and counted so, never the server's.
    let mut socket = tokio::net::TcpStream::connect(rest_address).await.unwrap();
    socket
        .write_all(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
              Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\n{\"jso\r\nZZ\r\n",
        )
        .await
        .unwrap();
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(10), socket.read_exact(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 400", "{}", String::from_utf8_lossy(&head));
    drop(socket);
    // A body declared longer than is ever read is refused at once (413),
    // not awaited until its deadline, on MCP and on REST.
    for path in ["/mcp", "/v3/workspaces"] {
        let mut socket = tokio::net::TcpStream::connect(rest_address).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 1000000000\r\n\r\n{{\"a\""
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        let mut status = [0u8; 12];
        tokio::time::timeout(Duration::from_secs(5), socket.read_exact(&mut status))
            .await
            .expect("refused at once")
            .unwrap();
        assert_eq!(&status, b"HTTP/1.1 413", "{path}: {}", String::from_utf8_lossy(&status));
    }

    // An LLM call through the metered wrapper.
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|Json(_): Json<Value>| async {
            Json(
                json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
                        "usage": {"prompt_tokens": 12, "completion_tokens": 3}}),
            )
        }),
    );
    let base = format!("{}/v1", roncho_http::serve_for_test(app).await);
    let llm = ObservedLlm::wrap(
        Arc::new(
            roncho_llm::openai::OpenAiChat::new(roncho_llm::openai::OpenAiChatConfig::new(&base, "scripted")).unwrap(),
        ),
        Some(metrics.clone()),
    );
    llm.chat(&roncho_llm::ChatRequest {
        messages: vec![roncho_llm::ChatMessage::new(roncho_llm::Role::User, "hello")],
        max_tokens: 10,
        ..Default::default()
    })
    .await
    .unwrap();

    // Served over HTTP, with the database gauges refreshed.
    let metrics_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_address = metrics_listener.local_addr().unwrap();
    tokio::spawn(roncho::metrics::serve(
        metrics_listener,
        roncho::server::Serving::store_only(store.clone()).gate.http_entrance(),
        metrics.clone(),
        dyn_store,
        Some(roncho_store::SqlWorkQueue::new(store.clone())),
        Duration::from_secs(60),
        shutdown.clone(),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let response = get_metrics(metrics_address).await;
    let text = response.split("\r\n\r\n").nth(1).unwrap_or_default();

    let ok = sample(
        text,
        "roncho_rpc_requests_total{rpc=\"roncho.v1.IngestService/GetOrCreateWorkspace\",code=\"Ok\"}",
    );
    assert_eq!(ok, Some(2.0), "{text}");
    assert!(!text.contains("MadeUpMethodName"), "{text}");
    assert_eq!(
        sample(
            text,
            "roncho_rpc_requests_total{rpc=\"unknown\",code=\"Unimplemented\"}"
        ),
        Some(1.0),
        "{text}"
    );
    let invalid = sample(
        text,
        "roncho_rpc_requests_total{rpc=\"roncho.v1.IngestService/GetOrCreateWorkspace\",code=\"InvalidArgument\"}",
    );
    assert_eq!(invalid, Some(1.0), "{text}");
    assert_eq!(
        sample(
            text,
            "roncho_rpc_duration_seconds_count{rpc=\"roncho.v1.IngestService/GetOrCreateWorkspace\"}"
        ),
        Some(3.0)
    );
    // The same calls in the family every wire shares.
    for (series, count) in [
        (
            "wire=\"grpc\",route=\"roncho.v1.IngestService/GetOrCreateWorkspace\",status=\"ok\"",
            2.0,
        ),
        (
            "wire=\"grpc\",route=\"roncho.v1.IngestService/GetOrCreateWorkspace\",status=\"client_error\"",
            1.0,
        ),
        ("wire=\"grpc\",route=\"unknown\",status=\"client_error\"", 1.0),
        ("wire=\"rest\",route=\"/v3/workspaces\",status=\"ok\"", 1.0),
        ("wire=\"rest\",route=\"/v3/workspaces\",status=\"client_error\"", 2.0),
        (
            "wire=\"mcp\",route=\"tools/call add_messages_to_session\",status=\"ok\"",
            1.0,
        ),
        ("wire=\"mcp\",route=\"tools/call unknown\",status=\"client_error\"", 1.0),
        (
            "wire=\"rest\",route=\"/v3/workspaces/list\",status=\"client_error\"",
            1.0,
        ),
        // The page refused by the browser rules, three JSON-RPC errors, two
        // bodies that are not one message, one broken off, one too long.
        ("wire=\"mcp\",route=\"/mcp\",status=\"client_error\"", 8.0),
        ("wire=\"rest\",route=\"unknown\",status=\"client_error\"", 3.0),
    ] {
        assert_eq!(
            sample(text, &format!("roncho_requests_total{{{series}}}")),
            Some(count),
            "{series}: {text}"
        );
    }
    assert_eq!(
        sample(
            text,
            "roncho_requests_total{wire=\"mcp\",route=\"/mcp\",status=\"server_error\"}"
        ),
        None,
        "no client's body is the server's failure: {text}"
    );
    assert_eq!(
        sample(
            text,
            "roncho_request_duration_seconds_count{wire=\"rest\",route=\"/v3/workspaces\"}"
        ),
        Some(3.0),
        "{text}"
    );
    assert!(!text.contains("drop_every_table_42"), "{text}");
    assert!(!text.contains("no-such-route") && !text.contains("admin"), "{text}");
    // The tool's own REST calls are counted once, as the tool call.
    assert!(
        !text.contains("wire=\"rest\",route=\"/v3/workspaces/{workspace_id}/sessions/{session_id}/messages\""),
        "{text}"
    );
    assert_eq!(
        sample(
            text,
            "roncho_queue_tasks{task_type=\"representation\",state=\"pending\"}"
        ),
        Some(2.0),
        "alice's messages (gRPC and MCP) wait for a deriver: {text}"
    );
    assert!(
        sample(
            text,
            "roncho_queue_oldest_pending_age_seconds{task_type=\"representation\"}"
        )
        .is_some()
    );
    assert_eq!(
        sample(text, "roncho_vector_sync_rows{kind=\"message\",state=\"pending\"}"),
        Some(2.0)
    );
    assert_eq!(
        sample(
            text,
            "roncho_llm_calls_total{model=\"openai-compatible/scripted\",outcome=\"ok\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            text,
            "roncho_llm_tokens_total{model=\"openai-compatible/scripted\",kind=\"input\"}"
        ),
        Some(12.0)
    );

    // And on the REST edge's port, as Honcho serves them on its API port.
    let over_rest = get_metrics(rest_address).await;
    assert!(
        over_rest.contains("roncho_llm_calls_total{model=\"openai-compatible/scripted\",outcome=\"ok\"} 1"),
        "{over_rest}"
    );
    shutdown.cancel();
}

/// `GET /metrics` at `address`; asserts a 200 and returns the whole response.
async fn get_metrics(address: std::net::SocketAddr) -> String {
    let mut connection = tokio::net::TcpStream::connect(address).await.unwrap();
    connection
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    connection.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}

#[tokio::test]
async fn with_keys_the_rest_ports_metrics_are_an_admin_keys_to_read() {
    use roncho_gate::keys::{Claims, KeySet};
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let keys = Arc::new(KeySet::new(&["a-secret-of-at-least-thirty-two-bytes!!"]).unwrap());
    let rest = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let rest_url = format!("http://{}", rest.local_addr().unwrap());
    let mut serving = roncho::server::Serving::store_only(store);
    serving.gate.metrics = Some(Arc::new(Metrics::new()));
    serving.gate.keys = Some(keys.clone());
    serving.listeners.rest = Some(roncho::server::RestEdge::Listener(Arc::new(rest)));
    let served = crate::support::serve(serving, &[roncho::config::Role::Ingest]).await;
    let key = |claims: Claims| keys.sign(&claims);
    let admin = key(Claims {
        ad: Some(true),
        ..Claims::default()
    });
    let workspace = key(Claims {
        w: Some("w".into()),
        ..Claims::default()
    });
    let peer = key(Claims {
        w: Some("w".into()),
        p: Some("alice".into()),
        ..Claims::default()
    });
    let http = reqwest::Client::new();
    let scrape = |key: Option<&str>| {
        let mut request = http.get(format!("{rest_url}/metrics"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        async move {
            let reply = request.send().await.unwrap();
            (reply.status().as_u16(), reply.text().await.unwrap())
        }
    };
    for (who, key, expected) in [
        ("no key", None, 401),
        ("a bad key", Some("not-a-jwt"), 401),
        ("a workspace key", Some(workspace.as_str()), 403),
        ("a peer key", Some(peer.as_str()), 403),
    ] {
        let (status, body) = scrape(key).await;
        assert_eq!(status, expected, "{who}: {body}");
        assert!(!body.contains("roncho_requests_total"), "{who}: {body}");
    }
    let (status, body) = scrape(Some(&admin)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("roncho_requests_total"), "{body}");
    served.shutdown.cancel();
}
