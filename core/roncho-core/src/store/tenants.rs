//! Tenants (multi-tenant servers): which tenant holds each workspace.
//!
//! Workspace ids stay global: a tenant holds the ids it created first, for
//! good (erasing the workspace keeps the id its tenant's, so nothing still
//! in flight for it can ever reach another tenant), and a key of another
//! tenant is refused them. A workspace created while the server was not
//! multi-tenant, or by the operator, is held by no tenant until the
//! operator assigns it.

use async_trait::async_trait;

use crate::Result;
use crate::filter::Filter;
use crate::model::{Page, PageRequest, Workspace};

/// Who holds a workspace id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// This tenant (whether or not the workspace exists now).
    Tenant(String),
    /// No tenant, and no workspace of that id: a tenant may take it.
    Free,
    /// The operator's: a workspace of that id exists and no tenant holds
    /// it, or the operator took the id (under the empty name).
    Operator,
}

#[async_trait]
pub trait Tenants: Send + Sync + 'static {
    /// Returns the tenant holding `workspace`. When no tenant holds it and
    /// no such workspace exists, `tenant` takes it, at once: of two tenants
    /// asking together one holds it. `None`: the workspace exists and no
    /// tenant holds it.
    async fn claim_workspace(&self, workspace: &str, tenant: &str) -> Result<Option<String>>;
    /// Returns who holds `workspace`, taking nothing.
    async fn workspace_holder(&self, workspace: &str) -> Result<Holder>;
    /// Returns whether a workspace of that id exists now (erased ones do not).
    async fn workspace_exists(&self, workspace: &str) -> Result<bool>;
    /// Gives `workspace` to `tenant` (the operator's call), whether or not
    /// it exists yet; returns the tenant that held it before.
    async fn assign_workspace(&self, workspace: &str, tenant: &str) -> Result<Option<String>>;
    /// Lists the live workspaces `tenant` holds, as `list_workspaces` does.
    async fn list_tenant_workspaces(&self, tenant: &str, filter: &Filter, page: PageRequest)
    -> Result<Page<Workspace>>;
}
