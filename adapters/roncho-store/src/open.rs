//! Opening a store: the database URL picks the dialect.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use roncho_core::{Error, Result};
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, ConnectOptions, Executor};

use std::sync::Arc;

use crate::db::{ErasedBytes, QueueRemovals, SqlStore};
use crate::sql::Dialect;

static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");
static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");

/// How to reach the database.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// `postgres://...`, or `sqlite://path` for the embedded file.
    pub database_url: String,
    /// Pool size; SQLite writes are serialised regardless.
    pub max_connections: u32,
    /// How long an operation waits for a pooled connection.
    pub acquire_timeout: Duration,
    /// Postgres: longest a statement may run before the server cancels it
    /// (`statement_timeout`); `None`: no limit. SQLite ignores it.
    pub statement_timeout: Option<Duration>,
    /// Postgres: vacuum the tables erasures touch once they complete, so
    /// their dead rows' space is reclaimed for reuse now rather than when
    /// autovacuum comes (docs/security.md, "What stays on disk"). SQLite
    /// overwrites erased bytes in any case.
    pub vacuum_after_erasure: bool,
}

/// The embedded store's SQLite file in its data directory.
pub const EMBEDDED_FILE: &str = "roncho.db";

impl StoreOptions {
    /// Returns options for the embedded SQLite file inside `data_dir`.
    pub fn embedded(data_dir: &Path) -> Self {
        let file = data_dir.join(EMBEDDED_FILE);
        Self::new(format!("sqlite://{}?mode=rwc", file.display()))
    }

    /// Returns options for a database URL with default pool settings.
    pub fn new(database_url: String) -> Self {
        Self {
            database_url,
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: None,
            vacuum_after_erasure: false,
        }
    }

    /// Returns the dialect the URL selects.
    pub fn dialect(&self) -> Result<Dialect> {
        let scheme = self.database_url.split(':').next().unwrap_or_default();
        match scheme {
            "postgres" | "postgresql" => Ok(Dialect::Postgres),
            "sqlite" => Ok(Dialect::Sqlite),
            _ => Err(Error::invalid(
                "database_url",
                format!("unsupported scheme `{scheme}`; use postgres:// or sqlite://"),
            )),
        }
    }
}

/// Returns `url` with its credentials replaced by `***`: a password, the
/// user part of an http(s) URL (where it is a token, not a name), and the
/// values of query parameters that name a secret (`password`, `token`,
/// `key`, `secret`, ...).
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority_and_path, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let authority_end = authority_and_path.find('/').unwrap_or(authority_and_path.len());
    let (authority, path) = authority_and_path.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None if scheme.starts_with("http") => format!("***@{host}"),
            None => format!("{credentials}@{host}"),
        },
        None => authority.to_owned(),
    };
    let mut redacted = format!("{scheme}://{authority}{path}");
    if let Some(query) = query {
        let secretive = ["pass", "token", "key", "secret", "auth", "credential"];
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if secretive.iter().any(|word| name.to_ascii_lowercase().contains(word)) => {
                    format!("{name}=***")
                }
                _ => pair.to_owned(),
            })
            .collect();
        redacted.push('?');
        redacted.push_str(&pairs.join("&"));
    }
    redacted
}

#[cfg(test)]
mod redaction_tests {
    use super::redact_url;

    #[test]
    fn credentials_leave_urls() {
        assert_eq!(redact_url("postgres://u:hunter2@h/db"), "postgres://u:***@h/db");
        assert_eq!(
            redact_url("postgres://u:p@ss:w@rd@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("https://TOKEN@api.example/v1"), "https://***@api.example/v1");
        assert_eq!(
            redact_url("postgres://h/db?user=u&password=hunter2&sslmode=require"),
            "postgres://h/db?user=u&password=***&sslmode=require"
        );
        assert_eq!(redact_url("http://qdrant:6334"), "http://qdrant:6334");
        assert_eq!(redact_url("http://x/?api_key=abc"), "http://x/?api_key=***");
    }
}

/// How long a pooled Postgres connection may sit idle before it is pinged
/// on its way out of the pool.
const PING_IDLE_AFTER: Duration = Duration::from_secs(1);

/// `database_url` with the settings every roncho connection to Postgres
/// starts with, as startup parameters (each pooled connection has them from
/// the start):
/// - `jit = off`: Postgres compiles a statement whose estimated cost passes
///   `jit_above_cost` to machine code before running it. A search's plan
///   estimated without statistics (or with a long queue) passed it, and
///   compiling took 18 ms of a 22 ms search; roncho's statements are short
///   and many, never worth compiling (issue 37, docs/benchmarks.md).
/// - `statement_timeout`, when set.
fn postgres_url(database_url: &str, statement_timeout: Option<Duration>) -> String {
    let mut settings = String::from("-c%20jit%3Doff");
    if let Some(timeout) = statement_timeout {
        settings.push_str(&format!("%20-c%20statement_timeout%3D{}", timeout.as_millis().max(1)));
    }
    let separator = if database_url.contains('?') { '&' } else { '?' };
    format!("{database_url}{separator}options={settings}")
}

/// Connects to the database the options name; does not migrate.
pub async fn connect(options: &StoreOptions) -> Result<SqlStore> {
    sqlx::any::install_default_drivers();
    let dialect = options.dialect()?;
    let location = redact_url(&options.database_url);
    if dialect == Dialect::Sqlite {
        create_parent_dir(&options.database_url)?;
        stable_sqlite_plans();
    }
    let url = match dialect {
        Dialect::Postgres => postgres_url(&options.database_url, options.statement_timeout),
        Dialect::Sqlite => options.database_url.clone(),
    };
    let connect_options = AnyConnectOptions::from_str(&url)
        .map_err(|error| Error::invalid("database_url", error.to_string()))?
        .log_statements(tracing::log::LevelFilter::Trace)
        .log_slow_statements(tracing::log::LevelFilter::Warn, Duration::from_secs(1));
    // sqlx pings a connection when it goes back to the pool, and by default
    // again when it is taken out: a round trip to the server (or to SQLite's
    // thread) before every statement. A connection used in the last second
    // is taken as it is; one idle longer is pinged first (Postgres), so one
    // a database restart broke is replaced, not handed to a request. A
    // SQLite connection is a thread of this process: nothing to test.
    let pool_options = AnyPoolOptions::new()
        .max_connections(options.max_connections)
        .acquire_timeout(options.acquire_timeout)
        .test_before_acquire(false);
    let pool_options = match dialect {
        Dialect::Sqlite => {
            enable_wal(&connect_options, &location).await?;
            // NORMAL sync is durable against process crashes in WAL mode, which is what an
            // embedded server needs; the busy timeout covers other processes (roncho status).
            // Reads map the file (no copy per page read; full-text queries touch many
            // pages) and each connection caches 16 MiB of pages instead of 2 MiB.
            // Deleted content is overwritten with zeros (`secure_delete`): an
            // erased message is not left in free space for a reader of the file.
            // Every connection of the requests is opened here, at start-up,
            // and kept: each runs on a thread of its own, which takes the
            // priority of the thread that opened it, and a connection opened
            // later by a background role (run below the requests' priority)
            // would then serve requests at that priority (see
            // `open_every_connection`). The background reads on connections
            // of its own, opened by its threads (`SqlStore::reads`).
            pool_options
                .idle_timeout(None)
                .max_lifetime(None)
                .after_connect(|connection, _| {
                    Box::pin(async move {
                        connection
                            .execute(
                                "PRAGMA busy_timeout = 10000; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
                             PRAGMA mmap_size = 1073741824; PRAGMA cache_size = -16384; \
                             PRAGMA wal_autocheckpoint = 16384; PRAGMA secure_delete = ON;",
                            )
                            .await?;
                        Ok(())
                    })
                })
        }
        Dialect::Postgres => pool_options.before_acquire(|connection, metadata| {
            Box::pin(async move {
                if metadata.idle_for < PING_IDLE_AFTER {
                    return Ok(true);
                }
                sqlx::Connection::ping(connection).await.map(|()| true)
            })
        }),
    };
    // The background roles' own connections (`SqlStore::reads`), opened
    // by their threads when first needed, never at start-up.
    let background_reads = (dialect == Dialect::Sqlite).then(|| {
        pool_options
            .clone()
            .max_connections(background_readers(options.max_connections))
            .min_connections(0)
            .connect_lazy_with(connect_options.clone())
    });
    let pool: AnyPool = pool_options
        .connect_with(connect_options)
        .await
        .map_err(|error| Error::Unavailable(format!("cannot connect to {location}: {error}")))?;
    let mut store = SqlStore::new(pool.clone(), dialect, location);
    store.background_reads = background_reads;
    match dialect {
        Dialect::Sqlite => {
            store.open_every_connection(options.max_connections).await?;
            spawn_checkpointer(pool, store.erased_bytes.clone());
        }
        Dialect::Postgres => spawn_vacuumer(
            pool,
            options.vacuum_after_erasure.then(|| store.erased_bytes.clone()),
            store.queue_removals.clone(),
        ),
    }
    Ok(store)
}

/// How many SQLite connections the background roles read on, beside the
/// requests' `max_connections`: half as many, at least two.
fn background_readers(max_connections: u32) -> u32 {
    (max_connections / 2).max(2)
}

/// Makes every SQLite connection this process opens from now on keep its
/// statements' plans whatever values are bound to them (SQLite's query
/// planner stability guarantee), once per process.
///
/// Without it SQLite marks a prepared statement to be compiled again on its
/// next run whenever a value is bound to a parameter the planner looked at:
/// a `LIMIT ?`, the pattern of a `LIKE ?`. sqlx binds every value on every
/// run, so each run of such a statement (the context walk, a search, a peer
/// list) parsed and planned its SQL anew: 8 % of a context call's CPU
/// (issue 58, docs/benchmarks.md). The plans it gives up were chosen for
/// one value and never mattered to roncho's statements, whose indexes are
/// chosen by equality on their scope.
fn stable_sqlite_plans() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: `sqlite3_auto_extension` stores a function pointer that
        // SQLite calls with each new connection's handle, on the thread
        // opening it, before the handle is used; the pointer is a plain
        // `extern "C"` function that lives as long as the process.
        #[allow(unsafe_code)]
        let code = unsafe { libsqlite3_sys::sqlite3_auto_extension(Some(keep_plans)) };
        if code != libsqlite3_sys::SQLITE_OK {
            tracing::warn!(
                code,
                "SQLite refused the plan-stability hook: statements are re-planned as values change"
            );
        }
    });
}

/// Sets `SQLITE_DBCONFIG_ENABLE_QPSG` on a connection SQLite has just opened.
#[allow(unsafe_code)]
unsafe extern "C" fn keep_plans(
    db: *mut libsqlite3_sys::sqlite3,
    _error: *mut *mut std::ffi::c_char,
    _api: *const libsqlite3_sys::sqlite3_api_routines,
) -> std::ffi::c_int {
    // SAFETY: `db` is the open connection SQLite passes its auto-extensions;
    // ENABLE_QPSG takes an int (1: on) and an int pointer for the new state,
    // which may be null.
    unsafe {
        libsqlite3_sys::sqlite3_db_config(
            db,
            libsqlite3_sys::SQLITE_DBCONFIG_ENABLE_QPSG,
            1 as std::ffi::c_int,
            std::ptr::null_mut::<std::ffi::c_int>(),
        )
    }
}

/// Vacuums the tables an erasure deletes rows from (Postgres).
const VACUUM_ERASED_TABLES: &str = "VACUUM messages, message_text, message_unindexed, message_sync, message_terms, \
     workspace_terms, documents, \
     conclusion_sources, session_summaries, work_tasks, peer_cards, reasoning_traces, sessions, peers, vectors, \
     vector_tombstones";

/// The queue tables the reconciler takes rows off (Postgres).
const VACUUM_QUEUE_TABLES: &str = "VACUUM message_sync, message_unindexed";

/// Rows taken off the queue tables after which they are vacuumed.
const QUEUE_VACUUM_AFTER: u64 = 10_000;

/// How often the vacuumer looks for completed erasures and queue removals.
const VACUUM_EVERY: Duration = Duration::from_secs(5);

/// Vacuums, at most every [`VACUUM_EVERY`] and until the pool closes:
/// - with `erased` (`vacuum_after_erasure`), the tables erasures touch,
///   after erasures committed since the last vacuum: dead rows' space is
///   reclaimed (and their index entries removed) for later writes to
///   overwrite, instead of waiting for autovacuum's thresholds;
/// - the queue tables, once [`QUEUE_VACUUM_AFTER`] rows were taken off
///   them since the last vacuum, or fewer once none was for a whole
///   interval: a search asks whether anything is behind the newest
///   messages, and each dead row left there costs that probe until a
///   vacuum (autovacuum may be off, or behind a sync of millions).
fn spawn_vacuumer(pool: AnyPool, erased: Option<Arc<ErasedBytes>>, queues: Arc<QueueRemovals>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(VACUUM_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if pool.is_closed() {
                return;
            }
            if let Some(erased) = &erased
                && let Some(committed) = erased.uncovered()
                && vacuum(
                    &pool,
                    VACUUM_ERASED_TABLES,
                    "the tables erasures touched (erasure_vacuum)",
                )
                .await
            {
                erased.covered(committed);
            }
            if let Some(removed) = queues.due(QUEUE_VACUUM_AFTER)
                && vacuum(&pool, VACUUM_QUEUE_TABLES, "the sync and text-index queues").await
            {
                queues.covered(removed);
            }
        }
    });
}

/// Runs `statement` (a VACUUM of `what`), logging how long it took or why
/// it failed (it is tried again at the next tick); returns whether it ran.
async fn vacuum(pool: &AnyPool, statement: &'static str, what: &str) -> bool {
    let started = std::time::Instant::now();
    match pool.execute(statement).await {
        Ok(_) => {
            tracing::info!(seconds = started.elapsed().as_secs_f64(), "vacuumed {what}");
            true
        }
        Err(error) => {
            tracing::warn!(%error, "vacuuming {what} failed; retried");
            false
        }
    }
}

/// How often the WAL is copied back into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Checkpoints SQLite's WAL every second from a pooled connection, until the
/// pool closes: the copy back into the database file and its fsync happen
/// here, beside the writer, instead of inside whichever commit crosses
/// SQLite's threshold (1,000 pages by default; raised to 16,384, 64 MiB, as
/// a backstop). A page written many times in a second is copied once.
/// PASSIVE: it never waits for the writer or readers.
///
/// After an erasure's deletes commit, the next checkpoint is TRUNCATE
/// instead: the WAL still holds the erased text in the frames written
/// before the delete, and TRUNCATE copies every frame back (the deleted
/// content already zeroed by `secure_delete`) and empties the file. It
/// waits for the writer within the busy timeout; when readers keep it from
/// finishing it is tried again at the next tick.
fn spawn_checkpointer(pool: AnyPool, erased: Arc<ErasedBytes>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if pool.is_closed() {
                return;
            }
            let result = match erased.uncovered() {
                Some(committed) => overwrite_erased(&pool).await.map(|finished| {
                    if finished {
                        erased.covered(committed);
                    }
                }),
                None => pool.execute("PRAGMA wal_checkpoint(PASSIVE)").await.map(drop),
            };
            if let Err(error) = result {
                tracing::debug!(%error, "WAL checkpoint");
            }
        }
    });
}

/// Empties the WAL with a TRUNCATE checkpoint and stamps the receipts of
/// the erasures it covered: complete before it began, with none of their
/// vectors left in this file (a tombstone whose vector is elsewhere, or
/// was never written, holds no byte of the erased data). Returns whether
/// the checkpoint finished.
async fn overwrite_erased(pool: &AnyPool) -> std::result::Result<bool, sqlx::Error> {
    use sqlx::Row;
    let covered: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM erasure_receipts r WHERE overwritten_at IS NULL AND state = 'complete' \
         AND NOT EXISTS (SELECT 1 FROM vector_tombstones t JOIN vectors v ON v.namespace = t.namespace \
         AND v.id = t.id WHERE t.receipt_id = r.id)",
    )
    .fetch_all(pool)
    .await?;
    let row = pool.fetch_one("PRAGMA wal_checkpoint(TRUNCATE)").await?;
    let busy: i64 = row.try_get(0)?;
    if busy != 0 {
        return Ok(false);
    }
    let now = roncho_core::model::now_micros();
    for chunk in covered.chunks(500) {
        let mut update = sqlx::QueryBuilder::new("UPDATE erasure_receipts SET overwritten_at = ");
        update.push_bind(now).push(" WHERE id IN (");
        let mut ids = update.separated(", ");
        for id in chunk {
            ids.push_bind(id.as_str());
        }
        update.push(")");
        update.build().execute(pool).await?;
    }
    if !covered.is_empty() {
        tracing::info!(
            receipts = covered.len(),
            "erased bytes overwritten: WAL checkpointed and truncated"
        );
    }
    Ok(true)
}

/// Switches the SQLite file to WAL once, before the pool opens: WAL lets readers
/// run beside the one writer, and the setting needs an exclusive lock that
/// pooled connections would contend for.
async fn enable_wal(connect_options: &AnyConnectOptions, location: &str) -> Result<()> {
    use sqlx::Connection;
    let mut connection = sqlx::AnyConnection::connect_with(connect_options)
        .await
        .map_err(|error| Error::Unavailable(format!("cannot open {location}: {error}")))?;
    connection
        .execute("PRAGMA busy_timeout = 10000; PRAGMA journal_mode = WAL;")
        .await
        .map_err(|error| Error::Unavailable(format!("cannot enable WAL on {location}: {error}")))?;
    connection.close().await.ok();
    Ok(())
}

fn create_parent_dir(database_url: &str) -> Result<()> {
    let path = database_url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    let (path, options) = path.split_once('?').unwrap_or((path, ""));
    if path.is_empty() || path == ":memory:" {
        return Ok(());
    }
    // A database opened read-only or in memory, or named by a URI, is
    // SQLite's to find: no file is made for it.
    let creates = !path.starts_with("file:")
        && !options
            .split('&')
            .any(|option| matches!(option, "mode=ro" | "mode=memory") || option.starts_with("immutable="));
    // Memory is its user's alone: a new data directory is readable by its
    // owner only, and so is a new database file (SQLite gives its WAL and
    // shared-memory files the database file's permissions).
    if let Some(parent) = Path::new(path).parent().filter(|parent| !parent.as_os_str().is_empty()) {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(parent).map_err(|error| {
            Error::Unavailable(format!("cannot create data directory {}: {error}", parent.display()))
        })?;
    }
    if !creates {
        return Ok(());
    }
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    match file.open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(Error::Unavailable(format!(
            "cannot create database file {path}: {error}"
        ))),
    }
}

/// Returns the newest migration version embedded for a dialect.
pub fn latest_schema_version(dialect: Dialect) -> i64 {
    let migrator = match dialect {
        Dialect::Postgres => &POSTGRES_MIGRATIONS,
        Dialect::Sqlite => &SQLITE_MIGRATIONS,
    };
    migrator
        .iter()
        .map(|migration| migration.version)
        .max()
        .unwrap_or_default()
}

/// Applies the embedded migrations of the store's dialect.
pub async fn migrate(store: &SqlStore) -> Result<()> {
    let migrator = match store.dialect() {
        Dialect::Postgres => &POSTGRES_MIGRATIONS,
        Dialect::Sqlite => &SQLITE_MIGRATIONS,
    };
    migrator
        .run(store.pool())
        .await
        .map_err(|error| Error::Unavailable(format!("migration failed: {error}")))
}

/// Applies the embedded migrations up to `version` only: a store as an
/// older roncho left it, for tests of the upgrade that follows.
#[doc(hidden)]
pub async fn migrate_to(store: &SqlStore, version: i64) -> Result<()> {
    let migrator = match store.dialect() {
        Dialect::Postgres => &POSTGRES_MIGRATIONS,
        Dialect::Sqlite => &SQLITE_MIGRATIONS,
    };
    migrator
        .run_to(version, store.pool())
        .await
        .map_err(|error| Error::Unavailable(format!("migration failed: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted_and_dialects_chosen() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            StoreOptions::new("postgresql://h/db".into()).dialect().unwrap(),
            Dialect::Postgres
        );
        assert_eq!(
            StoreOptions::embedded(Path::new("/tmp/x")).dialect().unwrap(),
            Dialect::Sqlite
        );
        assert!(StoreOptions::new("mysql://h/db".into()).dialect().is_err());
    }
}
