//! The OpenAI-compatible chat client against a local scripted server that
//! speaks `/v1/chat/completions`: usage, structured output with repair,
//! the json_schema → json_object fallback, retries, error classes, and a
//! fallback chain. No key and no internet.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use roncho_core::Error;
use roncho_http::RetryPolicy;
use roncho_llm::openai::{OpenAiChat, OpenAiChatConfig};
use roncho_llm::{ChatMessage, ChatRequest, FallbackChain, JsonSchema, Llm, Role, chat_json};
use serde_json::{Value, json};

/// One scripted answer per request; the last repeats.
#[derive(Clone)]
enum Reply {
    Content(&'static str),
    Status(u16, &'static str),
    /// A 429 asking to wait this many seconds.
    WaitFor(u64),
}

type Script = roncho_http::Script<Reply>;

async fn completions(State(script): State<Script>, Json(body): Json<Value>) -> Response {
    let reply = script.answer(body);
    match reply {
        Reply::Status(code, text) => (StatusCode::from_u16(code).unwrap(), text.to_owned()).into_response(),
        Reply::WaitFor(seconds) => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", seconds.to_string())],
            "slow down",
        )
            .into_response(),
        Reply::Content(content) => Json(json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
        }))
        .into_response(),
    }
}

async fn serve(replies: Vec<Reply>) -> (String, Script) {
    let script = Script::new(replies);
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(script.clone());
    (format!("{}/v1", roncho_http::serve_for_test(app).await), script)
}

fn client(url: &str) -> OpenAiChat {
    let mut config = OpenAiChatConfig::new(url, "scripted-model");
    config.api_key = Some("test-key".into());
    config.retry = RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(10),
    };
    OpenAiChat::new(config).unwrap()
}

fn request(schema: bool) -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::new(Role::System, "You extract facts."),
            ChatMessage::new(Role::User, "alice: I moved to Berlin."),
        ],
        max_tokens: 256,
        temperature: Some(0.0),
        json_schema: schema.then(|| JsonSchema {
            name: "facts".into(),
            schema: json!({"type": "object", "properties": {"facts": {"type": "array", "items": {"type": "string"}}}, "required": ["facts"]}),
        }),
        ..ChatRequest::default()
    }
}

#[derive(Debug, serde::Deserialize, PartialEq)]
struct Facts {
    facts: Vec<String>,
}

#[tokio::test]
async fn chat_sends_the_wire_format_and_reports_usage() {
    let (url, script) = serve(vec![Reply::Content("Hello.")]).await;
    let llm = client(&url);
    let response = llm.chat(&request(false)).await.unwrap();
    assert_eq!(response.content, "Hello.");
    assert_eq!((response.usage.input_tokens, response.usage.output_tokens), (12, 5));
    assert_eq!(response.finish_reason.as_deref(), Some("stop"));
    let sent = script.requests.lock().unwrap()[0].clone();
    assert_eq!(sent["model"], "scripted-model");
    assert_eq!(sent["max_tokens"], 256);
    assert_eq!(
        sent["messages"][1],
        json!({"role": "user", "content": "alice: I moved to Berlin."})
    );
    assert!(sent.get("response_format").is_none());
    assert_eq!(llm.model_id(), "openai-compatible/scripted-model");
}

#[tokio::test]
async fn structured_output_is_parsed_and_repaired_once() {
    let (url, script) = serve(vec![Reply::Content(
        "```json\n{\"facts\": [\"alice moved to Berlin\"]}\n```",
    )])
    .await;
    let (facts, usage) = chat_json::<Facts>(&client(&url), request(true)).await.unwrap();
    assert_eq!(facts.facts, ["alice moved to Berlin"]);
    assert_eq!(usage.output_tokens, 5);
    let sent = script.requests.lock().unwrap()[0].clone();
    assert_eq!(sent["response_format"]["type"], "json_schema");
    assert_eq!(sent["response_format"]["json_schema"]["name"], "facts");

    let (url, script) = serve(vec![
        Reply::Content("{\"facts\": [\"unterminated"),
        Reply::Content("{\"facts\": []}"),
    ])
    .await;
    let (facts, usage) = chat_json::<Facts>(&client(&url), request(true)).await.unwrap();
    assert!(facts.facts.is_empty());
    assert_eq!(usage.input_tokens, 24, "both calls counted");
    let repair = script.requests.lock().unwrap()[1].clone();
    let last = repair["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(last["content"].as_str().unwrap().contains("not valid JSON"), "{last}");

    let (url, _) = serve(vec![Reply::Content("I cannot do that.")]).await;
    let error = chat_json::<Facts>(&client(&url), request(true)).await.unwrap_err();
    assert!(
        matches!(&error, Error::Internal(message) if message.contains("even after a repair turn")),
        "never an empty success: {error}"
    );
}

#[tokio::test]
async fn a_server_without_json_schema_gets_json_object() {
    let (url, script) = serve(vec![
        Reply::Status(400, "{\"error\": \"response_format json_schema is not supported\"}"),
        Reply::Content("{\"facts\": [\"x\"]}"),
    ])
    .await;
    let llm = client(&url);
    let (facts, _) = chat_json::<Facts>(&llm, request(true)).await.unwrap();
    assert_eq!(facts.facts, ["x"]);
    chat_json::<Facts>(&llm, request(true)).await.unwrap();
    let requests = script.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1]["response_format"]["type"], "json_object");
    assert!(
        requests[1]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("JSON schema")
    );
    assert_eq!(requests[2]["response_format"]["type"], "json_object", "remembered");
    assert_eq!(llm.structured_mode(), roncho_llm::Structured::JsonObject);
}

/// A server that refuses JSON mode too gets the schema in the prompt alone,
/// remembered; a mode set by configuration is kept, a refusal final.
#[tokio::test]
async fn a_server_without_json_mode_gets_the_schema_in_the_prompt_and_a_fixed_mode_stays() {
    let (url, script) = serve(vec![
        Reply::Status(400, r#"{"error": "response_format json_schema is not supported"}"#),
        Reply::Status(422, r#"{"detail": "unknown response_format type json_object"}"#),
        Reply::Content("```json\n{\"facts\": [\"x\"]}\n```"),
    ])
    .await;
    let llm = client(&url);
    let (facts, _) = chat_json::<Facts>(&llm, request(true)).await.unwrap();
    assert_eq!(facts.facts, ["x"]);
    chat_json::<Facts>(&llm, request(true)).await.unwrap();
    let requests = script.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 4);
    assert!(requests[2].get("response_format").is_none(), "{}", requests[2]);
    assert!(
        requests[2]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("JSON schema")
    );
    assert!(requests[3].get("response_format").is_none(), "remembered");
    assert_eq!(llm.structured_mode(), roncho_llm::Structured::Prompt);

    // Configured: JSON mode from the first call; configured json_schema never falls back.
    let (url, script) = serve(vec![Reply::Content("{\"facts\": []}")]).await;
    let mut config = OpenAiChatConfig::new(&url, "scripted-model");
    config.structured = roncho_llm::Structured::JsonObject;
    let llm = OpenAiChat::new(config).unwrap();
    chat_json::<Facts>(&llm, request(true)).await.unwrap();
    assert_eq!(
        script.requests.lock().unwrap()[0]["response_format"]["type"],
        "json_object"
    );
    let (url, script) = serve(vec![Reply::Status(
        400,
        "{\"error\": \"response_format json_schema is not supported\"}",
    )])
    .await;
    let mut config = OpenAiChatConfig::new(&url, "scripted-model");
    config.structured = roncho_llm::Structured::JsonSchema;
    let llm = OpenAiChat::new(config).unwrap();
    let refused = chat_json::<Facts>(&llm, request(true)).await.unwrap_err();
    assert!(refused.to_string().contains("response_format"), "{refused}");
    assert_eq!(script.count(), 1, "no fallback");
}

#[tokio::test]
async fn retries_then_classifies_failures() {
    let (url, script) = serve(vec![
        Reply::Status(429, "slow down"),
        Reply::Status(503, ""),
        Reply::Content("ok"),
    ])
    .await;
    assert_eq!(client(&url).chat(&request(false)).await.unwrap().content, "ok");
    assert_eq!(script.count(), 3);

    let (url, script) = serve(vec![Reply::Status(401, "bad key")]).await;
    let error = client(&url).chat(&request(false)).await.unwrap_err();
    assert!(
        matches!(&error, Error::FailedPrecondition(m) if m.contains("API key")),
        "{error}"
    );
    assert_eq!(script.count(), 1, "a 401 is not retried");

    let (url, _) = serve(vec![Reply::Status(429, "quota")]).await;
    let error = client(&url).chat(&request(false)).await.unwrap_err();
    assert!(matches!(error, Error::ResourceExhausted(_)), "{error}");

    let (url, _) = serve(vec![Reply::Status(500, "boom")]).await;
    let error = client(&url).chat(&request(false)).await.unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error}");

    // A wait too long for a request is handed to the caller, capped.
    let (url, script) = serve(vec![Reply::WaitFor(120)]).await;
    let started = std::time::Instant::now();
    let error = client(&url).chat(&request(false)).await.unwrap_err();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "not waited out here"
    );
    assert!(
        matches!(error, Error::Throttled { retry_after, .. } if retry_after == std::time::Duration::from_secs(120)),
        "{error}"
    );
    assert_eq!(script.count(), 1);
    let (url, _) = serve(vec![Reply::WaitFor(86_400)]).await;
    let error = client(&url).chat(&request(false)).await.unwrap_err();
    assert!(
        matches!(error, Error::Throttled { retry_after, .. } if retry_after == roncho_http::MAX_RETRY_AFTER),
        "{error}"
    );
}

#[tokio::test]
async fn a_fallback_chain_moves_past_an_unavailable_provider() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let (url, _) = serve(vec![Reply::Content("from the second")]).await;
    let chain = FallbackChain::new(vec![Arc::new(client(&dead)), Arc::new(client(&url))]);
    assert_eq!(chain.chat(&request(false)).await.unwrap().content, "from the second");
    assert_eq!(
        chain.model_id(),
        "openai-compatible/scripted-model > openai-compatible/scripted-model"
    );
    let (url, _) = serve(vec![Reply::Status(401, "no")]).await;
    let (other, _) = serve(vec![Reply::Content("unused")]).await;
    let chain = FallbackChain::new(vec![Arc::new(client(&url)), Arc::new(client(&other))]);
    assert!(
        matches!(chain.chat(&request(false)).await, Err(Error::FailedPrecondition(_))),
        "a rejected key is final, not a reason to try the next"
    );
}

/// A single-slot local server (llama.cpp's `--parallel 1`): a request that
/// arrives while another is in flight is answered 503.
async fn single_slot_server() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let busy = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicUsize::new(0));
    let state = (busy, refused.clone());
    let handler = |State((busy, refused)): State<(Arc<AtomicBool>, Arc<AtomicUsize>)>| async move {
        if busy.swap(true, Ordering::SeqCst) {
            refused.fetch_add(1, Ordering::SeqCst);
            return (StatusCode::SERVICE_UNAVAILABLE, "the slot is busy").into_response();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        busy.store(false, Ordering::SeqCst);
        Json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}
        }))
        .into_response()
    };
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(handler))
        .with_state(state);
    (format!("{}/v1", roncho_http::serve_for_test(app).await), refused)
}

#[tokio::test]
async fn a_single_slot_server_gets_one_request_at_a_time_from_every_client() {
    let (url, refused) = single_slot_server().await;
    // Two clients of the same server (two roles' models), limited to one
    // request in flight together, with no retries to hide a refusal.
    let limited = |model: &str| {
        let mut config = OpenAiChatConfig::new(&url, model);
        config.retry.max_retries = 0;
        config.max_concurrent = 1;
        Arc::new(OpenAiChat::new(config).unwrap())
    };
    let (deriver, summary) = (limited("deriver"), limited("summary"));
    let calls: Vec<_> = (0..6)
        .map(|n| {
            let llm = if n % 2 == 0 { deriver.clone() } else { summary.clone() };
            tokio::spawn(async move { llm.chat(&request(false)).await })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap().content, "ok");
    }
    assert_eq!(refused.load(std::sync::atomic::Ordering::SeqCst), 0);

    // Without the limit the same load is refused.
    let mut config = OpenAiChatConfig::new(&url, "unlimited");
    config.retry.max_retries = 0;
    let unlimited = Arc::new(OpenAiChat::new(config).unwrap());
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let llm = unlimited.clone();
            tokio::spawn(async move { llm.chat(&request(false)).await })
        })
        .collect();
    let failed = futures::future::join_all(calls)
        .await
        .into_iter()
        .filter(|result| result.as_ref().unwrap().is_err())
        .count();
    assert!(failed > 0, "a busy single slot refuses what arrives beside it");
}
