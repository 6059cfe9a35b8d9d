//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`):
//! OpenAI, OpenRouter, vLLM, Ollama, LM Studio and others. Structured output
//! asks for `response_format: json_schema`; a server that rejects it (many
//! local servers) is asked again with `json_object` and the schema in the
//! system prompt, then with the schema in the prompt alone, and later calls
//! go straight to what it took ([`Structured`], configurable). Tools are
//! `tools: [{type: function, ...}]`; streaming reads `data:` chunks until
//! `[DONE]`, assembling tool-call arguments from their fragments.

use std::sync::atomic::{AtomicU8, Ordering};

use async_trait::async_trait;
use roncho_core::{Error, Result};
use roncho_http::HttpError;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::sse::{Decoder, SseEvent};
use crate::{ChatRequest, ChatResponse, EventStream, Llm, Role, StreamEvent, Structured, ToolCall, Usage};

/// Where and how to call the API (`base_url`: e.g. `https://api.openai.com/v1`, `http://localhost:11434/v1`).
pub type OpenAiChatConfig = crate::ProviderConfig;

/// The OpenAI-compatible chat client.
#[derive(Debug)]
pub struct OpenAiChat {
    config: OpenAiChatConfig,
    client: reqwest::Client,
    /// How JSON is asked for now: 0 `json_schema`, 1 `json_object`, 2 the
    /// prompt alone; `Auto` moves it on at each refusal.
    mode: AtomicU8,
    /// The base URL's places in flight ([`crate::ProviderConfig::max_concurrent`]).
    slots: Option<std::sync::Arc<tokio::sync::Semaphore>>,
}

#[derive(Debug, Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    /// Reasoning sent apart (DeepSeek and vLLM: `reasoning_content`;
    /// Ollama and OpenRouter: `reasoning`); read only when it is text.
    #[serde(default)]
    reasoning_content: Option<serde_json::Value>,
    #[serde(default)]
    reasoning: Option<serde_json::Value>,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Debug, Default, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: WireFunction,
}

#[derive(Debug, Default, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// Parses a tool call's arguments (a JSON string on this wire).
pub(crate) fn parse_arguments(model: &str, name: &str, arguments: &str) -> Result<Value> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(arguments).map_err(|error| {
        Error::Internal(format!(
            "{model}: the arguments of tool call {name} are not JSON ({error}): {}",
            arguments.chars().take(200).collect::<String>()
        ))
    })
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl OpenAiChat {
    pub fn new(config: OpenAiChatConfig) -> Result<Self> {
        let client = config.client()?;
        Ok(Self {
            slots: config.slots(),
            mode: AtomicU8::new(match config.structured {
                Structured::Auto | Structured::JsonSchema => SCHEMA,
                Structured::JsonObject => OBJECT,
                Structured::Prompt => PROMPT,
            }),
            config,
            client,
        })
    }

    /// How JSON replies are asked for now (learned from refusals in `auto`).
    pub fn structured_mode(&self) -> Structured {
        match self.mode.load(Ordering::Relaxed) {
            SCHEMA => Structured::JsonSchema,
            OBJECT => Structured::JsonObject,
            _ => Structured::Prompt,
        }
    }

    /// After a refusal of the current mode: the next one, when `auto` may
    /// move on (`None`: the refusal is final).
    fn fall_back(&self, tried: u8) -> Option<u8> {
        if self.config.structured != Structured::Auto || tried >= PROMPT {
            return None;
        }
        let next = tried + 1;
        self.mode.store(next, Ordering::Relaxed);
        let to = match next {
            OBJECT => "json_object with the schema in the prompt",
            _ => "the schema in the prompt alone",
        };
        tracing::warn!(model = %self.model_id(), "the server refuses this structured output mode; using {to}");
        Some(next)
    }

    /// Waits for a place in flight at the server, when it has a limit.
    async fn slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let slots = self.slots.clone()?;
        slots.acquire_owned().await.ok()
    }

    fn body(&self, request: &ChatRequest, mode: u8) -> Value {
        let mut messages: Vec<Value> = request.messages.iter().map(wire_message).collect();
        let mut body = json!({"model": self.config.model, "max_tokens": request.max_tokens});
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|tool| {
                    json!({"type": "function", "function": {
                        "name": tool.name, "description": tool.description, "parameters": tool.parameters,
                    }})
                })
                .collect();
        }
        if let Some(temperature) = request.temperature {
            body["temperature"] = json!(temperature);
        }
        if let Some(schema) = &request.json_schema {
            if mode == SCHEMA {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {"name": schema.name, "schema": schema.schema, "strict": true},
                });
            } else {
                if mode == OBJECT {
                    body["response_format"] = json!({"type": "json_object"});
                }
                messages.insert(
                    0,
                    json!({
                        "role": "system",
                        "content": format!(
                            "Reply with a single JSON object that follows this JSON schema:\n{}",
                            schema.schema
                        ),
                    }),
                );
            }
        }
        body["messages"] = Value::Array(messages);
        body
    }

    async fn post(&self, body: &Value) -> std::result::Result<String, HttpError> {
        let response = self.post_stream(body).await?;
        response.text().await.map_err(|error| HttpError::Exhausted {
            attempts: 1,
            last: format!("unreadable response: {error}"),
            rate_limited: false,
            retry_after: None,
        })
    }

    async fn post_stream(&self, body: &Value) -> std::result::Result<reqwest::Response, HttpError> {
        let url = format!("{}/chat/completions", self.config.base_url);
        roncho_http::post(
            &self.client,
            &url,
            self.config.api_key.as_deref(),
            &[],
            body,
            self.config.retry,
        )
        .await
    }

    fn classify(&self, error: HttpError) -> Error {
        classify(&self.model_id(), error)
    }
}

/// Error classes shared by the providers: a refused key or request is
/// final (`FAILED_PRECONDITION`), exhausted 429s are `RESOURCE_EXHAUSTED`,
/// anything else retried to exhaustion is `UNAVAILABLE`.
pub(crate) fn classify(model: &str, error: HttpError) -> Error {
    {
        match error {
            HttpError::Status {
                status: 401 | 403,
                body,
            } => Error::FailedPrecondition(format!(
                "{model}: the provider refused the API key (HTTP 401/403): {}",
                body.chars().take(300).collect::<String>()
            )),
            HttpError::Status { status, body } => Error::FailedPrecondition(format!(
                "{model}: the provider rejected the request (HTTP {status}): {}",
                body.chars().take(300).collect::<String>()
            )),
            HttpError::Exhausted {
                retry_after: Some(retry_after),
                ..
            } => Error::Throttled {
                reason: format!("{model}: {error}; the provider asks to wait"),
                retry_after,
            },
            HttpError::Exhausted { rate_limited: true, .. } => {
                Error::ResourceExhausted(format!("{model}: rate limited: {error}"))
            }
            HttpError::Exhausted { .. } => Error::Unavailable(format!("{model}: {error}")),
        }
    }
}

/// One message on the Chat Completions wire.
fn wire_message(message: &crate::ChatMessage) -> Value {
    match message.role {
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": message.content,
        }),
        Role::Assistant if !message.tool_calls.is_empty() => json!({
            "role": "assistant",
            "content": if message.content.is_empty() { Value::Null } else { json!(message.content) },
            "tool_calls": message.tool_calls.iter().map(|call| json!({
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments.to_string()},
            })).collect::<Vec<_>>(),
        }),
        role => json!({"role": role.name(), "content": message.content}),
    }
}

/// Assembles streamed Chat Completions chunks.
struct ChunkDecoder {
    model: String,
    /// Tool calls by index: id, name, argument fragments.
    calls: std::collections::BTreeMap<usize, (String, String, String)>,
    usage: Usage,
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

impl Decoder for ChunkDecoder {
    fn decode(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>> {
        if event.data.trim() == "[DONE]" {
            return self.complete();
        }
        let chunk: Chunk = serde_json::from_str(&event.data).map_err(|error| {
            Error::Unavailable(format!(
                "{}: malformed stream chunk ({error}): {}",
                self.model,
                event.data.chars().take(200).collect::<String>()
            ))
        })?;
        if let Some(usage) = chunk.usage {
            self.usage = Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
            };
        }
        let mut events = Vec::new();
        for choice in chunk.choices {
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
                events.push(StreamEvent::Text(text));
            }
            for (position, call) in delta.tool_calls.into_iter().enumerate() {
                let entry = self.calls.entry(call.index.unwrap_or(position)).or_default();
                if let Some(id) = call.id {
                    entry.0 = id;
                }
                if let Some(name) = call.function.name {
                    entry.1.push_str(&name);
                }
                if let Some(arguments) = call.function.arguments {
                    entry.2.push_str(&arguments);
                }
            }
        }
        Ok(events)
    }

    fn finish(&mut self) -> Result<Vec<StreamEvent>> {
        // Without `[DONE]`, only a finish reason says the reply is whole.
        if self.finish_reason.is_none() {
            return Ok(Vec::new());
        }
        self.complete()
    }
}

impl ChunkDecoder {
    /// The assembled tool calls and the final event.
    fn complete(&mut self) -> Result<Vec<StreamEvent>> {
        let mut events = Vec::new();
        for (index, (id, name, arguments)) in std::mem::take(&mut self.calls) {
            events.push(StreamEvent::ToolCall(ToolCall {
                id: if id.is_empty() { format!("call_{index}") } else { id },
                arguments: parse_arguments(&self.model, &name, &arguments)?,
                name,
            }));
        }
        events.push(StreamEvent::Done {
            usage: self.usage,
            finish_reason: self.finish_reason.take(),
        });
        Ok(events)
    }
}

/// Structured output modes, from the most to the least exact.
const SCHEMA: u8 = 0;
const OBJECT: u8 = 1;
const PROMPT: u8 = 2;

/// Whether a 400 is about structured output (the server lacks this mode).
fn rejects_schema(error: &HttpError) -> bool {
    matches!(error, HttpError::Status { status: 400 | 422, body }
        if body.contains("response_format") || body.contains("json_schema") || body.contains("json_object"))
}

#[async_trait]
impl Llm for OpenAiChat {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let mut mode = self.mode.load(Ordering::Relaxed);
        let slot = self.slot().await;
        let text = loop {
            match self.post(&self.body(request, mode)).await {
                Ok(text) => break text,
                Err(error) if request.json_schema.is_some() && rejects_schema(&error) => match self.fall_back(mode) {
                    Some(next) => mode = next,
                    None => return Err(self.classify(error)),
                },
                Err(error) => return Err(self.classify(error)),
            }
        };
        drop(slot);
        let completion: Completion = serde_json::from_str(&text).map_err(|error| {
            Error::Unavailable(format!(
                "{}: malformed completion ({error}): {}",
                self.model_id(),
                text.chars().take(200).collect::<String>()
            ))
        })?;
        let usage = completion.usage.map_or(Usage::default(), |usage| Usage {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
        });
        let choice = completion
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| Error::Unavailable(format!("{}: the completion has no choices", self.model_id())))?;
        let model = self.model_id();
        let tool_calls = choice
            .message
            .tool_calls
            .into_iter()
            .enumerate()
            .map(|(index, call)| {
                let name = call.function.name.unwrap_or_default();
                Ok(ToolCall {
                    id: call.id.unwrap_or_else(|| format!("call_{index}")),
                    arguments: parse_arguments(&model, &name, call.function.arguments.as_deref().unwrap_or(""))?,
                    name,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ChatResponse {
            content: choice.message.content.unwrap_or_default(),
            reasoning: [choice.message.reasoning_content, choice.message.reasoning]
                .into_iter()
                .flatten()
                .find_map(|value| value.as_str().map(str::to_owned)),
            tool_calls,
            usage,
            finish_reason: choice.finish_reason,
        })
    }

    async fn chat_stream(&self, request: &ChatRequest) -> Result<EventStream> {
        let mut mode = self.mode.load(Ordering::Relaxed);
        let slot = self.slot().await;
        let with_stream = |mut body: Value| {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
            body
        };
        let response = loop {
            match self.post_stream(&with_stream(self.body(request, mode))).await {
                Ok(response) => break response,
                Err(error) if request.json_schema.is_some() && rejects_schema(&error) => match self.fall_back(mode) {
                    Some(next) => mode = next,
                    None => return Err(self.classify(error)),
                },
                Err(error) => return Err(self.classify(error)),
            }
        };
        let decoder = ChunkDecoder {
            model: self.model_id(),
            calls: std::collections::BTreeMap::new(),
            usage: Usage::default(),
            finish_reason: None,
        };
        let events = crate::sse::stream(response, decoder, self.model_id());
        // The place is held until the stream ends.
        Ok(Box::pin(futures::StreamExt::map(events, move |event| {
            let _held = &slot;
            event
        })))
    }

    fn model_id(&self) -> String {
        format!("openai-compatible/{}", self.config.model)
    }
}
