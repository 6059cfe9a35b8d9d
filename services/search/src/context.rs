//! Session context, peer context and representations (honcho-v3 §3.1–§3.3),
//! built from the store's conclusions, peer cards and messages.

use roncho_core::model::{CollectionQuery, Conclusion, Message, SessionSummary, SummaryKind};
use roncho_core::vector::{VectorFilter, documents_namespace};

use crate::SearchStore;
use crate::Semantic;
use roncho_core::representation;
use roncho_core::{Error, Result, tokens};
use serde_json::Value;

/// Default and largest token budget of a session context.
pub const MAX_CONTEXT_TOKENS: i64 = 100_000;
/// Longest session allowlist.
pub const MAX_ALLOWLIST: usize = 1_000;

/// Parses the session allowlist of recall and dialectic filters: only
/// `session_id`, as an id, a list of ids or `{"in": [...]}`.
pub fn session_allowlist(filters: Option<&serde_json::Map<String, Value>>) -> Result<Option<Vec<String>>> {
    let Some(filters) = filters else { return Ok(None) };
    let mut allowlist = None;
    for (key, value) in filters {
        if key != "session_id" {
            return Err(Error::invalid(
                format!("filters.{key}"),
                "only session_id is allowed here",
            ));
        }
        let ids = match value {
            Value::String(_) => std::slice::from_ref(value),
            Value::Array(ids) => ids.as_slice(),
            Value::Object(operators) if operators.len() == 1 && operators.contains_key("in") => {
                match operators.get("in") {
                    Some(Value::Array(ids)) => ids.as_slice(),
                    _ => return Err(Error::invalid("filters.session_id.in", "must be a list of session ids")),
                }
            }
            _ => {
                return Err(Error::invalid(
                    "filters.session_id",
                    "must be an id, a list of ids or {\"in\": [...]}",
                ));
            }
        };
        if ids.len() > MAX_ALLOWLIST {
            return Err(Error::invalid(
                "filters.session_id",
                format!("holds more than {MAX_ALLOWLIST} ids"),
            ));
        }
        let ids = ids
            .iter()
            .map(|id| match id {
                Value::String(id) if id != "*" => Ok(id.clone()),
                _ => Err(Error::invalid(
                    "filters.session_id",
                    "must hold session ids (no wildcards)",
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        allowlist = Some(ids);
    }
    Ok(allowlist)
}

/// Refuses a scope's peer where a participant is meant (an observed peer,
/// a chat's observer): scopes are read through the `scope` options.
pub fn refuse_scope_peer(field: &str, peer_id: &str) -> Result<()> {
    match roncho_core::model::scope_of_peer(peer_id) {
        Some(scope) => Err(Error::invalid(
            field,
            format!("`{peer_id}` is scope `{scope}`, not a peer; read a scope with the scope option"),
        )),
        None => Ok(()),
    }
}

/// Checks a list of scope ids (1..=100 of them, as Honcho's `scope`).
pub fn scope_ids(field: &str, scopes: &[String]) -> Result<Vec<String>> {
    roncho_core::validate::list_len(field, scopes.len(), roncho_core::validate::MAX_ID_LIST)?;
    scopes
        .iter()
        .map(|id| roncho_core::validate::reference_id(field, id))
        .collect()
}

/// Whom a read of `peer_id`'s memory observes from, and which sessions it
/// may draw on, given `scopes` (honcho-v3 §3.3): one scope named alone
/// reads as the scope itself (its memory is its sessions'); a list, even of
/// one (`as_list`, Honcho 3.1), as the peer limited to the union of their
/// sessions; none, as the peer, unlimited.
pub async fn scoped_observer(
    store: &dyn SearchStore,
    workspace_id: &str,
    peer_id: &str,
    scopes: &[String],
    as_list: bool,
) -> Result<(String, Option<Vec<String>>)> {
    match scopes {
        [] => Ok((peer_id.to_owned(), None)),
        [scope] if !as_list => {
            store.get_scope(workspace_id, scope).await?;
            Ok((roncho_core::model::scope_peer(scope), None))
        }
        scopes => Ok((
            peer_id.to_owned(),
            Some(store.scope_session_ids(workspace_id, scopes).await?),
        )),
    }
}

/// What a representation is built from.
#[derive(Debug, Clone, Default)]
pub struct RepresentationOptions {
    pub observer: String,
    pub observed: String,
    /// Only explicit conclusions of these sessions; `Some(vec![])` selects nothing.
    pub allowed_sessions: Option<Vec<String>>,
    pub search_query: Option<String>,
    pub search_top_k: Option<i64>,
    pub search_max_distance: Option<f64>,
    pub include_most_frequent: bool,
    pub max_conclusions: i64,
}

/// Returns the working representation as markdown (`""` when empty).
///
/// With a `search_query` and an embedder, Honcho's semantic share holds the
/// conclusions nearest the query; without an embedder that share goes to the
/// newest conclusions. A failing embedder is logged and skipped, as in Honcho.
pub async fn representation(
    store: &dyn SearchStore,
    semantic: Option<&Semantic>,
    workspace_id: &str,
    options: &RepresentationOptions,
) -> Result<String> {
    let conclusions = representation_conclusions(store, semantic, workspace_id, options).await?;
    Ok(representation::to_markdown(&conclusions))
}

/// Returns the conclusions of a representation in Honcho's order of
/// priority: the most recent, then the most derived, then those nearest
/// the search query (each once).
pub async fn representation_conclusions(
    store: &dyn SearchStore,
    semantic: Option<&Semantic>,
    workspace_id: &str,
    options: &RepresentationOptions,
) -> Result<Vec<Conclusion>> {
    let semantic_query = semantic.zip(options.search_query.as_deref());
    let budget = representation::budget(
        options.max_conclusions,
        options.search_query.is_some(),
        options.search_top_k,
        options.include_most_frequent,
        semantic_query.is_some(),
    );
    let mut conclusions: Vec<Conclusion> = Vec::new();
    let mut add = |found: Vec<Conclusion>| {
        for conclusion in found {
            if conclusions.iter().all(|existing| existing.id != conclusion.id) {
                conclusions.push(conclusion);
            }
        }
    };
    for (recent, most_derived) in [(budget.recent, 0), (0, budget.most_derived)] {
        if recent + most_derived > 0 {
            let query = CollectionQuery {
                allowed_sessions: options.allowed_sessions.clone(),
                recent,
                most_derived,
            };
            add(store
                .collection_conclusions(workspace_id, &options.observer, &options.observed, &query)
                .await?);
        }
    }
    if let Some((semantic, search_query)) = semantic_query.filter(|_| budget.semantic > 0) {
        match nearest_conclusions(store, semantic, workspace_id, options, search_query, budget.semantic).await {
            Ok(nearest) => add(nearest),
            Err(error) => tracing::warn!(%error, "semantic part of the representation skipped"),
        }
    }
    Ok(conclusions)
}

/// A representation cut to a token budget.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fitted {
    /// The markdown of the conclusions kept.
    pub markdown: String,
    /// Its tokens.
    pub tokens: i64,
    /// Conclusions left out.
    pub omitted: i64,
}

/// Keeps the conclusions, in their order of priority, while their markdown
/// stays within `budget` tokens; what is left out is counted.
pub async fn fit_representation(conclusions: Vec<Conclusion>, budget: i64) -> Result<Fitted> {
    blocking(move || {
        let total = conclusions.len();
        let mut kept = conclusions;
        // Each alone costs at least its share of the whole: keep the
        // prefix whose shares fit, then drop from the end until the whole does.
        let mut used = 0;
        let fits = kept
            .iter()
            .take_while(|conclusion| {
                used += tokens::count(&representation::to_markdown(std::slice::from_ref(*conclusion)));
                used <= budget
            })
            .count();
        kept.truncate(fits);
        loop {
            let markdown = representation::to_markdown(&kept);
            let count = if markdown.is_empty() {
                0
            } else {
                tokens::count(&markdown)
            };
            if count <= budget.max(0) {
                return Fitted {
                    markdown,
                    tokens: count,
                    omitted: i64::try_from(total - kept.len()).unwrap_or(i64::MAX),
                };
            }
            kept.pop();
        }
    })
    .await
}

/// Keeps a peer card's lines, in order, while they stay within `budget`
/// tokens; returns them, their tokens and how many were left out.
pub async fn fit_card(card: Vec<String>, budget: i64) -> Result<(Vec<String>, i64, i64)> {
    blocking(move || {
        let total = card.len();
        let mut kept = card;
        loop {
            let count = if kept.is_empty() {
                0
            } else {
                tokens::count(&kept.join("\n"))
            };
            if count <= budget.max(0) {
                let left_out = i64::try_from(total - kept.len()).unwrap_or(i64::MAX);
                return (kept, count, left_out);
            }
            kept.pop();
        }
    })
    .await
}

/// A representation and a peer card, cut to a budget when one is given.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    /// The representation's markdown; `None` when none was asked for.
    pub representation: Option<String>,
    /// The card; `None` when there is none.
    pub peer_card: Option<Vec<String>>,
    /// Tokens of both, counted only under a budget.
    pub tokens: i64,
    /// What the budget left out.
    pub omitted: Omitted,
}

/// Returns the representation of `options` and, `with_card`, the peer card,
/// together within `budget` tokens when one is given: the card takes at most
/// half of it by line, the representation the rest by priority.
pub async fn memory(
    store: &dyn SearchStore,
    semantic: Option<&Semantic>,
    workspace_id: &str,
    options: &RepresentationOptions,
    with_card: bool,
    budget: impl Into<Option<i64>>,
) -> Result<Memory> {
    let budget = budget.into();
    let card = if with_card {
        peer_card(store, workspace_id, &options.observer, &options.observed).await?
    } else {
        None
    };
    let conclusions = representation_conclusions(store, semantic, workspace_id, options).await?;
    let Some(budget) = budget else {
        return Ok(Memory {
            representation: Some(representation::to_markdown(&conclusions)),
            peer_card: card,
            ..Memory::default()
        });
    };
    let mut omitted = Omitted::default();
    let (card, card_tokens) = match card {
        Some(card) => {
            let (kept, tokens, left_out) = fit_card(card, budget / 2).await?;
            omitted.card_lines = left_out;
            (Some(kept), tokens)
        }
        None => (None, 0),
    };
    let fitted = fit_representation(conclusions, budget - card_tokens).await?;
    omitted.conclusions = fitted.omitted;
    Ok(Memory {
        representation: Some(fitted.markdown),
        peer_card: card,
        tokens: fitted.tokens + card_tokens,
        omitted,
    })
}

/// The configurations a role's custom instructions come from, narrowest
/// first: the session's (when named) and the workspace's; empty for one
/// that does not exist.
pub async fn configurations(
    store: &dyn SearchStore,
    workspace_id: &str,
    session_id: Option<&str>,
) -> Result<Vec<roncho_core::model::JsonObject>> {
    use roncho_core::filter;
    use roncho_core::model::PageRequest;
    let by_id = |id: &str| serde_json::json!({ "id": id });
    let one = PageRequest::from_wire(1, 1, false)?;
    let mut layers = Vec::new();
    if let Some(session_id) = session_id {
        let filter = filter::parse(&filter::SESSION, by_id(session_id).as_object())?;
        let sessions = store.list_sessions(workspace_id, &filter, one).await?.items;
        layers.extend(sessions.into_iter().map(|session| session.configuration));
    }
    let filter = filter::parse(&filter::WORKSPACE, by_id(workspace_id).as_object())?;
    let workspaces = store.list_workspaces(&filter, one).await?.items;
    layers.extend(workspaces.into_iter().map(|workspace| workspace.configuration));
    Ok(layers)
}

/// The custom instructions of `sections` (each with the configuration's
/// top-level ones) in the workspace's and session's configurations.
pub async fn custom_instructions(
    store: &dyn SearchStore,
    workspace_id: &str,
    session_id: Option<&str>,
    sections: &[&str],
) -> Result<Option<String>> {
    let layers = configurations(store, workspace_id, session_id).await?;
    let layers: Vec<&roncho_core::model::JsonObject> = layers.iter().collect();
    let mut parts: Vec<String> = Vec::new();
    for section in sections {
        for part in roncho_core::derivation::custom_instructions(&layers, section)
            .into_iter()
            .flat_map(|text| text.split("\n\n").map(str::to_owned).collect::<Vec<_>>())
        {
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("\n\n")))
}

/// Runs token counting off the async runtime.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| Error::Internal(format!("token counting task failed: {error}")))
}

/// Returns the live conclusions of one collection nearest `query`, nearest first.
pub async fn nearest_conclusions(
    store: &dyn SearchStore,
    semantic: &Semantic,
    workspace_id: &str,
    options: &RepresentationOptions,
    query: &str,
    top_k: i64,
) -> Result<Vec<Conclusion>> {
    let vector = semantic.embed_query(workspace_id, query).await?;
    let filter = VectorFilter {
        session_ids: options.allowed_sessions.clone(),
        peer_id: None,
        // Under an allowlist only explicit conclusions are safe.
        levels: options.allowed_sessions.as_ref().map(|_| vec!["explicit".to_owned()]),
    };
    let namespace = documents_namespace(workspace_id, &options.observer, &options.observed);
    let max_distance = options.search_max_distance.map(|distance| distance as f32);
    let hits = semantic
        .vectors
        .query(
            &namespace,
            &vector,
            usize::try_from(top_k).unwrap_or(0),
            &filter,
            max_distance,
        )
        .await?;
    let ids: Vec<String> = hits.iter().map(|hit| hit.id.clone()).collect();
    let rows = store.conclusions_by_ids(workspace_id, &ids).await?;
    Ok(ids
        .iter()
        .filter_map(|id| rows.iter().find(|row| &row.id == id).cloned())
        .collect())
}

/// Returns the peer card, `None` when there is none or the observer is unknown.
pub async fn peer_card(
    store: &dyn SearchStore,
    workspace_id: &str,
    observer: &str,
    observed: &str,
) -> Result<Option<Vec<String>>> {
    match store.get_peer_card(workspace_id, observer, observed).await {
        Ok(card) => Ok(card),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Counts tokens off the async runtime.
pub async fn count_tokens(text: String) -> Result<i64> {
    blocking(move || tokens::count(&text)).await
}

/// A session context.
#[derive(Debug, Default)]
pub struct SessionContext {
    /// The session's id.
    pub id: String,
    pub messages: Vec<Message>,
    pub summary: Option<SessionSummary>,
    pub representation: Option<String>,
    pub peer_card: Option<Vec<String>>,
    /// What the budget left out of the representation and the card.
    pub omitted: Omitted,
}

/// What a token budget left out of a context, so that a reply never hides it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Omitted {
    /// Conclusions of the representation, the least important first.
    pub conclusions: i64,
    /// Lines of the peer card, from its end.
    pub card_lines: i64,
}

/// Share of a session context's budget the representation and the peer
/// card may take together; summary and messages have the rest.
const MEMORY_SHARE: i64 = 2;

/// Share of the budget a summary may take (Honcho: 40 %).
const SUMMARY_SHARE: f64 = 0.4;

/// Picks the summary for a budget as Honcho does: the long one when it fits
/// in 40 % and is longer than the short one, else the short one when it fits.
/// Returns it, the position messages start from (the summary's last message,
/// repeated) and what is left of the budget for messages.
pub fn select_summary(summaries: &[SessionSummary], budget: i64) -> (Option<SessionSummary>, i64, i64) {
    if budget <= 0 {
        return (None, 0, budget.max(0));
    }
    let share = (budget as f64 * SUMMARY_SHARE) as i64;
    let find = |kind| summaries.iter().find(|summary| summary.kind == kind);
    let short = find(SummaryKind::Short);
    let long = find(SummaryKind::Long);
    let short_tokens = short.map_or(0, |summary| summary.token_count);
    let chosen = match (long, short) {
        (Some(long), _) if long.token_count <= share && long.token_count > short_tokens => Some(long),
        (_, Some(short)) if short.token_count > 0 && short.token_count <= share => Some(short),
        _ => None,
    };
    match chosen {
        Some(summary) => (Some(summary.clone()), summary.message_seq, budget - summary.token_count),
        None => (None, 0, budget),
    }
}

/// The newest of `messages` (oldest first) at or after position `from_seq`
/// whose tokens add up to at most `token_budget`: the window a summary
/// leaves to the messages, cut from the one read for the whole budget.
fn newest_within(mut messages: Vec<Message>, token_budget: i64, from_seq: i64) -> Vec<Message> {
    if token_budget <= 0 {
        return Vec::new();
    }
    let mut used = 0_i64;
    let mut first = messages.len();
    for (index, message) in messages.iter().enumerate().rev() {
        if message.seq_in_session < from_seq || used + message.token_count > token_budget {
            break;
        }
        used += message.token_count;
        first = index;
    }
    messages.drain(..first);
    messages
}

/// Builds a session context within `token_limit` tokens in all: the peer
/// card and the representation first (when a target is given), together at
/// most half the budget — the card by line within a quarter, the
/// representation by conclusion in order of priority within the rest of
/// that half, what does not fit counted in `omitted` — then a summary of at most 40 % of what is left (when asked for), then
/// the newest messages that fit, from the summary's last message on.
pub async fn session_context(
    store: &dyn SearchStore,
    semantic: Option<&Semantic>,
    workspace_id: &str,
    session_id: &str,
    token_limit: i64,
    include_summary: bool,
    target: Option<RepresentationOptions>,
) -> Result<SessionContext> {
    let (memory, budget) = match target {
        None => (Memory::default(), token_limit),
        Some(options) => {
            // Under an allowlist the card is dropped: it may rest on other sessions.
            let with_card = options.allowed_sessions.is_none();
            let memory = memory(
                store,
                semantic,
                workspace_id,
                &options,
                with_card,
                token_limit / MEMORY_SHARE,
            )
            .await?;
            let left = token_limit - memory.tokens;
            (memory, left)
        }
    };
    let window = store
        .context_window(workspace_id, session_id, budget, include_summary)
        .await?;
    let (summary, from_seq, message_budget) = if include_summary {
        select_summary(&window.summaries, budget)
    } else {
        (None, 0, budget)
    };
    let messages = newest_within(window.messages, message_budget, from_seq);
    Ok(SessionContext {
        id: session_id.to_owned(),
        messages,
        summary,
        representation: memory.representation,
        peer_card: memory.peer_card,
        omitted: memory.omitted,
    })
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    fn summary(kind: SummaryKind, tokens: i64, seq: i64) -> SessionSummary {
        SessionSummary {
            kind,
            content: format!("{kind:?}"),
            message_id: format!("m{seq}"),
            message_seq: seq,
            token_count: tokens,
            created_at: 0,
        }
    }

    #[test]
    fn the_window_is_cut_from_the_newest_within_budget_and_summary() {
        let messages: Vec<Message> = [(1, 5), (2, 0), (3, 4), (4, 3), (5, 0)]
            .into_iter()
            .map(|(seq, tokens)| Message {
                id: format!("m{seq}"),
                workspace_id: "w".into(),
                session_id: "s".into(),
                peer_id: "p".into(),
                content: String::new(),
                metadata: Default::default(),
                created_at: seq,
                token_count: tokens,
                seq_in_session: seq,
            })
            .collect();
        let cut = |budget, from_seq| {
            newest_within(messages.clone(), budget, from_seq)
                .iter()
                .map(|message| message.seq_in_session)
                .collect::<Vec<_>>()
        };
        assert_eq!(cut(12, 0), [1, 2, 3, 4, 5]);
        assert_eq!(cut(11, 0), [2, 3, 4, 5], "stops at the first that does not fit");
        assert_eq!(cut(3, 0), [4, 5]);
        assert_eq!(cut(2, 0), [5]);
        assert_eq!(cut(12, 3), [3, 4, 5], "nothing before the summary's last message");
        assert!(cut(0, 0).is_empty(), "no budget, not even for a message of no tokens");
        assert!(cut(-1, 0).is_empty());
    }

    #[test]
    fn summaries_are_chosen_as_honcho_does() {
        let short = summary(SummaryKind::Short, 30, 8);
        let long = summary(SummaryKind::Long, 300, 5);
        let both = [short.clone(), long.clone()];
        // 40 % of 1000 = 400: the long one fits and is longer.
        assert_eq!(select_summary(&both, 1000), (Some(long), 5, 700));
        // 40 % of 100 = 40: only the short one fits.
        assert_eq!(select_summary(&both, 100), (Some(short.clone()), 8, 70));
        // 40 % of 50 = 20: neither fits.
        assert_eq!(select_summary(&both, 50), (None, 0, 50));
        assert_eq!(select_summary(&[], 1000), (None, 0, 1000));
        assert_eq!(select_summary(&both, -5), (None, 0, 0));
        // A long summary no longer than the short one is not preferred.
        let stale_long = summary(SummaryKind::Long, 20, 2);
        assert_eq!(
            select_summary(&[short.clone(), stale_long], 1000),
            (Some(short), 8, 970)
        );
    }
}
