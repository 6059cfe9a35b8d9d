//! [`Import`]: messages and conclusions carried over from another server.

use crate::db::SqlStore;
use crate::rows;
use crate::sql::Sql;
use crate::tx::conclusions::insert_conclusion;
use crate::tx::writes::Origin;
use async_trait::async_trait;
use roncho_core::model::{ImportedConclusion, ImportedMessage, NewConclusion, NewMessage};
use roncho_core::store::Import;
use roncho_core::{Error, Result};

#[async_trait]
impl Import for SqlStore {
    #[tracing::instrument(name = "store.import_messages", skip_all, fields(workspace_id = %workspace_id, session_id = %session_id, messages = messages.len()))]
    async fn import_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<ImportedMessage>,
        derive: bool,
    ) -> Result<u64> {
        let (ids, messages): (Vec<String>, Vec<NewMessage>) = messages
            .into_iter()
            .map(|imported| (imported.id, imported.message))
            .unzip();
        let created = self
            .append_messages(workspace_id, session_id, messages, Origin::Import { ids, derive })
            .await?;
        Ok(created.len() as u64)
    }

    async fn taken_ids(
        &self,
        workspace_id: &str,
        messages: &[(String, String)],
        conclusions: &[String],
    ) -> Result<Vec<String>> {
        let mut taken = Vec::new();
        let sessions: std::collections::BTreeMap<&str, &str> = messages
            .iter()
            .map(|(id, session)| (id.as_str(), session.as_str()))
            .collect();
        let ids: Vec<String> = sessions.keys().map(|id| (*id).to_owned()).collect();
        for chunk in ids.chunks(500) {
            let mut sql = Sql::new("SELECT public_id, workspace_name, session_name FROM messages WHERE public_id IN ");
            sql.push_list(chunk);
            for row in self.read(&sql).await? {
                let id: String = rows::get(&row, "public_id")?;
                let held_here = rows::get::<String>(&row, "workspace_name")? == workspace_id
                    && sessions.get(id.as_str()).copied() == Some(rows::get::<String>(&row, "session_name")?.as_str());
                if !held_here {
                    taken.push(id);
                }
            }
        }
        for chunk in conclusions.chunks(500) {
            let mut sql = Sql::new("SELECT public_id FROM documents WHERE public_id IN ");
            sql.push_list(chunk);
            sql.push(" AND workspace_name <> ").bind(workspace_id);
            for row in self.read(&sql).await? {
                taken.push(rows::get(&row, "public_id")?);
            }
        }
        Ok(taken)
    }

    #[tracing::instrument(name = "store.import_conclusions", skip_all, fields(workspace_id = %workspace_id, conclusions = conclusions.len()))]
    async fn import_conclusions(&self, workspace_id: &str, conclusions: Vec<ImportedConclusion>) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let ids: Vec<String> = conclusions.iter().map(|imported| imported.id.clone()).collect();
        let mut held = std::collections::BTreeSet::new();
        for chunk in ids.chunks(500) {
            let mut sql = Sql::new("SELECT public_id, workspace_name FROM documents WHERE public_id IN ");
            sql.push_list(chunk);
            for row in crate::db::fetch_all(tx.conn(), &sql).await? {
                let id: String = rows::get(&row, "public_id")?;
                if rows::get::<String>(&row, "workspace_name")? != workspace_id {
                    return Err(Error::FailedPrecondition(format!(
                        "conclusion `{id}` is already stored in another workspace"
                    )));
                }
                held.insert(id);
            }
        }
        let fresh: Vec<ImportedConclusion> = conclusions
            .into_iter()
            .filter(|imported| !held.contains(&imported.id))
            .collect();
        let news: Vec<NewConclusion> = fresh.iter().map(|imported| imported.conclusion.clone()).collect();
        // A conclusion may cite one imported before it in this batch.
        let mut live = crate::tx::conclusions::live_sources(tx.conn(), self.dialect(), workspace_id, &news).await?;
        let mut stored = 0;
        for (imported, mut new) in fresh.into_iter().zip(news) {
            // The other server kept conclusions whose sources are gone; so does the import.
            new.source_ids.retain(|source| live.contains(source));
            let id = imported.id;
            let (times_derived, created_at) = (imported.times_derived, imported.created_at);
            if let Some(kept) =
                insert_conclusion(tx.conn(), workspace_id, id, new, times_derived, created_at, &live).await?
            {
                live.insert(kept.id);
                stored += 1;
            }
        }
        tx.commit().await?;
        Ok(stored)
    }
}
