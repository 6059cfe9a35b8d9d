//! The public roncho.v1 API, generated from `proto/roncho/v1` at build time.
//!
//! The `.proto` files are the contract; this crate only compiles them. The
//! encoded descriptor set is exported for gRPC server reflection.

pub mod codec;

/// Generated messages, clients and servers of package `roncho.v1`.
pub mod v1 {
    #![allow(clippy::all, reason = "generated code")]
    tonic::include_proto!("roncho.v1");
}

/// Encoded `FileDescriptorSet` of every roncho.v1 file, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("roncho_descriptor");
