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
        /// The forward proxy webhook deliveries go through
        /// (`http://[user:password@]host:port`); unset: none, whatever the
        /// environment's proxy variables say.
        webhook_proxy: String,
        /// Webhook deliveries at once in a process (its lane's loops).
        webhook_concurrency: usize,
        /// Of those, for one workspace.
        webhook_concurrency_per_workspace: usize,
        /// Of those, to one receiver (`host:port`).
        webhook_concurrency_per_target: usize,
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
    /// The forward proxy deliveries go through; `None`: none.
    pub proxy: Option<Secret>,
    /// How many deliveries run at once, in all and per workspace and receiver.
    pub lane: roncho_deriver::webhooks::LaneLimits,
}

impl WebhooksLayer {
    pub(super) fn resolve(self) -> anyhow::Result<WebhookConfig> {
        let proxy = self
            .webhook_proxy
            .as_deref()
            .map(str::trim)
            .filter(|proxy| !proxy.is_empty())
            .map(Secret::from);
        if let Some(proxy) = &proxy {
            roncho_webhook::tunnel::Proxy::parse(proxy.expose()).map_err(anyhow::Error::msg)?;
        }
        Ok(WebhookConfig {
            secret: self.webhook_secret.as_ref().map(Secret::from),
            timeout: Duration::from_secs(self.webhook_timeout_secs.unwrap_or(30).max(1)),
            allow_private_addresses: self.webhook_allow_private_addresses.unwrap_or(false),
            proxy,
            lane: {
                let defaults = roncho_deriver::webhooks::LaneLimits::default();
                roncho_deriver::webhooks::LaneLimits {
                    concurrency: self.webhook_concurrency.unwrap_or(defaults.concurrency).max(1),
                    per_workspace: self
                        .webhook_concurrency_per_workspace
                        .unwrap_or(defaults.per_workspace)
                        .max(1),
                    per_target: self
                        .webhook_concurrency_per_target
                        .unwrap_or(defaults.per_target)
                        .max(1),
                }
            },
        })
    }
}

impl WebhookConfig {
    /// Returns the proxy deliveries go through, when configured.
    pub fn delivery_proxy(&self) -> anyhow::Result<Option<roncho_webhook::tunnel::Proxy>> {
        self.proxy
            .as_ref()
            .map(|proxy| roncho_webhook::tunnel::Proxy::parse(proxy.expose()).map_err(anyhow::Error::msg))
            .transpose()
    }
}
