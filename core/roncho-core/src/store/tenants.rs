//! Tenants (multi-tenant servers): which tenant holds each workspace.
//!
//! Workspace ids stay global: a tenant holds the ids it created first, for
//! good (erasing the workspace keeps the id its tenant's, so nothing still
//! in flight for it can ever reach another tenant), and a key of another
//! tenant is refused them. A workspace created while the server was not
//! multi-tenant, or by the operator, is held by no tenant until the
//! operator assigns it.

use std::future::Future;

use async_trait::async_trait;

use crate::Result;
use crate::filter::Filter;
use crate::model::{Page, PageRequest, Workspace};

/// The holder the operator's own ids are written under: no tenant's id can
/// be empty.
pub const OPERATOR: &str = "";

/// Who the code running on a task makes workspaces for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Creator {
    /// A call of this tenant, or of the operator ([`OPERATOR`]), on a
    /// multi-tenant server: it makes a workspace only under an id it holds.
    Caller(String),
    /// The server's own work (derivation, dreams): it writes into
    /// workspaces and peers that exist and makes none, so work begun before
    /// an erasure cannot bring back what was erased.
    Work,
}

tokio::task_local! {
    static CREATOR: Option<Creator>;
}

/// Runs `call` as `creator`'s (see [`Creator`]); `None` checks nothing (a
/// call of a server without tenants, the command line on its own data).
///
/// A call is authorized before it runs, and on a multi-tenant server its
/// target may change in between: the workspace erased by its tenant, the
/// id given to another tenant. A write the gate let in must not then make
/// a workspace under an id someone else holds, so the transaction that
/// makes a workspace checks its id for `creator` again.
pub async fn creating_as<F: Future>(creator: Option<Creator>, call: F) -> F::Output {
    CREATOR.scope(creator, call).await
}

/// Who the code running on this task makes workspaces for (see
/// [`creating_as`]); `None` when nothing is checked.
pub fn creator() -> Option<Creator> {
    CREATOR.try_with(Clone::clone).ok().flatten()
}

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
