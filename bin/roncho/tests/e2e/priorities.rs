//! The background roles run below the requests' priority, their SQLite
//! statements too, and nothing that serves requests inherits theirs:
//! `roncho serve` with every role on SQLite takes writes, its reconciler
//! embeds them and its deriver derives from them, and then every thread of
//! the background runtime runs at nice 10, and so do the threads of the
//! SQLite connections the background reads on (a connection's thread takes
//! the priority of the thread that opened it), while the request runtime's
//! threads, SQLite's writer and the requests' sixteen connections run at
//! the process's own, 0.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::processes::{connect, free_address, terminate};

/// A child process killed if the test ends before stopping it.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Each thread of process `pid`: its name (as the kernel keeps it, 15
/// bytes at most) and its nice value.
fn threads_of(pid: u32) -> Vec<(String, i64)> {
    let mut threads = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = entry.unwrap().path();
        let (Ok(name), Ok(stat)) = (
            std::fs::read_to_string(task.join("comm")),
            std::fs::read_to_string(task.join("stat")),
        ) else {
            continue; // the thread ended while being read
        };
        // After the name in parentheses: state is field 3, nice field 19.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        threads.push((name.trim().to_owned(), fields[16].parse().unwrap()));
    }
    threads
}

#[tokio::test]
async fn background_roles_run_below_requests_and_sqlite_threads_do_not_inherit_it() {
    let dir = tempfile::tempdir().unwrap();
    let listen = free_address();
    let mut server = KilledOnDrop(
        Command::new(env!("CARGO_BIN_EXE_roncho"))
            .args(["serve", "--listen", &listen, "--rest-listen", "off", "--log", "warn"])
            .arg("--data-dir")
            .arg(dir.path())
            .env("RONCHO_EMBEDDING_PROVIDER", "test-hashing")
            .env("RONCHO_EMBEDDING_DIMENSIONS", "32")
            .env_remove("RONCHO_EMBEDDING_MODEL_DIR")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting roncho serve"),
    );
    let channel = connect(&listen).await;
    for batch in 0..20 {
        let texts: Vec<String> = (0..20)
            .map(|line| format!("batch {batch} line {line}: the kettle boils while the tide turns"))
            .collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        crate::support::write_as(&channel, ["alice", "bob"][batch % 2], &texts).await;
    }

    // The background roles have done their work: every message embedded and derived from.
    let mut options = roncho_store::StoreOptions::embedded(dir.path());
    options.max_connections = 1;
    let store = std::sync::Arc::new(roncho_store::connect(&options).await.unwrap());
    let queue = roncho_store::SqlWorkQueue::new(store.clone());
    let started = Instant::now();
    loop {
        let counts = queue.totals().await.unwrap();
        let unsynced = roncho_core::store::SyncLedger::sync_counts(&*store, roncho_core::model::SyncKind::Message)
            .await
            .unwrap()
            .pending;
        if counts.pending == 0 && counts.in_progress == 0 && counts.completed > 0 && unsynced == 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the background roles did not finish: {counts:?}, {unsynced} unsynced"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let threads = threads_of(server.0.id());
    let mut by_kind: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (name, nice) in &threads {
        let kind = if name.starts_with("roncho-backgrou") {
            "background"
        } else if name.starts_with("sqlx-sqlite") {
            "sqlite"
        } else if name.starts_with("tokio-rt") || name.starts_with("tokio-runtime") {
            "requests"
        } else {
            "other"
        };
        by_kind.entry(kind).or_default().push(*nice);
    }
    eprintln!("nice values by thread kind: {by_kind:?}");
    let background = by_kind.get("background").expect("background threads run");
    assert!(background.iter().all(|&nice| nice == 10), "{by_kind:?}");
    let requests = by_kind.get("requests").expect("request threads run");
    assert!(requests.iter().all(|&nice| nice == 0), "{by_kind:?}");
    let sqlite = by_kind.get("sqlite").expect("SQLite connections run");
    assert!(sqlite.iter().all(|&nice| nice == 0 || nice == 10), "{by_kind:?}");
    // The writer and the requests' sixteen, each opened at start-up, at
    // the process's priority: none of them was opened by the background.
    assert_eq!(sqlite.iter().filter(|&&nice| nice == 0).count(), 17, "{by_kind:?}");
    // The background read on connections of its own, at its priority.
    assert!(sqlite.contains(&10), "{by_kind:?}");

    assert!(terminate(&mut server.0, Duration::from_secs(20)).await.success());
    store.close().await;
}
