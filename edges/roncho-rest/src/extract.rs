//! Request parts as FastAPI reads them: a JSON body whatever its content
//! type, query parameters, both failing with FastAPI's 422 shape that names
//! where the request went wrong.

use axum::extract::{FromRequest, FromRequestParts, Request};
use http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::RestError;

/// Largest request body read: a batch of 100 messages of 25,000 characters
/// (up to four bytes each) with their metadata.
pub const MAX_BODY_BYTES: usize = 12 * 1024 * 1024;

/// A JSON body. An empty body reads as `null`, which an optional body
/// (`Option<T>`) takes as absent, as FastAPI does.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = RestError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        // Over the router's body limit: 413, as for any unreadable body its
        // own status; one that did not arrive within the body timeout: 408.
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(body_rejection)?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"null"
        } else {
            &bytes
        };
        parse(text).map(Body)
    }
}

/// The error for a body that could not be read.
pub fn body_rejection(rejection: axum::extract::rejection::BytesRejection) -> RestError {
    let text = rejection.body_text();
    if text.contains(roncho_gate::BODY_DEADLINE_REASON) {
        return RestError::Http(http::StatusCode::REQUEST_TIMEOUT, text);
    }
    RestError::Http(rejection.status(), text)
}

/// Parses a JSON body into `T`, or says where it does not fit.
pub fn parse<T: DeserializeOwned>(text: &[u8]) -> Result<T, RestError> {
    let value: Value = serde_json::from_slice(text).map_err(|error| {
        RestError::schema(
            "json_invalid",
            vec![json!("body"), json!(error.column())],
            format!("JSON decode error: {error}"),
            Value::Null,
        )
    })?;
    serde_path_to_error::deserialize(&value).map_err(|error| {
        let mut loc = vec![json!("body")];
        loc.extend(error.path().iter().filter_map(|segment| match segment {
            serde_path_to_error::Segment::Seq { index } => Some(json!(index)),
            serde_path_to_error::Segment::Map { key } => Some(json!(key)),
            serde_path_to_error::Segment::Enum { variant } => Some(json!(variant)),
            serde_path_to_error::Segment::Unknown => None,
        }));
        let message = error.inner().to_string();
        let (kind, loc, msg) = match message.strip_prefix("missing field `") {
            Some(rest) => {
                loc.push(json!(rest.trim_end_matches('`')));
                ("missing", loc, "Field required".to_owned())
            }
            None => ("value_error", loc, message),
        };
        RestError::schema(kind, loc, msg, value.clone())
    })
}

/// Query parameters, failing as FastAPI does.
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(query)| Query(query))
            .map_err(|rejection| {
                RestError::schema(
                    "value_error",
                    vec![json!("query")],
                    rejection.body_text(),
                    json!(parts.uri.query().unwrap_or_default()),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    struct Batch {
        #[allow(dead_code)]
        messages: Vec<Item>,
    }

    #[derive(Debug, Deserialize)]
    struct Item {
        #[allow(dead_code)]
        content: String,
        #[allow(dead_code)]
        peer_id: String,
    }

    fn detail(error: RestError) -> Value {
        match error {
            RestError::Schema(errors) => errors[0].clone(),
            other => panic!("expected a schema error, got {other:?}"),
        }
    }

    #[test]
    fn a_missing_field_is_named_where_it_is_missing() {
        let error =
            parse::<Batch>(br#"{"messages": [{"content": "hi", "peer_id": "a"}, {"content": "yo"}]}"#).unwrap_err();
        let detail = detail(error);
        assert_eq!(detail["type"], "missing");
        assert_eq!(detail["loc"], json!(["body", "messages", 1, "peer_id"]));
        assert_eq!(detail["msg"], "Field required");
    }

    #[test]
    fn a_wrong_type_and_bad_json_are_schema_errors() {
        let wrong = detail(parse::<Batch>(br#"{"messages": [{"content": 7, "peer_id": "a"}]}"#).unwrap_err());
        assert_eq!(wrong["loc"], json!(["body", "messages", 0, "content"]));
        let bad = detail(parse::<Batch>(b"{\"messages\": [").unwrap_err());
        assert_eq!(bad["type"], "json_invalid");
    }
}
