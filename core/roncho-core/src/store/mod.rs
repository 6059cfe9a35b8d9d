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
//! - [`DerivationHealth`]: whether a workspace's derivations keep producing nothing.
//! - [`Scopes`]: scopes, their sessions and backfills.
//! - [`Import`]: data carried over from another server.
//! - [`Tenants`]: which tenant holds each workspace (multi-tenant servers).
//!
//! [`Store`] is all of them, what one backend implements. A service names
//! the ports it uses in a view of its own ([`store_view!`](crate::store_view)),
//! so its constructor takes nothing more.

mod derivation;
mod dreams;
mod erasure;
mod health;
mod import;
mod memory;
mod messages;
mod scopes;
mod search;
mod sync;
mod tenants;
mod traces;
mod webhooks;
mod workspaces;

pub use derivation::{DEGRADED_AFTER, DerivationHealth, DerivationRecord, Outcome};
pub use dreams::DreamLedger;
pub use erasure::{ERASURE_CHUNK, Erasure, erase};
pub use health::{Health, StoreInfo};
pub use import::Import;
pub use memory::Memory;
pub use messages::Messages;
pub use scopes::{MAX_SESSIONS_PER_SCOPE, Scopes};
pub use search::{GAP_COUNT_LIMIT, TextSearch};
pub use sync::{SyncLedger, TermCounter};
pub use tenants::{Creator, Holder, OPERATOR, Tenants, creating_as, creator};
pub use traces::{TRACE_RETENTION_MICROS, Traces};
pub use webhooks::Webhooks;
pub use workspaces::{SessionPeers, Workspaces};

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
    pub trait Store: Health, Workspaces, Messages, Erasure, Webhooks, Memory, TextSearch, SyncLedger, DreamLedger, DerivationHealth, Scopes, Import, Tenants
}
