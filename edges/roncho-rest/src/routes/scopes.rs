//! Scopes: named sets of sessions, and their status.

use axum::Extension;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use http::{HeaderValue, StatusCode};
use roncho_core::Caller;
use roncho_ingest as ingest;
use roncho_recall as recall;

use super::reply::{Reply, created_or_found, ok};
use crate::Rest;
use crate::extract::{Body, Query};
use crate::wire::{self, PageQuery};

pub(super) async fn get_or_create_scope(
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

pub(super) async fn list_scopes(
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

pub(super) async fn get_scope(
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
pub(super) async fn add_scope_sessions(
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
pub(super) async fn remove_scope_session(
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

pub(super) async fn list_scope_sessions(
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

pub(super) async fn scope_status(
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
