//! The Honcho v3 REST edge: Honcho's routes (`/v3/...`) and JSON shapes, so
//! Honcho's official SDKs and the apps built on them work against roncho
//! unchanged. Every route converts its request to the domain request the
//! gRPC edge would make and runs it through the same [`CallPolicy`]: one
//! authorization table, one set of rates, the same services. Nothing is
//! implemented twice.
//!
//! # Layout
//! - [`routes`]: the route table and its handlers.
//! - [`wire`]: Honcho's JSON shapes ⇄ domain types.
//! - [`extract`]: JSON bodies and query parameters, failing as FastAPI does.
//! - [`error`]: domain errors → Honcho's statuses and `{"detail": ...}`.
//!
//! Authentication (`Authorization: Bearer <jwt>`, Honcho's claims) and
//! admission (requests in flight, time-outs) are the gate's door, the same
//! on every wire, applied by [`Rest::router`] before a handler runs.

use std::future::Future;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use roncho_core::{Caller, Error};
use roncho_deriver::DeriverApi;
use roncho_dialectic::DialecticApi;
use roncho_dreamer::DreamerApi;
use roncho_gate::authz::Authorize;
use roncho_gate::keys::KeyIssuer;
use roncho_gate::{BoxError, CallPolicy, DeadlineBody, Door, SlotBody, StatusClass, Vouched, Wire};
use roncho_ingest::IngestApi;
use roncho_recall::RecallApi;
use tracing::Instrument;

pub mod console;
pub mod error;
pub mod extract;
pub mod routes;
pub mod wire;

use error::RestError;

/// The services the REST routes call, and the call policy they call them through.
/// A process without a role answers that role's routes 501 with the reason.
#[derive(Clone)]
pub struct Rest {
    policy: CallPolicy,
    ingest: Option<Arc<dyn IngestApi>>,
    recall: Option<Arc<dyn RecallApi>>,
    deriver: Option<Arc<dyn DeriverApi>>,
    dreamer: Option<Arc<dyn DreamerApi>>,
    dialectic: Option<Arc<dyn DialecticApi>>,
    keys: Option<Arc<KeyIssuer>>,
}

impl std::fmt::Debug for Rest {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Rest")
            .field("ingest", &self.ingest.is_some())
            .field("recall", &self.recall.is_some())
            .field("deriver", &self.deriver.is_some())
            .field("dreamer", &self.dreamer.is_some())
            .field("dialectic", &self.dialectic.is_some())
            .finish_non_exhaustive()
    }
}

impl Rest {
    /// Returns routes calling no service yet, through `policy`.
    pub fn new(policy: CallPolicy) -> Self {
        Self {
            policy,
            ingest: None,
            recall: None,
            deriver: None,
            dreamer: None,
            dialectic: None,
            keys: None,
        }
    }

    /// Serves the writes with `api`.
    pub fn with_ingest(mut self, api: Arc<dyn IngestApi>) -> Self {
        self.ingest = Some(api);
        self
    }

    /// Serves the reads with `api`.
    pub fn with_recall(mut self, api: Arc<dyn RecallApi>) -> Self {
        self.recall = Some(api);
        self
    }

    /// Serves queue status with `api`.
    pub fn with_deriver(mut self, api: Arc<dyn DeriverApi>) -> Self {
        self.deriver = Some(api);
        self
    }

    /// Serves dream requests with `api`.
    pub fn with_dreamer(mut self, api: Arc<dyn DreamerApi>) -> Self {
        self.dreamer = Some(api);
        self
    }

    /// Serves chat with `api`.
    pub fn with_dialectic(mut self, api: Arc<dyn DialecticApi>) -> Self {
        self.dialectic = Some(api);
        self
    }

    /// Mints keys with `issuer`.
    pub fn with_keys(mut self, issuer: Arc<KeyIssuer>) -> Self {
        self.keys = Some(issuer);
        self
    }

    /// Returns the router: Honcho's routes, each observed, admitted and
    /// authenticated by `door` first; `/health` and the like stay open.
    pub fn router(self, door: Door) -> axum::Router {
        let routes = routes::v3(self.clone())
            .merge(routes::extensions(self))
            .layer(axum::extract::DefaultBodyLimit::max(extract::MAX_BODY_BYTES));
        gated(routes, door.clone(), Wire::Rest)
            .merge(open(routes::open(), door.clone()))
            .fallback(move |request: Request| not_found(door, request))
    }

    /// Runs `request` as `caller` on `api` (the service of `role`, when this
    /// process runs it): authorized and metered by the call policy.
    async fn run<A, D, R, F, Fut>(
        &self,
        api: Option<Arc<A>>,
        role: &'static str,
        caller: Caller,
        request: D,
        op: F,
    ) -> Result<R, RestError>
    where
        A: ?Sized,
        D: Authorize + Sync,
        F: FnOnce(Arc<A>, D) -> Fut,
        Fut: Future<Output = roncho_core::Result<R>>,
    {
        let api = api.ok_or(Error::Unimplemented(role))?;
        Ok(self.policy.run(caller, request, |request| op(api, request)).await?)
    }
}

/// A body error in REST's terms: the domain error, answered by its status.
fn rest_body_error(error: Error) -> BoxError {
    Box::new(error)
}

/// FastAPI's answer to a path it has no route for, counted as the caller's
/// error under the route `unknown` (the path a client sent is no label).
async fn not_found(door: Door, request: Request) -> Response {
    let method = roncho_gate::observe::known_http_method(request.method());
    door.visit(Wire::Rest, "unknown".to_owned(), Some(method), request.headers(), false)
        .finish(StatusClass::ClientError, http::StatusCode::NOT_FOUND.as_str());
    (
        http::StatusCode::NOT_FOUND,
        axum::Json(serde_json::json!({"detail": "Not Found"})),
    )
        .into_response()
}

/// Whether `request` declares no body (a length of 0, or none and not
/// chunked).
fn body_is_empty(request: &Request) -> bool {
    use http_body::Body as _;
    request.body().size_hint().exact() == Some(0)
}

/// `response`, saying its HTTP/1 connection ends with it.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    response
}

/// The refusal of a request body that did not arrive whole: past its
/// deadline (408), broken off or malformed by the client (400), or longer
/// than `limit` (413) — each the client's, with the reason.
fn unreadable_body(
    ending: &roncho_gate::BodyEnding,
    body_timeout: Option<std::time::Duration>,
    limit: usize,
) -> RestError {
    if ending.deadline_fired() {
        let reason = format!(
            "{} {} s",
            roncho_gate::BODY_DEADLINE_REASON,
            body_timeout.unwrap_or_default().as_secs_f32()
        );
        RestError::Http(http::StatusCode::REQUEST_TIMEOUT, reason)
    } else if ending.broken() {
        let reason = "the request body could not be read: it was malformed or cut off".to_owned();
        RestError::Http(http::StatusCode::BAD_REQUEST, reason)
    } else {
        RestError::Http(
            http::StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is longer than {limit} bytes, the most that is read"),
        )
    }
}

/// Where the door stands before a router's handlers: the wire its calls
/// are counted on, and whether they need a key.
#[derive(Clone)]
struct Passage {
    door: Door,
    wire: Wire,
    authenticate: bool,
}

/// Returns `routes` behind the gate's door: every request observed as a
/// call on `wire`, authenticated and admitted, its body and its run held
/// to their deadlines, each refusal in Honcho's shape. Honcho's routes pass
/// it, and so does MCP over HTTP (`/mcp`, [`Wire::Mcp`]), which the binary
/// mounts beside them.
pub fn gated(routes: axum::Router, door: Door, wire: Wire) -> axum::Router {
    routes.layer(axum::middleware::from_fn_with_state(
        Passage {
            door,
            wire,
            authenticate: true,
        },
        observe_and_enter,
    ))
}

/// Returns `routes`, which need no key (`/health`, `/docs`, `/metrics`),
/// behind the door's places for such calls: bounded per process, client
/// address and connection; counted, not traced.
pub fn open(routes: axum::Router, door: Door) -> axum::Router {
    routes.layer(axum::middleware::from_fn_with_state(
        Passage {
            door,
            wire: Wire::Rest,
            authenticate: false,
        },
        observe_and_enter,
    ))
}

/// The gate before any handler: the call's visit (its span, a child of the
/// caller's `traceparent`, and its count by route and status class), then
/// the door.
async fn observe_and_enter(State(passage): State<Passage>, mut request: Request, next: Next) -> Response {
    // The route's template, never the path a client sent.
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unknown", axum::extract::MatchedPath::as_str)
        .to_owned();
    let vouched = request.extensions().get::<Vouched>().cloned();
    let method = roncho_gate::observe::known_http_method(request.method());
    let mut visit = passage.door.visit(
        passage.wire,
        route,
        Some(method),
        request.headers(),
        passage.authenticate,
    );
    visit.span().record("http.request.method", method);
    visit.span().record("http.route", visit.route());
    if vouched.is_some() {
        visit = visit.uncounted();
    }
    if passage.wire == Wire::Mcp {
        request.extensions_mut().insert(visit.call_name());
    }
    let response = enter(&passage, vouched, request, next)
        .instrument(visit.span().clone())
        .await;
    let status = response.status();
    visit.span().record("http.response.status_code", status.as_u16());
    visit.finish(StatusClass::of_http(status), status.as_str());
    response
}

/// The door: authentication, admission, the request's deadline and its
/// body's, each refusal in Honcho's shape. A request another wire of this
/// process made for a caller it let in ([`Vouched`]) enters as that caller,
/// within the deadline and the place of the call that made it.
async fn enter(passage: &Passage, vouched: Option<Vouched>, request: Request, next: Next) -> Response {
    let limit = match passage.wire {
        Wire::Mcp => extract::MAX_MCP_BODY_BYTES,
        _ => extract::MAX_BODY_BYTES,
    };
    // A body refused before it is read (not JSON, declared over the limit)
    // or that could not be read whole ends its HTTP/1 connection: the
    // client is told so (`connection: close`), rather than finding its next
    // request on the connection unanswered.
    let http1 = request.version() <= http::Version::HTTP_11;
    let body_coming = http1 && !body_is_empty(&request);
    let unread = |response: Response| if body_coming { closing(response) } else { response };
    if let Some(refusal) = extract::refuse_non_json(&request).or_else(|| extract::refuse_declared_over(&request, limit))
    {
        return unread(refusal.into_response());
    }
    let door = &passage.door;
    if let Some(Vouched(caller)) = vouched {
        let timeout = door.timeout(request.uri().path());
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(caller);
        return match tokio::time::timeout(timeout, next.run(Request::from_parts(parts, body))).await {
            Ok(response) => response,
            Err(_) => RestError::from(door.timed_out(timeout)).into_response(),
        };
    }
    let pass = match door.enter(&request, passage.authenticate) {
        Ok(pass) => pass,
        Err(error) => return RestError::from(error).into_response(),
    };
    // The body must arrive within the body timeout: a client that sends it
    // a byte at a time gives its place back then, not at the request timeout.
    let (mut parts, body) = request.into_parts();
    if let Some(caller) = pass.caller {
        parts.extensions.insert(caller);
    }
    let body = DeadlineBody::new(body, pass.body_timeout, rest_body_error);
    let ending = body.ending();
    // The body is read whole before the route runs, whether the route reads
    // it or not. A route that answered without reading it (a list, whose
    // body Honcho's clients send and nothing reads) left hyper to close the
    // connection with the client's body unread: the client lost the answer
    // to a reset, or its next request on the kept-alive connection ("server
    // disconnected without sending a response", 4 in 80,000 calls under
    // churn). The routes that read it take the same bytes.
    let run = async {
        let bytes = match axum::body::to_bytes(axum::body::Body::new(body), limit).await {
            Ok(bytes) => bytes,
            Err(_) => {
                let refusal = unreadable_body(&ending, pass.body_timeout, limit).into_response();
                return if http1 { closing(refusal) } else { refusal };
            }
        };
        next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
            .await
    };
    let response = match pass.timeout {
        Some(timeout) => match tokio::time::timeout(timeout, run).await {
            Ok(response) => response,
            Err(_) => return RestError::from(door.timed_out(timeout)).into_response(),
        },
        None => run.await,
    };
    // The place in flight is held until the reply's body has been sent.
    response.map(|body| axum::body::Body::new(SlotBody::holding(body, pass.slot)))
}
