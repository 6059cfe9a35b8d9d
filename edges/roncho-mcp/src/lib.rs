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

    /// This request's key and defaults: over HTTP, its headers'; otherwise
    /// the server's.
    fn for_request(&self, context: &RequestContext<RoleServer>) -> (Option<HeaderValue>, Defaults) {
        let Some(parts) = context.extensions.get::<http::request::Parts>() else {
            return (self.authorization.clone(), self.defaults.clone());
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
        (parts.headers.get(http::header::AUTHORIZATION).cloned(), defaults)
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
        let (_, defaults) = self.for_request(&context);
        Ok(ListToolsResult::with_all_items(self.tools(&defaults)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (authorization, defaults) = self.for_request(&context);
        let arguments = request.arguments.unwrap_or_default();
        let name = request.name.as_ref();
        let listed = self.profile.tools().iter().any(|tool| tool.name == name);
        let outcome = if listed {
            let call_context = Context {
                upstream: &self.upstream,
                authorization: authorization.as_ref(),
                defaults: &defaults,
            };
            tools::call(call_context, name, &arguments).await
        } else {
            Err(format!("Tool {name} not found"))
        };
        let result = match outcome {
            Ok(Output::Text(text)) => CallToolResult::success(vec![ContentBlock::text(capped(text))]),
            Ok(Output::Json(value)) => CallToolResult::success(vec![ContentBlock::text(capped(value.to_string()))]),
            Err(reason) => {
                tracing::debug!(tool = name, %reason, "tool failed");
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
    axum::Router::new().route_service(path, service)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_results_are_cut_and_say_so() {
        let text = "é".repeat(MAX_RESULT_BYTES);
        let cut = capped(text);
        assert!(cut.len() < MAX_RESULT_BYTES + 200);
        assert!(cut.ends_with("a session]"), "{}", &cut[cut.len() - 100..]);
        assert_eq!(capped("short".to_owned()), "short");
    }
}
