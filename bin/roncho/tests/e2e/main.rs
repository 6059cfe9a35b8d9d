//! The end-to-end tests of the `roncho` binary, one module per area, in one
//! test binary: the whole stack is linked once, not once per area.
//! `support` starts in-process servers; `processes` runs `roncho` binaries.

mod processes;
mod support;

mod acknowledged;
mod admission;
mod agents_flow;
mod attack;
mod authorization;
mod boundaries;
mod cli;
mod dashboards;
mod derive_processes;
mod dialectic;
mod direct;
mod erasure;
mod erasure_crash;
mod exposure;
mod grpc;
mod hybrid;
mod import;
mod llm_deriver;
#[cfg(feature = "candle")]
mod long_message;
#[cfg(feature = "candle")]
mod mcp_bounds;
mod meaning;
mod metrics;
mod named_day;
#[cfg(target_os = "linux")]
mod priorities;
mod qdrant;
mod qdrant_ranking;
mod readiness;
mod rest;
mod status;
mod text_index;
mod tls;
mod traces;
mod transfer;
mod uploads;
mod webhooks;
mod yield_to_writes;
