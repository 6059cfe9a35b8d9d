//! Full-text search over messages, and how much of a search's scope an index
//! behind cannot match yet.

use async_trait::async_trait;

use crate::Result;
use crate::filter::Filter;
use crate::lexical::TermCounts;
use crate::model::{MeaningLag, Message, MessageQuery};

/// Most messages a gap report ([`TextSearch::text_index_gap`],
/// [`TextSearch::vector_sync_gap`]) counts: a count that reaches it means at
/// least this many. Counting every one of a long backlog cost a search
/// during a text index's catch-up more than the search (43 ms of a workspace
/// search at 45,000 unindexed); `roncho status` gives the whole backlog.
pub const GAP_COUNT_LIMIT: i64 = 1_000;

#[async_trait]
pub trait TextSearch: Send + Sync + 'static {
    /// Full-text search over a workspace's messages, best match first.
    async fn search_messages(&self, workspace_id: &str, search: &MessageQuery, filter: &Filter)
    -> Result<Vec<Message>>;
    /// Like [`TextSearch::search_messages`], over the messages whose vectors are
    /// not synced yet among the store's `newest` messages (every workspace's):
    /// what a vector store that ranks full text has not seen, at a bounded cost.
    async fn search_unsynced_messages(
        &self,
        workspace_id: &str,
        search: &MessageQuery,
        filter: &Filter,
        newest: i64,
    ) -> Result<Vec<Message>>;
    /// Counts messages of `search`'s scope that [`TextSearch::search_messages`]
    /// cannot match by their words because the text index has not reached
    /// them yet (0 where it indexes as it writes, or covers the scope), up
    /// to [`GAP_COUNT_LIMIT`].
    async fn text_index_gap(&self, workspace_id: &str, search: &MessageQuery) -> Result<i64>;
    /// Counts messages of `search`'s scope that a vector store cannot
    /// return because they are not synced to it yet, beyond the store's
    /// `newest` rows (which [`TextSearch::search_unsynced_messages`] reads),
    /// up to [`GAP_COUNT_LIMIT`].
    async fn vector_sync_gap(&self, workspace_id: &str, search: &MessageQuery, newest: i64) -> Result<i64>;
    /// How far meaning is behind `workspace_id`'s writes: which of its
    /// newest [`GAP_COUNT_LIMIT`] messages wait for their vectors (pending;
    /// those failed after their attempts are `roncho status`'s), and since
    /// when the oldest of them has waited. One probe when none waits.
    async fn meaning_lag(&self, workspace_id: &str) -> Result<MeaningLag>;
    /// How many of the workspace's messages counted by
    /// [`crate::store::SyncLedger::count_terms`] hold each of `terms`, and how
    /// many are counted: BM25's statistics for a vector store that keeps none
    /// per workspace.
    async fn term_counts(&self, workspace_id: &str, terms: &[u32]) -> Result<TermCounts>;
}
