//! An acknowledged CreateMessages batch is durable: eight clients write
//! batches at once to a `roncho serve` process (on SQLite its one writer
//! commits the waiting batches in groups), the process is killed with
//! SIGKILL in the middle of the writes, and after a restart every
//! acknowledged batch is there, whole, in order, with its work queued. On
//! SQLite and on Postgres.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use roncho_core::queue::{StatusFilter, WorkQueue};
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;

use crate::processes;
use processes::{connect, free_address};

const WRITERS: usize = 8;
const BATCH: usize = 20;

/// Where the store is: SQLite in a data directory, or a Postgres database.
enum Backend {
    DataDir(std::path::PathBuf),
    Postgres(String),
}

impl Backend {
    fn options(&self) -> roncho_store::StoreOptions {
        match self {
            Backend::DataDir(dir) => roncho_store::StoreOptions::embedded(dir),
            Backend::Postgres(url) => roncho_store::StoreOptions::new(url.clone()),
        }
    }
}

/// `roncho serve --roles ingest,recall` on `backend` (no worker takes the
/// queued work), its log (group commits at debug) in `log`.
fn serve(listen: &str, backend: &Backend, log: &std::path::Path) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_roncho"));
    command.args([
        "serve",
        "--roles",
        "ingest,recall",
        "--listen",
        listen,
        "--rest-listen",
        "off",
    ]);
    match backend {
        Backend::DataDir(dir) => command.arg("--data-dir").arg(dir),
        Backend::Postgres(url) => command.env("RONCHO_DATABASE_URL", url),
    };
    command
        .args(["--log", "warn,roncho_store=debug"])
        .env("RONCHO_EMBEDDING_PROVIDER", "none")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting a roncho process")
}

/// Writes batches to `session` until `stop`, returning each acknowledged
/// batch's message ids in order.
async fn write_until(channel: tonic::transport::Channel, session: String, stop: Arc<AtomicBool>) -> Vec<Vec<String>> {
    let mut ingest = IngestServiceClient::new(channel);
    let mut acknowledged = Vec::new();
    let mut round = 0;
    while !stop.load(Ordering::Relaxed) {
        let messages = (0..BATCH)
            .map(|line| pb::MessageCreate {
                peer_id: ["alice", "bob"][line % 2].into(),
                content: format!("{session} round {round} line {line}: a durable thought"),
                ..Default::default()
            })
            .collect();
        let request = pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: session.clone(),
            messages,
            idempotency_key: None,
        };
        match ingest.create_messages(request).await {
            Ok(reply) => acknowledged.push(reply.into_inner().messages.into_iter().map(|m| m.id).collect()),
            // The process died under this call: not acknowledged.
            Err(_) => break,
        }
        round += 1;
    }
    acknowledged
}

async fn acknowledged_batches_survive_a_kill(backend: &Backend) {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("server.log");
    let address = free_address();
    let mut server = serve(&address, backend, &log);
    let channel = connect(&address).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| tokio::spawn(write_until(channel.clone(), format!("s{writer}"), stop.clone())))
        .collect();
    // Kill in the middle of the writes, once every writer has been acknowledged a few times.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.kill().expect("SIGKILL");
    server.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    let mut acknowledged: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for (writer, handle) in writers.into_iter().enumerate() {
        acknowledged.insert(format!("s{writer}"), handle.await.unwrap());
    }
    let total: usize = acknowledged.values().map(Vec::len).sum();
    assert!(total >= WRITERS, "too few acknowledgements before the kill: {total}");

    let address = free_address();
    let mut server = serve(&address, backend, &log);
    let channel = connect(&address).await;
    let mut recall = RecallServiceClient::new(channel.clone());
    let mut stored_messages = 0;
    let mut summaries = 0;
    for (session, batches) in &acknowledged {
        let mut stored = Vec::new();
        for page in 1.. {
            let listed = recall
                .list_messages(pb::ListMessagesRequest {
                    workspace_id: "w".into(),
                    session_id: session.clone(),
                    page,
                    size: 100,
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner();
            stored.extend(listed.items);
            if page >= listed.pages {
                break;
            }
        }
        // Every acknowledged batch is there, whole and in order; a batch the
        // kill interrupted is there whole or not at all.
        let ids: Vec<&str> = stored.iter().map(|message| message.id.as_str()).collect();
        let acked: Vec<&str> = batches.iter().flatten().map(String::as_str).collect();
        assert_eq!(
            &ids[..acked.len()],
            &acked[..],
            "{session}: acknowledged batches lost or reordered"
        );
        assert_eq!(ids.len() % BATCH, 0, "{session}: a partial batch");
        let seqs: Vec<i64> = stored.iter().map(|message| message.seq_in_session).collect();
        assert_eq!(
            seqs,
            (1..=i64::try_from(seqs.len()).unwrap()).collect::<Vec<_>>(),
            "{session}"
        );
        stored_messages += stored.len();
        summaries += stored.len() / 20;
    }
    server.kill().unwrap();
    server.wait().unwrap();
    // Their work committed with them: a representation item per message and
    // a summary every 20th message of a session.
    let store = Arc::new(roncho_store::connect(&backend.options()).await.unwrap());
    let status = roncho_store::SqlWorkQueue::new(store.clone())
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        status.counts.total,
        i64::try_from(stored_messages + summaries).unwrap(),
        "{status:?}"
    );
    store.close().await;
    let log = std::fs::read_to_string(&log).unwrap();
    eprintln!("{total} batches acknowledged before the kill, {stored_messages} messages stored");
    if matches!(backend, Backend::DataDir(_)) {
        // The writes went through group commits of several batches.
        let grouped = log
            .lines()
            .filter_map(|line| line.split("batches=").nth(1))
            .filter_map(|rest| rest.split_whitespace().next()?.parse::<usize>().ok())
            .any(|batches| batches > 1);
        assert!(grouped, "no group commit wrote more than one batch:\n{log}");
    }
}

#[tokio::test]
async fn acknowledged_batches_survive_a_kill_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    acknowledged_batches_survive_a_kill(&Backend::DataDir(dir.path().to_owned())).await;
}

#[tokio::test]
async fn acknowledged_batches_survive_a_kill_on_postgres() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    acknowledged_batches_survive_a_kill(&Backend::Postgres(database.url.clone())).await;
    database.drop_database().await;
}
