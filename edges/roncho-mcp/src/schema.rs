//! The tools' input schemas (honcho-mcp.md §7), as JSON Schema objects. A
//! default workspace, peer or session becomes the argument's `default`, and
//! the argument is then never required.

use serde_json::{Map, Value, json};

use crate::tools::{Defaults, MEMORY_SESSION};

/// A string property.
fn text(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

fn number(description: &str) -> Value {
    json!({ "type": "number", "description": description })
}

fn object(description: &str) -> Value {
    json!({ "type": "object", "description": description, "additionalProperties": {} })
}

fn strings(description: &str) -> Value {
    json!({ "type": "array", "items": { "type": "string" }, "description": description })
}

/// Builds one schema: properties in order, and which are required.
struct Schema<'a> {
    defaults: &'a Defaults,
    properties: Map<String, Value>,
    required: Vec<&'static str>,
}

impl<'a> Schema<'a> {
    fn new(defaults: &'a Defaults) -> Self {
        Self {
            defaults,
            properties: Map::new(),
            required: Vec::new(),
        }
    }

    fn optional(mut self, name: &'static str, property: Value) -> Self {
        self.properties.insert(name.to_owned(), property);
        self
    }

    fn required(mut self, name: &'static str, property: Value) -> Self {
        self.required.push(name);
        self.optional(name, property)
    }

    /// An id with a default: optional, and its default shown, when one is set.
    fn defaulted(mut self, name: &'static str, description: &str, default: Option<&str>) -> Self {
        match default {
            Some(default) => {
                let mut property = text(&format!(
                    "{description} Defaults to `{default}`; omit it unless another is meant."
                ));
                property["default"] = default.into();
                self.optional(name, property)
            }
            None => {
                self = self.required(name, text(description));
                self
            }
        }
    }

    fn workspace(self) -> Self {
        let property = match &self.defaults.workspace {
            Some(workspace) => json!({
                "type": "string",
                "description": format!(
                    "Workspace id. This connection's default workspace is `{workspace}`; omit this unless another workspace is meant."
                ),
                "default": workspace,
            }),
            None => text(
                "Workspace id. Prefer setting a default workspace (the X-Honcho-Workspace-ID header, or `roncho mcp --workspace`); \
                 pass this only when none is set (list_workspaces or create_workspace find one).",
            ),
        };
        self.optional("workspace_id", property)
    }

    fn peer(self, description: &str) -> Self {
        let default = self.defaults.peer.clone();
        self.defaulted("peer_id", description, default.as_deref())
    }

    fn session(self, description: &str) -> Self {
        let default = self.defaults.session.clone();
        self.defaulted("session_id", description, default.as_deref())
    }

    fn build(self) -> Value {
        let mut schema = json!({ "type": "object", "properties": self.properties });
        if !self.required.is_empty() {
            schema["required"] = json!(self.required);
        }
        schema
    }
}

const TARGET: &str = "Another peer: what peer_id knows about this one, instead of about itself.";
const LEVELS: [&str; 5] = ["minimal", "low", "medium", "high", "max"];

/// The input schema of the tool `name` under `defaults` (no parameters
/// for a name no tool has).
pub fn input_schema(name: &str, defaults: &Defaults) -> Value {
    resource_tool(name, defaults)
        .or_else(|| memory_tool(name, defaults))
        .unwrap_or_else(|| Schema::new(defaults))
        .build()
}

/// Tools over workspaces, peers and sessions.
fn resource_tool<'a>(name: &str, defaults: &'a Defaults) -> Option<Schema<'a>> {
    let schema = Schema::new(defaults);
    Some(match name {
        "list_workspaces" => schema
            .optional("page", json!({ "type": "integer", "minimum": 1, "description": "Page, from 1." }))
            .optional(
                "size",
                json!({ "type": "integer", "minimum": 1, "maximum": 100, "description": "Workspaces per page." }),
            ),
        "inspect_workspace" | "list_peers" | "list_sessions" | "get_queue_status" => schema.workspace(),
        "create_workspace" => schema
            .workspace()
            .optional("metadata", object("Metadata to create it with, e.g. project and purpose.")),
        "search" => schema
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
        "get_metadata" => schema
            .workspace()
            .optional("peer_id", text("A peer's metadata instead of the workspace's."))
            .optional("session_id", text("A session's metadata (wins over peer_id).")),
        "set_metadata" => schema
            .workspace()
            .required("metadata", object("The new metadata; replaces the old."))
            .optional("peer_id", text("Set a peer's metadata instead of the workspace's."))
            .optional("session_id", text("Set a session's metadata (wins over peer_id).")),
        "create_peer" => schema.workspace().peer("The peer's id, stable across sessions.").optional(
            "configuration",
            json!({
                "type": "object",
                "description": "observeMe: whether roncho forms conclusions about this peer [default true].",
                "properties": { "observeMe": { "type": ["boolean", "null"] } },
            }),
        ),
        "chat" | "ask" => schema
            .workspace()
            .peer("The peer asked: whose knowledge answers.")
            .required("query", text("The question, in natural language."))
            .optional("target_peer_id", text(TARGET))
            .optional("session_id", text("Answer from this session only."))
            .optional(
                "reasoning_level",
                json!({ "type": "string", "enum": LEVELS, "description": "Depth: higher is slower and more thorough [default low]." }),
            ),
        "get_peer_card" => schema
            .workspace()
            .peer("The peer whose card (or whose view of target_peer_id) to read.")
            .optional("target_peer_id", text(TARGET)),
        "set_peer_card" => schema
            .workspace()
            .peer("The peer whose card (or whose view of target_peer_id) to set.")
            .required("peer_card", strings("The facts, one per string."))
            .optional("target_peer_id", text(TARGET)),
        "get_peer_context" => schema
            .workspace()
            .peer("The observer.")
            .optional("target_peer_id", text("The observed peer [default: peer_id]."))
            .optional("search_query", text("Favour conclusions close to this."))
            .optional("max_conclusions", number("Conclusions to include, 1 to 100 [default 100].")),
        "get_representation" => schema
            .workspace()
            .peer("The observer.")
            .optional("target_peer_id", text("The observed peer [default: peer_id]."))
            .optional("session_id", text("Only what was learned in this session."))
            .optional("search_query", text("Favour conclusions close to this."))
            .optional("max_conclusions", number("Conclusions to include, 1 to 100 [default 25].")),
        "create_session" | "delete_session" | "get_session_peers" | "inspect_session" => {
            schema.workspace().session("The session's id.")
        }
        "clone_session" => schema
            .workspace()
            .session("The session to fork.")
            .optional("message_id", text("Copy up to and including this message [default: all].")),
        "add_peers_to_session" => schema.workspace().session("The session's id.").required(
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
        "remove_peers_from_session" => schema
            .workspace()
            .session("The session's id.")
            .required("peer_ids", strings("The peers to remove.")),
        _ => return None,
    })
}

/// Tools over messages, context and memory.
fn memory_tool<'a>(name: &str, defaults: &'a Defaults) -> Option<Schema<'a>> {
    let schema = Schema::new(defaults);
    Some(match name {
        "add_messages_to_session" | "remember" => {
            let schema = schema.workspace();
            let schema = if name == "remember" {
                let session = defaults.session.as_deref().unwrap_or(MEMORY_SESSION);
                schema.defaulted("session_id", "The conversation these turns belong to.", Some(session))
            } else {
                schema.session("The session's id.")
            };
            let mut author = json!({ "type": "string", "description": "The author's peer id." });
            let mut required = vec!["content"];
            match &defaults.peer {
                Some(peer) => author["default"] = peer.as_str().into(),
                None => required.insert(0, "peer_id"),
            }
            schema.required(
                "messages",
                json!({
                    "type": "array",
                    "description": "The turns, in order: 1 to 100, up to 25,000 characters each.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "peer_id": author,
                            "content": { "type": "string" },
                            "metadata": { "type": "object", "additionalProperties": {} },
                        },
                        "required": required,
                    },
                }),
            )
        }
        "get_session_messages" => schema
            .workspace()
            .session("The session's id.")
            .optional("filters", object("Filters, e.g. {\"peer_id\": \"alice\"} or on metadata.")),
        "get_session_message" => schema
            .workspace()
            .session("The session's id.")
            .required("message_id", text("The message's id.")),
        "get_session_context" => schema
            .workspace()
            .session("The session's id.")
            .optional("summary", json!({ "type": "boolean", "description": "Include a summary of older messages [default true]." }))
            .optional("tokens", number("Token budget of the window [default and most: 100,000].")),
        "list_conclusions" => schema
            .workspace()
            .peer("The observer.")
            .optional("target_peer_id", text("The observed peer [default: peer_id].")),
        "query_conclusions" => schema
            .workspace()
            .peer("The observer.")
            .required("query", text("What to look for."))
            .optional("target_peer_id", text("The observed peer [default: peer_id]."))
            .optional("top_k", number("Conclusions to return, 1 to 100 [default 10]."))
            .optional("filters", object("More filters, e.g. {\"level\": [\"deductive\", \"inductive\"]}.")),
        "create_conclusions" => schema
            .workspace()
            .peer("The observer: who holds these conclusions.")
            .required("target_peer_id", text("The observed peer (peer_id again for itself)."))
            .required("conclusions", strings("The conclusions, one per string."))
            .optional("session_id", text("Tie them to this session [default: none].")),
        "delete_conclusion" => schema
            .workspace()
            .peer("The observer.")
            .required("target_peer_id", text("The observed peer."))
            .required("conclusion_id", text("The conclusion's id.")),
        "schedule_dream" => schema
            .workspace()
            .peer("The observer whose conclusions to consolidate.")
            .optional("target_peer_id", text("The observed peer [default: peer_id, self-reflection]."))
            .optional("session_id", text("Only this session's conclusions.")),
        "recall" => schema
            .workspace()
            .required("query", text("What you need to remember, as a question or keywords."))
            .optional(
                "peer_id",
                match &defaults.peer {
                    Some(peer) => json!({ "type": "string", "description": "Whose memory to add (card, conclusions).", "default": peer }),
                    None => text("Whose memory to add (card, conclusions) [default: none, messages only]."),
                },
            )
            .optional("session_id", text("Only this conversation's messages [default: every conversation]."))
            .optional(
                "max_tokens",
                json!({ "type": "integer", "minimum": 50, "maximum": 100_000, "description": "Budget of the answer in tokens [default 1,500]." }),
            ),
        "forget" => schema
            .workspace()
            .optional("message_id", text("One message to erase (with its session_id)."))
            .optional("session_id", text("The message's session; alone, the whole session is erased."))
            .optional("conclusion_id", text("One conclusion to erase.")),
        _ => return None,
    })
}
