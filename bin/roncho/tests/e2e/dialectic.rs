//! The dialectic over gRPC in the embedded mode: extractive without a model;
//! with a local server speaking the OpenAI chat format, each reasoning
//! level's tool set and iteration cap, response formats, deadlines and
//! streaming of the final answer only.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use roncho_core::model::{JsonObject, NewConclusion, NewMessage};
use roncho_core::store::{Memory, Messages};
use roncho_dialectic::agent::Level;
use roncho_proto::v1 as pb;
use roncho_proto::v1::dialectic_service_client::DialecticServiceClient;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// What the scripted model answers: these assistant messages in order, the
/// last one again and again; each request is kept.
#[derive(Clone, Default)]
struct Model {
    replies: Arc<Vec<Value>>,
    requests: Arc<Mutex<Vec<Value>>>,
    calls: Arc<AtomicUsize>,
    delay: Duration,
}

async fn completions(State(model): State<Model>, Json(body): Json<Value>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let call = model.calls.fetch_add(1, Ordering::SeqCst);
    model.requests.lock().unwrap().push(body.clone());
    tokio::time::sleep(model.delay).await;
    let message = model.replies[call.min(model.replies.len() - 1)].clone();
    if body["stream"] == true {
        let content = message["content"].as_str().unwrap_or_default().to_owned();
        let mut events = String::new();
        for piece in content.split_inclusive(' ') {
            events.push_str(&format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"content": piece}}]})
            ));
        }
        events.push_str(&format!(
            "data: {}\n\ndata: [DONE]\n\n",
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 5}})
        ));
        return ([("content-type", "text/event-stream")], events).into_response();
    }
    Json(json!({
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20}
    }))
    .into_response()
}

fn says(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

fn calls_tool(name: &str, arguments: Value) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call-1", "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}
    ]})
}

async fn model(replies: Vec<Value>, delay: Duration) -> (Arc<dyn roncho_llm::Llm>, Model) {
    let model = Model {
        replies: Arc::new(replies),
        delay,
        ..Model::default()
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(model.clone());
    let base = format!("{}/v1", roncho_http::serve_for_test(app).await);
    let mut config = roncho_llm::openai::OpenAiChatConfig::new(&base, "scripted");
    config.retry.max_retries = 0;
    (Arc::new(roncho_llm::openai::OpenAiChat::new(config).unwrap()), model)
}

struct Server {
    client: DialecticServiceClient<tonic::transport::Channel>,
    store: Arc<roncho_store::SqlStore>,
    facts: Vec<String>,
    messages: Vec<String>,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

/// An embedded server whose dialectic is built by `configure`; Alice told
/// Bob about her cat, and Bob holds two observations about her.
async fn start(configure: impl FnOnce(roncho_dialectic::Dialectic) -> roncho_dialectic::Dialectic) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let said = |peer: &str, content: &str| NewMessage {
        peer_id: peer.into(),
        content: content.into(),
        metadata: JsonObject::new(),
        configuration: JsonObject::new(),
        created_at: None,
        token_count: 8,
    };
    let messages: Vec<String> = store
        .create_messages(
            "w",
            "s",
            vec![
                said("alice", "I adopted a grey cat named Mochi."),
                said("bob", "Lovely. What does Mochi eat?"),
                said("alice", "Mochi only eats salmon."),
            ],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    let fact = |content: &str, source: &str| NewConclusion {
        observer_id: "bob".into(),
        observed_id: "alice".into(),
        session_id: Some("s".into()),
        level: "explicit".into(),
        content: content.into(),
        premises: Vec::new(),
        source_ids: vec![source.into()],
        metadata: JsonObject::new(),
    };
    let facts = store
        .create_conclusions(
            "w",
            vec![
                fact("Alice has a grey cat named Mochi", &messages[0]),
                fact("Alice's cat Mochi only eats salmon", &messages[2]),
            ],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    let dyn_store = store.clone();
    let mut services = roncho::server::Serving::store_only(dyn_store.clone());
    services.domain.dialectic = Some(configure(
        roncho_dialectic::Dialectic::new(dyn_store.clone(), None).with_traces(dyn_store.clone()),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    tokio::spawn(async move {
        roncho::server::run(Some(listener), services, &[roncho::config::Role::Dialectic], token).await
    });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    Server {
        client: DialecticServiceClient::new(channel),
        store,
        facts,
        messages,
        shutdown,
        _dir: dir,
    }
}

fn ask(query: &str, level: &str) -> pb::ChatRequest {
    pb::ChatRequest {
        workspace_id: "w".into(),
        peer_id: "bob".into(),
        target: Some("alice".into()),
        query: query.into(),
        reasoning_level: level.into(),
        ..Default::default()
    }
}

/// The ids an answer cites as [id:...].
fn cited(answer: &str) -> Vec<String> {
    answer
        .split("[id:")
        .skip(1)
        .filter_map(|rest| rest.split(']').next())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn without_a_model_the_answer_quotes_memory_with_ids_that_resolve() {
    let mut server = start(|dialectic| dialectic).await;
    let answer = server
        .client
        .chat(ask("What does Alice's cat eat?", ""))
        .await
        .unwrap()
        .into_inner()
        .content
        .expect("an extractive answer");
    assert!(answer.starts_with("No LLM is configured"), "{answer}");
    let ids = cited(&answer);
    let observations = server.store.conclusions_by_ids("w", &ids).await.unwrap();
    assert!(
        observations.iter().any(|c| c.id == server.facts[1]),
        "cites the salmon fact: {answer}"
    );
    for observation in &observations {
        for source in &observation.source_ids {
            assert!(server.messages.contains(source), "its sources are real messages");
        }
    }

    let mut stream = server
        .client
        .chat_stream(ask("What does Alice's cat eat?", "max"))
        .await
        .unwrap()
        .into_inner();
    let mut streamed = String::new();
    let mut done = false;
    while let Some(piece) = stream.message().await.unwrap() {
        assert!(!done, "nothing after done");
        streamed.push_str(&piece.delta);
        done = piece.done;
    }
    assert!(done);
    assert_eq!(streamed, answer, "every level answers the same without a model");

    let unknown = server
        .client
        .chat(pb::ChatRequest {
            peer_id: "nobody".into(),
            ..ask("anything", "")
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    for (request, field) in [
        (ask("", ""), "query"),
        (ask("q", "extreme"), "reasoning_level"),
        (
            pb::ChatRequest {
                response_format: Some(roncho_api::json::json_to_struct(
                    json!({"type": "array"}).as_object().unwrap(),
                )),
                ..ask("q", "")
            },
            "response_format",
        ),
        (
            pb::ChatRequest {
                filters: Some(roncho_api::json::json_to_struct(
                    json!({"peer_id": "x"}).as_object().unwrap(),
                )),
                ..ask("q", "")
            },
            "filters.peer_id",
        ),
    ] {
        let error = server.client.chat(request).await.unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument, "{field}: {error:?}");
        assert!(error.message().contains(field), "{field}: {}", error.message());
    }
    server.shutdown.cancel();
}

#[tokio::test]
async fn every_level_follows_its_tool_table() {
    // A model that never stops asking for tools: each level stops it at its
    // iteration cap and asks for the answer without tools.
    for (level, iterations, tools) in [
        (Level::Minimal, 1, 2),
        (Level::Low, 5, 7),
        (Level::Medium, 2, 7),
        (Level::High, 4, 7),
        (Level::Max, 10, 7),
    ] {
        let (llm, script) = model(
            vec![calls_tool("search_memory", json!({"query": "cat food"}))],
            Duration::ZERO,
        )
        .await;
        let mut server = start(|dialectic| dialectic.with_model(level, llm, 777)).await;
        let answer = server
            .client
            .chat(ask("What does Alice's cat eat?", level.name()))
            .await
            .unwrap()
            .into_inner();
        let requests = script.requests.lock().unwrap().clone();
        assert_eq!(
            requests.len(),
            iterations + 1,
            "{level:?}: {iterations} tool rounds, then the answer"
        );
        for request in &requests[..iterations] {
            assert_eq!(request["tools"].as_array().unwrap().len(), tools, "{level:?}");
            assert_eq!(request["max_tokens"], 777, "{level:?}: the level's budget");
        }
        assert!(
            requests[iterations].get("tools").is_none(),
            "{level:?}: the answer call has no tools"
        );
        // The tool results reached the model: the prefetched facts' ids.
        let last = requests[iterations]["messages"].to_string();
        assert!(last.contains(&server.facts[1]), "{level:?}");
        assert_eq!(answer.content, None, "{level:?}: an empty final text is no answer");
        server.shutdown.cancel();
    }
}

#[tokio::test]
async fn a_model_answer_after_a_tool_call_streams_final_only_and_cites_real_ids() {
    let (llm, script) = model(
        vec![
            calls_tool("grep_messages", json!({"text": "salmon"})),
            calls_tool("delete_observations", json!({"observation_ids": ["x"]})),
            says("Mochi eats only salmon [id:FACT]."),
        ],
        Duration::ZERO,
    )
    .await;
    let mut server = start(|dialectic| dialectic.with_model(Level::Low, llm, 500)).await;
    // The scripted answer cites the fact the model would have seen.
    let fact = server.facts[1].clone();
    let mut stream = server
        .client
        .chat_stream(pb::ChatRequest {
            session_id: Some("s".into()),
            ..ask("What does Alice's cat eat?", "low")
        })
        .await
        .unwrap()
        .into_inner();
    let mut pieces = Vec::new();
    while let Some(piece) = stream.message().await.unwrap() {
        pieces.push(piece);
    }
    assert!(pieces.last().unwrap().done);
    let text: String = pieces.iter().map(|p| p.delta.as_str()).collect();
    assert_eq!(
        text, "Mochi eats only salmon [id:FACT].",
        "only the final answer, in order"
    );
    assert!(pieces.len() > 2, "in pieces");
    let requests = script.requests.lock().unwrap().clone();
    let first = requests[0]["messages"].to_string();
    assert!(first.contains(&fact), "prefetched explicit observations: {first}");
    assert!(
        first.contains("Recent messages of session s"),
        "session history: {first}"
    );
    let grep_result = requests[1]["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(grep_result.contains("Mochi only eats salmon."), "{grep_result}");
    let refused = requests[2]["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(
        refused.contains("not available"),
        "the dialectic cannot delete: {refused}"
    );
    assert_eq!(
        server.store.conclusions_by_ids("w", &server.facts).await.unwrap().len(),
        2,
        "nothing deleted"
    );
    assert!(cited(&text).contains(&"FACT".to_owned()));
    server.shutdown.cancel();
}

#[tokio::test]
async fn response_formats_validate_or_answer_null() {
    let format = roncho_api::json::json_to_struct(
        json!({"type": "object", "properties": {"food": {"type": "string"}}, "required": ["food"], "additionalProperties": false})
            .as_object()
            .unwrap(),
    );
    let (llm, _) = model(vec![says("Salmon."), says(r#"{"food": "salmon"}"#)], Duration::ZERO).await;
    let mut server = start(|dialectic| dialectic.with_model(Level::Low, llm, 500)).await;
    let answer = server
        .client
        .chat(pb::ChatRequest {
            response_format: Some(format.clone()),
            ..ask("What does Alice's cat eat?", "low")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.content.as_deref(), Some(r#"{"food":"salmon"}"#));
    server.shutdown.cancel();

    let (llm, _) = model(vec![says("Salmon."), says(r#"{"food": 42}"#)], Duration::ZERO).await;
    let mut server = start(|dialectic| dialectic.with_model(Level::Low, llm, 500)).await;
    let answer = server
        .client
        .chat(pb::ChatRequest {
            response_format: Some(format),
            ..ask("What does Alice's cat eat?", "low")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.content, None, "JSON that breaks the schema is no answer");
    server.shutdown.cancel();
}

#[tokio::test]
async fn a_slow_model_is_a_deadline_not_a_hang() {
    let (llm, _) = model(vec![says("too late")], Duration::from_secs(5)).await;
    let mut server = start(|dialectic| {
        dialectic
            .with_model(Level::Minimal, llm, 100)
            .with_deadline(Level::Minimal, Duration::from_millis(300))
    })
    .await;
    let started = std::time::Instant::now();
    let error = server
        .client
        .chat(ask("What does Alice's cat eat?", "minimal"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::DeadlineExceeded, "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "it did not wait for the model"
    );
    let mut stream = server
        .client
        .chat_stream(ask("What does Alice's cat eat?", "minimal"))
        .await
        .unwrap()
        .into_inner();
    let error = stream.message().await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::DeadlineExceeded);
    server.shutdown.cancel();
}

#[tokio::test]
async fn a_client_that_goes_away_stops_the_run() {
    // A model that keeps asking for tools, 300 ms a call: the max level
    // would make 11 calls (over 3 s) if nobody stopped it.
    let (llm, script) = model(
        vec![calls_tool("search_memory", json!({"query": "cat"}))],
        Duration::from_millis(300),
    )
    .await;
    let mut server = start(|dialectic| dialectic.with_model(Level::Max, llm, 100)).await;
    let stream = server
        .client
        .chat_stream(ask("What does Alice's cat eat?", "max"))
        .await
        .unwrap()
        .into_inner();
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(stream);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let after_cancel = script.calls.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let later = script.calls.load(Ordering::SeqCst);
    assert!(after_cancel < 11, "the run was cut short: {after_cancel} calls");
    assert_eq!(later, after_cancel, "no model call after the client left");
    server.shutdown.cancel();
}

#[tokio::test]
async fn the_prefetch_holds_its_budget_whatever_memory_holds() {
    let (llm, script) = model(vec![says("Mochi eats salmon.")], Duration::ZERO).await;
    let mut server = start(|dialectic| dialectic.with_model(Level::Low, llm, 500)).await;
    // Memory ten times the prefetch: a full card of long lines, and 250
    // long observations of each kind.
    let long = "about Mochi the grey cat, her salmon, her vet visits and the window she sleeps in ".repeat(10);
    let card: Vec<String> = (0..40).map(|n| format!("ATTRIBUTE: {n} {long}")).collect();
    server.store.set_peer_card("w", "bob", "alice", card).await.unwrap();
    let observation = |n: usize, level: &str| NewConclusion {
        observer_id: "bob".into(),
        observed_id: "alice".into(),
        session_id: Some("s".into()),
        level: level.into(),
        content: format!("Observation {n} {long}"),
        premises: Vec::new(),
        source_ids: vec![server.messages[0].clone()],
        metadata: JsonObject::new(),
    };
    let many: Vec<NewConclusion> = (0..250)
        .flat_map(|n| [observation(n, "explicit"), observation(n, "deductive")])
        .collect();
    let whole: i64 = many.iter().map(|c| roncho_core::tokens::count(&c.content)).sum();
    assert!(
        whole > 10 * roncho_dialectic::agent::PREFETCH_TOKENS,
        "{whole} tokens of memory"
    );
    server.store.create_conclusions("w", many).await.unwrap();

    let answer = server
        .client
        .chat(pb::ChatRequest {
            session_id: Some("s".into()),
            ..ask("What does Alice's cat eat?", "low")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.content.as_deref(), Some("Mochi eats salmon."));
    let requests = script.requests.lock().unwrap().clone();
    let prompt = requests[0]["messages"][1]["content"].as_str().unwrap().to_owned();
    let prefetch = prompt.split("\n\nQuestion:").next().unwrap();
    let used = roncho_core::tokens::count(prefetch);
    // The section headings are the only text beyond the budget.
    assert!(
        used <= roncho_dialectic::agent::PREFETCH_TOKENS + 64,
        "{used} tokens prefetched"
    );
    assert!(prefetch.contains("left out of the prefetch"), "{prefetch}");
    assert!(
        prefetch.contains("Recent messages of session s"),
        "history keeps its place: {prefetch}"
    );
    assert!(prefetch.contains("Mochi only eats salmon."), "{prefetch}");
    server.shutdown.cancel();
}

#[tokio::test]
async fn a_workspace_chat_reads_every_peer_through_the_model_and_shows_its_evidence() {
    let (llm, script) = model(
        vec![
            calls_tool("search_messages", json!({"query": "salmon"})),
            calls_tool("get_reasoning_chain", json!({"observation_id": "x"})),
            says("Alice's cat Mochi eats only salmon."),
        ],
        Duration::ZERO,
    )
    .await;
    let mut server = start(|dialectic| dialectic.with_model(Level::Low, llm, 500)).await;
    let answer = server
        .client
        .workspace_chat(pb::ChatRequest {
            workspace_id: "w".into(),
            query: "What does anyone's cat eat?".into(),
            include_evidence: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.content.as_deref(), Some("Alice's cat Mochi eats only salmon."));
    let requests = script.requests.lock().unwrap().clone();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        offered,
        [
            "search_memory",
            "search_messages",
            "grep_messages",
            "get_messages_by_date_range",
            "search_messages_temporal"
        ]
    );
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("whole workspace"), "{system}");
    let prefetch = requests[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        prefetch.contains(&server.facts[1]),
        "every peer's observations: {prefetch}"
    );
    let refused = requests[2]["messages"].as_array().unwrap().last().unwrap()["content"].to_string();
    assert!(refused.contains("not available"), "{refused}");

    let evidence = answer.evidence.expect("evidence when asked");
    assert_eq!(evidence.tool_calls.len(), 1, "{evidence:?}");
    assert_eq!(evidence.tool_calls[0].tool_name, "search_messages");
    let input = roncho_api::json::struct_to_json(evidence.tool_calls[0].tool_input.as_ref().unwrap());
    assert_eq!(input["query"], "salmon");
    let read: Vec<&str> = evidence.messages.iter().map(|m| m.id.as_str()).collect();
    assert!(read.contains(&server.messages[2].as_str()), "{read:?}");
    assert!(
        evidence
            .conclusions
            .iter()
            .any(|c| c.id == server.facts[1] && c.observer_id == "bob")
    );

    // A workspace chat names no peer; a peer chat needs one.
    let refused = server
        .client
        .workspace_chat(pb::ChatRequest {
            workspace_id: "w".into(),
            peer_id: "bob".into(),
            query: "x".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    let refused = server
        .client
        .chat(pb::ChatRequest {
            workspace_id: "w".into(),
            query: "x".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    server.shutdown.cancel();
}

#[tokio::test]
async fn an_answer_with_evidence_keeps_its_trace_by_size_until_its_peer_is_erased() {
    let (llm, _script) = model(
        vec![
            calls_tool("search_messages", json!({"query": "salmon"})),
            says("Mochi eats only salmon."),
        ],
        Duration::ZERO,
    )
    .await;
    let mut server = start(|dialectic| dialectic.with_model(Level::Low, llm, 500)).await;
    let mut request = ask("What does Mochi eat?", "low");
    request.include_evidence = true;
    request.session_id = Some("s".into());
    let answer = server.client.chat(request.clone()).await.unwrap().into_inner();
    let evidence = answer.evidence.expect("evidence when asked");
    assert!(!evidence.reasoning_trace_id.is_empty(), "{evidence:?}");
    let trace = server
        .client
        .get_reasoning_trace(pb::GetReasoningTraceRequest {
            workspace_id: "w".into(),
            trace_id: evidence.reasoning_trace_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((trace.peer_id.as_str(), trace.target.as_str()), ("bob", "alice"));
    assert_eq!(trace.session_id.as_deref(), Some("s"));
    let detail = roncho_api::json::struct_to_json(trace.detail.as_ref().unwrap());
    assert_eq!(detail["model"], "openai-compatible/scripted", "{detail:?}");
    assert_eq!(detail["reasoning_level"], "low");
    assert_eq!(detail["answered"], true);
    let calls = detail["model_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{detail:?}");
    assert_eq!(calls[0]["tool_calls"], 1);
    assert!(calls[0]["prompt_chars"].as_f64().unwrap() > 0.0);
    assert_eq!(calls[0]["input_tokens"], 50, "as the provider counted");
    let tools = detail["tool_calls"].as_array().unwrap();
    assert_eq!(tools[0]["tool_name"], "search_messages");
    assert_eq!(tools[0]["ok"], true);
    assert!(tools[0]["input_chars"].as_f64().unwrap() > 0.0 && tools[0]["result_chars"].as_f64().unwrap() > 0.0);
    let read = detail["read"]["messages"].as_array().unwrap();
    assert!(read.iter().any(|id| *id == server.messages[2].as_str()), "{detail:?}");
    // By size and id only: no word of the question, the memory or the answer.
    let kept = serde_json::to_string(&detail).unwrap();
    for word in ["salmon", "Mochi", "cat", "eat"] {
        assert!(!kept.contains(word), "`{word}` in the trace: {kept}");
    }

    // A target that is no peer is refused, as in Honcho: no answer about a
    // peer nobody has met, and no trace naming it.
    let mut ghost = ask("What does the ghost eat?", "low");
    ghost.include_evidence = true;
    ghost.target = Some("ghost".into());
    let refused = server.client.chat(ghost).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::NotFound, "{refused:?}");
    assert!(refused.message().contains("ghost"), "{refused:?}");

    // No evidence asked: no trace kept, none named.
    request.include_evidence = false;
    let plain = server.client.chat(request).await.unwrap().into_inner();
    assert!(plain.evidence.is_none());

    // Another workspace's key names no trace of this one; the target's
    // erasure takes the trace with it.
    let elsewhere = server
        .client
        .get_reasoning_trace(pb::GetReasoningTraceRequest {
            workspace_id: "x".into(),
            trace_id: evidence.reasoning_trace_id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(elsewhere.code(), tonic::Code::NotFound);
    roncho_core::store::erase(
        &*server.store,
        "w",
        roncho_core::model::ErasureScope::Peer {
            peer_id: "alice".into(),
        },
    )
    .await
    .unwrap();
    let gone = server
        .client
        .get_reasoning_trace(pb::GetReasoningTraceRequest {
            workspace_id: "w".into(),
            trace_id: evidence.reasoning_trace_id,
        })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), tonic::Code::NotFound, "{gone:?}");
    server.shutdown.cancel();
}

#[tokio::test]
async fn custom_instructions_of_the_dialectic_follow_its_prompt() {
    use roncho_core::store::Workspaces;
    let (llm, script) = model(vec![says("Mochi eats salmon.")], Duration::ZERO).await;
    let mut server = start(|dialectic| dialectic.with_model(Level::Low, llm, 500)).await;
    let configuration = json!({"dialectic": {"custom_instructions": "Answer in one short sentence."}});
    server
        .store
        .update_workspace("w", None, configuration.as_object().cloned())
        .await
        .unwrap();
    let answer = server
        .client
        .chat(ask("What does Alice's cat eat?", "low"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answer.content.as_deref(), Some("Mochi eats salmon."));
    let requests = script.requests.lock().unwrap().clone();
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You answer questions about the peer `alice`")
            && system.ends_with("Answer in one short sentence."),
        "{system}"
    );
    server.shutdown.cancel();
}
