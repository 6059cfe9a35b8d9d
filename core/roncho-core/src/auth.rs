//! Who is calling. Edges authenticate a credential into a [`Caller`]; the
//! API edge authorizes every call against it, and services receive it with
//! the request.

use std::fmt;

/// The authenticated caller: what its key reaches. A key names at most one
/// scope, its narrowest claim (Honcho 3.0.11+): a session key is narrower
/// than a peer key, which is narrower than a workspace key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// An admin key, or any caller of a server without authentication.
    Admin,
    /// Everything in one workspace.
    Workspace { workspace: String },
    /// One peer of a workspace: its own memory and the sessions it belongs to.
    Peer { workspace: String, peer: String },
    /// One session of a workspace.
    Session { workspace: String, session: String },
}

impl Caller {
    /// Returns whether the caller may do anything.
    pub fn is_admin(&self) -> bool {
        matches!(self, Caller::Admin)
    }

    /// Returns the workspace a scoped key is bound to; `None` for admin.
    pub fn workspace(&self) -> Option<&str> {
        match self {
            Caller::Admin => None,
            Caller::Workspace { workspace } | Caller::Peer { workspace, .. } | Caller::Session { workspace, .. } => {
                Some(workspace)
            }
        }
    }

    /// Returns the peer a peer key acts as.
    pub fn peer(&self) -> Option<&str> {
        match self {
            Caller::Peer { peer, .. } => Some(peer),
            _ => None,
        }
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caller::Admin => formatter.write_str("admin"),
            Caller::Workspace { workspace } => write!(formatter, "workspace key of `{workspace}`"),
            Caller::Peer { workspace, peer } => write!(formatter, "peer key of `{peer}` in `{workspace}`"),
            Caller::Session { workspace, session } => {
                write!(formatter, "session key of `{session}` in `{workspace}`")
            }
        }
    }
}
