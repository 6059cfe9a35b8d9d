//! Property tests of everything that reads client input before any storage
//! sees it: the filter parser, the search-query reducer, metadata and
//! configuration checks, and the text and JSON file parsers. Over many
//! generated inputs none panics, every refusal is `INVALID_ARGUMENT`, and
//! what is accepted keeps its documented bounds. (The same inputs against
//! SQLite and Postgres: roncho-store's `tests/properties.rs`; PDFs through
//! the sandboxed reader: the `roncho` crate's `tests/uploads.rs`.)

use proptest::prelude::*;
use roncho_core::arbitrary::{filter as grammar, json, object};
use roncho_core::filter::{self, Schema};
use roncho_core::{Error, files, search, validate};
use serde_json::Value;

/// Every resource's filter schema.
const SCHEMAS: [Schema; 5] = [
    filter::WORKSPACE,
    filter::PEER,
    filter::SESSION,
    filter::MESSAGE,
    filter::CONCLUSION,
];

/// A refusal must be a client error naming a field, never a bug.
fn refused_cleanly(error: &Error) -> bool {
    matches!(error, Error::InvalidArgument { .. })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn any_filter_parses_or_is_refused_cleanly(filters in prop_oneof![grammar(), object()]) {
        for schema in &SCHEMAS {
            if let Err(error) = filter::parse(schema, Some(&filters)) {
                prop_assert!(refused_cleanly(&error), "{error:?} for {filters:?}");
            }
        }
    }

    #[test]
    fn search_terms_are_safe_words_within_the_bound(query in "\\PC{0,300}") {
        let terms = search::terms(&query);
        prop_assert!(terms.len() <= search::MAX_TERMS);
        for term in &terms {
            prop_assert!(!term.is_empty());
            // Quoted for FTS5 and joined with `|` for tsquery: no quote or
            // operator may reach either.
            prop_assert!(
                !term.chars().any(|c| "\"'()|&!:*<>-\\".contains(c) || c.is_whitespace()),
                "{term:?} from {query:?}"
            );
        }
        let mut distinct = terms.clone();
        distinct.sort();
        distinct.dedup();
        prop_assert_eq!(distinct.len(), terms.len());
    }

    #[test]
    fn metadata_is_accepted_within_its_bounds_or_refused_cleanly(metadata in object()) {
        match validate::metadata("metadata", metadata) {
            Ok(accepted) => {
                prop_assert!(accepted.len() <= 100);
                let text = Value::Object(accepted).to_string();
                prop_assert!(!text.contains("\\u0000"), "a NUL survived: {text}");
                prop_assert!(text.len() <= 64 * 1024 + 2);
            }
            Err(error) => prop_assert!(refused_cleanly(&error), "{error:?}"),
        }
    }

    #[test]
    fn text_and_json_files_parse_or_are_refused_cleanly(
        bytes in prop::collection::vec(any::<u8>(), 0..2_048),
        content_type in prop::sample::select(vec![
            "text/plain", "text/markdown; charset=utf-16", "application/json", "application/JSON",
            "image/png", "", "text/",
        ]),
    ) {
        if let Err(error) = files::extract_text(content_type, &bytes) {
            prop_assert!(refused_cleanly(&error), "{error:?}");
        }
    }

    #[test]
    fn json_files_of_any_shape_parse(value in json()) {
        let bytes = serde_json::to_vec(&value).unwrap();
        match files::extract_text("application/json", &bytes) {
            Ok(text) => prop_assert!(!text.contains(char::from(0)), "a NUL survived"),
            Err(error) => prop_assert!(refused_cleanly(&error), "{error:?}"),
        }
    }

    #[test]
    fn chunks_cover_the_text_in_order_within_their_size(text in "\\PC{0,3000}", max in 1usize..400) {
        let chunks = files::chunk_text(&text, max);
        let joined: String = chunks.iter().map(|chunk| chunk.content.as_str()).collect();
        prop_assert_eq!(joined, text);
        let mut at = 0;
        for (index, chunk) in chunks.iter().enumerate() {
            prop_assert_eq!((chunk.chunk_index, chunk.total_chunks), (index, chunks.len()));
            prop_assert!(chunk.content.chars().count() <= max);
            prop_assert_eq!(chunk.start, at);
            at = chunk.end;
        }
    }

    #[test]
    fn timestamps_parse_or_are_none(text in "\\PC{0,40}") {
        let _ = filter::parse_timestamp(&text);
    }
}
