//! Who is calling. Edges authenticate a credential into a [`Caller`]; the
//! API edge authorizes every call against it, and services receive it with
//! the request.

use std::fmt;

/// The authenticated caller: what its key reaches. A key names at most one
/// scope, its narrowest claim (Honcho 3.0.11+): a session key is narrower
/// than a peer key, which is narrower than a workspace key. On a
/// multi-tenant server every key but the operator's also names its tenant
/// (Honcho's `tn` claim), and reaches only the workspaces that tenant holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// An admin key without a tenant (the operator's), or any caller of a
    /// server without authentication.
    Admin,
    /// An admin key of one tenant: every workspace the tenant holds.
    TenantAdmin { tenant: String },
    /// Everything in one workspace.
    Workspace { workspace: String, tenant: Option<String> },
    /// One peer of a workspace: its own memory and the sessions it belongs to.
    Peer {
        workspace: String,
        peer: String,
        tenant: Option<String>,
    },
    /// One session of a workspace.
    Session {
        workspace: String,
        session: String,
        tenant: Option<String>,
    },
}

impl Caller {
    /// Returns whether the caller may do anything: the operator.
    pub fn is_admin(&self) -> bool {
        matches!(self, Caller::Admin)
    }

    /// Returns the workspace a scoped key is bound to; `None` for admins.
    pub fn workspace(&self) -> Option<&str> {
        match self {
            Caller::Admin | Caller::TenantAdmin { .. } => None,
            Caller::Workspace { workspace, .. }
            | Caller::Peer { workspace, .. }
            | Caller::Session { workspace, .. } => Some(workspace),
        }
    }

    /// Returns the tenant the key belongs to (multi-tenant servers only).
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Caller::Admin => None,
            Caller::TenantAdmin { tenant } => Some(tenant),
            Caller::Workspace { tenant, .. } | Caller::Peer { tenant, .. } | Caller::Session { tenant, .. } => {
                tenant.as_deref()
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

    /// Returns whose share of the server's places in flight the caller
    /// takes: its tenant's, else its workspace's; `None` for the operator.
    /// A tenant is written `tenant:<id>`, which no workspace id can be.
    pub fn party(&self) -> Option<String> {
        match (self.tenant(), self.workspace()) {
            (Some(tenant), _) => Some(format!("tenant:{tenant}")),
            (None, workspace) => workspace.map(str::to_owned),
        }
    }
}

impl fmt::Display for Caller {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Caller::Admin => formatter.write_str("admin"),
            Caller::TenantAdmin { tenant } => write!(formatter, "tenant admin key of `{tenant}`"),
            Caller::Workspace { workspace, .. } => write!(formatter, "workspace key of `{workspace}`"),
            Caller::Peer { workspace, peer, .. } => write!(formatter, "peer key of `{peer}` in `{workspace}`"),
            Caller::Session { workspace, session, .. } => {
                write!(formatter, "session key of `{session}` in `{workspace}`")
            }
        }?;
        match self {
            Caller::Workspace {
                tenant: Some(tenant), ..
            }
            | Caller::Peer {
                tenant: Some(tenant), ..
            }
            | Caller::Session {
                tenant: Some(tenant), ..
            } => write!(formatter, " of tenant `{tenant}`"),
            _ => Ok(()),
        }
    }
}
