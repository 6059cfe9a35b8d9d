//! The fast parts of the attack suite (loadtests/run-attack.sh runs the
//! rest against a release build): malformed protobuf on every RPC, webhook
//! spellings of loopback, half-open connections on each listener, slow
//! bodies from one workspace while another works, and a retry after an
//! erasure.

use std::sync::Arc;
use std::time::Duration;

use roncho::config::Role;
use roncho::connections::{ConnectionAdmission, ConnectionLimits};
use roncho_gate::admission::{Admission, Limits};
use roncho_gate::keys::{Claims, KeySet};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::Code;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

use crate::support;

const SECRET: &str = "attack-test-secret-of-at-least-thirty-two-bytes";

/// A codec that sends and receives raw bytes: a client that sends what it likes.
#[derive(Debug, Clone, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;

    fn encoder(&mut self) -> Self::Encoder {
        Raw
    }

    fn decoder(&mut self) -> Self::Decoder {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(&mut self, item: Vec<u8>, buf: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        use bytes::BufMut;
        buf.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        use bytes::Buf;
        Ok(Some(buf.copy_to_bytes(buf.remaining()).to_vec()))
    }
}

/// Calls `path` with `body` as the request's bytes; returns the status code.
async fn raw_call(channel: &tonic::transport::Channel, path: &str, body: Vec<u8>) -> Code {
    let mut client = tonic::client::Grpc::new(channel.clone());
    client.ready().await.unwrap();
    let path = http::uri::PathAndQuery::try_from(path).unwrap();
    match client.unary(tonic::Request::new(body), path, Raw).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

fn varint(mut value: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn varint_len(value: usize) -> usize {
    let mut out = Vec::new();
    varint(value, &mut out);
    out.len()
}

/// GetOrCreateWorkspaceRequest { id: "w", metadata: a Struct nested `depth`
/// levels deep ({"a": {"a": ...}}) }, written outside in from the lengths
/// computed inside out (no recursion, no quadratic copying).
fn nested_struct_request(depth: usize) -> Vec<u8> {
    // Per level: Struct{fields: [Entry{key: "a", value: Value{struct_value: inner}}]}.
    let mut structs = vec![0usize];
    let mut headers = Vec::with_capacity(depth);
    for level in 0..depth {
        let inner = structs[level];
        let value = 1 + varint_len(inner) + inner;
        let entry = 3 + 1 + varint_len(value) + value;
        structs.push(1 + varint_len(entry) + entry);
        headers.push((entry, value, inner));
    }
    let mut out = vec![0x0a, 0x01, b'w', 0x12];
    varint(structs[depth], &mut out);
    for &(entry, value, inner) in headers.iter().rev() {
        out.push(0x0a);
        varint(entry, &mut out);
        out.extend_from_slice(&[0x0a, 0x01, b'a', 0x12]);
        varint(value, &mut out);
        out.push(0x2a);
        varint(inner, &mut out);
    }
    out
}

/// Every unary and server-streaming RPC of roncho.v1, as `/package.Service/Method`.
fn every_rpc() -> Vec<String> {
    use prost::Message;
    let set = prost_types::FileDescriptorSet::decode(roncho_proto::FILE_DESCRIPTOR_SET).unwrap();
    let mut paths = Vec::new();
    for file in set.file {
        for service in &file.service {
            for method in &service.method {
                if method.client_streaming() {
                    continue;
                }
                paths.push(format!("/{}.{}/{}", file.package(), service.name(), method.name()));
            }
        }
    }
    paths
}

#[tokio::test]
async fn malformed_protobuf_is_invalid_argument_on_every_rpc() {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let served = support::serve(roncho::server::Serving::store_only(store), &Role::ALL).await;

    let deep = nested_struct_request(20_000);
    assert_eq!(
        raw_call(&served.channel, "/roncho.v1.IngestService/GetOrCreateWorkspace", deep).await,
        Code::InvalidArgument,
        "a Struct nested 20,000 levels"
    );
    let shallow = nested_struct_request(3);
    assert_eq!(
        raw_call(
            &served.channel,
            "/roncho.v1.IngestService/GetOrCreateWorkspace",
            shallow
        )
        .await,
        Code::Ok,
        "the same encoding, three levels deep, is a valid request"
    );
    let rpcs = every_rpc();
    assert!(rpcs.len() > 40, "{rpcs:?}");
    let mut wrong = Vec::new();
    for rpc in &rpcs {
        // Field 1 said to be 5 bytes long, 1 sent; bytes that are not UTF-8
        // in a string; a field number 0 (invalid).
        for (what, body) in [
            ("truncated", vec![0x0a, 0x05, b'a']),
            ("bad UTF-8", vec![0x0a, 0x02, 0xff, 0xfe]),
            ("field 0", vec![0x02, 0x00]),
        ] {
            let code = raw_call(&served.channel, rpc, body).await;
            // Bad UTF-8 only fails where field 1 is a string.
            if code != Code::InvalidArgument && !(what == "bad UTF-8" && code != Code::Internal) {
                wrong.push(format!("{rpc} {what}: {code:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "not INVALID_ARGUMENT: {wrong:#?}");
    served.shutdown.cancel();
}

#[tokio::test]
async fn no_webhook_spelling_of_loopback_is_accepted() {
    use roncho_proto::v1 as pb;
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let served = support::serve(roncho::server::Serving::store_only(store), &Role::ALL).await;
    let mut ingest = pb::ingest_service_client::IngestServiceClient::new(served.channel.clone());
    let mut accepted = Vec::new();
    for spelling in roncho_core::validate::LOOPBACK_WEBHOOK_SPELLINGS {
        let url = spelling.replace("{port}", "9");
        let created = ingest
            .create_webhook(pb::CreateWebhookRequest {
                workspace_id: "w".into(),
                url: url.clone(),
            })
            .await;
        match created {
            Err(status) if status.code() == Code::InvalidArgument => {}
            other => accepted.push(format!("{url:?}: {other:?}")),
        }
    }
    assert!(accepted.is_empty(), "accepted: {accepted:#?}");
    served.shutdown.cancel();
}

/// A server with keys, a REST listener and short limits.
struct Guarded {
    served: support::Served,
    rest: std::net::SocketAddr,
    gate: ConnectionAdmission,
    admission: Admission,
    keys: Arc<KeySet>,
    _dir: tempfile::TempDir,
}

async fn guarded_server(limits: Limits, connections: ConnectionLimits) -> Guarded {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let rest = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = rest.local_addr().unwrap();
    let keys = Arc::new(KeySet::new(&[SECRET]).unwrap());
    let admission = Admission::new(limits);
    let gate = ConnectionAdmission::new(connections).watching(admission.clone());
    let mut services = roncho::server::Serving::store_only(store);
    services.listeners.rest = Some(roncho::server::RestEdge::Listener(Arc::new(rest)));
    services.gate.keys = Some(keys.clone());
    services.gate.admission = admission.clone();
    services.gate.connections = gate.clone();
    let served = support::serve(services, &Role::ALL).await;
    Guarded {
        served,
        rest: address,
        gate,
        admission,
        keys,
        _dir: dir,
    }
}

impl Guarded {
    fn key(&self, workspace: Option<&str>) -> String {
        self.keys.sign(&Claims {
            ad: workspace.is_none().then_some(true),
            w: workspace.map(str::to_owned),
            ..Claims::default()
        })
    }

    /// `method path` with a JSON body and a key; the status and reply.
    async fn send(&self, method: reqwest::Method, path: &str, body: Value, key: &str) -> (u16, Value) {
        let response = reqwest::Client::new()
            .request(method, format!("http://{}{path}", self.rest))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn health(&self) -> u16 {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        match client.get(format!("http://{}/health", self.rest)).send().await {
            Ok(response) => response.status().as_u16(),
            Err(_) => 0,
        }
    }
}

/// Opens a connection from `source` (a loopback address of its own) to `to`.
async fn connect_from(source: &str, to: std::net::SocketAddr) -> std::io::Result<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(format!("{source}:0").parse().unwrap())?;
    socket.connect(to).await
}

/// Whether the server closed `stream` within `wait` (EOF, a reset, or a reply then EOF).
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn half_open_connections_are_closed_and_leave_the_server_answering() {
    // The flood fills the process's every place.
    let server = guarded_server(
        Limits::default(),
        ConnectionLimits {
            max_open: 300,
            max_per_address: 300,
            header_timeout: Duration::from_secs(3),
            handshake_timeout: Duration::from_secs(3),
        },
    )
    .await;
    let admin = server.key(None);
    let (status, _) = server
        .send(reqwest::Method::POST, "/v3/workspaces", json!({"id": "w"}), &admin)
        .await;
    assert!(matches!(status, 200 | 201), "{status}");
    // From another address than the checks': half a request head on REST,
    // nothing and half a preface on gRPC.
    let mut flood = Vec::new();
    for index in 0..300 {
        let (to, bytes): (_, &[u8]) = match index % 3 {
            0 => (
                server.rest,
                b"POST /v3/workspaces HTTP/1.1\r\nHost: roncho\r\nContent-Ty",
            ),
            1 => (server.served.address, b""),
            _ => (server.served.address, b"PRI * HTTP/2.0\r\n"),
        };
        let mut stream = connect_from("127.0.0.2", to).await.unwrap();
        stream.write_all(bytes).await.unwrap();
        flood.push(stream);
    }
    let stats = server.gate.stats();
    for _ in 0..100 {
        if stats.open() >= 300 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stats.open(), 300, "the flood holds every place");
    let evicted_before = stats.evicted();
    // Everyone else is served meanwhile, on every listener: each new
    // connection takes the place of a silent one.
    assert_eq!(server.health().await, 200);
    let (status, _) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/w/sessions/list",
            json!({}),
            &server.key(Some("w")),
        )
        .await;
    assert_eq!(status, 200);
    let mut health = tonic_health::pb::health_client::HealthClient::new(server.served.channel.clone());
    health
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .unwrap();
    // (A check that closed gives its place to the next: at least one took a silent one's.)
    assert!(stats.evicted() > evicted_before, "{} evicted", stats.evicted());
    assert_eq!((stats.refused_process(), stats.refused_address()), (0, 0));
    // Every half-open connection is closed within the timeouts.
    let mut open = 0;
    for stream in &mut flood {
        if !closed_within(stream, Duration::from_secs(5)).await {
            open += 1;
        }
    }
    assert_eq!(open, 0, "half-open connections still open");
    drop(flood);
    assert!(
        stats.timed_out() + stats.evicted() >= 200,
        "gRPC's silent connections: {} timed out, {} evicted",
        stats.timed_out(),
        stats.evicted()
    );
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(stats.open() <= 2, "{} connections still counted", stats.open());
    server.served.shutdown.cancel();
}

#[tokio::test]
async fn one_workspace_sending_slow_bodies_leaves_the_others_served() {
    let server = guarded_server(
        Limits {
            max_in_flight_per_workspace: 8,
            body_timeout: Duration::from_secs(2),
            ..Limits::default()
        },
        ConnectionLimits::default(),
    )
    .await;
    let admin = server.key(None);
    for workspace in ["loud", "quiet"] {
        let (status, _) = server
            .send(
                reqwest::Method::POST,
                "/v3/workspaces",
                json!({"id": workspace}),
                &admin,
            )
            .await;
        assert!(matches!(status, 200 | 201), "{status}");
    }
    let (loud, quiet) = (server.key(Some("loud")), server.key(Some("quiet")));
    // 40 requests whose bodies never finish, with the loud workspace's key.
    let mut slow = Vec::new();
    for _ in 0..40 {
        let mut stream = TcpStream::connect(server.rest).await.unwrap();
        let head = format!(
            "POST /v3/workspaces/loud/sessions/list HTTP/1.1\r\nHost: roncho\r\nAuthorization: Bearer {loud}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        slow.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let list = |key: String, workspace: &'static str| {
        let server = &server;
        async move {
            server
                .send(
                    reqwest::Method::POST,
                    &format!("/v3/workspaces/{workspace}/sessions/list"),
                    json!({}),
                    &key,
                )
                .await
                .0
        }
    };
    assert_eq!(list(quiet.clone(), "quiet").await, 200, "another workspace is served");
    assert_eq!(
        list(loud.clone(), "loud").await,
        429,
        "the flooding workspace is at its limit"
    );
    // Its bodies time out after 2 s: 408, and its places come back.
    let mut timed_out = 0;
    for stream in &mut slow {
        let mut reply = vec![0u8; 512];
        let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut reply)).await;
        if let Ok(Ok(n)) = read
            && String::from_utf8_lossy(&reply[..n]).starts_with("HTTP/1.1 408")
        {
            timed_out += 1;
        }
    }
    assert_eq!(timed_out, 8, "the admitted slow bodies end 408 at the body timeout");
    assert_eq!(list(loud, "loud").await, 200, "served again once its bodies timed out");
    assert_eq!(list(quiet, "quiet").await, 200);
    server.served.shutdown.cancel();
}

#[tokio::test]
async fn a_retry_after_an_erasure_writes_nothing() {
    let server = guarded_server(Limits::default(), ConnectionLimits::default()).await;
    let admin = server.key(None);
    for (path, body) in [
        ("/v3/workspaces", json!({"id": "w"})),
        ("/v3/workspaces/w/sessions", json!({"id": "s"})),
    ] {
        let (status, _) = server.send(reqwest::Method::POST, path, body, &admin).await;
        assert!(matches!(status, 200 | 201), "{path}: {status}");
    }
    let batch = json!({"messages": [
        {"peer_id": "alice", "content": "my locker code is 4417"},
        {"peer_id": "alice", "content": "see you at the gym"},
    ]});
    let post = || {
        reqwest::Client::new()
            .post(format!("http://{}/v3/workspaces/w/sessions/s/messages", server.rest))
            .bearer_auth(&admin)
            .header("Idempotency-Key", "batch-1")
            .json(&batch)
            .send()
    };
    let first: Vec<Value> = post().await.unwrap().json().await.unwrap();
    assert_eq!(first.len(), 2);
    let secret = first[0]["id"].as_str().unwrap();
    let erased = reqwest::Client::new()
        .delete(format!(
            "http://{}/v3/workspaces/w/sessions/s/messages/{secret}",
            server.rest
        ))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert!(erased.status().is_success(), "{}", erased.status());
    let again = post().await.unwrap();
    assert!(again.status().is_success(), "{}", again.status());
    let again: Vec<Value> = again.json().await.unwrap();
    assert_eq!(again.len(), 1, "what is left: {again:?}");
    assert_eq!(again[0]["content"], "see you at the gym");
    let (_, page) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/w/sessions/s/messages/list",
            json!({}),
            &admin,
        )
        .await;
    let contents: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        ["see you at the gym"],
        "the session is as the erasure left it"
    );
    server.served.shutdown.cancel();
}

#[tokio::test]
async fn every_stage_of_a_connection_is_closed_within_its_timeout_whatever_bytes_arrived() {
    let server = guarded_server(
        Limits {
            body_timeout: Duration::from_secs(2),
            ..Limits::default()
        },
        ConnectionLimits {
            header_timeout: Duration::from_secs(2),
            handshake_timeout: Duration::from_secs(2),
            ..ConnectionLimits::default()
        },
    )
    .await;
    // HTTP/2's opening (the preface, then a SETTINGS frame with one
    // setting), stopped at every kind of offset, on gRPC and on REST.
    let mut opening = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    opening.extend([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100]);
    let mut stalled: Vec<(String, TcpStream)> = Vec::new();
    for offset in [1, 3, 12, 16, 23, 24, 25, 30, 32, 33, 36, 38] {
        for (listener, to) in [("gRPC", server.served.address), ("REST", server.rest)] {
            let mut stream = connect_from("127.0.0.3", to).await.unwrap();
            stream.write_all(&opening[..offset]).await.unwrap();
            stalled.push((format!("{listener} after {offset} bytes of HTTP/2's opening"), stream));
        }
    }
    // An HTTP/1 head cut short, and whole heads whose bodies never come:
    // on REST, and on /mcp (a peer key is enough to get that far).
    let key = server.key(Some("w"));
    let heads = [
        "POST /v3/workspaces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le".to_owned(),
        format!(
            "POST /v3/workspaces/w/sessions/s/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\
             Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{{\"messages\": ["
        ),
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{{\"jsonrpc\""
        ),
        format!(
            "POST /mcp/memory HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\
             Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{\"jso\r\n"
        ),
    ];
    for head in heads {
        let mut stream = connect_from("127.0.0.3", server.rest).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        stalled.push((head.lines().next().unwrap().to_owned(), stream));
    }
    let started = std::time::Instant::now();
    for (what, stream) in &mut stalled {
        assert!(
            closed_within(stream, Duration::from_secs(6)).await,
            "{what}: still open"
        );
    }
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "closed for another reason"
    );
    // What a body that stopped is told, on MCP as on REST: a time-out.
    let mut stream = connect_from("127.0.0.3", server.rest).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(6), stream.read_to_end(&mut reply)).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    // A client that finishes its stages is served meanwhile and after.
    assert_eq!(server.health().await, 200);
    server.served.shutdown.cancel();
}

#[tokio::test]
async fn unauthenticated_health_watch_streams_are_bounded_per_connection_address_and_process() {
    let limits = Limits::default();
    let server = guarded_server(limits, ConnectionLimits::default()).await;
    let stats = server.admission.stats();
    // 24 connections from one address, each asking for 40 Watch streams:
    // 960 asked, at most 16 a connection and 256 for the address live.
    let mut channels = Vec::new();
    for _ in 0..24 {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.served.address))
            .unwrap()
            .connect()
            .await
            .unwrap();
        channels.push(channel);
    }
    let mut live = Vec::new();
    let (mut refused, mut other) = (0, Vec::new());
    for channel in &channels {
        for _ in 0..40 {
            let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
            match health.watch(tonic_health::pb::HealthCheckRequest::default()).await {
                Ok(stream) => {
                    let mut stream = stream.into_inner();
                    match stream.message().await {
                        Ok(Some(_)) => live.push(stream),
                        Ok(None) => other.push("ended".to_owned()),
                        Err(status) if status.code() == Code::ResourceExhausted => refused += 1,
                        Err(status) => other.push(format!("{status:?}")),
                    }
                }
                Err(status) if status.code() == Code::ResourceExhausted => refused += 1,
                Err(status) => other.push(format!("{status:?}")),
            }
        }
    }
    assert!(other.is_empty(), "{other:?}");
    assert_eq!(live.len(), limits.max_open_calls_per_address, "{refused} refused");
    assert_eq!(live.len() + refused, 24 * 40);
    assert_eq!(stats.open_in_flight(), live.len());
    // Requests keep their own places meanwhile, and probes from elsewhere theirs.
    let (status, _) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces",
            json!({"id": "w"}),
            &server.key(None),
        )
        .await;
    assert!(matches!(status, 200 | 201), "{status}");
    // Closed streams give their places back.
    drop(live);
    drop(channels);
    for _ in 0..100 {
        if stats.open_in_flight() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stats.open_in_flight(), 0);
    server.served.shutdown.cancel();
}

/// An HTTP/2 frame: its header (length, type, flags, stream) and payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut bytes = vec![length[1], length[2], length[3], kind, flags];
    bytes.extend(stream.to_be_bytes());
    bytes.extend(payload);
    bytes
}

/// An HPACK integer with an `n`-bit prefix.
fn hpack_integer(value: usize, prefix_bits: u32, first: u8, out: &mut Vec<u8>) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(first | u8::try_from(value).unwrap());
        return;
    }
    out.push(first | u8::try_from(max).unwrap());
    let mut rest = value - max;
    while rest >= 128 {
        out.push(u8::try_from(rest % 128).unwrap() | 0x80);
        rest /= 128;
    }
    out.push(u8::try_from(rest).unwrap());
}

/// A header block of literal fields, none indexed.
fn hpack(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in headers {
        block.push(0);
        hpack_integer(name.len(), 7, 0, &mut block);
        block.extend(name.as_bytes());
        hpack_integer(value.len(), 7, 0, &mut block);
        block.extend(value.as_bytes());
    }
    block
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[tokio::test]
async fn http2_connections_that_never_ask_and_idle_ones_hold_no_place() {
    let server = guarded_server(
        Limits::default(),
        ConnectionLimits {
            max_open: 60,
            max_per_address: 60,
            handshake_timeout: Duration::from_secs(2),
            ..ConnectionLimits::default()
        },
    )
    .await;
    // Connections that speak HTTP/2 and keep speaking (SETTINGS, PINGs)
    // but never ask for anything, as a pool's connections opened ahead of
    // time do: past the handshake timeout they wait, first in line to make
    // room.
    let mut talkers = Vec::new();
    for index in 0..20 {
        let to = if index % 2 == 0 {
            server.served.address
        } else {
            server.rest
        };
        let mut stream = connect_from("127.0.0.5", to).await.unwrap();
        let mut opening = PREFACE.to_vec();
        opening.extend(frame(0x4, 0, 0, &[]));
        stream.write_all(&opening).await.unwrap();
        talkers.push(stream);
    }
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        for stream in &mut talkers {
            let _ = stream.write_all(&frame(0x6, 0, 0, &[0; 8])).await;
        }
    }
    let stats = server.gate.stats();
    assert_eq!(
        stats.timed_out(),
        0,
        "a settled connection is not cut for taking its time"
    );
    // Clients that ask once and keep their connection, idle.
    let address = server.served.address;
    let client = || async move {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .unwrap()
            .connect()
            .await
            .ok()?;
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        health
            .check(tonic_health::pb::HealthCheckRequest::default())
            .await
            .ok()
            .map(|_| channel)
    };
    // They fill every other place.
    let mut idle = Vec::new();
    for _ in 0..40 {
        idle.extend(client().await);
    }
    assert!(stats.open() >= 59, "{} open", stats.open());
    // New clients at the cap: those that never asked make room first ...
    for index in 0..20 {
        idle.push(
            client()
                .await
                .unwrap_or_else(|| panic!("new client {index} at the cap")),
        );
    }
    let mut closed = 0;
    for stream in &mut talkers {
        if closed_within(stream, Duration::from_secs(3)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, 20, "connections that never asked made room first");
    // ... then, past the grace, those that asked once and went quiet.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let evicted_before = stats.evicted();
    for index in 0..10 {
        idle.push(
            client()
                .await
                .unwrap_or_else(|| panic!("new client {index} at the cap, all idle")),
        );
    }
    assert!(stats.evicted() >= evicted_before + 10, "idle connections made room");
    server.served.shutdown.cancel();
}

#[tokio::test]
async fn connections_kept_busy_with_frames_and_refused_calls_make_room_before_a_clients_pool() {
    let server = guarded_server(
        Limits::default(),
        ConnectionLimits {
            max_open: 30,
            max_per_address: 30,
            ..ConnectionLimits::default()
        },
    )
    .await;
    let admin = server.key(None);
    // A client's pooled connection: one request with its key, then idle.
    let keyed = |host: String| {
        format!(
            "POST /v3/workspaces/list HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {admin}\r\n\
             Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
        )
    };
    let ask = |mut stream: TcpStream, request: String| async move {
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.unwrap();
        let mut rest = [0u8; 4096];
        let _ = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut rest)).await;
        (stream, String::from_utf8_lossy(&head[9..12]).into_owned())
    };
    let (pooled, status) = ask(
        connect_from("127.0.0.1", server.rest).await.unwrap(),
        keyed(server.rest.to_string()),
    )
    .await;
    assert_eq!(status, "200");
    // The flood: every other place, from one address, each connection
    // asking once without a key (refused) and then sending PINGs and
    // WINDOW_UPDATEs, so that it is never silent.
    let authority = server.rest.to_string();
    let refused = hpack(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/v3/workspaces/list"),
        (":authority", &authority),
        ("content-type", "application/json"),
    ]);
    let mut flood = Vec::new();
    for _ in 0..29 {
        let mut stream = connect_from("127.0.0.7", server.rest).await.unwrap();
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(0x4, 0, 0, &[]));
        bytes.extend(frame(0x1, 0x4 | 0x1, 1, &refused));
        stream.write_all(&bytes).await.unwrap();
        flood.push(stream);
    }
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        for stream in &mut flood {
            let _ = stream.write_all(&frame(0x6, 0, 0, &[0; 8])).await;
            let _ = stream.write_all(&frame(0x8, 0, 0, &[0, 0, 1, 0])).await;
        }
    }
    assert!(server.gate.stats().open() >= 30, "{} open", server.gate.stats().open());
    // Newcomers from other addresses, each keeping its connection: served,
    // in the flood's places, and the client's pool keeps its own.
    let mut newcomers = Vec::new();
    for index in 0..10 {
        let stream = connect_from(&format!("127.0.0.{}", 20 + index), server.rest)
            .await
            .unwrap();
        let (stream, status) = ask(stream, keyed(server.rest.to_string())).await;
        assert_eq!(status, "200", "newcomer {index} at the cap");
        newcomers.push(stream);
    }
    let mut closed = 0;
    for stream in &mut flood {
        if closed_within(stream, Duration::from_millis(200)).await {
            closed += 1;
        }
    }
    assert!(closed >= 10, "only {closed} of the flood's connections made room");
    let (_, status) = ask(pooled, keyed(server.rest.to_string())).await;
    assert_eq!(status, "200", "the client's pooled connection was closed for the flood");
    server.served.shutdown.cancel();
}

#[tokio::test]
async fn a_client_that_stops_reading_replies_gives_its_places_back_at_the_deadline() {
    let server = guarded_server(
        Limits {
            request_timeout: Duration::from_secs(2),
            ..Limits::default()
        },
        ConnectionLimits::default(),
    )
    .await;
    let admin = server.key(None);
    let stats = server.admission.stats();
    // HTTP/2 on the REST port with a window of zero: replies are produced
    // and never sent, 100 of them on one connection.
    let mut stream = connect_from("127.0.0.6", server.rest).await.unwrap();
    let mut bytes = PREFACE.to_vec();
    bytes.extend(frame(0x4, 0, 0, &[0, 4, 0, 0, 0, 0]));
    let authorization = format!("Bearer {admin}");
    let authority = server.rest.to_string();
    for index in 0..100u32 {
        let block = hpack(&[
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/v3/workspaces/list"),
            (":authority", &authority),
            ("content-type", "application/json"),
            ("authorization", &authorization),
        ]);
        bytes.extend(frame(0x1, 0x4, 1 + 2 * index, &block));
        bytes.extend(frame(0x0, 0x1, 1 + 2 * index, b"{}"));
    }
    stream.write_all(&bytes).await.unwrap();
    let mut held = 0;
    for _ in 0..50 {
        held = held.max(stats.in_flight());
        if held >= 100 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(held, 100, "the replies hold their places while they may");
    // Past the deadline the places are back, though nothing was read.
    let mut left = stats.in_flight();
    for _ in 0..100 {
        left = stats.in_flight();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left, 0, "places still held by replies nobody reads");
    // And the connection is closed: what its replies held goes with it.
    assert!(
        closed_within(&mut stream, Duration::from_secs(3)).await,
        "a connection whose replies nobody reads stays open"
    );
    let (status, _) = server
        .send(reqwest::Method::POST, "/v3/workspaces/list", json!({}), &admin)
        .await;
    assert_eq!(status, 200);
    server.served.shutdown.cancel();
}
