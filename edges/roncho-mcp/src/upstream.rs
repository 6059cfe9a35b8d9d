//! Where the tools' calls go: roncho's Honcho v3 REST edge, in this process
//! (its router, called directly) or at a URL (a roncho server elsewhere).
//! Either way a call is one REST request carrying the caller's key, so the
//! edge authenticates, authorizes and meters it exactly as any REST call.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderValue, Method, StatusCode};
use roncho_gate::Vouched;
use serde_json::Value;

/// The largest REST reply a tool reads (a page of messages is far smaller).
const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;
/// How long one attempt may take (chat runs the dialectic: seconds).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a streamed reply ([`Upstream::open`]) may take in all.
const STREAM_TIMEOUT: Duration = Duration::from_secs(24 * 3600);
/// How long connecting to a remote edge may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts after the first, on 429, 502–504 or a failed connection.
const RETRIES: u32 = 2;

/// A REST edge.
#[derive(Clone)]
pub enum Upstream {
    /// A roncho server's REST edge at this base URL (`http://host:8000`).
    Remote { client: reqwest::Client, base: String },
    /// The REST router of this process.
    Local(axum::Router),
    /// The REST router of a server starting in this process (`roncho mcp`
    /// embedded: no listener, every call in process); calls wait for it.
    Starting(tokio::sync::watch::Receiver<Option<axum::Router>>),
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Remote { base, .. } => write!(formatter, "Upstream::Remote({base})"),
            Self::Local(_) => formatter.write_str("Upstream::Local"),
            Self::Starting(_) => formatter.write_str("Upstream::Starting"),
        }
    }
}

/// A refused or failed call: the status (0 when no reply came) and the
/// reason the edge gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.message)
    }
}

/// A REST reply: its JSON (`None` for an empty body), the erasure
/// receipt's id when the call erased something, and why a search ran
/// degraded (`x-roncho-degraded-reason`), when it did.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub body: Option<Value>,
    pub receipt: Option<String>,
    pub degraded: Option<String>,
}

/// One REST request.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: Method,
    /// The path, its segments already encoded (see [`segment`]).
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    pub body: Option<Value>,
}

impl Call {
    pub fn new(method: Method, path: String) -> Self {
        Self {
            method,
            path,
            query: Vec::new(),
            body: None,
        }
    }

    pub fn get(path: String) -> Self {
        Self::new(Method::GET, path)
    }

    pub fn post(path: String, body: Value) -> Self {
        Self::new(Method::POST, path).body(body)
    }

    pub fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    /// Adds `name=value` when there is a value.
    pub fn query(mut self, name: &'static str, value: Option<impl ToString>) -> Self {
        if let Some(value) = value {
            self.query.push((name, value.to_string()));
        }
        self
    }

    /// Refuses a path with a `.` or `..` segment (an id of one or two
    /// dots): URL parsers resolve them, and the call would reach another
    /// route than the one it names.
    fn check_path(&self) -> Result<(), ApiError> {
        let dots = |segment: &str| {
            let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
            decoded == "." || decoded == ".."
        };
        if self.path.split('/').any(dots) {
            return Err(ApiError {
                status: 400,
                message: "an id cannot be `.` or `..`".to_owned(),
            });
        }
        Ok(())
    }

    /// Whether sending the call twice does what sending it once does: GET,
    /// PUT and DELETE, and Honcho's reads sent as POST (`…/list`,
    /// `…/search`, `…/query`, `…/representation`).
    fn repeatable(&self) -> bool {
        // Reads, and an import (which keeps ids: sent again, it adds nothing).
        const READS: [&str; 5] = ["/list", "/search", "/query", "/representation", "/import"];
        self.method != Method::POST || READS.iter().any(|read| self.path.ends_with(read))
    }

    fn path_and_query(&self) -> String {
        let mut target = self.path.clone();
        for (index, (name, value)) in self.query.iter().enumerate() {
            target.push(if index == 0 { '?' } else { '&' });
            target.push_str(name);
            target.push('=');
            target.push_str(&segment(value));
        }
        target
    }
}

/// Percent-encodes `text` for a path segment or a query value: everything
/// but RFC 3986's unreserved characters.
pub fn segment(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

impl Upstream {
    /// The REST edge at `base` (`http://127.0.0.1:8000`; `https://` with the
    /// system's roots).
    pub fn remote(base: &str) -> Result<Self, ApiError> {
        Self::remote_trusting(base, None)
    }

    /// The REST edge at `base`, its certificate checked against the CA
    /// certificates of `ca_pem` (PEM) beside the system's roots: a server
    /// with a certificate of its own (`tls_cert_file`).
    pub fn remote_trusting(base: &str, ca_pem: Option<&[u8]>) -> Result<Self, ApiError> {
        let invalid = |message: String| ApiError { status: 400, message };
        let url = reqwest::Url::parse(base).map_err(|error| invalid(format!("`{base}` is not a URL: {error}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(invalid(format!(
                "`{base}`: the server's address is http:// or https:// and a host"
            )));
        }
        let mut client = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT);
        if let Some(pem) = ca_pem {
            let certificates = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|error| invalid(format!("the CA file holds no PEM certificate: {error}")))?;
            if certificates.is_empty() {
                return Err(invalid("the CA file holds no PEM certificate".to_owned()));
            }
            for certificate in certificates {
                client = client.add_root_certificate(certificate);
            }
        }
        if is_loopback(&url) {
            // A call to this machine never goes through a proxy the
            // environment names (HTTP_PROXY, ALL_PROXY): it would carry
            // the caller's key to that proxy in clear text.
            client = client.no_proxy();
        }
        let client = client.build().map_err(|error| ApiError {
            status: 0,
            message: format!("building the HTTP client: {error}"),
        })?;
        Ok(Self::Remote {
            client,
            base: base.trim_end_matches('/').to_owned(),
        })
    }

    /// Sends `call` with `authorization` (the caller's `Bearer` key), again
    /// on overload or a lost connection. In process, a caller the gate
    /// already let in (`vouched`) is handed to the routes as such: not
    /// authenticated, admitted or counted a second time.
    pub async fn send(
        &self,
        call: &Call,
        authorization: Option<&HeaderValue>,
        vouched: Option<&Vouched>,
    ) -> Result<Reply, ApiError> {
        call.check_path()?;
        let mut attempt = 0;
        loop {
            let reply = self.attempt(call, authorization, vouched).await;
            let retry_after = match &reply {
                Err(failure) if attempt < RETRIES && failure.may_repeat(call) => failure.retry_after,
                _ => return reply.map_err(|failure| failure.error),
            };
            let backoff = retry_after.unwrap_or(Duration::from_millis(500 * 2u64.pow(attempt)));
            tracing::debug!(path = %call.path, attempt, ?backoff, "retrying a REST call");
            tokio::time::sleep(backoff.min(Duration::from_secs(10))).await;
            attempt += 1;
        }
    }

    /// The router of this process's server, once it serves (remote: none).
    async fn router(&self) -> Result<axum::Router, ApiError> {
        match self {
            Self::Local(router) => Ok(router.clone()),
            Self::Starting(started) => Ok(started
                .clone()
                .wait_for(Option::is_some)
                .await
                .map_err(|_| ApiError {
                    status: 0,
                    message: "the embedded roncho server stopped before it served".to_owned(),
                })?
                .clone()
                .unwrap_or_default()),
            Self::Remote { .. } => Err(ApiError {
                status: 0,
                message: "a remote server has no router in this process".to_owned(),
            }),
        }
    }

    /// Sends `call` once and returns its reply's body as it arrives, with
    /// no limit on its length and no timeout past the connection's (an
    /// export's JSON lines); a refusal is read whole, as [`Upstream::send`]
    /// reads it.
    pub async fn open(
        &self,
        call: &Call,
        authorization: Option<&HeaderValue>,
    ) -> Result<BoxStream<'static, Result<axum::body::Bytes, ApiError>>, ApiError> {
        call.check_path()?;
        let broken = |error: String| ApiError {
            status: 0,
            message: format!("the reply broke off: {error}"),
        };
        let (status, body): (StatusCode, BoxStream<'static, Result<_, ApiError>>) = match self {
            Self::Remote { client, base } => {
                let mut request = client
                    .request(call.method.clone(), format!("{base}{}", call.path_and_query()))
                    .timeout(STREAM_TIMEOUT);
                if let Some(authorization) = authorization {
                    request = request.header(http::header::AUTHORIZATION, authorization.clone());
                }
                if let Some(body) = &call.body {
                    request = request.json(body);
                }
                let response = request.send().await.map_err(|error| unreachable(&error))?;
                let status = response.status();
                let body = futures::stream::unfold(Some(response), move |response| async move {
                    let mut response = response?;
                    match response.chunk().await {
                        Ok(Some(chunk)) => Some((Ok(chunk), Some(response))),
                        Ok(None) => None,
                        Err(error) => Some((Err(broken(error.to_string())), None)),
                    }
                });
                (status, Box::pin(body))
            }
            Self::Starting(_) | Self::Local(_) => {
                let router = self.router().await?;
                let response = route(router, call, authorization, None)
                    .await
                    .map_err(|failure| failure.error)?;
                let status = response.status();
                let body = response
                    .into_body()
                    .into_data_stream()
                    .map(move |chunk| chunk.map_err(|error| broken(error.to_string())));
                (status, Box::pin(body))
            }
        };
        if status.is_success() {
            return Ok(body);
        }
        let mut bytes = Vec::new();
        let mut body = body;
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            if bytes.len() + chunk.len() > MAX_REPLY_BYTES {
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        let json = serde_json::from_slice::<Value>(&bytes).ok();
        Err(ApiError {
            status: status.as_u16(),
            message: reason(status, json.as_ref()),
        })
    }

    async fn attempt(
        &self,
        call: &Call,
        authorization: Option<&HeaderValue>,
        vouched: Option<&Vouched>,
    ) -> Result<Reply, Failure> {
        let (status, headers, bytes) = match self {
            Self::Remote { client, base } => {
                let mut request = client.request(call.method.clone(), format!("{base}{}", call.path_and_query()));
                if let Some(authorization) = authorization {
                    request = request.header(http::header::AUTHORIZATION, authorization.clone());
                }
                if let Some(body) = &call.body {
                    request = request.json(body);
                }
                let mut response = request.send().await.map_err(|error| Failure {
                    error: unreachable(&error),
                    retry_after: None,
                    // Nothing reached the server: sending it again repeats nothing.
                    unsent: error.is_connect(),
                })?;
                let (status, headers) = (response.status(), response.headers().clone());
                // Read up to the same limit as a reply in process.
                let mut bytes = Vec::new();
                while let Some(chunk) = response
                    .chunk()
                    .await
                    .map_err(|error| Failure::from(unreachable(&error)))?
                {
                    if bytes.len() + chunk.len() > MAX_REPLY_BYTES {
                        let message = format!("the reply is longer than {MAX_REPLY_BYTES} bytes");
                        return Err(Failure::from(ApiError { status: 0, message }));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                (status, headers, axum::body::Bytes::from(bytes))
            }
            Self::Starting(_) | Self::Local(_) => {
                call_router(self.router().await?, call, authorization, vouched).await?
            }
        };
        let json = if bytes.is_empty() {
            None
        } else {
            Some(serde_json::from_slice::<Value>(&bytes).unwrap_or_else(|_| Value::String(lossy(&bytes))))
        };
        if status.is_success() {
            let header = |name: &str| {
                headers
                    .get(name)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned)
            };
            return Ok(Reply {
                body: json,
                receipt: header("x-roncho-erasure-receipt"),
                degraded: header("x-roncho-degraded-reason"),
            });
        }
        Err(Failure {
            error: ApiError {
                status: status.as_u16(),
                message: reason(status, json.as_ref()),
            },
            retry_after: retry_after(&headers),
            unsent: false,
        })
    }
}

/// Sends `call` to `router`, in this process, as one REST request.
async fn route(
    mut router: axum::Router,
    call: &Call,
    authorization: Option<&HeaderValue>,
    vouched: Option<&Vouched>,
) -> Result<axum::response::Response, Failure> {
    let mut request = http::Request::builder()
        .method(call.method.clone())
        .uri(call.path_and_query())
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(authorization) = authorization {
        request = request.header(http::header::AUTHORIZATION, authorization.clone());
    }
    if let Some(vouched) = vouched {
        request = request.extension(vouched.clone());
    }
    let body = match &call.body {
        Some(body) => axum::body::Body::from(body.to_string()),
        None => axum::body::Body::empty(),
    };
    let request = request.body(body).map_err(|error| {
        let message = format!("building the request: {error}");
        Failure::from(ApiError { status: 0, message })
    })?;
    std::future::poll_fn(|context| {
        <axum::Router as tower_service::Service<http::Request<axum::body::Body>>>::poll_ready(&mut router, context)
    })
    .await?;
    Ok(tower_service::Service::call(&mut router, request).await?)
}

/// Sends `call` to `router`, in this process, as one REST request, and
/// reads its reply.
async fn call_router(
    router: axum::Router,
    call: &Call,
    authorization: Option<&HeaderValue>,
    vouched: Option<&Vouched>,
) -> Result<(StatusCode, http::HeaderMap, axum::body::Bytes), Failure> {
    let response = route(router, call, authorization, vouched).await?;
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = axum::body::to_bytes(response.into_body(), MAX_REPLY_BYTES)
        .await
        .map_err(|error| {
            let message = format!("reading the reply: {error}");
            Failure::from(ApiError { status: 0, message })
        })?;
    Ok((status, headers, bytes))
}

/// Whether `url` names this machine: `localhost`, a loopback address.
pub fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => {
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

/// A failed attempt, and what says whether to make another.
struct Failure {
    error: ApiError,
    retry_after: Option<Duration>,
    /// The request never reached the server (the connection failed).
    unsent: bool,
}

impl From<std::convert::Infallible> for Failure {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Self {
            error,
            retry_after: None,
            unsent: false,
        }
    }
}

impl Failure {
    /// Whether `call` may be sent again after this failure: when the
    /// server did not take it (no connection, 429, 503: refused before any
    /// work), or when it may have been done but doing it twice is doing it
    /// once (a read, PUT, DELETE) and the reply was lost (a timeout, 502,
    /// 504). A write sent again after a lost reply could be stored twice,
    /// a chat run its model twice.
    fn may_repeat(&self, call: &Call) -> bool {
        self.unsent
            || matches!(self.error.status, 429 | 503)
            || (call.repeatable() && matches!(self.error.status, 0 | 502 | 504))
    }
}

fn unreachable(error: &reqwest::Error) -> ApiError {
    ApiError {
        status: error.status().map_or(0, |status| status.as_u16()),
        message: format!("the roncho server did not answer: {error}"),
    }
}

fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let seconds: f64 = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(2048)]).into_owned()
}

/// The reason of a refusal, as Honcho's MCP server reads it: `detail`
/// (as JSON when it is not a string: FastAPI's 422 list), else `message`,
/// else `error`, else `HTTP <status>`.
fn reason(status: StatusCode, body: Option<&Value>) -> String {
    let field = |name: &str| body.and_then(|body| body.get(name)).filter(|value| !value.is_null());
    match field("detail").or_else(|| field("message")).or_else(|| field("error")) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => match body {
            Some(Value::String(text)) if !text.trim().is_empty() => format!("HTTP {}: {text}", status.as_u16()),
            _ => format!("HTTP {}", status.as_u16()),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_write_or_a_chat_is_not_sent_again_once_it_may_have_been_done() {
        let failure = |status, unsent| Failure {
            error: ApiError {
                status,
                message: String::new(),
            },
            retry_after: None,
            unsent,
        };
        let write = Call::post("/v3/workspaces/w/sessions/s/messages".into(), json!({}));
        let chat = Call::post("/v3/workspaces/w/peers/p/chat".into(), json!({}));
        let read = Call::post("/v3/workspaces/w/sessions/list".into(), json!({}));
        let get = Call::get("/v3/workspaces/w/sessions/s/context".into());
        for call in [&write, &chat, &read, &get] {
            // Refused before any work: again.
            assert!(failure(0, true).may_repeat(call), "{}", call.path);
            assert!(failure(429, false).may_repeat(call));
            assert!(failure(503, false).may_repeat(call));
            assert!(!failure(500, false).may_repeat(call));
            assert!(!failure(404, false).may_repeat(call));
        }
        for status in [0, 502, 504] {
            // The reply was lost: only what is the same done twice.
            assert!(!failure(status, false).may_repeat(&write), "{status}");
            assert!(!failure(status, false).may_repeat(&chat), "{status}");
            assert!(failure(status, false).may_repeat(&read), "{status}");
            assert!(failure(status, false).may_repeat(&get), "{status}");
        }
    }

    #[test]
    fn a_dot_segment_is_refused_before_any_call() {
        for path in [
            "/v3/workspaces/w/sessions/../search",
            "/v3/workspaces/./x",
            "/v3/workspaces/w/%2E%2e",
        ] {
            assert_eq!(Call::get(path.into()).check_path().unwrap_err().status, 400, "{path}");
        }
        assert!(
            Call::get("/v3/workspaces/w/sessions/a.b/..x".into())
                .check_path()
                .is_ok()
        );
    }

    #[test]
    fn reasons_are_read_as_honchos_mcp_server_reads_them() {
        let status = StatusCode::NOT_FOUND;
        assert_eq!(
            reason(status, Some(&json!({"detail": "Peer not found"}))),
            "Peer not found"
        );
        assert_eq!(
            reason(
                StatusCode::UNPROCESSABLE_ENTITY,
                Some(&json!({"detail": [{"loc": ["body"]}]}))
            ),
            r#"[{"loc":["body"]}]"#
        );
        assert_eq!(reason(status, Some(&json!({"error": "nope"}))), "nope");
        assert_eq!(reason(status, None), "HTTP 404");
    }

    #[test]
    fn segments_and_queries_are_encoded() {
        assert_eq!(segment("a b/c?d"), "a%20b%2Fc%3Fd");
        let call = Call::get("/v3/x".to_owned())
            .query("target", Some("bob"))
            .query("tokens", None::<i64>)
            .query("q", Some("a&b"));
        assert_eq!(call.path_and_query(), "/v3/x?target=bob&q=a%26b");
    }
}
