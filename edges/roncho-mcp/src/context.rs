//! What every tool runs with: the connection's defaults, the caller's key
//! and where REST is; its arguments, read against its schema; and how it
//! answers and fails.

use http::HeaderValue;
use roncho_gate::Vouched;
use serde_json::{Map, Value, json};

use crate::upstream::{ApiError, Call, Reply, Upstream, segment};

/// What omitted ids default to: from the command line, or a connection's
/// headers (`X-Honcho-Workspace-ID`, `X-Roncho-Peer-ID`, `X-Roncho-Session-ID`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    pub workspace: Option<String>,
    pub peer: Option<String>,
    pub session: Option<String>,
}

/// Default session of `remember` when none is configured.
pub const MEMORY_SESSION: &str = "memory";

/// A tool's reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Sent as it is.
    Text(String),
    /// Sent as compact JSON.
    Json(Value),
}

/// A tool that did not succeed.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The arguments do not fit the schema: the whole text of the error.
    Invalid(String),
    /// The tool ran and failed: the reason (the tool's prefix goes before it).
    Failed(String),
    /// The edge refused: status and reason.
    Api(ApiError),
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Self::Api(error)
    }
}

pub(crate) type Result<T> = std::result::Result<T, Failure>;

/// The id pattern Honcho's SDK checks before any call.
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 512
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// What a call runs with: where REST is, the caller's key (or, over HTTP
/// in process, the caller the gate let in), the defaults.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub upstream: &'a Upstream,
    pub authorization: Option<&'a HeaderValue>,
    pub vouched: Option<&'a Vouched>,
    pub defaults: &'a Defaults,
}

/// A tool's arguments, read against its schema.
pub(crate) struct Args<'a> {
    pub(crate) tool: &'static str,
    pub(crate) map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    pub(crate) fn invalid(&self, reason: String) -> Failure {
        Failure::Invalid(format!(
            "MCP error -32602: Input validation error: Invalid arguments for tool {}: {reason}",
            self.tool
        ))
    }

    pub(crate) fn value(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|value| !value.is_null())
    }

    pub(crate) fn string(&self, name: &str) -> Result<Option<&'a str>> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(self.invalid(format!("`{name}`: expected a string, received {}", kind(other)))),
        }
    }

    pub(crate) fn required(&self, name: &str) -> Result<&'a str> {
        self.string(name)?
            .ok_or_else(|| self.invalid(format!("`{name}` is required")))
    }

    pub(crate) fn object(&self, name: &str) -> Result<Option<&'a Map<String, Value>>> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map)),
            Some(other) => Err(self.invalid(format!("`{name}`: expected an object, received {}", kind(other)))),
        }
    }

    pub(crate) fn array(&self, name: &str) -> Result<&'a Vec<Value>> {
        match self.value(name) {
            Some(Value::Array(items)) => Ok(items),
            None => Err(self.invalid(format!("`{name}` is required"))),
            Some(other) => Err(self.invalid(format!("`{name}`: expected an array, received {}", kind(other)))),
        }
    }

    pub(crate) fn number(&self, name: &str) -> Result<Option<f64>> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::Number(number)) => Ok(number.as_f64()),
            Some(other) => Err(self.invalid(format!("`{name}`: expected a number, received {}", kind(other)))),
        }
    }

    pub(crate) fn boolean(&self, name: &str) -> Result<Option<bool>> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(other) => Err(self.invalid(format!("`{name}`: expected a boolean, received {}", kind(other)))),
        }
    }

    /// An integer in `min..=max`, checked as Honcho's SDK checks it.
    pub(crate) fn integer(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>> {
        let Some(number) = self.number(name)? else {
            return Ok(None);
        };
        if number.fract() != 0.0 || number < min as f64 || number > max as f64 {
            return Err(Failure::Failed(format!(
                "{name} must be an integer from {min} to {max}, not {number}"
            )));
        }
        Ok(Some(number as i64))
    }

    /// An id argument, checked against Honcho's id pattern.
    pub(crate) fn id(&self, name: &str) -> Result<Option<&'a str>> {
        match self.string(name)? {
            Some(id) if !valid_id(id) => Err(Failure::Failed(format!(
                "{name} `{id}` must be 1 to 512 letters, digits, `_` or `-`"
            ))),
            other => Ok(other),
        }
    }

    /// A query that must say something.
    pub(crate) fn query(&self, name: &str) -> Result<&'a str> {
        let query = self.required(name)?;
        if query.trim().is_empty() {
            return Err(Failure::Failed(format!("{name} must not be empty")));
        }
        Ok(query)
    }
}

pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Context<'_> {
    pub(crate) async fn send(&self, call: Call) -> std::result::Result<Reply, ApiError> {
        self.upstream.send(&call, self.authorization, self.vouched).await
    }

    pub(crate) async fn json(&self, call: Call) -> Result<Value> {
        Ok(self.send(call).await?.body.unwrap_or(Value::Null))
    }

    /// The workspace: the argument if it says something, else the default.
    pub(crate) fn workspace(&self, args: &Args<'_>) -> Result<String> {
        let given = args.string("workspace_id")?.map(str::trim).filter(|id| !id.is_empty());
        let workspace = given
            .or(self.defaults.workspace.as_deref())
            .ok_or_else(|| {
                Failure::Failed(
                    "Missing workspace_id. Pass workspace_id on the next call, or set a default workspace \
                     (the X-Honcho-Workspace-ID header, or `roncho mcp --workspace`)."
                        .to_owned(),
                )
            })?
            .to_owned();
        if !valid_id(&workspace) {
            return Err(Failure::Failed(format!(
                "workspace_id `{workspace}` must be 1 to 512 letters, digits, `_` or `-`"
            )));
        }
        Ok(workspace)
    }

    /// A peer argument, else the default peer.
    pub(crate) fn peer(&self, args: &Args<'_>, name: &str) -> Result<String> {
        match args.id(name)? {
            Some(peer) => Ok(peer.to_owned()),
            None => self
                .defaults
                .peer
                .clone()
                .ok_or_else(|| args.invalid(format!("`{name}` is required"))),
        }
    }

    /// A session argument, else the default session.
    pub(crate) fn session(&self, args: &Args<'_>, name: &str) -> Result<String> {
        match args.id(name)? {
            Some(session) => Ok(session.to_owned()),
            None => self
                .defaults
                .session
                .clone()
                .ok_or_else(|| args.invalid(format!("`{name}` is required"))),
        }
    }

    /// Gets or creates, as Honcho's SDK does before using a resource. A key
    /// that may use but not create it (a peer or session key) goes on: the
    /// call itself then answers.
    pub(crate) async fn open(&self, path: String, id: &str) -> Result<Option<Value>> {
        match self.send(Call::post(path, json!({ "id": id }))).await {
            Ok(reply) => Ok(reply.body),
            Err(error) if matches!(error.status, 401 | 403) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    pub(crate) async fn open_workspace(&self, workspace: &str) -> Result<Option<Value>> {
        self.open("/v3/workspaces".to_owned(), workspace).await
    }

    pub(crate) async fn open_peer(&self, workspace: &str, peer: &str) -> Result<Option<Value>> {
        self.open_workspace(workspace).await?;
        self.open(format!("/v3/workspaces/{}/peers", segment(workspace)), peer)
            .await
    }

    pub(crate) async fn open_session(&self, workspace: &str, session: &str) -> Result<Option<Value>> {
        self.open_workspace(workspace).await?;
        self.open(format!("/v3/workspaces/{}/sessions", segment(workspace)), session)
            .await
    }
}

pub(crate) fn workspace_path(workspace: &str, rest: &str) -> String {
    format!("/v3/workspaces/{}{rest}", segment(workspace))
}

pub(crate) fn peer_path(workspace: &str, peer: &str, rest: &str) -> String {
    workspace_path(workspace, &format!("/peers/{}{rest}", segment(peer)))
}

pub(crate) fn session_path(workspace: &str, session: &str, rest: &str) -> String {
    workspace_path(workspace, &format!("/sessions/{}{rest}", segment(session)))
}
