//! The relational store, as ports by role: every durable read and write of
//! workspaces, peers, sessions, messages, memory and their ledgers, with
//! Honcho v3 semantics (see docs/adr/0015).
//!
//! Inputs are already validated (see [`crate::validate`]); implementations
//! enforce the semantics that need the data: existence, uniqueness, ordering,
//! atomicity and workspace isolation. Every operation is scoped by workspace.
//!
//! # Ports
//! - [`Health`]: backend, location, schema version, readiness.
//! - [`Workspaces`]: workspaces, peers, sessions and memberships.
//! - [`Messages`]: a session's messages and summaries.
//! - [`Erasure`]: deletes that reach everything derived, with receipts.
//! - [`Webhooks`]: webhook endpoints.
//! - [`Memory`]: conclusions and peer cards.
//! - [`TextSearch`]: full-text search over messages.
//! - [`SyncLedger`]: what the reconciler syncs to the vector store and indexes.
//! - [`DreamLedger`]: when each collection was consolidated.
//! - [`Scopes`]: scopes, their sessions and backfills.
//! - [`Import`]: data carried over from another server.
//!
//! [`Store`] is all of them, what one backend implements. A service names
//! the ports it uses in a view of its own ([`store_view!`](crate::store_view)),
//! so its constructor takes nothing more.

mod dreams;
mod erasure;
mod health;
mod import;
mod memory;
mod messages;
mod scopes;
mod search;
mod sync;
mod webhooks;
mod workspaces;

pub use dreams::DreamLedger;
pub use erasure::Erasure;
pub use health::Health;
pub use import::Import;
pub use memory::Memory;
pub use messages::Messages;
pub use scopes::Scopes;
pub use search::TextSearch;
pub use sync::SyncLedger;
pub use webhooks::Webhooks;
pub use workspaces::Workspaces;

use crate::Result;
use crate::model::{ErasureReceipt, ErasureScope, ErasureState, SessionPeerConfig};

/// Peers to add to a session with their configs, in request order.
pub type SessionPeers = Vec<(String, SessionPeerConfig)>;

/// What a store reports about itself for `roncho status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// Where the data lives, secrets redacted.
    pub location: String,
    /// The newest applied migration.
    pub schema_version: Option<i64>,
}

/// Declares a view of the store: a trait that is the given ports together,
/// implemented by everything that implements them (a backend, a test fake,
/// a wider view). A service holds `Arc<dyn ItsView>`, so what it may touch
/// is written in one line.
#[macro_export]
macro_rules! store_view {
    ($(#[$meta:meta])* $vis:vis trait $name:ident: $first:path $(, $port:path)* $(,)?) => {
        $(#[$meta])*
        $vis trait $name: $first $(+ $port)* {}
        impl<T: $first $(+ $port)* + ?Sized> $name for T {}
    };
}

store_view! {
    /// Every port: what one backend implements and the binary wires.
    pub trait Store: Health, Workspaces, Messages, Erasure, Webhooks, Memory, TextSearch, SyncLedger, DreamLedger, Scopes, Import
}

/// Most sessions in one scope: a scope's sessions are one allowlist in
/// search and memory reads.
pub const MAX_SESSIONS_PER_SCOPE: i64 = 10_000;

/// Rows an erasure removes per transaction.
pub const ERASURE_CHUNK: i64 = 500;

/// Erases a session, peer or workspace to the end, chunk by chunk.
pub async fn erase<S: Erasure + ?Sized>(store: &S, workspace_id: &str, scope: ErasureScope) -> Result<ErasureReceipt> {
    let mut receipt = store.begin_erasure(workspace_id, &scope).await?;
    while receipt.state == ErasureState::Running {
        receipt = store.continue_erasure(workspace_id, &receipt.id, ERASURE_CHUNK).await?;
    }
    Ok(receipt)
}
