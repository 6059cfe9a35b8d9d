//! Hybrid message search: full-text candidates and, with an embedder, the
//! nearest vectors, fused by their scores (or by rank where the full-text
//! list has none); degraded to full text alone (and saying why) when there
//! is no embedder or it fails.
//!
//! The vector store plans how the candidates are ranked
//! ([`roncho_core::vector::VectorStore::search`]): where it ranks full text
//! too (Qdrant, ADR 0007; the embedded store's in-memory index, ADR 0008),
//! both lists come from it and the database only looks up their rows (and,
//! for Qdrant, searches the newest messages it has not seen yet): no query
//! ranks every full-text match of a large workspace. Search fuses what it
//! is given without asking what it talks to.

use std::collections::HashMap;

use roncho_core::filter::Filter;
use roncho_core::lexical;
use roncho_core::model::{MeaningLag, Message, MessageQuery};
use roncho_core::vector::{Found, QueryParts, SearchFailure, SearchPlan, VectorFilter, VectorHit, Words};
use roncho_core::{Error, Result};

use crate::SearchStore;
use crate::Semantic;
use crate::days;
use crate::preferred::{Preferred, named_peers};

/// The `k` of reciprocal-rank fusion (of the database's full-text list,
/// and of the named-peer list with the fused one). Honcho uses 60; on the LoCoMo
/// development set k = 60 fused MiniLM below full text alone (recall@10 0.609
/// vs 0.620) while k in 2..=10 reached 0.681–0.683: the top of each list
/// carries the signal, so it must weigh more. 10 is the middle of that plateau
/// (docs/benchmarks.md).
const RRF_K: f64 = 10.0;

/// How a list of candidates is fused with the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fusion {
    /// Each list's scores scaled to 0..=1 (min–max) and summed: a
    /// convex combination with equal weights. Where both lists carry
    /// comparable scores (BM25 and cosine from one store) this beat
    /// reciprocal rank on the development set and on the synthetic set
    /// built against word overlap (docs/benchmarks.md, "Fusing by score"):
    /// how far ahead a candidate is counts, not only its place.
    Score,
    /// Reciprocal rank: where the full-text list comes without scores (the
    /// database's own full-text search).
    Rank,
}

/// One source's candidates, best first.
struct Ranking {
    messages: Vec<Message>,
    /// The source's score of each message (higher is better), if it gives them.
    scores: Option<Vec<f32>>,
    /// Whether the list is the nearest by meaning: under score fusion each
    /// candidate lends [`NEIGHBOUR_SHARE`] of its scaled score to the turns
    /// right before and after it.
    by_meaning: bool,
    /// Which passage of each message was nearest (empty: each one's start).
    passages: Vec<u32>,
}

impl Ranking {
    fn unscored(messages: Vec<Message>) -> Self {
        Self {
            messages,
            scores: None,
            by_meaning: false,
            passages: Vec::new(),
        }
    }
}

/// Why a result was found: the reply's explanation of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchMatch {
    pub message_id: String,
    /// Among the best by its words.
    pub by_words: bool,
    /// Among the nearest by meaning, by this passage (0: its start; a
    /// message longer than the embedder reads at once has more).
    pub by_meaning: Option<u32>,
}

/// Explains each of `results` by the candidate lists that found it.
fn explain(lists: &[Ranking], results: &[Message]) -> Vec<SearchMatch> {
    let mut found: HashMap<&str, (bool, Option<u32>)> = HashMap::new();
    for list in lists {
        for (at, message) in list.messages.iter().enumerate() {
            let entry = found.entry(message.id.as_str()).or_default();
            if list.by_meaning {
                entry.1 = entry.1.or(Some(list.passages.get(at).copied().unwrap_or(0)));
            } else {
                entry.0 = true;
            }
        }
    }
    results
        .iter()
        .map(|message| {
            let (by_words, by_meaning) = found.get(message.id.as_str()).copied().unwrap_or_default();
            SearchMatch {
                message_id: message.id.clone(),
                by_words,
                by_meaning,
            }
        })
        .collect()
}

/// The share of a turn's score by meaning that the turns right before and
/// after it get, when they score less of their own: the answer to a
/// question, or the question to its answer, is found beside the turn that
/// matches. A share below 1 never lets a neighbour outrank the turn that
/// says it. Lent among the candidates found, so it reorders and adds none.
/// On the development set's two conversations, with message vectors mixing
/// in their previous turn at half weight, 0.5 moved recall@10 / any@10 on
/// one from 0.751 / 0.790 to 0.761 / 0.802 and cost the other a question
/// (0.783 / 0.833 → 0.780 / 0.827); with the half weight it is above the
/// previous design (0.85, no lending) on both (docs/benchmarks.md, "Own
/// meaning first"). 0.6 and more let the turn before a cat story outrank
/// its third line in `meaning.rs`.
const NEIGHBOUR_SHARE: f64 = 0.5;

/// The share of a turn's score by meaning that the turn right after it
/// gets when the turn asks a question (has a `?`): a question and its
/// reply are one exchange, the question carrying the words of the topic
/// and the reply the fact asked for ("How long have you been creating
/// art?" — "Since I was 17 or so."). The whole score, so the reply ranks
/// beside the question and never above it by meaning. Cross-validated on
/// the development set's two conversations: chosen on either one alone
/// (0.5–1.0 tried), 1.0 is best; over 0.5 it moved recall@10 / any@10
/// from 0.783 / 0.833 to 0.792 / 0.840 on one and from 0.761 / 0.802 to
/// 0.767 / 0.815 on the other, and to 0.789 / 0.840 and 0.792 / 0.840
/// with the peers asked about ([`crate::preferred::Named`]) (docs/benchmarks.md, "Questions
/// and their replies").
const REPLY_SHARE: f64 = 1.0;

/// Tokens of a text whose words count whole under score fusion; a longer
/// text's count [`words_share`] of theirs. A passage of the local model.
const WORDS_WHOLE_TOKENS: f64 = 128.0;

/// The share of its scaled score by words that a message of `tokens`
/// tokens keeps under score fusion: 1 up to [`WORDS_WHOLE_TOKENS`], then
/// `sqrt(128 / tokens)` (a half at 512 tokens, a fifth at 3,200). A long
/// text holds a query's words by chance more often than a short one, as
/// its nearest passage is nearer by chance (`passage_chance`); BM25's
/// length normalisation lowers its score, but scaling each list to 0..=1
/// gives the best of a list of long texts full weight. On the long
/// conversations the best matches by words were mostly the assistant's
/// replies discussing the question's subject, not the turns that settle
/// it. Chosen on both folds of the long set (recall@10 / any@10): seed 1
/// 0.356 / 0.448 → 0.379 / 0.466, seed 2 0.243 / 0.328 → 0.259 / 0.328;
/// at 256 tokens 0.362 / 0.448 and 0.260 / 0.345, at 512 0.362 / 0.448
/// and 0.260 / 0.345; the LoCoMo conversations, whose turns are all
/// shorter, unchanged (docs/benchmarks.md, "Words in long messages").
fn words_share(tokens: i64) -> f64 {
    (WORDS_WHOLE_TOKENS / tokens.max(1) as f64).sqrt().min(1.0)
}

/// Candidates each source brings, per result asked for; fusion keeps the
/// best. On the LoCoMo development set (embedded, MiniLM, rank fusion)
/// recall@10 / any@10 were 0.716 / 0.766 at 2, 0.726 / 0.779 at 5 and
/// 0.720 / 0.775 at 10 (score fusion: 0.738 / 0.797 at 5): an
/// answer ranked 11th–50th by both lists is still worth fusing in, with no
/// change to search latency at 100k messages (docs/benchmarks.md).
const CANDIDATE_DEPTH: i64 = 5;

/// Why search runs on full text alone.
const NO_EMBEDDER: &str = "no embedder is configured: results come from full-text search alone";

/// Which sources found the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    /// Full-text search alone.
    FullText,
    /// Full-text and vector candidates fused.
    Hybrid,
}

impl SearchMode {
    /// Returns the mode's wire name.
    pub fn name(self) -> &'static str {
        match self {
            SearchMode::FullText => "full_text",
            SearchMode::Hybrid => "hybrid",
        }
    }
}

/// Search results and how they were found.
#[derive(Debug, Clone)]
pub struct SearchResults {
    pub messages: Vec<Message>,
    /// Why each message was found, in the same order.
    pub matches: Vec<SearchMatch>,
    pub mode: SearchMode,
    /// Why the search ran degraded; empty when it did not.
    pub degraded_reason: String,
    /// How far meaning is behind the workspace's writes (with an embedder).
    pub meaning_lag: Option<MeaningLag>,
}

/// Searches messages: `search.limit` results at most, best first.
pub async fn search(
    store: &dyn SearchStore,
    semantic: Option<&Semantic>,
    workspace_id: &str,
    query: &str,
    search: &MessageQuery,
    filter: &Filter,
) -> Result<SearchResults> {
    let limit = usize::try_from(search.limit).unwrap_or(usize::MAX);
    if search.session_ids.as_ref().is_some_and(Vec::is_empty) {
        // An allowlist of no session (a scope without sessions) finds nothing.
        return Ok(SearchResults {
            messages: Vec::new(),
            matches: Vec::new(),
            mode: if semantic.is_some() {
                SearchMode::Hybrid
            } else {
                SearchMode::FullText
            },
            degraded_reason: String::new(),
            meaning_lag: None,
        });
    }
    let candidates = MessageQuery {
        limit: search.limit * CANDIDATE_DEPTH,
        ..search.clone()
    };
    // The peers the query names are looked up beside the candidates: only
    // fusion needs them; and how far meaning is behind, for the reply.
    let meaning_lag = async {
        match semantic {
            // Said beside the results; never a reason to fail them.
            Some(_) => store
                .meaning_lag(workspace_id)
                .await
                .inspect_err(|error| tracing::warn!(%error, "how far meaning is behind could not be read"))
                .ok(),
            None => None,
        }
    };
    let (named, found, meaning_lag) = tokio::join!(
        named_peers(store, workspace_id, query, search),
        candidates_of(store, semantic, workspace_id, query, &candidates, filter),
        meaning_lag,
    );
    let (named, found) = (named?, found?);
    let preferred = Preferred {
        peers: named.asked_about,
        days: days::named_days(query),
    };
    let messages: Vec<Message> = fuse(&found.lists, found.fusion, &preferred)
        .into_iter()
        .take(limit)
        .collect();
    Ok(SearchResults {
        matches: explain(&found.lists, &messages),
        messages,
        mode: found.mode(),
        degraded_reason: found.degraded.reason(),
        meaning_lag,
    })
}

/// What fusion is given.
struct Candidates {
    lists: Vec<Ranking>,
    fusion: Fusion,
    degraded: Degraded,
}

impl Candidates {
    /// Which sources answered.
    fn mode(&self) -> SearchMode {
        match self.degraded.without_meaning {
            None => SearchMode::Hybrid,
            Some(_) => SearchMode::FullText,
        }
    }
}

/// Why a search ran degraded; the reply says it ([`Degraded::reason`]).
#[derive(Debug, Default)]
pub struct Degraded {
    /// Why meaning took no part in the results.
    pub without_meaning: Option<WithoutMeaning>,
    /// How many messages of the scope an index behind left out.
    pub behind: Option<Behind>,
}

/// Why a search's results come from full text alone.
#[derive(Debug)]
pub enum WithoutMeaning {
    /// No embedder is configured.
    NoEmbedder,
    /// The query could not be embedded, or the vector store could not answer.
    Unavailable(Error),
}

/// Messages of a search's scope that could not match, because an index has
/// not reached them yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behind {
    /// The database's text index (the reconciler role indexes them).
    TextIndex(i64),
    /// The vector store, which ranks the words of synced messages only
    /// beyond the newest [`roncho_core::vector::UNSYNCED_SCAN`].
    VectorSync(i64),
}

impl Behind {
    fn of(gap: i64, behind: fn(i64) -> Behind) -> Option<Behind> {
        (gap > 0).then(|| behind(gap))
    }
}

impl Degraded {
    /// The reply's words for it; empty when the search ran whole.
    pub fn reason(&self) -> String {
        let without = match &self.without_meaning {
            None => None,
            Some(WithoutMeaning::NoEmbedder) => Some(NO_EMBEDDER.to_owned()),
            Some(WithoutMeaning::Unavailable(error)) => Some(format!("semantic search unavailable: {error}")),
        };
        let behind = self.behind.map(|behind| {
            let (gap, why) = match behind {
                Behind::TextIndex(gap) => (gap, TEXT_BEHIND),
                Behind::VectorSync(gap) => (gap, VECTORS_BEHIND),
            };
            let at_least = if gap >= roncho_core::store::GAP_COUNT_LIMIT {
                "at least "
            } else {
                ""
            };
            format!("results are partial: {at_least}{gap} messages of this scope {why}")
        });
        [without, behind].into_iter().flatten().collect::<Vec<_>>().join("; ")
    }
}

/// The parts of a query the vector store may ask for ([`QueryParts`]).
struct Parts<'a> {
    store: &'a dyn SearchStore,
    semantic: &'a Semantic,
    workspace_id: &'a str,
    query: &'a str,
    search: &'a MessageQuery,
}

#[async_trait::async_trait]
impl QueryParts for Parts<'_> {
    async fn meaning(&self) -> Result<Vec<f32>> {
        self.semantic.embed_query(self.workspace_id, self.query).await
    }

    async fn names(&self) -> Result<Vec<String>> {
        Ok(named_peers(self.store, self.workspace_id, self.query, self.search)
            .await?
            .mentioned)
    }
}

/// Finds the candidates of every source that answers: the vector store's,
/// as it plans the search, or the database's full text alone (without an
/// embedder, or when the vector store cannot answer).
async fn candidates_of(
    store: &dyn SearchStore,
    semantic: Option<&Semantic>,
    workspace_id: &str,
    query: &str,
    candidates: &MessageQuery,
    filter: &Filter,
) -> Result<Candidates> {
    let Some(semantic) = semantic else {
        return database_only(store, workspace_id, candidates, filter, WithoutMeaning::NoEmbedder).await;
    };
    let parts = Parts {
        store,
        semantic,
        workspace_id,
        query,
        search: candidates,
    };
    let plan = SearchPlan {
        workspace_id,
        // Tokenised once, by the caller: the search's terms.
        words: lexical::of_terms(&candidates.terms),
        top_k: candidate_count(candidates, filter),
        scope: vector_filter(candidates),
        search: candidates,
        filter,
        database: store,
        query: &parts,
    };
    match semantic.vectors.search(&plan).await {
        Ok(found) => ranked(store, workspace_id, candidates, filter, found).await,
        // The database's own part failed: as any read would.
        Err(SearchFailure::Database(error)) => Err(error),
        Err(SearchFailure::Store(error)) => {
            tracing::warn!(%error, "semantic search unavailable; answering from full text");
            database_only(
                store,
                workspace_id,
                candidates,
                filter,
                WithoutMeaning::Unavailable(error),
            )
            .await
        }
    }
}

/// The database's full-text candidates alone, by rank.
async fn database_only(
    store: &dyn SearchStore,
    workspace_id: &str,
    search: &MessageQuery,
    filter: &Filter,
    without_meaning: WithoutMeaning,
) -> Result<Candidates> {
    let (full_text, gap) = database_full_text(store, workspace_id, search, filter).await?;
    Ok(Candidates {
        lists: vec![Ranking::unscored(full_text)],
        fusion: Fusion::Rank,
        degraded: Degraded {
            without_meaning: Some(without_meaning),
            behind: Behind::of(gap, Behind::TextIndex),
        },
    })
}

/// The rows of what the vector store found, as fusion takes them: lists
/// the store ranked by their scores, the database's by their ranks.
async fn ranked(
    store: &dyn SearchStore,
    workspace_id: &str,
    search: &MessageQuery,
    filter: &Filter,
    found: Found,
) -> Result<Candidates> {
    let (meaning, without_meaning) = match found.meaning {
        Ok(hits) => (Some(hits), None),
        Err(error) => {
            tracing::warn!(%error, "semantic search unavailable; answering from full text");
            (None, Some(WithoutMeaning::Unavailable(error)))
        }
    };
    let (words, unsynced, behind) = match found.words {
        Words::Database { messages, gap } => {
            let mut lists = vec![Ranking::unscored(messages)];
            if let Some(hits) = meaning {
                let mut meaning = rows_in_order(store, workspace_id, &[hits], search, filter).await?;
                meaning[0].by_meaning = true;
                lists.append(&mut meaning);
            }
            return Ok(Candidates {
                lists,
                fusion: Fusion::Rank,
                degraded: Degraded {
                    without_meaning,
                    behind: Behind::of(gap, Behind::TextIndex),
                },
            });
        }
        Words::Ranked(hits) => (hits, Vec::new(), None),
        Words::Synced { hits, unsynced, gap } => (hits, unsynced, Behind::of(gap, Behind::VectorSync)),
    };
    // Both lists' rows in one read; an empty list by meaning when the query has no vector.
    let mut lists = rows_in_order(
        store,
        workspace_id,
        &[words, meaning.unwrap_or_default()],
        search,
        filter,
    )
    .await?;
    lists[1].by_meaning = true;
    if !unsynced.is_empty() {
        // Scored by its ranks: the database's full-text scores are not BM25's.
        lists.push(Ranking::unscored(unsynced));
    }
    Ok(Candidates {
        lists,
        fusion: Fusion::Score,
        degraded: Degraded {
            without_meaning,
            behind,
        },
    })
}

/// The database's full-text matches, and how many messages of the scope
/// it could not match because its text index has not reached them.
async fn database_full_text(
    store: &dyn SearchStore,
    workspace_id: &str,
    search: &MessageQuery,
    filter: &Filter,
) -> Result<(Vec<Message>, i64)> {
    let (found, gap) = tokio::join!(
        store.search_messages(workspace_id, search, filter),
        store.text_index_gap(workspace_id, search),
    );
    Ok((found?, gap?))
}

/// Why messages of a scope cannot match: the database's text index has not reached them.
const TEXT_BEHIND: &str = "are not indexed by their words yet and cannot match (the reconciler role \
     indexes them; `roncho status` shows the text index backlog)";

/// Why messages of a scope cannot match: the vector store has not received them.
const VECTORS_BEHIND: &str = "are not synced to the vector store yet and cannot match (the reconciler role \
     syncs them; `roncho status` shows the pending vectors)";

/// Fuses the candidate lists, then each preference's candidates with the
/// fused list by rank: a candidate the query prefers (of a peer it asks
/// about, written on a day it names) moves ahead of those it does not,
/// as far as its place in both lists allows. Reorders; adds and drops none.
fn fuse(lists: &[Ranking], fusion: Fusion, preferred: &Preferred) -> Vec<Message> {
    let fused = match (lists.len(), fusion) {
        (1, _) => lists[0].messages.clone(),
        (_, Fusion::Score) => score_fusion(lists),
        (_, Fusion::Rank) => {
            let lists: Vec<Vec<Message>> = lists.iter().map(|list| list.messages.clone()).collect();
            reciprocal_rank_fusion(&lists)
        }
    };
    let subsets = preferred.subsets(&fused);
    if subsets.is_empty() {
        return fused;
    }
    reciprocal_rank_fusion(&[vec![fused], subsets].concat())
}

/// The share of reciprocal-rank fusion a message at `rank` (from 0) gets.
fn rank_score(rank: usize) -> f64 {
    1.0 / (RRF_K + rank as f64 + 1.0)
}

/// Fuses ranked lists: each item scores Σ 1 / (k + rank) over the lists it is in.
fn reciprocal_rank_fusion(lists: &[Vec<Message>]) -> Vec<Message> {
    sum_scores(lists.iter().map(|list| {
        list.iter()
            .enumerate()
            .map(|(rank, message)| (message, rank_score(rank)))
            .collect()
    }))
}

/// Fuses lists by their scores, each scaled to 0..=1 over the list (its
/// best 1, its worst 0; all 1 when they are equal) and summed. A list
/// without scores is scored by its ranks. A list that lends to neighbours
/// scores each candidate of any list at least [`NEIGHBOUR_SHARE`] of the
/// better of the turns right before and after it in its session
/// ([`REPLY_SHARE`] of a turn before it that asks a question). A list by
/// words gives a message longer than a passage [`words_share`] of its
/// scaled score.
fn score_fusion(lists: &[Ranking]) -> Vec<Message> {
    // Every list's candidates, in the order first found (ties stay stable), and by their place.
    let mut candidates: Vec<&Message> = Vec::new();
    let mut at_place: HashMap<(&str, i64), &Message> = HashMap::new();
    for message in lists.iter().flat_map(|list| &list.messages) {
        let place = (message.session_id.as_str(), message.seq_in_session);
        if at_place.insert(place, message).is_none_or(|seen| seen.id != message.id) {
            candidates.push(message);
        }
    }
    sum_scores(lists.iter().map(|list| {
        let scores: Vec<f64> = match &list.scores {
            Some(scores) => scores.iter().map(|&score| f64::from(score)).collect(),
            None => (0..list.messages.len()).map(rank_score).collect(),
        };
        let low = scores.iter().copied().fold(f64::INFINITY, f64::min);
        let high = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let scaled = list.messages.iter().zip(scores).map(|(message, score)| {
            let scaled = if high > low { (score - low) / (high - low) } else { 1.0 };
            (message, scaled)
        });
        if !list.by_meaning {
            return scaled
                .map(|(message, score)| (message, score * words_share(message.token_count)))
                .collect();
        }
        let own: HashMap<&str, f64> = scaled.map(|(message, score)| (message.id.as_str(), score)).collect();
        // What the turn `step` away from `message` lends it.
        let lent_by = |message: &Message, step: i64| {
            let neighbour = at_place.get(&(message.session_id.as_str(), message.seq_in_session + step))?;
            let share = if step == -1 && neighbour.content.contains('?') {
                REPLY_SHARE
            } else {
                NEIGHBOUR_SHARE
            };
            Some(share * own.get(neighbour.id.as_str())?)
        };
        candidates
            .iter()
            .filter_map(|&message| {
                let lent = lent_by(message, -1)
                    .unwrap_or(0.0)
                    .max(lent_by(message, 1).unwrap_or(0.0));
                match own.get(message.id.as_str()) {
                    Some(&score) => Some((message, score.max(lent))),
                    None => (lent > 0.0).then_some((message, lent)),
                }
            })
            .collect()
    }))
}

/// Orders the messages of scored lists by their summed scores, best first
/// (the newer first on a tie).
fn sum_scores<'a>(lists: impl Iterator<Item = Vec<(&'a Message, f64)>>) -> Vec<Message> {
    let mut scored: Vec<(f64, &Message)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (message, score) in lists.flatten() {
        match index.get(message.id.as_str()) {
            Some(&at) => scored[at].0 += score,
            None => {
                index.insert(&message.id, scored.len());
                scored.push((score, message));
            }
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.created_at.cmp(&a.1.created_at)));
    scored.into_iter().map(|(_, message)| message.clone()).collect()
}

/// Vector hits to ask for: as many as the candidates wanted, twice as many
/// where a filter or a perspective is applied to their rows and may drop
/// some. Without either, the first hits are the candidates, and the rows
/// of the others would be read for nothing (at a million messages, reading
/// 200 rows instead of 100 took 4.8 ms of a 15 ms search; docs/benchmarks.md).
fn candidate_count(search: &MessageQuery, filter: &Filter) -> usize {
    let narrowed = search.peer_perspective.is_some() || *filter != Filter::All;
    usize::try_from(search.limit * if narrowed { 2 } else { 1 }).unwrap_or(200)
}

fn vector_filter(search: &MessageQuery) -> VectorFilter {
    VectorFilter {
        session_ids: search.session_ids.clone(),
        peer_id: search.peer_id.clone(),
        levels: None,
    }
}

/// Looks the rows of hit lists up in one query and returns, per list, the
/// messages that pass the search's filter and perspective, in the hits'
/// order, `search.limit` at most, scored by their negated distances.
async fn rows_in_order(
    store: &dyn SearchStore,
    workspace_id: &str,
    lists: &[Vec<VectorHit>],
    search: &MessageQuery,
    filter: &Filter,
) -> Result<Vec<Ranking>> {
    let mut ids: Vec<String> = lists.iter().flatten().map(|hit| hit.id.clone()).collect();
    ids.sort_unstable();
    ids.dedup();
    let rows = store
        .messages_by_ids(workspace_id, &ids, filter, search.peer_perspective.as_deref())
        .await?;
    let limit = usize::try_from(search.limit).unwrap_or(usize::MAX);
    Ok(lists
        .iter()
        .map(|hits| {
            let found: Vec<(Message, f32, u32)> = hits
                .iter()
                .filter_map(|hit| {
                    let row = rows.iter().find(|row| row.id == hit.id)?;
                    Some((row.clone(), -hit.distance, hit.passage))
                })
                .take(limit)
                .collect();
            let passages = found.iter().map(|(_, _, passage)| *passage).collect();
            let (messages, scores) = found.into_iter().map(|(message, score, _)| (message, score)).unzip();
            Ranking {
                messages,
                scores: Some(scores),
                by_meaning: false,
                passages,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, peer: &str) -> Message {
        Message {
            id: id.into(),
            workspace_id: "w".into(),
            session_id: "s".into(),
            peer_id: peer.into(),
            content: String::new(),
            metadata: Default::default(),
            created_at: 0,
            token_count: 1,
            seq_in_session: 0,
        }
    }

    fn ids(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.id.as_str()).collect()
    }

    #[test]
    fn hits_are_doubled_only_where_rows_may_fail_the_filter_or_perspective() {
        let search = MessageQuery {
            terms: vec!["cat".into()],
            session_ids: Some(vec!["s1".into()]),
            peer_id: Some("alice".into()),
            peer_perspective: None,
            limit: 50,
        };
        // Session and peer are the vector store's own filter: its hits pass them.
        assert_eq!(candidate_count(&search, &Filter::All), 50);
        assert_eq!(candidate_count(&search, &Filter::Nothing), 100);
        let seen_by = MessageQuery {
            peer_perspective: Some("bob".into()),
            ..search
        };
        assert_eq!(candidate_count(&seen_by, &Filter::All), 100);
    }

    #[test]
    fn partial_results_say_how_many_messages_they_left_out_and_why() {
        let degraded = |without_meaning, behind| {
            Degraded {
                without_meaning,
                behind,
            }
            .reason()
        };
        assert_eq!(degraded(None, None), "");
        assert_eq!(degraded(Some(WithoutMeaning::NoEmbedder), None), NO_EMBEDDER);
        let reason = degraded(Some(WithoutMeaning::NoEmbedder), Behind::of(999, Behind::TextIndex));
        assert!(reason.starts_with(NO_EMBEDDER), "{reason}");
        assert!(
            reason.contains("; results are partial: 999 messages of this scope are not indexed"),
            "{reason}"
        );
        assert_eq!(Behind::of(0, Behind::TextIndex), None, "nothing left out says nothing");
        // The store counts up to its limit: a count there means at least.
        let limit = roncho_core::store::GAP_COUNT_LIMIT;
        let reason = degraded(None, Some(Behind::TextIndex(limit)));
        assert!(
            reason.starts_with("results are partial: at least 1000 messages of this scope are not indexed"),
            "{reason}"
        );
        let reason = degraded(None, Some(Behind::VectorSync(7)));
        assert!(
            reason.starts_with("results are partial: 7 messages") && reason.contains("vector store"),
            "{reason}"
        );
        let down = Error::Unavailable("qdrant is down".into());
        let expected = format!("semantic search unavailable: {down}");
        assert_eq!(degraded(Some(WithoutMeaning::Unavailable(down)), None), expected);
    }

    #[test]
    fn named_peers_reorder_candidates_without_adding_or_dropping() {
        let full_text = vec![message("a", "bob"), message("b", "alice"), message("c", "bob")];
        let semantic = vec![message("d", "bob"), message("b", "alice"), message("e", "alice")];
        let lists = || {
            vec![
                Ranking::unscored(full_text.clone()),
                Ranking::unscored(semantic.clone()),
            ]
        };
        let plain = fuse(&lists(), Fusion::Rank, &Preferred::default());
        assert_eq!(ids(&plain)[0], "b", "in both lists");
        let named = fuse(
            &lists(),
            Fusion::Rank,
            &Preferred {
                peers: vec!["alice".to_owned()],
                ..Preferred::default()
            },
        );
        assert_eq!(ids(&named)[..2], ["b", "e"], "alice's messages first");
        let mut before = ids(&plain);
        let mut after = ids(&named);
        before.sort_unstable();
        after.sort_unstable();
        assert_eq!(before, after);
    }

    #[test]
    fn a_named_day_moves_its_messages_ahead_under_either_fusion() {
        let day = |id: &str, created_at: i64| Message {
            created_at,
            ..message(id, "bob")
        };
        let named = days::named_days("What did Bob paint on October 13, 2023?");
        let on_the_day = named[0].start + 20 * 3_600_000_000;
        let before = named[0].start - 1;
        // "a" leads both lists; "b", the one written on the named day, is fourth in both.
        let order = || {
            vec![
                day("a", before),
                day("c", before),
                day("d", before),
                day("b", on_the_day),
                day("e", before),
            ]
        };
        let preferred = Preferred {
            days: named,
            ..Preferred::default()
        };
        let ranked = |fusion| {
            let lists = [
                Ranking::unscored(order()),
                Ranking {
                    scores: Some(vec![0.9, 0.8, 0.7, 0.6, 0.1]),
                    ..Ranking::unscored(order())
                },
            ];
            (
                ids(&fuse(&lists, fusion, &Preferred::default())).join(""),
                ids(&fuse(&lists, fusion, &preferred)).join(""),
            )
        };
        for fusion in [Fusion::Rank, Fusion::Score] {
            let (plain, dated) = ranked(fusion);
            assert_eq!(plain, "acdbe", "{fusion:?}");
            // The best of the named day first, the others as they were; nothing added or dropped.
            assert_eq!(dated, "bacde", "{fusion:?}");
        }
        // A day no candidate was written on changes nothing.
        let elsewhere = Preferred {
            days: days::named_days("on 2020-01-01"),
            ..Preferred::default()
        };
        let lists = [Ranking::unscored(order())];
        assert_eq!(ids(&fuse(&lists, Fusion::Rank, &elsewhere)).join(""), "acdbe");
    }

    fn scored(messages: &[(&str, f32)]) -> Ranking {
        Ranking {
            messages: messages.iter().map(|(id, _)| message(id, "bob")).collect(),
            scores: Some(messages.iter().map(|&(_, score)| score).collect()),
            by_meaning: false,
            passages: Vec::new(),
        }
    }

    #[test]
    fn score_fusion_counts_how_far_ahead_a_candidate_is() {
        // "c" leads the words' list and "a" the meaning's, each far ahead;
        // "b" is second in both, far behind.
        let words = scored(&[("c", 9.0), ("b", 4.0), ("d", 1.0)]);
        let meaning = scored(&[("a", 0.9), ("b", 0.4), ("e", 0.1)]);
        let by_rank = fuse(
            &[
                Ranking::unscored(words.messages.clone()),
                Ranking::unscored(meaning.messages.clone()),
            ],
            Fusion::Rank,
            &Preferred::default(),
        );
        assert_eq!(ids(&by_rank)[0], "b", "reciprocal rank favours being in both lists");
        let by_score = fuse(&[words, meaning], Fusion::Score, &Preferred::default());
        let mut leaders = ids(&by_score)[..2].to_vec();
        leaders.sort_unstable();
        assert_eq!(leaders, ["a", "c"]);
        assert_eq!(ids(&by_score)[2..], ["b", "d", "e"]);
    }

    #[test]
    fn score_fusion_scales_each_list_and_ranks_an_unscored_one() {
        // BM25 scores in the tens and cosines below one weigh the same once
        // scaled; the unscored list (the database's newest messages) counts
        // by its ranks, its first scoring as a list's best.
        let words = scored(&[("a", 40.0), ("b", 10.0)]);
        let meaning = scored(&[("c", 0.9), ("a", 0.1)]);
        let newest = Ranking::unscored(vec![message("n", "bob"), message("m", "bob")]);
        let fused = fuse(&[words, meaning, newest], Fusion::Score, &Preferred::default());
        assert_eq!(ids(&fused)[..3], ["a", "c", "n"]);
        assert_eq!(fused.len(), 5);
        // A list whose scores are all equal scores each of its messages 1.
        let flat = fuse(
            &[scored(&[("x", 3.0), ("y", 3.0)]), scored(&[("y", 0.5)])],
            Fusion::Score,
            &Preferred::default(),
        );
        assert_eq!(ids(&flat), ["y", "x"]);
    }

    #[test]
    fn long_messages_keep_a_share_of_their_words_score() {
        let sized = |id: &str, tokens: i64| Message {
            token_count: tokens,
            seq_in_session: tokens,
            ..message(id, "bob")
        };
        // "reply" leads by words, "turn" by meaning, each as far ahead:
        // whole, both score 1 and the words' list goes first on a tie; a reply of 512
        // tokens keeps half its words' score and falls behind.
        let fused = |reply_tokens: i64| {
            let words = Ranking {
                messages: vec![sized("reply", reply_tokens), sized("other", 40)],
                scores: Some(vec![9.0, 1.0]),
                by_meaning: false,
                passages: Vec::new(),
            };
            let meaning = Ranking {
                messages: vec![sized("turn", 20), sized("far", 30)],
                scores: Some(vec![0.9, 0.1]),
                by_meaning: true,
                passages: Vec::new(),
            };
            fuse(&[words, meaning], Fusion::Score, &Preferred::default())
        };
        assert_eq!(ids(&fused(128))[0], "reply", "a passage's words count whole");
        assert_eq!(ids(&fused(512))[0], "turn");
        assert_eq!(words_share(0), 1.0);
        assert_eq!(words_share(128), 1.0);
        assert_eq!(words_share(512), 0.5);
        assert!(words_share(3_200) < 0.21);
    }

    #[test]
    fn a_turn_lends_part_of_its_meaning_to_its_neighbours_and_never_more() {
        let at = |id: &str, seq| Message {
            seq_in_session: seq,
            ..message(id, "bob")
        };
        let scored_at = |messages: &[(&str, i64, f32)], by_meaning| Ranking {
            messages: messages.iter().map(|&(id, seq, _)| at(id, seq)).collect(),
            scores: Some(messages.iter().map(|&(_, _, score)| score).collect()),
            by_meaning,
            passages: Vec::new(),
        };
        // "b" answers "a" (the turn before it): a weak match by its words
        // and none by meaning of its own.
        let words = || scored_at(&[("x", 20, 2.0), ("b", 2, 1.0), ("y", 30, 0.5)], false);
        let meaning = |lends| scored_at(&[("a", 1, 0.9), ("c", 5, 0.6), ("e", 9, 0.1)], lends);
        let plain = fuse(&[words(), meaning(false)], Fusion::Score, &Preferred::default());
        assert_eq!(ids(&plain)[2..4], ["c", "b"], "{:?}", ids(&plain));
        let lent = fuse(&[words(), meaning(true)], Fusion::Score, &Preferred::default());
        let order = ids(&lent);
        assert_eq!(order[..3], ["x", "a", "b"], "b gets half of a's score: {order:?}");
        assert_eq!(order[3], "c");
        assert_eq!(lent.len(), plain.len(), "lending adds no candidate");
    }

    #[test]
    fn a_question_lends_its_whole_meaning_to_the_reply_after_it() {
        let at = |id: &str, seq, content: &str| Message {
            seq_in_session: seq,
            content: content.into(),
            ..message(id, "bob")
        };
        let turns = [
            at("q", 1, "How long have you been painting?"),
            at("r", 2, "Since I was 17 or so."),
            at("s", 5, "I love painting."),
            at("t", 6, "Me too."),
            at("x", 9, "Unrelated."),
            at("y", 20, "Painting, painting."),
        ];
        let meaning = Ranking {
            messages: vec![turns[0].clone(), turns[2].clone(), turns[4].clone()],
            scores: Some(vec![0.9, 0.9, 0.1]),
            by_meaning: true,
            passages: Vec::new(),
        };
        // Both replies match by words alike, far below another turn.
        let words = Ranking {
            messages: vec![turns[5].clone(), turns[3].clone(), turns[1].clone()],
            scores: Some(vec![3.0, 0.2, 0.2]),
            by_meaning: false,
            passages: Vec::new(),
        };
        let fused = fuse(&[words, meaning], Fusion::Score, &Preferred::default());
        // The reply to the question gets the question's whole score and
        // ranks beside it; the turn after a statement gets half.
        let order = ids(&fused);
        let place = |id| order.iter().position(|at| *at == id).unwrap();
        assert!(place("r") < place("t"), "{order:?}");
        assert!(place("q") < place("t") && place("s") < place("t"), "{order:?}");
        assert_eq!(order.last(), Some(&"x"), "{order:?}");
    }
}
