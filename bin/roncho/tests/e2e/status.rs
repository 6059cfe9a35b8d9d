//! `roncho status` reports the work queue: pending work and failures.

use roncho::config::{Config, ConfigLayer, EmbeddingProvider};
use roncho_core::model::{JsonObject, NewMessage};
use roncho_core::store::Messages;

#[tokio::test]
async fn status_counts_queued_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut flags = ConfigLayer::default();
    flags.store.data_dir = Some(dir.path().to_owned());
    flags.search.embedding_provider = Some(EmbeddingProvider::None);
    let config = Config::resolve(ConfigLayer::default(), ConfigLayer::default(), flags).unwrap();
    let store = roncho_store::connect(&config.store.options()).await.unwrap();
    roncho_store::migrate(&store).await.unwrap();
    let messages = (0..3)
        .map(|i| NewMessage {
            peer_id: "alice".into(),
            content: format!("message {i}"),
            metadata: JsonObject::new(),
            configuration: JsonObject::new(),
            // An imported history: meaning's lag counts from the write, not from this date.
            created_at: (i == 0).then_some(1_683_504_000_000_000),
            token_count: 2,
        })
        .collect();
    store.create_messages("w", "s", messages).await.unwrap();
    store.close().await;

    let checks = roncho::status::checks(&config).await;
    let queue = checks
        .iter()
        .find(|check| check.name == "work queue")
        .expect("a work queue line");
    assert!(queue.ok, "{queue:?}");
    assert_eq!(queue.detail, "3 pending, 0 in progress, 0 completed, 0 failed");
    // How far meaning is behind: the messages not embedded yet, and for how long.
    let vectors = checks
        .iter()
        .find(|check| check.name == "message vectors")
        .expect("a message vectors line");
    let behind = vectors
        .detail
        .strip_prefix("0 synced, 3 pending (meaning ")
        .and_then(|rest| rest.strip_suffix(" s behind the writes), 0 failed"))
        .unwrap_or_else(|| panic!("{vectors:?}"));
    let seconds: f64 = behind.parse().unwrap();
    assert!((0.0..600.0).contains(&seconds), "{vectors:?}");
}

#[tokio::test]
async fn status_says_when_the_collector_or_a_model_provider_cannot_be_reached() {
    let dir = tempfile::tempdir().unwrap();
    let listening = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    let config = |otlp: String, llm: String| {
        let mut flags = ConfigLayer::default();
        flags.store.data_dir = Some(dir.path().to_owned());
        flags.search.embedding_provider = Some(EmbeddingProvider::None);
        flags.telemetry.otlp_endpoint = Some(otlp);
        flags.llm.llm_base_url = Some(llm);
        flags.llm.llm_model = Some("scripted".into());
        Config::resolve(ConfigLayer::default(), ConfigLayer::default(), flags).unwrap()
    };
    let find = |checks: &[roncho::status::Check], name: &str| {
        checks
            .iter()
            .find(|check| check.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} line"))
    };

    let up = format!("http://{}", listening.local_addr().unwrap());
    let checks = roncho::status::checks(&config(up.clone(), format!("{up}/v1"))).await;
    let tracing = find(&checks, "tracing");
    assert!(tracing.ok, "{tracing:?}");
    assert!(tracing.detail.contains("as roncho, sampling 1"), "{tracing:?}");
    let agents = find(&checks, "agents");
    assert!(agents.ok, "{agents:?}");
    assert!(
        agents.detail.contains("structured output auto (json_schema;"),
        "{agents:?}"
    );

    let down = format!("http://{closed}");
    let checks = roncho::status::checks(&config(down.clone(), format!("{down}/v1"))).await;
    let tracing = find(&checks, "tracing");
    assert!(!tracing.ok);
    assert!(
        tracing.detail.contains("unreachable") && tracing.detail.contains("spans are dropped"),
        "{tracing:?}"
    );
    let agents = find(&checks, "agents");
    assert!(!agents.ok);
    assert!(
        agents.detail.contains(&format!("openai at {down}/v1 is unreachable")),
        "{agents:?}"
    );
}

#[test]
fn a_configured_structured_output_mode_is_shown_and_a_wrong_one_refused() {
    let resolve = |mode: &str| {
        let mut flags = ConfigLayer::default();
        flags.llm.llm_model = Some("scripted".into());
        flags.llm.llm_structured_output = Some(mode.into());
        Config::resolve(ConfigLayer::default(), ConfigLayer::default(), flags)
    };
    let config = resolve("json_object").unwrap();
    let llm = config.llm.as_ref().unwrap();
    assert_eq!(llm.structured_output, roncho_llm::Structured::JsonObject);
    assert!(
        llm.describe().ends_with("structured output json_object (configured)"),
        "{}",
        llm.describe()
    );
    let refused = resolve("xml").unwrap_err();
    assert!(
        format!("{refused:#}").contains("llm_structured_output must be auto"),
        "{refused:#}"
    );
}
