//! The tools over what roncho knows (chat, peer cards, representations,
//! conclusions, dreams and the queue) and the `memory` profile's four.

use http::Method;
use serde_json::{Map, Value, json};

use crate::context::{
    Args, Context, Defaults, Failure, MEMORY_SESSION, Output, Result, kind, peer_path, session_path, workspace_path,
};
use crate::resources::{SCOPED_FILTER_KEYS, add_messages};
use crate::shapes::{camel_key, page, pick, text_or};
use crate::upstream::{Call, segment};

pub(crate) const REASONING_LEVELS: [&str; 5] = ["minimal", "low", "medium", "high", "max"];

/// `chat`, and the memory profile's `ask`.
pub(crate) async fn chat(context: Context<'_>, args: &Args<'_>, peer_field: &str) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, peer_field)?;
    let query = args.query("query")?;
    let mut body = json!({ "query": query, "stream": false });
    if let Some(target) = args.id("target_peer_id")? {
        body["target"] = target.into();
    }
    if let Some(session) = args.id("session_id")? {
        body["session_id"] = session.into();
    }
    if let Some(level) = args.string("reasoning_level")? {
        if !REASONING_LEVELS.contains(&level) {
            return Err(args.invalid(format!(
                "`reasoning_level`: expected one of {}, received `{level}`",
                REASONING_LEVELS.join(", ")
            )));
        }
        body["reasoning_level"] = level.into();
    }
    context.open_peer(&workspace, &peer).await?;
    let reply = context
        .json(Call::post(peer_path(&workspace, &peer, "/chat"), body))
        .await?;
    Ok(Output::Text(text_or(&reply["content"], "None")))
}

pub(crate) async fn get_peer_card(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, "peer_id")?;
    let target = args.id("target_peer_id")?;
    context.open_peer(&workspace, &peer).await?;
    let reply = context
        .json(Call::get(peer_path(&workspace, &peer, "/card")).query("target", target))
        .await?;
    Ok(match &reply["peer_card"] {
        Value::Null => Output::Text("No peer card found.".to_owned()),
        card => Output::Json(card.clone()),
    })
}

pub(crate) async fn set_peer_card(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, "peer_id")?;
    let target = args.id("target_peer_id")?;
    let card = args.array("peer_card")?;
    if let Some(item) = card.iter().find(|item| !item.is_string()) {
        return Err(args.invalid(format!("`peer_card`: expected strings, received {}", kind(item))));
    }
    context.open_peer(&workspace, &peer).await?;
    let call = Call::new(Method::PUT, peer_path(&workspace, &peer, "/card"))
        .query("target", target)
        .body(json!({ "peer_card": card }));
    let reply = context.json(call).await?;
    Ok(match &reply["peer_card"] {
        Value::Null => Output::Text("Peer card set successfully".to_owned()),
        card => Output::Json(card.clone()),
    })
}

pub(crate) async fn get_peer_context(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, "peer_id")?;
    let target = args.id("target_peer_id")?;
    let search_query = args.string("search_query")?;
    let max_conclusions = args.integer("max_conclusions", 1, 100)?;
    let tokens = args.integer("tokens", i64::MIN, i64::MAX)?;
    context.open_peer(&workspace, &peer).await?;
    let call = Call::get(peer_path(&workspace, &peer, "/context"))
        .query("target", target)
        .query("search_query", search_query)
        .query("max_conclusions", max_conclusions)
        .query("tokens", tokens);
    let reply = context.json(call).await?;
    let mut fields = vec!["peer_id", "target_id", "representation", "peer_card"];
    if reply.get("omitted").is_some() {
        fields.push("omitted");
    }
    Ok(Output::Json(pick(&reply, &fields)))
}

pub(crate) async fn get_representation(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, "peer_id")?;
    let mut body = json!({});
    if let Some(session) = args.id("session_id")? {
        body["session_id"] = session.into();
    }
    if let Some(target) = args.id("target_peer_id")? {
        body["target"] = target.into();
    }
    if let Some(query) = args.string("search_query")? {
        body["search_query"] = query.into();
    }
    if let Some(max) = args.integer("max_conclusions", 1, 100)? {
        body["max_conclusions"] = max.into();
    }
    if let Some(tokens) = args.integer("tokens", i64::MIN, i64::MAX)? {
        body["tokens"] = tokens.into();
    }
    context.open_peer(&workspace, &peer).await?;
    let reply = context
        .json(Call::post(peer_path(&workspace, &peer, "/representation"), body))
        .await?;
    let mut text = reply["representation"].as_str().unwrap_or_default().to_owned();
    if let Some(left_out) = reply["omitted"]["conclusions"].as_i64() {
        text.push_str(&format!(
            "\n\n({left_out} less important conclusions left out to fit `tokens`.)"
        ));
    }
    Ok(Output::Text(text))
}

/// The observer (`peer_id`) and the observed (`target_peer_id`, else the
/// observer), the observer got or created.
pub(crate) async fn pair(context: Context<'_>, args: &Args<'_>, workspace: &str) -> Result<(String, String)> {
    let observer = context.peer(args, "peer_id")?;
    let observed = args
        .id("target_peer_id")?
        .map_or_else(|| observer.clone(), str::to_owned);
    context.open_peer(workspace, &observer).await?;
    Ok((observer, observed))
}

pub(crate) async fn list_conclusions(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let (observer, observed) = pair(context, args, &workspace).await?;
    let call = Call::post(
        workspace_path(&workspace, "/conclusions/list"),
        json!({ "filters": { "observer_id": observer, "observed_id": observed } }),
    )
    .query("page", Some(1))
    .query("size", Some(50));
    let reply = context.json(call).await?;
    Ok(Output::Json(page(&reply, "conclusions", |conclusion| {
        pick(
            conclusion,
            &[
                "id",
                "content",
                "observer_id",
                "observed_id",
                "session_id",
                "created_at",
            ],
        )
    })))
}

pub(crate) async fn query_conclusions(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let query = args.required("query")?;
    let top_k = args.integer("top_k", 1, 100)?.unwrap_or(10);
    let extra = args.object("filters")?;
    if let Some(key) = extra.and_then(|extra| extra.keys().find(|key| SCOPED_FILTER_KEYS.contains(&key.as_str()))) {
        return Err(Failure::Failed(format!(
            "filters may not set `{key}`: peer_id and target_peer_id choose the observer and the observed"
        )));
    }
    let (observer, observed) = pair(context, args, &workspace).await?;
    let mut filters = json!({ "observer_id": observer, "observed_id": observed });
    for (key, value) in extra.into_iter().flatten() {
        filters[key] = value.clone();
    }
    let reply = context
        .json(Call::post(
            workspace_path(&workspace, "/conclusions/query"),
            json!({ "query": query, "top_k": top_k, "filters": filters }),
        ))
        .await?;
    let found: Vec<Value> = reply
        .as_array()
        .map(|found| {
            found
                .iter()
                .map(|c| {
                    pick(
                        c,
                        &[
                            "id",
                            "content",
                            "level",
                            "observer_id",
                            "observed_id",
                            "session_id",
                            "created_at",
                        ],
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Output::Json(Value::Array(found)))
}

pub(crate) async fn create_conclusions(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let observer = context.peer(args, "peer_id")?;
    let observed = args
        .id("target_peer_id")?
        .ok_or_else(|| args.invalid("`target_peer_id` is required".to_owned()))?;
    let session = args.id("session_id")?;
    let contents = args.array("conclusions")?;
    let mut conclusions = Vec::with_capacity(contents.len());
    for content in contents {
        let Some(content) = content.as_str() else {
            return Err(args.invalid(format!(
                "`conclusions[]`: expected a string, received {}",
                kind(content)
            )));
        };
        conclusions.push(json!({
            "content": content,
            "session_id": session,
            "observer_id": observer,
            "observed_id": observed,
        }));
    }
    context.open_peer(&workspace, &observer).await?;
    context
        .send(Call::post(
            workspace_path(&workspace, "/conclusions"),
            json!({ "conclusions": conclusions }),
        ))
        .await?;
    let count = contents.len();
    let noun = if count == 1 { "conclusion" } else { "conclusions" };
    Ok(Output::Text(format!("Created {count} {noun} successfully")))
}

pub(crate) async fn delete_conclusion(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let observer = context.peer(args, "peer_id")?;
    args.id("target_peer_id")?
        .ok_or_else(|| args.invalid("`target_peer_id` is required".to_owned()))?;
    let id = args.required("conclusion_id")?;
    context.open_peer(&workspace, &observer).await?;
    context
        .send(Call::new(
            Method::DELETE,
            workspace_path(&workspace, &format!("/conclusions/{}", segment(id))),
        ))
        .await?;
    Ok(Output::Text("Conclusion deleted successfully".to_owned()))
}

pub(crate) async fn schedule_dream(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let observer = context.peer(args, "peer_id")?;
    let observed = args
        .id("target_peer_id")?
        .map_or_else(|| observer.clone(), str::to_owned);
    let mut body = json!({ "observer": observer, "observed": observed, "dream_type": "omni" });
    if let Some(session) = args.id("session_id")? {
        body["session_id"] = session.into();
    }
    context.open_workspace(&workspace).await?;
    context
        .send(Call::post(workspace_path(&workspace, "/schedule_dream"), body))
        .await?;
    Ok(Output::Text("Dream scheduled successfully".to_owned()))
}

pub(crate) async fn get_queue_status(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    context.open_workspace(&workspace).await?;
    let reply = context
        .json(Call::get(workspace_path(&workspace, "/queue/status")))
        .await?;
    let counts = |value: &Value| {
        let mut out = Map::new();
        for key in [
            "session_id",
            "total_work_units",
            "completed_work_units",
            "in_progress_work_units",
            "pending_work_units",
        ] {
            if let Some(found) = value.get(key) {
                out.insert(camel_key(key), found.clone());
            }
        }
        out
    };
    let mut status = counts(&reply);
    if let Some(sessions) = reply["sessions"].as_object() {
        let sessions = sessions
            .iter()
            .map(|(key, session)| (key.clone(), Value::Object(counts(session))))
            .collect();
        status.insert("sessions".to_owned(), Value::Object(sessions));
    }
    Ok(Output::Json(Value::Object(status)))
}

pub(crate) async fn remember(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let defaults = Defaults {
        session: context
            .defaults
            .session
            .clone()
            .or_else(|| Some(MEMORY_SESSION.to_owned())),
        ..context.defaults.clone()
    };
    let context = Context {
        defaults: &defaults,
        ..context
    };
    let written = add_messages(context, args, "session_id").await?;
    Ok(Output::Json(json!({
        "session_id": context.session(args, "session_id")?,
        "message_ids": written.iter().map(|message| message["id"].clone()).collect::<Vec<_>>(),
    })))
}

/// Budget of `recall` when none is given, in tokens.
pub(crate) const RECALL_TOKENS: i64 = 1_500;

pub(crate) async fn recall(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let query = args.query("query")?;
    let peer = match args.id("peer_id")? {
        Some(peer) => Some(peer.to_owned()),
        None => context.defaults.peer.clone(),
    };
    let session = args.id("session_id")?;
    let budget = args.integer("max_tokens", 50, 100_000)?.unwrap_or(RECALL_TOKENS);
    let search = |path: String| async move {
        Ok::<_, Failure>(
            context
                .send(Call::post(path, json!({ "query": query, "limit": 20 })))
                .await?,
        )
    };
    let messages = async {
        match session {
            Some(session) => search(session_path(&workspace, session, "/search")).await,
            None => match (search(workspace_path(&workspace, "/search")).await, &peer) {
                // A peer key searches what its peer wrote (the edge refuses it
                // the workspace with Honcho's 401 and the reason).
                (Err(Failure::Api(error)), Some(peer)) if matches!(error.status, 401 | 403) => {
                    search(peer_path(&workspace, peer, "/search")).await
                }
                (found, _) => found,
            },
        }
    };
    let about = async {
        let Some(peer) = &peer else { return Ok(Value::Null) };
        let call = Call::get(peer_path(&workspace, peer, "/context"))
            .query("search_query", Some(query))
            .query("max_conclusions", Some(25));
        match context.json(call).await {
            // A peer not seen yet has nothing to tell.
            Err(Failure::Api(error)) if error.status == 404 => Ok(Value::Null),
            other => other,
        }
    };
    let (messages, about) = futures::try_join!(messages, about)?;
    let mut text = Recollection::new(budget);
    if let Some(card) = about["peer_card"].as_array().filter(|card| !card.is_empty()) {
        text.heading(&format!("Peer card of {}", peer.as_deref().unwrap_or_default()));
        for fact in card {
            text.line(&format!("- {}", fact.as_str().unwrap_or_default()));
        }
    }
    if let Some(representation) = about["representation"].as_str().filter(|text| !text.trim().is_empty()) {
        text.heading(&format!("What is known about {}", peer.as_deref().unwrap_or_default()));
        for line in representation.lines() {
            text.line(line);
        }
    }
    let found = messages
        .body
        .as_ref()
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    text.heading("Messages that match");
    if let Some(reason) = &messages.degraded {
        text.line(&format!("(matched by words only: {reason})"));
    }
    if found.is_empty() {
        text.line("(none)");
    }
    for message in found {
        text.line(&format!(
            "- [{}] {} in {} (message {}): {}",
            message["created_at"].as_str().unwrap_or_default(),
            message["peer_id"].as_str().unwrap_or_default(),
            message["session_id"].as_str().unwrap_or_default(),
            message["id"].as_str().unwrap_or_default(),
            message["content"].as_str().unwrap_or_default(),
        ));
    }
    Ok(Output::Text(text.finish()))
}

/// Text under a token budget: lines are added while they fit; what does
/// not fit is counted at the end.
pub(crate) struct Recollection {
    text: String,
    left: i64,
    dropped: usize,
}

impl Recollection {
    pub(crate) fn new(budget: i64) -> Self {
        Self {
            text: String::new(),
            left: budget,
            dropped: 0,
        }
    }

    pub(crate) fn heading(&mut self, title: &str) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.push(&format!("## {title}"));
    }

    pub(crate) fn line(&mut self, line: &str) {
        self.push(line);
    }

    pub(crate) fn push(&mut self, line: &str) {
        let cost = roncho_core::tokens::count(line) + 1;
        if cost > self.left {
            self.dropped += 1;
            return;
        }
        self.left -= cost;
        self.text.push_str(line);
        self.text.push('\n');
    }

    pub(crate) fn finish(mut self) -> String {
        if self.dropped > 0 {
            self.text.push_str(&format!(
                "\n({} more lines left out to stay within max_tokens)\n",
                self.dropped
            ));
        }
        self.text
    }
}

pub(crate) async fn forget(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let message = args.string("message_id")?;
    let session = args.id("session_id")?;
    let conclusion = args.string("conclusion_id")?;
    let receipt = match (message, session, conclusion) {
        (Some(message), _, None) => {
            let session = context.session(args, "session_id")?;
            let path = session_path(&workspace, &session, &format!("/messages/{}", segment(message)));
            context.json(Call::new(Method::DELETE, path)).await?
        }
        (None, Some(session), None) => {
            let reply = context
                .send(Call::new(Method::DELETE, session_path(&workspace, session, "")))
                .await?;
            let Some(receipt) = reply.receipt else {
                return Ok(Output::Json(
                    json!({ "erased": { "kind": "session", "session_id": session } }),
                ));
            };
            context
                .json(Call::get(workspace_path(
                    &workspace,
                    &format!("/erasures/{}", segment(&receipt)),
                )))
                .await?
        }
        (None, None, Some(conclusion)) => {
            let path = workspace_path(&workspace, &format!("/conclusions/{}", segment(conclusion)));
            context.send(Call::new(Method::DELETE, path)).await?;
            json!({ "erased": { "kind": "conclusion", "conclusion_id": conclusion } })
        }
        _ => {
            return Err(args.invalid(
                "name one thing to forget: message_id (with session_id), session_id alone, or conclusion_id".to_owned(),
            ));
        }
    };
    Ok(Output::Json(receipt))
}
