//! The recall role: `roncho.v1.RecallService`, every read.
//!
//! Lists, lookups, filters, full-text search, session and peer context,
//! representations, peer cards and conclusion lists work. Semantic search and
//! `QueryConclusions` need an embedder; summaries need the summariser: those
//! answer `UNIMPLEMENTED` or report degraded mode until they land.

pub mod context;

use std::sync::Arc;

use roncho_core::convert::{PageParts, page_parts};
use roncho_core::filter::{self, Filter, Schema};
use roncho_core::json::struct_to_json;
use roncho_core::model::{MessageSearch, PageRequest, SessionSummary, SummaryKind};
use serde_json::Value;

use crate::context::{MAX_ALLOWLIST, MAX_CONTEXT_TOKENS, RepresentationOptions};
use roncho_core::embed::Embedder;
use roncho_core::rpc::{RpcResult, reply};
use roncho_core::store::Store;
use roncho_core::vector::{VectorFilter, VectorStore, messages_namespace};
use roncho_core::{Error, Result, validate};
use roncho_proto::v1 as pb;
use roncho_proto::v1::recall_service_server::RecallService;
use tonic::Request;

/// The semantic half of search: an embedder and the vectors it made.
#[derive(Clone)]
pub struct Semantic {
    pub embedder: Arc<dyn Embedder>,
    pub vectors: Arc<dyn VectorStore>,
}

impl Semantic {
    /// Returns the embedding of one query.
    pub async fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        Ok(self
            .embedder
            .embed(&[query.to_owned()])
            .await?
            .pop()
            .unwrap_or_default())
    }
}

/// Serves `RecallService` over a store, with semantic search when configured.
#[derive(Clone)]
pub struct Recall {
    store: Arc<dyn Store>,
    semantic: Option<Semantic>,
}

impl std::fmt::Debug for Recall {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Recall").finish_non_exhaustive()
    }
}

impl Recall {
    /// Returns the recall service over `store`; `semantic` adds vector candidates to search.
    pub fn new(store: Arc<dyn Store>, semantic: Option<Semantic>) -> Self {
        Self { store, semantic }
    }
}

fn parse_filters(schema: &Schema, filters: Option<prost_types::Struct>) -> Result<Filter> {
    let object = filters.map(|fields| struct_to_json(&fields));
    filter::parse(schema, object.as_ref())
}

/// Builds a paged response message from a domain page.
macro_rules! paged_response {
    ($response:ident, $page:expr) => {{
        let PageParts {
            items,
            total,
            page,
            size,
            pages,
        } = page_parts($page);
        pb::$response {
            items,
            total,
            page,
            size,
            pages,
        }
    }};
}

/// Default number of search results.
const DEFAULT_SEARCH_LIMIT: i64 = 10;
/// Longest search or context query, in characters.
const MAX_QUERY_CHARS: usize = 10_000;
/// Why search runs on full text alone in this version.
const NO_EMBEDDER: &str = "no embedder is configured: results come from full-text search alone";

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

/// Parses the recall-route filter subset: only `session_id`, as an id, a list or `{"in": [...]}`.
pub fn session_allowlist(filters: Option<prost_types::Struct>) -> Result<Option<Vec<String>>> {
    let Some(filters) = filters else { return Ok(None) };
    let object = struct_to_json(&filters);
    let mut allowlist = None;
    for (key, value) in object {
        if key != "session_id" {
            return Err(Error::invalid(
                format!("filters.{key}"),
                "only session_id is allowed here",
            ));
        }
        let ids = match value {
            Value::String(id) => vec![Value::String(id)],
            Value::Array(ids) => ids,
            Value::Object(mut operators) if operators.len() == 1 && operators.contains_key("in") => {
                match operators.remove("in") {
                    Some(Value::Array(ids)) => ids,
                    _ => return Err(Error::invalid("filters.session_id.in", "must be a list of session ids")),
                }
            }
            _ => {
                return Err(Error::invalid(
                    "filters.session_id",
                    "must be an id, a list of ids or {\"in\": [...]}",
                ));
            }
        };
        if ids.len() > MAX_ALLOWLIST {
            return Err(Error::invalid(
                "filters.session_id",
                format!("holds more than {MAX_ALLOWLIST} ids"),
            ));
        }
        let ids = ids
            .into_iter()
            .map(|id| match id {
                Value::String(id) if id != "*" => Ok(id),
                _ => Err(Error::invalid(
                    "filters.session_id",
                    "must hold session ids (no wildcards)",
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        allowlist = Some(ids);
    }
    Ok(allowlist)
}

/// The `k` of reciprocal-rank fusion. Honcho uses 60; on the LoCoMo
/// development set k = 60 fused MiniLM below full text alone (recall@10 0.609
/// vs 0.620) while k in 2..=10 reached 0.681–0.683: the top of each list
/// carries the signal, so it must weigh more. 10 is the middle of that plateau
/// (docs/benchmarks.md).
const RRF_K: f64 = 10.0;

/// Peers a workspace may have for [`Recall::named_peers`] to look for them in queries.
const NAMED_PEER_SCAN: i64 = 100;

/// Lowercase alphanumeric words of `text`.
fn lower_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Fuses candidate lists. When the query names peers, their messages in the
/// fused order form one more list: in conversations, what a question asks
/// about a person is nearly always in what that person said (on the LoCoMo
/// development set, 92–100 % of evidence turns per question category), yet
/// a name is a weak term for BM25 and a weak signal in an embedding. The
/// extra list reorders candidates; it adds none and removes none.
fn fuse(lists: Vec<Vec<roncho_core::model::Message>>, named: &[String]) -> Vec<roncho_core::model::Message> {
    let fused = if lists.len() == 1 {
        lists.into_iter().next().unwrap_or_default()
    } else {
        reciprocal_rank_fusion(&lists)
    };
    if named.is_empty() {
        return fused;
    }
    let by_named: Vec<_> = fused
        .iter()
        .filter(|message| named.contains(&message.peer_id))
        .cloned()
        .collect();
    reciprocal_rank_fusion(&[fused, by_named])
}

/// Fuses ranked lists: each item scores Σ 1 / (k + rank) over the lists it is in.
fn reciprocal_rank_fusion(lists: &[Vec<roncho_core::model::Message>]) -> Vec<roncho_core::model::Message> {
    let mut scored: Vec<(f64, roncho_core::model::Message)> = Vec::new();
    for list in lists {
        for (rank, message) in list.iter().enumerate() {
            let score = 1.0 / (RRF_K + rank as f64 + 1.0);
            match scored.iter_mut().find(|(_, existing)| existing.id == message.id) {
                Some((total, _)) => *total += score,
                None => scored.push((score, message.clone())),
            }
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.created_at.cmp(&a.1.created_at)));
    scored.into_iter().map(|(_, message)| message).collect()
}

fn search_response(
    messages: Vec<roncho_core::model::Message>,
    limit: i64,
    mode: &str,
    degraded_reason: String,
) -> pb::SearchMessagesResponse {
    pb::SearchMessagesResponse {
        messages: messages
            .into_iter()
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(pb::Message::from)
            .collect(),
        mode: mode.to_owned(),
        degraded_reason,
    }
}

/// Returns a filter value that must be one id.
fn single_id(filters: &serde_json::Map<String, Value>, keys: [&str; 2]) -> Result<Option<String>> {
    for key in keys {
        match filters.get(key) {
            None => continue,
            Some(Value::String(id)) => return Ok(Some(validate::reference_id(&format!("filters.{key}"), id)?)),
            Some(_) => return Err(Error::invalid(format!("filters.{key}"), "must be a peer id")),
        }
    }
    Ok(None)
}

impl Recall {
    async fn query_conclusions(&self, request: pb::QueryConclusionsRequest) -> Result<pb::QueryConclusionsResponse> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        if request.query.trim().is_empty() {
            return Err(Error::invalid("query", "must not be empty"));
        }
        let top_k = bounded("top_k", request.top_k, 1, 100)?.unwrap_or(DEFAULT_SEARCH_LIMIT);
        check_distance("distance", request.distance)?;
        let filters = request
            .filters
            .map(|fields| struct_to_json(&fields))
            .unwrap_or_default();
        let observer = single_id(&filters, ["observer_id", "observer"])?;
        let observed = single_id(&filters, ["observed_id", "observed"])?;
        let (Some(observer), Some(observed)) = (observer, observed) else {
            return Err(Error::invalid(
                "filters",
                "must name the collection: {\"observer_id\": ..., \"observed_id\": ...}",
            ));
        };
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
            Some(Value::Array(ids)) => Some(ids.iter().filter_map(|id| id.as_str().map(str::to_owned)).collect()),
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
        Ok(pb::QueryConclusionsResponse {
            conclusions: conclusions.into_iter().map(pb::Conclusion::from).collect(),
        })
    }

    async fn search_messages(&self, request: pb::SearchMessagesRequest) -> Result<pb::SearchMessagesResponse> {
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
        let mut filters = request
            .filters
            .map(|fields| struct_to_json(&fields))
            .unwrap_or_default();
        let peer_perspective = match filters.remove("peer_perspective") {
            None => None,
            Some(Value::String(peer)) => Some(validate::reference_id("filters.peer_perspective", &peer)?),
            Some(_) => return Err(Error::invalid("filters.peer_perspective", "must be a peer id")),
        };
        let filter = filter::parse(&filter::MESSAGE, Some(&filters))?;
        let search = MessageSearch {
            terms: roncho_core::search::terms(&request.query),
            session_id: optional_id("session_id", request.session_id.as_deref())?,
            peer_id: optional_id("peer_id", request.peer_id.as_deref())?,
            peer_perspective,
            // Each source brings twice the limit; fusion keeps the best `limit`.
            limit: limit * 2,
        };
        let named = match &search.peer_id {
            Some(_) => Vec::new(),
            None => self.named_peers(&workspace_id, &request.query).await?,
        };
        let Some(semantic) = &self.semantic else {
            let full_text = self.store.search_messages(&workspace_id, &search, &filter).await?;
            return Ok(search_response(
                fuse(vec![full_text], &named),
                limit,
                "full_text",
                NO_EMBEDDER.to_owned(),
            ));
        };
        // Both candidate lists at once: the embedding and vector scan overlap the full-text query.
        let (full_text, semantic_hits) = tokio::join!(
            self.store.search_messages(&workspace_id, &search, &filter),
            self.semantic_candidates(semantic, &workspace_id, &request.query, &search, &filter),
        );
        let full_text = full_text?;
        let semantic_hits = match semantic_hits {
            Ok(hits) => hits,
            Err(error) => {
                tracing::warn!(%error, "semantic search unavailable; answering from full text");
                return Ok(search_response(
                    fuse(vec![full_text], &named),
                    limit,
                    "full_text",
                    format!("semantic search unavailable: {error}"),
                ));
            }
        };
        Ok(search_response(
            fuse(vec![full_text, semantic_hits], &named),
            limit,
            "hybrid",
            String::new(),
        ))
    }

    /// Returns the peers of the workspace that `query` names (their id's
    /// words, split at `-` and `_`, appear in it in order, ignoring case).
    /// Workspaces of more than [`NAMED_PEER_SCAN`] peers are not scanned.
    async fn named_peers(&self, workspace_id: &str, query: &str) -> Result<Vec<String>> {
        let page = PageRequest::from_wire(1, NAMED_PEER_SCAN as i32, false)?;
        let peers = match self.store.list_peers(workspace_id, &Filter::All, page).await {
            Ok(peers) => peers,
            // Searching a workspace that does not exist finds nothing; not an error here.
            Err(Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        if peers.total > NAMED_PEER_SCAN {
            return Ok(Vec::new());
        }
        let words = lower_words(query);
        Ok(peers
            .items
            .into_iter()
            .map(|peer| peer.id)
            .filter(|id| {
                let id_words = lower_words(id);
                !id_words.is_empty()
                    && words
                        .windows(id_words.len())
                        .any(|window| window == id_words.as_slice())
            })
            .collect())
    }

    /// Returns the messages nearest the query's embedding that pass the search's scope and filter.
    async fn semantic_candidates(
        &self,
        semantic: &Semantic,
        workspace_id: &str,
        query: &str,
        search: &MessageSearch,
        filter: &filter::Filter,
    ) -> Result<Vec<roncho_core::model::Message>> {
        let vector = semantic.embed_query(query).await?;
        let vector_filter = VectorFilter {
            session_ids: search.session_id.clone().map(|id| vec![id]),
            peer_id: search.peer_id.clone(),
            levels: None,
        };
        // Filters and perspective are applied to the rows, so ask for more than needed.
        let top_k = usize::try_from(search.limit * 2).unwrap_or(200);
        let hits = semantic
            .vectors
            .query(&messages_namespace(workspace_id), &vector, top_k, &vector_filter, None)
            .await?;
        let ids: Vec<String> = hits.iter().map(|hit| hit.id.clone()).collect();
        let rows = self
            .store
            .messages_by_ids(workspace_id, &ids, filter, search.peer_perspective.as_deref())
            .await?;
        let mut ranked: Vec<roncho_core::model::Message> = ids
            .iter()
            .filter_map(|id| rows.iter().find(|row| &row.id == id).cloned())
            .collect();
        ranked.truncate(usize::try_from(search.limit).unwrap_or(usize::MAX));
        Ok(ranked)
    }

    async fn session_context(&self, request: pb::GetSessionContextRequest) -> Result<pb::SessionContext> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let session_id = validate::reference_id("session_id", &request.session_id)?;
        let token_limit = match request.tokens {
            Some(tokens) if !(1..=MAX_CONTEXT_TOKENS).contains(&i64::from(tokens)) => {
                return Err(Error::invalid(
                    "tokens",
                    format!("must be between 1 and {MAX_CONTEXT_TOKENS}"),
                ));
            }
            Some(tokens) => i64::from(tokens),
            None => MAX_CONTEXT_TOKENS,
        };
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
        if request.sessions.len() > MAX_ALLOWLIST {
            return Err(Error::invalid(
                "sessions",
                format!("holds more than {MAX_ALLOWLIST} ids"),
            ));
        }
        if !request.sessions.is_empty() && !request.sessions.contains(&session_id) {
            return Err(Error::invalid("sessions", "must include this session"));
        }
        let target = match peer_target {
            None => None,
            Some(observed) => Some(RepresentationOptions {
                observer: peer_perspective.unwrap_or_else(|| observed.clone()),
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
        let built = context::session_context(
            &*self.store,
            self.semantic.as_ref(),
            &workspace_id,
            &session_id,
            token_limit,
            request.summary.unwrap_or(true),
            target,
        )
        .await?;
        Ok(pb::SessionContext {
            id: session_id,
            messages: built.messages.into_iter().map(pb::Message::from).collect(),
            summary: built.summary.map(pb::Summary::from),
            peer_representation: built.representation,
            peer_card: built.peer_card.unwrap_or_default(),
        })
    }
}

#[tonic::async_trait]
impl RecallService for Recall {
    async fn list_workspaces(
        &self,
        request: Request<pb::ListWorkspacesRequest>,
    ) -> RpcResult<pb::ListWorkspacesResponse> {
        let request = request.into_inner();
        reply(
            async {
                let filter = parse_filters(&filter::WORKSPACE, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListWorkspacesResponse,
                    self.store.list_workspaces(&filter, page).await?
                ))
            }
            .await,
        )
    }

    async fn list_peers(&self, request: Request<pb::ListPeersRequest>) -> RpcResult<pb::ListPeersResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let filter = parse_filters(&filter::PEER, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListPeersResponse,
                    self.store.list_peers(&workspace_id, &filter, page).await?
                ))
            }
            .await,
        )
    }

    async fn list_sessions(&self, request: Request<pb::ListSessionsRequest>) -> RpcResult<pb::ListSessionsResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let filter = parse_filters(&filter::SESSION, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListSessionsResponse,
                    self.store.list_sessions(&workspace_id, &filter, page).await?
                ))
            }
            .await,
        )
    }

    async fn list_peer_sessions(
        &self,
        request: Request<pb::ListPeerSessionsRequest>,
    ) -> RpcResult<pb::ListSessionsResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let peer_id = validate::reference_id("peer_id", &request.peer_id)?;
                let filter = parse_filters(&filter::SESSION, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                let sessions = self
                    .store
                    .list_peer_sessions(&workspace_id, &peer_id, &filter, page)
                    .await?;
                Ok(paged_response!(ListSessionsResponse, sessions))
            }
            .await,
        )
    }

    async fn list_session_peers(
        &self,
        request: Request<pb::ListSessionPeersRequest>,
    ) -> RpcResult<pb::ListPeersResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListPeersResponse,
                    self.store.list_session_peers(&workspace_id, &session_id, page).await?
                ))
            }
            .await,
        )
    }

    async fn get_session_peer_config(
        &self,
        request: Request<pb::GetSessionPeerConfigRequest>,
    ) -> RpcResult<pb::SessionPeerConfig> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let peer_id = validate::reference_id("peer_id", &request.peer_id)?;
                Ok(self
                    .store
                    .get_session_peer_config(&workspace_id, &session_id, &peer_id)
                    .await?
                    .into())
            }
            .await,
        )
    }

    async fn list_messages(&self, request: Request<pb::ListMessagesRequest>) -> RpcResult<pb::ListMessagesResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let filter = parse_filters(&filter::MESSAGE, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListMessagesResponse,
                    self.store
                        .list_messages(&workspace_id, &session_id, &filter, page)
                        .await?
                ))
            }
            .await,
        )
    }

    async fn get_message(&self, request: Request<pb::GetMessageRequest>) -> RpcResult<pb::Message> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let id = validate::reference_id("message_id", &request.message_id)?;
                Ok(self.store.get_message(&workspace_id, &session_id, &id).await?.into())
            }
            .await,
        )
    }

    async fn search_messages(
        &self,
        request: Request<pb::SearchMessagesRequest>,
    ) -> RpcResult<pb::SearchMessagesResponse> {
        reply(self.search_messages(request.into_inner()).await)
    }

    async fn get_session_context(
        &self,
        request: Request<pb::GetSessionContextRequest>,
    ) -> RpcResult<pb::SessionContext> {
        reply(self.session_context(request.into_inner()).await)
    }

    async fn get_session_summaries(
        &self,
        request: Request<pb::GetSessionSummariesRequest>,
    ) -> RpcResult<pb::SessionSummaries> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let session_id = validate::reference_id("session_id", &request.session_id)?;
                let mut summaries = self.store.session_summaries(&workspace_id, &session_id).await?;
                let mut take = |kind| {
                    let position = summaries
                        .iter()
                        .position(|summary: &SessionSummary| summary.kind == kind)?;
                    Some(pb::Summary::from(summaries.remove(position)))
                };
                Ok(pb::SessionSummaries {
                    id: session_id.clone(),
                    short_summary: take(SummaryKind::Short),
                    long_summary: take(SummaryKind::Long),
                })
            }
            .await,
        )
    }

    async fn get_peer_context(&self, request: Request<pb::GetPeerContextRequest>) -> RpcResult<pb::PeerContext> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let observer = validate::reference_id("peer_id", &request.peer_id)?;
                let observed = optional_id("target", request.target.as_deref())?.unwrap_or_else(|| observer.clone());
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
                check_distance("search_max_distance", request.search_max_distance)?;
                let representation =
                    context::representation(&*self.store, self.semantic.as_ref(), &workspace_id, &options).await?;
                let card = context::peer_card(&*self.store, &workspace_id, &observer, &observed).await?;
                Ok(pb::PeerContext {
                    peer_id: observer,
                    target_id: observed,
                    representation: Some(representation),
                    peer_card: card.unwrap_or_default(),
                })
            }
            .await,
        )
    }

    async fn get_representation(
        &self,
        request: Request<pb::GetRepresentationRequest>,
    ) -> RpcResult<pb::GetRepresentationResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let observer = validate::reference_id("peer_id", &request.peer_id)?;
                let observed = optional_id("target", request.target.as_deref())?.unwrap_or_else(|| observer.clone());
                let mut allowed_sessions = session_allowlist(request.filters)?;
                if let Some(session_id) = optional_id("session_id", request.session_id.as_deref())? {
                    allowed_sessions = Some(match allowed_sessions {
                        Some(list) => list.into_iter().filter(|id| *id == session_id).collect(),
                        None => vec![session_id],
                    });
                }
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
                let representation =
                    context::representation(&*self.store, self.semantic.as_ref(), &workspace_id, &options).await?;
                Ok(pb::GetRepresentationResponse { representation })
            }
            .await,
        )
    }

    async fn get_peer_card(&self, request: Request<pb::GetPeerCardRequest>) -> RpcResult<pb::PeerCardResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let observer = validate::reference_id("peer_id", &request.peer_id)?;
                let observed = optional_id("target", request.target.as_deref())?.unwrap_or_else(|| observer.clone());
                let card = self.store.get_peer_card(&workspace_id, &observer, &observed).await?;
                Ok(pb::PeerCardResponse {
                    exists: card.is_some(),
                    peer_card: card.unwrap_or_default(),
                })
            }
            .await,
        )
    }

    async fn list_conclusions(
        &self,
        request: Request<pb::ListConclusionsRequest>,
    ) -> RpcResult<pb::ListConclusionsResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let filter = parse_filters(&filter::CONCLUSION, request.filters)?;
                let page = PageRequest::from_wire(request.page, request.size, request.reverse)?;
                Ok(paged_response!(
                    ListConclusionsResponse,
                    self.store.list_conclusions(&workspace_id, &filter, page).await?
                ))
            }
            .await,
        )
    }

    async fn query_conclusions(
        &self,
        request: Request<pb::QueryConclusionsRequest>,
    ) -> RpcResult<pb::QueryConclusionsResponse> {
        reply(self.query_conclusions(request.into_inner()).await)
    }

    async fn list_webhooks(&self, request: Request<pb::ListWebhooksRequest>) -> RpcResult<pb::ListWebhooksResponse> {
        let request = request.into_inner();
        reply(
            async {
                let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
                let page = PageRequest::from_wire(request.page, request.size, false)?;
                Ok(paged_response!(
                    ListWebhooksResponse,
                    self.store.list_webhooks(&workspace_id, page).await?
                ))
            }
            .await,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roncho_core::model::Message;

    fn message(id: &str, peer: &str) -> Message {
        Message {
            id: id.into(),
            workspace_id: "w".into(),
            session_id: "s".into(),
            peer_id: peer.into(),
            content: String::new(),
            metadata: Default::default(),
            created_at: 0,
            token_count: 1,
            seq_in_session: 0,
        }
    }

    fn ids(messages: &[Message]) -> Vec<&str> {
        messages.iter().map(|m| m.id.as_str()).collect()
    }

    #[test]
    fn named_peers_reorder_candidates_without_adding_or_dropping() {
        let full_text = vec![message("a", "bob"), message("b", "alice"), message("c", "bob")];
        let semantic = vec![message("d", "bob"), message("b", "alice"), message("e", "alice")];
        let plain = fuse(vec![full_text.clone(), semantic.clone()], &[]);
        assert_eq!(ids(&plain)[0], "b", "in both lists");
        let named = fuse(vec![full_text, semantic], &["alice".to_owned()]);
        assert_eq!(ids(&named)[..2], ["b", "e"], "alice's messages first");
        let mut before = ids(&plain);
        let mut after = ids(&named);
        before.sort_unstable();
        after.sort_unstable();
        assert_eq!(before, after);
    }

    #[test]
    fn peer_names_are_matched_as_whole_words() {
        assert_eq!(
            lower_words("What did Caroline-Smith say?"),
            ["what", "did", "caroline", "smith", "say"]
        );
        let words = lower_words("When did caroline smith paint?");
        let id = lower_words("Caroline_Smith");
        assert!(words.windows(id.len()).any(|w| w == id.as_slice()));
        let carol = lower_words("Carol");
        assert!(!words.windows(carol.len()).any(|w| w == carol.as_slice()));
    }
}
