//! [`Webhooks`]: a workspace's webhook endpoints.

use crate::db::{SqlStore, direction, execute, fetch_optional};
use crate::rows;
use crate::sql::Sql;
use crate::tx::entities::{ensure_workspace, load_workspace};
use async_trait::async_trait;
use roncho_core::model::{JsonObject, Page, PageRequest, WebhookEndpoint, new_public_id, now_micros};
use roncho_core::store::Webhooks;
use roncho_core::validate::MAX_WEBHOOKS_PER_WORKSPACE;
use roncho_core::{Error, Result};

#[async_trait]
impl Webhooks for SqlStore {
    async fn create_webhook(&self, workspace_id: &str, url: &str) -> Result<(WebhookEndpoint, bool)> {
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
        let mut existing = Sql::new(&format!(
            "SELECT {} FROM webhook_endpoints WHERE workspace_name = ",
            rows::WEBHOOK_COLUMNS
        ));
        existing.bind(workspace_id).push(" AND url = ").bind(url);
        if let Some(row) = fetch_optional(tx.conn(), &existing).await? {
            return Ok((rows::webhook(&row)?, false));
        }
        let mut count = Sql::new("SELECT COUNT(*) AS n FROM webhook_endpoints WHERE workspace_name = ");
        count.bind(workspace_id);
        let endpoints = match fetch_optional(tx.conn(), &count).await? {
            Some(row) => rows::count(&row)?,
            None => 0,
        };
        if endpoints >= MAX_WEBHOOKS_PER_WORKSPACE {
            return Err(Error::ResourceExhausted(format!(
                "workspace `{workspace_id}` already has {MAX_WEBHOOKS_PER_WORKSPACE} webhook endpoints"
            )));
        }
        let endpoint = WebhookEndpoint {
            id: new_public_id(),
            workspace_id: workspace_id.to_owned(),
            url: url.to_owned(),
            created_at: now_micros(),
        };
        let mut insert = Sql::new("INSERT INTO webhook_endpoints (id, workspace_name, url, created_at) VALUES (");
        insert
            .bind(endpoint.id.as_str())
            .push(", ")
            .bind(workspace_id)
            .push(", ")
            .bind(url)
            .push(", ")
            .bind(endpoint.created_at)
            .push(")");
        execute(tx.conn(), &insert).await?;
        tx.commit().await?;
        Ok((endpoint, true))
    }

    async fn delete_webhook(&self, workspace_id: &str, id: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        let mut sql = Sql::new("DELETE FROM webhook_endpoints WHERE workspace_name = ");
        sql.bind(workspace_id).push(" AND id = ").bind(id);
        if execute(tx.conn(), &sql).await? == 0 {
            return Err(Error::not_found("webhook", id));
        }
        tx.commit().await
    }

    async fn list_webhooks(&self, workspace_id: &str, page: PageRequest) -> Result<Page<WebhookEndpoint>> {
        let mut from_where = Sql::new("webhook_endpoints WHERE workspace_name = ");
        from_where.bind(workspace_id);
        crate::tx::erasing::push_not_erasing(&mut from_where, crate::tx::erasing::WEBHOOK);
        let dir = direction(page);
        self.paged(
            rows::WEBHOOK_COLUMNS,
            from_where,
            &format!("created_at {dir}, id {dir}"),
            page,
            rows::webhook,
        )
        .await
    }

    async fn queue_test_webhook(&self, workspace_id: &str) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        load_workspace(tx.conn(), workspace_id).await?;
        let queued = crate::tx::tasks::queue_test_event(tx.conn(), workspace_id).await?;
        tx.commit().await?;
        Ok(queued)
    }
}
