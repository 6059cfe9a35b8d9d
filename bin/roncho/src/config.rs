//! Configuration: typed, with defaults, layered as
//! defaults < TOML file < `RONCHO_*` environment < command-line flags.
//!
//! The environment is passed in as a map so tests never touch the process
//! environment. The effective config is logged with secrets redacted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

mod env;

/// A role this process can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Ingest,
    Recall,
    Dialectic,
    Deriver,
    Dreamer,
    Reconciler,
}

impl Role {
    /// Every role, in start-up order.
    pub const ALL: [Role; 6] = [
        Role::Ingest,
        Role::Recall,
        Role::Dialectic,
        Role::Deriver,
        Role::Dreamer,
        Role::Reconciler,
    ];

    /// Returns whether the role answers clients (and so serves keys).
    pub fn serves_api(self) -> bool {
        !matches!(self, Role::Reconciler)
    }

    /// Returns the role's name as written in `--roles`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Ingest => "ingest",
            Role::Recall => "recall",
            Role::Dialectic => "dialectic",
            Role::Deriver => "deriver",
            Role::Dreamer => "dreamer",
            Role::Reconciler => "reconciler",
        }
    }
}

/// Parses `ingest,recall` or `all` into roles, sorted and deduplicated.
pub fn parse_roles(text: &str) -> anyhow::Result<Vec<Role>> {
    let mut roles = Vec::new();
    for name in text.split(',').map(str::trim).filter(|name| !name.is_empty()) {
        if name == "all" {
            roles.extend(Role::ALL);
            continue;
        }
        let role = Role::ALL
            .into_iter()
            .find(|role| role.name() == name)
            .with_context(|| {
                format!("unknown role `{name}`; roles are all, ingest, recall, dialectic, deriver, dreamer, reconciler")
            })?;
        roles.push(role);
    }
    if roles.is_empty() {
        bail!("no role given; use --roles all or a list such as ingest,recall");
    }
    roles.sort();
    roles.dedup();
    Ok(roles)
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

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// Settings as one layer gives them; `None` defers to the layer below.
/// Each field is a TOML key and, upper-cased after `RONCHO_`, a variable.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigLayer {
    pub listen: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
    pub database_url: Option<String>,
    pub roles: Option<String>,
    pub log: Option<String>,
    pub log_format: Option<LogFormat>,
    pub shutdown_grace_secs: Option<u64>,
    pub max_connections: Option<u32>,
    /// Postgres: vacuum the tables an erasure touched once it completes.
    pub erasure_vacuum: Option<bool>,
    pub embedding_provider: Option<EmbeddingProvider>,
    pub embedding_model_dir: Option<PathBuf>,
    pub embedding_base_url: Option<String>,
    pub embedding_model: Option<String>,
    pub embedding_dimensions: Option<usize>,
    pub embedding_api_key: Option<String>,
    pub qdrant_url: Option<String>,
    pub qdrant_api_key: Option<String>,
    pub qdrant_collection: Option<String>,
    /// Provider of bare model names and of `llm_base_url` / `llm_api_key`.
    pub llm_provider: Option<LlmProvider>,
    pub llm_base_url: Option<String>,
    pub llm_api_key: Option<String>,
    pub openai_base_url: Option<String>,
    pub openai_api_key: Option<String>,
    pub anthropic_base_url: Option<String>,
    pub anthropic_api_key: Option<String>,
    pub gemini_base_url: Option<String>,
    pub gemini_api_key: Option<String>,
    pub llm_timeout_secs: Option<u64>,
    pub llm_max_retries: Option<u32>,
    /// Every role's model unless the role names its own.
    pub llm_model: Option<String>,
    pub deriver_model: Option<String>,
    pub summary_model: Option<String>,
    /// Every dialectic level's model unless the level names its own.
    pub dialectic_model: Option<String>,
    pub dialectic_minimal_model: Option<String>,
    pub dialectic_low_model: Option<String>,
    pub dialectic_medium_model: Option<String>,
    pub dialectic_high_model: Option<String>,
    pub dialectic_max_model: Option<String>,
    pub dream_model: Option<String>,
    pub deriver_max_tokens: Option<u32>,
    pub summary_max_tokens: Option<u32>,
    pub dialectic_max_tokens: Option<u32>,
    pub dialectic_minimal_max_tokens: Option<u32>,
    pub dialectic_low_max_tokens: Option<u32>,
    pub dialectic_medium_max_tokens: Option<u32>,
    pub dialectic_high_max_tokens: Option<u32>,
    pub dialectic_max_max_tokens: Option<u32>,
    pub dream_max_tokens: Option<u32>,
    pub dialectic_minimal_timeout_secs: Option<u64>,
    pub dialectic_low_timeout_secs: Option<u64>,
    pub dialectic_medium_timeout_secs: Option<u64>,
    pub dialectic_high_timeout_secs: Option<u64>,
    pub dialectic_max_timeout_secs: Option<u64>,
    pub deriver_lease_secs: Option<u64>,
    pub worker_outage_backoff_secs: Option<u64>,
    pub idempotency_window_secs: Option<u64>,
    pub worker_outage_backoff_max_secs: Option<u64>,
    pub reconciler_interval_ms: Option<u64>,
    pub background_yield_ms: Option<u64>,
    pub metrics_listen: Option<SocketAddr>,
    /// OpenTelemetry collector (OTLP over gRPC, e.g. `http://otel-collector:4317`);
    /// unset: no trace export.
    pub otlp_endpoint: Option<String>,
    pub otlp_service_name: Option<String>,
    /// Share of new traces kept, 0.0 to 1.0; a caller's sampling decision is followed.
    pub otlp_sample_ratio: Option<f64>,
    pub startup_timeout_secs: Option<u64>,
    pub dream_document_threshold: Option<u64>,
    pub dream_min_hours: Option<u64>,
    pub dream_idle_minutes: Option<u64>,
    pub nats_url: Option<String>,
    pub nats_prefix: Option<String>,
    pub nats_partitions: Option<u32>,
    pub nats_ack_wait_secs: Option<u64>,
    /// How long a published task may go held by no consumer before it is
    /// taken for lost and published again.
    pub nats_redeliver_after_secs: Option<u64>,
    /// The secret API keys (HS256 JWTs) are signed and verified with; unset:
    /// no authentication (allowed on a loopback address only).
    pub auth_jwt_secret: Option<String>,
    /// Further secrets keys are still verified with, comma-separated: the
    /// previous ones while keys are rotated.
    pub auth_jwt_previous_secrets: Option<String>,
    /// Serve a non-loopback address without authentication anyway.
    pub insecure_no_auth: Option<bool>,
    /// The gRPC listener's TLS certificate chain and key (PEM); unset: plain text.
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    /// CA (PEM) client certificates must chain to: mutual TLS.
    pub tls_client_ca_file: Option<PathBuf>,
    /// A plain-text address serving only gRPC health checks (probes that
    /// cannot speak TLS); unset: health is served on `listen` alone.
    pub health_listen: Option<SocketAddr>,
    /// The Honcho v3 REST edge's address, or `off`; unset: 127.0.0.1:8000
    /// (Honcho's port) in a process that serves both reads and writes.
    pub rest_listen: Option<String>,
    /// Requests in flight in the process before the excess is shed.
    pub max_concurrent_requests: Option<usize>,
    /// Requests in flight on one connection before the excess is shed.
    pub max_concurrent_requests_per_connection: Option<usize>,
    /// Longest a call may run (dialectic calls have their level deadlines).
    pub request_timeout_secs: Option<u64>,
    /// Longest a request's body may take to arrive after its headers.
    pub request_body_timeout_secs: Option<u64>,
    /// Requests in flight for one workspace (the workspace of the caller's
    /// key) before its excess is shed; only with authentication on.
    pub max_concurrent_requests_per_workspace: Option<usize>,
    /// Client connections open at once in the process, on all listeners.
    pub max_open_connections: Option<usize>,
    /// Client connections open at once from one address.
    pub max_open_connections_per_address: Option<usize>,
    /// Longest an HTTP/1 request head may take to arrive (also the idle
    /// time of a kept-alive connection).
    pub request_header_timeout_secs: Option<u64>,
    /// Longest a new connection may take to send its first bytes (HTTP/2's preface).
    pub connection_handshake_timeout_secs: Option<u64>,
    /// Longest a Postgres statement may run.
    pub database_statement_timeout_secs: Option<u64>,
    /// Per workspace and minute: Chat and ChatStream calls (0: unmetered).
    pub rate_limit_chat_per_minute: Option<u32>,
    /// Per workspace and minute: messages written, when a model derives from them.
    pub rate_limit_messages_per_minute: Option<u32>,
    /// Per workspace and minute: UploadFile calls.
    pub rate_limit_uploads_per_minute: Option<u32>,
    /// Per workspace and minute: ScheduleDream calls.
    pub rate_limit_dreams_per_minute: Option<u32>,
    /// Per workspace and minute: CloneSession calls.
    pub rate_limit_clones_per_minute: Option<u32>,
    /// Longest an uploaded PDF may take to read.
    pub upload_pdf_timeout_secs: Option<u64>,
    /// Memory (address space) a PDF's reader may use, in MiB.
    pub upload_pdf_memory_mb: Option<u64>,
    /// PDFs read at once; more wait up to 5 s, then are told to retry.
    pub upload_pdf_concurrency: Option<usize>,
    /// Webhook URLs may point at private, loopback and link-local addresses.
    pub webhook_allow_private_addresses: Option<bool>,
    /// Signs webhook events (`X-Honcho-Signature`, Honcho's `WEBHOOK_SECRET`);
    /// unset: events go unsigned.
    pub webhook_secret: Option<String>,
    /// Longest a webhook delivery waits for its receiver.
    pub webhook_timeout_secs: Option<u64>,
    /// Serve gRPC server reflection; unset: when authentication is off.
    pub grpc_reflection: Option<bool>,
}

/// Where embeddings for semantic search come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EmbeddingProvider {
    /// The local model when its directory is configured or found, else none.
    Auto,
    /// A local BERT model directory (`embedding_model_dir`).
    Local,
    /// An OpenAI-compatible `/v1/embeddings` server.
    Openai,
    /// No semantic search: full text only, reported as degraded.
    None,
    /// The deterministic hashing embedder: for tests, never production.
    TestHashing,
}

impl ConfigLayer {
    /// Returns `self` with every field `upper` sets written over it.
    fn overlay(self, upper: ConfigLayer) -> ConfigLayer {
        let (serde_json::Value::Object(mut lower), serde_json::Value::Object(upper)) =
            (to_json(&self), to_json(&upper))
        else {
            unreachable!("a config layer serializes to an object");
        };
        lower.extend(upper.into_iter().filter(|(_, value)| !value.is_null()));
        serde_json::from_value(serde_json::Value::Object(lower)).expect("a merged layer deserializes")
    }

    /// The keys a layer can set.
    fn keys() -> Vec<String> {
        match to_json(&ConfigLayer::default()) {
            serde_json::Value::Object(fields) => fields.into_iter().map(|(key, _)| key).collect(),
            _ => Vec::new(),
        }
    }

    /// Reads the layer of `RONCHO_*` variables from `env`: `RONCHO_NATS_URL`
    /// sets `nats_url`, read as the type the setting takes (see
    /// [`env::EnvText`]). Empty values and variables that name no setting
    /// (`RONCHO_CONFIG`, test variables) are skipped.
    pub fn from_env(env: &HashMap<String, String>) -> anyhow::Result<ConfigLayer> {
        use serde::de::value::MapDeserializer;
        let mut set = Vec::new();
        for key in Self::keys() {
            let name = format!("RONCHO_{}", key.to_uppercase());
            let Some(value) = env.get(&name).filter(|value| !value.is_empty()) else {
                continue;
            };
            // Each alone first, so an error names its variable.
            let one = MapDeserializer::new(std::iter::once((key.as_str(), env::EnvText(value))));
            if let Err(error) = ConfigLayer::deserialize(one) {
                bail!("{name}=`{value}` is not valid: {error}");
            }
            set.push((key, value));
        }
        let all = MapDeserializer::new(set.iter().map(|(key, value)| (key.as_str(), env::EnvText(value))));
        ConfigLayer::deserialize(all).context("reading RONCHO_* variables")
    }

    /// Reads a TOML file layer.
    pub fn from_toml(text: &str) -> anyhow::Result<ConfigLayer> {
        toml::from_str(text).context("invalid config file")
    }
}

/// Cuts credentials out of every URL in a JSON value, at any depth.
fn redact_urls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) if text.contains("://") => *text = roncho_store::redact_url(text),
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_urls),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(redact_urls),
        _ => {}
    }
}

/// Whether a setting holds a credential (never printed).
fn is_secret_key(key: &str) -> bool {
    key.ends_with("api_key") || key.contains("secret")
}

/// Returns a value for logs: credentials hidden, passwords cut out of URLs.
fn redact_value(key: &str, value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Null => serde_json::Value::Null,
        _ if is_secret_key(key) => serde_json::Value::String("[redacted]".to_owned()),
        serde_json::Value::String(text) if text.contains("://") => {
            serde_json::Value::String(roncho_store::redact_url(text))
        }
        other => other.clone(),
    }
}

impl std::fmt::Debug for ConfigLayer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let serde_json::Value::Object(fields) = to_json(self) else {
            return formatter.write_str("ConfigLayer");
        };
        let shown: serde_json::Map<_, _> = fields
            .iter()
            .filter(|(_, value)| !value.is_null())
            .map(|(key, value)| (key.clone(), redact_value(key, value)))
            .collect();
        write!(formatter, "ConfigLayer {}", serde_json::Value::Object(shown))
    }
}

/// A credential: usable by code, never printed (`Debug` and serialisation
/// show `[redacted]`).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Returns the credential itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&String> for Secret {
    fn from(value: &String) -> Self {
        Secret(value.clone())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("[redacted]")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("[redacted]")
    }
}

/// Shortest auth secret a server off loopback accepts.
pub const MIN_SECRET_BYTES: usize = 32;

/// How callers are authenticated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuthConfig {
    /// The secrets keys are verified with, the signing one first; empty:
    /// authentication is off and every caller is admin.
    pub secrets: Vec<Secret>,
    /// Serving a non-loopback address without authentication was asked for.
    pub insecure_no_auth: bool,
}

impl AuthConfig {
    /// Returns whether keys are required.
    pub fn enabled(&self) -> bool {
        !self.secrets.is_empty()
    }
}

fn to_json(layer: &ConfigLayer) -> serde_json::Value {
    serde_json::to_value(layer).expect("a config layer serializes")
}

/// Where the REST edge listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RestListen {
    pub address: SocketAddr,
    /// Set in the configuration: failing to bind it stops start-up. The
    /// default address gives way, with a warning, to whatever holds it.
    pub explicit: bool,
}

/// Honcho's port, where `roncho serve` alone serves the REST edge.
pub const DEFAULT_REST_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8000);

/// Resolves `rest_listen`: `off`, an address, or unset (Honcho's port in a
/// process that serves reads and writes alike, else none).
fn rest_listen(setting: Option<&str>, roles: &[Role]) -> anyhow::Result<Option<RestListen>> {
    match setting.map(str::trim) {
        Some("off") => Ok(None),
        Some(text) => {
            let address = text
                .parse()
                .with_context(|| format!("rest_listen `{text}` is neither `off` nor an address (127.0.0.1:8000)"))?;
            Ok(Some(RestListen {
                address,
                explicit: true,
            }))
        }
        None if roles.contains(&Role::Ingest) && roles.contains(&Role::Recall) => Ok(Some(RestListen {
            address: DEFAULT_REST_LISTEN,
            explicit: false,
        })),
        None => Ok(None),
    }
}

/// The effective configuration of a process.
#[derive(Clone, PartialEq, Serialize)]
pub struct Config {
    /// Address of the gRPC server (every role serves health there).
    pub listen: SocketAddr,
    /// Directory of the embedded SQLite file, used when no database URL is set.
    pub data_dir: PathBuf,
    /// Postgres URL; `None` selects the embedded SQLite store.
    pub database_url: Option<String>,
    pub roles: Vec<Role>,
    /// Log filter in `tracing_subscriber::EnvFilter` syntax.
    pub log: String,
    pub log_format: LogFormat,
    /// How long SIGTERM waits for in-flight requests before exiting.
    pub shutdown_grace: Duration,
    /// Database pool size.
    pub max_connections: u32,
    /// Postgres: vacuum the tables an erasure touched once it completes.
    pub erasure_vacuum: bool,
    pub embedding: EmbeddingConfig,
    /// Qdrant for vectors; `None` keeps them in the relational store (exact search).
    pub qdrant: Option<QdrantConfig>,
    /// The models of the LLM roles; `None`: every agent is extractive.
    pub llm: Option<LlmConfig>,
    /// How long a deriver holds a work unit without renewing; a killed worker's
    /// units are taken over after it.
    pub deriver_lease: Duration,
    /// How long idempotency keys of CreateMessages, UploadFile and
    /// CreateConclusions are remembered.
    pub idempotency_window: Duration,
    /// First wait of a task postponed by an outage (a model unavailable,
    /// rate limited or timing out); doubled per outage, with jitter.
    pub worker_outage_backoff: Duration,
    /// Longest wait after an outage, and the most a provider's `Retry-After`
    /// can ask for.
    pub worker_outage_backoff_max: Duration,
    /// How often the reconciler looks for rows to embed when nobody nudges
    /// it (a deriver or ingest in its own process nudges it at once).
    pub reconciler_interval: Duration,
    /// How long, in all, the reconciler and the deriver in a process that
    /// also takes writes wait for write bursts to pause before they catch
    /// up at full speed whatever the writes (`Duration::ZERO`: they never wait).
    pub background_yield: Duration,
    /// Where Prometheus metrics are served (`GET /metrics`); `None`: off.
    pub metrics_listen: Option<SocketAddr>,
    /// Where spans are exported; `None`: they are not.
    pub tracing: Option<TracingConfig>,
    /// How long start-up waits for unreachable dependencies (the database,
    /// NATS) before giving up.
    pub startup_timeout: Duration,
    /// When the deriver schedules dreams (with a dream model configured).
    pub dreams: DreamConfig,
    /// Per dialectic level (minimal … max), a deadline that replaces the default.
    pub dialectic_timeouts: [Option<Duration>; 5],
    /// NATS JetStream for background work; `None`: the SQL queue in the store.
    pub nats: Option<NatsConfig>,
    /// How callers are authenticated.
    pub auth: AuthConfig,
    /// TLS on `listen`; `None`: plain text.
    pub tls: Option<crate::tls::TlsFiles>,
    /// Where health checks are also served, in plain text.
    pub health_listen: Option<SocketAddr>,
    /// Where the Honcho v3 REST edge listens; `None`: it does not.
    pub rest_listen: Option<RestListen>,
    /// Whether gRPC server reflection is served.
    pub grpc_reflection: bool,
    /// How webhook events are delivered.
    pub webhooks: WebhookConfig,
    /// Admission control.
    pub limits: LimitsConfig,
}

/// The longest a dialectic call may run: the slowest level's deadline
/// (configured, else its default) and 30 s for the rest of the call.
fn dialectic_limit(merged: &ConfigLayer) -> Duration {
    use roncho_dialectic::agent::Level;
    let configured = [
        merged.dialectic_minimal_timeout_secs,
        merged.dialectic_low_timeout_secs,
        merged.dialectic_medium_timeout_secs,
        merged.dialectic_high_timeout_secs,
        merged.dialectic_max_timeout_secs,
    ];
    let slowest = Level::ALL
        .into_iter()
        .zip(configured)
        .map(|(level, secs)| secs.map_or_else(|| level.default_deadline(), |secs| Duration::from_secs(secs.max(1))))
        .max()
        .unwrap_or_default();
    slowest + Duration::from_secs(30)
}

/// Webhook delivery (the deriver role delivers events).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WebhookConfig {
    /// Signs events; `None`: unsigned.
    pub secret: Option<Secret>,
    pub timeout: Duration,
}

/// Bounds on what callers take (docs/security.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LimitsConfig {
    pub max_concurrent_requests: usize,
    pub max_concurrent_requests_per_connection: usize,
    pub request_timeout: Duration,
    /// Longest a request's body may take to arrive after its headers.
    pub body_timeout: Duration,
    pub max_concurrent_requests_per_workspace: usize,
    /// Connection-level limits of every listener.
    pub connections: crate::connections::ConnectionLimits,
    /// Longest a dialectic call may run: its slowest level's deadline and a margin.
    pub dialectic_timeout: Duration,
    pub database_statement_timeout: Duration,
    /// Per workspace and minute; 0: unmetered.
    pub chat_per_minute: u32,
    /// Applied when a model derives (see [`LimitsConfig::rates`]).
    pub messages_per_minute: u32,
    pub uploads_per_minute: u32,
    pub dreams_per_minute: u32,
    pub clones_per_minute: u32,
    /// Longest an uploaded PDF may take to read.
    pub pdf_timeout: Duration,
    /// Address space of the process reading one PDF, in MiB.
    pub pdf_memory_mb: u64,
    /// PDFs read at once.
    pub pdf_concurrency: usize,
    /// Webhook URLs may point inside the network.
    pub webhook_allow_private_addresses: bool,
}

impl LimitsConfig {
    /// The admission limits of the gRPC server.
    pub fn admission(&self) -> roncho_api::admission::Limits {
        roncho_api::admission::Limits {
            max_in_flight: self.max_concurrent_requests,
            max_in_flight_per_connection: self.max_concurrent_requests_per_connection,
            request_timeout: self.request_timeout,
            dialectic_timeout: self.dialectic_timeout,
            body_timeout: self.body_timeout,
            max_in_flight_per_workspace: self.max_concurrent_requests_per_workspace,
            ..roncho_api::admission::Limits::default()
        }
    }

    /// The per-workspace rates; messages are metered only when `derives_with_model`.
    pub fn rates(&self, derives_with_model: bool) -> roncho_api::admission::RateLimiter {
        use roncho_api::admission::RateClass;
        roncho_api::admission::RateLimiter::new([
            (RateClass::Chat, self.chat_per_minute),
            (
                RateClass::Messages,
                if derives_with_model {
                    self.messages_per_minute
                } else {
                    0
                },
            ),
            (RateClass::Uploads, self.uploads_per_minute),
            (RateClass::Dreams, self.dreams_per_minute),
            (RateClass::Clones, self.clones_per_minute),
        ])
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "Config {}", self.redacted())
    }
}

/// `Debug` of configuration parts that hold URLs: their redacted JSON, so a
/// credential in a URL never prints.
macro_rules! debug_redacted {
    ($($part:ident),* $(,)?) => {$(
        impl std::fmt::Debug for $part {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let mut value = serde_json::to_value(self).unwrap_or_default();
                redact_urls(&mut value);
                write!(formatter, "{} {value}", stringify!($part))
            }
        }
    )*};
}

debug_redacted!(QdrantConfig, LlmEndpoint, EmbeddingConfig, TracingConfig);

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

/// When a collection is due a dream (Honcho's thresholds).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DreamConfig {
    /// New explicit observations since the collection's last dream.
    pub document_threshold: u64,
    /// Least time between two dreams of a collection.
    pub min_between: Duration,
    /// How long the observed peer must be quiet before a due dream runs.
    pub idle: Duration,
}

/// The distributed mode's work queue (see `roncho_nats`).
#[derive(Clone, PartialEq, Serialize)]
pub struct NatsConfig {
    /// `nats://host:4222`.
    pub url: String,
    /// Names the stream, consumers and lease bucket.
    pub prefix: String,
    /// Partitions per task type: the most deriver processes that share the work.
    pub partitions: u32,
    /// Redelivery delay of unacked work, also the partition lease TTL: how
    /// soon a killed process's work moves on.
    pub ack_wait: Duration,
    /// When pending work no consumer holds is republished (the stream lost it).
    pub redeliver_after: Duration,
}

/// An LLM provider, by the wire format roncho speaks to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmProvider {
    /// OpenAI Chat Completions and every server speaking it (OpenRouter,
    /// vLLM, Ollama, LM Studio, ...).
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `generateContent`.
    Gemini,
}

impl LlmProvider {
    pub const ALL: [LlmProvider; 3] = [LlmProvider::Openai, LlmProvider::Anthropic, LlmProvider::Gemini];

    pub fn name(self) -> &'static str {
        match self {
            LlmProvider::Openai => "openai",
            LlmProvider::Anthropic => "anthropic",
            LlmProvider::Gemini => "gemini",
        }
    }

    /// The provider's public API, used when no base URL is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            LlmProvider::Openai => "https://api.openai.com/v1",
            LlmProvider::Anthropic => "https://api.anthropic.com",
            LlmProvider::Gemini => "https://generativelanguage.googleapis.com",
        }
    }
}

/// A part of roncho that calls an LLM, each with its own models and limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmRole {
    Deriver,
    Summary,
    DialecticMinimal,
    DialecticLow,
    DialecticMedium,
    DialecticHigh,
    DialecticMax,
    Dream,
}

impl LlmRole {
    pub const ALL: [LlmRole; 8] = [
        LlmRole::Deriver,
        LlmRole::Summary,
        LlmRole::DialecticMinimal,
        LlmRole::DialecticLow,
        LlmRole::DialecticMedium,
        LlmRole::DialecticHigh,
        LlmRole::DialecticMax,
        LlmRole::Dream,
    ];

    /// The role's name, the prefix of its `_model` and `_max_tokens` keys.
    pub fn name(self) -> &'static str {
        match self {
            LlmRole::Deriver => "deriver",
            LlmRole::Summary => "summary",
            LlmRole::DialecticMinimal => "dialectic_minimal",
            LlmRole::DialecticLow => "dialectic_low",
            LlmRole::DialecticMedium => "dialectic_medium",
            LlmRole::DialecticHigh => "dialectic_high",
            LlmRole::DialecticMax => "dialectic_max",
            LlmRole::Dream => "dream",
        }
    }

    /// Reply budget when none is configured (Honcho's defaults: 250 for a
    /// minimal answer, 8192 for the agents; the summary's is the long one).
    pub fn default_max_tokens(self) -> u32 {
        match self {
            LlmRole::Deriver => 2_000,
            LlmRole::Summary => 4_000,
            LlmRole::DialecticMinimal => 250,
            LlmRole::DialecticLow | LlmRole::DialecticMedium | LlmRole::DialecticHigh | LlmRole::DialecticMax => 8_192,
            LlmRole::Dream => 8_192,
        }
    }

    fn is_dialectic(self) -> bool {
        self.name().starts_with("dialectic_")
    }

    /// The layer's (model, max tokens) for this role, before fallbacks.
    fn settings(self, layer: &ConfigLayer) -> (Option<&String>, Option<u32>) {
        match self {
            LlmRole::Deriver => (layer.deriver_model.as_ref(), layer.deriver_max_tokens),
            LlmRole::Summary => (layer.summary_model.as_ref(), layer.summary_max_tokens),
            LlmRole::DialecticMinimal => (
                layer.dialectic_minimal_model.as_ref(),
                layer.dialectic_minimal_max_tokens,
            ),
            LlmRole::DialecticLow => (layer.dialectic_low_model.as_ref(), layer.dialectic_low_max_tokens),
            LlmRole::DialecticMedium => (layer.dialectic_medium_model.as_ref(), layer.dialectic_medium_max_tokens),
            LlmRole::DialecticHigh => (layer.dialectic_high_model.as_ref(), layer.dialectic_high_max_tokens),
            LlmRole::DialecticMax => (layer.dialectic_max_model.as_ref(), layer.dialectic_max_max_tokens),
            LlmRole::Dream => (layer.dream_model.as_ref(), layer.dream_max_tokens),
        }
    }
}

/// One model of a chain, written `provider:model` (`anthropic:claude-haiku-4-5`)
/// or as a bare name for `llm_provider` (`qwen3:8b` stays whole: `qwen3` is no provider).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelRef {
    pub provider: LlmProvider,
    pub model: String,
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}:{}", self.provider.name(), self.model)
    }
}

/// Parses `a, b, c` (a fallback chain) into models.
pub fn parse_model_chain(text: &str, default: LlmProvider) -> anyhow::Result<Vec<ModelRef>> {
    let chain: Vec<ModelRef> = text
        .split(',')
        .map(str::trim)
        .filter(|model| !model.is_empty())
        .map(|spec| {
            let named = spec.split_once(':').and_then(|(prefix, model)| {
                LlmProvider::ALL
                    .into_iter()
                    .find(|provider| provider.name() == prefix)
                    .map(|provider| (provider, model))
            });
            let (provider, model) = named.unwrap_or((default, spec));
            ModelRef {
                provider,
                model: model.trim().to_owned(),
            }
        })
        .collect();
    if chain.is_empty() || chain.iter().any(|model| model.model.is_empty()) {
        bail!("`{text}` names no model; write `model`, `provider:model` or a comma-separated fallback chain");
    }
    Ok(chain)
}

/// A role's models, tried in order (the next when a provider is unavailable
/// or rate-limited), and its reply budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoleModels {
    pub chain: Vec<ModelRef>,
    pub max_tokens: u32,
}

/// Where a provider is reached.
#[derive(Clone, PartialEq, Serialize)]
pub struct LlmEndpoint {
    pub base_url: String,
    pub api_key: Option<Secret>,
}

/// The LLMs of the agents: per role a fallback chain and limits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlmConfig {
    /// The providers some chain uses.
    pub endpoints: std::collections::BTreeMap<LlmProvider, LlmEndpoint>,
    /// Limit on one request, streamed replies included.
    pub timeout: Duration,
    /// Retries of a 429, 5xx or time-out before the chain moves on.
    pub max_retries: u32,
    /// Roles with no model here run extractively.
    pub roles: std::collections::BTreeMap<LlmRole, RoleModels>,
}

impl LlmConfig {
    /// Resolves the layer's LLM keys; `None` when none is set.
    fn resolve(merged: &ConfigLayer) -> anyhow::Result<Option<LlmConfig>> {
        let default = merged.llm_provider.unwrap_or(LlmProvider::Openai);
        let mut roles = std::collections::BTreeMap::new();
        for role in LlmRole::ALL {
            let (model, max_tokens) = role.settings(merged);
            let (dialectic_model, dialectic_tokens) = if role.is_dialectic() {
                (merged.dialectic_model.as_ref(), merged.dialectic_max_tokens)
            } else {
                (None, None)
            };
            let Some(text) = model.or(dialectic_model).or(merged.llm_model.as_ref()) else {
                continue;
            };
            let chain = parse_model_chain(text, default).with_context(|| format!("the {} model", role.name()))?;
            let max_tokens = max_tokens
                .or(dialectic_tokens)
                .unwrap_or_else(|| role.default_max_tokens())
                .max(1);
            roles.insert(role, RoleModels { chain, max_tokens });
        }
        let any_endpoint = merged.llm_base_url.is_some()
            || merged.llm_api_key.is_some()
            || merged.llm_provider.is_some()
            || [
                &merged.openai_base_url,
                &merged.anthropic_base_url,
                &merged.gemini_base_url,
            ]
            .iter()
            .any(|url| url.is_some());
        if roles.is_empty() {
            if any_endpoint {
                bail!(
                    "an LLM provider is configured but no model: set llm_model (or deriver_model, summary_model, ...)"
                );
            }
            return Ok(None);
        }
        let mut endpoints = std::collections::BTreeMap::new();
        for provider in roles.values().flat_map(|role| &role.chain).map(|model| model.provider) {
            let (base_url, api_key) = match provider {
                LlmProvider::Openai => (&merged.openai_base_url, &merged.openai_api_key),
                LlmProvider::Anthropic => (&merged.anthropic_base_url, &merged.anthropic_api_key),
                LlmProvider::Gemini => (&merged.gemini_base_url, &merged.gemini_api_key),
            };
            let (fallback_url, fallback_key) = if provider == default {
                (merged.llm_base_url.as_ref(), merged.llm_api_key.as_ref())
            } else {
                (None, None)
            };
            let base_url = base_url
                .as_ref()
                .or(fallback_url)
                .map_or_else(|| provider.default_base_url().to_owned(), Clone::clone);
            if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                bail!(
                    "the {} base URL must be http:// or https://, not `{base_url}`",
                    provider.name()
                );
            }
            endpoints.insert(
                provider,
                LlmEndpoint {
                    base_url,
                    api_key: api_key.as_ref().or(fallback_key).map(Secret::from),
                },
            );
        }
        Ok(Some(LlmConfig {
            endpoints,
            timeout: Duration::from_secs(merged.llm_timeout_secs.unwrap_or(120).max(1)),
            max_retries: merged.llm_max_retries.unwrap_or(3),
            roles,
        }))
    }

    /// The reply budget of `role` (its default when it has no model).
    pub fn max_tokens(config: Option<&LlmConfig>, role: LlmRole) -> u32 {
        config
            .and_then(|llm| llm.roles.get(&role))
            .map_or_else(|| role.default_max_tokens(), |models| models.max_tokens)
    }

    /// One line per role: its chain and budget, or that it is extractive.
    pub fn describe(&self) -> String {
        LlmRole::ALL
            .iter()
            .map(|role| match self.roles.get(role) {
                Some(models) => format!(
                    "{} {} (max {} tokens)",
                    role.name(),
                    models
                        .chain
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" > "),
                    models.max_tokens
                ),
                None => format!("{} extractive", role.name()),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Where the distributed mode keeps vectors.
#[derive(Clone, PartialEq, Serialize)]
pub struct QdrantConfig {
    /// gRPC URL, e.g. `http://qdrant:6334`.
    pub url: String,
    pub collection: String,
    pub api_key: Option<Secret>,
}

impl std::fmt::Debug for NatsConfig {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("NatsConfig")
            .field("url", &roncho_store::redact_url(&self.url))
            .field("prefix", &self.prefix)
            .field("partitions", &self.partitions)
            .field("ack_wait", &self.ack_wait)
            .field("redeliver_after", &self.redeliver_after)
            .finish()
    }
}

impl NatsConfig {
    /// The queue options these settings give (a process that consumes
    /// nothing and relays; callers adjust).
    pub fn options(&self) -> roncho_nats::NatsOptions {
        let mut options = roncho_nats::NatsOptions::new(&self.url);
        options.prefix = self.prefix.clone();
        options.partitions = self.partitions;
        options.ack_wait = self.ack_wait;
        options.lease_ttl = self.ack_wait;
        options.redeliver_after = self.redeliver_after;
        options
    }
}

/// Embedder settings.
#[derive(Clone, PartialEq, Serialize)]
pub struct EmbeddingConfig {
    pub provider: EmbeddingProvider,
    /// Local model directory; with `auto`, also searched in `<data_dir>/models`
    /// and `~/.cache/roncho/models`.
    pub model_dir: Option<PathBuf>,
    pub base_url: String,
    pub model: String,
    pub dimensions: Option<usize>,
    pub api_key: Option<Secret>,
    /// Directories `auto` looks in for a local model, in order: each place's
    /// bge-small-en-v1.5 (the default), then its all-MiniLM-L6-v2.
    pub search_dirs: Vec<PathBuf>,
}

/// The local models `auto` finds, best first: bge-small-en-v1.5
/// (`scripts/fetch-bge-small.sh`; recall@10 0.768 against MiniLM's 0.738 on
/// the LoCoMo development set, at twice the embedding cost:
/// docs/benchmarks.md), then all-MiniLM-L6-v2 (`scripts/fetch-minilm.sh`).
pub const LOCAL_MODELS: [&str; 2] = ["bge-small-en-v1.5", "all-MiniLM-L6-v2"];

impl Config {
    /// Resolves layers (lowest first) into a validated config.
    pub fn resolve(file: ConfigLayer, env: ConfigLayer, flags: ConfigLayer) -> anyhow::Result<Config> {
        Self::resolve_with_home(file, env, flags, None)
    }

    /// Like [`Config::resolve`]; `home` is where `auto` also looks for a model.
    pub fn resolve_with_home(
        file: ConfigLayer,
        env: ConfigLayer,
        flags: ConfigLayer,
        home: Option<PathBuf>,
    ) -> anyhow::Result<Config> {
        let merged = file.overlay(env).overlay(flags);
        let data_dir = merged
            .data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("./roncho-data"));
        let places = std::iter::once(data_dir.join("models")).chain(home.map(|home| home.join(".cache/roncho/models")));
        let search_dirs = places
            .flat_map(|place| LOCAL_MODELS.map(|model| place.join(model)))
            .collect();
        let embedding = EmbeddingConfig {
            provider: merged.embedding_provider.unwrap_or(EmbeddingProvider::Auto),
            model_dir: merged.embedding_model_dir.clone(),
            base_url: merged
                .embedding_base_url
                .clone()
                .unwrap_or_else(|| "https://api.openai.com/v1".to_owned()),
            model: merged
                .embedding_model
                .clone()
                .unwrap_or_else(|| "text-embedding-3-small".to_owned()),
            dimensions: merged.embedding_dimensions,
            api_key: merged.embedding_api_key.as_ref().map(Secret::from),
            search_dirs,
        };
        if embedding.provider == EmbeddingProvider::Openai && embedding.dimensions.is_none() {
            bail!(
                "embedding_dimensions is required with the openai embedding provider (e.g. 1536 for text-embedding-3-small)"
            );
        }
        if embedding.provider == EmbeddingProvider::Local && embedding.model_dir.is_none() {
            bail!("embedding_model_dir is required with the local embedding provider");
        }
        if let Some(url) = &merged.qdrant_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            bail!("qdrant_url must be an http:// or https:// URL of Qdrant's gRPC port (6334), not `{url}`");
        }
        let qdrant = merged.qdrant_url.clone().map(|url| QdrantConfig {
            url,
            collection: merged.qdrant_collection.clone().unwrap_or_else(|| "roncho".to_owned()),
            api_key: merged.qdrant_api_key.as_ref().map(Secret::from),
        });
        let nats = match &merged.nats_url {
            None => None,
            Some(_) if merged.database_url.is_none() => bail!(
                "nats_url needs database_url (Postgres): every process shares the task ledger, which the embedded SQLite file cannot be"
            ),
            Some(url) => Some(NatsConfig {
                url: url.clone(),
                prefix: merged.nats_prefix.clone().unwrap_or_else(|| "roncho".to_owned()),
                partitions: merged.nats_partitions.unwrap_or(16).max(1),
                ack_wait: Duration::from_secs(merged.nats_ack_wait_secs.unwrap_or(30).max(1)),
                redeliver_after: Duration::from_secs(merged.nats_redeliver_after_secs.unwrap_or(120).max(1)),
            }),
        };
        let llm = LlmConfig::resolve(&merged)?;
        let roles = parse_roles(merged.roles.as_deref().unwrap_or("all"))?;
        let tracing = match &merged.otlp_endpoint {
            None => None,
            Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                bail!(
                    "otlp_endpoint must be the collector's http:// or https:// OTLP/gRPC URL (port 4317), not `{url}`"
                )
            }
            Some(url) => {
                let sample_ratio = merged.otlp_sample_ratio.unwrap_or(1.0);
                if !(0.0..=1.0).contains(&sample_ratio) {
                    bail!("otlp_sample_ratio must be between 0.0 and 1.0, not {sample_ratio}");
                }
                Some(TracingConfig {
                    endpoint: url.clone(),
                    service_name: merged
                        .otlp_service_name
                        .clone()
                        .unwrap_or_else(|| default_service_name(&roles)),
                    sample_ratio,
                })
            }
        };
        // The current secret is taken whole; only the previous ones are a list.
        let secrets: Vec<Secret> = merged
            .auth_jwt_secret
            .iter()
            .map(|secret| secret.trim())
            .chain(
                merged
                    .auth_jwt_previous_secrets
                    .iter()
                    .flat_map(|secrets| secrets.split(','))
                    .map(str::trim),
            )
            .filter(|secret| !secret.is_empty())
            .map(|secret| Secret(secret.to_owned()))
            .collect();
        if merged.auth_jwt_previous_secrets.is_some() && merged.auth_jwt_secret.is_none() {
            bail!(
                "auth_jwt_previous_secrets needs auth_jwt_secret: the current secret signs, the previous ones only verify"
            );
        }
        let tls = match (&merged.tls_cert_file, &merged.tls_key_file) {
            (Some(cert), Some(key)) => Some(crate::tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: merged.tls_client_ca_file.clone(),
            }),
            (None, None) if merged.tls_client_ca_file.is_some() => {
                bail!(
                    "tls_client_ca_file needs tls_cert_file and tls_key_file: client certificates are checked over TLS"
                )
            }
            (None, None) => None,
            _ => bail!("tls_cert_file and tls_key_file go together"),
        };
        let limits = LimitsConfig {
            max_concurrent_requests: merged.max_concurrent_requests.unwrap_or(512).max(1),
            max_concurrent_requests_per_connection: merged.max_concurrent_requests_per_connection.unwrap_or(128).max(1),
            request_timeout: Duration::from_secs(merged.request_timeout_secs.unwrap_or(60).max(1)),
            body_timeout: Duration::from_secs(merged.request_body_timeout_secs.unwrap_or(30).max(1)),
            max_concurrent_requests_per_workspace: merged.max_concurrent_requests_per_workspace.unwrap_or(128).max(1),
            connections: crate::connections::ConnectionLimits {
                max_open: merged.max_open_connections.unwrap_or(16_384).max(1),
                max_per_address: merged.max_open_connections_per_address.unwrap_or(4_096).max(1),
                header_timeout: Duration::from_secs(merged.request_header_timeout_secs.unwrap_or(10).max(1)),
                handshake_timeout: Duration::from_secs(merged.connection_handshake_timeout_secs.unwrap_or(10).max(1)),
            },
            dialectic_timeout: dialectic_limit(&merged),
            database_statement_timeout: Duration::from_secs(merged.database_statement_timeout_secs.unwrap_or(30)),
            chat_per_minute: merged.rate_limit_chat_per_minute.unwrap_or(120),
            messages_per_minute: merged.rate_limit_messages_per_minute.unwrap_or(6_000),
            uploads_per_minute: merged.rate_limit_uploads_per_minute.unwrap_or(60),
            dreams_per_minute: merged.rate_limit_dreams_per_minute.unwrap_or(10),
            clones_per_minute: merged.rate_limit_clones_per_minute.unwrap_or(30),
            pdf_timeout: Duration::from_secs(merged.upload_pdf_timeout_secs.unwrap_or(30).max(1)),
            pdf_memory_mb: merged.upload_pdf_memory_mb.unwrap_or(1024).max(64),
            pdf_concurrency: merged.upload_pdf_concurrency.unwrap_or(2).max(1),
            webhook_allow_private_addresses: merged.webhook_allow_private_addresses.unwrap_or(false),
        };
        let grpc_reflection = merged.grpc_reflection.unwrap_or(secrets.is_empty());
        let config = Config {
            grpc_reflection,
            webhooks: WebhookConfig {
                secret: merged.webhook_secret.as_ref().map(Secret::from),
                timeout: Duration::from_secs(merged.webhook_timeout_secs.unwrap_or(30).max(1)),
            },
            limits,
            tls,
            health_listen: merged.health_listen,
            rest_listen: rest_listen(merged.rest_listen.as_deref(), &roles)?,
            auth: AuthConfig {
                secrets,
                insecure_no_auth: merged.insecure_no_auth.unwrap_or(false),
            },
            tracing,
            embedding,
            qdrant,
            llm,
            deriver_lease: Duration::from_secs(merged.deriver_lease_secs.unwrap_or(60).max(1)),
            idempotency_window: Duration::from_secs(merged.idempotency_window_secs.unwrap_or(86_400).max(1)),
            worker_outage_backoff: Duration::from_secs(merged.worker_outage_backoff_secs.unwrap_or(5).max(1)),
            worker_outage_backoff_max: Duration::from_secs(
                merged
                    .worker_outage_backoff_max_secs
                    .unwrap_or(300)
                    .max(merged.worker_outage_backoff_secs.unwrap_or(5).max(1)),
            ),
            reconciler_interval: Duration::from_millis(merged.reconciler_interval_ms.unwrap_or(1_000).max(50)),
            background_yield: Duration::from_millis(merged.background_yield_ms.unwrap_or(5_000)),
            startup_timeout: Duration::from_secs(merged.startup_timeout_secs.unwrap_or(120)),
            metrics_listen: merged.metrics_listen,
            dialectic_timeouts: [
                merged.dialectic_minimal_timeout_secs,
                merged.dialectic_low_timeout_secs,
                merged.dialectic_medium_timeout_secs,
                merged.dialectic_high_timeout_secs,
                merged.dialectic_max_timeout_secs,
            ]
            .map(|secs| secs.map(|secs| Duration::from_secs(secs.max(1)))),
            dreams: DreamConfig {
                document_threshold: merged.dream_document_threshold.unwrap_or(50).max(1),
                min_between: Duration::from_secs(merged.dream_min_hours.unwrap_or(8) * 3600),
                idle: Duration::from_secs(merged.dream_idle_minutes.unwrap_or(60) * 60),
            },
            nats,
            listen: merged
                .listen
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 50051))),
            data_dir,
            database_url: merged.database_url,
            roles,
            log: merged.log.unwrap_or_else(|| "info".to_owned()),
            log_format: merged.log_format.unwrap_or(LogFormat::Text),
            shutdown_grace: Duration::from_secs(merged.shutdown_grace_secs.unwrap_or(10)),
            max_connections: merged.max_connections.unwrap_or(16).max(1),
            erasure_vacuum: merged.erasure_vacuum.unwrap_or(false),
        };
        if let Some(url) = &config.database_url
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            bail!("database_url must be a postgres:// URL; leave it unset for the embedded SQLite store");
        }
        Ok(config)
    }

    /// Returns why serving this config is refused: a non-loopback address
    /// (gRPC or REST) without authentication, unless `insecure_no_auth` says
    /// so. With TLS, both listeners serve it.
    pub fn check_exposure(&self) -> anyhow::Result<()> {
        if let Some(rest) = self.rest_listen.filter(|rest| !rest.address.ip().is_loopback()) {
            self.check_address(rest.address)?;
        }
        self.check_address(self.listen)
    }

    fn check_address(&self, address: SocketAddr) -> anyhow::Result<()> {
        if !address.ip().is_loopback()
            && let Some(short) = self
                .auth
                .secrets
                .iter()
                .find(|secret| secret.expose().len() < MIN_SECRET_BYTES)
        {
            bail!(
                "refusing to serve {} with an auth secret of {} bytes: keys signed with it can be guessed offline. \
                 Use at least {MIN_SECRET_BYTES} random bytes (openssl rand -hex 32)",
                address,
                short.expose().len()
            );
        }
        if self.auth.enabled() || address.ip().is_loopback() || self.auth.insecure_no_auth {
            return Ok(());
        }
        bail!(
            "refusing to serve {} without authentication: anyone who reaches it could read and delete every workspace. \
             Set auth_jwt_secret (RONCHO_AUTH_JWT_SECRET or --auth-jwt-secret), listen on a loopback address, \
             or pass --insecure-no-auth to accept the risk",
            address
        )
    }

    /// Returns whether this process runs on the embedded SQLite store.
    pub fn is_embedded(&self) -> bool {
        self.database_url.is_none()
    }

    /// Returns the store options this config selects.
    pub fn store_options(&self) -> roncho_store::StoreOptions {
        let mut options = match &self.database_url {
            Some(url) => roncho_store::StoreOptions::new(url.clone()),
            None => roncho_store::StoreOptions::embedded(&self.data_dir),
        };
        options.max_connections = self.max_connections;
        options.vacuum_after_erasure = self.erasure_vacuum;
        options.statement_timeout = Some(self.limits.database_statement_timeout).filter(|timeout| !timeout.is_zero());
        options
    }

    /// Returns the config as JSON with secrets redacted, for logs and status.
    pub fn redacted(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        redact_urls(&mut value);
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn defaults_are_the_embedded_server() {
        let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), ConfigLayer::default()).unwrap();
        assert_eq!(config.listen.to_string(), "127.0.0.1:50051");
        assert_eq!(config.data_dir, PathBuf::from("./roncho-data"));
        assert!(config.is_embedded());
        assert_eq!(config.roles, Role::ALL.to_vec());
    }

    #[test]
    fn flags_beat_env_beat_file() {
        let file = ConfigLayer::from_toml("listen = \"127.0.0.1:1\"\nroles = \"ingest\"\nlog = \"debug\"").unwrap();
        let env = ConfigLayer::from_env(&env(&[("RONCHO_LISTEN", "127.0.0.1:2"), ("RONCHO_ROLES", "recall")])).unwrap();
        let flags = ConfigLayer {
            listen: Some("127.0.0.1:3".parse().unwrap()),
            ..ConfigLayer::default()
        };
        let config = Config::resolve(file, env, flags).unwrap();
        assert_eq!(config.listen.port(), 3);
        assert_eq!(config.roles, vec![Role::Recall]);
        assert_eq!(config.log, "debug");
    }

    #[test]
    fn bad_values_are_reported() {
        assert!(parse_roles("ingest,bogus").is_err());
        assert!(ConfigLayer::from_env(&env(&[("RONCHO_LISTEN", "nope")])).is_err());
        assert!(ConfigLayer::from_toml("unknown_key = 1").is_err());
        let layer = ConfigLayer {
            database_url: Some("mysql://x".into()),
            ..ConfigLayer::default()
        };
        assert!(Config::resolve(ConfigLayer::default(), ConfigLayer::default(), layer).is_err());
        let layer = ConfigLayer {
            qdrant_url: Some("qdrant:6334".into()),
            ..ConfigLayer::default()
        };
        assert!(Config::resolve(ConfigLayer::default(), ConfigLayer::default(), layer).is_err());
    }

    #[test]
    fn llm_models_are_chosen_per_role() {
        let layer = ConfigLayer::from_env(&env(&[
            ("RONCHO_LLM_BASE_URL", "http://localhost:11434/v1"),
            ("RONCHO_LLM_MODEL", "qwen3:8b"),
            ("RONCHO_SUMMARY_MODEL", "qwen3:1.7b"),
            ("RONCHO_LLM_API_KEY", "sk-secret"),
        ]))
        .unwrap();
        let config = Config::resolve(ConfigLayer::default(), layer, ConfigLayer::default()).unwrap();
        let llm = config.llm.as_ref().unwrap();
        let chain = |role: LlmRole| {
            llm.roles[&role]
                .chain
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(chain(LlmRole::Deriver), ["openai:qwen3:8b"], "`qwen3` is no provider");
        assert_eq!(chain(LlmRole::Summary), ["openai:qwen3:1.7b"]);
        assert_eq!(chain(LlmRole::DialecticMax), ["openai:qwen3:8b"]);
        assert_eq!(
            llm.endpoints[&LlmProvider::Openai],
            LlmEndpoint {
                base_url: "http://localhost:11434/v1".into(),
                api_key: Some(Secret("sk-secret".into()))
            }
        );
        assert!(!config.redacted().to_string().contains("sk-secret"));
        assert!(!format!("{config:?}").contains("sk-secret"));
        let no_model = ConfigLayer::from_env(&env(&[("RONCHO_LLM_BASE_URL", "http://x/v1")])).unwrap();
        assert!(Config::resolve(ConfigLayer::default(), no_model, ConfigLayer::default()).is_err());
        let none = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), ConfigLayer::default()).unwrap();
        assert!(none.llm.is_none(), "no LLM by default: extractive");
    }

    #[test]
    fn each_role_has_its_provider_chain_and_limits() {
        let file = ConfigLayer::from_toml(
            r#"
llm_provider = "anthropic"
anthropic_api_key = "sk-ant"
gemini_api_key = "g-key"
openai_base_url = "http://vllm:8000/v1"
llm_model = "claude-haiku-4-5"
deriver_model = "gemini:gemini-2.5-flash-lite, openai:qwen3-8b"
dialectic_model = "claude-sonnet-4-5"
dialectic_minimal_model = "claude-haiku-4-5"
dialectic_max_tokens = 4000
dialectic_minimal_max_tokens = 300
deriver_max_tokens = 1500
"#,
        )
        .unwrap();
        let variables = ConfigLayer::from_env(&env(&[
            ("RONCHO_DREAM_MAX_TOKENS", "6000"),
            ("RONCHO_LLM_MAX_RETRIES", "1"),
            ("RONCHO_DIALECTIC_MAX_TIMEOUT_SECS", "300"),
        ]))
        .unwrap();
        let config = Config::resolve(file, variables, ConfigLayer::default()).unwrap();
        let llm = config.llm.as_ref().unwrap();
        let role = |role: LlmRole| {
            let models = &llm.roles[&role];
            let chain: Vec<String> = models.chain.iter().map(ToString::to_string).collect();
            (chain.join(" > "), models.max_tokens)
        };
        assert_eq!(
            role(LlmRole::Deriver),
            ("gemini:gemini-2.5-flash-lite > openai:qwen3-8b".into(), 1500),
            "a fallback chain across providers"
        );
        assert_eq!(role(LlmRole::Summary), ("anthropic:claude-haiku-4-5".into(), 4000));
        assert_eq!(
            role(LlmRole::DialecticMinimal),
            ("anthropic:claude-haiku-4-5".into(), 300)
        );
        assert_eq!(
            role(LlmRole::DialecticHigh),
            ("anthropic:claude-sonnet-4-5".into(), 4000)
        );
        assert_eq!(role(LlmRole::Dream), ("anthropic:claude-haiku-4-5".into(), 6000));
        assert_eq!(llm.max_retries, 1);
        assert_eq!(config.dialectic_timeouts[0], None, "defaults unless set");
        assert_eq!(config.dialectic_timeouts[4], Some(Duration::from_secs(300)));
        let endpoint = |provider: LlmProvider| {
            let endpoint = &llm.endpoints[&provider];
            (
                endpoint.base_url.as_str(),
                endpoint.api_key.as_ref().map(Secret::expose),
            )
        };
        assert_eq!(
            endpoint(LlmProvider::Anthropic),
            ("https://api.anthropic.com", Some("sk-ant"))
        );
        assert_eq!(
            endpoint(LlmProvider::Gemini),
            ("https://generativelanguage.googleapis.com", Some("g-key"))
        );
        assert_eq!(endpoint(LlmProvider::Openai), ("http://vllm:8000/v1", None));
        let text = config.redacted().to_string();
        assert!(!text.contains("sk-ant") && !text.contains("g-key"), "{text}");
        assert!(
            llm.describe()
                .contains("deriver gemini:gemini-2.5-flash-lite > openai:qwen3-8b (max 1500 tokens)")
        );

        let only_deriver = ConfigLayer::from_env(&env(&[("RONCHO_DERIVER_MODEL", "gpt-4.1-mini")])).unwrap();
        let config = Config::resolve(ConfigLayer::default(), only_deriver, ConfigLayer::default()).unwrap();
        let llm = config.llm.unwrap();
        assert_eq!(llm.roles.keys().copied().collect::<Vec<_>>(), [LlmRole::Deriver]);
        assert!(llm.describe().contains("summary extractive"));
        assert!(parse_model_chain(" , ", LlmProvider::Openai).is_err());
        assert!(parse_model_chain("anthropic:", LlmProvider::Openai).is_err());
    }

    /// The settings docs/configuration.md documents in its tables' first
    /// column (brace lists and `{level}` expanded), each with the `RONCHO_*`
    /// names written beside it.
    fn documented_settings() -> Vec<(String, Vec<String>)> {
        const LEVELS: [&str; 5] = ["minimal", "low", "medium", "high", "max"];
        let text = include_str!("../../../docs/configuration.md");
        let mut rows = Vec::new();
        for line in text.lines().filter(|line| line.starts_with("| `")) {
            let cells: Vec<&str> = line.split(" | ").collect();
            let ticked =
                |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_owned).collect() };
            let mut envs = ticked(cells[1]);
            if cells[1].contains('…') {
                envs.push("…".to_owned()); // "RONCHO_DERIVER_MODEL, …": the others follow the rule
            }
            for key in ticked(cells[0].trim_start_matches("| ")) {
                if key.contains('*') {
                    continue; // a pointer to a section that lists them
                }
                let expanded: Vec<String> = match (key.find('{'), key.find('}')) {
                    (Some(open), Some(close)) => {
                        let (head, tail) = (&key[..open], &key[close + 1..]);
                        let inner = &key[open + 1..close];
                        let choices: Vec<&str> = if inner == "level" {
                            LEVELS.to_vec()
                        } else {
                            inner.split(',').collect()
                        };
                        choices.iter().map(|choice| format!("{head}{choice}{tail}")).collect()
                    }
                    _ => vec![key],
                };
                for key in expanded {
                    rows.push((key, envs.clone()));
                }
            }
        }
        rows
    }

    #[test]
    fn docs_configuration_lists_every_setting_once_under_its_names() {
        let keys = ConfigLayer::keys();
        let documented = documented_settings();
        let mut seen = std::collections::BTreeSet::new();
        for (key, envs) in &documented {
            assert!(
                keys.contains(key),
                "docs/configuration.md documents `{key}`, which is no setting"
            );
            assert!(
                seen.insert(key.clone()),
                "docs/configuration.md documents `{key}` twice"
            );
            let variable = format!("RONCHO_{}", key.to_uppercase());
            let named = envs
                .iter()
                .any(|env| *env == variable || env.ends_with('…') || env.contains("{"));
            assert!(
                named,
                "docs/configuration.md gives `{key}` the variables {envs:?}, not {variable}"
            );
        }
        for key in &keys {
            assert!(seen.contains(key), "docs/configuration.md does not document `{key}`");
        }
    }

    /// A value of each kind a setting can take, as an env variable's text
    /// and as TOML.
    const SAMPLES: [(&str, &str); 7] = [
        ("7", "7"),
        ("true", "true"),
        ("0.5", "0.5"),
        ("127.0.0.1:1", "\"127.0.0.1:1\""),
        ("json", "\"json\""),
        ("test-hashing", "\"test-hashing\""),
        ("openai", "\"openai\""),
    ];

    /// The settings a layer sets (its non-null keys).
    fn set_keys(layer: &ConfigLayer) -> Vec<String> {
        match to_json(layer) {
            serde_json::Value::Object(fields) => fields
                .into_iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, _)| key)
                .collect(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn every_setting_is_reached_by_its_variable_and_its_toml_key() {
        for key in ConfigLayer::keys() {
            let name = format!("RONCHO_{}", key.to_uppercase());
            let by_env = SAMPLES
                .iter()
                .find_map(|(text, _)| ConfigLayer::from_env(&env(&[(name.as_str(), text)])).ok());
            let by_env = by_env.unwrap_or_else(|| panic!("no sample value is valid for {name}"));
            assert_eq!(
                set_keys(&by_env),
                std::slice::from_ref(&key),
                "{name} sets `{key}` and nothing else"
            );
            let by_toml = SAMPLES
                .iter()
                .find_map(|(_, toml)| ConfigLayer::from_toml(&format!("{key} = {toml}")).ok());
            let by_toml = by_toml.unwrap_or_else(|| panic!("no sample value is valid for the TOML key `{key}`"));
            assert_eq!(
                set_keys(&by_toml),
                std::slice::from_ref(&key),
                "TOML `{key}` sets `{key}` and nothing else"
            );
        }
    }

    #[test]
    fn every_setting_reads_from_its_variable() {
        let layer = ConfigLayer::from_env(&env(&[
            ("RONCHO_NATS_PARTITIONS", "8"),
            ("RONCHO_LLM_API_KEY", "12345"),
            ("RONCHO_EMBEDDING_PROVIDER", "test-hashing"),
            ("RONCHO_LOG_FORMAT", "json"),
            ("RONCHO_DATA_DIR", "/var/lib/roncho"),
            ("RONCHO_TEST_DATABASE_URL", "ignored: names no setting"),
            ("RONCHO_CONFIG", "ignored: the file itself"),
            ("RONCHO_LOG", ""),
        ]))
        .unwrap();
        assert_eq!(layer.nats_partitions, Some(8));
        assert_eq!(
            layer.llm_api_key.as_deref(),
            Some("12345"),
            "digits stay text where text is wanted"
        );
        assert_eq!(layer.embedding_provider, Some(EmbeddingProvider::TestHashing));
        assert_eq!(layer.log_format, Some(LogFormat::Json));
        assert_eq!(layer.data_dir, Some(PathBuf::from("/var/lib/roncho")));
        assert_eq!(layer.log, None, "empty is unset");
        let error = ConfigLayer::from_env(&env(&[("RONCHO_NATS_PARTITIONS", "many")])).unwrap_err();
        assert!(error.to_string().contains("RONCHO_NATS_PARTITIONS=`many`"), "{error}");
        let not_finite = ConfigLayer::from_env(&env(&[
            ("RONCHO_OTLP_SAMPLE_RATIO", "NaN"),
            ("RONCHO_LLM_MODEL", "inf"),
        ]));
        let error = not_finite.unwrap_err();
        assert!(error.to_string().contains("RONCHO_OTLP_SAMPLE_RATIO=`NaN`"), "{error}");
        let layer = ConfigLayer::from_env(&env(&[("RONCHO_LLM_MODEL", "inf")])).unwrap();
        assert_eq!(
            layer.llm_model.as_deref(),
            Some("inf"),
            "a word that parses as a float stays text"
        );
        let error = ConfigLayer::from_env(&env(&[("RONCHO_LLM_PROVIDER", "cohere")])).unwrap_err();
        assert!(error.to_string().contains("anthropic"), "names the choices: {error}");
    }

    #[test]
    fn nats_needs_postgres_and_keeps_its_password_out_of_logs() {
        let nats = [("RONCHO_NATS_URL", "nats://roncho:sekrit@nats:4222")];
        let env_only = ConfigLayer::from_env(&env(&nats)).unwrap();
        let error = Config::resolve(ConfigLayer::default(), env_only, ConfigLayer::default()).unwrap_err();
        assert!(error.to_string().contains("database_url"), "{error}");
        let env = ConfigLayer::from_env(&env(&[
            nats[0],
            ("RONCHO_DATABASE_URL", "postgres://db/roncho"),
            ("RONCHO_NATS_PARTITIONS", "8"),
            ("RONCHO_NATS_ACK_WAIT_SECS", "5"),
        ]))
        .unwrap();
        let config = Config::resolve(ConfigLayer::default(), env, ConfigLayer::default()).unwrap();
        let options = config.nats.as_ref().unwrap().options();
        assert_eq!(
            (
                options.prefix.as_str(),
                options.partitions,
                options.ack_wait,
                options.lease_ttl
            ),
            ("roncho", 8, Duration::from_secs(5), Duration::from_secs(5))
        );
        assert!(!config.redacted().to_string().contains("sekrit"));
    }

    #[test]
    fn trace_export_is_off_unless_an_endpoint_is_set() {
        let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), ConfigLayer::default()).unwrap();
        assert_eq!(config.tracing, None);
        let layer = ConfigLayer::from_env(&env(&[
            ("RONCHO_OTLP_ENDPOINT", "http://otel-collector:4317"),
            ("RONCHO_OTLP_SAMPLE_RATIO", "0.25"),
            ("RONCHO_ROLES", "ingest,recall"),
        ]))
        .unwrap();
        let config = Config::resolve(ConfigLayer::default(), layer, ConfigLayer::default()).unwrap();
        assert_eq!(
            config.tracing,
            Some(TracingConfig {
                endpoint: "http://otel-collector:4317".into(),
                service_name: "roncho-ingest-recall".into(),
                sample_ratio: 0.25,
            })
        );
        let every_role = ConfigLayer {
            otlp_endpoint: Some("http://127.0.0.1:4317".into()),
            otlp_sample_ratio: Some(1.0),
            ..ConfigLayer::default()
        };
        let config = Config::resolve(ConfigLayer::default(), every_role.clone(), ConfigLayer::default()).unwrap();
        assert_eq!(config.tracing.unwrap().service_name, "roncho");
        for (bad, says) in [
            (
                ConfigLayer {
                    otlp_sample_ratio: Some(1.5),
                    ..every_role.clone()
                },
                "between 0.0 and 1.0",
            ),
            (
                ConfigLayer {
                    otlp_endpoint: Some("otel-collector:4317".into()),
                    ..every_role
                },
                "http://",
            ),
        ] {
            let error = Config::resolve(ConfigLayer::default(), bad, ConfigLayer::default()).unwrap_err();
            assert!(error.to_string().contains(says), "{error}");
        }
    }

    #[test]
    fn qdrant_is_configured_by_url() {
        let env = ConfigLayer::from_env(&env(&[
            ("RONCHO_QDRANT_URL", "http://qdrant:6334"),
            ("RONCHO_QDRANT_API_KEY", "sekrit"),
        ]))
        .unwrap();
        let config = Config::resolve(ConfigLayer::default(), env, ConfigLayer::default()).unwrap();
        let qdrant = config.qdrant.as_ref().unwrap();
        assert_eq!(
            (qdrant.url.as_str(), qdrant.collection.as_str()),
            ("http://qdrant:6334", "roncho")
        );
        assert!(!config.redacted().to_string().contains("sekrit"));
    }

    #[test]
    fn secrets_are_redacted() {
        let layer = ConfigLayer {
            database_url: Some("postgres://u:hunter2@h/db".into()),
            ..ConfigLayer::default()
        };
        let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), layer).unwrap();
        let text = config.redacted().to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("postgres://u:***@h/db"));
    }

    #[test]
    fn no_configuration_type_prints_a_secret_through_debug() {
        let env = env(&[
            ("RONCHO_DATABASE_URL", "postgres://u:pw-db@h/db"),
            ("RONCHO_NATS_URL", "nats://u:pw-nats@h:4222"),
            ("RONCHO_QDRANT_URL", "http://qdrant:6334/?api_key=pw-in-query"),
            ("RONCHO_OTLP_ENDPOINT", "http://user:pw-otlp@collector:4317"),
            ("RONCHO_LLM_BASE_URL", "https://pw-token@llm.example/v1"),
            ("RONCHO_QDRANT_API_KEY", "pw-qdrant"),
            ("RONCHO_EMBEDDING_PROVIDER", "openai"),
            ("RONCHO_EMBEDDING_DIMENSIONS", "8"),
            ("RONCHO_EMBEDDING_API_KEY", "pw-embed"),
            ("RONCHO_LLM_MODEL", "m"),
            ("RONCHO_LLM_API_KEY", "pw-llm"),
            ("RONCHO_ANTHROPIC_API_KEY", "pw-anthropic"),
            ("RONCHO_AUTH_JWT_SECRET", "pw-jwt-current"),
            ("RONCHO_AUTH_JWT_PREVIOUS_SECRETS", "pw-jwt-old1,pw-jwt-old2"),
        ]);
        let layer = ConfigLayer::from_env(&env).unwrap();
        let config = Config::resolve(ConfigLayer::default(), layer.clone(), ConfigLayer::default()).unwrap();
        assert_eq!(config.auth.secrets.len(), 3, "the current secret and two previous ones");
        assert_eq!(
            config.auth.secrets[0].expose(),
            "pw-jwt-current",
            "the current one signs"
        );
        let printed = [
            format!("{layer:?}"),
            format!("{config:?}"),
            format!("{:?}", config.nats),
            format!("{:?}", config.qdrant),
            format!("{:?}", config.embedding),
            format!("{:?}", config.llm),
            format!("{:?}", config.auth),
            config.redacted().to_string(),
        ];
        for text in printed {
            assert!(!text.contains("pw-"), "a secret leaked: {text}");
        }
    }

    #[test]
    fn a_non_loopback_address_needs_auth_or_an_explicit_opt_out() {
        let exposed = ConfigLayer {
            listen: Some("0.0.0.0:50051".parse().unwrap()),
            ..ConfigLayer::default()
        };
        let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), exposed.clone()).unwrap();
        let error = config.check_exposure().unwrap_err().to_string();
        assert!(
            error.contains("auth_jwt_secret") && error.contains("--insecure-no-auth"),
            "{error}"
        );
        let opted_out = ConfigLayer::from_env(&env(&[("RONCHO_INSECURE_NO_AUTH", "true")])).unwrap();
        let config = Config::resolve(ConfigLayer::default(), opted_out, exposed.clone()).unwrap();
        assert!(config.check_exposure().is_ok());
        let with_auth = ConfigLayer {
            auth_jwt_secret: Some("s".repeat(32)),
            ..exposed
        };
        let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), with_auth).unwrap();
        assert!(config.check_exposure().is_ok());
        let local = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), ConfigLayer::default()).unwrap();
        assert!(local.check_exposure().is_ok(), "loopback keeps the zero-setup default");
        let short = ConfigLayer {
            listen: Some("0.0.0.0:50051".parse().unwrap()),
            auth_jwt_secret: Some("too-short".into()),
            ..ConfigLayer::default()
        };
        let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), short).unwrap();
        let error = config.check_exposure().unwrap_err().to_string();
        assert!(error.contains("9 bytes") && error.contains("32"), "{error}");
    }
}
