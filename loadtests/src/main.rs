//! `roncho-loadtest`: a gRPC load generator for roncho.
//!
//! Scenarios: `ingest`, `search-ingest` + `search` (search and session
//! context), `dialectic` (Chat about a peer), `visibility` (CreateMessages →
//! derived observation), `turn` (context → chat → create messages, the agent
//! loop), and `sustained` (a deployment under mixed load, each role at its
//! own address: ingest rate, read latency and derivation lag), and
//! `chaos-write` (writers retrying with idempotency keys through failures,
//! for loadtests/run-chaos.sh). Scenario
//! `ingest` drives `CreateMessages` in batches and then
//! `ListMessages` pages against a running server, from `--concurrency`
//! concurrent clients, and reports throughput and latency percentiles
//! (HDR histograms) as text or JSON. Requests are bounded in count; the run
//! stops by itself. Point it only at servers on this machine.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use roncho_loadtests::corpus::Corpus;
use roncho_loadtests::target::Target;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use serde_json::json;

mod chaos;
mod rest;
mod sustained;

#[derive(Debug, Parser)]
#[command(about = "gRPC load generator for roncho")]
struct Cli {
    /// Server address (https://... with --ca-file).
    #[arg(long, default_value = "http://127.0.0.1:50051")]
    target: String,
    /// CA of the server's TLS certificate (PEM): connect over TLS.
    #[arg(long)]
    ca_file: Option<std::path::PathBuf>,
    /// API key sent with every call.
    #[arg(long)]
    key: Option<String>,
    /// Prints JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Label of this run in the report (e.g. embedded, postgres).
    #[arg(long, default_value = "")]
    label: String,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// Writes a corpus of generated messages into one workspace (for `search`).
    SearchIngest {
        /// Messages in total.
        #[arg(long, default_value_t = 10_000)]
        messages: usize,
        /// Messages per session; the first session is the context benchmark's.
        #[arg(long, default_value_t = 10_000)]
        session_size: usize,
        #[arg(long, default_value = "search-bench")]
        workspace: String,
        /// The generated text (see loadtests/src/corpus.rs).
        #[arg(long, value_enum, default_value_t = Corpus::Zipf)]
        corpus: Corpus,
        /// Makes the writing peers unobserved (`observe_me: false`) first, so
        /// their messages queue no derivation: for runs without derivers.
        #[arg(long)]
        unobserved: bool,
        /// Messages per second at most (0: as fast as the server takes them).
        #[arg(long, default_value_t = 0)]
        rate: u64,
    },
    /// SearchMessages and GetSessionContext against a corpus from `search-ingest`.
    Search {
        #[arg(long, default_value_t = 500)]
        queries: usize,
        #[arg(long, default_value_t = 2)]
        concurrency: usize,
        #[arg(long, default_value = "search-bench")]
        workspace: String,
        /// Token budget of GetSessionContext.
        #[arg(long, default_value_t = 4_000)]
        context_tokens: i32,
        /// The corpus `search-ingest` wrote, for matching queries.
        #[arg(long, value_enum, default_value_t = Corpus::Zipf)]
        corpus: Corpus,
        /// Makes each query's text new (its number appended), so that no
        /// search is answered from the server's cache of query embeddings:
        /// each one pays for embedding a new query, as a first question does.
        #[arg(long)]
        new_queries: bool,
    },
    /// Time from CreateMessages to the derived observation being returned by
    /// QueryConclusions (needs a running deriver), one message at a time.
    Visibility {
        #[arg(long, default_value_t = 10)]
        samples: usize,
        #[arg(long, default_value = "visibility")]
        workspace: String,
        /// Gives up on a sample after this many seconds.
        #[arg(long, default_value_t = 120)]
        timeout_secs: u64,
    },
    /// Agent turns, as an agent framework makes them: GetSessionContext,
    /// then Chat about the user, then CreateMessages with the user's and
    /// the assistant's messages; each concurrent client is one conversation.
    Turn {
        /// Turns in total.
        #[arg(long, default_value_t = 200)]
        turns: usize,
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// Reasoning level of the Chat calls.
        #[arg(long, default_value = "minimal")]
        level: String,
        /// Token budget of GetSessionContext.
        #[arg(long, default_value_t = 2_000)]
        context_tokens: i32,
    },
    /// Chat about a peer of a corpus from `search-ingest` (peer `user`).
    Dialectic {
        #[arg(long, default_value_t = 200)]
        queries: usize,
        #[arg(long, default_value_t = 2)]
        concurrency: usize,
        #[arg(long, default_value = "search-bench")]
        workspace: String,
        /// Reasoning level of the Chat calls.
        #[arg(long, default_value = "minimal")]
        level: String,
    },
    /// Writers, readers and derivation probes at once, for `--seconds`,
    /// against separate role processes.
    Sustained(sustained::Args),
    /// Writers that retry every failed batch with its idempotency key until
    /// it is acknowledged, while loadtests/run-chaos.sh breaks the deployment.
    ChaosWrite(chaos::Args),
    /// Honcho's REST routes (`--target` the REST base URL): messages
    /// written in batches as `ingest` writes them, then the searches of
    /// `search`.
    Rest(rest::Args),
    /// CreateMessages in batches, then ListMessages pages.
    Ingest {
        /// Batches to send in total.
        #[arg(long, default_value_t = 200)]
        batches: usize,
        /// Messages per batch (1..=100).
        #[arg(long, default_value_t = 100)]
        batch_size: usize,
        /// Concurrent clients; each writes to its own session.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// ListMessages requests in total.
        #[arg(long, default_value_t = 1000)]
        lists: usize,
        /// Page size of ListMessages.
        #[arg(long, default_value_t = 100)]
        page_size: i32,
    },
}

/// Latencies of one RPC and the wall time of the whole phase.
pub(crate) struct Phase {
    name: &'static str,
    latencies: Histogram<u64>,
    items_per_request: u64,
    wall: Duration,
}

impl Phase {
    fn report(&self) -> serde_json::Value {
        let requests = self.latencies.len();
        let seconds = self.wall.as_secs_f64();
        let micros = |quantile: f64| self.latencies.value_at_quantile(quantile);
        json!({
            "rpc": self.name,
            "p95_ms": micros(0.95) as f64 / 1000.0,
            "requests": requests,
            "requests_per_s": requests as f64 / seconds,
            "items_per_s": (requests * self.items_per_request) as f64 / seconds,
            "p50_ms": micros(0.50) as f64 / 1000.0,
            "p99_ms": micros(0.99) as f64 / 1000.0,
            "max_ms": self.latencies.max() as f64 / 1000.0,
        })
    }
}

pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

/// Message `index` of batch `batch` of the `ingest` scenarios (gRPC and REST alike).
pub(crate) fn message_text(batch: usize, index: usize) -> String {
    format!(
        "batch {batch} message {index}: I had a flat white at the corner cafe and talked about the trip to Lisbon next spring."
    )
}

pub(crate) fn elapsed_micros(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX).max(1)
}

async fn ingest(
    target: &Target,
    batches: usize,
    batch_size: usize,
    concurrency: usize,
    lists: usize,
    page_size: i32,
) -> anyhow::Result<Vec<Phase>> {
    anyhow::ensure!((1..=100).contains(&batch_size), "--batch-size must be 1..=100");
    let channel = target.connect().await?;
    let workspace_id = format!("loadtest-{}", std::process::id());

    let started = Instant::now();
    let mut writers = Vec::new();
    for client_index in 0..concurrency {
        let mut client = IngestServiceClient::new(channel.clone());
        let workspace_id = workspace_id.clone();
        let my_batches = batches / concurrency + usize::from(client_index < batches % concurrency);
        writers.push(tokio::spawn(async move {
            let mut latencies = histogram();
            for batch_index in 0..my_batches {
                let messages = (0..batch_size)
                    .map(|i| pb::MessageCreate {
                        peer_id: if i % 2 == 0 { "user".into() } else { "assistant".into() },
                        content: message_text(batch_index, i),
                        ..Default::default()
                    })
                    .collect();
                let request = pb::CreateMessagesRequest {
                    workspace_id: workspace_id.clone(),
                    session_id: format!("session-{client_index}"),
                    messages,
                    idempotency_key: None,
                };
                let start = Instant::now();
                client.create_messages(request).await.context("CreateMessages failed")?;
                latencies.record(elapsed_micros(start))?;
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut create = histogram();
    for writer in writers {
        create.add(writer.await??)?;
    }
    let create_phase = Phase {
        name: "CreateMessages",
        latencies: create,
        items_per_request: batch_size as u64,
        wall: started.elapsed(),
    };

    let started = Instant::now();
    let mut readers = Vec::new();
    for client_index in 0..concurrency {
        let mut client = RecallServiceClient::new(channel.clone());
        let workspace_id = workspace_id.clone();
        let my_lists = lists / concurrency + usize::from(client_index < lists % concurrency);
        readers.push(tokio::spawn(async move {
            let mut latencies = histogram();
            for list_index in 0..my_lists {
                let request = pb::ListMessagesRequest {
                    workspace_id: workspace_id.clone(),
                    session_id: format!("session-{client_index}"),
                    page: i32::try_from(list_index % 5).unwrap_or(0) + 1,
                    size: page_size,
                    ..Default::default()
                };
                let start = Instant::now();
                client.list_messages(request).await.context("ListMessages failed")?;
                latencies.record(elapsed_micros(start))?;
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut list = histogram();
    for reader in readers {
        list.add(reader.await??)?;
    }
    let list_phase = Phase {
        name: "ListMessages",
        latencies: list,
        items_per_request: u64::try_from(page_size).unwrap_or(0),
        wall: started.elapsed(),
    };
    Ok(vec![create_phase, list_phase])
}

/// Runs `turns` agent turns from `concurrency` conversations; reports each
/// RPC and the whole turn.
async fn turn(
    target: &Target,
    turns: usize,
    concurrency: usize,
    level: &str,
    context_tokens: i32,
) -> anyhow::Result<Vec<Phase>> {
    use roncho_proto::v1::dialectic_service_client::DialecticServiceClient;
    let channel = target.connect().await?;
    let workspace_id = format!("turns-{}", std::process::id());
    let started = Instant::now();
    let mut clients = Vec::new();
    for conversation in 0..concurrency {
        let mut ingest = IngestServiceClient::new(channel.clone());
        let mut recall = RecallServiceClient::new(channel.clone());
        let mut dialectic = DialecticServiceClient::new(channel.clone());
        let (workspace_id, level) = (workspace_id.clone(), level.to_owned());
        let my_turns = turns / concurrency + usize::from(conversation < turns % concurrency);
        clients.push(tokio::spawn(async move {
            let session_id = format!("conversation-{conversation}");
            let user = format!("user-{conversation}");
            let mut latencies = [histogram(), histogram(), histogram(), histogram()];
            // The conversation exists before its first context is asked for.
            ingest
                .create_messages(pb::CreateMessagesRequest {
                    workspace_id: workspace_id.clone(),
                    session_id: session_id.clone(),
                    messages: vec![pb::MessageCreate {
                        peer_id: user.clone(),
                        content: "Hi! I am planning a trip to Lisbon and I love flat whites.".into(),
                        ..Default::default()
                    }],
                    idempotency_key: None,
                })
                .await
                .context("CreateMessages failed")?;
            for turn_index in 0..my_turns {
                let turn_start = Instant::now();
                let start = Instant::now();
                recall
                    .get_session_context(pb::GetSessionContextRequest {
                        workspace_id: workspace_id.clone(),
                        session_id: session_id.clone(),
                        tokens: Some(context_tokens),
                        ..Default::default()
                    })
                    .await
                    .context("GetSessionContext failed")?;
                latencies[0].record(elapsed_micros(start))?;
                let start = Instant::now();
                let answer = dialectic
                    .chat(pb::ChatRequest {
                        workspace_id: workspace_id.clone(),
                        peer_id: user.clone(),
                        query: format!("What does {user} like to drink, and where are they going? (turn {turn_index})"),
                        session_id: Some(session_id.clone()),
                        reasoning_level: level.clone(),
                        ..Default::default()
                    })
                    .await
                    .context("Chat failed")?
                    .into_inner()
                    .content
                    .unwrap_or_default();
                latencies[1].record(elapsed_micros(start))?;
                let start = Instant::now();
                ingest
                    .create_messages(pb::CreateMessagesRequest {
                        workspace_id: workspace_id.clone(),
                        session_id: session_id.clone(),
                        messages: vec![
                            pb::MessageCreate {
                                peer_id: user.clone(),
                                content: format!("Turn {turn_index}: any tips for cafes near the river in Lisbon?"),
                                ..Default::default()
                            },
                            pb::MessageCreate {
                                peer_id: "assistant".into(),
                                content: answer.chars().take(500).collect(),
                                ..Default::default()
                            },
                        ],
                        idempotency_key: None,
                    })
                    .await
                    .context("CreateMessages failed")?;
                latencies[2].record(elapsed_micros(start))?;
                latencies[3].record(elapsed_micros(turn_start))?;
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut totals = [histogram(), histogram(), histogram(), histogram()];
    for client in clients {
        for (total, part) in totals.iter_mut().zip(client.await??) {
            total.add(part)?;
        }
    }
    let wall = started.elapsed();
    let [context, chat, create, whole] = totals;
    Ok(vec![
        Phase {
            name: "GetSessionContext",
            latencies: context,
            items_per_request: 1,
            wall,
        },
        Phase {
            name: "Chat",
            latencies: chat,
            items_per_request: 1,
            wall,
        },
        Phase {
            name: "CreateMessages",
            latencies: create,
            items_per_request: 2,
            wall,
        },
        Phase {
            name: "turn",
            latencies: whole,
            items_per_request: 1,
            wall,
        },
    ])
}

/// Asks the dialectic `queries` questions about peer `user` from
/// `concurrency` clients.
async fn dialectic(
    target: &Target,
    queries: usize,
    concurrency: usize,
    workspace: &str,
    level: &str,
) -> anyhow::Result<Vec<Phase>> {
    use roncho_proto::v1::dialectic_service_client::DialecticServiceClient;
    let channel = target.connect().await?;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client_index in 0..concurrency {
        let mut client = DialecticServiceClient::new(channel.clone());
        let (workspace, level) = (workspace.to_owned(), level.to_owned());
        let mine = queries / concurrency + usize::from(client_index < queries % concurrency);
        tasks.push(tokio::spawn(async move {
            let mut latencies = histogram();
            for query_index in 0..mine {
                let topic = Corpus::Zipf.query(client_index * 7919 + query_index * 31);
                let start = Instant::now();
                client
                    .chat(pb::ChatRequest {
                        workspace_id: workspace.clone(),
                        peer_id: "user".into(),
                        query: format!("What has user said about this: {topic}"),
                        reasoning_level: level.clone(),
                        ..Default::default()
                    })
                    .await
                    .context("Chat failed")?;
                latencies.record(elapsed_micros(start))?;
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = histogram();
    for task in tasks {
        latencies.add(task.await??)?;
    }
    Ok(vec![Phase {
        name: "Chat",
        latencies,
        items_per_request: 1,
        wall: started.elapsed(),
    }])
}

/// Writes one message per sample and polls QueryConclusions (every 20 ms)
/// until an observation quoting it comes back.
async fn visibility(target: &Target, samples: usize, workspace: &str, timeout: Duration) -> anyhow::Result<Vec<Phase>> {
    let channel = target.connect().await?;
    let mut ingest = IngestServiceClient::new(channel.clone());
    let mut recall = RecallServiceClient::new(channel);
    let nonce = std::process::id();
    let started = Instant::now();
    let mut latencies = histogram();
    for sample in 0..samples {
        let probe = format!("visibility probe {nonce} number {sample} about sailing");
        let start = Instant::now();
        ingest
            .create_messages(pb::CreateMessagesRequest {
                workspace_id: workspace.to_owned(),
                session_id: format!("probe-{nonce}-{sample}"),
                messages: vec![pb::MessageCreate {
                    peer_id: "alice".into(),
                    content: probe.clone(),
                    ..Default::default()
                }],
                idempotency_key: None,
            })
            .await
            .context("CreateMessages failed")?;
        let text = |value: &str| prost_types::Value {
            kind: Some(prost_types::value::Kind::StringValue(value.to_owned())),
        };
        let filters = prost_types::Struct {
            fields: [
                ("observer_id".to_owned(), text("alice")),
                ("observed_id".to_owned(), text("alice")),
            ]
            .into(),
        };
        loop {
            let found = recall
                .query_conclusions(pb::QueryConclusionsRequest {
                    workspace_id: workspace.to_owned(),
                    query: probe.clone(),
                    top_k: Some(5),
                    filters: Some(filters.clone()),
                    ..Default::default()
                })
                .await
                .context("QueryConclusions failed")?
                .into_inner()
                .conclusions
                .iter()
                .any(|conclusion| conclusion.content.contains(&probe));
            if found {
                break;
            }
            anyhow::ensure!(
                start.elapsed() < timeout,
                "sample {sample}: no observation after {timeout:?}; is a deriver running?"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        latencies.record(elapsed_micros(start))?;
    }
    Ok(vec![Phase {
        name: "visible",
        latencies,
        items_per_request: 1,
        wall: started.elapsed(),
    }])
}

async fn search_ingest(
    target: &Target,
    corpus: Corpus,
    messages: usize,
    session_size: usize,
    workspace: &str,
    unobserved: bool,
    rate: u64,
) -> anyhow::Result<Vec<Phase>> {
    let channel = target.connect().await?;
    let mut client = IngestServiceClient::new(channel);
    if unobserved {
        for peer in ["user", "assistant"] {
            let configuration = prost_types::Struct {
                fields: [(
                    "observe_me".to_owned(),
                    prost_types::Value {
                        kind: Some(prost_types::value::Kind::BoolValue(false)),
                    },
                )]
                .into(),
            };
            client
                .get_or_create_peer(pb::GetOrCreatePeerRequest {
                    workspace_id: workspace.to_owned(),
                    id: peer.to_owned(),
                    configuration: Some(configuration),
                    ..Default::default()
                })
                .await
                .context("GetOrCreatePeer failed")?;
        }
    }
    let started = Instant::now();
    let mut latencies = histogram();
    for batch_start in (0..messages).step_by(100) {
        let batch: Vec<pb::MessageCreate> = (batch_start..(batch_start + 100).min(messages))
            .map(|index| pb::MessageCreate {
                peer_id: if index % 2 == 0 {
                    "user".into()
                } else {
                    "assistant".into()
                },
                content: corpus.message(index),
                ..Default::default()
            })
            .collect();
        let request = pb::CreateMessagesRequest {
            workspace_id: workspace.to_owned(),
            session_id: format!("session-{}", batch_start / session_size.max(1)),
            messages: batch,
            idempotency_key: None,
        };
        if rate > 0 {
            // Paced: this batch's first message is due at batch_start / rate seconds.
            let due = started + Duration::from_secs_f64(batch_start as f64 / rate as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        let start = Instant::now();
        client.create_messages(request).await.context("CreateMessages failed")?;
        latencies.record(elapsed_micros(start))?;
    }
    Ok(vec![Phase {
        name: "CreateMessages",
        latencies,
        items_per_request: 100,
        wall: started.elapsed(),
    }])
}

/// The queries of a search run.
#[derive(Debug, Clone, Copy)]
struct Queries {
    corpus: Corpus,
    count: usize,
    /// Each query's text made new ([`Scenario::Search`]'s `new_queries`).
    new: bool,
}

impl Queries {
    /// The text of query `index` (`number`, counted over the run, makes it new).
    fn text(&self, index: usize, number: usize) -> String {
        match self.new {
            true => format!("{} (question {number})", self.corpus.query(index)),
            false => self.corpus.query(index),
        }
    }
}

async fn search(
    target: &Target,
    run: Queries,
    concurrency: usize,
    workspace: &str,
    context_tokens: i32,
) -> anyhow::Result<Vec<Phase>> {
    let channel = target.connect().await?;
    // The first search after start-up loads the embedded store's indexes:
    // reported, and kept out of the measured queries.
    let start = Instant::now();
    RecallServiceClient::new(channel.clone())
        .search_messages(pb::SearchMessagesRequest {
            workspace_id: workspace.to_owned(),
            query: run.corpus.query(1_000_003),
            limit: 10,
            ..Default::default()
        })
        .await
        .context("SearchMessages failed")?;
    eprintln!("first search: {:.1} ms", start.elapsed().as_secs_f64() * 1e3);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client_index in 0..concurrency {
        let mut client = RecallServiceClient::new(channel.clone());
        let workspace = workspace.to_owned();
        let mine = run.count / concurrency + usize::from(client_index < run.count % concurrency);
        tasks.push(tokio::spawn(async move {
            let mut latencies = histogram();
            let mut modes = std::collections::BTreeSet::new();
            for query_index in 0..mine {
                let index = client_index * 7919 + query_index * 31;
                let query = run.text(index, client_index * run.count + query_index);
                let start = Instant::now();
                let response = client
                    .search_messages(pb::SearchMessagesRequest {
                        workspace_id: workspace.clone(),
                        query,
                        limit: 10,
                        ..Default::default()
                    })
                    .await
                    .context("SearchMessages failed")?
                    .into_inner();
                latencies.record(elapsed_micros(start))?;
                modes.insert(response.mode);
            }
            anyhow::Ok((latencies, modes))
        }));
    }
    let mut search_latencies = histogram();
    let mut modes = std::collections::BTreeSet::new();
    for task in tasks {
        let (latencies, task_modes) = task.await??;
        search_latencies.add(latencies)?;
        modes.extend(task_modes);
    }
    anyhow::ensure!(
        !modes.contains("full_text") || modes.len() == 1,
        "mixed search modes {modes:?}"
    );
    eprintln!("search modes: {modes:?}");
    let search_phase = Phase {
        name: "SearchMessages",
        latencies: search_latencies,
        items_per_request: 10,
        wall: started.elapsed(),
    };

    let mut client = RecallServiceClient::new(channel);
    let started = Instant::now();
    let mut context_latencies = histogram();
    for _ in 0..200 {
        let start = Instant::now();
        client
            .get_session_context(pb::GetSessionContextRequest {
                workspace_id: workspace.to_owned(),
                session_id: "session-0".into(),
                tokens: Some(context_tokens),
                ..Default::default()
            })
            .await
            .context("GetSessionContext failed")?;
        context_latencies.record(elapsed_micros(start))?;
    }
    let context_phase = Phase {
        name: "GetSessionContext",
        latencies: context_latencies,
        items_per_request: 1,
        wall: started.elapsed(),
    };
    Ok(vec![search_phase, context_phase])
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let target = Target {
        address: cli.target.clone(),
        ca_file: cli.ca_file.clone(),
        key: cli.key.clone(),
    };
    let mut extra = serde_json::Value::Null;
    let phases = match cli.scenario {
        Scenario::Dialectic {
            queries,
            concurrency,
            workspace,
            level,
        } => dialectic(&target, queries, concurrency.max(1), &workspace, &level).await?,
        Scenario::Rest(args) => rest::run(&cli.target, cli.key.as_deref(), args).await?,
        Scenario::Sustained(args) => {
            let (phases, derivation) = sustained::run(&target, &args).await?;
            extra = derivation;
            phases
        }
        Scenario::ChaosWrite(args) => {
            let (phases, written) = chaos::run(&target, &args).await?;
            extra = written;
            phases
        }
        Scenario::Ingest {
            batches,
            batch_size,
            concurrency,
            lists,
            page_size,
        } => ingest(&target, batches, batch_size, concurrency.max(1), lists, page_size).await?,
        Scenario::Turn {
            turns,
            concurrency,
            level,
            context_tokens,
        } => turn(&target, turns, concurrency.max(1), &level, context_tokens).await?,
        Scenario::SearchIngest {
            messages,
            session_size,
            workspace,
            corpus,
            unobserved,
            rate,
        } => search_ingest(&target, corpus, messages, session_size, &workspace, unobserved, rate).await?,
        Scenario::Visibility {
            samples,
            workspace,
            timeout_secs,
        } => visibility(&target, samples, &workspace, Duration::from_secs(timeout_secs)).await?,
        Scenario::Search {
            queries,
            concurrency,
            workspace,
            context_tokens,
            corpus,
            new_queries,
        } => {
            let queries = Queries {
                corpus,
                count: queries,
                new: new_queries,
            };
            search(&target, queries, concurrency.max(1), &workspace, context_tokens).await?
        }
    };
    let reports: Vec<_> = phases.iter().map(Phase::report).collect();
    if cli.json {
        println!(
            "{}",
            json!({"label": cli.label, "phases": reports, "derivation": extra})
        );
    } else {
        // A phase nobody ran (no probes, say) has nothing to show.
        for report in reports.iter().filter(|report| report["requests"] != 0) {
            println!(
                "{:<10} {:<17} {:>6} req  {:>8.1} req/s  {:>9.0} items/s  p50 {:>7.2} ms  p95 {:>7.2} ms  p99 {:>7.2} ms",
                cli.label,
                report["rpc"].as_str().unwrap_or_default(),
                report["requests"],
                report["requests_per_s"].as_f64().unwrap_or_default(),
                report["items_per_s"].as_f64().unwrap_or_default(),
                report["p50_ms"].as_f64().unwrap_or_default(),
                report["p95_ms"].as_f64().unwrap_or_default(),
                report["p99_ms"].as_f64().unwrap_or_default()
            );
        }
    }
    if !cli.json && extra.is_object() {
        println!("{:<10} derivation        {extra}", cli.label);
    }
    Ok(())
}
