//! Query text → search terms, shared by every full-text backend.
//!
//! Terms are runs of letters and digits, lower-cased; punctuation, quotes and
//! FTS operators in the query are separators, so no query can be a syntax
//! error. Common English words are dropped unless nothing else is left.

/// Most terms taken from one query.
pub const MAX_TERMS: usize = 64;

/// Common English words, dropped from queries (and from lexical vectors).
pub const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "being",
    "both", "but", "by", "can", "could", "did", "do", "does", "doing", "for", "from", "had", "has", "have", "having",
    "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my",
    "no", "nor", "not", "of", "on", "or", "our", "ours", "she", "should", "so", "some", "such", "than", "that", "the",
    "their", "theirs", "them", "then", "there", "these", "they", "this", "those", "to", "too", "very", "was", "we",
    "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your",
    "yours",
];

/// Returns the distinct search terms of `query`, in order of appearance.
pub fn terms(query: &str) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
    {
        let word = word.to_lowercase();
        if !all.contains(&word) {
            all.push(word);
        }
    }
    let content: Vec<String> = all
        .iter()
        .filter(|word| !STOPWORDS.contains(&word.as_str()))
        .cloned()
        .collect();
    let mut chosen = if content.is_empty() { all } else { content };
    chosen.truncate(MAX_TERMS);
    chosen
}

#[cfg(test)]
mod tests {
    use super::terms;

    #[test]
    fn punctuation_quotes_and_operators_are_separators() {
        assert_eq!(
            terms(r#"What's "Caroline's" NEAR(coffee) OR tea* -x"#),
            ["s", "caroline", "near", "coffee", "tea", "x"]
        );
        assert!(terms("?!\"'()*:").is_empty());
    }

    #[test]
    fn stopwords_drop_unless_nothing_else_is_left() {
        assert_eq!(terms("When did she go to the museum?"), ["go", "museum"]);
        assert_eq!(terms("who are you"), ["who", "are", "you"]);
        assert_eq!(terms("Café CAFÉ café"), ["café"]);
    }
}
