//! One-shot commands over a roncho server's REST edge: `roncho search`,
//! `roncho context`, `roncho conclusions` and `roncho chat` make one call
//! as any client does (the same routes, keys and limits) and print its
//! answer, as text for a person or as the server's JSON (`--json`) for a
//! script, and exit with a code that says how it went ([`Exit`]).
//!
//! The server is the one `--addr` names, else the one this configuration
//! serves (its `rest_listen`, from the same flags, environment and config
//! file as `roncho serve`); the key is `--key`, else `RONCHO_API_KEY`, else
//! the admin key a local-key server keeps in its data directory.

use http::HeaderValue;
use roncho_mcp::upstream::{ApiError, Call, Upstream, segment};
use serde_json::{Value, json};

/// What a one-shot command's exit code says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: the call succeeded and found something (or finds nothing by nature).
    Found = 0,
    /// 1: the call succeeded and matched nothing (a search, a conclusion list), as grep.
    Nothing = 1,
    /// 2: the command or the request was refused as invalid (usage, 400, 409, 413, 422).
    Invalid = 2,
    /// 3: what it names is not there (404).
    NotFound = 3,
    /// 4: the key was missing, wrong or not allowed to (401, 403).
    NotAllowed = 4,
    /// 5: no server answered, or it failed or was overloaded (5xx, 429).
    Unavailable = 5,
}

impl Exit {
    /// The exit code of a call the server (or the network) refused.
    pub fn of(error: &ApiError) -> Self {
        match error.status {
            401 | 403 => Exit::NotAllowed,
            404 | 410 => Exit::NotFound,
            400 | 405 | 409 | 411 | 413 | 414 | 415 | 422 => Exit::Invalid,
            _ => Exit::Unavailable,
        }
    }
}

/// What to ask the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// Messages by their words and meaning: in the workspace, one session or one peer's.
    Search {
        query: String,
        session: Option<String>,
        peer: Option<String>,
        limit: u32,
    },
    /// A session's context within a token budget, with its summary.
    Context { session: String, tokens: Option<u32> },
    /// Conclusions: the newest (a list) or the nearest to `query`.
    Conclusions {
        query: Option<String>,
        observer: Option<String>,
        observed: Option<String>,
        limit: u32,
    },
    /// A question to a peer's memory (the dialectic).
    Chat {
        peer: String,
        question: String,
        session: Option<String>,
        target: Option<String>,
    },
    /// Erases what `erased` names; with `wait`, until its receipt says complete.
    Erase { erased: Erased, wait: bool },
}

/// What `roncho erase` erases.
#[derive(Debug, Clone, PartialEq)]
pub enum Erased {
    Message {
        session: String,
        message: String,
    },
    Session(String),
    Conclusion(String),
    Peer(String),
    /// The whole workspace.
    Workspace,
}

/// How long `roncho erase --wait` waits for the receipt to say complete.
pub const ERASE_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

impl Ask {
    /// The REST call that asks it in `workspace`.
    pub fn call(&self, workspace: &str) -> Call {
        let base = format!("/v3/workspaces/{}", segment(workspace));
        match self {
            Ask::Search {
                query,
                session,
                peer,
                limit,
            } => {
                let scope = match (session, peer) {
                    (Some(session), _) => format!("{base}/sessions/{}/search", segment(session)),
                    (None, Some(peer)) => format!("{base}/peers/{}/search", segment(peer)),
                    (None, None) => format!("{base}/search"),
                };
                Call::post(scope, json!({"query": query, "limit": limit}))
            }
            Ask::Context { session, tokens } => {
                Call::get(format!("{base}/sessions/{}/context", segment(session))).query("tokens", *tokens)
            }
            Ask::Conclusions {
                query,
                observer,
                observed,
                limit,
            } => {
                // A query reads one collection, so it names both peers:
                // one given alone is a peer's own view of itself.
                let (observer, observed) = match (observer, observed, query) {
                    (Some(peer), None, Some(_)) | (None, Some(peer), Some(_)) => (Some(peer), Some(peer)),
                    _ => (observer.as_ref(), observed.as_ref()),
                };
                let mut filters = serde_json::Map::new();
                if let Some(observer) = observer {
                    filters.insert("observer_id".into(), json!(observer));
                }
                if let Some(observed) = observed {
                    filters.insert("observed_id".into(), json!(observed));
                }
                match query {
                    Some(query) => Call::post(
                        format!("{base}/conclusions/query"),
                        json!({"query": query, "top_k": limit, "filters": filters}),
                    ),
                    None => Call::post(format!("{base}/conclusions/list"), json!({"filters": filters}))
                        .query("size", Some(*limit))
                        .query("reverse", Some(true)),
                }
            }
            Ask::Chat {
                peer,
                question,
                session,
                target,
            } => {
                let mut body = json!({"query": question, "stream": false});
                if let Some(session) = session {
                    body["session_id"] = json!(session);
                }
                if let Some(target) = target {
                    body["target"] = json!(target);
                }
                Call::post(format!("{base}/peers/{}/chat", segment(peer)), body)
            }
            Ask::Erase { erased, .. } => {
                let path = match erased {
                    Erased::Message { session, message } => {
                        format!("{base}/sessions/{}/messages/{}", segment(session), segment(message))
                    }
                    Erased::Session(session) => format!("{base}/sessions/{}", segment(session)),
                    Erased::Conclusion(id) => format!("{base}/conclusions/{}", segment(id)),
                    Erased::Peer(peer) => format!("{base}/peers/{}", segment(peer)),
                    Erased::Workspace => base,
                };
                Call::new(http::Method::DELETE, path)
            }
        }
    }

    /// Where a peer key's peer is the default scope: a search or a
    /// conclusion list that names none is that peer's.
    pub fn default_to(&mut self, key_peer: Option<&str>) {
        let Some(key_peer) = key_peer else {
            return;
        };
        match self {
            Ask::Search {
                session: None, peer, ..
            } if peer.is_none() => *peer = Some(key_peer.to_owned()),
            Ask::Conclusions { observer, observed, .. } if observer.is_none() && observed.is_none() => {
                *observer = Some(key_peer.to_owned());
            }
            _ => {}
        }
    }

    /// The reply as text for a person, and whether it found anything; an
    /// error when the reply is not what a roncho server answers.
    pub fn render(&self, reply: &Value) -> Result<(String, Exit), String> {
        let shape = |what: &str| format!("expected {what}, got {}", printable(&cut(&reply.to_string()), false));
        let mut text = String::new();
        match self {
            Ask::Search { .. } => {
                let messages = reply.as_array().ok_or_else(|| shape("a list of messages"))?;
                for message in messages {
                    text.push_str(&format!(
                        "{} {}/{}: {}\n",
                        field(message, "created_at"),
                        field(message, "session_id"),
                        field(message, "peer_id"),
                        field(message, "content"),
                    ));
                }
                return Ok((text, found(messages)));
            }
            Ask::Context { .. } => {
                let messages = reply["messages"].as_array().ok_or_else(|| shape("a session context"))?;
                if reply["summary"].is_object() {
                    text.push_str(&format!("summary: {}\n", field(&reply["summary"], "content")));
                }
                for message in messages {
                    text.push_str(&format!(
                        "{}: {}\n",
                        field(message, "peer_id"),
                        field(message, "content")
                    ));
                }
                if text.is_empty() {
                    // Said, not an empty answer: whole messages only fit.
                    text.push_str(
                        "(nothing: the session has no messages yet, or its newest is longer than --tokens)\n",
                    );
                }
            }
            Ask::Conclusions { query, .. } => {
                let conclusions = match query {
                    Some(_) => reply.as_array(),
                    None => reply["items"].as_array(),
                }
                .ok_or_else(|| shape("conclusions"))?;
                for conclusion in conclusions {
                    text.push_str(&format!(
                        "{} → {}: {}  [{}]\n",
                        field(conclusion, "observer_id"),
                        field(conclusion, "observed_id"),
                        field(conclusion, "content"),
                        field(conclusion, "id"),
                    ));
                }
                return Ok((text, found(conclusions)));
            }
            Ask::Chat { .. } => {
                let answer = reply["content"].as_str().ok_or_else(|| shape("an answer"))?;
                text.push_str(&printable(answer, true));
                text.push('\n');
            }
            Ask::Erase { .. } => match reply {
                // A receipt: what is gone, and whether all of it is.
                Value::Object(receipt) if receipt.contains_key("state") => text.push_str(&format!(
                    "erasure {} of {}: {}; erased {}\n",
                    field(reply, "id"),
                    printable(&reply["scope"].to_string(), false),
                    field(reply, "state"),
                    nonzero_counts(&reply["counts"]),
                )),
                // A conclusion's delete: 204, no body.
                Value::Null => text.push_str("deleted\n"),
                _ => return Err(shape("an erasure receipt")),
            },
        }
        Ok((text, Exit::Found))
    }
}

/// `text` cut to 200 characters, for an error message.
fn cut(text: &str) -> String {
    let mut cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// A receipt's counts that are not zero: `messages 1, conclusions 2`.
fn nonzero_counts(counts: &Value) -> String {
    let counted: Vec<String> = counts
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, count)| count.as_i64().is_some_and(|count| count != 0))
        .map(|(name, count)| format!("{name} {count}"))
        .collect();
    if counted.is_empty() {
        "nothing".to_owned()
    } else {
        counted.join(", ")
    }
}

fn found(items: &[Value]) -> Exit {
    if items.is_empty() { Exit::Nothing } else { Exit::Found }
}

/// A field as printable text on one line: a string as it is, anything
/// else as JSON, nothing as `-`.
fn field(value: &Value, name: &str) -> String {
    match value.get(name) {
        Some(Value::String(text)) => printable(text.trim_end(), false),
        None | Some(Value::Null) => "-".to_owned(),
        Some(other) => printable(&other.to_string(), false),
    }
}

/// `text` as it may reach a terminal: control characters dropped (no
/// escape sequence moves the cursor, colours, retitles or writes the
/// clipboard), and the invisible ones that reorder or hide what follows
/// (bidirectional overrides and isolates, zero-width characters, the byte
/// order mark). Line breaks (`\n`, U+2028, U+2029) are kept with
/// `newlines`, else shown as `⏎`: one message, one line. A tab is a space.
pub fn printable(text: &str, newlines: bool) -> String {
    text.chars()
        .filter_map(|character| match character {
            '\n' | '\u{2028}' | '\u{2029}' => Some(if newlines { '\n' } else { '⏎' }),
            '\t' => Some(' '),
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}' => None,
            character if character.is_control() => None,
            character => Some(character),
        })
        .collect()
}

/// Where a one-shot command sends its call, and as whom.
#[derive(Debug)]
pub struct Reach {
    pub upstream: Upstream,
    pub authorization: Option<HeaderValue>,
}

impl Reach {
    /// The server `upstream` reaches, with `key` if any.
    pub fn new(upstream: Upstream, key: Option<&str>) -> Result<Self, ApiError> {
        let authorization = key
            .map(|key| {
                HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| ApiError {
                    status: 400,
                    message: "the key is not a header value".to_owned(),
                })
            })
            .transpose()?;
        Ok(Self {
            upstream,
            authorization,
        })
    }

    /// Asks `ask` in `workspace` and returns the server's JSON: for an
    /// erasure, its receipt (once complete, with `wait`).
    pub async fn ask(&self, ask: &Ask, workspace: &str) -> Result<Value, ApiError> {
        let reply = self.send(&ask.call(workspace)).await?;
        let (Ask::Erase { wait, .. }, Some(receipt)) = (ask, reply.receipt) else {
            return Ok(reply.body.unwrap_or(Value::Null));
        };
        let call = Call::get(format!(
            "/v3/workspaces/{}/erasures/{}",
            segment(workspace),
            segment(&receipt)
        ));
        let started = std::time::Instant::now();
        loop {
            let receipt = self.send(&call).await?.body.unwrap_or(Value::Null);
            if !wait || receipt["state"] != "running" {
                return Ok(receipt);
            }
            if started.elapsed() > ERASE_WAIT {
                return Err(ApiError {
                    status: 504,
                    message: format!("the erasure is still running after {ERASE_WAIT:?}: {receipt}"),
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// Sends `call` as this command's caller.
    pub async fn send(&self, call: &Call) -> Result<roncho_mcp::upstream::Reply, ApiError> {
        self.upstream.send(call, self.authorization.as_ref(), None).await
    }
}

/// The REST edge's base URL that `rest_listen` serves (an unspecified
/// address is reached on loopback).
pub fn base_url_of(rest_listen: std::net::SocketAddr, tls: bool) -> String {
    let host = match rest_listen.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
        ip if ip.is_unspecified() => "[::1]".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://{host}:{}", rest_listen.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_has_the_code_of_its_kind() {
        let code = |status| {
            Exit::of(&ApiError {
                status,
                message: String::new(),
            }) as u8
        };
        assert_eq!(code(0), 5, "no reply: unavailable");
        for (status, expected) in [
            (400, 2),
            (422, 2),
            (413, 2),
            (401, 4),
            (403, 4),
            (404, 3),
            (429, 5),
            (500, 5),
            (503, 5),
        ] {
            assert_eq!(code(status), expected, "{status}");
        }
    }

    #[test]
    fn a_message_cannot_move_the_terminal_and_stays_on_its_line() {
        assert_eq!(printable("a\nb\tc\u{1b}[31mred\r\u{7}\u{9b}", false), "a⏎b c[31mred");
        assert_eq!(
            printable("x\u{202e}y\u{2066}z\u{200b}\u{feff}\u{2028}w", false),
            "xyz⏎w"
        );
        assert_eq!(printable("one\ntwo\u{1b}]52;c;AAAA\u{7}", true), "one\ntwo]52;c;AAAA");
    }

    #[test]
    fn calls_name_their_scope_with_every_segment_encoded() {
        let search = Ask::Search {
            query: "kettle".into(),
            session: Some("s/1".into()),
            peer: None,
            limit: 5,
        };
        let call = search.call("w x");
        assert_eq!(call.path, "/v3/workspaces/w%20x/sessions/s%2F1/search");
        assert_eq!(call.body, Some(json!({"query": "kettle", "limit": 5})));
        let list = Ask::Conclusions {
            query: None,
            observer: Some("alice".into()),
            observed: None,
            limit: 3,
        };
        let call = list.call("w");
        assert_eq!(call.path, "/v3/workspaces/w/conclusions/list");
        assert_eq!(call.body, Some(json!({"filters": {"observer_id": "alice"}})));
        // A query names its collection: one peer alone is its own view.
        for (observer, observed) in [(None, Some("bob")), (Some("bob"), None)] {
            let query = Ask::Conclusions {
                query: Some("drinks".into()),
                observer: observer.map(str::to_owned),
                observed: observed.map(str::to_owned),
                limit: 3,
            };
            assert_eq!(
                query.call("w").body,
                Some(json!({"query": "drinks", "top_k": 3, "filters": {"observer_id": "bob", "observed_id": "bob"}}))
            );
        }
    }

    #[test]
    fn nothing_found_is_its_own_code() {
        let search = Ask::Search {
            query: "q".into(),
            session: None,
            peer: None,
            limit: 5,
        };
        assert_eq!(search.render(&json!([])).unwrap().1, Exit::Nothing);
        assert!(
            search.render(&json!("<html>captive portal</html>")).is_err(),
            "not a roncho reply"
        );
        assert!(search.render(&Value::Null).is_err());
        let (text, exit) = search
            .render(&json!([{"created_at": "t", "session_id": "s", "peer_id": "p", "content": "hi\nthere"}]))
            .unwrap();
        assert_eq!((text.as_str(), exit), ("t s/p: hi⏎there\n", Exit::Found));
        let page = Ask::Conclusions {
            query: None,
            observer: None,
            observed: None,
            limit: 5,
        };
        assert_eq!(page.render(&json!({"items": [], "total": 0})).unwrap().1, Exit::Nothing);
        let context = Ask::Context {
            session: "s".into(),
            tokens: Some(30),
        };
        let (text, _) = context.render(&json!({"messages": [], "summary": null})).unwrap();
        assert!(text.starts_with("(nothing: "), "{text}");
        assert!(page.render(&json!({"weird": 1})).is_err());
    }

    #[test]
    fn an_unspecified_listen_address_is_reached_on_loopback() {
        assert_eq!(
            base_url_of("0.0.0.0:8000".parse().unwrap(), false),
            "http://127.0.0.1:8000"
        );
        assert_eq!(base_url_of("[::]:8000".parse().unwrap(), true), "https://[::1]:8000");
        assert_eq!(
            base_url_of("10.0.0.5:9000".parse().unwrap(), false),
            "http://10.0.0.5:9000"
        );
    }
}
