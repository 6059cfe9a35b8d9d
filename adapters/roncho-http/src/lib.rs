//! JSON POSTs to model providers with the retry rules every provider client
//! shares: HTTP 429 and 5xx, time-outs and connection failures are retried
//! with exponential backoff (honouring `Retry-After` in seconds, up to
//! [`MAX_RETRY_AFTER_IN_REQUEST`]: a provider that asks for longer ends the
//! request with its wait, for the caller to postpone the work); any other
//! status is returned at once, with the provider's body for the error.
//! Requests carry the caller's W3C trace context, so a provider that traces
//! (a vLLM or LiteLLM gateway) joins the trace.

use std::time::Duration;

/// Longest `Retry-After` waited out within a request.
pub const MAX_RETRY_AFTER_IN_REQUEST: Duration = Duration::from_secs(10);
/// Longest `Retry-After` passed on to the caller.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first wait; it doubles per retry.
    pub initial_backoff: Duration,
}

/// Why a POST did not produce a success body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// A status that is not retried (4xx other than 429), with the body.
    Status { status: u16, body: String },
    /// Every attempt failed with a retryable reason; the last one, whether
    /// it was a 429 (rate limited) rather than an outage, and the wait the
    /// provider asked for when it was too long to wait out here.
    Exhausted {
        attempts: u32,
        last: String,
        rate_limited: bool,
        retry_after: Option<Duration>,
    },
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Status { status, body } => {
                write!(f, "HTTP {status}: {}", body.chars().take(300).collect::<String>())
            }
            HttpError::Exhausted { attempts, last, .. } => write!(f, "failed after {attempts} attempts: {last}"),
        }
    }
}

impl std::error::Error for HttpError {}

/// Posts `body` as JSON to `url` (with `bearer` as the API key when given)
/// and returns the body of the first 2xx answer.
pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
    policy: RetryPolicy,
) -> Result<String, HttpError> {
    let response = post(client, url, bearer, headers, body, policy).await?;
    response.text().await.map_err(|error| HttpError::Exhausted {
        attempts: 1,
        last: format!("unreadable response: {error}"),
        rate_limited: false,
        retry_after: None,
    })
}

/// Posts `body` as JSON to `url` with the retry rules and returns the first
/// 2xx response unread (for streamed bodies).
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
    policy: RetryPolicy,
) -> Result<reqwest::Response, HttpError> {
    let mut backoff = policy.initial_backoff;
    let mut last = String::new();
    let mut rate_limited = false;
    let trace = roncho_core::trace::TraceContext::current();
    for attempt in 0..=policy.max_retries {
        let mut request = client.post(url).json(body);
        for (name, value) in trace.iter().flat_map(|trace| trace.headers()) {
            request = request.header(name, value);
        }
        if let Some(key) = bearer {
            request = request.bearer_auth(key);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let mut wait = backoff;
        match request.send().await {
            Ok(response) => {
                let status = response.status();
                if status.is_success() {
                    return Ok(response);
                } else if status.as_u16() == 429 || status.is_server_error() {
                    if let Some(after) = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|value| value.to_str().ok())
                        .and_then(|value| value.parse::<u64>().ok())
                    {
                        wait = Duration::from_secs(after);
                    }
                    last = format!("HTTP {status}");
                    rate_limited = status.as_u16() == 429;
                    if wait > MAX_RETRY_AFTER_IN_REQUEST {
                        tracing::warn!(%url, retry_after = ?wait, "the provider asks to wait longer than a request does");
                        return Err(HttpError::Exhausted {
                            attempts: attempt + 1,
                            last,
                            rate_limited,
                            retry_after: Some(wait.min(MAX_RETRY_AFTER)),
                        });
                    }
                } else {
                    let body = response.text().await.unwrap_or_default();
                    return Err(HttpError::Status {
                        status: status.as_u16(),
                        body,
                    });
                }
            }
            Err(error) => {
                last = error.to_string();
                rate_limited = false;
            }
        }
        tracing::warn!(attempt, reason = %last, %url, "provider request failed; retrying");
        if attempt < policy.max_retries {
            tokio::time::sleep(wait).await;
            backoff = backoff.saturating_mul(2);
        }
    }
    Err(HttpError::Exhausted {
        attempts: policy.max_retries + 1,
        last,
        rate_limited,
        retry_after: None,
    })
}

/// Serves `app` on an ephemeral loopback port for the rest of the test and
/// returns its base address (`http://127.0.0.1:PORT`).
#[cfg(feature = "testing")]
pub async fn serve_for_test(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding a loopback port");
    let address = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{address}")
}

/// A scripted provider for tests: the requests it received, and its replies,
/// one per request, the last one repeating.
#[cfg(feature = "testing")]
#[derive(Debug, Clone)]
pub struct Script<R> {
    replies: std::sync::Arc<std::sync::Mutex<Vec<R>>>,
    pub requests: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

#[cfg(feature = "testing")]
impl<R: Clone> Script<R> {
    /// A script answering with `replies` (at least one).
    pub fn new(replies: Vec<R>) -> Self {
        assert!(!replies.is_empty(), "a script needs a reply");
        Self {
            replies: std::sync::Arc::new(std::sync::Mutex::new(replies)),
            requests: std::sync::Arc::default(),
        }
    }

    /// Records `request` and returns the reply to it.
    pub fn answer(&self, request: serde_json::Value) -> R {
        self.requests.lock().expect("script lock").push(request);
        let mut replies = self.replies.lock().expect("script lock");
        if replies.len() > 1 {
            replies.remove(0)
        } else {
            replies[0].clone()
        }
    }

    /// How many requests arrived.
    pub fn count(&self) -> usize {
        self.requests.lock().expect("script lock").len()
    }
}
