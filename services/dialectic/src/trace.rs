//! Reasoning traces (Honcho 3.2's `reasoning_trace_id`): what an answer
//! with evidence did, kept by id so that a client can ask later how it was
//! reached. By name and size only: the trace holds no prompt, tool input,
//! result or answer text, so it holds nothing an erasure must find in it;
//! it goes with its peer, session or workspace.

use roncho_agent::RunLog;
use roncho_core::model::{JsonObject, ReasoningTrace, new_public_id, now_micros};
use serde_json::json;

use crate::agent::Ask;

/// Names one trace of a workspace.
#[derive(Debug, Clone, Default)]
pub struct GetReasoningTrace {
    pub workspace_id: String,
    pub trace_id: String,
}

/// The trace of one answer: `model` answered (`None`: extractively) in
/// `elapsed`, with `text` (`None`: no answer).
pub(crate) fn trace_of(
    ask: &Ask,
    model: Option<&str>,
    log: &RunLog,
    text: Option<&str>,
    elapsed: std::time::Duration,
) -> ReasoningTrace {
    let ids = |items: Vec<&String>| items.into_iter().cloned().collect::<Vec<_>>();
    let detail = json!({
        "reasoning_level": ask.level.name(),
        "model": model.unwrap_or("extractive"),
        "duration_ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        "question_chars": ask.query.chars().count(),
        "answered": text.is_some(),
        "answer_chars": text.map(|text| text.chars().count()),
        "model_calls": log.model_calls,
        "tool_calls": log.tool_runs,
        "read": {
            "conclusions": ids(log.read.conclusions.iter().map(|conclusion| &conclusion.id).collect()),
            "messages": ids(log.read.messages.iter().map(|message| &message.id).collect()),
        },
    });
    let named = |id: &str| (!id.is_empty()).then(|| id.to_owned());
    ReasoningTrace {
        id: new_public_id(),
        workspace_id: ask.workspace.clone(),
        peer_id: named(&ask.observer),
        target: named(&ask.target),
        session_id: ask.session.clone(),
        created_at: now_micros(),
        detail: match detail {
            serde_json::Value::Object(detail) => detail,
            _ => JsonObject::new(),
        },
    }
}
