//! The domain error, shared by every port, and its single mapping to gRPC.

use tonic_types::{ErrorDetails, StatusExt};

/// Result of every domain operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, in terms a client can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed; `field` names the offending field.
    #[error("invalid {field}: {reason}")]
    InvalidArgument { field: String, reason: String },
    /// A referenced resource does not exist.
    #[error("{resource} `{id}` not found")]
    NotFound { resource: &'static str, id: String },
    /// The system is not in a state that allows the operation.
    #[error("{0}")]
    FailedPrecondition(String),
    /// A quota or limit was reached.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The operation belongs to a capability that is not built yet.
    #[error("{0} is not implemented yet")]
    Unimplemented(&'static str),
    /// The operation ran past its deadline (a slow model, say).
    #[error("deadline exceeded: {0}")]
    DeadlineExceeded(String),
    /// A dependency (database, queue, ...) cannot be reached.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A bug or an unexpected state of a dependency.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Returns an `InvalidArgument` error for `field`.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Returns a `NotFound` error for a resource kind and id.
    pub fn not_found(resource: &'static str, id: impl Into<String>) -> Self {
        Self::NotFound {
            resource,
            id: id.into(),
        }
    }

    /// Returns the gRPC code of this error.
    pub fn code(&self) -> tonic::Code {
        match self {
            Error::InvalidArgument { .. } => tonic::Code::InvalidArgument,
            Error::NotFound { .. } => tonic::Code::NotFound,
            Error::FailedPrecondition(_) => tonic::Code::FailedPrecondition,
            Error::ResourceExhausted(_) => tonic::Code::ResourceExhausted,
            Error::Unimplemented(_) => tonic::Code::Unimplemented,
            Error::Unavailable(_) => tonic::Code::Unavailable,
            Error::DeadlineExceeded(_) => tonic::Code::DeadlineExceeded,
            Error::Internal(_) => tonic::Code::Internal,
        }
    }
}

impl From<Error> for tonic::Status {
    fn from(error: Error) -> Self {
        let message = error.to_string();
        match &error {
            Error::InvalidArgument { field, reason } => {
                let details = ErrorDetails::with_bad_request_violation(field.clone(), reason.clone());
                tonic::Status::with_error_details(tonic::Code::InvalidArgument, message, details)
            }
            Error::Internal(_) => {
                tracing::error!(error = %message, "internal error");
                tonic::Status::new(tonic::Code::Internal, message)
            }
            other => tonic::Status::new(other.code(), message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_argument_carries_the_field_in_bad_request_details() {
        let status: tonic::Status = Error::invalid("messages[3].content", "too long").into();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        let bad_request = status.get_details_bad_request().expect("bad request details");
        assert_eq!(bad_request.field_violations[0].field, "messages[3].content");
        assert_eq!(bad_request.field_violations[0].description, "too long");
    }

    #[test]
    fn not_found_maps_to_not_found() {
        let status: tonic::Status = Error::not_found("session", "s1").into();
        assert_eq!(status.code(), tonic::Code::NotFound);
        assert_eq!(status.message(), "session `s1` not found");
    }
}
