//! The tools that read memory: observations by meaning or words, by recency
//! or how often they were derived, reasoning chains, and the peer card.

use roncho_core::filter;
use roncho_core::model::{CollectionQuery, Conclusion, PageRequest};
use roncho_core::{Error, Result};
use roncho_search::context::{RepresentationOptions, nearest_conclusions};
use serde_json::{Value, json};

use super::ToolContext;
use super::args::{int_arg, required_text};
use super::output::{observation_line, observation_lines};

/// Conclusions scanned by the lexical `search_memory` when there is no embedder.
const LEXICAL_SCAN: i64 = 500;
/// Depth of a reasoning chain walk.
const CHAIN_DEPTH: usize = 3;

impl ToolContext {
    pub(super) async fn search_memory(&self, input: &Value) -> Result<String> {
        let query = required_text(input, "query")?;
        let top_k = int_arg(input, "top_k", 20, 1, 40);
        let found = self.find_observations(&query, top_k, None).await?;
        if found.is_empty() {
            return Ok(format!("No observations found for '{query}'."));
        }
        Ok(format!(
            "Found {} observations:\n{}",
            found.len(),
            observation_lines(&found)
        ))
    }

    /// The collection's conclusions nearest `query` (semantic, else by shared
    /// words), optionally of some levels only.
    pub async fn find_observations(&self, query: &str, top_k: i64, levels: Option<&[&str]>) -> Result<Vec<Conclusion>> {
        let found = self.nearest_observations(query, top_k, levels).await?;
        self.read_conclusions(&found);
        Ok(found)
    }

    async fn nearest_observations(&self, query: &str, top_k: i64, levels: Option<&[&str]>) -> Result<Vec<Conclusion>> {
        let wanted = |conclusion: &Conclusion| levels.is_none_or(|levels| levels.contains(&conclusion.level.as_str()));
        if let Some(semantic) = self.semantic.as_ref().filter(|_| !self.whole_workspace) {
            let options = RepresentationOptions {
                observer: self.observer.clone(),
                observed: self.observed.clone(),
                allowed_sessions: self.allowed_sessions.clone(),
                ..RepresentationOptions::default()
            };
            // Asks for more when filtering by level afterwards.
            let asked = if levels.is_some() { top_k * 4 } else { top_k };
            match nearest_conclusions(self.store.as_ref(), semantic, &self.workspace, &options, query, asked).await {
                Ok(found) => {
                    let mut found: Vec<Conclusion> =
                        found.into_iter().filter(|c| self.visible(c) && wanted(c)).collect();
                    found.truncate(usize::try_from(top_k).unwrap_or(usize::MAX));
                    if !found.is_empty() {
                        return Ok(found);
                    }
                }
                Err(error) => tracing::warn!(%error, "semantic memory search failed; matching words instead"),
            }
        }
        let terms = roncho_core::search::terms(query);
        let candidates = if self.whole_workspace {
            self.workspace_conclusions().await?
        } else {
            self.store
                .collection_conclusions(
                    &self.workspace,
                    &self.observer,
                    &self.observed,
                    &CollectionQuery {
                        allowed_sessions: self.allowed_sessions.clone(),
                        recent: LEXICAL_SCAN,
                        most_derived: 0,
                    },
                )
                .await?
        };
        let mut scored: Vec<(usize, Conclusion)> = candidates
            .into_iter()
            .filter(|c| self.visible(c) && wanted(c))
            .map(|c| (shared_terms(&terms, &c.content), c))
            .filter(|(score, _)| *score > 0)
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.created_at.cmp(&a.1.created_at)));
        Ok(scored
            .into_iter()
            .take(usize::try_from(top_k).unwrap_or(usize::MAX))
            .map(|(_, c)| c)
            .collect())
    }

    /// The workspace's newest conclusions of every collection, up to
    /// [`LEXICAL_SCAN`] (vectors are kept per collection: a whole-workspace
    /// question matches words).
    async fn workspace_conclusions(&self) -> Result<Vec<Conclusion>> {
        let mut found = Vec::new();
        let pages = i32::try_from(LEXICAL_SCAN / 100).unwrap_or(1);
        for page in 1..=pages {
            let items = self
                .store
                .list_conclusions(
                    &self.workspace,
                    &filter::Filter::All,
                    PageRequest::from_wire(page, 100, false)?,
                )
                .await?
                .items;
            let last = items.len() < 100;
            found.extend(items);
            if last {
                break;
            }
        }
        Ok(found)
    }

    pub(super) async fn reasoning_chain(&self, input: &Value) -> Result<String> {
        let id = required_text(input, "observation_id")?;
        let direction = input.get("direction").and_then(Value::as_str).unwrap_or("both");
        if !matches!(direction, "premises" | "conclusions" | "both") {
            return Err(Error::invalid("direction", "must be premises, conclusions or both"));
        }
        let root = self.collection_conclusion(&id).await?;
        let mut text = format!("Observation:\n{}\n", observation_line(&root));
        if direction != "conclusions" {
            text.push_str("\nPremises (what it is based on):\n");
            let before = text.len();
            self.walk_premises(&root, 1, &mut text).await?;
            if text.len() == before {
                text.push_str("  (none)\n");
            }
        }
        if direction != "premises" {
            text.push_str("\nConclusions (what depends on it):\n");
            let before = text.len();
            self.walk_conclusions(&root.id, 1, &mut text).await?;
            if text.len() == before {
                text.push_str("  (none)\n");
            }
        }
        Ok(text)
    }

    async fn walk_premises(&self, conclusion: &Conclusion, depth: usize, text: &mut String) -> Result<()> {
        if conclusion.level == "explicit" {
            if !conclusion.source_ids.is_empty() {
                text.push_str(&format!(
                    "{}from messages: {}\n",
                    "  ".repeat(depth),
                    conclusion.source_ids.join(", ")
                ));
            }
            return Ok(());
        }
        let premises = self
            .store
            .conclusions_by_ids(&self.workspace, &conclusion.source_ids)
            .await?;
        for premise in premises.iter().filter(|c| self.visible(c)) {
            text.push_str(&format!("{}{}\n", "  ".repeat(depth), observation_line(premise)));
            if depth < CHAIN_DEPTH {
                Box::pin(self.walk_premises(premise, depth + 1, text)).await?;
            }
        }
        Ok(())
    }

    async fn walk_conclusions(&self, id: &str, depth: usize, text: &mut String) -> Result<()> {
        let citing = self.store.conclusions_citing(&self.workspace, id).await?;
        for conclusion in citing.iter().filter(|c| self.visible(c)) {
            text.push_str(&format!("{}{}\n", "  ".repeat(depth), observation_line(conclusion)));
            if depth < CHAIN_DEPTH {
                Box::pin(self.walk_conclusions(&conclusion.id, depth + 1, text)).await?;
            }
        }
        Ok(())
    }

    /// A live conclusion of this collection the run may see.
    async fn collection_conclusion(&self, id: &str) -> Result<Conclusion> {
        self.store
            .conclusions_by_ids(&self.workspace, &[id.to_owned()])
            .await?
            .into_iter()
            .find(|c| self.visible(c))
            .ok_or_else(|| Error::not_found("observation", id))
    }

    pub(super) async fn recent_observations(&self, input: &Value) -> Result<String> {
        let limit = int_arg(input, "limit", 10, 1, 100);
        let session_only = input.get("session_only").and_then(Value::as_bool).unwrap_or(false);
        let mut filters = json!({"observer_id": self.observer, "observed_id": self.observed});
        if session_only {
            let Some(session) = &self.session else {
                return Err(Error::invalid("session_only", "this run has no session"));
            };
            filters["session_id"] = json!(session);
        }
        let filter = filter::parse(&filter::CONCLUSION, filters.as_object())?;
        let page = PageRequest::from_wire(1, i32::try_from(limit).unwrap_or(100), false)?;
        let found: Vec<Conclusion> = self
            .store
            .list_conclusions(&self.workspace, &filter, page)
            .await?
            .items
            .into_iter()
            .filter(|c| self.visible(c))
            .collect();
        if found.is_empty() {
            return Ok("No observations yet.".to_owned());
        }
        Ok(format!(
            "{} most recent observations:\n{}",
            found.len(),
            observation_lines(&found)
        ))
    }

    pub(super) async fn most_derived_observations(&self, input: &Value) -> Result<String> {
        let limit = int_arg(input, "limit", 10, 1, 100);
        let found: Vec<Conclusion> = self
            .store
            .collection_conclusions(
                &self.workspace,
                &self.observer,
                &self.observed,
                &CollectionQuery {
                    allowed_sessions: self.allowed_sessions.clone(),
                    recent: 0,
                    most_derived: limit,
                },
            )
            .await?
            .into_iter()
            .filter(|c| self.visible(c))
            .collect();
        if found.is_empty() {
            return Ok("No observations yet.".to_owned());
        }
        let lines: String = found
            .iter()
            .map(|c| format!("{} (derived {}x)\n", observation_line(c), c.times_derived))
            .collect();
        Ok(format!("{} most derived observations:\n{lines}", found.len()))
    }

    pub(super) async fn peer_card(&self) -> Result<String> {
        match roncho_search::context::peer_card(self.store.as_ref(), &self.workspace, &self.observer, &self.observed)
            .await?
        {
            Some(card) if !card.is_empty() => Ok(format!("Peer card of {}:\n{}", self.observed, card.join("\n"))),
            _ => Ok(format!("No peer card for {} yet.", self.observed)),
        }
    }
}

fn shared_terms(terms: &[String], content: &str) -> usize {
    let words = roncho_core::search::terms(content);
    terms.iter().filter(|term| words.contains(term)).count()
}
