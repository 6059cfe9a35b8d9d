//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`):
//! OpenAI, OpenRouter, vLLM, Ollama, LM Studio and others. Structured output
//! asks for `response_format: json_schema`; a server that rejects it (many
//! local servers) is asked again with `json_object` and the schema in the
//! system prompt, and later calls go straight to that fallback.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use roncho_core::{Error, Result};
use roncho_http::{HttpError, RetryPolicy, post_json};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{ChatRequest, ChatResponse, Llm, Usage};

/// Where and how to call the server.
#[derive(Debug, Clone)]
pub struct OpenAiChatConfig {
    /// e.g. `https://api.openai.com/v1`, `http://localhost:11434/v1`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub retry: RetryPolicy,
}

impl OpenAiChatConfig {
    pub fn new(base_url: &str, model: &str) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key: None,
            timeout: Duration::from_secs(120),
            retry: RetryPolicy {
                max_retries: 3,
                initial_backoff: Duration::from_secs(1),
            },
        }
    }
}

/// The OpenAI-compatible chat client.
#[derive(Debug)]
pub struct OpenAiChat {
    config: OpenAiChatConfig,
    client: reqwest::Client,
    /// Set once the server rejected `json_schema`: use `json_object`.
    schema_unsupported: AtomicBool,
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
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|error| Error::Internal(format!("building the HTTP client: {error}")))?;
        Ok(Self {
            config,
            client,
            schema_unsupported: AtomicBool::new(false),
        })
    }

    fn body(&self, request: &ChatRequest, schema_mode: bool) -> Value {
        let mut messages: Vec<Value> = request
            .messages
            .iter()
            .map(|message| json!({"role": message.role.name(), "content": message.content}))
            .collect();
        let mut body = json!({"model": self.config.model, "max_tokens": request.max_tokens});
        if let Some(temperature) = request.temperature {
            body["temperature"] = json!(temperature);
        }
        if let Some(schema) = &request.json_schema {
            if schema_mode {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {"name": schema.name, "schema": schema.schema, "strict": true},
                });
            } else {
                body["response_format"] = json!({"type": "json_object"});
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
        let url = format!("{}/chat/completions", self.config.base_url);
        post_json(
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
        let model = self.model_id();
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
            HttpError::Exhausted { ref last, .. } if last.contains("429") => {
                Error::ResourceExhausted(format!("{model}: rate limited: {error}"))
            }
            HttpError::Exhausted { .. } => Error::Unavailable(format!("{model}: {error}")),
        }
    }
}

/// Whether a 400 is about structured output (the server lacks `json_schema`).
fn rejects_schema(error: &HttpError) -> bool {
    matches!(error, HttpError::Status { status: 400 | 422, body }
        if body.contains("response_format") || body.contains("json_schema"))
}

#[async_trait]
impl Llm for OpenAiChat {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse> {
        let schema_mode = request.json_schema.is_some() && !self.schema_unsupported.load(Ordering::Relaxed);
        let text = match self.post(&self.body(request, schema_mode)).await {
            Ok(text) => text,
            Err(error) if schema_mode && rejects_schema(&error) => {
                tracing::warn!(model = %self.model_id(), "json_schema output unsupported; using json_object");
                self.schema_unsupported.store(true, Ordering::Relaxed);
                self.post(&self.body(request, false))
                    .await
                    .map_err(|error| self.classify(error))?
            }
            Err(error) => return Err(self.classify(error)),
        };
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
        Ok(ChatResponse {
            content: choice.message.content.unwrap_or_default(),
            usage,
            finish_reason: choice.finish_reason,
        })
    }

    fn model_id(&self) -> String {
        format!("openai-compatible/{}", self.config.model)
    }
}
