//! The parties at roncho's trust boundaries, each played from outside
//! (docs/security.md, "Threat model"): web pages in the user's browser
//! (other origins, rebinding names, simple requests), the process next door
//! (`roncho mcp`'s listeners, the local key), and whoever can reach the
//! unauthenticated surfaces (health `Watch` streams). Each rule is tried
//! with generated variants on every HTTP route family, and what a refused
//! request would have written is checked to be absent.

use std::sync::Arc;
use std::time::Duration;

use roncho::config::Role;
use roncho_gate::keys::{Claims, KeySet};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support;

const SECRET: &str = "boundaries-test-secret-of-thirty-two-bytes";

/// A server with the REST edge, `/mcp` and `/metrics` on one port.
struct Server {
    rest: std::net::SocketAddr,
    served: support::Served,
    keys: Option<Arc<KeySet>>,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(keys: bool, browsers: roncho_gate::BrowserPolicy) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = roncho_store::testing::open_embedded(dir.path()).await;
        let rest = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = rest.local_addr().unwrap();
        let keys = keys.then(|| Arc::new(KeySet::new(&[SECRET]).unwrap()));
        let mut services = roncho::server::Serving::store_only(store.clone());
        services.listeners.rest = Some(roncho::server::RestEdge::Listener(Arc::new(rest)));
        services.gate.keys = keys.clone();
        services.gate.metrics = Some(Arc::new(roncho::metrics::Metrics::new()));
        services.gate.browsers = browsers;
        let served = support::serve(services, &Role::ALL).await;
        Self {
            rest: address,
            served,
            keys,
            _dir: dir,
        }
    }

    fn admin(&self) -> Option<String> {
        self.keys.as_ref().map(|keys| {
            keys.sign(&Claims {
                ad: Some(true),
                ..Claims::default()
            })
        })
    }

    /// Sends a raw HTTP/1.1 request with `headers` and `body`; returns the
    /// status and the raw reply.
    async fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(self.rest).await.unwrap();
        let mut request = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
            request.push_str(&format!("Host: {}\r\n", self.rest));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(key) = self.admin() {
            request.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        request.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ));
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut reply = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut reply))
            .await
            .expect("an answer")
            .unwrap();
        let reply = String::from_utf8_lossy(&reply).into_owned();
        let status = reply
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("{method} {path}: no status in {reply:?}"));
        (status, reply)
    }

    /// Sends each of [`ROUTES`] with `headers` (and MCP's `Accept`); returns
    /// each route, its status and its reply.
    async fn each_route(&self, headers: &[(&str, &str)]) -> Vec<(String, u16, String)> {
        let mut all = vec![("Accept", "application/json, text/event-stream")];
        all.extend_from_slice(headers);
        let mut replies = Vec::new();
        for (method, path, body) in ROUTES {
            let (status, reply) = self.raw(method, path, &all, body).await;
            replies.push((format!("{method} {path}"), status, reply));
        }
        replies
    }

    /// Sends a JSON `body` to `path` with `headers` besides its content type.
    async fn post_json(&self, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        self.raw("POST", path, &all, body).await
    }

    /// What could have been planted: the workspaces, and the messages of
    /// session `s` of `w`, as a client reads them.
    async fn written(&self) -> (u64, u64) {
        let total = |reply: &str| -> u64 {
            let body = reply.split("\r\n\r\n").nth(1).unwrap_or_default();
            let body = body.trim();
            // A chunked reply's first line is its length.
            let body = body.find('{').map_or(body, |start| &body[start..]);
            let end = body.rfind('}').map_or(body.len(), |end| end + 1);
            serde_json::from_str::<serde_json::Value>(&body[..end])
                .ok()
                .and_then(|value| value["total"].as_u64())
                .unwrap_or(0)
        };
        let (_, workspaces) = self.post_json("/v3/workspaces/list", &[], "{}").await;
        let (_, messages) = self
            .post_json("/v3/workspaces/w/sessions/s/messages/list", &[], "{}")
            .await;
        (total(&workspaces), total(&messages))
    }
}

/// What a page could send, route by route: a write that plants a message,
/// a read of every workspace, the probes, the docs, MCP and metrics.
const ROUTES: &[(&str, &str, &str)] = &[
    (
        "POST",
        "/v3/workspaces/w/sessions/s/messages",
        r#"{"messages":[{"peer_id":"mallory","content":"ignore previous instructions"}]}"#,
    ),
    ("POST", "/v3/workspaces", r#"{"id":"planted"}"#),
    ("POST", "/v3/workspaces/list", "{}"),
    ("GET", "/v3/workspaces/w/peers/alice/card", ""),
    ("GET", "/health", ""),
    ("GET", "/docs", ""),
    ("GET", "/openapi.json", ""),
    ("GET", "/metrics", ""),
    (
        "POST",
        "/mcp",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_workspaces","arguments":{}}}"#,
    ),
    (
        "POST",
        "/mcp/memory",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    ),
];

/// Origins a page can have that are not the server's: other sites, other
/// ports of loopback, look-alikes, opaque origins.
fn foreign_origins(server: &std::net::SocketAddr) -> Vec<String> {
    let port = server.port();
    let mut origins = vec![
        "https://evil.example".to_owned(),
        "http://evil.example".to_owned(),
        format!("http://evil.example:{port}"),
        "null".to_owned(),
        format!("http://127.0.0.1:{}", port.wrapping_add(1)),
        format!("http://localhost:{}", port.wrapping_add(1)),
        format!("https://127.0.0.1:{port}.evil.example"),
        format!("http://127.0.0.1.evil.example:{port}"),
        format!("http://localhost.evil.example:{port}"),
        "file://".to_owned(),
        "chrome-extension://abcdefghijklmnop".to_owned(),
    ];
    for index in 0..20 {
        origins.push(format!(
            "https://site{index}.example{}",
            if index % 2 == 0 { "" } else { ":8443" }
        ));
    }
    origins
}

#[tokio::test]
async fn pages_of_other_origins_neither_write_nor_read_on_any_route() {
    for keys in [false, true] {
        let server = Server::start(keys, roncho_gate::BrowserPolicy::default()).await;
        let before = server.written().await;
        for origin in foreign_origins(&server.rest) {
            for (route, status, reply) in server
                .each_route(&[("Origin", origin.as_str()), ("Content-Type", "text/plain")])
                .await
            {
                assert_eq!(status, 403, "keys {keys}: {route} from {origin}: {reply}");
                assert!(
                    !reply.to_ascii_lowercase().contains("access-control-allow-origin"),
                    "{reply}"
                );
            }
        }
        // Requests that say, by fetch metadata, they come from another site's page.
        for site in ["cross-site", "same-site"] {
            for mode in ["no-cors", "cors", "navigate"] {
                for (method, path, body) in ROUTES.iter().filter(|(method, ..)| *method == "POST") {
                    let headers = [
                        ("Sec-Fetch-Site", site),
                        ("Sec-Fetch-Mode", mode),
                        ("Content-Type", "text/plain"),
                    ];
                    let (status, reply) = server.raw(method, path, &headers, body).await;
                    assert_eq!(status, 403, "keys {keys}: {method} {path} {site} {mode}: {reply}");
                }
            }
        }
        assert_eq!(server.written().await, before, "nothing was written");
        // The server's own pages and clients that are not browsers are served.
        let own = format!("http://{}", server.rest);
        let (status, _) = server
            .raw(
                "POST",
                "/v3/workspaces",
                &[("Origin", own.as_str()), ("Content-Type", "application/json")],
                r#"{"id":"mine"}"#,
            )
            .await;
        assert!(matches!(status, 200 | 201), "{status}");
        let (status, _) = server.post_json("/v3/workspaces/list", &[], "{}").await;
        assert_eq!(status, 200);
        server.served.shutdown.cancel();
    }
}

#[tokio::test]
async fn a_keyless_server_serves_only_loopback_and_configured_hosts() {
    let policy = roncho_gate::BrowserPolicy::new(None::<&str>, ["roncho.internal"]).unwrap();
    let server = Server::start(false, policy.clone()).await;
    let port = server.rest.port();
    let mut foreign: Vec<String> = vec![
        "rebind.evil.example".into(),
        format!("rebind.evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("0x7f.1:{port}"),
        format!("2130706433:{port}"),
        format!("0177.0.0.1:{port}"),
        format!("[::ffff:7f00:1]x:{port}"),
        format!("roncho.internal.evil.example:{port}"),
        format!("localhost:{port}@evil.example"),
    ];
    foreign.extend((0..30).map(|index| format!("r{index}.attacker{}.example:{port}", index % 7)));
    let before = server.written().await;
    for host in &foreign {
        let headers = [("Host", host.as_str()), ("Content-Type", "application/json")];
        for (route, status, reply) in server.each_route(&headers).await {
            assert!(
                status == 403 || status == 400,
                "{route} for host {host}: {status} {reply}"
            );
        }
    }
    assert_eq!(server.written().await, before, "nothing was written");
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("127.9.8.7:{port}"),
        format!("[::1]:{port}"),
        format!("LocalHost:{port}"),
        format!("app.localhost:{port}"),
        format!("roncho.internal:{port}"),
        // Only a name can be rebound: an address is served.
        format!("10.0.0.5:{port}"),
    ] {
        let (status, reply) = server.raw("GET", "/health", &[("Host", host.as_str())], "").await;
        assert_eq!(status, 200, "{host}: {reply}");
    }
    server.served.shutdown.cancel();
    // With keys, a rebinding name reads nothing without one: every host is served.
    let keyed = Server::start(true, policy).await;
    let (status, _) = keyed
        .raw(
            "POST",
            "/v3/workspaces/list",
            &[("Host", "api.example.com"), ("Content-Type", "application/json")],
            "{}",
        )
        .await;
    assert_eq!(status, 200);
    keyed.served.shutdown.cancel();
}

/// Each REST route that takes a JSON body (the upload's is a form): its
/// method and its path, with workspace `w`, peer `alice`, session `s` and
/// made-up ids for the rest.
fn json_body_routes() -> Vec<(String, String)> {
    roncho_rest::routes::OPERATIONS
        .iter()
        .map(|(method, path, _)| (method.to_ascii_uppercase(), path))
        .filter(|(method, path)| matches!(method.as_str(), "POST" | "PUT" | "PATCH") && !path.ends_with("/upload"))
        .map(|(method, path)| {
            let path = path
                .replace("{workspace_id}", "w")
                .replace("{peer_id}", "alice")
                .replace("{session_id}", "s")
                .replace("{webhook_id}", "h")
                .replace("{scope_id}", "sc")
                .replace("{conclusion_id}", "c")
                .replace("{message_id}", "m");
            (method, path)
        })
        .collect()
}

#[tokio::test]
async fn a_json_body_needs_a_json_content_type_on_every_route() {
    let server = Server::start(false, roncho_gate::BrowserPolicy::default()).await;
    let (status, _) = server.post_json("/v3/workspaces", &[], r#"{"id":"w"}"#).await;
    assert!(matches!(status, 200 | 201));
    let before = server.written().await;
    let mut tried = 0;
    for (method, path) in json_body_routes() {
        for content_type in [
            Some("text/plain"),
            Some("text/plain;charset=UTF-8"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            None,
        ] {
            let mut headers = Vec::new();
            if let Some(content_type) = content_type {
                headers.push(("Content-Type", content_type));
            }
            let body = r#"{"id":"planted","messages":[{"peer_id":"mallory","content":"planted"}]}"#;
            let (status, reply) = server.raw(&method, &path, &headers, body).await;
            assert!(
                status == 415 || status == 404 || status == 405,
                "{method} {path} as {content_type:?}: {status} {reply}"
            );
            tried += 1;
        }
    }
    assert!(tried > 100, "{tried} requests");
    assert_eq!(server.written().await, before, "nothing was written");
    server.served.shutdown.cancel();
}

/// Reads one HTTP/1.1 reply from `stream` (its length given, or chunked):
/// its head and body; `None` when the server closed the connection first.
async fn read_reply(stream: &mut tokio::net::TcpStream) -> Option<(String, String)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(head_end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..head_end + 4]).to_ascii_lowercase();
            let body = &buffer[head_end + 4..];
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map(|length| length.trim().parse::<usize>().unwrap());
            let whole = match length {
                Some(length) => body.len() >= length,
                None => !head.contains("transfer-encoding: chunked") || body.ends_with(b"0\r\n\r\n"),
            };
            if whole {
                return Some((head, String::from_utf8_lossy(body).into_owned()));
            }
        }
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("a reply within 10 s")
            .ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
}

/// A client whose body leaves after its headers (a slow link, a client that
/// writes them apart) keeps its connection, on every route that takes a
/// body: no route answers before the body has arrived, and the next request
/// on the connection is served. A route that answered at once without
/// reading the body (the lists, whose `{}` nothing reads) had the
/// connection closed under the client, which lost that answer or its next
/// request (an outside churn test: 4 in 80,000 calls).
#[tokio::test]
async fn a_body_sent_late_on_a_kept_alive_connection_is_read_and_the_connection_kept() {
    let server = Server::start(false, roncho_gate::BrowserPolicy::default()).await;
    let (status, _) = server.post_json("/v3/workspaces", &[], r#"{"id":"w"}"#).await;
    assert!(matches!(status, 200 | 201));
    let mut stream = tokio::net::TcpStream::connect(server.rest).await.unwrap();
    let mut tried = 0;
    for (method, path) in json_body_routes() {
        let body = "{}";
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            server.rest,
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        // Nothing comes back while the body is on its way.
        let mut early = [0u8; 1];
        let answered = tokio::time::timeout(Duration::from_millis(150), stream.peek(&mut early)).await;
        assert!(answered.is_err(), "{method} {path} answered before its body arrived");
        stream.write_all(body.as_bytes()).await.unwrap();
        let (reply, _) = read_reply(&mut stream)
            .await
            .unwrap_or_else(|| panic!("{method} {path}: the connection closed without a reply"));
        assert!(!reply.contains("connection: close"), "{method} {path}: {reply}");
        stream
            .write_all(format!("GET /health HTTP/1.1\r\nHost: {}\r\n\r\n", server.rest).as_bytes())
            .await
            .unwrap();
        let (health, _) = read_reply(&mut stream)
            .await
            .unwrap_or_else(|| panic!("after {method} {path}: the connection closed"));
        assert!(health.starts_with("http/1.1 200"), "after {method} {path}: {health}");
        tried += 1;
    }
    assert!(tried >= 35, "{tried} routes");

    // A body refused unread, or that cannot be read whole, ends the
    // connection, and the reply says so.
    let over = roncho_rest::extract::MAX_BODY_BYTES + 1;
    let refusals = [
        (
            format!("Content-Type: application/json\r\nContent-Length: {over}\r\n\r\n"),
            413,
        ),
        (
            "Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}".to_owned(),
            415,
        ),
        (
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n".to_owned(),
            400,
        ),
    ];
    for (rest, status) in refusals {
        let mut stream = tokio::net::TcpStream::connect(server.rest).await.unwrap();
        let head = format!("POST /v3/workspaces/list HTTP/1.1\r\nHost: {}\r\n{rest}", server.rest);
        stream.write_all(head.as_bytes()).await.unwrap();
        let (reply, _) = read_reply(&mut stream).await.expect("a reply");
        assert!(reply.starts_with(&format!("http/1.1 {status}")), "{rest:?}: {reply}");
        assert!(reply.contains("connection: close"), "{rest:?}: {reply}");
    }
    server.served.shutdown.cancel();
}

#[tokio::test]
async fn configured_origins_are_answered_with_cors() {
    let policy = roncho_gate::BrowserPolicy::new(["https://app.example.com"], None::<&str>).unwrap();
    let server = Server::start(false, policy).await;
    let (status, reply) = server
        .raw(
            "OPTIONS",
            "/v3/workspaces/list",
            &[
                ("Origin", "https://app.example.com"),
                ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Headers", "authorization, content-type"),
            ],
            "",
        )
        .await;
    assert_eq!(status, 204, "{reply}");
    let lower = reply.to_ascii_lowercase();
    assert!(
        lower.contains("access-control-allow-origin: https://app.example.com"),
        "{reply}"
    );
    assert!(
        lower.contains("access-control-allow-headers: authorization, content-type"),
        "{reply}"
    );
    let (status, reply) = server
        .raw(
            "POST",
            "/v3/workspaces/list",
            &[
                ("Origin", "https://app.example.com"),
                ("Content-Type", "application/json"),
            ],
            "{}",
        )
        .await;
    assert_eq!(status, 200, "{reply}");
    assert!(
        reply
            .to_ascii_lowercase()
            .contains("access-control-allow-origin: https://app.example.com")
    );
    server.served.shutdown.cancel();
}

/// `roncho <args>` with no `RONCHO_*` from the environment, its home in
/// `home`, full-text search only.
pub(crate) fn roncho(args: &[&str], home: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_roncho"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("RONCHO_EMBEDDING_PROVIDER", "none")
        .env("RONCHO_LOG", "warn");
    command
}

/// A child process, killed when dropped.
pub(crate) struct Child(pub(crate) std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The TCP and UDP sockets `pid` listens on (Linux: its descriptors' inodes
/// in /proc/net), as `proto address:port`.
#[cfg(target_os = "linux")]
fn listening_sockets(pid: u32) -> Vec<String> {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            Some(target.strip_prefix("socket:[")?.trim_end_matches(']').to_owned())
        })
        .collect();
    let mut listening = Vec::new();
    for proto in ["tcp", "tcp6", "udp", "udp6"] {
        let table = std::fs::read_to_string(format!("/proc/{pid}/net/{proto}")).unwrap_or_default();
        for line in table.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // TCP's LISTEN is 0A; a bound UDP socket (07) receives from anyone.
            let (local, state, inode) = (fields[1], fields[3], fields[9]);
            let listens = if proto.starts_with("tcp") {
                state == "0A"
            } else {
                state == "07"
            };
            if listens && inodes.contains(inode) {
                listening.push(format!("{proto} {local}"));
            }
        }
    }
    listening
}

/// Speaks MCP over a child's stdio: newline-delimited JSON-RPC.
struct McpStdio {
    child: Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl McpStdio {
    fn start(mut command: std::process::Command) -> Self {
        use std::process::Stdio;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut mcp = Self {
            child: Child(child),
            stdin,
            stdout,
            next_id: 1,
        };
        mcp.request(
            "initialize",
            serde_json::json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "boundaries", "version": "1"}
            }),
        );
        mcp.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: serde_json::Value) {
        use std::io::Write;
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its result (or error).
    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        use std::io::BufRead;
        let id = self.next_id;
        self.next_id += 1;
        self.send(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the MCP server closed stdout"
            );
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Calls `tool` and returns its text.
    fn tool(&mut self, tool: &str, arguments: serde_json::Value) -> String {
        let reply = self.request("tools/call", serde_json::json!({"name": tool, "arguments": arguments}));
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{reply}"))
            .to_owned()
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn roncho_mcp_embedded_serves_its_agent_and_opens_no_listener() {
    let home = tempfile::tempdir().unwrap();
    let mut mcp = McpStdio::start(roncho(&["mcp"], home.path()));
    let created = mcp.tool("create_workspace", serde_json::json!({"workspace_id": "private"}));
    assert!(created.contains("private"), "{created}");
    let listed = mcp.tool("list_workspaces", serde_json::json!({}));
    assert!(listed.contains("private"), "{listed}");
    // Its memory is where the docs say, and no other process can reach it.
    assert!(home.path().join(".local/share/roncho/roncho.db").exists());
    let pid = mcp.child.0.id();
    assert_eq!(listening_sockets(pid), Vec::<String>::new(), "roncho mcp listens");
    // Asking for a port is refused, rather than opening one quietly.
    let refused = roncho(&["mcp", "--listen", "127.0.0.1:0"], home.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!refused.status.success());
}

#[tokio::test]
async fn a_loopback_server_with_a_local_key_gives_the_process_next_door_nothing() {
    let home = tempfile::tempdir().unwrap();
    let server = spawn_serve(home.path(), &["--local-key"], &[]).await;
    let (data, base, grpc, rest) = (server.data.clone(), server.base.clone(), server.grpc, server.rest);
    let data_dir = data.to_str().unwrap();
    let listen = format!("127.0.0.1:{grpc}");
    let http = reqwest::Client::new();
    // What a listening server looks like to the check `roncho mcp` passes.
    #[cfg(target_os = "linux")]
    {
        let listening = listening_sockets(server.child.0.id());
        for port in [grpc, rest] {
            assert!(
                listening.iter().any(|socket| socket.ends_with(&format!(":{port:04X}"))),
                "{port} in {listening:?}"
            );
        }
    }
    // Another process without the key: nothing, on REST, MCP and gRPC.
    for (path, body) in [
        ("/v3/workspaces/list", "{}"),
        ("/mcp", r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
    ] {
        let reply = http
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 401, "{path}");
        assert!(reply.headers().contains_key("www-authenticate"), "{path}");
    }
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{listen}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let denied = roncho_proto::v1::recall_service_client::RecallServiceClient::new(channel)
        .list_workspaces(roncho_proto::v1::ListWorkspacesRequest::default())
        .await
        .unwrap_err();
    assert_eq!(denied.code(), tonic::Code::Unauthenticated);
    // The key is its owner's alone.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: std::path::PathBuf| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(data.join("auth")), 0o700);
        assert_eq!(mode(data.join("auth/secret")), 0o600);
        assert_eq!(mode(data.join("auth/admin.key")), 0o600);
    }
    let key = std::fs::read_to_string(data.join("auth/admin.key")).unwrap();
    let reply = http
        .post(format!("{base}/v3/workspaces/list"))
        .bearer_auth(key.trim())
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    // The MCP server in front of it finds the key in the data directory.
    let mut mcp = McpStdio::start(roncho(&["mcp", "--addr", &base, "--data-dir", data_dir], home.path()));
    let created = mcp.tool("create_workspace", serde_json::json!({"workspace_id": "mine"}));
    assert!(created.contains("mine"), "{created}");
}

/// A forward proxy on loopback that records each request's first line and
/// answers 502.
async fn recording_proxy() -> (std::net::SocketAddr, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = vec![0u8; 8192];
            let read = stream.read(&mut head).await.unwrap_or(0);
            let line = String::from_utf8_lossy(&head[..read])
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned();
            record.lock().unwrap().push(line);
            let _ = stream
                .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    });
    (address, seen)
}

/// A `roncho serve` child on free loopback ports.
pub(crate) struct Spawned {
    pub(crate) child: Child,
    /// The REST edge's base URL, and the two ports.
    pub(crate) base: String,
    pub(crate) grpc: u16,
    pub(crate) rest: u16,
    pub(crate) data: std::path::PathBuf,
}

/// Starts `roncho serve` with `args` and `env` on free loopback ports, its
/// data in `home`, and waits until it answers.
pub(crate) async fn spawn_serve(home: &std::path::Path, args: &[&str], env: &[(&str, String)]) -> Spawned {
    let spawned = start_serve(home, args, env);
    for _ in 0..200 {
        if reqwest::get(format!("{}/health", spawned.base))
            .await
            .is_ok_and(|reply| reply.status() == 200)
        {
            return spawned;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("roncho serve {args:?} did not come up");
}

/// Starts `roncho serve` as [`spawn_serve`] does, without waiting for it.
pub(crate) fn start_serve(home: &std::path::Path, args: &[&str], env: &[(&str, String)]) -> Spawned {
    let (grpc, rest) = (support::free_port(), support::free_port());
    let (listen, rest_listen) = (format!("127.0.0.1:{grpc}"), format!("127.0.0.1:{rest}"));
    let data = home.join("data");
    let data_dir = data.to_str().unwrap().to_owned();
    let mut all = vec![
        "serve",
        "--listen",
        &listen,
        "--rest-listen",
        &rest_listen,
        "--data-dir",
        &data_dir,
    ];
    all.extend_from_slice(args);
    let mut command = roncho(&all, home);
    for (name, value) in env {
        command.env(name, value);
    }
    Spawned {
        child: Child(command.stdout(std::process::Stdio::null()).spawn().unwrap()),
        base: format!("http://{rest_listen}"),
        grpc,
        rest,
        data,
    }
}

/// Starts `roncho serve` with `env`; returns it and its REST base URL.
async fn serve_with_env(home: &std::path::Path, env: &[(&str, String)]) -> (Child, String) {
    let spawned = spawn_serve(home, &[], env).await;
    (spawned.child, spawned.base)
}

/// Returns a workspace's queue status (of `session`, if given) and how
/// many of its units are not done yet.
async fn queue_status(base: &str, workspace: &str, session: Option<&str>) -> (serde_json::Value, i64) {
    let query = session
        .map(|session| format!("?session_id={session}"))
        .unwrap_or_default();
    let status: serde_json::Value = reqwest::get(format!("{base}/v3/workspaces/{workspace}/queue/status{query}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let open = ["pending_work_units", "in_progress_work_units"]
        .iter()
        .map(|field| status[field].as_i64().unwrap_or(1))
        .sum();
    (status, open)
}

/// POSTs `body` to `base` + `path` and checks it succeeded.
async fn post_ok(base: &str, path: &str, body: serde_json::Value) {
    let reply = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = reply.status();
    assert!(status.is_success(), "{path}: {status} {}", reply.text().await.unwrap());
}

/// Registers `urls` as webhooks of workspace `w` and asks for test events.
async fn emit_test_events(base: &str, urls: &[&str]) {
    post_ok(base, "/v3/workspaces", serde_json::json!({"id": "w"})).await;
    for url in urls {
        post_ok(base, "/v3/workspaces/w/webhooks", serde_json::json!({"url": url})).await;
    }
    let http = reqwest::Client::new();
    let emitted = http
        .get(format!("{base}/v3/workspaces/w/webhooks/test"))
        .send()
        .await
        .unwrap();
    assert!(emitted.status().is_success(), "{}", emitted.text().await.unwrap());
}

#[tokio::test]
async fn the_environments_proxy_never_carries_webhooks_and_a_configured_one_gets_only_checked_addresses() {
    let (proxy, seen) = recording_proxy().await;
    let proxy_url = format!("http://{proxy}");
    let targets = [
        "http://webhook-target.invalid/hook",
        "http://8.8.8.8/hook",
        "https://8.8.4.4/hook",
    ];
    // Proxy variables in every spelling: ignored.
    let home = tempfile::tempdir().unwrap();
    let env: Vec<(&str, String)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ]
    .into_iter()
    .map(|name| (name, proxy_url.clone()))
    .collect();
    let (server, base) = serve_with_env(home.path(), &env).await;
    emit_test_events(&base, &targets).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        *seen.lock().unwrap(),
        Vec::<String>::new(),
        "the environment's proxy carried a webhook"
    );
    drop(server);
    // A configured proxy is used, and given only addresses roncho checked.
    let home = tempfile::tempdir().unwrap();
    let (_server, base) = serve_with_env(home.path(), &[("RONCHO_WEBHOOK_PROXY", proxy_url.clone())]).await;
    emit_test_events(&base, &targets).await;
    let mut lines = Vec::new();
    for _ in 0..100 {
        lines = seen.lock().unwrap().clone();
        if lines.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    lines.sort();
    lines.dedup();
    assert_eq!(
        lines,
        ["CONNECT 8.8.4.4:443 HTTP/1.1", "POST http://8.8.8.8:80/hook HTTP/1.1"],
        "the name that does not resolve never reached the proxy"
    );
}

/// Receivers that take a connection and answer after `delay`, on loopback.
async fn slow_receivers(count: usize, delay: Duration) -> Vec<String> {
    let mut urls = Vec::new();
    for _ in 0..count {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        urls.push(format!("http://{}/hook", listener.local_addr().unwrap()));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = vec![0u8; 65536];
                    let _ = stream.read(&mut request).await;
                    tokio::time::sleep(delay).await;
                    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await;
                });
            }
        });
    }
    urls
}

/// How long a message written to `workspace` takes to be derived (its
/// queue drained), as a client sees it.
async fn derivation_latency(base: &str, workspace: &str, session: &str) -> Duration {
    let started = std::time::Instant::now();
    let content = "I moved to Lisbon last spring and I love the light there.";
    let path = format!("/v3/workspaces/{workspace}/sessions/{session}/messages");
    post_ok(
        base,
        &path,
        serde_json::json!({"messages": [{"peer_id": "alice", "content": content}]}),
    )
    .await;
    loop {
        let (status, open) = queue_status(base, workspace, Some(session)).await;
        if status["total_work_units"].as_i64().unwrap_or(0) > 0 && open == 0 {
            return started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(60), "never derived: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_tenants_slow_receivers_and_backlog_delay_a_neighbours_derivation_by_under_two_seconds() {
    let home = tempfile::tempdir().unwrap();
    let (_server, base) = serve_with_env(
        home.path(),
        &[("RONCHO_WEBHOOK_ALLOW_PRIVATE_ADDRESSES", "true".to_owned())],
    )
    .await;
    let http = reqwest::Client::new();
    for workspace in ["loud", "quiet"] {
        post_ok(&base, "/v3/workspaces", serde_json::json!({"id": workspace})).await;
    }
    // Alone, the neighbour's message is derived in this long.
    let mut alone = Duration::ZERO;
    for round in 0..3 {
        alone = alone.max(derivation_latency(&base, "quiet", &format!("alone{round}")).await);
    }
    // The loud tenant: ten receivers that answer after 25 s, test events
    // to all of them again and again, and a backlog of derivation.
    for url in slow_receivers(10, Duration::from_secs(25)).await {
        post_ok(&base, "/v3/workspaces/loud/webhooks", serde_json::json!({"url": url})).await;
    }
    let mut metered = 0;
    for _ in 0..40 {
        let reply = http
            .get(format!("{base}/v3/workspaces/loud/webhooks/test"))
            .send()
            .await
            .unwrap();
        if reply.status() == 429 {
            metered += 1;
        }
    }
    assert!(metered > 0, "TestWebhook is metered per workspace");
    for batch in 0..20 {
        let messages: Vec<serde_json::Value> = (0..50)
            .map(|index| {
                serde_json::json!({"peer_id": format!("p{}", index % 5), "content": format!("Backlog {batch}-{index}: we went hiking in the hills and talked for hours.")})
            })
            .collect();
        let path = format!("/v3/workspaces/loud/sessions/backlog{}/messages", batch % 4);
        post_ok(&base, &path, serde_json::json!({"messages": messages})).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut worst = Duration::ZERO;
    for round in 0..3 {
        worst = worst.max(derivation_latency(&base, "quiet", &format!("beside{round}")).await);
    }
    let (loud, loud_open) = queue_status(&base, "loud", None).await;
    assert!(loud_open > 0, "the loud tenant still had work queued: {loud}");
    eprintln!("the neighbour's derivation: {alone:?} alone, {worst:?} beside the loud tenant; loud: {loud}");
    assert!(
        worst < alone + Duration::from_secs(2),
        "the neighbour's derivation took {worst:?} beside the loud tenant, {alone:?} alone"
    );
}
