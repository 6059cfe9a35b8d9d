//! Helpers shared by the gRPC service implementations of every role.

use tonic::{Response, Status};

use crate::{Error, Result};

/// What a tonic handler returns.
pub type RpcResult<T> = std::result::Result<Response<T>, Status>;

/// Returns a domain result as a gRPC reply.
pub fn reply<T>(result: Result<T>) -> RpcResult<T> {
    result.map(Response::new).map_err(Status::from)
}

/// Answers an RPC whose capability arrives with a later milestone, naming it.
pub fn not_yet<T>(capability: &'static str) -> RpcResult<T> {
    Err(Error::Unimplemented(capability).into())
}
