//! Counting o200k tokens of message-like texts: `roncho_core::tokens::count`
//! against tiktoken's `encode_ordinary` on the same texts, interleaved, five
//! rounds. `cargo bench -p roncho-core --bench token_count`

use std::time::Instant;

/// Message-like texts: chat turns, prose, code and log lines, as the
/// long-conversation development set mixes them.
fn texts() -> Vec<String> {
    let words = [
        "the",
        "deploy",
        "failed",
        "again",
        "because",
        "worker",
        "queue",
        "Postgres",
        "retry",
        "timeout",
        "I",
        "think",
        "we",
        "should",
        "move",
        "it",
        "to",
        "NATS",
        "tomorrow",
        "after",
        "standup",
        "budget",
        "venue",
        "caterer",
        "offsite",
        "Friday",
        "don't",
        "it's",
        "we'll",
        "schema",
        "migration",
        "rollback",
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |below: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % below as u64) as usize
    };
    (0..2_000)
        .map(|at| {
            let mut text = String::new();
            for sentence in 0..1 + next(12) {
                for word in 0..4 + next(14) {
                    if word > 0 {
                        text.push(' ');
                    }
                    text.push_str(words[next(words.len())]);
                }
                text.push_str(if sentence % 3 == 2 { ".\n\n" } else { ". " });
            }
            if at % 5 == 0 {
                text.push_str("```\n");
                for line in 0..next(20) {
                    text.push_str(&format!(
                        "2024-03-{:02}T10:{:02}:{:02}Z ERROR worker::retry id={} elapsed={}ms\n",
                        1 + next(28),
                        next(60),
                        line % 60,
                        next(100_000),
                        next(5_000)
                    ));
                }
                text.push_str("```\n");
            }
            text
        })
        .collect()
}

fn main() {
    let texts = texts();
    let bytes: usize = texts.iter().map(String::len).sum();
    let encoder = tiktoken_rs::o200k_base_singleton();
    roncho_core::tokens::warm_up();
    println!("{} texts, {} bytes", texts.len(), bytes);
    for round in 1..=5 {
        let started = Instant::now();
        let tiktoken: usize = texts.iter().map(|text| encoder.encode_ordinary(text).len()).sum();
        let tiktoken_time = started.elapsed();
        let started = Instant::now();
        let ours: i64 = texts.iter().map(|text| roncho_core::tokens::count(text)).sum();
        let ours_time = started.elapsed();
        assert_eq!(ours, tiktoken as i64, "the counts differ");
        println!(
            "round {round}: tiktoken {:.1} ns/byte, tokens::count {:.1} ns/byte ({:.1}x), {tiktoken} tokens",
            tiktoken_time.as_nanos() as f64 / bytes as f64,
            ours_time.as_nanos() as f64 / bytes as f64,
            tiktoken_time.as_secs_f64() / ours_time.as_secs_f64()
        );
    }
}
