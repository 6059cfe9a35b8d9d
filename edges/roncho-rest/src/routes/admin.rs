//! Webhook endpoints and API keys.

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use http::{HeaderValue, StatusCode};
use roncho_core::{Caller, Error};
use roncho_ingest as ingest;
use roncho_recall as recall;
use serde_json::json;

use super::reply::{Reply, created_or_found, ok};
use crate::Rest;
use crate::error::RestError;
use crate::extract::{Body, Query};
use crate::wire::{self, PageQuery};

pub(super) async fn create_webhook(
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

pub(super) async fn list_webhooks(
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
pub(super) async fn delete_webhook(
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
pub(super) async fn test_webhook(
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
pub(super) async fn create_key(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Query(query): Query<wire::KeyQuery>,
) -> Reply {
    let request = roncho_gate::keys::CreateKey {
        workspace_id: query
            .workspace_id
            .ok_or_else(|| Error::invalid("workspace_id", "a key needs a workspace"))?,
        peer_id: query.peer_id,
        session_id: query.session_id,
        expires_at: query
            .expires_at
            .map(|at| wire::parse_timestamp("expires_at", &at))
            .transpose()?,
        tenant_id: query.tenant_id,
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

/// What `GET …/export` reads from its query.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct ExportQuery {
    peer_id: Option<String>,
    session_id: Option<String>,
}

/// The workspace (or a peer's or a session's part of it) as JSON lines
/// (`application/x-ndjson`), streamed as read. An error after the first
/// line ends the stream with `{"kind":"error","detail":…}` in place of the
/// trailer.
pub(super) async fn export_workspace(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Query(query): Query<ExportQuery>,
) -> Reply {
    let request = recall::ExportWorkspace {
        workspace_id,
        peer_id: query.peer_id,
        session_id: query.session_id,
    };
    let records = call!(rest.recall, caller, request, export_workspace);
    let lines = futures::StreamExt::map(records, |record| {
        let line = match record {
            Ok(record) => record.to_line(),
            Err(error) => json!({"kind": "error", "detail": error.to_string()}).to_string(),
        };
        Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(line + "\n"))
    });
    let mut response = axum::body::Body::from_stream(lines).into_response();
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    Ok(response)
}

/// What `POST …/import` takes: records as `export` wrote them, one JSON
/// object each, in their order.
#[derive(Debug, serde::Deserialize)]
pub(super) struct ImportBody {
    records: Vec<serde_json::Map<String, serde_json::Value>>,
    #[serde(default, deserialize_with = "crate::wire::boolean")]
    derive: bool,
}

/// The import's counts: `{"workspaces": {"new", "present", "skipped"}, …, "notes": […]}`.
pub(super) async fn import_records(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<ImportBody>,
) -> Reply {
    let request = ingest::ImportRecords {
        workspace_id,
        records: body
            .records
            .into_iter()
            .map(|record| serde_json::Value::Object(record).to_string())
            .collect(),
        derive: body.derive,
    };
    let counts = call!(rest.ingest, caller, request, import_records);
    ok(counts)
}

/// A reasoning trace (`reasoning_trace_id` of a chat's evidence):
/// `PUT /v3/workspaces/{w}/tenant {"tenant_id": …}`: gives a workspace to
/// a tenant (multi-tenant servers, the operator's key); 200 with the
/// tenant that held it before.
pub(super) async fn assign_workspace(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<wire::TenantAssignment>,
) -> Reply {
    let request = roncho_gate::keys::AssignWorkspace {
        workspace_id,
        tenant_id: body.tenant_id,
    };
    let assigned = rest
        .run(
            rest.keys.clone(),
            "this process serves no API role, so it assigns no workspaces",
            caller,
            request,
            |issuer, request| async move { issuer.assign_workspace(request).await },
        )
        .await?;
    ok(json!({
        "workspace_id": assigned.workspace_id,
        "tenant_id": assigned.tenant_id,
        "previous_tenant_id": assigned.previous_tenant_id,
    }))
}

/// `{id, workspace_id, peer_id, target, session_id, created_at, …detail}`.
pub(super) async fn reasoning_trace(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, trace_id)): Path<(String, String)>,
) -> Reply {
    let request = roncho_dialectic::GetReasoningTrace { workspace_id, trace_id };
    let trace = call!(rest.dialectic, caller, request, get_reasoning_trace);
    let mut body = json!({
        "id": trace.id,
        "workspace_id": trace.workspace_id,
        "peer_id": trace.peer_id,
        "target": trace.target,
        "session_id": trace.session_id,
        "created_at": wire::timestamp(trace.created_at),
    });
    if let Some(fields) = body.as_object_mut() {
        for (key, value) in trace.detail {
            fields.entry(key).or_insert(value);
        }
    }
    ok(body)
}
