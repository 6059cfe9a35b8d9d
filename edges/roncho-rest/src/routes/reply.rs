//! How handlers answer: status codes, bodies and the request parts
//! several read.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use roncho_core::Error;
use serde_json::json;

use crate::error::RestError;

pub(super) type Reply = Result<Response, RestError>;

/// 201 when `created`, else 200, with `body`.
pub(super) fn created_or_found(created: bool, body: impl serde::Serialize) -> Response {
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    (status, Json(body)).into_response()
}

pub(super) fn ok(body: impl serde::Serialize) -> Reply {
    Ok(Json(body).into_response())
}

/// The id a create names, or the caller's own when it names none (a key's
/// claim, as Honcho takes it).
pub(super) fn id_or_claim(id: Option<String>, claim: Option<&str>, field: &str) -> Result<String, Error> {
    id.or_else(|| claim.map(str::to_owned))
        .ok_or_else(|| Error::invalid(field, "required (or a key that names one)"))
}

/// The request's `Idempotency-Key`, when it has one.
pub(super) fn idempotency_key(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get("idempotency-key")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// 202 with Honcho's message and the erasure receipt's id in a header.
pub(super) fn accepted(message: &str, receipt: &str) -> Response {
    let mut response = (StatusCode::ACCEPTED, Json(json!({ "message": message }))).into_response();
    if let Ok(value) = HeaderValue::from_str(receipt) {
        response.headers_mut().insert("x-roncho-erasure-receipt", value);
    }
    response
}

/// A form field holding a JSON object; empty means none.
pub(super) fn json_object(field: &str, text: &str) -> Result<Option<roncho_core::model::JsonObject>, Error> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(object)) => Ok(Some(object)),
        Ok(serde_json::Value::Null) => Ok(None),
        _ => Err(Error::invalid(field, "must be a JSON object")),
    }
}
