//! Test support: an embedder that can be switched off, like a provider
//! going down, to show that writes and search survive outages; and the
//! hashing embedder at a real model's query cost, for benchmarks at scale.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use roncho_core::embed::Embedder;
use roncho_core::{Error, Result};

use crate::hashing::TestHashingEmbedder;

/// The hashing embedder behind an on/off switch; it starts down.
#[derive(Debug)]
pub struct SwitchableTestEmbedder {
    pub inner: TestHashingEmbedder,
    up: AtomicBool,
}

impl SwitchableTestEmbedder {
    /// Returns a switched-off embedder of `dimensions`.
    pub fn down(dimensions: usize) -> Self {
        Self {
            inner: TestHashingEmbedder::new(dimensions),
            up: AtomicBool::new(false),
        }
    }

    /// Turns the embedder on or off.
    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }
}

#[async_trait]
impl Embedder for SwitchableTestEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        if !self.up.load(Ordering::SeqCst) {
            return Err(Error::Unavailable("embedder: connection refused".into()));
        }
        self.inner.embed(texts).await
    }

    fn passages(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        self.inner.passages(text)
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    fn model_id(&self) -> String {
        self.inner.model_id()
    }
}

/// The hashing embedder's vectors at a real model's query cost: each search
/// query is embedded by `model` too, and that vector discarded. For
/// benchmarks at scales the model cannot embed in time (a million messages
/// take hours on two cores): searches then wait on the query embedding
/// they would wait on with the model, while the stored vectors stay the
/// hashing embedder's. Configured as `test-hashing` with an
/// `embedding_model_dir`; never for production.
pub struct QueryCostEmbedder {
    hashing: TestHashingEmbedder,
    model: std::sync::Arc<dyn Embedder>,
}

impl QueryCostEmbedder {
    /// Returns the hashing embedder of `dimensions`, paying `model`'s query cost.
    pub fn new(dimensions: usize, model: std::sync::Arc<dyn Embedder>) -> Self {
        Self {
            hashing: TestHashingEmbedder::new(dimensions),
            model,
        }
    }
}

#[async_trait]
impl Embedder for QueryCostEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.hashing.embed(texts).await
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.model.embed_query(text).await?;
        Ok(self.hashing.embed_one(text))
    }

    fn dimensions(&self) -> usize {
        self.hashing.dimensions()
    }

    fn model_id(&self) -> String {
        self.hashing.model_id()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Counts the queries it embeds; its vectors are never used.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    #[async_trait]
    impl Embedder for Counting {
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(vec![vec![1.0; 3]; texts.len()])
        }

        fn dimensions(&self) -> usize {
            3
        }

        fn model_id(&self) -> String {
            "counting".into()
        }
    }

    #[tokio::test]
    async fn queries_pay_the_model_and_get_the_hashing_vectors() {
        let model = Arc::new(Counting::default());
        let embedder = QueryCostEmbedder::new(64, model.clone());
        let hashing = TestHashingEmbedder::new(64);
        let query = embedder.embed_query("coffee in the morning").await.unwrap();
        assert_eq!(query, hashing.embed_one("coffee in the morning"));
        assert_eq!(model.0.load(Ordering::SeqCst), 1);
        let stored = embedder.embed(&["a".into(), "b".into()]).await.unwrap();
        assert_eq!(stored, hashing.embed(&["a".into(), "b".into()]).await.unwrap());
        assert_eq!(model.0.load(Ordering::SeqCst), 1, "stored texts never reach the model");
        assert_eq!((embedder.dimensions(), embedder.model_id()), (64, hashing.model_id()));
    }
}
