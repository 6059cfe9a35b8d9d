//! The `roncho` binary: one process that runs any set of roles.
//!
//! # Layout
//! - [`browsers`]: the browser rules in front of every HTTP router.
//! - [`config`]: typed configuration, layered defaults < file < env < flags.
//! - [`connections`]: connection-level limits of every listener.
//! - [`domain`]: the domain services of the roles, built once for every wire.
//! - [`import`]: `roncho import --from-honcho`, a Honcho v3 database into the store.
//! - [`local_key`]: a key for a loopback server, kept in the data directory.
//! - [`metrics`]: Prometheus metrics at `/metrics`.
//! - [`node`]: a process started in named steps (`roncho serve`).
//! - [`pdf`]: PDF text in a memory- and time-limited child process.
//! - [`observe`]: spans and metrics of every gRPC request and LLM call.
//! - [`telemetry`]: logs and OpenTelemetry trace export (OTLP).
//! - [`server`]: the listeners: gRPC, REST and MCP side by side, through one gate.
//! - [`status`]: `roncho status` checks.
//! - [`tls`]: TLS and mutual TLS on the gRPC listener, reloaded as files change.
//! - [`wiring`]: the ports a configuration asks for.

pub mod browsers;
pub mod config;
pub mod connections;
pub mod dir_lock;
pub mod domain;
pub mod import;
pub mod local_key;
pub mod metrics;
pub mod node;
pub mod observe;
pub mod oneshot;
pub mod pdf;
pub mod server;
pub mod status;
pub mod telemetry;
pub mod tls;
pub mod transfer;
pub mod wiring;
