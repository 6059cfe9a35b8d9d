//! The gRPC edge over the gate ([`roncho_gate`]): wire messages converted
//! to domain requests and replies back ([`convert`], [`json`]), domain
//! errors mapped to statuses in one place ([`error`]), and the gRPC
//! servers ([`grpc`]) generated over the services' domain traits, behind
//! the gate's door.
//!
//! # Layout
//! - [`convert`]: `roncho.v1` ⇄ domain.
//! - `records`: export records, import counts, evidence and reasoning traces → `roncho.v1`.
//! - [`json`]: `google.protobuf.Struct` ⇄ JSON.
//! - [`error`]: domain error → gRPC status.
//! - [`grpc`]: the gRPC servers and the door's layer.

pub mod convert;
pub mod error;
pub mod grpc;
pub mod json;
mod records;
