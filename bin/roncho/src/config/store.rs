//! The `[store]` section: where relational state lives.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use serde::Serialize;

section! {
    /// `[store]` as one layer gives it.
    StoreLayer {
        data_dir: PathBuf,
        database_url: String,
        max_connections: u32,
        /// Postgres: vacuum the tables an erasure touched once it completes.
        erasure_vacuum: bool,
        /// Longest a Postgres statement may run.
        database_statement_timeout_secs: u64,
        idempotency_window_secs: u64,
    }
}

/// Where relational state lives.
#[derive(Clone, PartialEq, Serialize)]
pub struct StoreConfig {
    /// Directory of the embedded SQLite file, used when no database URL is set.
    pub data_dir: PathBuf,
    /// Postgres URL; `None` selects the embedded SQLite store.
    pub database_url: Option<String>,
    /// Database pool size.
    pub max_connections: u32,
    /// Postgres: vacuum the tables an erasure touched once it completes.
    pub erasure_vacuum: bool,
    /// Longest a Postgres statement may run (zero: no limit).
    pub statement_timeout: Duration,
    /// How long idempotency keys of CreateMessages, UploadFile and
    /// CreateConclusions are remembered.
    pub idempotency_window: Duration,
}

debug_redacted!(StoreConfig);

impl StoreLayer {
    pub(super) fn resolve(self) -> anyhow::Result<StoreConfig> {
        if let Some(url) = &self.database_url
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            bail!("database_url must be a postgres:// URL; leave it unset for the embedded SQLite store");
        }
        Ok(StoreConfig {
            data_dir: self.data_dir.unwrap_or_else(|| PathBuf::from("./roncho-data")),
            database_url: self.database_url,
            max_connections: self.max_connections.unwrap_or(16).max(1),
            erasure_vacuum: self.erasure_vacuum.unwrap_or(false),
            statement_timeout: Duration::from_secs(self.database_statement_timeout_secs.unwrap_or(30)),
            idempotency_window: Duration::from_secs(self.idempotency_window_secs.unwrap_or(86_400).max(1)),
        })
    }
}

impl StoreConfig {
    /// Returns the store options this config selects.
    pub fn options(&self) -> roncho_store::StoreOptions {
        let mut options = match &self.database_url {
            Some(url) => roncho_store::StoreOptions::new(url.clone()),
            None => roncho_store::StoreOptions::embedded(&self.data_dir),
        };
        options.max_connections = self.max_connections;
        options.vacuum_after_erasure = self.erasure_vacuum;
        options.statement_timeout = Some(self.statement_timeout).filter(|timeout| !timeout.is_zero());
        options
    }
}
