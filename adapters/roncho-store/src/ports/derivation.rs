//! [`DerivationHealth`]: whether a workspace's derivations keep producing nothing.

use async_trait::async_trait;
use roncho_core::Result;
use roncho_core::model::now_micros;
use roncho_core::store::{DEGRADED_AFTER, DerivationHealth, DerivationRecord, Outcome};
use sqlx::any::AnyRow;

use crate::db::{SqlStore, execute};
use crate::rows;
use crate::sql::Sql;

const COLUMNS: &str = "workspace_name, model, empty_streak, reason, updated_at";

fn record(row: &AnyRow) -> Result<DerivationRecord> {
    Ok(DerivationRecord {
        workspace_id: rows::get(row, "workspace_name")?,
        model: rows::get(row, "model")?,
        empty_streak: rows::get(row, "empty_streak")?,
        reason: rows::get(row, "reason")?,
        updated_at: rows::get(row, "updated_at")?,
    })
}

#[async_trait]
impl DerivationHealth for SqlStore {
    async fn record_derivation(&self, workspace_id: &str, model: &str, outcome: &Outcome) -> Result<()> {
        // The common case, a derivation that derived in a healthy workspace,
        // is a read: no write lock for every batch.
        if *outcome == Outcome::Derived
            && self
                .derivation_health(workspace_id)
                .await?
                .is_none_or(|record| record.empty_streak == 0)
        {
            return Ok(());
        }
        // An unreadable reply degrades at once; an empty one adds to the streak.
        let (step, reason) = match outcome {
            Outcome::Derived => (None, "observations derived".to_owned()),
            Outcome::Empty { messages } => (Some(1), format!("the last from {messages} non-empty message(s)")),
            Outcome::Unreadable { reason } => (Some(DEGRADED_AFTER), format!("the last reply unreadable: {reason}")),
        };
        let mut sql = Sql::new("INSERT INTO derivation_health (");
        sql.push(COLUMNS).push(") SELECT name, ").bind(model).push(", ");
        sql.bind(step.unwrap_or(0)).push(", ").bind(reason.as_str()).push(", ");
        sql.bind(now_micros())
            .push(" FROM workspaces WHERE name = ")
            .bind(workspace_id)
            .push(" ON CONFLICT (workspace_name) DO UPDATE SET model = excluded.model, reason = excluded.reason, ")
            .push("updated_at = excluded.updated_at, empty_streak = ");
        match step {
            None => sql.push("0"),
            Some(step) => sql.push("derivation_health.empty_streak + ").bind(step),
        };
        let mut tx = self.begin_write().await?;
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }

    async fn derivation_health(&self, workspace_id: &str) -> Result<Option<DerivationRecord>> {
        let mut sql = Sql::new("SELECT ");
        sql.push(COLUMNS)
            .push(" FROM derivation_health WHERE workspace_name = ")
            .bind(workspace_id);
        self.read_optional(&sql).await?.as_ref().map(record).transpose()
    }

    async fn degraded_derivations(&self) -> Result<Vec<DerivationRecord>> {
        let mut sql = Sql::new("SELECT ");
        sql.push(COLUMNS)
            .push(" FROM derivation_health WHERE empty_streak >= ")
            .bind(DEGRADED_AFTER)
            .push(" ORDER BY workspace_name");
        self.read(&sql).await?.iter().map(record).collect()
    }
}
