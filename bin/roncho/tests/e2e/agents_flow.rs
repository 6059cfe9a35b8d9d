//! A conversation through deriver → dreamer → dialectic against one
//! scripted model server speaking the OpenAI chat format, whose replies
//! depend on what each agent sends (as a real model's would): the dream
//! writes a deduction and a pattern with real source ids, soft-deletes the
//! fact the newer one contradicts, refreshes the peer card; the dialectic's
//! answer cites ids that resolve to observations whose sources are real
//! messages.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use roncho_core::model::{JsonObject, NewMessage};
use roncho_core::queue::WorkQueue;
use roncho_core::store::{DreamLedger, Memory, Messages};
use roncho_proto::v1 as pb;
use roncho_proto::v1::dialectic_service_client::DialecticServiceClient;
use roncho_proto::v1::dreamer_service_client::DreamerServiceClient;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

type Requests = Arc<Mutex<Vec<Value>>>;

/// The id on the line of `text` that mentions `needle` (`[id:...]` markers).
fn id_near(text: &str, needle: &str) -> String {
    let line = text
        .lines()
        .find(|line| line.contains(needle) && line.contains("[id:"))
        .unwrap_or_else(|| panic!("no [id:...] line with {needle:?} in:\n{text}"));
    line.split("[id:").nth(1).unwrap().split(']').next().unwrap().to_owned()
}

fn tool_calls(calls: &[(&str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (name, arguments))| {
            json!({"id": format!("call-{index}"), "type": "function",
                   "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    json!({"role": "assistant", "content": null, "tool_calls": calls})
}

/// Plays each agent's part from what it was sent.
fn reply_to(body: &Value) -> Value {
    let messages = body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap_or_default();
    let user = messages[1]["content"].as_str().unwrap_or_default();
    let used_tools = messages.iter().any(|m| m["role"] == "tool");
    let says = |text: &str| json!({"role": "assistant", "content": text});
    if system.contains("You extract explicit observations") {
        let facts = if user.contains("Berlin") {
            json!({"explicit": [{"content": "Alice moved to Berlin in May 2024"}]})
        } else {
            json!({"explicit": [{"content": "Alice lives in Paris"}, {"content": "Alice works as a baker"}]})
        };
        return says(&facts.to_string());
    }
    if system.contains("deduction specialist") {
        if used_tools {
            return says("Done.");
        }
        let (paris, berlin) = (id_near(user, "lives in Paris"), id_near(user, "moved to Berlin"));
        return tool_calls(&[
            (
                "create_observations_deductive",
                json!({"observations": [{"content": "Alice now lives in Berlin, not Paris",
                    "source_ids": [paris, berlin],
                    "premises": ["Alice lives in Paris", "Alice moved to Berlin in May 2024"]}]}),
            ),
            ("delete_observations", json!({"observation_ids": [paris]})),
            (
                "update_peer_card",
                json!({"content": ["IDENTITY: Alice", "ATTRIBUTE: lives in Berlin", "ATTRIBUTE: works as a baker"]}),
            ),
        ]);
    }
    if system.contains("induction specialist") {
        if used_tools {
            return says("Done.");
        }
        let (berlin, baker) = (id_near(user, "moved to Berlin"), id_near(user, "works as a baker"));
        return tool_calls(&[(
            "create_observations_inductive",
            json!({"observations": [{"content": "Alice makes big changes to her life",
                "source_ids": [berlin, baker], "sources": ["moved to Berlin", "became a baker"],
                "pattern_type": "tendency", "confidence": "low"}]}),
        )]);
    }
    if system.contains("You maintain the peer card") {
        if used_tools {
            return says("Done.");
        }
        assert!(user.contains("rebuilding"), "a rebuild hides the old card: {user}");
        return tool_calls(&[(
            "update_peer_card",
            json!({"content": ["IDENTITY: Alice", "lives in Berlin", "INSTRUCTION: call her Ali"]}),
        )]);
    }
    if system.contains("You answer questions about the peer") {
        let deduction = id_near(user, "now lives in Berlin");
        let berlin = id_near(user, "moved to Berlin");
        return says(&format!(
            "Alice lives in Berlin now [id:{deduction}], since May 2024 [id:{berlin}]."
        ));
    }
    says("I do not know this agent.")
}

async fn completions(State(requests): State<Requests>, Json(body): Json<Value>) -> Json<Value> {
    requests.lock().unwrap().push(body.clone());
    Json(json!({
        "choices": [{"index": 0, "message": reply_to(&body), "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 30}
    }))
}

/// A model server playing `handler`, and an embedded store with its queue.
struct World {
    requests: Requests,
    llm: Arc<dyn roncho_llm::Llm>,
    store: Arc<roncho_store::SqlStore>,
    dyn_store: Arc<roncho_store::SqlStore>,
    queue: Arc<dyn WorkQueue>,
    _dir: tempfile::TempDir,
}

impl World {
    async fn new(handler: axum::routing::MethodRouter<Requests>) -> World {
        let requests = Requests::default();
        let app = axum::Router::new()
            .route("/v1/chat/completions", handler)
            .with_state(requests.clone());
        let base = format!("{}/v1", roncho_http::serve_for_test(app).await);
        let llm: Arc<dyn roncho_llm::Llm> = Arc::new(
            roncho_llm::openai::OpenAiChat::new(roncho_llm::openai::OpenAiChatConfig::new(&base, "scripted")).unwrap(),
        );
        let dir = tempfile::tempdir().unwrap();
        let store = roncho_store::testing::open_embedded(dir.path()).await;
        World {
            requests,
            llm,
            dyn_store: store.clone(),
            queue: Arc::new(roncho_store::SqlWorkQueue::new(store.clone())),
            store,
            _dir: dir,
        }
    }
}

fn said(content: &str) -> NewMessage {
    NewMessage {
        peer_id: "alice".into(),
        content: content.into(),
        metadata: JsonObject::new(),
        configuration: JsonObject::new(),
        created_at: None,
        token_count: 10,
    }
}

#[tokio::test]
async fn a_conversation_is_derived_dreamt_and_answered_with_real_citations() {
    let World {
        requests,
        llm,
        store,
        dyn_store,
        queue,
        _dir,
    } = World::new(axum::routing::post(completions)).await;

    // The deriver: two batches, the second contradicting the first.
    let deriver = roncho_deriver::worker::Worker::new(dyn_store.clone(), queue.clone(), Default::default())
        .with_llms(llm.clone(), llm.clone());
    store
        .create_messages("w", "s", vec![said("I live in Paris and I work as a baker.")])
        .await
        .unwrap();
    while deriver.run_once().await.unwrap() {}
    let moved = store
        .create_messages("w", "s", vec![said("Big news: I moved to Berlin in May.")])
        .await
        .unwrap();
    while deriver.run_once().await.unwrap() {}
    let explicit = |content: &'static str| {
        let store = store.clone();
        async move {
            let filter = roncho_core::filter::parse(
                &roncho_core::filter::CONCLUSION,
                json!({"observer_id": "alice", "observed_id": "alice"}).as_object(),
            )
            .unwrap();
            let page = roncho_core::model::PageRequest::from_wire(1, 50, false).unwrap();
            store
                .list_conclusions("w", &filter, page)
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|c| c.content.contains(content))
        }
    };
    let paris = explicit("lives in Paris").await.expect("derived");
    let berlin = explicit("moved to Berlin").await.expect("derived");
    assert_eq!(berlin.source_ids, [moved[0].id.clone()]);

    // The dreamer service schedules; the worker dreams.
    let mut services = roncho::server::Serving::store_only(dyn_store.clone());
    services.domain.queue = Some(queue.clone());
    services.domain.dream_model = Some(llm.model_id());
    services.domain.dialectic = Some(roncho_dialectic::Dialectic::new(dyn_store.clone(), None).with_model(
        roncho_dialectic::agent::Level::Low,
        llm.clone(),
        1000,
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let roles = [roncho::config::Role::Dreamer, roncho::config::Role::Dialectic];
    tokio::spawn(async move { roncho::server::run(Some(listener), services, &roles, token).await });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut dreamer = DreamerServiceClient::new(channel.clone());
    let schedule = pb::ScheduleDreamRequest {
        workspace_id: "w".into(),
        observer: "alice".into(),
        dream_type: "omni".into(),
        ..Default::default()
    };
    let first = dreamer.schedule_dream(schedule.clone()).await.unwrap().into_inner();
    let again = dreamer.schedule_dream(schedule.clone()).await.unwrap().into_inner();
    assert_eq!(
        (first.scheduled, again.scheduled),
        (true, false),
        "one pending dream per key"
    );
    let bad = dreamer
        .schedule_dream(pb::ScheduleDreamRequest {
            rebuild: true,
            ..schedule.clone()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);

    let dream_worker = roncho_dreamer::worker::DreamWorker::new(
        dyn_store.clone(),
        queue.clone(),
        None,
        llm.clone(),
        2000,
        Default::default(),
    );
    assert!(dream_worker.run_once().await.unwrap(), "the dream ran");
    assert!(!dream_worker.run_once().await.unwrap(), "and only once");

    let live = |level: &'static str| {
        let store = store.clone();
        async move {
            let filter = roncho_core::filter::parse(
                &roncho_core::filter::CONCLUSION,
                json!({"observer_id": "alice", "level": level}).as_object(),
            )
            .unwrap();
            let page = roncho_core::model::PageRequest::from_wire(1, 50, false).unwrap();
            store.list_conclusions("w", &filter, page).await.unwrap().items
        }
    };
    let deductions = live("deductive").await;
    assert_eq!(deductions.len(), 1);
    assert_eq!(deductions[0].source_ids, [paris.id.clone(), berlin.id.clone()]);
    assert_eq!(deductions[0].premises.len(), 2);
    let patterns = live("inductive").await;
    assert_eq!(patterns.len(), 1);
    assert_eq!(patterns[0].metadata["pattern_type"], "tendency");
    assert_eq!(patterns[0].metadata["confidence"], "low");
    assert_eq!(patterns[0].source_ids.len(), 2);
    // The contradicted fact is soft-deleted: out of reads, still stored.
    assert!(
        store
            .conclusions_by_ids("w", std::slice::from_ref(&paris.id))
            .await
            .unwrap()
            .is_empty()
    );
    let deleted_at: Option<i64> = sqlx::query_scalar("SELECT deleted_at FROM documents WHERE public_id = $1")
        .bind(paris.id.clone())
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert!(deleted_at.is_some(), "kept, marked deleted");
    assert_eq!(
        store.get_peer_card("w", "alice", "alice").await.unwrap().unwrap(),
        [
            "IDENTITY: Alice",
            "ATTRIBUTE: lives in Berlin",
            "ATTRIBUTE: works as a baker"
        ]
    );
    assert_eq!(store.dream_state("w", "alice", "alice").await.unwrap().generation, 1);

    // A card refresh from scratch: the old card is not shown, the new one
    // replaces it (prefixed), and no dream is recorded.
    let refresh = dreamer
        .schedule_dream(pb::ScheduleDreamRequest {
            dream_type: "card_refresh".into(),
            rebuild: true,
            ..schedule.clone()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(refresh.scheduled);
    assert!(dream_worker.run_once().await.unwrap());
    assert_eq!(
        store.get_peer_card("w", "alice", "alice").await.unwrap().unwrap(),
        [
            "IDENTITY: Alice",
            "ATTRIBUTE: lives in Berlin",
            "INSTRUCTION: call her Ali"
        ]
    );
    assert_eq!(store.dream_state("w", "alice", "alice").await.unwrap().generation, 1);
    assert!(
        dreamer.schedule_dream(schedule).await.unwrap().into_inner().scheduled,
        "after the dream another can be scheduled"
    );

    // The dialectic answers from the dreamt memory and cites it.
    let answer = DialecticServiceClient::new(channel)
        .chat(pb::ChatRequest {
            workspace_id: "w".into(),
            peer_id: "alice".into(),
            query: "Where does Alice live?".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .content
        .unwrap();
    let cited: Vec<String> = answer
        .split("[id:")
        .skip(1)
        .map(|rest| rest.split(']').next().unwrap().to_owned())
        .collect();
    assert_eq!(cited, [deductions[0].id.clone(), berlin.id.clone()], "{answer}");
    let observations = store.conclusions_by_ids("w", &cited).await.unwrap();
    assert_eq!(observations.len(), 2, "every cited id is a live observation");
    let mut message_ids = Vec::new();
    for observation in &observations {
        for source in &observation.source_ids {
            match store
                .conclusions_by_ids("w", std::slice::from_ref(source))
                .await
                .unwrap()
                .pop()
            {
                Some(premise) => message_ids.extend(premise.source_ids),
                None if observation.level == "explicit" => message_ids.push(source.clone()),
                None => {} // a premise the dream deleted (Paris)
            }
        }
    }
    let messages = store
        .messages_by_ids("w", &message_ids, &roncho_core::filter::Filter::All, None)
        .await
        .unwrap();
    assert!(!message_ids.is_empty());
    assert_eq!(
        messages.len(),
        message_ids.iter().collect::<std::collections::HashSet<_>>().len()
    );
    assert!(
        messages.iter().all(|m| m.content.contains("Berlin")),
        "sources are the real messages"
    );
    let agents: Vec<String> = requests
        .lock()
        .unwrap()
        .iter()
        .map(|body| {
            body["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(30)
                .collect()
        })
        .collect();
    assert_eq!(
        agents.len(),
        2 + 2 + 2 + 2 + 1,
        "two derivations, two rounds per specialist and the card refresh, one answer: {agents:?}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn the_deriver_schedules_a_dream_as_a_collection_grows_and_activity_postpones_it() {
    let World {
        requests: _,
        llm,
        store,
        dyn_store,
        queue,
        _dir,
    } = World::new(axum::routing::post(batch_facts)).await;
    let idle = std::time::Duration::from_secs(1);
    let scheduler = roncho_dreamer::DreamScheduler::new(
        dyn_store.clone(),
        queue.clone(),
        roncho_dreamer::DreamPolicy {
            document_threshold: 3,
            min_between: std::time::Duration::ZERO,
            idle,
            max_delay: std::time::Duration::from_secs(60),
        },
    );
    let deriver = roncho_deriver::worker::Worker::new(dyn_store.clone(), queue.clone(), Default::default())
        .with_llms(llm.clone(), llm.clone())
        .with_listener(Arc::new(scheduler));
    let dreams = || async {
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "SELECT available_at, work_unit_key FROM work_tasks WHERE task_type = 'dream' AND state = 'pending'",
        )
        .fetch_all(store.pool())
        .await
        .unwrap();
        rows
    };
    let say = |n: u32| {
        let (store, deriver) = (&store, &deriver);
        async move {
            store
                .create_messages("w", "s", vec![said(&format!("Message number {n} from me."))])
                .await
                .unwrap();
            while deriver.run_once().await.unwrap() {}
        }
    };
    say(1).await;
    assert!(dreams().await.is_empty(), "2 observations: under the threshold of 3");
    say(2).await;
    let scheduled = dreams().await;
    assert_eq!(scheduled.len(), 1, "4 observations: due");
    assert_eq!(scheduled[0].1, "dream:omni:w:alice:alice");
    let probe = |queue: Arc<dyn WorkQueue>| async move {
        queue
            .claim("probe", &["dream"], 1, std::time::Duration::from_secs(30))
            .await
            .unwrap()
    };
    assert!(probe(queue.clone()).await.is_none(), "not before alice has been quiet");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    say(3).await;
    let postponed = dreams().await;
    assert_eq!(postponed.len(), 1, "still one dream");
    assert!(postponed[0].0 > scheduled[0].0, "alice spoke: the dream waits longer");
    let ready_at = postponed[0].0;
    let now = roncho_core::model::now_micros();
    tokio::time::sleep(std::time::Duration::from_micros(
        u64::try_from(ready_at - now).unwrap_or(0) + 200_000,
    ))
    .await;
    let claim = probe(queue.clone()).await.expect("ready once alice was quiet");
    assert_eq!(claim.tasks[0].payload["trigger_reason"], "threshold");
}

#[tokio::test]
async fn a_peer_who_never_goes_quiet_gets_its_dream_within_the_longest_delay() {
    let World {
        requests,
        llm,
        store,
        dyn_store,
        queue,
        _dir,
    } = World::new(axum::routing::post(facts_or_done)).await;
    // Quiet for 30 s would be needed; alice speaks every 200 ms. The
    // dream runs at the latest 2 s after it became due all the same.
    let max_delay = std::time::Duration::from_secs(2);
    let scheduler = roncho_dreamer::DreamScheduler::new(
        dyn_store.clone(),
        queue.clone(),
        roncho_dreamer::DreamPolicy {
            document_threshold: 3,
            min_between: std::time::Duration::ZERO,
            idle: std::time::Duration::from_secs(30),
            max_delay,
        },
    );
    let deriver = roncho_deriver::worker::Worker::new(dyn_store.clone(), queue.clone(), Default::default())
        .with_llms(llm.clone(), llm.clone())
        .with_listener(Arc::new(scheduler));
    let dream_worker = roncho_dreamer::worker::DreamWorker::new(
        dyn_store.clone(),
        queue.clone(),
        None,
        llm.clone(),
        2000,
        Default::default(),
    );
    // The configuration's instructions for dreams reach the dream's prompts.
    let configuration = json!({"dream": {"custom_instructions": "Prefer few, well-founded deductions."}});
    roncho_core::store::Workspaces::update_workspace(store.as_ref(), "w", None, configuration.as_object().cloned())
        .await
        .unwrap();
    let mut due_at = None;
    let mut dreamt_at = None;
    for n in 0..60u32 {
        store
            .create_messages("w", "s", vec![said(&format!("Message number {n} from me."))])
            .await
            .unwrap();
        while deriver.run_once().await.unwrap() {}
        let waiting = queue
            .status(&roncho_core::queue::StatusFilter {
                workspace_id: "w".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .dreams;
        if due_at.is_none() && waiting.waiting + waiting.ready > 0 {
            due_at = Some(std::time::Instant::now());
            assert_eq!(waiting.waiting, 1, "due, and waiting for quiet at first: {waiting:?}");
            assert!(waiting.oldest_due_at.is_some());
        }
        if dream_worker.run_once().await.unwrap() {
            dreamt_at = Some(std::time::Instant::now());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let (due_at, dreamt_at) = (due_at.expect("a dream became due"), dreamt_at.expect("the dream ran"));
    let waited = dreamt_at - due_at;
    assert!(
        waited >= max_delay - std::time::Duration::from_millis(500)
            && waited < max_delay + std::time::Duration::from_secs(2),
        "the dream waited {waited:?}, not about {max_delay:?}"
    );
    assert_eq!(store.dream_state("w", "alice", "alice").await.unwrap().generation, 1);
    let dream_prompts: Vec<String> = requests
        .lock()
        .unwrap()
        .iter()
        .map(|body| body["messages"][0]["content"].as_str().unwrap_or_default().to_owned())
        .filter(|system| system.contains("You consolidate what"))
        .collect();
    assert!(!dream_prompts.is_empty(), "the dream model was asked");
    assert!(
        dream_prompts
            .iter()
            .all(|system| system.ends_with("Prefer few, well-founded deductions.")),
        "{dream_prompts:?}"
    );
}

/// A deriver model answering with [`batch_facts`]'s facts, and a dream
/// model whose specialists find nothing to do.
async fn facts_or_done(State(requests): State<Requests>, Json(body): Json<Value>) -> Json<Value> {
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    if system.contains("You extract explicit observations") {
        return batch_facts(State(requests), Json(body)).await;
    }
    requests.lock().unwrap().push(body);
    Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Done."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1}
    }))
}

/// A deriver model: two facts per batch, named after the batch's line.
async fn batch_facts(State(requests): State<Requests>, Json(body): Json<Value>) -> Json<Value> {
    requests.lock().unwrap().push(body.clone());
    let transcript = body["messages"][1]["content"].as_str().unwrap_or_default();
    let n = transcript
        .split("number ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("0");
    let facts = json!({"explicit": [{"content": format!("Alice said thing {n}")}, {"content": format!("Alice means thing {n}")}]});
    Json(json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": facts.to_string()}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10}
    }))
}
