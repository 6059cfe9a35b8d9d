//! `TestHashingEmbedder`: words hashed into a fixed number of signed buckets.
//! Deterministic and instant, with just enough meaning (shared words make
//! similar vectors) for tests of the semantic path. Never for production:
//! it knows nothing of synonyms.

use async_trait::async_trait;
use roncho_core::Result;
use roncho_core::embed::{Embedder, normalize, whole};

/// The deterministic test embedder.
#[derive(Debug, Clone)]
pub struct TestHashingEmbedder {
    dimensions: usize,
    /// Words read of a text, as a real model reads a bounded number of
    /// tokens: a longer text is embedded as passages. Unbounded if `None`.
    window: Option<usize>,
}

impl TestHashingEmbedder {
    /// Returns an embedder of `dimensions` (at least 8).
    pub fn new(dimensions: usize) -> Self {
        Self {
            dimensions: dimensions.max(8),
            window: None,
        }
    }

    /// Returns the embedder reading the first `words` words of a text
    /// (at least 4), and cutting longer texts into passages of that many
    /// words, each repeating the last quarter of the one before.
    pub fn with_window(mut self, words: usize) -> Self {
        self.window = Some(words.max(4));
        self
    }

    /// Returns the vector of one text.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut vector = vec![0.0f32; self.dimensions];
        for (_, word) in words(text).take(self.window.unwrap_or(usize::MAX)) {
            let hash = fnv1a(word.to_lowercase().as_bytes());
            let index = (hash % self.dimensions as u64) as usize;
            vector[index] += if hash >> 63 == 0 { 1.0 } else { -1.0 };
        }
        normalize(&mut vector);
        vector
    }
}

/// The words of `text` (runs of letters and digits) with their byte offsets.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(move |word| (word.as_ptr() as usize - text.as_ptr() as usize, word))
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

    fn passages(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        let spans: Vec<(usize, usize)> = words(text).map(|(at, word)| (at, at + word.len())).collect();
        let Some(window) = self.window.filter(|&window| spans.len() > window) else {
            return whole(text);
        };
        let stride = window - window / 4;
        let mut ranges = Vec::new();
        let mut first = 0;
        loop {
            let last = (first + window).min(spans.len()) - 1;
            ranges.push(if first == 0 { 0 } else { spans[first].0 }..spans[last].1);
            if last + 1 == spans.len() {
                return ranges;
            }
            first += stride;
        }
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

    #[test]
    fn a_window_reads_the_first_words_and_passages_cover_the_rest() {
        let embedder = TestHashingEmbedder::new(64).with_window(8);
        let text = (0..30).map(|n| format!("w{n}")).collect::<Vec<_>>().join(" ");
        assert_eq!(
            embedder.embed_one(&text),
            embedder.embed_one(&text[..text.find(" w8").unwrap()])
        );
        let passages = embedder.passages(&text);
        assert_eq!(passages[0].start, 0);
        assert_eq!(passages.last().unwrap().end, text.len());
        for pair in passages.windows(2) {
            assert!(pair[1].start < pair[0].end, "passages overlap: {passages:?}");
        }
        for passage in &passages {
            assert!(
                words(&text[passage.clone()]).count() <= 8,
                "{:?}",
                &text[passage.clone()]
            );
        }
        assert_eq!(embedder.passages("a b c"), whole("a b c"));
        assert_eq!(TestHashingEmbedder::new(64).passages(&text), whole(&text));
    }
}
