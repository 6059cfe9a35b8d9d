//! Runs the agent tools against the store: one [`ToolContext`] per agent run,
//! scoped to one collection (workspace, observer, observed) and, for
//! messages, to what the observer could see (sessions it is or was in, and
//! the request's session allowlist).
//!
//! Output is text in Honcho's shapes: observations as
//! `[id:ID] [YYYY-MM-DD HH:MM:SS] (level) content`, messages as
//! `[id:ID] [YYYY-MM-DD HH:MM:SS] peer: content`; other tools parse the ids
//! back. Every output is cut at [`MAX_TOOL_OUTPUT_CHARS`]. A bad input is an
//! `error: ...` result the model can correct; only store failures are errors.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use roncho_core::filter;
use roncho_core::model::{
    CollectionQuery, Conclusion, Message, MessageScan, MessageSearch, NewConclusion, PageRequest,
};
use roncho_core::representation::format_time;
use roncho_core::{Error, Result};
use roncho_search::SearchStore;
use roncho_search::Semantic;
use roncho_search::context::{RepresentationOptions, nearest_conclusions};
use serde_json::{Value, json};

roncho_core::store_view! {
    /// The store as the agents' tools use it: what search reads, and the
    /// memory they write (conclusions, peer cards) through the same ports.
    pub trait AgentStore: SearchStore
}

/// Longest tool output, in characters (Honcho's `MAX_TOOL_OUTPUT_CHARS`).
pub const MAX_TOOL_OUTPUT_CHARS: usize = 10_000;
/// Longest message content shown (Honcho's `MAX_MESSAGE_CONTENT_CHARS`).
pub const MAX_MESSAGE_CONTENT_CHARS: usize = 2_000;
/// Most entries of a peer card, and longest entry.
pub const MAX_PEER_CARD_FACTS: usize = 40;
pub const MAX_PEER_CARD_FACT_CHARS: usize = 200;
/// The prefixes a peer card entry carries.
pub const PEER_CARD_PREFIXES: [&str; 4] = ["IDENTITY:", "ATTRIBUTE:", "RELATIONSHIP:", "INSTRUCTION:"];

/// Conclusions scanned by the lexical `search_memory` when there is no embedder.
const LEXICAL_SCAN: i64 = 500;
/// Depth of a reasoning chain walk.
const CHAIN_DEPTH: usize = 3;

type CollectionKey = (String, String, String);

/// One write lock per collection, shared by every agent of this process.
static WRITE_LOCKS: LazyLock<Mutex<HashMap<CollectionKey, Weak<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Returns the lock serialising writes to one collection in this process.
/// (Across processes the queue runs one dream per collection at a time, and
/// the dialectic does not write.)
pub fn collection_lock(workspace: &str, observer: &str, observed: &str) -> Arc<tokio::sync::Mutex<()>> {
    let mut locks = WRITE_LOCKS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    locks.retain(|_, lock| lock.strong_count() > 0);
    let key = (workspace.to_owned(), observer.to_owned(), observed.to_owned());
    if let Some(lock) = locks.get(&key).and_then(Weak::upgrade) {
        return lock;
    }
    let lock = Arc::new(tokio::sync::Mutex::new(()));
    locks.insert(key, Arc::downgrade(&lock));
    lock
}

/// What the tools of one agent run work on.
pub struct ToolContext {
    pub store: Arc<dyn AgentStore>,
    pub semantic: Option<Semantic>,
    pub workspace: String,
    pub observer: String,
    pub observed: String,
    /// The session of the request, if any.
    pub session: Option<String>,
    /// Sessions whose messages and explicit observations may be read; `None`: all.
    pub allowed_sessions: Option<Vec<String>>,
    /// Token budget of `get_recent_history`.
    pub history_token_limit: i64,
    /// Every peer's memory of every peer (workspace chat): `observer` and
    /// `observed` are empty, and only reading tools make sense.
    pub whole_workspace: bool,
    write_lock: Arc<tokio::sync::Mutex<()>>,
    log: Mutex<RunLog>,
}

/// What a run wrote, and whether it said it was done; what it read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunLog {
    pub created: Vec<String>,
    pub deleted: Vec<String>,
    pub card_updated: bool,
    pub finished: Option<String>,
    /// What the run read, each once, in the order first read: the evidence
    /// of an answer (it over-reports: read is not relied on).
    pub read: Evidence,
}

/// What an agent run read and did: conclusions and messages it was shown,
/// and the tools it called successfully, with their inputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    pub conclusions: Vec<Conclusion>,
    pub messages: Vec<Message>,
    pub tool_calls: Vec<(String, Value)>,
}

impl Evidence {
    fn conclusions(&mut self, read: &[Conclusion]) {
        for conclusion in read {
            if self.conclusions.iter().all(|known| known.id != conclusion.id) {
                self.conclusions.push(conclusion.clone());
            }
        }
    }

    fn messages(&mut self, read: &[Message]) {
        for message in read {
            if self.messages.iter().all(|known| known.id != message.id) {
                self.messages.push(message.clone());
            }
        }
    }
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ToolContext")
            .field("workspace", &self.workspace)
            .field("observer", &self.observer)
            .field("observed", &self.observed)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    pub fn new(
        store: Arc<dyn AgentStore>,
        semantic: Option<Semantic>,
        workspace: &str,
        observer: &str,
        observed: &str,
        session: Option<String>,
    ) -> Self {
        Self {
            store,
            semantic,
            workspace: workspace.to_owned(),
            observer: observer.to_owned(),
            observed: observed.to_owned(),
            session,
            allowed_sessions: None,
            history_token_limit: 8_192,
            whole_workspace: false,
            write_lock: collection_lock(workspace, observer, observed),
            log: Mutex::new(RunLog::default()),
        }
    }

    /// A run over every peer's memory of the workspace (reads only).
    pub fn whole_workspace(
        store: Arc<dyn AgentStore>,
        semantic: Option<Semantic>,
        workspace: &str,
        session: Option<String>,
    ) -> Self {
        Self {
            whole_workspace: true,
            ..Self::new(store, semantic, workspace, "", "", session)
        }
    }

    /// The observer whose view of messages applies; `None` for the whole workspace.
    fn perspective(&self) -> Option<String> {
        (!self.whole_workspace).then(|| self.observer.clone())
    }

    /// Notes conclusions the run was shown.
    pub fn read_conclusions(&self, read: &[Conclusion]) {
        self.record(|log| log.read.conclusions(read));
    }

    /// Notes messages the run was shown.
    pub fn read_messages(&self, read: &[Message]) {
        self.record(|log| log.read.messages(read));
    }

    /// Restricts reads to these sessions (the request's allowlist).
    pub fn with_allowed_sessions(mut self, sessions: Option<Vec<String>>) -> Self {
        self.allowed_sessions = sessions;
        self
    }

    /// What the run wrote so far.
    pub fn log(&self) -> RunLog {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn record(&self, change: impl FnOnce(&mut RunLog)) {
        change(&mut self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    }

    /// Runs one tool; the text is what the model sees.
    pub async fn execute(&self, name: &str, input: &Value) -> Result<String> {
        let output = match name {
            "search_memory" => self.search_memory(input).await,
            "search_messages" => self.search_messages(input).await,
            "get_observation_context" => self.observation_context(input).await,
            "grep_messages" => self.grep_messages(input).await,
            "get_messages_by_date_range" => self.messages_by_date_range(input).await,
            "search_messages_temporal" => self.search_messages_temporal(input).await,
            "get_reasoning_chain" => self.reasoning_chain(input).await,
            "get_recent_observations" => self.recent_observations(input).await,
            "get_most_derived_observations" => self.most_derived_observations(input).await,
            "create_observations" => self.create_observations(input, None).await,
            "create_observations_deductive" => self.create_observations(input, Some("deductive")).await,
            "create_observations_inductive" => self.create_observations(input, Some("inductive")).await,
            "delete_observations" => self.delete_observations(input).await,
            "update_peer_card" => self.update_peer_card(input).await,
            "get_peer_card" => self.peer_card().await,
            "get_recent_history" => self.recent_history().await,
            "get_session_summary" => self.session_summary(input).await,
            "extract_preferences" => self.extract_preferences().await,
            "finish_consolidation" => {
                let summary = text_arg(input, "summary").unwrap_or_default();
                self.record(|log| log.finished = Some(summary.clone()));
                Ok(format!("Consolidation finished: {summary}"))
            }
            other => Ok(format!("error: unknown tool `{other}`")),
        };
        match output {
            Ok(text) => {
                if !text.starts_with("error:") {
                    self.record(|log| log.read.tool_calls.push((name.to_owned(), input.clone())));
                }
                Ok(truncate_output(text))
            }
            // The model sent something unusable: it sees why and can retry.
            Err(Error::InvalidArgument { field, reason }) => Ok(format!("error: {field}: {reason}")),
            Err(Error::NotFound { resource, id }) => Ok(format!("error: {resource} {id} not found")),
            Err(error) => Err(error),
        }
    }

    fn may_read_session(&self, session: Option<&str>) -> bool {
        match (&self.allowed_sessions, session) {
            (None, _) => true,
            (Some(allowed), Some(session)) => allowed.iter().any(|id| id == session),
            (Some(_), None) => false,
        }
    }

    /// Conclusions of this collection the run may see: under an allowlist,
    /// only explicit ones from allowed sessions.
    fn visible(&self, conclusion: &Conclusion) -> bool {
        (self.whole_workspace || (conclusion.observer_id == self.observer && conclusion.observed_id == self.observed))
            && (self.allowed_sessions.is_none()
                || (conclusion.level == "explicit" && self.may_read_session(conclusion.session_id.as_deref())))
    }

    async fn search_memory(&self, input: &Value) -> Result<String> {
        let query = required_text(input, "query")?;
        let top_k = int_arg(input, "top_k", 20, 1, 40);
        let found = self.find_observations(&query, top_k, None).await?;
        if found.is_empty() {
            return Ok(format!("No observations found for '{query}'."));
        }
        Ok(format!(
            "Found {} observations:\n{}",
            found.len(),
            observation_lines(&found)
        ))
    }

    /// The collection's conclusions nearest `query` (semantic, else by shared
    /// words), optionally of some levels only.
    pub async fn find_observations(&self, query: &str, top_k: i64, levels: Option<&[&str]>) -> Result<Vec<Conclusion>> {
        let found = self.nearest_observations(query, top_k, levels).await?;
        self.read_conclusions(&found);
        Ok(found)
    }

    async fn nearest_observations(&self, query: &str, top_k: i64, levels: Option<&[&str]>) -> Result<Vec<Conclusion>> {
        let wanted = |conclusion: &Conclusion| levels.is_none_or(|levels| levels.contains(&conclusion.level.as_str()));
        if let Some(semantic) = self.semantic.as_ref().filter(|_| !self.whole_workspace) {
            let options = RepresentationOptions {
                observer: self.observer.clone(),
                observed: self.observed.clone(),
                allowed_sessions: self.allowed_sessions.clone(),
                ..RepresentationOptions::default()
            };
            // Asks for more when filtering by level afterwards.
            let asked = if levels.is_some() { top_k * 4 } else { top_k };
            match nearest_conclusions(self.store.as_ref(), semantic, &self.workspace, &options, query, asked).await {
                Ok(found) => {
                    let mut found: Vec<Conclusion> =
                        found.into_iter().filter(|c| self.visible(c) && wanted(c)).collect();
                    found.truncate(usize::try_from(top_k).unwrap_or(usize::MAX));
                    if !found.is_empty() {
                        return Ok(found);
                    }
                }
                Err(error) => tracing::warn!(%error, "semantic memory search failed; matching words instead"),
            }
        }
        let terms = roncho_core::search::terms(query);
        let candidates = if self.whole_workspace {
            self.workspace_conclusions().await?
        } else {
            self.store
                .collection_conclusions(
                    &self.workspace,
                    &self.observer,
                    &self.observed,
                    &CollectionQuery {
                        allowed_sessions: self.allowed_sessions.clone(),
                        recent: LEXICAL_SCAN,
                        most_derived: 0,
                    },
                )
                .await?
        };
        let mut scored: Vec<(usize, Conclusion)> = candidates
            .into_iter()
            .filter(|c| self.visible(c) && wanted(c))
            .map(|c| (shared_terms(&terms, &c.content), c))
            .filter(|(score, _)| *score > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.created_at.cmp(&a.1.created_at)));
        Ok(scored
            .into_iter()
            .take(usize::try_from(top_k).unwrap_or(usize::MAX))
            .map(|(_, c)| c)
            .collect())
    }

    /// The workspace's newest conclusions of every collection, up to
    /// [`LEXICAL_SCAN`] (vectors are kept per collection: a whole-workspace
    /// question matches words).
    async fn workspace_conclusions(&self) -> Result<Vec<Conclusion>> {
        let mut found = Vec::new();
        let pages = i32::try_from(LEXICAL_SCAN / 100).unwrap_or(1);
        for page in 1..=pages {
            let items = self
                .store
                .list_conclusions(
                    &self.workspace,
                    &filter::Filter::All,
                    PageRequest::from_wire(page, 100, false)?,
                )
                .await?
                .items;
            let last = items.len() < 100;
            found.extend(items);
            if last {
                break;
            }
        }
        Ok(found)
    }

    async fn search_messages(&self, input: &Value) -> Result<String> {
        let query = required_text(input, "query")?;
        let limit = int_arg(input, "limit", 10, 1, 20);
        let found = self.find_messages(&query, limit, None, None).await?;
        if found.is_empty() {
            return Ok(format!("No messages found for '{query}'."));
        }
        let snippets = self.snippets(&found, 2).await?;
        Ok(format!("Found {} matching messages:\n{snippets}", found.len()))
    }

    /// Messages matching `query` (hybrid search, as SearchMessages ranks
    /// them), within what the observer could see and the dates given.
    pub async fn find_messages(
        &self,
        query: &str,
        limit: i64,
        after: Option<i64>,
        before: Option<i64>,
    ) -> Result<Vec<Message>> {
        let dated = |m: &Message| after.is_none_or(|t| m.created_at > t) && before.is_none_or(|t| m.created_at < t);
        // Dates filter afterwards: ask for more.
        let asked = if after.is_some() || before.is_some() {
            limit * 5
        } else {
            limit * 2
        };
        // The same search as SearchMessages, in every configuration: each
        // store's full text is read where that configuration keeps it (the
        // embedded vector store's index, Qdrant's sparse vectors, SQLite's
        // FTS5 or Postgres' text index).
        let search = MessageSearch {
            terms: roncho_core::search::terms(query),
            session_ids: self.allowed_sessions.clone(),
            peer_id: None,
            peer_perspective: self.perspective(),
            limit: asked,
        };
        let found = roncho_search::messages::search(
            self.store.as_ref(),
            self.semantic.as_ref(),
            &self.workspace,
            query,
            &search,
            &filter::Filter::All,
        )
        .await?;
        if !found.degraded_reason.is_empty() && self.semantic.is_some() {
            tracing::warn!(reason = found.degraded_reason, "agent message search degraded");
        }
        let found = found.messages;
        let mut found: Vec<Message> = found
            .into_iter()
            .filter(|m| dated(m) && self.may_read_session(Some(&m.session_id)))
            .collect();
        found.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        self.read_messages(&found);
        Ok(found)
    }

    /// The matches with `window` messages on each side, overlapping windows
    /// of a session merged into one snippet.
    async fn snippets(&self, matches: &[Message], window: i64) -> Result<String> {
        let mut ranges: Vec<(String, i64, i64)> = Vec::new();
        for message in matches {
            let (from, to) = (message.seq_in_session - window, message.seq_in_session + window);
            match ranges
                .iter_mut()
                .find(|(session, start, end)| *session == message.session_id && from <= *end + 1 && to >= *start - 1)
            {
                Some(range) => {
                    range.1 = range.1.min(from);
                    range.2 = range.2.max(to);
                }
                None => ranges.push((message.session_id.clone(), from, to)),
            }
        }
        let mut text = String::new();
        for (session, from, to) in ranges {
            let messages = self
                .scan(MessageScan {
                    session_ids: Some(vec![session.clone()]),
                    seq_range: Some((from, to)),
                    limit: to - from + 1,
                    ..MessageScan::default()
                })
                .await?;
            text.push_str(&format!("--- session {session} ---\n{}", message_lines(&messages)));
        }
        Ok(text)
    }

    /// Scans messages the observer could see (within the allowlist unless
    /// the scan names its sessions).
    async fn scan(&self, scan: MessageScan) -> Result<Vec<Message>> {
        let scan = MessageScan {
            session_ids: scan.session_ids.or_else(|| self.allowed_sessions.clone()),
            peer_perspective: self.perspective(),
            ..scan
        };
        let found = self.store.scan_messages(&self.workspace, &scan).await?;
        self.read_messages(&found);
        Ok(found)
    }

    async fn observation_context(&self, input: &Value) -> Result<String> {
        let ids = text_list(input, "message_ids")?;
        if ids.is_empty() {
            return Err(Error::invalid("message_ids", "give at least one message id"));
        }
        let found: Vec<Message> = self
            .store
            .messages_by_ids(
                &self.workspace,
                &ids,
                &filter::Filter::All,
                self.perspective().as_deref(),
            )
            .await?
            .into_iter()
            .filter(|m| self.may_read_session(Some(&m.session_id)))
            .collect();
        if found.is_empty() {
            return Ok("No messages found for those ids.".to_owned());
        }
        self.snippets(&found, 1).await
    }

    async fn grep_messages(&self, input: &Value) -> Result<String> {
        let text = required_text(input, "text")?;
        let limit = int_arg(input, "limit", 10, 1, 30);
        let window = int_arg(input, "context_window", 2, 0, 5);
        let found = self
            .scan(MessageScan {
                contains: Some(text.clone()),
                newest_first: true,
                limit,
                ..MessageScan::default()
            })
            .await?;
        if found.is_empty() {
            return Ok(format!("No messages contain '{text}'."));
        }
        let snippets = self.snippets(&found, window).await?;
        Ok(format!(
            "Found {} messages containing '{text}':\n{snippets}",
            found.len()
        ))
    }

    async fn messages_by_date_range(&self, input: &Value) -> Result<String> {
        let after = date_arg(input, "after_date")?;
        let before = date_arg(input, "before_date")?;
        let limit = int_arg(input, "limit", 20, 1, 50);
        let newest_first = !matches!(input.get("order").and_then(Value::as_str), Some("asc"));
        let found = self
            .scan(MessageScan {
                after,
                before,
                newest_first,
                limit,
                ..MessageScan::default()
            })
            .await?;
        if found.is_empty() {
            return Ok("No messages in that date range.".to_owned());
        }
        Ok(format!(
            "Found {} messages:\n{}",
            found.len(),
            message_lines_with_session(&found)
        ))
    }

    async fn search_messages_temporal(&self, input: &Value) -> Result<String> {
        let query = required_text(input, "query")?;
        let after = date_arg(input, "after_date")?;
        let before = date_arg(input, "before_date")?;
        let limit = int_arg(input, "limit", 10, 1, 20);
        let window = int_arg(input, "context_window", 2, 0, 5);
        let mut found = self.find_messages(&query, limit, after, before).await?;
        if found.is_empty() {
            return Ok(format!("No messages found for '{query}' in that date range."));
        }
        // Newest first: the most recent discussion is what these questions want.
        found.sort_by_key(|message| std::cmp::Reverse(message.created_at));
        let snippets = self.snippets(&found, window).await?;
        Ok(format!("Found {} matching messages:\n{snippets}", found.len()))
    }

    async fn reasoning_chain(&self, input: &Value) -> Result<String> {
        let id = required_text(input, "observation_id")?;
        let direction = input.get("direction").and_then(Value::as_str).unwrap_or("both");
        if !matches!(direction, "premises" | "conclusions" | "both") {
            return Err(Error::invalid("direction", "must be premises, conclusions or both"));
        }
        let root = self.collection_conclusion(&id).await?;
        let mut text = format!("Observation:\n{}\n", observation_line(&root));
        if direction != "conclusions" {
            text.push_str("\nPremises (what it is based on):\n");
            let before = text.len();
            self.walk_premises(&root, 1, &mut text).await?;
            if text.len() == before {
                text.push_str("  (none)\n");
            }
        }
        if direction != "premises" {
            text.push_str("\nConclusions (what depends on it):\n");
            let before = text.len();
            self.walk_conclusions(&root.id, 1, &mut text).await?;
            if text.len() == before {
                text.push_str("  (none)\n");
            }
        }
        Ok(text)
    }

    async fn walk_premises(&self, conclusion: &Conclusion, depth: usize, text: &mut String) -> Result<()> {
        if conclusion.level == "explicit" {
            if !conclusion.source_ids.is_empty() {
                text.push_str(&format!(
                    "{}from messages: {}\n",
                    "  ".repeat(depth),
                    conclusion.source_ids.join(", ")
                ));
            }
            return Ok(());
        }
        let premises = self
            .store
            .conclusions_by_ids(&self.workspace, &conclusion.source_ids)
            .await?;
        for premise in premises.iter().filter(|c| self.visible(c)) {
            text.push_str(&format!("{}{}\n", "  ".repeat(depth), observation_line(premise)));
            if depth < CHAIN_DEPTH {
                Box::pin(self.walk_premises(premise, depth + 1, text)).await?;
            }
        }
        Ok(())
    }

    async fn walk_conclusions(&self, id: &str, depth: usize, text: &mut String) -> Result<()> {
        let citing = self.store.conclusions_citing(&self.workspace, id).await?;
        for conclusion in citing.iter().filter(|c| self.visible(c)) {
            text.push_str(&format!("{}{}\n", "  ".repeat(depth), observation_line(conclusion)));
            if depth < CHAIN_DEPTH {
                Box::pin(self.walk_conclusions(&conclusion.id, depth + 1, text)).await?;
            }
        }
        Ok(())
    }

    /// A live conclusion of this collection the run may see.
    async fn collection_conclusion(&self, id: &str) -> Result<Conclusion> {
        self.store
            .conclusions_by_ids(&self.workspace, &[id.to_owned()])
            .await?
            .into_iter()
            .find(|c| self.visible(c))
            .ok_or_else(|| Error::not_found("observation", id))
    }

    async fn recent_observations(&self, input: &Value) -> Result<String> {
        let limit = int_arg(input, "limit", 10, 1, 100);
        let session_only = input.get("session_only").and_then(Value::as_bool).unwrap_or(false);
        let mut filters = json!({"observer_id": self.observer, "observed_id": self.observed});
        if session_only {
            let Some(session) = &self.session else {
                return Err(Error::invalid("session_only", "this run has no session"));
            };
            filters["session_id"] = json!(session);
        }
        let filter = filter::parse(&filter::CONCLUSION, filters.as_object())?;
        let page = PageRequest::from_wire(1, i32::try_from(limit).unwrap_or(100), false)?;
        let found: Vec<Conclusion> = self
            .store
            .list_conclusions(&self.workspace, &filter, page)
            .await?
            .items
            .into_iter()
            .filter(|c| self.visible(c))
            .collect();
        if found.is_empty() {
            return Ok("No observations yet.".to_owned());
        }
        Ok(format!(
            "{} most recent observations:\n{}",
            found.len(),
            observation_lines(&found)
        ))
    }

    async fn most_derived_observations(&self, input: &Value) -> Result<String> {
        let limit = int_arg(input, "limit", 10, 1, 100);
        let found: Vec<Conclusion> = self
            .store
            .collection_conclusions(
                &self.workspace,
                &self.observer,
                &self.observed,
                &CollectionQuery {
                    allowed_sessions: self.allowed_sessions.clone(),
                    recent: 0,
                    most_derived: limit,
                },
            )
            .await?
            .into_iter()
            .filter(|c| self.visible(c))
            .collect();
        if found.is_empty() {
            return Ok("No observations yet.".to_owned());
        }
        let lines: String = found
            .iter()
            .map(|c| format!("{} (derived {}x)\n", observation_line(c), c.times_derived))
            .collect();
        Ok(format!("{} most derived observations:\n{lines}", found.len()))
    }

    async fn create_observations(&self, input: &Value, fixed_level: Option<&str>) -> Result<String> {
        let Some(items) = input.get("observations").and_then(Value::as_array) else {
            return Err(Error::invalid("observations", "must be a list"));
        };
        let _guard = self.write_lock.lock().await;
        let mut new = Vec::new();
        let mut refused = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match self.new_observation(item, fixed_level).await? {
                Ok(conclusion) => new.push(conclusion),
                Err(reason) => refused.push(format!("observations[{index}]: {reason}")),
            }
        }
        let created = if new.is_empty() {
            Vec::new()
        } else {
            self.store.create_conclusions(&self.workspace, new).await?
        };
        let ids: Vec<String> = created.iter().map(|c| c.id.clone()).collect();
        self.record(|log| log.created.extend(ids));
        let mut text = format!(
            "Created {} observations:\n{}",
            created.len(),
            observation_lines(&created)
        );
        if !refused.is_empty() {
            text.push_str(&format!("Rejected {}:\n{}\n", refused.len(), refused.join("\n")));
        }
        Ok(text)
    }

    /// Validates one observation; the inner error is the reason it is refused.
    async fn new_observation(
        &self,
        item: &Value,
        fixed_level: Option<&str>,
    ) -> Result<std::result::Result<NewConclusion, String>> {
        let content = item.get("content").and_then(Value::as_str).map(str::trim).unwrap_or("");
        if content.is_empty() {
            return Ok(Err("content is empty".into()));
        }
        let level = match fixed_level.or_else(|| item.get("level").and_then(Value::as_str)) {
            Some(level @ ("explicit" | "deductive" | "inductive" | "contradiction")) => level,
            other => {
                return Ok(Err(format!(
                    "level {other:?} is not explicit, deductive, inductive or contradiction"
                )));
            }
        };
        let strings = |key: &str| -> Vec<String> {
            item.get(key)
                .and_then(Value::as_array)
                .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default()
        };
        let source_ids = strings("source_ids");
        let premises = strings("premises");
        let sources = strings("sources");
        let least = match level {
            "explicit" => 0,
            "deductive" => 1,
            _ => 2,
        };
        if source_ids.len() < least {
            return Ok(Err(format!("a {level} observation needs at least {least} source_ids")));
        }
        if level == "deductive" && premises.is_empty() {
            return Ok(Err("a deductive observation needs its premises".into()));
        }
        if matches!(level, "inductive" | "contradiction") && sources.len() < 2 {
            return Ok(Err(format!("a {level} observation needs at least 2 sources")));
        }
        let mut metadata = serde_json::Map::new();
        if level == "inductive" {
            for key in ["pattern_type", "confidence"] {
                match item.get(key).and_then(Value::as_str) {
                    Some(value) => {
                        metadata.insert(key.to_owned(), json!(value));
                    }
                    None => return Ok(Err(format!("an inductive observation needs {key}"))),
                }
            }
        }
        if level != "explicit" {
            // Every source must be a live observation of this collection.
            let known = self.store.conclusions_by_ids(&self.workspace, &source_ids).await?;
            let missing: Vec<&String> = source_ids
                .iter()
                .filter(|id| !known.iter().any(|c| &c.id == *id && self.visible(c)))
                .collect();
            if !missing.is_empty() {
                return Ok(Err(format!(
                    "unknown source_ids {missing:?}: use ids from [id:...] of this peer's observations"
                )));
            }
        }
        if !sources.is_empty() {
            metadata.insert("sources".into(), json!(sources));
        }
        Ok(Ok(NewConclusion {
            observer_id: self.observer.clone(),
            observed_id: self.observed.clone(),
            session_id: self.session.clone(),
            level: level.to_owned(),
            content: content.to_owned(),
            premises: if level == "deductive" { premises } else { sources },
            source_ids,
            metadata,
        }))
    }

    async fn delete_observations(&self, input: &Value) -> Result<String> {
        let ids = text_list(input, "observation_ids")?;
        let _guard = self.write_lock.lock().await;
        let known = self.store.conclusions_by_ids(&self.workspace, &ids).await?;
        let mut deleted = Vec::new();
        let mut missing = Vec::new();
        for id in ids {
            if !known.iter().any(|c| c.id == id && self.visible(c)) {
                missing.push(id);
                continue;
            }
            match self.store.delete_conclusion(&self.workspace, &id).await {
                Ok(()) => deleted.push(id),
                Err(Error::NotFound { .. }) => missing.push(id),
                Err(error) => return Err(error),
            }
        }
        let text = format!(
            "Deleted {} observations{}",
            deleted.len(),
            if missing.is_empty() {
                String::new()
            } else {
                format!("; not found: {}", missing.join(", "))
            }
        );
        self.record(|log| log.deleted.extend(deleted));
        Ok(text)
    }

    async fn update_peer_card(&self, input: &Value) -> Result<String> {
        let entries = text_list(input, "content")?;
        let card = normalize_card(&entries);
        let _guard = self.write_lock.lock().await;
        self.store
            .set_peer_card(&self.workspace, &self.observer, &self.observed, card.clone())
            .await?;
        self.record(|log| log.card_updated = true);
        Ok(format!(
            "Peer card updated ({} entries):\n{}",
            card.len(),
            card.join("\n")
        ))
    }

    async fn peer_card(&self) -> Result<String> {
        match roncho_search::context::peer_card(self.store.as_ref(), &self.workspace, &self.observer, &self.observed)
            .await?
        {
            Some(card) if !card.is_empty() => Ok(format!("Peer card of {}:\n{}", self.observed, card.join("\n"))),
            _ => Ok(format!("No peer card for {} yet.", self.observed)),
        }
    }

    async fn recent_history(&self) -> Result<String> {
        let Some(session) = &self.session else {
            return Ok("No session: there is no conversation history.".to_owned());
        };
        let messages = self
            .store
            .context_messages(&self.workspace, session, self.history_token_limit, 0)
            .await?;
        if messages.is_empty() {
            return Ok("The session has no messages yet.".to_owned());
        }
        Ok(message_lines(&messages))
    }

    async fn session_summary(&self, input: &Value) -> Result<String> {
        let (kind, wanted) = match input.get("summary_type").and_then(Value::as_str).unwrap_or("short") {
            "short" => ("short", roncho_core::model::SummaryKind::Short),
            "long" => ("long", roncho_core::model::SummaryKind::Long),
            _ => return Err(Error::invalid("summary_type", "must be short or long")),
        };
        let Some(session) = &self.session else {
            return Ok("No session: there is no summary.".to_owned());
        };
        let summaries = self.store.session_summaries(&self.workspace, session).await?;
        Ok(summaries
            .into_iter()
            .find(|summary| summary.kind == wanted)
            .map_or_else(
                || format!("No {kind} summary of session {session} yet."),
                |summary| {
                    format!(
                        "{kind} summary (up to message {}):\n{}",
                        summary.message_id, summary.content
                    )
                },
            ))
    }

    async fn extract_preferences(&self) -> Result<String> {
        const CUES: [&str; 8] = [
            "prefer", "i like", "i love", "i hate", "please", "always", "never", "don't",
        ];
        let mut lines = Vec::new();
        for cue in CUES {
            let found = self
                .scan(MessageScan {
                    contains: Some(cue.to_owned()),
                    newest_first: true,
                    limit: 10,
                    ..MessageScan::default()
                })
                .await?;
            for message in found.into_iter().filter(|m| m.peer_id == self.observed) {
                let line = message_line(&message);
                if !lines.contains(&line) {
                    lines.push(line);
                }
            }
        }
        let observations = self
            .find_observations(
                "preferences, likes, dislikes, standing instructions, communication style",
                10,
                None,
            )
            .await?;
        let mut text = format!("Messages of {} with preferences or instructions:\n", self.observed);
        text.push_str(&if lines.is_empty() {
            "(none)\n".to_owned()
        } else {
            lines.join("")
        });
        text.push_str("\nRelated observations:\n");
        text.push_str(&if observations.is_empty() {
            "(none)\n".to_owned()
        } else {
            observation_lines(&observations)
        });
        Ok(text)
    }
}

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

fn observation_lines(conclusions: &[Conclusion]) -> String {
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

fn message_lines(messages: &[Message]) -> String {
    messages.iter().map(message_line).collect()
}

fn message_lines_with_session(messages: &[Message]) -> String {
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

fn truncate_output(text: String) -> String {
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

fn shared_terms(terms: &[String], content: &str) -> usize {
    let words = roncho_core::search::terms(content);
    terms.iter().filter(|term| words.contains(term)).count()
}

fn text_arg(input: &Value, key: &str) -> Option<String> {
    input.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn required_text(input: &Value, key: &str) -> Result<String> {
    text_arg(input, key)
        .filter(|text| !text.trim().is_empty())
        .ok_or_else(|| Error::invalid(key, "is required"))
}

fn text_list(input: &Value, key: &str) -> Result<Vec<String>> {
    input
        .get(key)
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .ok_or_else(|| Error::invalid(key, "must be a list of strings"))
}

/// An integer argument, defaulted and clamped to `[min, max]`.
fn int_arg(input: &Value, key: &str, default: i64, min: i64, max: i64) -> i64 {
    input
        .get(key)
        .and_then(Value::as_i64)
        .unwrap_or(default)
        .clamp(min, max)
}

/// An ISO date (`2024-01-15`) or date-time (RFC 3339) as microseconds.
fn date_arg(input: &Value, key: &str) -> Result<Option<i64>> {
    let Some(text) = input.get(key).and_then(Value::as_str).filter(|text| !text.is_empty()) else {
        return Ok(None);
    };
    let invalid = || Error::invalid(key, format!("`{text}` is not an ISO date such as 2024-01-15"));
    let moment = match time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339) {
        Ok(moment) => moment,
        Err(_) => {
            let date = time::Date::parse(text, time::macros::format_description!("[year]-[month]-[day]"))
                .map_err(|_| invalid())?;
            date.midnight().assume_utc()
        }
    };
    Ok(Some(
        i64::try_from(moment.unix_timestamp_nanos() / 1_000).map_err(|_| invalid())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_are_prefixed_deduplicated_and_bounded() {
        let mut entries = vec![
            "IDENTITY: Alice Smith".to_owned(),
            "likes tea".to_owned(),
            "ATTRIBUTE: likes tea".to_owned(),
            "x".repeat(300),
        ];
        entries.extend((0..50).map(|i| format!("INSTRUCTION: rule {i}")));
        let card = normalize_card(&entries);
        assert_eq!(card[..2], ["IDENTITY: Alice Smith", "ATTRIBUTE: likes tea"]);
        assert_eq!(card[2].chars().count(), MAX_PEER_CARD_FACT_CHARS);
        assert_eq!(card.len(), MAX_PEER_CARD_FACTS);
    }

    #[test]
    fn dates_parse_as_days_or_instants() {
        let input = json!({"a": "2024-01-15", "b": "2024-01-15T12:00:00Z", "c": "last week"});
        assert_eq!(date_arg(&input, "a").unwrap(), Some(1_705_276_800_000_000));
        assert_eq!(date_arg(&input, "b").unwrap(), Some(1_705_320_000_000_000));
        assert!(date_arg(&input, "c").is_err());
        assert_eq!(date_arg(&input, "missing").unwrap(), None);
    }

    #[test]
    fn long_output_is_cut_with_a_note() {
        let cut = truncate_output("y".repeat(MAX_TOOL_OUTPUT_CHARS + 5));
        assert!(cut.ends_with("[output truncated: 5 more characters; narrow the query or lower the limit]"));
    }
}
