//! Booleans as Honcho's FastAPI reads them (Pydantic's lax mode), in a
//! query string and in a JSON body alike: every boolean a request carries
//! goes through here, so `?reverse=1` and `"stream": "yes"` mean what they
//! mean to Honcho.

use serde::de::{Deserializer, Error, Unexpected, Visitor};

pub use roncho_core::derivation::parse_bool;

/// An optional boolean (`bool | None`): absent or `null` is `None`.
pub fn optional_bool<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    struct Maybe;
    impl<'de> Visitor<'de> for Maybe {
        type Value = Option<bool>;
        fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str("a boolean")
        }
        fn visit_none<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_any(Lax).map(Some)
        }
    }
    deserializer.deserialize_option(Maybe)
}

/// A boolean with a default (`bool = False`): `null` is refused, as
/// Pydantic refuses it.
pub fn boolean<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    deserializer.deserialize_any(Lax)
}

/// One boolean in any of the forms Pydantic's lax mode takes: a JSON
/// boolean, 0 or 1 (as an integer or a float), or text [`parse_bool`] reads.
struct Lax;

impl Visitor<'_> for Lax {
    type Value = bool;
    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a boolean (true/false, 1/0, yes/no, on/off)")
    }
    fn visit_bool<E: Error>(self, value: bool) -> Result<bool, E> {
        Ok(value)
    }
    fn visit_str<E: Error>(self, value: &str) -> Result<bool, E> {
        parse_bool(value).ok_or_else(|| E::invalid_value(Unexpected::Str(value), &self))
    }
    fn visit_u64<E: Error>(self, value: u64) -> Result<bool, E> {
        match value {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(Unexpected::Unsigned(value), &self)),
        }
    }
    fn visit_i64<E: Error>(self, value: i64) -> Result<bool, E> {
        match u64::try_from(value) {
            Ok(value) => self.visit_u64(value),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(value), &self)),
        }
    }
    fn visit_f64<E: Error>(self, value: f64) -> Result<bool, E> {
        match value {
            0.0 => Ok(false),
            1.0 => Ok(true),
            _ => Err(E::invalid_value(Unexpected::Float(value), &self)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

    /// Booleans as FastAPI reads them, in a query string and in a body
    /// (the representation's body flattens its curation, which reads a
    /// JSON `null` as a unit): `null` is "not given".
    #[test]
    fn booleans_are_read_as_fastapi_reads_them() {
        let body = |value: serde_json::Value| {
            serde_json::from_value::<RepresentationOptions>(serde_json::json!({ "include_most_frequent": value }))
                .map(|options| options.curation.include_most_frequent)
                .map_err(|error| error.to_string())
        };
        for (value, read) in [
            (serde_json::json!(null), None),
            (serde_json::json!(true), Some(true)),
            (serde_json::json!(false), Some(false)),
            (serde_json::json!(1), Some(true)),
            (serde_json::json!(0), Some(false)),
            (serde_json::json!("YES"), Some(true)),
            (serde_json::json!("off"), Some(false)),
        ] {
            assert_eq!(body(value.clone()), Ok(read), "{value}");
        }
        for value in [
            serde_json::json!(2),
            serde_json::json!(-1),
            serde_json::json!("maybe"),
            serde_json::json!([]),
        ] {
            assert!(body(value.clone()).is_err(), "{value}");
        }
        let query = |text: &str| serde_urlencoded::from_str::<PageQuery>(text).map(|query| query.reverse);
        assert_eq!(query("").unwrap(), None);
        assert_eq!(query("reverse=T").unwrap(), Some(true));
        assert_eq!(query("reverse=n").unwrap(), Some(false));
        assert!(query("reverse=").is_err());
        assert!(query("reverse=2").is_err());
    }

    /// Every boolean a request body or query carries, in the forms
    /// Pydantic's lax mode reads and the ones it refuses.
    #[test]
    fn every_boolean_of_a_request_is_read_alike() {
        let read = |field: &str, value: serde_json::Value| -> std::result::Result<bool, String> {
            let error = |error: serde_json::Error| error.to_string();
            match field {
                "stream" | "include_evidence" => {
                    let chat: ChatOptions =
                        serde_json::from_value(serde_json::json!({"query": "q", field: value})).map_err(error)?;
                    Ok(if field == "stream" {
                        chat.stream
                    } else {
                        chat.include_evidence
                    })
                }
                "workspace_stream" => {
                    let chat: WorkspaceChatOptions =
                        serde_json::from_value(serde_json::json!({"query": "q", "stream": value})).map_err(error)?;
                    Ok(chat.stream)
                }
                "rebuild" => {
                    let dream: ScheduleDream =
                        serde_json::from_value(serde_json::json!({"observer": "a", "rebuild": value}))
                            .map_err(error)?;
                    Ok(dream.rebuild)
                }
                _ => {
                    let config: SessionPeerConfig =
                        serde_json::from_value(serde_json::json!({ field: value })).map_err(error)?;
                    Ok(config.observe_me.or(config.observe_others).expect("given"))
                }
            }
        };
        for field in [
            "stream",
            "include_evidence",
            "workspace_stream",
            "rebuild",
            "observe_me",
            "observe_others",
        ] {
            for (value, expected) in [
                (serde_json::json!(true), true),
                (serde_json::json!(0), false),
                (serde_json::json!(1.0), true),
                (serde_json::json!(0.0), false),
                (serde_json::json!("Yes"), true),
                (serde_json::json!("f"), false),
            ] {
                assert_eq!(read(field, value.clone()), Ok(expected), "{field}: {value}");
            }
            for value in [
                serde_json::json!(2),
                serde_json::json!(0.5),
                serde_json::json!(" true"),
                serde_json::json!(""),
                serde_json::json!({}),
            ] {
                assert!(read(field, value.clone()).is_err(), "{field}: {value}");
            }
        }
        let null = |body: serde_json::Value| serde_json::from_value::<ChatOptions>(body).map(|chat| chat.stream);
        assert!(
            null(serde_json::json!({"query": "q", "stream": null})).is_err(),
            "bool = False refuses null"
        );
        assert!(
            !null(serde_json::json!({"query": "q"})).unwrap(),
            "and defaults to false"
        );
        let config: SessionPeerConfig = serde_json::from_value(serde_json::json!({"observe_me": null})).unwrap();
        assert_eq!(config.observe_me, None);
        let history = |text: &str| serde_urlencoded::from_str::<QueueQuery>(text).map(|query| query.history);
        assert!(!history("").unwrap());
        assert!(history("history=1").unwrap());
        assert!(history("history=ON").unwrap());
        assert!(history("history=2").is_err());
    }
}
