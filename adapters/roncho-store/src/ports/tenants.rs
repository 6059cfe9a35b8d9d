//! [`Tenants`]: which tenant holds each workspace id.

use crate::db::{SqlStore, execute, fetch_optional};
use crate::rows;
use crate::sql::Sql;
use crate::tx::entities::list_workspaces_of;
use async_trait::async_trait;
use roncho_core::Result;
use roncho_core::filter::Filter;
use roncho_core::model::{Page, PageRequest, Workspace, now_micros};
use roncho_core::store::{Holder, Tenants};
use sqlx::AnyConnection;

fn holder_of(workspace: &str) -> Sql {
    let mut sql = Sql::new("SELECT tenant FROM workspace_tenants WHERE workspace_name = ");
    sql.bind(workspace);
    sql
}

async fn holder(conn: &mut AnyConnection, workspace: &str) -> Result<Option<String>> {
    match fetch_optional(conn, &holder_of(workspace)).await? {
        Some(row) => Ok(Some(rows::get::<String>(&row, "tenant")?)),
        None => Ok(None),
    }
}

#[async_trait]
impl Tenants for SqlStore {
    #[tracing::instrument(name = "store.claim_workspace", skip_all)]
    async fn claim_workspace(&self, workspace: &str, tenant: &str) -> Result<Option<String>> {
        // The common case, a workspace its tenant holds, writes nothing.
        if let Some(row) = self.read_optional(&holder_of(workspace)).await? {
            return Ok(Some(rows::get::<String>(&row, "tenant")?));
        }
        let mut tx = self.begin_write().await?;
        // Taken only while no workspace of that id exists: one the operator
        // made, or one made before the server was multi-tenant, stays the
        // operator's to assign.
        let mut claim = Sql::new("INSERT INTO workspace_tenants (workspace_name, tenant, created_at) SELECT ");
        claim
            .bind(workspace)
            .push(", ")
            .bind(tenant)
            .push(", ")
            .bind(now_micros())
            .push(" WHERE NOT EXISTS (SELECT 1 FROM workspaces WHERE name = ")
            .bind(workspace)
            .push(") ON CONFLICT (workspace_name) DO NOTHING");
        execute(tx.conn(), &claim).await?;
        let held = holder(tx.conn(), workspace).await?;
        tx.commit().await?;
        Ok(held)
    }

    async fn workspace_holder(&self, workspace: &str) -> Result<Holder> {
        if let Some(row) = self.read_optional(&holder_of(workspace)).await? {
            // The operator takes ids under the empty name, which no tenant has.
            let tenant = rows::get::<String>(&row, "tenant")?;
            return Ok(match tenant.is_empty() {
                true => Holder::Operator,
                false => Holder::Tenant(tenant),
            });
        }
        Ok(match self.workspace_exists(workspace).await? {
            true => Holder::Operator,
            false => Holder::Free,
        })
    }

    async fn workspace_exists(&self, workspace: &str) -> Result<bool> {
        let mut present = Sql::new("SELECT name FROM workspaces WHERE name = ");
        present.bind(workspace);
        Ok(self.read_optional(&present).await?.is_some())
    }

    #[tracing::instrument(name = "store.assign_workspace", skip_all)]
    async fn assign_workspace(&self, workspace: &str, tenant: &str) -> Result<Option<String>> {
        let mut tx = self.begin_write().await?;
        let before = holder(tx.conn(), workspace).await?;
        let mut assign = Sql::new("INSERT INTO workspace_tenants (workspace_name, tenant, created_at) VALUES (");
        assign
            .bind(workspace)
            .push(", ")
            .bind(tenant)
            .push(", ")
            .bind(now_micros())
            .push(") ON CONFLICT (workspace_name) DO UPDATE SET tenant = excluded.tenant");
        execute(tx.conn(), &assign).await?;
        tx.commit().await?;
        Ok(before)
    }

    async fn list_tenant_workspaces(
        &self,
        tenant: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Workspace>> {
        list_workspaces_of(self, Some(tenant), filter, page).await
    }
}
