//! Configuration: typed, with defaults, layered as
//! defaults < TOML file < `RONCHO_*` environment < command-line flags.
//!
//! Settings come in sections (server, store, queue, search, llm, limits,
//! auth, webhooks, telemetry), one file each: the section's layer (what one
//! source gives, every setting optional), its resolved form, and how one
//! becomes the other. A setting has one name everywhere: its TOML key, in
//! its section's table or at the top level as before sections existed, and,
//! upper-cased after `RONCHO_`, its variable.
//!
//! The environment is passed in as a map so tests never touch the process
//! environment. The effective config is logged with secrets redacted.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;

/// Declares a section's layer: each setting an `Option` (`None` defers to
/// the layer below), named as its TOML key and its variable.
macro_rules! section {
    ($(#[$meta:meta])* $name:ident { $($(#[$doc:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($(#[$doc])* pub $field: Option<$ty>,)*
        }

        impl $name {
            /// The section's settings, as TOML keys.
            pub const KEYS: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Returns `self` with every setting `upper` gives written over it.
            pub fn overlay(self, upper: Self) -> Self {
                Self { $($field: upper.$field.or(self.$field),)* }
            }

            /// Reads the section's `RONCHO_*` variables.
            pub fn from_env(env: &std::collections::HashMap<String, String>) -> anyhow::Result<Self> {
                crate::config::env::read_section(Self::KEYS, env)
            }
        }
    };
}

/// `Debug` of configuration parts that hold URLs: their redacted JSON, so a
/// credential in a URL never prints.
macro_rules! debug_redacted {
    ($($part:ident),* $(,)?) => {$(
        impl std::fmt::Debug for $part {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let mut value = serde_json::to_value(self).unwrap_or_default();
                crate::config::secret::redact_urls(&mut value);
                write!(formatter, "{} {value}", stringify!($part))
            }
        }
    )*};
}

mod auth;
mod env;
mod layer;
mod limits;
mod llm;
mod queue;
mod search;
mod secret;
mod server;
mod store;
mod telemetry;
#[cfg(test)]
mod tests;
mod webhooks;

pub use auth::{AuthConfig, AuthLayer, MIN_SECRET_BYTES};
pub use layer::ConfigLayer;
pub use limits::{LimitsConfig, LimitsLayer};
pub use llm::{LlmConfig, LlmEndpoint, LlmLayer, LlmProvider, LlmRole, ModelRef, RoleModels, parse_model_chain};
pub use queue::{DreamConfig, NatsConfig, QueueConfig, QueueLayer};
pub use search::{
    EmbeddingConfig, EmbeddingProvider, LOCAL_MODELS, QdrantConfig, QueryPrecision, SearchConfig, SearchLayer,
};
pub use secret::Secret;
pub use server::{DEFAULT_REST_LISTEN, RestListen, Role, ServerConfig, ServerLayer, parse_roles};
pub use store::{StoreConfig, StoreLayer};
pub use telemetry::{LogFormat, TelemetryConfig, TelemetryLayer, TracingConfig};
pub use webhooks::{WebhookConfig, WebhooksLayer};

/// The effective configuration of a process, by section.
#[derive(Clone, PartialEq, Serialize)]
pub struct Config {
    pub server: ServerConfig,
    pub store: StoreConfig,
    pub queue: QueueConfig,
    pub search: SearchConfig,
    /// The models of the LLM roles; `None`: every agent is extractive.
    pub llm: Option<LlmConfig>,
    pub limits: LimitsConfig,
    pub auth: AuthConfig,
    pub webhooks: WebhookConfig,
    pub telemetry: TelemetryConfig,
}

impl Config {
    /// Resolves layers (lowest first) into a validated config.
    pub fn resolve(file: ConfigLayer, env: ConfigLayer, flags: ConfigLayer) -> anyhow::Result<Config> {
        Self::resolve_with_caches(file, env, flags, Vec::new())
    }

    /// Like [`Config::resolve`]; `auto` also looks for a model in the
    /// `models` folder of each of `caches`, in order.
    pub fn resolve_with_caches(
        file: ConfigLayer,
        env: ConfigLayer,
        flags: ConfigLayer,
        caches: Vec<PathBuf>,
    ) -> anyhow::Result<Config> {
        let layer = file.overlay(env).overlay(flags);
        let store = layer.store.resolve()?;
        let auth = layer.auth.resolve()?;
        let server = layer.server.resolve(&auth)?;
        let dialectic_timeouts = layer.llm.dialectic_timeouts();
        Ok(Config {
            queue: layer.queue.resolve(&store)?,
            search: layer.search.resolve(&store.data_dir, caches)?,
            llm: layer.llm.resolve()?,
            limits: layer.limits.resolve(dialectic_timeouts),
            webhooks: layer.webhooks.resolve()?,
            telemetry: layer.telemetry.resolve(&server.roles)?,
            server,
            store,
            auth,
        })
    }

    /// Returns why serving this config is refused: a non-loopback address
    /// (gRPC or REST) without authentication, unless `insecure_no_auth` says
    /// so. With TLS, both listeners serve it.
    pub fn check_exposure(&self) -> anyhow::Result<()> {
        let rest = self.server.rest_listen.map(|rest| rest.address);
        rest.into_iter()
            .chain([self.server.listen])
            .filter(|address: &SocketAddr| !address.ip().is_loopback())
            .try_for_each(|address| self.auth.check_exposure(address))
    }

    /// Returns whether this process runs on the embedded SQLite store.
    pub fn is_embedded(&self) -> bool {
        self.store.database_url.is_none()
    }

    /// Returns the config as JSON with secrets redacted, for logs and status.
    pub fn redacted(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        secret::redact_urls(&mut value);
        value
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "Config {}", self.redacted())
    }
}
