//! `OpenAiEmbedder`: the `/v1/embeddings` wire format, spoken by OpenAI,
//! Ollama, vLLM, TEI and LM Studio. Texts go in batches; 429, 5xx, timeouts
//! and connection errors are retried with exponential backoff (honouring
//! `Retry-After`); a vector of the wrong size is an error, never stored.

use std::time::Duration;

use async_trait::async_trait;
use roncho_core::embed::{Embedder, normalize};
use roncho_core::{Error, Result};
use roncho_http::{RetryPolicy, post_json};
use serde::Deserialize;
use serde_json::json;

/// How to reach an OpenAI-compatible embeddings server.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL including the version path, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    /// Size of every vector; checked on each response.
    pub dimensions: usize,
    /// Send `dimensions` in the request (models with adjustable size).
    pub request_dimensions: bool,
    pub batch_size: usize,
    pub max_retries: u32,
    pub timeout: Duration,
    /// First backoff; doubles per attempt.
    pub initial_backoff: Duration,
}

impl OpenAiConfig {
    /// Returns a config with production defaults for `base_url`, `model` and `dimensions`.
    pub fn new(base_url: &str, model: &str, dimensions: usize) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            api_key: None,
            dimensions,
            request_dimensions: false,
            batch_size: 64,
            max_retries: 4,
            timeout: Duration::from_secs(30),
            initial_backoff: Duration::from_millis(500),
        }
    }
}

/// The OpenAI-compatible embedder.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    config: OpenAiConfig,
    client: reqwest::Client,
}

#[derive(Debug, Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Debug, Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

impl OpenAiEmbedder {
    /// Returns an embedder for `config`.
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|error| Error::Internal(format!("building the HTTP client: {error}")))?;
        Ok(Self { config, client })
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut body = json!({"model": self.config.model, "input": texts, "encoding_format": "float"});
        if self.config.request_dimensions {
            body["dimensions"] = json!(self.config.dimensions);
        }
        let policy = RetryPolicy {
            max_retries: self.config.max_retries,
            initial_backoff: self.config.initial_backoff,
        };
        let url = format!("{}/embeddings", self.config.base_url);
        let text = post_json(&self.client, &url, self.config.api_key.as_deref(), &[], &body, policy)
            .await
            .map_err(|error| Error::Unavailable(format!("embedder {}: {error}", self.config.model)))?;
        let parsed: EmbeddingsResponse = serde_json::from_str(&text)
            .map_err(|error| Error::Unavailable(format!("embedder returned malformed JSON: {error}")))?;
        if parsed.data.len() != texts.len() {
            return Err(Error::Unavailable(format!(
                "embedder returned {} vectors for {} texts",
                parsed.data.len(),
                texts.len()
            )));
        }
        let mut items = parsed.data;
        if items.iter().all(|item| item.index.is_some()) {
            items.sort_by_key(|item| item.index);
        }
        let mut vectors = Vec::with_capacity(items.len());
        for item in items {
            if item.embedding.len() != self.config.dimensions {
                return Err(Error::FailedPrecondition(format!(
                    "embedder model {} returned {} dimensions, configured {}",
                    self.config.model,
                    item.embedding.len(),
                    self.config.dimensions
                )));
            }
            let mut vector = item.embedding;
            normalize(&mut vector);
            vectors.push(vector);
        }
        Ok(vectors)
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.config.batch_size.max(1)) {
            vectors.extend(self.embed_batch(batch).await?);
        }
        Ok(vectors)
    }

    fn dimensions(&self) -> usize {
        self.config.dimensions
    }

    fn model_id(&self) -> String {
        format!("openai-compatible/{}", self.config.model)
    }
}
