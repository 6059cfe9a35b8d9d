//! Webhook events as queued work: one `webhook` task per endpoint of the
//! workspace, in the unit `webhook:{workspace}:{endpoint}`, so each endpoint
//! gets its events in order and one that is down holds back only its own.
//! The task carries the event (type, data, timestamp), so every retry sends
//! the same body; the deriver role delivers it (`roncho_http::webhook`).

use roncho_core::Result;
use roncho_core::model::now_micros;
use roncho_core::queue::{NewTask, task_type};
use serde_json::{Value, json};
use sqlx::AnyConnection;

use crate::rows;
use crate::sql::Sql;
use crate::store::{fetch_all, fetch_optional};

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
    crate::queue::insert_tasks(conn, &tasks).await
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
