//! Resource types of the domain, independent of transport and storage.
//!
//! Timestamps are microseconds since the Unix epoch, UTC.

use serde_json::{Map, Value};

use crate::{Error, Result};

/// Largest page size.
pub const MAX_PAGE_SIZE: i32 = 100;
/// Default page size.
pub const DEFAULT_PAGE_SIZE: i32 = 50;

/// A JSON object: metadata or configuration.
pub type JsonObject = Map<String, Value>;

/// Returns the current time in microseconds since the Unix epoch.
pub fn now_micros() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX)
}

/// Honcho's id alphabet in byte order, so that ids sort as their numbers do.
const ORDERED_ALPHABET: [char; 64] = [
    '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'I', 'J', 'K', 'L',
    'M', 'N', 'O', 'P', 'Q', 'R', 'S', 'T', 'U', 'V', 'W', 'X', 'Y', 'Z', '_', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h',
    'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w', 'x', 'y', 'z',
];

/// Returns a new 21-character public id (message, conclusion, webhook,
/// cloned session) in Honcho's alphabet (`[A-Za-z0-9_-]`, nanoid's): nine
/// characters of the time in microseconds, then twelve random ones (72
/// bits). Ids made later sort after earlier ones, so a batch's rows land at
/// the right edge of the unique indexes on them instead of on a hundred
/// random pages (each a page written per commit: a third of the embedded
/// store's writes went to the WAL, most of them for this).
pub fn new_public_id() -> String {
    let micros = u64::try_from(now_micros()).unwrap_or_default();
    let mut id: String = (0..9)
        .rev()
        .map(|digit| ORDERED_ALPHABET[((micros >> (6 * digit)) & 63) as usize])
        .collect();
    id.push_str(&nanoid::nanoid!(12, &ORDERED_ALPHABET));
    id
}

#[derive(Debug, Clone, PartialEq)]
pub struct Workspace {
    pub id: String,
    pub metadata: JsonObject,
    pub configuration: JsonObject,
    pub created_at: i64,
}

/// An immutable identifier of one workspace, peer or session (Honcho 3.1's
/// `uid`): a digest of its kind, place, name and creation time, so it holds
/// for the resource's life and a resource deleted and made again under the
/// same name gets another.
pub fn uid(kind: &str, workspace: &str, name: &str, created_at: i64) -> String {
    use sha2::{Digest, Sha256};
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-";
    let mut digest = Sha256::new();
    for part in [kind, workspace, name] {
        digest.update(part.as_bytes());
        digest.update([0]);
    }
    digest.update(created_at.to_be_bytes());
    digest
        .finalize()
        .iter()
        .take(21)
        .map(|byte| char::from(ALPHABET[usize::from(byte % 64)]))
        .collect()
}

impl Workspace {
    /// See [`uid`].
    pub fn uid(&self) -> String {
        uid("workspace", &self.id, "", self.created_at)
    }
}

impl Peer {
    /// See [`uid`].
    pub fn uid(&self) -> String {
        uid("peer", &self.workspace_id, &self.id, self.created_at)
    }
}

impl Session {
    /// See [`uid`].
    pub fn uid(&self) -> String {
        uid("session", &self.workspace_id, &self.id, self.created_at)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    pub id: String,
    pub workspace_id: String,
    pub metadata: JsonObject,
    pub configuration: JsonObject,
    pub created_at: i64,
}

/// What a peer is: a participant, or a scope (a named group of sessions
/// whose memory it gathers; honcho-v3 §2.2, "Scopes").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PeerKind {
    /// Participants only (the default of peer lists).
    #[default]
    Peer,
    /// Scopes only.
    Scope,
    /// Both.
    All,
}

impl PeerKind {
    /// Parses Honcho's `kind` (`"peer"`, `"scope"`, `"all"`; empty: peers).
    pub fn parse(kind: &str) -> Result<Self> {
        match kind {
            "" | "peer" => Ok(PeerKind::Peer),
            "scope" => Ok(PeerKind::Scope),
            "all" => Ok(PeerKind::All),
            other => Err(Error::invalid(
                "kind",
                format!("`{other}` is not one of peer, scope, all"),
            )),
        }
    }
}

/// The prefix of a scope's peer name: scope `team` observes as peer
/// `scope.team`. Peer ids cannot hold a `.`, so no participant has it.
pub const SCOPE_PEER_PREFIX: &str = "scope.";

/// Returns the peer name of scope `scope_id`.
pub fn scope_peer(scope_id: &str) -> String {
    format!("{SCOPE_PEER_PREFIX}{scope_id}")
}

/// Returns the scope id of a scope's peer name, `None` for a participant.
pub fn scope_of_peer(peer_id: &str) -> Option<&str> {
    peer_id.strip_prefix(SCOPE_PEER_PREFIX)
}

/// A scope: a named group of sessions of one workspace. Its peer
/// ([`scope_peer`]) joins each session observing the others and never
/// observed itself, so its memory is what was said in exactly those
/// sessions.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    /// The scope's own id (without [`SCOPE_PEER_PREFIX`]).
    pub id: String,
    pub workspace_id: String,
    pub metadata: JsonObject,
    pub created_at: i64,
}

/// How far copying a session's memory into a scope has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackfillState {
    Pending,
    Completed,
    Failed,
}

impl BackfillState {
    /// `pending`, `completed` or `failed`, as Honcho's `ScopeStatus` writes it.
    pub fn name(self) -> &'static str {
        match self {
            BackfillState::Pending => "pending",
            BackfillState::Completed => "completed",
            BackfillState::Failed => "failed",
        }
    }

    /// Parses [`BackfillState::name`].
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "pending" => Ok(BackfillState::Pending),
            "completed" => Ok(BackfillState::Completed),
            "failed" => Ok(BackfillState::Failed),
            other => Err(Error::Internal(format!("unknown backfill state {other}"))),
        }
    }
}

/// One session's backfill into a scope: the observations said in it before
/// the scope joined, copied into the scope's memory.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeBackfill {
    pub session_id: String,
    pub state: BackfillState,
    /// Observations copied so far.
    pub docs_copied: i64,
    /// Why the last attempt failed (it is retried).
    pub error: Option<String>,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub id: String,
    pub workspace_id: String,
    pub is_active: bool,
    pub metadata: JsonObject,
    pub configuration: JsonObject,
    pub created_at: i64,
}

/// Per-session observation settings of one member; `None` inherits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionPeerConfig {
    pub observe_me: Option<bool>,
    pub observe_others: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: String,
    pub workspace_id: String,
    pub session_id: String,
    pub peer_id: String,
    pub content: String,
    pub metadata: JsonObject,
    pub created_at: i64,
    pub token_count: i64,
    pub seq_in_session: i64,
}

/// A validated message waiting to be appended to a session.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub peer_id: String,
    pub content: String,
    pub metadata: JsonObject,
    pub configuration: JsonObject,
    /// `None` stamps the time of ingestion.
    pub created_at: Option<i64>,
    pub token_count: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookEndpoint {
    pub id: String,
    pub workspace_id: String,
    pub url: String,
    pub created_at: i64,
}

/// A validated page request: `page` ≥ 1, `size` in 1..=100.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub page: i64,
    pub size: i64,
    pub reverse: bool,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self {
            page: 1,
            size: i64::from(DEFAULT_PAGE_SIZE),
            reverse: false,
        }
    }
}

impl PageRequest {
    /// Returns the page request for wire values where 0 means "default".
    pub fn from_wire(page: i32, size: i32, reverse: bool) -> Result<Self> {
        if page < 0 {
            return Err(Error::invalid("page", "must be at least 1"));
        }
        if !(0..=MAX_PAGE_SIZE).contains(&size) {
            return Err(Error::invalid("size", format!("must be between 1 and {MAX_PAGE_SIZE}")));
        }
        Ok(Self {
            page: if page == 0 { 1 } else { i64::from(page) },
            size: if size == 0 {
                i64::from(DEFAULT_PAGE_SIZE)
            } else {
                i64::from(size)
            },
            reverse,
        })
    }

    /// Returns the number of rows to skip.
    pub fn offset(&self) -> i64 {
        (self.page - 1).saturating_mul(self.size)
    }
}

/// One page of a list: `items, total, page, size, pages`.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: i64,
    pub page: i64,
    pub size: i64,
    pub pages: i64,
}

impl<T> Page<T> {
    /// Returns a page of `items` out of `total` rows.
    pub fn new(items: Vec<T>, total: i64, request: PageRequest) -> Self {
        let pages = if total == 0 {
            0
        } else {
            (total + request.size - 1) / request.size
        };
        Self {
            items,
            total,
            page: request.page,
            size: request.size,
            pages,
        }
    }
}

/// Returns `base` with the top-level keys of `update` written over it.
pub fn shallow_merge(mut base: JsonObject, update: JsonObject) -> JsonObject {
    for (key, value) in update {
        base.insert(key, value);
    }
    base
}

/// The levels of a conclusion, as Honcho names them.
pub const LEVELS: [&str; 4] = ["explicit", "deductive", "inductive", "contradiction"];

/// An observation `observer` holds about `observed` (Honcho's document).
#[derive(Debug, Clone, PartialEq)]
pub struct Conclusion {
    pub id: String,
    pub workspace_id: String,
    pub observer_id: String,
    pub observed_id: String,
    pub session_id: Option<String>,
    /// One of [`LEVELS`].
    pub level: String,
    pub content: String,
    /// Statements a deductive conclusion rests on.
    pub premises: Vec<String>,
    /// Ids of the messages or conclusions it came from.
    pub source_ids: Vec<String>,
    pub times_derived: i64,
    /// Internal metadata: `pattern_type`, `confidence`, ...
    pub metadata: JsonObject,
    pub created_at: i64,
}

impl Conclusion {
    /// The messages it was learned from: an explicit conclusion's sources
    /// are messages (what the deriver read, or what a client named when it
    /// wrote it); the other levels' are conclusions.
    pub fn source_message_ids(&self) -> &[String] {
        match self.level.as_str() {
            "explicit" => &self.source_ids,
            _ => &[],
        }
    }
}

/// Which of a session's two summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SummaryKind {
    Short,
    Long,
}

impl SummaryKind {
    /// Honcho's name of the summary type.
    pub fn name(self) -> &'static str {
        match self {
            SummaryKind::Short => "honcho_chat_summary_short",
            SummaryKind::Long => "honcho_chat_summary_long",
        }
    }

    /// Parses Honcho's name of a summary type.
    pub fn from_name(name: &str) -> Option<Self> {
        [SummaryKind::Short, SummaryKind::Long]
            .into_iter()
            .find(|kind| kind.name() == name)
    }
}

/// A summary of a session up to and including one message.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub kind: SummaryKind,
    pub content: String,
    /// Public id of the last message covered.
    pub message_id: String,
    /// That message's position in the session.
    pub message_seq: i64,
    pub token_count: i64,
    pub created_at: i64,
}

/// What a summary was made from, checked as it is stored: an erasure in
/// between (of a message it read, or of the previous summary it carried
/// on) leaves it unwritten, so erased words never come back through a
/// summary that was being written while they were erased.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SummaryBasis {
    /// Public ids of the messages it summarised.
    pub messages: Vec<String>,
    /// The `created_at` of the previous summary of its kind it carried on, if any.
    pub previous: Option<i64>,
}

/// What a session's context is cut from: its summaries, when asked for
/// (at most one per kind, short first), and its newest messages whose
/// tokens add up to at most a budget, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextWindow {
    pub summaries: Vec<SessionSummary>,
    pub messages: Vec<Message>,
}

/// A validated conclusion waiting to be stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewConclusion {
    pub observer_id: String,
    pub observed_id: String,
    pub session_id: Option<String>,
    pub level: String,
    pub content: String,
    pub premises: Vec<String>,
    pub source_ids: Vec<String>,
    pub metadata: JsonObject,
}

/// A message carried over from another server (`roncho import`): it keeps
/// its id and time.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedMessage {
    pub id: String,
    /// `created_at` is required here: an import keeps the original time.
    pub message: NewMessage,
}

/// A conclusion carried over from another server (`roncho import`): it keeps
/// its id, time and derivation count.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedConclusion {
    pub id: String,
    pub created_at: i64,
    pub times_derived: i64,
    pub conclusion: NewConclusion,
}

/// Which conclusions of one collection to load for a representation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CollectionQuery {
    /// Only conclusions from these sessions, and only explicit ones (an allowlist).
    pub allowed_sessions: Option<Vec<String>>,
    /// Newest conclusions to take.
    pub recent: i64,
    /// Conclusions derived most often to take.
    pub most_derived: i64,
}

/// A collection's dream bookkeeping (one observer's view of one peer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DreamState {
    /// Dreams finished so far.
    pub generation: i64,
    /// When the last one finished, in microseconds.
    pub last_dream_at: Option<i64>,
    /// Live explicit observations then, and now.
    pub last_dream_document_count: i64,
    pub explicit_count: i64,
}

/// A scan of one workspace's messages in time order, for the agents' tools
/// (grep, date ranges, the context around a message).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageScan {
    /// Only these sessions (an allowlist); `None`: every session.
    pub session_ids: Option<Vec<String>>,
    /// Only messages of sessions this peer is or was a member of, while it was.
    pub peer_perspective: Option<String>,
    /// Case-insensitive substring of the content.
    pub contains: Option<String>,
    /// `created_at` strictly after / before, in microseconds.
    pub after: Option<i64>,
    pub before: Option<i64>,
    /// `seq_in_session` within `[from, to]` (meant with one session).
    pub seq_range: Option<(i64, i64)>,
    pub newest_first: bool,
    pub limit: i64,
}

/// A full-text search over messages of one workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageQuery {
    /// Normalised search terms (see [`crate::search::terms`]); never empty.
    pub terms: Vec<String>,
    /// Only these sessions (one session's search, or a scope's sessions);
    /// `None`: every session.
    pub session_ids: Option<Vec<String>>,
    /// Only messages written by this peer.
    pub peer_id: Option<String>,
    /// Only messages of sessions this peer is or was a member of.
    pub peer_perspective: Option<String>,
    pub limit: i64,
}

/// What carries a vector: a message or a conclusion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncKind {
    Message,
    Conclusion,
}

impl SyncKind {
    /// Returns the kind's name in metrics and status.
    pub fn name(self) -> &'static str {
        match self {
            SyncKind::Message => "message",
            SyncKind::Conclusion => "conclusion",
        }
    }
}

/// A row whose vector is not in the vector store yet.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncItem {
    pub kind: SyncKind,
    pub id: String,
    pub namespace: String,
    /// What the row says (`speaker: text` for a message).
    pub text: String,
    /// The turn a message answers (`speaker: text` of the previous message
    /// in its session), whose meaning is mixed into its vector.
    pub context: Option<String>,
    pub session_id: Option<String>,
    pub peer_id: Option<String>,
    pub level: Option<String>,
    pub attempts: i64,
    /// The row's sync version when read: a row queued again since (its
    /// text changed) is not marked synced with this embedding.
    pub version: i64,
}

/// How far meaning is behind a workspace's writes: its messages whose
/// vectors are not in the vector store yet (found by their words, not by
/// meaning), and since when the oldest of them has waited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MeaningLag {
    /// Messages waiting (pending).
    pub messages: i64,
    /// Whether more may wait than `messages` counts (a long backlog is
    /// counted over the workspace's newest messages, up to a bound).
    pub at_least: bool,
    /// When the oldest of them began to wait (microseconds since the
    /// epoch): written, or queued again (another model, an erased turn
    /// before it).
    pub oldest_queued_at: Option<i64>,
}

impl MeaningLag {
    /// Seconds the oldest waiting message has waited at `now` (microseconds); 0 when none waits.
    pub fn seconds(&self, now: i64) -> f64 {
        self.oldest_queued_at
            .map_or(0.0, |queued| (now.saturating_sub(queued)).max(0) as f64 / 1e6)
    }
}

/// Counts of rows by sync state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncCounts {
    pub pending: i64,
    pub synced: i64,
    pub failed: i64,
    /// Since when the oldest pending row has waited (microseconds since the
    /// epoch; a conclusion's creation): how far meaning is behind, in time.
    pub oldest_pending_at: Option<i64>,
}

/// A vector to remove because its row is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    pub namespace: String,
    pub id: String,
}

/// What an erasure removes: one message, or a session, a peer or a
/// workspace with everything in it, or what a scope observed in a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErasureScope {
    Message {
        session_id: String,
        message_id: String,
    },
    Session {
        session_id: String,
    },
    Peer {
        peer_id: String,
    },
    Workspace,
    /// A session leaving a scope: what the scope's peer observed there.
    ScopeSession {
        scope_id: String,
        session_id: String,
    },
}

impl ErasureScope {
    /// `message`, `session`, `peer` or `workspace`.
    pub fn kind(&self) -> &'static str {
        match self {
            ErasureScope::Message { .. } => "message",
            ErasureScope::Session { .. } => "session",
            ErasureScope::Peer { .. } => "peer",
            ErasureScope::Workspace => "workspace",
            ErasureScope::ScopeSession { .. } => "scope_session",
        }
    }

    /// The id of what is erased (the workspace's own id for a workspace).
    pub fn target<'a>(&'a self, workspace_id: &'a str) -> &'a str {
        match self {
            ErasureScope::Message { message_id, .. } => message_id,
            ErasureScope::Session { session_id } => session_id,
            ErasureScope::Peer { peer_id } => peer_id,
            ErasureScope::Workspace => workspace_id,
            ErasureScope::ScopeSession { scope_id, .. } => scope_id,
        }
    }
}

/// Where an erasure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErasureState {
    /// Removing, chunk by chunk (`counts` so far).
    Running,
    /// Every row is gone; vectors go as the reconciler applies the
    /// tombstones (`vectors_pending`).
    Complete,
}

impl ErasureState {
    pub fn name(self) -> &'static str {
        match self {
            ErasureState::Running => "running",
            ErasureState::Complete => "complete",
        }
    }
}

/// What an erasure removed or rebuilt, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ErasureCounts {
    /// Message rows deleted (their full-text entries with them).
    pub messages: i64,
    /// Message vectors removed from the vector store.
    pub message_vectors: i64,
    /// Conclusions deleted: every source gone, or in the erased scope.
    pub conclusions: i64,
    /// Conclusion vectors removed.
    pub conclusion_vectors: i64,
    /// Conclusions kept that lost some of their sources (and premises).
    pub conclusions_trimmed: i64,
    /// Session summaries that covered an erased message: deleted and queued
    /// to be summarised again without it.
    pub summaries_rebuilt: i64,
    /// Messages whose vector was embedded with an erased turn as context:
    /// queued to be embedded again.
    pub messages_reembedded: i64,
    /// Queued tasks of erased data dropped.
    pub tasks_dropped: i64,
    /// Idempotency keys that named erased rows, disarmed (digest cleared, key kept).
    pub idempotency_keys: i64,
    pub peer_cards: i64,
    pub sessions: i64,
    pub peers: i64,
    pub webhooks: i64,
    pub workspaces: i64,
}

impl ErasureCounts {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &ErasureCounts) {
        self.messages += other.messages;
        self.message_vectors += other.message_vectors;
        self.conclusions += other.conclusions;
        self.conclusion_vectors += other.conclusion_vectors;
        self.conclusions_trimmed += other.conclusions_trimmed;
        self.summaries_rebuilt += other.summaries_rebuilt;
        self.messages_reembedded += other.messages_reembedded;
        self.tasks_dropped += other.tasks_dropped;
        self.idempotency_keys += other.idempotency_keys;
        self.peer_cards += other.peer_cards;
        self.sessions += other.sessions;
        self.peers += other.peers;
        self.webhooks += other.webhooks;
        self.workspaces += other.workspaces;
    }
}

/// The record of an erasure, kept after the data is gone.
#[derive(Debug, Clone, PartialEq)]
pub struct ErasureReceipt {
    pub id: String,
    pub workspace_id: String,
    pub scope: ErasureScope,
    pub state: ErasureState,
    pub counts: ErasureCounts,
    /// Vector removals the reconciler has yet to apply (one per erased row
    /// that had, or might still get, a vector); 0 once applied.
    pub vectors_pending: i64,
    pub created_at: i64,
    pub finished_at: Option<i64>,
    /// When the erased bytes were overwritten in the store's files (SQLite:
    /// the truncating checkpoint after every row and vector went); `None`
    /// until then, and on Postgres.
    pub overwritten_at: Option<i64>,
}

/// How an answer was reached (Honcho 3.2's `reasoning_trace_id`): what
/// the dialectic did, by name and size, and what it read, by id; never
/// the text of a prompt, a tool's input or result, or the answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ReasoningTrace {
    pub id: String,
    pub workspace_id: String,
    /// The observer; `None` for a workspace chat.
    pub peer_id: Option<String>,
    pub target: Option<String>,
    pub session_id: Option<String>,
    pub created_at: i64,
    pub detail: JsonObject,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_ids_are_honchos_shape_and_sort_by_time() {
        let mut ids = Vec::new();
        for _ in 0..50 {
            ids.push(new_public_id());
            std::thread::sleep(std::time::Duration::from_micros(2));
        }
        for id in &ids {
            assert_eq!(id.len(), 21, "{id}");
            assert!(crate::validate::resource_id("id", id).is_ok(), "{id}");
        }
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids, "later ids sort after earlier ones");
        let mut unique = ids.clone();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
        let same_instant: std::collections::BTreeSet<String> = (0..1000).map(|_| new_public_id()).collect();
        assert_eq!(
            same_instant.len(),
            1000,
            "the random part keeps ids of one instant apart"
        );
    }

    #[test]
    fn page_counts_round_up() {
        let request = PageRequest::from_wire(2, 10, false).unwrap();
        let page = Page::new(vec![1, 2, 3], 23, request);
        assert_eq!((page.page, page.size, page.pages, page.total), (2, 10, 3, 23));
        assert_eq!(request.offset(), 10);
        assert_eq!(Page::<u8>::new(vec![], 0, request).pages, 0);
    }

    #[test]
    fn page_size_above_100_is_rejected() {
        assert!(PageRequest::from_wire(1, 101, false).is_err());
        assert!(PageRequest::from_wire(-1, 10, false).is_err());
        assert_eq!(
            PageRequest::from_wire(0, 0, true).unwrap(),
            PageRequest {
                page: 1,
                size: 50,
                reverse: true
            }
        );
    }
}
