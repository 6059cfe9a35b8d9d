//! Saving derived facts with Honcho's dedup. A fact the collection already
//! holds (same level and session, ignoring case and spacing) counts one
//! more derivation (`times_derived`); with an embedder, a fact within
//! cosine distance [`SEMANTIC_DUPLICATE`] of a stored one is the same fact,
//! and the better worded of the two (more words, more distinct words) is
//! kept carrying the count.

use std::sync::Arc;

use roncho_core::embed::{Embedder, cosine};
use roncho_core::filter;
use roncho_core::model::{JsonObject, NewConclusion, PageRequest};
use roncho_core::store::Memory;
use roncho_core::vector::{VectorFilter, VectorStore, documents_namespace};
use roncho_core::{Error, Result};
use roncho_worker::CollectionListener;
use serde_json::json;

/// Cosine distance at or under which two facts are one (Honcho's 0.05).
pub const SEMANTIC_DUPLICATE: f32 = 0.05;

/// Writes explicit facts into observers' collections, deduplicated, and
/// tells who listens which collections gained observations.
pub(crate) struct FactWriter {
    store: Arc<dyn Memory>,
    /// Embedder and vectors for semantic dedup; `None`: exact dedup only.
    pub(crate) semantic: Option<(Arc<dyn Embedder>, Arc<dyn VectorStore>)>,
    /// Called after conclusions are written (wakes a reconciler in this process).
    pub(crate) on_saved: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Told which collections gained observations (the dream scheduler).
    pub(crate) listener: Option<Arc<dyn CollectionListener>>,
}

impl FactWriter {
    /// Returns a writer into `store` with exact dedup only, telling no one.
    pub(crate) fn new(store: Arc<dyn Memory>) -> Self {
        Self {
            store,
            semantic: None,
            on_saved: None,
            listener: None,
        }
    }

    /// Saves explicit facts into one collection with Honcho's dedup: exact
    /// (ignoring case and spacing), then semantic when an embedder is set.
    pub(crate) async fn save(
        &self,
        target: &Collection<'_>,
        facts: Vec<String>,
        sources: &[String],
        metadata: &JsonObject,
    ) -> Result<()> {
        let Collection {
            workspace,
            observer,
            observed,
            session,
        } = *target;
        let known = self.collection_facts(workspace, observer, observed, session).await?;
        let mut rederived = Vec::new();
        let mut fresh: Vec<String> = Vec::new();
        for content in facts {
            let key = normalized(&content);
            if content.is_empty() || fresh.iter().any(|seen| normalized(seen) == key) {
                continue;
            }
            match known.iter().find(|(known, _)| *known == key) {
                Some((_, id)) => rederived.push(id.clone()),
                None => fresh.push(content),
            }
        }
        let conclusion = |content: String| NewConclusion {
            observer_id: observer.to_owned(),
            observed_id: observed.to_owned(),
            session_id: Some(session.to_owned()),
            level: "explicit".into(),
            content,
            premises: Vec::new(),
            source_ids: sources.to_vec(),
            metadata: metadata.clone(),
        };
        let mut new = Vec::new();
        let mut superseded = 0;
        for placed in self.place_semantically(target, fresh).await {
            match placed {
                Placement::New(content) => new.push(conclusion(content)),
                Placement::Rederived(id) => rederived.push(id),
                Placement::Supersedes(old, content) => {
                    match self
                        .store
                        .supersede_conclusion(workspace, &old, conclusion(content.clone()))
                        .await
                    {
                        Ok(_) => superseded += 1,
                        // Deleted meanwhile: the fact is simply new.
                        Err(Error::NotFound { .. }) => new.push(conclusion(content)),
                        Err(error) => return Err(error),
                    }
                }
            }
        }
        self.store.increment_times_derived(workspace, &rederived).await?;
        let created = new.len();
        if !new.is_empty() {
            self.store.create_conclusions(workspace, new).await?;
        }
        if created + superseded > 0 {
            if let Some(hook) = &self.on_saved {
                hook();
            }
            if let Some(listener) = &self.listener {
                listener.gained(workspace, observer, observed).await;
            }
        }
        tracing::debug!(
            workspace,
            observer,
            observed,
            session,
            created,
            superseded,
            rederived = rederived.len(),
            "saved facts"
        );
        Ok(())
    }

    /// Decides where each fact goes by its embedding: new, a re-derivation
    /// of a stored fact, or a better wording replacing one. Facts of the
    /// same batch within the threshold keep the better one. Without an
    /// embedder, or when it fails, every fact is new (logged; nothing is lost).
    async fn place_semantically(&self, target: &Collection<'_>, facts: Vec<String>) -> Vec<Placement> {
        let Some((embedder, vectors)) = &self.semantic else {
            return facts.into_iter().map(Placement::New).collect();
        };
        if facts.is_empty() {
            return Vec::new();
        }
        match self
            .semantic_placements(embedder.as_ref(), vectors.as_ref(), target, &facts)
            .await
        {
            Ok(placements) => placements,
            Err(error) => {
                tracing::warn!(%error, observer = target.observer, observed = target.observed, "semantic dedup unavailable; saving without it");
                facts.into_iter().map(Placement::New).collect()
            }
        }
    }

    async fn semantic_placements(
        &self,
        embedder: &dyn Embedder,
        vectors: &dyn VectorStore,
        target: &Collection<'_>,
        facts: &[String],
    ) -> Result<Vec<Placement>> {
        // After queries and message vectors: nobody waits on this check.
        let embedded = embedder.embed_background(facts).await?;
        // Within the batch: of two near-identical facts keep the better worded.
        let mut kept: Vec<usize> = Vec::new();
        for (index, vector) in embedded.iter().enumerate() {
            match kept
                .iter()
                .position(|&other| 1.0 - cosine(vector, &embedded[other]) <= SEMANTIC_DUPLICATE)
            {
                Some(slot) if wording_score(&facts[index]) > wording_score(&facts[kept[slot]]) => kept[slot] = index,
                Some(_) => {}
                None => kept.push(index),
            }
        }
        let namespace = documents_namespace(target.workspace, target.observer, target.observed);
        let filter = VectorFilter {
            session_ids: Some(vec![target.session.to_owned()]),
            levels: Some(vec!["explicit".to_owned()]),
            ..VectorFilter::default()
        };
        let mut placements = Vec::new();
        let mut matched: Vec<String> = Vec::new();
        for index in kept {
            let content = facts[index].clone();
            let hit = vectors
                .query(&namespace, &embedded[index], 1, &filter, Some(SEMANTIC_DUPLICATE))
                .await?
                .into_iter()
                .next();
            let stored = match hit {
                Some(hit) => self.store.conclusions_by_ids(target.workspace, &[hit.id]).await?.pop(),
                None => None,
            };
            placements.push(match stored {
                // Another fact of this batch already answered for it.
                Some(stored) if matched.contains(&stored.id) => continue,
                Some(stored) => {
                    matched.push(stored.id.clone());
                    if wording_score(&content) >= wording_score(&stored.content) {
                        Placement::Supersedes(stored.id, content)
                    } else {
                        Placement::Rederived(stored.id)
                    }
                }
                None => Placement::New(content),
            });
        }
        Ok(placements)
    }

    /// The collection's newest explicit conclusions from this session, as
    /// (normalized content, id).
    async fn collection_facts(
        &self,
        workspace: &str,
        observer: &str,
        observed: &str,
        session: &str,
    ) -> Result<Vec<(String, String)>> {
        let filters =
            json!({"observer_id": observer, "observed_id": observed, "session_id": session, "level": "explicit"});
        let filter = filter::parse(&filter::CONCLUSION, filters.as_object())?;
        let page = PageRequest::from_wire(1, 100, false)?;
        Ok(self
            .store
            .list_conclusions(workspace, &filter, page)
            .await?
            .items
            .into_iter()
            .map(|conclusion| (normalized(&conclusion.content), conclusion.id))
            .collect())
    }
}

/// One observer's collection of facts about one peer, within a session.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Collection<'a> {
    pub(crate) workspace: &'a str,
    pub(crate) observer: &'a str,
    pub(crate) observed: &'a str,
    pub(crate) session: &'a str,
}

/// Where a fact goes after semantic dedup.
#[derive(Debug)]
enum Placement {
    New(String),
    /// The stored conclusion with this id is the same fact.
    Rederived(String),
    /// The fact replaces the stored conclusion with this id.
    Supersedes(String, String),
}

/// Honcho's measure of the better wording: words plus ten per distinct word.
pub(crate) fn wording_score(content: &str) -> usize {
    let words: Vec<String> = content.split_whitespace().map(str::to_lowercase).collect();
    let distinct: std::collections::HashSet<&String> = words.iter().collect();
    words.len() + 10 * distinct.len()
}

/// Content compared ignoring case and runs of whitespace.
fn normalized(content: &str) -> String {
    content.to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ")
}
