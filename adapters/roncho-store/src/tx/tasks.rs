//! Background work queued in the transaction of the write that causes it,
//! and webhook events (which are work too).
//!
//! Webhook events as queued work: one `webhook` task per endpoint of the
//! workspace, in the unit `webhook:{workspace}:{endpoint}`, so each endpoint
//! gets its events in order and one that is down holds back only its own.
//! The task carries the event (type, data, timestamp), so every retry sends
//! the same body; the deriver role delivers it (`roncho_webhook`).

use crate::db::{execute, fetch_all, fetch_optional};
use crate::rows;
use crate::sql::{Bind, Sql};
use roncho_core::Result;
use roncho_core::model::{new_public_id, now_micros};
use roncho_core::queue::{NewTask, task_type};
use roncho_core::trace::TraceContext;
use serde_json::{Value, json};
use sqlx::AnyConnection;
use std::time::Duration;

/// The `scope_backfill` task that copies a session's observations into a
/// scope; a new one each time the session is added (catching up).
pub(crate) fn backfill_task(workspace_id: &str, scope_peer: &str, session_id: &str) -> NewTask {
    NewTask {
        work_unit_key: format!("scope_backfill:{workspace_id}:{session_id}:{scope_peer}"),
        dedup_id: format!("scope_backfill:{}", new_public_id()),
        workspace_id: workspace_id.to_owned(),
        session_id: Some(session_id.to_owned()),
        observer_id: Some(scope_peer.to_owned()),
        sender_id: None,
        payload: serde_json::json!({"scope_peer": scope_peer, "session_name": session_id}),
        items: 1,
    }
}

/// Queues `event_type` with `data` for every endpoint of the workspace, in
/// the caller's transaction; `event_key` makes the event's tasks unique (a
/// repeat with the same key queues nothing). Returns how many were queued.
pub(crate) async fn queue_event(
    conn: &mut AnyConnection,
    workspace_id: &str,
    event_type: &str,
    data: Value,
    event_key: &str,
) -> Result<u64> {
    let mut sql = Sql::new("SELECT id FROM webhook_endpoints WHERE workspace_name = ");
    sql.bind(workspace_id).push(" ORDER BY created_at, id");
    let endpoints: Vec<String> = fetch_all(conn, &sql)
        .await?
        .iter()
        .map(|row| rows::get(row, "id"))
        .collect::<Result<_>>()?;
    if endpoints.is_empty() {
        return Ok(0);
    }
    let timestamp = now_micros();
    let tasks: Vec<NewTask> = endpoints
        .into_iter()
        .map(|endpoint| NewTask {
            work_unit_key: format!("webhook:{workspace_id}:{endpoint}"),
            dedup_id: format!("webhook:{endpoint}:{event_type}:{event_key}"),
            workspace_id: workspace_id.to_owned(),
            session_id: None,
            observer_id: None,
            sender_id: None,
            payload: json!({
                "event_type": event_type,
                "data": data,
                "endpoint_id": endpoint,
                "timestamp": timestamp,
            }),
            items: 1,
        })
        .collect();
    crate::tx::tasks::insert_tasks(conn, &tasks).await
}

/// After tasks of `work_unit_key` completed (the last of them `last_task`):
/// when it is a representation or summary unit with nothing left pending,
/// queues Honcho's `queue.empty` event, in the caller's transaction.
pub(crate) async fn queue_empty_if_drained(
    conn: &mut AnyConnection,
    work_unit_key: &str,
    last_task: i64,
) -> Result<()> {
    let queue_type = task_type(work_unit_key);
    if !matches!(queue_type, "representation" | "summary") {
        return Ok(());
    }
    let mut pending = Sql::new("SELECT id FROM work_tasks WHERE state = 'pending' AND work_unit_key = ");
    pending.bind(work_unit_key).push(" LIMIT 1");
    if fetch_optional(conn, &pending).await?.is_some() {
        return Ok(());
    }
    // representation:{workspace}:{session}:{observed}; summary:{workspace}:{session}:None:None
    let mut parts = work_unit_key.split(':').skip(1);
    let (Some(workspace), Some(session)) = (parts.next(), parts.next()) else {
        return Ok(());
    };
    let observed = parts.next().filter(|observed| *observed != "None");
    let data = json!({
        "workspace_id": workspace,
        "queue_type": queue_type,
        "session_id": session,
        "observer": Value::Null,
        "observed": observed,
    });
    queue_event(
        conn,
        workspace,
        "queue.empty",
        data,
        &format!("{work_unit_key}:{last_task}"),
    )
    .await?;
    Ok(())
}

/// Queues a `test.event` for every endpoint of the workspace; returns how many.
pub(crate) async fn queue_test_event(conn: &mut AnyConnection, workspace_id: &str) -> Result<u64> {
    let data = json!({"workspace_id": workspace_id});
    let key = roncho_core::model::new_public_id();
    queue_event(conn, workspace_id, "test.event", data, &key).await
}

/// Inserts tasks in the caller's transaction (so a message and its work
/// commit together), skipping `dedup_id`s already queued; returns how many
/// were new.
pub(crate) async fn insert_tasks(conn: &mut AnyConnection, tasks: &[NewTask]) -> Result<u64> {
    insert_tasks_ready_in(conn, tasks, Duration::ZERO).await
}

/// Like [`insert_tasks`]; the tasks are ready `delay` from now.
pub(crate) async fn insert_tasks_ready_in(conn: &mut AnyConnection, tasks: &[NewTask], delay: Duration) -> Result<u64> {
    let now = now_micros();
    let ready_at = now + micros(delay);
    let optional = |value: &Option<String>| value.clone().map_or(Bind::NullText, Bind::Text);
    // The work joins the trace of whoever enqueues it (a CreateMessages call, a dream scheduler).
    let trace_context = TraceContext::current().map(|context| context.encode());
    let mut added = 0;
    for chunk in tasks.chunks(50) {
        let mut sql = Sql::new(
            "INSERT INTO work_tasks (dedup_id, work_unit_key, task_type, workspace_name, session_name, observer, \
             sender, payload, available_at, created_at, trace_context, items) VALUES ",
        );
        for (index, task) in chunk.iter().enumerate() {
            sql.push(if index == 0 { "(" } else { ", (" });
            sql.bind(task.dedup_id.as_str())
                .push(", ")
                .bind(task.work_unit_key.as_str())
                .push(", ")
                .bind(task_type(&task.work_unit_key))
                .push(", ");
            sql.bind(task.workspace_id.as_str())
                .push(", ")
                .bind(optional(&task.session_id))
                .push(", ")
                .bind(optional(&task.observer_id))
                .push(", ");
            sql.bind(optional(&task.sender_id))
                .push(", ")
                .bind(task.payload.to_string())
                .push(", ")
                .bind(ready_at)
                .push(", ")
                .bind(now)
                .push(", ")
                .bind(optional(&trace_context))
                .push(", ")
                .bind(task.items)
                .push(")");
        }
        // Any conflict: a dedup id seen before, or a second pending dream of a unit.
        sql.push(" ON CONFLICT DO NOTHING");
        added += execute(conn, &sql).await?;
    }
    Ok(added)
}

/// A duration in microseconds, saturating.
pub(crate) fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}
