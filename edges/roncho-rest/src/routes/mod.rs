//! Honcho v3's route table (honcho-v3.md §2.2) and its handlers. Each
//! handler reads Honcho's request, makes the domain request the gRPC edge
//! would make, runs it through the edge and answers in Honcho's shape and
//! status.

use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::Rest;
use admin::*;
use memory::*;
use resources::*;
use scopes::*;

/// Runs `api.$method(request)` through the edge (which authorizes `$caller`), where `api` is
/// the service of `$role`; a refusal returns the handler's error.
macro_rules! call {
    ($rest:ident . $role:ident, $caller:expr, $request:expr, $method:ident) => {
        $rest
            .run(
                $rest.$role.clone(),
                concat!(
                    "this process does not run the ",
                    stringify!($role),
                    " role; send this route to one that does (--roles ",
                    stringify!($role),
                    ")"
                ),
                $caller,
                $request,
                |api, request| async move { api.$method(request).await },
            )
            .await?
    };
}

mod admin;
mod memory;
mod reply;
mod resources;
mod scopes;

/// The route table: each of Honcho's operations (method, path as Honcho's
/// OpenAPI document writes it, its `operationId`) and its handler. It makes
/// both the router and [`OPERATIONS`], which `GET /docs` describes.
macro_rules! routes {
    ($($method:ident $path:literal $operation:literal => $handler:ident;)*) => {
        /// Honcho's operations this edge serves: method, path, `operationId`.
        pub const OPERATIONS: &[(&str, &str, &str)] = &[$((stringify!($method), $path, $operation)),*];

        /// The `/v3` routes.
        pub fn v3(rest: Rest) -> Router {
            Router::new()
                $(.route($path, axum::routing::$method($handler)))*
                .with_state(rest)
        }
    };
}

routes! {
    post "/v3/workspaces" "get_or_create_workspace_v3_workspaces_post" => get_or_create_workspace;
    post "/v3/workspaces/list" "get_all_workspaces_v3_workspaces_list_post" => list_workspaces;
    put "/v3/workspaces/{workspace_id}" "update_workspace_v3_workspaces__workspace_id__put" => update_workspace;
    delete "/v3/workspaces/{workspace_id}" "delete_workspace_v3_workspaces__workspace_id__delete" => delete_workspace;
    post "/v3/workspaces/{workspace_id}/search" "search_workspace_v3_workspaces__workspace_id__search_post" => search_workspace;
    get "/v3/workspaces/{workspace_id}/queue/status" "get_queue_status_v3_workspaces__workspace_id__queue_status_get" => queue_status;
    post "/v3/workspaces/{workspace_id}/schedule_dream" "schedule_dream_v3_workspaces__workspace_id__schedule_dream_post" => schedule_dream;
    post "/v3/workspaces/{workspace_id}/peers/list" "get_peers_v3_workspaces__workspace_id__peers_list_post" => list_peers;
    post "/v3/workspaces/{workspace_id}/peers" "get_or_create_peer_v3_workspaces__workspace_id__peers_post" => get_or_create_peer;
    put "/v3/workspaces/{workspace_id}/peers/{peer_id}" "update_peer_v3_workspaces__workspace_id__peers__peer_id__put" => update_peer;
    post "/v3/workspaces/{workspace_id}/peers/{peer_id}/sessions" "get_sessions_for_peer_v3_workspaces__workspace_id__peers__peer_id__sessions_post" => list_peer_sessions;
    post "/v3/workspaces/{workspace_id}/peers/{peer_id}/chat" "chat_v3_workspaces__workspace_id__peers__peer_id__chat_post" => chat;
    post "/v3/workspaces/{workspace_id}/chat" "chat_v3_workspaces__workspace_id__chat_post" => workspace_chat;
    post "/v3/workspaces/{workspace_id}/peers/{peer_id}/representation" "get_representation_v3_workspaces__workspace_id__peers__peer_id__representation_post" => representation;
    get "/v3/workspaces/{workspace_id}/peers/{peer_id}/card" "get_peer_card_v3_workspaces__workspace_id__peers__peer_id__card_get" => get_peer_card;
    put "/v3/workspaces/{workspace_id}/peers/{peer_id}/card" "set_peer_card_v3_workspaces__workspace_id__peers__peer_id__card_put" => set_peer_card;
    get "/v3/workspaces/{workspace_id}/peers/{peer_id}/context" "get_peer_context_v3_workspaces__workspace_id__peers__peer_id__context_get" => peer_context;
    post "/v3/workspaces/{workspace_id}/peers/{peer_id}/search" "search_peer_v3_workspaces__workspace_id__peers__peer_id__search_post" => search_peer;
    post "/v3/workspaces/{workspace_id}/sessions/list" "get_sessions_v3_workspaces__workspace_id__sessions_list_post" => list_sessions;
    post "/v3/workspaces/{workspace_id}/sessions" "get_or_create_session_v3_workspaces__workspace_id__sessions_post" => get_or_create_session;
    put "/v3/workspaces/{workspace_id}/sessions/{session_id}" "update_session_v3_workspaces__workspace_id__sessions__session_id__put" => update_session;
    delete "/v3/workspaces/{workspace_id}/sessions/{session_id}" "delete_session_v3_workspaces__workspace_id__sessions__session_id__delete" => delete_session;
    post "/v3/workspaces/{workspace_id}/sessions/{session_id}/clone" "clone_session_v3_workspaces__workspace_id__sessions__session_id__clone_post" => clone_session;
    post "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers" "add_peers_to_session_v3_workspaces__workspace_id__sessions__session_id__peers_post" => add_session_peers;
    put "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers" "set_session_peers_v3_workspaces__workspace_id__sessions__session_id__peers_put" => set_session_peers;
    delete "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers" "remove_peers_from_session_v3_workspaces__workspace_id__sessions__session_id__peers_delete" => remove_session_peers;
    get "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers" "get_session_peers_v3_workspaces__workspace_id__sessions__session_id__peers_get" => list_session_peers;
    get "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers/{peer_id}/config" "get_peer_config_v3_workspaces__workspace_id__sessions__session_id__peers__peer_id__config_get" => get_session_peer_config;
    put "/v3/workspaces/{workspace_id}/sessions/{session_id}/peers/{peer_id}/config" "set_peer_config_v3_workspaces__workspace_id__sessions__session_id__peers__peer_id__config_put" => set_session_peer_config;
    get "/v3/workspaces/{workspace_id}/sessions/{session_id}/context" "get_session_context_v3_workspaces__workspace_id__sessions__session_id__context_get" => session_context;
    get "/v3/workspaces/{workspace_id}/sessions/{session_id}/summaries" "get_session_summaries_v3_workspaces__workspace_id__sessions__session_id__summaries_get" => session_summaries;
    post "/v3/workspaces/{workspace_id}/sessions/{session_id}/search" "search_session_v3_workspaces__workspace_id__sessions__session_id__search_post" => search_session;
    post "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages" "create_messages_for_session_v3_workspaces__workspace_id__sessions__session_id__messages_post" => create_messages;
    post "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages/" "create_messages_for_session_v3_workspaces__workspace_id__sessions__session_id__messages__post" => create_messages;
    post "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages/upload" "create_messages_with_file_v3_workspaces__workspace_id__sessions__session_id__messages_upload_post" => upload_file;
    post "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages/list" "get_messages_v3_workspaces__workspace_id__sessions__session_id__messages_list_post" => list_messages;
    get "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages/{message_id}" "get_message_v3_workspaces__workspace_id__sessions__session_id__messages__message_id__get" => get_message;
    put "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages/{message_id}" "update_message_v3_workspaces__workspace_id__sessions__session_id__messages__message_id__put" => update_message;
    post "/v3/workspaces/{workspace_id}/conclusions" "create_conclusions_v3_workspaces__workspace_id__conclusions_post" => create_conclusions;
    post "/v3/workspaces/{workspace_id}/conclusions/list" "list_conclusions_v3_workspaces__workspace_id__conclusions_list_post" => list_conclusions;
    post "/v3/workspaces/{workspace_id}/conclusions/query" "query_conclusions_v3_workspaces__workspace_id__conclusions_query_post" => query_conclusions;
    delete "/v3/workspaces/{workspace_id}/conclusions/{conclusion_id}" "delete_conclusion_v3_workspaces__workspace_id__conclusions__conclusion_id__delete" => delete_conclusion;
    get "/v3/workspaces/{workspace_id}/conclusions/{conclusion_id}" "get_conclusion_v3_workspaces__workspace_id__conclusions__conclusion_id__get" => get_conclusion;
    post "/v3/keys" "create_key_v3_keys_post" => create_key;
    post "/v3/workspaces/{workspace_id}/webhooks" "get_or_create_webhook_endpoint_v3_workspaces__workspace_id__webhooks_post" => create_webhook;
    get "/v3/workspaces/{workspace_id}/webhooks" "list_webhook_endpoints_v3_workspaces__workspace_id__webhooks_get" => list_webhooks;
    delete "/v3/workspaces/{workspace_id}/webhooks/{endpoint_id}" "delete_webhook_endpoint_v3_workspaces__workspace_id__webhooks__endpoint_id__delete" => delete_webhook;
    get "/v3/workspaces/{workspace_id}/webhooks/test" "test_emit_v3_workspaces__workspace_id__webhooks_test_get" => test_webhook;
    post "/v3/workspaces/{workspace_id}/scopes" "get_or_create_scope_v3_workspaces__workspace_id__scopes_post" => get_or_create_scope;
    post "/v3/workspaces/{workspace_id}/scopes/list" "get_scopes_v3_workspaces__workspace_id__scopes_list_post" => list_scopes;
    get "/v3/workspaces/{workspace_id}/scopes/{scope_id}" "get_scope_v3_workspaces__workspace_id__scopes__scope_id__get" => get_scope;
    post "/v3/workspaces/{workspace_id}/scopes/{scope_id}/sessions" "add_sessions_to_scope_v3_workspaces__workspace_id__scopes__scope_id__sessions_post" => add_scope_sessions;
    delete "/v3/workspaces/{workspace_id}/scopes/{scope_id}/sessions/{session_id}" "remove_session_from_scope_v3_workspaces__workspace_id__scopes__scope_id__sessions__session_id__delete" => remove_scope_session;
    post "/v3/workspaces/{workspace_id}/scopes/{scope_id}/sessions/list" "get_scope_sessions_v3_workspaces__workspace_id__scopes__scope_id__sessions_list_post" => list_scope_sessions;
    get "/v3/workspaces/{workspace_id}/scopes/{scope_id}/status" "get_scope_status_v3_workspaces__workspace_id__scopes__scope_id__status_get" => scope_status;
}

/// roncho's own operations beside Honcho's: method, path, `operationId`.
/// Not in Honcho's spec (nor in [`OPERATIONS`]); `GET /docs` describes them
/// under the tag `roncho`.
pub const EXTENSIONS: &[(&str, &str, &str)] = &[
    (
        "delete",
        "/v3/workspaces/{workspace_id}/sessions/{session_id}/messages/{message_id}",
        "roncho_delete_message",
    ),
    (
        "get",
        "/v3/workspaces/{workspace_id}/erasures/{receipt_id}",
        "roncho_get_erasure_receipt",
    ),
    ("get", "/v3/workspaces/{workspace_id}/export", "roncho_export_workspace"),
    ("post", "/v3/workspaces/{workspace_id}/import", "roncho_import_records"),
    (
        "get",
        "/v3/workspaces/{workspace_id}/traces/{trace_id}",
        "roncho_get_reasoning_trace",
    ),
    ("put", "/v3/workspaces/{workspace_id}/tenant", "roncho_assign_workspace"),
    (
        "delete",
        "/v3/workspaces/{workspace_id}/peers/{peer_id}",
        "roncho_delete_peer",
    ),
    (
        "post",
        "/v3/workspaces/{workspace_id}/queue/retry",
        "roncho_retry_failed_work",
    ),
];

/// What each of [`EXTENSIONS`] answers, for `GET /docs`.
const EXTENSION_REPLIES: [&str; 8] = [
    "roncho's own route, not Honcho's: 202 (delete) or 200 with an erasure receipt",
    "roncho's own route, not Honcho's: 200 with an erasure receipt",
    "roncho's own route, not Honcho's: the workspace (or ?peer_id= or ?session_id= of it) as JSON lines, \
     application/x-ndjson (docs/cli.md#export-and-import)",
    "roncho's own route, not Honcho's: {\"records\": [...], \"derive\": false} imports records as export \
     wrote them (at most 1,000 a call); 200 with the counts of new, present and skipped rows by kind",
    "roncho's own route, not Honcho's: the reasoning trace a chat's evidence names (reasoning_trace_id): its \
     model calls and tool calls by name and size, what it read by id",
    "roncho's own route, not Honcho's: {\"tenant_id\": ...} gives the workspace id to a tenant on a \
     multi-tenant server (the operator's admin key); 200 with {workspace_id, tenant_id, previous_tenant_id}",
    "roncho's own route, not Honcho's: erases the peer, its messages' memory and everything learned about or \
     by it (a workspace key); 202 with the erasure receipt",
    "roncho's own route, not Honcho's: {\"session_id\"?, \"task_type\"?} runs the workspace's dead work \
     (queue status' failures) again from its first attempt (an admin key, or its tenant's); 200 with \
     {\"retried\": n}",
];

/// roncho's own routes ([`EXTENSIONS`]): what Honcho has no route for and
/// roncho's gRPC API has, for clients of REST (the MCP server's `forget`
/// among them; docs/honcho-compatibility.md).
pub fn extensions(rest: Rest) -> Router {
    Router::new()
        .route(EXTENSIONS[0].1, axum::routing::delete(delete_message))
        .route(EXTENSIONS[1].1, get(erasure_receipt))
        .route(EXTENSIONS[2].1, get(export_workspace))
        .route(EXTENSIONS[3].1, axum::routing::post(import_records))
        .route(EXTENSIONS[4].1, get(reasoning_trace))
        .route(EXTENSIONS[5].1, axum::routing::put(assign_workspace))
        .route(EXTENSIONS[6].1, axum::routing::delete(delete_peer))
        .route(EXTENSIONS[7].1, axum::routing::post(retry_failed_work))
        .with_state(rest)
}

/// The routes that need no key: the probe, this API's description, and
/// the console's files.
pub fn open() -> Router {
    let document = || async { Json(openapi()) };
    Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/docs", get(document))
        .route("/openapi.json", get(document))
        .merge(crate::console::routes())
}

/// An OpenAPI 3.1 document of the operations served: `/health` and every
/// route of [`OPERATIONS`], under Honcho's `operationId`s.
pub fn openapi() -> serde_json::Value {
    let mut paths = serde_json::Map::new();
    let operations = OPERATIONS
        .iter()
        .copied()
        .chain([("get", "/health", "health_check_health_get")]);
    for (method, path, operation) in operations {
        let entry = paths.entry(path).or_insert_with(|| json!({}));
        entry[method] = json!({
            "operationId": operation,
            "responses": {"default": {"description": "Honcho v3's response; errors are {\"detail\": ...}"}},
        });
    }
    for ((method, path, operation), reply) in EXTENSIONS.iter().copied().zip(EXTENSION_REPLIES) {
        let entry = paths.entry(path).or_insert_with(|| json!({}));
        entry[method] = json!({
            "operationId": operation,
            "tags": ["roncho"],
            "description": reply,
            "responses": {"default": {"description": "see the description; errors are {\"detail\": ...}"}},
        });
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "roncho: the Honcho v3 REST API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Honcho v3's routes and JSON shapes over roncho (docs/honcho-compatibility.md).",
        },
        "paths": paths,
    })
}
