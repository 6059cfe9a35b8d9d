//! The tools that write memory: creating observations (each checked against
//! its level's rules and its sources), deleting them, and replacing the peer
//! card. Each write holds the collection's write lock.

use roncho_core::model::NewConclusion;
use roncho_core::{Error, Result};
use serde_json::{Value, json};

use super::ToolContext;
use super::args::text_list;
use super::output::{normalize_card, observation_lines};

impl ToolContext {
    pub(super) async fn create_observations(&self, input: &Value, fixed_level: Option<&str>) -> Result<String> {
        let Some(items) = input.get("observations").and_then(Value::as_array) else {
            return Err(Error::invalid("observations", "must be a list"));
        };
        let _guard = self.write_lock.lock().await;
        let mut new = Vec::new();
        let mut refused = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match self.new_observation(item, fixed_level).await? {
                Ok(conclusion) => new.push(conclusion),
                Err(reason) => refused.push(format!("observations[{index}]: {reason}")),
            }
        }
        let created = if new.is_empty() {
            Vec::new()
        } else {
            self.store.create_conclusions(&self.workspace, new).await?
        };
        let ids: Vec<String> = created.iter().map(|c| c.id.clone()).collect();
        self.record(|log| log.created.extend(ids));
        let mut text = format!(
            "Created {} observations:\n{}",
            created.len(),
            observation_lines(&created)
        );
        if !refused.is_empty() {
            text.push_str(&format!("Rejected {}:\n{}\n", refused.len(), refused.join("\n")));
        }
        Ok(text)
    }

    /// Validates one observation; the inner error is the reason it is refused.
    async fn new_observation(
        &self,
        item: &Value,
        fixed_level: Option<&str>,
    ) -> Result<std::result::Result<NewConclusion, String>> {
        let content = item.get("content").and_then(Value::as_str).map(str::trim).unwrap_or("");
        if content.is_empty() {
            return Ok(Err("content is empty".into()));
        }
        let level = match fixed_level.or_else(|| item.get("level").and_then(Value::as_str)) {
            Some(level @ ("explicit" | "deductive" | "inductive" | "contradiction")) => level,
            other => {
                return Ok(Err(format!(
                    "level {other:?} is not explicit, deductive, inductive or contradiction"
                )));
            }
        };
        let strings = |key: &str| -> Vec<String> {
            item.get(key)
                .and_then(Value::as_array)
                .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default()
        };
        let source_ids = strings("source_ids");
        let premises = strings("premises");
        let sources = strings("sources");
        let least = match level {
            "explicit" => 0,
            "deductive" => 1,
            _ => 2,
        };
        if source_ids.len() < least {
            return Ok(Err(format!("a {level} observation needs at least {least} source_ids")));
        }
        if level == "deductive" && premises.is_empty() {
            return Ok(Err("a deductive observation needs its premises".into()));
        }
        if matches!(level, "inductive" | "contradiction") && sources.len() < 2 {
            return Ok(Err(format!("a {level} observation needs at least 2 sources")));
        }
        let mut metadata = serde_json::Map::new();
        if level == "inductive" {
            for key in ["pattern_type", "confidence"] {
                match item.get(key).and_then(Value::as_str) {
                    Some(value) => {
                        metadata.insert(key.to_owned(), json!(value));
                    }
                    None => return Ok(Err(format!("an inductive observation needs {key}"))),
                }
            }
        }
        if level != "explicit" {
            // Every source must be a live observation of this collection.
            let known = self.store.conclusions_by_ids(&self.workspace, &source_ids).await?;
            let missing: Vec<&String> = source_ids
                .iter()
                .filter(|id| !known.iter().any(|c| &c.id == *id && self.visible(c)))
                .collect();
            if !missing.is_empty() {
                return Ok(Err(format!(
                    "unknown source_ids {missing:?}: use ids from [id:...] of this peer's observations"
                )));
            }
        }
        if !sources.is_empty() {
            metadata.insert("sources".into(), json!(sources));
        }
        Ok(Ok(NewConclusion {
            observer_id: self.observer.clone(),
            observed_id: self.observed.clone(),
            session_id: self.session.clone(),
            level: level.to_owned(),
            content: content.to_owned(),
            premises: if level == "deductive" { premises } else { sources },
            source_ids,
            metadata,
        }))
    }

    pub(super) async fn delete_observations(&self, input: &Value) -> Result<String> {
        let ids = text_list(input, "observation_ids")?;
        let _guard = self.write_lock.lock().await;
        let known = self.store.conclusions_by_ids(&self.workspace, &ids).await?;
        let mut deleted = Vec::new();
        let mut missing = Vec::new();
        for id in ids {
            if !known.iter().any(|c| c.id == id && self.visible(c)) {
                missing.push(id);
                continue;
            }
            match self.store.delete_conclusion(&self.workspace, &id).await {
                Ok(()) => deleted.push(id),
                Err(Error::NotFound { .. }) => missing.push(id),
                Err(error) => return Err(error),
            }
        }
        let text = format!(
            "Deleted {} observations{}",
            deleted.len(),
            if missing.is_empty() {
                String::new()
            } else {
                format!("; not found: {}", missing.join(", "))
            }
        );
        self.record(|log| log.deleted.extend(deleted));
        Ok(text)
    }

    pub(super) async fn update_peer_card(&self, input: &Value) -> Result<String> {
        let entries = text_list(input, "content")?;
        let card = normalize_card(&entries);
        let _guard = self.write_lock.lock().await;
        self.store
            .set_peer_card(&self.workspace, &self.observer, &self.observed, card.clone())
            .await?;
        self.record(|log| log.card_updated = true);
        Ok(format!(
            "Peer card updated ({} entries):\n{}",
            card.len(),
            card.join("\n")
        ))
    }
}
