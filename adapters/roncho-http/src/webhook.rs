//! Webhook delivery as Honcho defines it (honcho-v3 §2.2): an envelope
//! `{"data", "timestamp", "type"}` serialised as compact JSON with sorted
//! keys, POSTed with `X-Honcho-Signature`, the hex HMAC-SHA256 of that body
//! under the configured secret.
//!
//! One POST per call; retries and backoff are the work queue's (a failed
//! delivery fails its task, which runs again later and dies after its
//! attempts, with the error in the queue status). Unless private addresses
//! are allowed, the client connects only to public addresses: names are
//! resolved by a resolver that drops every private, loopback and link-local
//! address, so a name that resolved to a public address when the endpoint
//! was registered cannot be pointed inside later (DNS rebinding).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use roncho_core::validate;
use serde_json::Value;

/// Honcho's signature header.
pub const SIGNATURE_HEADER: &str = "X-Honcho-Signature";

/// The body of an event: compact JSON of `{"data", "timestamp", "type"}`,
/// every object's keys sorted (Python's `json.dumps(..., sort_keys=True,
/// separators=(",", ":"))`), whatever order `data` was built in.
pub fn envelope(event_type: &str, data: &Value, timestamp: &str) -> String {
    let envelope = serde_json::json!({
        "data": data,
        "timestamp": timestamp,
        "type": event_type,
    });
    sorted(&envelope).to_string()
}

/// `value` with the keys of every object in sorted order.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|key| (key.clone(), sorted(&map[key]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Returns the hex HMAC-SHA256 of `body` under `secret`.
pub fn sign(secret: &str, body: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    ring::hmac::sign(&key, body.as_bytes())
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Returns a timestamp as Honcho's envelopes carry it (Python's
/// `datetime.isoformat()` in UTC): `2026-11-25T09:30:00.123456+00:00`,
/// without the fraction when it is zero.
pub fn timestamp(micros: i64) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    // Python leaves the fraction out when it is zero.
    let formatted = if at.microsecond() == 0 {
        at.format(time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second]+00:00"
        ))
    } else {
        at.format(time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]+00:00"
        ))
    };
    formatted.unwrap_or_default()
}

/// Why a delivery failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryError {
    /// The endpoint's URL may not be called (it names a private address).
    Refused(String),
    /// The request did not get through (connection, TLS, time-out).
    Transport(String),
    /// The receiver answered with a status outside 2xx. Its body is not
    /// kept: a failed delivery's error is readable by the workspace (queue
    /// status), and the receiver may be a service the workspace must not
    /// read.
    Status { status: u16 },
}

impl std::fmt::Display for DeliveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeliveryError::Refused(reason) => write!(f, "refused: {reason}"),
            DeliveryError::Transport(reason) => write!(f, "not delivered: {reason}"),
            DeliveryError::Status { status } => write!(f, "the receiver answered HTTP {status}"),
        }
    }
}

impl std::error::Error for DeliveryError {}

/// Sends webhook events.
#[derive(Clone)]
pub struct WebhookSender {
    client: reqwest::Client,
    secret: Option<Arc<str>>,
    allow_private: bool,
}

impl std::fmt::Debug for WebhookSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSender")
            .field("signed", &self.secret.is_some())
            .field("allow_private", &self.allow_private)
            .finish_non_exhaustive()
    }
}

impl WebhookSender {
    /// Returns a sender signing with `secret` (unsigned without one), waiting
    /// at most `timeout` per delivery; with `allow_private`, endpoints on
    /// private and loopback addresses are called too.
    pub fn new(secret: Option<&str>, timeout: Duration, allow_private: bool) -> Result<Self, DeliveryError> {
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            // A redirect could lead anywhere, inside included.
            .redirect(reqwest::redirect::Policy::none());
        if !allow_private {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        let client = builder
            .build()
            .map_err(|error| DeliveryError::Transport(format!("building the HTTP client: {error}")))?;
        Ok(Self {
            client,
            secret: secret.filter(|secret| !secret.is_empty()).map(Arc::from),
            allow_private,
        })
    }

    /// Whether events carry a signature.
    pub fn signs(&self) -> bool {
        self.secret.is_some()
    }

    /// POSTs `body` (an [`envelope`]) to `url`, signed; `Ok` on a 2xx answer.
    pub async fn deliver(&self, url: &str, body: &str) -> Result<(), DeliveryError> {
        // Parsed once, as the client parses it, and the parsed URL is what
        // it is given: IP literals (which do not pass through the resolver)
        // are checked here, names by the resolver when it connects.
        let checked = validate::webhook_url("url", url, self.allow_private)
            .map_err(|error| DeliveryError::Refused(error.to_string()))?;
        let mut request = self
            .client
            .post(checked.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_owned());
        if let Some(secret) = &self.secret {
            request = request.header(SIGNATURE_HEADER, sign(secret, body));
        }
        // Errors leave the URL out: its query may hold a token.
        let response = request
            .send()
            .await
            .map_err(|error| DeliveryError::Transport(describe(&error.without_url())))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        Err(DeliveryError::Status {
            status: status.as_u16(),
        })
    }
}

/// A reqwest error with its causes (the top level alone says only "error
/// sending request").
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Resolves names to their public addresses only; a name with none is an error.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|address| validate::is_public_ip(&address.ip()))
                .collect();
            if public.is_empty() {
                let shown: Vec<String> = found.iter().map(|address| address.ip().to_string()).collect();
                return Err(format!(
                    "`{host}` resolves only to private, loopback or link-local addresses ({})",
                    shown.join(", ")
                )
                .into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_are_compact_with_sorted_keys_and_signed_as_honcho_does() {
        let data = serde_json::json!({"workspace_id": "w", "queue_type": "summary", "observed": null});
        let body = envelope("queue.empty", &data, "2026-11-25T09:30:00.000000+00:00");
        assert_eq!(
            body,
            r#"{"data":{"observed":null,"queue_type":"summary","workspace_id":"w"},"timestamp":"2026-11-25T09:30:00.000000+00:00","type":"queue.empty"}"#
        );
        // RFC 4231 test case 2.
        assert_eq!(
            sign("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(timestamp(1_764_063_000_123_456), "2025-11-25T09:30:00.123456+00:00");
        assert_eq!(timestamp(1_764_063_000_000_000), "2025-11-25T09:30:00+00:00");
    }

    /// A listener on loopback that counts the connections it gets.
    async fn counting_listener() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let reached = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = reached.clone();
        tokio::spawn(async move {
            while let Ok((mut connection, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut request = vec![0; 64 * 1024];
                let _ = connection.read(&mut request).await;
                let _ = connection
                    .write_all(b"HTTP/1.1 500 Internal\r\ncontent-length: 14\r\n\r\ninternal token")
                    .await;
            }
        });
        (port, reached)
    }

    #[tokio::test]
    async fn no_spelling_of_loopback_reaches_a_listener_on_it() {
        let (port, reached) = counting_listener().await;
        let sender = WebhookSender::new(Some("s"), Duration::from_secs(2), false).unwrap();
        let mut delivered = Vec::new();
        for spelling in validate::LOOPBACK_WEBHOOK_SPELLINGS {
            let url = spelling.replace("{port}", &port.to_string());
            if !matches!(sender.deliver(&url, "{}").await, Err(DeliveryError::Refused(_))) {
                delivered.push(url);
            }
        }
        assert!(delivered.is_empty(), "not refused: {delivered:?}");
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert!(validate::LOOPBACK_WEBHOOK_SPELLINGS.len() >= 30);
    }

    #[tokio::test]
    async fn a_failed_delivery_keeps_the_status_never_the_body() {
        let (port, reached) = counting_listener().await;
        // An operator who allows private addresses reaches it; the error
        // (readable by the workspace) holds no byte of what it answered.
        let sender = WebhookSender::new(None, Duration::from_secs(2), true).unwrap();
        let error = sender
            .deliver(&format!("http://127.0.0.1:{port}/hook"), "{}")
            .await
            .unwrap_err();
        assert_eq!(error, DeliveryError::Status { status: 500 });
        assert!(!error.to_string().contains("token"), "{error}");
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn endpoints_inside_are_refused_unless_allowed() {
        let sender = WebhookSender::new(Some("s"), Duration::from_secs(1), false).unwrap();
        let refused = sender.deliver("http://127.0.0.1:9/hook", "{}").await.unwrap_err();
        assert!(matches!(refused, DeliveryError::Refused(_)), "{refused}");
        let by_name = sender.deliver("http://localhost:9/hook", "{}").await.unwrap_err();
        assert!(matches!(&by_name, DeliveryError::Refused(_)), "{by_name}");
    }
}
