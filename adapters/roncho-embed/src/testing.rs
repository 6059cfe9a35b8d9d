//! Test support: an embedder that can be switched off, like a provider
//! going down, to show that writes and search survive outages.

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

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    fn model_id(&self) -> String {
        self.inner.model_id()
    }
}
