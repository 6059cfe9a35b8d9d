//! An erasure hides at once and survives a crash (issue 57): a session is
//! deleted through the REST edge of a `roncho serve` process, which is
//! killed with SIGKILL at points of the erasure (as the request arrives,
//! and 0.1, 0.4, 1 and 2.5 s into it). At the first request the restarted
//! process answers, no read returns a message of the session (its listing,
//! a message by id, workspace search, the session's context and
//! summaries) unless the delete never committed, in which case the whole
//! session is there; the erasure then finishes on its own, its receipt
//! complete, and the other sessions are whole. On SQLite (three sessions
//! of 20,000 messages among them), and on Postgres (`RONCHO_TEST_DATABASE_URL`).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support;

const WORKSPACE: &str = "w";

/// How long a deriver holds a work unit between renewals: shorter than
/// the default (60 s), which the killed process's hold on the `deletion`
/// unit would outlast; units run longer than it, renewed every third of it
/// while they work.
const LEASE_SECS: &str = "5";

/// Where the store is: SQLite in the data directory, or a Postgres database.
#[derive(Clone)]
enum Backend {
    Sqlite,
    Postgres(String),
}

/// A `roncho serve` process with its REST edge on a free loopback port.
struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `roncho serve` with its data in `home` and waits until it
    /// answers; returns it and how long it took to.
    async fn start(home: &std::path::Path, backend: &Backend) -> (Self, Duration) {
        let (listen, rest) = (
            format!("127.0.0.1:{}", support::free_port()),
            format!("127.0.0.1:{}", support::free_port()),
        );
        let mut command = Command::new(env!("CARGO_BIN_EXE_roncho"));
        command
            .args(["serve", "--listen", &listen, "--rest-listen", &rest, "--log", "warn"])
            .arg("--data-dir")
            .arg(home)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RONCHO_EMBEDDING_PROVIDER", "none")
            // The killed process may have held the `deletion` unit: it is
            // taken over once the lease runs out.
            .env("RONCHO_DERIVER_LEASE_SECS", LEASE_SECS);
        if let Backend::Postgres(url) = backend {
            command.args(["--database-url", url]);
        }
        let started = Instant::now();
        let child = command.stdout(Stdio::null()).spawn().unwrap();
        let server = Server {
            child,
            base: format!("http://{rest}"),
        };
        let http = reqwest::Client::new();
        while started.elapsed() < Duration::from_secs(60) {
            let health = http.get(format!("{}/health", server.base)).send().await;
            if health.is_ok_and(|reply| reply.status() == 200) {
                return (server, started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("roncho serve did not come up on {rest}");
    }

    /// SIGKILL, and the process reaped.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// A REST call's status and body.
async fn call(method: reqwest::Method, url: String, body: Option<Value>) -> (u16, String) {
    let mut request = reqwest::Client::new().request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let reply = request.send().await.unwrap();
    (reply.status().as_u16(), reply.text().await.unwrap())
}

/// Writes `count` messages to `session`, each holding `word`, in batches
/// of 100, four at a time; returns the first, middle and last ids.
async fn write_session(base: &str, session: &str, word: &str, count: usize) -> Vec<String> {
    let url = format!("{base}/v3/workspaces/{WORKSPACE}/sessions/{session}/messages");
    let mut ids = vec![String::new(); count];
    for wave in (0..count).step_by(400) {
        let batches = (wave..(wave + 400).min(count)).step_by(100).map(|start| {
            let url = url.clone();
            let messages: Vec<Value> = (start..(start + 100).min(count))
                .map(|i| {
                    let peer = ["alice", "bob"][i % 2];
                    json!({
                        "peer_id": peer,
                        "content": format!("{word} turn {i}: the weather is mild today"),
                    })
                })
                .collect();
            async move {
                let (status, body) = call(reqwest::Method::POST, url, Some(json!({ "messages": messages }))).await;
                assert_eq!(status, 201, "{body}");
                (start, body)
            }
        });
        for (start, body) in futures::future::join_all(batches).await {
            let created: Vec<Value> = serde_json::from_str(&body).unwrap();
            for (offset, message) in created.iter().enumerate() {
                ids[start + offset] = message["id"].as_str().unwrap().to_owned();
            }
        }
    }
    vec![ids[0].clone(), ids[count / 2].clone(), ids[count - 1].clone()]
}

/// The replies of every read of `session` and of workspace search for
/// `word`, each `(what, status, body)`.
async fn reads(base: &str, session: &str, word: &str, ids: &[String]) -> Vec<(String, u16, String)> {
    let session_url = format!("{base}/v3/workspaces/{WORKSPACE}/sessions/{session}");
    let mut replies = Vec::new();
    let (status, body) = call(
        reqwest::Method::POST,
        format!("{session_url}/messages/list?size=100"),
        Some(json!({})),
    )
    .await;
    replies.push(("list".to_owned(), status, body));
    for id in ids {
        let (status, body) = call(reqwest::Method::GET, format!("{session_url}/messages/{id}"), None).await;
        replies.push((format!("get {id}"), status, body));
    }
    let (status, body) = call(
        reqwest::Method::POST,
        format!("{base}/v3/workspaces/{WORKSPACE}/search"),
        Some(json!({ "query": word, "limit": 10 })),
    )
    .await;
    replies.push(("search".to_owned(), status, body));
    let (status, body) = call(reqwest::Method::GET, format!("{session_url}/context"), None).await;
    replies.push(("context".to_owned(), status, body));
    let (status, body) = call(reqwest::Method::GET, format!("{session_url}/summaries"), None).await;
    replies.push(("summaries".to_owned(), status, body));
    replies
}

/// How many messages `session` lists.
async fn listed(base: &str, session: &str) -> Option<u64> {
    let (status, body) = call(
        reqwest::Method::POST,
        format!("{base}/v3/workspaces/{WORKSPACE}/sessions/{session}/messages/list?size=1"),
        Some(json!({})),
    )
    .await;
    (status == 200).then(|| serde_json::from_str::<Value>(&body).unwrap()["total"].as_u64().unwrap())
}

/// The running or complete receipt of `session`'s erasure, as the store
/// holds it while no process runs: `(id, state, messages erased)`.
async fn receipt_in_store(home: &std::path::Path, backend: &Backend, session: &str) -> Option<(String, String, i64)> {
    let options = match backend {
        Backend::Sqlite => roncho_store::StoreOptions::embedded(home),
        Backend::Postgres(url) => roncho_store::StoreOptions::new(url.clone()),
    };
    let store = roncho_store::connect(&options).await.unwrap();
    let row = sqlx::query(
        "SELECT id, state, counts FROM erasure_receipts WHERE workspace_name = $1 AND scope = 'session' \
         AND target = $2",
    )
    .bind(WORKSPACE)
    .bind(session.to_owned())
    .fetch_optional(store.pool())
    .await
    .unwrap();
    store.close().await;
    row.map(|row| {
        let counts: Value = serde_json::from_str(&sqlx::Row::get::<String, _>(&row, "counts")).unwrap();
        (
            sqlx::Row::get(&row, "id"),
            sqlx::Row::get(&row, "state"),
            counts["messages"].as_i64().unwrap_or(0),
        )
    })
}

/// One session to delete, with the SIGKILL `delay` after the request.
struct Round {
    session: &'static str,
    word: &'static str,
    messages: usize,
    delay: Duration,
}

/// Writes every round's session, then, round by round: deletes it, kills
/// the process `delay` later, restarts it and reads at once, then waits
/// for the erasure to complete on its own.
async fn crash_while_erasing(backend: Backend, rounds: &[Round]) {
    let home = tempfile::tempdir().unwrap();
    let (server, _) = Server::start(home.path(), &backend).await;
    let written = Instant::now();
    let mut ids = Vec::new();
    for round in rounds {
        ids.push(write_session(&server.base, round.session, round.word, round.messages).await);
    }
    eprintln!(
        "wrote {} messages in {:?}",
        rounds.iter().map(|round| round.messages).sum::<usize>(),
        written.elapsed()
    );
    let mut server = Some(server);
    for (index, round) in rounds.iter().enumerate() {
        let running = server.take().unwrap();
        let url = format!("{}/v3/workspaces/{WORKSPACE}/sessions/{}", running.base, round.session);
        let sent = Instant::now();
        let delete = tokio::spawn(async move { reqwest::Client::new().delete(url).send().await });
        tokio::time::sleep(round.delay).await;
        running.kill();
        let killed_at = sent.elapsed();
        let acknowledged = delete.await.unwrap().is_ok_and(|reply| reply.status().is_success());

        let receipt = receipt_in_store(home.path(), &backend, round.session).await;
        if acknowledged {
            assert!(receipt.is_some(), "an acknowledged delete has its receipt");
        }
        let (restarted, answered_in) = Server::start(home.path(), &backend).await;
        let base = restarted.base.clone();
        let first_read = Instant::now();
        let seen = reads(&base, round.session, round.word, &ids[index]).await;
        let read_in = first_read.elapsed();
        let Some((receipt_id, state_at_kill, erased_at_kill)) = receipt else {
            assert!(
                round.delay < Duration::from_millis(400),
                "{}: the delete was not accepted {killed_at:?} after it was sent",
                round.session
            );
            // The delete never committed: the session is whole, not part of it.
            assert_eq!(
                listed(&base, round.session).await,
                Some(round.messages as u64),
                "a delete killed before it was accepted leaves the whole session"
            );
            eprintln!(
                "{}: killed {killed_at:?} after the request, before it was accepted",
                round.session
            );
            server = Some(restarted);
            continue;
        };
        for (what, status, body) in &seen {
            assert!(
                !body.contains(round.word),
                "{}: {what} answered {status} with the session's text after the restart: {}",
                round.session,
                &body[..body.len().min(300)]
            );
            assert!(matches!(status, 200 | 404), "{what}: {status} {body}");
        }
        // The erasure finishes without help.
        let receipt_url = format!("{base}/v3/workspaces/{WORKSPACE}/erasures/{receipt_id}");
        let (_, body) = call(reqwest::Method::GET, receipt_url.clone(), None).await;
        let state_after_reads = serde_json::from_str::<Value>(&body).unwrap()["state"].clone();
        let restarted_at = Instant::now();
        loop {
            let (status, body) = call(reqwest::Method::GET, receipt_url.clone(), None).await;
            assert_eq!(status, 200, "{body}");
            let receipt: Value = serde_json::from_str(&body).unwrap();
            if receipt["state"] == "complete" {
                assert_eq!(receipt["counts"]["messages"], round.messages, "{receipt}");
                break;
            }
            assert!(
                restarted_at.elapsed() < Duration::from_secs(60),
                "the erasure did not complete after the restart: {receipt}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        eprintln!(
            "{}: {} messages, killed {killed_at:?} after the request ({state_at_kill}, {erased_at_kill} erased), \
             answered {answered_in:?} after the restart, read in {read_in:?} ({state_after_reads} after), \
             complete {:?} later",
            round.session,
            round.messages,
            restarted_at.elapsed()
        );
        assert_eq!(listed(&base, round.session).await, None);
        for later in &rounds[index + 1..] {
            assert_eq!(
                listed(&base, later.session).await,
                Some(later.messages as u64),
                "{} is whole",
                later.session
            );
        }
        server = Some(restarted);
    }
}

#[tokio::test]
async fn a_session_erasure_killed_at_any_point_leaves_nothing_readable_on_sqlite() {
    let rounds = [
        Round {
            session: "first",
            word: "quokka",
            messages: 2_000,
            delay: Duration::ZERO,
        },
        Round {
            session: "second",
            word: "axolotl",
            messages: 2_000,
            delay: Duration::from_millis(100),
        },
        Round {
            session: "big",
            word: "narwhal",
            messages: 20_000,
            delay: Duration::from_millis(400),
        },
        Round {
            session: "third",
            word: "pangolin",
            messages: 20_000,
            delay: Duration::from_millis(1_000),
        },
        Round {
            session: "fourth",
            word: "okapi",
            messages: 20_000,
            delay: Duration::from_millis(2_500),
        },
    ];
    crash_while_erasing(Backend::Sqlite, &rounds).await;
}

#[tokio::test]
async fn a_session_erasure_killed_at_any_point_leaves_nothing_readable_on_postgres() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let rounds = [
        Round {
            session: "first",
            word: "quokka",
            messages: 2_000,
            delay: Duration::from_millis(100),
        },
        Round {
            session: "second",
            word: "axolotl",
            messages: 4_000,
            delay: Duration::from_millis(400),
        },
    ];
    crash_while_erasing(Backend::Postgres(database.url.clone()), &rounds).await;
    database.drop_database().await;
}
