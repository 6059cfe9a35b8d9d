//! What the store says about itself: backend, location, schema, readiness.

use async_trait::async_trait;

use super::StoreInfo;
use crate::Result;

#[async_trait]
pub trait Health: Send + Sync + 'static {
    /// Returns the backend, location and schema version.
    async fn info(&self) -> Result<StoreInfo>;
    /// Checks that the database answers (readiness); `UNAVAILABLE` when not.
    async fn ping(&self) -> Result<()>;
}
