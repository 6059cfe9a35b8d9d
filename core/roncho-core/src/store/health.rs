//! What the store says about itself: backend, location, schema, readiness.

use async_trait::async_trait;

use crate::Result;

#[async_trait]
pub trait Health: Send + Sync + 'static {
    /// Returns the backend, location and schema version.
    async fn info(&self) -> Result<StoreInfo>;
    /// Checks that the database answers (readiness); `UNAVAILABLE` when not.
    async fn ping(&self) -> Result<()>;
}

/// What a store reports about itself for `roncho status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// Where the data lives, secrets redacted.
    pub location: String,
    /// The newest applied migration.
    pub schema_version: Option<i64>,
}
