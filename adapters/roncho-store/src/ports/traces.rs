//! [`Traces`]: how the dialectic reached its answers.

use crate::db::{SqlStore, execute, fetch_optional};
use crate::rows;
use crate::sql::Sql;
use crate::tx::erasing::{self, push_not_erasing};
use async_trait::async_trait;
use roncho_core::model::{JsonObject, ReasoningTrace, now_micros};
use roncho_core::store::{TRACE_RETENTION_MICROS, Traces};
use roncho_core::{Error, Result};
use serde_json::{Value, json};

/// The trace as its row's `detail` holds it: every field, so a read
/// answers what was written whatever has been erased since.
fn detail_of(trace: &ReasoningTrace) -> String {
    json!({
        "id": trace.id,
        "workspace_id": trace.workspace_id,
        "peer_id": trace.peer_id,
        "target": trace.target,
        "session_id": trace.session_id,
        "created_at": trace.created_at,
        "detail": trace.detail,
    })
    .to_string()
}

fn trace_of(text: &str) -> Result<ReasoningTrace> {
    let value: Value =
        serde_json::from_str(text).map_err(|error| Error::Internal(format!("a stored trace is not JSON: {error}")))?;
    let text_of = |field: &str| value[field].as_str().map(str::to_owned);
    Ok(ReasoningTrace {
        id: text_of("id").unwrap_or_default(),
        workspace_id: text_of("workspace_id").unwrap_or_default(),
        peer_id: text_of("peer_id"),
        target: text_of("target"),
        session_id: text_of("session_id"),
        created_at: value["created_at"].as_i64().unwrap_or_default(),
        detail: value["detail"].as_object().cloned().unwrap_or_else(JsonObject::new),
    })
}

/// `id` when it names a row of `table` in the workspace now.
async fn row_named(
    conn: &mut sqlx::AnyConnection,
    workspace: &str,
    table: &str,
    id: &Option<String>,
) -> Result<Option<String>> {
    let Some(id) = id else { return Ok(None) };
    let mut sql = Sql::new(&format!("SELECT name FROM {table} WHERE workspace_name = "));
    sql.bind(workspace).push(" AND name = ").bind(id.as_str());
    Ok(fetch_optional(conn, &sql).await?.map(|_| id.clone()))
}

#[async_trait]
impl Traces for SqlStore {
    #[tracing::instrument(name = "store.save_trace", skip_all, fields(workspace_id = %trace.workspace_id))]
    async fn save_trace(&self, trace: &ReasoningTrace) -> Result<()> {
        let workspace = trace.workspace_id.as_str();
        let mut tx = self.begin_write().await?;
        let mut expired = Sql::new("DELETE FROM reasoning_traces WHERE workspace_name = ");
        expired
            .bind(workspace)
            .push(" AND created_at < ")
            .bind(now_micros() - TRACE_RETENTION_MICROS);
        execute(tx.conn(), &expired).await?;
        // What it names that is a row now, whose erasure takes it with it;
        // a name that is no row (an unknown target, a session erased while
        // the answer ran) is not kept at all, nor is a trace whose observer
        // is gone.
        let observer = row_named(tx.conn(), workspace, "peers", &trace.peer_id).await?;
        if trace.peer_id.is_some() && observer.is_none() {
            return Ok(());
        }
        let kept = ReasoningTrace {
            peer_id: observer,
            target: row_named(tx.conn(), workspace, "peers", &trace.target).await?,
            session_id: row_named(tx.conn(), workspace, "sessions", &trace.session_id).await?,
            ..trace.clone()
        };
        let mut insert = Sql::new(
            "INSERT INTO reasoning_traces (public_id, workspace_name, observer, observed, session_name, created_at, \
             detail) SELECT ",
        );
        insert
            .bind(kept.id.as_str())
            .push(", w.name, ")
            .bind(kept.peer_id.clone())
            .push(", ")
            .bind(kept.target.clone())
            .push(", ")
            .bind(kept.session_id.clone())
            .push(", ")
            .bind(kept.created_at)
            .push(", ")
            .bind(detail_of(&kept))
            .push(" FROM workspaces w WHERE w.name = ")
            .bind(workspace);
        execute(tx.conn(), &insert).await?;
        tx.commit().await
    }

    async fn get_trace(&self, workspace_id: &str, id: &str) -> Result<ReasoningTrace> {
        let mut sql = Sql::new("SELECT detail FROM reasoning_traces t WHERE t.workspace_name = ");
        sql.bind(workspace_id)
            .push(" AND t.public_id = ")
            .bind(id)
            .push(" AND t.created_at >= ")
            .bind(now_micros() - TRACE_RETENTION_MICROS);
        push_not_erasing(&mut sql, erasing::TRACE);
        let row = self
            .read_optional(&sql)
            .await?
            .ok_or_else(|| Error::not_found("reasoning trace", id))?;
        trace_of(&rows::get::<String>(&row, "detail")?)
    }
}
