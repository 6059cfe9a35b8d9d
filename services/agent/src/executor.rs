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
//!
//! # Layout
//! - this file: [`ToolContext`] (what a run may see, its [`RunLog`]) and
//!   the dispatch of a tool call by name;
//! - `observations`: the tools that read memory (observations, reasoning
//!   chains, the peer card);
//! - `messages`: the tools that read conversations (message search, history,
//!   summaries, preferences);
//! - `writes`: the tools that write memory (observations, the peer card);
//! - `output`: the text shapes of outputs and their bounds;
//! - `args`: reading a tool call's arguments.

mod args;
mod messages;
mod observations;
mod output;
mod writes;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use roncho_core::model::{Conclusion, Message};
use roncho_core::{Error, Result};
use roncho_search::SearchStore;
use roncho_search::Semantic;
use serde_json::Value;

use args::text_arg;
use output::truncate_output;
pub use output::{
    MAX_MESSAGE_CONTENT_CHARS, MAX_PEER_CARD_FACT_CHARS, MAX_PEER_CARD_FACTS, MAX_TOOL_OUTPUT_CHARS,
    PEER_CARD_PREFIXES, message_line, normalize_card, observation_line,
};

roncho_core::store_view! {
    /// The store as the agents' tools use it: what search reads, and the
    /// memory they write (conclusions, peer cards) through the same ports.
    pub trait AgentStore: SearchStore
}

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
    /// Every tool call, in order, by size (a reasoning trace).
    pub tool_runs: Vec<ToolRun>,
    /// Every model call, in order, by size (a reasoning trace).
    pub model_calls: Vec<ModelCall>,
}

/// One tool call of a run, by name and size: never its input's or its
/// result's text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ToolRun {
    pub tool_name: String,
    pub input_chars: usize,
    pub result_chars: usize,
    /// The tool answered (not an error the model was shown).
    pub ok: bool,
}

/// One model call of a run, by size: never its prompt's text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelCall {
    pub messages: usize,
    pub prompt_chars: usize,
    pub tools_offered: usize,
    /// Tokens as the provider counted them (0 when it did not say).
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Tools the model asked for in its reply.
    pub tool_calls: usize,
}

/// What an agent run read and did: conclusions and messages it was shown,
/// and the tools it called successfully, with their inputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    pub conclusions: Vec<Conclusion>,
    pub messages: Vec<Message>,
    pub tool_calls: Vec<(String, Value)>,
    /// The answer's reasoning trace, once kept (Honcho 3.2).
    pub reasoning_trace_id: Option<String>,
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

    /// Notes a model call of this run, for its trace.
    pub fn note_model_call(&self, call: ModelCall) {
        self.record(|log| log.model_calls.push(call));
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
        let shown = match output {
            Ok(text) => {
                if !text.starts_with("error:") {
                    self.record(|log| log.read.tool_calls.push((name.to_owned(), input.clone())));
                }
                truncate_output(text)
            }
            // The model sent something unusable: it sees why and can retry.
            Err(Error::InvalidArgument { field, reason }) => format!("error: {field}: {reason}"),
            Err(Error::NotFound { resource, id }) => format!("error: {resource} {id} not found"),
            Err(error) => return Err(error),
        };
        let run = ToolRun {
            tool_name: name.to_owned(),
            input_chars: input.to_string().chars().count(),
            result_chars: shown.chars().count(),
            ok: !shown.starts_with("error:"),
        };
        self.record(|log| log.tool_runs.push(run));
        Ok(shown)
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use super::args::date_arg;

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
