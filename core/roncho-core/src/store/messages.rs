//! A session's messages and summaries: appended atomically (once per
//! idempotency key), listed, scanned, read under a token budget.

use async_trait::async_trait;

use crate::Result;
use crate::filter::Filter;
use crate::idempotency::Once;
use crate::model::{
    ContextWindow, JsonObject, Message, MessageScan, NewMessage, Page, PageRequest, SessionSummary, SummaryBasis,
    SummaryKind,
};

#[async_trait]
pub trait Messages: Send + Sync + 'static {
    /// Appends messages atomically, creating the session, the peers and their
    /// memberships as needed; all or nothing. With `once`, once per its key:
    /// a repeat within its window returns the messages the first call
    /// created (those still stored) and creates nothing; a repeat with
    /// another fingerprint is `FAILED_PRECONDITION`. Concurrent repeats wait
    /// for the first.
    async fn write_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<NewMessage>,
        once: Option<&Once>,
    ) -> Result<Vec<Message>>;
    /// [`Messages::write_messages`] without an idempotency key.
    async fn create_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Message>> {
        self.write_messages(workspace_id, session_id, messages, None).await
    }
    /// What an earlier call with `once`'s key created, if there was one
    /// within its window (so a repeat skips the work before
    /// [`Messages::write_messages`]); `FAILED_PRECONDITION` when that call
    /// had another fingerprint.
    async fn replayed_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        once: &Once,
    ) -> Result<Option<Vec<Message>>>;
    async fn get_message(&self, workspace_id: &str, session_id: &str, id: &str) -> Result<Message>;
    /// Replaces a message's metadata.
    async fn update_message(
        &self,
        workspace_id: &str,
        session_id: &str,
        id: &str,
        metadata: JsonObject,
    ) -> Result<Message>;
    /// Messages of a session in order (`reverse`: newest first).
    async fn list_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Message>>;
    /// Returns live messages of a workspace by public id that pass `filter`
    /// (and `peer_perspective` when given), in no particular order.
    async fn messages_by_ids(
        &self,
        workspace_id: &str,
        ids: &[String],
        filter: &Filter,
        peer_perspective: Option<&str>,
    ) -> Result<Vec<Message>>;
    /// Returns messages by a [`MessageScan`], in time order.
    async fn scan_messages(&self, workspace_id: &str, scan: &MessageScan) -> Result<Vec<Message>>;
    /// Returns the newest messages of a session at or after position
    /// `from_seq` whose tokens add up to at most `token_budget`, oldest first.
    async fn context_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        token_budget: i64,
        from_seq: i64,
    ) -> Result<Vec<Message>>;
    /// A session's summaries (when `with_summaries`) and its newest
    /// messages whose tokens add up to at most `token_budget`: what session
    /// context is cut from, read together (an agent asks for it every
    /// turn). `NotFound` when the session is not there or was deleted.
    async fn context_window(
        &self,
        workspace_id: &str,
        session_id: &str,
        token_budget: i64,
        with_summaries: bool,
    ) -> Result<ContextWindow>;
    /// A session's summaries (at most one per kind, short first).
    async fn session_summaries(&self, workspace_id: &str, session_id: &str) -> Result<Vec<SessionSummary>>;
    /// Stores the summary of `kind`, replacing the previous one; `message_id`
    /// (the last message covered) must belong to the session. With a
    /// `basis`, `NOT_FOUND` unless every message it names is still there
    /// and not being erased, and the previous summary it names is still
    /// the session's (see [`SummaryBasis`]).
    #[allow(clippy::too_many_arguments)]
    async fn set_session_summary(
        &self,
        workspace_id: &str,
        session_id: &str,
        kind: SummaryKind,
        content: &str,
        message_id: &str,
        token_count: i64,
        basis: Option<&SummaryBasis>,
    ) -> Result<SessionSummary>;
}
