//! The ledger the reconciler works from: rows waiting for a vector, tombstones
//! of deleted rows, and the text indexer's mark.

use async_trait::async_trait;

use crate::Result;
use crate::model::{SyncCounts, SyncItem, SyncKind, Tombstone};

#[async_trait]
pub trait SyncLedger: Send + Sync + 'static {
    /// Returns up to `limit` rows of `kind` still waiting for a vector, oldest
    /// first, skipping those whose backoff — `backoff_micros` × attempts² since
    /// the last attempt — has not passed at `now`.
    async fn unsynced(&self, kind: SyncKind, limit: i64, now: i64, backoff_micros: i64) -> Result<Vec<SyncItem>>;
    /// Marks rows, by id and the sync version read with them, as having
    /// their vector; a row whose version moved since keeps waiting.
    async fn mark_synced(&self, kind: SyncKind, rows: &[(String, i64)]) -> Result<()>;
    /// Counts the terms of messages, `(id, its lexical vector's dimensions)`,
    /// whose lexical vectors a vector store without term statistics of its
    /// own per workspace now holds ([`crate::store::TextSearch::term_counts`]).
    /// A message is counted once however often it is synced; deleting it
    /// uncounts it, and a message deleted already is not counted.
    async fn count_terms(&self, messages: &[(String, Vec<u32>)]) -> Result<()>;
    /// Records a failed attempt; rows reaching `max_attempts` become `failed`.
    async fn mark_sync_failed(&self, kind: SyncKind, ids: &[String], error: &str, max_attempts: i64) -> Result<()>;
    /// Counts rows of `kind` by sync state.
    async fn sync_counts(&self, kind: SyncKind) -> Result<SyncCounts>;
    /// Where the text indexer stands: `None` where the store indexes a
    /// message's words as it writes it (SQLite); else a mark (the newest
    /// message's row id) that [`SyncLedger::index_text`] later indexes up to.
    /// Postgres leaves full-text indexing off the write path: the reconciler
    /// indexes a message when it marks its vector synced, and the text
    /// indexer any message nobody else does.
    async fn text_index_mark(&self) -> Result<Option<i64>>;
    /// Indexes the words of up to `limit` messages at or below `up_to` (a
    /// [`SyncLedger::text_index_mark`]) not indexed yet, oldest first; returns how
    /// many it indexed.
    async fn index_text(&self, up_to: i64, limit: i64) -> Result<u64>;
    /// Counts messages whose words are not indexed yet (0 where the store
    /// indexes them as it writes). Search still finds the newest of them.
    async fn text_index_backlog(&self) -> Result<i64>;
    /// Returns up to `limit` vectors to remove because their rows were deleted.
    async fn tombstones(&self, limit: i64) -> Result<Vec<Tombstone>>;
    /// Forgets tombstones whose vectors are removed.
    async fn clear_tombstones(&self, tombstones: &[Tombstone]) -> Result<()>;
}

/// Where a vector store that keeps no term statistics per workspace (a
/// Qdrant collection) counts the terms of the messages it takes: the
/// database's ledger ([`SyncLedger::count_terms`]), given it at wiring.
#[async_trait]
pub trait TermCounter: Send + Sync + 'static {
    /// Counts the terms of messages, `(id, its lexical vector's dimensions)`.
    async fn count(&self, messages: &[(String, Vec<u32>)]) -> Result<()>;
}

#[async_trait]
impl<T: SyncLedger + ?Sized> TermCounter for T {
    async fn count(&self, messages: &[(String, Vec<u32>)]) -> Result<()> {
        self.count_terms(messages).await
    }
}
