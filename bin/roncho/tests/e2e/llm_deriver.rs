//! The deriver with an LLM: a local server speaking the OpenAI chat
//! completions format stands in for the model. Observations come from its
//! JSON; a model that never returns valid JSON fails the work visibly
//! (dead tasks with the error in GetQueueStatus), never an empty success.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use roncho_core::model::{JsonObject, NewMessage};
use roncho_core::queue::{StatusFilter, WorkQueue};
use roncho_core::store::{Memory, Messages};
use roncho_deriver::worker::{Worker, WorkerConfig};
use roncho_llm::Llm;
use roncho_llm::openai::{OpenAiChat, OpenAiChatConfig};
use serde_json::{Value, json};

type Script = roncho_http::Script<&'static str>;

async fn completions(State(script): State<Script>, Json(body): Json<Value>) -> Json<Value> {
    let content = script.answer(body);
    Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20}
    }))
}

async fn model(replies: Vec<&'static str>) -> (Arc<dyn Llm>, Script) {
    let script = Script::new(replies);
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(script.clone());
    let base = format!("{}/v1", roncho_http::serve_for_test(app).await);
    let llm = OpenAiChat::new(OpenAiChatConfig::new(&base, "scripted")).unwrap();
    (Arc::new(llm), script)
}

async fn store_with_messages(dir: &std::path::Path) -> Arc<roncho_store::SqlStore> {
    let store = roncho_store::testing::open_embedded(dir).await;
    let messages = ["I moved to Berlin in 2019.", "I work as a nurse."]
        .iter()
        .map(|content| NewMessage {
            peer_id: "alice".into(),
            content: (*content).into(),
            metadata: JsonObject::new(),
            configuration: JsonObject::new(),
            created_at: None,
            token_count: 8,
        })
        .collect();
    store.create_messages("w", "s", messages).await.unwrap();
    store
}

/// One message of Alice's.
fn say(content: &str) -> Vec<NewMessage> {
    vec![NewMessage {
        peer_id: "alice".into(),
        content: content.into(),
        metadata: JsonObject::new(),
        configuration: JsonObject::new(),
        created_at: None,
        token_count: 5,
    }]
}

/// Alice's own collection, oldest first.
async fn alice_observes(store: &roncho_store::SqlStore) -> Vec<roncho_core::model::Conclusion> {
    let filter = roncho_core::filter::parse(
        &roncho_core::filter::CONCLUSION,
        json!({"observer_id": "alice"}).as_object(),
    )
    .unwrap();
    let page = roncho_core::model::PageRequest::from_wire(1, 50, true).unwrap();
    store.list_conclusions("w", &filter, page).await.unwrap().items
}

#[tokio::test]
async fn observations_come_from_the_models_json() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_messages(dir.path()).await;
    let (llm, script) = model(vec![
        r#"{"explicit": [{"content": "Alice moved to Berlin in 2019"}, {"content": "Alice works as a nurse"}, {"content": "alice works as a  nurse"}]}"#,
    ])
    .await;
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let dyn_store = store.clone();
    let worker = Worker::new(dyn_store, queue.clone(), WorkerConfig::default()).with_llms(llm.clone(), llm);
    while worker.run_once().await.unwrap() {}

    assert_eq!(script.count(), 1, "one call for the batch of two messages");
    let sent = script.requests.lock().unwrap()[0].clone();
    assert_eq!(sent["response_format"]["type"], "json_schema");
    let transcript = sent["messages"][1]["content"].as_str().unwrap().to_owned();
    assert!(
        transcript.contains("alice: I moved to Berlin in 2019.") && transcript.contains("alice: I work as a nurse.")
    );
    let conclusions = alice_observes(&store).await;
    assert_eq!(
        conclusions.iter().map(|c| c.content.as_str()).collect::<Vec<_>>(),
        ["Alice moved to Berlin in 2019", "Alice works as a nurse"],
        "deduplicated ignoring case and spacing"
    );
    assert_eq!(conclusions[0].source_ids.len(), 2, "sources: the batch's messages");
    assert_eq!(conclusions[0].metadata["derived_by"], "openai-compatible/scripted");
}

#[tokio::test]
async fn a_model_that_never_returns_json_fails_the_work_visibly() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_messages(dir.path()).await;
    let (llm, script) = model(vec!["Sorry, I can't help with that."]).await;
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let dyn_store = store.clone();
    let config = WorkerConfig {
        max_attempts: 2,
        retry_after: Duration::from_millis(20),
        ..WorkerConfig::default()
    };
    let worker = Worker::new(dyn_store, queue.clone(), config).with_llms(llm.clone(), llm);
    worker.run_once().await.unwrap();
    tokio::time::sleep(Duration::from_millis(60)).await;
    worker.run_once().await.unwrap();
    assert!(!worker.run_once().await.unwrap(), "nothing left to try");
    assert_eq!(script.count(), 4, "two attempts, each with its repair turn");
    let status = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    assert_eq!((status.counts.failed, status.counts.completed), (2, 0));
    assert!(
        status.failures[0].last_error.contains("did not return valid JSON")
            && status.failures[0].last_error.contains("Sorry, I can't help with that."),
        "the error keeps the model's reply: {:?}",
        status.failures[0]
    );
}

/// A local model's way of answering: nothing in `content`, the answer in
/// `reasoning_content`, in a code fence, with trailing commas, one object
/// where a list is asked.
async fn reasoning_completions(State(script): State<Script>, Json(body): Json<Value>) -> Json<Value> {
    let reasoning = script.answer(body);
    Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "", "reasoning_content": reasoning}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20}
    }))
}

#[tokio::test]
async fn a_local_model_answering_in_its_reasoning_with_loose_json_still_derives() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_messages(dir.path()).await;
    let script = Script::new(vec![
        "Let me think. The user moved.\n```json\n{\"explicit\": [{\"content\": \"Alice moved to Berlin in 2019\",}, {\"content\": \"Alice works as a nurse\"},],}\n```",
    ]);
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(reasoning_completions))
        .with_state(script.clone());
    let base = format!("{}/v1", roncho_http::serve_for_test(app).await);
    let llm: Arc<dyn Llm> = Arc::new(OpenAiChat::new(OpenAiChatConfig::new(&base, "scripted")).unwrap());
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let worker = Worker::new(store.clone(), queue.clone(), WorkerConfig::default()).with_llms(llm.clone(), llm);
    while worker.run_once().await.unwrap() {}
    assert_eq!(script.count(), 1, "read at the first reply, no repair turn");
    let conclusions = alice_observes(&store).await;
    assert_eq!(
        conclusions.iter().map(|c| c.content.as_str()).collect::<Vec<_>>(),
        ["Alice moved to Berlin in 2019", "Alice works as a nurse"]
    );
}

#[tokio::test]
async fn a_fact_derived_again_counts_up_instead_of_repeating() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_messages(dir.path()).await;
    let (llm, _) = model(vec![
        r#"{"explicit": [{"content": "Alice works as a nurse"}]}"#,
        r#"{"explicit": [{"content": "ALICE works as a nurse"}, {"content": "Alice likes night shifts"}]}"#,
    ])
    .await;
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let dyn_store = store.clone();
    let worker = Worker::new(dyn_store, queue, WorkerConfig::default()).with_llms(llm.clone(), llm);
    while worker.run_once().await.unwrap() {}
    // A second batch in the same session.
    let more = vec![NewMessage {
        peer_id: "alice".into(),
        content: "Night shifts suit me.".into(),
        metadata: JsonObject::new(),
        configuration: JsonObject::new(),
        created_at: None,
        token_count: 5,
    }];
    store.create_messages("w", "s", more).await.unwrap();
    while worker.run_once().await.unwrap() {}
    let conclusions = alice_observes(&store).await;
    let ids: Vec<String> = conclusions.iter().map(|c| c.id.clone()).collect();
    let stored = store.conclusions_by_ids("w", &ids).await.unwrap();
    let mut seen: Vec<(String, i64)> = stored.into_iter().map(|c| (c.content, c.times_derived)).collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("Alice likes night shifts".to_owned(), 1),
            ("Alice works as a nurse".to_owned(), 2)
        ]
    );
}

/// A worker that wrote a batch's facts and died before completing it leaves
/// the batch to be delivered again, by then with a message that arrived
/// since: the redelivery derives that message (and only it) instead of
/// skipping the whole batch because its first message was served.
#[tokio::test]
async fn a_redelivered_batch_derives_what_arrived_since_the_first_delivery() {
    use roncho_worker::Handler as _;
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_messages(dir.path()).await;
    let (llm, script) = model(vec![
        r#"{"explicit": [{"content": "Alice moved to Berlin in 2019"}]}"#,
        r#"{"explicit": [{"content": "Alice adopted a cat"}]}"#,
    ])
    .await;
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let dyn_store = store.clone();
    let worker = Worker::new(dyn_store, queue.clone(), WorkerConfig::default()).with_llms(llm.clone(), llm);
    // The first delivery writes, then its worker dies: the unit is given back unfinished.
    let claim = queue
        .claim("dies", &["representation"], 32, Duration::from_secs(60))
        .await
        .unwrap()
        .expect("the batch");
    worker.process(&claim).await.unwrap();
    queue.release(&claim).await.unwrap();
    let more = vec![NewMessage {
        peer_id: "alice".into(),
        content: "I adopted a cat last week.".into(),
        metadata: JsonObject::new(),
        configuration: JsonObject::new(),
        created_at: None,
        token_count: 6,
    }];
    store.create_messages("w", "s", more).await.unwrap();
    while worker.run_once().await.unwrap() {}

    assert_eq!(script.count(), 2);
    let second = script.requests.lock().unwrap()[1]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        second.contains("adopted a cat") && !second.contains("Berlin"),
        "only the message the first delivery did not see: {second}"
    );
    let facts: Vec<String> = alice_observes(&store).await.into_iter().map(|c| c.content).collect();
    assert_eq!(facts, ["Alice moved to Berlin in 2019", "Alice adopted a cat"]);
    let status = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((status.counts.pending, status.counts.failed), (0, 0));
}

#[tokio::test]
async fn a_near_identical_fact_is_the_same_fact_and_the_better_wording_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_messages(dir.path()).await;
    // The test embedder hashes alphanumeric words, so punctuation changes
    // the text (and its wording score: words split at spaces) but not the
    // vector. Batch 2 says one fact again word for word (exact dedup) and
    // the other worse worded ("her-sister": fewer words); batch 3 words the
    // first better (one more word, ":)").
    let (llm, _) = model(vec![
        r#"{"explicit": [{"content": "Alice works as a nurse"}, {"content": "Alice moved to Berlin in 2019 with her sister"}]}"#,
        r#"{"explicit": [{"content": "alice works as a  nurse"}, {"content": "Alice moved to Berlin in 2019 with her-sister"}]}"#,
        r#"{"explicit": [{"content": "Alice works as a nurse :)"}]}"#,
    ])
    .await;
    let embedder: Arc<dyn roncho_core::embed::Embedder> =
        Arc::new(roncho_embed::hashing::TestHashingEmbedder::new(256));
    let vectors: Arc<dyn roncho_core::vector::VectorStore> = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    let dyn_store = store.clone();
    let reconciler = roncho_reconciler::Reconciler::new(
        dyn_store.clone(),
        embedder.clone(),
        vectors.clone(),
        roncho_reconciler::ReconcilerConfig::default(),
    );
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let worker = Worker::new(dyn_store, queue, WorkerConfig::default())
        .with_llms(llm.clone(), llm)
        .with_semantic_dedup(embedder, vectors);
    while worker.run_once().await.unwrap() {}
    reconciler.pass().await.unwrap();
    store.create_messages("w", "s", say("Nursing, yes.")).await.unwrap();
    while worker.run_once().await.unwrap() {}
    reconciler.pass().await.unwrap();
    store.create_messages("w", "s", say("Still nursing.")).await.unwrap();
    while worker.run_once().await.unwrap() {}

    let live = alice_observes(&store).await;
    let ids: Vec<String> = live.iter().map(|c| c.id.clone()).collect();
    let mut seen: Vec<(String, i64)> = store
        .conclusions_by_ids("w", &ids)
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.content, c.times_derived))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("Alice moved to Berlin in 2019 with her sister".to_owned(), 2),
            ("Alice works as a nurse :)".to_owned(), 3),
        ],
        "near-identical facts count up; a better wording replaces the stored one and carries its count"
    );
}

#[tokio::test]
async fn the_configured_fallback_chain_moves_past_an_unavailable_provider() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_messages(dir.path()).await;
    // An overloaded Anthropic first in the chain, then an OpenAI-compatible server.
    let overloaded_calls = Arc::new(AtomicUsize::new(0));
    let counted = overloaded_calls.clone();
    let overloaded = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            async {
                (
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    Json(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
                )
            }
        }),
    );
    let anthropic = roncho_http::serve_for_test(overloaded).await;
    let script = Script::new(vec![r#"{"explicit": [{"content": "Alice works as a nurse"}]}"#]);
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(script.clone());
    let openai = format!("{}/v1", roncho_http::serve_for_test(app).await);
    let variables: std::collections::HashMap<String, String> = [
        ("RONCHO_ANTHROPIC_BASE_URL", anthropic.as_str()),
        ("RONCHO_OPENAI_BASE_URL", openai.as_str()),
        ("RONCHO_DERIVER_MODEL", "anthropic:claude-haiku-4-5, openai:scripted"),
        ("RONCHO_LLM_MAX_RETRIES", "0"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value.to_owned()))
    .collect();
    let layer = roncho::config::ConfigLayer::from_env(&variables).unwrap();
    let config = roncho::config::Config::resolve(Default::default(), layer, Default::default()).unwrap();
    let llm = roncho::wiring::llm(config.llm.as_ref(), roncho::config::LlmRole::Deriver)
        .unwrap()
        .unwrap();
    assert_eq!(
        llm.model_id(),
        "anthropic/claude-haiku-4-5 > openai-compatible/scripted"
    );
    assert!(
        roncho::wiring::llm(config.llm.as_ref(), roncho::config::LlmRole::Summary)
            .unwrap()
            .is_none(),
        "no summary model: summaries stay extractive"
    );

    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let dyn_store = store.clone();
    let worker = Worker::new(dyn_store, queue, WorkerConfig::default()).with_deriver_llm(llm);
    while worker.run_once().await.unwrap() {}
    assert_eq!(
        (overloaded_calls.load(Ordering::SeqCst), script.count()),
        (1, 1),
        "one refused call, then the next provider"
    );
    let conclusions = alice_observes(&store).await;
    assert_eq!(
        conclusions.iter().map(|c| c.content.as_str()).collect::<Vec<_>>(),
        ["Alice works as a nurse"]
    );
    assert_eq!(
        conclusions[0].metadata["derived_by"], "anthropic/claude-haiku-4-5 > openai-compatible/scripted",
        "the chain that derived it"
    );
}

/// A model that answers every batch of non-empty messages with no
/// observation (a weak local model that ignores the task) marks the
/// workspace degraded, with the reason, in queue status, `roncho status` and
/// the metrics, after three batches; an unreadable reply does at once; the
/// next batch that derives clears it.
#[tokio::test]
async fn a_model_that_keeps_deriving_nothing_marks_the_workspace_degraded_until_it_derives() {
    use roncho_deriver::{DeriverApi, GetQueueStatus};
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_messages(dir.path()).await;
    let (llm, _) = model(vec![
        r#"{"explicit": []}"#,
        r#"{"explicit": []}"#,
        r#"{"explicit": []}"#,
        r#"{"explicit": [{"content": "Alice has a dog named Rex"}]}"#,
        "I think Alice is nice.",
    ])
    .await;
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let config = WorkerConfig {
        max_attempts: 1,
        ..WorkerConfig::default()
    };
    let worker = Worker::new(store.clone(), queue.clone(), config).with_llms(llm.clone(), llm);
    let deriver = roncho_deriver::Deriver::new(Some(queue.clone()), roncho_deriver::Derivation::default())
        .with_health(store.clone());
    let degraded = || async {
        let report = deriver
            .get_queue_status(GetQueueStatus {
                workspace_id: "w".into(),
                ..GetQueueStatus::default()
            })
            .await
            .unwrap();
        report.degraded
    };
    let mut config = roncho::config::ConfigLayer::default();
    config.store.data_dir = Some(dir.path().to_owned());
    config.search.embedding_provider = Some(roncho::config::EmbeddingProvider::None);
    let config = roncho::config::Config::resolve(Default::default(), Default::default(), config).unwrap();
    let metrics = roncho::metrics::Metrics::new();

    while worker.run_once().await.unwrap() {}
    assert_eq!(degraded().await, None, "one empty batch is not a pattern");
    for content in ["I walked the dog.", "The dog barked all night."] {
        store.create_messages("w", "s", say(content)).await.unwrap();
        while worker.run_once().await.unwrap() {}
    }
    let reason = degraded().await.expect("three empty batches in a row: degraded");
    assert!(
        reason.contains("openai-compatible/scripted") && reason.contains("3 times"),
        "{reason}"
    );
    let status = roncho::status::checks(&config).await;
    let line = status
        .iter()
        .find(|check| check.name == "derivation")
        .expect("a derivation line");
    assert!(!line.ok && line.detail.contains("workspace `w`"), "{line:?}");
    metrics.refresh(store.as_ref(), None).await;
    assert!(
        metrics.encode().contains("derivation_degraded{workspace=\"w\"} 1"),
        "{}",
        metrics.encode()
    );

    store
        .create_messages("w", "s", say("My dog is called Rex."))
        .await
        .unwrap();
    while worker.run_once().await.unwrap() {}
    assert_eq!(degraded().await, None, "a batch that derives clears it");
    let status = roncho::status::checks(&config).await;
    assert!(
        status.iter().any(|check| check.name == "derivation" && check.ok),
        "{status:?}"
    );
    metrics.refresh(store.as_ref(), None).await;
    assert!(
        !metrics.encode().contains("derivation_degraded{"),
        "{}",
        metrics.encode()
    );

    // Prose instead of JSON: degraded at the first, and the work fails visibly.
    store.create_messages("w", "s", say("Rex is a beagle.")).await.unwrap();
    while worker.run_once().await.unwrap() {}
    let reason = degraded().await.expect("an unreadable reply degrades at once");
    assert!(reason.contains("unreadable"), "{reason}");
    let status = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(status.counts.failed, 1, "{status:?}");
}

/// `custom_instructions` of the workspace's configuration (top level and
/// `reasoning`) follow Honcho's deriver prompt; a session's override its
/// workspace's.
#[tokio::test]
async fn custom_instructions_reach_the_derivers_prompt_after_honchos() {
    use roncho_core::store::Workspaces;
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let configuration = json!({
        "custom_instructions": "Write every observation in French.",
        "reasoning": {"custom_instructions": "Only record facts about pets."},
    });
    store
        .update_workspace("w", None, configuration.as_object().cloned())
        .await
        .unwrap();
    store
        .create_messages("w", "s", say("My cat Mochi eats salmon."))
        .await
        .unwrap();
    let (llm, script) = model(vec![r#"{"explicit": [{"content": "Alice a un chat nommé Mochi"}]}"#]).await;
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let worker = Worker::new(store.clone(), queue, WorkerConfig::default()).with_llms(llm.clone(), llm);
    while worker.run_once().await.unwrap() {}
    let sent = script.requests.lock().unwrap()[0].clone();
    let system = sent["messages"][0]["content"].as_str().unwrap();
    let honcho = system
        .find("You extract explicit observations")
        .expect("Honcho's prompt");
    let french = system
        .find("Write every observation in French.")
        .expect("the top-level instructions");
    let pets = system
        .find("Only record facts about pets.")
        .expect("the reasoning instructions");
    assert!(honcho < french && french < pets, "{system}");
    assert_eq!(alice_observes(&store).await.len(), 1);
}

/// The duplicate rate over a scripted stream of paraphrases, with the
/// default local model (bge-small) as the deriver's embedder: a model that
/// words six facts thirteen ways, within batches and across them, leaves
/// six conclusions, each counted by the batches that derived it; facts that
/// differ (a nurse and a teacher, a cat and a dog) stay apart.
#[tokio::test]
async fn paraphrased_facts_within_and_across_batches_are_stored_once() {
    let Some(dir) = roncho_store::testing::integration_env("RONCHO_TEST_EMBED_MODEL_DIR") else {
        return;
    };
    let embedder: Arc<dyn roncho_core::embed::Embedder> = Arc::new(
        tokio::task::spawn_blocking(move || roncho_embed::bert::BertEmbedder::load(dir.as_ref()))
            .await
            .unwrap()
            .unwrap(),
    );
    let batches: [&[&str]; 5] = [
        &[
            "Alice works as a nurse",
            "Alice is employed as a nurse",
            "Alice lives in Berlin",
        ],
        &[
            "Alice is a nurse",
            "Alice resides in Berlin",
            "Alice has a cat named Mochi",
        ],
        &[
            "Alice's cat is named Mochi",
            "Alice enjoys hiking on weekends",
            "Alice lives in Berlin, Germany",
        ],
        &[
            "Alice likes to hike on weekends",
            "Alice works as a nurse at a hospital",
            "Alice's sister works as a teacher",
        ],
        &["Alice has a dog named Rex"],
    ];
    let replies: Vec<&'static str> = batches
        .iter()
        .map(|facts| {
            let explicit: Vec<Value> = facts.iter().map(|fact| json!({"content": fact})).collect();
            &*Box::leak(json!({ "explicit": explicit }).to_string().into_boxed_str())
        })
        .collect();
    let produced: usize = batches.iter().map(|facts| facts.len()).sum();
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let (llm, _) = model(replies).await;
    let vectors: Arc<dyn roncho_core::vector::VectorStore> = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    let reconciler = roncho_reconciler::Reconciler::new(
        store.clone(),
        embedder.clone(),
        vectors.clone(),
        roncho_reconciler::ReconcilerConfig::default(),
    );
    let queue: Arc<dyn WorkQueue> = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let worker = Worker::new(store.clone(), queue, WorkerConfig::default())
        .with_llms(llm.clone(), llm)
        .with_semantic_dedup(embedder, vectors);
    for turn in 0..batches.len() {
        store
            .create_messages("w", "s", say(&format!("Turn {turn} of Alice's story.")))
            .await
            .unwrap();
        while worker.run_once().await.unwrap() {}
        reconciler.pass().await.unwrap();
    }
    let live = alice_observes(&store).await;
    let stored: Vec<(String, i64)> = live.iter().map(|c| (c.content.clone(), c.times_derived)).collect();
    let rate = (live.len() as f64 - 6.0) / live.len() as f64;
    println!(
        "paraphrase stream: {produced} facts produced, {} stored, duplicate rate {rate:.2}: {stored:?}",
        live.len()
    );
    for topic in ["nurse", "Berlin", "Mochi", "hik", "teacher", "Rex"] {
        let found: Vec<&(String, i64)> = stored.iter().filter(|(content, _)| content.contains(topic)).collect();
        assert_eq!(found.len(), 1, "`{topic}` once: {stored:?}");
    }
    assert_eq!(live.len(), 6, "duplicate rate {rate:.2}: {stored:?}");
    let count = |topic: &str| stored.iter().find(|(content, _)| content.contains(topic)).unwrap().1;
    // Counted once per batch that derived it (two wordings in one batch are one derivation).
    assert_eq!(count("nurse"), 3, "four wordings in three batches: {stored:?}");
    assert_eq!(count("Berlin"), 3, "{stored:?}");
    assert_eq!(count("Mochi"), 2, "{stored:?}");
}
