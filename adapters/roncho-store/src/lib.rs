//! The relational store: one implementation of `roncho_core::store::Store`
//! over sqlx, speaking two dialects — SQLite for the embedded mode and
//! Postgres for the distributed mode (see docs/adr/0002).
//!
//! # Layout (each floor imports only the floors below it)
//! - ground: [`sql`] (SQL building with numbered binds and filter rendering),
//!   `rows` (decoding rows), `names`, and `db` (the pool, SQLite's writer,
//!   write transactions, error mapping); [`open`] (connecting, migrations).
//! - `tx`: transaction-level helpers several ports share (entities, message
//!   writes, tasks, idempotency keys, conclusions, vector sync state).
//! - `ports`: one file per port of `roncho_core::store`, each its own `impl`.
//! - `queue`: the SQL work queue (the embedded mode's durable queue);
//!   `vectors` and `text_index`: the exact vector store over the same database.
//! - [`testing`]: fresh databases for integration tests.

mod db;
mod names;
mod open;
mod ports;
mod queue;
mod rows;
pub mod sql;
pub mod testing;
mod text_index;
mod tx;
mod vectors;

pub use db::SqlStore;
pub use open::{EMBEDDED_FILE, StoreOptions, connect, latest_schema_version, migrate, migrate_to, redact_url};
pub use ports::SESSION_TEXT_SCAN;
pub use queue::SqlWorkQueue;
pub use sql::Dialect;
pub use tx::vectors::TEXT_TAIL;
pub use vectors::SqlVectorStore;
