//! The extractive deriver, used without an LLM: a message's sentences
//! become explicit conclusions quoting the speaker, and a summary lists the
//! latest turns. Deterministic, and labelled as such in metadata and text.

use roncho_core::model::{JsonObject, Message};
use serde_json::json;

/// Sentences of a message that become conclusions, at most.
const MAX_SENTENCES: usize = 3;
/// Shortest sentence (in words) worth a conclusion.
const MIN_WORDS: usize = 3;
/// Longest quoted sentence, in characters.
const MAX_SENTENCE_CHARS: usize = 300;

/// Metadata of a conclusion derived extractively.
pub(crate) fn extractive_metadata() -> JsonObject {
    json!({"derived_by": "extractive"})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// The sentences of a message worth keeping, as conclusions quoting the speaker.
pub fn extract(message: &Message) -> Vec<String> {
    message
        .content
        .split_inclusive(['.', '!', '?', '\n'])
        .map(str::trim)
        .filter(|sentence| sentence.split_whitespace().count() >= MIN_WORDS)
        .take(MAX_SENTENCES)
        .map(|sentence| {
            let quoted: String = sentence.chars().take(MAX_SENTENCE_CHARS).collect();
            format!("{} said: \"{quoted}\"", message.peer_id)
        })
        .collect()
}

/// A summary listing the latest turns up to message `seq`.
pub fn extractive_summary(messages: &[Message], seq: i64) -> String {
    let mut text = format!(
        "Extractive summary (no LLM configured): the last {} turns up to message {seq}.",
        messages.len()
    );
    for message in messages {
        let first: String = message
            .content
            .split_inclusive(['.', '!', '?', '\n'])
            .next()
            .unwrap_or_default()
            .trim()
            .chars()
            .take(200)
            .collect();
        text.push_str(&format!("\n{}: {first}", message.peer_id));
    }
    text
}
