//! MCP tool calls reach the REST routes in process as the caller the gate
//! let in, holding no place of their own: each is bounded by its own call.
//! A tool whose caller went away stops, and what it was writing is not
//! written later; each REST call a tool makes keeps its route's deadline,
//! not the longer one of `/mcp` (whose tools include chat). The store is
//! made slow on purpose: a table held locked by another connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use roncho::config::Role;
use roncho_gate::admission::{Admission, Limits};
use serde_json::{Value, json};
use sqlx::Connection;

use crate::support;

/// The text of the reply to `request`.
async fn answer(request: reqwest::RequestBuilder) -> String {
    request.send().await.unwrap().text().await.unwrap()
}

/// A JSON-RPC `tools/call` of `tool` with `arguments`, over HTTP at `rest`.
fn tool_call(client: &reqwest::Client, rest: &str, tool: &str, arguments: Value) -> reqwest::RequestBuilder {
    client
        .post(format!("{rest}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}})
            .to_string(),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_ends_with_its_call_and_its_rest_calls_keep_their_deadlines() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let rest_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let rest = format!("http://{}", rest_listener.local_addr().unwrap());
    let mut services = roncho::server::Serving::store_only(store.clone());
    services.gate.admission = Admission::new(Limits {
        request_timeout: Duration::from_secs(1),
        dialectic_timeout: Duration::from_secs(120),
        ..Limits::default()
    });
    services.listeners.rest = Some(roncho::server::RestEdge::Listener(Arc::new(rest_listener)));
    let served = support::serve(services, &[Role::Ingest, Role::Recall]).await;
    let client = reqwest::Client::new();
    for (path, body) in [
        ("/v3/workspaces", json!({"id": "w"})),
        ("/v3/workspaces/w/sessions", json!({"id": "s"})),
        ("/v3/workspaces/w/peers", json!({"id": "alice"})),
    ] {
        let reply = client.post(format!("{rest}{path}")).json(&body).send().await.unwrap();
        assert!(reply.status().is_success(), "{path}: {}", reply.status());
    }

    // Another connection holds the messages' table: reads and writes of it wait.
    let mut holder = sqlx::PgConnection::connect(&database.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .unwrap();

    // A caller that waits: its tool's REST call ends at the route's 1 s
    // deadline, and the tool says so.
    let began = Instant::now();
    let reply = answer(tool_call(
        &client,
        &rest,
        "get_session_messages",
        json!({"workspace_id": "w", "session_id": "s"}),
    ))
    .await;
    let waited = began.elapsed();
    assert!(reply.contains("1 s limit"), "{reply}");
    assert!(
        waited < Duration::from_secs(60),
        "the tool ran to /mcp's deadline, not its REST call's: {waited:?}"
    );

    // Callers that go away: their tools stop, and nothing they were writing
    // is written once the table is free again.
    for index in 0..5 {
        let abandoned = tool_call(
            &client,
            &rest,
            "add_messages_to_session",
            json!({"workspace_id": "w", "session_id": "s",
                   "messages": [{"peer_id": "alice", "content": format!("written after its caller left {index}")}]}),
        )
        .timeout(Duration::from_millis(300))
        .send()
        .await;
        assert!(abandoned.is_err(), "the call was answered while the table was held");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    sqlx::query("COMMIT").execute(&mut holder).await.unwrap();
    holder.close().await.unwrap();
    // Long enough for a write that was still running to commit.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let listed: Value = client
        .post(format!("{rest}/v3/workspaces/w/sessions/s/messages/list"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["total"], 0, "{listed}");

    // And the table free, a tool writes as before.
    let written = answer(tool_call(
        &client,
        &rest,
        "add_messages_to_session",
        json!({"workspace_id": "w", "session_id": "s",
               "messages": [{"peer_id": "alice", "content": "I keep bees."}]}),
    ))
    .await;
    assert!(written.contains("Messages added to session successfully"), "{written}");
    served.shutdown.cancel();
    store.close().await;
    database.drop_database().await;
}
