//! The tools: Honcho's MCP tool set (honcho-mcp.md §7: same names,
//! arguments, result shapes and error texts) and the compact `memory`
//! profile. Each tool makes the REST calls Honcho's MCP server makes, on
//! roncho's REST edge, and reshapes the replies as Honcho's server does.
//!
//! Results are one text block: strings as they are, objects as compact JSON.
//! Failures are tool errors (`isError`) reading `<prefix>: <reason>`, never
//! protocol errors; arguments that do not fit a tool's schema read
//! `MCP error -32602: Input validation error: ...`, as Honcho's server says.

use http::{HeaderValue, Method};
use serde_json::{Map, Value, json};

use crate::upstream::{ApiError, Call, Reply, Upstream, segment};

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

/// What omitted ids default to: from the command line, or a connection's
/// headers (`X-Honcho-Workspace-ID`, `X-Roncho-Peer-ID`, `X-Roncho-Session-ID`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    pub workspace: Option<String>,
    pub peer: Option<String>,
    pub session: Option<String>,
}

/// A tool: its name, the prefix of its failures, and its description.
#[derive(Debug)]
pub struct ToolInfo {
    pub name: &'static str,
    pub prefix: &'static str,
    pub description: &'static str,
}

macro_rules! tools {
    ($table:ident: $($name:literal, $prefix:literal, $description:literal;)*) => {
        pub const $table: &[ToolInfo] = &[$(ToolInfo { name: $name, prefix: $prefix, description: $description }),*];
    };
}

tools! { HONCHO_TOOLS:
    "inspect_workspace", "Failed to inspect workspace",
        "One-call overview of the workspace: its metadata and configuration, and the ids and counts of its peers and sessions (first 50 of each).";
    "list_workspaces", "Failed to list workspaces",
        "List the workspaces this key can see (admin keys only), with paging. Skip this when a default workspace is set; use it only when the workspace id is unknown, then create_workspace if nothing fits.";
    "create_workspace", "Failed to create workspace",
        "Get or create a workspace by id, optionally with metadata (e.g. project, purpose). An existing workspace is returned unchanged. Skip this when a default workspace is set.";
    "search", "Search failed",
        "Search messages by meaning and words: the whole workspace, one peer's messages (peer_id) or one session (session_id, which wins over peer_id). With peer_id it also searches that peer's own conclusions. Returns {messages, conclusions}; conclusion ids work with delete_conclusion.";
    "get_metadata", "Failed to get metadata",
        "Read the metadata of a session (session_id), else a peer (peer_id), else the workspace.";
    "set_metadata", "Failed to set metadata",
        "Replace (not merge) the metadata of a session (session_id), else a peer (peer_id), else the workspace.";
    "create_peer", "Failed to create peer",
        "Get or create a participant, human or AI, by a stable id. configuration.observeMe=false stops roncho from forming conclusions about this peer (for deterministic bots).";
    "list_peers", "Failed to list peers",
        "List the workspace's peers (first 50).";
    "chat", "Chat failed",
        "Ask roncho's reasoning (the dialectic) a natural-language question about what a peer knows or what is known about target_peer_id: preferences, history, personality, intent. Takes seconds; prefer the fast reads (get_session_context, get_peer_context, get_representation, search) when they suffice.";
    "get_peer_card", "Failed to get peer card",
        "The peer card: a short list of stable biographical facts about the peer (or what peer_id knows of target_peer_id).";
    "set_peer_card", "Failed to set peer card",
        "Set or correct a peer card by hand: the full list of facts, replacing the stored one.";
    "get_peer_context", "Failed to get peer context",
        "Everything known about a peer in one call: the representation (conclusions drawn from conversations, optionally those closest to search_query) and the peer card.";
    "get_representation", "Failed to get representation",
        "The representation alone: markdown sections of the conclusions roncho drew about the peer (or target_peer_id), optionally within one session or closest to search_query.";
    "create_session", "Failed to create session",
        "Get or create a session: one coherent conversation (a thread, project or channel). Reuse its id for every turn.";
    "list_sessions", "Failed to list sessions",
        "List the workspace's active sessions (first 50).";
    "delete_session", "Failed to delete session",
        "Delete a session, its messages and everything derived from them alone. Cannot be undone.";
    "clone_session", "Failed to clone session",
        "Fork a session, whole or up to and including message_id. Returns the new session's id.";
    "add_peers_to_session", "Failed to add peers",
        "Add peers to a session: ids, or {peer_id, observe_me, observe_others}. observe_me: this peer's messages teach roncho about it; observe_others: it forms its own view of the others.";
    "remove_peers_from_session", "Failed to remove peers",
        "Remove peers from a session (they keep what they learned there).";
    "get_session_peers", "Failed to get session peers",
        "The ids of a session's peers.";
    "inspect_session", "Failed to inspect session",
        "One-call overview of a session: its peers, message count and summaries.";
    "add_messages_to_session", "Failed to add messages",
        "Record conversation turns, each with its author's peer_id: after every exchange, the user's exact message and the assistant's exact reply. Roncho learns from them in the background.";
    "get_session_messages", "Failed to get messages",
        "Read a session's messages, oldest first (first 50), optionally filtered (e.g. {\"peer_id\": \"alice\"} or metadata).";
    "get_session_message", "Failed to get message",
        "Read one message of a session by id.";
    "get_session_context", "Failed to get context",
        "An LLM-ready window of a session: its most recent messages within a token budget and, by default, a summary of what came before.";
    "list_conclusions", "Failed to list conclusions",
        "List the conclusions peer_id holds about target_peer_id (default: about itself), newest first, first 50.";
    "query_conclusions", "Query failed",
        "Search one pair's conclusions (peer_id about target_peer_id, default itself) by meaning; filters such as {\"level\": [\"deductive\", \"inductive\"]} keep only conclusions drawn while dreaming.";
    "create_conclusions", "Failed to create conclusions",
        "Record facts that did not come from conversation: what peer_id (observer) should hold about target_peer_id (use peer_id again for itself), optionally tied to a session.";
    "delete_conclusion", "Failed to delete conclusion",
        "Delete a wrong or outdated conclusion by id (find it with query_conclusions or list_conclusions).";
    "schedule_dream", "Failed to schedule dream",
        "Queue a dream for a peer: background consolidation that merges conclusions into higher-level ones and refreshes peer cards. Useful after long conversations.";
    "get_queue_status", "Failed to get queue status",
        "How much background work (deriving conclusions, summaries, dreams) is pending, to tell whether processing has caught up.";
}

tools! { MEMORY_TOOLS:
    "remember", "Failed to remember",
        "Save conversation turns to long-term memory: after every exchange, the user's exact message and your exact reply, each with its author's peer_id. Roncho learns facts about the people from them in the background. Returns the messages' ids.";
    "recall", "Recall failed",
        "Before answering, when what you know about the user or earlier conversations would help: messages that match the query, what roncho concluded about the peer and its peer card, within max_tokens. Fast; call it freely.";
    "ask", "Ask failed",
        "Ask roncho's reasoning a question about a peer (\"what tone does the user prefer?\", \"what is the user trying to do?\"). Slower than recall (seconds); use it when recall's facts need interpreting.";
    "forget", "Failed to forget",
        "Erase for good: one message (message_id, in session_id), a whole session (session_id) or one conclusion (conclusion_id), with everything derived from it alone. Returns the erasure's receipt: what was removed.";
}

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

type Result<T> = std::result::Result<T, Failure>;

/// The id pattern Honcho's SDK checks before any call.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 512
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// What a call runs with: where REST is, the caller's key, the defaults.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub upstream: &'a Upstream,
    pub authorization: Option<&'a HeaderValue>,
    pub defaults: &'a Defaults,
}

/// A tool's arguments, read against its schema.
struct Args<'a> {
    tool: &'static str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn invalid(&self, reason: String) -> Failure {
        Failure::Invalid(format!(
            "MCP error -32602: Input validation error: Invalid arguments for tool {}: {reason}",
            self.tool
        ))
    }

    fn value(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|value| !value.is_null())
    }

    fn string(&self, name: &str) -> Result<Option<&'a str>> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(self.invalid(format!("`{name}`: expected a string, received {}", kind(other)))),
        }
    }

    fn required(&self, name: &str) -> Result<&'a str> {
        self.string(name)?
            .ok_or_else(|| self.invalid(format!("`{name}` is required")))
    }

    fn object(&self, name: &str) -> Result<Option<&'a Map<String, Value>>> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map)),
            Some(other) => Err(self.invalid(format!("`{name}`: expected an object, received {}", kind(other)))),
        }
    }

    fn array(&self, name: &str) -> Result<&'a Vec<Value>> {
        match self.value(name) {
            Some(Value::Array(items)) => Ok(items),
            None => Err(self.invalid(format!("`{name}` is required"))),
            Some(other) => Err(self.invalid(format!("`{name}`: expected an array, received {}", kind(other)))),
        }
    }

    fn number(&self, name: &str) -> Result<Option<f64>> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::Number(number)) => Ok(number.as_f64()),
            Some(other) => Err(self.invalid(format!("`{name}`: expected a number, received {}", kind(other)))),
        }
    }

    fn boolean(&self, name: &str) -> Result<Option<bool>> {
        match self.value(name) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(other) => Err(self.invalid(format!("`{name}`: expected a boolean, received {}", kind(other)))),
        }
    }

    /// An integer in `min..=max`, checked as Honcho's SDK checks it.
    fn integer(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>> {
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
    fn id(&self, name: &str) -> Result<Option<&'a str>> {
        match self.string(name)? {
            Some(id) if !valid_id(id) => Err(Failure::Failed(format!(
                "{name} `{id}` must be 1 to 512 letters, digits, `_` or `-`"
            ))),
            other => Ok(other),
        }
    }

    /// A query that must say something.
    fn query(&self, name: &str) -> Result<&'a str> {
        let query = self.required(name)?;
        if query.trim().is_empty() {
            return Err(Failure::Failed(format!("{name} must not be empty")));
        }
        Ok(query)
    }
}

fn kind(value: &Value) -> &'static str {
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
    async fn send(&self, call: Call) -> std::result::Result<Reply, ApiError> {
        self.upstream.send(&call, self.authorization).await
    }

    async fn json(&self, call: Call) -> Result<Value> {
        Ok(self.send(call).await?.body.unwrap_or(Value::Null))
    }

    /// The workspace: the argument if it says something, else the default.
    fn workspace(&self, args: &Args<'_>) -> Result<String> {
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
    fn peer(&self, args: &Args<'_>, name: &str) -> Result<String> {
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
    fn session(&self, args: &Args<'_>, name: &str) -> Result<String> {
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
    async fn open(&self, path: String, id: &str) -> Result<Option<Value>> {
        match self.send(Call::post(path, json!({ "id": id }))).await {
            Ok(reply) => Ok(reply.body),
            Err(error) if matches!(error.status, 401 | 403) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    async fn open_workspace(&self, workspace: &str) -> Result<Option<Value>> {
        self.open("/v3/workspaces".to_owned(), workspace).await
    }

    async fn open_peer(&self, workspace: &str, peer: &str) -> Result<Option<Value>> {
        self.open_workspace(workspace).await?;
        self.open(format!("/v3/workspaces/{}/peers", segment(workspace)), peer)
            .await
    }

    async fn open_session(&self, workspace: &str, session: &str) -> Result<Option<Value>> {
        self.open_workspace(workspace).await?;
        self.open(format!("/v3/workspaces/{}/sessions", segment(workspace)), session)
            .await
    }
}

fn workspace_path(workspace: &str, rest: &str) -> String {
    format!("/v3/workspaces/{}{rest}", segment(workspace))
}

fn peer_path(workspace: &str, peer: &str, rest: &str) -> String {
    workspace_path(workspace, &format!("/peers/{}{rest}", segment(peer)))
}

fn session_path(workspace: &str, session: &str, rest: &str) -> String {
    workspace_path(workspace, &format!("/sessions/{}{rest}", segment(session)))
}

/// Runs the tool `name` with `arguments`.
pub async fn call(
    context: Context<'_>,
    name: &str,
    arguments: &Map<String, Value>,
) -> std::result::Result<Output, String> {
    let Some(info) = HONCHO_TOOLS.iter().chain(MEMORY_TOOLS).find(|tool| tool.name == name) else {
        return Err(format!("Tool {name} not found"));
    };
    let args = Args {
        tool: info.name,
        map: arguments,
    };
    let result = match name {
        "inspect_workspace" => inspect_workspace(context, &args).await,
        "list_workspaces" => list_workspaces(context, &args).await,
        "create_workspace" => create_workspace(context, &args).await,
        "search" => search(context, &args).await,
        "get_metadata" => get_metadata(context, &args).await,
        "set_metadata" => set_metadata(context, &args).await,
        "create_peer" => create_peer(context, &args).await,
        "list_peers" => list_peers(context, &args).await,
        "chat" => chat(context, &args, "peer_id").await,
        "get_peer_card" => get_peer_card(context, &args).await,
        "set_peer_card" => set_peer_card(context, &args).await,
        "get_peer_context" => get_peer_context(context, &args).await,
        "get_representation" => get_representation(context, &args).await,
        "create_session" => create_session(context, &args).await,
        "list_sessions" => list_sessions(context, &args).await,
        "delete_session" => delete_session(context, &args).await,
        "clone_session" => clone_session(context, &args).await,
        "add_peers_to_session" => add_peers_to_session(context, &args).await,
        "remove_peers_from_session" => remove_peers_from_session(context, &args).await,
        "get_session_peers" => get_session_peers(context, &args).await,
        "inspect_session" => inspect_session(context, &args).await,
        "add_messages_to_session" => add_messages(context, &args, "session_id")
            .await
            .map(|_| Output::Text("Messages added to session successfully".to_owned())),
        "get_session_messages" => get_session_messages(context, &args).await,
        "get_session_message" => get_session_message(context, &args).await,
        "get_session_context" => get_session_context(context, &args).await,
        "list_conclusions" => list_conclusions(context, &args).await,
        "query_conclusions" => query_conclusions(context, &args).await,
        "create_conclusions" => create_conclusions(context, &args).await,
        "delete_conclusion" => delete_conclusion(context, &args).await,
        "schedule_dream" => schedule_dream(context, &args).await,
        "get_queue_status" => get_queue_status(context, &args).await,
        "remember" => remember(context, &args).await,
        "recall" => recall(context, &args).await,
        "ask" => chat(context, &args, "peer_id").await,
        "forget" => forget(context, &args).await,
        _ => return Err(format!("Tool {name} not found")),
    };
    result.map_err(|failure| match failure {
        Failure::Invalid(text) => text,
        Failure::Failed(reason) => format!("{}: {reason}", info.prefix),
        Failure::Api(error) => {
            let hint = if matches!(name, "list_workspaces" | "create_workspace") && matches!(error.status, 401 | 403) {
                ". This operation is only possible with an admin API key."
            } else {
                ""
            };
            format!("{}: {}{hint}", info.prefix, error.message)
        }
    })
}

// ---- result shapes (honcho-mcp.md §8) ----

/// A message as Honcho's MCP server shows it.
fn message(value: &Value) -> Value {
    json!({
        "id": value["id"],
        "content": value["content"],
        "peer_id": value["peer_id"],
        "session_id": value["session_id"],
        "metadata": value["metadata"],
        "created_at": value["created_at"],
    })
}

/// Picks `fields` of `value`.
fn pick(value: &Value, fields: &[&str]) -> Value {
    Value::Object(
        fields
            .iter()
            .map(|field| ((*field).to_owned(), value[*field].clone()))
            .collect(),
    )
}

fn items(page: &Value) -> &[Value] {
    page["items"].as_array().map_or(&[], Vec::as_slice)
}

/// A page as Honcho's MCP server shows it: `{<key>: [...], total, page, pages}`.
fn page(value: &Value, key: &str, item: impl Fn(&Value) -> Value) -> Value {
    json!({
        key: items(value).iter().map(item).collect::<Vec<_>>(),
        "total": value["total"],
        "page": value["page"],
        "pages": value["pages"],
    })
}

fn ids(value: &Value) -> Value {
    pick(value, &["id"])
}

/// snake_case keys in camelCase, all the way down (configurations, which
/// Honcho's server shows as its TypeScript SDK holds them).
fn camel(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().map(|(key, value)| (camel_key(key), camel(value))).collect()),
        other => other.clone(),
    }
}

fn camel_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for character in key.chars() {
        if character == '_' {
            upper = true;
        } else if upper {
            out.extend(character.to_uppercase());
            upper = false;
        } else {
            out.push(character);
        }
    }
    out
}

fn text_or(value: &Value, otherwise: &str) -> String {
    match value.as_str() {
        Some(text) if !text.is_empty() => text.to_owned(),
        _ => otherwise.to_owned(),
    }
}

// ---- workspace tools ----

async fn inspect_workspace(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let path = workspace_path(&workspace, "");
    let (found, peers, sessions) = futures::try_join!(
        context.json(Call::post("/v3/workspaces".to_owned(), json!({ "id": workspace }))),
        context.json(Call::post(format!("{path}/peers/list"), json!({}))),
        context.json(Call::post(format!("{path}/sessions/list"), json!({}))),
    )?;
    let configuration = match &found["configuration"] {
        Value::Null => json!({}),
        other => camel(other),
    };
    Ok(Output::Json(json!({
        "workspace_id": workspace,
        "metadata": if found["metadata"].is_null() { json!({}) } else { found["metadata"].clone() },
        "configuration": configuration,
        "peer_count": peers["total"],
        "peers": items(&peers).iter().map(ids).collect::<Vec<_>>(),
        "session_count": sessions["total"],
        "sessions": items(&sessions).iter().map(ids).collect::<Vec<_>>(),
    })))
}

fn workspace_summary(value: &Value) -> Value {
    json!({
        "id": value["id"],
        "metadata": if value["metadata"].is_null() { json!({}) } else { value["metadata"].clone() },
        "created_at": value["created_at"],
    })
}

async fn list_workspaces(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let page_number = args.integer("page", 1, i64::MAX)?;
    let size = args.integer("size", 1, 100)?;
    let call = Call::post("/v3/workspaces/list".to_owned(), json!({}))
        .query("page", page_number)
        .query("size", size);
    let reply = context.json(call).await?;
    Ok(Output::Json(page(&reply, "workspaces", workspace_summary)))
}

async fn create_workspace(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let mut body = json!({ "id": workspace });
    if let Some(metadata) = args.object("metadata")? {
        body["metadata"] = Value::Object(metadata.clone());
    }
    let reply = context.json(Call::post("/v3/workspaces".to_owned(), body)).await?;
    Ok(Output::Json(workspace_summary(&reply)))
}

const SCOPED_FILTER_KEYS: [&str; 4] = ["observer", "observed", "observer_id", "observed_id"];

async fn search(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let query = args.query("query")?;
    let peer = args.id("peer_id")?;
    let session = args.id("session_id")?;
    let limit = args.integer("message_limit", 0, 100)?.filter(|limit| *limit != 0);
    let message_filters = args.object("message_filters")?;
    let top_k = args.integer("conclusion_top_k", 1, 100)?;
    let conclusion_filters = args.object("conclusion_filters")?;
    match peer {
        Some(peer) => drop(context.open_peer(&workspace, peer).await?),
        None => drop(context.open_workspace(&workspace).await?),
    }
    let mut body = json!({ "query": query });
    if let Some(filters) = message_filters {
        body["filters"] = Value::Object(filters.clone());
    }
    if let Some(limit) = limit {
        body["limit"] = limit.into();
    }
    let messages = async {
        let path = match (session, peer) {
            (Some(session), _) => {
                context.open_session(&workspace, session).await?;
                session_path(&workspace, session, "/search")
            }
            (None, Some(peer)) => peer_path(&workspace, peer, "/search"),
            (None, None) => workspace_path(&workspace, "/search"),
        };
        Ok::<_, Failure>(context.send(Call::post(path, body)).await?)
    };
    let conclusions = async {
        let Some(peer) = peer else {
            return Ok(Vec::new());
        };
        let mut filters = json!({ "observer_id": peer, "observed_id": peer });
        if let Some(extra) = conclusion_filters {
            if extra.keys().any(|key| SCOPED_FILTER_KEYS.contains(&key.as_str())) {
                return Ok(Vec::new());
            }
            for (key, value) in extra {
                filters[key] = value.clone();
            }
        }
        let body = json!({ "query": query, "top_k": top_k.unwrap_or(10), "filters": filters });
        match context
            .json(Call::post(workspace_path(&workspace, "/conclusions/query"), body))
            .await
        {
            Ok(found) => Ok(found
                .as_array()
                .map(|found| {
                    found
                        .iter()
                        .map(|c| pick(c, &["id", "content", "level", "created_at"]))
                        .collect()
                })
                .unwrap_or_default()),
            Err(Failure::Api(error)) if conclusion_filters.is_some() && matches!(error.status, 400 | 422) => {
                Err(Failure::Api(error))
            }
            Err(error) => {
                tracing::debug!(?error, "conclusion search failed; answering with messages alone");
                Ok(Vec::new())
            }
        }
    };
    let (reply, conclusions) = futures::try_join!(messages, conclusions)?;
    let messages: Vec<Value> = reply
        .body
        .as_ref()
        .and_then(Value::as_array)
        .map(|found| found.iter().map(message).collect())
        .unwrap_or_default();
    let mut result = json!({ "messages": messages, "conclusions": conclusions });
    // Never a silently worse answer: roncho's addition to Honcho's shape,
    // present only when the search ran without meaning (no embedder, or it failed).
    if let Some(reason) = reply.degraded {
        result["degraded"] = reason.into();
    }
    Ok(Output::Json(result))
}

/// Which resource a metadata tool reads or writes: session over peer over
/// workspace. Returns its path and the get-or-create's reply.
async fn metadata_target(
    context: Context<'_>,
    args: &Args<'_>,
    workspace: &str,
) -> Result<(&'static str, String, Value)> {
    if let Some(session) = args.id("session_id")? {
        let found = context.open_session(workspace, session).await?;
        return Ok((
            "Session",
            session_path(workspace, session, ""),
            found.unwrap_or(Value::Null),
        ));
    }
    if let Some(peer) = args.id("peer_id")? {
        let found = context.open_peer(workspace, peer).await?;
        return Ok(("Peer", peer_path(workspace, peer, ""), found.unwrap_or(Value::Null)));
    }
    let found = context.open_workspace(workspace).await?;
    Ok(("Workspace", workspace_path(workspace, ""), found.unwrap_or(Value::Null)))
}

async fn get_metadata(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let (_, _, found) = metadata_target(context, args, &workspace).await?;
    if found.is_null() {
        return Err(Failure::Failed(
            "Permission denied: metadata is read by getting or creating the resource, which this key may not do"
                .to_owned(),
        ));
    }
    Ok(Output::Json(if found["metadata"].is_null() {
        json!({})
    } else {
        found["metadata"].clone()
    }))
}

async fn set_metadata(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let metadata = args
        .object("metadata")?
        .ok_or_else(|| args.invalid("`metadata` is required".to_owned()))?;
    let (what, path, _) = metadata_target(context, args, &workspace).await?;
    let call = Call::new(Method::PUT, path).body(json!({ "metadata": metadata }));
    context.send(call).await?;
    Ok(Output::Text(format!("{what} metadata set successfully")))
}

// ---- peer tools ----

async fn create_peer(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, "peer_id")?;
    let mut body = json!({ "id": peer });
    if let Some(configuration) = args.object("configuration")? {
        let mut sent = Map::new();
        if let Some(observe) = configuration.get("observeMe") {
            if !observe.is_null() && !observe.is_boolean() {
                return Err(args.invalid(format!(
                    "`configuration.observeMe`: expected a boolean, received {}",
                    kind(observe)
                )));
            }
            sent.insert("observe_me".to_owned(), observe.clone());
        }
        body["configuration"] = Value::Object(sent);
    }
    context.open_workspace(&workspace).await?;
    let found = context
        .json(Call::post(workspace_path(&workspace, "/peers"), body))
        .await?;
    let mut reply = json!({ "peer_id": found["id"] });
    if let Value::Object(configuration) = &found["configuration"] {
        reply["configuration"] = match configuration.get("observe_me") {
            Some(observe) => json!({ "observeMe": observe }),
            None => json!({}),
        };
    }
    Ok(Output::Json(reply))
}

async fn list_peers(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    context.open_workspace(&workspace).await?;
    let reply = context
        .json(Call::post(workspace_path(&workspace, "/peers/list"), json!({})))
        .await?;
    Ok(Output::Json(page(&reply, "peers", ids)))
}

const REASONING_LEVELS: [&str; 5] = ["minimal", "low", "medium", "high", "max"];

/// `chat`, and the memory profile's `ask`.
async fn chat(context: Context<'_>, args: &Args<'_>, peer_field: &str) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, peer_field)?;
    let query = args.query("query")?;
    let mut body = json!({ "query": query, "stream": false });
    if let Some(target) = args.id("target_peer_id")? {
        body["target"] = target.into();
    }
    if let Some(session) = args.id("session_id")? {
        body["session_id"] = session.into();
    }
    if let Some(level) = args.string("reasoning_level")? {
        if !REASONING_LEVELS.contains(&level) {
            return Err(args.invalid(format!(
                "`reasoning_level`: expected one of {}, received `{level}`",
                REASONING_LEVELS.join(", ")
            )));
        }
        body["reasoning_level"] = level.into();
    }
    context.open_peer(&workspace, &peer).await?;
    let reply = context
        .json(Call::post(peer_path(&workspace, &peer, "/chat"), body))
        .await?;
    Ok(Output::Text(text_or(&reply["content"], "None")))
}

async fn get_peer_card(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, "peer_id")?;
    let target = args.id("target_peer_id")?;
    context.open_peer(&workspace, &peer).await?;
    let reply = context
        .json(Call::get(peer_path(&workspace, &peer, "/card")).query("target", target))
        .await?;
    Ok(match &reply["peer_card"] {
        Value::Null => Output::Text("No peer card found.".to_owned()),
        card => Output::Json(card.clone()),
    })
}

async fn set_peer_card(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, "peer_id")?;
    let target = args.id("target_peer_id")?;
    let card = args.array("peer_card")?;
    if let Some(item) = card.iter().find(|item| !item.is_string()) {
        return Err(args.invalid(format!("`peer_card`: expected strings, received {}", kind(item))));
    }
    context.open_peer(&workspace, &peer).await?;
    let call = Call::new(Method::PUT, peer_path(&workspace, &peer, "/card"))
        .query("target", target)
        .body(json!({ "peer_card": card }));
    let reply = context.json(call).await?;
    Ok(match &reply["peer_card"] {
        Value::Null => Output::Text("Peer card set successfully".to_owned()),
        card => Output::Json(card.clone()),
    })
}

async fn get_peer_context(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, "peer_id")?;
    let target = args.id("target_peer_id")?;
    let search_query = args.string("search_query")?;
    let max_conclusions = args.integer("max_conclusions", 1, 100)?;
    context.open_peer(&workspace, &peer).await?;
    let call = Call::get(peer_path(&workspace, &peer, "/context"))
        .query("target", target)
        .query("search_query", search_query)
        .query("max_conclusions", max_conclusions);
    let reply = context.json(call).await?;
    Ok(Output::Json(pick(
        &reply,
        &["peer_id", "target_id", "representation", "peer_card"],
    )))
}

async fn get_representation(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, "peer_id")?;
    let mut body = json!({});
    if let Some(session) = args.id("session_id")? {
        body["session_id"] = session.into();
    }
    if let Some(target) = args.id("target_peer_id")? {
        body["target"] = target.into();
    }
    if let Some(query) = args.string("search_query")? {
        body["search_query"] = query.into();
    }
    if let Some(max) = args.integer("max_conclusions", 1, 100)? {
        body["max_conclusions"] = max.into();
    }
    context.open_peer(&workspace, &peer).await?;
    let reply = context
        .json(Call::post(peer_path(&workspace, &peer, "/representation"), body))
        .await?;
    Ok(Output::Text(
        reply["representation"].as_str().unwrap_or_default().to_owned(),
    ))
}

// ---- session tools ----

async fn create_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    context.open_workspace(&workspace).await?;
    let reply = context
        .json(Call::post(
            workspace_path(&workspace, "/sessions"),
            json!({ "id": session }),
        ))
        .await?;
    Ok(Output::Json(json!({ "session_id": reply["id"] })))
}

async fn list_sessions(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    context.open_workspace(&workspace).await?;
    let reply = context
        .json(Call::post(workspace_path(&workspace, "/sessions/list"), json!({})))
        .await?;
    Ok(Output::Json(page(&reply, "sessions", ids)))
}

async fn delete_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    context.open_session(&workspace, &session).await?;
    context
        .send(Call::new(Method::DELETE, session_path(&workspace, &session, "")))
        .await?;
    Ok(Output::Text("Session deleted successfully".to_owned()))
}

async fn clone_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let message = args.string("message_id")?;
    context.open_session(&workspace, &session).await?;
    let call = Call::new(Method::POST, session_path(&workspace, &session, "/clone")).query("message_id", message);
    let reply = context.json(call).await?;
    Ok(Output::Json(json!({ "session_id": reply["id"] })))
}

async fn add_peers_to_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let mut peers = Map::new();
    for item in args.array("peers")? {
        let (peer, configuration) = match item {
            Value::String(peer) => (peer.as_str(), Map::new()),
            Value::Object(entry) => {
                let Some(Value::String(peer)) = entry.get("peer_id") else {
                    return Err(args.invalid("`peers[].peer_id` is required".to_owned()));
                };
                let configuration = ["observe_me", "observe_others"]
                    .into_iter()
                    .filter_map(|key| entry.get(key).map(|value| (key.to_owned(), value.clone())))
                    .collect();
                (peer.as_str(), configuration)
            }
            other => {
                return Err(args.invalid(format!(
                    "`peers[]`: expected a string or an object, received {}",
                    kind(other)
                )));
            }
        };
        if !valid_id(peer) {
            return Err(Failure::Failed(format!(
                "peer id `{peer}` must be 1 to 512 letters, digits, `_` or `-`"
            )));
        }
        peers.insert(peer.to_owned(), Value::Object(configuration));
    }
    context.open_session(&workspace, &session).await?;
    context
        .send(Call::post(
            session_path(&workspace, &session, "/peers"),
            Value::Object(peers),
        ))
        .await?;
    Ok(Output::Text("Peers added to session successfully".to_owned()))
}

async fn remove_peers_from_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let peers = args.array("peer_ids")?;
    for peer in peers {
        match peer.as_str() {
            Some(peer) if valid_id(peer) => {}
            _ => {
                return Err(Failure::Failed(format!(
                    "peer id {peer} must be 1 to 512 letters, digits, `_` or `-`"
                )));
            }
        }
    }
    context.open_session(&workspace, &session).await?;
    let call =
        Call::new(Method::DELETE, session_path(&workspace, &session, "/peers")).body(Value::Array(peers.clone()));
    context.send(call).await?;
    Ok(Output::Text("Peers removed from session successfully".to_owned()))
}

async fn get_session_peers(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    context.open_session(&workspace, &session).await?;
    let reply = context
        .json(Call::get(session_path(&workspace, &session, "/peers")))
        .await?;
    Ok(Output::Json(
        items(&reply).iter().map(|peer| peer["id"].clone()).collect(),
    ))
}

async fn inspect_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    context.open_session(&workspace, &session).await?;
    let (peers, messages, summaries) = futures::try_join!(
        context.json(Call::get(session_path(&workspace, &session, "/peers"))),
        context.json(Call::post(
            session_path(&workspace, &session, "/messages/list"),
            json!({})
        )),
        context.json(Call::get(session_path(&workspace, &session, "/summaries"))),
    )?;
    Ok(Output::Json(json!({
        "session_id": session,
        "peers": items(&peers).iter().map(ids).collect::<Vec<_>>(),
        "message_count": messages["total"],
        "summaries": {
            "session_id": session,
            "short_summary": summaries["short_summary"],
            "long_summary": summaries["long_summary"],
        },
    })))
}

/// Writes the `messages` argument to the session `session_field` names:
/// the session and each author got or created first, as Honcho's SDK
/// does. Returns the messages as written.
async fn add_messages(context: Context<'_>, args: &Args<'_>, session_field: &str) -> Result<Vec<Value>> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, session_field)?;
    let mut messages = Vec::new();
    let mut authors: Vec<String> = Vec::new();
    for item in args.array("messages")? {
        let Value::Object(entry) = item else {
            return Err(args.invalid(format!("`messages[]`: expected an object, received {}", kind(item))));
        };
        let peer = match entry.get("peer_id") {
            Some(Value::String(peer)) => peer.clone(),
            None | Some(Value::Null) => context
                .defaults
                .peer
                .clone()
                .ok_or_else(|| args.invalid("`messages[].peer_id` is required".to_owned()))?,
            Some(other) => {
                return Err(args.invalid(format!(
                    "`messages[].peer_id`: expected a string, received {}",
                    kind(other)
                )));
            }
        };
        if !valid_id(&peer) {
            return Err(Failure::Failed(format!(
                "peer id `{peer}` must be 1 to 512 letters, digits, `_` or `-`"
            )));
        }
        let Some(Value::String(content)) = entry.get("content") else {
            return Err(args.invalid("`messages[].content` is required and must be a string".to_owned()));
        };
        if !content.is_empty() && content.trim().is_empty() {
            return Err(Failure::Failed(
                "message content must be empty or say something".to_owned(),
            ));
        }
        let mut message = json!({ "peer_id": peer, "content": content });
        if let Some(metadata) = entry.get("metadata").filter(|metadata| !metadata.is_null()) {
            message["metadata"] = metadata.clone();
        }
        if !authors.contains(&peer) {
            authors.push(peer);
        }
        messages.push(message);
    }
    context.open_session(&workspace, &session).await?;
    for peer in &authors {
        context.open(workspace_path(&workspace, "/peers"), peer).await?;
    }
    let reply = context
        .json(Call::post(
            session_path(&workspace, &session, "/messages"),
            json!({ "messages": messages }),
        ))
        .await?;
    Ok(reply.as_array().cloned().unwrap_or_default())
}

async fn get_session_messages(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let body = match args.object("filters")? {
        Some(filters) => json!({ "filters": filters }),
        None => json!({}),
    };
    context.open_session(&workspace, &session).await?;
    let reply = context
        .json(Call::post(session_path(&workspace, &session, "/messages/list"), body))
        .await?;
    Ok(Output::Json(page(&reply, "messages", message)))
}

async fn get_session_message(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let id = args.required("message_id")?;
    context.open_session(&workspace, &session).await?;
    let reply = context
        .json(Call::get(session_path(
            &workspace,
            &session,
            &format!("/messages/{}", segment(id)),
        )))
        .await?;
    Ok(Output::Json(message(&reply)))
}

async fn get_session_context(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let summary = args.boolean("summary")?;
    let tokens = args.integer("tokens", i64::MIN, i64::MAX)?;
    context.open_session(&workspace, &session).await?;
    let call = Call::get(session_path(&workspace, &session, "/context"))
        .query("summary", summary)
        .query("tokens", tokens);
    let reply = context.json(call).await?;
    let messages: Vec<Value> = reply["messages"]
        .as_array()
        .map(|found| found.iter().map(message).collect())
        .unwrap_or_default();
    Ok(Output::Json(json!({
        "session_id": session,
        "summary": camel(&reply["summary"]),
        "messages": messages,
    })))
}

// ---- conclusion tools ----

/// The observer (`peer_id`) and the observed (`target_peer_id`, else the
/// observer), the observer got or created.
async fn pair(context: Context<'_>, args: &Args<'_>, workspace: &str) -> Result<(String, String)> {
    let observer = context.peer(args, "peer_id")?;
    let observed = args
        .id("target_peer_id")?
        .map_or_else(|| observer.clone(), str::to_owned);
    context.open_peer(workspace, &observer).await?;
    Ok((observer, observed))
}

async fn list_conclusions(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let (observer, observed) = pair(context, args, &workspace).await?;
    let call = Call::post(
        workspace_path(&workspace, "/conclusions/list"),
        json!({ "filters": { "observer_id": observer, "observed_id": observed } }),
    )
    .query("page", Some(1))
    .query("size", Some(50));
    let reply = context.json(call).await?;
    Ok(Output::Json(page(&reply, "conclusions", |conclusion| {
        pick(
            conclusion,
            &[
                "id",
                "content",
                "observer_id",
                "observed_id",
                "session_id",
                "created_at",
            ],
        )
    })))
}

async fn query_conclusions(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let query = args.required("query")?;
    let top_k = args.integer("top_k", 1, 100)?.unwrap_or(10);
    let extra = args.object("filters")?;
    if let Some(key) = extra.and_then(|extra| extra.keys().find(|key| SCOPED_FILTER_KEYS.contains(&key.as_str()))) {
        return Err(Failure::Failed(format!(
            "filters may not set `{key}`: peer_id and target_peer_id choose the observer and the observed"
        )));
    }
    let (observer, observed) = pair(context, args, &workspace).await?;
    let mut filters = json!({ "observer_id": observer, "observed_id": observed });
    for (key, value) in extra.into_iter().flatten() {
        filters[key] = value.clone();
    }
    let reply = context
        .json(Call::post(
            workspace_path(&workspace, "/conclusions/query"),
            json!({ "query": query, "top_k": top_k, "filters": filters }),
        ))
        .await?;
    let found: Vec<Value> = reply
        .as_array()
        .map(|found| {
            found
                .iter()
                .map(|c| {
                    pick(
                        c,
                        &[
                            "id",
                            "content",
                            "level",
                            "observer_id",
                            "observed_id",
                            "session_id",
                            "created_at",
                        ],
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Output::Json(Value::Array(found)))
}

async fn create_conclusions(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let observer = context.peer(args, "peer_id")?;
    let observed = args
        .id("target_peer_id")?
        .ok_or_else(|| args.invalid("`target_peer_id` is required".to_owned()))?;
    let session = args.id("session_id")?;
    let contents = args.array("conclusions")?;
    let mut conclusions = Vec::with_capacity(contents.len());
    for content in contents {
        let Some(content) = content.as_str() else {
            return Err(args.invalid(format!(
                "`conclusions[]`: expected a string, received {}",
                kind(content)
            )));
        };
        conclusions.push(json!({
            "content": content,
            "session_id": session,
            "observer_id": observer,
            "observed_id": observed,
        }));
    }
    context.open_peer(&workspace, &observer).await?;
    context
        .send(Call::post(
            workspace_path(&workspace, "/conclusions"),
            json!({ "conclusions": conclusions }),
        ))
        .await?;
    let count = contents.len();
    let noun = if count == 1 { "conclusion" } else { "conclusions" };
    Ok(Output::Text(format!("Created {count} {noun} successfully")))
}

async fn delete_conclusion(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let observer = context.peer(args, "peer_id")?;
    args.id("target_peer_id")?
        .ok_or_else(|| args.invalid("`target_peer_id` is required".to_owned()))?;
    let id = args.required("conclusion_id")?;
    context.open_peer(&workspace, &observer).await?;
    context
        .send(Call::new(
            Method::DELETE,
            workspace_path(&workspace, &format!("/conclusions/{}", segment(id))),
        ))
        .await?;
    Ok(Output::Text("Conclusion deleted successfully".to_owned()))
}

// ---- system tools ----

async fn schedule_dream(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let observer = context.peer(args, "peer_id")?;
    let observed = args
        .id("target_peer_id")?
        .map_or_else(|| observer.clone(), str::to_owned);
    let mut body = json!({ "observer": observer, "observed": observed, "dream_type": "omni" });
    if let Some(session) = args.id("session_id")? {
        body["session_id"] = session.into();
    }
    context.open_workspace(&workspace).await?;
    context
        .send(Call::post(workspace_path(&workspace, "/schedule_dream"), body))
        .await?;
    Ok(Output::Text("Dream scheduled successfully".to_owned()))
}

async fn get_queue_status(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    context.open_workspace(&workspace).await?;
    let reply = context
        .json(Call::get(workspace_path(&workspace, "/queue/status")))
        .await?;
    let counts = |value: &Value| {
        let mut out = Map::new();
        for key in [
            "session_id",
            "total_work_units",
            "completed_work_units",
            "in_progress_work_units",
            "pending_work_units",
        ] {
            if let Some(found) = value.get(key) {
                out.insert(camel_key(key), found.clone());
            }
        }
        out
    };
    let mut status = counts(&reply);
    if let Some(sessions) = reply["sessions"].as_object() {
        let sessions = sessions
            .iter()
            .map(|(key, session)| (key.clone(), Value::Object(counts(session))))
            .collect();
        status.insert("sessions".to_owned(), Value::Object(sessions));
    }
    Ok(Output::Json(Value::Object(status)))
}

// ---- the memory profile ----

/// Default session of `remember` when none is configured.
pub const MEMORY_SESSION: &str = "memory";

async fn remember(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let defaults = Defaults {
        session: context
            .defaults
            .session
            .clone()
            .or_else(|| Some(MEMORY_SESSION.to_owned())),
        ..context.defaults.clone()
    };
    let context = Context {
        defaults: &defaults,
        ..context
    };
    let written = add_messages(context, args, "session_id").await?;
    Ok(Output::Json(json!({
        "session_id": context.session(args, "session_id")?,
        "message_ids": written.iter().map(|message| message["id"].clone()).collect::<Vec<_>>(),
    })))
}

/// Budget of `recall` when none is given, in tokens.
const RECALL_TOKENS: i64 = 1_500;

async fn recall(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let query = args.query("query")?;
    let peer = match args.id("peer_id")? {
        Some(peer) => Some(peer.to_owned()),
        None => context.defaults.peer.clone(),
    };
    let session = args.id("session_id")?;
    let budget = args.integer("max_tokens", 50, 100_000)?.unwrap_or(RECALL_TOKENS);
    let search = |path: String| async move {
        Ok::<_, Failure>(
            context
                .send(Call::post(path, json!({ "query": query, "limit": 20 })))
                .await?,
        )
    };
    let messages = async {
        match session {
            Some(session) => search(session_path(&workspace, session, "/search")).await,
            None => match (search(workspace_path(&workspace, "/search")).await, &peer) {
                // A peer key searches what its peer wrote (the edge refuses it
                // the workspace with Honcho's 401 and the reason).
                (Err(Failure::Api(error)), Some(peer)) if matches!(error.status, 401 | 403) => {
                    search(peer_path(&workspace, peer, "/search")).await
                }
                (found, _) => found,
            },
        }
    };
    let about = async {
        let Some(peer) = &peer else { return Ok(Value::Null) };
        let call = Call::get(peer_path(&workspace, peer, "/context"))
            .query("search_query", Some(query))
            .query("max_conclusions", Some(25));
        match context.json(call).await {
            // A peer not seen yet has nothing to tell.
            Err(Failure::Api(error)) if error.status == 404 => Ok(Value::Null),
            other => other,
        }
    };
    let (messages, about) = futures::try_join!(messages, about)?;
    let mut text = Recollection::new(budget);
    if let Some(card) = about["peer_card"].as_array().filter(|card| !card.is_empty()) {
        text.heading(&format!("Peer card of {}", peer.as_deref().unwrap_or_default()));
        for fact in card {
            text.line(&format!("- {}", fact.as_str().unwrap_or_default()));
        }
    }
    if let Some(representation) = about["representation"].as_str().filter(|text| !text.trim().is_empty()) {
        text.heading(&format!("What is known about {}", peer.as_deref().unwrap_or_default()));
        for line in representation.lines() {
            text.line(line);
        }
    }
    let found = messages
        .body
        .as_ref()
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    text.heading("Messages that match");
    if let Some(reason) = &messages.degraded {
        text.line(&format!("(matched by words only: {reason})"));
    }
    if found.is_empty() {
        text.line("(none)");
    }
    for message in found {
        text.line(&format!(
            "- [{}] {} in {} (message {}): {}",
            message["created_at"].as_str().unwrap_or_default(),
            message["peer_id"].as_str().unwrap_or_default(),
            message["session_id"].as_str().unwrap_or_default(),
            message["id"].as_str().unwrap_or_default(),
            message["content"].as_str().unwrap_or_default(),
        ));
    }
    Ok(Output::Text(text.finish()))
}

/// Text under a token budget: lines are added while they fit; what does
/// not fit is counted at the end.
struct Recollection {
    text: String,
    left: i64,
    dropped: usize,
}

impl Recollection {
    fn new(budget: i64) -> Self {
        Self {
            text: String::new(),
            left: budget,
            dropped: 0,
        }
    }

    fn heading(&mut self, title: &str) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.push(&format!("## {title}"));
    }

    fn line(&mut self, line: &str) {
        self.push(line);
    }

    fn push(&mut self, line: &str) {
        let cost = roncho_core::tokens::count(line) + 1;
        if cost > self.left {
            self.dropped += 1;
            return;
        }
        self.left -= cost;
        self.text.push_str(line);
        self.text.push('\n');
    }

    fn finish(mut self) -> String {
        if self.dropped > 0 {
            self.text.push_str(&format!(
                "\n({} more lines left out to stay within max_tokens)\n",
                self.dropped
            ));
        }
        self.text
    }
}

async fn forget(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let message = args.string("message_id")?;
    let session = args.id("session_id")?;
    let conclusion = args.string("conclusion_id")?;
    let receipt = match (message, session, conclusion) {
        (Some(message), _, None) => {
            let session = context.session(args, "session_id")?;
            let path = session_path(&workspace, &session, &format!("/messages/{}", segment(message)));
            context.json(Call::new(Method::DELETE, path)).await?
        }
        (None, Some(session), None) => {
            let reply = context
                .send(Call::new(Method::DELETE, session_path(&workspace, session, "")))
                .await?;
            let Some(receipt) = reply.receipt else {
                return Ok(Output::Json(
                    json!({ "erased": { "kind": "session", "session_id": session } }),
                ));
            };
            context
                .json(Call::get(workspace_path(
                    &workspace,
                    &format!("/erasures/{}", segment(&receipt)),
                )))
                .await?
        }
        (None, None, Some(conclusion)) => {
            let path = workspace_path(&workspace, &format!("/conclusions/{}", segment(conclusion)));
            context.send(Call::new(Method::DELETE, path)).await?;
            json!({ "erased": { "kind": "conclusion", "conclusion_id": conclusion } })
        }
        _ => {
            return Err(args.invalid(
                "name one thing to forget: message_id (with session_id), session_id alone, or conclusion_id".to_owned(),
            ));
        }
    };
    Ok(Output::Json(receipt))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let schema = crate::schema::input_schema(tool.name, &defaults);
            assert_eq!(schema["type"], "object", "{}", tool.name);
        }
        assert_eq!(HONCHO_TOOLS.len(), 31);
    }
}
