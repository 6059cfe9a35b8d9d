//! The `[telemetry]` section: logs, metrics and trace export.

use std::net::SocketAddr;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::server::Role;

section! {
    /// `[telemetry]` as one layer gives it.
    TelemetryLayer {
        log: String,
        log_format: LogFormat,
        metrics_listen: SocketAddr,
        /// OpenTelemetry collector (OTLP over gRPC, e.g. `http://otel-collector:4317`);
        /// unset: no trace export.
        otlp_endpoint: String,
        otlp_service_name: String,
        /// Share of new traces kept, 0.0 to 1.0; a caller's sampling decision is followed.
        otlp_sample_ratio: f64,
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// Logs, metrics and trace export.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TelemetryConfig {
    /// Log filter in `tracing_subscriber::EnvFilter` syntax.
    pub log: String,
    pub log_format: LogFormat,
    /// Where Prometheus metrics are served (`GET /metrics`); `None`: off.
    pub metrics_listen: Option<SocketAddr>,
    /// Where spans are exported; `None`: they are not.
    pub tracing: Option<TracingConfig>,
}

/// OpenTelemetry trace export.
#[derive(Clone, PartialEq, Serialize)]
pub struct TracingConfig {
    /// The collector's OTLP/gRPC endpoint.
    pub endpoint: String,
    /// `service.name` of this process's spans.
    pub service_name: String,
    /// Share of new traces (no sampled caller) kept.
    pub sample_ratio: f64,
}

debug_redacted!(TracingConfig);

impl TelemetryLayer {
    /// `roles` name the process's spans unless `otlp_service_name` does.
    pub(super) fn resolve(self, roles: &[Role]) -> anyhow::Result<TelemetryConfig> {
        let tracing = match self.otlp_endpoint {
            None => None,
            Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                bail!(
                    "otlp_endpoint must be the collector's http:// or https:// OTLP/gRPC URL (port 4317), not `{url}`"
                )
            }
            Some(endpoint) => {
                let sample_ratio = self.otlp_sample_ratio.unwrap_or(1.0);
                if !(0.0..=1.0).contains(&sample_ratio) {
                    bail!("otlp_sample_ratio must be between 0.0 and 1.0, not {sample_ratio}");
                }
                Some(TracingConfig {
                    endpoint,
                    service_name: self.otlp_service_name.unwrap_or_else(|| default_service_name(roles)),
                    sample_ratio,
                })
            }
        };
        Ok(TelemetryConfig {
            log: self.log.unwrap_or_else(|| "info".to_owned()),
            log_format: self.log_format.unwrap_or(LogFormat::Text),
            metrics_listen: self.metrics_listen,
            tracing,
        })
    }
}

/// `roncho` for a process of every role, else `roncho-` and its roles
/// (`roncho-ingest-recall`), so a trace shows which process did what.
fn default_service_name(roles: &[Role]) -> String {
    if roles.len() == Role::ALL.len() {
        return "roncho".to_owned();
    }
    std::iter::once("roncho")
        .chain(roles.iter().map(|role| role.name()))
        .collect::<Vec<_>>()
        .join("-")
}
