//! Search and the memory views built on it, shared by every reader of
//! memory (recall, the dialectic, the agents' tools, the dreamer) so none of
//! them imports another.
//!
//! # Layout
//! - [`Semantic`]: an embedder and the vectors it made.
//! - [`messages`]: hybrid message search (full text and vectors, fused).
//! - [`context`]: representations, peer cards, session context (honcho-v3 §3).

pub mod context;
pub mod messages;

use std::sync::Arc;

use roncho_core::Result;
use roncho_core::embed::Embedder;
use roncho_core::vector::VectorStore;

/// The semantic half of search: an embedder and the vectors it made.
#[derive(Clone)]
pub struct Semantic {
    pub embedder: Arc<dyn Embedder>,
    pub vectors: Arc<dyn VectorStore>,
}

impl std::fmt::Debug for Semantic {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Semantic").finish_non_exhaustive()
    }
}

impl Semantic {
    /// Returns the embedding of one query.
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        Ok(self
            .embedder
            .embed(&[query.to_owned()])
            .await?
            .pop()
            .unwrap_or_default())
    }
}
