//! The relational store: one implementation of `roncho_core::store::Store`
//! over sqlx, speaking two dialects — SQLite for the embedded mode and
//! Postgres for the distributed mode (see docs/adr/0002).
//!
//! # Layout
//! - [`open`]: connecting, pragmas, migrations.
//! - [`sql`]: SQL building with numbered binds and filter rendering.
//! - `queue`: the SQL work queue (the embedded mode's durable queue).
//! - `recall`: context, search, conclusions and peer cards.
//! - `rows`: decoding rows into domain types.
//! - `store`: the `Store` implementation.
//! - `sync`: vector sync state and tombstones.
//! - `vectors`: the exact vector store over the same database.
//! - `webhooks`: webhook events queued as work, `queue.empty` when a unit drains.
//! - `erasure`: deletes that reach everything derived, with receipts.
//! - `scopes`: scopes, their sessions and backfills.
//! - `idempotency`: client idempotency keys claimed in the write's transaction.
//! - [`testing`]: fresh databases for integration tests.

mod erasure;
mod idempotency;
mod names;
mod open;
mod queue;
mod recall;
mod rows;
mod scopes;
pub mod sql;
mod store;
mod sync;
pub mod testing;
mod text_index;
mod vectors;
mod webhooks;

pub use open::{StoreOptions, connect, latest_schema_version, migrate, migrate_to, redact_url};
pub use queue::{SqlWorkQueue, Unpublished};
pub use recall::SESSION_TEXT_SCAN;
pub use sql::Dialect;
pub use store::SqlStore;
pub use sync::TEXT_TAIL;
pub use vectors::SqlVectorStore;
