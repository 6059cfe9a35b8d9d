//! The configuration's tests: layers, sections, names and docs.

use super::*;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// A layer of settings given by key (`("listen", "0.0.0.0:1")`), read as
/// their variables are.
fn settings(pairs: &[(&str, &str)]) -> ConfigLayer {
    let variables: Vec<(String, &str)> = pairs
        .iter()
        .map(|(key, value)| (format!("RONCHO_{}", key.to_uppercase()), *value))
        .collect();
    let variables: Vec<(&str, &str)> = variables.iter().map(|(name, value)| (name.as_str(), *value)).collect();
    ConfigLayer::from_env(&env(&variables)).unwrap()
}

#[test]
fn a_local_model_is_looked_for_in_the_data_dir_then_each_cache() {
    let caches = vec![PathBuf::from("/cache"), PathBuf::from("/home/u/.cache/roncho")];
    let config = Config::resolve_with_caches(
        ConfigLayer::default(),
        ConfigLayer::default(),
        ConfigLayer::default(),
        caches,
    )
    .unwrap();
    let places: Vec<String> = config
        .search
        .embedding
        .search_dirs
        .iter()
        .map(|dir| dir.display().to_string())
        .collect();
    assert_eq!(
        places,
        [
            "./roncho-data/models/bge-small-en-v1.5",
            "./roncho-data/models/all-MiniLM-L6-v2",
            "/cache/models/bge-small-en-v1.5",
            "/cache/models/all-MiniLM-L6-v2",
            "/home/u/.cache/roncho/models/bge-small-en-v1.5",
            "/home/u/.cache/roncho/models/all-MiniLM-L6-v2",
        ]
    );
}

#[test]
fn defaults_are_the_embedded_server() {
    let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), ConfigLayer::default()).unwrap();
    assert_eq!(config.server.listen.to_string(), "127.0.0.1:50051");
    assert_eq!(config.store.data_dir, PathBuf::from("./roncho-data"));
    assert!(config.is_embedded());
    assert_eq!(config.server.roles, Role::ALL.to_vec());
}

#[test]
fn flags_beat_env_beat_file() {
    let file = ConfigLayer::from_toml("listen = \"127.0.0.1:1\"\nroles = \"ingest\"\nlog = \"debug\"").unwrap();
    let env = ConfigLayer::from_env(&env(&[("RONCHO_LISTEN", "127.0.0.1:2"), ("RONCHO_ROLES", "recall")])).unwrap();
    let flags = settings(&[("listen", "127.0.0.1:3")]);
    let config = Config::resolve(file, env, flags).unwrap();
    assert_eq!(config.server.listen.port(), 3);
    assert_eq!(config.server.roles, vec![Role::Recall]);
    assert_eq!(config.telemetry.log, "debug");
}

#[test]
fn bad_values_are_reported() {
    assert!(parse_roles("ingest,bogus").is_err());
    assert!(ConfigLayer::from_env(&env(&[("RONCHO_LISTEN", "nope")])).is_err());
    assert!(ConfigLayer::from_toml("unknown_key = 1").is_err());
    let layer = settings(&[("database_url", "mysql://x")]);
    assert!(Config::resolve(ConfigLayer::default(), ConfigLayer::default(), layer).is_err());
    let layer = settings(&[("qdrant_url", "qdrant:6334")]);
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
            api_key: Some(Secret::from("sk-secret"))
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
    assert_eq!(config.limits.dialectic_timeouts[0], None, "defaults unless set");
    assert_eq!(config.limits.dialectic_timeouts[4], Some(Duration::from_secs(300)));
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
/// column (brace lists and `{level}` expanded), each with the section whose
/// heading (`` ## `[queue]` ``) it sits under and the `RONCHO_*` names
/// written beside it.
fn documented_settings() -> Vec<(String, String, Vec<String>)> {
    const LEVELS: [&str; 5] = ["minimal", "low", "medium", "high", "max"];
    let text = include_str!("../../../../docs/configuration.md");
    let mut rows = Vec::new();
    let mut section = String::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if in_code {
            continue;
        }
        if line.starts_with('#') {
            section = line
                .split_once("`[")
                .and_then(|(_, rest)| rest.split_once("]`"))
                .map_or_else(String::new, |(name, _)| name.to_owned());
            continue;
        }
        if !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line.split(" | ").collect();
        let ticked = |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_owned).collect() };
        let mut envs = ticked(cells[1]);
        if cells[1].contains('…') {
            envs.push("…".to_owned()); // "RONCHO_DERIVER_MODEL, …": the others follow the rule
        }
        for key in ticked(cells[0].trim_start_matches("| ")) {
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
                rows.push((section.clone(), key, envs.clone()));
            }
        }
    }
    rows
}

#[test]
fn docs_configuration_lists_every_setting_once_in_its_section_under_its_names() {
    let documented = documented_settings();
    let mut seen = std::collections::BTreeSet::new();
    for (section, key, envs) in &documented {
        let Some(owner) = ConfigLayer::section_of(key) else {
            panic!("docs/configuration.md documents `{key}`, which is no setting");
        };
        assert_eq!(
            section, owner,
            "docs/configuration.md documents `{key}` under [{section}], but it belongs to [{owner}]"
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
    for key in ConfigLayer::keys() {
        assert!(seen.contains(key), "docs/configuration.md does not document `{key}`");
    }
}

/// A value of each kind a setting can take, as an env variable's text
/// and as TOML.
const SAMPLES: [(&str, &str); 8] = [
    ("7", "7"),
    ("true", "true"),
    ("0.5", "0.5"),
    ("127.0.0.1:1", "\"127.0.0.1:1\""),
    ("json", "\"json\""),
    ("test-hashing", "\"test-hashing\""),
    ("openai", "\"openai\""),
    ("float", "\"float\""),
];

/// The first sample value `read` accepts for a setting.
fn sample<T>(read: impl Fn(&str, &str) -> anyhow::Result<T>) -> Option<T> {
    SAMPLES.iter().find_map(|(text, toml)| read(text, toml).ok())
}

#[test]
fn every_setting_is_reached_by_its_variable_and_its_toml_key_flat_or_in_its_section() {
    for (section, keys) in ConfigLayer::SECTIONS {
        for key in keys.iter() {
            let expected = vec![format!("{section}.{key}")];
            let name = format!("RONCHO_{}", key.to_uppercase());
            let by_env = sample(|text, _| ConfigLayer::from_env(&env(&[(name.as_str(), text)])))
                .unwrap_or_else(|| panic!("no sample value is valid for {name}"));
            assert_eq!(by_env.given(), expected, "{name} sets `{key}` and nothing else");
            let flat = sample(|_, toml| ConfigLayer::from_toml(&format!("{key} = {toml}")))
                .unwrap_or_else(|| panic!("no sample value is valid for the TOML key `{key}`"));
            assert_eq!(flat.given(), expected, "TOML `{key}` sets `{key}` and nothing else");
            let in_section = sample(|_, toml| ConfigLayer::from_toml(&format!("[{section}]\n{key} = {toml}")))
                .unwrap_or_else(|| panic!("no sample value is valid for `{key}` in [{section}]"));
            assert_eq!(
                in_section, flat,
                "`{key}` reads the same in [{section}] as at the top level"
            );
        }
    }
}

#[test]
fn a_file_in_sections_reads_as_the_flat_one() {
    let sectioned = ConfigLayer::from_toml(
        "[server]\nlisten = \"127.0.0.1:7\"\nroles = \"ingest,recall\"\n\
         [queue]\nderiver_lease_secs = 90\n\
         [llm]\nllm_model = \"qwen3:8b\"\n",
    )
    .unwrap();
    let flat = ConfigLayer::from_toml(
        "listen = \"127.0.0.1:7\"\nroles = \"ingest,recall\"\nderiver_lease_secs = 90\nllm_model = \"qwen3:8b\"\n",
    )
    .unwrap();
    assert_eq!(sectioned, flat);
    let config = Config::resolve(sectioned, ConfigLayer::default(), ConfigLayer::default()).unwrap();
    assert_eq!(config.server.listen.port(), 7);
    assert_eq!(config.queue.deriver_lease, Duration::from_secs(90));
    let mixed = ConfigLayer::from_toml("log = \"debug\"\n[telemetry]\nlog_format = \"json\"\n").unwrap();
    assert_eq!(mixed.given(), ["telemetry.log", "telemetry.log_format"]);

    for (file, says) in [
        (
            "[server]\nnats_url = \"nats://n:4222\"",
            "belongs in [queue], not [server]",
        ),
        (
            "listen = \"127.0.0.1:1\"\n[server]\nlisten = \"127.0.0.1:2\"",
            "set twice",
        ),
        ("[server]\nlistne = \"127.0.0.1:1\"", "unknown setting `listne`"),
        ("lisen = 1", "unknown setting `lisen`"),
        ("[server]\nlisten = 5", "invalid"),
    ] {
        let error = format!("{:#}", ConfigLayer::from_toml(file).unwrap_err());
        assert!(error.contains(says), "{file:?}: {error}");
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
    assert_eq!(layer.queue.nats_partitions, Some(8));
    assert_eq!(
        layer.llm.llm_api_key.as_deref(),
        Some("12345"),
        "digits stay text where text is wanted"
    );
    assert_eq!(layer.search.embedding_provider, Some(EmbeddingProvider::TestHashing));
    assert_eq!(layer.telemetry.log_format, Some(LogFormat::Json));
    assert_eq!(layer.store.data_dir, Some(PathBuf::from("/var/lib/roncho")));
    assert_eq!(layer.telemetry.log, None, "empty is unset");
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
        layer.llm.llm_model.as_deref(),
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
    let options = config.queue.nats.as_ref().unwrap().options();
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
    assert_eq!(config.telemetry.tracing, None);
    let layer = ConfigLayer::from_env(&env(&[
        ("RONCHO_OTLP_ENDPOINT", "http://otel-collector:4317"),
        ("RONCHO_OTLP_SAMPLE_RATIO", "0.25"),
        ("RONCHO_ROLES", "ingest,recall"),
    ]))
    .unwrap();
    let config = Config::resolve(ConfigLayer::default(), layer, ConfigLayer::default()).unwrap();
    assert_eq!(
        config.telemetry.tracing,
        Some(TracingConfig {
            endpoint: "http://otel-collector:4317".into(),
            service_name: "roncho-ingest-recall".into(),
            sample_ratio: 0.25,
        })
    );
    let every_role = settings(&[("otlp_endpoint", "http://127.0.0.1:4317"), ("otlp_sample_ratio", "1.0")]);
    let config = Config::resolve(ConfigLayer::default(), every_role.clone(), ConfigLayer::default()).unwrap();
    assert_eq!(config.telemetry.tracing.unwrap().service_name, "roncho");
    for (bad, says) in [
        (
            every_role.clone().overlay(settings(&[("otlp_sample_ratio", "1.5")])),
            "between 0.0 and 1.0",
        ),
        (
            every_role.overlay(settings(&[("otlp_endpoint", "otel-collector:4317")])),
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
    let qdrant = config.search.qdrant.as_ref().unwrap();
    assert_eq!(
        (qdrant.url.as_str(), qdrant.collection.as_str()),
        ("http://qdrant:6334", "roncho")
    );
    assert!(!config.redacted().to_string().contains("sekrit"));
}

#[test]
fn secrets_are_redacted() {
    let layer = settings(&[("database_url", "postgres://u:hunter2@h/db")]);
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
        format!("{:?}", config.queue.nats),
        format!("{:?}", config.search.qdrant),
        format!("{:?}", config.search.embedding),
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
    let exposed = settings(&[("listen", "0.0.0.0:50051")]);
    let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), exposed.clone()).unwrap();
    let error = config.check_exposure().unwrap_err().to_string();
    assert!(
        error.contains("auth_jwt_secret") && error.contains("--insecure-no-auth"),
        "{error}"
    );
    let opted_out = ConfigLayer::from_env(&env(&[("RONCHO_INSECURE_NO_AUTH", "true")])).unwrap();
    let config = Config::resolve(ConfigLayer::default(), opted_out, exposed.clone()).unwrap();
    assert!(config.check_exposure().is_ok());
    let with_auth = exposed.overlay(settings(&[("auth_jwt_secret", &"s".repeat(32))]));
    let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), with_auth).unwrap();
    assert!(config.check_exposure().is_ok());
    let local = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), ConfigLayer::default()).unwrap();
    assert!(local.check_exposure().is_ok(), "loopback keeps the zero-setup default");
    let short = settings(&[("listen", "0.0.0.0:50051"), ("auth_jwt_secret", "too-short")]);
    let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), short).unwrap();
    let error = config.check_exposure().unwrap_err().to_string();
    assert!(error.contains("9 bytes") && error.contains("32"), "{error}");
}

#[test]
fn multi_tenant_needs_keys() {
    let without_keys = ConfigLayer::from_env(&env(&[("RONCHO_MULTI_TENANT", "true")])).unwrap();
    let error = Config::resolve(ConfigLayer::default(), without_keys.clone(), ConfigLayer::default())
        .unwrap_err()
        .to_string();
    assert!(error.contains("multi_tenant needs keys"), "{error}");
    for keys in [
        settings(&[("auth_jwt_secret", &"s".repeat(32))]),
        settings(&[("local_key", "true")]),
    ] {
        let config = Config::resolve(ConfigLayer::default(), without_keys.clone(), keys).unwrap();
        assert!(config.auth.multi_tenant);
    }
}

/// Every setting's key before settings came in sections (docs/adr/0016):
/// each still sets the same setting, flat in a file and as `RONCHO_` and
/// the key upper-cased.
const KEYS_BEFORE_SECTIONS: [&str; 102] = [
    "listen",
    "data_dir",
    "database_url",
    "roles",
    "log",
    "log_format",
    "shutdown_grace_secs",
    "max_connections",
    "erasure_vacuum",
    "embedding_provider",
    "embedding_model_dir",
    "embedding_base_url",
    "embedding_model",
    "embedding_dimensions",
    "embedding_api_key",
    "qdrant_url",
    "qdrant_api_key",
    "qdrant_collection",
    "llm_provider",
    "llm_base_url",
    "llm_api_key",
    "openai_base_url",
    "openai_api_key",
    "anthropic_base_url",
    "anthropic_api_key",
    "gemini_base_url",
    "gemini_api_key",
    "llm_timeout_secs",
    "llm_max_retries",
    "llm_model",
    "deriver_model",
    "summary_model",
    "dialectic_model",
    "dialectic_minimal_model",
    "dialectic_low_model",
    "dialectic_medium_model",
    "dialectic_high_model",
    "dialectic_max_model",
    "dream_model",
    "deriver_max_tokens",
    "summary_max_tokens",
    "dialectic_max_tokens",
    "dialectic_minimal_max_tokens",
    "dialectic_low_max_tokens",
    "dialectic_medium_max_tokens",
    "dialectic_high_max_tokens",
    "dialectic_max_max_tokens",
    "dream_max_tokens",
    "dialectic_minimal_timeout_secs",
    "dialectic_low_timeout_secs",
    "dialectic_medium_timeout_secs",
    "dialectic_high_timeout_secs",
    "dialectic_max_timeout_secs",
    "deriver_lease_secs",
    "worker_outage_backoff_secs",
    "idempotency_window_secs",
    "worker_outage_backoff_max_secs",
    "reconciler_interval_ms",
    "background_yield_ms",
    "metrics_listen",
    "otlp_endpoint",
    "otlp_service_name",
    "otlp_sample_ratio",
    "startup_timeout_secs",
    "dream_document_threshold",
    "dream_min_hours",
    "dream_idle_minutes",
    "nats_url",
    "nats_prefix",
    "nats_partitions",
    "nats_ack_wait_secs",
    "nats_redeliver_after_secs",
    "auth_jwt_secret",
    "auth_jwt_previous_secrets",
    "insecure_no_auth",
    "tls_cert_file",
    "tls_key_file",
    "tls_client_ca_file",
    "health_listen",
    "rest_listen",
    "max_concurrent_requests",
    "max_concurrent_requests_per_connection",
    "request_timeout_secs",
    "request_body_timeout_secs",
    "max_concurrent_requests_per_workspace",
    "max_open_connections",
    "max_open_connections_per_address",
    "request_header_timeout_secs",
    "connection_handshake_timeout_secs",
    "database_statement_timeout_secs",
    "rate_limit_chat_per_minute",
    "rate_limit_messages_per_minute",
    "rate_limit_uploads_per_minute",
    "rate_limit_dreams_per_minute",
    "rate_limit_clones_per_minute",
    "upload_pdf_timeout_secs",
    "upload_pdf_memory_mb",
    "upload_pdf_concurrency",
    "webhook_allow_private_addresses",
    "webhook_secret",
    "webhook_timeout_secs",
    "grpc_reflection",
];

#[test]
fn every_key_from_before_sections_still_names_a_setting() {
    let now: Vec<&str> = ConfigLayer::keys().collect();
    for key in KEYS_BEFORE_SECTIONS {
        assert!(
            now.contains(&key),
            "`{key}` (RONCHO_{}) no longer names a setting",
            key.to_uppercase()
        );
    }
}
