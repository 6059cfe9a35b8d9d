//! Delivers the `webhook` tasks the queue holds (one per endpoint and
//! event, see roncho-store's `webhooks`): the event's envelope, signed, to
//! the endpoint's URL as it is now. A delivery that fails fails its task,
//! so the queue retries it with growing delays and, after its attempts,
//! keeps it dead with the error (queue status shows both).

use roncho_core::model::PageRequest;
use roncho_core::queue::Task;
use roncho_core::store::Webhooks;
use roncho_core::validate::MAX_WEBHOOKS_PER_WORKSPACE;
use roncho_core::{Error, Result};
use roncho_http::webhook::{WebhookSender, envelope, timestamp};

/// Delivers one webhook task of `workspace`. An endpoint deleted since the
/// event was queued is skipped.
pub async fn deliver(store: &dyn Webhooks, sender: &WebhookSender, workspace: &str, task: &Task) -> Result<()> {
    let field = |key: &str| {
        task.payload[key]
            .as_str()
            .ok_or_else(|| Error::Internal(format!("webhook task {} has no `{key}`", task.dedup_id)))
    };
    let (event_type, endpoint_id) = (field("event_type")?, field("endpoint_id")?);
    let at = task.payload["timestamp"].as_i64().unwrap_or_default();
    let size = i32::try_from(MAX_WEBHOOKS_PER_WORKSPACE).unwrap_or(100);
    let endpoints = store
        .list_webhooks(workspace, PageRequest::from_wire(1, size, false)?)
        .await?;
    let Some(endpoint) = endpoints.items.iter().find(|endpoint| endpoint.id == endpoint_id) else {
        tracing::info!(
            workspace,
            endpoint_id,
            event_type,
            "webhook endpoint deleted; event dropped"
        );
        return Ok(());
    };
    let body = envelope(event_type, &task.payload["data"], &timestamp(at));
    sender.deliver(&endpoint.url, &body).await.map_err(|error| {
        // Not an outage to wait out without limit: each failure spends an
        // attempt, and the endpoint's event dies after the last one.
        Error::FailedPrecondition(format!("webhook {event_type} to endpoint {endpoint_id}: {error}"))
    })?;
    tracing::debug!(workspace, endpoint_id, event_type, "webhook delivered");
    Ok(())
}
