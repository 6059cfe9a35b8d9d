//! Shared by the tests that run `roncho serve` as separate processes:
//! addresses, connecting, stopping, and a scripted model's replies.
#![allow(dead_code, reason = "each test binary uses the helpers it needs")]

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A free loopback address for a process to listen on.
pub fn free_address() -> String {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap().to_string()
}

/// Connects to a process that is starting, waiting up to 30 s.
pub async fn connect(address: &str) -> tonic::transport::Channel {
    let started = Instant::now();
    loop {
        match tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .unwrap()
            .connect()
            .await
        {
            Ok(channel) => return channel,
            Err(error) => assert!(
                started.elapsed() < Duration::from_secs(30),
                "the process at {address} never listened: {error}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends SIGTERM and returns the exit status, which must come within `limit`.
pub async fn terminate(process: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let sent = Command::new("kill")
        .args(["-TERM", &process.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let signalled = Instant::now();
    loop {
        if let Some(status) = process.try_wait().unwrap() {
            return status;
        }
        assert!(signalled.elapsed() < limit, "no exit within {limit:?} of SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A chat-completions reply to `body`: with a `response_format`, one fact
/// per `speaker: text` line of the transcript; otherwise `summary`.
pub fn facts_reply(body: &Value) -> Value {
    let transcript = body["messages"][1]["content"].as_str().unwrap_or_default();
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
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})
}
