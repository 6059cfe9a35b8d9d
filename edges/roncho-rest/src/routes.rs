//! Honcho v3's route table (honcho-v3.md §2.2) and its handlers. Each
//! handler reads Honcho's request, makes the domain request the gRPC edge
//! would make, runs it through the edge and answers in Honcho's shape and
//! status.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use http::{HeaderValue, StatusCode};
use roncho_core::{Caller, Error};
use roncho_ingest as ingest;
use roncho_recall as recall;
use serde_json::json;

use crate::Rest;
use crate::error::RestError;
use crate::extract::{Body, Query};
use crate::wire::{self, Create, ListBody, PageQuery, SessionCreate, Update};

type Reply = Result<Response, RestError>;

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
];

/// roncho's own routes ([`EXTENSIONS`]): what Honcho has no route for and
/// roncho's gRPC API has, for clients of REST (the MCP server's `forget`
/// among them; docs/honcho-compatibility.md).
pub fn extensions(rest: Rest) -> Router {
    Router::new()
        .route(EXTENSIONS[0].1, axum::routing::delete(delete_message))
        .route(EXTENSIONS[1].1, get(erasure_receipt))
        .with_state(rest)
}

/// 202 with the erasure's receipt: the message is gone from reads at once,
/// and with it everything derived from it alone.
async fn delete_message(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id, message_id)): Path<(String, String, String)>,
) -> Reply {
    let request = ingest::DeleteMessage {
        workspace_id,
        session_id,
        message_id,
    };
    let receipt = call!(rest.ingest, caller, request, delete_message);
    let id = receipt.id.clone();
    let mut response = (StatusCode::ACCEPTED, Json(wire::Receipt::from(receipt))).into_response();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-roncho-erasure-receipt", value);
    }
    Ok(response)
}

/// An erasure's receipt: what it removed and whether it has finished.
async fn erasure_receipt(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, receipt_id)): Path<(String, String)>,
) -> Reply {
    let request = recall::GetErasureReceipt {
        workspace_id,
        receipt_id,
    };
    let receipt = call!(rest.recall, caller, request, get_erasure_receipt);
    ok(wire::Receipt::from(receipt))
}

/// The routes that need no key: the probe, and this API's description.
pub fn open() -> Router {
    let document = || async { Json(openapi()) };
    Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/docs", get(document))
        .route("/openapi.json", get(document))
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
    for (method, path, operation) in EXTENSIONS.iter().copied() {
        let entry = paths.entry(path).or_insert_with(|| json!({}));
        entry[method] = json!({
            "operationId": operation,
            "tags": ["roncho"],
            "description": "roncho's own route, not Honcho's: 202 (delete) or 200 with an erasure receipt",
            "responses": {"default": {"description": "an erasure receipt; errors are {\"detail\": ...}"}},
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

/// 201 when `created`, else 200, with `body`.
fn created_or_found(created: bool, body: impl serde::Serialize) -> Response {
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    (status, Json(body)).into_response()
}

fn ok(body: impl serde::Serialize) -> Reply {
    Ok(Json(body).into_response())
}

/// The id a create names, or the caller's own when it names none (a key's
/// claim, as Honcho takes it).
fn id_or_claim(id: Option<String>, claim: Option<&str>, field: &str) -> Result<String, Error> {
    id.or_else(|| claim.map(str::to_owned))
        .ok_or_else(|| Error::invalid(field, "required (or a key that names one)"))
}

async fn get_or_create_workspace(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Body(body): Body<Option<Create>>,
) -> Reply {
    let body = body.unwrap_or_default();
    let request = ingest::GetOrCreateWorkspace {
        id: id_or_claim(body.id, caller.workspace(), "id")?,
        metadata: body.metadata,
        configuration: body.configuration,
    };
    let (workspace, created) = call!(rest.ingest, caller, request, get_or_create_workspace);
    Ok(created_or_found(created, wire::Workspace::from(workspace)))
}

async fn list_workspaces(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Query(page): Query<PageQuery>,
    Body(body): Body<Option<ListBody>>,
) -> Reply {
    let request = recall::ListWorkspaces {
        filters: body.unwrap_or_default().filters,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_workspaces);
    ok(wire::Page::<wire::Workspace>::from(page))
}

async fn update_workspace(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<Option<Update>>,
) -> Reply {
    let body = body.unwrap_or_default();
    let request = ingest::UpdateWorkspace {
        workspace_id,
        metadata: body.metadata,
        configuration: body.configuration,
    };
    let workspace = call!(rest.ingest, caller, request, update_workspace);
    ok(wire::Workspace::from(workspace))
}

async fn get_or_create_peer(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<Create>,
) -> Reply {
    let request = ingest::GetOrCreatePeer {
        workspace_id,
        id: id_or_claim(body.id, caller.peer(), "id")?,
        metadata: body.metadata,
        configuration: body.configuration,
    };
    let (peer, created) = call!(rest.ingest, caller, request, get_or_create_peer);
    Ok(created_or_found(created, wire::Peer::from(peer)))
}

async fn list_peers(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Query(page): Query<PageQuery>,
    Body(body): Body<Option<wire::PeerList>>,
) -> Reply {
    let body = body.unwrap_or_default();
    let request = recall::ListPeers {
        workspace_id,
        kind: body.kind.unwrap_or_default(),
        filters: body.filters,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_peers);
    ok(wire::Page::<wire::Peer>::from(page))
}

async fn update_peer(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(body): Body<Option<Update>>,
) -> Reply {
    let body = body.unwrap_or_default();
    let request = ingest::UpdatePeer {
        workspace_id,
        peer_id,
        metadata: body.metadata,
        configuration: body.configuration,
    };
    let peer = call!(rest.ingest, caller, request, update_peer);
    ok(wire::Peer::from(peer))
}

async fn list_peer_sessions(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(page): Query<PageQuery>,
    Body(body): Body<Option<ListBody>>,
) -> Reply {
    let request = recall::ListPeerSessions {
        workspace_id,
        peer_id,
        filters: body.unwrap_or_default().filters,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_peer_sessions);
    ok(wire::Page::<wire::Session>::from(page))
}

async fn get_or_create_session(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<SessionCreate>,
) -> Reply {
    let claim = match &caller {
        Caller::Session { session, .. } => Some(session.as_str()),
        _ => None,
    };
    let request = ingest::GetOrCreateSession {
        workspace_id,
        id: id_or_claim(body.id, claim, "id")?,
        metadata: body.metadata,
        configuration: body.configuration,
        peers: wire::session_peers(body.peers.unwrap_or_default()),
        scopes: body.scopes.unwrap_or_default(),
    };
    let (session, created) = call!(rest.ingest, caller, request, get_or_create_session);
    Ok(created_or_found(created, wire::Session::from(session)))
}

async fn list_sessions(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Query(page): Query<PageQuery>,
    Body(body): Body<Option<ListBody>>,
) -> Reply {
    let request = recall::ListSessions {
        workspace_id,
        filters: body.unwrap_or_default().filters,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_sessions);
    ok(wire::Page::<wire::Session>::from(page))
}

async fn update_session(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Body(body): Body<Option<Update>>,
) -> Reply {
    let body = body.unwrap_or_default();
    let request = ingest::UpdateSession {
        workspace_id,
        session_id,
        metadata: body.metadata,
        configuration: body.configuration,
    };
    let session = call!(rest.ingest, caller, request, update_session);
    ok(wire::Session::from(session))
}

/// 202, as Honcho answers: the session is gone from reads at once; its
/// erasure (with everything derived from it) is receipted under its id.
async fn delete_session(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
) -> Reply {
    let request = ingest::DeleteSession {
        workspace_id,
        session_id,
    };
    let receipt = call!(rest.ingest, caller, request, delete_session);
    Ok(accepted("Session deleted successfully", &receipt.id))
}

async fn clone_session(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Query(query): Query<wire::CloneQuery>,
) -> Reply {
    let request = ingest::CloneSession {
        workspace_id,
        session_id,
        message_id: query.message_id,
    };
    let session = call!(rest.ingest, caller, request, clone_session);
    Ok(created_or_found(true, wire::Session::from(session)))
}

async fn add_session_peers(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Body(peers): Body<wire::SessionPeers>,
) -> Reply {
    let request = ingest::ChangeSessionPeers {
        workspace_id,
        session_id,
        peers: wire::session_peers(peers),
    };
    let session = call!(rest.ingest, caller, request, add_session_peers);
    ok(wire::Session::from(session))
}

async fn set_session_peers(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Body(peers): Body<wire::SessionPeers>,
) -> Reply {
    let request = ingest::ChangeSessionPeers {
        workspace_id,
        session_id,
        peers: wire::session_peers(peers),
    };
    let session = call!(rest.ingest, caller, request, set_session_peers);
    ok(wire::Session::from(session))
}

async fn remove_session_peers(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Body(peer_ids): Body<Vec<String>>,
) -> Reply {
    let request = ingest::RemoveSessionPeers {
        workspace_id,
        session_id,
        peer_ids,
    };
    let session = call!(rest.ingest, caller, request, remove_session_peers);
    ok(wire::Session::from(session))
}

async fn list_session_peers(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Query(page): Query<PageQuery>,
) -> Reply {
    let request = recall::ListSessionPeers {
        workspace_id,
        session_id,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_session_peers);
    ok(wire::Page::<wire::Peer>::from(page))
}

async fn get_session_peer_config(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id, peer_id)): Path<(String, String, String)>,
) -> Reply {
    let request = recall::GetSessionPeerConfig {
        workspace_id,
        session_id,
        peer_id,
    };
    let config = call!(rest.recall, caller, request, get_session_peer_config);
    ok(wire::SessionPeerConfig::from(config))
}

/// 204, as Honcho answers.
async fn set_session_peer_config(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id, peer_id)): Path<(String, String, String)>,
    Body(config): Body<wire::SessionPeerConfig>,
) -> Reply {
    let request = ingest::SetSessionPeerConfig {
        workspace_id,
        session_id,
        peer_id,
        config: config.into(),
    };
    call!(rest.ingest, caller, request, set_session_peer_config);
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// 201 with the messages, as Honcho answers. An `Idempotency-Key` header
/// makes a retried batch return the first call's messages.
async fn create_messages(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    headers: http::HeaderMap,
    Body(batch): Body<wire::MessageBatch>,
) -> Reply {
    let messages = batch
        .messages
        .into_iter()
        .enumerate()
        .map(|(index, message)| {
            let created_at = message
                .created_at
                .map(|text| wire::parse_timestamp(&format!("messages[{index}].created_at"), &text))
                .transpose()?;
            Ok(ingest::MessageInput {
                peer_id: message.peer_id,
                content: message.content,
                metadata: message.metadata,
                configuration: message.configuration,
                created_at,
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let request = ingest::CreateMessages {
        workspace_id,
        session_id,
        messages,
        idempotency_key: idempotency_key(&headers),
    };
    let messages = call!(rest.ingest, caller, request, create_messages);
    let messages: Vec<wire::Message> = messages.into_iter().map(wire::Message::from).collect();
    Ok((StatusCode::CREATED, Json(messages)).into_response())
}

/// The request's `Idempotency-Key`, when it has one.
fn idempotency_key(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get("idempotency-key")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

async fn list_messages(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Query(page): Query<PageQuery>,
    Body(body): Body<Option<ListBody>>,
) -> Reply {
    let request = recall::ListMessages {
        workspace_id,
        session_id,
        filters: body.unwrap_or_default().filters,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_messages);
    ok(wire::Page::<wire::Message>::from(page))
}

async fn get_message(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id, message_id)): Path<(String, String, String)>,
) -> Reply {
    let request = recall::GetMessage {
        workspace_id,
        session_id,
        message_id,
    };
    let message = call!(rest.recall, caller, request, get_message);
    ok(wire::Message::from(message))
}

async fn update_message(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id, message_id)): Path<(String, String, String)>,
    Body(body): Body<Option<wire::MessageUpdate>>,
) -> Reply {
    let request = ingest::UpdateMessage {
        workspace_id,
        session_id,
        message_id,
        metadata: body.unwrap_or_default().metadata,
    };
    let message = call!(rest.ingest, caller, request, update_message);
    ok(wire::Message::from(message))
}

/// Searches as the three search routes do: the workspace, one peer's
/// messages or one session's. Honcho answers a bare list; how the search
/// ran (`hybrid`, or `full_text` and why) is in `x-roncho-search-mode` and
/// `x-roncho-degraded-reason`, never silent.
async fn search(
    rest: Rest,
    caller: Caller,
    workspace_id: String,
    scope: (Option<String>, Option<String>),
    options: wire::SearchOptions,
) -> Reply {
    let (session_id, peer_id) = scope;
    let request = recall::SearchMessages {
        workspace_id,
        session_id,
        peer_id,
        query: options.query,
        filters: options.filters,
        limit: options.limit,
        scopes: wire::scopes(options.scope)?,
    };
    let results = call!(rest.recall, caller, request, search_messages);
    let messages: Vec<wire::Message> = results.messages.into_iter().map(wire::Message::from).collect();
    let mut response = Json(messages).into_response();
    let headers = response.headers_mut();
    headers.insert("x-roncho-search-mode", HeaderValue::from_static(results.mode.name()));
    if !results.degraded_reason.is_empty() {
        let reason: String = results
            .degraded_reason
            .chars()
            .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' })
            .collect();
        if let Ok(value) = HeaderValue::from_str(&reason) {
            headers.insert("x-roncho-degraded-reason", value);
        }
    }
    Ok(response)
}

async fn search_workspace(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(options): Body<wire::SearchOptions>,
) -> Reply {
    search(rest, caller, workspace_id, (None, None), options).await
}

async fn search_peer(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(options): Body<wire::SearchOptions>,
) -> Reply {
    search(rest, caller, workspace_id, (None, Some(peer_id)), options).await
}

async fn search_session(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Body(options): Body<wire::SearchOptions>,
) -> Reply {
    search(rest, caller, workspace_id, (Some(session_id), None), options).await
}

/// 202, as Honcho answers; 409 while the workspace has active sessions.
/// The erasure's receipt id is in `x-roncho-erasure-receipt`.
async fn delete_workspace(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
) -> Reply {
    let request = ingest::DeleteWorkspace {
        workspace_id,
        refuse_active_sessions: true,
    };
    let receipt = call!(rest.ingest, caller, request, delete_workspace);
    Ok(accepted("Workspace deletion accepted", &receipt.id))
}

/// 202 with Honcho's message and the erasure receipt's id in a header.
fn accepted(message: &str, receipt: &str) -> Response {
    let mut response = (StatusCode::ACCEPTED, Json(json!({ "message": message }))).into_response();
    if let Ok(value) = HeaderValue::from_str(receipt) {
        response.headers_mut().insert("x-roncho-erasure-receipt", value);
    }
    response
}

async fn queue_status(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Query(query): Query<wire::QueueQuery>,
) -> Reply {
    let request = roncho_deriver::GetQueueStatus {
        workspace_id,
        observer_id: query.observer_id,
        sender_id: query.sender_id,
        session_id: query.session_id,
    };
    let report = call!(rest.deriver, caller, request, get_queue_status);
    ok(wire::QueueStatus::from(report))
}

/// 204, as Honcho answers; a dream already pending for the pair is not an error.
async fn schedule_dream(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<wire::ScheduleDream>,
) -> Reply {
    let request = roncho_dreamer::ScheduleDream {
        workspace_id,
        observer: body.observer,
        observed: body.observed,
        dream_type: body.dream_type,
        session_id: body.session_id,
        rebuild: body.rebuild,
    };
    let scheduled = rest
        .run(
            rest.dreamer.clone(),
            "this process does not run the dreamer role; send this route to one that does (--roles dreamer)",
            caller,
            request,
            |api, request| async move { api.schedule_dream(request).await },
        )
        .await;
    match scheduled {
        Ok(_) => Ok(StatusCode::NO_CONTENT.into_response()),
        // No dream model: Honcho answers 400 when dreams are disabled.
        Err(RestError::Domain(Error::FailedPrecondition(reason))) => {
            Err(RestError::Http(StatusCode::BAD_REQUEST, reason))
        }
        Err(error) => Err(error),
    }
}

async fn get_peer_card(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(query): Query<wire::TargetQuery>,
) -> Reply {
    let request = recall::GetPeerCard {
        workspace_id,
        peer_id,
        target: query.target,
    };
    let card = call!(rest.recall, caller, request, get_peer_card);
    ok(json!({ "peer_card": card }))
}

async fn set_peer_card(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(query): Query<wire::TargetQuery>,
    Body(body): Body<wire::PeerCardSet>,
) -> Reply {
    let request = ingest::SetPeerCard {
        workspace_id,
        peer_id,
        target: query.target,
        peer_card: body.peer_card,
    };
    let card = call!(rest.ingest, caller, request, set_peer_card);
    ok(json!({ "peer_card": card }))
}

async fn representation(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(body): Body<Option<wire::RepresentationOptions>>,
) -> Reply {
    let body = body.unwrap_or_default();
    let curation = body.curation;
    let request = recall::GetRepresentation {
        workspace_id,
        peer_id,
        session_id: body.session_id,
        filters: body.filters,
        target: curation.target,
        search_query: curation.search_query,
        search_top_k: curation.search_top_k,
        search_max_distance: curation.search_max_distance,
        include_most_frequent: curation.include_most_frequent,
        max_conclusions: curation.max_conclusions,
        scopes: wire::scopes(body.scope)?,
    };
    let representation = call!(rest.recall, caller, request, get_representation);
    ok(json!({ "representation": representation }))
}

async fn peer_context(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(query): Query<wire::Curation>,
) -> Reply {
    let request = recall::GetPeerContext {
        workspace_id,
        peer_id,
        target: query.target,
        search_query: query.search_query,
        search_top_k: query.search_top_k,
        search_max_distance: query.search_max_distance,
        include_most_frequent: query.include_most_frequent,
        max_conclusions: query.max_conclusions,
    };
    let context = call!(rest.recall, caller, request, get_peer_context);
    ok(json!({
        "peer_id": context.peer_id,
        "target_id": context.target_id,
        "representation": context.representation,
        "peer_card": context.peer_card,
    }))
}

/// Session context. Its query repeats `sessions` (an allowlist), which
/// only a pair list reads, so the query is read as one.
async fn session_context(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Reply {
    let mut request = recall::GetSessionContext {
        workspace_id,
        session_id,
        ..Default::default()
    };
    for (key, value) in pairs {
        let number = |field: &str| {
            value
                .parse::<i32>()
                .map_err(|_| Error::invalid(field, format!("`{value}` is not an integer")))
        };
        let flag = |field: &str| match value.as_str() {
            "true" | "True" | "1" | "yes" | "on" => Ok(true),
            "false" | "False" | "0" | "no" | "off" => Ok(false),
            _ => Err(Error::invalid(field, format!("`{value}` is not a boolean"))),
        };
        match key.as_str() {
            "tokens" => request.tokens = Some(number("tokens")?),
            "summary" | "include_summary" => request.summary = Some(flag("summary")?),
            "search_query" => request.search_query = Some(value),
            "peer_target" => request.peer_target = Some(value),
            "peer_perspective" => request.peer_perspective = Some(value),
            "sessions" => request.sessions.push(value),
            "scope" => request.scope = Some(value),
            "limit_to_session" => request.limit_to_session = flag("limit_to_session")?,
            "search_top_k" => request.search_top_k = Some(number("search_top_k")?),
            "search_max_distance" => {
                let distance = value
                    .parse::<f64>()
                    .map_err(|_| Error::invalid("search_max_distance", format!("`{value}` is not a number")))?;
                request.search_max_distance = Some(distance);
            }
            "include_most_frequent" => request.include_most_frequent = Some(flag("include_most_frequent")?),
            "max_conclusions" => request.max_conclusions = Some(number("max_conclusions")?),
            _ => {}
        }
    }
    let context = call!(rest.recall, caller, request, get_session_context);
    let messages: Vec<wire::Message> = context.messages.into_iter().map(wire::Message::from).collect();
    ok(json!({
        "id": context.id,
        "messages": messages,
        "summary": context.summary.map(wire::Summary::from),
        "peer_representation": context.representation,
        "peer_card": context.peer_card,
    }))
}

async fn session_summaries(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
) -> Reply {
    let request = recall::GetSessionSummaries {
        workspace_id,
        session_id,
    };
    let summaries = call!(rest.recall, caller, request, get_session_summaries);
    ok(json!({
        "id": summaries.id,
        "short_summary": summaries.short.map(wire::Summary::from),
        "long_summary": summaries.long.map(wire::Summary::from),
    }))
}

/// 201 with the conclusions, as Honcho answers.
async fn create_conclusions(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    headers: http::HeaderMap,
    Body(batch): Body<wire::ConclusionBatch>,
) -> Reply {
    let request = ingest::CreateConclusions {
        workspace_id,
        conclusions: batch
            .conclusions
            .into_iter()
            .map(|conclusion| ingest::ConclusionInput {
                content: conclusion.content,
                observer_id: conclusion.observer_id,
                observed_id: conclusion.observed_id,
                session_id: conclusion.session_id,
            })
            .collect(),
        idempotency_key: idempotency_key(&headers),
    };
    let conclusions = call!(rest.ingest, caller, request, create_conclusions);
    let conclusions: Vec<wire::Conclusion> = conclusions.into_iter().map(wire::Conclusion::from).collect();
    Ok((StatusCode::CREATED, Json(conclusions)).into_response())
}

async fn list_conclusions(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Query(page): Query<PageQuery>,
    Body(body): Body<Option<ListBody>>,
) -> Reply {
    let request = recall::ListConclusions {
        workspace_id,
        filters: body.unwrap_or_default().filters,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_conclusions);
    ok(wire::Page::<wire::Conclusion>::from(page))
}

async fn query_conclusions(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<wire::ConclusionQuery>,
) -> Reply {
    let request = recall::QueryConclusions {
        workspace_id,
        query: body.query,
        top_k: body.top_k,
        distance: body.distance,
        filters: body.filters,
    };
    let conclusions = call!(rest.recall, caller, request, query_conclusions);
    let conclusions: Vec<wire::Conclusion> = conclusions.into_iter().map(wire::Conclusion::from).collect();
    ok(conclusions)
}

/// 204, as Honcho answers.
async fn delete_conclusion(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, conclusion_id)): Path<(String, String)>,
) -> Reply {
    let request = ingest::DeleteConclusion {
        workspace_id,
        conclusion_id,
    };
    call!(rest.ingest, caller, request, delete_conclusion);
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn create_webhook(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<wire::WebhookCreate>,
) -> Reply {
    let request = ingest::CreateWebhook {
        workspace_id,
        url: body.url,
    };
    let (endpoint, created) = call!(rest.ingest, caller, request, create_webhook);
    Ok(created_or_found(created, wire::WebhookEndpoint::from(endpoint)))
}

async fn list_webhooks(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Query(page): Query<PageQuery>,
) -> Reply {
    let request = recall::ListWebhooks {
        workspace_id,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_webhooks);
    ok(wire::Page::<wire::WebhookEndpoint>::from(page))
}

/// 204, as Honcho answers.
async fn delete_webhook(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, endpoint_id)): Path<(String, String)>,
) -> Reply {
    let request = ingest::DeleteWebhook {
        workspace_id,
        endpoint_id,
    };
    call!(rest.ingest, caller, request, delete_webhook);
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// 200 `null`, as Honcho answers; how many endpoints the event went to is
/// in `x-roncho-webhook-endpoints`.
async fn test_webhook(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
) -> Reply {
    let request = ingest::TestWebhook { workspace_id };
    let endpoints = call!(rest.ingest, caller, request, test_webhook);
    let mut response = Json(serde_json::Value::Null).into_response();
    response
        .headers_mut()
        .insert("x-roncho-webhook-endpoints", HeaderValue::from(endpoints));
    Ok(response)
}

/// `{"key": …}` for an admin key; 405 on a server without authentication
/// (it has no secret to sign with), as Honcho answers.
async fn create_key(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<wire::KeyQuery>,
) -> Reply {
    let request = roncho_api::keys::CreateKey {
        workspace_id: query
            .workspace_id
            .ok_or_else(|| Error::invalid("workspace_id", "a key needs a workspace"))?,
        peer_id: query.peer_id,
        session_id: query.session_id,
        expires_at: query
            .expires_at
            .map(|at| wire::parse_timestamp("expires_at", &at))
            .transpose()?,
    };
    let issued = rest
        .run(
            rest.keys.clone(),
            "this process serves no API role, so it mints no keys",
            caller,
            request,
            |issuer, request| async move { issuer.create_key(request).await },
        )
        .await;
    match issued {
        Ok(issued) => ok(json!({ "key": issued.key })),
        Err(RestError::Domain(Error::FailedPrecondition(reason))) => {
            Err(RestError::Http(StatusCode::METHOD_NOT_ALLOWED, reason))
        }
        Err(error) => Err(error),
    }
}

/// Chat about a peer: `{"content": …}`, or with `stream` Honcho's
/// server-sent events: `data: {"delta": {"content": …}, "done": false}`
/// per piece, then `data: {"done": true}`. An error after the stream began
/// ends it with `data: {"error": {"detail": …}, "done": true}`.
async fn chat(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(options): Body<wire::ChatOptions>,
) -> Reply {
    let response_format = match options.response_format {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Object(schema)) => Some(schema),
        Some(_) => {
            return Err(Error::invalid("response_format", "must be a JSON Schema whose root is an object").into());
        }
    };
    let request = roncho_dialectic::Chat {
        workspace_id,
        peer_id,
        query: options.query,
        session_id: options.session_id,
        target: options.target,
        reasoning_level: options.reasoning_level,
        filters: options.filters,
        response_format,
        scopes: wire::scopes(options.scope)?,
    };
    if !options.stream {
        let content = call!(rest.dialectic, caller, request, chat);
        return ok(json!({ "content": content }));
    }
    let pieces = call!(rest.dialectic, caller, request, chat_stream);
    let events = futures::StreamExt::map(pieces, |piece| {
        let event = match piece {
            Ok(piece) if piece.done => json!({"done": true}),
            Ok(piece) => json!({"delta": {"content": piece.delta}, "done": false}),
            Err(error) => json!({"error": {"detail": error.to_string()}, "done": true}),
        };
        Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(format!("data: {event}\n\n")))
    });
    let mut response = axum::body::Body::from_stream(events).into_response();
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}

/// A file's text as messages of `peer_id` (Honcho's multipart form: `file`,
/// `peer_id`, and `metadata`, `configuration` as JSON strings, `created_at`):
/// 201 with the messages; 413 over 5 MiB and 415 for a type other than
/// text, JSON or PDF, as Honcho answers. Metadata that is not a JSON object
/// is refused (422), where Honcho drops it silently.
async fn upload_file(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    headers: http::HeaderMap,
    form: Result<axum::extract::Multipart, axum::extract::multipart::MultipartRejection>,
) -> Reply {
    let mut form = form.map_err(|rejection| RestError::Http(rejection.status(), rejection.body_text()))?;
    let mut request = ingest::UploadFile {
        workspace_id,
        session_id,
        idempotency_key: idempotency_key(&headers),
        ..Default::default()
    };
    let mut has_file = false;
    let multipart =
        |error: axum::extract::multipart::MultipartError| RestError::Http(error.status(), error.body_text());
    while let Some(field) = form.next_field().await.map_err(multipart)? {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "file" {
            request.filename = field.file_name().unwrap_or("upload").to_owned();
            request.content_type = field.content_type().unwrap_or("application/octet-stream").to_owned();
            request.file = field.bytes().await.map_err(multipart)?.to_vec();
            has_file = true;
            continue;
        }
        let text = field.text().await.map_err(multipart)?;
        match name.as_str() {
            "peer_id" => request.peer_id = text,
            "metadata" => request.metadata = json_object("metadata", &text)?,
            "configuration" => request.configuration = json_object("configuration", &text)?,
            "created_at" if !text.is_empty() => request.created_at = Some(wire::parse_timestamp("created_at", &text)?),
            _ => {}
        }
    }
    if !has_file {
        return Err(RestError::schema(
            "missing",
            vec![json!("body"), json!("file")],
            "Field required",
            json!(null),
        ));
    }
    if request.peer_id.is_empty() {
        return Err(RestError::schema(
            "missing",
            vec![json!("body"), json!("peer_id")],
            "Field required",
            json!(null),
        ));
    }
    if let Err(Error::InvalidArgument { reason, .. }) = roncho_core::files::check_file_size(&request.file) {
        return Err(RestError::Http(StatusCode::PAYLOAD_TOO_LARGE, format!("file {reason}")));
    }
    if !roncho_core::files::is_supported(&request.content_type) {
        return Err(RestError::Http(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "files of type `{}` are not supported; use text/*, application/json or application/pdf",
                request.content_type
            ),
        ));
    }
    let messages = call!(rest.ingest, caller, request, upload_file);
    let messages: Vec<wire::Message> = messages.into_iter().map(wire::Message::from).collect();
    Ok((StatusCode::CREATED, Json(messages)).into_response())
}

/// A form field holding a JSON object; empty means none.
fn json_object(field: &str, text: &str) -> Result<Option<roncho_core::model::JsonObject>, Error> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(object)) => Ok(Some(object)),
        Ok(serde_json::Value::Null) => Ok(None),
        _ => Err(Error::invalid(field, "must be a JSON object")),
    }
}

async fn get_or_create_scope(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<wire::ScopeCreate>,
) -> Reply {
    let request = ingest::GetOrCreateScope {
        workspace_id,
        id: body.id,
        metadata: body.metadata,
    };
    let (scope, created) = call!(rest.ingest, caller, request, get_or_create_scope);
    Ok(created_or_found(created, wire::Scope::from(scope)))
}

async fn list_scopes(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Query(page): Query<PageQuery>,
) -> Reply {
    let request = recall::ListScopes {
        workspace_id,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_scopes);
    ok(wire::Page::<wire::Scope>::from(page))
}

async fn get_scope(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, scope_id)): Path<(String, String)>,
) -> Reply {
    let request = recall::GetScope {
        workspace_id,
        scope_id,
        ..Default::default()
    };
    let scope = call!(rest.recall, caller, request, get_scope);
    ok(wire::Scope::from(scope))
}

/// 204, as Honcho answers; each session's backfill shows in the status.
async fn add_scope_sessions(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, scope_id)): Path<(String, String)>,
    Body(body): Body<wire::ScopeSessionsAdd>,
) -> Reply {
    let request = ingest::AddScopeSessions {
        workspace_id,
        scope_id,
        session_ids: body.session_ids,
    };
    call!(rest.ingest, caller, request, add_scope_sessions);
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// 204, as Honcho answers, once the session is out of the scope; the
/// erasure of what the scope observed there has its receipt id in
/// `x-roncho-erasure-receipt`.
async fn remove_scope_session(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, scope_id, session_id)): Path<(String, String, String)>,
) -> Reply {
    let request = ingest::RemoveScopeSession {
        workspace_id,
        scope_id,
        session_id,
    };
    let receipt = call!(rest.ingest, caller, request, remove_scope_session);
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(value) = HeaderValue::from_str(&receipt.id) {
        response.headers_mut().insert("x-roncho-erasure-receipt", value);
    }
    Ok(response)
}

async fn list_scope_sessions(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, scope_id)): Path<(String, String)>,
    Query(page): Query<PageQuery>,
) -> Reply {
    let request = recall::GetScope {
        workspace_id,
        scope_id,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_scope_sessions);
    ok(wire::Page::<wire::Session>::from(page))
}

async fn scope_status(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, scope_id)): Path<(String, String)>,
) -> Reply {
    let request = recall::GetScope {
        workspace_id,
        scope_id,
        ..Default::default()
    };
    let backfills = call!(rest.recall, caller, request, get_scope_status);
    ok(wire::ScopeStatus::from(backfills))
}
