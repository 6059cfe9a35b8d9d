//! What every call leaves behind, on every wire: one span (a child of the
//! caller's, when its `traceparent` header names one) and, when the process
//! keeps metrics, one count and one latency by wire, route and status class.
//! A wire opens a [`Visit`] with [`Door::visit`](crate::Door::visit) before
//! anything else, runs the call inside its span and finishes it with the
//! status the caller is answered with, refusals included.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use roncho_core::trace::TraceContext;

/// The wire a call came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wire {
    Grpc,
    Rest,
    Mcp,
}

impl Wire {
    /// Its label in metrics and spans.
    pub fn as_str(self) -> &'static str {
        match self {
            Wire::Grpc => "grpc",
            Wire::Rest => "rest",
            Wire::Mcp => "mcp",
        }
    }
}

/// Whose the outcome of a call is: answered, the caller's mistake (a bad
/// argument, a missing key, a limit it ran into, a route the server does
/// not have), abandoned (the caller went away before the reply: a stall
/// shows here when callers give up first) or the server's failure; ordered
/// from the best to the worst.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatusClass {
    #[default]
    Ok,
    ClientError,
    Cancelled,
    ServerError,
}

impl StatusClass {
    /// Its label in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusClass::Ok => "ok",
            StatusClass::ClientError => "client_error",
            StatusClass::Cancelled => "cancelled",
            StatusClass::ServerError => "server_error",
        }
    }

    /// The class of an HTTP status: 5xx the server's, 4xx the caller's.
    pub fn of_http(status: http::StatusCode) -> Self {
        if status.is_server_error() {
            StatusClass::ServerError
        } else if status.is_client_error() {
            StatusClass::ClientError
        } else {
            StatusClass::Ok
        }
    }
}

/// An HTTP method as spans name it: one of HTTP's own, else `_OTHER`
/// (OpenTelemetry's rule: a client's made-up method is not a name).
pub fn known_http_method(method: &http::Method) -> &'static str {
    const KNOWN: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    ];
    KNOWN
        .into_iter()
        .find(|known| *known == method.as_str())
        .unwrap_or("_OTHER")
}

/// A finished call, as metrics count it.
#[derive(Debug, Clone, Copy)]
pub struct Finished<'a> {
    pub wire: Wire,
    /// The route's template (`/v3/workspaces/{workspace_id}/peers`), the
    /// gRPC method (`roncho.v1.IngestService/CreateMessages`) or the MCP
    /// call (`tools/call search`): never text a client made up.
    pub route: &'a str,
    pub class: StatusClass,
    /// The wire's own code: the gRPC code's name (`InvalidArgument`) or the
    /// HTTP status (`404`).
    pub code: &'a str,
    pub elapsed: Duration,
}

/// Where finished calls are counted (the process's metrics).
pub trait RequestMetrics: Send + Sync + std::fmt::Debug {
    fn record(&self, call: Finished<'_>);
}

/// What a handler says of its call when the route and the wire's status
/// alone do not (MCP: one route, many tools, each failure a reply of 200).
/// The wire puts one in the request's extensions; the handler
/// [`names`](Self::name) the call and says when it [`failed`](Self::failed);
/// the visit is counted and its span named accordingly.
#[derive(Debug, Clone, Default)]
pub struct CallName(Arc<Mutex<(Option<String>, StatusClass)>>);

impl CallName {
    /// Names the call `name` (from a list the server knows, never a client's text).
    pub fn name(&self, name: impl Into<String>) {
        self.0.lock().expect("call name").0 = Some(name.into());
    }

    /// Returns whether the handler named the call.
    pub fn named(&self) -> bool {
        self.0.lock().expect("call name").0.is_some()
    }

    /// Says the call failed as `class`, whatever status its reply carries.
    pub fn failed(&self, class: StatusClass) {
        let mut note = self.0.lock().expect("call name");
        note.1 = note.1.max(class);
    }

    fn take(&self) -> (Option<String>, StatusClass) {
        std::mem::take(&mut *self.0.lock().expect("call name"))
    }
}

/// A span's name: `<method> <route>`, or the route alone.
struct SpanName<'a> {
    method: Option<&'a str>,
    route: &'a str,
}

impl std::fmt::Display for SpanName<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.method {
            Some(method) => write!(formatter, "{method} {}", self.route),
            None => formatter.write_str(self.route),
        }
    }
}

/// One call on its way through the gate: its span, its clock and where it
/// is counted. A visit dropped unfinished (its caller went away, its
/// future was dropped) is counted [`StatusClass::Cancelled`].
#[derive(Debug)]
pub struct Visit {
    wire: Wire,
    route: String,
    started: Instant,
    span: tracing::Span,
    metrics: Option<Arc<dyn RequestMetrics>>,
    name: Option<CallName>,
    finished: bool,
}

impl Visit {
    /// Opens the visit of a call to `route` on `wire` whose headers are
    /// `headers`; its span is named `<method> <route>` (HTTP) or `route`.
    /// Traced only when `traced` (probes come every few seconds: counted,
    /// not traced); counted by `metrics`, when given.
    pub(crate) fn open(
        wire: Wire,
        route: String,
        method: Option<&str>,
        headers: &http::HeaderMap,
        traced: bool,
        metrics: Option<Arc<dyn RequestMetrics>>,
    ) -> Self {
        let span = if traced {
            // Formatted only when a subscriber records the span.
            let name = SpanName { method, route: &route };
            let span = tracing::info_span!(
                "request",
                otel.name = %name,
                otel.kind = "server",
                otel.status_code = tracing::field::Empty,
                roncho.wire = wire.as_str(),
                roncho.route = route.as_str(),
                rpc.system = tracing::field::Empty,
                rpc.service = tracing::field::Empty,
                rpc.method = tracing::field::Empty,
                rpc.grpc.status_code = tracing::field::Empty,
                http.request.method = tracing::field::Empty,
                http.route = tracing::field::Empty,
                http.response.status_code = tracing::field::Empty,
                mcp.method.name = tracing::field::Empty,
            );
            if let Some(parent) =
                TraceContext::from_headers(|name| headers.get(name).and_then(|value| value.to_str().ok()))
            {
                parent.set_parent_of(&span);
            }
            span
        } else {
            tracing::Span::none()
        };
        Self {
            wire,
            route,
            started: Instant::now(),
            span,
            metrics,
            name: None,
            finished: false,
        }
    }

    /// The route the call is counted under, until its handler names it.
    pub fn route(&self) -> &str {
        &self.route
    }

    /// The call's span: the wire records its own fields on it and runs the call inside it.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// A name the handler can give the call, for the request's extensions.
    pub fn call_name(&mut self) -> CallName {
        self.name.get_or_insert_with(CallName::default).clone()
    }

    /// Not counted: a call another wire made in process, counted there.
    pub fn uncounted(mut self) -> Self {
        self.metrics = None;
        self
    }

    /// Ends the visit: the span's status and the call counted, as `class`
    /// (or worse, when its handler said so) with the wire's `code`.
    pub fn finish(mut self, class: StatusClass, code: &str) {
        self.record(class, code);
    }

    fn record(&mut self, class: StatusClass, code: &str) {
        self.finished = true;
        let (named, said) = self.name.as_ref().map(CallName::take).unwrap_or_default();
        let class = class.max(said);
        let route = named.as_deref().unwrap_or(&self.route);
        if named.is_some() {
            roncho_core::trace::rename(&self.span, route.to_owned());
            self.span.record("roncho.route", route);
        }
        if class == StatusClass::ServerError {
            self.span.record("otel.status_code", "error");
        }
        if let Some(metrics) = &self.metrics {
            metrics.record(Finished {
                wire: self.wire,
                route,
                class,
                code,
                elapsed: self.started.elapsed(),
            });
        }
    }
}

impl Drop for Visit {
    fn drop(&mut self) {
        if !self.finished {
            self.record(StatusClass::Cancelled, "cancelled");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A traced visit to `route` on `wire` by POST, counted in `metrics`.
    fn post(wire: Wire, route: &str, metrics: &Arc<dyn RequestMetrics>) -> Visit {
        Visit::open(
            wire,
            route.into(),
            Some("POST"),
            &http::HeaderMap::new(),
            true,
            Some(metrics.clone()),
        )
    }

    #[derive(Debug, Default)]
    struct Counted(Mutex<Vec<(Wire, String, StatusClass, String)>>);

    impl RequestMetrics for Counted {
        fn record(&self, call: Finished<'_>) {
            self.0
                .lock()
                .unwrap()
                .push((call.wire, call.route.to_owned(), call.class, call.code.to_owned()));
        }
    }

    #[test]
    fn a_visit_dropped_unfinished_is_counted_cancelled_once() {
        let counted = Arc::new(Counted::default());
        let metrics: Arc<dyn RequestMetrics> = counted.clone();
        let headers = http::HeaderMap::new();
        drop(Visit::open(
            Wire::Grpc,
            "m".into(),
            None,
            &headers,
            true,
            Some(metrics.clone()),
        ));
        Visit::open(Wire::Grpc, "m".into(), None, &headers, true, Some(metrics)).finish(StatusClass::Ok, "Ok");
        assert_eq!(
            *counted.0.lock().unwrap(),
            [
                (
                    Wire::Grpc,
                    "m".to_owned(),
                    StatusClass::Cancelled,
                    "cancelled".to_owned()
                ),
                (Wire::Grpc, "m".to_owned(), StatusClass::Ok, "Ok".to_owned()),
            ]
        );
    }

    #[test]
    fn made_up_http_methods_are_not_names() {
        assert_eq!(known_http_method(&http::Method::POST), "POST");
        assert_eq!(known_http_method(&http::Method::PATCH), "PATCH");
        assert_eq!(
            known_http_method(&http::Method::from_bytes(b"NOKEY11286").unwrap()),
            "_OTHER"
        );
        assert_eq!(known_http_method(&http::Method::from_bytes(b"post").unwrap()), "_OTHER");
    }

    #[test]
    fn http_statuses_fall_in_their_classes() {
        for (status, class) in [
            (200, StatusClass::Ok),
            (201, StatusClass::Ok),
            (304, StatusClass::Ok),
            (400, StatusClass::ClientError),
            (401, StatusClass::ClientError),
            (429, StatusClass::ClientError),
            (500, StatusClass::ServerError),
            (503, StatusClass::ServerError),
        ] {
            assert_eq!(StatusClass::of_http(http::StatusCode::from_u16(status).unwrap()), class);
        }
    }

    #[test]
    fn a_visit_is_counted_once_under_the_name_its_handler_gave() {
        let counted = Arc::new(Counted::default());
        let metrics: Arc<dyn RequestMetrics> = counted.clone();
        let visit = post(Wire::Rest, "/v3/workspaces", &metrics);
        visit.finish(StatusClass::Ok, "200");
        let mut named = post(Wire::Mcp, "/mcp", &metrics);
        let call = named.call_name();
        call.name("tools/call search");
        call.failed(StatusClass::ClientError);
        call.failed(StatusClass::Ok);
        named.finish(StatusClass::Ok, "200");
        let unnamed = post(Wire::Mcp, "/mcp", &metrics);
        unnamed.finish(StatusClass::Ok, "200");
        post(Wire::Rest, "/v3/workspaces", &metrics)
            .uncounted()
            .finish(StatusClass::Ok, "200");
        assert_eq!(
            *counted.0.lock().unwrap(),
            [
                (
                    Wire::Rest,
                    "/v3/workspaces".to_owned(),
                    StatusClass::Ok,
                    "200".to_owned()
                ),
                (
                    Wire::Mcp,
                    "tools/call search".to_owned(),
                    StatusClass::ClientError,
                    "200".to_owned()
                ),
                (Wire::Mcp, "/mcp".to_owned(), StatusClass::Ok, "200".to_owned()),
            ]
        );
    }
}
