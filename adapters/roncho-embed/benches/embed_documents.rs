//! Throughput of the local model on stored texts (what the reconciler
//! sees), by text length, and on a batch of mixed lengths as messages
//! arrive: passes of 32 in arrival order (each padded to its longest text)
//! against one call that groups texts of like length. Needs the model
//! directory:
//! `RONCHO_TEST_EMBED_MODEL_DIR=~/.cache/roncho/models/bge-small-en-v1.5
//!  cargo bench -p roncho-embed --bench embed_documents`

use std::time::Instant;

use roncho_embed::bert::{BertEmbedder, QueryPrecision};

/// A text of `words` words, different for each `seed`.
fn text(words: usize, seed: usize) -> String {
    const VOCABULARY: [&str; 16] = [
        "plan",
        "the",
        "migration",
        "database",
        "we",
        "should",
        "deploy",
        "tests",
        "before",
        "friday",
        "because",
        "latency",
        "matters",
        "user",
        "prefers",
        "rust",
    ];
    let body: Vec<&str> = (0..words)
        .map(|index| VOCABULARY[(index * 7 + seed * 3 + index / 5) % VOCABULARY.len()])
        .collect();
    format!("assistant: {} {seed}", body.join(" "))
}

fn main() -> anyhow::Result<()> {
    let Some(dir) = std::env::var_os("RONCHO_TEST_EMBED_MODEL_DIR") else {
        eprintln!("set RONCHO_TEST_EMBED_MODEL_DIR to a model directory (scripts/fetch-bge-small.sh)");
        return Ok(());
    };
    let dir = std::path::Path::new(&dir);
    let float = BertEmbedder::load_with_precisions(dir, QueryPrecision::Int8, QueryPrecision::Float)?;
    let int8 = BertEmbedder::load_with_precisions(dir, QueryPrecision::Int8, QueryPrecision::Int8)?;
    for embedder in [&float, &int8] {
        embedder.embed_blocking(&[text(20, 0)])?;
    }
    // The encoder alone, texts of one length (words; the model reads at
    // most 256 tokens, about 190 of these words), by the float model in
    // passes of 32 and by the 8-bit encoder a text at a time on each core,
    // in turn.
    for words in [8, 44, 120, 190] {
        let texts: Vec<String> = (0..64).map(|seed| text(words, seed)).collect();
        for (name, embedder) in [("float", &float), ("int8", &int8)] {
            let started = Instant::now();
            embedder.embed_blocking(&texts)?;
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "embed_documents  {name:<5} {words:>3} words  {:>7.1} texts/s  {:>8.0} words/s  ({:?})",
                texts.len() as f64 / seconds,
                (texts.len() * words) as f64 / seconds,
                embedder.document_precision(),
            );
        }
    }
    let embedder = &float;
    // Messages as they arrive: mostly chat-sized, now and then a long one
    // (an assistant's code or plan), the mix of the long-conversation sets.
    let lengths = [12, 30, 44, 190, 20, 8, 35, 120, 44, 16, 60, 190, 25, 44, 10, 90];
    let arrivals: Vec<String> = (0..256).map(|seed| text(lengths[seed % lengths.len()], seed)).collect();
    for round in 1..=3 {
        let started = Instant::now();
        for pass in arrivals.chunks(32) {
            embedder.embed_blocking(pass)?;
        }
        let in_order = arrivals.len() as f64 / started.elapsed().as_secs_f64();
        let started = Instant::now();
        embedder.embed_blocking(&arrivals)?;
        let by_length = arrivals.len() as f64 / started.elapsed().as_secs_f64();
        println!(
            "embed_documents  mixed, round {round}  arrival order {in_order:>7.1} texts/s  by length {by_length:>7.1} texts/s"
        );
    }
    Ok(())
}
