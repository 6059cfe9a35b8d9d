//! One roncho per embedded data directory, and the one-shot commands on
//! it with or without a server: a second server on a served directory is
//! refused saying who serves it; a one-shot command finds the server that
//! serves the directory by its lock file (whatever port it chose), and,
//! when none does, answers from the directory itself, in its own process,
//! several at once without harm; a directory with nothing stored is not
//! created by a read.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::boundaries::{roncho, spawn_serve, start_serve};

fn run(home: &Path, args: &[&str]) -> Output {
    roncho(args, home).output().expect("running roncho")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn one_server_per_data_directory_and_one_shot_commands_with_or_without_it() {
    let home = tempfile::tempdir().unwrap();
    let server = spawn_serve(home.path(), &[], &[]).await;
    let data_dir = server.data.to_str().unwrap().to_owned();
    let written = reqwest::Client::new()
        .post(format!("{}/v3/workspaces/w/sessions/s/messages", server.base))
        .json(&json!({"messages": [
            {"peer_id": "alice", "content": "The lighthouse keeper collects sea glass"},
            {"peer_id": "bob", "content": "Bob repairs clocks on Sundays"},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(written.status(), 201);

    // A second server on the directory: refused at once, naming the first.
    let second = start_serve(home.path(), &[], &[]);
    let mut second = second.child;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = second.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "a second server on the directory runs"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!status.success());
    let held = roncho::dir_lock::holder(&server.data).expect("the directory is held");
    assert_eq!(held.rest.as_deref(), Some(server.base.as_str()), "{held:?}");
    assert!(!held.oneshot);

    // Found by its lock file: the command names only the directory.
    let by_dir = ["--data-dir", data_dir.as_str(), "--workspace", "w"];
    let ask = |command: &[&str]| -> Output {
        let args: Vec<&str> = command.iter().chain(by_dir.iter()).copied().collect();
        run(home.path(), &args)
    };
    let found = ask(&["search", "lighthouse"]);
    assert_eq!(found.status.code(), Some(0), "{found:?}");
    assert!(stdout(&found).contains("sea glass"), "{found:?}");

    // The server gone, the commands answer from the directory itself.
    drop(server);
    let started = Instant::now();
    while roncho::dir_lock::holder(Path::new(&data_dir)).is_some() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the lock outlives its server"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let found = ask(&["search", "clocks"]);
    assert_eq!(found.status.code(), Some(0), "{found:?}");
    assert!(stdout(&found).contains("Bob repairs clocks"), "{found:?}");
    // Its answer only: the server it ran says nothing unless it fails.
    let quiet = roncho(&["search", "clocks"], home.path())
        .args(by_dir)
        .env_remove("RONCHO_LOG")
        .output()
        .unwrap();
    assert_eq!(quiet.status.code(), Some(0), "{quiet:?}");
    assert!(quiet.stderr.is_empty(), "{}", String::from_utf8_lossy(&quiet.stderr));
    let context = ask(&["context", "s"]);
    assert_eq!(context.status.code(), Some(0), "{context:?}");
    assert!(stdout(&context).contains("lighthouse"), "{context:?}");
    assert_eq!(ask(&["search", "zeppelin"]).status.code(), Some(1));
    assert_eq!(ask(&["context", "nowhere"]).status.code(), Some(3));

    // Several at once: each waits for the directory, none fails.
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let mut command = roncho(&["search", "lighthouse"], home.path());
            command.args(by_dir);
            command.stdout(std::process::Stdio::piped()).spawn().unwrap()
        })
        .collect();
    for child in runs {
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{output:?}");
    }

    // Out of one directory and into a new one, with no server at all.
    let file = home.path().join("w.jsonl");
    let exported = ask(&["export", "-o", file.to_str().unwrap()]);
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let copy = home.path().join("copy");
    let copy_dir = copy.to_str().unwrap();
    let imported = run(home.path(), &["import", file.to_str().unwrap(), "--data-dir", copy_dir]);
    assert_eq!(imported.status.code(), Some(0), "{imported:?}");
    let found = run(
        home.path(),
        &["search", "sea glass", "--data-dir", copy_dir, "--workspace", "w"],
    );
    assert_eq!(found.status.code(), Some(0), "{found:?}");
    assert!(stdout(&found).contains("lighthouse keeper"), "{found:?}");

    // A read of a directory that holds nothing: 3, and nothing created.
    let nowhere = home.path().join("nowhere");
    let missing = run(
        home.path(),
        &[
            "search",
            "x",
            "--data-dir",
            nowhere.to_str().unwrap(),
            "--workspace",
            "w",
        ],
    );
    assert_eq!(missing.status.code(), Some(3), "{missing:?}");
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("no memory is stored there"),
        "{missing:?}"
    );
    assert!(!nowhere.join(roncho_store::EMBEDDED_FILE).exists());
}
