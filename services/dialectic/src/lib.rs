//! The dialectic role: natural-language answers about a peer from what an
//! observer knows ([`agent`]), at Honcho's five reasoning levels, each with
//! its own model (or none: extractive), reply budget and deadline.

use std::sync::Arc;
use std::time::Duration;

pub mod agent;
pub mod schema;
mod trace;

pub use trace::GetReasoningTrace;

use agent::{Ask, Level, LevelModel};
use futures::stream::BoxStream;
use roncho_agent::{AgentStore, ToolContext};
use roncho_core::model::JsonObject;
use roncho_core::{Error, Result, validate};
use roncho_search::{Semantic, context};
use serde_json::Value;

/// Longest question, in characters.
pub const MAX_QUERY_CHARS: usize = 10_000;

/// A question about `target` (the observer itself when unset), answered
/// from what `peer_id` knows; in a workspace chat, `peer_id` and `target`
/// are empty and every peer's memory answers.
#[derive(Debug, Clone, Default)]
pub struct Chat {
    pub workspace_id: String,
    pub peer_id: String,
    pub query: String,
    pub session_id: Option<String>,
    pub target: Option<String>,
    pub reasoning_level: String,
    /// Only `session_id`: the sessions the answer may draw on.
    pub filters: Option<JsonObject>,
    /// A JSON Schema (object root) the answer must follow.
    pub response_format: Option<JsonObject>,
    /// One scope: answer from the scope's memory of the target; several:
    /// from the peer's, limited to their sessions (not with `session_id`
    /// or `filters`).
    pub scopes: Vec<String>,
    /// `scopes` was sent as a list: even one reads as the peer's memory
    /// limited to its sessions (Honcho 3.1).
    pub scopes_as_list: bool,
    /// Returns what the answer read ([`Evidence`]) beside it.
    pub include_evidence: bool,
}

pub use roncho_agent::Evidence;

/// An answer (`None` when memory holds nothing to answer from), and what
/// it read when asked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub content: Option<String>,
    pub evidence: Option<Evidence>,
}

/// A piece of a streamed answer: text, then a last piece with `done` (and
/// the evidence, when asked).
#[derive(Debug, Clone, PartialEq)]
pub struct ChatPiece {
    pub delta: String,
    pub done: bool,
    pub evidence: Option<Evidence>,
}

/// Natural-language answers, as every edge calls them.
#[async_trait::async_trait]
pub trait DialecticApi: Send + Sync {
    /// Answers from a peer's memory.
    async fn chat(&self, request: Chat) -> Result<Answer>;
    /// Streams the final answer's pieces; an error ends the stream.
    async fn chat_stream(&self, request: Chat) -> Result<BoxStream<'static, Result<ChatPiece>>>;
    /// Answers from every peer's memory of the workspace (`peer_id` and `target` empty).
    async fn workspace_chat(&self, request: Chat) -> Result<Answer>;
    /// Streams a workspace chat's answer.
    async fn workspace_chat_stream(&self, request: Chat) -> Result<BoxStream<'static, Result<ChatPiece>>>;
    /// The trace an answer's evidence names (`NOT_FOUND` once erased or expired).
    async fn get_reasoning_trace(&self, request: GetReasoningTrace) -> Result<roncho_core::model::ReasoningTrace>;
}

/// The dialectic service.
#[derive(Clone)]
pub struct Dialectic {
    store: Arc<dyn AgentStore>,
    semantic: Option<Semantic>,
    models: [Option<LevelModel>; 5],
    deadlines: [Duration; 5],
    /// Where the traces of answers with evidence are kept (none: not kept).
    traces: Option<Arc<dyn roncho_core::store::Traces>>,
}

impl std::fmt::Debug for Dialectic {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Dialectic")
            .field("deadlines", &self.deadlines)
            .finish_non_exhaustive()
    }
}

impl Dialectic {
    /// Returns the service with no models: every level answers extractively.
    pub fn new(store: Arc<dyn AgentStore>, semantic: Option<Semantic>) -> Self {
        Self {
            store,
            semantic,
            models: Default::default(),
            deadlines: Level::ALL.map(Level::default_deadline),
            traces: None,
        }
    }

    /// Keeps the trace of every answer with evidence in `traces`.
    pub fn with_traces(mut self, traces: Arc<dyn roncho_core::store::Traces>) -> Self {
        self.traces = Some(traces);
        self
    }

    /// Answers `level` with this model and reply budget.
    pub fn with_model(mut self, level: Level, llm: Arc<dyn roncho_core::llm::Llm>, max_tokens: u32) -> Self {
        self.models[level.index()] = Some(LevelModel { llm, max_tokens });
        self
    }

    /// Gives `level` this deadline.
    pub fn with_deadline(mut self, level: Level, deadline: Duration) -> Self {
        self.deadlines[level.index()] = deadline;
        self
    }

    /// Checks `request` and resolves its scopes into whom the answer
    /// observes from and which sessions it may draw on.
    async fn ask(&self, request: Chat, whole_workspace: bool) -> Result<Ask> {
        let scopes = context::scope_ids("scope", &request.scopes)?;
        let scopes_as_list = request.scopes_as_list;
        if !scopes.is_empty()
            && (request.filters.is_some() || request.session_id.as_deref().is_some_and(|s| !s.is_empty()))
        {
            return Err(Error::invalid("scope", "cannot be combined with session_id or filters"));
        }
        let mut ask = Self::checked(request, whole_workspace)?;
        ask.instructions =
            context::custom_instructions(&*self.store, &ask.workspace, ask.session.as_deref(), &["dialectic"]).await?;
        if whole_workspace {
            // Scopes only bound the sessions a workspace chat reads.
            if !scopes.is_empty() {
                ask.allowed_sessions = Some(self.store.scope_session_ids(&ask.workspace, &scopes).await?);
            }
            return Ok(ask);
        }
        let (observer, allowed) =
            context::scoped_observer(&*self.store, &ask.workspace, &ask.observer, &scopes, scopes_as_list).await?;
        ask.observer = observer;
        if allowed.is_some() {
            ask.allowed_sessions = allowed;
        }
        Ok(ask)
    }

    fn checked(request: Chat, whole_workspace: bool) -> Result<Ask> {
        let workspace = validate::reference_id("workspace_id", &request.workspace_id)?;
        let (observer, target) = if whole_workspace {
            if !request.peer_id.is_empty() || request.target.as_deref().is_some_and(|t| !t.is_empty()) {
                return Err(Error::invalid("peer_id", "a workspace chat names no peer"));
            }
            (String::new(), String::new())
        } else {
            let observer = validate::reference_id("peer_id", &request.peer_id)?;
            context::refuse_scope_peer("peer_id", &observer)?;
            let target = match request.target.as_deref().filter(|target| !target.is_empty()) {
                Some(target) => validate::reference_id("target", target)?,
                None => observer.clone(),
            };
            context::refuse_scope_peer("target", &target)?;
            (observer, target)
        };
        let query = validate::strip_nul(&request.query);
        if query.trim().is_empty() {
            return Err(Error::invalid("query", "is required"));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(Error::invalid(
                "query",
                format!("is longer than {MAX_QUERY_CHARS} characters"),
            ));
        }
        let session = match request.session_id.filter(|session| !session.is_empty()) {
            Some(session) => Some(validate::reference_id("session_id", &session)?),
            None => None,
        };
        let response_format = match request.response_format {
            Some(object) => {
                schema::check_format(&object)?;
                Some(Value::Object(object))
            }
            None => None,
        };
        Ok(Ask {
            workspace,
            observer,
            target,
            query,
            session,
            allowed_sessions: context::session_allowlist(request.filters.as_ref())?,
            level: Level::parse(&request.reasoning_level)?,
            response_format,
            whole_workspace,
            instructions: None,
        })
    }

    /// Answers `ask`, sending the final answer's pieces to `sink` when
    /// streaming; bounded by the level's deadline.
    async fn answer(&self, ask: &Ask, sink: agent::Sink<'_>) -> Result<(Option<String>, roncho_agent::RunLog)> {
        let tools = if ask.whole_workspace {
            ToolContext::whole_workspace(
                self.store.clone(),
                self.semantic.clone(),
                &ask.workspace,
                ask.session.clone(),
            )
        } else {
            ToolContext::new(
                self.store.clone(),
                self.semantic.clone(),
                &ask.workspace,
                &ask.observer,
                &ask.target,
                ask.session.clone(),
            )
        }
        .with_allowed_sessions(ask.allowed_sessions.clone());
        let deadline = self.deadlines[ask.level.index()];
        let work = async {
            match &self.models[ask.level.index()] {
                Some(model) => agent::answer_with_model(&tools, ask, model, sink).await,
                None => {
                    let text = agent::answer_extractively(&tools, ask).await?;
                    if let (Some(sink), Some(text)) = (sink, &text) {
                        sink(text.clone());
                    }
                    Ok(text)
                }
            }
        };
        let text = tokio::time::timeout(deadline, work).await.map_err(|_| {
            Error::DeadlineExceeded(format!(
                "the {} level's answer took longer than {} s",
                ask.level.name(),
                deadline.as_secs_f32()
            ))
        })??;
        Ok((text, tools.log()))
    }

    /// What an answer read, with the id of its trace once kept (a trace
    /// that could not be kept is said in the log, and the answer stands).
    async fn evidence(
        &self,
        ask: &Ask,
        text: Option<&str>,
        log: roncho_agent::RunLog,
        started: std::time::Instant,
    ) -> Evidence {
        let model = self.models[ask.level.index()]
            .as_ref()
            .map(|model| model.llm.model_id().to_owned());
        let mut evidence = log.read.clone();
        if let Some(traces) = &self.traces {
            let trace = trace::trace_of(ask, model.as_deref(), &log, text, started.elapsed());
            match traces.save_trace(&trace).await {
                Ok(()) => evidence.reasoning_trace_id = Some(trace.id),
                Err(error) => tracing::warn!(%error, "the answer's reasoning trace was not kept"),
            }
        }
        evidence
    }

    /// Whether `ask` can be answered, checked before an answer (or its
    /// stream) begins, so a refusal is the reply's status: a response
    /// format needs a model; the workspace, or the observer and the target,
    /// must exist (NOT_FOUND otherwise, as Honcho answers an unknown target:
    /// an answer about a peer nobody has met would be made of other peers'
    /// words).
    async fn ready(&self, ask: &Ask) -> Result<()> {
        if ask.response_format.is_some() && self.models[ask.level.index()].is_none() {
            return Err(Error::FailedPrecondition(format!(
                "a response_format needs a model, and none is configured for the {} reasoning level (without one \
                 the answer is extractive text)",
                ask.level.name()
            )));
        }
        if ask.whole_workspace {
            return self.workspace_exists(&ask.workspace).await;
        }
        self.store
            .get_peer_card(&ask.workspace, &ask.observer, &ask.observer)
            .await?;
        if ask.target != ask.observer {
            self.store
                .get_peer_card(&ask.workspace, &ask.target, &ask.target)
                .await?;
        }
        Ok(())
    }

    /// NOT_FOUND for a workspace that does not exist.
    async fn workspace_exists(&self, workspace: &str) -> Result<()> {
        let by_id = serde_json::json!({ "id": workspace });
        let filter = roncho_core::filter::parse(&roncho_core::filter::WORKSPACE, by_id.as_object())?;
        let page = roncho_core::model::PageRequest::from_wire(1, 1, false)?;
        if self.store.list_workspaces(&filter, page).await?.items.is_empty() {
            return Err(Error::not_found("workspace", workspace));
        }
        Ok(())
    }

    async fn reply(&self, request: Chat, whole_workspace: bool) -> Result<Answer> {
        let include_evidence = request.include_evidence;
        let started = std::time::Instant::now();
        let ask = self.ask(request, whole_workspace).await?;
        self.ready(&ask).await?;
        let (content, log) = self.answer(&ask, None).await?;
        let evidence = match include_evidence {
            true => Some(self.evidence(&ask, content.as_deref(), log, started).await),
            false => None,
        };
        Ok(Answer { content, evidence })
    }

    async fn stream(&self, request: Chat, whole_workspace: bool) -> Result<BoxStream<'static, Result<ChatPiece>>> {
        let include_evidence = request.include_evidence;
        let started = std::time::Instant::now();
        let ask = self.ask(request, whole_workspace).await?;
        self.ready(&ask).await?;
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        let this = self.clone();
        // The answer runs after the reply's headers: in the request's span still.
        let span = tracing::Span::current();
        tokio::spawn(tracing::Instrument::instrument(
            async move {
                let pieces = sender.clone();
                let sink = move |delta: String| {
                    // A closed channel means the client went away; the select below stops the work.
                    let _ = pieces.send(Ok(ChatPiece {
                        delta,
                        done: false,
                        evidence: None,
                    }));
                };
                tokio::select! {
                    () = sender.closed() => tracing::debug!("chat stream cancelled by the client"),
                    result = this.answer(&ask, Some(&sink)) => {
                        let last = match result {
                            Ok((text, log)) => Ok(ChatPiece {
                                delta: String::new(),
                                done: true,
                                evidence: match include_evidence {
                                    true => Some(this.evidence(&ask, text.as_deref(), log, started).await),
                                    false => None,
                                },
                            }),
                            Err(error) => Err(error),
                        };
                        let _ = sender.send(last);
                    }
                }
            },
            span,
        ));
        Ok(Box::pin(tokio_stream::wrappers::UnboundedReceiverStream::new(receiver)))
    }
}

#[async_trait::async_trait]
impl DialecticApi for Dialectic {
    async fn chat(&self, request: Chat) -> Result<Answer> {
        self.reply(request, false).await
    }

    async fn chat_stream(&self, request: Chat) -> Result<BoxStream<'static, Result<ChatPiece>>> {
        self.stream(request, false).await
    }

    async fn workspace_chat(&self, request: Chat) -> Result<Answer> {
        self.reply(request, true).await
    }

    async fn workspace_chat_stream(&self, request: Chat) -> Result<BoxStream<'static, Result<ChatPiece>>> {
        self.stream(request, true).await
    }

    async fn get_reasoning_trace(&self, request: GetReasoningTrace) -> Result<roncho_core::model::ReasoningTrace> {
        let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
        let trace_id = validate::reference_id("trace_id", &request.trace_id)?;
        let Some(traces) = &self.traces else {
            return Err(Error::not_found("reasoning trace", trace_id));
        };
        traces.get_trace(&workspace_id, &trace_id).await
    }
}
