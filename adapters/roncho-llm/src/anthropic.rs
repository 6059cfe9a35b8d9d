//! Anthropic Messages (`POST {base_url}/v1/messages`, `x-api-key`,
//! `anthropic-version: 2023-06-01`). System messages become the top-level
//! `system`; tool calls are `tool_use` blocks and their results
//! `tool_result` blocks in a user turn. Structured output forces a tool
//! whose input schema is the requested schema (`tool_choice`), which the
//! API validates, and returns its input as the reply's JSON. Streaming
//! reads `message_start` / `content_block_*` / `message_delta` events.

use std::collections::BTreeMap;

use async_trait::async_trait;
use roncho_core::{Error, Result};
use roncho_http::HttpError;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::openai::{classify, parse_arguments};
use crate::sse::{Decoder, SseEvent};
use crate::{ChatMessage, ChatRequest, ChatResponse, EventStream, Llm, Role, StreamEvent, ToolCall, Usage};

/// The API version this adapter speaks.
pub const API_VERSION: &str = "2023-06-01";

/// Where and how to call the API (`base_url`: `https://api.anthropic.com`; `/v1/messages` is appended).
pub type AnthropicConfig = crate::ProviderConfig;

/// The Anthropic Messages client.
#[derive(Debug)]
pub struct AnthropicChat {
    config: AnthropicConfig,
    client: reqwest::Client,
}

#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default)]
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// The forced tool that carries structured output.
fn schema_tool(name: &str) -> String {
    format!("emit_{name}")
}

impl AnthropicChat {
    pub fn new(config: AnthropicConfig) -> Result<Self> {
        let client = config.client()?;
        Ok(Self { config, client })
    }

    fn body(&self, request: &ChatRequest) -> Value {
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter(|message| message.role == Role::System)
            .map(|message| message.content.as_str())
            .collect();
        let mut messages: Vec<Value> = Vec::new();
        for message in request.messages.iter().filter(|message| message.role != Role::System) {
            let (role, blocks) = wire_blocks(message);
            // Consecutive turns of one role merge (tool results after tool results).
            match messages.last_mut() {
                Some(last) if last["role"] == role => {
                    if let Some(content) = last["content"].as_array_mut() {
                        content.extend(blocks);
                    }
                }
                _ => messages.push(json!({"role": role, "content": blocks})),
            }
        }
        let mut body = json!({
            "model": self.config.model,
            "max_tokens": request.max_tokens,
            "messages": messages,
        });
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        if let Some(temperature) = request.temperature {
            body["temperature"] = json!(temperature);
        }
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| json!({"name": tool.name, "description": tool.description, "input_schema": tool.parameters}))
            .collect();
        if let Some(schema) = &request.json_schema {
            let name = schema_tool(&schema.name);
            tools.push(json!({
                "name": name,
                "description": "Return the answer as this tool's input, following its schema exactly.",
                "input_schema": schema.schema,
            }));
            body["tool_choice"] = json!({"type": "tool", "name": name});
        }
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools);
        }
        body
    }

    async fn post(&self, body: &Value) -> std::result::Result<reqwest::Response, HttpError> {
        let url = format!("{}/v1/messages", self.config.base_url);
        let mut headers = vec![("anthropic-version", API_VERSION)];
        if let Some(key) = &self.config.api_key {
            headers.push(("x-api-key", key.as_str()));
        }
        roncho_http::post(&self.client, &url, None, &headers, body, self.config.retry).await
    }

    /// Moves the structured-output tool's input into the text.
    fn unwrap_schema_tool(request: &ChatRequest, response: &mut ChatResponse) {
        let Some(schema) = &request.json_schema else {
            return;
        };
        let name = schema_tool(&schema.name);
        if let Some(position) = response.tool_calls.iter().position(|call| call.name == name) {
            let call = response.tool_calls.remove(position);
            response.content = call.arguments.to_string();
        }
    }
}

/// A message as Anthropic content blocks, with its wire role.
fn wire_blocks(message: &ChatMessage) -> (&'static str, Vec<Value>) {
    match message.role {
        Role::Tool => (
            "user",
            vec![json!({
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
            })],
        ),
        Role::Assistant => {
            let mut blocks = Vec::new();
            if !message.content.is_empty() {
                blocks.push(json!({"type": "text", "text": message.content}));
            }
            blocks.extend(
                message
                    .tool_calls
                    .iter()
                    .map(|call| json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})),
            );
            ("assistant", blocks)
        }
        Role::User | Role::System => ("user", vec![json!({"type": "text", "text": message.content})]),
    }
}

#[async_trait]
impl Llm for AnthropicChat {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let response = self
            .post(&self.body(request))
            .await
            .map_err(|error| classify(&self.model_id(), error))?;
        let text = response
            .text()
            .await
            .map_err(|error| Error::Unavailable(format!("{}: unreadable response: {error}", self.model_id())))?;
        let message: Message = serde_json::from_str(&text).map_err(|error| {
            Error::Unavailable(format!(
                "{}: malformed message ({error}): {}",
                self.model_id(),
                text.chars().take(200).collect::<String>()
            ))
        })?;
        let mut reply = ChatResponse {
            usage: Usage {
                input_tokens: message.usage.input_tokens,
                output_tokens: message.usage.output_tokens,
            },
            finish_reason: message.stop_reason,
            ..ChatResponse::default()
        };
        for block in message.content {
            match block {
                Block::Text { text } => reply.content.push_str(&text),
                Block::ToolUse { id, name, input } => reply.tool_calls.push(ToolCall {
                    id,
                    name,
                    arguments: input,
                }),
                Block::Other => {}
            }
        }
        Self::unwrap_schema_tool(request, &mut reply);
        Ok(reply)
    }

    async fn chat_stream(&self, request: &ChatRequest) -> Result<EventStream> {
        let mut body = self.body(request);
        body["stream"] = json!(true);
        let response = self
            .post(&body)
            .await
            .map_err(|error| classify(&self.model_id(), error))?;
        let decoder = EventDecoder {
            model: self.model_id(),
            schema_tool: request.json_schema.as_ref().map(|schema| schema_tool(&schema.name)),
            blocks: BTreeMap::new(),
            usage: Usage::default(),
            stop_reason: None,
        };
        Ok(crate::sse::stream(response, decoder, self.model_id()))
    }

    fn model_id(&self) -> String {
        format!("anthropic/{}", self.config.model)
    }
}

/// Assembles Anthropic's streamed events.
struct EventDecoder {
    model: String,
    /// The structured-output tool, whose input streams out as text.
    schema_tool: Option<String>,
    /// Open tool-use blocks by index: id, name, input fragments.
    blocks: BTreeMap<u64, (String, String, String)>,
    usage: Usage,
    stop_reason: Option<String>,
}

impl Decoder for EventDecoder {
    fn decode(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>> {
        if event.event == "ping" || event.data.is_empty() {
            return Ok(Vec::new());
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|error| Error::Unavailable(format!("{}: malformed stream event ({error})", self.model)))?;
        let index = data["index"].as_u64().unwrap_or_default();
        match data["type"].as_str().unwrap_or(event.event.as_str()) {
            "message_start" => {
                self.usage.input_tokens = data["message"]["usage"]["input_tokens"].as_u64().unwrap_or_default();
                Ok(Vec::new())
            }
            "content_block_start" if data["content_block"]["type"] == "tool_use" => {
                let block = &data["content_block"];
                self.blocks.insert(
                    index,
                    (
                        block["id"].as_str().unwrap_or_default().to_owned(),
                        block["name"].as_str().unwrap_or_default().to_owned(),
                        String::new(),
                    ),
                );
                Ok(Vec::new())
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => Ok(vec![StreamEvent::Text(
                        delta["text"].as_str().unwrap_or_default().to_owned(),
                    )]),
                    Some("input_json_delta") => {
                        let fragment = delta["partial_json"].as_str().unwrap_or_default();
                        match self.blocks.get_mut(&index) {
                            Some(block) if Some(&block.1) == self.schema_tool.as_ref() => {
                                Ok(vec![StreamEvent::Text(fragment.to_owned())])
                            }
                            Some(block) => {
                                block.2.push_str(fragment);
                                Ok(Vec::new())
                            }
                            None => Ok(Vec::new()),
                        }
                    }
                    _ => Ok(Vec::new()),
                }
            }
            "content_block_stop" => match self.blocks.remove(&index) {
                Some((_, name, _)) if Some(&name) == self.schema_tool.as_ref() => Ok(Vec::new()),
                Some((id, name, input)) => Ok(vec![StreamEvent::ToolCall(ToolCall {
                    id,
                    arguments: parse_arguments(&self.model, &name, &input)?,
                    name,
                })]),
                None => Ok(Vec::new()),
            },
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(output) = data["usage"]["output_tokens"].as_u64() {
                    self.usage.output_tokens = output;
                }
                Ok(Vec::new())
            }
            "message_stop" => Ok(vec![StreamEvent::Done {
                usage: self.usage,
                finish_reason: self.stop_reason.take(),
            }]),
            "error" => {
                let kind = data["error"]["type"].as_str().unwrap_or("error");
                let message = data["error"]["message"].as_str().unwrap_or_default();
                let text = format!("{}: {kind}: {message}", self.model);
                Err(if kind == "overloaded_error" || kind == "api_error" {
                    Error::Unavailable(text)
                } else if kind == "rate_limit_error" {
                    Error::ResourceExhausted(text)
                } else {
                    Error::FailedPrecondition(text)
                })
            }
            _ => Ok(Vec::new()),
        }
    }

    fn finish(&mut self) -> Result<Vec<StreamEvent>> {
        // Only `message_stop` completes a reply.
        Ok(Vec::new())
    }
}
