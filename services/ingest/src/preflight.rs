//! What an import call is checked for before it writes anything, beyond
//! each record on its own ([`crate::import`]): ids repeated within the
//! call or taken elsewhere, and what each record names — a session, a
//! peer, a summary's message — there already or written earlier in the
//! same call. A call refused here has written nothing.

use std::collections::{BTreeMap, BTreeSet};

use roncho_core::filter::{self, Filter};
use roncho_core::model::{PageRequest, PeerKind};
use roncho_core::{Error, Result};
use serde_json::json;

use crate::Ingest;
use crate::import::Step;

/// Refuses a record at `index` of the call.
fn refuse(index: usize, field: &str, reason: impl Into<String>) -> Error {
    Error::invalid(format!("records[{index}].{field}"), reason.into())
}

/// What the call itself will have written by a record, and what the store
/// was found to hold.
#[derive(Default)]
struct Known {
    peers: BTreeSet<String>,
    sessions: BTreeSet<String>,
    /// Message id → its session.
    messages: BTreeMap<String, String>,
    conclusions: BTreeSet<String>,
    /// Looked up in the store: whether each exists.
    stored_peers: BTreeMap<String, bool>,
    stored_sessions: BTreeMap<String, bool>,
}

impl Ingest {
    pub(crate) async fn stored(&self, workspace_id: &str, schema: &filter::Schema, id: &str) -> Result<bool> {
        let by_id: Filter = filter::parse(schema, json!({ "id": id }).as_object())?;
        let one = PageRequest {
            page: 1,
            size: 1,
            reverse: false,
        };
        let found = if schema.resource == filter::PEER.resource {
            self.store
                .list_peers(workspace_id, PeerKind::All, &by_id, one)
                .await?
                .items
                .len()
        } else {
            self.store.list_sessions(workspace_id, &by_id, one).await?.items.len()
        };
        Ok(found > 0)
    }

    /// Whether peer (`schema` PEER) or session (SESSION) `id` is written
    /// earlier in the call or held in the store.
    async fn known(&self, workspace_id: &str, known: &mut Known, schema: &filter::Schema, id: &str) -> Result<bool> {
        let peer = schema.resource == filter::PEER.resource;
        let (in_call, stored) = match peer {
            true => (&known.peers, &mut known.stored_peers),
            false => (&known.sessions, &mut known.stored_sessions),
        };
        if in_call.contains(id) {
            return Ok(true);
        }
        if let Some(found) = stored.get(id) {
            return Ok(*found);
        }
        let found = self.stored(workspace_id, schema, id).await?;
        stored.insert(id.to_owned(), found);
        Ok(found)
    }

    /// Checks the call's records together (see the module).
    pub(crate) async fn preflight(&self, workspace_id: &str, steps: &[(usize, Step)]) -> Result<()> {
        let mut known = Known::default();
        let missing_session = |session: &str| {
            format!("names session `{session}`, which is neither in the workspace nor earlier in the import")
        };
        for (index, step) in steps {
            let index = *index;
            match step {
                Step::Workspace { .. } | Step::Webhook(_) => {}
                Step::Peer { id, .. } => {
                    known.peers.insert(id.clone());
                }
                // A card's peers are made with it.
                Step::PeerCard { observer, observed, .. } => {
                    known.peers.extend([observer.clone(), observed.clone()]);
                }
                Step::Session { id, peers, .. } => {
                    known.sessions.insert(id.clone());
                    known.peers.extend(peers.iter().map(|(peer, _)| peer.clone()));
                }
                Step::Message { session_id, message } => {
                    if !self
                        .known(workspace_id, &mut known, &filter::SESSION, session_id)
                        .await?
                    {
                        return Err(refuse(index, "session_id", missing_session(session_id)));
                    }
                    if known.messages.insert(message.id.clone(), session_id.clone()).is_some() {
                        return Err(refuse(index, "id", "repeats an id earlier in the import"));
                    }
                    // A writer is made a member (and a peer) as it writes.
                    known.peers.insert(message.message.peer_id.clone());
                }
                Step::Summary {
                    session_id, message_id, ..
                } => {
                    if !self
                        .known(workspace_id, &mut known, &filter::SESSION, session_id)
                        .await?
                    {
                        return Err(refuse(index, "session_id", missing_session(session_id)));
                    }
                    let in_call = known.messages.get(message_id) == Some(session_id);
                    let stored = || async {
                        let found = self
                            .store
                            .messages_by_ids(workspace_id, std::slice::from_ref(message_id), &Filter::All, None)
                            .await?;
                        Ok::<_, Error>(found.iter().any(|message| message.session_id == *session_id))
                    };
                    if !in_call && !stored().await? {
                        return Err(refuse(
                            index,
                            "message_id",
                            format!("names no message of session `{session_id}`"),
                        ));
                    }
                }
                Step::Conclusion(conclusion) => {
                    if !known.conclusions.insert(conclusion.id.clone()) {
                        return Err(refuse(index, "id", "repeats an id earlier in the import"));
                    }
                    let named = &conclusion.conclusion;
                    for (field, peer) in [("observer_id", &named.observer_id), ("observed_id", &named.observed_id)] {
                        if !self.known(workspace_id, &mut known, &filter::PEER, peer).await? {
                            return Err(refuse(
                                index,
                                field,
                                format!(
                                    "names peer `{peer}`, which is neither in the workspace nor earlier in the import"
                                ),
                            ));
                        }
                    }
                    if let Some(session) = &named.session_id
                        && !self.known(workspace_id, &mut known, &filter::SESSION, session).await?
                    {
                        return Err(refuse(index, "session_id", missing_session(session)));
                    }
                }
            }
        }
        self.refuse_taken(workspace_id, known, steps).await
    }

    /// Refuses the first message or conclusion whose id is held elsewhere.
    async fn refuse_taken(&self, workspace_id: &str, known: Known, steps: &[(usize, Step)]) -> Result<()> {
        let messages: Vec<(String, String)> = known.messages.into_iter().collect();
        let conclusions: Vec<String> = known.conclusions.into_iter().collect();
        let taken: BTreeSet<String> = self
            .store
            .taken_ids(workspace_id, &messages, &conclusions)
            .await?
            .into_iter()
            .collect();
        if let Some((index, id)) = steps.iter().find_map(|(index, step)| {
            let id = match step {
                Step::Message { message, .. } => &message.id,
                Step::Conclusion(conclusion) => &conclusion.id,
                _ => return None,
            };
            taken.contains(id).then(|| (*index, id.clone()))
        }) {
            return Err(Error::FailedPrecondition(format!(
                "records[{index}].id: `{id}` is taken (ids are unique across the server; import into the server \
                 or workspace the export came from, or into a fresh one)"
            )));
        }
        Ok(())
    }
}
