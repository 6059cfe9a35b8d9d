//! The recall role: every read ([`RecallApi`]): lists, lookups, filters,
//! hybrid search, session and peer context, representations, peer cards and
//! conclusions. Requests are domain types: edges convert their wire to
//! them and authorize the caller first, so no call here carries it.

use std::sync::Arc;

use roncho_core::filter::{self, Filter, Schema};
use roncho_core::model::{
    Conclusion, ErasureReceipt, JsonObject, Message, MessageQuery, Page, Peer, PeerKind, Scope, ScopeBackfill, Session,
    SessionPeerConfig, SummaryKind, WebhookEndpoint, Workspace,
};
use roncho_core::store::{Erasure, Tenants, Webhooks};
use roncho_core::{Error, Result, validate};
use roncho_search::SearchStore;
use roncho_search::Semantic;
pub use roncho_search::context::Omitted;
use roncho_search::context::{self, MAX_ALLOWLIST, MAX_CONTEXT_TOKENS, RepresentationOptions, SessionContext};
pub use roncho_search::messages::SearchMatch;
use roncho_search::messages::SearchResults;
use serde_json::Value;

mod export;
mod requests;
pub use requests::*;

roncho_core::store_view! {
    /// The store as recall reads it: what search reads, erasure receipts,
    /// webhook endpoints, and the workspaces a tenant holds.
    pub trait RecallStore: SearchStore, Erasure, Webhooks, Tenants
}

/// Every read, as every edge calls it.
#[async_trait::async_trait]
pub trait RecallApi: Send + Sync {
    async fn list_workspaces(&self, request: ListWorkspaces) -> Result<Page<Workspace>>;
    async fn list_peers(&self, request: ListPeers) -> Result<Page<Peer>>;
    async fn list_sessions(&self, request: ListSessions) -> Result<Page<Session>>;
    async fn list_peer_sessions(&self, request: ListPeerSessions) -> Result<Page<Session>>;
    async fn list_session_peers(&self, request: ListSessionPeers) -> Result<Page<Peer>>;
    async fn get_session_peer_config(&self, request: GetSessionPeerConfig) -> Result<SessionPeerConfig>;
    async fn list_messages(&self, request: ListMessages) -> Result<Page<Message>>;
    async fn get_message(&self, request: GetMessage) -> Result<Message>;
    async fn search_messages(&self, request: SearchMessages) -> Result<SearchResults>;
    async fn get_session_context(&self, request: GetSessionContext) -> Result<SessionContext>;
    async fn get_session_summaries(&self, request: GetSessionSummaries) -> Result<SessionSummaries>;
    async fn get_peer_context(&self, request: GetPeerContext) -> Result<PeerContext>;
    async fn get_representation(&self, request: GetRepresentation) -> Result<Representation>;
    /// Returns the card, `None` when there is none.
    async fn get_peer_card(&self, request: GetPeerCard) -> Result<Option<Vec<String>>>;
    async fn list_conclusions(&self, request: ListConclusions) -> Result<Page<Conclusion>>;
    /// Returns a live conclusion (not found once deleted).
    async fn get_conclusion(&self, request: GetConclusion) -> Result<Conclusion>;
    async fn query_conclusions(&self, request: QueryConclusions) -> Result<Vec<Conclusion>>;
    async fn list_webhooks(&self, request: ListWebhooks) -> Result<Page<WebhookEndpoint>>;
    async fn get_erasure_receipt(&self, request: GetErasureReceipt) -> Result<ErasureReceipt>;
    async fn list_scopes(&self, request: ListScopes) -> Result<Page<Scope>>;
    async fn get_scope(&self, request: GetScope) -> Result<Scope>;
    /// Lists the scope's sessions, longest member first.
    async fn list_scope_sessions(&self, request: GetScope) -> Result<Page<Session>>;
    /// Returns each session's backfill into the scope.
    async fn get_scope_status(&self, request: GetScope) -> Result<Vec<ScopeBackfill>>;
    /// Streams a workspace (or a peer's or a session's part of it) as
    /// export records, header first and trailer last; `NOT_FOUND` before
    /// any record when what it names does not exist.
    async fn export_workspace(
        &self,
        request: ExportWorkspace,
    ) -> Result<futures::stream::BoxStream<'static, Result<roncho_core::export::Record>>>;
}

/// The recall service over a store, with semantic search when configured.
#[derive(Clone)]
pub struct Recall {
    store: Arc<dyn RecallStore>,
    semantic: Option<Semantic>,
}

impl std::fmt::Debug for Recall {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Recall").finish_non_exhaustive()
    }
}

impl Recall {
    /// Returns the recall service over `store`; `semantic` adds vector candidates to search.
    pub fn new(store: Arc<dyn RecallStore>, semantic: Option<Semantic>) -> Self {
        Self { store, semantic }
    }
}

fn parse_filters(schema: &Schema, filters: Option<&JsonObject>) -> Result<Filter> {
    filter::parse(schema, filters)
}

/// Default number of search results.
const DEFAULT_SEARCH_LIMIT: i64 = 10;
/// Longest search or context query, in characters.
const MAX_QUERY_CHARS: usize = 10_000;

fn optional_id(field: &str, id: Option<&str>) -> Result<Option<String>> {
    id.map(|id| validate::reference_id(field, id)).transpose()
}

/// Checks an optional integer against an inclusive range.
fn bounded(field: &str, value: Option<i32>, low: i32, high: i32) -> Result<Option<i64>> {
    match value {
        Some(value) if !(low..=high).contains(&value) => {
            Err(Error::invalid(field, format!("must be between {low} and {high}")))
        }
        other => Ok(other.map(i64::from)),
    }
}

/// A `tokens` budget, 1 to [`MAX_CONTEXT_TOKENS`].
fn token_budget(tokens: Option<i32>) -> Result<Option<i64>> {
    match tokens.map(i64::from) {
        Some(tokens) if !(1..=MAX_CONTEXT_TOKENS).contains(&tokens) => Err(Error::invalid(
            "tokens",
            format!("must be between 1 and {MAX_CONTEXT_TOKENS}"),
        )),
        tokens => Ok(tokens),
    }
}

fn check_distance(field: &str, value: Option<f64>) -> Result<()> {
    match value {
        Some(distance) if !(0.0..=1.0).contains(&distance) => Err(Error::invalid(field, "must be between 0 and 1")),
        _ => Ok(()),
    }
}

fn search_query(query: Option<&str>) -> Result<Option<String>> {
    match query {
        Some(query) if query.chars().count() > MAX_QUERY_CHARS => Err(Error::invalid(
            "search_query",
            format!("must be at most {MAX_QUERY_CHARS} characters"),
        )),
        Some(query) if !query.trim().is_empty() => Ok(Some(validate::strip_nul(query))),
        _ => Ok(None),
    }
}

/// Returns a filter value that must be one id.
fn single_id(filters: &JsonObject, keys: [&str; 2]) -> Result<Option<String>> {
    for key in keys {
        match filters.get(key) {
            None => continue,
            Some(Value::String(id)) => return Ok(Some(validate::reference_id(&format!("filters.{key}"), id)?)),
            Some(_) => return Err(Error::invalid(format!("filters.{key}"), "must be a peer id")),
        }
    }
    Ok(None)
}

/// Returns the observer and observed a conclusion query names in its filters.
pub fn query_collection(filters: Option<&JsonObject>) -> Result<(String, String)> {
    let empty = JsonObject::new();
    let filters = filters.unwrap_or(&empty);
    let observer = single_id(filters, ["observer_id", "observer"])?;
    let observed = single_id(filters, ["observed_id", "observed"])?;
    let (Some(observer), Some(observed)) = (observer, observed) else {
        return Err(Error::invalid(
            "filters",
            "must name the collection: {\"observer_id\": ..., \"observed_id\": ...}",
        ));
    };
    Ok((observer, observed))
}

#[async_trait::async_trait]
impl RecallApi for Recall {
    async fn list_workspaces(&self, request: ListWorkspaces) -> Result<Page<Workspace>> {
        let filter = parse_filters(&filter::WORKSPACE, request.filters.as_ref())?;
        let page = request.paging.request()?;
        match &request.tenant {
            Some(tenant) => self.store.list_tenant_workspaces(tenant, &filter, page).await,
            None => self.store.list_workspaces(&filter, page).await,
        }
    }

    async fn list_peers(&self, request: ListPeers) -> Result<Page<Peer>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let filter = parse_filters(&filter::PEER, request.filters.as_ref())?;
        self.store
            .list_peers(
                &workspace_id,
                PeerKind::parse(&request.kind)?,
                &filter,
                request.paging.request()?,
            )
            .await
    }

    async fn list_sessions(&self, request: ListSessions) -> Result<Page<Session>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let filter = parse_filters(&filter::SESSION, request.filters.as_ref())?;
        self.store
            .list_sessions(&workspace_id, &filter, request.paging.request()?)
            .await
    }

    async fn list_peer_sessions(&self, request: ListPeerSessions) -> Result<Page<Session>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let peer_id = validate::reference_id("peer_id", &request.peer_id)?;
        let filter = parse_filters(&filter::SESSION, request.filters.as_ref())?;
        self.store
            .list_peer_sessions(&workspace_id, &peer_id, &filter, request.paging.request()?)
            .await
    }

    async fn list_session_peers(&self, request: ListSessionPeers) -> Result<Page<Peer>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        self.store
            .list_session_peers(&workspace_id, &session_id, request.paging.request()?)
            .await
    }

    async fn get_session_peer_config(&self, request: GetSessionPeerConfig) -> Result<SessionPeerConfig> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let peer_id = validate::reference_id("peer_id", &request.peer_id)?;
        self.store
            .get_session_peer_config(&workspace_id, &session_id, &peer_id)
            .await
    }

    async fn list_messages(&self, request: ListMessages) -> Result<Page<Message>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let filter = parse_filters(&filter::MESSAGE, request.filters.as_ref())?;
        self.store
            .list_messages(&workspace_id, &session_id, &filter, request.paging.request()?)
            .await
    }

    async fn get_message(&self, request: GetMessage) -> Result<Message> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let id = validate::reference_id("message_id", &request.message_id)?;
        self.store.get_message(&workspace_id, &session_id, &id).await
    }

    async fn search_messages(&self, request: SearchMessages) -> Result<SearchResults> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        if request.query.trim().is_empty() {
            return Err(Error::invalid("query", "must not be empty"));
        }
        if request.query.chars().count() > MAX_QUERY_CHARS {
            return Err(Error::invalid(
                "query",
                format!("must be at most {MAX_QUERY_CHARS} characters"),
            ));
        }
        let limit =
            bounded("limit", (request.limit != 0).then_some(request.limit), 1, 100)?.unwrap_or(DEFAULT_SEARCH_LIMIT);
        let peer_perspective = request
            .peer_perspective()?
            .map(|peer| validate::reference_id("filters.peer_perspective", peer))
            .transpose()?;
        let mut filters = request.filters.unwrap_or_default();
        filters.remove("peer_perspective");
        let session_ids = if request.scopes.is_empty() {
            optional_id("session_id", request.session_id.as_deref())?.map(|session| vec![session])
        } else {
            if request.session_id.is_some() || filters.contains_key("session_id") {
                return Err(Error::invalid("scope", "cannot be combined with a session"));
            }
            let scopes = context::scope_ids("scope", &request.scopes)?;
            Some(self.store.scope_session_ids(&workspace_id, &scopes).await?)
        };
        let filter = filter::parse(&filter::MESSAGE, Some(&filters))?;
        let search = MessageQuery {
            terms: roncho_core::search::terms(&request.query),
            session_ids,
            peer_id: optional_id("peer_id", request.peer_id.as_deref())?,
            peer_perspective,
            limit,
        };
        roncho_search::messages::search(
            &*self.store,
            self.semantic.as_ref(),
            &workspace_id,
            &request.query,
            &search,
            &filter,
        )
        .await
    }

    async fn get_session_context(&self, request: GetSessionContext) -> Result<SessionContext> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let token_limit = token_budget(request.tokens)?.unwrap_or(MAX_CONTEXT_TOKENS);
        check_distance("search_max_distance", request.search_max_distance)?;
        let peer_target = optional_id("peer_target", request.peer_target.as_deref())?;
        let peer_perspective = optional_id("peer_perspective", request.peer_perspective.as_deref())?;
        if peer_target.is_none() && (peer_perspective.is_some() || !request.sessions.is_empty()) {
            let field = if peer_perspective.is_some() {
                "peer_perspective"
            } else {
                "sessions"
            };
            return Err(Error::invalid(field, "requires peer_target"));
        }
        if !request.sessions.is_empty() && request.limit_to_session {
            return Err(Error::invalid("sessions", "cannot be combined with limit_to_session"));
        }
        validate::list_len("sessions", request.sessions.len(), MAX_ALLOWLIST)?;
        if !request.sessions.is_empty() && !request.sessions.contains(&session_id) {
            return Err(Error::invalid("sessions", "must include this session"));
        }
        if let Some(peer) = &peer_target {
            context::refuse_scope_peer("peer_target", peer)?;
        }
        if let Some(peer) = &peer_perspective {
            context::refuse_scope_peer("peer_perspective", peer)?;
        }
        let scope_observer = match optional_id("scope", request.scope.as_deref())? {
            None => None,
            Some(_) if peer_target.is_none() => return Err(Error::invalid("scope", "requires peer_target")),
            Some(_) if peer_perspective.is_some() => {
                return Err(Error::invalid("scope", "cannot be combined with peer_perspective"));
            }
            Some(_) if !request.sessions.is_empty() => {
                return Err(Error::invalid("scope", "cannot be combined with sessions"));
            }
            Some(scope) => {
                self.store.get_scope(&workspace_id, &scope).await?;
                Some(roncho_core::model::scope_peer(&scope))
            }
        };
        let target = match peer_target {
            None => None,
            Some(observed) => Some(RepresentationOptions {
                observer: scope_observer.or(peer_perspective).unwrap_or_else(|| observed.clone()),
                observed,
                allowed_sessions: if !request.sessions.is_empty() {
                    Some(request.sessions.clone())
                } else if request.limit_to_session {
                    Some(vec![session_id.clone()])
                } else {
                    None
                },
                search_query: search_query(request.search_query.as_deref())?,
                search_top_k: bounded("search_top_k", request.search_top_k, 1, 100)?,
                search_max_distance: request.search_max_distance,
                include_most_frequent: request.include_most_frequent.unwrap_or(false),
                max_conclusions: bounded("max_conclusions", request.max_conclusions, 1, 100)?.unwrap_or(100),
            }),
        };
        context::session_context(
            &*self.store,
            self.semantic.as_ref(),
            &workspace_id,
            &session_id,
            token_limit,
            request.summary.unwrap_or(true),
            target,
        )
        .await
    }

    async fn get_session_summaries(&self, request: GetSessionSummaries) -> Result<SessionSummaries> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let mut summaries = self.store.session_summaries(&workspace_id, &session_id).await?;
        let mut take = |kind| {
            let position = summaries.iter().position(|summary| summary.kind == kind)?;
            Some(summaries.remove(position))
        };
        Ok(SessionSummaries {
            short: take(SummaryKind::Short),
            long: take(SummaryKind::Long),
            id: session_id,
        })
    }

    async fn get_peer_context(&self, request: GetPeerContext) -> Result<PeerContext> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let observer = validate::reference_id("peer_id", &request.peer_id)?;
        let observed = optional_id("target", request.target.as_deref())?.unwrap_or_else(|| observer.clone());
        context::refuse_scope_peer("target", &observed)?;
        check_distance("search_max_distance", request.search_max_distance)?;
        let options = RepresentationOptions {
            observer: observer.clone(),
            observed: observed.clone(),
            allowed_sessions: None,
            search_query: search_query(request.search_query.as_deref())?,
            search_top_k: bounded("search_top_k", request.search_top_k, 1, 100)?,
            search_max_distance: request.search_max_distance,
            include_most_frequent: request.include_most_frequent.unwrap_or(true),
            max_conclusions: bounded("max_conclusions", request.max_conclusions, 1, 100)?.unwrap_or(100),
        };
        let budget = token_budget(request.tokens)?;
        let memory = context::memory(
            &*self.store,
            self.semantic.as_ref(),
            &workspace_id,
            &options,
            true,
            budget,
        )
        .await?;
        Ok(PeerContext {
            peer_id: observer,
            target_id: observed,
            representation: memory.representation,
            peer_card: memory.peer_card,
            omitted: memory.omitted,
        })
    }

    async fn get_representation(&self, request: GetRepresentation) -> Result<Representation> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let peer = validate::reference_id("peer_id", &request.peer_id)?;
        let observed = optional_id("target", request.target.as_deref())?.unwrap_or_else(|| peer.clone());
        context::refuse_scope_peer("peer_id", &peer)?;
        context::refuse_scope_peer("target", &observed)?;
        let mut allowed_sessions = context::session_allowlist(request.filters.as_ref())?;
        if let Some(session_id) = optional_id("session_id", request.session_id.as_deref())? {
            allowed_sessions = Some(match allowed_sessions {
                Some(list) => list.into_iter().filter(|id| *id == session_id).collect(),
                None => vec![session_id],
            });
        }
        if !request.scopes.is_empty() && allowed_sessions.is_some() {
            return Err(Error::invalid("scope", "cannot be combined with session_id or filters"));
        }
        let scopes = context::scope_ids("scope", &request.scopes)?;
        let (observer, scoped_sessions) =
            context::scoped_observer(&*self.store, &workspace_id, &peer, &scopes, request.scopes_as_list).await?;
        let allowed_sessions = allowed_sessions.or(scoped_sessions);
        check_distance("search_max_distance", request.search_max_distance)?;
        let options = RepresentationOptions {
            observer,
            observed,
            allowed_sessions,
            search_query: search_query(request.search_query.as_deref())?,
            search_top_k: bounded("search_top_k", request.search_top_k, 1, 100)?,
            search_max_distance: request.search_max_distance,
            include_most_frequent: request.include_most_frequent.unwrap_or(false),
            max_conclusions: bounded("max_conclusions", request.max_conclusions, 1, 100)?.unwrap_or(25),
        };
        let budget = token_budget(request.tokens)?;
        let memory = context::memory(
            &*self.store,
            self.semantic.as_ref(),
            &workspace_id,
            &options,
            false,
            budget,
        )
        .await?;
        Ok(Representation {
            markdown: memory.representation.unwrap_or_default(),
            omitted: memory.omitted,
        })
    }

    async fn get_peer_card(&self, request: GetPeerCard) -> Result<Option<Vec<String>>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let observer = validate::reference_id("peer_id", &request.peer_id)?;
        let observed = optional_id("target", request.target.as_deref())?.unwrap_or_else(|| observer.clone());
        self.store.get_peer_card(&workspace_id, &observer, &observed).await
    }

    async fn list_conclusions(&self, request: ListConclusions) -> Result<Page<Conclusion>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let filter = parse_filters(&filter::CONCLUSION, request.filters.as_ref())?;
        self.store
            .list_conclusions(&workspace_id, &filter, request.paging.request()?)
            .await
    }

    async fn list_scopes(&self, request: ListScopes) -> Result<Page<Scope>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        self.store.list_scopes(&workspace_id, request.paging.request()?).await
    }

    async fn get_scope(&self, request: GetScope) -> Result<Scope> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let scope_id = validate::reference_id("scope_id", &request.scope_id)?;
        self.store.get_scope(&workspace_id, &scope_id).await
    }

    async fn list_scope_sessions(&self, request: GetScope) -> Result<Page<Session>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let scope_id = validate::reference_id("scope_id", &request.scope_id)?;
        self.store
            .list_scope_sessions(&workspace_id, &scope_id, request.paging.request()?)
            .await
    }

    async fn get_scope_status(&self, request: GetScope) -> Result<Vec<ScopeBackfill>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let scope_id = validate::reference_id("scope_id", &request.scope_id)?;
        self.store.scope_backfills(&workspace_id, &scope_id).await
    }

    async fn export_workspace(
        &self,
        request: ExportWorkspace,
    ) -> Result<futures::stream::BoxStream<'static, Result<roncho_core::export::Record>>> {
        export::export(self.store.clone(), request).await
    }

    async fn query_conclusions(&self, request: QueryConclusions) -> Result<Vec<Conclusion>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        if request.query.trim().is_empty() {
            return Err(Error::invalid("query", "must not be empty"));
        }
        let top_k = bounded("top_k", request.top_k, 1, 100)?.unwrap_or(DEFAULT_SEARCH_LIMIT);
        check_distance("distance", request.distance)?;
        let (observer, observed) = query_collection(request.filters.as_ref())?;
        let filters = request.filters.unwrap_or_default();
        if let Some(key) = filters.keys().find(|key| {
            !matches!(
                key.as_str(),
                "observer_id" | "observer" | "observed_id" | "observed" | "session_id"
            )
        }) {
            return Err(Error::invalid(
                format!("filters.{key}"),
                "allowed keys: observer_id, observed_id, session_id",
            ));
        }
        let allowed_sessions = match filters.get("session_id") {
            None => None,
            Some(Value::String(id)) => Some(vec![id.clone()]),
            Some(Value::Array(ids)) => {
                validate::list_len("filters.session_id", ids.len(), MAX_ALLOWLIST)?;
                Some(ids.iter().filter_map(|id| id.as_str().map(str::to_owned)).collect())
            }
            Some(_) => return Err(Error::invalid("filters.session_id", "must be an id or a list of ids")),
        };
        let semantic = self.semantic.as_ref().ok_or_else(|| {
            Error::FailedPrecondition(
                "QueryConclusions needs an embedder, and none is configured (see roncho status)".into(),
            )
        })?;
        let options = RepresentationOptions {
            observer,
            observed,
            allowed_sessions: None,
            search_query: None,
            search_top_k: None,
            search_max_distance: request.distance,
            include_most_frequent: false,
            max_conclusions: top_k,
        };
        let mut conclusions =
            context::nearest_conclusions(&*self.store, semantic, &workspace_id, &options, &request.query, top_k)
                .await?;
        if let Some(sessions) = allowed_sessions {
            conclusions.retain(|conclusion| conclusion.session_id.as_ref().is_some_and(|id| sessions.contains(id)));
        }
        Ok(conclusions)
    }

    async fn list_webhooks(&self, request: ListWebhooks) -> Result<Page<WebhookEndpoint>> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let paging = Paging {
            reverse: false,
            ..request.paging
        };
        self.store.list_webhooks(&workspace_id, paging.request()?).await
    }

    async fn get_conclusion(&self, request: GetConclusion) -> Result<Conclusion> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let id = validate::reference_id("conclusion_id", &request.conclusion_id)?;
        self.store
            .conclusions_by_ids(&workspace_id, std::slice::from_ref(&id))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Error::not_found("conclusion", id))
    }

    async fn get_erasure_receipt(&self, request: GetErasureReceipt) -> Result<ErasureReceipt> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let id = validate::reference_id("receipt_id", &request.receipt_id)?;
        self.store.erasure_receipt(&workspace_id, &id).await
    }
}

#[cfg(test)]
mod tests {
    //! Recall's own rules (validation, scoping, perspective) over the
    //! embedded store, full text only.

    use roncho_core::model::{JsonObject, NewMessage};
    use roncho_core::store::{Messages, Workspaces};
    use roncho_core::{Error, Result};
    use serde_json::json;

    use super::{Recall, RecallApi, SearchMessages};

    fn said(peer_id: &str, content: &str) -> NewMessage {
        NewMessage {
            peer_id: peer_id.to_owned(),
            content: content.to_owned(),
            metadata: JsonObject::new(),
            configuration: JsonObject::new(),
            created_at: None,
            token_count: 4,
        }
    }

    fn search(query: &str) -> SearchMessages {
        SearchMessages {
            workspace_id: "w".into(),
            query: query.into(),
            ..SearchMessages::default()
        }
    }

    async fn found(recall: &Recall, request: SearchMessages) -> Result<Vec<String>> {
        let results = recall.search_messages(request).await?;
        Ok(results.messages.into_iter().map(|message| message.content).collect())
    }

    fn is_invalid(result: Result<Vec<String>>, field: &str) -> bool {
        matches!(&result, Err(Error::InvalidArgument { field: f, .. }) if f == field)
    }

    #[tokio::test]
    async fn searches_are_validated_scoped_to_a_session_and_to_a_peers_perspective() {
        let dir = tempfile::tempdir().unwrap();
        let store = roncho_store::testing::open_embedded(dir.path()).await;
        store
            .get_or_create_workspace("w", JsonObject::new(), JsonObject::new())
            .await
            .unwrap();
        let kitten = said("alice", "we adopted a kitten from the shelter");
        store.create_messages("w", "home", vec![kitten]).await.unwrap();
        let work = said("bob", "the kitten video went round the office");
        store.create_messages("w", "work", vec![work]).await.unwrap();
        let recall = Recall::new(store.clone(), None);

        let mut everywhere = found(&recall, search("kitten")).await.unwrap();
        everywhere.sort();
        assert_eq!(everywhere.len(), 2, "{everywhere:?}");
        let home = SearchMessages {
            session_id: Some("home".into()),
            ..search("kitten")
        };
        assert_eq!(
            found(&recall, home).await.unwrap(),
            ["we adopted a kitten from the shelter"]
        );
        let alices_view = SearchMessages {
            filters: Some(json!({"peer_perspective": "alice"}).as_object().unwrap().clone()),
            ..search("kitten")
        };
        assert_eq!(
            found(&recall, alices_view).await.unwrap(),
            ["we adopted a kitten from the shelter"],
            "alice was never in the work session"
        );

        assert!(is_invalid(found(&recall, search("  ")).await, "query"));
        let too_many = SearchMessages {
            limit: 101,
            ..search("kitten")
        };
        assert!(is_invalid(found(&recall, too_many).await, "limit"));
        let scope_and_session = SearchMessages {
            session_id: Some("home".into()),
            scopes: vec!["family".into()],
            ..search("kitten")
        };
        assert!(is_invalid(found(&recall, scope_and_session).await, "scope"));
        let not_a_peer = SearchMessages {
            filters: Some(json!({"peer_perspective": 7}).as_object().unwrap().clone()),
            ..search("kitten")
        };
        assert!(is_invalid(found(&recall, not_a_peer).await, "filters.peer_perspective"));
    }
}
