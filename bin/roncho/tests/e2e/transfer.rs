//! `roncho export` and `roncho import` as a user runs them, between two
//! servers on the two backends: a workspace goes out of an embedded
//! (SQLite) server and into one on Postgres, and its export there is the
//! same file byte for byte; nothing erased before goes with it; a file
//! that is not a whole export writes nothing; keys that may not read the
//! whole workspace export nothing.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::boundaries::{Spawned, roncho, spawn_serve};

/// An admin-keyed server and the flags that reach it from the CLI.
struct Served {
    server: Spawned,
    key: String,
    flags: Vec<String>,
}

impl Served {
    async fn start(home: &Path, args: &[&str]) -> Self {
        let mut all = vec!["--local-key"];
        all.extend_from_slice(args);
        let server = spawn_serve(home, &all, &[]).await;
        let key = std::fs::read_to_string(server.data.join("auth").join("admin.key"))
            .unwrap()
            .trim()
            .to_owned();
        // A server on Postgres holds no data-directory lock: it is named.
        let (how, at) = match args.contains(&"--database-url") {
            true => ("--addr", server.base.clone()),
            false => ("--rest-listen", format!("127.0.0.1:{}", server.rest)),
        };
        let flags = vec![
            "--data-dir".to_owned(),
            server.data.to_str().unwrap().to_owned(),
            how.to_owned(),
            at,
        ];
        Self { server, key, flags }
    }

    /// `roncho COMMAND…` reaching this server with its local key.
    fn cli(&self, home: &Path, command: &[&str]) -> Output {
        let mut args: Vec<&str> = command.to_vec();
        args.extend(self.flags.iter().map(String::as_str));
        roncho(&args, home).output().expect("running roncho")
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = reqwest::Client::new()
            .request(method, format!("{}{path}", self.server.base))
            .bearer_auth(&self.key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let reply = request.send().await.unwrap();
        let status = reply.status().as_u16();
        let text = reply.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let (status, reply) = self.call(reqwest::Method::POST, path, Some(body)).await;
        assert!((200..300).contains(&status), "POST {path}: {status} {reply}");
        reply
    }

    /// Waits until workspace `w`'s sessions have no derivation left to do
    /// (webhook deliveries to a host that does not answer go on retrying).
    async fn settled(&self) {
        let started = Instant::now();
        loop {
            let (_, status) = self
                .call(reqwest::Method::GET, "/v3/workspaces/w/queue/status", None)
                .await;
            let open = status["sessions"]
                .as_object()
                .into_iter()
                .flat_map(|sessions| sessions.values())
                .flat_map(|session| ["pending_work_units", "in_progress_work_units"].map(|field| &session[field]))
                .map(|count| count.as_i64().unwrap_or(0))
                .sum::<i64>();
            if open == 0 {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the queue did not settle: {status}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn text(output: &[u8]) -> String {
    String::from_utf8_lossy(output).into_owned()
}

/// Writes a workspace with every kind of thing an export carries, erases
/// a message and a conclusion in it, and returns the words only they held.
async fn write_workspace(source: &Served) -> [&'static str; 2] {
    source
        .post(
            "/v3/workspaces",
            json!({"id": "w", "metadata": {"team": "ops"}, "configuration": {"deriver": {"enabled": true}}}),
        )
        .await;
    source
        .post(
            "/v3/workspaces/w/peers",
            json!({"id": "alice", "metadata": {"role": "user", "nested": {"a": [1, 2]}}}),
        )
        .await;
    source
        .post(
            "/v3/workspaces/w/sessions",
            json!({"id": "s1", "metadata": {"topic": "tea"},
                   "peers": {"alice": {}, "bob": {"observe_me": false, "observe_others": true}}}),
        )
        .await;
    let written = source
        .post(
            "/v3/workspaces/w/sessions/s1/messages",
            json!({"messages": [
                {"peer_id": "alice", "content": "I drink oolong every morning", "metadata": {"mood": "calm"},
                 "created_at": "2024-01-02T03:04:05.123456Z"},
                {"peer_id": "bob", "content": "Zanzibar is where I was born"},
                {"peer_id": "alice", "content": "Über-long days, naïve café ☕ — and a quote \" and a \\ too"},
                {"peer_id": "bob", "content": "I moved to Lisbon last spring"},
            ]}),
        )
        .await;
    let erased_message = written[1]["id"].as_str().unwrap().to_owned();
    let kept_message = written[3]["id"].as_str().unwrap().to_owned();
    // Bob writes in s2 and leaves it: his messages stay, he is no member.
    source
        .post("/v3/workspaces/w/sessions", json!({"id": "s2", "peers": {"zed": {}}}))
        .await;
    // Members joined out of their names' order: they come back in it.
    source
        .post("/v3/workspaces/w/sessions/s2/peers", json!({"bob": {}, "alice": {}}))
        .await;
    source
        .post(
            "/v3/workspaces/w/sessions/s2/messages",
            json!({"messages": [{"peer_id": "bob", "content": "Bob's farewell note"},
                                {"peer_id": "alice", "content": "Alice stays behind"}]}),
        )
        .await;
    let (status, left) = source
        .call(
            reqwest::Method::DELETE,
            "/v3/workspaces/w/sessions/s2/peers",
            Some(json!(["bob"])),
        )
        .await;
    assert!((200..300).contains(&status), "{status} {left}");
    source
        .post(
            "/v3/workspaces/w/webhooks",
            json!({"url": "https://hooks.example.com/roncho"}),
        )
        .await;
    let (status, card) = source
        .call(
            reqwest::Method::PUT,
            "/v3/workspaces/w/peers/alice/card",
            Some(json!({"peer_card": ["Drinks oolong", "Lives in Porto"]})),
        )
        .await;
    assert!((200..300).contains(&status), "{status} {card}");
    let concluded = source
        .post(
            "/v3/workspaces/w/conclusions",
            json!({"conclusions": [
                {"content": "Bob lives in Lisbon", "observer_id": "alice", "observed_id": "bob",
                 "session_id": "s1", "source_message_ids": [kept_message]},
                {"content": "Quetzalcoatl is bob's secret", "observer_id": "alice", "observed_id": "bob",
                 "session_id": "s1"},
            ]}),
        )
        .await;
    source.settled().await;
    let (status, _) = source
        .call(
            reqwest::Method::DELETE,
            &format!("/v3/workspaces/w/sessions/s1/messages/{erased_message}"),
            None,
        )
        .await;
    assert!((200..300).contains(&status), "the message is erased: {status}");
    let secret = concluded[1]["id"].as_str().unwrap();
    let (status, _) = source
        .call(
            reqwest::Method::DELETE,
            &format!("/v3/workspaces/w/conclusions/{secret}"),
            None,
        )
        .await;
    assert!((200..300).contains(&status), "the conclusion is erased: {status}");
    source.settled().await;
    ["Zanzibar", "Quetzalcoatl"]
}

/// The records of an export file, by kind.
fn kinds(file: &str) -> Vec<String> {
    file.lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_workspace_exported_from_sqlite_and_imported_into_postgres_exports_the_same_bytes() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let (home_a, home_b) = (home.path().join("a"), home.path().join("b"));
    std::fs::create_dir_all(&home_a).unwrap();
    std::fs::create_dir_all(&home_b).unwrap();
    let source = Served::start(&home_a, &[]).await;
    let target = Served::start(&home_b, &["--database-url", &database.url]).await;
    let erased = write_workspace(&source).await;

    let first = home.path().join("first.jsonl");
    let exported = source.cli(
        home.path(),
        &["export", "--workspace", "w", "-o", first.to_str().unwrap()],
    );
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    assert!(text(&exported.stderr).contains("exported"), "{exported:?}");
    let file = std::fs::read_to_string(&first).unwrap();
    for word in erased {
        assert!(!file.contains(word), "erased `{word}` is not exported:\n{file}");
    }
    let kinds_written = kinds(&file);
    assert_eq!(kinds_written.first().map(String::as_str), Some("export"));
    assert_eq!(kinds_written.last().map(String::as_str), Some("end"));
    for kind in [
        "workspace",
        "webhook",
        "peer",
        "peer_card",
        "session",
        "message",
        "conclusion",
    ] {
        assert!(
            kinds_written.iter().any(|written| written == kind),
            "a {kind} record:\n{file}"
        );
    }
    assert!(!home.path().join("first.jsonl.partial").exists());

    // Into the other backend, then out again: the same bytes.
    let imported = target.cli(home.path(), &["import", first.to_str().unwrap(), "--json"]);
    assert_eq!(imported.status.code(), Some(0), "{imported:?}");
    let counts: Value = serde_json::from_slice(&imported.stdout).unwrap();
    let messages = kinds_written.iter().filter(|kind| *kind == "message").count() as u64;
    assert_eq!(counts["messages"]["new"], messages, "{counts}");
    assert_eq!(counts["workspaces"]["new"], 1, "{counts}");
    let second = home.path().join("second.jsonl");
    let again = target.cli(
        home.path(),
        &["export", "--workspace", "w", "-o", second.to_str().unwrap()],
    );
    assert_eq!(again.status.code(), Some(0), "{again:?}");
    assert_eq!(
        std::fs::read_to_string(&second).unwrap(),
        file,
        "the round trip is exact"
    );

    // Imported again: nothing new, and nothing newer undone.
    let (status, changed) = target
        .call(
            reqwest::Method::PUT,
            "/v3/workspaces/w/peers/alice",
            Some(json!({"metadata": {"role": "changed since"}})),
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    let (_, listed) = target
        .call(reqwest::Method::POST, "/v3/workspaces/w/peers/list", Some(json!({})))
        .await;
    assert!(listed.to_string().contains("changed since"), "{changed} {listed}");
    let (status, reply) = target
        .call(
            reqwest::Method::PUT,
            "/v3/workspaces/w/sessions/s1/peers/bob/config",
            Some(json!({"observe_me": true, "observe_others": false})),
        )
        .await;
    let (_, sessions) = target
        .call(reqwest::Method::POST, "/v3/workspaces/w/sessions/list", Some(json!({})))
        .await;
    assert!((200..300).contains(&status), "{status} {reply} {sessions}");
    let repeated = target.cli(
        home.path(),
        &["import", first.to_str().unwrap(), "--json", "--batch", "3"],
    );
    assert_eq!(repeated.status.code(), Some(0), "{repeated:?}");
    let counts: Value = serde_json::from_slice(&repeated.stdout).unwrap();
    for (kind, tally) in counts.as_object().unwrap() {
        if kind != "notes" {
            assert_eq!(tally["new"], 0, "{kind}: {counts}");
        }
    }
    assert_eq!(counts["messages"]["present"], messages, "{counts}");
    let (_, peers) = target
        .call(reqwest::Method::POST, "/v3/workspaces/w/peers/list", Some(json!({})))
        .await;
    let now = target.cli(home.path(), &["export", "--workspace", "w"]);
    assert!(
        peers.to_string().contains("changed since"),
        "{peers}\n{}\n{}",
        text(&now.stdout),
        text(&repeated.stdout)
    );
    let (_, config) = target
        .call(
            reqwest::Method::GET,
            "/v3/workspaces/w/sessions/s1/peers/bob/config",
            None,
        )
        .await;
    assert_eq!(config["observe_me"], true, "an opt-in is not undone: {config}");

    // Into another workspace of the same server: its ids are taken, and
    // nothing of it is written.
    let elsewhere = source.cli(home.path(), &["import", first.to_str().unwrap(), "--workspace", "copy"]);
    assert_eq!(elsewhere.status.code(), Some(2), "{elsewhere:?}");
    assert!(text(&elsewhere.stderr).contains("is taken"), "{elsewhere:?}");
    let (_, workspaces) = source
        .call(reqwest::Method::POST, "/v3/workspaces/list", Some(json!({})))
        .await;
    assert!(!workspaces.to_string().contains("\"copy\""), "{workspaces}");

    // Search by the imported words answers on the target.
    let found = target.cli(home.path(), &["search", "oolong", "--workspace", "w"]);
    assert_eq!(found.status.code(), Some(0), "{found:?}");

    // A session's part: its messages and no other session's.
    let part = source.cli(home.path(), &["export", "--workspace", "w", "--session", "s2"]);
    assert_eq!(part.status.code(), Some(0), "{part:?}");
    let part = text(&part.stdout);
    assert!(
        part.contains("Bob's farewell note") && !part.contains("oolong"),
        "{part}"
    );
    let missing = source.cli(home.path(), &["export", "--workspace", "w", "--session", "nowhere"]);
    assert_eq!(missing.status.code(), Some(3), "{missing:?}");

    // Killed as they drop, before their database goes.
    drop((source, target));
    database.drop_database().await;
}

#[tokio::test]
async fn an_export_read_while_rows_are_erased_holds_every_other_row_once() {
    let home = tempfile::tempdir().unwrap();
    let server = Served::start(home.path(), &[]).await;
    let mut records = vec![
        json!({"kind": "workspace", "id": "w"}),
        json!({"kind": "peer", "id": "alice"}),
        json!({"kind": "peer", "id": "bob"}),
    ];
    let ids: Vec<String> = (0..1_500).map(|index| format!("c{index:04}")).collect();
    for (index, id) in ids.iter().enumerate() {
        records.push(json!({
            "kind": "conclusion", "id": id, "observer_id": "alice", "observed_id": "bob", "level": "explicit",
            "content": format!("fact number {index}"), "times_derived": 1,
            "created_at": format!("2025-01-01T00:{:02}:{:02}Z", index / 60 % 60, index % 60),
        }));
    }
    for chunk in records.chunks(1_000) {
        server.post("/v3/workspaces/w/import", json!({"records": chunk})).await;
    }
    // A reader that has taken the first lines only: the export waits for it.
    let mut reply = reqwest::Client::new()
        .get(format!("{}/v3/workspaces/w/export", server.server.base))
        .bearer_auth(&server.key)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let mut body = Vec::new();
    while body.iter().filter(|byte| **byte == b'\n').count() < 100 {
        body.extend_from_slice(&reply.chunk().await.unwrap().unwrap());
    }
    // Meanwhile the first 200 are erased.
    for id in &ids[..200] {
        let (status, _) = server
            .call(
                reqwest::Method::DELETE,
                &format!("/v3/workspaces/w/conclusions/{id}"),
                None,
            )
            .await;
        assert!((200..300).contains(&status), "{status}");
    }
    while let Some(chunk) = reply.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(body).unwrap();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        if record["kind"] == "conclusion" {
            *seen.entry(record["id"].as_str().unwrap().to_owned()).or_default() += 1;
        }
    }
    assert!(
        text.ends_with(&format!("\"records\":{}}}\n", text.lines().count() - 2)),
        "whole"
    );
    assert!(seen.values().all(|times| *times == 1), "none twice");
    for id in &ids[200..] {
        assert!(seen.contains_key(id), "{id}, live throughout, is exported");
    }
}

#[tokio::test]
async fn a_file_that_is_not_a_whole_export_writes_nothing_and_narrow_keys_export_nothing() {
    let home = tempfile::tempdir().unwrap();
    let server = Served::start(home.path(), &[]).await;
    server
        .post(
            "/v3/workspaces/w/sessions/s/messages",
            json!({"messages": [
        {"peer_id": "alice", "content": "first"}, {"peer_id": "bob", "content": "second"}]}),
        )
        .await;
    let whole = home.path().join("whole.jsonl");
    let exported = server.cli(
        home.path(),
        &["export", "--workspace", "w", "-o", whole.to_str().unwrap()],
    );
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let file = std::fs::read_to_string(&whole).unwrap();
    let lines: Vec<&str> = file.lines().collect();

    // Every cut, a line changed, a record of another kind: exit 2, and
    // workspace `copy` never comes to exist.
    let mut broken: Vec<String> = (1..lines.len()).map(|cut| lines[..cut].join("\n")).collect();
    broken.push(file.replacen("\"kind\":\"message\"", "\"kind\":\"mystery\"", 1));
    broken.push(file.replacen("\"kind\":\"end\",\"records\":", "\"kind\":\"end\",\"records\":9", 1));
    broken.push(file.replacen("\"content\":\"second\"", "\"content\":7", 1));
    broken.push(format!("{file}{{\"kind\":\"peer\",\"id\":\"late\"}}\n"));
    for (index, variant) in broken.iter().enumerate() {
        let path = home.path().join(format!("broken-{index}.jsonl"));
        std::fs::write(&path, variant).unwrap();
        let refused = server.cli(home.path(), &["import", path.to_str().unwrap(), "--workspace", "copy"]);
        assert_eq!(
            refused.status.code(),
            Some(2),
            "variant {index}: {refused:?}\n{variant}"
        );
    }
    // Records wrong on their own are found before anything is sent, by
    // line; records wrong together (a session no one wrote, an id twice)
    // by the server before it writes any.
    let message_line = lines
        .iter()
        .position(|line| line.contains("\"kind\":\"message\""))
        .unwrap();
    let message = lines[message_line];
    let edited = |at: usize, changed: Option<String>, inserted: bool| {
        let mut edited: Vec<String> = lines.iter().map(|line| (*line).to_owned()).collect();
        match (changed, inserted) {
            (Some(line), false) => edited[at] = line,
            (Some(line), true) => {
                edited.insert(at, line);
                let last = edited.len() - 1;
                edited[last] = format!("{{\"kind\":\"end\",\"records\":{}}}", edited.len() - 2);
            }
            (None, _) => {}
        }
        edited.join("\n") + "\n"
    };
    let variants = [
        (
            "bad id",
            edited(
                message_line,
                Some(message.replacen("\"id\":\"", "\"id\":\"a/", 1)),
                false,
            ),
            "line",
        ),
        (
            "version",
            file.replacen("\"version\":1", "\"version\":99", 1),
            "version 99",
        ),
        (
            "no session",
            edited(
                message_line,
                Some(message.replacen("\"session_id\":\"s\"", "\"session_id\":\"nosuch\"", 1)),
                false,
            ),
            "records[",
        ),
        (
            "id twice",
            edited(message_line, Some(message.to_owned()), true),
            "repeats an id",
        ),
    ];
    for (name, variant, expected) in variants {
        let path = home.path().join(format!("{}.jsonl", name.replace(' ', "-")));
        std::fs::write(&path, &variant).unwrap();
        let refused = server.cli(home.path(), &["import", path.to_str().unwrap(), "--workspace", "copy"]);
        assert_eq!(refused.status.code(), Some(2), "{name}: {refused:?}");
        assert!(text(&refused.stderr).contains(expected), "{name}: {refused:?}");
    }
    // Into a pipe, written as it comes; through a link, into what it names.
    let pipe = home.path().join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .unwrap()
            .success()
    );
    let reader = {
        let pipe = pipe.clone();
        std::thread::spawn(move || std::fs::read_to_string(pipe).unwrap())
    };
    let piped = server.cli(
        home.path(),
        &["export", "--workspace", "w", "-o", pipe.to_str().unwrap()],
    );
    assert_eq!(piped.status.code(), Some(0), "{piped:?}");
    assert_eq!(reader.join().unwrap(), file, "the pipe got the export");
    assert!(
        std::fs::symlink_metadata(&pipe).unwrap().file_type().is_fifo(),
        "still a pipe"
    );
    let (real, link) = (home.path().join("real.jsonl"), home.path().join("link.jsonl"));
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let linked = server.cli(
        home.path(),
        &["export", "--workspace", "w", "-o", link.to_str().unwrap()],
    );
    assert_eq!(linked.status.code(), Some(0), "{linked:?}");
    assert!(
        std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(),
        "still a link"
    );
    assert_eq!(std::fs::read_to_string(&real).unwrap(), file);
    let (loop_a, loop_b) = (home.path().join("loopA"), home.path().join("loopB"));
    std::os::unix::fs::symlink(&loop_b, &loop_a).unwrap();
    std::os::unix::fs::symlink(&loop_a, &loop_b).unwrap();
    let looped = server.cli(
        home.path(),
        &["export", "--workspace", "w", "-o", loop_a.to_str().unwrap()],
    );
    assert_eq!(looped.status.code(), Some(2), "{looped:?}");
    assert!(std::fs::symlink_metadata(&loop_a).unwrap().file_type().is_symlink());
    let long = home.path().join(format!("{}.jsonl", "x".repeat(240)));
    let long_named = server.cli(
        home.path(),
        &["export", "--workspace", "w", "-o", long.to_str().unwrap()],
    );
    assert_eq!(long_named.status.code(), Some(0), "{long_named:?}");
    assert_eq!(std::fs::read_to_string(&long).unwrap(), file);
    let into_directory = server.cli(
        home.path(),
        &["export", "--workspace", "w", "-o", home.path().to_str().unwrap()],
    );
    assert_eq!(into_directory.status.code(), Some(2), "{into_directory:?}");
    let partials = std::fs::read_dir(home.path())
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".partial")
        })
        .count();
    assert_eq!(partials, 0, "nothing left behind");
    let (_, workspaces) = server
        .call(reqwest::Method::POST, "/v3/workspaces/list", Some(json!({})))
        .await;
    assert!(
        !workspaces.to_string().contains("\"copy\""),
        "nothing of a refused import is written: {workspaces}"
    );

    // A peer key and a session key may not export the workspace; no key at all neither.
    for (scope, expected) in [("--peer", 4), ("--session", 4)] {
        let minted = roncho(
            &[
                "keys",
                "create",
                "--workspace",
                "w",
                scope,
                if scope == "--peer" { "alice" } else { "s" },
                "--data-dir",
                server.server.data.to_str().unwrap(),
                "--local-key",
            ],
            home.path(),
        )
        .output()
        .unwrap();
        assert_eq!(minted.status.code(), Some(0), "{minted:?}");
        let key = text(&minted.stdout).trim().to_owned();
        let refused = server.cli(home.path(), &["export", "--key", &key, "--workspace", "w"]);
        assert_eq!(refused.status.code(), Some(expected), "{scope}: {refused:?}");
        assert!(refused.stdout.is_empty(), "{scope}: nothing written: {refused:?}");
        let (status, _) = server.call(reqwest::Method::GET, "/v3/workspaces/w/export", None).await;
        assert_eq!(status, 200, "the admin key may");
        let reply = reqwest::Client::new()
            .get(format!("{}/v3/workspaces/w/export?peer_id=alice", server.server.base))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert!(
            matches!(reply.status().as_u16(), 401 | 403),
            "{scope}: {}",
            reply.status()
        );
    }
    let anonymous = reqwest::get(format!("{}/v3/workspaces/w/export", server.server.base))
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}
