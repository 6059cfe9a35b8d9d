//! [`DreamLedger`]: when each collection was consolidated.

use crate::db::{SqlStore, execute};
use crate::rows;
use crate::sql::Sql;
use crate::tx::entities::load_peer;
use async_trait::async_trait;
use roncho_core::Error;
use roncho_core::Result;
use roncho_core::model::DreamState;
use roncho_core::model::now_micros;
use roncho_core::store::DreamLedger;

#[async_trait]
impl DreamLedger for SqlStore {
    async fn dream_state(&self, workspace_id: &str, observer_id: &str, observed_id: &str) -> Result<DreamState> {
        let mut sql = Sql::new(
            "SELECT COALESCE(c.generation, 0) AS generation, c.last_dream_at, \
             COALESCE(c.last_dream_document_count, 0) AS last_dream_document_count, \
             (SELECT COUNT(*) FROM documents d WHERE d.workspace_name = ",
        );
        sql.bind(workspace_id)
            .push(" AND d.observer = ")
            .bind(observer_id)
            .push(" AND d.observed = ")
            .bind(observed_id)
            .push(
                " AND d.level = 'explicit' AND d.deleted_at IS NULL) AS explicit_count \
                   FROM (SELECT 1 AS one) AS o LEFT JOIN collection_dreams c ON c.workspace_name = ",
            );
        sql.bind(workspace_id)
            .push(" AND c.observer = ")
            .bind(observer_id)
            .push(" AND c.observed = ")
            .bind(observed_id);
        let rows = self.read(&sql).await?;
        let row = rows
            .first()
            .ok_or_else(|| Error::Internal("dream state query returned no row".into()))?;
        Ok(DreamState {
            generation: rows::get(row, "generation")?,
            last_dream_at: rows::get(row, "last_dream_at")?,
            last_dream_document_count: rows::get(row, "last_dream_document_count")?,
            explicit_count: rows::get(row, "explicit_count")?,
        })
    }

    async fn record_dream(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        document_count: i64,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for peer in [observer_id, observed_id] {
            load_peer(tx.conn(), workspace_id, peer).await?;
        }
        let mut sql = Sql::new(
            "INSERT INTO collection_dreams (workspace_name, observer, observed, generation, last_dream_at, \
             last_dream_document_count) VALUES (",
        );
        sql.bind(workspace_id)
            .push(", ")
            .bind(observer_id)
            .push(", ")
            .bind(observed_id)
            .push(", 1, ");
        sql.bind(now_micros()).push(", ").bind(document_count);
        sql.push(
            ") ON CONFLICT (workspace_name, observer, observed) DO UPDATE SET \
             generation = collection_dreams.generation + 1, last_dream_at = excluded.last_dream_at, \
             last_dream_document_count = excluded.last_dream_document_count",
        );
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }
}
