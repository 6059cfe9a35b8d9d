//! Import of export records (`roncho_core::export`): what `roncho export`
//! wrote comes back with its ids and times.
//!
//! A call's records are all read and checked before the first is written,
//! so a call refused for one bad line has written nothing. Every step is
//! get-or-create or skips what is held already, so a file imported again,
//! or a cut-off import run again, adds nothing twice.

use std::collections::BTreeSet;

use roncho_core::export::{Counts, FORMAT_VERSION, MAX_IMPORT_RECORDS, Member, Record};
use roncho_core::filter::parse_timestamp;
use roncho_core::filter::{PEER, SESSION};
use roncho_core::model::{
    ImportedConclusion, ImportedMessage, JsonObject, LEVELS, NewConclusion, NewMessage, PageRequest, SessionPeerConfig,
    SummaryKind,
};
use roncho_core::{Error, Result, validate};

use crate::{
    CreateWebhook, GetOrCreatePeer, GetOrCreateSession, GetOrCreateWorkspace, ImportRecords, Ingest, IngestApi,
    count_tokens, metadata_arg,
};

/// Most sources one imported conclusion names (a dream's pattern may rest
/// on many).
const MAX_SOURCES: usize = 1_000;

/// One checked record, ready to write.
pub(crate) enum Step {
    Workspace {
        metadata: JsonObject,
        configuration: JsonObject,
    },
    Webhook(String),
    Peer {
        id: String,
        metadata: JsonObject,
        configuration: JsonObject,
    },
    PeerCard {
        observer: String,
        observed: String,
        card: Vec<String>,
    },
    Session {
        id: String,
        metadata: JsonObject,
        configuration: JsonObject,
        /// In the order they joined.
        peers: Vec<(String, SessionPeerConfig)>,
    },
    Message {
        session_id: String,
        message: ImportedMessage,
    },
    Summary {
        session_id: String,
        kind: SummaryKind,
        content: String,
        message_id: String,
        token_count: i64,
    },
    Conclusion(ImportedConclusion),
}

/// Longest id an import keeps: ids roncho makes are 21 characters, and
/// Honcho's imported ones as long.
const MAX_IMPORTED_ID_CHARS: usize = 64;
/// Most premises one imported conclusion rests on.
const MAX_PREMISES: usize = 100;

/// A message's or conclusion's id as an import keeps it: letters, digits,
/// `_` and `-`, as ids roncho makes are (and as every store, and a URL
/// path, takes them).
fn kept_id(field: &str, id: &str) -> Result<String> {
    let fits = !id.is_empty()
        && id.len() <= MAX_IMPORTED_ID_CHARS
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-'));
    match fits {
        true => Ok(id.to_owned()),
        false => Err(Error::invalid(
            field,
            format!("must be 1 to {MAX_IMPORTED_ID_CHARS} letters, digits, `_` or `-`"),
        )),
    }
}

/// A time as an export writes it.
fn time(field: &str, text: &str) -> Result<i64> {
    parse_timestamp(text).ok_or_else(|| Error::invalid(field, "must be an ISO 8601 time"))
}

fn object(field: &str, value: JsonObject) -> Result<JsonObject> {
    Ok(metadata_arg(field, Some(value))?.unwrap_or_default())
}

/// Checks one record; `None` for the header and trailer, which write nothing.
fn check(record: Record) -> Result<Option<Step>> {
    Ok(Some(match record {
        Record::Export { version, .. } => {
            if version == 0 || version > FORMAT_VERSION {
                return Err(Error::invalid(
                    "version",
                    format!("is {version}; this server reads export versions 1 to {FORMAT_VERSION}"),
                ));
            }
            return Ok(None);
        }
        Record::End { .. } => return Ok(None),
        Record::Workspace {
            metadata,
            configuration,
            ..
        } => Step::Workspace {
            metadata: object("metadata", metadata)?,
            configuration: object("configuration", configuration)?,
        },
        Record::Webhook { url } => {
            // The SSRF rules are the write's own (create_webhook); the URL's shape is checked here.
            validate::webhook_url("url", &url, true)?;
            Step::Webhook(url)
        }
        Record::Peer {
            id,
            metadata,
            configuration,
        } => Step::Peer {
            id: validate::resource_id("id", &id)?,
            metadata: object("metadata", metadata)?,
            configuration: object("configuration", configuration)?,
        },
        Record::PeerCard {
            observer_id,
            observed_id,
            card,
        } => Step::PeerCard {
            observer: validate::resource_id("observer_id", &observer_id)?,
            observed: validate::resource_id("observed_id", &observed_id)?,
            card: validate::peer_card("card", &card)?,
        },
        Record::Session {
            id,
            metadata,
            configuration,
            peers,
        } => Step::Session {
            id: validate::resource_id("id", &id)?,
            metadata: object("metadata", metadata)?,
            configuration: object("configuration", configuration)?,
            peers: members(peers)?,
        },
        Record::Message {
            id,
            session_id,
            peer_id,
            content,
            metadata,
            created_at,
        } => Step::Message {
            session_id: validate::resource_id("session_id", &session_id)?,
            message: ImportedMessage {
                id: kept_id("id", &id)?,
                message: NewMessage {
                    peer_id: validate::resource_id("peer_id", &peer_id)?,
                    content: validate::message_content("content", &content)?,
                    metadata: object("metadata", metadata)?,
                    configuration: JsonObject::new(),
                    created_at: Some(time("created_at", &created_at)?),
                    // Counted below, off the runtime, for all messages at once.
                    token_count: 0,
                },
            },
        },
        Record::Summary {
            session_id,
            summary_type,
            content,
            message_id,
            token_count,
        } => Step::Summary {
            session_id: validate::resource_id("session_id", &session_id)?,
            kind: SummaryKind::from_name(&summary_type).ok_or_else(|| {
                Error::invalid(
                    "summary_type",
                    format!("must be {} or {}", SummaryKind::Short.name(), SummaryKind::Long.name()),
                )
            })?,
            content: validate::message_content("content", &content)?,
            message_id: kept_id("message_id", &message_id)?,
            token_count: match token_count {
                count if count < 0 => return Err(Error::invalid("token_count", "must not be negative")),
                count => count,
            },
        },
        record @ Record::Conclusion { .. } => Step::Conclusion(conclusion(record)?),
    }))
}

/// A session's members, checked, in the order they joined.
fn members(peers: Vec<Member>) -> Result<Vec<(String, SessionPeerConfig)>> {
    validate::list_len("peers", peers.len(), validate::MAX_SESSION_PEERS)?;
    let mut members: Vec<(String, SessionPeerConfig)> = Vec::with_capacity(peers.len());
    for member in peers {
        let config = SessionPeerConfig {
            observe_me: member.observe_me,
            observe_others: member.observe_others,
        };
        let id = validate::resource_id("peers.peer_id", &member.peer_id)?;
        if members.iter().any(|(held, _)| *held == id) {
            return Err(Error::invalid("peers", format!("names `{id}` twice")));
        }
        members.push((id, config));
    }
    Ok(members)
}

/// A conclusion record, checked.
fn conclusion(record: Record) -> Result<ImportedConclusion> {
    let Record::Conclusion {
        id,
        observer_id,
        observed_id,
        session_id,
        level,
        content,
        premises,
        source_ids,
        times_derived,
        metadata,
        created_at,
    } = record
    else {
        unreachable!("called with a conclusion")
    };
    if !LEVELS.contains(&level.as_str()) {
        return Err(Error::invalid("level", format!("must be one of {}", LEVELS.join(", "))));
    }
    if times_derived < 1 {
        return Err(Error::invalid("times_derived", "must be at least 1"));
    }
    validate::list_len("premises", premises.len(), MAX_PREMISES)?;
    Ok(ImportedConclusion {
        id: kept_id("id", &id)?,
        created_at: time("created_at", &created_at)?,
        times_derived,
        conclusion: NewConclusion {
            observer_id: validate::resource_id("observer_id", &observer_id)?,
            observed_id: validate::resource_id("observed_id", &observed_id)?,
            session_id: session_id
                .map(|session| validate::resource_id("session_id", &session))
                .transpose()?,
            level,
            content: validate::conclusion_content("content", &content)?,
            premises: premises
                .iter()
                .map(|premise| validate::conclusion_content("premises", premise))
                .collect::<Result<_>>()?,
            source_ids: {
                validate::list_len("source_ids", source_ids.len(), MAX_SOURCES)?;
                source_ids
                    .iter()
                    .enumerate()
                    .map(|(index, id)| kept_id(&format!("source_ids[{index}]"), id))
                    .collect::<Result<_>>()?
            },
            metadata: object("metadata", metadata)?,
        },
    })
}

/// Reads and checks every record of an import on its own, with its place
/// in the call (the header and trailer, which write nothing, left out);
/// the first bad one is refused naming `records[i]`.
pub(crate) fn check_records(records: &[String]) -> Result<Vec<(usize, Step)>> {
    let mut steps = Vec::with_capacity(records.len());
    for (index, line) in records.iter().enumerate() {
        let place = || format!("records[{index}]");
        let record = Record::parse(&place(), line)?;
        if let Some(step) = check(record).map_err(|error| error.within(place))? {
            steps.push((index, step));
        }
    }
    Ok(steps)
}

/// Checks export records as an import call does on its own (not what they
/// name in a store): `Err((i, reason))` for the first bad one, `i` its
/// place in `records`. What `roncho import` runs on a whole file before it
/// sends any of it.
pub fn check_export_records(records: &[String]) -> std::result::Result<(), (usize, String)> {
    for (index, line) in records.iter().enumerate() {
        let checked = Record::parse("record", line).and_then(check);
        if let Err(error) = checked {
            return Err((index, error.to_string()));
        }
    }
    Ok(())
}

impl Ingest {
    /// Imports one call's records (see the module): checks them all, then
    /// writes them in order.
    pub(crate) async fn import(&self, request: ImportRecords) -> Result<Counts> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        validate::list_len("records", request.records.len(), MAX_IMPORT_RECORDS)?;
        let mut steps = check_records(&request.records)?;
        self.preflight(&workspace_id, &steps).await?;
        let contents = steps
            .iter()
            .filter_map(|(_, step)| match step {
                Step::Message { message, .. } => Some(message.message.content.clone()),
                _ => None,
            })
            .collect();
        let (_, mut token_counts) = count_tokens(contents).await?;
        token_counts.reverse();
        for (_, step) in &mut steps {
            if let Step::Message { message, .. } = step {
                message.message.token_count = token_counts.pop().unwrap_or_default();
            }
        }
        let mut counts = Counts::default();
        let mut steps = steps.into_iter().map(|(_, step)| step).peekable();
        while let Some(step) = steps.next() {
            match step {
                Step::Message { session_id, message } => {
                    let mut batch = vec![message];
                    while let Some(Step::Message { session_id: next, .. }) = steps.peek()
                        && *next == session_id
                    {
                        let Some(Step::Message { message, .. }) = steps.next() else {
                            unreachable!("peeked a message")
                        };
                        batch.push(message);
                    }
                    self.import_messages(&workspace_id, &session_id, batch, request.derive, &mut counts)
                        .await?;
                }
                Step::Conclusion(conclusion) => {
                    let mut batch = vec![conclusion];
                    while let Some(Step::Conclusion(_)) = steps.peek() {
                        let Some(Step::Conclusion(conclusion)) = steps.next() else {
                            unreachable!("peeked a conclusion")
                        };
                        batch.push(conclusion);
                    }
                    let read = batch.len() as u64;
                    let new = self.store.import_conclusions(&workspace_id, batch).await?;
                    counts.conclusions.new += new;
                    counts.conclusions.present += read - new.min(read);
                }
                step => self.import_step(&workspace_id, step, &mut counts).await?,
            }
        }
        self.wrote(Ok(counts))
    }

    /// Writes one record that is neither a message nor a conclusion.
    async fn import_step(&self, workspace_id: &str, step: Step, counts: &mut Counts) -> Result<()> {
        match step {
            Step::Workspace {
                metadata,
                configuration,
            } => {
                let request = GetOrCreateWorkspace {
                    id: workspace_id.to_owned(),
                    metadata: Some(metadata),
                    configuration: Some(configuration),
                };
                let (_, created) = self.get_or_create_workspace(request).await?;
                counts.workspaces.add(created);
            }
            Step::Webhook(url) => {
                let request = CreateWebhook {
                    workspace_id: workspace_id.to_owned(),
                    url,
                };
                let (_, created) = self.create_webhook(request).await?;
                counts.webhooks.add(created);
            }
            // What is there already is left as it is (it may be newer than
            // the file): an import adds, it never rolls back.
            Step::Peer {
                id,
                metadata,
                configuration,
            } => {
                if self.stored(workspace_id, &PEER, &id).await? {
                    counts.peers.present += 1;
                    return Ok(());
                }
                let request = GetOrCreatePeer {
                    workspace_id: workspace_id.to_owned(),
                    id,
                    metadata: Some(metadata),
                    configuration: Some(configuration),
                };
                let (_, created) = self.get_or_create_peer(request).await?;
                counts.peers.add(created);
            }
            Step::PeerCard {
                observer,
                observed,
                card,
            } => {
                let held = match self.stored(workspace_id, &PEER, &observer).await? {
                    true => self.store.get_peer_card(workspace_id, &observer, &observed).await?,
                    false => None,
                };
                if held.is_some() {
                    counts.peer_cards.present += 1;
                } else {
                    self.store
                        .set_peer_card(workspace_id, &observer, &observed, card)
                        .await?;
                    counts.peer_cards.new += 1;
                }
            }
            Step::Session {
                id,
                metadata,
                configuration,
                peers,
            } => {
                self.import_session(workspace_id, id, metadata, configuration, peers, counts)
                    .await?
            }
            Step::Summary {
                session_id,
                kind,
                content,
                message_id,
                token_count,
            } => {
                let held = self.store.session_summaries(workspace_id, &session_id).await?;
                if held.iter().any(|summary| summary.kind == kind) {
                    counts.summaries.present += 1;
                } else {
                    self.store
                        .set_session_summary(
                            workspace_id,
                            &session_id,
                            kind,
                            &content,
                            &message_id,
                            token_count,
                            None,
                        )
                        .await?;
                    counts.summaries.new += 1;
                }
            }
            Step::Message { .. } | Step::Conclusion(_) => unreachable!("written in batches"),
        }
        Ok(())
    }

    /// Creates a session with its members in the order they joined; one
    /// that is there already is left as it is.
    async fn import_session(
        &self,
        workspace_id: &str,
        id: String,
        metadata: JsonObject,
        configuration: JsonObject,
        peers: Vec<(String, SessionPeerConfig)>,
        counts: &mut Counts,
    ) -> Result<()> {
        if self.stored(workspace_id, &SESSION, &id).await? {
            counts.sessions.present += 1;
            return Ok(());
        }
        let mut joining = peers.into_iter();
        let request = GetOrCreateSession {
            workspace_id: workspace_id.to_owned(),
            id: id.clone(),
            metadata: Some(metadata),
            configuration: Some(configuration),
            peers: joining.next().into_iter().collect(),
            scopes: Vec::new(),
        };
        let (_, created) = self.get_or_create_session(request).await?;
        counts.sessions.add(created);
        // One at a time, so that they join in their order.
        for member in joining {
            self.store.add_session_peers(workspace_id, &id, vec![member]).await?;
        }
        Ok(())
    }

    /// Appends one session's messages; their writers who were not members
    /// before (members who wrote and left) are not members after.
    async fn import_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        batch: Vec<ImportedMessage>,
        derive: bool,
        counts: &mut Counts,
    ) -> Result<()> {
        let members = self.members(workspace_id, session_id).await?;
        let left: Vec<String> = batch
            .iter()
            .map(|message| message.message.peer_id.clone())
            .filter(|author| !members.contains(author))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let read = batch.len() as u64;
        let new = self
            .store
            .import_messages(workspace_id, session_id, batch, derive)
            .await?;
        counts.messages.new += new;
        counts.messages.present += read - new.min(read);
        if !left.is_empty() {
            self.store.remove_session_peers(workspace_id, session_id, &left).await?;
        }
        Ok(())
    }

    /// A session's members now (`NOT_FOUND` when there is no such session).
    async fn members(&self, workspace_id: &str, session_id: &str) -> Result<BTreeSet<String>> {
        let mut members = BTreeSet::new();
        for page in 1.. {
            let request = PageRequest {
                page,
                size: 500,
                reverse: false,
            };
            let found = self.store.list_session_peers(workspace_id, session_id, request).await?;
            let last = found.items.len() < 500;
            members.extend(found.items.into_iter().map(|peer| peer.id));
            if last {
                break;
            }
        }
        Ok(members)
    }
}
