//! The `[search]` section: where embeddings come from and where vectors live.

use std::path::{Path, PathBuf};

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::secret::Secret;

section! {
    /// `[search]` as one layer gives it.
    SearchLayer {
        embedding_provider: EmbeddingProvider,
        embedding_model_dir: PathBuf,
        embedding_base_url: String,
        embedding_model: String,
        embedding_dimensions: usize,
        embedding_api_key: String,
        embedding_query_precision: QueryPrecision,
        embedding_document_precision: QueryPrecision,
        qdrant_url: String,
        qdrant_api_key: String,
        qdrant_collection: String,
    }
}

/// Where embeddings for semantic search come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EmbeddingProvider {
    /// The local model when its directory is configured or found, else none.
    Auto,
    /// A local BERT model directory (`embedding_model_dir`).
    Local,
    /// An OpenAI-compatible `/v1/embeddings` server.
    Openai,
    /// No semantic search: full text only, reported as degraded.
    None,
    /// The deterministic hashing embedder: for tests, never production.
    TestHashing,
}

/// How the local model embeds search queries, or stored texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueryPrecision {
    /// An 8-bit copy of the encoder where the CPU has AVX-512 VNNI or AVX2 (else float).
    Int8,
    /// The float model.
    Float,
}

/// Where embeddings come from and where vectors live.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchConfig {
    pub embedding: EmbeddingConfig,
    /// Qdrant for vectors; `None` keeps them in the relational store (exact search).
    pub qdrant: Option<QdrantConfig>,
}

/// Embedder settings.
#[derive(Clone, PartialEq, Serialize)]
pub struct EmbeddingConfig {
    pub provider: EmbeddingProvider,
    /// Local model directory; with `auto`, also searched in `<data_dir>/models`,
    /// `$RONCHO_CACHE/models` and `~/.cache/roncho/models`.
    pub model_dir: Option<PathBuf>,
    pub base_url: String,
    pub model: String,
    pub dimensions: Option<usize>,
    pub api_key: Option<Secret>,
    /// How the local model embeds search queries.
    pub query_precision: QueryPrecision,
    /// How the local model embeds stored texts (messages, passages, conclusions).
    pub document_precision: QueryPrecision,
    /// Directories `auto` looks in for a local model, in order: each place's
    /// bge-small-en-v1.5 (the default), then its all-MiniLM-L6-v2.
    pub search_dirs: Vec<PathBuf>,
}

/// Where the distributed mode keeps vectors.
#[derive(Clone, PartialEq, Serialize)]
pub struct QdrantConfig {
    /// gRPC URL, e.g. `http://qdrant:6334`.
    pub url: String,
    pub collection: String,
    pub api_key: Option<Secret>,
}

debug_redacted!(EmbeddingConfig, QdrantConfig);

/// The local models `auto` finds, best first: bge-small-en-v1.5
/// (`scripts/fetch-bge-small.sh`; recall@10 0.768 against MiniLM's 0.738 on
/// the LoCoMo development set, at twice the embedding cost:
/// docs/benchmarks.md), then all-MiniLM-L6-v2 (`scripts/fetch-minilm.sh`).
pub const LOCAL_MODELS: [&str; 2] = ["bge-small-en-v1.5", "all-MiniLM-L6-v2"];

impl SearchLayer {
    /// `auto` looks for a local model in `data_dir`'s `models`, then in
    /// each of `caches`' (`$RONCHO_CACHE`, `~/.cache/roncho`).
    pub(super) fn resolve(self, data_dir: &Path, caches: Vec<PathBuf>) -> anyhow::Result<SearchConfig> {
        let places =
            std::iter::once(data_dir.join("models")).chain(caches.into_iter().map(|cache| cache.join("models")));
        let search_dirs = places
            .flat_map(|place| LOCAL_MODELS.map(|model| place.join(model)))
            .collect();
        let embedding = EmbeddingConfig {
            provider: self.embedding_provider.unwrap_or(EmbeddingProvider::Auto),
            model_dir: self.embedding_model_dir,
            base_url: self
                .embedding_base_url
                .unwrap_or_else(|| "https://api.openai.com/v1".to_owned()),
            model: self
                .embedding_model
                .unwrap_or_else(|| "text-embedding-3-small".to_owned()),
            dimensions: self.embedding_dimensions,
            api_key: self.embedding_api_key.as_ref().map(Secret::from),
            query_precision: self.embedding_query_precision.unwrap_or(QueryPrecision::Int8),
            document_precision: self.embedding_document_precision.unwrap_or(QueryPrecision::Int8),
            search_dirs,
        };
        if embedding.provider == EmbeddingProvider::Openai && embedding.dimensions.is_none() {
            bail!(
                "embedding_dimensions is required with the openai embedding provider (e.g. 1536 for text-embedding-3-small)"
            );
        }
        if embedding.provider == EmbeddingProvider::Local && embedding.model_dir.is_none() {
            bail!("embedding_model_dir is required with the local embedding provider");
        }
        if let Some(url) = &self.qdrant_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            bail!("qdrant_url must be an http:// or https:// URL of Qdrant's gRPC port (6334), not `{url}`");
        }
        let qdrant = self.qdrant_url.map(|url| QdrantConfig {
            url,
            collection: self.qdrant_collection.unwrap_or_else(|| "roncho".to_owned()),
            api_key: self.qdrant_api_key.as_ref().map(Secret::from),
        });
        Ok(SearchConfig { embedding, qdrant })
    }
}
