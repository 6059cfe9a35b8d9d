//! Export: a workspace, or one peer's or one session's part of it, as the
//! [`Record`]s of `roncho_core::export`, streamed as they are read.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::stream::BoxStream;
use roncho_core::export::{FORMAT_VERSION, Member, Record};
use roncho_core::filter::{self, Filter, Schema};
use roncho_core::model::{Conclusion, Message, MessageScan, PageRequest, PeerKind, Session};
use roncho_core::webhook::timestamp;
use roncho_core::{Error, Result, validate};
use serde_json::json;
use tokio::sync::mpsc;

use crate::{ExportWorkspace, RecallStore};

/// Rows read per page.
const PAGE: i64 = 500;
/// Records read ahead of a slow reader.
const READ_AHEAD: usize = 256;

/// What one export covers.
enum Part {
    Workspace,
    Peer(String),
    Session(String),
}

/// Checks the request and what it names, then streams the export; an
/// error after the first record ends the stream with it (no trailer).
pub(crate) async fn export(
    store: Arc<dyn RecallStore>,
    request: ExportWorkspace,
) -> Result<BoxStream<'static, Result<Record>>> {
    let workspace_id = validate::reference_id("workspace_id", &request.workspace_id)?;
    let optional = |field: &str, id: &Option<String>| {
        id.as_deref()
            .filter(|id| !id.is_empty())
            .map(|id| validate::reference_id(field, id))
            .transpose()
    };
    let part = match (
        optional("peer_id", &request.peer_id)?,
        optional("session_id", &request.session_id)?,
    ) {
        (Some(_), Some(_)) => return Err(Error::invalid("session_id", "cannot be combined with peer_id")),
        (Some(peer), None) => Part::Peer(peer),
        (None, Some(session)) => Part::Session(session),
        (None, None) => Part::Workspace,
    };
    let workspace = one(store
        .list_workspaces(&by_id(&filter::WORKSPACE, &workspace_id)?, first())
        .await?
        .items)
    .ok_or_else(|| Error::not_found("workspace", &workspace_id))?;
    let (sender, mut receiver) = mpsc::channel(READ_AHEAD);
    let mut export = Export {
        store: store.clone(),
        workspace_id: workspace_id.clone(),
        sender: Some(sender),
        records: 0,
        peers: BTreeSet::new(),
        sessions: BTreeSet::new(),
        left_out: BTreeSet::new(),
    };
    // What the request names must exist before the stream starts: a
    // missing one is the call's NOT_FOUND, not a cut-off stream.
    let sessions = match &part {
        Part::Workspace => None,
        Part::Peer(peer) => {
            let found = store
                .list_peers(&workspace_id, PeerKind::Peer, &by_id(&filter::PEER, peer)?, first())
                .await?;
            if found.items.is_empty() {
                return Err(Error::not_found("peer", peer));
            }
            None
        }
        Part::Session(session) => {
            let found = one(store
                .list_sessions(&workspace_id, &by_id(&filter::SESSION, session)?, first())
                .await?
                .items);
            Some(vec![found.ok_or_else(|| Error::not_found("session", session))?])
        }
    };
    let header = Record::Export {
        version: FORMAT_VERSION,
        workspace_id: workspace_id.clone(),
        peer_id: match &part {
            Part::Peer(peer) => Some(peer.clone()),
            _ => None,
        },
        session_id: match &part {
            Part::Session(session) => Some(session.clone()),
            _ => None,
        },
    };
    tokio::spawn(async move {
        let result = export.run(header, workspace, part, sessions).await;
        if let (Err(error), Some(sender)) = (result, &export.sender) {
            // The reader may have gone: then no one is told, as no one asks.
            let _ = sender.send(Err(error)).await;
        }
    });
    Ok(Box::pin(futures::stream::poll_fn(move |context| {
        receiver.poll_recv(context)
    })))
}

/// The first row of a page, if any.
fn one<T>(items: Vec<T>) -> Option<T> {
    items.into_iter().next()
}

fn first() -> PageRequest {
    PageRequest {
        page: 1,
        size: 1,
        reverse: false,
    }
}

fn page(number: i64, reverse: bool) -> PageRequest {
    PageRequest {
        page: number,
        size: PAGE,
        reverse,
    }
}

/// The newest message of a list: the first of a page of one, newest first.
fn first_newest() -> PageRequest {
    PageRequest {
        page: 1,
        size: 1,
        reverse: true,
    }
}

fn by_id(schema: &Schema, id: &str) -> Result<Filter> {
    filter::parse(schema, json!({ "id": id }).as_object())
}

/// Where a list ordered by (`created_at`, `id`) was left: the filter
/// that reads on from there, so that rows erased or added meanwhile
/// neither shift nor repeat the others.
fn after(schema: &Schema, last: Option<(i64, &str)>) -> Result<Filter> {
    let Some((created_at, id)) = last else {
        return Ok(Filter::All);
    };
    let at = timestamp(created_at);
    filter::parse(
        schema,
        json!({"OR": [
            {"created_at": {"gt": at}},
            {"AND": [{"created_at": at}, {"id": {"gt": id}}]},
        ]})
        .as_object(),
    )
}

/// The reading side of one export.
struct Export {
    store: Arc<dyn RecallStore>,
    workspace_id: String,
    sender: Option<mpsc::Sender<Result<Record>>>,
    /// Records sent after the header.
    records: u64,
    /// Peers written so far (each before the first record naming it).
    peers: BTreeSet<String>,
    /// Sessions written so far.
    sessions: BTreeSet<String>,
    /// What was not written, once per reason, for the trailer.
    left_out: BTreeSet<String>,
}

impl Export {
    async fn send(&mut self, record: Record) -> Result<()> {
        let sender = self.sender.as_ref().expect("an export sends once started");
        if sender.send(Ok(record)).await.is_err() {
            self.sender = None;
            return Err(Error::Unavailable("the export's reader went away".into()));
        }
        Ok(())
    }

    async fn write(&mut self, record: Record) -> Result<()> {
        self.records += 1;
        self.send(record).await
    }

    async fn run(
        &mut self,
        header: Record,
        workspace: roncho_core::model::Workspace,
        part: Part,
        sessions: Option<Vec<Session>>,
    ) -> Result<()> {
        self.send(header).await?;
        self.write(Record::Workspace {
            id: workspace.id,
            metadata: workspace.metadata,
            configuration: workspace.configuration,
        })
        .await?;
        let conclusions = match &part {
            Part::Workspace => {
                self.webhooks().await?;
                self.all_peers().await?;
                self.peer_cards(None).await?;
                self.all_sessions(None).await?;
                Filter::All
            }
            Part::Peer(peer) => {
                self.peer_cards(Some(peer)).await?;
                self.all_sessions(Some(peer)).await?;
                filter::parse(
                    &filter::CONCLUSION,
                    json!({ "OR": [{ "observer_id": peer }, { "observed_id": peer }] }).as_object(),
                )?
            }
            Part::Session(session) => {
                for session in sessions.into_iter().flatten() {
                    self.session(session).await?;
                }
                filter::parse(&filter::CONCLUSION, json!({ "session_id": session }).as_object())?
            }
        };
        self.conclusions(&conclusions).await?;
        let end = Record::End {
            records: self.records,
            left_out: std::mem::take(&mut self.left_out).into_iter().collect(),
        };
        self.send(end).await
    }

    /// Writes peer `id` unless written already; `None` when it is not a
    /// peer of the workspace (erased, or a scope).
    async fn peer(&mut self, id: &str) -> Result<Option<()>> {
        if self.peers.contains(id) {
            return Ok(Some(()));
        }
        let found = self
            .store
            .list_peers(&self.workspace_id, PeerKind::Peer, &by_id(&filter::PEER, id)?, first())
            .await?;
        let Some(peer) = one(found.items) else {
            return Ok(None);
        };
        self.peers.insert(peer.id.clone());
        self.write(Record::Peer {
            id: peer.id,
            metadata: peer.metadata,
            configuration: peer.configuration,
        })
        .await?;
        Ok(Some(()))
    }

    async fn webhooks(&mut self) -> Result<()> {
        // At most 10 a workspace: one page.
        let found = self.store.list_webhooks(&self.workspace_id, page(1, false)).await?;
        for endpoint in found.items {
            self.write(Record::Webhook { url: endpoint.url }).await?;
        }
        Ok(())
    }

    async fn all_peers(&mut self) -> Result<()> {
        let mut last: Option<(i64, String)> = None;
        loop {
            let from = after(&filter::PEER, last.as_ref().map(|(at, id)| (*at, id.as_str())))?;
            let found = self
                .store
                .list_peers(&self.workspace_id, PeerKind::Peer, &from, page(1, false))
                .await?;
            let full = found.items.len() == PAGE as usize;
            for peer in found.items {
                last = Some((peer.created_at, peer.id.clone()));
                if self.peers.insert(peer.id.clone()) {
                    self.write(Record::Peer {
                        id: peer.id,
                        metadata: peer.metadata,
                        configuration: peer.configuration,
                    })
                    .await?;
                }
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Every card, or those `peer` holds or is the subject of.
    async fn peer_cards(&mut self, peer: Option<&str>) -> Result<()> {
        for (observer, observed, card) in self.store.list_peer_cards(&self.workspace_id).await? {
            if peer.is_some_and(|peer| peer != observer && peer != observed) {
                continue;
            }
            if self.peer(&observer).await?.is_none() || self.peer(&observed).await?.is_none() {
                self.left_out.insert("peer cards held by or about scopes".into());
                continue;
            }
            self.write(Record::PeerCard {
                observer_id: observer,
                observed_id: observed,
                card,
            })
            .await?;
        }
        Ok(())
    }

    /// Every session of the workspace, or of `peer`.
    async fn all_sessions(&mut self, peer: Option<&str>) -> Result<()> {
        let mut last: Option<(i64, String)> = None;
        loop {
            let from = after(&filter::SESSION, last.as_ref().map(|(at, id)| (*at, id.as_str())))?;
            let found = match peer {
                Some(peer) => {
                    self.store
                        .list_peer_sessions(&self.workspace_id, peer, &from, page(1, false))
                        .await?
                }
                None => {
                    self.store
                        .list_sessions(&self.workspace_id, &from, page(1, false))
                        .await?
                }
            };
            let full = found.items.len() == PAGE as usize;
            for session in found.items {
                last = Some((session.created_at, session.id.clone()));
                self.session(session).await?;
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// A session, its members, messages and summaries.
    async fn session(&mut self, session: Session) -> Result<()> {
        let workspace_id = self.workspace_id.clone();
        let mut peers = Vec::new();
        // At most 100 members a session: one page.
        let found = self
            .store
            .list_session_peers(&workspace_id, &session.id, page(1, false))
            .await?;
        for member in found.items {
            if self.peer(&member.id).await?.is_none() {
                self.left_out.insert("scopes' session memberships".into());
                continue;
            }
            let config = self
                .store
                .get_session_peer_config(&workspace_id, &session.id, &member.id)
                .await?;
            peers.push(Member {
                peer_id: member.id,
                observe_me: config.observe_me,
                observe_others: config.observe_others,
            });
        }
        self.sessions.insert(session.id.clone());
        self.write(Record::Session {
            id: session.id.clone(),
            metadata: session.metadata,
            configuration: session.configuration,
            peers,
        })
        .await?;
        // By ranges of places in the session, up to its last one now: an
        // erased message leaves a hole, one written meanwhile comes after.
        let newest = self
            .store
            .list_messages(&workspace_id, &session.id, &Filter::All, first_newest())
            .await?;
        let last = newest.items.first().map_or(0, |message| message.seq_in_session);
        let mut from = 1;
        while from <= last {
            let to = (from + PAGE - 1).min(last);
            let scan = MessageScan {
                session_ids: Some(vec![session.id.clone()]),
                peer_perspective: None,
                contains: None,
                after: None,
                before: None,
                seq_range: Some((from, to)),
                newest_first: false,
                limit: PAGE,
            };
            let mut messages = self.store.scan_messages(&workspace_id, &scan).await?;
            messages.sort_by_key(|message| message.seq_in_session);
            for message in messages {
                self.message(message).await?;
            }
            from = to + 1;
        }
        for summary in self.store.session_summaries(&workspace_id, &session.id).await? {
            self.write(Record::Summary {
                session_id: session.id.clone(),
                summary_type: summary.kind.name().to_owned(),
                content: summary.content,
                message_id: summary.message_id,
                token_count: summary.token_count,
            })
            .await?;
        }
        Ok(())
    }

    async fn message(&mut self, message: Message) -> Result<()> {
        // A member who wrote and left is a peer still.
        if self.peer(&message.peer_id).await?.is_none() {
            self.left_out
                .insert("messages of peers erased during the export".into());
            return Ok(());
        }
        self.write(Record::Message {
            id: message.id,
            session_id: message.session_id,
            peer_id: message.peer_id,
            content: message.content,
            metadata: message.metadata,
            created_at: timestamp(message.created_at),
        })
        .await
    }

    /// Conclusions passing `filter`, in the order they were stored (what
    /// one rests on before it); the conclusions they cite that are gone
    /// (deleted) are not named.
    async fn conclusions(&mut self, filter: &Filter) -> Result<()> {
        let mut place = 0;
        loop {
            let found = self
                .store
                .conclusions_in_order(&self.workspace_id, filter, place, PAGE)
                .await?;
            let full = found.len() == PAGE as usize;
            let cited: Vec<String> = found
                .iter()
                .filter(|(_, conclusion)| conclusion.level != "explicit")
                .flat_map(|(_, conclusion)| conclusion.source_ids.iter().cloned())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let live: BTreeSet<String> = match cited.is_empty() {
                true => BTreeSet::new(),
                false => self
                    .store
                    .conclusions_by_ids(&self.workspace_id, &cited)
                    .await?
                    .into_iter()
                    .map(|conclusion| conclusion.id)
                    .collect(),
            };
            for (at, mut conclusion) in found {
                place = at;
                if conclusion.level != "explicit" {
                    conclusion.source_ids.retain(|source| live.contains(source));
                }
                self.conclusion(conclusion).await?;
            }
            if !full {
                return Ok(());
            }
        }
    }

    async fn conclusion(&mut self, conclusion: Conclusion) -> Result<()> {
        if self.peer(&conclusion.observer_id).await?.is_none() || self.peer(&conclusion.observed_id).await?.is_none() {
            self.left_out.insert("scopes' memory".into());
            return Ok(());
        }
        if let Some(session) = &conclusion.session_id
            && !self.sessions.contains(session)
        {
            self.left_out
                .insert("conclusions from sessions outside what was exported".into());
            return Ok(());
        }
        self.write(Record::Conclusion {
            id: conclusion.id,
            observer_id: conclusion.observer_id,
            observed_id: conclusion.observed_id,
            session_id: conclusion.session_id,
            level: conclusion.level,
            content: conclusion.content,
            premises: conclusion.premises,
            source_ids: conclusion.source_ids,
            times_derived: conclusion.times_derived,
            metadata: conclusion.metadata,
            created_at: timestamp(conclusion.created_at),
        })
        .await
    }
}
