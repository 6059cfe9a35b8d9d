//! Lexical vectors: a text's words as a sparse vector of BM25 term weights,
//! for vector stores that rank full text themselves (Qdrant's sparse vectors
//! with its IDF modifier), so a hybrid query is one request and its cost
//! follows the store's index, not the number of matching rows.
//!
//! Words are what [`crate::search::terms`] makes of a query (runs of letters
//! and digits, lower-cased, common English words dropped), reduced to their
//! English (Snowball) stem as Postgres' `english` configuration and FTS5's
//! Porter tokenizer do, and hashed to a 32-bit dimension. A document's value
//! for a term is BM25's term-frequency part; the store multiplies it by the
//! term's inverse document frequency at query time, so a query's terms all
//! weigh 1 and the score is BM25. A store that counts no frequencies of its
//! own per workspace is given them in the query instead ([`weighted`]): each
//! term weighs its IDF over the workspace's messages ([`TermCounts`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

use crate::search::{self, STOPWORDS};

/// BM25's term-frequency saturation.
const K1: f32 = 1.2;
/// BM25's length normalisation.
const B: f32 = 0.75;
/// The document length (in kept words) taken as average. A store-wide mean
/// is not known when a message is written; conversational turns keep about
/// this many words once common ones are dropped (LoCoMo: 10.6).
const AVERAGE_LENGTH: f32 = 11.0;

/// A sparse vector: dimensions in increasing order, and their values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SparseVector {
    pub indices: Vec<u32>,
    pub values: Vec<f32>,
}

impl SparseVector {
    /// Whether the vector has no dimension set.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    fn from_counts(counts: BTreeMap<u32, f32>) -> Self {
        let (indices, values) = counts.into_iter().unzip();
        Self { indices, values }
    }
}

/// Returns the lexical vector of a stored text: each kept word's stem with
/// BM25's term-frequency weight for the text's length.
pub fn document(text: &str) -> SparseVector {
    let mut counts: BTreeMap<u32, f32> = BTreeMap::new();
    let mut length = 0_usize;
    for word in words(text).filter(|word| !STOPWORDS.contains(&word.as_str())) {
        *counts.entry(dimension(&stem(&word))).or_default() += 1.0;
        length += 1;
    }
    let norm = K1 * (1.0 - B + B * length as f32 / AVERAGE_LENGTH);
    for frequency in counts.values_mut() {
        *frequency = *frequency * (K1 + 1.0) / (*frequency + norm);
    }
    SparseVector::from_counts(counts)
}

/// Returns the lexical vector of a query: its search terms' stems, each 1.
pub fn query(text: &str) -> SparseVector {
    of_terms(&search::terms(text))
}

/// Returns the lexical vector of a query's search terms
/// ([`crate::search::terms`], as a search carries them): their stems, each 1.
pub fn of_terms(terms: &[String]) -> SparseVector {
    SparseVector::from_counts(terms.iter().map(|term| (dimension(&stem(term)), 1.0)).collect())
}

/// BM25's inverse document frequency of a term that `frequency` of
/// `documents` documents hold, as Qdrant's `Idf` modifier counts it.
pub fn idf(documents: f32, frequency: f32) -> f32 {
    (((documents - frequency).max(0.0) + 0.5) / (frequency + 0.5) + 1.0).ln()
}

/// How many of a workspace's messages hold some terms: BM25's statistics
/// counted per workspace, so a neighbour's messages never move its ranking.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TermCounts {
    /// The workspace's messages whose terms are counted.
    pub documents: u64,
    /// By dimension: how many of those hold the term (absent: none).
    pub frequencies: HashMap<u32, u64>,
}

/// Returns `query` with each term weighing its IDF over `counts`: the
/// query of a store that applies no IDF itself scores BM25 over the
/// workspace. Terms no counted message holds match nothing and are left out.
pub fn weighted(query: &SparseVector, counts: &TermCounts) -> SparseVector {
    let documents = counts.documents as f32;
    let (indices, values) = query
        .indices
        .iter()
        .zip(&query.values)
        .filter_map(|(&dimension, &value)| {
            let frequency = *counts.frequencies.get(&dimension)?;
            (frequency > 0).then(|| (dimension, value * idf(documents, frequency as f32)))
        })
        .unzip();
    SparseVector { indices, values }
}

/// `words` without the terms of `names` (the peers a query names), unless
/// they are all it has: for a store that weighs terms over every workspace
/// (a Qdrant collection made with the `Idf` modifier). A speaker's name is
/// in each of their lexical texts (`speaker: text`), so in half of a
/// two-person workspace's messages, yet rare across a collection of many
/// workspaces: its IDF there outweighs the question's own words
/// (docs/benchmarks.md, "Fusing by score"). Search's named-peer list
/// carries the names instead.
pub fn without_names(words: SparseVector, names: &[String]) -> SparseVector {
    if names.is_empty() {
        return words;
    }
    let named: Vec<u32> = names.iter().flat_map(|name| query(name).indices).collect();
    let (indices, values): (Vec<u32>, Vec<f32>) = words
        .indices
        .iter()
        .zip(&words.values)
        .filter(|(index, _)| !named.contains(index))
        .unzip();
    if indices.is_empty() {
        return words;
    }
    SparseVector { indices, values }
}

/// Lower-cased runs of letters and digits.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

fn stem(word: &str) -> String {
    static ENGLISH: OnceLock<Stemmer> = OnceLock::new();
    ENGLISH
        .get_or_init(|| Stemmer::create(Algorithm::English))
        .stem(word)
        .into_owned()
}

/// The dimension of a stem: its 32-bit FNV-1a hash. Two stems share one in
/// about 1 of 4 billion pairs; a collision only merges their counts.
fn dimension(stem: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in stem.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(vector: &SparseVector, word: &str) -> Option<f32> {
        let dimension = dimension(&stem(word));
        vector
            .indices
            .iter()
            .position(|index| *index == dimension)
            .map(|at| vector.values[at])
    }

    #[test]
    fn a_query_sent_to_shared_statistics_leaves_out_the_peers_it_names() {
        let words = query("What did Caroline-Smith paint at the lake?");
        let named = ["Caroline-Smith".to_owned()];
        assert_eq!(without_names(words.clone(), &[]), words);
        assert_eq!(without_names(words, &named), query("What did paint at the lake?"));
        assert_eq!(
            without_names(query("Caroline Smith?"), &named),
            query("Caroline Smith?"),
            "a query of names alone keeps them"
        );
    }

    #[test]
    fn forms_of_a_word_meet_in_one_dimension() {
        let document = document("Caroline: I went hiking with my dogs; hikes relax me.");
        assert_eq!(value(&document, "hike"), value(&document, "hiking"));
        assert!(value(&document, "dog").is_some());
        assert!(value(&document, "my").is_none(), "common words are not indexed");
        let query = query("When did Caroline go hiking?");
        assert_eq!(query.values, vec![1.0; query.indices.len()]);
        for word in ["caroline", "hike", "go"] {
            assert!(value(&query, word).is_some(), "{word}");
        }
        assert!(
            query.indices.windows(2).all(|pair| pair[0] < pair[1]),
            "sorted, distinct"
        );
    }

    #[test]
    fn weights_saturate_with_repetition_and_fall_with_length() {
        let once = value(&document("kitten"), "kitten").unwrap();
        let twice = value(&document("kitten kitten"), "kitten").unwrap();
        let many = value(&document(&"kitten ".repeat(50)), "kitten").unwrap();
        assert!(once < twice && twice < many && many < K1 + 1.0);
        let long = format!("kitten {}", "shelter adoption paperwork ".repeat(10));
        assert!(value(&document(&long), "kitten").unwrap() < once);
    }

    #[test]
    fn a_weighted_query_weighs_rare_terms_more_and_drops_unheld_ones() {
        let query = query("kitten sofa carburetor");
        let dimension = |word: &str| dimension(&stem(word));
        let counts = TermCounts {
            documents: 100,
            frequencies: HashMap::from([(dimension("kitten"), 2), (dimension("sofa"), 90)]),
        };
        let weighted = weighted(&query, &counts);
        let kitten = value(&weighted, "kitten").unwrap();
        let sofa = value(&weighted, "sofa").unwrap();
        assert!(kitten > sofa && sofa > 0.0, "{weighted:?}");
        assert_eq!(kitten, idf(100.0, 2.0));
        assert_eq!(value(&weighted, "carburetor"), None, "no message holds it");
        assert!(weighted.indices.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(super::weighted(&query, &TermCounts::default()).is_empty());
    }

    #[test]
    fn text_without_words_is_empty() {
        assert!(document("?! -- ...").is_empty());
        assert!(document("the and of").is_empty());
        assert!(query("").is_empty());
    }
}
