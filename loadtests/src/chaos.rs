//! The `chaos-write` scenario: what a careful client does while the
//! deployment is being broken under it (loadtests/run-chaos.sh). Each writer
//! owns a session where its speaker talks and a watcher observes; it sends
//! batches of messages, each with an idempotency key, and retries a batch
//! that failed — whatever the failure: an ingest process killed, Postgres
//! restarting, a deadline — with the same key until it is acknowledged.
//! Every message carries a marker `[w{writer}.b{batch}.m{index}]` the
//! checker finds in the database: each acknowledged message stored once,
//! each observation derived once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use roncho_loadtests::target::{Conn, Target};
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use serde_json::json;

use crate::{Phase, elapsed_micros, histogram};

/// What to run, from the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// How long new batches are started; a batch in flight then still
    /// finishes (retried until acknowledged or `--give-up-secs`).
    #[arg(long, default_value_t = 120)]
    pub seconds: u64,
    /// Concurrent writers, each with its own session.
    #[arg(long, default_value_t = 4)]
    pub writers: usize,
    /// Messages per CreateMessages (1..=100).
    #[arg(long, default_value_t = 10)]
    pub batch_size: usize,
    /// Pause between a writer's batches.
    #[arg(long, default_value_t = 100)]
    pub pause_ms: u64,
    /// A batch still not acknowledged after this long counts as lost by
    /// the client (and fails the run).
    #[arg(long, default_value_t = 300)]
    pub give_up_secs: u64,
    #[arg(long, default_value = "chaos")]
    pub workspace: String,
}

/// One writer's outcome.
#[derive(Debug, Default)]
struct Written {
    batches: u64,
    messages: u64,
    /// Attempts that failed and were retried, by gRPC code.
    failures: BTreeMap<String, u64>,
    abandoned: u64,
}

/// Calls `attempt` until it succeeds or `deadline` passes, counting failures.
async fn until_acknowledged<T, F, Fut>(
    deadline: Instant,
    failures: &mut BTreeMap<String, u64>,
    mut attempt: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let mut wait = Duration::from_millis(100);
    loop {
        match tokio::time::timeout(Duration::from_secs(30), attempt()).await {
            Ok(Ok(answer)) => return Some(answer),
            Ok(Err(status)) => *failures.entry(format!("{:?}", status.code())).or_default() += 1,
            Err(_) => *failures.entry("ClientTimeout".into()).or_default() += 1,
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(2));
    }
}

/// Connects, retrying while the ingest process is down.
async fn connect(target: &Target, deadline: Instant) -> anyhow::Result<Conn> {
    loop {
        match target.connect().await {
            Ok(conn) => return Ok(conn),
            Err(error) if Instant::now() < deadline => {
                eprintln!("chaos-write: {error:#}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

async fn write(
    target: Target,
    args: Args,
    writer: usize,
    latencies: &mut hdrhistogram::Histogram<u64>,
) -> anyhow::Result<Written> {
    let started = Instant::now();
    let stop_at = started + Duration::from_secs(args.seconds);
    let client = IngestServiceClient::new(connect(&target, stop_at + Duration::from_secs(args.give_up_secs)).await?);
    let mut written = Written::default();
    let session = format!("writer-{writer}");
    let speaker = format!("speaker-{writer}");
    let watcher = pb::SessionPeerConfig {
        observe_me: None,
        observe_others: Some(true),
    };
    let request = pb::GetOrCreateSessionRequest {
        workspace_id: args.workspace.clone(),
        id: session.clone(),
        peers: [("watcher".to_owned(), watcher)].into(),
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(args.give_up_secs);
    until_acknowledged(deadline, &mut written.failures, || {
        let mut client = client.clone();
        let request = request.clone();
        async move { client.get_or_create_session(request).await }
    })
    .await
    .ok_or_else(|| anyhow::anyhow!("writer {writer} could not create its session"))?;
    let mut batch = 0;
    while Instant::now() < stop_at {
        let messages: Vec<pb::MessageCreate> = (0..args.batch_size)
            .map(|index| pb::MessageCreate {
                peer_id: speaker.clone(),
                content: format!("chaos [w{writer}.b{batch}.m{index}] went well"),
                ..Default::default()
            })
            .collect();
        let request = pb::CreateMessagesRequest {
            workspace_id: args.workspace.clone(),
            session_id: session.clone(),
            messages,
            idempotency_key: Some(format!("chaos-{writer}-{batch}")),
        };
        let start = Instant::now();
        let deadline = start + Duration::from_secs(args.give_up_secs);
        let acknowledged = until_acknowledged(deadline, &mut written.failures, || {
            let mut client = client.clone();
            let request = request.clone();
            async move { client.create_messages(request).await }
        })
        .await;
        match acknowledged {
            Some(reply) => {
                latencies.record(elapsed_micros(start))?;
                written.batches += 1;
                written.messages += reply.into_inner().messages.len() as u64;
            }
            None => written.abandoned += 1,
        }
        batch += 1;
        tokio::time::sleep(Duration::from_millis(args.pause_ms)).await;
    }
    Ok(written)
}

/// Runs the writers; returns the batch latencies (acknowledgement after
/// retries) and what was written.
pub async fn run(target: &Target, args: &Args) -> anyhow::Result<(Vec<Phase>, serde_json::Value)> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for writer in 0..args.writers.max(1) {
        let (target, args) = (target.clone(), args.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = histogram();
            let written = write(target, args, writer, &mut latencies).await?;
            anyhow::Ok((written, latencies))
        }));
    }
    let mut latencies = histogram();
    let mut total = Written::default();
    for task in tasks {
        let (written, each) = task.await??;
        latencies.add(each)?;
        total.batches += written.batches;
        total.messages += written.messages;
        total.abandoned += written.abandoned;
        for (code, count) in written.failures {
            *total.failures.entry(code).or_default() += count;
        }
    }
    let phase = Phase {
        name: "CreateMessages (acknowledged)",
        latencies,
        items_per_request: args.batch_size as u64,
        wall: started.elapsed(),
    };
    let summary = json!({
        "batches": total.batches,
        "messages": total.messages,
        "retried_failures": total.failures,
        "abandoned_batches": total.abandoned,
    });
    Ok((vec![phase], summary))
}
