//! [`Health`]: what the store says about itself.

use crate::db::SqlStore;
use crate::sql::{Dialect, Sql};
use async_trait::async_trait;
use roncho_core::Result;
use roncho_core::store::{Health, StoreInfo};

#[async_trait]
impl Health for SqlStore {
    async fn info(&self) -> Result<StoreInfo> {
        let backend = match self.dialect {
            Dialect::Postgres => "postgres",
            Dialect::Sqlite => "sqlite",
        };
        let version = self
            .read_optional(&Sql::new(
                "SELECT MAX(version) AS n FROM _sqlx_migrations WHERE success",
            ))
            .await
            .ok()
            .flatten()
            .and_then(|row| sqlx::Row::try_get::<Option<i64>, _>(&row, "n").ok().flatten());
        Ok(StoreInfo {
            backend,
            location: self.location.clone(),
            schema_version: version,
        })
    }

    async fn ping(&self) -> Result<()> {
        self.read(&Sql::new("SELECT 1 AS one")).await.map(drop)
    }
}
