//! One source's settings (a TOML file, the environment, the flags), by
//! section, and how sources stack.

use std::collections::HashMap;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::auth::AuthLayer;
use super::limits::LimitsLayer;
use super::llm::LlmLayer;
use super::queue::QueueLayer;
use super::search::SearchLayer;
use super::secret::redact_value;
use super::server::ServerLayer;
use super::store::StoreLayer;
use super::telemetry::TelemetryLayer;
use super::webhooks::WebhooksLayer;

/// Declares [`ConfigLayer`] from its sections, in the order they are
/// resolved and documented.
macro_rules! layer {
    ($($section:ident: $ty:ty,)*) => {
        /// Settings as one source gives them, by section; `None` defers to
        /// the source below.
        #[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct ConfigLayer {
            $(#[serde(default)] pub $section: $ty,)*
        }

        impl ConfigLayer {
            /// Each section's name (its TOML table) and its settings' keys.
            pub const SECTIONS: &'static [(&'static str, &'static [&'static str])] =
                &[$((stringify!($section), <$ty>::KEYS)),*];

            /// Returns `self` with every setting `upper` gives written over it.
            pub(super) fn overlay(self, upper: ConfigLayer) -> ConfigLayer {
                ConfigLayer { $($section: self.$section.overlay(upper.$section),)* }
            }

            /// Reads the layer of `RONCHO_*` variables from `env`: `RONCHO_NATS_URL`
            /// sets `nats_url` (in `[queue]`), read as the type the setting takes.
            /// Empty values and variables that name no setting (`RONCHO_CONFIG`,
            /// test variables) are skipped.
            pub fn from_env(env: &HashMap<String, String>) -> anyhow::Result<ConfigLayer> {
                Ok(ConfigLayer { $($section: <$ty>::from_env(env)?,)* })
            }
        }
    };
}

layer! {
    server: ServerLayer,
    store: StoreLayer,
    queue: QueueLayer,
    search: SearchLayer,
    llm: LlmLayer,
    limits: LimitsLayer,
    auth: AuthLayer,
    webhooks: WebhooksLayer,
    telemetry: TelemetryLayer,
}

impl ConfigLayer {
    /// Every setting's key, section by section.
    pub fn keys() -> impl Iterator<Item = &'static str> {
        Self::SECTIONS.iter().flat_map(|(_, keys)| keys.iter().copied())
    }

    /// The settings this layer gives, as `section.key`.
    pub fn given(&self) -> Vec<String> {
        let Ok(serde_json::Value::Object(sections)) = serde_json::to_value(self) else {
            return Vec::new();
        };
        let mut given = Vec::new();
        for (section, settings) in sections {
            if let serde_json::Value::Object(settings) = settings {
                let set = settings.into_iter().filter(|(_, value)| !value.is_null());
                given.extend(set.map(|(key, _)| format!("{section}.{key}")));
            }
        }
        given
    }

    /// The section a setting belongs to.
    pub fn section_of(key: &str) -> Option<&'static str> {
        Self::SECTIONS
            .iter()
            .find(|(_, keys)| keys.contains(&key))
            .map(|(section, _)| *section)
    }

    /// Reads a TOML file layer. Each setting may sit in its section's table
    /// (`[queue]` `nats_url = ...`) or, as before sections, at the top level
    /// (`nats_url = ...`); not both.
    pub fn from_toml(text: &str) -> anyhow::Result<ConfigLayer> {
        let file: toml::Table = toml::from_str(text).context("invalid config file")?;
        let mut sections = toml::Table::new();
        let mut place = |written: &str, key: String, value: toml::Value| -> anyhow::Result<()> {
            let Some(section) = Self::section_of(&key) else {
                bail!("unknown setting `{key}` (docs/configuration.md lists them)");
            };
            if !written.is_empty() && written != section {
                bail!("`{key}` belongs in [{section}], not [{written}]");
            }
            let table = sections
                .entry(section)
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let toml::Value::Table(table) = table else {
                unreachable!("sections are tables");
            };
            if table.insert(key.clone(), value).is_some() {
                bail!("`{key}` is set twice: at the top level and in [{section}]");
            }
            Ok(())
        };
        for (key, value) in file {
            match value {
                toml::Value::Table(settings) if Self::SECTIONS.iter().any(|(section, _)| *section == key) => {
                    for (setting, value) in settings {
                        place(&key, setting, value)?;
                    }
                }
                value => place("", key, value)?,
            }
        }
        toml::Value::Table(sections).try_into().context("invalid config file")
    }
}

impl std::fmt::Debug for ConfigLayer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Ok(serde_json::Value::Object(sections)) = serde_json::to_value(self) else {
            return formatter.write_str("ConfigLayer");
        };
        let mut shown = serde_json::Map::new();
        for (section, settings) in sections {
            let serde_json::Value::Object(settings) = settings else {
                continue;
            };
            let set: serde_json::Map<_, _> = settings
                .iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), redact_value(key, value)))
                .collect();
            if !set.is_empty() {
                shown.insert(section, serde_json::Value::Object(set));
            }
        }
        write!(formatter, "ConfigLayer {}", serde_json::Value::Object(shown))
    }
}
