//! The ingest role: every write ([`IngestApi`]).
//!
//! Requests are validated here (Honcho v3 limits, field names in errors) and
//! turned into `Store` calls; nothing derived is computed on this path. The
//! requests are domain types: edges (gRPC, REST) convert their wire to them
//! and authorize the caller first, so no call here carries it.

use std::collections::BTreeMap;
use std::sync::Arc;

use roncho_core::activity::WriteActivity;
use roncho_core::files::{self, PdfReader};
use roncho_core::idempotency::{Fingerprint, Once};
use roncho_core::model::{
    Conclusion, ErasureReceipt, ErasureScope, ErasureState, JsonObject, Message, NewConclusion, NewMessage, Peer,
    Scope, Session, SessionPeerConfig, WebhookEndpoint, Workspace,
};
use roncho_core::store::{Erasure, Import, Memory, Messages, Scopes, SessionPeers, Webhooks, Workspaces};
use roncho_core::{Error, Result, tokens, validate};
use serde_json::json;

mod import;
mod preflight;
mod requests;
mod sources;
pub use import::check_export_records;
pub use requests::*;

roncho_core::store_view! {
    /// The store as ingest writes it.
    pub trait IngestStore: Workspaces, Messages, Erasure, Webhooks, Memory, Scopes, Import
}

/// Called after a write that changes what needs vectors (the reconciler's nudge).
pub type AfterWrite = Arc<dyn Fn() + Send + Sync>;

/// Every write, as every edge calls it.
#[async_trait::async_trait]
pub trait IngestApi: Send + Sync {
    /// Returns the workspace and whether it was created.
    async fn get_or_create_workspace(&self, request: GetOrCreateWorkspace) -> Result<(Workspace, bool)>;
    async fn update_workspace(&self, request: UpdateWorkspace) -> Result<Workspace>;
    /// Erases the workspace: see [`Ingest::erase`] for when it returns.
    async fn delete_workspace(&self, request: DeleteWorkspace) -> Result<ErasureReceipt>;
    /// Returns the peer and whether it was created.
    async fn get_or_create_peer(&self, request: GetOrCreatePeer) -> Result<(Peer, bool)>;
    async fn update_peer(&self, request: UpdatePeer) -> Result<Peer>;
    async fn delete_peer(&self, request: DeletePeer) -> Result<ErasureReceipt>;
    /// Returns the session and whether it was created.
    async fn get_or_create_session(&self, request: GetOrCreateSession) -> Result<(Session, bool)>;
    async fn update_session(&self, request: UpdateSession) -> Result<Session>;
    async fn delete_session(&self, request: DeleteSession) -> Result<ErasureReceipt>;
    async fn clone_session(&self, request: CloneSession) -> Result<Session>;
    async fn add_session_peers(&self, request: ChangeSessionPeers) -> Result<Session>;
    async fn set_session_peers(&self, request: ChangeSessionPeers) -> Result<Session>;
    async fn remove_session_peers(&self, request: RemoveSessionPeers) -> Result<Session>;
    async fn set_session_peer_config(&self, request: SetSessionPeerConfig) -> Result<()>;
    async fn create_messages(&self, request: CreateMessages) -> Result<Vec<Message>>;
    async fn upload_file(&self, request: UploadFile) -> Result<Vec<Message>>;
    async fn update_message(&self, request: UpdateMessage) -> Result<Message>;
    async fn delete_message(&self, request: DeleteMessage) -> Result<ErasureReceipt>;
    async fn create_conclusions(&self, request: CreateConclusions) -> Result<Vec<Conclusion>>;
    async fn delete_conclusion(&self, request: DeleteConclusion) -> Result<()>;
    /// Returns the card as stored.
    async fn set_peer_card(&self, request: SetPeerCard) -> Result<Option<Vec<String>>>;
    /// Returns the endpoint and whether it was created.
    async fn create_webhook(&self, request: CreateWebhook) -> Result<(WebhookEndpoint, bool)>;
    async fn delete_webhook(&self, request: DeleteWebhook) -> Result<()>;
    /// Queues a `test.event` for every endpoint; returns how many.
    async fn test_webhook(&self, request: TestWebhook) -> Result<u64>;
    /// Returns the scope and whether it was created.
    async fn get_or_create_scope(&self, request: GetOrCreateScope) -> Result<(Scope, bool)>;
    /// Adds sessions to a scope, queueing their backfills.
    async fn add_scope_sessions(&self, request: AddScopeSessions) -> Result<()>;
    /// Takes a session out of a scope and erases what the scope observed
    /// there: see [`Ingest::erase`] for when it returns.
    async fn remove_scope_session(&self, request: RemoveScopeSession) -> Result<ErasureReceipt>;
    /// Imports export records (`roncho_core::export`) in order, keeping
    /// ids and times: every record is checked before the first is written.
    async fn import_records(&self, request: ImportRecords) -> Result<roncho_core::export::Counts>;
}

/// The ingest service over a store.
#[derive(Clone)]
pub struct Ingest {
    store: Arc<dyn IngestStore>,
    after_write: Option<AfterWrite>,
    /// Marks client writes in flight for background work beside them.
    activity: Option<Arc<WriteActivity>>,
    pdf: Arc<dyn PdfReader>,
    /// Webhook URLs may point at private, loopback and link-local addresses.
    allow_private_webhooks: bool,
    /// How long idempotency keys are remembered.
    idempotency_window: std::time::Duration,
    /// How long a delete request erases before leaving the rest to the
    /// background `deletion` work.
    erasure_budget: std::time::Duration,
}

/// A request's optional object as JSON (absent: `null`), for fingerprints.
fn optional_json(object: &Option<JsonObject>) -> serde_json::Value {
    object
        .clone()
        .map_or(serde_json::Value::Null, serde_json::Value::Object)
}

/// How long idempotency keys are remembered by default.
pub const DEFAULT_IDEMPOTENCY_WINDOW: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl std::fmt::Debug for Ingest {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Ingest").finish_non_exhaustive()
    }
}

impl Ingest {
    /// Returns the ingest service over `store`.
    pub fn new(store: Arc<dyn IngestStore>) -> Self {
        Self {
            store,
            after_write: None,
            activity: None,
            pdf: Arc::new(files::NoPdfReader),
            allow_private_webhooks: false,
            idempotency_window: DEFAULT_IDEMPOTENCY_WINDOW,
            erasure_budget: std::time::Duration::from_secs(5),
        }
    }

    /// Returns the service erasing for up to `budget` within a delete
    /// request (the rest runs as background work).
    pub fn with_erasure_budget(mut self, budget: std::time::Duration) -> Self {
        self.erasure_budget = budget;
        self
    }

    /// Returns the service remembering idempotency keys for `window`.
    pub fn with_idempotency_window(mut self, window: std::time::Duration) -> Self {
        self.idempotency_window = window;
        self
    }

    /// The write `operation` under the client's `key`, when it sent one;
    /// `fingerprint` digests the request.
    fn once(
        &self,
        operation: &'static str,
        key: Option<&str>,
        fingerprint: impl FnOnce() -> Fingerprint,
    ) -> Result<Option<Once>> {
        key.map(|key| {
            Once::new(
                "idempotency_key",
                key,
                operation,
                fingerprint(),
                self.idempotency_window,
            )
        })
        .transpose()
    }

    /// Lets webhook URLs point at private addresses (a deployment whose
    /// receivers live inside its network).
    pub fn allowing_private_webhooks(mut self, allow: bool) -> Self {
        self.allow_private_webhooks = allow;
        self
    }

    /// Returns the service reading PDFs with `pdf`.
    pub fn with_pdf_reader(mut self, pdf: Arc<dyn PdfReader>) -> Self {
        self.pdf = pdf;
        self
    }

    /// Returns the service calling `after_write` after each write that adds or removes vectors.
    pub fn with_after_write(mut self, after_write: AfterWrite) -> Self {
        self.after_write = Some(after_write);
        self
    }

    /// Returns the service marking each CreateMessages and UploadFile in
    /// `activity` while it runs (background work beside it yields).
    pub fn with_activity(mut self, activity: Arc<WriteActivity>) -> Self {
        self.activity = Some(activity);
        self
    }

    /// Stores `messages`, once per key when `once` is set.
    async fn create(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<NewMessage>,
        once: Option<&Once>,
    ) -> Result<Vec<Message>> {
        self.wrote(
            self.store
                .write_messages(workspace_id, session_id, messages, once)
                .await,
        )
    }

    /// Erases `scope` chunk by chunk (at least one) for up to the erasure budget, then
    /// returns the receipt: complete, or running with the counts so far
    /// while the `deletion` task carries it on in the background.
    async fn erase(&self, workspace_id: &str, scope: ErasureScope) -> Result<ErasureReceipt> {
        let started = std::time::Instant::now();
        let mut receipt = self.store.begin_erasure(workspace_id, &scope).await?;
        // At least one chunk, then as many as the budget allows.
        loop {
            receipt = self
                .store
                .continue_erasure(workspace_id, &receipt.id, roncho_core::store::ERASURE_CHUNK)
                .await?;
            if receipt.state != ErasureState::Running || started.elapsed() >= self.erasure_budget {
                break;
            }
        }
        self.wrote(Ok(receipt))
    }

    fn wrote<T>(&self, result: Result<T>) -> Result<T> {
        if let (Ok(_), Some(after_write)) = (&result, &self.after_write) {
            after_write();
        }
        result
    }
}

/// Returns validated metadata (or configuration), `None` when the field is unset.
fn metadata_arg(field: &str, value: Option<JsonObject>) -> Result<Option<JsonObject>> {
    let mut checked = value.map(|fields| validate::metadata(field, fields)).transpose()?;
    if field.ends_with("configuration")
        && let Some(configuration) = &mut checked
    {
        validate::custom_instructions(field, configuration)?;
        validate::configuration_switches(field, configuration)?;
    }
    Ok(checked)
}

/// Refuses to change a scope's membership through a session's peers: it
/// joins and leaves through its scope, which keeps its memory in step.
fn refuse_scope_member(field: &str, peer_id: &str) -> Result<()> {
    match roncho_core::model::scope_of_peer(peer_id) {
        Some(scope) => Err(Error::invalid(
            field,
            format!("`{peer_id}` is scope `{scope}`; add or remove sessions through the scope"),
        )),
        None => Ok(()),
    }
}

/// Returns validated session members, in id order.
fn session_peers(field: &str, peers: BTreeMap<String, SessionPeerConfig>) -> Result<SessionPeers> {
    validate::list_len(field, peers.len(), validate::MAX_SESSION_PEERS)?;
    peers
        .into_iter()
        .map(|(peer_id, config)| Ok((validate::resource_id(&format!("{field}.{peer_id}"), &peer_id)?, config)))
        .collect()
}

/// How long a webhook host's name may take to resolve.
const WEBHOOK_LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Refuses a webhook whose host name resolves to a non-public address
/// (`localhost`, an internal name, `metadata.google.internal`). A name that
/// does not resolve now is accepted: delivery must check the address it
/// connects to in any case, since what a name resolves to can change.
async fn refuse_private_names(url: &validate::WebhookUrl) -> Result<()> {
    let validate::WebhookHost::Name(host) = &url.host else {
        // A literal: checked by `validate::webhook_url`.
        return Ok(());
    };
    let lookup = tokio::net::lookup_host((host.as_str(), url.port));
    let Ok(Ok(addresses)) = tokio::time::timeout(WEBHOOK_LOOKUP_TIMEOUT, lookup).await else {
        return Ok(());
    };
    for address in addresses {
        if !validate::is_public_ip(&address.ip()) {
            return Err(Error::invalid(
                "url",
                format!(
                    "`{}` resolves to {}, a private, loopback or link-local address",
                    host,
                    address.ip()
                ),
            ));
        }
    }
    Ok(())
}

/// Counts tokens of every text off the async runtime.
async fn count_tokens(texts: Vec<String>) -> Result<(Vec<String>, Vec<i64>)> {
    tokio::task::spawn_blocking(move || {
        let counts = texts.iter().map(|text| tokens::count(text)).collect();
        (texts, counts)
    })
    .await
    .map_err(|error| Error::Internal(format!("token counting task failed: {error}")))
}

#[async_trait::async_trait]
impl IngestApi for Ingest {
    async fn get_or_create_workspace(&self, request: GetOrCreateWorkspace) -> Result<(Workspace, bool)> {
        let id = validate::resource_id("id", &request.id)?;
        let metadata = metadata_arg("metadata", request.metadata)?.unwrap_or_default();
        let configuration = metadata_arg("configuration", request.configuration)?.unwrap_or_default();
        self.store.get_or_create_workspace(&id, metadata, configuration).await
    }

    async fn update_workspace(&self, request: UpdateWorkspace) -> Result<Workspace> {
        let id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let metadata = metadata_arg("metadata", request.metadata)?;
        let configuration = metadata_arg("configuration", request.configuration)?;
        self.store.update_workspace(&id, metadata, configuration).await
    }

    async fn delete_workspace(&self, request: DeleteWorkspace) -> Result<ErasureReceipt> {
        let id = validate::reference_id("workspace_id", &request.workspace_id)?;
        if request.refuse_active_sessions {
            let condition = serde_json::Map::from_iter([("is_active".to_owned(), json!(true))]);
            let active = roncho_core::filter::parse(&roncho_core::filter::SESSION, Some(&condition))?;
            let page = roncho_core::model::PageRequest::from_wire(1, 1, false)?;
            let sessions = self.store.list_sessions(&id, &active, page).await?;
            if sessions.total > 0 {
                return Err(Error::FailedPrecondition(format!(
                    "workspace `{id}` has {} active session(s): delete them first",
                    sessions.total
                )));
            }
        }
        self.erase(&id, ErasureScope::Workspace).await
    }

    async fn get_or_create_peer(&self, request: GetOrCreatePeer) -> Result<(Peer, bool)> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let id = validate::resource_id("id", &request.id)?;
        let metadata = metadata_arg("metadata", request.metadata)?;
        let configuration = metadata_arg("configuration", request.configuration)?;
        self.store
            .get_or_create_peer(&workspace_id, &id, metadata, configuration)
            .await
    }

    async fn update_peer(&self, request: UpdatePeer) -> Result<Peer> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let id = validate::resource_id("peer_id", &request.peer_id)?;
        let metadata = metadata_arg("metadata", request.metadata)?;
        let configuration = metadata_arg("configuration", request.configuration)?;
        let (peer, _) = self
            .store
            .get_or_create_peer(&workspace_id, &id, metadata, configuration)
            .await?;
        Ok(peer)
    }

    async fn delete_peer(&self, request: DeletePeer) -> Result<ErasureReceipt> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let peer_id = validate::reference_id("peer_id", &request.peer_id)?;
        self.erase(&workspace_id, ErasureScope::Peer { peer_id }).await
    }

    async fn get_or_create_session(&self, request: GetOrCreateSession) -> Result<(Session, bool)> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let id = validate::resource_id("id", &request.id)?;
        let metadata = metadata_arg("metadata", request.metadata)?;
        let configuration = metadata_arg("configuration", request.configuration)?;
        let peers = session_peers("peers", request.peers)?;
        let scopes = validate::id_list("scopes", &request.scopes, validate::MAX_ID_LIST)?;
        let scopes = scopes
            .iter()
            .map(|scope| validate::scope_id("scopes", scope))
            .collect::<Result<Vec<_>>>()?;
        let created = self
            .store
            .get_or_create_session(&workspace_id, &id, metadata, configuration, peers)
            .await?;
        for scope in &scopes {
            self.store.get_or_create_scope(&workspace_id, scope, None).await?;
            self.store
                .add_scope_sessions(&workspace_id, scope, std::slice::from_ref(&id))
                .await?;
        }
        Ok(created)
    }

    async fn update_session(&self, request: UpdateSession) -> Result<Session> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let id = validate::resource_id("session_id", &request.session_id)?;
        let metadata = metadata_arg("metadata", request.metadata)?;
        let configuration = metadata_arg("configuration", request.configuration)?;
        let (session, _) = self
            .store
            .get_or_create_session(&workspace_id, &id, metadata, configuration, Vec::new())
            .await?;
        Ok(session)
    }

    async fn delete_session(&self, request: DeleteSession) -> Result<ErasureReceipt> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        self.erase(&workspace_id, ErasureScope::Session { session_id }).await
    }

    async fn clone_session(&self, request: CloneSession) -> Result<Session> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let id = validate::reference_id("session_id", &request.session_id)?;
        let cutoff = request
            .message_id
            .as_deref()
            .map(|id| validate::reference_id("message_id", id))
            .transpose()?;
        self.wrote(self.store.clone_session(&workspace_id, &id, cutoff.as_deref()).await)
    }

    async fn add_session_peers(&self, request: ChangeSessionPeers) -> Result<Session> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let peers = session_peers("peers", request.peers)?;
        self.store.add_session_peers(&workspace_id, &session_id, peers).await
    }

    async fn set_session_peers(&self, request: ChangeSessionPeers) -> Result<Session> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let peers = session_peers("peers", request.peers)?;
        self.store.set_session_peers(&workspace_id, &session_id, peers).await
    }

    async fn remove_session_peers(&self, request: RemoveSessionPeers) -> Result<Session> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let peer_ids = validate::id_list("peer_ids", &request.peer_ids, validate::MAX_ID_LIST)?;
        for peer_id in &peer_ids {
            refuse_scope_member("peer_ids", peer_id)?;
        }
        self.store
            .remove_session_peers(&workspace_id, &session_id, &peer_ids)
            .await
    }

    async fn set_session_peer_config(&self, request: SetSessionPeerConfig) -> Result<()> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let peer_id = validate::reference_id("peer_id", &request.peer_id)?;
        refuse_scope_member("peer_id", &peer_id)?;
        self.store
            .set_session_peer_config(&workspace_id, &session_id, &peer_id, request.config)
            .await
    }

    async fn create_messages(&self, request: CreateMessages) -> Result<Vec<Message>> {
        let _writing = self.activity.as_deref().map(WriteActivity::begin);
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::resource_id("session_id", &request.session_id)?;
        validate::batch_len("messages", request.messages.len())?;
        let once = self.once("CreateMessages", request.idempotency_key.as_deref(), || {
            request
                .messages
                .iter()
                .fold(Fingerprint::new().text(&session_id), |fingerprint, message| {
                    fingerprint
                        .text(&message.peer_id)
                        .text(&message.content)
                        .json(&optional_json(&message.metadata))
                        .json(&optional_json(&message.configuration))
                        .number(message.created_at)
                })
        })?;
        let mut drafts = Vec::with_capacity(request.messages.len());
        let mut contents = Vec::with_capacity(request.messages.len());
        for (index, message) in request.messages.into_iter().enumerate() {
            // The message's path is written into an error only: not for
            // each field of each valid message on every write.
            let at = |error: Error| error.within(|| format!("messages[{index}]"));
            let peer_id = validate::resource_id("peer_id", &message.peer_id).map_err(at)?;
            contents.push(validate::message_content("content", &message.content).map_err(at)?);
            let metadata = metadata_arg("metadata", message.metadata)
                .map_err(at)?
                .unwrap_or_default();
            let configuration = metadata_arg("configuration", message.configuration)
                .map_err(at)?
                .unwrap_or_default();
            drafts.push((peer_id, metadata, configuration, message.created_at));
        }
        let (contents, counts) = count_tokens(contents).await?;
        let messages = drafts
            .into_iter()
            .zip(contents.into_iter().zip(counts))
            .map(
                |((peer_id, metadata, configuration, created_at), (content, token_count))| NewMessage {
                    peer_id,
                    content,
                    metadata,
                    configuration,
                    created_at,
                    token_count,
                },
            )
            .collect();
        self.create(&workspace_id, &session_id, messages, once.as_ref()).await
    }

    async fn upload_file(&self, request: UploadFile) -> Result<Vec<Message>> {
        let _writing = self.activity.as_deref().map(WriteActivity::begin);
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::resource_id("session_id", &request.session_id)?;
        let peer_id = validate::resource_id("peer_id", &request.peer_id)?;
        let metadata = metadata_arg("metadata", request.metadata)?.unwrap_or_default();
        let configuration = metadata_arg("configuration", request.configuration)?.unwrap_or_default();
        let filename = validate::strip_nul(&request.filename);
        let once = self.once("UploadFile", request.idempotency_key.as_deref(), || {
            Fingerprint::new()
                .text(&session_id)
                .text(&peer_id)
                .bytes(&request.file)
                .text(&filename)
                .text(&request.content_type)
                .json(&serde_json::Value::Object(metadata.clone()))
                .json(&serde_json::Value::Object(configuration.clone()))
                .number(request.created_at)
        })?;
        // A repeat skips the parsing: the first call's messages are its answer.
        if let Some(once) = &once
            && let Some(messages) = self.store.replayed_messages(&workspace_id, &session_id, once).await?
        {
            return Ok(messages);
        }
        let content_type = request.content_type;
        let file = request.file;
        let file_size = file.len();
        files::check_file_size(&file)?;
        let (text, file) = if files::is_pdf(&content_type) {
            (Some(self.pdf.text(file).await?), Vec::new())
        } else {
            (None, file)
        };
        // Decoding, chunking and tokenising 5 MiB are CPU work: keep them off the runtime.
        let (chunks, counts, content_type) = tokio::task::spawn_blocking(move || {
            let text = match text {
                Some(text) => files::checked_text(&text)?,
                None => files::extract_text(&content_type, &file)?,
            };
            let chunks = files::chunk_text(&text, validate::MAX_MESSAGE_CHARS);
            let counts: Vec<i64> = chunks.iter().map(|chunk| tokens::count(&chunk.content)).collect();
            Ok::<_, Error>((chunks, counts, content_type))
        })
        .await
        .map_err(|error| Error::Internal(format!("file processing task failed: {error}")))??;
        let file_id = roncho_core::model::new_public_id();
        let messages = chunks
            .into_iter()
            .zip(counts)
            .map(|(chunk, token_count)| {
                let mut chunk_metadata = metadata.clone();
                chunk_metadata.insert(
                    "file".to_owned(),
                    json!({
                        "file_id": file_id,
                        "filename": filename,
                        "content_type": content_type,
                        "original_file_size": file_size,
                        "chunk_index": chunk.chunk_index,
                        "total_chunks": chunk.total_chunks,
                        "chunk_character_range": [chunk.start, chunk.end],
                    }),
                );
                NewMessage {
                    peer_id: peer_id.clone(),
                    content: chunk.content,
                    metadata: chunk_metadata,
                    configuration: configuration.clone(),
                    created_at: request.created_at,
                    token_count,
                }
            })
            .collect();
        self.create(&workspace_id, &session_id, messages, once.as_ref()).await
    }

    async fn update_message(&self, request: UpdateMessage) -> Result<Message> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let id = validate::reference_id("message_id", &request.message_id)?;
        let metadata = metadata_arg("metadata", request.metadata)?.unwrap_or_default();
        self.store
            .update_message(&workspace_id, &session_id, &id, metadata)
            .await
    }

    async fn delete_message(&self, request: DeleteMessage) -> Result<ErasureReceipt> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let id = validate::reference_id("message_id", &request.message_id)?;
        self.wrote(self.store.delete_message(&workspace_id, &session_id, &id).await)
    }

    async fn create_conclusions(&self, request: CreateConclusions) -> Result<Vec<Conclusion>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        validate::batch_len("conclusions", request.conclusions.len())?;
        let sources = sources::checked(&request.conclusions)?;
        let once = self.once("CreateConclusions", request.idempotency_key.as_deref(), || {
            // A batch that names sources digests as one of its own kind,
            // every conclusion with its count of them; one that names none
            // as before sources existed, so earlier keys still replay.
            let named = sources.iter().any(|ids| !ids.is_empty());
            let start = match named {
                true => Fingerprint::new().text("source_message_ids"),
                false => Fingerprint::new(),
            };
            request
                .conclusions
                .iter()
                .zip(&sources)
                .fold(start, |fingerprint, (conclusion, ids)| {
                    let fingerprint = fingerprint
                        .text(&conclusion.content)
                        .text(&conclusion.observer_id)
                        .text(&conclusion.observed_id)
                        .optional(conclusion.session_id.as_deref());
                    match named {
                        true => ids
                            .iter()
                            .fold(fingerprint.number(Some(ids.len() as i64)), |fingerprint, id| {
                                fingerprint.text(id)
                            }),
                        false => fingerprint,
                    }
                })
        })?;
        // Token counting of up to 100 long texts is CPU work: off the runtime.
        let conclusions = tokio::task::spawn_blocking(move || {
            request
                .conclusions
                .into_iter()
                .zip(sources)
                .enumerate()
                .map(|(index, (conclusion, source_ids))| {
                    let field = |name: &str| format!("conclusions[{index}].{name}");
                    if let Some(scope) = roncho_core::model::scope_of_peer(&conclusion.observed_id) {
                        return Err(Error::invalid(
                            field("observed_id"),
                            format!(
                                "`{}` is scope `{scope}`: a scope is never observed",
                                conclusion.observed_id
                            ),
                        ));
                    }
                    Ok(NewConclusion {
                        observer_id: validate::reference_id(&field("observer_id"), &conclusion.observer_id)?,
                        observed_id: validate::reference_id(&field("observed_id"), &conclusion.observed_id)?,
                        session_id: conclusion
                            .session_id
                            .as_deref()
                            .map(|id| validate::reference_id(&field("session_id"), id))
                            .transpose()?,
                        // Conclusions written through the API are explicit, as in Honcho.
                        level: "explicit".to_owned(),
                        content: validate::conclusion_content(&field("content"), &conclusion.content)?,
                        premises: Vec::new(),
                        source_ids,
                        metadata: JsonObject::new(),
                    })
                })
                .collect::<Result<Vec<_>>>()
        })
        .await
        .map_err(|error| Error::Internal(format!("validation task failed: {error}")))??;
        self.wrote(
            self.store
                .write_conclusions(&workspace_id, conclusions, once.as_ref())
                .await,
        )
    }

    async fn delete_conclusion(&self, request: DeleteConclusion) -> Result<()> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let id = validate::reference_id("conclusion_id", &request.conclusion_id)?;
        self.wrote(self.store.delete_conclusion(&workspace_id, &id).await)
    }

    async fn set_peer_card(&self, request: SetPeerCard) -> Result<Option<Vec<String>>> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let observer = validate::resource_id("peer_id", &request.peer_id)?;
        let observed = match &request.target {
            Some(target) => validate::resource_id("target", target)?,
            None => observer.clone(),
        };
        let card = validate::peer_card("peer_card", &request.peer_card)?;
        self.store
            .set_peer_card(&workspace_id, &observer, &observed, card.clone())
            .await?;
        Ok(Some(card))
    }

    async fn create_webhook(&self, request: CreateWebhook) -> Result<(WebhookEndpoint, bool)> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let checked = validate::webhook_url("url", &request.url, self.allow_private_webhooks)?;
        if !self.allow_private_webhooks {
            refuse_private_names(&checked).await?;
        }
        // Stored as given (Honcho echoes it); delivery parses it again as checked here.
        self.store.create_webhook(&workspace_id, &request.url).await
    }

    async fn delete_webhook(&self, request: DeleteWebhook) -> Result<()> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let id = validate::reference_id("endpoint_id", &request.endpoint_id)?;
        self.store.delete_webhook(&workspace_id, &id).await
    }

    async fn test_webhook(&self, request: TestWebhook) -> Result<u64> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        self.wrote(self.store.queue_test_webhook(&workspace_id).await)
    }

    async fn get_or_create_scope(&self, request: GetOrCreateScope) -> Result<(Scope, bool)> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let id = validate::scope_id("id", &request.id)?;
        let metadata = metadata_arg("metadata", request.metadata)?;
        self.store.get_or_create_scope(&workspace_id, &id, metadata).await
    }

    async fn add_scope_sessions(&self, request: AddScopeSessions) -> Result<()> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let scope_id = validate::reference_id("scope_id", &request.scope_id)?;
        if request.session_ids.is_empty() {
            return Err(Error::invalid("session_ids", "must name at least one session"));
        }
        let session_ids = validate::id_list("session_ids", &request.session_ids, validate::MAX_ID_LIST)?;
        self.wrote(
            self.store
                .add_scope_sessions(&workspace_id, &scope_id, &session_ids)
                .await,
        )
    }

    async fn remove_scope_session(&self, request: RemoveScopeSession) -> Result<ErasureReceipt> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let scope_id = validate::reference_id("scope_id", &request.scope_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        self.erase(&workspace_id, ErasureScope::ScopeSession { scope_id, session_id })
            .await
    }

    async fn import_records(&self, request: ImportRecords) -> Result<roncho_core::export::Counts> {
        let _writing = self.activity.as_deref().map(WriteActivity::begin);
        self.import(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn webhooks_naming_hosts_that_resolve_inside_are_refused() {
        assert!(
            validate::webhook_url("url", "http://localhost:8080/hook", false).is_err(),
            "localhost is loopback by name"
        );
        // Past the name rule, its addresses are what the lookup refuses.
        let checked = validate::webhook_url("url", "http://localhost:8080/hook", true).unwrap();
        let error = refuse_private_names(&checked).await.unwrap_err();
        assert!(
            matches!(&error, Error::InvalidArgument { field, reason }
                if field == "url" && (reason.contains("127.0.0.1") || reason.contains("::1"))),
            "{error}"
        );
        let unresolvable = validate::webhook_url("url", "https://no-such-host.invalid/hook", false).unwrap();
        assert!(
            refuse_private_names(&unresolvable).await.is_ok(),
            "checked again at delivery"
        );
    }

    #[test]
    fn session_peer_ids_are_validated_in_id_order() {
        let peers = [
            ("b".to_owned(), SessionPeerConfig::default()),
            ("a".to_owned(), SessionPeerConfig::default()),
        ];
        let validated = session_peers("peers", peers.into_iter().collect()).unwrap();
        assert_eq!(
            validated.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let bad = [("a b".to_owned(), SessionPeerConfig::default())];
        let error = session_peers("peers", bad.into_iter().collect()).unwrap_err();
        assert!(matches!(error, Error::InvalidArgument { field, .. } if field == "peers.a b"));
    }

    #[test]
    fn a_session_peer_map_over_the_bound_is_refused_naming_the_limit() {
        let peers = (0..=validate::MAX_SESSION_PEERS)
            .map(|index| (format!("p{index}"), SessionPeerConfig::default()))
            .collect();
        let error = session_peers("peers", peers).unwrap_err();
        assert!(
            matches!(&error, Error::InvalidArgument { field, reason } if field == "peers" && reason.contains(&validate::MAX_SESSION_PEERS.to_string())),
            "{error}"
        );
    }
}
