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

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// Settings as one layer gives them; `None` defers to the layer below.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
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
    pub embedding_provider: Option<EmbeddingProvider>,
    pub embedding_model_dir: Option<PathBuf>,
    pub embedding_base_url: Option<String>,
    pub embedding_model: Option<String>,
    pub embedding_dimensions: Option<usize>,
    pub embedding_api_key: Option<String>,
    pub qdrant_url: Option<String>,
    pub qdrant_api_key: Option<String>,
    pub qdrant_collection: Option<String>,
    pub llm_base_url: Option<String>,
    pub llm_api_key: Option<String>,
    pub llm_model: Option<String>,
    pub deriver_model: Option<String>,
    pub summary_model: Option<String>,
    pub deriver_lease_secs: Option<u64>,
    pub nats_url: Option<String>,
    pub nats_prefix: Option<String>,
    pub nats_partitions: Option<u32>,
    pub nats_ack_wait_secs: Option<u64>,
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

impl std::str::FromStr for EmbeddingProvider {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<Self> {
        Ok(match text {
            "auto" => Self::Auto,
            "local" => Self::Local,
            "openai" => Self::Openai,
            "none" => Self::None,
            "test-hashing" => Self::TestHashing,
            other => bail!("embedding provider `{other}` is not one of auto, local, openai, none, test-hashing"),
        })
    }
}

impl ConfigLayer {
    /// Returns `self` with every field `upper` sets written over it.
    fn overlay(self, upper: ConfigLayer) -> ConfigLayer {
        ConfigLayer {
            listen: upper.listen.or(self.listen),
            data_dir: upper.data_dir.or(self.data_dir),
            database_url: upper.database_url.or(self.database_url),
            roles: upper.roles.or(self.roles),
            log: upper.log.or(self.log),
            log_format: upper.log_format.or(self.log_format),
            shutdown_grace_secs: upper.shutdown_grace_secs.or(self.shutdown_grace_secs),
            max_connections: upper.max_connections.or(self.max_connections),
            embedding_provider: upper.embedding_provider.or(self.embedding_provider),
            embedding_model_dir: upper.embedding_model_dir.or(self.embedding_model_dir),
            embedding_base_url: upper.embedding_base_url.or(self.embedding_base_url),
            embedding_model: upper.embedding_model.or(self.embedding_model),
            embedding_dimensions: upper.embedding_dimensions.or(self.embedding_dimensions),
            embedding_api_key: upper.embedding_api_key.or(self.embedding_api_key),
            qdrant_url: upper.qdrant_url.or(self.qdrant_url),
            qdrant_api_key: upper.qdrant_api_key.or(self.qdrant_api_key),
            qdrant_collection: upper.qdrant_collection.or(self.qdrant_collection),
            llm_base_url: upper.llm_base_url.or(self.llm_base_url),
            llm_api_key: upper.llm_api_key.or(self.llm_api_key),
            llm_model: upper.llm_model.or(self.llm_model),
            deriver_model: upper.deriver_model.or(self.deriver_model),
            summary_model: upper.summary_model.or(self.summary_model),
            deriver_lease_secs: upper.deriver_lease_secs.or(self.deriver_lease_secs),
            nats_url: upper.nats_url.or(self.nats_url),
            nats_prefix: upper.nats_prefix.or(self.nats_prefix),
            nats_partitions: upper.nats_partitions.or(self.nats_partitions),
            nats_ack_wait_secs: upper.nats_ack_wait_secs.or(self.nats_ack_wait_secs),
        }
    }

    /// Reads the layer of `RONCHO_*` variables from `env`.
    pub fn from_env(env: &HashMap<String, String>) -> anyhow::Result<ConfigLayer> {
        let get = |name: &str| env.get(name).filter(|value| !value.is_empty()).cloned();
        let parsed = |name: &str| -> anyhow::Result<Option<u64>> {
            get(name)
                .map(|value| {
                    value
                        .parse()
                        .with_context(|| format!("{name}=`{value}` is not a number"))
                })
                .transpose()
        };
        Ok(ConfigLayer {
            listen: get("RONCHO_LISTEN")
                .map(|value| {
                    value
                        .parse()
                        .with_context(|| format!("RONCHO_LISTEN=`{value}` is not an address"))
                })
                .transpose()?,
            data_dir: get("RONCHO_DATA_DIR").map(PathBuf::from),
            database_url: get("RONCHO_DATABASE_URL"),
            roles: get("RONCHO_ROLES"),
            log: get("RONCHO_LOG"),
            log_format: match get("RONCHO_LOG_FORMAT").as_deref() {
                None => None,
                Some("text") => Some(LogFormat::Text),
                Some("json") => Some(LogFormat::Json),
                Some(other) => bail!("RONCHO_LOG_FORMAT=`{other}` must be text or json"),
            },
            shutdown_grace_secs: parsed("RONCHO_SHUTDOWN_GRACE_SECS")?,
            max_connections: parsed("RONCHO_MAX_CONNECTIONS")?.map(|value| u32::try_from(value).unwrap_or(u32::MAX)),
            embedding_provider: get("RONCHO_EMBEDDING_PROVIDER")
                .map(|value| value.parse())
                .transpose()?,
            embedding_model_dir: get("RONCHO_EMBEDDING_MODEL_DIR").map(PathBuf::from),
            embedding_base_url: get("RONCHO_EMBEDDING_BASE_URL"),
            embedding_model: get("RONCHO_EMBEDDING_MODEL"),
            embedding_dimensions: parsed("RONCHO_EMBEDDING_DIMENSIONS")?
                .map(|value| usize::try_from(value).unwrap_or(0)),
            embedding_api_key: get("RONCHO_EMBEDDING_API_KEY"),
            qdrant_url: get("RONCHO_QDRANT_URL"),
            qdrant_api_key: get("RONCHO_QDRANT_API_KEY"),
            qdrant_collection: get("RONCHO_QDRANT_COLLECTION"),
            llm_base_url: get("RONCHO_LLM_BASE_URL"),
            llm_api_key: get("RONCHO_LLM_API_KEY"),
            llm_model: get("RONCHO_LLM_MODEL"),
            deriver_model: get("RONCHO_DERIVER_MODEL"),
            summary_model: get("RONCHO_SUMMARY_MODEL"),
            deriver_lease_secs: parsed("RONCHO_DERIVER_LEASE_SECS")?,
            nats_url: get("RONCHO_NATS_URL"),
            nats_prefix: get("RONCHO_NATS_PREFIX"),
            nats_partitions: parsed("RONCHO_NATS_PARTITIONS")?.map(|n: u64| u32::try_from(n).unwrap_or(u32::MAX)),
            nats_ack_wait_secs: parsed("RONCHO_NATS_ACK_WAIT_SECS")?,
        })
    }

    /// Reads a TOML file layer.
    pub fn from_toml(text: &str) -> anyhow::Result<ConfigLayer> {
        toml::from_str(text).context("invalid config file")
    }
}

/// The effective configuration of a process.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    pub embedding: EmbeddingConfig,
    /// Qdrant for vectors; `None` keeps them in the relational store (exact search).
    pub qdrant: Option<QdrantConfig>,
    /// An OpenAI-compatible LLM; `None`: the deriver and summariser are extractive.
    pub llm: Option<LlmConfig>,
    /// How long a deriver holds a work unit without renewing; a killed worker's
    /// units are taken over after it.
    pub deriver_lease: Duration,
    /// NATS JetStream for background work; `None`: the SQL queue in the store.
    pub nats: Option<NatsConfig>,
}

/// The distributed mode's work queue (see `roncho_nats`).
#[derive(Debug, Clone, PartialEq, Serialize)]
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
}

/// The LLM the background roles use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlmConfig {
    /// OpenAI-compatible base URL (`https://api.openai.com/v1`, `http://localhost:11434/v1`).
    pub base_url: String,
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
    /// Model of the deriver (`deriver_model`, else `llm_model`).
    pub deriver_model: String,
    /// Model of the summariser (`summary_model`, else `llm_model`).
    pub summary_model: String,
}

/// Where the distributed mode keeps vectors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QdrantConfig {
    /// gRPC URL, e.g. `http://qdrant:6334`.
    pub url: String,
    pub collection: String,
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
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
        options
    }
}

/// Embedder settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EmbeddingConfig {
    pub provider: EmbeddingProvider,
    /// Local model directory; with `auto`, also searched in `<data_dir>/models`
    /// and `~/.cache/roncho/models`.
    pub model_dir: Option<PathBuf>,
    pub base_url: String,
    pub model: String,
    pub dimensions: Option<usize>,
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
    /// Directories `auto` looks in for all-MiniLM-L6-v2, in order.
    pub search_dirs: Vec<PathBuf>,
}

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
        let mut search_dirs = vec![data_dir.join("models").join("all-MiniLM-L6-v2")];
        if let Some(home) = home {
            search_dirs.push(home.join(".cache/roncho/models/all-MiniLM-L6-v2"));
        }
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
            api_key: merged.embedding_api_key.clone(),
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
            api_key: merged.qdrant_api_key.clone(),
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
            }),
        };
        let llm = match (&merged.llm_base_url, &merged.llm_model) {
            (None, _) => None,
            (Some(base_url), model) => {
                let pick = |role: &Option<String>, key: &str| {
                    role.clone()
                        .or_else(|| model.clone())
                        .with_context(|| format!("llm_base_url is set: set llm_model (or {key})"))
                };
                Some(LlmConfig {
                    base_url: base_url.clone(),
                    api_key: merged.llm_api_key.clone(),
                    deriver_model: pick(&merged.deriver_model, "deriver_model")?,
                    summary_model: pick(&merged.summary_model, "summary_model")?,
                })
            }
        };
        let config = Config {
            embedding,
            qdrant,
            llm,
            deriver_lease: Duration::from_secs(merged.deriver_lease_secs.unwrap_or(60).max(1)),
            nats,
            listen: merged
                .listen
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 50051))),
            data_dir,
            database_url: merged.database_url,
            roles: parse_roles(merged.roles.as_deref().unwrap_or("all"))?,
            log: merged.log.unwrap_or_else(|| "info".to_owned()),
            log_format: merged.log_format.unwrap_or(LogFormat::Text),
            shutdown_grace: Duration::from_secs(merged.shutdown_grace_secs.unwrap_or(10)),
            max_connections: merged.max_connections.unwrap_or(16).max(1),
        };
        if let Some(url) = &config.database_url
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            bail!("database_url must be a postgres:// URL; leave it unset for the embedded SQLite store");
        }
        Ok(config)
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
        options
    }

    /// Returns the config as JSON with secrets redacted, for logs and status.
    pub fn redacted(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(url) = &self.database_url {
            value["database_url"] = serde_json::Value::String(roncho_store::redact_url(url));
        }
        if let Some(nats) = &self.nats {
            value["nats"]["url"] = serde_json::Value::String(roncho_store::redact_url(&nats.url));
        }
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
        assert_eq!(
            (llm.deriver_model.as_str(), llm.summary_model.as_str()),
            ("qwen3:8b", "qwen3:1.7b")
        );
        assert!(!config.redacted().to_string().contains("sk-secret"));
        let no_model = ConfigLayer::from_env(&env(&[("RONCHO_LLM_BASE_URL", "http://x/v1")])).unwrap();
        assert!(Config::resolve(ConfigLayer::default(), no_model, ConfigLayer::default()).is_err());
        let none = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), ConfigLayer::default()).unwrap();
        assert!(none.llm.is_none(), "no LLM by default: extractive");
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
}
