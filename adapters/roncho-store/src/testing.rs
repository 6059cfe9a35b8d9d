//! Test support: fresh databases for integration tests.
//!
//! Postgres tests read `RONCHO_TEST_DATABASE_URL` (a server URL whose user
//! may create databases). Without it they skip with a printed reason, unless
//! `RONCHO_REQUIRE_INTEGRATION=1` (set by `.ci/run`), which turns the skip
//! into a failure so nothing passes by not running.

use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::{Connection, Executor};

/// Env var naming the Postgres server for tests.
pub const DATABASE_URL_VAR: &str = "RONCHO_TEST_DATABASE_URL";
/// Env var naming the NATS server (with JetStream) for tests.
pub const NATS_URL_VAR: &str = "RONCHO_TEST_NATS_URL";
/// Env var naming a Qdrant server's gRPC address for tests (`scripts/test.sh`
/// starts the real one from ../shared/tools/qdrant).
pub const QDRANT_URL_VAR: &str = "RONCHO_TEST_QDRANT_URL";
/// Env var that turns a missing integration service into a failure.
pub const REQUIRE_VAR: &str = "RONCHO_REQUIRE_INTEGRATION";

/// Returns the env var's value, or `None` after printing why the test skips.
///
/// # Panics
/// When the variable is unset and `RONCHO_REQUIRE_INTEGRATION=1`.
pub fn integration_env(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            assert!(
                std::env::var(REQUIRE_VAR).as_deref() != Ok("1"),
                "{var} is not set and {REQUIRE_VAR}=1: this integration test must run"
            );
            eprintln!("skipping: {var} is not set");
            None
        }
    }
}

/// A database created for one test, dropped by [`FreshDatabase::drop_database`].
#[derive(Debug)]
pub struct FreshDatabase {
    pub url: String,
    server_url: String,
    name: String,
}

/// Returns a name unique to this call (databases, NATS prefixes): letters, digits and `_`.
pub fn unique_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "roncho_test_{}_{}_{}",
        std::process::id(),
        nanos,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Returns `server_url` with its database path replaced by `database`.
fn with_database(server_url: &str, database: &str) -> String {
    let (base, query) = match server_url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (server_url, None),
    };
    let authority_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let path_start = base[authority_end..]
        .find('/')
        .map(|i| authority_end + i)
        .unwrap_or(base.len());
    let mut url = format!("{}/{database}", &base[..path_start]);
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    url
}

impl FreshDatabase {
    /// Creates an empty database on the test server, or `None` when no server is configured.
    ///
    /// # Panics
    /// When the server is configured but unreachable: that is a failure, never a skip.
    pub async fn create() -> Option<Self> {
        let server_url = integration_env(DATABASE_URL_VAR)?;
        let name = unique_name();
        let mut admin = sqlx::PgConnection::connect(&server_url)
            .await
            .unwrap_or_else(|error| panic!("{DATABASE_URL_VAR}={server_url} is unreachable: {error}"));
        admin
            .execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .await
            .expect("create test database");
        admin.close().await.ok();
        Some(Self {
            url: with_database(&server_url, &name),
            server_url,
            name,
        })
    }

    /// Takes the database away (`available: false`: no new connections,
    /// existing ones terminated) or gives it back: an outage for tests.
    pub async fn set_available(&self, available: bool) {
        let mut admin = sqlx::PgConnection::connect(&self.server_url)
            .await
            .expect("connecting to the test server");
        admin
            .execute(sqlx::AssertSqlSafe(format!(
                "ALTER DATABASE \"{}\" ALLOW_CONNECTIONS {available}",
                self.name
            )))
            .await
            .expect("changing the test database's connections");
        if !available {
            admin
                .execute(sqlx::AssertSqlSafe(format!(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}'",
                    self.name
                )))
                .await
                .expect("terminating the test database's connections");
        }
        admin.close().await.ok();
    }

    /// Drops the database, disconnecting anyone still on it.
    pub async fn drop_database(self) {
        if let Ok(mut admin) = sqlx::PgConnection::connect(&self.server_url).await {
            admin
                .execute(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                    self.name
                )))
                .await
                .ok();
            admin.close().await.ok();
        }
    }
}

/// Connects to `url` and applies the migrations: a store ready for a test.
pub async fn open_migrated(url: &str) -> std::sync::Arc<crate::SqlStore> {
    open_with(&crate::StoreOptions::new(url.to_owned())).await
}

/// Opens the embedded SQLite store in `dir`, migrated.
pub async fn open_embedded(dir: &std::path::Path) -> std::sync::Arc<crate::SqlStore> {
    open_with(&crate::StoreOptions::embedded(dir)).await
}

async fn open_with(options: &crate::StoreOptions) -> std::sync::Arc<crate::SqlStore> {
    let store = crate::connect(options).await.expect("connecting the test store");
    crate::migrate(&store).await.expect("migrating the test store");
    std::sync::Arc::new(store)
}

#[cfg(test)]
mod tests {
    #[test]
    fn database_is_replaced_in_urls() {
        assert_eq!(
            super::with_database("postgres://u@h:5432/postgres", "x"),
            "postgres://u@h:5432/x"
        );
        assert_eq!(
            super::with_database("postgres://u@h:5432", "x"),
            "postgres://u@h:5432/x"
        );
        assert_eq!(
            super::with_database("postgres://h/db?sslmode=disable", "x"),
            "postgres://h/x?sslmode=disable"
        );
    }
}
