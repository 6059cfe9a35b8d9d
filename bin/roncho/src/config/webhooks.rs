//! The `[webhooks]` section: how webhook events are delivered (by the
//! deriver role).

use std::time::Duration;

use serde::Serialize;

use super::secret::Secret;

section! {
    /// `[webhooks]` as one layer gives it.
    WebhooksLayer {
        /// Signs webhook events (`X-Honcho-Signature`, Honcho's `WEBHOOK_SECRET`);
        /// unset: events go unsigned.
        webhook_secret: String,
        /// Longest a webhook delivery waits for its receiver.
        webhook_timeout_secs: u64,
        /// Webhook URLs may point at private, loopback and link-local addresses.
        webhook_allow_private_addresses: bool,
    }
}

/// How webhook events are delivered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WebhookConfig {
    /// Signs events; `None`: unsigned.
    pub secret: Option<Secret>,
    pub timeout: Duration,
    /// Webhook URLs may point inside the network.
    pub allow_private_addresses: bool,
}

impl WebhooksLayer {
    pub(super) fn resolve(self) -> WebhookConfig {
        WebhookConfig {
            secret: self.webhook_secret.as_ref().map(Secret::from),
            timeout: Duration::from_secs(self.webhook_timeout_secs.unwrap_or(30).max(1)),
            allow_private_addresses: self.webhook_allow_private_addresses.unwrap_or(false),
        }
    }
}
