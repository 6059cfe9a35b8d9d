//! Separate `roncho serve --roles deriver` processes over one Postgres share
//! the work queue; one is killed with SIGKILL mid-batch. Every expected
//! observation exists exactly once, each work unit's batches were derived
//! in message order, and the queue drains with nothing failed.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use roncho_core::model::{JsonObject, NewMessage, PageRequest, SessionPeerConfig};
use roncho_core::store::Store;
use serde_json::{Value, json};

type Script = roncho_http::Script<()>;

/// A deterministic model: one fact per transcript line, after 300 ms.
async fn completions(State(script): State<Script>, Json(body): Json<Value>) -> Json<Value> {
    script.answer(body.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let transcript = body["messages"][1]["content"].as_str().unwrap_or_default().to_owned();
    let content = if body.get("response_format").is_some() {
        let facts: Vec<Value> = transcript
            .lines()
            .filter_map(|line| {
                line.split_once(": ")
                    .map(|(_, text)| json!({"content": format!("fact {text}")}))
            })
            .collect();
        json!({"explicit": facts}).to_string()
    } else {
        "summary".to_owned()
    };
    Json(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}))
}

fn deriver(database_url: &str, llm_url: &str, log: &std::path::Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    Command::new(env!("CARGO_BIN_EXE_roncho"))
        .args([
            "serve",
            "--roles",
            "deriver",
            "--listen",
            "127.0.0.1:0",
            "--log",
            "warn",
        ])
        .env("RONCHO_DATABASE_URL", database_url)
        .env("RONCHO_LLM_BASE_URL", llm_url)
        .env("RONCHO_LLM_MODEL", "scripted")
        .env("RONCHO_EMBEDDING_PROVIDER", "none")
        .env("RONCHO_DERIVER_LEASE_SECS", "2")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting a deriver process")
}

#[tokio::test]
async fn a_killed_deriver_loses_nothing_and_duplicates_nothing() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let watcher = SessionPeerConfig {
        observe_me: None,
        observe_others: Some(true),
    };
    let peers = ["alice", "bob", "carol"];
    for session in ["s1", "s2", "s3"] {
        store
            .get_or_create_session("w", session, None, None, vec![("carol".into(), watcher)])
            .await
            .unwrap();
        for batch in 0..2 {
            let messages = (0..40)
                .map(|i| NewMessage {
                    peer_id: peers[i % 2].to_owned(),
                    content: format!("{session} batch {batch} line {i}"),
                    metadata: JsonObject::new(),
                    configuration: JsonObject::new(),
                    created_at: None,
                    token_count: 6,
                })
                .collect();
            store.create_messages("w", session, messages).await.unwrap();
        }
    }
    let script = Script::new(vec![()]);
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(script.clone());
    let llm_url = format!("{}/v1", roncho_http::serve_for_test(app).await);

    let logs = tempfile::tempdir().unwrap();
    let mut doomed = deriver(&database.url, &llm_url, &logs.path().join("doomed.log"));
    let mut survivor = deriver(&database.url, &llm_url, &logs.path().join("survivor.log"));
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
    survivor.kill().unwrap();
    survivor.wait().unwrap();
    for name in ["doomed.log", "survivor.log"] {
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
