//! The `sustained` scenario: a deployment under steady mixed load, each
//! role at its own address. Writers send CreateMessages batches to ingest
//! (at a fixed total rate, or as fast as it answers), readers alternate
//! SearchMessages and GetSessionContext against recall, and probes measure
//! derivation lag under that load: a probe writes one message and polls
//! ListConclusions until an observation of it exists. With a deriver
//! address, the run then waits for the workspace's queue to drain and
//! reports how fast the derivers worked through it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use roncho_loadtests::corpus::Corpus;
use roncho_loadtests::target::{Conn, Target};
use roncho_proto::v1 as pb;
use roncho_proto::v1::deriver_service_client::DeriverServiceClient;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use serde_json::json;

use crate::{Phase, elapsed_micros, histogram};

/// What to run, from the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The ingest role's address [default: --target].
    #[arg(long)]
    pub ingest_target: Option<String>,
    /// The recall role's address [default: --target].
    #[arg(long)]
    pub recall_target: Option<String>,
    /// A deriver role's address: wait for the queue to drain and report it.
    #[arg(long)]
    pub deriver_target: Option<String>,
    /// How long writers, readers and probes run.
    #[arg(long, default_value_t = 30)]
    pub seconds: u64,
    /// Concurrent writers.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Concurrent readers.
    #[arg(long, default_value_t = 2)]
    pub readers: usize,
    /// Sessions written to, shared out among the writers.
    #[arg(long, default_value_t = 20)]
    pub sessions: usize,
    /// Messages per CreateMessages (1..=100).
    #[arg(long, default_value_t = 10)]
    pub batch_size: usize,
    /// Messages per second over all writers; 0: as fast as ingest answers.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Starts a derivation probe this often; 0: no probes.
    #[arg(long, default_value_t = 1_000)]
    pub probe_every_ms: u64,
    /// Gives up waiting for a probe or the drain after this long.
    #[arg(long, default_value_t = 600)]
    pub timeout_secs: u64,
    #[arg(long, default_value = "sustained")]
    pub workspace: String,
    /// A reader waits this long between its rounds (a search and a session
    /// context); 0: none, as fast as recall answers.
    #[arg(long, default_value_t = 0)]
    pub read_every_ms: u64,
    /// Words per message (the corpus's own when unset), e.g. 44 for an
    /// assistant's reply.
    #[arg(long)]
    pub message_words: Option<usize>,
    /// The messages' corpus: `zipf` (pseudo-words, a few tokens each) or
    /// `dense` (English words: what a model's tokenizer sees of chat).
    #[arg(long, value_enum, default_value = "zipf")]
    pub corpus: Corpus,
}

/// Message `index` of `corpus`, `words` words long when given (the
/// corpus's following messages joined and cut).
fn message(corpus: Corpus, index: usize, words: Option<usize>) -> String {
    let Some(words) = words else {
        return corpus.message(index);
    };
    let mut text: Vec<String> = Vec::with_capacity(words);
    let mut next = index * 7;
    while text.len() < words {
        text.extend(corpus.message(next).split_whitespace().map(str::to_owned));
        next += 1;
    }
    text.truncate(words);
    text.join(" ")
}

fn text(value: &str) -> prost_types::Value {
    prost_types::Value {
        kind: Some(prost_types::value::Kind::StringValue(value.to_owned())),
    }
}

/// Runs the scenario; returns the latency phases and the derivation report.
pub async fn run(target: &Target, args: &Args) -> anyhow::Result<(Vec<Phase>, serde_json::Value)> {
    anyhow::ensure!((1..=100).contains(&args.batch_size), "--batch-size must be 1..=100");
    let role = |address: &Option<String>| {
        address
            .as_deref()
            .map_or_else(|| target.clone(), |address| target.at(address))
    };
    let ingest_channel = role(&args.ingest_target).connect().await?;
    let recall_channel = role(&args.recall_target).connect().await?;
    let workspace = Arc::new(format!("{}-{}", args.workspace, std::process::id()));
    let load = Duration::from_secs(args.seconds);
    let timeout = Duration::from_secs(args.timeout_secs);
    let started = Instant::now();
    let deadline = started + load;

    let writers = args.writers.max(1);
    // Each writer sends a batch every `interval` to keep the total rate.
    let interval =
        (args.rate > 0).then(|| Duration::from_secs_f64(args.batch_size as f64 * writers as f64 / args.rate as f64));
    let mut writer_tasks = Vec::new();
    for writer in 0..writers {
        let mut client = IngestServiceClient::new(ingest_channel.clone());
        let workspace = workspace.clone();
        let (batch_size, sessions, words, corpus) = (
            args.batch_size,
            args.sessions.max(writers),
            args.message_words,
            args.corpus,
        );
        writer_tasks.push(tokio::spawn(async move {
            let mut latencies = histogram();
            let mut ticker = interval.map(|every| {
                let mut ticker = tokio::time::interval(every);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                ticker
            });
            let mine: Vec<usize> = (writer..sessions).step_by(writers).collect();
            let mut sent = 0usize;
            while Instant::now() < deadline {
                if let Some(ticker) = &mut ticker {
                    ticker.tick().await;
                }
                let session = mine[sent % mine.len()];
                let messages = (0..batch_size)
                    .map(|i| pb::MessageCreate {
                        peer_id: if i % 2 == 0 {
                            format!("user-{session}")
                        } else {
                            "assistant".into()
                        },
                        content: message(corpus, (sent * writers + writer) * batch_size + i, words),
                        ..Default::default()
                    })
                    .collect();
                let start = Instant::now();
                client
                    .create_messages(pb::CreateMessagesRequest {
                        workspace_id: workspace.to_string(),
                        session_id: format!("session-{session}"),
                        messages,
                        idempotency_key: None,
                    })
                    .await
                    .context("CreateMessages failed")?;
                latencies.record(elapsed_micros(start))?;
                sent += 1;
            }
            anyhow::Ok(latencies)
        }));
    }

    let mut reader_tasks = Vec::new();
    for reader in 0..args.readers {
        let mut client = RecallServiceClient::new(recall_channel.clone());
        let workspace = workspace.clone();
        let sessions = args.sessions.max(writers);
        let pause = Duration::from_millis(args.read_every_ms);
        reader_tasks.push(tokio::spawn(async move {
            let (mut search, mut context, mut lag) = (histogram(), histogram(), histogram());
            let mut index = reader * 7919;
            while Instant::now() < deadline {
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
                index += 31;
                let start = Instant::now();
                let searched = client
                    .search_messages(pb::SearchMessagesRequest {
                        workspace_id: workspace.to_string(),
                        query: Corpus::Zipf.query(index),
                        limit: 10,
                        ..Default::default()
                    })
                    .await;
                if let Ok(found) = &searched {
                    // How long the oldest message not yet found by meaning has waited.
                    lag.record(((found.get_ref().meaning_lag_seconds * 1e6) as u64).max(1))?;
                }
                record_unless_not_found(&mut search, start, searched, "SearchMessages")?;
                let start = Instant::now();
                let asked = client
                    .get_session_context(pb::GetSessionContextRequest {
                        workspace_id: workspace.to_string(),
                        session_id: format!("session-{}", index % sessions),
                        tokens: Some(2_000),
                        ..Default::default()
                    })
                    .await;
                record_unless_not_found(&mut context, start, asked, "GetSessionContext")?;
            }
            anyhow::Ok((search, context, lag))
        }));
    }

    let mut probe_tasks = Vec::new();
    if args.probe_every_ms > 0 {
        let mut ticker = tokio::time::interval(Duration::from_millis(args.probe_every_ms));
        let mut number = 0;
        while Instant::now() < deadline {
            ticker.tick().await;
            let (ingest, recall) = (
                IngestServiceClient::new(ingest_channel.clone()),
                RecallServiceClient::new(recall_channel.clone()),
            );
            probe_tasks.push(tokio::spawn(probe(ingest, recall, workspace.clone(), number, timeout)));
            number += 1;
        }
    }

    let mut create = histogram();
    for task in writer_tasks {
        create.add(task.await??)?;
    }
    let load_wall = started.elapsed();
    let (mut search, mut context, mut meaning_lag) = (histogram(), histogram(), histogram());
    for task in reader_tasks {
        let (part_search, part_context, part_lag) = task.await??;
        search.add(part_search)?;
        context.add(part_context)?;
        meaning_lag.add(part_lag)?;
    }
    let mut derivation = serde_json::Value::Null;
    if let Some(deriver_target) = &args.deriver_target {
        derivation = drain(
            target.at(deriver_target).connect().await?,
            &workspace,
            started,
            load_wall,
            timeout,
        )
        .await?;
    }
    let mut visible = histogram();
    for task in probe_tasks {
        visible.record(task.await??)?;
    }
    let phase = |name, latencies, items_per_request| Phase {
        name,
        latencies,
        items_per_request,
        wall: load_wall,
    };
    Ok((
        vec![
            phase("CreateMessages", create, args.batch_size as u64),
            phase("SearchMessages", search, 10),
            phase("GetSessionContext", context, 1),
            phase("derived (probe)", visible, 1),
            // Not a latency: each search reply's meaning_lag_seconds.
            phase("meaning lag (search reply)", meaning_lag, 1),
        ],
        derivation,
    ))
}

/// Records a read's latency; a workspace or session no writer reached yet
/// is not there, which is not a failure of the load (and not timed).
fn record_unless_not_found<T>(
    latencies: &mut hdrhistogram::Histogram<u64>,
    start: Instant,
    result: Result<T, tonic::Status>,
    rpc: &str,
) -> anyhow::Result<()> {
    match result {
        Ok(_) => Ok(latencies.record(elapsed_micros(start))?),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(()),
        Err(status) => Err(anyhow::Error::from(status).context(format!("{rpc} failed"))),
    }
}

/// Writes one message and returns the microseconds until an observation
/// of it is listed.
async fn probe(
    mut ingest: IngestServiceClient<Conn>,
    mut recall: RecallServiceClient<Conn>,
    workspace: Arc<String>,
    number: usize,
    timeout: Duration,
) -> anyhow::Result<u64> {
    let session = format!("probe-{number}");
    let start = Instant::now();
    ingest
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: workspace.to_string(),
            session_id: session.clone(),
            messages: vec![pb::MessageCreate {
                peer_id: "probe".into(),
                content: format!("Probe {number}: I moved to Porto last spring and I walk my dog every morning."),
                ..Default::default()
            }],
            idempotency_key: None,
        })
        .await
        .context("probe CreateMessages failed")?;
    let filters = prost_types::Struct {
        fields: [
            ("observer_id".to_owned(), text("probe")),
            ("observed_id".to_owned(), text("probe")),
            ("session_id".to_owned(), text(&session)),
        ]
        .into(),
    };
    loop {
        let listed = recall
            .list_conclusions(pb::ListConclusionsRequest {
                workspace_id: workspace.to_string(),
                filters: Some(filters.clone()),
                size: 1,
                ..Default::default()
            })
            .await
            .context("probe ListConclusions failed")?
            .into_inner();
        if listed.total > 0 {
            return Ok(elapsed_micros(start));
        }
        anyhow::ensure!(
            start.elapsed() < timeout,
            "probe {number}: no observation after {timeout:?}; are derivers running?"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the workspace's queue has nothing pending or in progress and
/// reports the tasks, when the load ended and how long the rest took.
async fn drain(
    channel: Conn,
    workspace: &str,
    started: Instant,
    load_wall: Duration,
    timeout: Duration,
) -> anyhow::Result<serde_json::Value> {
    let mut deriver = DeriverServiceClient::new(channel);
    let at_load_end = queue_status(&mut deriver, workspace).await?;
    loop {
        let now = queue_status(&mut deriver, workspace).await?;
        anyhow::ensure!(now.failed_work_units == 0, "tasks failed: {:?}", now.failures);
        if now.pending_work_units == 0 && now.in_progress_work_units == 0 {
            let total = started.elapsed().as_secs_f64();
            return Ok(json!({
                "tasks": now.total_work_units,
                "completed_during_load": at_load_end.completed_work_units,
                "pending_at_load_end": at_load_end.pending_work_units + at_load_end.in_progress_work_units,
                "load_s": load_wall.as_secs_f64(),
                "drain_after_load_s": total - load_wall.as_secs_f64(),
                "derived_tasks_per_s": now.total_work_units as f64 / total,
                "derived_during_load_per_s": at_load_end.completed_work_units as f64 / load_wall.as_secs_f64(),
            }));
        }
        anyhow::ensure!(
            started.elapsed() < load_wall + timeout,
            "the queue did not drain: {} pending",
            now.pending_work_units
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn queue_status(deriver: &mut DeriverServiceClient<Conn>, workspace: &str) -> anyhow::Result<pb::QueueStatus> {
    let request = pb::GetQueueStatusRequest {
        workspace_id: workspace.to_owned(),
        ..Default::default()
    };
    Ok(deriver
        .get_queue_status(request)
        .await
        .context("GetQueueStatus failed")?
        .into_inner())
}
