//! Honcho v3's route table (honcho-v3.md §2.2) and its handlers. Each
//! handler reads Honcho's request, makes the domain request the gRPC edge
//! would make, runs it through the edge and answers in Honcho's shape and
//! status.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
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

/// Runs `api.$method(&caller, request)` through the edge, where `api` is
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
                |api, caller, request| async move { api.$method(&caller, request).await },
            )
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
        .route(W, put(update_workspace).delete(delete_workspace))
        .route(&at("/search"), post(search_workspace))
        .route(&at("/queue/status"), get(queue_status))
        .route(&at("/schedule_dream"), post(schedule_dream))
        .route(&at("/peers/{peer_id}/card"), get(get_peer_card).put(set_peer_card))
        .route(&at("/peers/{peer_id}/representation"), post(representation))
        .route(&at("/peers/{peer_id}/context"), get(peer_context))
        .route(&at("/peers/{peer_id}/chat"), post(chat))
        .route(&at("/sessions/{session_id}/context"), get(session_context))
        .route(&at("/sessions/{session_id}/summaries"), get(session_summaries))
        .route(&at("/conclusions"), post(create_conclusions))
        .route(&at("/conclusions/list"), post(list_conclusions))
        .route(&at("/conclusions/query"), post(query_conclusions))
        .route(&at("/conclusions/{conclusion_id}"), delete(delete_conclusion))
        .route(&at("/webhooks"), post(create_webhook).get(list_webhooks))
        .route(&at("/webhooks/test"), get(test_webhook))
        .route(&at("/webhooks/{endpoint_id}"), delete(delete_webhook))
        .route("/v3/keys", post(create_key))
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
    Body(body): Body<Option<ListBody>>,
) -> Reply {
    let request = recall::ListPeers {
        workspace_id,
        filters: body.unwrap_or_default().filters,
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
            |api, caller, request| async move { api.schedule_dream(&caller, request).await },
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
            |issuer, caller, request| async move { issuer.create_key(&caller, request).await },
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
