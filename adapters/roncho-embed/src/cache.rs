//! `CachedEmbedder`: embeddings of identical text are computed once.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use roncho_core::Result;
use roncho_core::embed::Embedder;

/// Default number of cached texts.
pub const DEFAULT_CAPACITY: usize = 20_000;

/// Cached vectors by text hash, with the text to rule out collisions.
type Entries = HashMap<u64, (String, Arc<Vec<f32>>)>;

/// Wraps an embedder with a bounded cache keyed by the text.
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    capacity: usize,
    entries: Mutex<Entries>,
}

impl std::fmt::Debug for CachedEmbedder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("CachedEmbedder")
            .field("model", &self.inner.model_id())
            .finish_non_exhaustive()
    }
}

fn key(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

impl CachedEmbedder {
    /// Returns `inner` behind a cache of at most `capacity` texts.
    pub fn new(inner: Arc<dyn Embedder>, capacity: usize) -> Self {
        Self {
            inner,
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, text: &str) -> Option<Arc<Vec<f32>>> {
        let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .get(&key(text))
            .filter(|(stored, _)| stored == text)
            .map(|(_, vector)| vector.clone())
    }
}

impl CachedEmbedder {
    /// The vectors of `texts`, the missing ones from the inner embedder,
    /// in the background when `background`.
    async fn embed_cached(&self, texts: &[String], background: bool) -> Result<Vec<Vec<f32>>> {
        let mut results: Vec<Option<Arc<Vec<f32>>>> = texts.iter().map(|text| self.cached(text)).collect();
        let missing: Vec<String> = texts
            .iter()
            .zip(&results)
            .filter(|(_, hit)| hit.is_none())
            .map(|(text, _)| text.clone())
            .collect();
        if !missing.is_empty() {
            let computed = match background {
                true => self.inner.embed_background(&missing).await?,
                false => self.inner.embed(&missing).await?,
            };
            let mut computed = computed.into_iter().map(Arc::new);
            let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for (text, slot) in texts.iter().zip(results.iter_mut()) {
                if slot.is_none() {
                    let vector = computed.next().unwrap_or_default();
                    // Crude bound: forget everything when full; hot texts come back at once.
                    if entries.len() >= self.capacity {
                        entries.clear();
                    }
                    entries.insert(key(text), (text.clone(), vector.clone()));
                    *slot = Some(vector);
                }
            }
        }
        Ok(results
            .into_iter()
            .map(|vector| vector.map(|v| v.as_ref().clone()).unwrap_or_default())
            .collect())
    }
}

#[async_trait]
impl Embedder for CachedEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.embed_cached(texts, false).await
    }

    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.embed_cached(texts, true).await
    }

    /// Not cached here: a query's vector may come from a cheaper copy of the
    /// model than a stored text's, and search keeps its own query cache.
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.inner.embed_query(text).await
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::hashing::TestHashingEmbedder;

    struct Counting(TestHashingEmbedder, AtomicUsize);

    #[async_trait]
    impl Embedder for Counting {
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
            self.1.fetch_add(texts.len(), Ordering::SeqCst);
            self.0.embed(texts).await
        }
        fn dimensions(&self) -> usize {
            self.0.dimensions()
        }
        fn model_id(&self) -> String {
            self.0.model_id()
        }
    }

    #[tokio::test]
    async fn identical_texts_are_embedded_once() {
        let counting = Arc::new(Counting(TestHashingEmbedder::new(32), AtomicUsize::new(0)));
        let cache = CachedEmbedder::new(counting.clone(), 100);
        let first = cache.embed(&["a b".into(), "c".into()]).await.unwrap();
        let second = cache.embed(&["c".into(), "a b".into(), "d".into()]).await.unwrap();
        assert_eq!(counting.1.load(Ordering::SeqCst), 3);
        assert_eq!(first[0], second[1]);
        assert_eq!(first[1], second[0]);
    }
}
