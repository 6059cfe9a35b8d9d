//! Deletes that reach everything derived, with receipts: a message at once, a
//! session, peer or workspace chunk by chunk (see [`super::erase`]).

use async_trait::async_trait;

use crate::Result;
use crate::model::{ErasureReceipt, ErasureScope, ErasureState};

#[async_trait]
pub trait Erasure: Send + Sync + 'static {
    /// Erases a workspace and all it holds; refused while a session is
    /// active. Runs the erasure to the end (see [`erase`]).
    async fn delete_workspace(&self, id: &str) -> Result<ErasureReceipt> {
        erase(self, id, ErasureScope::Workspace).await
    }
    /// Erases a peer, its messages, memberships, conclusions by and about
    /// it, and what was derived from its messages (see [`erase`]).
    async fn delete_peer(&self, workspace_id: &str, id: &str) -> Result<ErasureReceipt> {
        erase(self, workspace_id, ErasureScope::Peer { peer_id: id.to_owned() }).await
    }
    /// Erases a session with its messages, memberships, summaries and
    /// conclusions, and what was derived from its messages (see [`erase`]).
    async fn delete_session(&self, workspace_id: &str, id: &str) -> Result<ErasureReceipt> {
        erase(
            self,
            workspace_id,
            ErasureScope::Session {
                session_id: id.to_owned(),
            },
        )
        .await
    }
    /// Erases a message and what was derived from it, at once (one
    /// transaction): conclusions left without a source, summaries covering
    /// it (rebuilt), the next turn's embedding (redone), its queued work.
    async fn delete_message(&self, workspace_id: &str, session_id: &str, id: &str) -> Result<ErasureReceipt>;
    /// Starts erasing a session, peer or workspace: checks it exists (a
    /// workspace: that no session is active) and records a running receipt
    /// and the `deletion` task that carries the erasure on in the background.
    /// From then on no read returns what it erases, though its rows go
    /// chunk by chunk. An erasure of the same target already running is
    /// returned instead.
    async fn begin_erasure(&self, workspace_id: &str, scope: &ErasureScope) -> Result<ErasureReceipt>;
    /// Erases the next chunk of a running erasure (at most `max_rows`
    /// messages, then conclusions, then the scope's own rows), in one
    /// transaction; the receipt is complete when nothing is left.
    async fn continue_erasure(&self, workspace_id: &str, receipt_id: &str, max_rows: i64) -> Result<ErasureReceipt>;
    /// An erasure's receipt, with the vectors its tombstones still hold.
    async fn erasure_receipt(&self, workspace_id: &str, id: &str) -> Result<ErasureReceipt>;
}

/// Rows an erasure removes per transaction.
pub const ERASURE_CHUNK: i64 = 500;

/// Erases a session, peer or workspace to the end, chunk by chunk.
pub async fn erase<S: Erasure + ?Sized>(store: &S, workspace_id: &str, scope: ErasureScope) -> Result<ErasureReceipt> {
    let mut receipt = store.begin_erasure(workspace_id, &scope).await?;
    while receipt.state == ErasureState::Running {
        receipt = store.continue_erasure(workspace_id, &receipt.id, ERASURE_CHUNK).await?;
    }
    Ok(receipt)
}
