//! Token counting with tiktoken's o200k_base, as Honcho counts.
//!
//! Counting is on every write (each message's `token_count`), and tiktoken
//! spends most of it in its pre-tokenizing regex (`fancy_regex`, two thirds
//! of counting's time in a profile of REST ingest) and the rest merging
//! byte pairs of words it has merged many times before. ASCII text, most
//! of what agents write, is split here by a hand-written scanner that
//! follows o200k's pattern ([`ascii_pieces`]), and each piece's count is
//! remembered per thread: a message's words are mostly words seen before.
//! Other text goes through tiktoken whole. Both give tiktoken's count
//! (`tests::ascii_counts_are_tiktokens`, generated texts at every offset of
//! o200k's corner cases).

use std::cell::RefCell;
use std::collections::HashMap;

/// Pieces longer than this are counted by tiktoken each time, not remembered.
const REMEMBERED_PIECE: usize = 24;
/// Pieces a thread remembers before it forgets them all (about 1 MiB).
const REMEMBERED_PIECES: usize = 1 << 14;

/// Returns the number of o200k_base tokens in `text`.
///
/// The first call loads the encoding (tens of milliseconds); callers on the
/// async runtime batch their texts into one blocking task.
pub fn count(text: &str) -> i64 {
    let encoder = tiktoken_rs::o200k_base_singleton();
    if !text.is_ascii() {
        return i64::try_from(encoder.encode_ordinary(text).len()).unwrap_or(i64::MAX);
    }
    thread_local! {
        // std's keyed hash: the pieces are the writers' text, and a weak
        // hash would let a writer fill one bucket with colliding pieces.
        static COUNTS: RefCell<HashMap<Box<str>, u32>> = RefCell::default();
    }
    let mut total = 0_i64;
    COUNTS.with_borrow_mut(|counts| {
        ascii_pieces(text, |piece| {
            let tokens = match counts.get(piece) {
                Some(&tokens) => tokens,
                None => {
                    let tokens = u32::try_from(encoder.encode_ordinary(piece).len()).unwrap_or(u32::MAX);
                    if piece.len() <= REMEMBERED_PIECE {
                        if counts.len() >= REMEMBERED_PIECES {
                            counts.clear();
                        }
                        counts.insert(piece.into(), tokens);
                    }
                    tokens
                }
            };
            total += i64::from(tokens);
        });
    });
    total
}

/// Loads the encoding now, so the first request does not pay for it.
pub fn warm_up() {
    let _ = tiktoken_rs::o200k_base_singleton();
}

/// Calls `each` with the pieces o200k_base's pre-tokenizer cuts ASCII
/// `text` into, in order. The pattern, for ASCII (`L` lower, `U` upper, `P`
/// any byte but `\r`, `\n`, a letter or a digit, `C` one of `'s 't 're
/// 've 'm 'll 'd` in any case), first alternative that matches wins:
///
/// 1. `P? U* L+ C?`   2. `P? U+ L* C?`   3. 1–3 digits
/// 4. ` ?` then bytes that are no space, letter or digit, then `[\r\n/]*`
/// 5. `\s*[\r\n]+`   6. `\s+(?!\S)`   7. `\s+`
fn ascii_pieces<'a>(text: &'a str, mut each: impl FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let end = piece_end(bytes, at);
        each(&text[at..end]);
        at = end;
    }
}

fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn is_newline(byte: u8) -> bool {
    matches!(byte, b'\r' | b'\n')
}

/// Whether `byte` may lead a word (`P` above).
fn leads(byte: u8) -> bool {
    !is_newline(byte) && !byte.is_ascii_alphanumeric()
}

/// Where the longest run of bytes from `at` that pass `test` ends.
fn run(bytes: &[u8], at: usize, test: impl Fn(u8) -> bool) -> usize {
    at + bytes[at..].iter().take_while(|&&byte| test(byte)).count()
}

/// Where a contraction (`C` above) at `at` ends, or `at` when there is none.
fn contraction(bytes: &[u8], at: usize) -> usize {
    if bytes.get(at) != Some(&b'\'') {
        return at;
    }
    let next = |step: usize| bytes.get(at + step).map(u8::to_ascii_lowercase);
    match (next(1), next(2)) {
        (Some(b's' | b't' | b'm' | b'd'), _) => at + 2,
        (Some(b'r'), Some(b'e')) | (Some(b'v'), Some(b'e')) | (Some(b'l'), Some(b'l')) => at + 3,
        _ => at,
    }
}

/// Where the word of alternatives 1 and 2 starting at `at` (no lead) ends, if one does.
fn word_end(bytes: &[u8], at: usize) -> Option<usize> {
    let upper = run(bytes, at, |byte| byte.is_ascii_uppercase());
    let lower = run(bytes, upper, |byte| byte.is_ascii_lowercase());
    // `U* L+` needs a lower-case letter after the capitals; `U+ L*` a capital.
    (lower > upper || upper > at).then(|| contraction(bytes, lower))
}

/// Where the piece starting at `at` ends.
fn piece_end(bytes: &[u8], at: usize) -> usize {
    let first = bytes[at];
    // 1 and 2, with a lead byte and without one.
    if leads(first)
        && let Some(end) = bytes.get(at + 1).and_then(|_| word_end(bytes, at + 1))
    {
        return end;
    }
    if first.is_ascii_alphabetic()
        && let Some(end) = word_end(bytes, at)
    {
        return end;
    }
    // 3.
    if first.is_ascii_digit() {
        return at
            + bytes[at..]
                .iter()
                .take(3)
                .take_while(|byte| byte.is_ascii_digit())
                .count();
    }
    // 4.
    let punctuation = |byte: u8| !is_space(byte) && !byte.is_ascii_alphanumeric();
    let marks = if first == b' ' { at + 1 } else { at };
    let marks_end = run(bytes, marks, punctuation);
    if marks_end > marks {
        return run(bytes, marks_end, |byte| is_newline(byte) || byte == b'/');
    }
    // 5, 6 and 7: `first` is a space byte.
    let spaces = run(bytes, at, is_space);
    if let Some(last) = bytes[at..spaces].iter().rposition(|&byte| is_newline(byte)) {
        return at + last + 1;
    }
    if spaces == bytes.len() || spaces - 1 == at {
        spaces
    } else {
        spaces - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiktoken(text: &str) -> i64 {
        tiktoken_rs::o200k_base_singleton().encode_ordinary(text).len() as i64
    }

    #[test]
    fn counts_o200k_tokens() {
        assert_eq!(super::count(""), 0);
        assert_eq!(super::count("hello world"), 2);
        assert!(super::count("The quick brown fox jumps over the lazy dog.") >= 9);
    }

    #[test]
    fn pieces_follow_the_pattern() {
        let pieces = |text: &'static str| {
            let mut found = Vec::new();
            ascii_pieces(text, |piece| found.push(piece));
            found
        };
        assert_eq!(pieces("Hello world"), ["Hello", " world"]);
        assert_eq!(pieces("HELLOworld DON'T don't"), ["HELLOworld", " DON'T", " don't"]);
        assert_eq!(pieces("helloWorld 12345"), ["hello", "World", " ", "123", "45"]);
        assert_eq!(pieces("!!hello (x) .\n\n"), ["!!", "hello", " (", "x", ")", " .\n\n"]);
        assert_eq!(pieces("a   b\n\n  c  "), ["a", "  ", " b", "\n\n", " ", " c", "  "]);
        assert_eq!(pieces(" \n \n x"), [" \n \n", " x"]);
        assert_eq!(pieces("a//b\t\tc"), ["a", "//", "b", "\t", "\tc"]);
    }

    /// Texts from o200k's corner cases, cut at every offset and joined with
    /// generated ones: whatever is cut where, the count is tiktoken's.
    #[test]
    fn ascii_counts_are_tiktokens() {
        let corners = [
            "Hello, WORLD! It's DON'T and they'LL we'Re I'm he'd",
            "  indented\n\n\t\tcode();\r\n  \r\n// comment //\n/// doc\n",
            "ID 1234567 v2.0.13 0x1F 3.14159 ---- ==== ****",
            "CamelCaseWords and snake_case_words, URLs: https://example.com/a/b?c=d&e=f",
            "\x0b\x0c\x1c\x1d\x1e\x1f\x00\x7f end   \n  \n\n   ",
            "```rust\nfn main() { println!(\"{}\", 42); }\n```\n> quoted\n- item\n",
            "'s 'S 're 'VE 'm 'll 'D 'x ' ''s",
        ];
        let runs = [
            "7".repeat(300),
            format!("\n{}x", " ".repeat(300)),
            format!("{}word", "-".repeat(300)),
            "ab".repeat(150),
        ];
        let mut compared = 0;
        for corner in corners.into_iter().chain(runs.iter().map(String::as_str)) {
            for cut in 0..=corner.len() {
                for text in [&corner[..cut], &corner[cut..]] {
                    assert_eq!(count(text), tiktoken(text), "{text:?}");
                    compared += 1;
                }
            }
        }
        // Generated: random bytes of an alphabet of every class.
        let alphabet: Vec<u8> = b"aZ9 \t\n\r\x0b\x0c\x1f'./-_!sStTrReEvVmMlLdD0\x00".to_vec();
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for length in 0..3_000 {
            let text: String = (0..length % 120)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state % alphabet.len() as u64) as usize] as char
                })
                .collect();
            assert_eq!(count(&text), tiktoken(&text), "{text:?}");
            compared += 1;
        }
        assert!(compared > 1_000);
        // Not ASCII: tiktoken whole.
        assert_eq!(count("café naïve 東京"), tiktoken("café naïve 東京"));
    }
}
