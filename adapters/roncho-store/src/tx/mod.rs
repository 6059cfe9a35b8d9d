//! Transaction-level helpers several ports share: each takes the caller's
//! connection, so what it writes commits with the caller's transaction.
//! Nothing here implements a port, and nothing here imports a port.
//!
//! - [`entities`]: workspaces, peers, sessions, members and scopes read or created in a transaction.
//! - [`writes`]: appending messages, with SQLite's group commit.
//! - [`tasks`]: background work and webhook events queued with the write that causes them.
//! - [`idempotency`]: client idempotency keys claimed in the write's transaction.
//! - [`conclusions`]: inserting conclusions with live sources.
//! - [`vectors`]: sync state and tombstones of vectors, and the words indexed.
//! - [`scopes`]: a session leaving a scope.
//! - [`erasing`]: what an erasure still running has yet to remove, kept out of reads.

pub(crate) mod conclusions;
pub(crate) mod entities;
pub(crate) mod erasing;
pub(crate) mod idempotency;
pub(crate) mod scopes;
pub(crate) mod tasks;
pub(crate) mod vectors;
pub(crate) mod writes;
