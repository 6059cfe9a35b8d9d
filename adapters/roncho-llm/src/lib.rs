//! The LLM providers' clients, each implementing core's [`Llm`] port
//! (`roncho_core::llm`, re-exported here for the providers and the
//! wiring), with the settings they share ([`ProviderConfig`]).
//!
//! # Layout
//! - [`openai`]: OpenAI-compatible Chat Completions (OpenAI, OpenRouter,
//!   vLLM, Ollama, LM Studio, ...).
//! - [`anthropic`]: Anthropic Messages.
//! - [`gemini`]: Google Gemini `generateContent`.
//! - [`sse`]: the server-sent-events reader the streaming adapters share.
//!
//! Errors: an unreachable or overloaded provider (after retries) is
//! `UNAVAILABLE` / `RESOURCE_EXHAUSTED`, which a fallback chain moves past;
//! a provider that rejects the request or the key is `FAILED_PRECONDITION`
//! with its reason; a reply that is not the JSON asked for, even after the
//! repair turn, is `INTERNAL` naming the parse error.

use roncho_core::{Error, Result};

pub use roncho_core::llm::*;

pub mod anthropic;
pub mod gemini;
pub mod openai;
pub mod sse;

/// Where and how to call a provider: the settings every adapter shares.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// The provider's base URL (each adapter documents what it appends).
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// Limit on one request, streamed bodies included.
    pub timeout: std::time::Duration,
    pub retry: roncho_http::RetryPolicy,
    /// Requests in flight at once to this base URL, shared by every client
    /// of it in the process (a single-slot local server: 1); 0: no limit.
    pub max_concurrent: usize,
    /// How JSON replies are asked for (OpenAI-compatible servers).
    pub structured: Structured,
}

/// How a model is asked for JSON that follows a schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Structured {
    /// `json_schema`; a server that refuses it gets JSON mode, then the
    /// schema in the prompt alone, learned from its refusals (400/422
    /// naming `response_format`).
    #[default]
    Auto,
    /// `response_format: json_schema` only.
    JsonSchema,
    /// `response_format: json_object`, the schema in the prompt.
    JsonObject,
    /// No `response_format`: the schema in the prompt.
    Prompt,
}

impl Structured {
    /// The mode's name as configured (`auto`, `json_schema`, `json_object`, `prompt`).
    pub fn name(self) -> &'static str {
        match self {
            Structured::Auto => "auto",
            Structured::JsonSchema => "json_schema",
            Structured::JsonObject => "json_object",
            Structured::Prompt => "prompt",
        }
    }

    /// Parses a configured mode.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Auto, Self::JsonSchema, Self::JsonObject, Self::Prompt]
            .into_iter()
            .find(|mode| mode.name() == text)
    }
}

impl ProviderConfig {
    pub fn new(base_url: &str, model: &str) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key: None,
            timeout: std::time::Duration::from_secs(120),
            retry: roncho_http::RetryPolicy {
                max_retries: 3,
                initial_backoff: std::time::Duration::from_secs(1),
            },
            max_concurrent: 0,
            structured: Structured::Auto,
        }
    }

    /// The places in flight this base URL allows, shared by every client of
    /// it in the process; `None` without a limit.
    pub(crate) fn slots(&self) -> Option<std::sync::Arc<tokio::sync::Semaphore>> {
        use std::collections::HashMap;
        use std::sync::{Arc, Mutex, OnceLock};
        type Slots = Mutex<HashMap<(String, usize), Arc<tokio::sync::Semaphore>>>;
        static SLOTS: OnceLock<Slots> = OnceLock::new();
        if self.max_concurrent == 0 {
            return None;
        }
        let mut slots = SLOTS.get_or_init(Slots::default).lock().expect("slots lock");
        let key = (self.base_url.clone(), self.max_concurrent);
        Some(
            slots
                .entry(key)
                .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.max_concurrent)))
                .clone(),
        )
    }

    /// The HTTP client for these settings.
    pub(crate) fn client(&self) -> Result<reqwest::Client> {
        reqwest::Client::builder()
            .timeout(self.timeout)
            .build()
            .map_err(|error| Error::Internal(format!("building the HTTP client: {error}")))
    }
}
