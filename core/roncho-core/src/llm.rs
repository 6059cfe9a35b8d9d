//! The LLM port: one [`Llm`] trait beside the embedder's
//! ([`crate::embed::Embedder`]), chat requests with optional JSON-schema
//! structured output and tools, streamed replies ([`StreamEvent`]), token
//! usage, a [`FallbackChain`] across providers, [`chat_json`]: structured
//! output with a repair step that never turns a malformed reply into an
//! empty success, and [`run_tools`]: the tool-call / tool-result loop. The
//! providers' clients are adapters (`roncho-llm`).
//!
//! Errors: an unreachable or overloaded provider (after retries) is
//! `UNAVAILABLE` / `RESOURCE_EXHAUSTED`, which a fallback chain moves past;
//! a provider that rejects the request or the key is `FAILED_PRECONDITION`
//! with its reason; a reply that is not the JSON asked for, even after the
//! repair turn, is `INTERNAL` naming the parse error.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Stream;
use serde::de::DeserializeOwned;

use crate::{Error, Result};

/// Who says a chat message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Role {
    System,
    #[default]
    User,
    Assistant,
    /// The result of a tool call (`ChatMessage::tool_result`).
    Tool,
}

impl Role {
    /// The wire name shared by the providers.
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    /// An assistant turn's tool calls (to continue after them).
    pub tool_calls: Vec<ToolCall>,
    /// A tool result: the call it answers (id, and name for providers that key by name).
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            ..Self::default()
        }
    }

    /// The assistant turn that asked for `calls` (with any text it said).
    pub fn assistant_tool_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            tool_calls: calls,
            ..Self::default()
        }
    }

    /// The result of `call`, to send back.
    pub fn tool_result(call: &ToolCall, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: content.into(),
            tool_call_id: Some(call.id.clone()),
            tool_name: Some(call.name.clone()),
            ..Self::default()
        }
    }
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// A call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's id for the call (generated where a provider has none).
    pub id: String,
    pub name: String,
    /// The arguments object.
    pub arguments: serde_json::Value,
}

/// A JSON schema the reply must follow.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSchema {
    pub name: String,
    pub schema: serde_json::Value,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    /// Ask for structured output following this schema.
    pub json_schema: Option<JsonSchema>,
    /// Functions the model may call instead of answering.
    pub tools: Vec<Tool>,
}

/// Tokens a call consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatResponse {
    pub content: String,
    /// The model's reasoning, where the provider sends it apart
    /// (`reasoning_content` or `reasoning` of OpenAI-compatible servers);
    /// some local models answer there and leave `content` empty.
    pub reasoning: Option<String>,
    /// Calls the model asked for (answer them with [`ChatMessage::tool_result`]).
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// `stop`, `length`, `tool_calls`, ... as the provider says.
    pub finish_reason: Option<String>,
}

/// A piece of a streamed reply.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// More text.
    Text(String),
    /// A complete tool call (streamed arguments are assembled first).
    ToolCall(ToolCall),
    /// The end: usage and why it stopped.
    Done {
        usage: Usage,
        finish_reason: Option<String>,
    },
}

/// A streamed reply; an error mid-stream ends it.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent>> + Send>>;

/// A chat model behind some provider.
#[async_trait]
pub trait Llm: Send + Sync + 'static {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse>;

    /// Streams the reply. Providers without streaming answer in one piece.
    async fn chat_stream(&self, request: &ChatRequest) -> Result<EventStream> {
        let response = self.chat(request).await?;
        Ok(Box::pin(futures::stream::iter(events_of(response).into_iter().map(Ok))))
    }

    /// Provider and model, for logs and status (`openai-compatible/gpt-4o-mini`).
    fn model_id(&self) -> String;
}

/// The events a whole reply streams as.
fn events_of(response: ChatResponse) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    if !response.content.is_empty() {
        events.push(StreamEvent::Text(response.content));
    }
    events.extend(response.tool_calls.into_iter().map(StreamEvent::ToolCall));
    events.push(StreamEvent::Done {
        usage: response.usage,
        finish_reason: response.finish_reason,
    });
    events
}

/// Reads a stream to its end and returns the whole reply.
pub async fn collect(mut stream: EventStream) -> Result<ChatResponse> {
    use futures::StreamExt;
    let mut response = ChatResponse::default();
    while let Some(event) = stream.next().await {
        match event? {
            StreamEvent::Text(text) => response.content.push_str(&text),
            StreamEvent::ToolCall(call) => response.tool_calls.push(call),
            StreamEvent::Done { usage, finish_reason } => {
                response.usage = usage;
                response.finish_reason = finish_reason;
                return Ok(response);
            }
        }
    }
    Err(Error::Unavailable(
        "the model's stream ended before its final event".into(),
    ))
}

/// Runs the tool loop: asks `llm`, runs each tool call it makes through
/// `run` and sends the results back, until it answers without calls or
/// `max_turns` model calls were made (then the last reply is returned with
/// `finish_reason` `max_turns`). A tool error is sent to the model as the
/// result (`error: ...`), so it can recover; a model error ends the loop.
pub async fn run_tools<F, Fut>(
    llm: &dyn Llm,
    mut request: ChatRequest,
    max_turns: usize,
    mut run: F,
) -> Result<(ChatResponse, Vec<ChatMessage>)>
where
    F: FnMut(ToolCall) -> Fut + Send,
    Fut: std::future::Future<Output = Result<String>> + Send,
{
    let mut usage = Usage::default();
    for _ in 0..max_turns.max(1) {
        let mut response = llm.chat(&request).await?;
        usage += response.usage;
        if response.tool_calls.is_empty() {
            response.usage = usage;
            return Ok((response, request.messages));
        }
        request.messages.push(ChatMessage::assistant_tool_calls(
            response.content.clone(),
            response.tool_calls.clone(),
        ));
        for call in response.tool_calls.clone() {
            let result = match run(call.clone()).await {
                Ok(result) => result,
                Err(error) => format!("error: {error}"),
            };
            request.messages.push(ChatMessage::tool_result(&call, result));
        }
        if request.messages.len() > 10_000 {
            break;
        }
    }
    Ok((
        ChatResponse {
            finish_reason: Some("max_turns".into()),
            usage,
            ..ChatResponse::default()
        },
        request.messages,
    ))
}

/// Providers tried in order: the next one is asked when a provider is
/// unavailable or out of capacity; any other error is final.
pub struct FallbackChain {
    providers: Vec<Arc<dyn Llm>>,
}

impl FallbackChain {
    pub fn new(providers: Vec<Arc<dyn Llm>>) -> Self {
        Self { providers }
    }
}

#[async_trait]
impl Llm for FallbackChain {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let mut last = Error::FailedPrecondition("the LLM fallback chain is empty".into());
        for provider in &self.providers {
            match provider.chat(request).await {
                Ok(response) => return Ok(response),
                Err(error @ (Error::Unavailable(_) | Error::ResourceExhausted(_) | Error::Throttled { .. })) => {
                    tracing::warn!(model = %provider.model_id(), %error, "LLM provider failed; trying the next");
                    last = error;
                }
                Err(error) => return Err(error),
            }
        }
        Err(last)
    }

    /// Falls back only while starting a stream; once events flow, an error
    /// ends the stream (its text may already have been shown).
    async fn chat_stream(&self, request: &ChatRequest) -> Result<EventStream> {
        let mut last = Error::FailedPrecondition("the LLM fallback chain is empty".into());
        for provider in &self.providers {
            match provider.chat_stream(request).await {
                Ok(stream) => return Ok(stream),
                Err(error @ (Error::Unavailable(_) | Error::ResourceExhausted(_) | Error::Throttled { .. })) => {
                    tracing::warn!(model = %provider.model_id(), %error, "LLM provider failed; trying the next");
                    last = error;
                }
                Err(error) => return Err(error),
            }
        }
        Err(last)
    }

    fn model_id(&self) -> String {
        self.providers
            .iter()
            .map(|provider| provider.model_id())
            .collect::<Vec<_>>()
            .join(" > ")
    }
}

/// Returns the JSON in a reply: the whole text, else a fenced block, else
/// the outermost `{...}` or `[...]`, whichever opens first.
pub fn extract_json(reply: &str) -> &str {
    let trimmed = reply.trim();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return trimmed;
    }
    if let Some(fenced) = trimmed.split("```").nth(1) {
        let body = fenced.trim_start_matches("json").trim();
        if body.starts_with('{') || body.starts_with('[') {
            return body;
        }
    }
    let Some(start) = trimmed.find(['{', '[']) else {
        return trimmed;
    };
    let close = if trimmed[start..].starts_with('{') { '}' } else { ']' };
    match trimmed.rfind(close) {
        Some(end) if start < end => &trimmed[start..=end],
        _ => trimmed,
    }
}

/// Reads `T` from a model's reply as leniently as weak and local models
/// need: the JSON alone, in a code fence or after prose; with trailing
/// commas; a single object where a list was asked.
pub fn read_json<T: DeserializeOwned>(reply: &str) -> std::result::Result<T, serde_json::Error> {
    let text = without_trailing_commas(extract_json(reply));
    let error = match serde_json::from_str::<T>(&text) {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    // One object where a list was asked (or a list of one where an object was).
    let reshaped = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(value @ serde_json::Value::Object(_)) => serde_json::Value::Array(vec![value]),
        Ok(serde_json::Value::Array(mut items)) if items.len() == 1 => items.remove(0),
        _ => return Err(error),
    };
    serde_json::from_value(reshaped).map_err(|_| error)
}

/// Drops the commas before a closing `}` or `]` outside strings.
fn without_trailing_commas(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let chars: Vec<char> = text.chars().collect();
    for (index, &c) in chars.iter().enumerate() {
        if in_string {
            escaped = !escaped && c == '\\';
            in_string = escaped || c != '"';
        } else if c == '"' {
            in_string = true;
        } else if c == ',' {
            let next = chars[index + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}' | ']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Reads `T` from a reply's text, else from its reasoning (where some local
/// models put the answer).
fn read_reply<T: DeserializeOwned>(reply: &ChatResponse) -> std::result::Result<T, serde_json::Error> {
    let error = match read_json(&reply.content) {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    match reply.reasoning.as_deref() {
        Some(reasoning) if !reasoning.trim().is_empty() => read_json(reasoning).map_err(|_| error),
        _ => Err(error),
    }
}

/// The start of a reply kept in an error, for inspection.
fn raw(reply: &ChatResponse) -> String {
    let text = if reply.content.trim().is_empty() {
        reply.reasoning.as_deref().unwrap_or_default()
    } else {
        &reply.content
    };
    let kept: String = text.chars().take(1_000).collect();
    if kept.is_empty() { "(empty)".to_owned() } else { kept }
}

/// Asks for structured output and parses it into `T` ([`read_json`]). A
/// reply that does not parse gets one repair turn (the model sees its reply
/// and the parse error); if that fails too, the error names both attempts
/// and keeps the start of the last reply.
pub async fn chat_json<T: DeserializeOwned>(llm: &dyn Llm, request: ChatRequest) -> Result<(T, Usage)> {
    let first = llm.chat(&request).await?;
    let mut usage = first.usage;
    let error = match read_reply::<T>(&first) {
        Ok(value) => return Ok((value, usage)),
        Err(error) => error,
    };
    tracing::warn!(model = %llm.model_id(), %error, "LLM reply is not the JSON asked for; asking for a repair");
    let mut repair = request.clone();
    repair
        .messages
        .push(ChatMessage::new(Role::Assistant, first.content.clone()));
    repair.messages.push(ChatMessage::new(
        Role::User,
        format!(
            "Your reply was not valid JSON for the requested schema ({error}). Reply again with only the \
             corrected JSON object, no prose and no code fences."
        ),
    ));
    let second = llm.chat(&repair).await?;
    usage += second.usage;
    read_reply::<T>(&second).map(|value| (value, usage)).map_err(|again| {
        Error::Internal(format!(
            "{} did not return valid JSON, even after a repair turn: {error}; then {again}. Its reply began: {}",
            llm.model_id(),
            raw(&second)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::{extract_json, read_json};

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Fact {
        content: String,
    }

    #[test]
    fn weak_models_json_is_read_leniently() {
        let facts = |text: &str| read_json::<Vec<Fact>>(text).map(|facts| facts.len());
        assert_eq!(
            facts("[{\"content\": \"a\"}, {\"content\": \"b\"},]").unwrap(),
            2,
            "a trailing comma"
        );
        assert_eq!(
            facts("{\"content\": \"a\",}").unwrap(),
            1,
            "one object where a list was asked"
        );
        assert_eq!(
            facts("Here you go:\n```json\n[{\"content\": \"a, ]\"}]\n```").unwrap(),
            1,
            "a comma inside a string stays"
        );
        let one = read_json::<Fact>("[{\"content\": \"a\"}]").unwrap();
        assert_eq!(one.content, "a", "a list of one where an object was asked");
        assert!(read_json::<Vec<Fact>>("I could not find any facts.").is_err());
    }

    #[test]
    fn json_is_found_in_fences_and_prose() {
        assert_eq!(extract_json(" {\"a\": 1} "), "{\"a\": 1}");
        assert_eq!(extract_json("```json\n{\"a\": 1}\n```"), "{\"a\": 1}");
        assert_eq!(
            extract_json("Sure! Here it is: {\"a\": {\"b\": 2}} Hope it helps."),
            "{\"a\": {\"b\": 2}}"
        );
        assert_eq!(extract_json("no json"), "no json");
        assert_eq!(extract_json("[{\"a\": 1}, {\"a\": 2}]"), "[{\"a\": 1}, {\"a\": 2}]");
        assert_eq!(extract_json("The list: [1, 2] done"), "[1, 2]");
    }
}
