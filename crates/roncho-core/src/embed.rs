//! The `Embedder` port: text → vectors, for semantic search.

use async_trait::async_trait;

use crate::Result;

/// Turns texts into unit-length vectors of a fixed dimension.
#[async_trait]
pub trait Embedder: Send + Sync + 'static {
    /// Returns one vector per text, in order, each of [`Embedder::dimensions`] floats.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>>;
    /// Returns the length of every vector this embedder produces.
    fn dimensions(&self) -> usize;
    /// Returns the model's identity (provider and name), recorded beside vectors.
    fn model_id(&self) -> String;
}

/// Returns the cosine similarity of two vectors (their dot product when unit-length).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
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
