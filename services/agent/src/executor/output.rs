//! The text shapes of tool outputs: observation and message lines, the
//! bounded peer card, and the cut of an over-long output.

use roncho_core::model::{Conclusion, Message};
use roncho_core::representation::format_time;

/// Longest tool output, in characters (Honcho's `MAX_TOOL_OUTPUT_CHARS`).
pub const MAX_TOOL_OUTPUT_CHARS: usize = 10_000;
/// Longest message content shown (Honcho's `MAX_MESSAGE_CONTENT_CHARS`).
pub const MAX_MESSAGE_CONTENT_CHARS: usize = 2_000;
/// Most entries of a peer card, and longest entry.
pub const MAX_PEER_CARD_FACTS: usize = 40;
pub const MAX_PEER_CARD_FACT_CHARS: usize = 200;
/// The prefixes a peer card entry carries.
pub const PEER_CARD_PREFIXES: [&str; 4] = ["IDENTITY:", "ATTRIBUTE:", "RELATIONSHIP:", "INSTRUCTION:"];

/// One observation: `[id:ID] [time] (level) content`, with where it came from.
pub fn observation_line(conclusion: &Conclusion) -> String {
    let mut line = format!(
        "[id:{}] [{}] ({}) {}",
        conclusion.id,
        format_time(conclusion.created_at),
        conclusion.level,
        conclusion.content
    );
    if !conclusion.source_ids.is_empty() {
        let label = if conclusion.level == "explicit" {
            "message_ids"
        } else {
            "source_ids"
        };
        line.push_str(&format!(" ({label}: {})", conclusion.source_ids.join(", ")));
    }
    line
}

/// Observations, one line each.
pub(super) fn observation_lines(conclusions: &[Conclusion]) -> String {
    conclusions
        .iter()
        .map(|c| format!("{}\n", observation_line(c)))
        .collect()
}

/// One message: `[id:ID] [time] peer: content`.
pub fn message_line(message: &Message) -> String {
    let content: String = message.content.chars().take(MAX_MESSAGE_CONTENT_CHARS).collect();
    format!(
        "[id:{}] [{}] {}: {}\n",
        message.id,
        format_time(message.created_at),
        message.peer_id,
        content
    )
}

/// Messages, one line each.
pub(super) fn message_lines(messages: &[Message]) -> String {
    messages.iter().map(message_line).collect()
}

/// Messages, one line each, each led by its session.
pub(super) fn message_lines_with_session(messages: &[Message]) -> String {
    messages
        .iter()
        .map(|m| format!("(session {}) {}", m.session_id, message_line(m)))
        .collect()
}

/// Deduplicates, prefixes and bounds peer card entries: at most
/// [`MAX_PEER_CARD_FACTS`] of at most [`MAX_PEER_CARD_FACT_CHARS`] chars,
/// each with one of [`PEER_CARD_PREFIXES`] (`ATTRIBUTE:` when it has none).
pub fn normalize_card(entries: &[String]) -> Vec<String> {
    let mut card: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        let prefixed = if PEER_CARD_PREFIXES.iter().any(|prefix| entry.starts_with(prefix)) {
            entry.to_owned()
        } else {
            format!("ATTRIBUTE: {entry}")
        };
        let bounded: String = prefixed.chars().take(MAX_PEER_CARD_FACT_CHARS).collect();
        if !card.iter().any(|known| known.eq_ignore_ascii_case(&bounded)) {
            card.push(bounded);
        }
        if card.len() == MAX_PEER_CARD_FACTS {
            break;
        }
    }
    card
}

/// Cuts `text` at [`MAX_TOOL_OUTPUT_CHARS`], noting how much was left out.
pub(super) fn truncate_output(text: String) -> String {
    let total = text.chars().count();
    if total <= MAX_TOOL_OUTPUT_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_TOOL_OUTPUT_CHARS).collect();
    cut.push_str(&format!(
        "\n[output truncated: {} more characters; narrow the query or lower the limit]",
        total - MAX_TOOL_OUTPUT_CHARS
    ));
    cut
}
