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

/// Words that end in a full stop without ending a sentence ("Dr. Smith",
/// "e.g. this"), lowercased and without their last full stop.
const ABBREVIATIONS: [&str; 20] = [
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "e.g", "i.e", "cf", "approx", "fig", "inc", "ltd",
    "a.m", "p.m", "u.s",
];

/// The sentences of `text`, trimmed, outside fenced code blocks (code says
/// nothing about its speaker). A sentence ends at a line break, or at `.`,
/// `!` or `?` (with the quotes and brackets that close it) followed by
/// white space or the end: never inside a number or a name (`2.5`,
/// `v18.2`, `example.com`), after an initial (`J. K. Rowling`) or after an
/// abbreviation (`Dr. Smith`).
pub fn sentences(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        let fence = line.trim_start();
        if fence.starts_with("```") || fence.starts_with("~~~") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        while let Some((at, char)) = chars.next() {
            if !matches!(char, '.' | '!' | '?') {
                continue;
            }
            let mut end = at + char.len_utf8();
            while let Some(&(next, closer)) = chars.peek() {
                if !matches!(
                    closer,
                    '.' | '!' | '?' | '"' | '\'' | ')' | ']' | '\u{201d}' | '\u{2019}'
                ) {
                    break;
                }
                end = next + closer.len_utf8();
                chars.next();
            }
            let at_a_break = line[end..].chars().next().is_none_or(char::is_whitespace);
            if at_a_break && !(char == '.' && abbreviated(&line[start..at])) {
                found.push(line[start..end].trim());
                start = end;
            }
        }
        found.push(line[start..].trim());
    }
    found.retain(|sentence| !sentence.is_empty());
    found
}

/// Whether the last word of `before` (a full stop follows it) is an
/// initial or an abbreviation.
fn abbreviated(before: &str) -> bool {
    let word = before
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or_default()
        .trim_start_matches(['"', '\'', '(', '[', '\u{201c}', '\u{2018}']);
    let mut letters = word.chars();
    if let (Some(initial), None) = (letters.next(), letters.next()) {
        return initial.is_uppercase();
    }
    ABBREVIATIONS.contains(&word.to_lowercase().as_str())
}

/// The sentences of a message worth keeping, as conclusions quoting the speaker.
pub fn extract(message: &Message) -> Vec<String> {
    sentences(&message.content)
        .into_iter()
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
        let content = message.content.trim();
        let first: String = sentences(content)
            .first()
            .copied()
            .unwrap_or(content)
            .chars()
            .take(200)
            .collect();
        text.push_str(&format!("\n{}: {first}", message.peer_id));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_end_where_a_sentence_ends_not_at_every_full_stop() {
        assert_eq!(
            sentences(
                "My budget is 2.5 million euros for the new site. I also run Node v18.2 on example.com! \
                 Dr. Smith and J. K. Rowling approved it (e.g. twice) at 5 p.m. today. \"Really?\" she asked.\n\
                 A new line starts one\nWait... what?"
            ),
            [
                "My budget is 2.5 million euros for the new site.",
                "I also run Node v18.2 on example.com!",
                "Dr. Smith and J. K. Rowling approved it (e.g. twice) at 5 p.m. today.",
                "\"Really?\"",
                "she asked.",
                "A new line starts one",
                "Wait...",
                "what?",
            ]
        );
        assert_eq!(sentences("I ran 3.1 km. It rained."), ["I ran 3.1 km.", "It rained."]);
        assert!(sentences(" \n\n ").is_empty());
    }

    #[test]
    fn code_in_fences_is_no_sentence() {
        let text = "Here is the retry helper you asked for.\n```python\ndef retry(times=3, base=0.5):\n    \
                    return base * 2. ** times\n```\nIt doubles the wait each time.\n~~~\nmore code. here\n~~~";
        assert_eq!(
            sentences(text),
            [
                "Here is the retry helper you asked for.",
                "It doubles the wait each time."
            ]
        );
    }
}
