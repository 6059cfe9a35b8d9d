//! A collection's dream state: how often and when it was consolidated.

use async_trait::async_trait;

use crate::Result;
use crate::model::DreamState;

#[async_trait]
pub trait DreamLedger: Send + Sync + 'static {
    /// Returns a collection's dream state (zeros for one never dreamt).
    async fn dream_state(&self, workspace_id: &str, observer_id: &str, observed_id: &str) -> Result<DreamState>;
    /// Records a finished dream: one more generation, now, and the live
    /// explicit observations it saw.
    async fn record_dream(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        document_count: i64,
    ) -> Result<()>;
}
