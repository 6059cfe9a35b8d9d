//! Search and the memory views built on it, shared by every reader of
//! memory (recall, the dialectic, the agents' tools, the dreamer) so none of
//! them imports another.
//!
//! # Layout
//! - [`SearchStore`]: the ports of the store that search reads.
//! - [`Semantic`]: an embedder and the vectors it made.
//! - [`messages`]: hybrid message search (full text and vectors, fused).
//! - [`context`]: representations, peer cards, session context (honcho-v3 §3).

pub mod context;
pub mod messages;

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
