//! Anthropic Messages, Gemini and the OpenAI-compatible client against local
//! scripted servers speaking each provider's wire format: structured output,
//! tool calls and tool-result continuation, SSE streaming (bodies cut
//! mid-line), errors mid-stream, streams cut short, retries and error
//! classes. No key and no internet.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use roncho_core::Error;
use roncho_http::RetryPolicy;
use roncho_llm::anthropic::{AnthropicChat, AnthropicConfig};
use roncho_llm::gemini::{GeminiChat, GeminiConfig};
use roncho_llm::openai::{OpenAiChat, OpenAiChatConfig};
use roncho_llm::{
    ChatMessage, ChatRequest, JsonSchema, Llm, Role, StreamEvent, Tool, ToolCall, Usage, chat_json, collect, run_tools,
};
use serde_json::{Value, json};

/// A scripted reply: a JSON body, an SSE body (sent in small pieces), or a status.
#[derive(Clone)]
enum Reply {
    Json(Value),
    Sse(String),
    Status(u16, &'static str),
    /// Answers after this long (past the client's time-out).
    Slow(Duration),
}

type Script = roncho_http::Script<Reply>;

async fn answer(script: Script, headers: HeaderMap, path: String, body: Value) -> Response {
    let seen: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(name, value)| (name.to_string(), json!(value.to_str().unwrap_or_default())))
        .collect();
    match script.answer(json!({"path": path, "headers": seen, "body": body})) {
        Reply::Json(value) => axum::Json(value).into_response(),
        Reply::Status(code, text) => (StatusCode::from_u16(code).unwrap(), text).into_response(),
        Reply::Slow(delay) => {
            tokio::time::sleep(delay).await;
            axum::Json(json!({})).into_response()
        }
        Reply::Sse(text) => {
            // Pieces of 7 bytes: events and lines split across reads.
            let pieces: Vec<Result<Vec<u8>, Infallible>> =
                text.into_bytes().chunks(7).map(|c| Ok(c.to_vec())).collect();
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(futures::stream::iter(pieces)))
                .unwrap()
        }
    }
}

async fn handler(
    State(script): State<Script>,
    Path(path): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    answer(script, headers, path, body).await
}

async fn serve(replies: Vec<Reply>) -> (String, Script) {
    let script = Script::new(replies);
    let app = axum::Router::new()
        .route("/{*path}", axum::routing::post(handler))
        .with_state(script.clone());
    (roncho_http::serve_for_test(app).await, script)
}

fn retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(10),
    }
}

fn anthropic(url: &str) -> AnthropicChat {
    let mut config = AnthropicConfig::new(url, "claude-test");
    config.api_key = Some("anthropic-key".into());
    config.retry = retry();
    AnthropicChat::new(config).unwrap()
}

fn gemini(url: &str) -> GeminiChat {
    let mut config = GeminiConfig::new(url, "gemini-test");
    config.api_key = Some("gemini-key".into());
    config.retry = retry();
    GeminiChat::new(config).unwrap()
}

fn openai(url: &str) -> OpenAiChat {
    let mut config = OpenAiChatConfig::new(&format!("{url}/v1"), "gpt-test");
    config.retry = retry();
    config.timeout = Duration::from_millis(500);
    OpenAiChat::new(config).unwrap()
}

fn facts_request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::new(Role::System, "You extract facts."),
            ChatMessage::new(Role::User, "alice: I moved to Berlin."),
        ],
        max_tokens: 256,
        json_schema: Some(JsonSchema {
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

fn weather_request() -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::new(Role::User, "What is the weather in Berlin?")],
        max_tokens: 256,
        tools: vec![Tool {
            name: "weather".into(),
            description: "Current weather in a city".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        }],
        ..ChatRequest::default()
    }
}

/// Runs the weather tool for `run_tools`.
async fn weather(call: ToolCall) -> roncho_core::Result<String> {
    assert_eq!(
        (call.name.as_str(), &call.arguments),
        ("weather", &json!({"city": "Berlin"}))
    );
    Ok("12°C and rain".into())
}

fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(event, data)| {
            if event.is_empty() {
                format!("data: {data}\n\n")
            } else {
                format!("event: {event}\ndata: {data}\n\n")
            }
        })
        .collect()
}

async fn stream_events(llm: &dyn Llm, request: &ChatRequest) -> Vec<roncho_core::Result<StreamEvent>> {
    llm.chat_stream(request).await.unwrap().collect().await
}

#[tokio::test]
async fn anthropic_structured_output_is_a_forced_tool() {
    let (url, script) = serve(vec![Reply::Json(json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "emit_facts", "input": {"facts": ["alice moved to Berlin"]}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 30, "output_tokens": 9}
    }))])
    .await;
    let llm = anthropic(&url);
    let (facts, usage): (Facts, Usage) = chat_json(&llm, facts_request()).await.unwrap();
    assert_eq!(facts.facts, ["alice moved to Berlin"]);
    assert_eq!((usage.input_tokens, usage.output_tokens), (30, 9));
    let sent = script.requests.lock().unwrap()[0].clone();
    assert_eq!(sent["path"], "v1/messages");
    assert_eq!(sent["headers"]["x-api-key"], "anthropic-key");
    assert_eq!(sent["headers"]["anthropic-version"], "2023-06-01");
    let body = &sent["body"];
    assert_eq!(body["system"], "You extract facts.", "system messages go top level");
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "emit_facts"}));
    assert_eq!(body["tools"][0]["input_schema"]["required"], json!(["facts"]));
}

#[tokio::test]
async fn anthropic_tool_calls_continue_with_their_results() {
    let (url, script) = serve(vec![
        Reply::Json(json!({
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {"city": "Berlin"}}
            ],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}
        })),
        Reply::Json(json!({
            "content": [{"type": "text", "text": "Rainy, 12°C."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 20, "output_tokens": 4}
        })),
    ])
    .await;
    let (reply, transcript) = run_tools(&anthropic(&url), weather_request(), 4, weather)
        .await
        .unwrap();
    assert_eq!(reply.content, "Rainy, 12°C.");
    assert_eq!(reply.usage.input_tokens, 30, "usage summed over the turns");
    assert_eq!(transcript.len(), 3);
    let second = script.requests.lock().unwrap()[1]["body"].clone();
    assert_eq!(second["tools"][0]["input_schema"]["required"], json!(["city"]));
    assert_eq!(
        second["messages"][1]["content"],
        json!([
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {"city": "Berlin"}}
        ])
    );
    assert_eq!(
        second["messages"][2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "12°C and rain"}]})
    );
}

#[tokio::test]
async fn anthropic_streams_text_and_tool_calls() {
    let body = sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 25, "output_tokens": 1}}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "now."}}),
        ),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_3", "name": "weather", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"ci"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "ty\": \"Berlin\"}"}}),
        ),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 1})),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 17}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    let (url, script) = serve(vec![Reply::Sse(body)]).await;
    let llm = anthropic(&url);
    let events: Vec<StreamEvent> = stream_events(&llm, &weather_request())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events,
        [
            StreamEvent::Text("Checking ".into()),
            StreamEvent::Text("now.".into()),
            StreamEvent::ToolCall(ToolCall {
                id: "toolu_3".into(),
                name: "weather".into(),
                arguments: json!({"city": "Berlin"})
            }),
            StreamEvent::Done {
                usage: Usage {
                    input_tokens: 25,
                    output_tokens: 17
                },
                finish_reason: Some("tool_use".into())
            },
        ]
    );
    assert_eq!(script.requests.lock().unwrap()[0]["body"]["stream"], true);
}

#[tokio::test]
async fn anthropic_errors_mid_stream_and_on_status_are_classified() {
    let overloaded = sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}),
        ),
        (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ]);
    let (url, _) = serve(vec![Reply::Sse(overloaded)]).await;
    let events = stream_events(&anthropic(&url), &weather_request()).await;
    assert_eq!(events.len(), 2, "text, then the error ends the stream");
    assert!(
        matches!(&events[1], Err(Error::Unavailable(message)) if message.contains("Overloaded")),
        "{events:?}"
    );

    let (url, script) = serve(vec![
        Reply::Status(429, "slow down"),
        Reply::Json(json!({"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": {}})),
    ])
    .await;
    assert_eq!(anthropic(&url).chat(&weather_request()).await.unwrap().content, "ok");
    assert_eq!(script.count(), 2, "a 429 is retried");

    let (url, _) = serve(vec![Reply::Status(401, "invalid x-api-key")]).await;
    let error = anthropic(&url).chat(&weather_request()).await.unwrap_err();
    assert!(
        matches!(&error, Error::FailedPrecondition(message) if message.contains("invalid x-api-key")),
        "{error:?}"
    );
}

#[tokio::test]
async fn gemini_structured_output_falls_back_to_json_mode() {
    let (url, script) = serve(vec![
        Reply::Status(400, "Invalid JSON payload received. Unknown name \"responseJsonSchema\""),
        Reply::Json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "{\"facts\": [\"alice moved to Berlin\"]}"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 8}
        })),
    ])
    .await;
    let llm = gemini(&url);
    let (facts, usage): (Facts, Usage) = chat_json(&llm, facts_request()).await.unwrap();
    assert_eq!(facts.facts, ["alice moved to Berlin"]);
    assert_eq!((usage.input_tokens, usage.output_tokens), (40, 8));
    let requests = script.requests.lock().unwrap().clone();
    assert_eq!(requests[0]["path"], "v1beta/models/gemini-test:generateContent");
    assert_eq!(requests[0]["headers"]["x-goog-api-key"], "gemini-key");
    let first = &requests[0]["body"]["generationConfig"];
    assert_eq!(first["responseMimeType"], "application/json");
    assert_eq!(first["responseJsonSchema"]["required"], json!(["facts"]));
    let second = &requests[1]["body"];
    assert!(second["generationConfig"].get("responseJsonSchema").is_none());
    let system = second["systemInstruction"]["parts"][0]["text"].as_str().unwrap();
    assert!(
        system.starts_with("You extract facts.") && system.contains("\"required\""),
        "{system}"
    );
    assert_eq!(second["contents"][0]["role"], "user");
}

#[tokio::test]
async fn gemini_function_calls_continue_with_function_responses() {
    let (url, script) = serve(vec![
        Reply::Json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Berlin"}}}]}, "finishReason": "STOP"}]
        })),
        Reply::Json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "Rainy."}]}, "finishReason": "STOP"}]
        })),
    ])
    .await;
    let (reply, _) = run_tools(&gemini(&url), weather_request(), 4, weather).await.unwrap();
    assert_eq!(reply.content, "Rainy.");
    let second = script.requests.lock().unwrap()[1]["body"].clone();
    assert_eq!(second["tools"][0]["functionDeclarations"][0]["name"], "weather");
    assert_eq!(
        second["contents"][1],
        json!({"role": "model", "parts": [{"functionCall": {"name": "weather", "args": {"city": "Berlin"}}}]})
    );
    assert_eq!(
        second["contents"][2],
        json!({"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"content": "12°C and rain"}}}]})
    );
}

#[tokio::test]
async fn gemini_streams_and_a_stream_cut_short_is_an_error() {
    let chunk = |text: &str, finish: Option<&str>| {
        let mut candidate = json!({"content": {"role": "model", "parts": [{"text": text}]}});
        if let Some(reason) = finish {
            candidate["finishReason"] = json!(reason);
        }
        json!({"candidates": [candidate], "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3}})
    };
    let whole = sse(&[("", chunk("Hello, ", None)), ("", chunk("Berlin.", Some("STOP")))]);
    let cut = sse(&[("", chunk("Hello, ", None))]);
    let (url, script) = serve(vec![Reply::Sse(whole), Reply::Sse(cut)]).await;
    let llm = gemini(&url);
    let reply = collect(llm.chat_stream(&weather_request()).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        (
            reply.content.as_str(),
            reply.finish_reason.as_deref(),
            reply.usage.output_tokens
        ),
        ("Hello, Berlin.", Some("STOP"), 3)
    );
    assert_eq!(
        script.requests.lock().unwrap()[0]["path"],
        "v1beta/models/gemini-test:streamGenerateContent"
    );
    let error = collect(llm.chat_stream(&weather_request()).await.unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Unavailable(message) if message.contains("ended before")),
        "{error:?}"
    );
}

#[tokio::test]
async fn gemini_blocked_prompts_are_refused_with_the_reason() {
    let (url, _) = serve(vec![Reply::Json(json!({"promptFeedback": {"blockReason": "SAFETY"}}))]).await;
    let error = gemini(&url).chat(&weather_request()).await.unwrap_err();
    assert!(
        matches!(&error, Error::FailedPrecondition(message) if message.contains("SAFETY")),
        "{error:?}"
    );
}

#[tokio::test]
async fn openai_streams_tool_call_fragments_and_usage() {
    let chunk =
        |delta: Value, finish: Value| json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let body = sse(&[
        (
            "",
            chunk(json!({"role": "assistant", "content": "On it. "}), Value::Null),
        ),
        (
            "",
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_7", "type": "function", "function": {"name": "weather", "arguments": ""}}]}),
                Value::Null,
            ),
        ),
        (
            "",
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}),
                Value::Null,
            ),
        ),
        (
            "",
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": " \"Berlin\"}"}}]}),
                json!("tool_calls"),
            ),
        ),
        (
            "",
            json!({"choices": [], "usage": {"prompt_tokens": 14, "completion_tokens": 6}}),
        ),
    ]) + "data: [DONE]\n\n";
    let (url, script) = serve(vec![Reply::Sse(body), Reply::Sse("data: {not json\n\n".into())]).await;
    let llm = openai(&url);
    let stream = llm.chat_stream(&weather_request()).await.unwrap();
    let reply = collect(stream).await.unwrap();
    assert_eq!(reply.content, "On it. ");
    assert_eq!(
        reply.tool_calls,
        [ToolCall {
            id: "call_7".into(),
            name: "weather".into(),
            arguments: json!({"city": "Berlin"})
        }]
    );
    assert_eq!(
        (reply.usage.input_tokens, reply.finish_reason.as_deref()),
        (14, Some("tool_calls"))
    );
    let sent = script.requests.lock().unwrap()[0]["body"].clone();
    assert_eq!(
        (sent["stream"].clone(), sent["stream_options"]["include_usage"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(sent["tools"][0]["function"]["name"], "weather");
    let stream = llm.chat_stream(&weather_request()).await.unwrap();
    let error = collect(stream).await.unwrap_err();
    assert!(
        matches!(&error, Error::Unavailable(message) if message.contains("malformed stream chunk")),
        "{error:?}"
    );
}

#[tokio::test]
async fn openai_tool_results_and_time_outs() {
    let (url, script) = serve(vec![
        Reply::Json(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Berlin\"}"}}
        ]}, "finish_reason": "tool_calls"}]})),
        Reply::Json(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Rainy."}, "finish_reason": "stop"}]})),
    ])
    .await;
    let (reply, _) = run_tools(&openai(&url), weather_request(), 4, weather).await.unwrap();
    assert_eq!(reply.content, "Rainy.");
    let second = script.requests.lock().unwrap()[1]["body"].clone();
    assert_eq!(
        second["messages"][1]["tool_calls"][0]["function"]["arguments"],
        "{\"city\":\"Berlin\"}"
    );
    assert_eq!(
        second["messages"][2],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "12°C and rain"})
    );

    let (url, script) = serve(vec![Reply::Slow(Duration::from_secs(2))]).await;
    let error = openai(&url).chat(&weather_request()).await.unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error:?}");
    assert_eq!(script.count(), 3, "a time-out is retried, then reported");
}
