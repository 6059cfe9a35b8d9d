//! One file per port of `roncho_core::store`, each with its own `impl` for
//! [`crate::SqlStore`]; a port's file imports the floors below (the
//! transaction helpers in [`crate::tx`], the ground floor in [`crate::db`])
//! and never another port's.

mod derivation;
mod dreams;
mod erasure;
mod health;
mod import;
mod memory;
mod messages;
mod scopes;
mod search;

pub use search::SESSION_TEXT_SCAN;
mod sync;
mod tenants;
mod traces;
mod webhooks;
mod workspaces;
