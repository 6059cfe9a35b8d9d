//! Export records and import counts on the wire: a record is its JSON
//! line (`ExportRecord.json`), the counts a tally per kind.

use roncho_proto::v1 as pb;

use crate::convert::IntoWire;

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
