//! Reasoning traces: how the dialectic reached an answer, by id.

use async_trait::async_trait;

use crate::Result;
use crate::model::ReasoningTrace;

/// How long a trace is kept, in microseconds: a week.
pub const TRACE_RETENTION_MICROS: i64 = 7 * 24 * 3600 * 1_000_000;

#[async_trait]
pub trait Traces: Send + Sync + 'static {
    /// Stores a trace, and drops the workspace's traces older than
    /// [`TRACE_RETENTION_MICROS`]. A trace of a peer or session erased
    /// since the answer began is not stored.
    async fn save_trace(&self, trace: &ReasoningTrace) -> Result<()>;
    /// Returns a trace of the workspace; `NOT_FOUND` when there is none
    /// (never was, expired, or erased with its peer, session or workspace).
    async fn get_trace(&self, workspace_id: &str, id: &str) -> Result<ReasoningTrace>;
}
