//! The browser rules of [`roncho_gate::browser`] in front of every HTTP
//! router the process serves (REST, `/mcp`, docs, health, metrics): a
//! refused request is 403 with the reason before any route runs, counted
//! by the door like any refusal; a configured origin gets CORS headers and
//! its preflights an answer.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use roncho_gate::{BrowserPolicy, Door, StatusClass, Verdict, Wire};

/// How long a browser may cache a preflight's answer.
const PREFLIGHT_MAX_AGE_SECS: &str = "600";
/// What a configured origin's page may send and read.
const ALLOWED_METHODS: &str = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
const EXPOSED_HEADERS: &str = "x-roncho-degraded-reason, x-roncho-erasure-receipt, retry-after, mcp-session-id";

/// Returns `app` with every request judged by `policy` first; `door`
/// counts the refusals.
pub fn guard(app: axum::Router, policy: Arc<BrowserPolicy>, door: Door) -> axum::Router {
    app.layer(axum::middleware::from_fn_with_state((policy, door), judge))
}

async fn judge(State((policy, door)): State<(Arc<BrowserPolicy>, Door)>, request: Request, next: Next) -> Response {
    match policy.judge(request.method(), request.uri(), request.headers()) {
        Verdict::Serve => next.run(request).await,
        Verdict::ServeCors(origin) => {
            let mut response = next.run(request).await;
            allow(response.headers_mut(), origin);
            response.headers_mut().insert(
                header::ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static(EXPOSED_HEADERS),
            );
            response
        }
        Verdict::Preflight(origin) => {
            let requested = request
                .headers()
                .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
                .cloned()
                .unwrap_or_else(|| HeaderValue::from_static("authorization, content-type"));
            let mut response = StatusCode::NO_CONTENT.into_response();
            allow(response.headers_mut(), origin);
            let headers = response.headers_mut();
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static(ALLOWED_METHODS),
            );
            headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, requested);
            headers.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static(PREFLIGHT_MAX_AGE_SECS),
            );
            response
        }
        Verdict::Refuse(reason) => {
            tracing::debug!(%reason, path = request.uri().path(), "browser request refused");
            count_refusal(&door, &request);
            (
                StatusCode::FORBIDDEN,
                axum::Json(serde_json::json!({ "detail": reason })),
            )
                .into_response()
        }
    }
}

/// Counts a refused page's call as the gate counts its own refusals: on
/// the wire of its route (`/mcp` is MCP's), under the route's template,
/// the caller's error. Not traced: the page's trace is not ours to carry.
fn count_refusal(door: &Door, request: &Request) {
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unknown", axum::extract::MatchedPath::as_str)
        .to_owned();
    let wire = if route.starts_with("/mcp") {
        Wire::Mcp
    } else {
        Wire::Rest
    };
    let method = roncho_gate::observe::known_http_method(request.method());
    door.visit(wire, route, Some(method), request.headers(), false)
        .finish(StatusClass::ClientError, StatusCode::FORBIDDEN.as_str());
}

/// Lets `origin`'s page read the answer; caches keep answers per origin.
fn allow(headers: &mut http::HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.append(header::VARY, HeaderValue::from_static("origin"));
}
