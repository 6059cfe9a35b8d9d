//! The authorization table: what each call needs of the caller's key,
//! decided here once for every wire (gRPC, REST, and MCP through REST).
//!
//! Every request names its target in [`Need`]s; a key passes when it meets
//! all of them. The operator's admin key meets every need. A scoped key
//! never leaves its workspace, and then by its narrowest claim (honcho-v3 §2.0):
//!
//! | need | workspace key | peer key `p` | session key `s` |
//! |---|---|---|---|
//! | `Admin` | no | no | no |
//! | `AnyAdmin`, `AdminOf(x)` | no | no | no |
//! | `Workspace` | yes | no | no |
//! | `Peer(x)` | yes | x = p | no |
//! | `Session(x)` | yes | no | x = s |
//! | `SessionRead(x)` | yes | p an active member of x | x = s |
//! | `ActsAs(x)` | yes | x = p | yes |
//!
//! On a multi-tenant server every key but the operator's names its tenant,
//! and every workspace a call names must be one its tenant holds. A call
//! that may create the workspace ([`Need::Takes`]) takes one that no tenant
//! holds and that does not exist, once it is let through, for good; no
//! other call takes anything, and the operator's creating calls are
//! refused an id a tenant holds with no workspace made. Within its
//! tenant's workspaces a tenant's admin key meets every need but `Admin`.
//!
//! A denial names the key and what it lacks, never whether the target
//! exists or who holds it: what the key alone decides is decided before
//! anything is read, then the tenant, then membership (looked up only for
//! peer keys; a missing session reads as "not a member").

use std::collections::BTreeSet;
use std::sync::Arc;

use roncho_core::store::{Creator, Holder, Tenants, Workspaces};
use roncho_core::{Caller, Error, Result};

use crate::rate::{Rate, RateClass};

roncho_core::store_view! {
    /// What authorization reads: memberships and which tenant holds a workspace.
    pub trait GateStore: Workspaces, Tenants
}

/// What a call needs of the caller's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need<'a> {
    /// The operator's admin key.
    Admin,
    /// An admin key: the operator's, or a tenant's, to which the call is
    /// confined (see [`Authorize::confine`]).
    AnyAdmin,
    /// An admin key that reaches the workspace: the operator's, or the
    /// admin key of the tenant that holds it.
    AdminOf(&'a str),
    /// The whole workspace.
    Workspace(&'a str),
    /// A peer's own memory and settings: `(workspace, peer)`.
    Peer(&'a str, &'a str),
    /// A session's writes: `(workspace, session)`.
    Session(&'a str, &'a str),
    /// A session's reads, open to its members' peer keys: `(workspace, session)`.
    SessionRead(&'a str, &'a str),
    /// Acting as (observing from) a peer: `(workspace, peer)`; only peer keys are held to it.
    ActsAs(&'a str, &'a str),
    /// The call may create the workspace: on a multi-tenant server, the
    /// caller's tenant takes it when no tenant holds it and it does not
    /// exist. It asks nothing more of the key than its other needs.
    Takes(&'a str),
}

impl<'a> Need<'a> {
    fn workspace(self) -> Option<&'a str> {
        match self {
            Need::Admin | Need::AnyAdmin => None,
            Need::AdminOf(workspace)
            | Need::Takes(workspace)
            | Need::Workspace(workspace)
            | Need::Peer(workspace, _)
            | Need::Session(workspace, _)
            | Need::SessionRead(workspace, _)
            | Need::ActsAs(workspace, _) => Some(workspace),
        }
    }
}

/// A request that says what it needs of the caller's key, and what it costs.
pub trait Authorize {
    /// Returns the needs; a malformed request may fail here (`INVALID_ARGUMENT`).
    fn needs(&self) -> Result<Vec<Need<'_>>>;

    /// Returns the workspace buckets the call draws on, when it is metered.
    fn rates(&self) -> Vec<Rate<'_>> {
        Vec::new()
    }

    /// Confines an authorized request to what `tenant`'s key reaches: the
    /// tenant's workspaces in a listing, its tenant on a key it mints. A
    /// request that names its workspace needs nothing more.
    fn confine(&mut self, _tenant: &str) -> Result<()> {
        Ok(())
    }
}

/// Decides whether a caller may make a request.
#[derive(Clone)]
pub struct Authorizer {
    store: Arc<dyn GateStore>,
    /// Keys carry tenants: the operator's creating calls are checked too.
    multi_tenant: bool,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Authorizer").finish_non_exhaustive()
    }
}

pub use roncho_core::store::OPERATOR;

fn denied(caller: &Caller, what: String) -> Error {
    Error::PermissionDenied(format!("a {caller} does not reach {what}"))
}

impl Authorizer {
    /// Returns the authorizer; `store` answers which sessions a peer
    /// belongs to and which tenant holds a workspace.
    pub fn new(store: Arc<dyn GateStore>) -> Self {
        Self {
            store,
            multi_tenant: false,
        }
    }

    /// On a multi-tenant server (see [`Self::check`]).
    pub fn multi_tenant(mut self, on: bool) -> Self {
        self.multi_tenant = on;
        self
    }

    /// Whom `caller`'s calls make workspaces for, checked again when one
    /// is made (see [`roncho_core::store::creating_as`]): its tenant, or
    /// the operator, on a multi-tenant server; no one elsewhere.
    pub fn creator(&self, caller: &Caller) -> Option<Creator> {
        self.multi_tenant
            .then(|| Creator::Caller(caller.tenant().unwrap_or(OPERATOR).to_owned()))
    }

    /// Returns `PERMISSION_DENIED` unless `caller` meets every need of `request`.
    pub async fn check(&self, caller: &Caller, request: &(dyn Authorize + Sync)) -> Result<()> {
        let needs = request.needs()?;
        if caller.is_admin() {
            return self.check_operator(&needs).await;
        }
        if needs.is_empty() {
            return Err(Error::Internal("a request without authorization needs".into()));
        }
        // What the key alone decides, before anything is read.
        for need in &needs {
            Self::check_reach(caller, *need)?;
        }
        // Then the tenant, reading only: a workspace of another tenant, or
        // the operator's, is refused before anything of it is looked up.
        let mut to_take = Vec::new();
        if let Some(tenant) = caller.tenant() {
            let workspaces: BTreeSet<&str> = needs.iter().filter_map(|need| need.workspace()).collect();
            for workspace in workspaces {
                let takes = needs.contains(&Need::Takes(workspace));
                if self.check_tenant(caller, tenant, workspace, takes).await? {
                    to_take.push(workspace);
                }
            }
        }
        for need in needs {
            self.check_need(caller, need).await?;
        }
        // Only a call let through takes a free id. It keeps it whatever the
        // call then does: an id is given back by nothing (a tenant's call
        // still running for it could otherwise land in a workspace someone
        // else then made under it), and the operator's own calls never
        // create a workspace under an id a tenant holds (see
        // `check_operator`).
        if let Some(tenant) = caller.tenant() {
            for workspace in to_take {
                if self.store.claim_workspace(workspace, tenant).await?.as_deref() != Some(tenant) {
                    return Err(denied(caller, format!("workspace `{workspace}`")));
                }
            }
        }
        Ok(())
    }

    /// On a multi-tenant server, the operator's calls that may create a
    /// workspace take a free id for the operator, at once (so a tenant's
    /// call racing it on the same id is refused it), and are refused an id
    /// a tenant holds while no workspace of it exists: what they made would
    /// be that tenant's. The operator gives the id to someone first
    /// (`AssignWorkspace`).
    async fn check_operator(&self, needs: &[Need<'_>]) -> Result<()> {
        if !self.multi_tenant {
            return Ok(());
        }
        for need in needs {
            let Need::Takes(workspace) = need else { continue };
            if roncho_core::validate::resource_id("workspace_id", workspace).is_err() {
                continue;
            }
            let tenant = match self.store.workspace_holder(workspace).await? {
                Holder::Operator => continue,
                Holder::Tenant(tenant) => tenant,
                // Taken at once: of the operator and a tenant naming it
                // together, one holds it.
                Holder::Free => match self.store.claim_workspace(workspace, OPERATOR).await? {
                    Some(tenant) if tenant != OPERATOR => tenant,
                    _ => continue,
                },
            };
            if !self.store.workspace_exists(workspace).await? {
                return Err(Error::FailedPrecondition(format!(
                    "workspace id `{workspace}` is held by tenant `{tenant}` and has no workspace: what this call \
                     made would be that tenant's; give the id to its owner first (AssignWorkspace)"
                )));
            }
        }
        Ok(())
    }

    /// Admin needs, and the workspace a scoped key is bound to.
    fn check_reach(caller: &Caller, need: Need<'_>) -> Result<()> {
        match (caller, need) {
            (Caller::Admin, _) => Ok(()),
            (_, Need::Admin) => Err(denied(caller, "operator operations".into())),
            (Caller::TenantAdmin { .. }, _) => Ok(()),
            (_, Need::AnyAdmin | Need::AdminOf(_)) => Err(denied(caller, "admin operations".into())),
            (_, need) => match need.workspace() {
                Some(workspace) if caller.workspace() != Some(workspace) => {
                    Err(denied(caller, format!("workspace `{workspace}`")))
                }
                _ => Ok(()),
            },
        }
    }

    /// The workspace is one `tenant` holds (`false`), or, for a call that
    /// `takes` it, one free to take once the call is let through (`true`).
    /// Refused in the same words as a workspace outside a key's scope,
    /// whoever holds it.
    async fn check_tenant(&self, caller: &Caller, tenant: &str, workspace: &str, takes: bool) -> Result<bool> {
        let refused = || denied(caller, format!("workspace `{workspace}`"));
        if roncho_core::validate::resource_id("workspace_id", workspace).is_err() {
            return Err(refused());
        }
        match self.store.workspace_holder(workspace).await? {
            Holder::Tenant(holder) if holder == tenant => Ok(false),
            Holder::Free if takes => Ok(true),
            _ => Err(refused()),
        }
    }

    async fn check_need(&self, caller: &Caller, need: Need<'_>) -> Result<()> {
        let denied = |what: String| Err(denied(caller, what));
        let Some(workspace) = need.workspace() else {
            return match caller {
                Caller::Admin | Caller::TenantAdmin { .. } => Ok(()),
                _ => denied("admin operations".into()),
            };
        };
        match (caller, need) {
            (Caller::Admin | Caller::TenantAdmin { .. }, _) | (_, Need::Takes(_)) => Ok(()),
            (_, Need::AdminOf(_)) => denied("admin operations".into()),
            (Caller::Workspace { .. }, _) => Ok(()),
            (Caller::Peer { peer, .. }, Need::Peer(_, target) | Need::ActsAs(_, target)) => {
                if peer == target {
                    Ok(())
                } else {
                    denied(format!("peer `{target}`"))
                }
            }
            (Caller::Peer { peer, .. }, Need::SessionRead(_, session)) => {
                match self.store.get_session_peer_config(workspace, session, peer).await {
                    Ok(_) => Ok(()),
                    Err(Error::NotFound { .. }) => denied(format!("session `{session}` (not a member)")),
                    Err(error) => Err(error),
                }
            }
            (Caller::Session { session, .. }, Need::Session(_, target) | Need::SessionRead(_, target)) => {
                if session == target {
                    Ok(())
                } else {
                    denied(format!("session `{target}`"))
                }
            }
            (Caller::Session { .. }, Need::ActsAs(..)) => Ok(()),
            (_, Need::Workspace(_)) => denied(format!("the whole of workspace `{workspace}`")),
            (_, Need::Peer(_, target)) => denied(format!("peer `{target}`")),
            (_, Need::Session(_, target)) => denied(format!("writes to session `{target}`")),
            (_, Need::Admin | Need::AnyAdmin) => denied("this operation".into()),
        }
    }
}

/// `need`, and the whole workspace when the call reads scopes (Honcho's
/// `scope` options take a workspace key).
fn scoped<'a>(workspace: &'a str, scopes: &[String], need: Need<'a>) -> Vec<Need<'a>> {
    if scopes.is_empty() {
        vec![need]
    } else {
        vec![need, Need::Workspace(workspace)]
    }
}

/// Requests that need one thing named by their fields.
macro_rules! needs {
    ($($request:path => |$r:ident| $needs:expr;)*) => {$(
        impl Authorize for $request {
            fn needs(&self) -> Result<Vec<Need<'_>>> {
                let $r = self;
                Ok($needs)
            }
        }
    )*};
}

use roncho_dialectic::Chat;
use roncho_ingest as ingest;
use roncho_recall as recall;
use serde_json::Value;

needs! {
    ingest::GetOrCreateWorkspace => |r| vec![Need::Workspace(&r.id), Need::Takes(&r.id)];
    ingest::UpdateWorkspace => |r| vec![Need::Workspace(&r.workspace_id), Need::Takes(&r.workspace_id)];
    ingest::GetOrCreatePeer => |r| vec![Need::Peer(&r.workspace_id, &r.id), Need::Takes(&r.workspace_id)];
    ingest::UpdatePeer => |r| vec![Need::Peer(&r.workspace_id, &r.peer_id), Need::Takes(&r.workspace_id)];
    ingest::GetOrCreateSession => |r| vec![Need::Session(&r.workspace_id, &r.id), Need::Takes(&r.workspace_id)];
    ingest::UpdateSession => |r| vec![Need::Session(&r.workspace_id, &r.session_id), Need::Takes(&r.workspace_id)];
    ingest::ChangeSessionPeers => |r| vec![Need::Session(&r.workspace_id, &r.session_id), Need::Takes(&r.workspace_id)];
    ingest::RemoveSessionPeers => |r| vec![Need::Session(&r.workspace_id, &r.session_id)];
    ingest::SetSessionPeerConfig => |r| vec![Need::Session(&r.workspace_id, &r.session_id)];
    ingest::UpdateMessage => |r| vec![Need::Session(&r.workspace_id, &r.session_id)];
    ingest::CreateConclusions => |r| vec![Need::Workspace(&r.workspace_id)];
    ingest::DeleteConclusion => |r| vec![Need::Workspace(&r.workspace_id)];
    ingest::SetPeerCard => |r| vec![Need::Peer(&r.workspace_id, &r.peer_id), Need::Takes(&r.workspace_id)];
    ingest::DeleteWebhook => |r| vec![Need::Workspace(&r.workspace_id)];
    recall::GetErasureReceipt => |r| vec![Need::Workspace(&r.workspace_id)];
    recall::ListPeers => |r| vec![Need::Workspace(&r.workspace_id)];
    recall::ListSessions => |r| vec![Need::Workspace(&r.workspace_id)];
    recall::ListPeerSessions => |r| vec![Need::Peer(&r.workspace_id, &r.peer_id)];
    recall::ListSessionPeers => |r| vec![Need::SessionRead(&r.workspace_id, &r.session_id)];
    recall::GetSessionPeerConfig => |r| vec![
        Need::SessionRead(&r.workspace_id, &r.session_id),
        Need::ActsAs(&r.workspace_id, &r.peer_id),
    ];
    recall::ListMessages => |r| vec![Need::SessionRead(&r.workspace_id, &r.session_id)];
    recall::GetMessage => |r| vec![Need::SessionRead(&r.workspace_id, &r.session_id)];
    recall::GetSessionSummaries => |r| vec![Need::SessionRead(&r.workspace_id, &r.session_id)];
    recall::GetPeerContext => |r| vec![Need::Peer(&r.workspace_id, &r.peer_id)];
    // A scope's memory is the workspace's to read.
    recall::GetRepresentation => |r| scoped(&r.workspace_id, &r.scopes, Need::Peer(&r.workspace_id, &r.peer_id));
    recall::GetPeerCard => |r| vec![Need::Peer(&r.workspace_id, &r.peer_id)];
    recall::ListConclusions => |r| vec![Need::Workspace(&r.workspace_id)];
    recall::GetConclusion => |r| vec![Need::Workspace(&r.workspace_id)];
    recall::QueryConclusions => |r| vec![Need::Workspace(&r.workspace_id)];
    recall::ListWebhooks => |r| vec![Need::Workspace(&r.workspace_id)];
    ingest::GetOrCreateScope => |r| vec![Need::Workspace(&r.workspace_id), Need::Takes(&r.workspace_id)];
    recall::ListScopes => |r| vec![Need::Workspace(&r.workspace_id)];
    recall::GetScope => |r| vec![Need::Workspace(&r.workspace_id)];
    // A peer's or a session's part of an export holds other peers' memory
    // too (conclusions about them, their messages): the workspace's to read.
    recall::ExportWorkspace => |r| vec![Need::Workspace(&r.workspace_id)];
    // A trace names what an answer read about whom: the workspace's to read.
    roncho_dialectic::GetReasoningTrace => |r| vec![Need::Workspace(&r.workspace_id)];
    roncho_deriver::GetQueueStatus => |r| vec![Need::Workspace(&r.workspace_id)];
    roncho_deriver::RetryFailedWork => |r| vec![Need::AdminOf(&r.workspace_id)];
}

/// Requests that draw on their workspace's buckets: their needs and their
/// costs, by class.
macro_rules! metered {
    ($($request:path => |$r:ident| $needs:expr, [$($class:ident: $cost:expr),+];)*) => {$(
        impl Authorize for $request {
            fn needs(&self) -> Result<Vec<Need<'_>>> {
                let $r = self;
                Ok($needs)
            }

            fn rates(&self) -> Vec<Rate<'_>> {
                let $r = self;
                vec![$(Rate {
                    class: RateClass::$class,
                    workspace: &$r.workspace_id,
                    cost: $cost,
                }),+]
            }
        }
    )*};
}

/// The messages an upload may become, charged before it is read: its size
/// in message-sized chunks, or for a PDF (whose text can be far larger than
/// the file) as many as any upload may become.
fn upload_messages(upload: &ingest::UploadFile) -> u32 {
    use roncho_core::files::MAX_FILE_TEXT_CHARS;
    use roncho_core::validate::MAX_MESSAGE_CHARS;
    let chars = if roncho_core::files::is_pdf(&upload.content_type) {
        MAX_FILE_TEXT_CHARS
    } else {
        upload.file.len().min(MAX_FILE_TEXT_CHARS)
    };
    u32::try_from(chars.div_ceil(MAX_MESSAGE_CHARS).max(1)).unwrap_or(u32::MAX)
}

metered! {
    ingest::CreateMessages => |r| vec![Need::Session(&r.workspace_id, &r.session_id), Need::Takes(&r.workspace_id)],
        [Messages: u32::try_from(r.messages.len()).unwrap_or(u32::MAX)];
    ingest::UploadFile => |r| vec![Need::Session(&r.workspace_id, &r.session_id), Need::Takes(&r.workspace_id)],
        [Uploads: 1, Messages: upload_messages(r)];
    ingest::CloneSession => |r| vec![Need::Session(&r.workspace_id, &r.session_id)], [Clones: 1];
    roncho_dreamer::ScheduleDream => |r| vec![Need::Workspace(&r.workspace_id)], [Dreams: 1];
    // Calls that reach out to the network, or leave work behind them.
    ingest::TestWebhook => |r| vec![Need::Workspace(&r.workspace_id)], [Webhooks: 1];
    ingest::CreateWebhook => |r| vec![Need::Workspace(&r.workspace_id), Need::Takes(&r.workspace_id)], [Webhooks: 1];
    ingest::DeleteWorkspace => |r| vec![Need::Workspace(&r.workspace_id)], [Jobs: 1];
    ingest::DeletePeer => |r| vec![Need::Workspace(&r.workspace_id)], [Jobs: 1];
    ingest::DeleteSession => |r| vec![Need::Session(&r.workspace_id, &r.session_id)], [Jobs: 1];
    ingest::DeleteMessage => |r| vec![Need::Session(&r.workspace_id, &r.session_id)], [Jobs: 1];
    ingest::AddScopeSessions => |r| vec![Need::Workspace(&r.workspace_id)],
        [Jobs: u32::try_from(r.session_ids.len().max(1)).unwrap_or(u32::MAX)];
    ingest::RemoveScopeSession => |r| vec![Need::Workspace(&r.workspace_id)], [Jobs: 1];
    // Every record may be a message: an import draws on the bucket writes do.
    ingest::ImportRecords => |r| vec![Need::Workspace(&r.workspace_id), Need::Takes(&r.workspace_id)],
        [Messages: u32::try_from(r.records.len().max(1)).unwrap_or(u32::MAX)];
}

impl Authorize for recall::SearchMessages {
    /// A session's search is a session read; a peer's, that peer's; else the workspace's.
    fn needs(&self) -> Result<Vec<Need<'_>>> {
        let workspace = self.workspace_id.as_str();
        let mut needs = vec![match (&self.session_id, &self.peer_id) {
            (Some(session), _) => Need::SessionRead(workspace, session),
            (None, Some(peer)) => Need::Peer(workspace, peer),
            (None, None) => Need::Workspace(workspace),
        }];
        if let Some(perspective) = self.peer_perspective()? {
            needs.push(Need::ActsAs(workspace, perspective));
        }
        if !self.scopes.is_empty() {
            needs.push(Need::Workspace(workspace));
        }
        Ok(needs)
    }
}

impl Authorize for recall::GetSessionContext {
    /// A session read; with a target, the observer's memory too: only the
    /// listed sessions' part of it (each a session read), or, unlimited, the
    /// observer's whole memory (a peer need).
    fn needs(&self) -> Result<Vec<Need<'_>>> {
        let workspace = self.workspace_id.as_str();
        let mut needs = vec![Need::SessionRead(workspace, &self.session_id)];
        if self.scope.is_some() {
            // A scope's memory is the workspace's to read.
            needs.push(Need::Workspace(workspace));
        } else if let Some(observer) = self.observer() {
            match self.memory_sessions() {
                Some(sessions) => {
                    needs.push(Need::ActsAs(workspace, observer));
                    needs.extend(
                        sessions
                            .into_iter()
                            .map(|session| Need::SessionRead(workspace, session)),
                    );
                }
                None => needs.push(Need::Peer(workspace, observer)),
            }
        }
        Ok(needs)
    }
}

impl Authorize for Chat {
    fn rates(&self) -> Vec<Rate<'_>> {
        vec![Rate {
            class: RateClass::Chat,
            workspace: &self.workspace_id,
            cost: 1,
        }]
    }

    /// The observer's own memory, and every session it names (as a member,
    /// for peer keys); a workspace chat (no peer) reads every peer's: the workspace.
    fn needs(&self) -> Result<Vec<Need<'_>>> {
        let workspace = self.workspace_id.as_str();
        let whose = if self.peer_id.is_empty() {
            Need::Workspace(workspace)
        } else {
            Need::Peer(workspace, &self.peer_id)
        };
        let mut needs = scoped(workspace, &self.scopes, whose);
        if let Some(session) = self.session_id.as_deref().filter(|session| !session.is_empty()) {
            needs.push(Need::SessionRead(workspace, session));
        }
        // The allowlist's shape is checked first (INVALID_ARGUMENT); then each session is a need.
        roncho_search::context::session_allowlist(self.filters.as_ref())?;
        let listed = match self.filters.as_ref().and_then(|filters| filters.get("session_id")) {
            Some(Value::String(session)) => vec![session.as_str()],
            Some(Value::Array(sessions)) => sessions.iter().filter_map(Value::as_str).collect(),
            Some(Value::Object(operators)) => operators
                .get("in")
                .and_then(Value::as_array)
                .map(|sessions| sessions.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        needs.extend(listed.into_iter().map(|session| Need::SessionRead(workspace, session)));
        Ok(needs)
    }
}

impl Authorize for recall::ListWorkspaces {
    /// A tenant's admin lists its tenant's workspaces (see `confine`).
    fn needs(&self) -> Result<Vec<Need<'_>>> {
        Ok(vec![Need::AnyAdmin])
    }

    fn confine(&mut self, tenant: &str) -> Result<()> {
        self.tenant = Some(tenant.to_owned());
        Ok(())
    }
}

impl Authorize for crate::keys::CreateKey {
    /// The operator mints any key; a tenant's admin, keys to its tenant's
    /// workspaces, of its tenant.
    fn needs(&self) -> Result<Vec<Need<'_>>> {
        Ok(vec![Need::AdminOf(&self.workspace_id)])
    }

    fn confine(&mut self, tenant: &str) -> Result<()> {
        match self.tenant_id.as_deref().filter(|asked| !asked.is_empty()) {
            Some(asked) if asked != tenant => Err(Error::PermissionDenied(format!(
                "an admin key of tenant `{tenant}` mints keys of its own tenant only"
            ))),
            _ => {
                self.tenant_id = Some(tenant.to_owned());
                Ok(())
            }
        }
    }
}

needs! {
    // Moving a workspace between tenants is the operator's.
    crate::keys::AssignWorkspace => |_r| vec![Need::Admin];
}
