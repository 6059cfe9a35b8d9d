//! Embedders: implementations of `roncho_core::embed::Embedder`.
//!
//! # Layout
//! - [`openai`]: any OpenAI-compatible `/v1/embeddings` server (OpenAI,
//!   Ollama, vLLM, TEI, LM Studio), batched, with retries.
//! - [`bert`] (feature `candle`): a local BERT sentence model such as
//!   all-MiniLM-L6-v2, in process, no network at run time; [`int8`], the
//!   8-bit copy of its encoder that embeds search queries.
//! - [`hashing`]: a deterministic hashing embedder, for tests only.
//! - [`testing`]: an embedder that can be switched off, for outage tests;
//!   the hashing embedder at a real model's query cost, for benchmarks.
//! - [`cache`]: a cache of embeddings of identical text in front of any of them.

#[cfg(feature = "candle")]
pub mod bert;
pub mod cache;
pub mod hashing;
#[cfg(feature = "candle")]
pub mod int8;
pub mod openai;
pub mod testing;
