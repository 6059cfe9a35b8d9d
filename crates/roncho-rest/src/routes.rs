//! Honcho v3's route table (honcho-v3.md §2.2) and its handlers. Each
//! handler reads Honcho's request, makes the domain request the gRPC edge
//! would make, runs it through the edge and answers in Honcho's shape and
//! status.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
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

/// Runs `api.$method(&caller, request)` through the edge, on the `write`
/// (ingest) or `read` (recall) side; a refusal returns the handler's error.
macro_rules! call {
    ($rest:ident . $side:ident, $caller:expr, $request:expr, $method:ident) => {
        $rest
            .$side($caller, $request, |api, caller, request| async move {
                api.$method(&caller, request).await
            })
            .await?
    };
}

/// The routes that need no key: probes.
pub fn open() -> Router {
    Router::new().route("/health", get(|| async { Json(json!({"status": "ok"})) }))
}

/// The `/v3` routes.
pub fn v3(rest: Rest) -> Router {
    const W: &str = "/v3/workspaces/{workspace_id}";
    let at = |path: &str| format!("{W}{path}");
    Router::new()
        .route("/v3/workspaces", post(get_or_create_workspace))
        .route("/v3/workspaces/list", post(list_workspaces))
        .route(W, put(update_workspace))
        .route(&at("/search"), post(search_workspace))
        .route(&at("/peers"), post(get_or_create_peer))
        .route(&at("/peers/list"), post(list_peers))
        .route(&at("/peers/{peer_id}"), put(update_peer))
        .route(&at("/peers/{peer_id}/sessions"), post(list_peer_sessions))
        .route(&at("/peers/{peer_id}/search"), post(search_peer))
        .route(&at("/sessions"), post(get_or_create_session))
        .route(&at("/sessions/list"), post(list_sessions))
        .route(
            &at("/sessions/{session_id}"),
            put(update_session).delete(delete_session),
        )
        .route(&at("/sessions/{session_id}/clone"), post(clone_session))
        .route(
            &at("/sessions/{session_id}/peers"),
            post(add_session_peers)
                .put(set_session_peers)
                .delete(remove_session_peers)
                .get(list_session_peers),
        )
        .route(
            &at("/sessions/{session_id}/peers/{peer_id}/config"),
            get(get_session_peer_config).put(set_session_peer_config),
        )
        .route(&at("/sessions/{session_id}/search"), post(search_session))
        .route(&at("/sessions/{session_id}/messages"), post(create_messages))
        .route(&at("/sessions/{session_id}/messages/"), post(create_messages))
        .route(&at("/sessions/{session_id}/messages/list"), post(list_messages))
        .route(
            &at("/sessions/{session_id}/messages/{message_id}"),
            get(get_message).put(update_message),
        )
        .with_state(rest)
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
    let (workspace, created) = call!(rest.write, caller, request, get_or_create_workspace);
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
    let page = call!(rest.read, caller, request, list_workspaces);
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
    let workspace = call!(rest.write, caller, request, update_workspace);
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
    let (peer, created) = call!(rest.write, caller, request, get_or_create_peer);
    Ok(created_or_found(created, wire::Peer::from(peer)))
}

async fn list_peers(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Query(page): Query<PageQuery>,
    Body(body): Body<Option<ListBody>>,
) -> Reply {
    let request = recall::ListPeers {
        workspace_id,
        filters: body.unwrap_or_default().filters,
        paging: page.paging()?,
    };
    let page = call!(rest.read, caller, request, list_peers);
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
    let peer = call!(rest.write, caller, request, update_peer);
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
    let page = call!(rest.read, caller, request, list_peer_sessions);
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
    };
    let (session, created) = call!(rest.write, caller, request, get_or_create_session);
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
    let page = call!(rest.read, caller, request, list_sessions);
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
    let session = call!(rest.write, caller, request, update_session);
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
    let receipt = call!(rest.write, caller, request, delete_session);
    let mut response = (
        StatusCode::ACCEPTED,
        Json(json!({"message": "Session deleted successfully"})),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&receipt.id) {
        response.headers_mut().insert("x-roncho-erasure-receipt", value);
    }
    Ok(response)
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
    let session = call!(rest.write, caller, request, clone_session);
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
    let session = call!(rest.write, caller, request, add_session_peers);
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
    let session = call!(rest.write, caller, request, set_session_peers);
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
    let session = call!(rest.write, caller, request, remove_session_peers);
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
    let page = call!(rest.read, caller, request, list_session_peers);
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
    let config = call!(rest.read, caller, request, get_session_peer_config);
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
    call!(rest.write, caller, request, set_session_peer_config);
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
    let messages = call!(rest.write, caller, request, create_messages);
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
    let page = call!(rest.read, caller, request, list_messages);
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
    let message = call!(rest.read, caller, request, get_message);
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
    let message = call!(rest.write, caller, request, update_message);
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
    };
    let results = call!(rest.read, caller, request, search_messages);
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
