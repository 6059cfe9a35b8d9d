//! The `Embedder` contract suite against every embedder: the test hashing
//! embedder, the cache in front of it, the OpenAI-compatible client against a
//! local server speaking `/v1/embeddings`, and the local BERT model when
//! `RONCHO_TEST_EMBED_MODEL_DIR` is set (required under
//! `RONCHO_REQUIRE_INTEGRATION=1`).

use std::sync::Arc;

use axum::Json;
use roncho_core::embed::contract::Check;
use roncho_embed::cache::CachedEmbedder;
use roncho_embed::hashing::TestHashingEmbedder;
use roncho_embed::openai::{OpenAiConfig, OpenAiEmbedder};
use serde_json::{Value, json};

async fn on_hashing(check: Check) {
    check(&TestHashingEmbedder::new(128)).await;
}

async fn on_cache(check: Check) {
    check(&CachedEmbedder::new(Arc::new(TestHashingEmbedder::new(64)), 100)).await;
}

/// A server answering `/v1/embeddings` with an unnormalised vector derived from
/// each input (deterministic), in reversed order with `index` set, as servers may.
async fn embeddings_server(dimensions: usize) -> String {
    let handler = move |Json(body): Json<Value>| async move {
        let model = TestHashingEmbedder::new(dimensions);
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        let mut data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(index, input)| {
                let vector: Vec<f32> = model
                    .embed_one(input.as_str().unwrap_or_default())
                    .iter()
                    .map(|value| value * 3.0)
                    .collect();
                json!({"object": "embedding", "index": index, "embedding": vector})
            })
            .collect();
        data.reverse();
        Json(json!({"object": "list", "data": data, "model": body["model"]}))
    };
    let app = axum::Router::new().route("/v1/embeddings", axum::routing::post(handler));
    format!("{}/v1", roncho_http::serve_for_test(app).await)
}

async fn on_openai(check: Check) {
    let base_url = embeddings_server(48).await;
    let config = OpenAiConfig {
        batch_size: 2,
        ..OpenAiConfig::new(&base_url, "contract-embed", 48)
    };
    check(&OpenAiEmbedder::new(config).unwrap()).await;
}

#[cfg(feature = "candle")]
async fn on_bert(check: Check) {
    let dir = match std::env::var("RONCHO_TEST_EMBED_MODEL_DIR") {
        Ok(dir) if !dir.is_empty() => std::path::PathBuf::from(dir),
        _ => {
            assert!(
                std::env::var("RONCHO_REQUIRE_INTEGRATION").as_deref() != Ok("1"),
                "RONCHO_TEST_EMBED_MODEL_DIR is not set and RONCHO_REQUIRE_INTEGRATION=1"
            );
            eprintln!("skipping: RONCHO_TEST_EMBED_MODEL_DIR is not set");
            return;
        }
    };
    let embedder = tokio::task::spawn_blocking(move || roncho_embed::bert::BertEmbedder::load(&dir))
        .await
        .unwrap()
        .unwrap();
    check(&embedder).await;
}

roncho_core::embedder_contract!(hashing, super::on_hashing);
roncho_core::embedder_contract!(cache, super::on_cache);
roncho_core::embedder_contract!(openai_compatible, super::on_openai);
#[cfg(feature = "candle")]
roncho_core::embedder_contract!(bert, super::on_bert);
