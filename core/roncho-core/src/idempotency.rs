//! Idempotency keys: a client that cannot tell whether a write landed (its
//! call timed out, the connection dropped) sends it again with the same
//! key, and the write happens once. A repeat with the same key and the same
//! request returns what the first call made; with another request it is
//! `FAILED_PRECONDITION`. Keys are per workspace and operation, and are
//! remembered for a window (`idempotency_window_secs`).

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// The longest key a client may send.
pub const MAX_KEY_CHARS: usize = 255;

/// A write to do once per client key.
#[derive(Debug, Clone, PartialEq)]
pub struct Once {
    /// The client's key.
    pub key: String,
    /// The operation it is for (`CreateMessages`, ...): the same key may
    /// name one write of each operation.
    pub operation: &'static str,
    /// The request's digest ([`Fingerprint`]).
    pub fingerprint: String,
    /// How long the key is remembered.
    pub window: Duration,
}

impl Once {
    /// Checks a client's key for `operation`; `fingerprint` digests the
    /// rest of the request.
    pub fn new(
        field: &str,
        key: &str,
        operation: &'static str,
        fingerprint: Fingerprint,
        window: Duration,
    ) -> Result<Self> {
        if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
            return Err(Error::invalid(
                field,
                format!("must be 1 to {MAX_KEY_CHARS} characters"),
            ));
        }
        if key.chars().any(char::is_control) {
            return Err(Error::invalid(field, "must not contain control characters"));
        }
        Ok(Self {
            key: key.to_owned(),
            operation,
            fingerprint: fingerprint.finish(),
            window,
        })
    }

    /// The error for a repeat of this key with another request.
    pub fn mismatch(&self) -> Error {
        Error::FailedPrecondition(format!(
            "idempotency key `{}` was used for a different {} request; use a new key for a new request",
            self.key, self.operation
        ))
    }
}

/// A SHA-256 digest of a request's fields, each framed by its length so
/// that no two different requests feed it the same bytes.
#[derive(Debug, Clone, Default)]
pub struct Fingerprint(Sha256);

impl Fingerprint {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a byte string.
    pub fn bytes(mut self, bytes: &[u8]) -> Self {
        self.0.update((bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    /// Adds a text.
    pub fn text(self, text: &str) -> Self {
        self.bytes(text.as_bytes())
    }

    /// Adds an optional text (absent and empty differ).
    pub fn optional(self, text: Option<&str>) -> Self {
        match text {
            Some(text) => self.bytes(b"some").text(text),
            None => self.bytes(b"none"),
        }
    }

    /// Adds a number.
    pub fn number(self, number: Option<i64>) -> Self {
        self.optional(number.map(|n| n.to_string()).as_deref())
    }

    /// Adds a JSON value; objects digest the same whatever their key order.
    pub fn json(self, value: &serde_json::Value) -> Self {
        // serde_json's maps are sorted by key: the text is canonical.
        self.text(&value.to_string())
    }

    /// Returns the hex digest.
    pub fn finish(self) -> String {
        self.0.finalize().iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_tell_requests_apart_by_content_and_framing() {
        let digest = |parts: &[&str]| parts.iter().fold(Fingerprint::new(), |f, part| f.text(part)).finish();
        assert_eq!(digest(&["a", "bc"]), digest(&["a", "bc"]));
        assert_ne!(digest(&["a", "bc"]), digest(&["ab", "c"]), "framed by length");
        assert_ne!(
            Fingerprint::new().optional(None).finish(),
            Fingerprint::new().optional(Some("")).finish()
        );
        let a: serde_json::Value = serde_json::from_str(r#"{"x": 1, "y": 2}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(r#"{"y": 2, "x": 1}"#).unwrap();
        assert_eq!(
            Fingerprint::new().json(&a).finish(),
            Fingerprint::new().json(&b).finish()
        );
    }

    #[test]
    fn keys_are_bounded_printable_text() {
        let once = |key: &str| {
            Once::new(
                "idempotency_key",
                key,
                "CreateMessages",
                Fingerprint::new(),
                Duration::ZERO,
            )
        };
        assert!(once("retry-1").is_ok());
        assert!(once("").is_err());
        assert!(once(&"k".repeat(MAX_KEY_CHARS + 1)).is_err());
        assert!(once("a\nb").is_err());
        let error = once("k").unwrap().mismatch();
        assert!(matches!(error, Error::FailedPrecondition(_)));
    }
}
