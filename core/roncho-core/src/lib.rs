//! roncho's domain: resource types, input validation, the filter grammar,
//! the ports (`Store`, `VectorStore`, `WorkQueue`, `Embedder`) and the
//! domain error. It knows no wire: edges (`roncho-api`) convert.
//!
//! # Layout
//! - `arbitrary` (feature `testing`): generators of client input for property tests.
//! - [`auth`]: the authenticated caller.
//! - [`embed`]: the `Embedder` port (and, with feature `testing`, its contract suite).
//! - [`llm`]: the `Llm` port: chat requests, streamed replies, tools, structured output.
//! - [`derivation`]: which background work a new message creates (Honcho's observer rules).
//! - [`error`]: the domain error.
//! - [`export`]: a workspace as JSON lines (`roncho export`, `roncho import`).
//! - [`model`]: workspaces, peers, sessions, messages, webhooks, pages.
//! - [`queue`]: the `WorkQueue` port (and, with feature `testing`, its contract suite).
//! - [`validate`]: Honcho v3 limits (ids, content, metadata, batches).
//! - [`filter`]: parsing of Honcho's filter grammar into a typed tree.
//! - [`search`]: query text → full-text search terms.
//! - [`representation`]: Honcho's working representation and its markdown.
//! - [`trace`]: W3C trace context carried from requests to queued work.
//! - [`webhook`]: webhook events' envelope and the `WebhookDelivery` port.
//! - [`tokens`]: o200k_base token counting.
//! - [`files`]: file upload decoding and chunking into messages.
//! - [`store`]: the relational `Store` port both backends implement.
//! - [`vector`]: the `VectorStore` port (and, with feature `testing`, its contract suite).
//! - [`activity`]: client writes in flight, for background work that yields to them.

pub mod activity;
#[cfg(feature = "testing")]
pub mod arbitrary;
pub mod auth;
pub mod derivation;
pub mod embed;
pub mod error;
pub mod export;
pub mod files;
pub mod filter;
pub mod idempotency;
pub mod lexical;
pub mod llm;
pub mod model;
pub mod queue;
pub mod representation;
pub mod search;
pub mod store;
pub mod tokens;
pub mod trace;
pub mod validate;
pub mod vector;
pub mod webhook;

pub use auth::Caller;
pub use error::{Error, Result};
