//! A workspace as JSON lines: what `roncho export` writes and `roncho
//! import` reads back, one [`Record`] per line.
//!
//! A file opens with a [`Record::Export`] header and closes with a
//! [`Record::End`] trailer counting the records between them, so a cut-off
//! file is told from a whole one. Between them every record comes after
//! what it refers to: the workspace, its webhooks, peers and peer cards,
//! then each session (its members, its messages oldest first, its
//! summaries), then conclusions oldest first, so that a conclusion's
//! sources are there before it. Ids and the times of messages and
//! conclusions are kept; erased rows are never read, so never written.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::JsonObject;
use crate::{Error, Result};

/// The version of the format [`Record::Export`] names.
pub const FORMAT_VERSION: u32 = 1;

/// Records one import call takes at most (a client sends a longer file in
/// calls of this many).
pub const MAX_IMPORT_RECORDS: usize = 1_000;

/// One line of an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// The header: the format's version and what was exported.
    Export {
        version: u32,
        workspace_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        peer_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
    },
    Workspace {
        id: String,
        #[serde(default)]
        metadata: JsonObject,
        #[serde(default)]
        configuration: JsonObject,
    },
    Webhook {
        url: String,
    },
    Peer {
        id: String,
        #[serde(default)]
        metadata: JsonObject,
        #[serde(default)]
        configuration: JsonObject,
    },
    PeerCard {
        observer_id: String,
        observed_id: String,
        card: Vec<String>,
    },
    /// A session and its members now (a member who wrote and left is a
    /// writer of its messages, not a member).
    Session {
        id: String,
        #[serde(default)]
        metadata: JsonObject,
        #[serde(default)]
        configuration: JsonObject,
        #[serde(default)]
        peers: Vec<Member>,
    },
    Message {
        id: String,
        session_id: String,
        peer_id: String,
        content: String,
        #[serde(default)]
        metadata: JsonObject,
        /// ISO 8601 in UTC, to the microsecond.
        created_at: String,
    },
    /// One of a session's summaries (`summary_type` as Honcho names it).
    Summary {
        session_id: String,
        summary_type: String,
        content: String,
        message_id: String,
        token_count: i64,
    },
    Conclusion {
        id: String,
        observer_id: String,
        observed_id: String,
        #[serde(default)]
        session_id: Option<String>,
        level: String,
        content: String,
        #[serde(default)]
        premises: Vec<String>,
        /// The messages (explicit conclusions) or conclusions it came from.
        #[serde(default)]
        source_ids: Vec<String>,
        times_derived: i64,
        #[serde(default)]
        metadata: JsonObject,
        created_at: String,
    },
    /// The trailer: how many records came between the header and it, and
    /// what the export left out.
    End {
        records: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        left_out: Vec<String>,
    },
}

/// A session member as exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub peer_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observe_me: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observe_others: Option<bool>,
}

impl Record {
    /// The record as one line of JSON (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a record serializes")
    }

    /// Parses one line; the error names `field` (the line's place).
    pub fn parse(field: &str, line: &str) -> Result<Self> {
        serde_json::from_str(line).map_err(|error| Error::invalid(field, format!("is not an export record: {error}")))
    }
}

/// New and already present rows of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub new: u64,
    pub present: u64,
    /// Not imported, with the reason in [`Counts::notes`].
    pub skipped: u64,
}

impl Tally {
    /// Counts one row: new when `created`, else already present.
    pub fn add(&mut self, created: bool) {
        if created {
            self.new += 1;
        } else {
            self.present += 1;
        }
    }

    fn merge(&mut self, other: Tally) {
        self.new += other.new;
        self.present += other.present;
        self.skipped += other.skipped;
    }
}

/// What an import did, kind by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub workspaces: Tally,
    pub webhooks: Tally,
    pub peers: Tally,
    pub scopes: Tally,
    pub peer_cards: Tally,
    pub sessions: Tally,
    pub messages: Tally,
    pub summaries: Tally,
    pub conclusions: Tally,
    /// Why rows were skipped, once per reason.
    pub notes: BTreeSet<String>,
}

impl Counts {
    /// The tallies by kind, in the order an export writes them.
    pub fn kinds(&self) -> [(&'static str, Tally); 9] {
        [
            ("workspaces", self.workspaces),
            ("webhooks", self.webhooks),
            ("peers", self.peers),
            ("scopes", self.scopes),
            ("peer_cards", self.peer_cards),
            ("sessions", self.sessions),
            ("messages", self.messages),
            ("summaries", self.summaries),
            ("conclusions", self.conclusions),
        ]
    }

    /// The tally of the kind [`Counts::kinds`] names, `None` for another name.
    pub fn kind_mut(&mut self, kind: &str) -> Option<&mut Tally> {
        Some(match kind {
            "workspaces" => &mut self.workspaces,
            "webhooks" => &mut self.webhooks,
            "peers" => &mut self.peers,
            "scopes" => &mut self.scopes,
            "peer_cards" => &mut self.peer_cards,
            "sessions" => &mut self.sessions,
            "messages" => &mut self.messages,
            "summaries" => &mut self.summaries,
            "conclusions" => &mut self.conclusions,
            _ => return None,
        })
    }

    /// Adds another call's counts to these.
    pub fn merge(&mut self, other: Counts) {
        for (kind, tally) in other.kinds() {
            if let Some(mine) = self.kind_mut(kind) {
                mine.merge(tally);
            }
        }
        self.notes.extend(other.notes);
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{:<12} {:>10} {:>10} {:>10}", "", "new", "present", "skipped")?;
        for (name, tally) in self.kinds() {
            let name = name.replace('_', " ");
            writeln!(
                f,
                "{name:<12} {:>10} {:>10} {:>10}",
                tally.new, tally.present, tally.skipped
            )?;
        }
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_as_written() {
        let records = [
            Record::Export {
                version: FORMAT_VERSION,
                workspace_id: "w".into(),
                peer_id: None,
                session_id: Some("s".into()),
            },
            Record::Session {
                id: "s".into(),
                metadata: JsonObject::new(),
                configuration: JsonObject::new(),
                peers: vec![Member {
                    peer_id: "p".into(),
                    observe_me: Some(false),
                    observe_others: None,
                }],
            },
            Record::End {
                records: 1,
                left_out: Vec::new(),
            },
        ];
        for record in records {
            assert_eq!(Record::parse("line", &record.to_line()).unwrap(), record);
        }
    }

    #[test]
    fn other_lines_are_refused_with_their_place() {
        for line in [
            "",
            "{}",
            "{\"kind\":\"nothing\"}",
            "{\"kind\":\"peer\"}",
            "[1]",
            "\u{0}",
        ] {
            let error = Record::parse("records[3]", line).unwrap_err();
            assert!(error.to_string().contains("records[3]"), "{line:?}: {error}");
        }
    }

    #[test]
    fn counts_merge_kind_by_kind() {
        let mut counts = Counts::default();
        let mut other = Counts::default();
        other.messages.add(true);
        other.messages.add(false);
        other.notes.insert("why".into());
        counts.merge(other.clone());
        counts.merge(other);
        assert_eq!(
            counts.messages,
            Tally {
                new: 2,
                present: 2,
                skipped: 0
            }
        );
        assert_eq!(counts.notes.len(), 1);
    }
}
