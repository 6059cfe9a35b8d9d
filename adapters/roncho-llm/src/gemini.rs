//! Google Gemini (`POST {base_url}/v1beta/models/{model}:generateContent`,
//! `x-goog-api-key`). System messages become `systemInstruction`; the
//! assistant is `model`; tool calls are `functionCall` parts and their
//! results `functionResponse` parts (keyed by name; Gemini gives calls no
//! ids, so they are numbered). Structured output asks for
//! `responseMimeType: application/json` with `responseJsonSchema`; a server
//! that rejects the schema field is asked again with the schema in the
//! system instruction, and later calls go straight to that. Streaming uses
//! `:streamGenerateContent?alt=sse`.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use roncho_core::{Error, Result};
use roncho_http::HttpError;
use serde_json::{Value, json};

use crate::openai::classify;
use crate::sse::{Decoder, SseEvent};
use crate::{ChatMessage, ChatRequest, ChatResponse, EventStream, Llm, Role, StreamEvent, ToolCall, Usage};

/// Where and how to call the API (`base_url`: `https://generativelanguage.googleapis.com`).
pub type GeminiConfig = crate::ProviderConfig;

/// The Gemini client.
#[derive(Debug)]
pub struct GeminiChat {
    config: GeminiConfig,
    client: reqwest::Client,
    /// Set once the server rejected `responseJsonSchema`.
    schema_unsupported: AtomicBool,
}

impl GeminiChat {
    pub fn new(config: GeminiConfig) -> Result<Self> {
        let client = config.client()?;
        Ok(Self {
            config,
            client,
            schema_unsupported: AtomicBool::new(false),
        })
    }

    fn body(&self, request: &ChatRequest, schema_mode: bool) -> Value {
        let mut system: Vec<String> = request
            .messages
            .iter()
            .filter(|message| message.role == Role::System)
            .map(|message| message.content.clone())
            .collect();
        let mut contents: Vec<Value> = Vec::new();
        for message in request.messages.iter().filter(|message| message.role != Role::System) {
            let (role, parts) = wire_parts(message);
            match contents.last_mut() {
                Some(last) if last["role"] == role => {
                    if let Some(existing) = last["parts"].as_array_mut() {
                        existing.extend(parts);
                    }
                }
                _ => contents.push(json!({"role": role, "parts": parts})),
            }
        }
        let mut generation = json!({"maxOutputTokens": request.max_tokens});
        if let Some(temperature) = request.temperature {
            generation["temperature"] = json!(temperature);
        }
        if let Some(schema) = &request.json_schema {
            generation["responseMimeType"] = json!("application/json");
            if schema_mode {
                generation["responseJsonSchema"] = schema.schema.clone();
            } else {
                system.push(format!(
                    "Reply with a single JSON object that follows this JSON schema:\n{}",
                    schema.schema
                ));
            }
        }
        let mut body = json!({"contents": contents, "generationConfig": generation});
        if !system.is_empty() {
            body["systemInstruction"] = json!({"parts": [{"text": system.join("\n\n")}]});
        }
        if !request.tools.is_empty() {
            body["tools"] = json!([{"functionDeclarations": request.tools.iter().map(|tool| json!({
                "name": tool.name, "description": tool.description, "parameters": tool.parameters,
            })).collect::<Vec<_>>()}]);
        }
        body
    }

    async fn post(&self, body: &Value, stream: bool) -> std::result::Result<reqwest::Response, HttpError> {
        let url = if stream {
            format!(
                "{}/v1beta/models/{}:streamGenerateContent?alt=sse",
                self.config.base_url, self.config.model
            )
        } else {
            format!(
                "{}/v1beta/models/{}:generateContent",
                self.config.base_url, self.config.model
            )
        };
        let mut headers = Vec::new();
        if let Some(key) = &self.config.api_key {
            headers.push(("x-goog-api-key", key.as_str()));
        }
        roncho_http::post(&self.client, &url, None, &headers, body, self.config.retry).await
    }

    /// Posts, falling back from `responseJsonSchema` when the server rejects it.
    async fn send(&self, request: &ChatRequest, stream: bool) -> Result<reqwest::Response> {
        let schema_mode = request.json_schema.is_some() && !self.schema_unsupported.load(Ordering::Relaxed);
        match self.post(&self.body(request, schema_mode), stream).await {
            Ok(response) => Ok(response),
            Err(HttpError::Status { status: 400, ref body }) if schema_mode && body.contains("responseJsonSchema") => {
                tracing::warn!(model = %self.model_id(), "responseJsonSchema unsupported; using JSON mode");
                self.schema_unsupported.store(true, Ordering::Relaxed);
                self.post(&self.body(request, false), stream)
                    .await
                    .map_err(|error| classify(&self.model_id(), error))
            }
            Err(error) => Err(classify(&self.model_id(), error)),
        }
    }
}

/// A message as Gemini parts, with its wire role.
fn wire_parts(message: &ChatMessage) -> (&'static str, Vec<Value>) {
    match message.role {
        Role::Tool => (
            "user",
            vec![json!({"functionResponse": {
                "name": message.tool_name,
                "response": {"content": message.content},
            }})],
        ),
        Role::Assistant => {
            let mut parts = Vec::new();
            if !message.content.is_empty() {
                parts.push(json!({"text": message.content}));
            }
            parts.extend(
                message
                    .tool_calls
                    .iter()
                    .map(|call| json!({"functionCall": {"name": call.name, "args": call.arguments}})),
            );
            ("model", parts)
        }
        Role::User | Role::System => ("user", vec![json!({"text": message.content})]),
    }
}

/// Reads one `GenerateContentResponse` (whole or a streamed chunk).
struct ResponseReader {
    model: String,
    calls: usize,
    usage: Usage,
    finish_reason: Option<String>,
}

impl ResponseReader {
    fn read(&mut self, text: &str) -> Result<Vec<StreamEvent>> {
        let response: Value = serde_json::from_str(text).map_err(|error| {
            Error::Unavailable(format!(
                "{}: malformed response ({error}): {}",
                self.model,
                text.chars().take(200).collect::<String>()
            ))
        })?;
        if let Some(reason) = response["promptFeedback"]["blockReason"].as_str() {
            return Err(Error::FailedPrecondition(format!(
                "{}: the prompt was blocked ({reason})",
                self.model
            )));
        }
        if let Some(usage) = response.get("usageMetadata") {
            self.usage = Usage {
                input_tokens: usage["promptTokenCount"].as_u64().unwrap_or_default(),
                output_tokens: usage["candidatesTokenCount"].as_u64().unwrap_or_default(),
            };
        }
        let mut events = Vec::new();
        let Some(candidate) = response["candidates"].get(0) else {
            return Ok(events);
        };
        if let Some(reason) = candidate["finishReason"].as_str() {
            self.finish_reason = Some(reason.to_owned());
        }
        for part in candidate["content"]["parts"].as_array().into_iter().flatten() {
            if let Some(text) = part["text"].as_str().filter(|text| !text.is_empty()) {
                events.push(StreamEvent::Text(text.to_owned()));
            }
            if let Some(call) = part.get("functionCall") {
                events.push(StreamEvent::ToolCall(ToolCall {
                    id: call["id"]
                        .as_str()
                        .map_or_else(|| format!("call_{}", self.calls), str::to_owned),
                    name: call["name"].as_str().unwrap_or_default().to_owned(),
                    arguments: call.get("args").cloned().unwrap_or_else(|| json!({})),
                }));
                self.calls += 1;
            }
        }
        Ok(events)
    }

    fn done(&mut self) -> StreamEvent {
        StreamEvent::Done {
            usage: self.usage,
            finish_reason: self.finish_reason.take(),
        }
    }
}

impl Decoder for ResponseReader {
    fn decode(&mut self, event: &SseEvent) -> Result<Vec<StreamEvent>> {
        if event.data.trim().is_empty() {
            return Ok(Vec::new());
        }
        self.read(&event.data)
    }

    fn finish(&mut self) -> Result<Vec<StreamEvent>> {
        // The body ends after the last chunk; only a finish reason says it is whole.
        if self.finish_reason.is_none() {
            return Ok(Vec::new());
        }
        Ok(vec![self.done()])
    }
}

#[async_trait]
impl Llm for GeminiChat {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let response = self.send(request, false).await?;
        let text = response
            .text()
            .await
            .map_err(|error| Error::Unavailable(format!("{}: unreadable response: {error}", self.model_id())))?;
        let mut reader = ResponseReader {
            model: self.model_id(),
            calls: 0,
            usage: Usage::default(),
            finish_reason: None,
        };
        let events = reader.read(&text)?;
        if events.is_empty() && reader.finish_reason.is_none() {
            return Err(Error::Unavailable(format!(
                "{}: the response has no candidates",
                self.model_id()
            )));
        }
        let mut reply = ChatResponse::default();
        for event in events.into_iter().chain([reader.done()]) {
            match event {
                StreamEvent::Text(text) => reply.content.push_str(&text),
                StreamEvent::ToolCall(call) => reply.tool_calls.push(call),
                StreamEvent::Done { usage, finish_reason } => {
                    reply.usage = usage;
                    reply.finish_reason = finish_reason;
                }
            }
        }
        Ok(reply)
    }

    async fn chat_stream(&self, request: &ChatRequest) -> Result<EventStream> {
        let response = self.send(request, true).await?;
        let decoder = ResponseReader {
            model: self.model_id(),
            calls: 0,
            usage: Usage::default(),
            finish_reason: None,
        };
        Ok(crate::sse::stream(response, decoder, self.model_id()))
    }

    fn model_id(&self) -> String {
        format!("gemini/{}", self.config.model)
    }
}
