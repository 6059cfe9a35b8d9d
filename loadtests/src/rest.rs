//! Honcho's REST routes under load, beside the gRPC scenarios: the same
//! batches of messages as `ingest` and the same queries as `search`, so the
//! two edges compare in one run (`--target` is then the REST base URL).

use std::time::Instant;

use anyhow::Context;
use roncho_loadtests::corpus::Corpus;
use serde_json::json;

use crate::{Phase, elapsed_micros, histogram, message_text};

/// What the `rest` scenario does.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Batches of messages to write in total (0: write none).
    #[arg(long, default_value_t = 200)]
    batches: usize,
    /// Messages per batch (1..=100).
    #[arg(long, default_value_t = 100)]
    batch_size: usize,
    /// Concurrent clients; each writes to its own session and searches on its own.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Searches in total, against `--search-workspace` (0: none).
    #[arg(long, default_value_t = 0)]
    queries: usize,
    /// The workspace `search-ingest` wrote (over gRPC or REST).
    #[arg(long, default_value = "search-bench")]
    search_workspace: String,
    /// The corpus `search-ingest` wrote, for matching queries.
    #[arg(long, value_enum, default_value_t = Corpus::Zipf)]
    corpus: Corpus,
}

/// POSTs `body` to `path` of `base`, failing on any status but 200 and 201.
async fn post(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
    path: &str,
    body: serde_json::Value,
) -> anyhow::Result<()> {
    let mut request = http.post(format!("{base}{path}")).json(&body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.with_context(|| format!("POST {path}"))?;
    let status = response.status();
    let text = response.text().await?;
    anyhow::ensure!(status.is_success(), "POST {path}: {status}: {text}");
    Ok(())
}

/// Runs the scenario against the REST edge at `base`.
pub async fn run(base: &str, key: Option<&str>, args: Args) -> anyhow::Result<Vec<Phase>> {
    anyhow::ensure!((1..=100).contains(&args.batch_size), "--batch-size must be 1..=100");
    let concurrency = args.concurrency.max(1);
    let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let workspace = format!("loadtest-rest-{}", std::process::id());
    let mut phases = Vec::new();
    let clients = |total: usize, index: usize| total / concurrency + usize::from(index < total % concurrency);

    let started = Instant::now();
    let mut writers = Vec::new();
    for client_index in 0..concurrency {
        let (http, base, key, workspace) = (http.clone(), base.to_owned(), key.map(str::to_owned), workspace.clone());
        let (mine, batch_size) = (clients(args.batches, client_index), args.batch_size);
        writers.push(tokio::spawn(async move {
            let mut latencies = histogram();
            let path = format!("/v3/workspaces/{workspace}/sessions/session-{client_index}/messages");
            for batch_index in 0..mine {
                let messages: Vec<_> = (0..batch_size)
                    .map(|i| {
                        let peer = if i % 2 == 0 { "user" } else { "assistant" };
                        json!({"peer_id": peer, "content": message_text(batch_index, i)})
                    })
                    .collect();
                let start = Instant::now();
                post(&http, &base, key.as_deref(), &path, json!({ "messages": messages })).await?;
                latencies.record(elapsed_micros(start))?;
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut create = histogram();
    for writer in writers {
        create.add(writer.await??)?;
    }
    phases.push(Phase {
        name: "REST create messages",
        latencies: create,
        items_per_request: args.batch_size as u64,
        wall: started.elapsed(),
    });

    if args.queries > 0 {
        let path = format!("/v3/workspaces/{}/search", args.search_workspace);
        // As in `search`: the first query loads the indexes; it is kept out.
        post(
            &http,
            base,
            key,
            &path,
            json!({"query": args.corpus.query(1_000_003), "limit": 10}),
        )
        .await?;
        let started = Instant::now();
        let mut searchers = Vec::new();
        for client_index in 0..concurrency {
            let (http, base, key, path) = (http.clone(), base.to_owned(), key.map(str::to_owned), path.clone());
            let (mine, corpus) = (clients(args.queries, client_index), args.corpus);
            searchers.push(tokio::spawn(async move {
                let mut latencies = histogram();
                for query_index in 0..mine {
                    let query = corpus.query(client_index * 7919 + query_index * 31);
                    let start = Instant::now();
                    post(
                        &http,
                        &base,
                        key.as_deref(),
                        &path,
                        json!({"query": query, "limit": 10}),
                    )
                    .await?;
                    latencies.record(elapsed_micros(start))?;
                }
                anyhow::Ok(latencies)
            }));
        }
        let mut search = histogram();
        for searcher in searchers {
            search.add(searcher.await??)?;
        }
        phases.push(Phase {
            name: "REST search",
            latencies: search,
            items_per_request: 1,
            wall: started.elapsed(),
        });
    }
    Ok(phases)
}
