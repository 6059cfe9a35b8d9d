//! Workspaces, peers, sessions and messages: creating, listing, updating
//! and deleting them, uploads, and erasure receipts.

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use http::{HeaderValue, StatusCode};
use roncho_core::{Caller, Error};
use roncho_ingest as ingest;
use roncho_recall as recall;
use serde_json::json;

use super::reply::{Reply, accepted, created_or_found, id_or_claim, idempotency_key, json_object, ok};
use crate::Rest;
use crate::error::RestError;
use crate::extract::{Body, Query};
use crate::wire::{self, Create, ListBody, PageQuery, SessionCreate, Update};

pub(super) async fn get_or_create_workspace(
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

pub(super) async fn list_workspaces(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Query(page): Query<PageQuery>,
    Body(body): Body<Option<ListBody>>,
) -> Reply {
    let request = recall::ListWorkspaces {
        filters: body.unwrap_or_default().filters,
        paging: page.paging()?,
        tenant: None,
    };
    let page = call!(rest.recall, caller, request, list_workspaces);
    ok(wire::Page::<wire::Workspace>::from(page))
}

pub(super) async fn update_workspace(
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

/// 202, as Honcho answers; 409 while the workspace has active sessions.
/// The erasure's receipt id is in `x-roncho-erasure-receipt`.
pub(super) async fn delete_workspace(
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

pub(super) async fn get_or_create_peer(
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

pub(super) async fn list_peers(
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

pub(super) async fn update_peer(
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

pub(super) async fn list_peer_sessions(
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

pub(super) async fn get_or_create_session(
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

pub(super) async fn list_sessions(
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

pub(super) async fn update_session(
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
pub(super) async fn delete_session(
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

pub(super) async fn clone_session(
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

pub(super) async fn add_session_peers(
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

pub(super) async fn set_session_peers(
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

pub(super) async fn remove_session_peers(
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

pub(super) async fn list_session_peers(
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

pub(super) async fn get_session_peer_config(
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
pub(super) async fn set_session_peer_config(
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
pub(super) async fn create_messages(
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

pub(super) async fn list_messages(
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

pub(super) async fn get_message(
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

pub(super) async fn update_message(
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

/// 202 with the erasure's receipt: the message is gone from reads at once,
/// and with it everything derived from it alone.
pub(super) async fn delete_message(
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
    Ok(receipt_reply(receipt))
}

/// 202 with an erasure's receipt, its id also in `x-roncho-erasure-receipt`.
fn receipt_reply(receipt: roncho_core::model::ErasureReceipt) -> axum::response::Response {
    let id = receipt.id.clone();
    let mut response = (StatusCode::ACCEPTED, Json(wire::Receipt::from(receipt))).into_response();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-roncho-erasure-receipt", value);
    }
    response
}

/// Erases a peer with everything learned about it and by it (roncho's
/// route; Honcho has none): 202 with the erasure's receipt.
pub(super) async fn delete_peer(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
) -> Reply {
    let request = ingest::DeletePeer { workspace_id, peer_id };
    let receipt = call!(rest.ingest, caller, request, delete_peer);
    Ok(receipt_reply(receipt))
}

/// An erasure's receipt: what it removed and whether it has finished.
pub(super) async fn erasure_receipt(
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

/// A file's text as messages of `peer_id` (Honcho's multipart form: `file`,
/// `peer_id`, and `metadata`, `configuration` as JSON strings, `created_at`):
/// 201 with the messages; 413 over 5 MiB and 415 for a type other than
/// text, JSON or PDF, as Honcho answers. Metadata that is not a JSON object
/// is refused (422), where Honcho drops it silently.
pub(super) async fn upload_file(
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
