//! Records on the wire: an export record is its JSON line
//! (`ExportRecord.json`), import counts a tally per kind; an answer's
//! evidence, and its reasoning trace with the detail a `Struct`.

use roncho_proto::v1 as pb;

use crate::convert::{IntoWire, timestamp};

impl IntoWire<pb::ReasoningTrace> for roncho_core::model::ReasoningTrace {
    fn into_wire(self) -> pb::ReasoningTrace {
        pb::ReasoningTrace {
            id: self.id,
            workspace_id: self.workspace_id,
            peer_id: self.peer_id.unwrap_or_default(),
            target: self.target.unwrap_or_default(),
            session_id: self.session_id,
            created_at: Some(timestamp(self.created_at)),
            detail: Some(crate::json::json_to_struct(&self.detail)),
        }
    }
}

impl IntoWire<pb::ExportRecord> for roncho_core::export::Record {
    fn into_wire(self) -> pb::ExportRecord {
        pb::ExportRecord { json: self.to_line() }
    }
}

impl IntoWire<pb::ImportRecordsResponse> for roncho_core::export::Counts {
    fn into_wire(self) -> pb::ImportRecordsResponse {
        pb::ImportRecordsResponse {
            tallies: self
                .kinds()
                .into_iter()
                .map(|(kind, tally)| pb::ImportTally {
                    kind: kind.to_owned(),
                    new: tally.new,
                    present: tally.present,
                    skipped: tally.skipped,
                })
                .collect(),
            notes: self.notes.into_iter().collect(),
        }
    }
}

impl IntoWire<pb::Evidence> for roncho_dialectic::Evidence {
    fn into_wire(self) -> pb::Evidence {
        pb::Evidence {
            conclusions: self
                .conclusions
                .into_iter()
                .map(|conclusion| pb::EvidenceConclusion {
                    id: conclusion.id,
                    level: conclusion.level,
                    content: conclusion.content,
                    created_at: Some(timestamp(conclusion.created_at)),
                    session_id: conclusion.session_id,
                    observer_id: conclusion.observer_id,
                    observed_id: conclusion.observed_id,
                    source_ids: conclusion.source_ids,
                })
                .collect(),
            messages: self
                .messages
                .into_iter()
                .map(|message| pb::EvidenceMessage {
                    id: message.id,
                    session_id: message.session_id,
                    peer_id: message.peer_id,
                    created_at: Some(timestamp(message.created_at)),
                })
                .collect(),
            tool_calls: self
                .tool_calls
                .into_iter()
                .map(|(tool_name, input)| pb::EvidenceToolCall {
                    tool_name,
                    tool_input: input.as_object().map(crate::json::json_to_struct),
                })
                .collect(),
            reasoning_trace_id: self.reasoning_trace_id.unwrap_or_default(),
        }
    }
}
