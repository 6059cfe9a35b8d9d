//! The relational `Store` port: every durable read and write of workspaces,
//! peers, sessions, messages and webhooks, with Honcho v3 semantics.
//!
//! Inputs are already validated (see [`crate::validate`]); implementations
//! enforce the semantics that need the data: existence, uniqueness, ordering,
//! atomicity and workspace isolation. Every operation is scoped by workspace.

use async_trait::async_trait;

use crate::Result;
use crate::filter::Filter;
use crate::idempotency::Once;
use crate::model::{
    CollectionQuery, Conclusion, DreamState, ErasureReceipt, ErasureScope, ErasureState, ImportedConclusion,
    ImportedMessage, JsonObject, Message, MessageScan, MessageSearch, NewConclusion, NewMessage, Page, PageRequest,
    Peer, PeerKind, Scope, ScopeBackfill, Session, SessionPeerConfig, SessionSummary, SummaryKind, SyncCounts,
    SyncItem, SyncKind, Tombstone, WebhookEndpoint, Workspace,
};

/// Peers to add to a session with their configs, in request order.
pub type SessionPeers = Vec<(String, SessionPeerConfig)>;

/// What a store reports about itself for `roncho status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// Where the data lives, secrets redacted.
    pub location: String,
    /// The newest applied migration.
    pub schema_version: Option<i64>,
}

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Returns the backend, location and schema version.
    async fn info(&self) -> Result<StoreInfo>;
    /// Checks that the database answers (readiness); `UNAVAILABLE` when not.
    async fn ping(&self) -> Result<()>;

    /// Returns the workspace, creating it with `metadata` and `configuration` when absent.
    async fn get_or_create_workspace(
        &self,
        id: &str,
        metadata: JsonObject,
        configuration: JsonObject,
    ) -> Result<(Workspace, bool)>;
    /// Replaces metadata and merges configuration when given; creates when absent.
    async fn update_workspace(
        &self,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
    ) -> Result<Workspace>;
    /// Erases a workspace and all it holds; refused while a session is
    /// active. Runs the erasure to the end (see [`erase`]).
    async fn delete_workspace(&self, id: &str) -> Result<ErasureReceipt> {
        erase(self, id, ErasureScope::Workspace).await
    }
    async fn list_workspaces(&self, filter: &Filter, page: PageRequest) -> Result<Page<Workspace>>;

    /// Returns the peer, creating it (and the workspace) when absent; given
    /// metadata and configuration replace those of an existing peer.
    async fn get_or_create_peer(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
    ) -> Result<(Peer, bool)>;
    /// Erases a peer, its messages, memberships, conclusions by and about
    /// it, and what was derived from its messages (see [`erase`]).
    async fn delete_peer(&self, workspace_id: &str, id: &str) -> Result<ErasureReceipt> {
        erase(self, workspace_id, ErasureScope::Peer { peer_id: id.to_owned() }).await
    }
    /// Lists the peers of `kind` (scopes are peers named `scope.<id>`).
    async fn list_peers(
        &self,
        workspace_id: &str,
        kind: PeerKind,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Peer>>;

    /// Returns the session, creating it when absent; on an existing session
    /// replaces metadata, merges configuration, and ensures `peers`.
    async fn get_or_create_session(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
        configuration: Option<JsonObject>,
        peers: SessionPeers,
    ) -> Result<(Session, bool)>;
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
    /// Copies a session with messages up to the inclusive cutoff into a new session.
    async fn clone_session(&self, workspace_id: &str, id: &str, cutoff_message_id: Option<&str>) -> Result<Session>;
    /// Adds (or re-activates) members with their configs.
    async fn add_session_peers(&self, workspace_id: &str, session_id: &str, peers: SessionPeers) -> Result<Session>;
    /// Makes `peers` the exact set of active members.
    async fn set_session_peers(&self, workspace_id: &str, session_id: &str, peers: SessionPeers) -> Result<Session>;
    /// Marks members as having left.
    async fn remove_session_peers(&self, workspace_id: &str, session_id: &str, peer_ids: &[String]) -> Result<Session>;
    /// Sets one member's config; `None` fields keep their value.
    async fn set_session_peer_config(
        &self,
        workspace_id: &str,
        session_id: &str,
        peer_id: &str,
        config: SessionPeerConfig,
    ) -> Result<()>;
    /// Returns one active member's config.
    async fn get_session_peer_config(
        &self,
        workspace_id: &str,
        session_id: &str,
        peer_id: &str,
    ) -> Result<SessionPeerConfig>;
    async fn list_sessions(&self, workspace_id: &str, filter: &Filter, page: PageRequest) -> Result<Page<Session>>;
    /// Sessions the peer is or was a member of.
    async fn list_peer_sessions(
        &self,
        workspace_id: &str,
        peer_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Session>>;
    /// Active members of a session, in joining order.
    async fn list_session_peers(&self, workspace_id: &str, session_id: &str, page: PageRequest) -> Result<Page<Peer>>;

    /// Appends messages atomically, creating the session, the peers and their
    /// memberships as needed; all or nothing.
    async fn create_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<NewMessage>,
    ) -> Result<Vec<Message>>;
    /// Like [`Store::create_messages`], once per `once`'s key: a repeat
    /// within its window returns the messages the first call created (those
    /// still stored) and creates nothing; a repeat with another fingerprint
    /// is `FAILED_PRECONDITION`. Concurrent repeats wait for the first.
    async fn create_messages_once(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<NewMessage>,
        once: &Once,
    ) -> Result<Vec<Message>>;
    /// What an earlier call with `once`'s key created, if there was one
    /// within its window (so a repeat skips the work before
    /// [`Store::create_messages_once`]); `FAILED_PRECONDITION` when that call
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
    /// Erases a message and what was derived from it, at once (one
    /// transaction): conclusions left without a source, summaries covering
    /// it (rebuilt), the next turn's embedding (redone), its queued work.
    async fn delete_message(&self, workspace_id: &str, session_id: &str, id: &str) -> Result<ErasureReceipt>;

    /// Starts erasing a session, peer or workspace: checks it exists (a
    /// workspace: that no session is active) and records a running receipt
    /// and the `deletion` task that carries the erasure on in the background.
    /// An erasure of the same target already running is returned instead.
    async fn begin_erasure(&self, workspace_id: &str, scope: &ErasureScope) -> Result<ErasureReceipt>;
    /// Erases the next chunk of a running erasure (at most `max_rows`
    /// messages, then conclusions, then the scope's own rows), in one
    /// transaction; the receipt is complete when nothing is left.
    async fn continue_erasure(&self, workspace_id: &str, receipt_id: &str, max_rows: i64) -> Result<ErasureReceipt>;
    /// An erasure's receipt, with the vectors its tombstones still hold.
    async fn erasure_receipt(&self, workspace_id: &str, id: &str) -> Result<ErasureReceipt>;
    /// Messages of a session in order (`reverse`: newest first).
    async fn list_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Message>>;

    /// Returns the endpoint for `url`, creating it when absent (at most 10 per workspace).
    async fn create_webhook(&self, workspace_id: &str, url: &str) -> Result<(WebhookEndpoint, bool)>;
    async fn delete_webhook(&self, workspace_id: &str, id: &str) -> Result<()>;
    async fn list_webhooks(&self, workspace_id: &str, page: PageRequest) -> Result<Page<WebhookEndpoint>>;
    /// Queues a `test.event` for every endpoint of the workspace (delivered
    /// by the deriver role); returns how many endpoints it goes to.
    async fn queue_test_webhook(&self, workspace_id: &str) -> Result<u64>;

    /// Returns the newest messages of a session at or after position
    /// `from_seq` whose tokens add up to at most `token_budget`, oldest first.
    async fn context_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        token_budget: i64,
        from_seq: i64,
    ) -> Result<Vec<Message>>;
    /// A session's summaries (at most one per kind, short first).
    async fn session_summaries(&self, workspace_id: &str, session_id: &str) -> Result<Vec<SessionSummary>>;
    /// Stores the summary of `kind`, replacing the previous one; `message_id`
    /// (the last message covered) must belong to the session.
    async fn set_session_summary(
        &self,
        workspace_id: &str,
        session_id: &str,
        kind: SummaryKind,
        content: &str,
        message_id: &str,
        token_count: i64,
    ) -> Result<SessionSummary>;
    /// Full-text search over a workspace's messages, best match first.
    async fn search_messages(
        &self,
        workspace_id: &str,
        search: &MessageSearch,
        filter: &Filter,
    ) -> Result<Vec<Message>>;
    /// Like [`Store::search_messages`], over the messages whose vectors are
    /// not synced yet among the store's `newest` messages (every workspace's):
    /// what a vector store that ranks full text has not seen, at a bounded cost.
    async fn search_unsynced_messages(
        &self,
        workspace_id: &str,
        search: &MessageSearch,
        filter: &Filter,
        newest: i64,
    ) -> Result<Vec<Message>>;

    /// Stores conclusions; observer, observed and session must exist.
    async fn create_conclusions(&self, workspace_id: &str, conclusions: Vec<NewConclusion>) -> Result<Vec<Conclusion>>;
    /// Like [`Store::create_conclusions`], once per `once`'s key (see
    /// [`Store::create_messages_once`]).
    async fn create_conclusions_once(
        &self,
        workspace_id: &str,
        conclusions: Vec<NewConclusion>,
        once: &Once,
    ) -> Result<Vec<Conclusion>>;
    /// Live conclusions, newest first (`reverse`: oldest first).
    async fn list_conclusions(
        &self,
        workspace_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Conclusion>>;
    /// Counts one more derivation of live conclusions (a fact derived again).
    async fn increment_times_derived(&self, workspace_id: &str, ids: &[String]) -> Result<()>;
    /// Soft-deletes a conclusion: it disappears from every read but is kept.
    async fn delete_conclusion(&self, workspace_id: &str, id: &str) -> Result<()>;
    /// Replaces conclusion `old_id` with `new` in one transaction: the old one
    /// is soft-deleted (its vector tombstoned) and the new one carries its
    /// `times_derived` plus one. Honcho's semantic dedup keeps the better
    /// worded of two near-identical facts this way.
    async fn supersede_conclusion(&self, workspace_id: &str, old_id: &str, new: NewConclusion) -> Result<Conclusion>;
    /// The newest and the most derived live conclusions of one collection.
    async fn collection_conclusions(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        query: &CollectionQuery,
    ) -> Result<Vec<Conclusion>>;

    /// Returns the card `observer_id` holds about `observed_id`, `None` when
    /// there is none; `NOT_FOUND` when the observer does not exist.
    async fn get_peer_card(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
    ) -> Result<Option<Vec<String>>>;
    /// Sets a peer card, creating the peers when absent.
    async fn set_peer_card(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        card: Vec<String>,
    ) -> Result<()>;

    /// Returns live messages of a workspace by public id that pass `filter`
    /// (and `peer_perspective` when given), in no particular order.
    async fn messages_by_ids(
        &self,
        workspace_id: &str,
        ids: &[String],
        filter: &Filter,
        peer_perspective: Option<&str>,
    ) -> Result<Vec<Message>>;

    /// Returns up to `limit` rows of `kind` still waiting for a vector, oldest
    /// first, skipping those whose backoff — `backoff_micros` × attempts² since
    /// the last attempt — has not passed at `now`.
    async fn unsynced(&self, kind: SyncKind, limit: i64, now: i64, backoff_micros: i64) -> Result<Vec<SyncItem>>;
    /// Marks rows, by id and the sync version read with them, as having
    /// their vector; a row whose version moved since keeps waiting.
    async fn mark_synced(&self, kind: SyncKind, rows: &[(String, i64)]) -> Result<()>;
    /// Records a failed attempt; rows reaching `max_attempts` become `failed`.
    async fn mark_sync_failed(&self, kind: SyncKind, ids: &[String], error: &str, max_attempts: i64) -> Result<()>;
    /// Counts rows of `kind` by sync state.
    async fn sync_counts(&self, kind: SyncKind) -> Result<SyncCounts>;
    /// Where the text indexer stands: `None` where the store indexes a
    /// message's words as it writes it (SQLite); else a mark (the newest
    /// message's row id) that [`Store::index_text`] later indexes up to.
    /// Postgres leaves full-text indexing off the write path: the reconciler
    /// indexes a message when it marks its vector synced, and the text
    /// indexer any message nobody else does.
    async fn text_index_mark(&self) -> Result<Option<i64>>;
    /// Indexes the words of up to `limit` messages at or below `up_to` (a
    /// [`Store::text_index_mark`]) not indexed yet, oldest first; returns how
    /// many it indexed.
    async fn index_text(&self, up_to: i64, limit: i64) -> Result<u64>;
    /// Counts messages whose words are not indexed yet (0 where the store
    /// indexes them as it writes). Search still finds the newest of them.
    async fn text_index_backlog(&self) -> Result<i64>;
    /// Counts messages of `search`'s scope that [`Store::search_messages`]
    /// cannot match by their words because the text index has not reached
    /// them yet (0 where it indexes as it writes, or covers the scope).
    async fn text_index_gap(&self, workspace_id: &str, search: &MessageSearch) -> Result<i64>;
    /// Counts messages of `search`'s scope that a vector store cannot
    /// return because they are not synced to it yet, beyond the store's
    /// `newest` rows (which [`Store::search_unsynced_messages`] reads).
    async fn vector_sync_gap(&self, workspace_id: &str, search: &MessageSearch, newest: i64) -> Result<i64>;
    /// Returns up to `limit` vectors to remove because their rows were deleted.
    async fn tombstones(&self, limit: i64) -> Result<Vec<Tombstone>>;
    /// Forgets tombstones whose vectors are removed.
    async fn clear_tombstones(&self, tombstones: &[Tombstone]) -> Result<()>;

    /// Returns live conclusions of a workspace by public id, in no particular order.
    async fn conclusions_by_ids(&self, workspace_id: &str, ids: &[String]) -> Result<Vec<Conclusion>>;
    /// Returns the live conclusions that list conclusion `id` among their
    /// `source_ids` (what was derived from it), oldest first.
    async fn conclusions_citing(&self, workspace_id: &str, id: &str) -> Result<Vec<Conclusion>>;
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
    /// Returns messages by a [`MessageScan`], in time order.
    async fn scan_messages(&self, workspace_id: &str, scan: &MessageScan) -> Result<Vec<Message>>;

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
    /// [`Store::import_messages`]). Returns how many were new.
    async fn import_conclusions(&self, workspace_id: &str, conclusions: Vec<ImportedConclusion>) -> Result<u64>;

    /// Returns the scope, creating it (and the workspace) when absent: its
    /// peer, which observes others and is never observed. Given metadata
    /// replaces an existing scope's.
    async fn get_or_create_scope(
        &self,
        workspace_id: &str,
        id: &str,
        metadata: Option<JsonObject>,
    ) -> Result<(Scope, bool)>;
    async fn get_scope(&self, workspace_id: &str, id: &str) -> Result<Scope>;
    async fn list_scopes(&self, workspace_id: &str, page: PageRequest) -> Result<Page<Scope>>;
    /// Adds sessions (which must exist) to a scope: its peer joins each,
    /// and a backfill copying what was observed there before is queued for
    /// each (again for a session already in the scope, catching up on what
    /// was derived since). At most [`MAX_SESSIONS_PER_SCOPE`] sessions.
    async fn add_scope_sessions(&self, workspace_id: &str, id: &str, session_ids: &[String]) -> Result<()>;
    /// Lists the active sessions of a scope.
    async fn list_scope_sessions(&self, workspace_id: &str, id: &str, page: PageRequest) -> Result<Page<Session>>;
    /// Returns the ids of every active session of the scopes `ids` (which
    /// must exist), without repeats.
    async fn scope_session_ids(&self, workspace_id: &str, ids: &[String]) -> Result<Vec<String>>;
    /// Returns the backfill of each session of a scope.
    async fn scope_backfills(&self, workspace_id: &str, id: &str) -> Result<Vec<ScopeBackfill>>;
    /// Copies the next observations (at most `max_rows`) of a pending
    /// backfill into the scope, in one transaction; returns the backfill.
    /// The copies skip what the scope already holds, so a retry or a
    /// second backfill never doubles an observation.
    async fn continue_scope_backfill(
        &self,
        workspace_id: &str,
        id: &str,
        session_id: &str,
        max_rows: i64,
    ) -> Result<ScopeBackfill>;
    /// Records that a backfill's last attempt failed, with why (it stays
    /// retried by the queue; a later attempt sets it pending again).
    async fn fail_scope_backfill(&self, workspace_id: &str, id: &str, session_id: &str, error: &str) -> Result<()>;
}

/// Most sessions in one scope: a scope's sessions are one allowlist in
/// search and memory reads.
pub const MAX_SESSIONS_PER_SCOPE: i64 = 10_000;

/// Rows an erasure removes per transaction.
pub const ERASURE_CHUNK: i64 = 500;

/// Erases a session, peer or workspace to the end, chunk by chunk.
pub async fn erase<S: Store + ?Sized>(store: &S, workspace_id: &str, scope: ErasureScope) -> Result<ErasureReceipt> {
    let mut receipt = store.begin_erasure(workspace_id, &scope).await?;
    while receipt.state == ErasureState::Running {
        receipt = store.continue_erasure(workspace_id, &receipt.id, ERASURE_CHUNK).await?;
    }
    Ok(receipt)
}
