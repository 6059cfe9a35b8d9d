//! Runs dreams. An `omni` dream runs the deduction specialist (deductive
//! observations with premises and sources; outdated or contradicted
//! observations soft-deleted; the peer card kept current), then the
//! induction specialist (patterns from at least two observations, with type
//! and confidence), then records the dream. A `card_refresh` dream rewrites
//! the peer card (from scratch with `rebuild`) and records nothing. Each
//! specialist is a tool loop over Honcho's tool set for it; the tools
//! validate every write, so a model's mistake is an error it sees, not bad
//! memory. A failed dream is retried, then dead with its error in queue
//! status.

use std::sync::Arc;

use roncho_agent::AgentStore;
use roncho_agent::ToolContext;
use roncho_agent::tools;
use roncho_core::llm::{self, ChatMessage, ChatRequest, Llm, Role};
use roncho_core::queue::{Claim, Task, WorkQueue};
use roncho_core::store::DreamLedger;
use roncho_core::{Error, Result};
use roncho_search::Semantic;
use roncho_worker::{self as runner, Handler, WorkerConfig};
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

roncho_core::store_view! {
    /// The store as a dream uses it: the agents' tools and the dream ledger.
    pub trait DreamWorkerStore: AgentStore, DreamLedger
}

/// The task type this worker handles.
pub const TASK_TYPES: [&str; 1] = ["dream"];

/// One specialist: its tools, tool rounds and instructions.
struct Specialist {
    name: &'static str,
    tools: &'static [&'static str],
    iterations: usize,
    instructions: &'static str,
}

const DEDUCTION: Specialist = Specialist {
    name: "deduction",
    tools: tools::DEDUCTION_SPECIALIST_TOOLS,
    iterations: 12,
    instructions: "You are the deduction specialist. Read the observations (get_recent_observations, search_memory, \
        search_messages) and write deductive observations with create_observations_deductive: conclusions that \
        necessarily follow from observations, each with the premise observations' ids as source_ids and their text \
        as premises. When a newer observation contradicts or supersedes an older one (a move, a changed job, a \
        corrected fact), delete the outdated one with delete_observations; never delete what still holds. Keep the \
        peer card current with update_peer_card: the complete list of durable facts, each starting with IDENTITY:, \
        ATTRIBUTE:, RELATIONSHIP: or INSTRUCTION:, at most 40. Stop calling tools when you are done.",
};

const INDUCTION: Specialist = Specialist {
    name: "induction",
    tools: tools::INDUCTION_SPECIALIST_TOOLS,
    iterations: 10,
    instructions: "You are the induction specialist. Read the observations (get_recent_observations, search_memory, \
        search_messages) and write inductive observations with create_observations_inductive: patterns supported by \
        at least two observations (their ids as source_ids, their text as sources), with a pattern_type \
        (preference, behavior, personality, tendency, correlation) and a confidence (high for 5+ sources, medium \
        for 3-4, low for 2). Do not repeat patterns already recorded. Stop calling tools when you are done.",
};

const CARD_REFRESH: Specialist = Specialist {
    name: "card_refresh",
    tools: tools::CARD_REFRESH_TOOLS,
    iterations: 6,
    instructions: "You maintain the peer card. Read the observations (get_recent_observations, search_memory) and \
        write the complete card with update_peer_card: durable facts only (identity, lasting attributes, \
        relationships, standing instructions), each starting with IDENTITY:, ATTRIBUTE:, RELATIONSHIP: or \
        INSTRUCTION:, at most 40 entries of at most 200 characters. Stop calling tools when you are done.",
};

/// Claims and runs dreams.
pub struct DreamWorker {
    store: Arc<dyn DreamWorkerStore>,
    queue: Arc<dyn WorkQueue>,
    semantic: Option<Semantic>,
    llm: Arc<dyn Llm>,
    max_tokens: u32,
    config: WorkerConfig,
    wake: Notify,
}

impl std::fmt::Debug for DreamWorker {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DreamWorker")
            .field("model", &self.llm.model_id())
            .finish_non_exhaustive()
    }
}

impl DreamWorker {
    /// `config.batch` is ignored: one dream per claim.
    pub fn new(
        store: Arc<dyn DreamWorkerStore>,
        queue: Arc<dyn WorkQueue>,
        semantic: Option<Semantic>,
        llm: Arc<dyn Llm>,
        max_tokens: u32,
        config: WorkerConfig,
    ) -> Self {
        Self {
            store,
            queue,
            semantic,
            llm,
            max_tokens,
            config: WorkerConfig { batch: 1, ..config },
            wake: Notify::new(),
        }
    }

    /// Runs one dream if one is ready; returns whether there was one.
    pub async fn run_once(&self) -> Result<bool> {
        runner::run_once(self.queue.as_ref(), &self.config, self).await
    }

    /// Runs dreams until `shutdown`; a dream in hand is finished first.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        runner::run(self.queue.as_ref(), &self.config, self.as_ref(), &self.wake, shutdown).await;
    }

    /// Wakes an idle worker (a dream was scheduled in this process).
    pub fn nudge(&self) {
        self.wake.notify_one();
    }

    async fn dream(&self, workspace: &str, task: &Task) -> Result<()> {
        let text = |key: &str| task.payload[key].as_str().map(str::to_owned);
        let (Some(dream_type), Some(observer), Some(observed)) =
            (text("dream_type"), text("observer"), text("observed"))
        else {
            return Err(Error::Internal(format!(
                "dream task {} lacks its collection",
                task.dedup_id
            )));
        };
        let tools = ToolContext::new(
            self.store.clone(),
            self.semantic.clone(),
            workspace,
            &observer,
            &observed,
            text("session_name"),
        );
        match dream_type.as_str() {
            "omni" => {
                let before = self.store.dream_state(workspace, &observer, &observed).await?;
                self.specialist(&tools, &DEDUCTION, false).await?;
                self.specialist(&tools, &INDUCTION, false).await?;
                let after = self.store.dream_state(workspace, &observer, &observed).await?;
                self.store
                    .record_dream(workspace, &observer, &observed, after.explicit_count)
                    .await?;
                let log = tools.log();
                tracing::info!(
                    %workspace, %observer, %observed,
                    new_explicit_since_last = before.explicit_count - before.last_dream_document_count,
                    created = log.created.len(), deleted = log.deleted.len(), card_updated = log.card_updated,
                    "dream finished"
                );
            }
            "card_refresh" => {
                let rebuild = task.payload["rebuild"].as_bool().unwrap_or(false);
                self.specialist(&tools, &CARD_REFRESH, rebuild).await?;
                if !tools.log().card_updated {
                    return Err(Error::Internal(format!(
                        "{} finished the card refresh without writing the card",
                        self.llm.model_id()
                    )));
                }
                tracing::info!(%workspace, %observer, %observed, rebuild, "peer card refreshed");
            }
            other => return Err(Error::Internal(format!("unknown dream type {other}"))),
        }
        Ok(())
    }

    /// Runs one specialist's tool loop over the collection.
    async fn specialist(&self, tools: &ToolContext, specialist: &Specialist, without_card: bool) -> Result<()> {
        // The configuration's instructions for dreams, and for peer cards
        // where the specialist writes the card.
        let mut sections = vec!["dream"];
        if specialist.tools.contains(&"update_peer_card") {
            sections.push("peer_card");
        }
        let instructions =
            roncho_search::context::custom_instructions(self.store.as_ref(), &tools.workspace, None, &sections).await?;
        let card = if without_card {
            "(rebuilding: the current card is not shown)".to_owned()
        } else {
            tools.execute("get_peer_card", &json!({})).await?
        };
        let recent = tools.execute("get_recent_observations", &json!({"limit": 30})).await?;
        let request = ChatRequest {
            messages: vec![
                ChatMessage::new(
                    Role::System,
                    roncho_core::derivation::with_instructions(
                        format!(
                            "{} You consolidate what {} knows about {}.",
                            specialist.instructions, tools.observer, tools.observed
                        ),
                        instructions.as_deref(),
                    ),
                ),
                ChatMessage::new(Role::User, format!("{card}\n\n{recent}\n\nBegin.")),
            ],
            max_tokens: self.max_tokens,
            temperature: Some(0.2),
            tools: tools::definitions(specialist.tools),
            ..ChatRequest::default()
        };
        let allowed = specialist.tools;
        let (reply, _) = llm::run_tools(
            self.llm.as_ref(),
            request,
            specialist.iterations + 1,
            |call| async move {
                if allowed.contains(&call.name.as_str()) {
                    tools.execute(&call.name, &call.arguments).await
                } else {
                    Ok(format!(
                        "error: the tool `{}` is not available to this specialist",
                        call.name
                    ))
                }
            },
        )
        .await?;
        tracing::debug!(specialist = specialist.name, finish = ?reply.finish_reason, "specialist done");
        Ok(())
    }
}

/// The workspace segment of a dream key `dream:{type}:{workspace}:...`.
fn workspace_of(key: &str) -> Option<&str> {
    key.split(':').nth(2).filter(|workspace| !workspace.is_empty())
}

#[async_trait::async_trait]
impl Handler for DreamWorker {
    fn task_types(&self) -> &[&'static str] {
        &TASK_TYPES
    }

    async fn process(&self, claim: &Claim) -> Result<()> {
        let workspace = workspace_of(&claim.work_unit_key)
            .ok_or_else(|| Error::Internal(format!("malformed dream key {}", claim.work_unit_key)))?;
        for task in &claim.tasks {
            self.dream(workspace, task).await?;
        }
        Ok(())
    }
}
