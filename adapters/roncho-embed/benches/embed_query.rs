//! Latency of embedding one search query with the local model (what a
//! hybrid SearchMessages adds to the search itself), and throughput of
//! batches (what the reconciler sees). Needs the model directory:
//! `RONCHO_TEST_EMBED_MODEL_DIR=~/.cache/roncho/models/bge-small-en-v1.5
//!  cargo bench -p roncho-embed --bench embed_query`

use std::time::Instant;

use roncho_core::embed::Embedder;
use roncho_embed::bert::BertEmbedder;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Some(dir) = std::env::var_os("RONCHO_TEST_EMBED_MODEL_DIR") else {
        eprintln!("set RONCHO_TEST_EMBED_MODEL_DIR to a model directory (scripts/fetch-bge-small.sh)");
        return Ok(());
    };
    let embedder = BertEmbedder::load(std::path::Path::new(&dir))?;
    let queries: Vec<String> = (0..100)
        .map(|i| format!("When did Caroline go to the support group number {i} with her friends?"))
        .collect();
    embedder.embed(&queries[..1]).await?;
    let mut millis = Vec::new();
    for query in &queries {
        let started = Instant::now();
        embedder.embed(std::slice::from_ref(query)).await?;
        millis.push(started.elapsed().as_secs_f64() * 1e3);
    }
    millis.sort_by(f64::total_cmp);
    println!(
        "embed_query  one query      p50 {:>7.2} ms  p95 {:>7.2} ms",
        percentile(&millis, 0.5),
        percentile(&millis, 0.95)
    );
    let batch: Vec<String> = (0..64)
        .map(|i| format!("Melanie: I painted a lake at sunrise last weekend, picture {i}."))
        .collect();
    let started = Instant::now();
    for _ in 0..5 {
        embedder.embed(&batch).await?;
    }
    let rate = 5.0 * batch.len() as f64 / started.elapsed().as_secs_f64();
    println!("embed_query  batches of 64  {rate:>7.1} texts/s");
    Ok(())
}
