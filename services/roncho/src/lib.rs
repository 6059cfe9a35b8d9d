//! The `roncho` binary: one process that runs any set of roles.
//!
//! # Layout
//! - [`config`]: typed configuration, layered defaults < file < env < flags.
//! - [`server`]: the gRPC server of the chosen roles, health and reflection.
//! - [`status`]: `roncho status` checks.
//! - [`wiring`]: the ports a configuration asks for.

pub mod config;
pub mod metrics;
pub mod server;
pub mod status;
pub mod wiring;
