//! Errors on the REST wire, as Honcho answers them: `{"detail": "<reason>"}`
//! with Honcho's status codes, and FastAPI's 422 shape for a request that
//! does not fit its schema (`{"detail": [{type, loc, msg, input}]}`).

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use roncho_core::Error;
use serde_json::{Value, json};

/// What a REST call answers when it fails.
#[derive(Debug)]
pub enum RestError {
    /// A domain error, mapped to Honcho's status.
    Domain(Error),
    /// The request does not fit its schema: FastAPI's validation errors.
    Schema(Vec<Value>),
    /// A request the HTTP layer refused (a body too large or cut short).
    Http(StatusCode, String),
}

impl From<Error> for RestError {
    fn from(error: Error) -> Self {
        RestError::Domain(error)
    }
}

impl RestError {
    /// One FastAPI validation error at `loc` (`["body", "messages", 0]`).
    pub fn schema(kind: &str, loc: Vec<Value>, msg: impl Into<String>, input: Value) -> Self {
        RestError::Schema(vec![
            json!({"type": kind, "loc": loc, "msg": msg.into(), "input": input}),
        ])
    }
}

/// Returns the HTTP status Honcho gives a domain error.
///
/// Honcho answers a key that does not reach a resource 401, as it answers a
/// missing or bad key; so does this edge (docs/honcho-compatibility.md).
pub fn status_of(error: &Error) -> StatusCode {
    match error {
        Error::InvalidArgument { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        Error::NotFound { .. } => StatusCode::NOT_FOUND,
        Error::FailedPrecondition(_) => StatusCode::CONFLICT,
        Error::ResourceExhausted(_) | Error::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
        Error::Unauthenticated(_) | Error::PermissionDenied(_) => StatusCode::UNAUTHORIZED,
        Error::Unimplemented(_) => StatusCode::NOT_IMPLEMENTED,
        Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        Error::DeadlineExceeded(_) => StatusCode::GATEWAY_TIMEOUT,
        Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        match self {
            RestError::Schema(errors) => {
                (StatusCode::UNPROCESSABLE_ENTITY, Json(json!({ "detail": errors }))).into_response()
            }
            RestError::Http(status, detail) => (status, Json(json!({ "detail": detail }))).into_response(),
            RestError::Domain(error) => {
                let status = status_of(&error);
                let retry_after = match &error {
                    Error::Throttled { retry_after, .. } => Some(retry_after.as_secs_f64().ceil().max(1.0)),
                    _ => None,
                };
                let unauthenticated = matches!(error, Error::Unauthenticated(_));
                let detail = match error {
                    Error::Internal(detail) => roncho_gate::hide_internal(&detail),
                    other => other.to_string(),
                };
                let mut response = (status, Json(json!({ "detail": detail }))).into_response();
                if let Some(seconds) = retry_after
                    && let Ok(value) = http::HeaderValue::from_str(&format!("{seconds}"))
                {
                    response.headers_mut().insert(http::header::RETRY_AFTER, value);
                }
                // What a 401 must say (RFC 9110): how to authenticate.
                if unauthenticated {
                    response.headers_mut().insert(
                        http::header::WWW_AUTHENTICATE,
                        http::HeaderValue::from_static("Bearer realm=\"roncho\""),
                    );
                }
                response
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn body(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn domain_errors_answer_honchos_status_and_detail() {
        let response = RestError::from(Error::not_found("session", "s1")).into_response();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(body(response).await, json!({"detail": "session `s1` not found"}));
        let denied = RestError::from(Error::PermissionDenied("a peer key does not reach peer `b`".into()));
        assert_eq!(denied.into_response().status(), StatusCode::UNAUTHORIZED);
    }

    #[tokio::test]
    async fn throttling_says_when_to_retry() {
        let response = RestError::from(Error::Throttled {
            reason: "over the rate".into(),
            retry_after: Duration::from_millis(1500),
        })
        .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[http::header::RETRY_AFTER], "2");
    }

    #[tokio::test]
    async fn internal_errors_hide_their_detail() {
        let response = RestError::from(Error::Internal("connection to 10.0.0.7:5432 reset".into())).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let detail = body(response).await["detail"].as_str().unwrap().to_owned();
        assert!(!detail.contains("10.0.0.7") && detail.contains("id "), "{detail}");
    }
}
