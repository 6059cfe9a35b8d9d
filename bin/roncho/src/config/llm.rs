//! The `[llm]` section: the models of the agents, per role a fallback chain.

use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::secret::Secret;

section! {
    /// `[llm]` as one layer gives it.
    LlmLayer {
        /// Provider of bare model names and of `llm_base_url` / `llm_api_key`.
        llm_provider: LlmProvider,
        llm_base_url: String,
        llm_api_key: String,
        openai_base_url: String,
        openai_api_key: String,
        anthropic_base_url: String,
        anthropic_api_key: String,
        gemini_base_url: String,
        gemini_api_key: String,
        llm_timeout_secs: u64,
        llm_max_retries: u32,
        /// Requests in flight at once to each OpenAI-compatible server
        /// (a single-slot llama.cpp: 1); 0: no limit.
        llm_max_concurrent_requests: u32,
        /// How OpenAI-compatible models are asked for JSON: auto,
        /// json_schema, json_object or prompt.
        llm_structured_output: String,
        /// Every role's model unless the role names its own.
        llm_model: String,
        deriver_model: String,
        summary_model: String,
        /// Every dialectic level's model unless the level names its own.
        dialectic_model: String,
        dialectic_minimal_model: String,
        dialectic_low_model: String,
        dialectic_medium_model: String,
        dialectic_high_model: String,
        dialectic_max_model: String,
        dream_model: String,
        deriver_max_tokens: u32,
        summary_max_tokens: u32,
        dialectic_max_tokens: u32,
        dialectic_minimal_max_tokens: u32,
        dialectic_low_max_tokens: u32,
        dialectic_medium_max_tokens: u32,
        dialectic_high_max_tokens: u32,
        dialectic_max_max_tokens: u32,
        dream_max_tokens: u32,
        dialectic_minimal_timeout_secs: u64,
        dialectic_low_timeout_secs: u64,
        dialectic_medium_timeout_secs: u64,
        dialectic_high_timeout_secs: u64,
        dialectic_max_timeout_secs: u64,
    }
}

impl LlmLayer {
    /// Per dialectic level (minimal … max), the deadline configured.
    pub(super) fn dialectic_timeouts(&self) -> [Option<Duration>; 5] {
        [
            self.dialectic_minimal_timeout_secs,
            self.dialectic_low_timeout_secs,
            self.dialectic_medium_timeout_secs,
            self.dialectic_high_timeout_secs,
            self.dialectic_max_timeout_secs,
        ]
        .map(|secs| secs.map(|secs| Duration::from_secs(secs.max(1))))
    }

    /// The models the layer names; `None` when it names none.
    pub(super) fn resolve(self) -> anyhow::Result<Option<LlmConfig>> {
        LlmConfig::resolve(&self)
    }
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
    fn settings(self, layer: &LlmLayer) -> (Option<&String>, Option<u32>) {
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
    /// Requests in flight at once to each OpenAI-compatible server; 0: no limit.
    pub max_concurrent_requests: u32,
    /// How OpenAI-compatible models are asked for JSON.
    pub structured_output: roncho_llm::Structured,
    /// Roles with no model here run extractively.
    pub roles: std::collections::BTreeMap<LlmRole, RoleModels>,
}

impl LlmConfig {
    /// Resolves the layer's LLM keys; `None` when none is set.
    fn resolve(merged: &LlmLayer) -> anyhow::Result<Option<LlmConfig>> {
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
            max_concurrent_requests: merged.llm_max_concurrent_requests.unwrap_or(0),
            structured_output: match merged.llm_structured_output.as_deref() {
                None => roncho_llm::Structured::Auto,
                Some(text) => roncho_llm::Structured::parse(text).with_context(|| {
                    format!("llm_structured_output must be auto, json_schema, json_object or prompt, not `{text}`")
                })?,
            },
            roles,
        }))
    }

    /// The reply budget of `role` (its default when it has no model).
    pub fn max_tokens(config: Option<&LlmConfig>, role: LlmRole) -> u32 {
        config
            .and_then(|llm| llm.roles.get(&role))
            .map_or_else(|| role.default_max_tokens(), |models| models.max_tokens)
    }

    /// One line per role: its chain and budget, or that it is extractive;
    /// then how OpenAI-compatible models are asked for JSON.
    pub fn describe(&self) -> String {
        let roles = self.describe_roles();
        if !self.endpoints.contains_key(&LlmProvider::Openai) {
            return roles;
        }
        let structured = match self.structured_output {
            roncho_llm::Structured::Auto => {
                "auto (json_schema; on a refusal JSON mode, then the schema in the prompt, learned per model and logged)"
                    .to_owned()
            }
            fixed => format!("{} (configured)", fixed.name()),
        };
        format!("{roles}; structured output {structured}")
    }

    fn describe_roles(&self) -> String {
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

debug_redacted!(LlmEndpoint);
