//! Request parts as FastAPI reads them: a JSON body (under a JSON content
//! type: 415 otherwise, so no request a browser sends without asking
//! writes), query parameters, both failing with FastAPI's 422 shape that
//! names where the request went wrong.

use axum::extract::{FromRequest, FromRequestParts, Request};
use http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::RestError;

/// Largest request body read: a batch of 100 messages of 25,000 characters
/// (up to four bytes each) with their metadata.
pub const MAX_BODY_BYTES: usize = 12 * 1024 * 1024;

/// Largest MCP request body read: what the MCP SDK reads (rmcp's
/// `DEFAULT_MAX_REQUEST_BODY_BYTES`).
pub const MAX_MCP_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Refuses a request whose declared length is over `limit` at once, before
/// a byte of its body is awaited (413): a client that declares a gigabyte
/// and sends five bytes would otherwise hold its place until the body's
/// deadline.
pub fn refuse_declared_over<B>(request: &http::Request<B>, limit: usize) -> Option<RestError> {
    let declared = request
        .headers()
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    (declared > limit as u64).then(|| {
        RestError::Http(
            http::StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is {declared} bytes; at most {limit} are read"),
        )
    })
}

/// A JSON body. An empty body reads as `null`, which an optional body
/// (`Option<T>`) takes as absent, as FastAPI does.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = RestError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        // Over the router's body limit: 413, as for any unreadable body its
        // own status; one that did not arrive within the body timeout: 408.
        let json = is_json(request.headers());
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(body_rejection)?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return parse(b"null").map(Body);
        }
        if !json {
            return Err(RestError::Http(
                http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a request body must be JSON, sent as `Content-Type: application/json`".to_owned(),
            ));
        }
        parse(&bytes).map(Body)
    }
}

/// Returns whether `headers` say the body is JSON: `application/json` or
/// `application/<anything>+json`, with any parameters.
pub fn is_json(headers: &http::HeaderMap) -> bool {
    let Some(value) = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Returns the refusal of a request whose body is not JSON, on any route:
/// a body (or a content type) other than JSON, where only the upload route
/// takes a multipart form. 415 before any route runs, so no request a
/// browser sends without a preflight (`text/plain`, a form) reaches one.
pub fn refuse_non_json<B: http_body::Body>(request: &http::Request<B>) -> Option<RestError> {
    use http::Method;
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    let headers = request.headers();
    let content_type = headers.get(http::header::CONTENT_TYPE);
    let empty = request.body().size_hint().exact() == Some(0);
    match content_type {
        None if empty => None,
        Some(_) if is_json(headers) => None,
        Some(value) if request.uri().path().ends_with("/upload") && is_multipart(value) => None,
        _ => Some(RestError::Http(
            http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a request body must be JSON, sent as `Content-Type: application/json` (a file upload as \
             `multipart/form-data`)"
                .to_owned(),
        )),
    }
}

fn is_multipart(value: &http::HeaderValue) -> bool {
    value.to_str().is_ok_and(|value| {
        value
            .split(';')
            .next()
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("multipart/form-data"))
    })
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

/// Query parameters, read and failing as FastAPI does: a parameter given
/// twice takes its last value (Starlette's), unless the target gathers
/// every value (a list of pairs).
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        read_query(query)
            .map(Query)
            .map_err(|refused| refused.into_error(query))
    }
}

/// Why a query string does not fit: the parameter, when one is to blame,
/// and the reason.
#[derive(Debug)]
struct Refused {
    field: Option<String>,
    reason: String,
}

impl Refused {
    /// FastAPI's 422: the parameter in `loc` and its (last) value as
    /// `input`, or the whole query when no one parameter is to blame.
    fn into_error(self, query: &str) -> RestError {
        let message = format!("Failed to deserialize query string: {}", self.reason);
        match self.field {
            Some(field) => {
                let input = form_urlencoded::parse(query.as_bytes())
                    .filter(|(key, _)| *key == field)
                    .last()
                    .map_or(Value::Null, |(_, value)| json!(value));
                RestError::schema("value_error", vec![json!("query"), json!(field)], message, input)
            }
            None => RestError::schema("value_error", vec![json!("query")], message, json!(query)),
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(formatter, "{field}: {}", self.reason),
            None => formatter.write_str(&self.reason),
        }
    }
}

/// Reads `query` into `T`, naming the parameter that does not fit.
fn read_exactly<T: DeserializeOwned>(query: &str) -> Result<T, Refused> {
    let deserializer = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(deserializer).map_err(|error| Refused {
        field: error.path().iter().find_map(|segment| match segment {
            serde_path_to_error::Segment::Map { key } => Some(key.clone()),
            _ => None,
        }),
        reason: error.into_inner().to_string(),
    })
}

/// Reads `query` into `T`; where `T` takes one value of a parameter given
/// more than once, the last is read (and checked), the others ignored.
fn read_query<T: DeserializeOwned>(query: &str) -> Result<T, Refused> {
    let error = match read_exactly(query) {
        Ok(read) => return Ok(read),
        Err(error) => error,
    };
    let pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes()).into_owned().collect();
    let mut seen = std::collections::HashSet::new();
    let mut last: Vec<&(String, String)> = pairs.iter().rev().filter(|(key, _)| seen.insert(key)).collect();
    if last.len() == pairs.len() {
        return Err(error);
    }
    last.reverse();
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(last)
        .finish();
    read_exactly(&query)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Paging {
        page: Option<i32>,
        size: Option<i32>,
    }

    #[test]
    fn a_query_parameter_given_twice_takes_its_last_value() {
        let read = |query: &str| read_query::<Paging>(query).map_err(|error| error.to_string());
        assert_eq!(
            read("page=1&size=5&page=3"),
            Ok(Paging {
                page: Some(3),
                size: Some(5)
            })
        );
        assert_eq!(
            read("page=x&page=2&page=4"),
            Ok(Paging {
                page: Some(4),
                size: None
            })
        );
        assert!(read("page=1&page=x").is_err(), "the last value is read, and checked");
        assert!(read("page=x").is_err());
        // Encoded keys and values survive the second reading exactly: two
        // spellings of one key are one key, `+` is a space and `%2B` a plus.
        assert_eq!(
            read("pag%65=1&page=2"),
            Ok(Paging {
                page: Some(2),
                size: None
            })
        );
        #[derive(Debug, Deserialize, PartialEq)]
        struct Text {
            q: String,
        }
        let text = |query: &str| {
            read_query::<Text>(query)
                .map(|text| text.q)
                .map_err(|error| error.to_string())
        };
        assert_eq!(text("q=a+b%2B&q=c%26d+%2B%25%20e%3D"), Ok("c&d +% e=".to_owned()));
        assert_eq!(text("q=x&q=%FF%E2%82"), Ok("\u{fffd}\u{fffd}".to_owned()));
        assert_eq!(text("q=x&%71=%E2%82%AC+%2B"), Ok("€ +".to_owned()));
        // What does not fit is named, with its (last) value.
        for (query, field, input) in [
            ("page=1&size=x", "size", json!("x")),
            ("size=5&page=x&page=%E2%82%AC", "page", json!("€")),
        ] {
            let refused = read_query::<Paging>(query).unwrap_err();
            assert_eq!(refused.field.as_deref(), Some(field), "{query}: {refused}");
            match refused.into_error(query) {
                RestError::Schema(errors) => {
                    assert_eq!(errors[0]["loc"], json!(["query", field]), "{query}");
                    assert_eq!(errors[0]["input"], input, "{query}");
                }
                other => panic!("{other:?}"),
            }
        }
        // A target that gathers every value keeps them all, in order.
        let pairs: Vec<(String, String)> = read_query("sessions=a&sessions=b").unwrap();
        assert_eq!(pairs.len(), 2);
    }

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
    fn only_json_content_types_are_json() {
        let headers = |value: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(http::header::CONTENT_TYPE, value.parse().unwrap());
            headers
        };
        for json in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/vnd.api+json",
        ] {
            assert!(is_json(&headers(json)), "{json}");
        }
        for other in [
            "text/plain",
            "text/plain; charset=utf-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "text/json",
            "application/jsonx",
            "",
        ] {
            assert!(!is_json(&headers(other)), "{other}");
        }
        assert!(!is_json(&http::HeaderMap::new()));
    }

    #[test]
    fn a_wrong_type_and_bad_json_are_schema_errors() {
        let wrong = detail(parse::<Batch>(br#"{"messages": [{"content": 7, "peer_id": "a"}]}"#).unwrap_err());
        assert_eq!(wrong["loc"], json!(["body", "messages", 0, "content"]));
        let bad = detail(parse::<Batch>(b"{\"messages\": [").unwrap_err());
        assert_eq!(bad["type"], "json_invalid");
    }
}
