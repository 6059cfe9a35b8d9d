//! The tools: Honcho's MCP tool set (honcho-mcp.md §7: same names,
//! arguments, result shapes and error texts) and the compact `memory`
//! profile. Each tool makes the REST calls Honcho's MCP server makes, on
//! roncho's REST edge, and reshapes the replies as Honcho's server does.
//!
//! Results are one text block: strings as they are, objects as compact JSON.
//! Failures are tool errors (`isError`) reading `<prefix>: <reason>`, never
//! protocol errors; arguments that do not fit a tool's schema read
//! `MCP error -32602: Input validation error: ...`, as Honcho's server says.

use roncho_gate::StatusClass;
use serde_json::{Map, Value, json};

use crate::context::{Args, Context, Defaults, Failure, Output, Result};
use crate::schema::{self, LEVELS, REPRESENTATION_TOKENS, Schema, TARGET, TOKENS, number, object, strings, text};
use crate::{memory, resources};

/// Which tools a server lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// Honcho's 31 tools.
    #[default]
    Honcho,
    /// `remember`, `recall`, `ask`, `forget`: what an agent uses every turn.
    Memory,
}

impl Profile {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "honcho" | "full" => Some(Self::Honcho),
            "memory" => Some(Self::Memory),
            _ => None,
        }
    }

    /// The tools of this profile, in the order `tools/list` gives them.
    pub fn tools(self) -> &'static [ToolInfo] {
        match self {
            Self::Honcho => HONCHO_TOOLS,
            Self::Memory => MEMORY_TOOLS,
        }
    }
}

/// A tool: its name, the prefix of its failures, and its description.
#[derive(Debug)]
pub struct ToolInfo {
    pub name: &'static str,
    pub prefix: &'static str,
    pub description: &'static str,
}

/// Declares every tool once: its name, the prefix of its failures, its
/// description, how its input schema is built (from [`Schema::new`] under
/// the connection's defaults) and what it runs. It makes the profiles'
/// tables, [`input_schema`] and the dispatch of [`call`].
macro_rules! tools {
    ($($table:ident {
        $($name:literal, $prefix:literal, $description:literal,
            schema: |$schema:ident| $build:expr,
            run: |$context:ident, $args:ident| $run:expr;)*
    })*) => {
        $(pub const $table: &[ToolInfo] = &[$(ToolInfo { name: $name, prefix: $prefix, description: $description }),*];)*

        /// The input schema of the tool `name` under `defaults` (no
        /// parameters for a name no tool has).
        pub fn input_schema(name: &str, defaults: &Defaults) -> Value {
            match name {
                $($($name => {
                    let $schema = Schema::new(defaults);
                    $build
                })*)*
                _ => Schema::new(defaults),
            }
            .build()
        }

        /// Runs the tool `name`; `None` when no tool has that name.
        async fn run(name: &str, context: Context<'_>, args: &Args<'_>) -> Option<Result<Output>> {
            Some(match name {
                $($($name => {
                    let ($context, $args) = (context, args);
                    $run
                })*)*
                _ => return None,
            })
        }
    };
}

tools! {
    HONCHO_TOOLS {
        "inspect_workspace", "Failed to inspect workspace",
            "One-call overview of the workspace: its metadata and configuration, and the ids and counts of its peers and sessions (first 50 of each).",
            schema: |schema| schema.workspace(),
            run: |context, args| resources::inspect_workspace(context, args).await;
        "list_workspaces", "Failed to list workspaces",
            "List the workspaces this key can see (admin keys only), with paging. Skip this when a default workspace is set; use it only when the workspace id is unknown, then create_workspace if nothing fits.",
            schema: |schema| schema
                .optional("page", json!({ "type": "integer", "minimum": 1, "description": "Page, from 1." }))
                .optional(
                    "size",
                    json!({ "type": "integer", "minimum": 1, "maximum": 100, "description": "Workspaces per page." }),
                ),
            run: |context, args| resources::list_workspaces(context, args).await;
        "create_workspace", "Failed to create workspace",
            "Get or create a workspace by id, optionally with metadata (e.g. project, purpose). An existing workspace is returned unchanged. Skip this when a default workspace is set.",
            schema: |schema| schema
                .workspace()
                .optional("metadata", object("Metadata to create it with, e.g. project and purpose.")),
            run: |context, args| resources::create_workspace(context, args).await;
        "search", "Search failed",
            "Search messages by meaning and words: the whole workspace, one peer's messages (peer_id) or one session (session_id, which wins over peer_id). With peer_id it also searches that peer's own conclusions. Returns {messages, conclusions}; conclusion ids work with delete_conclusion.",
            schema: |schema| schema
                .workspace()
                .required("query", text("What to look for, in words or meaning."))
                .optional("peer_id", text("Only this peer's messages; also searches its own conclusions."))
                .optional("session_id", text("Only this session's messages (wins over peer_id for messages)."))
                .optional("message_limit", number("Messages to return, 1 to 100 [default 10]."))
                .optional("message_filters", object("Filters on messages, e.g. {\"created_at\": {\"gte\": \"2026-01-01\"}}."))
                .optional("conclusion_top_k", number("Conclusions to return [default 10]."))
                .optional(
                    "conclusion_filters",
                    object("Filters on conclusions, e.g. {\"level\": [\"deductive\", \"inductive\"]} or {\"session_id\": \"s\"}."),
                ),
            run: |context, args| resources::search(context, args).await;
        "get_metadata", "Failed to get metadata",
            "Read the metadata of a session (session_id), else a peer (peer_id), else the workspace.",
            schema: |schema| schema
                .workspace()
                .optional("peer_id", text("A peer's metadata instead of the workspace's."))
                .optional("session_id", text("A session's metadata (wins over peer_id).")),
            run: |context, args| resources::get_metadata(context, args).await;
        "set_metadata", "Failed to set metadata",
            "Replace (not merge) the metadata of a session (session_id), else a peer (peer_id), else the workspace.",
            schema: |schema| schema
                .workspace()
                .required("metadata", object("The new metadata; replaces the old."))
                .optional("peer_id", text("Set a peer's metadata instead of the workspace's."))
                .optional("session_id", text("Set a session's metadata (wins over peer_id).")),
            run: |context, args| resources::set_metadata(context, args).await;
        "create_peer", "Failed to create peer",
            "Get or create a participant, human or AI, by a stable id. configuration.observeMe=false stops roncho from forming conclusions about this peer (for deterministic bots).",
            schema: |schema| schema.workspace().peer("The peer's id, stable across sessions.").optional(
                    "configuration",
                    json!({
                        "type": "object",
                        "description": "observeMe: whether roncho forms conclusions about this peer [default true].",
                        "properties": { "observeMe": { "type": ["boolean", "null"] } },
                    }),
                ),
            run: |context, args| resources::create_peer(context, args).await;
        "list_peers", "Failed to list peers",
            "List the workspace's peers (first 50).",
            schema: |schema| schema.workspace(),
            run: |context, args| resources::list_peers(context, args).await;
        "chat", "Chat failed",
            "Ask roncho's reasoning (the dialectic) a natural-language question about what a peer knows or what is known about target_peer_id: preferences, history, personality, intent. Takes seconds; prefer the fast reads (get_session_context, get_peer_context, get_representation, search) when they suffice.",
            schema: |schema| schema
                .workspace()
                .peer("The peer asked: whose knowledge answers.")
                .required("query", text("The question, in natural language."))
                .optional("target_peer_id", text(TARGET))
                .optional("session_id", text("Answer from this session only."))
                .optional(
                    "reasoning_level",
                    json!({ "type": "string", "enum": LEVELS, "description": "Depth: higher is slower and more thorough [default low]." }),
                ),
            run: |context, args| memory::chat(context, args, "peer_id").await;
        "get_peer_card", "Failed to get peer card",
            "The peer card: a short list of stable biographical facts about the peer (or what peer_id knows of target_peer_id).",
            schema: |schema| schema
                .workspace()
                .peer("The peer whose card (or whose view of target_peer_id) to read.")
                .optional("target_peer_id", text(TARGET)),
            run: |context, args| memory::get_peer_card(context, args).await;
        "set_peer_card", "Failed to set peer card",
            "Set or correct a peer card by hand: the full list of facts, replacing the stored one.",
            schema: |schema| schema
                .workspace()
                .peer("The peer whose card (or whose view of target_peer_id) to set.")
                .required("peer_card", strings("The facts, one per string."))
                .optional("target_peer_id", text(TARGET)),
            run: |context, args| memory::set_peer_card(context, args).await;
        "get_peer_context", "Failed to get peer context",
            "Everything known about a peer in one call: the representation (conclusions drawn from conversations, optionally those closest to search_query) and the peer card.",
            schema: |schema| schema
                .workspace()
                .peer("The observer.")
                .optional("target_peer_id", text("The observed peer [default: peer_id]."))
                .optional("search_query", text("Favour conclusions close to this."))
                .optional("max_conclusions", number("Conclusions to include, 1 to 100 [default 100]."))
                .optional("tokens", number(TOKENS)),
            run: |context, args| memory::get_peer_context(context, args).await;
        "get_representation", "Failed to get representation",
            "The representation alone: markdown sections of the conclusions roncho drew about the peer (or target_peer_id), optionally within one session or closest to search_query.",
            schema: |schema| schema
                .workspace()
                .peer("The observer.")
                .optional("target_peer_id", text("The observed peer [default: peer_id]."))
                .optional("session_id", text("Only what was learned in this session."))
                .optional("search_query", text("Favour conclusions close to this."))
                .optional("max_conclusions", number("Conclusions to include, 1 to 100 [default 25]."))
                .optional("tokens", number(REPRESENTATION_TOKENS)),
            run: |context, args| memory::get_representation(context, args).await;
        "create_session", "Failed to create session",
            "Get or create a session: one coherent conversation (a thread, project or channel). Reuse its id for every turn.",
            schema: |schema| schema.workspace().session("The session's id."),
            run: |context, args| resources::create_session(context, args).await;
        "list_sessions", "Failed to list sessions",
            "List the workspace's active sessions (first 50).",
            schema: |schema| schema.workspace(),
            run: |context, args| resources::list_sessions(context, args).await;
        "delete_session", "Failed to delete session",
            "Delete a session, its messages and everything derived from them alone. Cannot be undone.",
            schema: |schema| schema.workspace().session("The session's id."),
            run: |context, args| resources::delete_session(context, args).await;
        "clone_session", "Failed to clone session",
            "Fork a session, whole or up to and including message_id. Returns the new session's id.",
            schema: |schema| schema
                .workspace()
                .session("The session to fork.")
                .optional("message_id", text("Copy up to and including this message [default: all].")),
            run: |context, args| resources::clone_session(context, args).await;
        "add_peers_to_session", "Failed to add peers",
            "Add peers to a session: ids, or {peer_id, observe_me, observe_others}. observe_me: this peer's messages teach roncho about it; observe_others: it forms its own view of the others.",
            schema: |schema| schema.workspace().session("The session's id.").required(
                    "peers",
                    json!({
                        "type": "array",
                        "description": "Peer ids, or {peer_id, observe_me, observe_others}.",
                        "items": {
                            "anyOf": [
                                { "type": "string" },
                                {
                                    "type": "object",
                                    "properties": {
                                        "peer_id": { "type": "string" },
                                        "observe_me": { "type": ["boolean", "null"] },
                                        "observe_others": { "type": ["boolean", "null"] },
                                    },
                                    "required": ["peer_id"],
                                },
                            ],
                        },
                    }),
                ),
            run: |context, args| resources::add_peers_to_session(context, args).await;
        "remove_peers_from_session", "Failed to remove peers",
            "Remove peers from a session (they keep what they learned there).",
            schema: |schema| schema
                .workspace()
                .session("The session's id.")
                .required("peer_ids", strings("The peers to remove.")),
            run: |context, args| resources::remove_peers_from_session(context, args).await;
        "get_session_peers", "Failed to get session peers",
            "The ids of a session's peers.",
            schema: |schema| schema.workspace().session("The session's id."),
            run: |context, args| resources::get_session_peers(context, args).await;
        "inspect_session", "Failed to inspect session",
            "One-call overview of a session: its peers, message count and summaries.",
            schema: |schema| schema.workspace().session("The session's id."),
            run: |context, args| resources::inspect_session(context, args).await;
        "add_messages_to_session", "Failed to add messages",
            "Record conversation turns, each with its author's peer_id: after every exchange, the user's exact message and the assistant's exact reply. Roncho learns from them in the background.",
            schema: |schema| schema::messages(schema, false),
            run: |context, args| resources::add_messages_to_session(context, args).await;
        "get_session_messages", "Failed to get messages",
            "Read a session's messages, oldest first (first 50), optionally filtered (e.g. {\"peer_id\": \"alice\"} or metadata).",
            schema: |schema| schema
                .workspace()
                .session("The session's id.")
                .optional("filters", object("Filters, e.g. {\"peer_id\": \"alice\"} or on metadata.")),
            run: |context, args| resources::get_session_messages(context, args).await;
        "get_session_message", "Failed to get message",
            "Read one message of a session by id.",
            schema: |schema| schema
                .workspace()
                .session("The session's id.")
                .required("message_id", text("The message's id.")),
            run: |context, args| resources::get_session_message(context, args).await;
        "get_session_context", "Failed to get context",
            "An LLM-ready window of a session: its most recent messages within a token budget and, by default, a summary of what came before.",
            schema: |schema| schema
                .workspace()
                .session("The session's id.")
                .optional("summary", json!({ "type": "boolean", "description": "Include a summary of older messages [default true]." }))
                .optional("tokens", number("Token budget of the window [default and most: 100,000].")),
            run: |context, args| resources::get_session_context(context, args).await;
        "list_conclusions", "Failed to list conclusions",
            "List the conclusions peer_id holds about target_peer_id (default: about itself), newest first, first 50.",
            schema: |schema| schema
                .workspace()
                .peer("The observer.")
                .optional("target_peer_id", text("The observed peer [default: peer_id].")),
            run: |context, args| memory::list_conclusions(context, args).await;
        "query_conclusions", "Query failed",
            "Search one pair's conclusions (peer_id about target_peer_id, default itself) by meaning; filters such as {\"level\": [\"deductive\", \"inductive\"]} keep only conclusions drawn while dreaming.",
            schema: |schema| schema
                .workspace()
                .peer("The observer.")
                .required("query", text("What to look for."))
                .optional("target_peer_id", text("The observed peer [default: peer_id]."))
                .optional("top_k", number("Conclusions to return, 1 to 100 [default 10]."))
                .optional("filters", object("More filters, e.g. {\"level\": [\"deductive\", \"inductive\"]}.")),
            run: |context, args| memory::query_conclusions(context, args).await;
        "create_conclusions", "Failed to create conclusions",
            "Record facts that did not come from conversation: what peer_id (observer) should hold about target_peer_id (use peer_id again for itself), optionally tied to a session.",
            schema: |schema| schema
                .workspace()
                .peer("The observer: who holds these conclusions.")
                .required("target_peer_id", text("The observed peer (peer_id again for itself)."))
                .required("conclusions", strings("The conclusions, one per string."))
                .optional("session_id", text("Tie them to this session [default: none].")),
            run: |context, args| memory::create_conclusions(context, args).await;
        "delete_conclusion", "Failed to delete conclusion",
            "Delete a wrong or outdated conclusion by id (find it with query_conclusions or list_conclusions).",
            schema: |schema| schema
                .workspace()
                .peer("The observer.")
                .required("target_peer_id", text("The observed peer."))
                .required("conclusion_id", text("The conclusion's id.")),
            run: |context, args| memory::delete_conclusion(context, args).await;
        "schedule_dream", "Failed to schedule dream",
            "Queue a dream for a peer: background consolidation that merges conclusions into higher-level ones and refreshes peer cards. Useful after long conversations.",
            schema: |schema| schema
                .workspace()
                .peer("The observer whose conclusions to consolidate.")
                .optional("target_peer_id", text("The observed peer [default: peer_id, self-reflection]."))
                .optional("session_id", text("Only this session's conclusions.")),
            run: |context, args| memory::schedule_dream(context, args).await;
        "get_queue_status", "Failed to get queue status",
            "How much background work (deriving conclusions, summaries, dreams) is pending, to tell whether processing has caught up.",
            schema: |schema| schema.workspace(),
            run: |context, args| memory::get_queue_status(context, args).await;
    }
    MEMORY_TOOLS {
        "remember", "Failed to remember",
            "Save conversation turns to long-term memory: after every exchange, the user's exact message and your exact reply, each with its author's peer_id. Roncho learns facts about the people from them in the background. Returns the messages' ids.",
            schema: |schema| schema::messages(schema, true),
            run: |context, args| memory::remember(context, args).await;
        "recall", "Recall failed",
            "Before answering, when what you know about the user or earlier conversations would help: messages that match the query, what roncho concluded about the peer and its peer card, within max_tokens. Fast; call it freely.",
            schema: |schema| schema::recall(schema),
            run: |context, args| memory::recall(context, args).await;
        "ask", "Ask failed",
            "Ask roncho's reasoning a question about a peer (\"what tone does the user prefer?\", \"what is the user trying to do?\"). Slower than recall (seconds); use it when recall's facts need interpreting.",
            schema: |schema| schema
                .workspace()
                .peer("The peer asked: whose knowledge answers.")
                .required("query", text("The question, in natural language."))
                .optional("target_peer_id", text(TARGET))
                .optional("session_id", text("Answer from this session only."))
                .optional(
                    "reasoning_level",
                    json!({ "type": "string", "enum": LEVELS, "description": "Depth: higher is slower and more thorough [default low]." }),
                ),
            run: |context, args| memory::chat(context, args, "peer_id").await;
        "forget", "Failed to forget",
            "Erase for good: one message (message_id, in session_id), a whole session (session_id) or one conclusion (conclusion_id), with everything derived from it alone. Returns the erasure's receipt: what was removed.",
            schema: |schema| schema
                .workspace()
                .optional("message_id", text("One message to erase (with its session_id)."))
                .optional("session_id", text("The message's session; alone, the whole session is erased."))
                .optional("conclusion_id", text("One conclusion to erase.")),
            run: |context, args| memory::forget(context, args).await;
    }
}

/// Runs the tool `name` with `arguments`.
pub async fn call(
    context: Context<'_>,
    name: &str,
    arguments: &Map<String, Value>,
) -> std::result::Result<Output, ToolFailure> {
    let not_found = || ToolFailure {
        reason: format!("Tool {name} not found"),
        class: StatusClass::ClientError,
    };
    let Some(info) = HONCHO_TOOLS.iter().chain(MEMORY_TOOLS).find(|tool| tool.name == name) else {
        return Err(not_found());
    };
    let args = Args {
        tool: info.name,
        map: arguments,
    };
    let Some(result) = run(name, context, &args).await else {
        return Err(not_found());
    };
    result.map_err(|failure| match failure {
        Failure::Invalid(reason) => ToolFailure {
            reason,
            class: StatusClass::ClientError,
        },
        Failure::Failed(reason) => ToolFailure {
            reason: format!("{}: {reason}", info.prefix),
            class: StatusClass::ClientError,
        },
        Failure::Api(error) => {
            let hint = if matches!(name, "list_workspaces" | "create_workspace") && matches!(error.status, 401 | 403) {
                ". This operation is only possible with an admin API key."
            } else {
                ""
            };
            // No answer at all (status 0) is the server's failure.
            let class = http::StatusCode::from_u16(error.status).map_or(StatusClass::ServerError, StatusClass::of_http);
            ToolFailure {
                reason: format!("{}: {}{hint}", info.prefix, error.message),
                class,
            }
        }
    })
}

/// Why a tool call failed, as the agent reads it, and whose failure it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    pub reason: String,
    pub class: StatusClass,
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;
    use crate::context::{Context, valid_id};
    use crate::memory::Recollection;
    use crate::shapes::camel;
    use crate::upstream::Upstream;

    #[test]
    fn configurations_are_shown_in_camel_case() {
        let configuration = json!({"peer_card": {"use": true}, "summary": {"messages_per_short_summary": 20}});
        assert_eq!(
            camel(&configuration),
            json!({"peerCard": {"use": true}, "summary": {"messagesPerShortSummary": 20}})
        );
    }

    #[test]
    fn ids_follow_honchos_pattern() {
        assert!(valid_id("alice-1_B"));
        assert!(!valid_id(""));
        assert!(!valid_id("scope.x"));
        assert!(!valid_id(&"a".repeat(513)));
    }

    #[test]
    fn recollections_stay_within_their_budget() {
        let mut text = Recollection::new(12);
        text.heading("Messages");
        text.line("- one short line");
        text.line(&"word ".repeat(50));
        let text = text.finish();
        assert!(text.contains("one short line"), "{text}");
        assert!(text.contains("1 more lines left out"), "{text}");
    }

    /// The REST edge's search, as a router: `degraded` sets the header
    /// roncho sends when a search ran without meaning.
    fn edge(degraded: Option<&'static str>) -> Upstream {
        use axum::routing::post;
        let search = move || async move {
            let found = axum::Json(json!([{
                "id": "m1", "content": "kittens", "peer_id": "a", "session_id": "s",
                "metadata": {}, "created_at": "2026-11-26T00:00:00Z", "workspace_id": "w", "token_count": 1,
            }]));
            let mut headers = http::HeaderMap::new();
            if let Some(reason) = degraded {
                headers.insert("x-roncho-degraded-reason", HeaderValue::from_static(reason));
            }
            (headers, found)
        };
        Upstream::Local(
            axum::Router::new()
                .route("/v3/workspaces", post(|| async { axum::Json(json!({ "id": "w" })) }))
                .route("/v3/workspaces/{workspace}/search", post(search)),
        )
    }

    async fn search_with(upstream: &Upstream) -> Value {
        let defaults = Defaults::default();
        let context = Context {
            upstream,
            authorization: None,
            vouched: None,
            defaults: &defaults,
        };
        let arguments = json!({ "workspace_id": "w", "query": "kittens" });
        match call(context, "search", arguments.as_object().unwrap()).await {
            Ok(Output::Json(found)) => found,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_search_without_meaning_says_so() {
        let found = search_with(&edge(Some("no embedder is configured"))).await;
        assert_eq!(found["degraded"], "no embedder is configured");
        assert_eq!(found["messages"][0]["id"], "m1");
        let found = search_with(&edge(None)).await;
        assert!(found.get("degraded").is_none(), "{found}");
        assert_eq!(
            found["messages"][0].as_object().unwrap().len(),
            6,
            "Honcho's six message keys: {found}"
        );
    }

    #[test]
    fn every_tool_has_a_schema() {
        let defaults = Defaults::default();
        for tool in HONCHO_TOOLS.iter().chain(MEMORY_TOOLS) {
            let schema = input_schema(tool.name, &defaults);
            assert_eq!(schema["type"], "object", "{}", tool.name);
        }
        assert_eq!(HONCHO_TOOLS.len(), 31);
    }
}
