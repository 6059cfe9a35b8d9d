//! How the tools' input schemas (honcho-mcp.md §7) are built, as JSON
//! Schema objects; each tool gives its own in `tools.rs`. A
//! default workspace, peer or session becomes the argument's `default`, and
//! the argument is then never required.

use serde_json::{Map, Value, json};

use crate::context::{Defaults, MEMORY_SESSION};

/// A string property.
pub(crate) fn text(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

pub(crate) fn number(description: &str) -> Value {
    json!({ "type": "number", "description": description })
}

pub(crate) fn object(description: &str) -> Value {
    json!({ "type": "object", "description": description, "additionalProperties": {} })
}

pub(crate) fn strings(description: &str) -> Value {
    json!({ "type": "array", "items": { "type": "string" }, "description": description })
}

/// Builds one schema: properties in order, and which are required.
pub(crate) struct Schema<'a> {
    defaults: &'a Defaults,
    properties: Map<String, Value>,
    required: Vec<&'static str>,
}

impl<'a> Schema<'a> {
    pub(crate) fn new(defaults: &'a Defaults) -> Self {
        Self {
            defaults,
            properties: Map::new(),
            required: Vec::new(),
        }
    }

    pub(crate) fn optional(mut self, name: &'static str, property: Value) -> Self {
        self.properties.insert(name.to_owned(), property);
        self
    }

    pub(crate) fn required(mut self, name: &'static str, property: Value) -> Self {
        self.required.push(name);
        self.optional(name, property)
    }

    /// An id with a default: optional, and its default shown, when one is set.
    pub(crate) fn defaulted(mut self, name: &'static str, description: &str, default: Option<&str>) -> Self {
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

    pub(crate) fn workspace(self) -> Self {
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

    pub(crate) fn peer(self, description: &str) -> Self {
        let default = self.defaults.peer.clone();
        self.defaulted("peer_id", description, default.as_deref())
    }

    pub(crate) fn session(self, description: &str) -> Self {
        let default = self.defaults.session.clone();
        self.defaulted("session_id", description, default.as_deref())
    }

    pub(crate) fn build(self) -> Value {
        let mut schema = json!({ "type": "object", "properties": self.properties });
        if !self.required.is_empty() {
            schema["required"] = json!(self.required);
        }
        schema
    }
}

pub(crate) const TARGET: &str = "Another peer: what peer_id knows about this one, instead of about itself.";

/// A budget of representation and card.
pub(crate) const TOKENS: &str = "Token budget of the representation and card, 1 to 100,000: the least important conclusions and the card's last lines are left out first, and `omitted` says how many [default: no budget].";
/// A budget of a representation alone.
pub(crate) const REPRESENTATION_TOKENS: &str = "Token budget of the representation, 1 to 100,000: the least important conclusions are left out first, and a last line says how many [default: no budget].";
pub(crate) const LEVELS: [&str; 5] = ["minimal", "low", "medium", "high", "max"];

/// The schema of `remember` (`remember`: its session defaults to
/// [`MEMORY_SESSION`]) and of `add_messages_to_session`.
pub(crate) fn messages(schema: Schema<'_>, remember: bool) -> Schema<'_> {
    let defaults = schema.defaults;
    let schema = schema.workspace();
    let schema = if remember {
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

/// The schema of `recall`: whose memory it adds defaults to the default peer.
pub(crate) fn recall(schema: Schema<'_>) -> Schema<'_> {
    let peer = match &schema.defaults.peer {
        Some(peer) => {
            json!({ "type": "string", "description": "Whose memory to add (card, conclusions).", "default": peer })
        }
        None => text("Whose memory to add (card, conclusions) [default: none, messages only]."),
    };
    schema
        .workspace()
        .required("query", text("What you need to remember, as a question or keywords."))
        .optional("peer_id", peer)
        .optional("session_id", text("Only this conversation's messages [default: every conversation]."))
        .optional(
            "max_tokens",
            json!({ "type": "integer", "minimum": 50, "maximum": 100_000, "description": "Budget of the answer in tokens [default 1,500]." }),
        )
}
