//! Messages and conclusions carried over from another server, ids and times kept.

use async_trait::async_trait;

use crate::Result;
use crate::model::{ImportedConclusion, ImportedMessage};

#[async_trait]
pub trait Import: Send + Sync + 'static {
    /// Appends messages carried over from another server, in order, keeping
    /// their ids and times; the session must exist. A message whose id this
    /// session already holds is skipped, so an interrupted import runs again
    /// without duplicates; an id held by another session is
    /// `FAILED_PRECONDITION`.
    /// Derivation and summary tasks are queued only when `derive`. Returns
    /// how many messages were new.
    async fn import_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<ImportedMessage>,
        derive: bool,
    ) -> Result<u64>;
    /// Stores conclusions carried over from another server, keeping their
    /// ids, times and derivation counts; one whose id exists is skipped (see
    /// [`Import::import_messages`]). Returns how many were new.
    async fn import_conclusions(&self, workspace_id: &str, conclusions: Vec<ImportedConclusion>) -> Result<u64>;
    /// Which of these ids an import into `workspace_id` could not keep: a
    /// message id held anywhere but the session named beside it, a
    /// conclusion id held in another workspace (ids are unique across the
    /// store). Read before an import writes, so that it writes nothing.
    async fn taken_ids(
        &self,
        workspace_id: &str,
        messages: &[(String, String)],
        conclusions: &[String],
    ) -> Result<Vec<String>>;
}
