//! The `Embedder` port: text → vectors, for semantic search.

use async_trait::async_trait;

use crate::Result;

/// Turns texts into unit-length vectors of a fixed dimension.
#[async_trait]
pub trait Embedder: Send + Sync + 'static {
    /// Returns one vector per text, in order, each of [`Embedder::dimensions`] floats.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;
    /// Returns the vector of one search query. By default what
    /// [`Embedder::embed`] returns; an embedder may answer from a cheaper
    /// copy of its model whose vectors agree with its own (a query waits on
    /// one short text, while stored texts come in batches).
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.embed(&[text.to_owned()]).await?.pop().unwrap_or_default())
    }
    /// Returns one vector per text, as [`Embedder::embed`] does, for work
    /// nobody waits on (the deriver's check for facts it already holds):
    /// an embedder that shares its cores runs it after search queries and
    /// stored texts, which search waits on. By default [`Embedder::embed`].
    async fn embed_background(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.embed(texts).await
    }
    /// Returns the byte ranges of `text` embedded one by one, in order: the
    /// whole text when the model reads it at once; else passages the model
    /// reads whole, each overlapping the one before so that no sentence is
    /// only ever read cut in two, the first starting at 0 (a text's start
    /// is also what [`Embedder::embed`] reads of the whole). By default one
    /// passage, the whole text (a model whose window holds any text roncho
    /// stores).
    fn passages(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        whole(text)
    }
    /// Returns the length of every vector this embedder produces.
    fn dimensions(&self) -> usize;
    /// Returns the model's identity (provider and name), recorded beside vectors.
    fn model_id(&self) -> String;
}

/// One passage: all of `text`.
pub fn whole(text: &str) -> Vec<std::ops::Range<usize>> {
    std::iter::once(0..text.len()).collect()
}

/// Returns the dot product of two equally long vectors. Eight independent
/// accumulators let the compiler use SIMD lanes (a single running sum must
/// stay sequential); this is the inner loop of exact vector search. Inlined
/// across crates, so a caller compiled for a wider CPU gets wider lanes.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut sums = [0.0_f32; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..LANES {
            sums[lane] += x[lane] * y[lane];
        }
    }
    sums.iter().sum::<f32>() + tail
}

/// Returns the cosine similarity of two vectors (their dot product when unit-length).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot = dot(a, b);
    let norm_a: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let norm_b: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm_a == 0.0 || norm_b == 0.0 {
        0.0
    } else {
        dot / (norm_a * norm_b)
    }
}

/// Scales `vector` to unit length in place (a zero vector stays zero).
pub fn normalize(vector: &mut [f32]) {
    let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for value in vector.iter_mut() {
            *value /= norm;
        }
    }
}

#[cfg(feature = "testing")]
pub mod contract;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_the_plain_sum_at_every_length() {
        for length in [0, 1, 7, 8, 9, 384, 385] {
            let a: Vec<f32> = (0..length).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..length).map(|i| (i as f32 * 0.11).cos()).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - plain).abs() < 1e-4, "length {length}");
        }
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!((cosine(&v, &[0.6, 0.8]) - 1.0).abs() < 1e-6);
    }
}
