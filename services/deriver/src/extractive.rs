//! The extractive deriver, used without an LLM: a message's sentences
//! become explicit conclusions quoting the speaker, and a summary lists the
//! latest turns. Deterministic, and labelled as such in metadata and text.

use roncho_core::model::{JsonObject, Message};
use serde_json::json;

/// Sentences of a message that become conclusions, at most.
const MAX_SENTENCES: usize = 3;
/// Shortest sentence (in words) worth a conclusion.
const MIN_WORDS: usize = 3;
/// Shortest sentence worth a conclusion in a script without spaces, in characters.
const MIN_UNSPACED_CHARS: usize = 4;
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
const ABBREVIATIONS: [&str; 25] = [
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "cf", "approx", "fig", "inc", "ltd", "corp", "dept",
    "yrs", "mon", "tue", "tues", "wed", "thu", "thurs", "fri",
];

/// Words that end in a full stop without ending a sentence when a number
/// follows them ("No. 1", "Dec. 2000", "6 ft. 2").
const BEFORE_NUMBERS: [&str; 22] = [
    "no", "nos", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "ft", "lb",
    "lbs", "oz", "vol", "pp", "ch", "sec",
];

/// The sentences of `text`, trimmed, outside fenced code blocks (code says
/// nothing about its speaker). A sentence ends at a line break, at `。`,
/// `！` or `？`, or at `.`, `!` or `?` (with the quotes and brackets that
/// close it) followed by white space or the end, outside double quotes:
/// never inside a number or a name (`2.5`, `v18.2`, `example.com`), after
/// an initial or letters with full stops (`J. K.`, `J.R.R.`, `U.N.`,
/// `Ph.D.`, `e.g.`) or after an abbreviation (`Dr. Smith`, `No. 1`,
/// `Dec. 2000`).
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
        let mut quoted = false;
        let mut chars = line.char_indices().peekable();
        while let Some((at, char)) = chars.next() {
            match char {
                '"' => quoted = !quoted,
                '\u{201c}' => quoted = true,
                '\u{201d}' => quoted = false,
                '\u{3002}' | '\u{ff01}' | '\u{ff1f}' => {
                    let end = at + char.len_utf8();
                    found.push(line[start..end].trim());
                    start = end;
                }
                '.' | '!' | '?' if !quoted => {
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
                    let after = &line[end..];
                    let at_a_break = after.chars().next().is_none_or(char::is_whitespace);
                    if at_a_break && !(char == '.' && abbreviated(&line[start..at], after)) {
                        found.push(line[start..end].trim());
                        start = end;
                    }
                }
                _ => {}
            }
        }
        found.push(line[start..].trim());
    }
    found.retain(|sentence| !sentence.is_empty());
    found
}

/// Whether the last word of `before` (a full stop follows it, then
/// `after`) is an initial, letters with full stops or an abbreviation.
fn abbreviated(before: &str, after: &str) -> bool {
    let word = before
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or_default()
        .trim_start_matches(['"', '\'', '(', '[', '\u{201c}', '\u{2018}']);
    let mut letters = word.chars();
    if let (Some(initial), None) = (letters.next(), letters.next()) {
        return initial.is_uppercase();
    }
    let lower = word.to_lowercase();
    let dotted = word.contains('.')
        && word
            .split('.')
            .all(|part| (1..=3).contains(&part.chars().count()) && part.chars().all(char::is_alphabetic));
    let number_follows = after.trim_start().starts_with(|c: char| c.is_ascii_digit());
    dotted || ABBREVIATIONS.contains(&lower.as_str()) || (number_follows && BEFORE_NUMBERS.contains(&lower.as_str()))
}

/// Whether a sentence says enough to be a conclusion: three words, or four
/// characters of a script written without spaces (Chinese, Japanese).
fn says_enough(sentence: &str) -> bool {
    let unspaced = sentence
        .chars()
        .filter(|c| matches!(c, '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{4dbf}' | '\u{4e00}'..='\u{9fff}'))
        .count();
    sentence.split_whitespace().count() >= MIN_WORDS || unspaced >= MIN_UNSPACED_CHARS
}

/// The sentences of a message worth keeping, as conclusions quoting the speaker.
pub fn extract(message: &Message) -> Vec<String> {
    sentences(&message.content)
        .into_iter()
        .filter(|sentence| says_enough(sentence))
        .take(MAX_SENTENCES)
        .map(|sentence| {
            let mut quoted: String = sentence.chars().take(MAX_SENTENCE_CHARS).collect();
            if quoted.len() < sentence.len() {
                quoted.push('\u{2026}');
            }
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
                "\"Really?\" she asked.",
                "A new line starts one",
                "Wait...",
                "what?",
            ]
        );
        assert_eq!(sentences("I ran 3.1 km. It rained."), ["I ran 3.1 km.", "It rained."]);
        // Found by an outside attack on the first version: each of these
        // was cut into a false fragment, or lost.
        for (text, expected) in [
            (
                "I was born in 1990. In Dec. 2000 I moved house.",
                &["I was born in 1990.", "In Dec. 2000 I moved house."][..],
            ),
            (
                "I was born on Jan. 5 in the morning.",
                &["I was born on Jan. 5 in the morning."],
            ),
            (
                "Ph.D. students work hard every day.",
                &["Ph.D. students work hard every day."],
            ),
            (
                "I met J.R.R. Tolkien once in Oxford.",
                &["I met J.R.R. Tolkien once in Oxford."],
            ),
            ("I work for the U.N. in Geneva.", &["I work for the U.N. in Geneva."]),
            (
                "I was at the No. 1 spot for weeks. No. Never again.",
                &["I was at the No. 1 spot for weeks.", "No.", "Never again."],
            ),
            (
                "My height is 6 ft. 2 in. exactly.",
                // "in." is a word too often to be read as inches.
                &["My height is 6 ft. 2 in.", "exactly."],
            ),
            (
                "He said \"I love Paris. It is great.\" and left the room. Then rain.",
                &[
                    "He said \"I love Paris. It is great.\" and left the room.",
                    "Then rain.",
                ],
            ),
            ("Talk about dec. Then stop.", &["Talk about dec.", "Then stop."]),
            (
                "I'm free after 5 p.m. on Mon. and Tue. only.",
                &["I'm free after 5 p.m. on Mon. and Tue. only."],
            ),
            (
                "I work at Acme Inc. in Boston for 30 yrs. now.",
                &["I work at Acme Inc. in Boston for 30 yrs. now."],
            ),
            (
                "我住在北京。我喜欢喝茶！好？",
                &["我住在北京。", "我喜欢喝茶！", "好？"],
            ),
        ] {
            assert_eq!(sentences(text), expected, "{text}");
        }
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
