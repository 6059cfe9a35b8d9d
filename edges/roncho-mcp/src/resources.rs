//! The tools over workspaces, peers, sessions and messages.

use http::Method;
use serde_json::{Map, Value, json};

use crate::context::{Args, Context, Failure, Output, Result, kind, peer_path, session_path, valid_id, workspace_path};
use crate::shapes::{camel, ids, items, message, page, pick, workspace_summary};
use crate::upstream::{Call, segment};

pub(crate) async fn inspect_workspace(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let path = workspace_path(&workspace, "");
    let (found, peers, sessions) = futures::try_join!(
        context.json(Call::post("/v3/workspaces".to_owned(), json!({ "id": workspace }))),
        context.json(Call::post(format!("{path}/peers/list"), json!({}))),
        context.json(Call::post(format!("{path}/sessions/list"), json!({}))),
    )?;
    let configuration = match &found["configuration"] {
        Value::Null => json!({}),
        other => camel(other),
    };
    Ok(Output::Json(json!({
        "workspace_id": workspace,
        "metadata": if found["metadata"].is_null() { json!({}) } else { found["metadata"].clone() },
        "configuration": configuration,
        "peer_count": peers["total"],
        "peers": items(&peers).iter().map(ids).collect::<Vec<_>>(),
        "session_count": sessions["total"],
        "sessions": items(&sessions).iter().map(ids).collect::<Vec<_>>(),
    })))
}

pub(crate) async fn list_workspaces(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let page_number = args.integer("page", 1, i64::MAX)?;
    let size = args.integer("size", 1, 100)?;
    let call = Call::post("/v3/workspaces/list".to_owned(), json!({}))
        .query("page", page_number)
        .query("size", size);
    let reply = context.json(call).await?;
    Ok(Output::Json(page(&reply, "workspaces", workspace_summary)))
}

pub(crate) async fn create_workspace(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let mut body = json!({ "id": workspace });
    if let Some(metadata) = args.object("metadata")? {
        body["metadata"] = Value::Object(metadata.clone());
    }
    let reply = context.json(Call::post("/v3/workspaces".to_owned(), body)).await?;
    Ok(Output::Json(workspace_summary(&reply)))
}

pub(crate) const SCOPED_FILTER_KEYS: [&str; 4] = ["observer", "observed", "observer_id", "observed_id"];

pub(crate) async fn search(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let query = args.query("query")?;
    let peer = args.id("peer_id")?;
    let session = args.id("session_id")?;
    let limit = args.integer("message_limit", 0, 100)?.filter(|limit| *limit != 0);
    let message_filters = args.object("message_filters")?;
    let top_k = args.integer("conclusion_top_k", 1, 100)?;
    let conclusion_filters = args.object("conclusion_filters")?;
    match peer {
        Some(peer) => drop(context.open_peer(&workspace, peer).await?),
        None => drop(context.open_workspace(&workspace).await?),
    }
    let mut body = json!({ "query": query });
    if let Some(filters) = message_filters {
        body["filters"] = Value::Object(filters.clone());
    }
    if let Some(limit) = limit {
        body["limit"] = limit.into();
    }
    let messages = async {
        let path = match (session, peer) {
            (Some(session), _) => {
                context.open_session(&workspace, session).await?;
                session_path(&workspace, session, "/search")
            }
            (None, Some(peer)) => peer_path(&workspace, peer, "/search"),
            (None, None) => workspace_path(&workspace, "/search"),
        };
        Ok::<_, Failure>(context.send(Call::post(path, body)).await?)
    };
    let conclusions = async {
        let Some(peer) = peer else {
            return Ok(Vec::new());
        };
        let mut filters = json!({ "observer_id": peer, "observed_id": peer });
        if let Some(extra) = conclusion_filters {
            if extra.keys().any(|key| SCOPED_FILTER_KEYS.contains(&key.as_str())) {
                return Ok(Vec::new());
            }
            for (key, value) in extra {
                filters[key] = value.clone();
            }
        }
        let body = json!({ "query": query, "top_k": top_k.unwrap_or(10), "filters": filters });
        match context
            .json(Call::post(workspace_path(&workspace, "/conclusions/query"), body))
            .await
        {
            Ok(found) => Ok(found
                .as_array()
                .map(|found| {
                    found
                        .iter()
                        .map(|c| pick(c, &["id", "content", "level", "created_at"]))
                        .collect()
                })
                .unwrap_or_default()),
            Err(Failure::Api(error)) if conclusion_filters.is_some() && matches!(error.status, 400 | 422) => {
                Err(Failure::Api(error))
            }
            Err(error) => {
                tracing::debug!(?error, "conclusion search failed; answering with messages alone");
                Ok(Vec::new())
            }
        }
    };
    let (reply, conclusions) = futures::try_join!(messages, conclusions)?;
    let messages: Vec<Value> = reply
        .body
        .as_ref()
        .and_then(Value::as_array)
        .map(|found| found.iter().map(message).collect())
        .unwrap_or_default();
    let mut result = json!({ "messages": messages, "conclusions": conclusions });
    // Never a silently worse answer: roncho's addition to Honcho's shape,
    // present only when the search ran without meaning (no embedder, or it failed).
    if let Some(reason) = reply.degraded {
        result["degraded"] = reason.into();
    }
    Ok(Output::Json(result))
}

/// Which resource a metadata tool reads or writes: session over peer over
/// workspace. Returns its path and the get-or-create's reply.
pub(crate) async fn metadata_target(
    context: Context<'_>,
    args: &Args<'_>,
    workspace: &str,
) -> Result<(&'static str, String, Value)> {
    if let Some(session) = args.id("session_id")? {
        let found = context.open_session(workspace, session).await?;
        return Ok((
            "Session",
            session_path(workspace, session, ""),
            found.unwrap_or(Value::Null),
        ));
    }
    if let Some(peer) = args.id("peer_id")? {
        let found = context.open_peer(workspace, peer).await?;
        return Ok(("Peer", peer_path(workspace, peer, ""), found.unwrap_or(Value::Null)));
    }
    let found = context.open_workspace(workspace).await?;
    Ok(("Workspace", workspace_path(workspace, ""), found.unwrap_or(Value::Null)))
}

pub(crate) async fn get_metadata(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let (_, _, found) = metadata_target(context, args, &workspace).await?;
    if found.is_null() {
        return Err(Failure::Failed(
            "Permission denied: metadata is read by getting or creating the resource, which this key may not do"
                .to_owned(),
        ));
    }
    Ok(Output::Json(if found["metadata"].is_null() {
        json!({})
    } else {
        found["metadata"].clone()
    }))
}

pub(crate) async fn set_metadata(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let metadata = args
        .object("metadata")?
        .ok_or_else(|| args.invalid("`metadata` is required".to_owned()))?;
    let (what, path, _) = metadata_target(context, args, &workspace).await?;
    let call = Call::new(Method::PUT, path).body(json!({ "metadata": metadata }));
    context.send(call).await?;
    Ok(Output::Text(format!("{what} metadata set successfully")))
}

pub(crate) async fn create_peer(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let peer = context.peer(args, "peer_id")?;
    let mut body = json!({ "id": peer });
    if let Some(configuration) = args.object("configuration")? {
        let mut sent = Map::new();
        if let Some(observe) = configuration.get("observeMe") {
            if !observe.is_null() && !observe.is_boolean() {
                return Err(args.invalid(format!(
                    "`configuration.observeMe`: expected a boolean, received {}",
                    kind(observe)
                )));
            }
            sent.insert("observe_me".to_owned(), observe.clone());
        }
        body["configuration"] = Value::Object(sent);
    }
    context.open_workspace(&workspace).await?;
    let found = context
        .json(Call::post(workspace_path(&workspace, "/peers"), body))
        .await?;
    let mut reply = json!({ "peer_id": found["id"] });
    if let Value::Object(configuration) = &found["configuration"] {
        reply["configuration"] = match configuration.get("observe_me") {
            Some(observe) => json!({ "observeMe": observe }),
            None => json!({}),
        };
    }
    Ok(Output::Json(reply))
}

pub(crate) async fn list_peers(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    context.open_workspace(&workspace).await?;
    let reply = context
        .json(Call::post(workspace_path(&workspace, "/peers/list"), json!({})))
        .await?;
    Ok(Output::Json(page(&reply, "peers", ids)))
}

pub(crate) async fn create_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    context.open_workspace(&workspace).await?;
    let reply = context
        .json(Call::post(
            workspace_path(&workspace, "/sessions"),
            json!({ "id": session }),
        ))
        .await?;
    Ok(Output::Json(json!({ "session_id": reply["id"] })))
}

pub(crate) async fn list_sessions(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    context.open_workspace(&workspace).await?;
    let reply = context
        .json(Call::post(workspace_path(&workspace, "/sessions/list"), json!({})))
        .await?;
    Ok(Output::Json(page(&reply, "sessions", ids)))
}

pub(crate) async fn delete_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    context.open_session(&workspace, &session).await?;
    context
        .send(Call::new(Method::DELETE, session_path(&workspace, &session, "")))
        .await?;
    Ok(Output::Text("Session deleted successfully".to_owned()))
}

pub(crate) async fn clone_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let message = args.string("message_id")?;
    context.open_session(&workspace, &session).await?;
    let call = Call::new(Method::POST, session_path(&workspace, &session, "/clone")).query("message_id", message);
    let reply = context.json(call).await?;
    Ok(Output::Json(json!({ "session_id": reply["id"] })))
}

pub(crate) async fn add_peers_to_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let mut peers = Map::new();
    for item in args.array("peers")? {
        let (peer, configuration) = match item {
            Value::String(peer) => (peer.as_str(), Map::new()),
            Value::Object(entry) => {
                let Some(Value::String(peer)) = entry.get("peer_id") else {
                    return Err(args.invalid("`peers[].peer_id` is required".to_owned()));
                };
                let configuration = ["observe_me", "observe_others"]
                    .into_iter()
                    .filter_map(|key| entry.get(key).map(|value| (key.to_owned(), value.clone())))
                    .collect();
                (peer.as_str(), configuration)
            }
            other => {
                return Err(args.invalid(format!(
                    "`peers[]`: expected a string or an object, received {}",
                    kind(other)
                )));
            }
        };
        if !valid_id(peer) {
            return Err(Failure::Failed(format!(
                "peer id `{peer}` must be 1 to 512 letters, digits, `_` or `-`"
            )));
        }
        peers.insert(peer.to_owned(), Value::Object(configuration));
    }
    context.open_session(&workspace, &session).await?;
    context
        .send(Call::post(
            session_path(&workspace, &session, "/peers"),
            Value::Object(peers),
        ))
        .await?;
    Ok(Output::Text("Peers added to session successfully".to_owned()))
}

pub(crate) async fn remove_peers_from_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let peers = args.array("peer_ids")?;
    for peer in peers {
        match peer.as_str() {
            Some(peer) if valid_id(peer) => {}
            _ => {
                return Err(Failure::Failed(format!(
                    "peer id {peer} must be 1 to 512 letters, digits, `_` or `-`"
                )));
            }
        }
    }
    context.open_session(&workspace, &session).await?;
    let call =
        Call::new(Method::DELETE, session_path(&workspace, &session, "/peers")).body(Value::Array(peers.clone()));
    context.send(call).await?;
    Ok(Output::Text("Peers removed from session successfully".to_owned()))
}

pub(crate) async fn get_session_peers(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    context.open_session(&workspace, &session).await?;
    let reply = context
        .json(Call::get(session_path(&workspace, &session, "/peers")))
        .await?;
    Ok(Output::Json(
        items(&reply).iter().map(|peer| peer["id"].clone()).collect(),
    ))
}

pub(crate) async fn inspect_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    context.open_session(&workspace, &session).await?;
    let (peers, messages, summaries) = futures::try_join!(
        context.json(Call::get(session_path(&workspace, &session, "/peers"))),
        context.json(Call::post(
            session_path(&workspace, &session, "/messages/list"),
            json!({})
        )),
        context.json(Call::get(session_path(&workspace, &session, "/summaries"))),
    )?;
    Ok(Output::Json(json!({
        "session_id": session,
        "peers": items(&peers).iter().map(ids).collect::<Vec<_>>(),
        "message_count": messages["total"],
        "summaries": {
            "session_id": session,
            "short_summary": summaries["short_summary"],
            "long_summary": summaries["long_summary"],
        },
    })))
}

/// Writes the `messages` argument to the session `session_field` names:
/// the session and each author got or created first, as Honcho's SDK
/// does. Returns the messages as written.
pub(crate) async fn add_messages(context: Context<'_>, args: &Args<'_>, session_field: &str) -> Result<Vec<Value>> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, session_field)?;
    let mut messages = Vec::new();
    let mut authors: Vec<String> = Vec::new();
    for item in args.array("messages")? {
        let Value::Object(entry) = item else {
            return Err(args.invalid(format!("`messages[]`: expected an object, received {}", kind(item))));
        };
        let peer = match entry.get("peer_id") {
            Some(Value::String(peer)) => peer.clone(),
            None | Some(Value::Null) => context
                .defaults
                .peer
                .clone()
                .ok_or_else(|| args.invalid("`messages[].peer_id` is required".to_owned()))?,
            Some(other) => {
                return Err(args.invalid(format!(
                    "`messages[].peer_id`: expected a string, received {}",
                    kind(other)
                )));
            }
        };
        if !valid_id(&peer) {
            return Err(Failure::Failed(format!(
                "peer id `{peer}` must be 1 to 512 letters, digits, `_` or `-`"
            )));
        }
        let Some(Value::String(content)) = entry.get("content") else {
            return Err(args.invalid("`messages[].content` is required and must be a string".to_owned()));
        };
        if !content.is_empty() && content.trim().is_empty() {
            return Err(Failure::Failed(
                "message content must be empty or say something".to_owned(),
            ));
        }
        let mut message = json!({ "peer_id": peer, "content": content });
        if let Some(metadata) = entry.get("metadata").filter(|metadata| !metadata.is_null()) {
            message["metadata"] = metadata.clone();
        }
        if !authors.contains(&peer) {
            authors.push(peer);
        }
        messages.push(message);
    }
    context.open_session(&workspace, &session).await?;
    for peer in &authors {
        context.open(workspace_path(&workspace, "/peers"), peer).await?;
    }
    let reply = context
        .json(Call::post(
            session_path(&workspace, &session, "/messages"),
            json!({ "messages": messages }),
        ))
        .await?;
    Ok(reply.as_array().cloned().unwrap_or_default())
}

pub(crate) async fn get_session_messages(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let body = match args.object("filters")? {
        Some(filters) => json!({ "filters": filters }),
        None => json!({}),
    };
    context.open_session(&workspace, &session).await?;
    let reply = context
        .json(Call::post(session_path(&workspace, &session, "/messages/list"), body))
        .await?;
    Ok(Output::Json(page(&reply, "messages", message)))
}

pub(crate) async fn get_session_message(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let id = args.required("message_id")?;
    context.open_session(&workspace, &session).await?;
    let reply = context
        .json(Call::get(session_path(
            &workspace,
            &session,
            &format!("/messages/{}", segment(id)),
        )))
        .await?;
    Ok(Output::Json(message(&reply)))
}

pub(crate) async fn get_session_context(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    let workspace = context.workspace(args)?;
    let session = context.session(args, "session_id")?;
    let summary = args.boolean("summary")?;
    let tokens = args.integer("tokens", i64::MIN, i64::MAX)?;
    context.open_session(&workspace, &session).await?;
    let call = Call::get(session_path(&workspace, &session, "/context"))
        .query("summary", summary)
        .query("tokens", tokens);
    let reply = context.json(call).await?;
    let messages: Vec<Value> = reply["messages"]
        .as_array()
        .map(|found| found.iter().map(message).collect())
        .unwrap_or_default();
    Ok(Output::Json(json!({
        "session_id": session,
        "summary": camel(&reply["summary"]),
        "messages": messages,
    })))
}

/// `add_messages_to_session`: the turns recorded, said in Honcho's words.
pub(crate) async fn add_messages_to_session(context: Context<'_>, args: &Args<'_>) -> Result<Output> {
    add_messages(context, args, "session_id")
        .await
        .map(|_| Output::Text("Messages added to session successfully".to_owned()))
}
