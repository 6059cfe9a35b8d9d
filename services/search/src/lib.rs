//! Search and the memory views built on it, shared by every reader of
//! memory (recall, the dialectic, the agents' tools, the dreamer) so none of
//! them imports another.
//!
//! # Layout
//! - [`SearchStore`]: the ports of the store that search reads.
//! - [`Semantic`]: an embedder and the vectors it made.
//! - [`messages`]: hybrid message search (full text and vectors, fused).
//! - [`days`]: the calendar days a query names.
//! - `preferred`: the peers and days a query prefers, as search fuses them.
//! - [`context`]: representations, peer cards, session context (honcho-v3 §3).
//! - [`queries`]: the embeddings of recent queries.

pub mod context;
pub mod days;
pub mod messages;
mod preferred;
pub mod queries;

use std::sync::Arc;

use roncho_core::Result;
use roncho_core::embed::Embedder;
use roncho_core::store::{Memory, Messages, Scopes, TextSearch, Workspaces};
use roncho_core::store_view;
use roncho_core::vector::VectorStore;

store_view! {
    /// The store as search and the memory views read it: messages and
    /// their words, memory, scopes, and peers (named in a query).
    pub trait SearchStore: Workspaces, Messages, Memory, Scopes, TextSearch
}

/// The semantic half of search: an embedder and the vectors it made, and
/// the embeddings of recent queries.
#[derive(Clone)]
pub struct Semantic {
    pub embedder: Arc<dyn Embedder>,
    pub vectors: Arc<dyn VectorStore>,
    queries: Arc<queries::QueryCache>,
}

impl std::fmt::Debug for Semantic {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Semantic").finish_non_exhaustive()
    }
}

impl Semantic {
    pub fn new(embedder: Arc<dyn Embedder>, vectors: Arc<dyn VectorStore>) -> Self {
        Self {
            embedder,
            vectors,
            queries: Arc::default(),
        }
    }

    /// Returns the embedding of one query of `workspace_id`, from the
    /// query cache when the same text was embedded there lately.
    pub async fn embed_query(&self, workspace_id: &str, query: &str) -> Result<Vec<f32>> {
        if let Some(vector) = self.queries.get(workspace_id, query) {
            return Ok(vector.to_vec());
        }
        let vector = self.embedder.embed_query(query).await?;
        if !vector.is_empty() {
            self.queries.put(workspace_id, query, Arc::from(vector.as_slice()));
        }
        Ok(vector)
    }
}
