//! The OpenAI-compatible embedder against a local scripted server that speaks
//! the `/v1/embeddings` wire format: batching, order, retries on 429 and 5xx,
//! wrong dimensions and malformed JSON.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use roncho_core::Error;
use roncho_core::embed::Embedder;
use roncho_embed::openai::{OpenAiConfig, OpenAiEmbedder};
use serde_json::{Value, json};

/// What the scripted server answers, one entry per request; the last repeats.
#[derive(Clone)]
enum Reply {
    Vectors { dimensions: usize, reversed: bool },
    Status(u16),
    Malformed,
}

type Script = roncho_http::Script<Reply>;

async fn embeddings(State(script): State<Script>, Json(body): Json<Value>) -> Response {
    let reply = script.answer(body.clone());
    match reply {
        Reply::Status(code) => StatusCode::from_u16(code).unwrap().into_response(),
        Reply::Malformed => (StatusCode::OK, "{\"data\": [").into_response(),
        Reply::Vectors { dimensions, reversed } => {
            let inputs = body["input"].as_array().cloned().unwrap_or_default();
            let mut data: Vec<Value> = inputs
                .iter()
                .enumerate()
                .map(|(index, input)| {
                    // The first component encodes the input's length, so order can be checked.
                    let mut embedding = vec![0.0f32; dimensions];
                    embedding[0] = input.as_str().unwrap_or_default().len() as f32;
                    embedding[1] = 1.0;
                    json!({"object": "embedding", "index": index, "embedding": embedding})
                })
                .collect();
            if reversed {
                data.reverse();
            }
            Json(json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}})).into_response()
        }
    }
}

async fn serve(replies: Vec<Reply>) -> (String, Script) {
    let script = Script::new(replies);
    let app = axum::Router::new()
        .route("/v1/embeddings", axum::routing::post(embeddings))
        .with_state(script.clone());
    (format!("{}/v1", roncho_http::serve_for_test(app).await), script)
}

fn config(base_url: &str, dimensions: usize) -> OpenAiConfig {
    OpenAiConfig {
        batch_size: 2,
        max_retries: 2,
        initial_backoff: Duration::from_millis(10),
        ..OpenAiConfig::new(base_url, "test-embed", dimensions)
    }
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn batches_in_order_and_normalises() {
    let (url, script) = serve(vec![Reply::Vectors {
        dimensions: 4,
        reversed: true,
    }])
    .await;
    let mut cfg = config(&url, 4);
    cfg.api_key = Some("secret".into());
    let embedder = OpenAiEmbedder::new(cfg).unwrap();
    let vectors = embedder.embed(&texts(&["a", "bbb", "cc"])).await.unwrap();
    assert_eq!(vectors.len(), 3);
    let lengths: Vec<f32> = vectors.iter().map(|v| v[0] / v[1]).collect();
    assert_eq!(lengths, [1.0, 3.0, 2.0], "reordered by index");
    assert!(
        vectors
            .iter()
            .all(|v| (v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5)
    );
    let requests = script.requests.lock().unwrap();
    assert_eq!(requests.len(), 2, "batches of two");
    assert_eq!(requests[0]["model"], "test-embed");
    assert_eq!(requests[0]["input"], json!(["a", "bbb"]));
}

#[tokio::test]
async fn retries_429_and_5xx_then_succeeds() {
    let (url, script) = serve(vec![
        Reply::Status(429),
        Reply::Status(503),
        Reply::Vectors {
            dimensions: 4,
            reversed: false,
        },
    ])
    .await;
    let embedder = OpenAiEmbedder::new(config(&url, 4)).unwrap();
    assert_eq!(embedder.embed(&texts(&["x"])).await.unwrap().len(), 1);
    assert_eq!(script.count(), 3);
}

#[tokio::test]
async fn gives_up_after_the_configured_attempts() {
    let (url, script) = serve(vec![Reply::Status(500)]).await;
    let embedder = OpenAiEmbedder::new(config(&url, 4)).unwrap();
    let error = embedder.embed(&texts(&["x"])).await.unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error}");
    assert_eq!(script.count(), 3);
}

#[tokio::test]
async fn wrong_dimensions_and_malformed_json_are_errors() {
    let (url, _) = serve(vec![Reply::Vectors {
        dimensions: 8,
        reversed: false,
    }])
    .await;
    let error = OpenAiEmbedder::new(config(&url, 4))
        .unwrap()
        .embed(&texts(&["x"]))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::FailedPrecondition(message) if message.contains("8 dimensions")),
        "{error}"
    );
    let (url, _) = serve(vec![Reply::Malformed]).await;
    let error = OpenAiEmbedder::new(config(&url, 4))
        .unwrap()
        .embed(&texts(&["x"]))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Unavailable(message) if message.contains("malformed")),
        "{error}"
    );
    let (url, script) = serve(vec![Reply::Status(400)]).await;
    let error = OpenAiEmbedder::new(config(&url, 4))
        .unwrap()
        .embed(&texts(&["x"]))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)));
    assert_eq!(script.count(), 1, "a 400 is not retried");
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let error = OpenAiEmbedder::new(config(&url, 4))
        .unwrap()
        .embed(&texts(&["x"]))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Unavailable(_)), "{error}");
}
