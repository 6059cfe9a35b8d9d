//! Exact vector search in the embedded store: query latency of one
//! namespace of N vectors (384 dimensions, MiniLM's size), in process, no
//! gRPC. `cargo bench -p roncho-store --bench vector_scan [-- N ...]`
//! (default 10000 100000).

use std::sync::Arc;
use std::time::Instant;

use roncho_core::vector::{VectorFilter, VectorRecord, VectorStore};
use roncho_store::{SqlVectorStore, StoreOptions};

const DIMENSIONS: usize = 384;
const QUERIES: usize = 200;

fn random_unit(state: &mut u64) -> Vec<f32> {
    let mut vector: Vec<f32> = (0..DIMENSIONS)
        .map(|_| {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            (*state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    roncho_core::embed::normalize(&mut vector);
    vector
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|arg| arg.parse().ok()).collect();
    let sizes = if sizes.is_empty() { vec![10_000, 100_000] } else { sizes };
    for size in sizes {
        let dir = tempfile::tempdir()?;
        let store = Arc::new(roncho_store::connect(&StoreOptions::embedded(dir.path())).await?);
        roncho_store::migrate(&store).await?;
        let vectors = SqlVectorStore::new(store.clone());
        let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ size as u64;
        for start in (0..size).step_by(1000) {
            let records = (start..(start + 1000).min(size))
                .map(|i| VectorRecord {
                    id: format!("m{i}"),
                    vector: random_unit(&mut state),
                    session_id: Some(format!("s{}", i % 100)),
                    peer_id: Some(if i % 2 == 0 { "user" } else { "assistant" }.into()),
                    level: None,
                    lexical: None,
                    passages: Vec::new(),
                })
                .collect();
            vectors.upsert("msg/bench", records).await?;
        }
        let everything = VectorFilter::default();
        let one_session = VectorFilter {
            session_ids: Some(vec!["s7".into()]),
            ..VectorFilter::default()
        };
        for (label, filter) in [("all", &everything), ("one session", &one_session)] {
            // The first query loads the namespace into memory.
            vectors
                .query("msg/bench", &random_unit(&mut state), 20, filter, None)
                .await?;
            let mut micros = Vec::with_capacity(QUERIES);
            for _ in 0..QUERIES {
                let query = random_unit(&mut state);
                let started = Instant::now();
                let hits = vectors.query("msg/bench", &query, 20, filter, None).await?;
                micros.push(started.elapsed().as_secs_f64() * 1e3);
                assert_eq!(hits.len(), 20);
            }
            micros.sort_by(f64::total_cmp);
            println!(
                "vector_scan n={size:>8} filter={label:<12} top_k=20 p50 {:>7.2} ms  p95 {:>7.2} ms",
                percentile(&micros, 0.5),
                percentile(&micros, 0.95)
            );
        }
        store.close().await;
    }
    Ok(())
}
