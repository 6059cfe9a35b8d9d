//! `TestHashingEmbedder`: words hashed into a fixed number of signed buckets.
//! Deterministic and instant, with just enough meaning (shared words make
//! similar vectors) for tests of the semantic path. Never for production:
//! it knows nothing of synonyms.

use async_trait::async_trait;
use roncho_core::Result;
use roncho_core::embed::{Embedder, normalize};

/// The deterministic test embedder.
#[derive(Debug, Clone)]
pub struct TestHashingEmbedder {
    dimensions: usize,
}

impl TestHashingEmbedder {
    /// Returns an embedder of `dimensions` (at least 8).
    pub fn new(dimensions: usize) -> Self {
        Self {
            dimensions: dimensions.max(8),
        }
    }

    /// Returns the vector of one text.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dimensions];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
        {
            let hash = fnv1a(word.to_lowercase().as_bytes());
            let index = (hash % self.dimensions as u64) as usize;
            vector[index] += if hash >> 63 == 0 { 1.0 } else { -1.0 };
        }
        normalize(&mut vector);
        vector
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[async_trait]
impl Embedder for TestHashingEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|text| self.embed_one(text)).collect())
    }

    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn model_id(&self) -> String {
        format!("test-hashing/{}", self.dimensions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roncho_core::embed::cosine;

    #[test]
    fn shared_words_make_similar_unit_vectors() {
        let embedder = TestHashingEmbedder::new(256);
        let coffee = embedder.embed_one("I drink coffee every morning");
        let again = embedder.embed_one("coffee in the morning");
        let other = embedder.embed_one("kubernetes cluster upgrade");
        assert!((coffee.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(cosine(&coffee, &again) > cosine(&coffee, &other));
        assert_eq!(coffee, embedder.embed_one("I drink coffee every morning"));
    }
}
