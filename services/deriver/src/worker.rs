//! The deriver worker: claims representation and summary work units from
//! the queue and processes them. With an LLM it makes one structured call
//! per claimed batch (Honcho's minimal deriver: explicit facts only, as
//! JSON) and writes a rolling summary; a reply that is not the JSON asked
//! for fails the tasks (retried, then dead with the error) — never an empty
//! success. Without an LLM (the embedded default) it derives
//! **extractively**: each observed message's sentences become
//! explicit conclusions quoting the speaker, and summaries list the latest
//! turns — deterministic, labelled as such in their metadata and text, and
//! never an empty success. Handlers are idempotent: a redelivered task
//! (after a crash or a lost lease) finds its conclusions and adds none.
//!
//! Saving follows Honcho's dedup (the `dedup` module): a fact the
//! collection already holds (same level and session, ignoring case and
//! spacing) counts one more derivation (`times_derived`); with an embedder,
//! a fact within cosine distance [`SEMANTIC_DUPLICATE`] of a stored one is
//! the same fact, and the better worded of the two (more words, more
//! distinct words) is kept carrying the count. The extractive deriver is
//! the `extractive` module.

use std::sync::Arc;

use roncho_core::derivation::{CUSTOM_INSTRUCTIONS, task_message_ids, with_instructions};
use roncho_core::embed::Embedder;
use roncho_core::llm::{ChatMessage, ChatRequest, JsonSchema, Llm, Role, chat_json};
use roncho_core::model::{Message, SummaryBasis, SummaryKind};
use roncho_core::queue::{Claim, Task, WorkQueue, task_type};
use roncho_core::store::{DerivationHealth, Erasure, Memory, Messages, Outcome, Scopes};
use roncho_core::vector::VectorStore;
use roncho_core::{Error, Result, representation, tokens};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::dedup::{Collection, FactWriter};
use crate::extractive::extractive_metadata;

roncho_core::store_view! {
    /// The store as the deriver's work uses it: messages and summaries,
    /// memory, erasures and scope backfills carried on.
    pub trait DeriverStore: Messages, Memory, Erasure, Scopes, DerivationHealth
}

/// The task types this worker handles: derivation, summaries, the
/// erasures delete requests left to the background, and scope backfills.
/// Webhook events have a lane of their own ([`crate::webhooks`]).
pub const TASK_TYPES: [&str; 4] = ["representation", "summary", "deletion", "scope_backfill"];

/// Of those, what a process's derivation worker claims ...
pub const DERIVATION: [&str; 3] = ["representation", "summary", "scope_backfill"];
/// ... and what its erasure worker claims, beside it: a large erasure
/// neither waits for derivation nor holds it up.
pub const ERASURES: [&str; 1] = ["deletion"];

pub use roncho_worker::{CollectionListener, WorkerConfig, unique_worker_id};

pub use crate::dedup::SEMANTIC_DUPLICATE;
pub use crate::extractive::{extract, extractive_summary};

/// Reply budgets of a derivation call and of a long summary (a short one gets at most 1,000).
const DEFAULT_MAX_TOKENS: (u32, u32) = (2_000, 4_000);

/// Turns listed by the short and the long extractive summary.
const SHORT_TURNS: usize = 20;
const LONG_TURNS: usize = 60;

/// Claims and processes derivation work.
pub struct Worker {
    store: Arc<dyn DeriverStore>,
    queue: Arc<dyn WorkQueue>,
    config: WorkerConfig,
    /// Reply budgets: a derivation call, a long summary.
    max_tokens: (u32, u32),
    wake: Notify,
    /// The deriver's model; `None`: extractive.
    deriver: Option<Arc<dyn Llm>>,
    /// The summariser's model; `None`: extractive.
    summarizer: Option<Arc<dyn Llm>>,
    /// Saves facts with dedup, semantic with an embedder, and tells who
    /// listens (a reconciler, the dream scheduler).
    writer: FactWriter,
    /// The task types it claims.
    task_types: &'static [&'static str],
}

/// What the deriver model returns (Honcho's `PromptRepresentation`).
#[derive(Debug, Deserialize)]
struct Observations {
    explicit: Vec<Observation>,
}

#[derive(Debug, Deserialize)]
struct Observation {
    content: String,
}

/// Reply budget of a short summary, at most (Honcho's).
const SHORT_SUMMARY_MAX_TOKENS: u32 = 1_000;

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Worker {
    pub fn new(store: Arc<dyn DeriverStore>, queue: Arc<dyn WorkQueue>, config: WorkerConfig) -> Self {
        Self {
            writer: FactWriter::new(store.clone()),
            store,
            queue,
            config,
            max_tokens: DEFAULT_MAX_TOKENS,
            wake: Notify::new(),
            deriver: None,
            summarizer: None,
            task_types: &TASK_TYPES,
        }
    }

    /// Claims only `task_types` (of [`TASK_TYPES`]).
    pub fn claiming(mut self, task_types: &'static [&'static str]) -> Self {
        self.task_types = task_types;
        self
    }

    /// Gives derivation calls and long summaries these reply budgets.
    pub fn with_max_tokens(mut self, deriver: u32, summary: u32) -> Self {
        self.max_tokens = (deriver, summary);
        self
    }

    /// Tells `listener` which collections gain observations.
    pub fn with_listener(mut self, listener: Arc<dyn CollectionListener>) -> Self {
        self.writer.listener = Some(listener);
        self
    }

    /// Deduplicates semantically against the collection's vectors too.
    pub fn with_semantic_dedup(mut self, embedder: Arc<dyn Embedder>, vectors: Arc<dyn VectorStore>) -> Self {
        self.writer.semantic = Some((embedder, vectors));
        self
    }

    /// Calls `hook` after each write of conclusions.
    pub fn with_saved_hook(mut self, hook: Arc<dyn Fn() + Send + Sync>) -> Self {
        self.writer.on_saved = Some(hook);
        self
    }

    /// Derives and summarises with these models instead of extractively.
    pub fn with_llms(self, deriver: Arc<dyn Llm>, summarizer: Arc<dyn Llm>) -> Self {
        self.with_deriver_llm(deriver).with_summary_llm(summarizer)
    }

    /// Derives observations with this model instead of extractively.
    pub fn with_deriver_llm(mut self, deriver: Arc<dyn Llm>) -> Self {
        self.deriver = Some(deriver);
        self
    }

    /// Writes summaries with this model instead of extractively.
    pub fn with_summary_llm(mut self, summarizer: Arc<dyn Llm>) -> Self {
        self.summarizer = Some(summarizer);
        self
    }

    /// Wakes an idle worker (new work was written).
    pub fn nudge(&self) {
        self.wake.notify_one();
    }

    /// Claims one work unit and processes it; returns whether there was one.
    pub async fn run_once(&self) -> Result<bool> {
        roncho_worker::run_once(self.queue.as_ref(), &self.config, self).await
    }

    /// Processes work until `shutdown`; a unit in hand is finished first.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        roncho_worker::run(self.queue.as_ref(), &self.config, self.as_ref(), &self.wake, shutdown).await;
    }
}

#[async_trait::async_trait]
impl roncho_worker::Handler for Worker {
    fn task_types(&self) -> &[&'static str] {
        self.task_types
    }

    async fn process(&self, claim: &Claim) -> Result<()> {
        // Keys are `type:workspace:session:...`; ids cannot hold `:`.
        let mut parts = claim.work_unit_key.splitn(4, ':');
        let (_, workspace, session) = (parts.next(), parts.next(), parts.next());
        let (Some(workspace), Some(session)) = (workspace, session) else {
            return Err(Error::Internal(format!(
                "malformed work unit key {}",
                claim.work_unit_key
            )));
        };
        if task_type(&claim.work_unit_key) == "deletion" {
            // deletion:{workspace}:{scope}:{target}: the receipt carries the rest.
            for task in &claim.tasks {
                let receipt = payload_str(task, "receipt_id")?;
                let mut state = roncho_core::model::ErasureState::Running;
                while state == roncho_core::model::ErasureState::Running {
                    state = self
                        .store
                        .continue_erasure(workspace, receipt, roncho_core::store::ERASURE_CHUNK)
                        .await?
                        .state;
                }
            }
            return Ok(());
        }
        if task_type(&claim.work_unit_key) == "scope_backfill" {
            // scope_backfill:{workspace}:{session}:{scope peer}
            let scope_peer = parts.next().unwrap_or_default();
            return self.backfill_scope(workspace, session, scope_peer).await;
        }
        if let (Some(deriver), "representation") = (&self.deriver, task_type(&claim.work_unit_key)) {
            return self
                .represent_with_llm(deriver.as_ref(), workspace, session, &claim.tasks)
                .await;
        }
        for task in &claim.tasks {
            match task_type(&claim.work_unit_key) {
                "representation" => self.represent(workspace, session, task).await?,
                "summary" => self.summarize(workspace, session, task).await?,
                other => return Err(Error::Internal(format!("the deriver does not handle {other} work"))),
            }
        }
        Ok(())
    }
}

impl Worker {
    /// Copies what was observed in `session` into the scope of `scope_peer`,
    /// chunk by chunk; a failure is shown in the scope's status (and the
    /// task retried from where it stopped). A session or scope gone since
    /// has nothing left to copy.
    async fn backfill_scope(&self, workspace: &str, session: &str, scope_peer: &str) -> Result<()> {
        let Some(scope) = roncho_core::model::scope_of_peer(scope_peer) else {
            return Err(Error::Internal(format!("`{scope_peer}` is not a scope's peer")));
        };
        loop {
            match self
                .store
                .continue_scope_backfill(workspace, scope, session, roncho_core::store::ERASURE_CHUNK)
                .await
            {
                Ok(backfill) if backfill.state == roncho_core::model::BackfillState::Pending => continue,
                Ok(backfill) => {
                    tracing::info!(%workspace, %session, %scope, copied = backfill.docs_copied, "scope backfill done");
                    return Ok(());
                }
                Err(Error::NotFound { .. }) => return Ok(()),
                Err(error) => {
                    if let Err(recording) = self
                        .store
                        .fail_scope_backfill(workspace, scope, session, &error.to_string())
                        .await
                    {
                        tracing::warn!(%recording, "could not record a scope backfill's failure");
                    }
                    return Err(error);
                }
            }
        }
    }

    /// Extracts each message of a representation task into its observers' collections.
    async fn represent(&self, workspace: &str, session: &str, task: &Task) -> Result<()> {
        let observers: Vec<String> = task.payload["observers"]
            .as_array()
            .map(|list| list.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        for message_id in task_message_ids(&task.payload) {
            match self.store.get_message(workspace, session, message_id).await {
                Ok(message) => self.represent_message(workspace, session, &message, &observers).await?,
                // Deleted since: nothing to derive.
                Err(Error::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    async fn represent_message(
        &self,
        workspace: &str,
        session: &str,
        message: &Message,
        observers: &[String],
    ) -> Result<()> {
        let statements = extract(message);
        for observer in observers {
            // A redelivery finds what its first delivery saved.
            let existing = self.existing(workspace, observer, message).await?;
            let facts = statements
                .iter()
                .filter(|statement| !existing.contains(statement))
                .cloned()
                .collect();
            let target = Collection {
                workspace,
                observer,
                observed: &message.peer_id,
                session,
            };
            self.writer
                .save(
                    &target,
                    facts,
                    std::slice::from_ref(&message.id),
                    &extractive_metadata(),
                )
                .await?;
        }
        Ok(())
    }

    /// One structured call over the batch's messages; the facts go to every
    /// observer's collection with the batch's messages as sources. A
    /// redelivery (the worker died after writing, before completing) leaves
    /// out, per observer, the messages its collection already has
    /// conclusions from; observers left with the same messages share a call.
    async fn represent_with_llm(&self, llm: &dyn Llm, workspace: &str, session: &str, tasks: &[Task]) -> Result<()> {
        let mut messages = Vec::new();
        let mut observers: Vec<String> = Vec::new();
        for task in tasks {
            for message_id in task_message_ids(&task.payload) {
                match self.store.get_message(workspace, session, message_id).await {
                    Ok(message) => messages.push(message),
                    Err(Error::NotFound { .. }) => continue,
                    Err(error) => return Err(error),
                }
            }
            for observer in task.payload["observers"].as_array().into_iter().flatten() {
                if let Some(observer) = observer.as_str()
                    && !observers.iter().any(|known| known == observer)
                {
                    observers.push(observer.to_owned());
                }
            }
        }
        // Each observer's collection is written in its own transaction, and
        // a redelivered batch can hold more messages than the first delivery:
        // what is left to derive is decided per observer and message.
        let mut served: Vec<Vec<String>> = Vec::with_capacity(messages.len());
        for message in &messages {
            let citing = self.store.conclusions_citing(workspace, &message.id).await?;
            served.push(
                citing
                    .into_iter()
                    .filter(|conclusion| conclusion.observed_id == message.peer_id)
                    .map(|conclusion| conclusion.observer_id)
                    .collect(),
            );
        }
        let mut groups: Vec<(Vec<usize>, Vec<String>)> = Vec::new();
        for observer in observers {
            let left: Vec<usize> = (0..messages.len())
                .filter(|&index| !served[index].contains(&observer))
                .collect();
            if left.is_empty() {
                continue;
            }
            match groups.iter_mut().find(|(same, _)| *same == left) {
                Some((_, group)) => group.push(observer),
                None => groups.push((left, vec![observer])),
            }
        }
        // A call takes at most a claim's worth of messages (`batch`), as when
        // each message was a task of its own.
        let per_call = self.config.batch.max(1);
        // Tasks are merged only with the same instructions; a claim's first set applies.
        let instructions = tasks.iter().find_map(|task| task.payload[CUSTOM_INSTRUCTIONS].as_str());
        for (indices, group) in groups {
            let batch: Vec<&Message> = indices.iter().map(|&index| &messages[index]).collect();
            for call in batch.chunks(per_call) {
                self.derive_batch(llm, workspace, session, call, &group, instructions)
                    .await?;
            }
        }
        Ok(())
    }

    /// Derives explicit facts from `messages` (one peer's) with one call and
    /// saves them into each of `observers`' collections.
    async fn derive_batch(
        &self,
        llm: &dyn Llm,
        workspace: &str,
        session: &str,
        messages: &[&Message],
        observers: &[String],
        instructions: Option<&str>,
    ) -> Result<()> {
        let Some(first) = messages.first() else { return Ok(()) };
        let observed = first.peer_id.clone();
        let request = self.derivation_request(&observed, messages, instructions);
        let (observations, usage) = match chat_json::<Observations>(llm, request).await {
            Ok(read) => read,
            Err(error) => {
                if matches!(error, Error::Internal(_)) {
                    let outcome = Outcome::Unreadable {
                        reason: "not the JSON asked for; the failed task's error keeps the reply".into(),
                    };
                    self.record_health(workspace, llm, &outcome).await;
                }
                return Err(error);
            }
        };
        tracing::debug!(model = %llm.model_id(), input = usage.input_tokens, output = usage.output_tokens, "derived");
        let sources: Vec<String> = messages.iter().map(|message| message.id.clone()).collect();
        let facts: Vec<String> = observations
            .explicit
            .into_iter()
            .map(|observation| observation.content.trim().to_owned())
            .filter(|content| !content.is_empty())
            .collect();
        let said = messages
            .iter()
            .filter(|message| !message.content.trim().is_empty())
            .count();
        let outcome = match (facts.is_empty(), said) {
            (false, _) => Some(Outcome::Derived),
            (true, 0) => None,
            (true, said) => Some(Outcome::Empty { messages: said }),
        };
        if let Some(outcome) = outcome {
            self.record_health(workspace, llm, &outcome).await;
        }
        let metadata = json!({"derived_by": llm.model_id()})
            .as_object()
            .cloned()
            .unwrap_or_default();
        for observer in observers {
            let target = Collection {
                workspace,
                observer,
                observed: &observed,
                session,
            };
            self.writer.save(&target, facts.clone(), &sources, &metadata).await?;
        }
        Ok(())
    }

    /// Returns the deriver call asking, as JSON, for the explicit facts
    /// `observed` stated in `messages`.
    fn derivation_request(&self, observed: &str, messages: &[&Message], instructions: Option<&str>) -> ChatRequest {
        let transcript: String = messages
            .iter()
            .map(|message| {
                format!(
                    "{} {}: {}\n",
                    representation::format_time(message.created_at),
                    message.peer_id,
                    message.content
                )
            })
            .collect();
        ChatRequest {
            messages: vec![
                ChatMessage::new(
                    Role::System,
                    with_instructions(
                        format!(
                            "You extract explicit observations about {observed} from their messages. Each \
                             observation is one atomic fact that {observed} stated or that follows literally from \
                             what they said, written in the third person with their name, self-contained, with \
                             dates made absolute when the message time allows. No speculation, no facts about other \
                             people. Reply with JSON {{\"explicit\": [{{\"content\": \"...\"}}]}}; an empty list \
                             when there is nothing."
                        ),
                        instructions,
                    ),
                ),
                ChatMessage::new(Role::User, transcript),
            ],
            max_tokens: self.max_tokens.0,
            temperature: Some(0.0),
            json_schema: Some(JsonSchema {
                name: "observations".into(),
                schema: json!({
                    "type": "object",
                    "properties": {"explicit": {"type": "array", "items": {
                        "type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"],
                        "additionalProperties": false}}},
                    "required": ["explicit"],
                    "additionalProperties": false,
                }),
            }),
            ..ChatRequest::default()
        }
    }

    /// Records a derivation's outcome for the workspace's health; a failure
    /// to record is logged, never the derivation's failure.
    async fn record_health(&self, workspace: &str, llm: &dyn Llm, outcome: &Outcome) {
        if let Err(error) = self.store.record_derivation(workspace, &llm.model_id(), outcome).await {
            tracing::warn!(%error, workspace, "recording derivation health failed");
        }
        if matches!(outcome, Outcome::Empty { .. } | Outcome::Unreadable { .. }) {
            tracing::warn!(workspace, model = %llm.model_id(), ?outcome, "a derivation gave no observations");
        }
    }

    /// Contents of the conclusions this message already gave the observer,
    /// among the collection's 100 newest from this session (a redelivery
    /// follows its first delivery closely).
    /// The contents of `observer`'s live conclusions about the sender drawn
    /// from `message` (found through the source index, however large the
    /// collection).
    async fn existing(&self, workspace: &str, observer: &str, message: &Message) -> Result<Vec<String>> {
        Ok(self
            .store
            .conclusions_citing(workspace, &message.id)
            .await?
            .into_iter()
            .filter(|conclusion| conclusion.observer_id == observer && conclusion.observed_id == message.peer_id)
            .map(|conclusion| conclusion.content)
            .collect())
    }

    async fn summarize(&self, workspace: &str, session: &str, task: &Task) -> Result<()> {
        let message_id = payload_str(task, "message_id")?;
        let seq = task.payload["seq_in_session"].as_i64().unwrap_or(i64::MAX);
        let kinds: Vec<&str> = task.payload["summaries"]
            .as_array()
            .map(|list| list.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let recent: Vec<Message> = self
            .store
            .context_messages(workspace, session, 1_000_000, (seq - LONG_TURNS as i64 + 1).max(0))
            .await?
            .into_iter()
            .filter(|message| message.seq_in_session <= seq)
            .collect();
        for kind in kinds {
            let (kind, turns) = match kind {
                "short" => (SummaryKind::Short, SHORT_TURNS),
                "long" => (SummaryKind::Long, LONG_TURNS),
                other => return Err(Error::Internal(format!("unknown summary kind {other}"))),
            };
            let from = recent.len().saturating_sub(turns);
            // What it is made from, checked again as it is stored: an
            // erasure meanwhile leaves it unwritten (and queues its rebuild).
            let mut basis = SummaryBasis {
                messages: recent[from..].iter().map(|message| message.id.clone()).collect(),
                previous: None,
            };
            let content = match &self.summarizer {
                Some(summarizer) => {
                    let instructions = task.payload[CUSTOM_INSTRUCTIONS].as_str();
                    let previous = self
                        .store
                        .session_summaries(workspace, session)
                        .await?
                        .into_iter()
                        .find(|summary| summary.kind == kind);
                    basis.previous = previous.as_ref().map(|summary| summary.created_at);
                    let previous = previous.map(|summary| summary.content).unwrap_or_default();
                    let turns = &recent[from..];
                    self.llm_summary(summarizer.as_ref(), kind, &previous, turns, instructions)
                        .await?
                }
                None => extractive_summary(&recent[from..], seq),
            };
            let counted = content.clone();
            let token_count = tokio::task::spawn_blocking(move || tokens::count(&counted))
                .await
                .map_err(|error| Error::Internal(format!("token counting failed: {error}")))?;
            match self
                .store
                .set_session_summary(
                    workspace,
                    session,
                    kind,
                    &content,
                    message_id,
                    token_count,
                    Some(&basis),
                )
                .await
            {
                // Its anchor, a message it read or its previous summary was
                // erased meanwhile: the erasure rebuilds what is left.
                Ok(_) | Err(Error::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

impl Worker {
    /// A rolling summary: the `previous` summary of this kind plus the turns since.
    async fn llm_summary(
        &self,
        llm: &dyn Llm,
        kind: SummaryKind,
        previous: &str,
        messages: &[Message],
        instructions: Option<&str>,
    ) -> Result<String> {
        let max_tokens = match kind {
            SummaryKind::Short => SHORT_SUMMARY_MAX_TOKENS.min(self.max_tokens.1),
            SummaryKind::Long => self.max_tokens.1,
        };
        // Honcho asks for three words per four tokens of budget.
        let words = max_tokens * 3 / 4;
        let transcript: String = messages
            .iter()
            .map(|message| format!("{}: {}\n", message.peer_id, message.content))
            .collect();
        let request = ChatRequest {
            messages: vec![
                ChatMessage::new(
                    Role::System,
                    with_instructions(
                        format!(
                            "You maintain a summary of a conversation. Given the previous summary and the latest \
                             messages, write the updated summary in at most {words} words: who said what, \
                             decisions, facts, open questions. Plain text only."
                        ),
                        instructions,
                    ),
                ),
                ChatMessage::new(
                    Role::User,
                    format!("Previous summary:\n{previous}\n\nLatest messages:\n{transcript}"),
                ),
            ],
            max_tokens,
            temperature: Some(0.2),
            json_schema: None,
            ..ChatRequest::default()
        };
        let reply = llm.chat(&request).await?;
        let text = reply.content.trim().to_owned();
        if text.is_empty() {
            return Err(Error::Internal(format!("{} returned an empty summary", llm.model_id())));
        }
        Ok(text)
    }
}

fn payload_str<'a>(task: &'a Task, key: &str) -> Result<&'a str> {
    task.payload[key]
        .as_str()
        .ok_or_else(|| Error::Internal(format!("task {} has no `{key}`", task.dedup_id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::wording_score;
    use roncho_core::model::JsonObject;

    #[test]
    fn worker_ids_differ_between_processes_with_the_same_pid() {
        // Every container's process is PID 1: the id must not rest on it.
        let (one, other) = (unique_worker_id("deriver"), unique_worker_id("deriver"));
        assert_ne!(one, other);
        assert!(one.starts_with(&format!("deriver-{}-", std::process::id())), "{one}");
    }

    fn message(content: &str) -> Message {
        Message {
            id: "m1".into(),
            workspace_id: "w".into(),
            session_id: "s".into(),
            peer_id: "alice".into(),
            content: content.into(),
            metadata: JsonObject::new(),
            created_at: 0,
            token_count: 1,
            seq_in_session: 1,
        }
    }

    #[test]
    fn the_better_wording_has_more_and_more_distinct_words() {
        assert_eq!(wording_score("Alice works as a nurse"), 5 + 50);
        assert_eq!(wording_score("alice ALICE nurse"), 3 + 20);
        assert!(wording_score("Alice works night shifts as a nurse") > wording_score("Alice is a nurse"));
    }

    #[test]
    fn sentences_become_quoted_statements() {
        let extracted = extract(&message(
            "Hi! I moved to Berlin last year. I love cycling by the river? ok",
        ));
        assert_eq!(
            extracted,
            [
                "alice said: \"I moved to Berlin last year.\"",
                "alice said: \"I love cycling by the river?\""
            ]
        );
        assert!(extract(&message("ok thanks")).is_empty());
        // A script without spaces says enough in a few characters; a long
        // sentence is cut with an ellipsis.
        assert_eq!(extract(&message("我住在北京。好。")), ["alice said: \"我住在北京。\""]);
        let long = extract(&message(&format!("I have {} here.", "many words ".repeat(40))));
        assert!(long[0].ends_with("\u{2026}\""), "{long:?}");
        // A full stop inside a number, a version or after a title ends no
        // sentence: no conclusion is a fragment ("My budget is 2.").
        assert_eq!(
            extract(&message(
                "My budget is 2.5 million euros for the new site. I also run Node v18.2 on the server. \
                 Dr. Smith approved it."
            )),
            [
                "alice said: \"My budget is 2.5 million euros for the new site.\"",
                "alice said: \"I also run Node v18.2 on the server.\"",
                "alice said: \"Dr. Smith approved it.\""
            ]
        );
        let summary = extractive_summary(&[message("First sentence here. Second one.")], 20);
        assert!(
            summary.starts_with("Extractive summary (no LLM configured)"),
            "{summary}"
        );
        assert!(summary.ends_with("alice: First sentence here."), "{summary}");
    }
}
