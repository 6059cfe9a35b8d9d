//! The API edge: what every wire (gRPC today; REST and MCP next) shares
//! between a request and the domain services. It authenticates callers
//! ([`keys`]), authorizes each call by one table ([`authz`]), converts wire
//! messages to domain requests and replies back ([`convert`], [`json`]), and
//! maps domain errors to statuses in one place ([`error`]). The gRPC
//! servers ([`grpc`]) are generated over the services' domain traits.
//!
//! # Layout
//! - [`admission`]: requests in flight, time-outs, per-workspace rates.
//! - [`authz`]: the authorization table and its decision.
//! - [`keys`]: API keys (HS256 JWTs), verification and minting.
//! - [`convert`]: `roncho.v1` ⇄ domain.
//! - [`json`]: `google.protobuf.Struct` ⇄ JSON.
//! - [`error`]: domain error → gRPC status.
//! - [`grpc`]: the gRPC servers and the authentication layer.

pub mod admission;
pub mod authz;
pub mod convert;
pub mod error;
pub mod grpc;
pub mod json;
pub mod keys;
