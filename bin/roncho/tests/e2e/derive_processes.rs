//! Separate `roncho serve --roles deriver` processes over one Postgres share
//! the work queue — the SQL queue, or NATS JetStream (`--nats-url`) — and
//! one is killed with SIGKILL mid-batch. Every expected observation exists
//! exactly once, each work unit's batches were derived in message order,
//! and the queue drains with nothing failed. Dialectic processes answer
//! from the same database, with a model and without.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use roncho_core::model::PageRequest;
use roncho_core::store::{Memory, Messages, Store};
use roncho_proto::v1 as pb;
use roncho_proto::v1::deriver_service_client::DeriverServiceClient;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use serde_json::{Value, json};

use crate::processes;
use processes::{connect, free_address};

type Script = roncho_http::Script<()>;

/// A deterministic model: one fact per transcript line, after 300 ms.
async fn completions(State(script): State<Script>, Json(body): Json<Value>) -> Json<Value> {
    script.answer(body.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    Json(processes::facts_reply(&body))
}

/// NATS for the queue: the server URL and this test's stream prefix.
type Nats = Option<(String, String)>;

/// Starts `roncho serve --roles {roles} --listen {listen}` on the test's database and queue.
fn serve(roles: &str, listen: &str, database_url: &str, llm_url: &str, nats: &Nats, log: &std::path::Path) -> Child {
    serve_with(roles, listen, database_url, Some(llm_url), nats, log, &[])
}

/// Like [`serve`]; `llm_url: None` runs without a model; `env` is set
/// last (it overrides the defaults here).
fn serve_with(
    roles: &str,
    listen: &str,
    database_url: &str,
    llm_url: Option<&str>,
    nats: &Nats,
    log: &std::path::Path,
    env: &[(&str, &str)],
) -> Child {
    let log = std::fs::File::create(log).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_roncho"));
    if let Some((url, prefix)) = nats {
        command
            .env("RONCHO_NATS_URL", url)
            .env("RONCHO_NATS_PREFIX", prefix)
            .env("RONCHO_NATS_PARTITIONS", "4")
            .env("RONCHO_NATS_ACK_WAIT_SECS", "2");
    }
    if let Some(llm_url) = llm_url {
        command
            .env("RONCHO_LLM_BASE_URL", llm_url)
            .env("RONCHO_LLM_MODEL", "scripted");
    }
    command
        .args(["serve", "--roles", roles, "--listen", listen, "--log", "warn"])
        .env("RONCHO_DATABASE_URL", database_url)
        .env("RONCHO_EMBEDDING_PROVIDER", "none")
        // These processes derive; dreams (the model would schedule them) are
        // tested in agents_flow.rs and no process here runs them.
        .env("RONCHO_DREAM_DOCUMENT_THRESHOLD", "1000000")
        .env("RONCHO_DERIVER_LEASE_SECS", "2")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting a roncho process")
}

fn deriver(database_url: &str, llm_url: &str, nats: &Nats, log: &std::path::Path) -> Child {
    serve("deriver", "127.0.0.1:0", database_url, llm_url, nats, log)
}

/// Writes `batches` batches of 40 lines (alice and bob in turn) into each
/// session, carol observing the others: each line is one representation
/// task for its sender and one for carol.
async fn write_conversation(
    ingest: &mut IngestServiceClient<tonic::transport::Channel>,
    sessions: &[&str],
    batches: usize,
) {
    let peers = ["alice", "bob"];
    for session in sessions {
        ingest
            .get_or_create_session(pb::GetOrCreateSessionRequest {
                workspace_id: "w".into(),
                id: (*session).into(),
                peers: [(
                    "carol".to_owned(),
                    pb::SessionPeerConfig {
                        observe_me: None,
                        observe_others: Some(true),
                    },
                )]
                .into(),
                ..Default::default()
            })
            .await
            .unwrap();
        for batch in 0..batches {
            let messages = (0..40)
                .map(|i| pb::MessageCreate {
                    peer_id: peers[i % 2].to_owned(),
                    content: format!("{session} batch {batch} line {i}"),
                    ..Default::default()
                })
                .collect();
            ingest
                .create_messages(pb::CreateMessagesRequest {
                    workspace_id: "w".into(),
                    session_id: (*session).into(),
                    messages,
                    idempotency_key: None,
                })
                .await
                .unwrap();
        }
    }
}

#[tokio::test]
async fn a_killed_deriver_loses_nothing_and_duplicates_nothing() {
    kill_one_of_two(None).await;
}

#[tokio::test]
async fn a_killed_deriver_loses_nothing_and_duplicates_nothing_over_nats() {
    let Some(url) = roncho_store::testing::integration_env(roncho_store::testing::NATS_URL_VAR) else {
        return;
    };
    kill_one_of_two(Some((url, roncho_store::testing::unique_name()))).await;
}

async fn kill_one_of_two(nats: Nats) {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let script = Script::new(vec![()]);
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(script.clone());
    let llm_url = format!("{}/v1", roncho_http::serve_for_test(app).await);
    let logs = tempfile::tempdir().unwrap();

    // The conversation goes in through an ingest process, which writes each
    // message with its work and (with NATS) publishes that work.
    let address = free_address();
    let mut ingest_process = serve(
        "ingest",
        &address,
        &database.url,
        &llm_url,
        &nats,
        &logs.path().join("ingest.log"),
    );
    let mut ingest = IngestServiceClient::new(connect(&address).await);
    write_conversation(&mut ingest, &["s1", "s2", "s3"], 2).await;

    let mut doomed = deriver(&database.url, &llm_url, &nats, &logs.path().join("doomed.log"));
    let mut survivor = deriver(&database.url, &llm_url, &nats, &logs.path().join("survivor.log"));
    let started = Instant::now();
    while script.count() < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the derivers never called the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    doomed.kill().expect("SIGKILL");
    doomed.wait().unwrap();
    eprintln!(
        "killed one deriver after {:?} and {} model calls",
        started.elapsed(),
        script.count()
    );

    let queue = roncho_store::SqlWorkQueue::new(store.clone());
    loop {
        let counts = queue.totals().await.unwrap();
        if counts.pending == 0 && counts.in_progress == 0 {
            eprintln!(
                "drained after {:?}: {counts:?}, {} model calls",
                started.elapsed(),
                script.count()
            );
            assert_eq!(counts.failed, 0);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the queue did not drain: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Stale deliveries (done in the ledger, never acked by the killed
    // process) come back after the ack wait and are acked by the survivor.
    let nats_queue = match &nats {
        Some((url, prefix)) => {
            let mut options = roncho_nats::NatsOptions::new(url);
            options.prefix = prefix.clone();
            options.ack_wait = Duration::from_secs(2);
            options.lease_ttl = options.ack_wait;
            let observer = roncho_nats::NatsWorkQueue::connect(options, std::sync::Arc::new(queue.clone()))
                .await
                .unwrap();
            let published = observer.stream_state().await.unwrap().last_sequence;
            let tasks: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM work_tasks")
                .fetch_one(store.pool())
                .await
                .unwrap();
            assert!(
                published >= u64::try_from(tasks).unwrap(),
                "the work went through NATS: {published} published for {tasks} tasks"
            );
            loop {
                let waiting = observer.stream_messages().await.unwrap();
                if waiting == 0 {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(120),
                    "{waiting} deliveries never acked"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Some(observer)
        }
        None => None,
    };
    for process in [&mut survivor, &mut ingest_process] {
        process.kill().unwrap();
        process.wait().unwrap();
    }
    if let Some(observer) = nats_queue {
        observer.delete_streams().await.unwrap();
    }
    for name in ["ingest.log", "doomed.log", "survivor.log"] {
        eprintln!(
            "== {name}\n{}",
            std::fs::read_to_string(logs.path().join(name)).unwrap_or_default()
        );
    }

    // Each message of alice and bob gives one fact, to its sender and to carol.
    for observer in ["alice", "bob", "carol"] {
        for observed in ["alice", "bob"] {
            if observer != observed && observer != "carol" {
                continue;
            }
            let facts = facts_of(&*store, observer, observed).await;
            let mut contents: Vec<&str> = facts.iter().map(|c| c.content.as_str()).collect();
            assert_eq!(
                contents.len(),
                120,
                "{observer} about {observed}: 3 sessions x 2 batches x 20"
            );
            contents.sort_unstable();
            contents.dedup();
            assert_eq!(contents.len(), 120, "{observer} about {observed}: exactly once each");
            // Per unit, batches were derived in message order: creation order follows the text's line order.
            for session in ["s1", "s2", "s3"] {
                let order: Vec<(i64, u32)> = facts
                    .iter()
                    .filter(|c| c.session_id.as_deref() == Some(session))
                    .map(|c| {
                        let words: Vec<&str> = c.content.split_whitespace().collect();
                        let batch: u32 = words[3].parse().unwrap();
                        let line: u32 = words[5].parse().unwrap();
                        (c.created_at, batch * 100 + line)
                    })
                    .collect();
                let mut by_time = order.clone();
                by_time.sort_by_key(|(created_at, position)| (*created_at, *position));
                assert!(
                    by_time.windows(2).all(|pair| pair[0].1 < pair[1].1),
                    "{observer}/{observed}/{session} derived out of order"
                );
            }
        }
    }
    store.close().await;
    database.drop_database().await;
}

/// What `observer` concluded about `observed` in workspace `w` (up to 300).
async fn facts_of(store: &dyn Store, observer: &str, observed: &str) -> Vec<roncho_core::model::Conclusion> {
    let filter = roncho_core::filter::parse(
        &roncho_core::filter::CONCLUSION,
        json!({"observer_id": observer, "observed_id": observed}).as_object(),
    )
    .unwrap();
    let mut facts = Vec::new();
    for page_number in 1..=3 {
        let page = PageRequest::from_wire(page_number, 100, true).unwrap();
        facts.extend(store.list_conclusions("w", &filter, page).await.unwrap().items);
    }
    facts
}

/// Asserts `observer` concluded one fact about each of `observed`'s `lines` lines, each once.
async fn assert_facts_once(store: &dyn Store, observer: &str, observed: &str, lines: usize) {
    let facts = facts_of(store, observer, observed).await;
    let mut contents: Vec<&str> = facts.iter().map(|c| c.content.as_str()).collect();
    contents.sort_unstable();
    contents.dedup();
    assert_eq!(
        (facts.len(), contents.len()),
        (lines, lines),
        "{observer} about {observed}: one fact per line, each once"
    );
}

/// A scripted model that answers HTTP `status` while it is down, then like
/// [`completions`] (without the delay).
#[derive(Clone)]
struct Flaky {
    down_until: std::sync::Arc<std::sync::Mutex<Option<Instant>>>,
    status: u16,
    refused: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    answered: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Flaky {
    /// A model down for `outage` from now, answering `status`.
    fn down_for(outage: Duration, status: u16) -> Self {
        Self {
            down_until: std::sync::Arc::new(std::sync::Mutex::new(Some(Instant::now() + outage))),
            status,
            refused: std::sync::Arc::default(),
            answered: std::sync::Arc::default(),
        }
    }

    fn recover(&self) {
        *self.down_until.lock().unwrap() = None;
    }

    fn is_down(&self) -> bool {
        self.down_until
            .lock()
            .unwrap()
            .is_some_and(|until| Instant::now() < until)
    }

    /// Serves the model; returns its base URL.
    async fn serve(&self) -> String {
        async fn chat(State(model): State<Flaky>, Json(body): Json<Value>) -> axum::response::Response {
            use axum::response::IntoResponse;
            use std::sync::atomic::Ordering;
            if model.is_down() {
                model.refused.fetch_add(1, Ordering::SeqCst);
                let error = json!({"error": {"message": "scripted failure", "type": "server_error"}});
                return (axum::http::StatusCode::from_u16(model.status).unwrap(), Json(error)).into_response();
            }
            model.answered.fetch_add(1, Ordering::SeqCst);
            Json(processes::facts_reply(&body)).into_response()
        }
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(chat))
            .with_state(self.clone());
        format!("{}/v1", roncho_http::serve_for_test(app).await)
    }
}

/// Reads workspace `w`'s queue status from the process at `address`.
async fn queue_status(deriver: &mut DeriverServiceClient<tonic::transport::Channel>) -> pb::QueueStatus {
    deriver
        .get_queue_status(pb::GetQueueStatusRequest {
            workspace_id: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

fn drained(status: &pb::QueueStatus) -> bool {
    status.pending_work_units == 0 && status.in_progress_work_units == 0
}

/// One `ingest,deriver` process on a fresh Postgres database, deriving with
/// `model`; sessions s1 and s2 hold a batch of the conversation each.
struct ModelledRun {
    database: roncho_store::testing::FreshDatabase,
    store: std::sync::Arc<roncho_store::SqlStore>,
    process: Child,
    deriver: DeriverServiceClient<tonic::transport::Channel>,
    logs: tempfile::TempDir,
}

impl ModelledRun {
    /// Starts it with `env` set; `None` without a test database.
    async fn start(model: &Flaky, env: &[(&str, &str)]) -> Option<Self> {
        let database = roncho_store::testing::FreshDatabase::create().await?;
        let store = roncho_store::testing::open_migrated(&database.url).await;
        let llm_url = model.serve().await;
        let logs = tempfile::tempdir().unwrap();
        let address = free_address();
        let process = serve_with(
            "ingest,deriver",
            &address,
            &database.url,
            Some(&llm_url),
            &None,
            &logs.path().join("roncho.log"),
            env,
        );
        let channel = connect(&address).await;
        write_conversation(&mut IngestServiceClient::new(channel.clone()), &["s1", "s2"], 1).await;
        Some(Self {
            database,
            store,
            process,
            deriver: DeriverServiceClient::new(channel),
            logs,
        })
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.logs.path().join("roncho.log")).unwrap_or_default()
    }

    /// Stops the process and checks every line was derived once, for its
    /// sender and for carol.
    async fn finish(mut self) {
        self.process.kill().unwrap();
        self.process.wait().unwrap();
        for observer in ["alice", "carol"] {
            assert_facts_once(&*self.store, observer, "alice", 40).await;
        }
        self.store.close().await;
        self.database.drop_database().await;
    }
}

#[tokio::test]
async fn a_three_minute_model_outage_postpones_work_and_kills_none() {
    const OUTAGE: Duration = Duration::from_secs(180);
    let model = Flaky::down_for(OUTAGE, 503);
    let env = [
        ("RONCHO_WORKER_OUTAGE_BACKOFF_SECS", "2"),
        ("RONCHO_WORKER_OUTAGE_BACKOFF_MAX_SECS", "20"),
        ("RONCHO_LLM_MAX_RETRIES", "1"),
    ];
    let Some(mut run) = ModelledRun::start(&model, &env).await else {
        return;
    };
    let deriver = &mut run.deriver;
    let started = Instant::now();
    let mut most_postponed = 0;
    let mut reasons = std::collections::BTreeSet::new();
    let status = loop {
        let status = queue_status(deriver).await;
        assert_eq!(
            status.failed_work_units, 0,
            "an outage killed work: {:?}",
            status.failures
        );
        most_postponed = most_postponed.max(status.postponed_work_units);
        reasons.extend(status.postponed.iter().map(|unit| unit.reason.clone()));
        if !model.is_down() && drained(&status) {
            break status;
        }
        assert!(
            started.elapsed() < OUTAGE + Duration::from_secs(120),
            "the queue did not drain after the outage: {status:?}\n{}",
            run.log()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!(
        "drained {:?} after the outage began: {} postponed at most, {} refused calls, {} answered",
        started.elapsed(),
        most_postponed,
        model.refused.load(std::sync::atomic::Ordering::SeqCst),
        model.answered.load(std::sync::atomic::Ordering::SeqCst)
    );
    assert!(most_postponed > 0, "queue status showed the postponed work");
    assert!(
        reasons.iter().any(|reason| reason.contains("503")),
        "and why: {reasons:?}"
    );
    assert_eq!(status.completed_work_units, status.total_work_units, "{status:?}");
    run.finish().await;
}

#[tokio::test]
async fn dead_work_runs_again_by_rpc_and_by_command() {
    // A request the provider rejects counts as an attempt: a real failure.
    let model = Flaky::down_for(Duration::from_secs(3600), 400);
    let Some(mut run) = ModelledRun::start(&model, &[]).await else {
        return;
    };
    let deriver = &mut run.deriver;
    // Five attempts, 5 + 10 + 15 + 20 s apart.
    let dead = wait_drained(deriver, Duration::from_secs(180)).await;
    assert_eq!(dead.failed_work_units, dead.total_work_units, "{dead:?}");
    assert!(
        dead.failures
            .iter()
            .all(|unit| unit.attempts == 5 && unit.last_error.contains("HTTP 400")),
        "{:?}",
        dead.failures
    );
    let dead_in = |status: &pb::QueueStatus, session: &str| status.sessions[session].failed_work_units;
    let (s1_dead, s2_dead) = (dead_in(&dead, "s1"), dead_in(&dead, "s2"));
    assert!(s1_dead > 0 && s2_dead > 0);

    model.recover();
    let retried = deriver
        .retry_failed_work(pb::RetryFailedWorkRequest {
            workspace_id: "w".into(),
            session_id: Some("s1".into()),
            task_type: None,
        })
        .await
        .unwrap()
        .into_inner()
        .retried;
    assert_eq!(retried, s1_dead, "s1's dead tasks, and only they");
    let status = wait_drained(deriver, Duration::from_secs(60)).await;
    assert_eq!(
        (dead_in(&status, "s1"), dead_in(&status, "s2")),
        (0, s2_dead),
        "{status:?}"
    );

    let output = Command::new(env!("CARGO_BIN_EXE_roncho"))
        .args([
            "queue",
            "retry",
            "--workspace",
            "w",
            "--database-url",
            &run.database.url,
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("{s2_dead} dead task(s) will run again")
    );
    let status = wait_drained(deriver, Duration::from_secs(60)).await;
    assert_eq!(status.failed_work_units, 0, "{status:?}");
    assert_eq!(status.completed_work_units, status.total_work_units, "{status:?}");
    run.finish().await;
}

/// Waits up to `limit` for workspace `w`'s queue to drain; returns its status.
async fn wait_drained(
    deriver: &mut DeriverServiceClient<tonic::transport::Channel>,
    limit: Duration,
) -> pb::QueueStatus {
    let started = Instant::now();
    loop {
        let status = queue_status(deriver).await;
        if drained(&status) {
            return status;
        }
        assert!(started.elapsed() < limit, "the queue did not drain: {status:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn three_derivers_drain_a_new_database_on_a_stream_prefix_another_database_used() {
    let Some(url) = roncho_store::testing::integration_env(roncho_store::testing::NATS_URL_VAR) else {
        return;
    };
    let prefix = roncho_store::testing::unique_name();
    let nats: Nats = Some((url.clone(), prefix.clone()));
    // The first database's task ids (1, 2, ...) are the ones the second
    // one's tasks get: the stream must not take them for repeats.
    for round in ["first", "second"] {
        let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
            return;
        };
        let store = roncho_store::testing::open_migrated(&database.url).await;
        let model = Flaky::down_for(Duration::ZERO, 503);
        let llm_url = model.serve().await;
        let logs = tempfile::tempdir().unwrap();
        let address = free_address();
        let mut processes = vec![serve(
            "ingest",
            &address,
            &database.url,
            &llm_url,
            &nats,
            &logs.path().join("ingest.log"),
        )];
        let channel = connect(&address).await;
        write_conversation(&mut IngestServiceClient::new(channel), &["s1", "s2"], 1).await;
        for n in 0..3 {
            processes.push(deriver(
                &database.url,
                &llm_url,
                &nats,
                &logs.path().join(format!("deriver{n}.log")),
            ));
        }
        let queue = roncho_store::SqlWorkQueue::new(store.clone());
        let started = Instant::now();
        loop {
            let counts = queue.totals().await.unwrap();
            if counts.pending == 0 && counts.in_progress == 0 {
                assert_eq!(counts.failed, 0, "{round} database: {counts:?}");
                eprintln!("{round} database drained after {:?}: {counts:?}", started.elapsed());
                break;
            }
            // Well inside the sweeper's 120 s: the stream itself delivers.
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{round} database: the queue did not drain: {counts:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        for process in &mut processes {
            process.kill().unwrap();
            process.wait().unwrap();
        }
        for observer in ["alice", "carol"] {
            assert_facts_once(&*store, observer, "alice", 40).await;
        }
        store.close().await;
        database.drop_database().await;
    }
    let mut options = roncho_nats::NatsOptions::new(&url);
    options.prefix = prefix;
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    roncho_nats::NatsWorkQueue::connect(
        options,
        std::sync::Arc::new(roncho_store::SqlWorkQueue::new(store.clone())),
    )
    .await
    .unwrap()
    .delete_streams()
    .await
    .unwrap();
    store.close().await;
    database.drop_database().await;
}

#[tokio::test]
async fn dialectic_processes_answer_with_and_without_a_model() {
    use roncho_proto::v1::dialectic_service_client::DialecticServiceClient;
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let message = store
        .create_messages(
            "w",
            "s",
            vec![roncho_core::model::NewMessage {
                peer_id: "alice".into(),
                content: "I keep bees on my roof.".into(),
                metadata: Default::default(),
                configuration: Default::default(),
                created_at: None,
                token_count: 7,
            }],
        )
        .await
        .unwrap()
        .remove(0);
    let fact = store
        .create_conclusions(
            "w",
            vec![roncho_core::model::NewConclusion {
                observer_id: "alice".into(),
                observed_id: "alice".into(),
                session_id: Some("s".into()),
                level: "explicit".into(),
                content: "Alice keeps bees".into(),
                premises: Vec::new(),
                source_ids: vec![message.id.clone()],
                metadata: Default::default(),
            }],
        )
        .await
        .unwrap()
        .remove(0);
    let script = Script::new(vec![()]);
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(script.clone());
    let llm_url = format!("{}/v1", roncho_http::serve_for_test(app).await);
    let logs = tempfile::tempdir().unwrap();
    let (with_model, without_model) = (free_address(), free_address());
    let mut processes = [
        serve_with(
            "dialectic",
            &with_model,
            &database.url,
            Some(&llm_url),
            &None,
            &logs.path().join("model.log"),
            &[],
        ),
        serve_with(
            "dialectic",
            &without_model,
            &database.url,
            None,
            &None,
            &logs.path().join("extractive.log"),
            &[],
        ),
    ];
    let ask = pb::ChatRequest {
        workspace_id: "w".into(),
        peer_id: "alice".into(),
        query: "Does Alice keep bees?".into(),
        reasoning_level: "minimal".into(),
        ..Default::default()
    };
    let mut modelled = DialecticServiceClient::new(connect(&with_model).await);
    let answer = modelled.chat(ask.clone()).await.unwrap().into_inner().content;
    assert_eq!(answer.as_deref(), Some("summary"), "the scripted model's text");
    let mut stream = modelled.chat_stream(ask.clone()).await.unwrap().into_inner();
    let mut streamed = String::new();
    while let Some(piece) = stream.message().await.unwrap() {
        streamed.push_str(&piece.delta);
    }
    assert_eq!(streamed, "summary");
    let first = script.requests.lock().unwrap()[0].clone();
    assert!(
        first.to_string().contains(&fact.id),
        "the process prefetched the observation from Postgres"
    );

    let mut extractive = DialecticServiceClient::new(connect(&without_model).await);
    let answer = extractive.chat(ask).await.unwrap().into_inner().content.unwrap();
    assert!(answer.starts_with("No LLM is configured"), "{answer}");
    assert!(answer.contains(&format!("[id:{}]", fact.id)), "{answer}");
    for process in &mut processes {
        process.kill().ok();
        process.wait().ok();
    }
    drop(store);
    database.drop_database().await;
}

/// A model whose first call never ends in time; later calls answer at once.
async fn stuck_once(
    State(calls): State<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    Json(body): Json<Value>,
) -> Json<Value> {
    if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_secs(600)).await;
    }
    Json(processes::facts_reply(&body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_gives_back_the_unit_in_hand_when_the_grace_period_ends() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let messages = ["I keep bees on my roof.", "The hives face north."]
        .into_iter()
        .map(|content| roncho_core::model::NewMessage {
            peer_id: "alice".into(),
            content: content.into(),
            metadata: Default::default(),
            configuration: Default::default(),
            created_at: None,
            token_count: 6,
        })
        .collect();
    store.create_messages("w", "s", messages).await.unwrap();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(stuck_once))
        .with_state(calls.clone());
    let llm_url = format!("{}/v1", roncho_http::serve_for_test(app).await);
    let logs = tempfile::tempdir().unwrap();
    // A long lease: without the hand-back the unit would wait a minute.
    let long_lease = [("RONCHO_DERIVER_LEASE_SECS", "60"), ("RONCHO_SHUTDOWN_GRACE_SECS", "1")];
    let deriver = |log: &str| {
        serve_with(
            "deriver",
            "127.0.0.1:0",
            &database.url,
            Some(&llm_url),
            &None,
            &logs.path().join(log),
            &long_lease,
        )
    };
    let mut stopping = deriver("stopping.log");
    let started = Instant::now();
    while calls.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the deriver never called the model"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let queue = roncho_store::SqlWorkQueue::new(store.clone());
    assert!(queue.totals().await.unwrap().in_progress > 0, "the unit is held");

    // Grace 1 s, then the exit: well within the time a lease would take.
    let status = processes::terminate(&mut stopping, Duration::from_secs(15)).await;
    let log = std::fs::read_to_string(logs.path().join("stopping.log")).unwrap_or_default();
    assert!(status.success(), "exit status {status}\n{log}");
    assert!(log.contains("giving their units back"), "{log}");
    let counts = queue.totals().await.unwrap();
    assert_eq!(
        (counts.in_progress, counts.completed),
        (0, 0),
        "the unit is free again and nothing was marked done"
    );

    // Another deriver takes the unit at once, not a minute later.
    let mut next = deriver("next.log");
    let restarted = Instant::now();
    loop {
        let counts = queue.totals().await.unwrap();
        if counts.pending == 0 && counts.in_progress == 0 {
            assert_eq!((counts.completed, counts.failed), (counts.total, 0), "{counts:?}");
            break;
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(30),
            "the unit was not taken over: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    next.kill().ok();
    next.wait().ok();
    drop(store);
    database.drop_database().await;
}
