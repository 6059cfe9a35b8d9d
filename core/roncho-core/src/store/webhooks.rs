//! A workspace's webhook endpoints and the test event.

use async_trait::async_trait;

use crate::Result;
use crate::model::{Page, PageRequest, WebhookEndpoint};

#[async_trait]
pub trait Webhooks: Send + Sync + 'static {
    /// Returns the endpoint for `url`, creating it when absent (at most 10 per workspace).
    async fn create_webhook(&self, workspace_id: &str, url: &str) -> Result<(WebhookEndpoint, bool)>;
    async fn delete_webhook(&self, workspace_id: &str, id: &str) -> Result<()>;
    async fn list_webhooks(&self, workspace_id: &str, page: PageRequest) -> Result<Page<WebhookEndpoint>>;
    /// Queues a `test.event` for every endpoint of the workspace (delivered
    /// by the deriver role); returns how many endpoints it goes to.
    async fn queue_test_webhook(&self, workspace_id: &str) -> Result<u64>;
}
