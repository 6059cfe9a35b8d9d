//! Whether a workspace's model derivations keep producing nothing.

use async_trait::async_trait;

use crate::Result;

/// Consecutive derivations of non-empty messages that gave no observation
/// (or an unreadable reply) after which a workspace is degraded.
pub const DEGRADED_AFTER: i64 = 3;

/// One derivation's outcome, as the deriver records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Observations were made: the streak ends.
    Derived,
    /// The model answered, with no observation, for this many non-empty messages.
    Empty { messages: usize },
    /// The reply could not be read (why, without the reply's content).
    Unreadable { reason: String },
}

/// A workspace's derivation health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivationRecord {
    pub workspace_id: String,
    pub model: String,
    /// Consecutive derivations that gave nothing.
    pub empty_streak: i64,
    /// What the last of them was, in words.
    pub reason: String,
    pub updated_at: i64,
}

impl DerivationRecord {
    /// Why the workspace is degraded, `None` while it is not.
    pub fn degraded(&self) -> Option<String> {
        (self.empty_streak >= DEGRADED_AFTER).then(|| {
            format!(
                "derivation by `{}` gave no observations {} times in a row ({}); check the model's JSON support \
                 (docs/configuration.md#local-models-ollama-llamacpp-vllm)",
                self.model, self.empty_streak, self.reason
            )
        })
    }
}

#[async_trait]
pub trait DerivationHealth: Send + Sync + 'static {
    /// Records a derivation by `model` in `workspace_id`.
    async fn record_derivation(&self, workspace_id: &str, model: &str, outcome: &Outcome) -> Result<()>;
    /// Returns the workspace's record, `None` when no model derived there yet.
    async fn derivation_health(&self, workspace_id: &str) -> Result<Option<DerivationRecord>>;
    /// Returns the degraded workspaces' records.
    async fn degraded_derivations(&self) -> Result<Vec<DerivationRecord>>;
}
