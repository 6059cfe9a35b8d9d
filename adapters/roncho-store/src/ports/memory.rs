//! [`Memory`]: conclusions and peer cards.

use crate::db::db_error;
use crate::db::{SqlStore, execute};
use crate::rows;
use crate::sql::Sql;
use crate::tx::conclusions::to_json_list;
use crate::tx::conclusions::{insert_conclusion, soft_delete_conclusion};
use crate::tx::entities::ensure_peer;
use crate::tx::entities::ensure_workspace;
use crate::tx::entities::load_peer;
use crate::tx::erasing::{self, push_not_erasing};
use async_trait::async_trait;
use roncho_core::filter::Filter;
use roncho_core::idempotency::Once;
use roncho_core::model::JsonObject;
use roncho_core::model::{CollectionQuery, Conclusion, NewConclusion, Page, PageRequest, new_public_id, now_micros};
use roncho_core::store::Memory;
use roncho_core::{Error, Result};

#[async_trait]
impl Memory for SqlStore {
    #[tracing::instrument(name = "store.create_conclusions", skip_all, fields(workspace_id = %workspace_id, conclusions = conclusions.len()))]
    async fn create_conclusions(&self, workspace_id: &str, conclusions: Vec<NewConclusion>) -> Result<Vec<Conclusion>> {
        self.store_conclusions(workspace_id, conclusions, None, Sources::Derived)
            .await
    }

    async fn write_conclusions(
        &self,
        workspace_id: &str,
        conclusions: Vec<NewConclusion>,
        once: Option<&Once>,
    ) -> Result<Vec<Conclusion>> {
        self.store_conclusions(workspace_id, conclusions, once, Sources::NamedMessages)
            .await
    }

    async fn list_conclusions(
        &self,
        workspace_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Conclusion>> {
        let mut from_where = Sql::new("documents d WHERE d.deleted_at IS NULL AND d.workspace_name = ");
        from_where.bind(workspace_id);
        push_not_erasing(&mut from_where, erasing::CONCLUSION);
        from_where.push(" AND ");
        crate::sql::render_filter(&mut from_where, self.dialect(), filter, "d")?;
        // Newest first by default, as in Honcho.
        let dir = if page.reverse { "ASC" } else { "DESC" };
        self.paged(
            rows::CONCLUSION_COLUMNS,
            from_where,
            &format!("d.created_at {dir}, d.id {dir}"),
            page,
            rows::conclusion,
        )
        .await
    }

    async fn conclusions_in_order(
        &self,
        workspace_id: &str,
        filter: &Filter,
        after: i64,
        limit: i64,
    ) -> Result<Vec<(i64, Conclusion)>> {
        let mut sql = Sql::new(&format!(
            "SELECT d.id AS place, {} FROM documents d WHERE d.deleted_at IS NULL AND d.workspace_name = ",
            rows::CONCLUSION_COLUMNS
        ));
        sql.bind(workspace_id);
        push_not_erasing(&mut sql, erasing::CONCLUSION);
        sql.push(" AND ");
        crate::sql::render_filter(&mut sql, self.dialect(), filter, "d")?;
        sql.push(" AND d.id > ")
            .bind(after)
            .push(" ORDER BY d.id LIMIT ")
            .bind(limit.max(0));
        self.read(&sql)
            .await?
            .iter()
            .map(|row| Ok((rows::get(row, "place")?, rows::conclusion(row)?)))
            .collect()
    }

    #[tracing::instrument(name = "store.increment_times_derived", skip_all, fields(workspace_id = %workspace_id, conclusions = ids.len()))]
    async fn increment_times_derived(&self, workspace_id: &str, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        let mut sql = Sql::new("UPDATE documents SET times_derived = times_derived + 1 WHERE deleted_at IS NULL AND ");
        sql.push(&self.dialect().unindexed("workspace_name"))
            .push(" = ")
            .bind(workspace_id)
            .push(" AND public_id IN ")
            .push_list(ids);
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }

    async fn delete_conclusion(&self, workspace_id: &str, id: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        if !soft_delete_conclusion(tx.conn(), workspace_id, id, now_micros()).await? {
            return Err(Error::not_found("conclusion", id));
        }
        tx.commit().await
    }

    #[tracing::instrument(name = "store.supersede_conclusion", skip_all, fields(workspace_id = %workspace_id))]
    async fn supersede_conclusion(&self, workspace_id: &str, old_id: &str, new: NewConclusion) -> Result<Conclusion> {
        let now = now_micros();
        let mut tx = self.begin_write().await?;
        let mut sql = Sql::new("SELECT times_derived FROM documents WHERE workspace_name = ");
        sql.bind(workspace_id)
            .push(" AND public_id = ")
            .bind(old_id)
            .push(" AND deleted_at IS NULL");
        let row = crate::db::fetch_optional(tx.conn(), &sql)
            .await?
            .ok_or_else(|| Error::not_found("conclusion", old_id))?;
        let times_derived: i64 = rows::get(&row, "times_derived")?;
        let live =
            crate::tx::conclusions::live_sources(tx.conn(), self.dialect(), workspace_id, std::slice::from_ref(&new))
                .await?;
        soft_delete_conclusion(tx.conn(), workspace_id, old_id, now).await?;
        let created = insert_conclusion(
            tx.conn(),
            workspace_id,
            new_public_id(),
            new,
            times_derived + 1,
            now,
            &live,
        )
        .await?
        .ok_or_else(|| Error::not_found("conclusion source", "every source was erased"))?;
        tx.commit().await?;
        Ok(created)
    }

    async fn collection_conclusions(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        query: &CollectionQuery,
    ) -> Result<Vec<Conclusion>> {
        if query.allowed_sessions.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let collection = |order: &str, limit: i64| {
            let mut sql = Sql::new(&format!(
                "SELECT {} FROM documents d WHERE d.deleted_at IS NULL AND d.workspace_name = ",
                rows::CONCLUSION_COLUMNS
            ));
            sql.bind(workspace_id)
                .push(" AND d.observer = ")
                .bind(observer_id)
                .push(" AND d.observed = ")
                .bind(observed_id);
            push_not_erasing(&mut sql, erasing::CONCLUSION);
            if let Some(sessions) = &query.allowed_sessions {
                // Under an allowlist only explicit conclusions are safe: derived ones may rest on other sessions.
                sql.push(" AND d.level = 'explicit' AND d.session_name IN ");
                sql.push_list(sessions);
            }
            sql.push(" ORDER BY ").push(order).push(" LIMIT ").bind(limit);
            sql
        };
        let mut chosen: Vec<Conclusion> = Vec::new();
        for (order, limit) in [
            ("d.times_derived DESC, d.created_at DESC, d.id DESC", query.most_derived),
            ("d.created_at DESC, d.id DESC", query.recent),
        ] {
            if limit <= 0 {
                continue;
            }
            for row in self.read(&collection(order, limit)).await? {
                let conclusion = rows::conclusion(&row)?;
                if chosen.iter().all(|existing| existing.id != conclusion.id) {
                    chosen.push(conclusion);
                }
            }
        }
        Ok(chosen)
    }

    async fn conclusions_by_ids(&self, workspace_id: &str, ids: &[String]) -> Result<Vec<Conclusion>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new(&format!(
            "SELECT {} FROM documents d WHERE d.deleted_at IS NULL AND {} = ",
            rows::CONCLUSION_COLUMNS,
            self.dialect().unindexed("d.workspace_name")
        ));
        sql.bind(workspace_id).push(" AND d.public_id IN ");
        sql.push_list(ids);
        push_not_erasing(&mut sql, erasing::CONCLUSION);
        self.read(&sql).await?.iter().map(rows::conclusion).collect()
    }

    async fn conclusions_citing(&self, workspace_id: &str, id: &str) -> Result<Vec<Conclusion>> {
        let mut sql = Sql::new(&format!(
            "SELECT {} FROM documents d WHERE d.deleted_at IS NULL AND d.id IN \
             (SELECT s.document_id FROM conclusion_sources s WHERE s.workspace_name = ",
            rows::CONCLUSION_COLUMNS
        ));
        sql.bind(workspace_id).push(" AND s.source_id = ").bind(id).push(")");
        push_not_erasing(&mut sql, erasing::CONCLUSION);
        sql.push(" ORDER BY d.created_at, d.id");
        self.read(&sql).await?.iter().map(rows::conclusion).collect()
    }

    async fn get_peer_card(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
    ) -> Result<Option<Vec<String>>> {
        {
            let mut conn = self.reads().acquire().await.map_err(db_error)?;
            load_peer(&mut conn, workspace_id, observer_id).await?;
        }
        let mut sql = Sql::new("SELECT card FROM peer_cards WHERE workspace_name = ");
        sql.bind(workspace_id)
            .push(" AND observer = ")
            .bind(observer_id)
            .push(" AND observed = ")
            .bind(observed_id);
        push_not_erasing(&mut sql, erasing::PEER_CARD);
        self.read_optional(&sql).await?.map(|row| rows::card(&row)).transpose()
    }

    async fn list_peer_cards(&self, workspace_id: &str) -> Result<Vec<(String, String, Vec<String>)>> {
        let mut sql = Sql::new("SELECT observer, observed, card FROM peer_cards WHERE workspace_name = ");
        sql.bind(workspace_id);
        push_not_erasing(&mut sql, erasing::PEER_CARD);
        sql.push(" ORDER BY observer, observed");
        self.read(&sql)
            .await?
            .iter()
            .map(|row| {
                Ok((
                    rows::get(row, "observer")?,
                    rows::get(row, "observed")?,
                    rows::card(row)?,
                ))
            })
            .collect()
    }

    #[tracing::instrument(name = "store.set_peer_card", skip_all, fields(workspace_id = %workspace_id, observer_id = %observer_id, observed_id = %observed_id))]
    async fn set_peer_card(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        card: Vec<String>,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
        for peer in [observer_id, observed_id] {
            ensure_peer(tx.conn(), workspace_id, peer, &JsonObject::new(), &JsonObject::new()).await?;
        }
        let mut sql =
            Sql::new("INSERT INTO peer_cards (workspace_name, observer, observed, card, updated_at) VALUES (");
        sql.bind(workspace_id)
            .push(", ")
            .bind(observer_id)
            .push(", ")
            .bind(observed_id)
            .push(", ");
        sql.bind(to_json_list(&card)).push(", ").bind(now_micros());
        sql.push(") ON CONFLICT (workspace_name, observer, observed) DO UPDATE SET card = excluded.card, updated_at = excluded.updated_at");
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }
}

impl SqlStore {
    pub(crate) async fn store_conclusions(
        &self,
        workspace_id: &str,
        conclusions: Vec<NewConclusion>,
        once: Option<&Once>,
        sources: Sources,
    ) -> Result<Vec<Conclusion>> {
        let now = now_micros();
        let mut tx = self.begin_write().await?;
        crate::tx::entities::refuse_unless_caller_holds(tx.conn(), workspace_id).await?;
        if let Some(once) = once
            && let crate::tx::idempotency::Claim::Done(ids) =
                crate::tx::idempotency::claim(tx.conn(), workspace_id, None, once).await?
        {
            drop(tx);
            return self.replay_conclusions(workspace_id, &ids).await;
        }
        if sources == Sources::NamedMessages
            && let Some(missing) =
                crate::tx::conclusions::missing_message(tx.conn(), self.dialect(), workspace_id, &conclusions).await?
        {
            return Err(roncho_core::Error::not_found("message", missing));
        }
        let live = crate::tx::conclusions::live_sources(tx.conn(), self.dialect(), workspace_id, &conclusions).await?;
        let mut created = Vec::with_capacity(conclusions.len());
        for new in conclusions {
            created.extend(insert_conclusion(tx.conn(), workspace_id, new_public_id(), new, 1, now, &live).await?);
        }
        if let Some(once) = once {
            let ids: Vec<String> = created.iter().map(|conclusion| conclusion.id.clone()).collect();
            crate::tx::idempotency::record(tx.conn(), workspace_id, once, &ids).await?;
        }
        tx.commit().await?;
        Ok(created)
    }
}

/// What a conclusion's sources are, and so what an erased one means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sources {
    /// What a derivation read: one erased since is dropped, and a
    /// conclusion left without any is not stored.
    Derived,
    /// Messages a client named: each must be there when the write commits.
    NamedMessages,
}
