//! The dialectic agent: answers a question about a peer from what the
//! observer knows. With a model: preflight (peer cards, explicit and derived
//! observations prefetched separately, recent session history), then the
//! tool loop of the level, then the answer (and, with a response format,
//! the answer as validated JSON). Without one: an extractive answer that
//! quotes the best observations and messages with their ids.

use std::sync::Arc;
use std::time::Duration;

use roncho_agent::ToolContext;
use roncho_agent::executor::{message_line, observation_line};
use roncho_agent::tools;
use roncho_core::llm::{self, ChatMessage, ChatRequest, JsonSchema, Llm, Role, StreamEvent};
use roncho_core::{Error, Result};
use serde_json::Value;

/// Honcho's reasoning levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    Minimal,
    Low,
    Medium,
    High,
    Max,
}

impl Level {
    pub const ALL: [Level; 5] = [Level::Minimal, Level::Low, Level::Medium, Level::High, Level::Max];

    /// Parses the request's level; empty means `low`, Honcho's default.
    pub fn parse(text: &str) -> Result<Level> {
        match text {
            "" | "low" => Ok(Level::Low),
            "minimal" => Ok(Level::Minimal),
            "medium" => Ok(Level::Medium),
            "high" => Ok(Level::High),
            "max" => Ok(Level::Max),
            other => Err(Error::invalid(
                "reasoning_level",
                format!("`{other}` is not one of minimal, low, medium, high, max"),
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Minimal => "minimal",
            Level::Low => "low",
            Level::Medium => "medium",
            Level::High => "high",
            Level::Max => "max",
        }
    }

    /// Model calls with tools before the answer is asked for (Honcho's
    /// `MAX_TOOL_ITERATIONS`; tool choice is `auto` at every level).
    pub fn max_tool_iterations(self) -> usize {
        match self {
            Level::Minimal => 1,
            Level::Low => 5,
            Level::Medium => 2,
            Level::High => 4,
            Level::Max => 10,
        }
    }

    /// The tools the model may call.
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            Level::Minimal => tools::DIALECTIC_TOOLS_MINIMAL,
            _ => tools::DIALECTIC_TOOLS,
        }
    }

    /// Observations prefetched per kind (explicit, derived).
    pub fn prefetch(self) -> i64 {
        match self {
            Level::Minimal => 10,
            _ => 25,
        }
    }

    /// How long an answer may take before `DEADLINE_EXCEEDED`.
    pub fn default_deadline(self) -> Duration {
        Duration::from_secs(match self {
            Level::Minimal => 30,
            Level::Low => 60,
            Level::Medium => 90,
            Level::High => 120,
            Level::Max => 180,
        })
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A level's model and reply budget.
#[derive(Clone)]
pub struct LevelModel {
    pub llm: Arc<dyn Llm>,
    pub max_tokens: u32,
}

/// A validated question.
#[derive(Debug, Clone)]
pub struct Ask {
    pub workspace: String,
    pub observer: String,
    pub target: String,
    pub query: String,
    pub session: Option<String>,
    pub allowed_sessions: Option<Vec<String>>,
    pub level: Level,
    pub response_format: Option<Value>,
    /// Every peer's memory (workspace chat): `observer` and `target` are empty.
    pub whole_workspace: bool,
    /// The configuration's custom instructions for the dialectic.
    pub instructions: Option<String>,
}

/// Tools that read across the whole workspace (the others follow one
/// collection's reasoning).
const WORKSPACE_TOOLS: &[&str] = &[
    "search_memory",
    "search_messages",
    "grep_messages",
    "get_messages_by_date_range",
    "search_messages_temporal",
];

impl Ask {
    /// The tools the model may call for this question.
    pub fn tools(&self) -> Vec<&'static str> {
        self.level
            .tools()
            .iter()
            .copied()
            .filter(|tool| !self.whole_workspace || WORKSPACE_TOOLS.contains(tool))
            .collect()
    }

    /// Whose memory answers, in words.
    fn whose(&self) -> String {
        if self.whole_workspace {
            "the workspace's memory".to_owned()
        } else if self.observer == self.target {
            format!("{}'s memory", self.target)
        } else {
            format!("{}'s memory of {}", self.observer, self.target)
        }
    }
}

/// Tokens of recent session history put before the question.
const SESSION_HISTORY_TOKENS: i64 = 4_096;
/// Tokens the whole prefetch (cards, observations, history) may take: the
/// cards at most a quarter, cards and observations at most half, the
/// history the rest. Cards of 40 long lines and 50 long observations
/// would otherwise fill a small model's window before its first tool call.
pub const PREFETCH_TOKENS: i64 = 8_192;
/// Observations and messages quoted by an extractive answer.
const EXTRACTIVE_OBSERVATIONS: i64 = 5;
const EXTRACTIVE_MESSAGES: i64 = 3;

/// Where the pieces of the final answer go (streaming); `None`: nowhere.
pub type Sink<'a> = Option<&'a (dyn Fn(String) + Send + Sync)>;

/// Answers with the model: `None` when no answer could be produced (a
/// response format the model's JSON does not satisfy).
pub async fn answer_with_model(
    tools: &ToolContext,
    ask: &Ask,
    model: &LevelModel,
    sink: Sink<'_>,
) -> Result<Option<String>> {
    let preflight = preflight(tools, ask).await?;
    let mut request = ChatRequest {
        messages: vec![
            ChatMessage::new(
                Role::System,
                roncho_core::derivation::with_instructions(system_prompt(ask), ask.instructions.as_deref()),
            ),
            ChatMessage::new(Role::User, format!("{preflight}\n\nQuestion: {}", ask.query)),
        ],
        max_tokens: model.max_tokens,
        temperature: Some(0.2),
        tools: tools::definitions(&ask.tools()),
        ..ChatRequest::default()
    };
    let allowed = ask.tools();
    let mut text = None;
    for _ in 0..ask.level.max_tool_iterations() {
        let reply = model.llm.chat(&request).await?;
        tools.note_model_call(model_call(&request, reply.usage, reply.tool_calls.len()));
        if reply.tool_calls.is_empty() {
            text = Some(reply.content);
            break;
        }
        request.messages.push(ChatMessage::assistant_tool_calls(
            reply.content.clone(),
            reply.tool_calls.clone(),
        ));
        for call in &reply.tool_calls {
            let result = if allowed.contains(&call.name.as_str()) {
                tools.execute(&call.name, &call.arguments).await?
            } else {
                format!("error: the tool `{}` is not available here", call.name)
            };
            tracing::debug!(tool = %call.name, chars = result.len(), "dialectic tool call");
            request.messages.push(ChatMessage::tool_result(call, result));
        }
    }
    // Out of tool iterations: the answer from what was found, no more tools.
    let streamed_final = text.is_none();
    let text = match text {
        Some(text) => text,
        None => {
            request.tools.clear();
            request.messages.push(ChatMessage::new(
                Role::User,
                "Answer the question now from what you have found; do not call tools.",
            ));
            let (text, usage) = match (sink, &ask.response_format) {
                (Some(sink), None) => stream_reply(model.llm.as_ref(), &request, sink).await?,
                _ => {
                    let reply = model.llm.chat(&request).await?;
                    (reply.content, reply.usage)
                }
            };
            tools.note_model_call(model_call(&request, usage, 0));
            text
        }
    };
    if text.trim().is_empty() {
        tracing::warn!(model = %model.llm.model_id(), level = ask.level.name(), "the model's answer is empty; answering null");
        return Ok(None);
    }
    let Some(format) = &ask.response_format else {
        if let Some(sink) = sink
            && !streamed_final
        {
            send_in_pieces(&text, sink);
        }
        return Ok(Some(text));
    };
    let json = structured(tools, model, ask, &text, format).await?;
    if let (Some(sink), Some(json)) = (sink, &json) {
        sink(json.clone());
    }
    Ok(json)
}

/// A model call by size, for the answer's trace: never the prompt's text.
fn model_call(request: &ChatRequest, usage: roncho_core::llm::Usage, tool_calls: usize) -> roncho_agent::ModelCall {
    roncho_agent::ModelCall {
        messages: request.messages.len(),
        prompt_chars: request
            .messages
            .iter()
            .map(|message| message.content.chars().count())
            .sum(),
        tools_offered: request.tools.len(),
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        tool_calls,
    }
}

/// Streams a reply's text to `sink` as it comes and returns all of it,
/// with what the call consumed.
async fn stream_reply(
    llm: &dyn Llm,
    request: &ChatRequest,
    sink: &(dyn Fn(String) + Send + Sync),
) -> Result<(String, roncho_core::llm::Usage)> {
    use futures::StreamExt;
    let mut stream = llm.chat_stream(request).await?;
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::Text(piece) => {
                text.push_str(&piece);
                sink(piece);
            }
            StreamEvent::ToolCall(_) => {}
            StreamEvent::Done { usage, .. } => return Ok((text, usage)),
        }
    }
    Err(Error::Unavailable(format!(
        "{}: the answer's stream ended early",
        llm.model_id()
    )))
}

/// Sends a finished answer as a stream of word-sized pieces, in order.
fn send_in_pieces(text: &str, sink: &(dyn Fn(String) + Send + Sync)) {
    for piece in text.split_inclusive(' ') {
        sink(piece.to_owned());
    }
}

/// The answer as JSON following the response format, or `None` when the
/// model's JSON does not validate.
async fn structured(
    tools: &ToolContext,
    model: &LevelModel,
    ask: &Ask,
    answer: &str,
    format: &Value,
) -> Result<Option<String>> {
    let request = ChatRequest {
        messages: vec![
            ChatMessage::new(
                Role::System,
                "Restate the answer below as JSON that follows the given schema exactly. Use only what the \
                 answer says; where it does not say, use null if the schema allows it.",
            ),
            ChatMessage::new(Role::User, format!("Question: {}\n\nAnswer: {answer}", ask.query)),
        ],
        max_tokens: model.max_tokens,
        temperature: Some(0.0),
        json_schema: Some(JsonSchema {
            name: "answer".into(),
            schema: format.clone(),
        }),
        ..ChatRequest::default()
    };
    let sized = model_call(&request, roncho_core::llm::Usage::default(), 0);
    let value = match llm::chat_json::<Value>(model.llm.as_ref(), request).await {
        Ok((value, usage)) => {
            tools.note_model_call(roncho_agent::ModelCall {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                ..sized
            });
            value
        }
        Err(Error::Internal(reason)) => {
            tracing::warn!(%reason, "the model gave no JSON for the response format; answering null");
            return Ok(None);
        }
        Err(error) => return Err(error),
    };
    match crate::schema::validate(format, &value) {
        Ok(()) => Ok(Some(value.to_string())),
        Err(reason) => {
            tracing::warn!(%reason, "the model's JSON does not follow the response format; answering null");
            Ok(None)
        }
    }
}

fn system_prompt(ask: &Ask) -> String {
    if ask.whole_workspace {
        return "You answer questions about a whole workspace: every peer in it, what each is known to have \
                said and what was concluded about them, across all their conversations. The memory below was \
                prefetched for the question; use the tools to look further when it is not enough. Explicit \
                observations are facts stated in conversation; derived ones were reasoned from them. Answer \
                directly and concisely, name the peers you speak of, cite the observations and messages you \
                rely on by their ids as [id:...], and when memory does not hold the answer, say so plainly \
                instead of guessing."
            .to_owned();
    }
    let Ask { observer, target, .. } = ask;
    let whose = if observer == target {
        format!("{target}'s own memory of themself")
    } else {
        format!("what {observer} knows about {target}")
    };
    format!(
        "You answer questions about the peer `{target}` from {whose}: their observations and the \
         conversations {observer} took part in, nothing else. The memory below was prefetched for the \
         question; use the tools to look further when it is not enough. Explicit observations are facts \
         stated in conversation; derived ones (deductive, inductive) were reasoned from them. Answer \
         directly and concisely, cite the observations and messages you rely on by their ids as [id:...], \
         and when memory does not hold the answer, say so plainly instead of guessing."
    )
}

/// Peer cards, prefetched observations and recent history, as text, within
/// [`PREFETCH_TOKENS`]; what the budget leaves out is said, for the tools to find.
async fn preflight(tools: &ToolContext, ask: &Ask) -> Result<String> {
    let mut text = String::new();
    let mut budget = Budget::new(PREFETCH_TOKENS);
    let store = tools.store.as_ref();
    let mut cards = vec![(ask.observer.as_str(), ask.observer.as_str())];
    if ask.target != ask.observer {
        cards.push((ask.observer.as_str(), ask.target.as_str()));
    }
    if ask.whole_workspace {
        cards.clear();
    }
    let about = if ask.whole_workspace {
        "the workspace's peers".to_owned()
    } else {
        ask.target.clone()
    };
    for (observer, observed) in cards {
        if let Some(card) = roncho_search::context::peer_card(store, &ask.workspace, observer, observed).await?
            && !card.is_empty()
        {
            let title = if observer == observed {
                format!("{observer}'s card of themself")
            } else {
                format!("{observer}'s card of {observed}")
            };
            text.push_str(&format!("## {title}\n"));
            budget.push_lines(&mut text, card, PREFETCH_TOKENS / 4);
            text.push('\n');
        }
    }
    let prefetch = ask.level.prefetch();
    let explicit = tools
        .find_observations(&ask.query, prefetch, Some(&["explicit"]))
        .await?;
    // Under an allowlist only explicit observations are visible.
    let derived = if ask.allowed_sessions.is_none() {
        Some(
            tools
                .find_observations(&ask.query, prefetch, Some(&["deductive", "inductive", "contradiction"]))
                .await?,
        )
    } else {
        None
    };
    // Explicit and derived share the observations' half.
    let half = PREFETCH_TOKENS / 2;
    let explicit_limit = if derived.is_some() {
        budget.used + (half - budget.used) / 2
    } else {
        half
    };
    text.push_str(&format!("## Explicit observations about {about}\n"));
    budget.push_lines(&mut text, explicit.iter().map(observation_line), explicit_limit);
    if let Some(derived) = derived {
        text.push_str(&format!("\n## Derived observations about {about}\n"));
        budget.push_lines(&mut text, derived.iter().map(observation_line), half);
    }
    if let Some(session) = &ask.session {
        // Lines carry a time and a speaker beyond the stored counts.
        let history_budget = SESSION_HISTORY_TOKENS.min(budget.left() * 3 / 4);
        let history = store
            .context_messages(&ask.workspace, session, history_budget, 0)
            .await?;
        tools.read_messages(&history);
        text.push_str(&format!("\n## Recent messages of session {session}\n"));
        budget.push_lines(
            &mut text,
            history.iter().map(|m| message_line(m).trim_end().to_owned()),
            PREFETCH_TOKENS,
        );
    }
    Ok(text)
}

/// Tokens spent of the prefetch's budget.
struct Budget {
    total: i64,
    used: i64,
}

impl Budget {
    fn new(total: i64) -> Self {
        Self { total, used: 0 }
    }

    fn left(&self) -> i64 {
        self.total - self.used
    }

    /// Appends lines, in order, while the budget spent stays within `up_to`
    /// (and the total); says how many were left out, or `(none)`.
    fn push_lines(&mut self, text: &mut String, lines: impl IntoIterator<Item = String>, up_to: i64) {
        let limit = up_to.min(self.total);
        let (mut kept, mut left_out) = (0, 0);
        for line in lines {
            let cost = roncho_core::tokens::count(&line) + 1;
            if left_out == 0 && self.used + cost <= limit {
                self.used += cost;
                text.push_str(&line);
                text.push('\n');
                kept += 1;
            } else {
                left_out += 1;
            }
        }
        if left_out > 0 {
            text.push_str(&format!(
                "({left_out} more left out of the prefetch; the tools can find them)\n"
            ));
            self.used += 16;
        } else if kept == 0 {
            text.push_str("(none)\n");
        }
    }
}

/// The answer without a model: the most related observations and messages,
/// quoted with their ids (a response format, which only a model can fill,
/// is refused before).
pub async fn answer_extractively(tools: &ToolContext, ask: &Ask) -> Result<Option<String>> {
    let observations = tools
        .find_observations(&ask.query, EXTRACTIVE_OBSERVATIONS, None)
        .await?;
    let messages = tools.find_messages(&ask.query, EXTRACTIVE_MESSAGES, None, None).await?;
    let whose = ask.whose();
    if observations.is_empty() && messages.is_empty() {
        return Ok(Some(format!(
            "No LLM is configured, and nothing in {whose} is near the question."
        )));
    }
    // Nearest is not relevant, and the messages are those the observer
    // saw, whoever said them: said so, not passed off as an answer.
    let seen_by = match ask.whole_workspace {
        true => "its peers".to_owned(),
        false => ask.observer.clone(),
    };
    let mut text = format!(
        "No LLM is configured, so this is no answer: the observations in {whose} and the messages {seen_by} saw \
         that are nearest to the question.\n"
    );
    if !observations.is_empty() {
        text.push_str("\nObservations:\n");
        for observation in &observations {
            text.push_str(&format!("- {}\n", observation_line(observation)));
        }
    }
    if !messages.is_empty() {
        text.push_str("\nMessages:\n");
        for message in &messages {
            text.push_str(&format!("- {}", message_line(message)));
        }
    }
    Ok(Some(text.trim_end().to_owned()))
}
