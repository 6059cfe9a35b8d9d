//! What roncho knows: search, context, representations, peer cards,
//! summaries, conclusions, chat, the queue and dreams.

use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use http::{HeaderValue, StatusCode};
use roncho_core::{Caller, Error};
use roncho_ingest as ingest;
use roncho_recall::{self as recall, Omitted};
use serde_json::{Value, json};

use super::reply::{Reply, idempotency_key, ok};
use crate::Rest;
use crate::error::RestError;
use crate::extract::{Body, Query};
use crate::wire::{self, ListBody, PageQuery};

/// Searches as the three search routes do: the workspace, one peer's
/// messages or one session's. Honcho answers a bare list; how the search
/// ran (`hybrid`, or `full_text` and why) is in `x-roncho-search-mode` and
/// `x-roncho-degraded-reason`, never silent; why each result was found in
/// `x-roncho-search-matches` (`id=words+meaning@2`: by its words, and by
/// meaning at its third passage); and how far meaning is behind the
/// workspace's writes in `x-roncho-meaning-lag` (`messages=12; seconds=3.4`,
/// `messages=1000+` for at least).
pub(super) async fn search(
    rest: Rest,
    caller: Caller,
    workspace_id: String,
    scope: (Option<String>, Option<String>),
    options: wire::SearchOptions,
) -> Reply {
    let (session_id, peer_id) = scope;
    // Honcho's range; over gRPC 0 asks for the default.
    if options.limit < 1 {
        return Err(Error::invalid("limit", "must be at least 1").into());
    }
    // Honcho forces the path's session or peer into the filters: a
    // `session_id` or `peer_id` there is replaced by the path's, not ANDed
    // with it (honcho-v3 §3, routes 17 and 31).
    let mut filters = options.filters;
    if let Some(filters) = filters.as_mut() {
        if session_id.is_some() {
            filters.remove("session_id");
        }
        if peer_id.is_some() {
            filters.remove("peer_id");
        }
    }
    let request = recall::SearchMessages {
        workspace_id,
        session_id,
        peer_id,
        query: options.query,
        filters,
        limit: options.limit,
        scopes: wire::scopes(options.scope)?,
    };
    let results = call!(rest.recall, caller, request, search_messages);
    let messages: Vec<wire::Message> = results.messages.into_iter().map(wire::Message::from).collect();
    let mut response = Json(messages).into_response();
    let headers = response.headers_mut();
    headers.insert("x-roncho-search-mode", HeaderValue::from_static(results.mode.name()));
    if let Ok(value) = HeaderValue::from_str(&matches_text(&results.matches)) {
        headers.insert("x-roncho-search-matches", value);
    }
    if let Some(lag) = results.meaning_lag {
        let more = if lag.at_least { "+" } else { "" };
        let seconds = lag.seconds(roncho_core::model::now_micros());
        let text = format!("messages={}{more}; seconds={seconds:.1}", lag.messages);
        if let Ok(value) = HeaderValue::from_str(&text) {
            headers.insert("x-roncho-meaning-lag", value);
        }
    }
    if !results.degraded_reason.is_empty() {
        let reason: String = results
            .degraded_reason
            .chars()
            .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' })
            .collect();
        if let Ok(value) = HeaderValue::from_str(&reason) {
            headers.insert("x-roncho-degraded-reason", value);
        }
    }
    Ok(response)
}

/// The longest `x-roncho-search-matches`: a proxy's default buffer for a
/// response's head is 4 KiB (nginx), and the other headers need room.
const MATCHES_HEADER_BYTES: usize = 2_048;

/// Why each result was found, as many as fit [`MATCHES_HEADER_BYTES`],
/// then how many more there are (`+12 more`).
fn matches_text(matches: &[recall::SearchMatch]) -> String {
    let mut text = String::new();
    for (at, found) in matches.iter().enumerate() {
        let entry = match_text(found);
        let left = matches.len() - at;
        if text.len() + entry.len() + 16 > MATCHES_HEADER_BYTES {
            text.push_str(&format!(", +{left} more"));
            break;
        }
        if at > 0 {
            text.push_str(", ");
        }
        text.push_str(&entry);
    }
    text
}

/// One result's explanation as `x-roncho-search-matches` gives it.
fn match_text(found: &recall::SearchMatch) -> String {
    let mut by = Vec::with_capacity(2);
    if found.by_words {
        by.push("words".to_owned());
    }
    match found.by_meaning {
        Some(0) => by.push("meaning".to_owned()),
        Some(passage) => by.push(format!("meaning@{passage}")),
        None => {}
    }
    if by.is_empty() {
        // Ranked by what the turns beside it matched.
        by.push("neighbour".to_owned());
    }
    format!("{}={}", found.message_id, by.join("+"))
}

pub(super) async fn search_workspace(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(options): Body<wire::SearchOptions>,
) -> Reply {
    search(rest, caller, workspace_id, (None, None), options).await
}

pub(super) async fn search_peer(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(options): Body<wire::SearchOptions>,
) -> Reply {
    search(rest, caller, workspace_id, (None, Some(peer_id)), options).await
}

pub(super) async fn search_session(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Body(options): Body<wire::SearchOptions>,
) -> Reply {
    search(rest, caller, workspace_id, (Some(session_id), None), options).await
}

pub(super) async fn queue_status(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Query(query): Query<wire::QueueQuery>,
) -> Reply {
    let request = roncho_deriver::GetQueueStatus {
        workspace_id,
        observer_id: query.observer_id,
        sender_id: query.sender_id,
        session_id: query.session_id,
        include_history: query.history,
    };
    let report = call!(rest.deriver, caller, request, get_queue_status);
    ok(wire::QueueStatus::from(report))
}

/// Runs a workspace's dead work again from its first attempt (roncho's
/// route; an admin key, or the admin key of the workspace's tenant): 200
/// with how many tasks.
pub(super) async fn retry_failed_work(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<Option<wire::RetryOptions>>,
) -> Reply {
    let body = body.unwrap_or_default();
    let request = roncho_deriver::RetryFailedWork {
        workspace_id,
        session_id: body.session_id,
        task_type: body.task_type,
    };
    let retried = call!(rest.deriver, caller, request, retry_failed_work);
    ok(json!({ "retried": retried }))
}

/// 204, as Honcho answers; a dream already pending for the pair is not an error.
pub(super) async fn schedule_dream(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<wire::ScheduleDream>,
) -> Reply {
    let request = roncho_dreamer::ScheduleDream {
        workspace_id,
        observer: body.observer,
        observed: body.observed,
        dream_type: body.dream_type,
        session_id: body.session_id,
        rebuild: body.rebuild,
    };
    let scheduled = rest
        .run(
            rest.dreamer.clone(),
            "this process does not run the dreamer role; send this route to one that does (--roles dreamer)",
            caller,
            request,
            |api, request| async move { api.schedule_dream(request).await },
        )
        .await;
    match scheduled {
        Ok(_) => Ok(StatusCode::NO_CONTENT.into_response()),
        // No dream model: Honcho answers 400 when dreams are disabled.
        Err(RestError::Domain(Error::FailedPrecondition(reason))) => {
            Err(RestError::Http(StatusCode::BAD_REQUEST, reason))
        }
        Err(error) => Err(error),
    }
}

pub(super) async fn get_peer_card(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(query): Query<wire::TargetQuery>,
) -> Reply {
    let request = recall::GetPeerCard {
        workspace_id,
        peer_id,
        target: query.target,
    };
    let card = call!(rest.recall, caller, request, get_peer_card);
    ok(json!({ "peer_card": card }))
}

pub(super) async fn set_peer_card(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(query): Query<wire::TargetQuery>,
    Body(body): Body<wire::PeerCardSet>,
) -> Reply {
    let request = ingest::SetPeerCard {
        workspace_id,
        peer_id,
        target: query.target,
        peer_card: body.peer_card,
    };
    let card = call!(rest.ingest, caller, request, set_peer_card);
    ok(json!({ "peer_card": card }))
}

pub(super) async fn representation(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(body): Body<Option<wire::RepresentationOptions>>,
) -> Reply {
    let body = body.unwrap_or_default();
    let curation = body.curation;
    let request = recall::GetRepresentation {
        workspace_id,
        peer_id,
        session_id: body.session_id,
        filters: body.filters,
        target: curation.target,
        search_query: curation.search_query,
        search_top_k: curation.search_top_k,
        search_max_distance: curation.search_max_distance,
        include_most_frequent: curation.include_most_frequent,
        max_conclusions: curation.max_conclusions,
        scopes_as_list: wire::scopes_as_list(&body.scope),
        scopes: wire::scopes(body.scope)?,
        tokens: curation.tokens,
    };
    let representation = call!(rest.recall, caller, request, get_representation);
    let mut reply = json!({ "representation": representation.markdown });
    with_omitted(&mut reply, representation.omitted);
    ok(reply)
}

pub(super) async fn peer_context(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Query(query): Query<wire::Curation>,
) -> Reply {
    let request = recall::GetPeerContext {
        workspace_id,
        peer_id,
        target: query.target,
        search_query: query.search_query,
        search_top_k: query.search_top_k,
        search_max_distance: query.search_max_distance,
        include_most_frequent: query.include_most_frequent,
        max_conclusions: query.max_conclusions,
        tokens: query.tokens,
    };
    let context = call!(rest.recall, caller, request, get_peer_context);
    let mut reply = json!({
        "peer_id": context.peer_id,
        "target_id": context.target_id,
        "representation": context.representation,
        "peer_card": context.peer_card,
    });
    with_omitted(&mut reply, context.omitted);
    ok(reply)
}

/// Beyond Honcho's shape, only when a budget left something out: what it left out.
fn with_omitted(reply: &mut Value, omitted: Omitted) {
    if let Some(omitted) = OmittedReply::of(omitted) {
        reply["omitted"] = json!(omitted);
    }
}

/// Session context. Its query repeats `sessions` (an allowlist), which
/// only a pair list reads, so the query is read as one.
pub(super) async fn session_context(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Reply {
    let mut request = recall::GetSessionContext {
        workspace_id,
        session_id,
        ..Default::default()
    };
    // A parameter given twice takes its last value, as Starlette's; only
    // `sessions` gathers each.
    let mut seen = std::collections::HashSet::new();
    let mut pairs: Vec<(String, String)> = pairs
        .into_iter()
        .rev()
        .filter(|(key, _)| key == "sessions" || seen.insert(key.clone()))
        .collect();
    pairs.reverse();
    for (key, value) in pairs {
        // Refused in FastAPI's shape: the parameter in `loc`, its value as `input`.
        let refuse = |field: &str, kind: &str| {
            crate::error::RestError::schema(
                "value_error",
                vec![json!("query"), json!(field)],
                format!("Input should be a valid {kind}"),
                json!(value),
            )
        };
        let number = |field: &str| value.parse::<i32>().map_err(|_| refuse(field, "integer"));
        let flag = |field: &str| wire::parse_bool(&value).ok_or_else(|| refuse(field, "boolean"));
        match key.as_str() {
            "tokens" => request.tokens = Some(number("tokens")?),
            "summary" | "include_summary" => request.summary = Some(flag(key.as_str())?),
            "search_query" => request.search_query = Some(value),
            "peer_target" => request.peer_target = Some(value),
            "peer_perspective" => request.peer_perspective = Some(value),
            "sessions" => request.sessions.push(value),
            "scope" => request.scope = Some(value),
            "limit_to_session" => request.limit_to_session = flag("limit_to_session")?,
            "search_top_k" => request.search_top_k = Some(number("search_top_k")?),
            "search_max_distance" => {
                let distance = value
                    .parse::<f64>()
                    .map_err(|_| refuse("search_max_distance", "number"))?;
                request.search_max_distance = Some(distance);
            }
            "include_most_frequent" => request.include_most_frequent = Some(flag("include_most_frequent")?),
            "max_conclusions" => request.max_conclusions = Some(number("max_conclusions")?),
            _ => {}
        }
    }
    let context = call!(rest.recall, caller, request, get_session_context);
    // Serialized straight from the rows, with no JSON tree between: an agent asks for it every turn.
    ok(SessionContextReply {
        id: context.id,
        messages: context.messages.into_iter().map(wire::Message::from).collect(),
        summary: context.summary.map(wire::Summary::from),
        peer_representation: context.representation,
        peer_card: context.peer_card,
        omitted: OmittedReply::of(context.omitted),
    })
}

/// Honcho's `SessionContext`, and what the budget left out when it left something.
#[derive(serde::Serialize)]
struct SessionContextReply {
    id: String,
    messages: Vec<wire::Message>,
    summary: Option<wire::Summary>,
    peer_representation: Option<String>,
    peer_card: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    omitted: Option<OmittedReply>,
}

#[derive(serde::Serialize)]
struct OmittedReply {
    conclusions: i64,
    peer_card_lines: i64,
}

impl OmittedReply {
    /// What was left out; `None` when nothing was.
    fn of(omitted: Omitted) -> Option<Self> {
        (omitted != Omitted::default()).then_some(Self {
            conclusions: omitted.conclusions,
            peer_card_lines: omitted.card_lines,
        })
    }
}

pub(super) async fn session_summaries(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, session_id)): Path<(String, String)>,
) -> Reply {
    let request = recall::GetSessionSummaries {
        workspace_id,
        session_id,
    };
    let summaries = call!(rest.recall, caller, request, get_session_summaries);
    ok(json!({
        "id": summaries.id,
        "short_summary": summaries.short.map(wire::Summary::from),
        "long_summary": summaries.long.map(wire::Summary::from),
    }))
}

/// 201 with the conclusions, as Honcho answers.
pub(super) async fn create_conclusions(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    headers: http::HeaderMap,
    Body(batch): Body<wire::ConclusionBatch>,
) -> Reply {
    let request = ingest::CreateConclusions {
        workspace_id,
        conclusions: batch
            .conclusions
            .into_iter()
            .map(|conclusion| ingest::ConclusionInput {
                content: conclusion.content,
                observer_id: conclusion.observer_id,
                observed_id: conclusion.observed_id,
                session_id: conclusion.session_id,
                source_message_ids: conclusion.source_message_ids.unwrap_or_default(),
            })
            .collect(),
        idempotency_key: idempotency_key(&headers),
    };
    let conclusions = call!(rest.ingest, caller, request, create_conclusions);
    let conclusions: Vec<wire::Conclusion> = conclusions.into_iter().map(wire::Conclusion::from).collect();
    Ok((StatusCode::CREATED, Json(conclusions)).into_response())
}

pub(super) async fn list_conclusions(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Query(page): Query<PageQuery>,
    Body(body): Body<Option<ListBody>>,
) -> Reply {
    let request = recall::ListConclusions {
        workspace_id,
        filters: body.unwrap_or_default().filters,
        paging: page.paging()?,
    };
    let page = call!(rest.recall, caller, request, list_conclusions);
    ok(wire::Page::<wire::Conclusion>::from(page))
}

pub(super) async fn query_conclusions(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(body): Body<wire::ConclusionQuery>,
) -> Reply {
    let request = recall::QueryConclusions {
        workspace_id,
        query: body.query,
        top_k: body.top_k,
        distance: body.distance,
        filters: body.filters,
    };
    let conclusions = call!(rest.recall, caller, request, query_conclusions);
    let conclusions: Vec<wire::Conclusion> = conclusions.into_iter().map(wire::Conclusion::from).collect();
    ok(conclusions)
}

/// 204, as Honcho answers.
/// One live conclusion (Honcho 3.1); 404 once deleted.
pub(super) async fn get_conclusion(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, conclusion_id)): Path<(String, String)>,
) -> Reply {
    let request = recall::GetConclusion {
        workspace_id,
        conclusion_id,
    };
    let conclusion = call!(rest.recall, caller, request, get_conclusion);
    ok(wire::Conclusion::from(conclusion))
}

pub(super) async fn delete_conclusion(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, conclusion_id)): Path<(String, String)>,
) -> Reply {
    let request = ingest::DeleteConclusion {
        workspace_id,
        conclusion_id,
    };
    call!(rest.ingest, caller, request, delete_conclusion);
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Chat about a peer: `{"content": …}`, or with `stream` Honcho's
/// server-sent events: `data: {"delta": {"content": …}, "done": false}`
/// per piece, then `data: {"done": true}`. An error after the stream began
/// ends it with `data: {"error": {"detail": …}, "done": true}`. With
/// `include_evidence`, `evidence` is on the reply or on the `done` event.
pub(super) async fn chat(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path((workspace_id, peer_id)): Path<(String, String)>,
    Body(options): Body<wire::ChatOptions>,
) -> Reply {
    let request = roncho_dialectic::Chat {
        workspace_id,
        peer_id,
        query: options.query,
        session_id: options.session_id,
        target: options.target,
        reasoning_level: options.reasoning_level,
        filters: options.filters,
        response_format: response_format(options.response_format)?,
        scopes_as_list: wire::scopes_as_list(&options.scope),
        scopes: wire::scopes(options.scope)?,
        include_evidence: options.include_evidence,
    };
    if !options.stream {
        let answer = call!(rest.dialectic, caller, request, chat);
        return ok(answer_json(&answer));
    }
    let pieces = call!(rest.dialectic, caller, request, chat_stream);
    Ok(events(pieces))
}

/// Honcho 3.1's workspace chat: the same answer from every peer's memory
/// of the workspace (a workspace key), streamed or not, with evidence.
pub(super) async fn workspace_chat(
    State(rest): State<Rest>,
    Extension(caller): Extension<Caller>,
    Path(workspace_id): Path<String>,
    Body(options): Body<wire::WorkspaceChatOptions>,
) -> Reply {
    let request = roncho_dialectic::Chat {
        workspace_id,
        query: options.query,
        session_id: options.session_id,
        reasoning_level: options.reasoning_level,
        response_format: response_format(options.response_format)?,
        scopes_as_list: wire::scopes_as_list(&options.scope),
        scopes: wire::scopes(options.scope)?,
        include_evidence: options.include_evidence,
        ..Default::default()
    };
    if !options.stream {
        let answer = call!(rest.dialectic, caller, request, workspace_chat);
        return ok(answer_json(&answer));
    }
    let pieces = call!(rest.dialectic, caller, request, workspace_chat_stream);
    Ok(events(pieces))
}

fn response_format(format: Option<Value>) -> Result<Option<serde_json::Map<String, Value>>, RestError> {
    match format {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(schema)) => Ok(Some(schema)),
        Some(_) => Err(Error::invalid("response_format", "must be a JSON Schema whose root is an object").into()),
    }
}

fn answer_json(answer: &roncho_dialectic::Answer) -> Value {
    let mut reply = json!({ "content": answer.content });
    if let Some(evidence) = &answer.evidence {
        reply["evidence"] = wire::evidence(evidence);
    }
    reply
}

/// An answer's pieces as server-sent events.
fn events(
    pieces: futures::stream::BoxStream<'static, roncho_core::Result<roncho_dialectic::ChatPiece>>,
) -> axum::response::Response {
    let events = futures::StreamExt::map(pieces, |piece| {
        let event = match piece {
            Ok(piece) if piece.done => match &piece.evidence {
                Some(evidence) => json!({"done": true, "evidence": wire::evidence(evidence)}),
                None => json!({"done": true}),
            },
            Ok(piece) => json!({"delta": {"content": piece.delta}, "done": false}),
            Err(error) => json!({"error": {"detail": error.to_string()}, "done": true}),
        };
        Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(format!("data: {event}\n\n")))
    });
    let mut response = axum::body::Body::from_stream(events).into_response();
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
