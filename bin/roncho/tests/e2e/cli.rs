//! The one-shot commands (`roncho search`, `context`, `conclusions`,
//! `chat`) against a served data directory with a local key, as a user
//! runs them: the server and its key found from the same flags as `roncho
//! serve`, text or `--json` on stdout, and an exit code for each outcome.

use std::process::Output;
use std::time::{Duration, Instant};

use crate::boundaries::{roncho, spawn_serve};

/// Runs `roncho ARGS` to completion.
fn run(home: &std::path::Path, args: &[&str]) -> Output {
    roncho(args, home).output().expect("running roncho")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[tokio::test]
async fn one_shot_commands_answer_as_text_or_json_with_exit_codes_that_mean_something() {
    let home = tempfile::tempdir().unwrap();
    let server = spawn_serve(home.path(), &["--local-key"], &[]).await;
    let data_dir = server.data.to_str().unwrap().to_owned();
    let rest_listen = format!("127.0.0.1:{}", server.rest);
    let key = std::fs::read_to_string(server.data.join("auth").join("admin.key")).unwrap();
    let http = reqwest::Client::new();
    let written = http
        .post(format!("{}/v3/workspaces/w/sessions/s1/messages", server.base))
        .bearer_auth(key.trim())
        .json(&serde_json::json!({"messages": [
            {"peer_id": "alice", "content": "The kettle boils\nat dawn \u{1b}[2J every day"},
            {"peer_id": "bob", "content": "I prefer green tea"},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(written.status(), 201, "{}", written.text().await.unwrap());

    // Found from the same flags as `roncho serve`: its address and its local key.
    let same = [
        "--data-dir",
        &data_dir,
        "--rest-listen",
        &rest_listen,
        "--workspace",
        "w",
    ];
    // `roncho COMMAND…` on the served directory, in workspace w.
    let ask = |command: &[&str]| -> Output {
        let args: Vec<&str> = command.iter().chain(same.iter()).copied().collect();
        run(home.path(), &args)
    };
    let found = ask(&["search", "kettle"]);
    assert_eq!(found.status.code(), Some(0), "{found:?}");
    let text = stdout(&found);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("s1/alice: The kettle boils⏎at dawn [2J every day"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}'), "no escape reaches the terminal: {text:?}");

    // --json: the server's reply, Honcho's message shape.
    let json = ask(&["search", "tea", "--session", "s1", "--json"]);
    assert_eq!(json.status.code(), Some(0), "{json:?}");
    let reply: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(reply[0]["content"], "I prefer green tea", "{reply}");
    assert_eq!(reply[0]["peer_id"], "bob");

    // Nothing matched: 1, and nothing printed.
    let nothing = ask(&["search", "zebra"]);
    assert_eq!(nothing.status.code(), Some(1), "{nothing:?}");
    assert!(nothing.stdout.is_empty());

    // Context, in order; a session not there: 3, with the reason.
    let context = ask(&["context", "s1"]);
    assert_eq!(context.status.code(), Some(0), "{context:?}");
    let text = stdout(&context);
    let (alice, bob) = (
        text.find("alice: The kettle").unwrap(),
        text.find("bob: I prefer").unwrap(),
    );
    assert!(alice < bob, "{text}");
    let missing = ask(&["context", "nowhere"]);
    assert_eq!(missing.status.code(), Some(3), "{missing:?}");
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("not found"),
        "{missing:?}"
    );

    // The conclusions the deriver draws, once it has.
    let started = Instant::now();
    loop {
        let conclusions = ask(&["conclusions", "--observed", "bob"]);
        match conclusions.status.code() {
            Some(0) => {
                assert!(stdout(&conclusions).contains("green tea"), "{conclusions:?}");
                break;
            }
            Some(1) if started.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            _ => panic!("no conclusions: {conclusions:?}"),
        }
    }
    // Nearest to a query (the docs' example): one peer named is its own
    // view, so the collection is named; this server has no embedder to
    // rank by meaning, and says so.
    let nearest = ask(&["conclusions", "--observed", "bob", "--query", "what does bob drink"]);
    assert_eq!(nearest.status.code(), Some(2), "{nearest:?}");
    assert!(
        String::from_utf8_lossy(&nearest.stderr).contains("needs an embedder"),
        "{nearest:?}"
    );
    let chat = ask(&["chat", "bob", "what does bob drink?"]);
    assert_eq!(chat.status.code(), Some(0), "{chat:?}");
    assert!(stdout(&chat).contains("green tea"), "{chat:?}");

    // Erased, and waited for: gone from search; erased again: 3.
    let tea = ask(&["search", "green tea", "--json"]);
    let reply: serde_json::Value = serde_json::from_slice(&tea.stdout).unwrap();
    let id = reply[0]["id"].as_str().unwrap().to_owned();
    let erased = ask(&["erase", "--session", "s1", "--message", &id, "--wait"]);
    assert_eq!(erased.status.code(), Some(0), "{erased:?}");
    let receipt = stdout(&erased);
    assert!(
        receipt.contains(": complete; erased") && receipt.contains("messages 1"),
        "{receipt}"
    );
    assert_eq!(ask(&["search", "green tea"]).status.code(), Some(1));
    let again = ask(&["erase", "--session", "s1", "--message", &id]);
    assert_eq!(again.status.code(), Some(3), "{again:?}");
    assert_eq!(ask(&["erase"]).status.code(), Some(2), "what to erase must be named");

    // Stored text reaches the terminal without its escapes, in chat too.
    let hostile = http
        .post(format!("{}/v3/workspaces/w/sessions/s1/messages", server.base))
        .bearer_auth(key.trim())
        .json(&serde_json::json!({"messages": [
            {"peer_id": "mallory", "content": "mallory likes kettles \u{1b}]52;c;AAAA\u{7}\r\u{9b}31m\u{202e}reversed"},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(hostile.status(), 201);
    for command in [
        &["search", "kettles"][..],
        &["chat", "mallory", "what does mallory like?"],
    ] {
        let printed = ask(command);
        assert_eq!(printed.status.code(), Some(0), "{printed:?}");
        let text = stdout(&printed);
        assert!(text.contains("mallory likes kettles"), "{text}");
        assert!(
            !text.chars().any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "{command:?}: {text:?}"
        );
    }

    // A peer erased: its words gone; erased again: 3.
    let erased = ask(&["erase", "--peer", "mallory", "--wait"]);
    assert_eq!(erased.status.code(), Some(0), "{erased:?}");
    assert!(stdout(&erased).contains(": complete; erased"), "{erased:?}");
    assert_eq!(ask(&["search", "mallory"]).status.code(), Some(1));
    assert_eq!(ask(&["erase", "--peer", "mallory"]).status.code(), Some(3));
    for mixed in [
        &["erase", "--peer", "mallory", "--everything"][..],
        &["erase", "--peer", "mallory", "--message", "m"],
        &["erase", "--conclusion", "c", "--message", "m"],
        &["erase", "--everything", "--message", "m"],
    ] {
        assert_eq!(ask(mixed).status.code(), Some(2), "one thing at a time: {mixed:?}");
    }

    // `roncho status` on the data directory, without the server's --listen:
    // it says who serves the directory instead of only "not reachable".
    let status = run(
        home.path(),
        &["status", "--data-dir", &data_dir, "--listen", "127.0.0.1:9"],
    );
    assert!(
        stdout(&status).contains("is served by process")
            && stdout(&status).contains(&format!("REST at {}", server.base)),
        "{status:?}"
    );

    // An id of dots would reach another route: refused before any call.
    for dots in [
        &["search", "kettle", "--session", ".."][..],
        &["chat", ".", "hi"],
        &["context", "."],
        &["erase", "--peer", ".."],
    ] {
        assert_eq!(ask(dots).status.code(), Some(2), "{dots:?}");
    }

    // A proxy the environment names never sees a call to this machine, nor its key.
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    proxy.set_nonblocking(true).unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let args: Vec<&str> = ["search", "kettle"].iter().chain(same.iter()).copied().collect();
    let proxied = roncho(&args, home.path())
        .env("HTTP_PROXY", &proxy_url)
        .env("http_proxy", &proxy_url)
        .env("ALL_PROXY", &proxy_url)
        .output()
        .unwrap();
    assert_eq!(proxied.status.code(), Some(0), "{proxied:?}");
    assert!(proxy.accept().is_err(), "the proxy was called");

    // A reply that is not a roncho server's (a captive portal): 5, not "nothing found".
    let portal = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let portal_url = format!("http://{}", portal.local_addr().unwrap());
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in portal.incoming().take(3) {
            let mut stream = stream.unwrap();
            let mut request = [0; 4096];
            let _ = stream.read(&mut request);
            let body = "<html>sign in to the wifi</html>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let captive = ask(&["search", "kettle", "--addr", &portal_url]);
    assert_eq!(captive.status.code(), Some(5), "{captive:?}");
    assert!(captive.stdout.is_empty());

    // A configuration that does not load: 2.
    let broken = run(
        home.path(),
        &["search", "kettle", "--config", "/nonexistent/roncho.toml"],
    );
    assert_eq!(broken.status.code(), Some(2), "{broken:?}");

    // A wrong key: 4. No server there: 5. No workspace: 2. Bad usage: 2.
    let refused = ask(&["search", "kettle", "--key", "not-a-key"]);
    assert_eq!(refused.status.code(), Some(4), "{refused:?}");
    let closed = format!("http://127.0.0.1:{}", crate::support::free_port());
    let unreachable = ask(&["search", "kettle", "--addr", &closed]);
    assert_eq!(unreachable.status.code(), Some(5), "{unreachable:?}");
    let no_workspace = run(
        home.path(),
        &[
            "search",
            "kettle",
            "--data-dir",
            &data_dir,
            "--rest-listen",
            &rest_listen,
        ],
    );
    assert_eq!(no_workspace.status.code(), Some(2), "{no_workspace:?}");
    let usage = ask(&["search", "kettle", "--limit", "0"]);
    assert_eq!(usage.status.code(), Some(2), "{usage:?}");

    // A workspace key names its workspace; it reaches no other.
    let workspace_key = run(
        home.path(),
        &[
            "keys",
            "create",
            "--data-dir",
            &data_dir,
            "--local-key",
            "--workspace",
            "w",
        ],
    );
    assert!(workspace_key.status.success(), "{workspace_key:?}");
    let workspace_key = stdout(&workspace_key).trim().to_owned();
    let scoped = [
        "search",
        "kettle",
        "--data-dir",
        &data_dir,
        "--rest-listen",
        &rest_listen,
        "--key",
        &workspace_key,
    ];
    let own = run(home.path(), &scoped);
    assert_eq!(own.status.code(), Some(0), "{own:?}");
    let mut elsewhere = scoped.to_vec();
    elsewhere.extend(["--workspace", "other"]);
    let other = run(home.path(), &elsewhere);
    assert_eq!(other.status.code(), Some(4), "{other:?}");
}

#[tokio::test]
async fn a_server_with_a_certificate_of_its_own_is_reached_with_its_ca_file() {
    let home = tempfile::tempdir().unwrap();
    let authority = crate::tls::Authority::new("roncho cli test CA");
    let (certificate, key) = authority.issue(&["localhost"]);
    let file = |name: &str, text: &str| {
        let path = home.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let (certificate, key, ca) = (
        file("cert.pem", &certificate),
        file("key.pem", &key),
        file("ca.pem", &authority.pem()),
    );
    let server = crate::boundaries::start_serve(
        home.path(),
        &["--tls-cert-file", &certificate, "--tls-key-file", &key],
        &[],
    );
    let rest = server.rest;
    let addr = format!("https://localhost:{rest}");
    let search = |trusting: bool| {
        let mut args = vec!["search", "kettle", "--addr", &addr, "--workspace", "w"];
        if trusting {
            args.extend(["--ca-file", ca.as_str()]);
        }
        run(home.path(), &args)
    };
    // Up once the edge answers over TLS: nothing there to find, 1.
    let started = Instant::now();
    loop {
        let trusted = search(true);
        if trusted.status.code() == Some(1) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{trusted:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Without its CA the certificate is not trusted: 5.
    let untrusted = search(false);
    assert_eq!(untrusted.status.code(), Some(5), "{untrusted:?}");
    // A CA file that holds no certificate: 2.
    let empty = file("empty.pem", "not a certificate");
    let refused = run(
        home.path(),
        &[
            "search",
            "kettle",
            "--addr",
            &addr,
            "--workspace",
            "w",
            "--ca-file",
            &empty,
        ],
    );
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
}
