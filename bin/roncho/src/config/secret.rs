//! Credentials in the configuration, and keeping them out of logs.

use serde::Serialize;

/// A credential: printed as `[redacted]` by `Debug` and serialization.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The credential itself, for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&String> for Secret {
    fn from(value: &String) -> Self {
        Secret(value.clone())
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_owned())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("[redacted]")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("[redacted]")
    }
}

/// Cuts credentials out of every URL in a JSON value, at any depth.
pub(super) fn redact_urls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) if text.contains("://") => *text = roncho_store::redact_url(text),
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_urls),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(redact_urls),
        _ => {}
    }
}

/// Whether a setting holds a credential (never printed).
fn is_secret_key(key: &str) -> bool {
    key.ends_with("api_key") || key.contains("secret")
}

/// Returns a layer's setting for logs: credentials hidden, passwords cut
/// out of URLs.
pub(super) fn redact_value(key: &str, value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Null => serde_json::Value::Null,
        _ if is_secret_key(key) => serde_json::Value::String("[redacted]".to_owned()),
        serde_json::Value::String(text) if text.contains("://") => {
            serde_json::Value::String(roncho_store::redact_url(text))
        }
        other => other.clone(),
    }
}
