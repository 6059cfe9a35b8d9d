//! The one map from domain errors to gRPC statuses (the REST edge maps the
//! same errors to Honcho's HTTP statuses, hiding internal ones alike).
//!
//! Internal errors reach the client as an opaque id; the detail (which may
//! name hosts, queries or files) goes to the log under the same id.

use roncho_core::Error;
use roncho_gate::hide_internal;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// Returns the gRPC status of a domain error.
pub fn status(error: Error) -> Status {
    match error {
        Error::InvalidArgument { field, reason } => {
            let message = format!("invalid {field}: {reason}");
            let details = ErrorDetails::with_bad_request_violation(field, reason);
            Status::with_error_details(Code::InvalidArgument, message, details)
        }
        Error::Throttled { reason, retry_after } => {
            let message = format!("{reason}; retry after {} ms", retry_after.as_millis());
            let details = ErrorDetails::with_retry_info(Some(retry_after));
            Status::with_error_details(Code::ResourceExhausted, message, details)
        }
        Error::Internal(detail) => Status::internal(hide_internal(&detail)),
        other => Status::new(code(&other), other.to_string()),
    }
}

/// Returns the gRPC code of a domain error.
pub fn code(error: &Error) -> Code {
    match error {
        Error::InvalidArgument { .. } => Code::InvalidArgument,
        Error::NotFound { .. } => Code::NotFound,
        Error::FailedPrecondition(_) => Code::FailedPrecondition,
        Error::ResourceExhausted(_) | Error::Throttled { .. } => Code::ResourceExhausted,
        Error::Unauthenticated(_) => Code::Unauthenticated,
        Error::PermissionDenied(_) => Code::PermissionDenied,
        Error::Unimplemented(_) => Code::Unimplemented,
        Error::Unavailable(_) => Code::Unavailable,
        Error::DeadlineExceeded(_) => Code::DeadlineExceeded,
        Error::Internal(_) => Code::Internal,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn invalid_argument_carries_the_field_in_bad_request_details() {
        let status = status(Error::invalid("messages[3].content", "too long"));
        assert_eq!(status.code(), Code::InvalidArgument);
        let bad_request = status.get_details_bad_request().expect("bad request details");
        assert_eq!(bad_request.field_violations[0].field, "messages[3].content");
        assert_eq!(bad_request.field_violations[0].description, "too long");
    }

    #[test]
    fn not_found_maps_to_not_found() {
        let status = status(Error::not_found("session", "s1"));
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(status.message(), "session `s1` not found");
    }

    #[test]
    fn throttling_carries_a_retry_delay() {
        let status = status(Error::Throttled {
            reason: "workspace `w` is over its chat rate".into(),
            retry_after: Duration::from_millis(1500),
        });
        assert_eq!(status.code(), Code::ResourceExhausted);
        let retry = status.get_details_retry_info().expect("retry info");
        assert_eq!(retry.retry_delay, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn internal_errors_hide_their_detail_behind_an_id() {
        let status = status(Error::Internal("connection to 10.0.0.7:5432 reset".into()));
        assert_eq!(status.code(), Code::Internal);
        assert!(!status.message().contains("10.0.0.7"), "{}", status.message());
        assert!(status.message().contains("id "), "{}", status.message());
    }
}
