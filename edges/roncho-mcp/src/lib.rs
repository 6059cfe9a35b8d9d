//! roncho's Model Context Protocol server: any agent that takes memory
//! through MCP uses roncho as its memory.
//!
//! The tools are Honcho's (honcho-mcp.md: same names, arguments, results
//! and error texts, so instructions written for Honcho's server work
//! unchanged), or the compact `memory` profile (`remember`, `recall`, `ask`,
//! `forget`). Like Honcho's server, every tool is made of calls to the
//! Honcho v3 REST edge, so authentication, authorization, limits and wire
//! shapes are the edge's, implemented once; here the edge is this process's
//! router or a roncho server's URL ([`upstream::Upstream`]).
//!
//! Two transports, with the official Rust SDK (`rmcp`): stdio
//! ([`serve_stdio`], what `roncho mcp` runs) and Streamable HTTP
//! ([`http_router`], `/mcp` on the REST edge's port).
//!
//! # Layout
//! - [`tools`]: the tools and what they return.
//! - [`schema`]: their input schemas.
//! - [`upstream`]: the REST edge the tools call.

use std::sync::Arc;

use http::HeaderValue;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServiceExt};
use roncho_gate::{CallName, Vouched};

mod context;
mod memory;
mod resources;
mod schema;
mod shapes;
pub mod tools;
pub mod upstream;

pub use context::{Context, Defaults, Output};
pub use tools::Profile;
pub use upstream::Upstream;

/// What the server tells an agent at `initialize`: when to save, when to
/// recall, how the ids fit together.
pub const INSTRUCTIONS: &str = include_str!("instructions.md");
/// The same for the `memory` profile.
pub const MEMORY_INSTRUCTIONS: &str = include_str!("memory-instructions.md");

/// The largest tool result sent, in bytes: longer ones are cut, and say so.
const MAX_RESULT_BYTES: usize = 256 * 1024;

/// The headers that set a connection's defaults over HTTP.
pub const WORKSPACE_HEADER: &str = "x-honcho-workspace-id";
pub const PEER_HEADER: &str = "x-roncho-peer-id";
pub const SESSION_HEADER: &str = "x-roncho-session-id";

/// Who a request calls as, and how its call is named in metrics.
struct Caller {
    /// The key sent on to REST (`Authorization`).
    authorization: Option<HeaderValue>,
    /// Over HTTP in process: the caller the gate let in, handed on as such.
    vouched: Option<Vouched>,
    defaults: Defaults,
    /// Over HTTP: where the call's name goes (`tools/call search`).
    name: Option<CallName>,
}

/// An MCP server over a REST edge.
#[derive(Clone, Debug)]
pub struct McpServer {
    upstream: Upstream,
    profile: Profile,
    defaults: Defaults,
    /// The key sent on every call (stdio); over HTTP each request's own.
    authorization: Option<HeaderValue>,
}

impl McpServer {
    pub fn new(upstream: Upstream, profile: Profile, defaults: Defaults) -> Self {
        Self {
            upstream,
            profile,
            defaults,
            authorization: None,
        }
    }

    /// Sends `key` as `Authorization: Bearer <key>` on every call.
    pub fn with_key(mut self, key: &str) -> Result<Self, String> {
        let value = HeaderValue::from_str(&format!("Bearer {}", key.trim()))
            .map_err(|_| "the key has characters a header cannot carry".to_owned())?;
        self.authorization = Some(value);
        Ok(self)
    }

    /// What this request runs with: over HTTP, its headers' key and
    /// defaults and the caller the gate let in; otherwise the server's.
    fn for_request(&self, context: &RequestContext<RoleServer>) -> Caller {
        let Some(parts) = context.extensions.get::<http::request::Parts>() else {
            return Caller {
                authorization: self.authorization.clone(),
                vouched: None,
                defaults: self.defaults.clone(),
                name: None,
            };
        };
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::trim)
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
        };
        let defaults = Defaults {
            workspace: header(WORKSPACE_HEADER).or_else(|| self.defaults.workspace.clone()),
            peer: header(PEER_HEADER).or_else(|| self.defaults.peer.clone()),
            session: header(SESSION_HEADER).or_else(|| self.defaults.session.clone()),
        };
        Caller {
            authorization: parts.headers.get(http::header::AUTHORIZATION).cloned(),
            vouched: parts.extensions.get::<roncho_core::Caller>().cloned().map(Vouched),
            defaults,
            name: parts.extensions.get::<CallName>().cloned(),
        }
    }

    /// The tools of this server's profile, their schemas under `defaults`.
    pub fn tools(&self, defaults: &Defaults) -> Vec<Tool> {
        self.profile
            .tools()
            .iter()
            .map(|tool| {
                let schema = match tools::input_schema(tool.name, defaults) {
                    serde_json::Value::Object(schema) => schema,
                    _ => serde_json::Map::new(),
                };
                Tool::new(tool.name, tool.description, Arc::new(schema))
            })
            .collect()
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let instructions = match self.profile {
            Profile::Honcho => INSTRUCTIONS,
            Profile::Memory => MEMORY_INSTRUCTIONS,
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("roncho", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = self.for_request(&context);
        if let Some(name) = &caller.name {
            name.name("tools/list");
        }
        Ok(ListToolsResult::with_all_items(self.tools(&caller.defaults)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = self.for_request(&context);
        let arguments = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        let listed = self.profile.tools().iter().any(|tool| tool.name == name);
        if let Some(call) = &caller.name {
            // Counted under the tool's name only when it is one of ours.
            call.name(format!("tools/call {}", if listed { name } else { "unknown" }));
        }
        let outcome = if listed {
            let call_context = Context {
                upstream: &self.upstream,
                authorization: caller.authorization.as_ref(),
                vouched: caller.vouched.as_ref(),
                defaults: &caller.defaults,
            };
            // The tool runs in a task of rmcp's that outlives its HTTP call;
            // it ends with the call (the client went away, the deadline
            // passed), and with it the REST calls it makes in process, which
            // hold no place of their own.
            tokio::select! {
                outcome = tools::call(call_context, name, &arguments) => outcome,
                () = context.ct.cancelled() => Err(tools::ToolFailure {
                    reason: "the call was cancelled".to_owned(),
                    class: roncho_gate::StatusClass::Cancelled,
                }),
            }
        } else {
            Err(tools::ToolFailure {
                reason: format!("Tool {name} not found"),
                class: roncho_gate::StatusClass::ClientError,
            })
        };
        let result = match outcome {
            Ok(Output::Text(text)) => CallToolResult::success(vec![ContentBlock::text(capped(text))]),
            Ok(Output::Json(value)) => CallToolResult::success(vec![ContentBlock::text(capped(value.to_string()))]),
            Err(tools::ToolFailure { reason, class }) => {
                tracing::debug!(tool = name, %reason, "tool failed");
                if let Some(call) = &caller.name {
                    call.failed(class);
                }
                CallToolResult::error(vec![ContentBlock::text(reason)])
            }
        };
        Ok(result.into())
    }
}

/// Cuts a result past [`MAX_RESULT_BYTES`] (at a character boundary), saying so.
fn capped(mut text: String) -> String {
    if text.len() <= MAX_RESULT_BYTES {
        return text;
    }
    let mut end = MAX_RESULT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let total = text.len();
    text.truncate(end);
    text.push_str(&format!(
        "\n[result cut at {MAX_RESULT_BYTES} of {total} bytes; ask for less: a smaller limit, a filter, a session]"
    ));
    text
}

/// Serves `server` on stdin/stdout until the client closes them.
pub async fn serve_stdio(server: McpServer) -> Result<(), String> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| format!("starting MCP on stdio: {error}"))?;
    running
        .waiting()
        .await
        .map_err(|error| format!("MCP on stdio: {error}"))?;
    Ok(())
}

/// `/mcp`: Streamable HTTP, stateless (every request carries its key and
/// its defaults in headers). Authentication, admission, deadlines and
/// which hosts and origins are served are the server's gate for every HTTP
/// route, mounted around this router, not MCP's own.
pub fn http_router(path: &str, server: McpServer, stop: tokio_util::sync::CancellationToken) -> axum::Router {
    use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_cancellation_token(stop)
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    axum::Router::new()
        .route_service(path, service)
        .layer(axum::middleware::from_fn(count_protocol_errors))
}

/// Counts a call rmcp answered with a JSON-RPC error before any handler
/// named it (a method no server has, parameters that do not parse) as
/// failed: its reply's status is 200 as a success's is. Such a reply is
/// whole in memory already (JSON replies, not a stream), whatever its size:
/// an error may echo a client's long method name.
async fn count_protocol_errors(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let name = request.extensions().get::<CallName>().cloned();
    let response = next.run(request).await;
    if response.status() == http::StatusCode::UNSUPPORTED_MEDIA_TYPE {
        // The gate let only JSON in: what rmcp could not read as one
        // JSON-RPC message is JSON-RPC's parse error, not a media type.
        return not_one_message();
    }
    let Some(name) = name.filter(|name| !name.named()) else {
        return response;
    };
    let whole = http_body::Body::size_hint(response.body()).upper().is_some();
    if !response.status().is_success() || !whole {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(mut bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return axum::response::Response::from_parts(parts, axum::body::Body::empty());
    };
    if let Some(class) = jsonrpc_error_class(&bytes) {
        name.failed(class);
        if let Some(cut) = with_messages_cut(&bytes) {
            bytes = cut.into();
            parts.headers.remove(http::header::CONTENT_LENGTH);
        }
    }
    axum::response::Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// The longest message of a JSON-RPC error a reply carries: the SDK's echo
/// the caller's text (an unknown method's whole name).
const MAX_ERROR_MESSAGE_CHARS: usize = 256;

/// `reply` with every error message cut to [`MAX_ERROR_MESSAGE_CHARS`];
/// `None` when none was longer.
fn with_messages_cut(reply: &[u8]) -> Option<Vec<u8>> {
    let mut reply: serde_json::Value = serde_json::from_slice(reply).ok()?;
    let mut cut = false;
    let replies: Vec<&mut serde_json::Value> = match &mut reply {
        serde_json::Value::Array(replies) => replies.iter_mut().collect(),
        reply => vec![reply],
    };
    for message in replies
        .into_iter()
        .filter_map(|reply| reply.get_mut("error")?.get_mut("message"))
    {
        if let serde_json::Value::String(text) = message
            && text.chars().count() > MAX_ERROR_MESSAGE_CHARS
        {
            let kept: String = text.chars().take(MAX_ERROR_MESSAGE_CHARS).collect();
            *text = format!("{kept}… (cut)");
            cut = true;
        }
    }
    cut.then(|| reply.to_string().into_bytes())
}

/// JSON-RPC's parse error, as HTTP 400: a body that is not one JSON-RPC
/// message (malformed JSON, or a batch, which MCP no longer has).
fn not_one_message() -> axum::response::Response {
    let error = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": "Parse error: the body is not one JSON-RPC message (batches are not served)"},
    });
    let mut response = axum::response::Response::new(axum::body::Body::from(error.to_string()));
    *response.status_mut() = http::StatusCode::BAD_REQUEST;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The class of the JSON-RPC error(s) in `reply`, if it holds any: the
/// server's own (internal, or the implementation-defined range) or the
/// caller's (parse, request, method, parameters).
fn jsonrpc_error_class(reply: &[u8]) -> Option<roncho_gate::StatusClass> {
    let reply: serde_json::Value = serde_json::from_slice(reply).ok()?;
    let replies = match &reply {
        serde_json::Value::Array(replies) => replies.iter().collect(),
        reply => vec![reply],
    };
    replies
        .into_iter()
        .filter_map(|reply| reply.get("error"))
        .map(|error| match error.get("code").and_then(serde_json::Value::as_i64) {
            Some(-32603 | -32099..=-32000) => roncho_gate::StatusClass::ServerError,
            _ => roncho_gate::StatusClass::ClientError,
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_rpc_errors_are_told_by_their_code() {
        use roncho_gate::StatusClass;
        let error = |code: i64| format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"m"}}}}"#);
        assert_eq!(
            jsonrpc_error_class(error(-32601).as_bytes()),
            Some(StatusClass::ClientError)
        );
        assert_eq!(
            jsonrpc_error_class(error(-32602).as_bytes()),
            Some(StatusClass::ClientError)
        );
        assert_eq!(
            jsonrpc_error_class(error(-32700).as_bytes()),
            Some(StatusClass::ClientError)
        );
        assert_eq!(
            jsonrpc_error_class(error(-32603).as_bytes()),
            Some(StatusClass::ServerError)
        );
        assert_eq!(
            jsonrpc_error_class(error(-32001).as_bytes()),
            Some(StatusClass::ServerError)
        );
        let batch = format!(r#"[{{"jsonrpc":"2.0","id":1,"result":{{}}}},{}]"#, error(-32601));
        assert_eq!(jsonrpc_error_class(batch.as_bytes()), Some(StatusClass::ClientError));
        assert_eq!(jsonrpc_error_class(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#), None);
        assert_eq!(jsonrpc_error_class(b"not json"), None);
    }

    #[test]
    fn long_error_messages_are_cut() {
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-32601,"message":"{}"}}}}"#,
            "é".repeat(100_000)
        );
        let cut: serde_json::Value = serde_json::from_slice(&with_messages_cut(long.as_bytes()).unwrap()).unwrap();
        let message = cut["error"]["message"].as_str().unwrap();
        assert!(
            message.ends_with("… (cut)") && message.chars().count() < 300,
            "{message}"
        );
        assert_eq!(cut["id"], 1);
        let short = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}"#;
        assert_eq!(with_messages_cut(short.as_bytes()), None);
    }

    #[test]
    fn long_results_are_cut_and_say_so() {
        let text = "é".repeat(MAX_RESULT_BYTES);
        let cut = capped(text);
        assert!(cut.len() < MAX_RESULT_BYTES + 200);
        assert!(cut.ends_with("a session]"), "{}", &cut[cut.len() - 100..]);
        assert_eq!(capped("short".to_owned()), "short");
    }
}
