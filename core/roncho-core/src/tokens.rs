//! Token counting with tiktoken's o200k_base, as Honcho counts.

/// Returns the number of o200k_base tokens in `text`.
///
/// The first call loads the encoding (tens of milliseconds); callers on the
/// async runtime batch their texts into one blocking task.
pub fn count(text: &str) -> i64 {
    let encoder = tiktoken_rs::o200k_base_singleton();
    i64::try_from(encoder.encode_ordinary(text).len()).unwrap_or(i64::MAX)
}

/// Loads the encoding now, so the first request does not pay for it.
pub fn warm_up() {
    let _ = tiktoken_rs::o200k_base_singleton();
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_o200k_tokens() {
        assert_eq!(super::count(""), 0);
        assert_eq!(super::count("hello world"), 2);
        assert!(super::count("The quick brown fox jumps over the lazy dog.") >= 9);
    }
}
