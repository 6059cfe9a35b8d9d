//! The embedded mode's full-text index of one workspace's messages: an
//! in-memory inverted index of their lexical vectors ([`lexical::document`],
//! BM25 term weights) ranked by BM25 with MaxScore pruning, so a query's cost
//! follows its rarer terms rather than every message that holds one of them
//! (a term in every message no longer makes FTS5 rank the whole workspace).
//!
//! It is derived data: built from the `messages` rows on first use, kept
//! current by reading the rows written since before each query, and rebuilt
//! from the rows after a restart. It indexes every message at once, whether
//! or not its vector has been synced yet. Documents are the text the
//! reconciler gives Qdrant (`speaker: text`) and scores are those of Qdrant's
//! sparse vectors with the `Idf` modifier (ADR 0007), so both modes rank alike.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

use roncho_core::lexical::{self, SparseVector};
use roncho_core::vector::{VectorFilter, VectorHit};

use crate::names::{Fields, Names};

/// One term's documents (ordinals, increasing) and their term weights.
#[derive(Debug, Default)]
struct Postings {
    ordinals: Vec<u32>,
    weights: Vec<f32>,
    /// The largest weight ever added (an upper bound after removals).
    max: f32,
}

/// A message as the index needs it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IndexedMessage {
    /// `messages.id`: the order rows were written in.
    pub row: i64,
    pub id: String,
    pub session_id: String,
    pub peer_id: String,
    pub content: String,
}

/// Documents removed from the postings once this many are dead and they
/// outnumber the living.
const COMPACT_AFTER: usize = 10_000;

/// One workspace's messages, indexed by their words.
#[derive(Debug, Default)]
pub(crate) struct TextIndex {
    /// The highest `messages.id` indexed: rows after it are read before a query.
    pub indexed_upto: i64,
    /// By ordinal: the message id, `None` once removed.
    ids: Vec<Option<Box<str>>>,
    /// By ordinal, one bit each: whether the message is still indexed. What
    /// ranking tests for every candidate: 125 KB a million, where the ids
    /// are 16 MB and each test of one was a read from memory.
    living: Vec<u64>,
    /// By ordinal: the interned session and peer (and no level).
    fields: Vec<[u32; 3]>,
    names: Names,
    by_id: HashMap<Box<str>, u32>,
    postings: HashMap<u32, Postings>,
    live: usize,
}

/// A scored document, ordered by score (then ordinal) for the top-k heap.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scored(f32, u32);

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then_with(|| self.1.cmp(&other.1))
    }
}

/// A query term while ranking: its postings, the weight of a match (IDF),
/// the most it can add to a score, and where its cursor is.
struct Term<'a> {
    postings: &'a Postings,
    weight: f32,
    bound: f32,
    cursor: usize,
}

impl Term<'_> {
    fn current(&self) -> Option<u32> {
        self.postings.ordinals.get(self.cursor).copied()
    }

    /// Moves the cursor to the first ordinal ≥ `target` (galloping, then binary search).
    fn seek(&mut self, target: u32) {
        let ordinals = &self.postings.ordinals[self.cursor..];
        let mut step = 1;
        while step < ordinals.len() && ordinals[step] < target {
            step *= 2;
        }
        let end = (step + 1).min(ordinals.len());
        self.cursor += ordinals[..end].partition_point(|&ordinal| ordinal < target);
    }

    fn score_at(&self, ordinal: u32) -> Option<f32> {
        (self.current() == Some(ordinal)).then(|| self.weight * self.postings.weights[self.cursor])
    }
}

impl TextIndex {
    /// Indexes `messages` (rows after [`TextIndex::indexed_upto`], in order;
    /// others are skipped) with their lexical vectors.
    pub fn add(&mut self, messages: Vec<(IndexedMessage, SparseVector)>) {
        for (message, vector) in messages {
            if message.row <= self.indexed_upto {
                continue;
            }
            self.indexed_upto = message.row;
            self.remove(&message.id);
            let ordinal = self.ids.len() as u32;
            let fields = [
                self.names.intern(Some(&message.session_id)),
                self.names.intern(Some(&message.peer_id)),
                self.names.intern(None),
            ];
            self.ids.push(Some(message.id.as_str().into()));
            set_bit(&mut self.living, ordinal as usize, true);
            self.fields.push(fields);
            self.by_id.insert(message.id.into(), ordinal);
            for (dimension, weight) in vector.indices.into_iter().zip(vector.values) {
                let postings = self.postings.entry(dimension).or_default();
                postings.ordinals.push(ordinal);
                postings.weights.push(weight);
                postings.max = postings.max.max(weight);
            }
            self.live += 1;
        }
    }

    /// Removes a message; absent ids are ignored.
    pub fn remove(&mut self, id: &str) {
        let Some(ordinal) = self.by_id.remove(id) else { return };
        self.ids[ordinal as usize] = None;
        set_bit(&mut self.living, ordinal as usize, false);
        self.live -= 1;
        let dead = self.ids.len() - self.live;
        if dead >= COMPACT_AFTER && dead > self.live {
            self.compact();
        }
    }

    /// Drops removed documents from the postings and renumbers the rest (in
    /// order, so postings stay sorted).
    fn compact(&mut self) {
        let mut renumbered = vec![u32::MAX; self.ids.len()];
        let mut next = 0_u32;
        for (ordinal, id) in self.ids.iter().enumerate() {
            if id.is_some() {
                renumbered[ordinal] = next;
                next += 1;
            }
        }
        let keep = |ordinal: usize| renumbered[ordinal] != u32::MAX;
        self.living = vec![0; (next as usize).div_ceil(64)];
        for ordinal in 0..next as usize {
            set_bit(&mut self.living, ordinal, true);
        }
        let mut position = 0;
        self.ids.retain(|_| {
            position += 1;
            keep(position - 1)
        });
        let mut position = 0;
        self.fields.retain(|_| {
            position += 1;
            keep(position - 1)
        });
        for ordinal in self.by_id.values_mut() {
            *ordinal = renumbered[*ordinal as usize];
        }
        self.postings.retain(|_, postings| {
            let mut kept = 0;
            for at in 0..postings.ordinals.len() {
                let renumber = renumbered[postings.ordinals[at] as usize];
                if renumber != u32::MAX {
                    postings.ordinals[kept] = renumber;
                    postings.weights[kept] = postings.weights[at];
                    kept += 1;
                }
            }
            postings.ordinals.truncate(kept);
            postings.weights.truncate(kept);
            postings.max = postings.weights.iter().copied().fold(0.0, f32::max);
            kept > 0
        });
    }

    /// Whether a document is still indexed and passes the filter's
    /// `fields` (`everything`: it has none, so they are not read).
    fn passes(&self, ordinal: u32, fields: &Fields, everything: bool) -> bool {
        let at = ordinal as usize;
        self.living[at / 64] >> (at % 64) & 1 == 1 && (everything || fields.matches(self.fields[at]))
    }

    /// The `top_k` best messages for `query` by BM25 that pass `filter`, best
    /// first (`distance` is the negated score).
    ///
    /// MaxScore: terms are ordered by the most they can add to a score; once
    /// the k-th best score exceeds what the weakest terms can add together,
    /// those terms no longer bring candidates and are only looked up for the
    /// candidates the others bring.
    pub fn top(&self, query: &SparseVector, top_k: usize, filter: &VectorFilter) -> Vec<VectorHit> {
        if top_k == 0 || self.live == 0 {
            return Vec::new();
        }
        let documents = self.live as f32;
        let fields = self.names.compile(filter);
        let everything = fields.passes_everything();
        let mut terms: Vec<Term> = query
            .indices
            .iter()
            .zip(&query.values)
            .filter_map(|(dimension, value)| {
                let postings = self.postings.get(dimension)?;
                // Qdrant's `Idf` modifier; removed documents still count until compaction.
                let frequency = postings.ordinals.len() as f32;
                let weight = lexical::idf(documents, frequency) * value;
                Some(Term {
                    postings,
                    weight,
                    bound: weight * postings.max,
                    cursor: 0,
                })
            })
            .collect();
        terms.sort_by(|a, b| a.bound.total_cmp(&b.bound));
        // bounds[i]: the most terms[..=i] add together.
        let bounds: Vec<f32> = terms
            .iter()
            .scan(0.0, |sum, term| {
                *sum += term.bound;
                Some(*sum)
            })
            .collect();
        let mut best: BinaryHeap<Reverse<Scored>> = BinaryHeap::with_capacity(top_k + 1);
        let mut threshold = f32::NEG_INFINITY;
        // terms[..essential] cannot lift a document into the top k alone.
        let mut essential = 0;
        while let Some(ordinal) = terms[essential..].iter().filter_map(Term::current).min() {
            let mut score = 0.0;
            for term in &mut terms[essential..] {
                if let Some(part) = term.score_at(ordinal) {
                    score += part;
                    term.cursor += 1;
                }
            }
            // What the other terms add at most cannot lift it past the k-th
            // best: skipped before its fields are read (on a dense query most
            // candidates of the essential terms end here).
            let rest = essential.checked_sub(1).map_or(0.0, |at| bounds[at]);
            if best.len() == top_k && score + rest <= threshold {
                continue;
            }
            if !self.passes(ordinal, &fields, everything) {
                continue;
            }
            for at in (0..essential).rev() {
                if score + bounds[at] <= threshold {
                    break;
                }
                let term = &mut terms[at];
                term.seek(ordinal);
                score += term.score_at(ordinal).unwrap_or(0.0);
            }
            if best.len() == top_k {
                if score <= threshold {
                    continue;
                }
                best.pop();
            }
            best.push(Reverse(Scored(score, ordinal)));
            if best.len() == top_k {
                threshold = best.peek().map_or(threshold, |Reverse(Scored(score, _))| *score);
                while essential < terms.len() && bounds[essential] <= threshold {
                    essential += 1;
                }
            }
        }
        let mut ranked: Vec<Scored> = best.into_iter().map(|Reverse(scored)| scored).collect();
        ranked.sort_by(|a, b| b.cmp(a));
        ranked
            .into_iter()
            .filter_map(|Scored(score, ordinal)| Some(VectorHit::new(self.ids[ordinal as usize].as_deref()?, -score)))
            .collect()
    }
}

/// Sets or clears bit `at` of `bits`, growing them to hold it.
fn set_bit(bits: &mut Vec<u64>, at: usize, on: bool) {
    if bits.len() <= at / 64 {
        bits.resize(at / 64 + 1, 0);
    }
    let mask = 1 << (at % 64);
    if on {
        bits[at / 64] |= mask;
    } else {
        bits[at / 64] &= !mask;
    }
}

/// Lexical vectors of rows read from the database (the CPU-heavy part of
/// indexing: word splitting and stemming), on two threads when there are many.
pub(crate) fn vectorize(messages: Vec<IndexedMessage>) -> Vec<(IndexedMessage, SparseVector)> {
    let one = |messages: Vec<IndexedMessage>| -> Vec<(IndexedMessage, SparseVector)> {
        messages
            .into_iter()
            .map(|message| {
                let vector = lexical::document(&crate::tx::vectors::spoken(&message.peer_id, &message.content));
                (message, vector)
            })
            .collect()
    };
    if messages.len() < 2_000 {
        return one(messages);
    }
    let mut first = messages;
    let second = first.split_off(first.len() / 2);
    let (mut first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| one(second));
        (one(first), second.join().unwrap_or_default())
    });
    first.extend(second);
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(row: i64, session: &str, peer: &str, content: &str) -> IndexedMessage {
        IndexedMessage {
            row,
            id: format!("m{row}"),
            session_id: session.into(),
            peer_id: peer.into(),
            content: content.into(),
        }
    }

    fn index(messages: Vec<IndexedMessage>) -> TextIndex {
        let mut index = TextIndex::default();
        index.add(vectorize(messages));
        index
    }

    fn ids(hits: &[VectorHit]) -> Vec<&str> {
        hits.iter().map(|hit| hit.id.as_str()).collect()
    }

    /// Scores by brute force: BM25 over every document, as Qdrant's `Idf` does.
    fn exhaustive(index: &TextIndex, query: &SparseVector, filter: &VectorFilter, top_k: usize) -> Vec<(f32, String)> {
        let documents = index.live as f32;
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for (dimension, value) in query.indices.iter().zip(&query.values) {
            let Some(postings) = index.postings.get(dimension) else {
                continue;
            };
            let frequency = postings.ordinals.len() as f32;
            let idf = lexical::idf(documents, frequency);
            for (ordinal, weight) in postings.ordinals.iter().zip(&postings.weights) {
                *scores.entry(*ordinal).or_default() += idf * value * weight;
            }
        }
        let mut ranked: Vec<(f32, String)> = scores
            .into_iter()
            .filter(|(ordinal, _)| {
                let fields = index.names.compile(filter);
                index.passes(*ordinal, &fields, fields.passes_everything())
            })
            .map(|(ordinal, score)| (score, index.ids[ordinal as usize].as_deref().unwrap().to_owned()))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        ranked.truncate(top_k);
        ranked
    }

    #[test]
    fn ranks_by_bm25_with_rare_words_first() {
        let index = index(vec![
            message(1, "s1", "alice", "I baked sourdough bread today"),
            message(2, "s1", "bob", "my motorbike carburetor needs cleaning today"),
            message(3, "s2", "alice", "we adopted a kitten from the shelter today"),
            message(4, "s2", "bob", "today I filed the tax forms"),
        ]);
        let hits = index.top(&lexical::query("kitten today"), 10, &VectorFilter::default());
        assert_eq!(ids(&hits)[0], "m3", "the rare word decides");
        assert_eq!(hits.len(), 4, "every message says today");
        assert!(hits.windows(2).all(|pair| pair[0].distance <= pair[1].distance));
        let bob = VectorFilter {
            peer_id: Some("bob".into()),
            ..VectorFilter::default()
        };
        let hits = index.top(&lexical::query("kitten today"), 10, &bob);
        let mut by_bob = ids(&hits);
        by_bob.sort_unstable();
        assert_eq!(by_bob, ["m2", "m4"]);
        let session = VectorFilter {
            session_ids: Some(vec!["s1".into()]),
            ..VectorFilter::default()
        };
        let hits = index.top(&lexical::query("today"), 10, &session);
        let mut in_session = ids(&hits);
        in_session.sort_unstable();
        assert_eq!(in_session, ["m1", "m2"]);
    }

    #[test]
    fn removed_messages_are_not_found_and_rows_are_indexed_once() {
        let mut index = index(vec![
            message(1, "s", "p", "kitten shelter"),
            message(2, "s", "p", "kitten food"),
        ]);
        index.remove("m1");
        index.remove("missing");
        assert_eq!(
            ids(&index.top(&lexical::query("kitten"), 10, &VectorFilter::default())),
            ["m2"]
        );
        // A row already read is skipped; a later one is indexed.
        index.add(vectorize(vec![
            message(2, "s", "p", "kitten food"),
            message(3, "s", "p", "kitten toys"),
        ]));
        assert_eq!(index.live, 2);
        assert_eq!(index.indexed_upto, 3);
    }

    /// MaxScore's pruning returns exactly what scoring every match returns,
    /// across removals and compaction, with and without filters.
    #[test]
    fn pruned_ranking_equals_exhaustive_ranking() {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        // Zipf-like words: word w is drawn with weight ~ 1 / (w + 1); "common" is in every message.
        let vocabulary: Vec<String> = (0..400).map(|w| format!("word{w}x")).collect();
        let draw = |uniform: u64| {
            let mut pick = uniform as f64 / 10_000.0 * 6.0;
            let mut word = 0;
            while pick > 1.0 / (word as f64 + 1.0) && word + 1 < vocabulary.len() {
                pick -= 1.0 / (word as f64 + 1.0);
                word += 1;
            }
            vocabulary[word].as_str()
        };
        let mut messages = Vec::new();
        for row in 1..=30_000 {
            let length = 3 + next(12);
            let words: Vec<&str> = (0..length).map(|_| draw(next(10_000))).collect();
            let session = format!("s{}", next(20));
            let peer = format!("p{}", next(3));
            messages.push(message(row, &session, &peer, &format!("common {}", words.join(" "))));
        }
        let mut index = index(messages);
        // Two in three go: compaction runs past half, and removals continue after it.
        for row in (1..=30_000).filter(|row| row % 3 != 0) {
            index.remove(&format!("m{row}"));
        }
        assert!(index.ids.len() < 30_000, "compacted");
        let filters = [
            VectorFilter::default(),
            VectorFilter {
                session_ids: Some(vec!["s3".into()]),
                ..VectorFilter::default()
            },
            VectorFilter {
                peer_id: Some("p1".into()),
                ..VectorFilter::default()
            },
        ];
        for round in 0..60 {
            let words: Vec<&str> = (0..1 + round % 4).map(|_| draw(next(10_000))).collect();
            let query = lexical::query(&format!("common {}", words.join(" ")));
            for filter in &filters {
                let expected = exhaustive(&index, &query, filter, 20);
                let hits = index.top(&query, 20, filter);
                assert_eq!(hits.len(), expected.len());
                for (hit, (score, _)) in hits.iter().zip(&expected) {
                    assert!((-hit.distance - score).abs() < 1e-4, "{} vs {score}", -hit.distance);
                }
            }
        }
    }
}
