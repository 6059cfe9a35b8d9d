//! Latency of embedding one search query with the local model (what a
//! hybrid SearchMessages adds to the search itself), by the float model and
//! by the 8-bit query encoder, interleaved, with how far their vectors
//! differ; and throughput of batches (what the reconciler sees). Needs the model directory:
//! `RONCHO_TEST_EMBED_MODEL_DIR=~/.cache/roncho/models/bge-small-en-v1.5
//!  cargo bench -p roncho-embed --bench embed_query`

use std::time::Instant;

use roncho_core::embed::Embedder;
use roncho_embed::bert::{BertEmbedder, QueryPrecision};

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Some(dir) = std::env::var_os("RONCHO_TEST_EMBED_MODEL_DIR") else {
        eprintln!("set RONCHO_TEST_EMBED_MODEL_DIR to a model directory (scripts/fetch-bge-small.sh)");
        return Ok(());
    };
    let dir = std::path::Path::new(&dir);
    let float = BertEmbedder::load_with(dir, QueryPrecision::Float)?;
    let embedder = BertEmbedder::load_with(dir, QueryPrecision::Int8)?;
    let queries: Vec<String> = (0..200)
        .map(|i| format!("When did Caroline go to the support group number {i} with her friends?"))
        .collect();
    float.embed_query(&queries[0]).await?;
    embedder.embed_query(&queries[0]).await?;
    let (mut float_ms, mut int8_ms, mut lowest) = (Vec::new(), Vec::new(), 1f32);
    for query in &queries {
        let started = Instant::now();
        let exact = float.embed_query(query).await?;
        float_ms.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        let cheap = embedder.embed_query(query).await?;
        int8_ms.push(started.elapsed().as_secs_f64() * 1e3);
        lowest = lowest.min(roncho_core::embed::cosine(&exact, &cheap));
    }
    for (name, millis) in [("float", &mut float_ms), ("int8", &mut int8_ms)] {
        millis.sort_by(f64::total_cmp);
        println!(
            "embed_query  one query {name:<5}  p50 {:>7.2} ms  p95 {:>7.2} ms",
            percentile(millis, 0.5),
            percentile(millis, 0.95)
        );
    }
    println!(
        "embed_query  queries by {:?}: lowest cosine to the float vector {lowest:.5}",
        embedder.query_precision()
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
