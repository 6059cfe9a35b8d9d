//! The provider-neutral LLM layer: one [`Llm`] trait, chat requests with
//! optional JSON-schema structured output, token usage, error
//! classification, a [`FallbackChain`] across providers, and
//! [`chat_json`]: structured output with a repair step that never turns a
//! malformed reply into an empty success.
//!
//! # Layout
//! - [`openai`]: OpenAI-compatible Chat Completions (OpenAI, OpenRouter,
//!   vLLM, Ollama, LM Studio, ...).
//!
//! Errors: an unreachable or overloaded provider (after retries) is
//! `UNAVAILABLE` / `RESOURCE_EXHAUSTED`, which a fallback chain moves past;
//! a provider that rejects the request or the key is `FAILED_PRECONDITION`
//! with its reason; a reply that is not the JSON asked for, even after the
//! repair turn, is `INTERNAL` naming the parse error.

use std::sync::Arc;

use async_trait::async_trait;
use roncho_core::{Error, Result};
use serde::de::DeserializeOwned;

pub mod openai;

/// Who says a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    /// The wire name shared by the providers.
    pub fn name(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }
}

/// A JSON schema the reply must follow.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSchema {
    pub name: String,
    pub schema: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    /// Ask for structured output following this schema.
    pub json_schema: Option<JsonSchema>,
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

#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub content: String,
    pub usage: Usage,
    /// `stop`, `length`, ... as the provider says.
    pub finish_reason: Option<String>,
}

/// A chat model behind some provider.
#[async_trait]
pub trait Llm: Send + Sync + 'static {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse>;
    /// Provider and model, for logs and status (`openai-compatible/gpt-4o-mini`).
    fn model_id(&self) -> String;
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
                Err(error @ (Error::Unavailable(_) | Error::ResourceExhausted(_))) => {
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
/// the outermost `{...}`.
pub fn extract_json(reply: &str) -> &str {
    let trimmed = reply.trim();
    if let Some(fenced) = trimmed.split("```").nth(1) {
        let body = fenced.trim_start_matches("json").trim();
        if body.starts_with('{') || body.starts_with('[') {
            return body;
        }
    }
    match (trimmed.find('{'), trimmed.rfind('}')) {
        (Some(start), Some(end)) if start < end && !trimmed.starts_with('{') => &trimmed[start..=end],
        _ => trimmed,
    }
}

/// Asks for structured output and parses it into `T`. A reply that does not
/// parse gets one repair turn (the model sees its reply and the parse
/// error); if that fails too, the error names both attempts.
pub async fn chat_json<T: DeserializeOwned>(llm: &dyn Llm, request: ChatRequest) -> Result<(T, Usage)> {
    let first = llm.chat(&request).await?;
    let mut usage = first.usage;
    let error = match serde_json::from_str::<T>(extract_json(&first.content)) {
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
    serde_json::from_str::<T>(extract_json(&second.content))
        .map(|value| (value, usage))
        .map_err(|again| {
            Error::Internal(format!(
                "{} did not return valid JSON, even after a repair turn: {error}; then {again}",
                llm.model_id()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::extract_json;

    #[test]
    fn json_is_found_in_fences_and_prose() {
        assert_eq!(extract_json(" {\"a\": 1} "), "{\"a\": 1}");
        assert_eq!(extract_json("```json\n{\"a\": 1}\n```"), "{\"a\": 1}");
        assert_eq!(
            extract_json("Sure! Here it is: {\"a\": {\"b\": 2}} Hope it helps."),
            "{\"a\": {\"b\": 2}}"
        );
        assert_eq!(extract_json("no json"), "no json");
    }
}
