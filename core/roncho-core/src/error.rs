//! The domain error, shared by every port. Edges map it to their wire's
//! status in one place each (`roncho-api`).

/// Result of every domain operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, in terms a client can act on.
#[derive(Debug, Clone, thiserror::Error)]
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
    /// The caller is over a rate or the server over its capacity; trying
    /// again after `retry_after` may succeed. Nothing was done.
    #[error("{reason}; retry after {retry_after:?}")]
    Throttled {
        reason: String,
        retry_after: std::time::Duration,
    },
    /// The caller did not say who it is, or its credential is not valid.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// The caller's credential does not reach what it asked for.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
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

    /// The error of a part of a request, as the request's: an
    /// `InvalidArgument`'s field under the part's path (`messages[3]` +
    /// `content` = `messages[3].content`), which `path` formats only then;
    /// any other error as it is.
    pub fn within(self, path: impl FnOnce() -> String) -> Self {
        match self {
            Self::InvalidArgument { field, reason } => Self::InvalidArgument {
                field: format!("{}.{field}", path()),
                reason,
            },
            other => other,
        }
    }

    /// Returns a `NotFound` error for a resource kind and id.
    pub fn not_found(resource: &'static str, id: impl Into<String>) -> Self {
        Self::NotFound {
            resource,
            id: id.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parts_invalid_field_is_named_under_the_parts_path_and_nothing_else_changes() {
        let error = Error::invalid("metadata.key", "is too long").within(|| "messages[3]".to_owned());
        assert!(
            matches!(&error, Error::InvalidArgument { field, reason } if field == "messages[3].metadata.key" && reason == "is too long"),
            "{error:?}"
        );
        let untouched = Error::not_found("session", "s").within(|| unreachable!("formatted only for a field"));
        assert!(matches!(untouched, Error::NotFound { .. }));
    }
}
