//! The Honcho v3 REST edge end to end, in process, over a real HTTP client:
//! Honcho's statuses and shapes (201 on create and 200 on get, pages,
//! `{"detail": ...}` errors, FastAPI's 422), its keys and their narrowest
//! claim, and that REST and gRPC are one implementation: what one writes,
//! the other reads the same.

use std::collections::BTreeMap;
use std::sync::Arc;

use roncho::config::Role;
use roncho_gate::keys::{Claims, KeySet};
use roncho_proto::v1 as pb;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use serde_json::{Value, json};

use crate::support;

const SECRET: &str = "the-rest-edge-test-secret-of-32-bytes";

struct Server {
    base: String,
    http: reqwest::Client,
    served: support::Served,
    keys: Option<Arc<KeySet>>,
    store: Arc<roncho_store::SqlStore>,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(authenticated: bool) -> Self {
        Self::start_with(authenticated.then(|| KeySet::new(&[SECRET]).unwrap())).await
    }

    async fn start_with(keys: Option<KeySet>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = support::embedded_store(dir.path()).await;
        let rest = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", rest.local_addr().unwrap());
        let keys = keys.map(Arc::new);
        let mut services = roncho::server::Serving::store_only(store.clone());
        services.listeners.rest = Some(roncho::server::RestEdge::Listener(Arc::new(rest)));
        services.gate.keys = keys.clone();
        services.domain.queue = Some(Arc::new(roncho_store::SqlWorkQueue::new(store.clone())));
        let served = support::serve(services, &Role::ALL).await;
        Self {
            base,
            http: reqwest::Client::new(),
            served,
            keys,
            store,
            _dir: dir,
        }
    }

    fn key(&self, claims: Claims) -> String {
        self.keys.as_ref().expect("an authenticated server").sign(&claims)
    }

    /// Sends `method path` with `body` (none when `Value::Null`) and `key`;
    /// returns the status and the JSON reply (`Null` when empty).
    async fn send(&self, method: reqwest::Method, path: &str, body: Value, key: Option<&str>) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if !body.is_null() {
            request = request.json(&body);
        }
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{path}: not JSON: {text}"))
        };
        (status, value)
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, body, None).await
    }

    /// Calls a tool of `/mcp` (stateless Streamable HTTP) and returns its text.
    async fn mcp_tool(&self, name: &str, arguments: Value) -> String {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
        let response = self
            .http
            .post(format!("{}/mcp", self.base))
            .header("accept", "application/json, text/event-stream")
            .json(&call)
            .send()
            .await
            .unwrap();
        let reply: Value = response.json().await.unwrap();
        assert_ne!(reply["result"]["isError"], true, "{name}: {reply}");
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: {reply}"))
            .to_owned()
    }
}

fn ids(items: &Value) -> Vec<&str> {
    items
        .as_array()
        .expect("a list")
        .iter()
        .map(|item| item["id"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn honchos_statuses_shapes_and_pages() {
    let server = Server::start(false).await;
    let (status, body) = server.send(reqwest::Method::GET, "/health", Value::Null, None).await;
    assert_eq!((status, body), (200, json!({"status": "ok"})));

    // Get-or-create: 201 when created, 200 when it existed, unchanged.
    let (status, workspace) = server
        .post("/v3/workspaces", json!({"id": "acme", "metadata": {"tier": "gold"}}))
        .await;
    assert_eq!(status, 201, "{workspace}");
    assert_eq!(workspace["id"], "acme");
    assert_eq!(workspace["metadata"], json!({"tier": "gold"}));
    assert!(workspace["created_at"].as_str().unwrap().ends_with('Z'), "{workspace}");
    let (status, again) = server.post("/v3/workspaces", json!({"id": "acme"})).await;
    assert_eq!((status, &again["metadata"]), (200, &json!({"tier": "gold"})));

    let (status, peer) = server.post("/v3/workspaces/acme/peers", json!({"id": "alice"})).await;
    assert_eq!((status, peer["workspace_id"].as_str()), (201, Some("acme")));
    assert_eq!(
        server.post("/v3/workspaces/acme/peers", json!({"id": "alice"})).await.0,
        200
    );

    let (status, session) = server
        .post(
            "/v3/workspaces/acme/sessions",
            json!({"id": "chat-1", "peers": {"alice": {"observe_others": true}, "bob": {}}}),
        )
        .await;
    assert_eq!((status, session["is_active"].as_bool()), (201, Some(true)), "{session}");

    // Messages: 201 with the list; pages of Honcho's shape.
    let batch: Vec<Value> = (0..5)
        .map(|i| json!({"peer_id": if i % 2 == 0 { "alice" } else { "bob" }, "content": format!("message number {i} about sourdough")}))
        .collect();
    let (status, created) = server
        .post(
            "/v3/workspaces/acme/sessions/chat-1/messages",
            json!({"messages": batch}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created.as_array().unwrap().len(), 5);
    assert!(created[0]["token_count"].as_i64().unwrap() > 0);
    let (status, page) = server
        .post(
            "/v3/workspaces/acme/sessions/chat-1/messages/list?page=2&size=2",
            Value::Null,
        )
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        (&page["total"], &page["page"], &page["size"], &page["pages"]),
        (&json!(5), &json!(2), &json!(2), &json!(3))
    );
    assert_eq!(
        ids(&page["items"]),
        [created[2]["id"].as_str().unwrap(), created[3]["id"].as_str().unwrap()]
    );
    let (status, reversed) = server
        .post(
            "/v3/workspaces/acme/sessions/chat-1/messages/list?reverse=true&size=1",
            json!({}),
        )
        .await;
    assert_eq!(
        (status, ids(&reversed["items"])),
        (200, vec![created[4]["id"].as_str().unwrap()])
    );
    // `reverse` read as Honcho's FastAPI reads a boolean, in any case.
    for (spelling, newest_first) in [
        ("1", true),
        ("TRUE", true),
        ("yes", true),
        ("On", true),
        ("t", true),
        ("Y", true),
        ("0", false),
        ("False", false),
        ("no", false),
        ("off", false),
        ("F", false),
        ("n", false),
    ] {
        let (status, page) = server
            .post(
                &format!("/v3/workspaces/acme/sessions/chat-1/messages/list?reverse={spelling}&size=1"),
                json!({}),
            )
            .await;
        let first = created[if newest_first { 4 } else { 0 }]["id"].as_str().unwrap();
        assert_eq!((status, ids(&page["items"])), (200, vec![first]), "reverse={spelling}");
    }
    // A parameter given twice takes its last value, as in Starlette.
    let (status, page) = server
        .post(
            "/v3/workspaces/acme/sessions/chat-1/messages/list?reverse=false&size=3&reverse=true&size=1",
            json!({}),
        )
        .await;
    assert_eq!(
        (status, ids(&page["items"])),
        (200, vec![created[4]["id"].as_str().unwrap()]),
        "{page}"
    );
    for spelling in ["maybe", "2", "", "truth"] {
        let (status, refused) = server
            .post(
                &format!("/v3/workspaces/acme/sessions/chat-1/messages/list?reverse={spelling}"),
                json!({}),
            )
            .await;
        assert_eq!(status, 422, "reverse={spelling}: {refused}");
        // FastAPI's shape: the parameter and its value.
        assert_eq!(refused["detail"][0]["loc"], json!(["query", "reverse"]), "{refused}");
        assert_eq!(refused["detail"][0]["input"], json!(spelling), "{refused}");
    }
    for query in ["summary=x", "tokens=many", "include_most_frequent=2&summary=true"] {
        let (status, refused) = server
            .send(
                reqwest::Method::GET,
                &format!("/v3/workspaces/acme/sessions/chat-1/context?{query}"),
                Value::Null,
                None,
            )
            .await;
        assert_eq!(status, 422, "{query}: {refused}");
        let field = query.split('=').next().unwrap();
        assert_eq!(
            refused["detail"][0]["loc"],
            json!(["query", field]),
            "{query}: {refused}"
        );
    }
    // `contains` on a column matches in any case, as Honcho's ILIKE.
    for filters in [
        json!({"peer_id": {"contains": "LIC"}}),
        json!({"peer_id": {"icontains": "lic"}}),
    ] {
        let (status, page) = server
            .post(
                "/v3/workspaces/acme/sessions/chat-1/messages/list",
                json!({ "filters": filters }),
            )
            .await;
        assert_eq!((status, &page["total"]), (200, &json!(3)), "{filters}: {page}");
    }
    let one = created[1]["id"].as_str().unwrap();
    let (status, message) = server
        .send(
            reqwest::Method::GET,
            &format!("/v3/workspaces/acme/sessions/chat-1/messages/{one}"),
            Value::Null,
            None,
        )
        .await;
    assert_eq!((status, &message["content"]), (200, &created[1]["content"]));
    let (status, updated) = server
        .send(
            reqwest::Method::PUT,
            &format!("/v3/workspaces/acme/sessions/chat-1/messages/{one}"),
            json!({"metadata": {"pinned": true}}),
            None,
        )
        .await;
    assert_eq!((status, &updated["metadata"]), (200, &json!({"pinned": true})));

    // Session peers and their configuration.
    let (status, members) = server
        .send(
            reqwest::Method::GET,
            "/v3/workspaces/acme/sessions/chat-1/peers",
            Value::Null,
            None,
        )
        .await;
    assert_eq!((status, ids(&members["items"])), (200, vec!["alice", "bob"]));
    let config_path = "/v3/workspaces/acme/sessions/chat-1/peers/bob/config";
    let (status, _) = server
        .send(reqwest::Method::PUT, config_path, json!({"observe_me": false}), None)
        .await;
    assert_eq!(status, 204);
    let (status, config) = server.send(reqwest::Method::GET, config_path, Value::Null, None).await;
    assert_eq!((status, &config["observe_me"]), (200, &json!(false)));

    // Search answers a bare list and says how it ran.
    let response = server
        .http
        .post(format!("{}/v3/workspaces/acme/sessions/chat-1/search", server.base))
        .json(&json!({"query": "sourdough", "limit": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-roncho-search-mode"], "full_text");
    assert!(response.headers().contains_key("x-roncho-degraded-reason"));
    // Why each was found: by its words, no embedder being configured (and no meaning lag to tell).
    let matches = response.headers()["x-roncho-search-matches"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!response.headers().contains_key("x-roncho-meaning-lag"));
    let found: Value = response.json().await.unwrap();
    assert_eq!(found.as_array().unwrap().len(), 3);
    let explained: Vec<String> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|message| format!("{}=words", message["id"].as_str().unwrap()))
        .collect();
    assert_eq!(matches, explained.join(", "));
    // The path's session or peer is forced into a search's filters, as in
    // Honcho: a `session_id` or `peer_id` there is replaced, not ANDed.
    let searched = |path: &'static str, filters: Value| {
        let server = &server;
        async move {
            let (status, found) = server
                .post(path, json!({"query": "sourdough", "limit": 10, "filters": filters}))
                .await;
            assert_eq!(status, 200, "{path}: {found}");
            ids(&found).into_iter().map(str::to_owned).collect::<Vec<_>>()
        }
    };
    let session_path = "/v3/workspaces/acme/sessions/chat-1/search";
    for limit in [0, -1, 101] {
        let (status, refused) = server
            .post(session_path, json!({"query": "sourdough", "limit": limit}))
            .await;
        assert_eq!(status, 422, "limit {limit}: {refused}");
    }
    let in_session = searched(session_path, json!({})).await;
    assert_eq!(in_session.len(), 5);
    assert_eq!(
        searched(session_path, json!({"session_id": "elsewhere"})).await,
        in_session
    );
    let peer_path = "/v3/workspaces/acme/peers/alice/search";
    let alices = searched(peer_path, json!({})).await;
    assert_eq!(alices.len(), 3);
    assert_eq!(searched(peer_path, json!({"peer_id": "bob"})).await, alices);
    // A nested one is ANDed with the path's (Honcho replaces only the top
    // level), so it narrows or empties and never widens.
    for (path, nested, expected) in [
        (session_path, json!({"AND": [{"session_id": "elsewhere"}]}), vec![]),
        (
            session_path,
            json!({"OR": [{"session_id": "elsewhere"}, {"session_id": "*"}]}),
            in_session.clone(),
        ),
        (session_path, json!({"NOT": [{"session_id": "chat-1"}]}), vec![]),
        (peer_path, json!({"AND": [{"peer_id": "bob"}]}), vec![]),
        (
            peer_path,
            json!({"OR": [{"peer_id": {"in": ["bob", "alice"]}}]}),
            alices.clone(),
        ),
        (peer_path, json!({"NOT": [{"peer_id": "bob"}]}), alices.clone()),
    ] {
        assert_eq!(searched(path, nested.clone()).await, expected, "{path} {nested}");
    }
    // Other keys still narrow: bob's messages are none of alice's.
    assert!(
        searched(session_path, json!({"peer_id": "bob"}))
            .await
            .iter()
            .all(|id| !alices.contains(id))
    );

    // Errors: Honcho's statuses with `detail`; schema misfits in FastAPI's 422 shape.
    let (status, missing) = server
        .send(
            reqwest::Method::GET,
            "/v3/workspaces/acme/sessions/chat-1/messages/no-such-message",
            Value::Null,
            None,
        )
        .await;
    assert_eq!(status, 404);
    assert!(
        missing["detail"].as_str().unwrap().contains("no-such-message"),
        "{missing}"
    );
    let (status, invalid) = server
        .post(
            "/v3/workspaces/acme/sessions/chat-1/messages",
            json!({"messages": [{"content": "no author"}]}),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(invalid["detail"][0]["type"], "missing");
    assert_eq!(invalid["detail"][0]["loc"], json!(["body", "messages", 0, "peer_id"]));
    let (status, bad_id) = server.post("/v3/workspaces", json!({"id": "no spaces allowed"})).await;
    assert_eq!(status, 422);
    assert!(bad_id["detail"].as_str().is_some(), "{bad_id}");
    let (status, _) = server
        .post("/v3/workspaces/acme/sessions/list?size=0", Value::Null)
        .await;
    assert_eq!(status, 422);

    // Delete answers 202 and the session is gone from reads at once.
    let (status, deleted) = server
        .send(
            reqwest::Method::DELETE,
            "/v3/workspaces/acme/sessions/chat-1",
            Value::Null,
            None,
        )
        .await;
    assert_eq!(
        (status, deleted),
        (202, json!({"message": "Session deleted successfully"}))
    );
    let (status, sessions) = server.post("/v3/workspaces/acme/sessions/list", Value::Null).await;
    assert_eq!((status, &sessions["total"]), (200, &json!(0)), "{sessions}");

    // The switches a configuration holds are booleans as Pydantic reads
    // them, stored as booleans; anything else is a 422 naming the switch.
    let (status, shy) = server
        .post(
            "/v3/workspaces/acme/peers",
            json!({"id": "shy", "configuration": {"observe_me": "No", "theme": "dark"}}),
        )
        .await;
    assert_eq!(status, 201, "{shy}");
    assert_eq!(shy["configuration"], json!({"observe_me": false, "theme": "dark"}));
    for (path, body, field) in [
        (
            "/v3/workspaces/acme/peers",
            json!({"id": "p", "configuration": {"observe_me": "maybe"}}),
            "configuration.observe_me",
        ),
        (
            "/v3/workspaces/acme/sessions",
            json!({"id": "s", "configuration": {"reasoning": {"enabled": 2}}}),
            "configuration.reasoning.enabled",
        ),
        (
            "/v3/workspaces",
            json!({"id": "ws", "configuration": {"summary": {"enabled": []}}}),
            "configuration.summary.enabled",
        ),
        (
            "/v3/workspaces/acme/sessions",
            json!({"id": "s", "configuration": {"reasoning": "off"}}),
            "configuration.reasoning",
        ),
        (
            "/v3/workspaces",
            json!({"id": "ws", "configuration": {"summary": 0}}),
            "configuration.summary",
        ),
    ] {
        let (status, refused) = server.post(path, body).await;
        assert_eq!(status, 422, "{path}: {refused}");
        assert!(refused.to_string().contains(field), "{path}: {refused}");
    }
    server.served.shutdown.cancel();
}

#[tokio::test]
async fn rest_and_grpc_are_one_implementation() {
    let server = Server::start(false).await;
    let batch = json!({"messages": [
        {"peer_id": "alice", "content": "I adopted a kitten from the shelter", "metadata": {"mood": "happy"}},
        {"peer_id": "bob", "content": "What is its name?", "created_at": "2026-01-02T03:04:05.000006Z"},
    ]});
    let (status, created) = server.post("/v3/workspaces/w/sessions/s/messages", batch).await;
    assert_eq!(status, 201, "{created}");
    let listed = RecallServiceClient::new(server.served.channel.clone())
        .list_messages(pb::ListMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let grpc_ids: Vec<&str> = listed.items.iter().map(|message| message.id.as_str()).collect();
    assert_eq!(grpc_ids, ids(&created));
    assert_eq!(created[1]["created_at"], "2026-01-02T03:04:05.000006Z");
    assert_eq!(listed.items[0].content, "I adopted a kitten from the shelter");
    server.served.shutdown.cancel();
}

#[tokio::test]
async fn keys_reach_what_their_narrowest_claim_allows() {
    let server = Server::start(true).await;
    let admin = server.key(Claims {
        ad: Some(true),
        ..Claims::default()
    });
    let (status, body) = server.post("/v3/workspaces", json!({"id": "w"})).await;
    assert_eq!(status, 401, "no key");
    assert!(body["detail"].as_str().unwrap().contains("no access token"), "{body}");
    let (status, _) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces",
            json!({"id": "w"}),
            Some("not-a-jwt"),
        )
        .await;
    assert_eq!(status, 401, "a bad key");
    assert_eq!(
        server
            .send(
                reqwest::Method::POST,
                "/v3/workspaces",
                json!({"id": "w"}),
                Some(&admin)
            )
            .await
            .0,
        201
    );
    let peer_key = server.key(Claims {
        w: Some("w".into()),
        p: Some("alice".into()),
        ..Claims::default()
    });
    // A peer key names its own peer when the body names none; another peer is out of reach.
    let (status, own) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/w/peers",
            json!({}),
            Some(&peer_key),
        )
        .await;
    assert_eq!((status, own["id"].as_str()), (201, Some("alice")), "{own}");
    let (status, _) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/w/peers",
            json!({"id": "bob"}),
            Some(&peer_key),
        )
        .await;
    assert_eq!(status, 401, "a peer key does not reach another peer");
    let (status, _) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/list",
            Value::Null,
            Some(&peer_key),
        )
        .await;
    assert_eq!(status, 401, "listing workspaces is for admin keys");
    let (status, _) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/other/peers/list",
            Value::Null,
            Some(&peer_key),
        )
        .await;
    assert_eq!(status, 401, "another workspace");
    let (status, page) = server
        .send(reqwest::Method::POST, "/v3/workspaces/list", Value::Null, Some(&admin))
        .await;
    assert_eq!((status, ids(&page["items"])), (200, vec!["w"]));
    // Keys minted over REST work over REST, by their narrowest claim.
    let (status, minted) = server
        .send(
            reqwest::Method::POST,
            "/v3/keys?workspace_id=w&peer_id=carol&expires_at=2099-01-01T00:00:00",
            Value::Null,
            Some(&admin),
        )
        .await;
    assert_eq!(status, 200, "{minted}");
    let carol = minted["key"].as_str().unwrap();
    let (status, _) = server
        .send(
            reqwest::Method::PUT,
            "/v3/workspaces/w/peers/carol",
            json!({}),
            Some(carol),
        )
        .await;
    assert_eq!(status, 200, "a minted peer key reaches its peer");
    let (status, _) = server
        .send(
            reqwest::Method::PUT,
            "/v3/workspaces/w/peers/alice",
            json!({}),
            Some(carol),
        )
        .await;
    assert_eq!(status, 401, "and no other");
    let (status, _) = server
        .send(
            reqwest::Method::POST,
            "/v3/keys?workspace_id=w",
            Value::Null,
            Some(carol),
        )
        .await;
    assert_eq!(status, 401, "minting is for admin keys");
    // Probes need no key.
    assert_eq!(
        server.send(reqwest::Method::GET, "/health", Value::Null, None).await.0,
        200
    );
    server.served.shutdown.cancel();
}

#[tokio::test]
async fn memory_queue_webhooks_chat_and_deletes_in_honchos_shapes() {
    let server = Server::start(false).await;
    let put = |path: &'static str, body: Value| server.send(reqwest::Method::PUT, path, body, None);
    let get = |path: &'static str| server.send(reqwest::Method::GET, path, Value::Null, None);
    server
        .post(
            "/v3/workspaces/w/sessions",
            json!({"id": "s", "peers": {"alice": {}, "bob": {"observe_others": true}}}),
        )
        .await;
    let (status, _) = server
        .post(
            "/v3/workspaces/w/sessions/s/messages",
            json!({"messages": [{"peer_id": "alice", "content": "I keep bees on my roof"}]}),
        )
        .await;
    assert_eq!(status, 201);

    // Peer cards.
    let (status, card) = put(
        "/v3/workspaces/w/peers/bob/card?target=alice",
        json!({"peer_card": ["Keeps bees"]}),
    )
    .await;
    assert_eq!((status, card), (200, json!({"peer_card": ["Keeps bees"]})));
    let (status, card) = get("/v3/workspaces/w/peers/bob/card?target=alice").await;
    assert_eq!((status, card), (200, json!({"peer_card": ["Keeps bees"]})));

    // Conclusions: 201, pages, representation, 204 on delete.
    let (status, made) = server
        .post(
            "/v3/workspaces/w/conclusions",
            json!({"conclusions": [{"content": "Alice keeps bees", "observer_id": "bob", "observed_id": "alice", "session_id": "s"}]}),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made[0]["level"], "explicit");
    let (status, page) = server
        .post(
            "/v3/workspaces/w/conclusions/list",
            json!({"filters": {"observer_id": "bob"}}),
        )
        .await;
    assert_eq!((status, &page["total"]), (200, &json!(1)), "{page}");
    let (status, representation) = server
        .post("/v3/workspaces/w/peers/bob/representation", json!({"target": "alice"}))
        .await;
    assert_eq!(status, 200, "{representation}");
    assert!(
        representation["representation"]
            .as_str()
            .unwrap()
            .contains("Alice keeps bees"),
        "{representation}"
    );
    let (status, context) = get("/v3/workspaces/w/peers/bob/context?target=alice").await;
    assert_eq!((status, &context["target_id"]), (200, &json!("alice")), "{context}");
    assert_eq!(context["peer_card"], json!(["Keeps bees"]));
    let (status, context) =
        get("/v3/workspaces/w/sessions/s/context?tokens=2000&peer_target=alice&peer_perspective=bob").await;
    assert_eq!(status, 200, "{context}");
    assert_eq!(context["messages"][0]["content"], "I keep bees on my roof");
    assert!(
        context["peer_representation"].as_str().unwrap().contains("bees"),
        "{context}"
    );
    // A parameter given twice takes its last value, which alone is read.
    let (status, again) = get(
        "/v3/workspaces/w/sessions/s/context?tokens=x&tokens=2000&summary=maybe&summary=true\
         &peer_target=carol&peer_target=alice&peer_perspective=bob",
    )
    .await;
    assert_eq!((status, &again["messages"]), (200, &context["messages"]), "{again}");
    assert_eq!(again["peer_representation"], context["peer_representation"]);
    let (status, refused) = get("/v3/workspaces/w/sessions/s/context?tokens=2000&tokens=x").await;
    assert_eq!(status, 422, "{refused}");
    let (status, summaries) = get("/v3/workspaces/w/sessions/s/summaries").await;
    assert_eq!(
        (status, summaries),
        (200, json!({"id": "s", "short_summary": null, "long_summary": null}))
    );
    let conclusion = made[0]["id"].as_str().unwrap();
    assert_eq!(made[0]["source_ids"], json!([]), "Honcho 3.1's fields: {made}");
    assert_eq!(made[0]["times_derived"], 1, "{made}");
    let one = format!("/v3/workspaces/w/conclusions/{conclusion}");
    let (status, got) = server.send(reqwest::Method::GET, &one, Value::Null, None).await;
    assert_eq!((status, &got), (200, &made[0]), "Honcho 3.1's conclusion get");
    let (status, _) = server.send(reqwest::Method::DELETE, &one, Value::Null, None).await;
    assert_eq!(status, 204);
    let (status, gone) = server.send(reqwest::Method::GET, &one, Value::Null, None).await;
    assert_eq!(status, 404, "a deleted conclusion is not found: {gone}");

    // Queue status: per-session counts, none when filtered by session.
    let (status, queue) = get("/v3/workspaces/w/queue/status").await;
    assert_eq!(status, 200, "{queue}");
    assert!(queue["total_work_units"].as_i64().unwrap() >= 1, "{queue}");
    assert!(queue["sessions"]["s"]["pending_work_units"].is_i64(), "{queue}");
    // No model here: said in words, not only by a null model.
    assert_eq!(
        queue["derivation"],
        json!({"observations": null, "summaries": null, "observation_mode": "extractive", "summary_mode": "extractive"}),
        "{queue}"
    );
    let (status, queue) = get("/v3/workspaces/w/queue/status?session_id=s").await;
    assert_eq!((status, &queue["sessions"]), (200, &Value::Null), "{queue}");

    // Webhooks: 201 then 200, a page, a test event, 204 on delete.
    let (status, endpoint) = server
        .post(
            "/v3/workspaces/w/webhooks",
            json!({"url": "https://hooks.example.com/roncho"}),
        )
        .await;
    assert_eq!(status, 201, "{endpoint}");
    assert_eq!(
        server
            .post(
                "/v3/workspaces/w/webhooks",
                json!({"url": "https://hooks.example.com/roncho"})
            )
            .await
            .0,
        200
    );
    let (status, hooks) = get("/v3/workspaces/w/webhooks").await;
    assert_eq!((status, &hooks["total"]), (200, &json!(1)));
    let (status, tested) = get("/v3/workspaces/w/webhooks/test").await;
    assert_eq!((status, tested), (200, Value::Null));
    let (status, refused) = server
        .post("/v3/workspaces/w/webhooks", json!({"url": "http://127.0.0.1:9/hook"}))
        .await;
    assert_eq!(status, 422, "a loopback webhook: {refused}");
    let endpoint = endpoint["id"].as_str().unwrap();
    let (status, _) = server
        .send(
            reqwest::Method::DELETE,
            &format!("/v3/workspaces/w/webhooks/{endpoint}"),
            Value::Null,
            None,
        )
        .await;
    assert_eq!(status, 204);

    // Chat: JSON, and Honcho's server-sent events ending with done.
    let (status, answer) = server
        .post(
            "/v3/workspaces/w/peers/bob/chat",
            json!({"query": "What does alice keep?", "target": "alice"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer.get("content").is_some(), "{answer}");
    let response = server
        .http
        .post(format!("{}/v3/workspaces/w/peers/bob/chat", server.base))
        .json(&json!({"query": "What does alice keep?", "target": "alice", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = response.text().await.unwrap();
    let last = events.trim_end().lines().last().unwrap();
    assert_eq!(last, r#"data: {"done":true}"#, "{events}");
    assert!(events.starts_with("data: {"), "{events}");
    let (status, _) = server
        .post(
            "/v3/workspaces/w/peers/bob/chat",
            json!({"query": "q", "response_format": {"type": "array"}}),
        )
        .await;
    assert_eq!(status, 422, "a schema whose root is not an object");
    let (status, _) = server
        .post(
            "/v3/workspaces/w/peers/bob/chat",
            json!({"query": "q", "response_format": ["not", "an", "object"]}),
        )
        .await;
    assert_eq!(status, 422);
    // Without a model a response format cannot be filled: said, not `null`.
    let (status, unfilled) = server
        .post(
            "/v3/workspaces/w/peers/bob/chat",
            json!({"query": "q", "response_format": {"type": "object", "properties": {"food": {"type": "string"}}}}),
        )
        .await;
    assert_eq!(status, 409, "{unfilled}");
    assert!(
        unfilled["detail"]
            .as_str()
            .unwrap()
            .contains("response_format needs a model"),
        "{unfilled}"
    );
    // A target that is no peer is 404, as in Honcho, on either transport.
    for stream in [false, true] {
        let (status, unknown) = server
            .post(
                "/v3/workspaces/w/peers/bob/chat",
                json!({"query": "What does the ghost keep?", "target": "ghost", "stream": stream}),
            )
            .await;
        assert_eq!(status, 404, "{unknown}");
        assert!(unknown["detail"].as_str().unwrap().contains("ghost"), "{unknown}");
    }

    // Dreams need a dream model (400 without, as Honcho's disabled dreams);
    // keys need a server with a secret; a workspace with sessions is not deleted.
    let (status, no_dreams) = server
        .post(
            "/v3/workspaces/w/schedule_dream",
            json!({"observer": "bob", "observed": "alice"}),
        )
        .await;
    assert_eq!(status, 400, "{no_dreams}");
    assert!(no_dreams["detail"].is_string());
    assert_eq!(server.post("/v3/keys?workspace_id=w", Value::Null).await.0, 405);
    let (status, conflict) = server
        .send(reqwest::Method::DELETE, "/v3/workspaces/w", Value::Null, None)
        .await;
    assert_eq!(status, 409, "{conflict}");
    assert!(
        conflict["detail"].as_str().unwrap().contains("active session"),
        "{conflict}"
    );
    server
        .send(
            reqwest::Method::DELETE,
            "/v3/workspaces/w/sessions/s",
            Value::Null,
            None,
        )
        .await;
    let (status, deleted) = server
        .send(reqwest::Method::DELETE, "/v3/workspaces/w", Value::Null, None)
        .await;
    assert_eq!(
        (status, deleted),
        (202, json!({"message": "Workspace deletion accepted"}))
    );
    server.served.shutdown.cancel();
}

/// A multipart form of `fields` and a `file` part, as the SDKs send uploads.
fn multipart(fields: &[(&str, &str)], file: (&str, &str, &[u8])) -> (String, Vec<u8>) {
    let boundary = "roncho-test-boundary-7d1f";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\ncontent-disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    let (filename, content_type, bytes) = file;
    body.extend_from_slice(
        format!(
            "--{boundary}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\ncontent-type: {content_type}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[tokio::test]
async fn uploads_become_messages_with_honchos_refusals() {
    let server = Server::start(false).await;
    let upload = |fields: &[(&str, &str)], file: (&str, &str, &[u8])| {
        let (content_type, body) = multipart(fields, file);
        let request = server
            .http
            .post(format!("{}/v3/workspaces/w/sessions/s/messages/upload", server.base))
            .header("content-type", content_type)
            .body(body);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    let (status, messages) = upload(
        &[("peer_id", "alice"), ("metadata", r#"{"source": "notes"}"#)],
        ("notes.txt", "text/plain", b"Mochi the cat eats salmon."),
    )
    .await;
    assert_eq!(status, 201, "{messages}");
    assert_eq!(messages[0]["content"], "Mochi the cat eats salmon.");
    assert_eq!(messages[0]["peer_id"], "alice");
    assert_eq!(messages[0]["metadata"]["source"], "notes");
    // JSON is re-serialised as Python's json.dumps writes it.
    let (status, messages) = upload(
        &[("peer_id", "alice")],
        ("a.json", "application/json", br#"{"a":1,"b":[true,null]}"#),
    )
    .await;
    assert_eq!(
        (status, &messages[0]["content"]),
        (201, &json!(r#"{"a": 1, "b": [true, null]}"#))
    );
    let (status, refused) = upload(&[("peer_id", "alice")], ("cat.png", "image/png", b"\x89PNG")).await;
    assert_eq!(status, 415, "{refused}");
    let big = vec![b'a'; 5 * 1024 * 1024 + 1];
    let (status, refused) = upload(&[("peer_id", "alice")], ("big.txt", "text/plain", &big)).await;
    assert_eq!(status, 413, "{refused}");
    let (status, refused) = upload(
        &[("peer_id", "alice"), ("metadata", "[1]")],
        ("a.txt", "text/plain", b"x"),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    let (status, refused) = upload(&[], ("a.txt", "text/plain", b"x")).await;
    assert_eq!(
        (status, &refused["detail"][0]["loc"]),
        (422, &json!(["body", "peer_id"]))
    );
    server.served.shutdown.cancel();
}

/// Where Honcho's OpenAPI document is on this machine, if anywhere.
fn honcho_spec() -> Option<Value> {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    [
        manifest.join("../../../shared/reference/honcho-v3-openapi.json"),
        std::path::PathBuf::from("/work/shared/reference/honcho-v3-openapi.json"),
    ]
    .iter()
    .find_map(|path| std::fs::read_to_string(path).ok())
    .map(|text| serde_json::from_str(&text).unwrap())
}

#[tokio::test]
async fn every_honcho_operation_is_routed_and_described() {
    let fixture = include_str!("../honcho-v3-operations.txt");
    let operations: Vec<(String, String, String)> = fixture
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            (parts[0].to_owned(), parts[1].to_owned(), parts[2].to_owned())
        })
        .collect();
    assert_eq!(operations.len(), 46);
    if let Some(spec) = honcho_spec() {
        let mut published: Vec<(String, String, String)> = Vec::new();
        for (path, methods) in spec["paths"].as_object().unwrap() {
            for (method, operation) in methods.as_object().unwrap() {
                let id = operation["operationId"].as_str().unwrap().to_owned();
                published.push((method.to_uppercase(), path.clone(), id));
            }
        }
        let mut fixture_sorted = operations.clone();
        published.sort();
        fixture_sorted.sort();
        assert_eq!(published, fixture_sorted, "the fixture is Honcho's published document");
    }
    // Honcho's scope routes (honcho-v3.md §2.2, routes 32–38) are not in its
    // published document yet; they are served and described all the same.
    let scope_routes = [
        ("POST", "/v3/workspaces/{workspace_id}/scopes"),
        ("POST", "/v3/workspaces/{workspace_id}/scopes/list"),
        ("GET", "/v3/workspaces/{workspace_id}/scopes/{scope_id}"),
        ("POST", "/v3/workspaces/{workspace_id}/scopes/{scope_id}/sessions"),
        (
            "DELETE",
            "/v3/workspaces/{workspace_id}/scopes/{scope_id}/sessions/{session_id}",
        ),
        ("POST", "/v3/workspaces/{workspace_id}/scopes/{scope_id}/sessions/list"),
        ("GET", "/v3/workspaces/{workspace_id}/scopes/{scope_id}/status"),
        // Honcho 3.1's conclusion get.
        ("GET", "/v3/workspaces/{workspace_id}/conclusions/{conclusion_id}"),
    ];
    let server = Server::start(false).await;
    let (status, document) = server.send(reqwest::Method::GET, "/docs", Value::Null, None).await;
    assert_eq!(status, 200);
    let mut routes: Vec<(String, String, Option<String>)> = operations
        .iter()
        .map(|(method, path, id)| (method.clone(), path.clone(), Some(id.clone())))
        .collect();
    routes.extend(
        scope_routes
            .iter()
            .map(|(method, path)| ((*method).to_owned(), (*path).to_owned(), None)),
    );
    for (method, path, operation_id) in &routes {
        let described = &document["paths"][path][method.to_lowercase()]["operationId"];
        match operation_id {
            Some(id) => assert_eq!(described, id, "{method} {path} is not described by GET /docs"),
            None => assert!(described.is_string(), "{method} {path} is not described by GET /docs"),
        }
        let concrete = path
            .replace("{scope_id}", "team")
            .replace("{workspace_id}", "w")
            .replace("{peer_id}", "p")
            .replace("{session_id}", "s")
            .replace("{message_id}", "m")
            .replace("{conclusion_id}", "c")
            .replace("{endpoint_id}", "e");
        assert!(
            !concrete.contains('{'),
            "{path} has a parameter this test does not fill"
        );
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = server
            .http
            .request(method.clone(), format!("{}{concrete}", server.base))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        assert_ne!(status, 405, "{method} {path}: no handler for the method");
        assert_ne!(
            (status, body.as_str()),
            (404, r#"{"detail":"Not Found"}"#),
            "{method} {path}: no route"
        );
    }
    let (status, body) = server
        .send(reqwest::Method::GET, "/v3/no/such/route", Value::Null, None)
        .await;
    assert_eq!(
        (status, body),
        (404, json!({"detail": "Not Found"})),
        "the fallback this test tells apart"
    );
    server.served.shutdown.cancel();
}

/// Scopes over REST (honcho-v3 §2.2, routes 32–38, and the `scope`
/// options), with the deriver's worker draining the queue: a scope gathers
/// what is said in its sessions, before (backfill) and after it joined,
/// reads of it see only its sessions, it cannot be used as a peer, only a
/// workspace key reaches it, and a session leaving takes its memory along.
#[tokio::test]
async fn scopes_gather_their_sessions_memory() {
    use reqwest::Method;
    use roncho_deriver::worker::{Worker, WorkerConfig};
    let server = Server::start(true).await;
    let admin = server.key(Claims {
        ad: Some(true),
        ..Claims::default()
    });
    let send = |method: Method, path: &'static str, body: Value| {
        let server = &server;
        let admin = admin.clone();
        async move { server.send(method, path, body, Some(&admin)).await }
    };
    let store = server.store.clone();
    let queue: Arc<dyn roncho_core::queue::WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(server.store.clone()));
    let worker = Worker::new(store, queue, WorkerConfig::default());
    let drain = || async { while worker.run_once().await.unwrap() {} };

    // Two sessions with things said before any scope exists.
    send(Method::POST, "/v3/workspaces", json!({"id": "w"})).await;
    let (status, _) = send(
        Method::POST,
        "/v3/workspaces/w/sessions",
        json!({"id": "kitchen", "peers": {"alice": {}, "bob": {}}}),
    )
    .await;
    assert_eq!(status, 201);
    send(
        Method::POST,
        "/v3/workspaces/w/sessions",
        json!({"id": "garage", "peers": {"alice": {}, "bob": {}}}),
    )
    .await;
    let (status, _) = send(
        Method::POST,
        "/v3/workspaces/w/sessions/kitchen/messages",
        json!({"messages": [
            {"peer_id": "alice", "content": "I bake sourdough bread every Sunday."},
            {"peer_id": "bob", "content": "I adopted a grey kitten named Mochi."}
        ]}),
    )
    .await;
    assert_eq!(status, 201);
    send(
        Method::POST,
        "/v3/workspaces/w/sessions/garage/messages",
        json!({"messages": [{"peer_id": "alice", "content": "My motorbike carburetor needs cleaning."}]}),
    )
    .await;
    drain().await;

    // Routes 32–34: get-or-create, list, get.
    let (status, scope) = send(
        Method::POST,
        "/v3/workspaces/w/scopes",
        json!({"id": "home", "metadata": {"room": "kitchen"}}),
    )
    .await;
    assert_eq!(status, 201, "{scope}");
    assert_eq!(
        (scope["id"].as_str(), &scope["metadata"]),
        (Some("home"), &json!({"room": "kitchen"}))
    );
    assert_eq!(
        send(Method::POST, "/v3/workspaces/w/scopes", json!({"id": "home"}))
            .await
            .0,
        200
    );
    send(Method::POST, "/v3/workspaces/w/scopes", json!({"id": "empty"})).await;
    let (status, page) = send(Method::POST, "/v3/workspaces/w/scopes/list", Value::Null).await;
    assert_eq!((status, ids(&page["items"])), (200, vec!["home", "empty"]));
    let (status, got) = send(Method::GET, "/v3/workspaces/w/scopes/home", Value::Null).await;
    assert_eq!((status, got["id"].as_str()), (200, Some("home")));
    assert_eq!(
        send(Method::GET, "/v3/workspaces/w/scopes/nope", Value::Null).await.0,
        404
    );
    // A scope is not a participant: peer lists leave it out unless asked.
    let (_, peers) = send(Method::POST, "/v3/workspaces/w/peers/list", Value::Null).await;
    assert_eq!(ids(&peers["items"]), ["alice", "bob"]);
    let (_, scopes) = send(Method::POST, "/v3/workspaces/w/peers/list", json!({"kind": "scope"})).await;
    assert_eq!(ids(&scopes["items"]), ["scope.home", "scope.empty"]);
    let (_, all) = send(Method::POST, "/v3/workspaces/w/peers/list", json!({"kind": "all"})).await;
    assert_eq!(all["total"], 4);

    // Route 35: a session joins; its backfill copies what was said there.
    let (status, body) = send(
        Method::POST,
        "/v3/workspaces/w/scopes/home/sessions",
        json!({"session_ids": ["kitchen", "missing"]}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = send(
        Method::POST,
        "/v3/workspaces/w/scopes/home/sessions",
        json!({"session_ids": ["kitchen"]}),
    )
    .await;
    assert_eq!(status, 204);
    let (_, pending) = send(Method::GET, "/v3/workspaces/w/scopes/home/status", Value::Null).await;
    assert_eq!(pending["backfill_status"]["kitchen"]["state"], "pending", "{pending}");
    drain().await;
    let (status, done) = send(Method::GET, "/v3/workspaces/w/scopes/home/status", Value::Null).await;
    let kitchen = &done["backfill_status"]["kitchen"];
    assert_eq!((status, kitchen["state"].as_str()), (200, Some("completed")), "{done}");
    assert!(kitchen["docs_copied"].as_i64().unwrap() >= 2, "{done}");
    assert!(kitchen["updated_at"].as_str().unwrap().ends_with('Z'));
    let (_, sessions) = send(Method::POST, "/v3/workspaces/w/scopes/home/sessions/list", Value::Null).await;
    assert_eq!(ids(&sessions["items"]), ["kitchen"]);

    // What is said after the scope joined reaches it through derivation.
    send(
        Method::POST,
        "/v3/workspaces/w/sessions/kitchen/messages",
        json!({"messages": [{"peer_id": "alice", "content": "I keep my starter in the fridge."}]}),
    )
    .await;
    send(
        Method::POST,
        "/v3/workspaces/w/sessions/garage/messages",
        json!({"messages": [{"peer_id": "alice", "content": "I ride the motorbike to work."}]}),
    )
    .await;
    drain().await;
    let representation = |scope: Value| {
        let server = &server;
        let admin = admin.clone();
        async move {
            let (status, body) = server
                .send(
                    Method::POST,
                    "/v3/workspaces/w/peers/alice/representation",
                    json!({"scope": scope}),
                    Some(&admin),
                )
                .await;
            assert_eq!(status, 200, "{body}");
            body["representation"].as_str().unwrap().to_owned()
        }
    };
    let home = representation(json!("home")).await;
    assert!(home.contains("sourdough") && home.contains("starter"), "{home}");
    assert!(!home.contains("motorbike"), "the garage is not in the scope: {home}");
    // A list of scopes reads alice's own memory, limited to their sessions.
    let union = representation(json!(["home", "empty"])).await;
    assert!(union.contains("sourdough") && !union.contains("motorbike"), "{union}");
    assert_eq!(representation(json!(["empty", "empty"])).await, "");

    // Search within a scope's sessions; a scope without sessions finds nothing.
    let search = |body: Value| {
        let server = &server;
        let admin = admin.clone();
        async move {
            server
                .send(Method::POST, "/v3/workspaces/w/search", body, Some(&admin))
                .await
        }
    };
    let (status, found) = search(json!({"query": "motorbike sourdough", "scope": "home"})).await;
    assert_eq!(status, 200, "{found}");
    let sessions: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["session_id"].as_str().unwrap())
        .collect();
    assert!(
        !sessions.is_empty() && sessions.iter().all(|s| *s == "kitchen"),
        "{found}"
    );
    let (_, nothing) = search(json!({"query": "motorbike", "scope": ["empty"]})).await;
    assert_eq!(nothing, json!([]));
    let (status, body) = search(json!({"query": "x", "scope": "home", "filters": {"session_id": "garage"}})).await;
    assert_eq!(status, 422, "scope and a session filter: {body}");

    // Context and chat read the scope's memory.
    let (status, context) = send(
        Method::GET,
        "/v3/workspaces/w/sessions/kitchen/context?peer_target=alice&scope=home",
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{context}");
    assert!(
        context["peer_representation"].as_str().unwrap().contains("sourdough"),
        "{context}"
    );
    let (status, _) = send(
        Method::GET,
        "/v3/workspaces/w/sessions/kitchen/context?scope=home",
        Value::Null,
    )
    .await;
    assert_eq!(status, 422, "a scope needs peer_target");
    let (status, answer) = send(
        Method::POST,
        "/v3/workspaces/w/peers/alice/chat",
        json!({"query": "What does alice bake?", "scope": "home"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["content"].as_str().unwrap_or_default().contains("sourdough"),
        "{answer}"
    );
    // Named alone, a scope answers from its own memory; one scope in a list
    // is a list (Honcho 3.1): alice's memory, limited to its sessions.
    for (scope, observer) in [(json!("home"), "scope.home"), (json!(["home"]), "alice")] {
        let (status, answer) = send(
            Method::POST,
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "What does alice bake?", "scope": scope, "include_evidence": true}),
        )
        .await;
        assert_eq!(status, 200, "{answer}");
        let observers: Vec<&str> = answer["evidence"]["conclusions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|conclusion| conclusion["observer_id"].as_str().unwrap())
            .collect();
        assert!(
            !observers.is_empty() && observers.iter().all(|o| *o == observer),
            "{scope}: {answer}"
        );
    }
    let listed = representation(json!(["home"])).await;
    assert!(
        listed.contains("sourdough") && !listed.contains("motorbike"),
        "{listed}"
    );

    // A scope is never a participant.
    for (method, path, body) in [
        (Method::POST, "/v3/workspaces/w/peers", json!({"id": "scope.home"})),
        (
            Method::POST,
            "/v3/workspaces/w/sessions/kitchen/messages",
            json!({"messages": [{"peer_id": "scope.home", "content": "hi"}]}),
        ),
        (
            Method::DELETE,
            "/v3/workspaces/w/sessions/kitchen/peers",
            json!(["scope.home"]),
        ),
        (
            Method::POST,
            "/v3/workspaces/w/conclusions",
            json!({"conclusions": [{"content": "x", "observer_id": "alice", "observed_id": "scope.home"}]}),
        ),
        (
            Method::POST,
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "who?", "target": "scope.home"}),
        ),
    ] {
        let (status, body) = server.send(method, path, body, Some(&admin)).await;
        assert_eq!(status, 422, "{path}: {body}");
    }

    // Scopes are the workspace's: a peer key reaches neither the routes nor the option.
    let alice = server.key(Claims {
        w: Some("w".into()),
        p: Some("alice".into()),
        ..Claims::default()
    });
    let workspace = server.key(Claims {
        w: Some("w".into()),
        ..Claims::default()
    });
    assert_eq!(
        server
            .send(Method::POST, "/v3/workspaces/w/scopes/list", Value::Null, Some(&alice))
            .await
            .0,
        401
    );
    let scoped = json!({"scope": "home"});
    let path = "/v3/workspaces/w/peers/alice/representation";
    assert_eq!(
        server.send(Method::POST, path, scoped.clone(), Some(&alice)).await.0,
        401
    );
    assert_eq!(server.send(Method::POST, path, json!({}), Some(&alice)).await.0, 200);
    assert_eq!(server.send(Method::POST, path, scoped, Some(&workspace)).await.0, 200);

    // gRPC sees the same scopes.
    let mut request = tonic::Request::new(pb::ListScopesRequest {
        workspace_id: "w".into(),
        ..Default::default()
    });
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {admin}").parse().unwrap());
    let listed = RecallServiceClient::new(server.served.channel.clone())
        .list_scopes(request)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed.items.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["home", "empty"]
    );

    // A session created into a scope (got or created) joins it.
    let (status, _) = send(
        Method::POST,
        "/v3/workspaces/w/sessions",
        json!({"id": "porch", "scopes": ["home", "outdoors"]}),
    )
    .await;
    assert_eq!(status, 201);
    let (_, outdoors) = send(
        Method::POST,
        "/v3/workspaces/w/scopes/outdoors/sessions/list",
        Value::Null,
    )
    .await;
    assert_eq!(ids(&outdoors["items"]), ["porch"]);

    // Route 36: the kitchen leaves the scope, and what the scope learned there goes.
    let (status, _) = send(
        Method::DELETE,
        "/v3/workspaces/w/scopes/home/sessions/kitchen",
        Value::Null,
    )
    .await;
    assert_eq!(status, 204);
    assert_eq!(representation(json!("home")).await, "");
    let (_, status_after) = send(Method::GET, "/v3/workspaces/w/scopes/home/status", Value::Null).await;
    assert!(
        status_after["backfill_status"].get("kitchen").is_none(),
        "{status_after}"
    );
    assert_eq!(
        send(
            Method::DELETE,
            "/v3/workspaces/w/scopes/home/sessions/kitchen",
            Value::Null
        )
        .await
        .0,
        404
    );
    // What alice said is hers still.
    assert!(
        server
            .send(
                Method::POST,
                "/v3/workspaces/w/peers/alice/representation",
                json!({}),
                Some(&admin)
            )
            .await
            .1["representation"]
            .as_str()
            .unwrap()
            .contains("sourdough")
    );
}

/// roncho's own routes beside Honcho's: a message deleted with its receipt,
/// the receipt read back, and both refused to a key that may not.
#[tokio::test]
async fn messages_are_erased_with_a_receipt() {
    let server = Server::start(true).await;
    let admin = server.key(Claims {
        ad: Some(true),
        ..Claims::default()
    });
    let batch = json!({"messages": [
        {"peer_id": "alice", "content": "my old address is 12 Elm Street"},
        {"peer_id": "alice", "content": "I moved last year"},
    ]});
    let (status, created) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/w/sessions/s/messages",
            batch,
            Some(&admin),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let id = created[0]["id"].as_str().unwrap();
    let path = format!("/v3/workspaces/w/sessions/s/messages/{id}");

    let peer = server.key(Claims {
        w: Some("w".into()),
        p: Some("alice".into()),
        ..Claims::default()
    });
    let (status, refused) = server
        .send(reqwest::Method::DELETE, &path, Value::Null, Some(&peer))
        .await;
    // Honcho answers a key that does not reach a resource 401, with the reason.
    assert_eq!(status, 401, "a peer key may not delete messages: {refused}");
    assert!(
        refused["detail"].as_str().unwrap().contains("permission denied"),
        "{refused}"
    );

    let (status, receipt) = server
        .send(reqwest::Method::DELETE, &path, Value::Null, Some(&admin))
        .await;
    assert_eq!(status, 202, "{receipt}");
    assert_eq!(
        receipt["scope"],
        json!({"kind": "message", "session_id": "s", "message_id": id})
    );
    assert_eq!(receipt["counts"]["messages"], 1, "{receipt}");
    let (status, gone) = server
        .send(reqwest::Method::GET, &path, Value::Null, Some(&admin))
        .await;
    assert_eq!(status, 404, "{gone}");

    let (_, document) = server.send(reqwest::Method::GET, "/docs", Value::Null, None).await;
    for (method, path, operation) in roncho_rest::routes::EXTENSIONS {
        assert_eq!(
            document["paths"][path][method]["operationId"], *operation,
            "GET /docs describes {path}"
        );
    }

    let receipt_path = format!("/v3/workspaces/w/erasures/{}", receipt["id"].as_str().unwrap());
    let (status, read) = server
        .send(reqwest::Method::GET, &receipt_path, Value::Null, Some(&admin))
        .await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["id"], receipt["id"]);
    assert!(matches!(read["state"].as_str(), Some("running" | "complete")), "{read}");
    let (status, _) = server
        .send(reqwest::Method::GET, &receipt_path, Value::Null, Some(&peer))
        .await;
    assert_eq!(status, 401, "a peer key may not read receipts");
    let (status, missing) = server
        .send(
            reqwest::Method::GET,
            "/v3/workspaces/w/erasures/nope",
            Value::Null,
            Some(&admin),
        )
        .await;
    assert_eq!(status, 404, "{missing}");
    server.served.shutdown.cancel();
}

/// The tokens of a session context as its reply carries it: the
/// representation and the card (its lines joined) counted with the
/// tokenizer of the budget, the summary and messages by their counts.
fn context_tokens(representation: &str, card: &[String], summary: i64, messages: &[i64]) -> i64 {
    let count = |text: &str| {
        if text.is_empty() {
            0
        } else {
            roncho_core::tokens::count(text)
        }
    };
    count(representation) + count(&card.join("\n")) + summary + messages.iter().sum::<i64>()
}

#[tokio::test]
async fn every_context_route_holds_its_budget_and_says_what_it_left_out() {
    let server = Server::start(false).await;
    server
        .post(
            "/v3/workspaces/w/sessions",
            json!({"id": "s", "peers": {"alice": {}, "bob": {"observe_others": true}}}),
        )
        .await;
    let turns: Vec<Value> = (0..6)
        .map(|n| json!({"peer_id": "alice", "content": format!("Turn {n}: I spent the weekend repotting my tomatoes")}))
        .collect();
    assert_eq!(
        server
            .post("/v3/workspaces/w/sessions/s/messages", json!({"messages": turns}))
            .await
            .0,
        201
    );
    let conclusions: Vec<Value> = (0..60)
        .map(|n| json!({
            "content": format!("Alice mentioned detail number {n} about her garden, her neighbours and the allotment she rents by the river"),
            "observer_id": "bob", "observed_id": "alice", "session_id": "s",
        }))
        .collect();
    assert_eq!(
        server
            .post("/v3/workspaces/w/conclusions", json!({"conclusions": conclusions}))
            .await
            .0,
        201
    );
    let card: Vec<String> = (0..40)
        .map(|n| format!("ATTRIBUTE: grows variety {n} of heirloom tomato"))
        .collect();
    let (status, _) = server
        .send(
            reqwest::Method::PUT,
            "/v3/workspaces/w/peers/bob/card?target=alice",
            json!({"peer_card": card}),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let get = |tokens: i64| {
        let path =
            format!("/v3/workspaces/w/sessions/s/context?tokens={tokens}&peer_target=alice&peer_perspective=bob");
        let server = &server;
        async move { server.send(reqwest::Method::GET, &path, Value::Null, None).await }
    };
    let strings = |value: &Value| -> Vec<String> {
        value.as_array().map_or_else(Vec::new, |items| {
            items.iter().map(|item| item.as_str().unwrap().to_owned()).collect()
        })
    };

    // Whole, the memory alone is more than ten times the budget below.
    let (status, whole) = get(100_000).await;
    assert_eq!(status, 200, "{whole}");
    let whole_memory = context_tokens(
        whole["peer_representation"].as_str().unwrap(),
        &strings(&whole["peer_card"]),
        0,
        &[],
    );
    let budget = 150;
    assert!(whole_memory > 10 * budget, "the memory is {whole_memory} tokens");
    assert!(
        whole.get("omitted").is_none(),
        "nothing left out of a large budget: {whole}"
    );

    // REST: within the budget, and it says what it left out.
    let (status, cut) = get(budget).await;
    assert_eq!(status, 200, "{cut}");
    let messages: Vec<i64> = cut["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["token_count"].as_i64().unwrap())
        .collect();
    let summary = cut["summary"]["token_count"].as_i64().unwrap_or(0);
    let used = context_tokens(
        cut["peer_representation"].as_str().unwrap(),
        &strings(&cut["peer_card"]),
        summary,
        &messages,
    );
    assert!(used <= budget, "REST: {used} tokens for a budget of {budget}: {cut}");
    assert!(!messages.is_empty(), "messages keep their half of the budget: {cut}");
    let left_out = cut["omitted"]["conclusions"].as_i64().unwrap();
    assert!(left_out > 0 && left_out < 60, "{cut}");
    assert!(cut["omitted"]["peer_card_lines"].as_i64().unwrap() > 0, "{cut}");
    assert!(
        cut["peer_representation"]
            .as_str()
            .unwrap()
            .contains("detail number 59"),
        "the most recent conclusion is kept first: {cut}"
    );

    // gRPC: the same budget, the same counts.
    let context = RecallServiceClient::new(server.served.channel.clone())
        .get_session_context(pb::GetSessionContextRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            tokens: Some(budget as i32),
            peer_target: Some("alice".into()),
            peer_perspective: Some("bob".into()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let used = context_tokens(
        context.peer_representation.as_deref().unwrap_or_default(),
        &context.peer_card,
        context.summary.as_ref().map_or(0, |summary| summary.token_count),
        &context
            .messages
            .iter()
            .map(|message| message.token_count)
            .collect::<Vec<_>>(),
    );
    assert!(used <= budget, "gRPC: {used} tokens for a budget of {budget}");
    assert_eq!(context.omitted_conclusions, left_out);
    assert!(context.omitted_peer_card_lines > 0);

    // Peer context and representation: the same budget over REST, gRPC and MCP.
    let (status, peer) = server
        .send(
            reqwest::Method::GET,
            &format!("/v3/workspaces/w/peers/bob/context?target=alice&tokens={budget}"),
            Value::Null,
            None,
        )
        .await;
    assert_eq!(status, 200, "{peer}");
    let used = context_tokens(
        peer["representation"].as_str().unwrap(),
        &strings(&peer["peer_card"]),
        0,
        &[],
    );
    assert!(used <= budget, "REST peer context: {used} tokens: {peer}");
    assert!(
        peer["representation"].as_str().unwrap().contains("detail number 59"),
        "{peer}"
    );
    assert!(peer["omitted"]["conclusions"].as_i64().unwrap() > 0, "{peer}");
    assert!(peer["omitted"]["peer_card_lines"].as_i64().unwrap() > 0, "{peer}");
    let (_, uncut) = server
        .send(
            reqwest::Method::GET,
            "/v3/workspaces/w/peers/bob/context?target=alice",
            Value::Null,
            None,
        )
        .await;
    assert!(uncut.get("omitted").is_none(), "no budget, Honcho's reply: {uncut}");
    assert_eq!(strings(&uncut["peer_card"]).len(), 40, "{uncut}");

    let representation_body = json!({"target": "alice", "max_conclusions": 60, "tokens": budget});
    let (status, representation) = server
        .post("/v3/workspaces/w/peers/bob/representation", representation_body)
        .await;
    assert_eq!(status, 200, "{representation}");
    let used = context_tokens(representation["representation"].as_str().unwrap(), &[], 0, &[]);
    assert!(used <= budget, "REST representation: {used} tokens: {representation}");
    assert!(used > budget / 2, "the budget is used, not wasted: {used}");
    assert!(
        representation["omitted"]["conclusions"].as_i64().unwrap() > 0,
        "{representation}"
    );

    let mut recall = RecallServiceClient::new(server.served.channel.clone());
    let peer = recall
        .get_peer_context(pb::GetPeerContextRequest {
            workspace_id: "w".into(),
            peer_id: "bob".into(),
            target: Some("alice".into()),
            tokens: Some(budget as i32),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let used = context_tokens(peer.representation.as_deref().unwrap(), &peer.peer_card, 0, &[]);
    assert!(used <= budget, "gRPC peer context: {used} tokens");
    assert!(peer.omitted_conclusions > 0 && peer.omitted_peer_card_lines > 0);
    let representation = recall
        .get_representation(pb::GetRepresentationRequest {
            workspace_id: "w".into(),
            peer_id: "bob".into(),
            target: Some("alice".into()),
            max_conclusions: Some(60),
            tokens: Some(budget as i32),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let used = context_tokens(&representation.representation, &[], 0, &[]);
    assert!(used <= budget, "gRPC representation: {used} tokens");
    assert!(representation.omitted_conclusions > 0);
    let refused = recall
        .get_representation(pb::GetRepresentationRequest {
            workspace_id: "w".into(),
            peer_id: "bob".into(),
            tokens: Some(0),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");

    let peer = server
        .mcp_tool(
            "get_peer_context",
            json!({"workspace_id": "w", "peer_id": "bob", "target_peer_id": "alice", "tokens": budget}),
        )
        .await;
    let peer: Value = serde_json::from_str(&peer).unwrap();
    let used = context_tokens(
        peer["representation"].as_str().unwrap(),
        &strings(&peer["peer_card"]),
        0,
        &[],
    );
    assert!(used <= budget, "MCP peer context: {used} tokens: {peer}");
    assert!(peer["omitted"]["conclusions"].as_i64().unwrap() > 0, "{peer}");
    let representation = server
        .mcp_tool(
            "get_representation",
            json!({"workspace_id": "w", "peer_id": "bob", "target_peer_id": "alice", "max_conclusions": 60, "tokens": budget}),
        )
        .await;
    let (markdown, note) = representation.rsplit_once("\n\n(").unwrap();
    let used = context_tokens(markdown, &[], 0, &[]);
    assert!(used <= budget, "MCP representation: {used} tokens");
    assert!(note.contains("left out to fit `tokens`"), "{note}");
    server.served.shutdown.cancel();
}

/// Honcho 3.1's workspace chat: every peer's memory answers (extractive
/// without a model), streamed too, with the evidence of what it read; and
/// peer chat gives evidence when asked.
#[tokio::test]
async fn workspace_chat_answers_from_every_peer_with_its_evidence() {
    let server = Server::start(false).await;
    server
        .post(
            "/v3/workspaces/w/sessions",
            json!({"id": "s", "peers": {"alice": {}, "bob": {}}}),
        )
        .await;
    let (status, said) = server
        .post(
            "/v3/workspaces/w/sessions/s/messages",
            json!({"messages": [
                {"peer_id": "alice", "content": "My sourdough starter finally doubled overnight"},
                {"peer_id": "bob", "content": "I rebuilt the carburetor on my motorbike"},
            ]}),
        )
        .await;
    assert_eq!(status, 201, "{said}");
    let bob_said = said[1]["id"].as_str().unwrap().to_owned();
    let (status, made) = server
        .post(
            "/v3/workspaces/w/conclusions",
            json!({"conclusions": [{"content": "Bob rebuilds motorbike carburetors himself", "observer_id": "alice", "observed_id": "bob", "session_id": "s"}]}),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    let conclusion = made[0]["id"].as_str().unwrap().to_owned();

    let (status, answer) = server
        .post(
            "/v3/workspaces/w/chat",
            json!({"query": "who rebuilt a motorbike carburetor?"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let content = answer["content"].as_str().unwrap();
    assert!(content.contains("carburetor"), "{content}");
    assert!(answer.get("evidence").is_none(), "evidence only when asked: {answer}");

    let (status, answer) = server
        .post(
            "/v3/workspaces/w/chat",
            json!({"query": "who rebuilt a motorbike carburetor?", "include_evidence": true}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let evidence = &answer["evidence"];
    let read: Vec<&str> = evidence["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(read.contains(&bob_said.as_str()), "{evidence}");
    let message = evidence["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == bob_said.as_str())
        .unwrap();
    assert_eq!(message["peer_id"], "bob");
    assert_eq!(message["session_id"], "s");
    assert!(message.get("content").is_none(), "identity only: {message}");
    // Its trace, by the id Honcho 3.2 names it with: sizes and ids, no text.
    let trace_id = evidence["reasoning_trace_id"].as_str().expect("a trace is kept");
    let (status, trace) = server
        .send(
            reqwest::Method::GET,
            &format!("/v3/workspaces/w/traces/{trace_id}"),
            Value::Null,
            None,
        )
        .await;
    assert_eq!(status, 200, "{trace}");
    assert_eq!(trace["id"], trace_id);
    assert_eq!(trace["peer_id"], Value::Null, "a workspace chat: {trace}");
    assert!(
        trace["read"]["messages"].to_string().contains(bob_said.as_str()),
        "{trace}"
    );
    assert!(!trace.to_string().contains("carburetor"), "{trace}");
    let found = evidence["conclusions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == conclusion.as_str());
    let found = found.unwrap_or_else(|| panic!("the conclusion was read: {evidence}"));
    assert_eq!(found["observer_id"], "alice");
    assert_eq!(found["observed_id"], "bob");
    assert!(found["created_at"].as_str().is_some(), "{found}");

    // Streamed: pieces, then `done` with the evidence.
    let response = server
        .http
        .post(format!("{}/v3/workspaces/w/chat", server.base))
        .json(&json!({"query": "who rebuilt a motorbike carburetor?", "stream": true, "include_evidence": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let (last, pieces) = events.split_last().unwrap();
    assert_eq!(last["done"], true, "{text}");
    assert!(
        last["evidence"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"] == bob_said.as_str()),
        "{last}"
    );
    let streamed: String = pieces
        .iter()
        .map(|piece| piece["delta"]["content"].as_str().unwrap())
        .collect();
    assert!(streamed.contains("carburetor"), "{streamed}");

    // Peer chat gives its evidence too.
    let (status, answer) = server
        .post(
            "/v3/workspaces/w/peers/alice/chat",
            json!({"query": "what does bob rebuild?", "target": "bob", "include_evidence": true}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer["evidence"]["conclusions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == conclusion.as_str()),
        "{answer}"
    );

    // Refusals: a peer is not a workspace field; an unknown workspace is 404; an empty query is 422.
    let (status, refused) = server
        .post("/v3/workspaces/w/chat", json!({"query": "x", "target": "bob"}))
        .await;
    assert_eq!(status, 422, "{refused}");
    let (status, refused) = server.post("/v3/workspaces/nowhere/chat", json!({"query": "x"})).await;
    assert_eq!(status, 404, "{refused}");
    let (status, refused) = server.post("/v3/workspaces/w/chat", json!({"query": " "})).await;
    assert_eq!(status, 422, "{refused}");
    server.served.shutdown.cancel();
}

/// `custom_instructions` go into prompts: each is a string of at most
/// 2,000 tokens, at a configuration's top or in a section, on every
/// resource that takes a configuration; a refused one leaves nothing.
#[tokio::test]
async fn custom_instructions_are_bounded_wherever_a_configuration_is_written() {
    let server = Server::start(false).await;
    let long = "word ".repeat(2_500);
    for (path, body) in [
        (
            "/v3/workspaces",
            json!({"id": "w", "configuration": {"custom_instructions": long}}),
        ),
        (
            "/v3/workspaces",
            json!({"id": "w", "configuration": {"dialectic": {"custom_instructions": 7}}}),
        ),
        (
            "/v3/workspaces/w0/peers",
            json!({"id": "alice", "configuration": {"dream": {"custom_instructions": long}}}),
        ),
        (
            "/v3/workspaces/w0/sessions",
            json!({"id": "s", "configuration": {"summary": {"custom_instructions": long}}}),
        ),
    ] {
        let (status, reply) = server.post(path, body).await;
        assert_eq!(status, 422, "{path}: {reply}");
        assert!(reply.to_string().contains("custom_instructions"), "{reply}");
    }
    let (status, listed) = server.post("/v3/workspaces/list", json!({})).await;
    assert_eq!(status, 200);
    assert!(
        !listed.to_string().contains("\"w\""),
        "the refused workspace was not made: {listed}"
    );
    let fits = json!({"id": "w", "configuration": {"custom_instructions": "Answer in French.", "dialectic": {"custom_instructions": null}}});
    assert_eq!(server.post("/v3/workspaces", fits).await.0, 201);
    server.served.shutdown.cancel();
}

/// Honcho 3.3: a conclusion written through the API names the messages it
/// was learned from; they are found by a filter, must exist, and take the
/// conclusion with them when they are erased.
#[tokio::test]
async fn conclusions_name_the_messages_they_were_learned_from() {
    let server = Server::start(false).await;
    let (status, created) = server
        .post(
            "/v3/workspaces/w/sessions/s/messages",
            json!({"messages": [
                {"peer_id": "alice", "content": "I keep bees on the roof"},
                {"peer_id": "alice", "content": "and I sell their honey"},
                {"peer_id": "bob", "content": "nice"},
            ]}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let message = |index: usize| created[index]["id"].as_str().unwrap().to_owned();
    let (bees, honey, nice) = (message(0), message(1), message(2));
    let conclusion = |content: &str, sources: Value| {
        json!({"conclusions": [{"content": content, "observer_id": "bob", "observed_id": "alice",
                                "session_id": "s", "source_message_ids": sources}]})
    };
    let (status, made) = server
        .post(
            "/v3/workspaces/w/conclusions",
            conclusion("Alice keeps bees", json!([bees, honey, bees])),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made[0]["source_message_ids"], json!([bees, honey]), "{made}");
    assert_eq!(made[0]["source_ids"], json!([bees, honey]), "{made}");
    let (status, plain) = server
        .post(
            "/v3/workspaces/w/conclusions",
            json!({"conclusions": [{"content": "Alice is busy", "observer_id": "bob", "observed_id": "alice"}]}),
        )
        .await;
    assert_eq!(status, 201, "{plain}");
    assert_eq!(plain[0]["source_message_ids"], json!([]), "{plain}");

    // Found by the messages they were learned from.
    let learned_from = |id: &str| json!({"filters": {"source_message_ids": {"contains": id}}});
    let (status, page) = server
        .post("/v3/workspaces/w/conclusions/list", learned_from(&honey))
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page["items"]), [made[0]["id"].as_str().unwrap()], "{page}");

    // A message that does not exist, or a malformed id: refused, nothing stored.
    let made_id = made[0]["id"].as_str().unwrap().to_owned();
    for (sources, expected) in [
        (json!(["no-such-message"]), 404),
        (json!(["has spaces"]), 404),
        (json!([bees, "no-such-message"]), 404),
        (json!([made_id]), 404),
        (json!([""]), 422),
        (json!(["\u{0000}"]), 422),
        (json!(["x".repeat(300)]), 422),
        (json!((0..101).map(|_| bees.clone()).collect::<Vec<_>>()), 422),
    ] {
        let (status, refused) = server
            .post(
                "/v3/workspaces/w/conclusions",
                conclusion("Alice flies", sources.clone()),
            )
            .await;
        assert_eq!(status, expected, "{sources}: {refused}");
    }
    let (_, all) = server.post("/v3/workspaces/w/conclusions/list", json!({})).await;
    assert_eq!(all["total"], 2, "{all}");

    // A repeat under the same key returns what the first call stored, even
    // once a source it named is erased; another source list is another request.
    let keyed = |sources: Value| {
        let request = server
            .http
            .post(format!("{}/v3/workspaces/w/conclusions", server.base))
            .header("idempotency-key", "learned-once")
            .json(&conclusion("Alice sells honey", sources));
        async move {
            let reply = request.send().await.unwrap();
            (reply.status().as_u16(), reply.json::<Value>().await.unwrap())
        }
    };
    let (status, first) = keyed(json!([nice])).await;
    assert_eq!(status, 201, "{first}");
    let (status, other) = keyed(json!([bees])).await;
    assert_eq!(status, 409, "another source list under the same key: {other}");
    let (status, _) = server
        .send(
            reqwest::Method::DELETE,
            &format!("/v3/workspaces/w/sessions/s/messages/{nice}"),
            Value::Null,
            None,
        )
        .await;
    assert_eq!(status, 202);
    // The conclusion went with its only source: the repeat says what of the
    // first call's is still stored (nothing), never that the call failed.
    let mut again = (0, Value::Null);
    for _ in 0..100 {
        again = keyed(json!([nice])).await;
        if again.1 == json!([]) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!((again.0, &again.1), (201, &json!([])), "{again:?}");

    // Erasing a source takes it from what was learned from it; erasing the
    // last one erases the conclusion (as for the deriver's conclusions).
    let server = &server;
    let erase = |id: String| {
        let path = format!("/v3/workspaces/w/sessions/s/messages/{id}");
        async move {
            let (status, receipt) = server.send(reqwest::Method::DELETE, &path, Value::Null, None).await;
            assert_eq!(status, 202, "{receipt}");
        }
    };
    let until = |filter: Value, total: usize| async move {
        let mut page = Value::Null;
        for _ in 0..100 {
            page = server.post("/v3/workspaces/w/conclusions/list", filter.clone()).await.1;
            if page["total"] == total {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        page
    };
    erase(honey.clone()).await;
    let page = until(learned_from(&honey), 0).await;
    assert_eq!(page["total"], 0, "{page}");
    let page = until(learned_from(&bees), 1).await;
    assert_eq!(page["items"][0]["source_message_ids"], json!([bees]), "{page}");
    erase(bees.clone()).await;
    let page = until(learned_from(&bees), 0).await;
    assert_eq!(page["total"], 0, "{page}");
    let (_, all) = server.post("/v3/workspaces/w/conclusions/list", json!({})).await;
    assert_eq!(ids(&all["items"]), [plain[0]["id"].as_str().unwrap()], "{all}");
    server.served.shutdown.cancel();
}

/// Keys of two tenants on one multi-tenant server, over REST: each tenant
/// holds the workspace ids it names first (of two asking at once, one),
/// lists and mints within what it holds, and reaches nothing of the other's;
/// a workspace made before tenants is the operator's until assigned; its
/// erasure frees the id.
#[tokio::test]
async fn tenants_hold_their_workspaces_and_reach_nothing_of_each_other() {
    let server = Server::start_with(Some(KeySet::new(&[SECRET]).unwrap().multi_tenant(true))).await;
    let operator = server.key(Claims {
        ad: Some(true),
        ..Claims::default()
    });
    let admin_of = |tenant: &str| {
        server.key(Claims {
            ad: Some(true),
            tn: Some(tenant.into()),
            ..Claims::default()
        })
    };
    let workspace_key = |workspace: &str, tenant: &str| {
        server.key(Claims {
            w: Some(workspace.into()),
            tn: Some(tenant.into()),
            ..Claims::default()
        })
    };
    let a = admin_of("a");
    let send = |method: reqwest::Method, path: String, body: Value, key: String| {
        let server = &server;
        async move { server.send(method, &path, body, Some(&key)).await }
    };

    // Erases a workspace with `key` and waits until the operator no longer lists it.
    let erase = |key: String, workspace: String| {
        let (send, operator) = (&send, operator.clone());
        async move {
            let (status, _) = send(
                reqwest::Method::DELETE,
                format!("/v3/workspaces/{workspace}"),
                Value::Null,
                key,
            )
            .await;
            assert_eq!(status, 202);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let (_, page) = send(
                    reqwest::Method::POST,
                    "/v3/workspaces/list?size=100".into(),
                    Value::Null,
                    operator.clone(),
                )
                .await;
                if !ids(&page["items"]).contains(&workspace.as_str()) {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "the erasure did not finish");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };

    // A workspace made by the operator is no tenant's until it is assigned.
    let (status, _) = send(
        reqwest::Method::POST,
        "/v3/workspaces".into(),
        json!({"id": "legacy"}),
        operator.clone(),
    )
    .await;
    assert_eq!(status, 201);
    let (status, refused_legacy) = send(
        reqwest::Method::POST,
        "/v3/workspaces/legacy/peers/list".into(),
        Value::Null,
        a.clone(),
    )
    .await;
    assert_eq!(status, 401, "{refused_legacy}");

    // Two tenants name the same new ids at once: each id is one tenant's.
    let raced: Vec<String> = (0..12).map(|index| format!("race-{index}")).collect();
    let mut winners = BTreeMap::new();
    for id in &raced {
        let create = |key: String| send(reqwest::Method::POST, "/v3/workspaces".into(), json!({"id": id}), key);
        let (first, second) = tokio::join!(create(workspace_key(id, "a")), create(workspace_key(id, "b")));
        let won: Vec<&str> = [("a", first.0), ("b", second.0)]
            .into_iter()
            .filter(|(_, status)| *status == 201 || *status == 200)
            .map(|(tenant, _)| tenant)
            .collect();
        assert_eq!(won.len(), 1, "{id}: exactly one tenant holds it: {first:?} {second:?}");
        assert!([first.0, second.0].contains(&401), "{id}: {first:?} {second:?}");
        winners.insert(id.clone(), won[0]);
    }
    for (id, winner) in &winners {
        let loser = if *winner == "a" { "b" } else { "a" };
        // The loser's keys, admin or scoped, reach nothing of it, in the
        // words a workspace outside a key's scope gets.
        for key in [admin_of(loser), workspace_key(id, loser)] {
            for (method, path, body) in [
                (
                    reqwest::Method::POST,
                    format!("/v3/workspaces/{id}/peers/list"),
                    Value::Null,
                ),
                (
                    reqwest::Method::POST,
                    format!("/v3/workspaces/{id}/sessions"),
                    json!({"id": "s"}),
                ),
                (
                    reqwest::Method::PUT,
                    format!("/v3/workspaces/{id}"),
                    json!({"metadata": {"taken": true}}),
                ),
                (reqwest::Method::GET, format!("/v3/workspaces/{id}/export"), Value::Null),
                (
                    reqwest::Method::POST,
                    format!("/v3/keys?workspace_id={id}"),
                    Value::Null,
                ),
            ] {
                let (status, body) = send(method, path.clone(), body, key.clone()).await;
                assert_eq!(status, 401, "{path}: {body}");
            }
        }
        let (status, body) = send(
            reqwest::Method::POST,
            format!("/v3/workspaces/{id}/peers"),
            json!({"id": "alice"}),
            workspace_key(id, winner),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    // The refusal of a taken id says what the refusal of an unassigned one says.
    let (_, refused_taken) = send(
        reqwest::Method::POST,
        "/v3/workspaces/race-0/peers/list".into(),
        Value::Null,
        admin_of(if winners["race-0"] == "a" { "b" } else { "a" }),
    )
    .await;
    let words = |reply: &Value, id: &str, tenant: &str| {
        reply["detail"]
            .as_str()
            .unwrap()
            .replace(&format!("`{id}`"), "`W`")
            .replace(&format!("`{tenant}`"), "`T`")
    };
    assert_eq!(
        words(&refused_legacy, "legacy", "a"),
        words(
            &refused_taken,
            "race-0",
            if winners["race-0"] == "a" { "b" } else { "a" }
        )
    );

    // Each tenant's admin lists its own workspaces, and only those.
    for tenant in ["a", "b"] {
        let (status, page) = send(
            reqwest::Method::POST,
            "/v3/workspaces/list?size=100".into(),
            Value::Null,
            admin_of(tenant),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        let mut listed: Vec<&str> = ids(&page["items"]);
        listed.sort_unstable();
        let held: Vec<&str> = winners
            .iter()
            .filter(|(_, winner)| **winner == tenant)
            .map(|(id, _)| id.as_str())
            .collect();
        assert_eq!(listed, held, "tenant {tenant}");
    }
    let (_, page) = send(
        reqwest::Method::POST,
        "/v3/workspaces/list?size=100".into(),
        Value::Null,
        operator.clone(),
    )
    .await;
    assert_eq!(page["total"], 13, "the operator lists every workspace: {page}");

    // A tenant's admin mints keys of its own tenant for what it holds.
    let (held_by_a, _) = winners.iter().find(|(_, winner)| **winner == "a").unwrap();
    let (status, minted) = send(
        reqwest::Method::POST,
        format!("/v3/keys?workspace_id={held_by_a}&peer_id=alice"),
        Value::Null,
        a.clone(),
    )
    .await;
    assert_eq!(status, 200, "{minted}");
    let minted = minted["key"].as_str().unwrap().to_owned();
    assert_eq!(
        roncho_gate::keys::peek_claims(&minted).unwrap().tn.as_deref(),
        Some("a")
    );
    let (status, _) = send(
        reqwest::Method::PUT,
        format!("/v3/workspaces/{held_by_a}/peers/alice"),
        json!({}),
        minted,
    )
    .await;
    assert_eq!(status, 200, "a minted key works");
    let (status, body) = send(
        reqwest::Method::POST,
        format!("/v3/keys?workspace_id={held_by_a}&tenant_id=b"),
        Value::Null,
        a.clone(),
    )
    .await;
    assert_eq!(status, 401, "a tenant mints no key of another: {body}");

    // Only the operator assigns; then the tenant reaches the old workspace.
    let assign = |key: String| {
        send(
            reqwest::Method::PUT,
            "/v3/workspaces/legacy/tenant".into(),
            json!({"tenant_id": "a"}),
            key,
        )
    };
    assert_eq!(assign(a.clone()).await.0, 401, "a tenant's admin assigns nothing");
    let (status, assigned) = assign(operator.clone()).await;
    assert_eq!(status, 200, "{assigned}");
    assert_eq!(
        assigned,
        json!({"workspace_id": "legacy", "tenant_id": "a", "previous_tenant_id": null})
    );
    let (status, body) = send(
        reqwest::Method::POST,
        "/v3/workspaces/legacy/peers/list".into(),
        Value::Null,
        workspace_key("legacy", "a"),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // Reading an id takes nothing, and neither does a call that may create
    // a workspace but is refused or fails: the operator's new workspace of
    // that id stays its own.
    for tenant in ["a", "b"] {
        for path in ["/v3/workspaces/opws/queue/status", "/v3/workspaces/opws/webhooks"] {
            let (status, _) = send(reqwest::Method::GET, path.into(), Value::Null, admin_of(tenant)).await;
            assert_eq!(status, 401, "{path}");
        }
    }
    let peer_key = server.key(Claims {
        w: Some("opws".into()),
        p: Some("alice".into()),
        tn: Some("a".into()),
        ..Claims::default()
    });
    let session_key = server.key(Claims {
        w: Some("opws".into()),
        s: Some("mine".into()),
        tn: Some("a".into()),
        ..Claims::default()
    });
    for (method, path, body, key, expected) in [
        // Refused: beyond what the key reaches.
        (
            reqwest::Method::POST,
            "/v3/workspaces/opws/sessions",
            json!({"id": "s"}),
            peer_key.clone(),
            401,
        ),
        (
            reqwest::Method::POST,
            "/v3/workspaces/opws/peers",
            json!({"id": "bob"}),
            peer_key.clone(),
            401,
        ),
        (
            reqwest::Method::POST,
            "/v3/workspaces",
            json!({"id": "opws"}),
            session_key.clone(),
            401,
        ),
        (
            reqwest::Method::POST,
            "/v3/keys?workspace_id=opws",
            Value::Null,
            a.clone(),
            401,
        ),
        (
            reqwest::Method::POST,
            "/v3/keys?workspace_id=opws&tenant_id=b",
            Value::Null,
            a.clone(),
            401,
        ),
    ] {
        let (status, body) = send(method, path.into(), body, key).await;
        assert_eq!(status, expected, "{path}: {body}");
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM workspace_tenants WHERE workspace_name = 'opws'")
            .fetch_one(server.store.pool())
            .await
            .unwrap();
        assert_eq!(rows, 0, "{path} took the id");
    }
    // A call let through takes the id for good, even when it then fails on
    // what it carries (or is cut off) and makes no workspace: the
    // operator's calls are then refused the id until it is given to
    // someone, so nothing the operator makes lands with the tenant.
    let second_key = server.key(Claims {
        w: Some("opws2".into()),
        s: Some("mine".into()),
        tn: Some("a".into()),
        ..Claims::default()
    });
    for (method, path, body, key, expected) in [
        (
            reqwest::Method::POST,
            "/v3/workspaces/opws2/peers",
            json!({"id": "a b"}),
            admin_of("a"),
            422,
        ),
        (
            reqwest::Method::POST,
            "/v3/workspaces/opws2/sessions/mine/messages",
            json!({"messages": [{"peer_id": "alice", "content": "x".repeat(30_000)}]}),
            second_key.clone(),
            422,
        ),
        (
            reqwest::Method::POST,
            "/v3/workspaces/opws2/webhooks",
            json!({"url": "http://127.0.0.1:1/hook"}),
            admin_of("a"),
            422,
        ),
        (
            reqwest::Method::POST,
            "/v3/workspaces/opws2/import",
            json!({"records": []}),
            admin_of("a"),
            200,
        ),
    ] {
        let (status, body) = send(method, path.into(), body, key).await;
        assert_eq!(status, expected, "{path}: {body}");
    }
    for (method, path, body) in [
        (reqwest::Method::POST, "/v3/workspaces", json!({"id": "opws2"})),
        (
            reqwest::Method::POST,
            "/v3/workspaces/opws2/peers",
            json!({"id": "carol"}),
        ),
        (
            reqwest::Method::POST,
            "/v3/workspaces/opws2/sessions/x/messages",
            json!({"messages": [{"peer_id": "carol", "content": "the operator's words"}]}),
        ),
    ] {
        let (status, body) = send(method, path.into(), body, operator.clone()).await;
        assert_eq!(
            status, 409,
            "the operator makes nothing under a tenant's empty id: {path}: {body}"
        );
        assert!(
            body["detail"].as_str().unwrap().contains("held by tenant `a`"),
            "{body}"
        );
    }
    let (status, _) = send(
        reqwest::Method::PUT,
        "/v3/workspaces/opws2/tenant".into(),
        json!({"tenant_id": "operations"}),
        operator.clone(),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = send(
        reqwest::Method::POST,
        "/v3/workspaces".into(),
        json!({"id": "opws2"}),
        admin_of("operations"),
    )
    .await;
    assert_eq!(status, 201, "given away, the id is its new tenant's to make");
    let (status, _) = send(
        reqwest::Method::POST,
        "/v3/workspaces/opws2/peers/list".into(),
        Value::Null,
        admin_of("a"),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = send(
        reqwest::Method::POST,
        "/v3/workspaces".into(),
        json!({"id": "opws"}),
        operator.clone(),
    )
    .await;
    assert_eq!(status, 201);
    for tenant in ["a", "b"] {
        let (status, _) = send(
            reqwest::Method::POST,
            "/v3/workspaces/opws/peers/list".into(),
            Value::Null,
            admin_of(tenant),
        )
        .await;
        assert_eq!(status, 401, "tenant {tenant} reaches no workspace the operator made");
    }

    // The operator's new workspace takes its id in the same step as the
    // tenants' do (one holder of two asking at once, the store contract
    // checks), and keeps it after its erasure: no tenant makes it anew.
    let holder: String = sqlx::query_scalar("SELECT tenant FROM workspace_tenants WHERE workspace_name = 'opws'")
        .fetch_one(server.store.pool())
        .await
        .unwrap();
    assert_eq!(holder, "", "the operator's id is held under the empty name");
    erase(operator.clone(), "opws".to_owned()).await;
    let (status, _) = send(
        reqwest::Method::POST,
        "/v3/workspaces".into(),
        json!({"id": "opws"}),
        admin_of("a"),
    )
    .await;
    assert_eq!(status, 401, "the operator's erased id stays the operator's");

    // An erased workspace's id stays its tenant's: nothing of the other
    // tenant's can land in it, even once the erasure is complete.
    erase(workspace_key(held_by_a, "a"), held_by_a.clone()).await;
    let (status, _) = send(
        reqwest::Method::POST,
        "/v3/workspaces".into(),
        json!({"id": held_by_a}),
        workspace_key(held_by_a, "b"),
    )
    .await;
    assert_eq!(status, 401, "another tenant cannot take an erased workspace's id");
    let (status, _) = send(
        reqwest::Method::POST,
        "/v3/workspaces".into(),
        json!({"id": held_by_a}),
        workspace_key(held_by_a, "a"),
    )
    .await;
    assert_eq!(status, 201, "its tenant makes it anew");
    server.served.shutdown.cancel();
}

/// The console's files: served without a key (the page asks for one), with
/// headers that keep other sites from running it, framing it or reading
/// it; writing memory into the page only as text; and its routes no way
/// around the API's keys.
#[tokio::test]
async fn the_console_is_served_to_anyone_and_reaches_nothing_without_a_key() {
    let server = Server::start(true).await;
    let admin = server.key(Claims {
        ad: Some(true),
        ..Claims::default()
    });
    for (path, content_type, body) in roncho_rest::console::FILES {
        let response = server.http.get(format!("{}{path}", server.base)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path} needs no key");
        let headers = response.headers().clone();
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(header("content-type"), content_type, "{path}");
        let policy = header("content-security-policy");
        for rule in [
            "default-src 'none'",
            "script-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
            "form-action 'none'",
        ] {
            assert!(policy.contains(rule), "{path}: {policy}");
        }
        assert!(!policy.contains("unsafe"), "{path}: no inline script or eval: {policy}");
        assert_eq!(header("x-frame-options"), "DENY");
        assert_eq!(header("x-content-type-options"), "nosniff");
        assert_eq!(header("referrer-policy"), "no-referrer");
        assert_eq!(response.text().await.unwrap(), body);
        // What memory holds is never written as markup, nor run as code.
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
        ] {
            assert!(!body.contains(sink), "{path} uses {sink}");
        }
        // No secret, and nothing from anywhere else.
        assert!(!body.contains(SECRET));
        assert_eq!(
            body.matches("http://").count(),
            body.matches("http://www.w3.org/2000/svg").count(),
            "{path} names no address but SVG's namespace"
        );
        assert!(!body.contains("https://"), "{path} loads nothing from elsewhere");
    }
    let index = roncho_rest::console::FILES[0].2;
    assert!(!index.contains("<script>"), "no inline script in the page");
    // Another site may link to the console (a navigation), but its pages
    // cannot fetch it, nor anything behind it.
    let navigate = server
        .http
        .get(format!("{}/ui", server.base))
        .header("sec-fetch-site", "cross-site")
        .header("sec-fetch-mode", "navigate")
        .send()
        .await
        .unwrap();
    assert_eq!(navigate.status(), 200);
    for (path, mode) in [
        ("/ui", "cors"),
        ("/ui/console.js", "no-cors"),
        ("/v3/workspaces/list", "cors"),
    ] {
        let fetched = server
            .http
            .get(format!("{}{path}", server.base))
            .header("sec-fetch-site", "cross-site")
            .header("sec-fetch-mode", mode)
            .header("origin", "https://attacker.example")
            .send()
            .await
            .unwrap();
        assert_eq!(fetched.status(), 403, "{path} from another site's page");
    }
    // The console calls what any client calls, with the key the user gives.
    let (status, _) = server.post("/v3/workspaces/list", Value::Null).await;
    assert_eq!(status, 401);
    let (status, _) = server
        .send(reqwest::Method::POST, "/v3/workspaces/list", Value::Null, Some(&admin))
        .await;
    assert_eq!(status, 200);
    // Paths beside the console's files are the API's 404, not its files.
    for path in [
        "/ui/%2e%2e/v3/workspaces/list",
        "/ui/console.js.map",
        "/ui/index.html",
        "/UI",
    ] {
        let response = server.http.get(format!("{}{path}", server.base)).send().await.unwrap();
        assert_ne!(response.status(), 200, "{path}");
    }
    server.served.shutdown.cancel();
}

/// `DELETE /v3/workspaces/{w}/peers/{p}` (roncho's route; the console's
/// "erase peer"): a workspace key's, 202 with the receipt, and the peer
/// with what was said by and learned about it is gone once it completes.
#[tokio::test]
async fn a_peer_is_erased_over_rest_with_its_receipt() {
    let server = Server::start(true).await;
    let workspace_key = server.key(Claims {
        w: Some("w".into()),
        ..Claims::default()
    });
    let alice = server.key(Claims {
        w: Some("w".into()),
        p: Some("alice".into()),
        ..Claims::default()
    });
    let send = |method: reqwest::Method, path: &str, body: Value, key: &str| {
        let (server, path, key) = (&server, path.to_owned(), key.to_owned());
        async move { server.send(method, &path, body, Some(&key)).await }
    };
    send(
        reqwest::Method::POST,
        "/v3/workspaces/w/sessions",
        json!({"id": "s", "peers": {"alice": {}, "bob": {}}}),
        &workspace_key,
    )
    .await;
    let (status, _) = send(
        reqwest::Method::POST,
        "/v3/workspaces/w/sessions/s/messages",
        json!({"messages": [{"peer_id": "alice", "content": "alice keeps bees"}, {"peer_id": "bob", "content": "bob keeps goats"}]}),
        &workspace_key,
    )
    .await;
    assert_eq!(status, 201);
    let (status, _) = send(
        reqwest::Method::DELETE,
        "/v3/workspaces/w/peers/alice",
        Value::Null,
        &alice,
    )
    .await;
    assert_eq!(status, 401, "a peer key does not erase its peer: the workspace's call");
    let (status, receipt) = send(
        reqwest::Method::DELETE,
        "/v3/workspaces/w/peers/alice",
        Value::Null,
        &workspace_key,
    )
    .await;
    assert_eq!(status, 202, "{receipt}");
    assert_eq!(receipt["scope"]["kind"], "peer", "{receipt}");
    let path = format!("/v3/workspaces/w/erasures/{}", receipt["id"].as_str().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, receipt) = send(reqwest::Method::GET, &path, Value::Null, &workspace_key).await;
        if receipt["state"] == "complete" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{receipt}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (_, peers) = send(
        reqwest::Method::POST,
        "/v3/workspaces/w/peers/list",
        Value::Null,
        &workspace_key,
    )
    .await;
    assert_eq!(ids(&peers["items"]), ["bob"]);
    let (_, messages) = send(
        reqwest::Method::POST,
        "/v3/workspaces/w/sessions/s/messages/list",
        Value::Null,
        &workspace_key,
    )
    .await;
    let contents: Vec<&str> = messages["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["bob keeps goats"]);
    let (status, _) = send(
        reqwest::Method::DELETE,
        "/v3/workspaces/w/peers/alice",
        Value::Null,
        &workspace_key,
    )
    .await;
    assert_eq!(status, 404, "erased already");
    server.served.shutdown.cancel();
}

/// Queue status over REST keeps Honcho's shape and adds roncho's: dead work
/// with its reasons, postponed work, and with `?history=true` the last hour
/// by minute; `POST …/queue/retry` runs dead work again for admin keys.
#[tokio::test]
async fn queue_status_shows_dead_work_and_the_last_hour_and_admins_run_it_again() {
    let server = Server::start(true).await;
    let admin = server.key(Claims {
        ad: Some(true),
        ..Claims::default()
    });
    let workspace_key = server.key(Claims {
        w: Some("w".into()),
        ..Claims::default()
    });
    let (status, _) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/w/sessions/s/messages",
            json!({"messages": [{"peer_id": "alice", "content": "alice keeps bees"}]}),
            Some(&workspace_key),
        )
        .await;
    assert_eq!(status, 201);
    let (status, plain) = server
        .send(
            reqwest::Method::GET,
            "/v3/workspaces/w/queue/status",
            Value::Null,
            Some(&workspace_key),
        )
        .await;
    assert_eq!(status, 200, "{plain}");
    assert!(plain.get("history").is_none(), "only when asked: {plain}");
    assert_eq!(plain["failures"], json!([]));
    assert_eq!(plain["postponed"], json!([]));
    let (status, with_history) = server
        .send(
            reqwest::Method::GET,
            "/v3/workspaces/w/queue/status?history=true",
            Value::Null,
            Some(&workspace_key),
        )
        .await;
    assert_eq!(status, 200);
    let history = with_history["history"].as_array().unwrap();
    assert_eq!(history.len(), 60, "{with_history}");
    let last = history.last().unwrap();
    assert!(last["waiting_work_units"].as_i64().unwrap() + with_history["completed_work_units"].as_i64().unwrap() >= 1);
    let (status, _) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/w/queue/retry",
            json!({}),
            Some(&workspace_key),
        )
        .await;
    assert_eq!(status, 401, "running dead work again is an admin's");
    let (status, retried) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/w/queue/retry",
            json!({"task_type": "summary"}),
            Some(&admin),
        )
        .await;
    assert_eq!((status, retried), (200, json!({"retried": 0})));
    let (status, _) = server
        .send(
            reqwest::Method::POST,
            "/v3/workspaces/w/queue/retry",
            json!({"task_type": "nonsense"}),
            Some(&admin),
        )
        .await;
    assert_eq!(status, 422);
    server.served.shutdown.cancel();
}
