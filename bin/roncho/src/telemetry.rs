//! Logs and traces of a process: `tracing` events written to stderr (text
//! or JSON, filtered by `log`), and — with `otlp_endpoint` — spans exported
//! to an OpenTelemetry collector over OTLP/gRPC in batches.
//!
//! Spans are exported whatever the log filter says (the export has its own
//! filter, `info`), and flushed by [`Telemetry::shutdown`] before the
//! process exits, so the last requests of a draining pod are not lost.

use std::time::Duration;

use anyhow::Context;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::config::{Config, LogFormat, TracingConfig};

/// Longest wait for the last spans to reach the collector at shutdown.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The process's trace export, if any; shut it down last.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Installs the process's subscriber: logs per `config.telemetry.log` and
    /// `log_format`; with `export` and an `otlp_endpoint`, span export too
    /// (must run inside the tokio runtime: the exporter's channel lives there).
    pub fn init(config: &Config, export: bool) -> anyhow::Result<Self> {
        // The MCP SDK logs every request of its stateless HTTP transport at
        // info, and every JSON-RPC error it answers at warn with the
        // client's text in it (a client could fill the disk with one long
        // method name): errors only, unless the filter names it. The gate
        // counts those replies and traces their calls.
        let directives = if config.telemetry.log.contains("rmcp") {
            config.telemetry.log.clone()
        } else {
            format!("{},rmcp=error", config.telemetry.log)
        };
        let filter = tracing_subscriber::EnvFilter::try_new(&directives)
            .with_context(|| format!("invalid log filter `{}`", config.telemetry.log))?;
        let logs = match config.telemetry.log_format {
            LogFormat::Json => tracing_subscriber::fmt::layer()
                .json()
                .with_writer(std::io::stderr)
                .boxed(),
            // Colours for a terminal only: a log file or collector gets plain text.
            LogFormat::Text => tracing_subscriber::fmt::layer()
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_writer(std::io::stderr)
                .boxed(),
        }
        .with_filter(filter);
        let provider = match (&config.telemetry.tracing, export) {
            (Some(tracing), true) => Some(tracer_provider(tracing)?),
            _ => None,
        };
        let spans = provider.as_ref().map(|provider| {
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("roncho"))
                .with_filter(tracing_subscriber::EnvFilter::new("info"))
        });
        tracing_subscriber::registry()
            .with(logs)
            .with(spans)
            .try_init()
            .context("installing the log subscriber")?;
        if let Some(tracing) = config.telemetry.tracing.as_ref().filter(|_| export) {
            tracing::info!(
                endpoint = %tracing.endpoint,
                service_name = %tracing.service_name,
                sample_ratio = tracing.sample_ratio,
                "exporting traces over OTLP"
            );
        }
        Ok(Self { provider })
    }

    /// Exports the spans still buffered and stops the exporter.
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        // The SDK blocks its caller while it flushes; keep that off the runtime's workers.
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT)).await;
        match flushed {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "flushing the last spans failed"),
            Err(error) => tracing::warn!(%error, "flushing the last spans failed"),
        }
    }
}

/// Builds the tracer provider: batches exported over OTLP/gRPC, new traces
/// sampled at `sample_ratio`, a caller's decision followed.
fn tracer_provider(config: &TracingConfig) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(&config.endpoint)
        .with_timeout(Duration::from_secs(10))
        .build()
        .with_context(|| format!("building the OTLP exporter for {}", config.endpoint))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(config.service_name.clone())
        .with_attributes([
            opentelemetry::KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            opentelemetry::KeyValue::new(
                "service.instance.id",
                format!("{}-{}", std::process::id(), roncho_core::model::new_public_id()),
            ),
        ])
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            config.sample_ratio,
        ))))
        .with_resource(resource)
        .build())
}
