//! Queue status in Honcho's shape with roncho's additions (dead and
//! postponed work, the last hour), and the queue routes' parameters.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::timestamp;

/// Work-unit counts of a workspace or a session.
#[derive(Debug, Serialize)]
pub struct QueueCounts {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub total_work_units: i64,
    pub completed_work_units: i64,
    pub in_progress_work_units: i64,
    pub pending_work_units: i64,
}

impl QueueCounts {
    fn new(session_id: Option<String>, counts: &roncho_core::queue::Counts) -> Self {
        Self {
            session_id,
            total_work_units: counts.total,
            completed_work_units: counts.completed,
            in_progress_work_units: counts.in_progress,
            pending_work_units: counts.pending,
        }
    }
}

/// `QueueStatus`: `sessions` is null when filtered by session or empty.
/// roncho adds what Honcho's shape has no room for: dead work and how the
/// deriver works, so nothing fails silently.
#[derive(Debug, Serialize)]
pub struct QueueStatus {
    #[serde(flatten)]
    pub counts: QueueCounts,
    pub sessions: Option<BTreeMap<String, QueueCounts>>,
    pub failed_work_units: i64,
    pub derivation: serde_json::Value,
    /// Due dreams waiting for their peer to be quiet, and ready to run.
    pub dreams_waiting: i64,
    pub dreams_ready: i64,
    /// Why derivation is degraded (it keeps giving no observations); only then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
    /// The newest dead tasks and why they died (at most 100).
    pub failures: Vec<serde_json::Value>,
    /// Tasks an outage postponed and why, soonest first (at most 100).
    pub postponed: Vec<serde_json::Value>,
    /// With `?history=true`: the last hour by minute, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<serde_json::Value>>,
}

/// `llm` with a model, `extractive` without (gRPC's `DerivationMode`).
fn mode(model: &Option<String>) -> &'static str {
    match model {
        Some(_) => "llm",
        None => "extractive",
    }
}

impl From<roncho_deriver::QueueReport> for QueueStatus {
    fn from(report: roncho_deriver::QueueReport) -> Self {
        let status = report.status;
        let sessions: BTreeMap<String, QueueCounts> = status
            .sessions
            .iter()
            .map(|(session, counts)| (session.clone(), QueueCounts::new(Some(session.clone()), counts)))
            .collect();
        let derivation = &report.derivation;
        Self {
            counts: QueueCounts::new(None, &status.counts),
            sessions: (report.by_session && !sessions.is_empty()).then_some(sessions),
            failed_work_units: status.counts.failed,
            // The models, and in words whether each is one (`null` alone
            // would read as "unknown").
            derivation: serde_json::json!({
                "observations": derivation.observations,
                "summaries": derivation.summaries,
                "observation_mode": mode(&derivation.observations),
                "summary_mode": mode(&derivation.summaries),
            }),
            dreams_waiting: status.dreams.waiting,
            dreams_ready: status.dreams.ready,
            degraded_reason: report.degraded,
            history: (!report.history.is_empty()).then(|| {
                report
                    .history
                    .iter()
                    .map(|sample| {
                        serde_json::json!({
                            "at": timestamp(sample.at),
                            "waiting_work_units": sample.waiting,
                            "done_work_units": sample.done,
                            "latency_p50_ms": sample.latency_p50_ms,
                            "latency_max_ms": sample.latency_max_ms,
                        })
                    })
                    .collect()
            }),
            failures: status
                .failures
                .iter()
                .map(|task| {
                    serde_json::json!({
                        "work_unit_key": task.work_unit_key,
                        "attempts": task.attempts,
                        "error": task.last_error,
                    })
                })
                .collect(),
            postponed: status
                .postponed
                .iter()
                .map(|task| {
                    serde_json::json!({
                        "work_unit_key": task.work_unit_key,
                        "deferrals": task.deferrals,
                        "reason": task.reason,
                        "ready_at": timestamp(task.ready_at),
                    })
                })
                .collect(),
        }
    }
}

/// `{"session_id"?, "task_type"?}` of `POST /v3/workspaces/{w}/queue/retry` (roncho's).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryOptions {
    pub session_id: Option<String>,
    pub task_type: Option<String>,
}

/// `?observer_id&sender_id&session_id` of queue status.
#[derive(Debug, Default, Deserialize)]
pub struct QueueQuery {
    pub observer_id: Option<String>,
    pub sender_id: Option<String>,
    pub session_id: Option<String>,
    /// roncho's: also the last hour by minute (`history`).
    #[serde(default, deserialize_with = "super::lax::boolean")]
    pub history: bool,
}
