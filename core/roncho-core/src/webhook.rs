//! Webhook events as Honcho defines them (honcho-v3 §2.2): the envelope a
//! receiver gets, its timestamp, and the port that delivers it
//! ([`WebhookDelivery`]; the HTTP sender that signs and checks addresses is
//! an adapter, `roncho-http`).

use async_trait::async_trait;
use serde_json::Value;

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

/// Delivers webhook events: one POST per call; retries and backoff are
/// the work queue's.
#[async_trait]
pub trait WebhookDelivery: Send + Sync + 'static {
    /// POSTs `body` (an [`envelope`]) to `url`, signed when a secret is
    /// configured.
    async fn deliver(&self, url: &str, body: &str) -> Result<(), DeliveryError>;
}
