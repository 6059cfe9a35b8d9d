//! The `Store` contract suite, run against every backend: SQLite (embedded)
//! and Postgres (`RONCHO_TEST_DATABASE_URL`). Each test gets a fresh database.
//! One module per port (see `roncho_core::store`); the fixtures and helpers
//! they share are here.

use std::sync::Arc;

use roncho_core::Error;
use roncho_core::filter::{self, Filter};
use roncho_core::model::{
    CollectionQuery, JsonObject, MessageQuery, NewConclusion, NewMessage, PageRequest, SessionPeerConfig,
};
use roncho_core::model::{MessageScan, PeerKind, SummaryKind, SyncKind};
use roncho_core::store::{Erasure, Health, Memory, Messages, Store, SyncLedger, TextSearch};
use roncho_core::vector::{VectorFilter, VectorRecord, VectorStore};
use roncho_store::testing::FreshDatabase;
use roncho_store::{SqlStore, SqlVectorStore, StoreOptions};
use serde_json::{Value, json};

struct Fixture {
    store: Arc<SqlStore>,
    _dir: Option<tempfile::TempDir>,
    database: Option<FreshDatabase>,
}

impl Fixture {
    async fn finish(self) {
        self.store.close().await;
        if let Some(database) = self.database {
            database.drop_database().await;
        }
    }
}

async fn open(url: String) -> Arc<SqlStore> {
    let store = roncho_store::connect(&StoreOptions::new(url)).await.expect("connect");
    roncho_store::migrate(&store).await.expect("migrate");
    Arc::new(store)
}

async fn sqlite_fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(StoreOptions::embedded(dir.path()).database_url).await;
    Fixture {
        store,
        _dir: Some(dir),
        database: None,
    }
}

async fn postgres_fixture() -> Option<Fixture> {
    let database = FreshDatabase::create().await?;
    let store = open(database.url.clone()).await;
    Some(Fixture {
        store,
        _dir: None,
        database: Some(database),
    })
}

/// Runs each test on SQLite and on Postgres: those before `;` get the
/// store as `&dyn Store`, those after it as the `Arc<SqlStore>` itself.
macro_rules! store_contract_suite {
    ($($name:ident),* $(,)? ; $($sql:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let fixture = crate::sqlite_fixture().await;
                    super::$name(&*fixture.store).await;
                    fixture.finish().await;
                }
            )*
            $(
                #[tokio::test]
                async fn $sql() {
                    let fixture = crate::sqlite_fixture().await;
                    super::$sql(fixture.store.clone()).await;
                    fixture.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let Some(fixture) = crate::postgres_fixture().await else { return };
                    super::$name(&*fixture.store).await;
                    fixture.finish().await;
                }
            )*
            $(
                #[tokio::test]
                async fn $sql() {
                    let Some(fixture) = crate::postgres_fixture().await else { return };
                    super::$sql(fixture.store.clone()).await;
                    fixture.finish().await;
                }
            )*
        }
    };
}

fn object(value: Value) -> JsonObject {
    value.as_object().expect("object").clone()
}

fn all() -> Filter {
    Filter::All
}

fn page(page: i64, size: i64) -> PageRequest {
    PageRequest {
        page,
        size,
        reverse: false,
    }
}

fn new_message(peer_id: &str, content: &str) -> NewMessage {
    NewMessage {
        peer_id: peer_id.to_owned(),
        content: content.to_owned(),
        metadata: JsonObject::new(),
        configuration: JsonObject::new(),
        created_at: None,
        token_count: i64::try_from(content.split_whitespace().count()).unwrap(),
    }
}

fn config(observe_me: Option<bool>, observe_others: Option<bool>) -> SessionPeerConfig {
    SessionPeerConfig {
        observe_me,
        observe_others,
    }
}

#[tokio::test]
async fn postgres_a_session_is_searchable_by_its_words_while_the_text_index_is_behind() {
    let Some(fixture) = postgres_fixture().await else {
        return;
    };
    let store = fixture.store.clone();
    // No text indexer runs: one session's 5,000 messages, then 45,000 in
    // seven other sessions, none indexed; a word in every 100th of each.
    let batch = |session: usize, start: usize| {
        (start..start + 100)
            .map(|i| {
                let word = if i % 100 == 7 { "zanzibar" } else { "weather" };
                new_message("alice", &format!("message {i} of session {session} about the {word}"))
            })
            .collect::<Vec<_>>()
    };
    // A neighbour's three, older than every one of them.
    let neighbour = (0..3).map(|i| new_message("carol", &format!("zanzibar {i}"))).collect();
    store.create_messages("v", "s", neighbour).await.unwrap();
    for start in (0..5_000).step_by(100) {
        store.create_messages("w", "first", batch(0, start)).await.unwrap();
    }
    for session in 1..=7 {
        for start in (0..45_000 / 7 / 100 * 100).step_by(100) {
            store
                .create_messages("w", &format!("other-{session}"), batch(session, start))
                .await
                .unwrap();
        }
    }
    assert!(store.text_index_backlog().await.unwrap() >= 49_000);
    let in_first = MessageQuery {
        session_ids: Some(vec!["first".to_owned()]),
        ..search("zanzibar")
    };
    let matched = found(&*store, "w", &in_first, &all()).await;
    assert_eq!(matched.len(), 10, "the session's own unindexed messages are matched");
    assert!(
        matched.iter().all(|content| content.contains("of session 0 ")),
        "{matched:?}"
    );
    assert_eq!(
        store.text_index_gap("w", &in_first).await.unwrap(),
        0,
        "the session is covered"
    );
    // A workspace-wide search cannot read 49,000 unindexed rows on the fly:
    // it says it left out at least the count's limit, and so does a search
    // of a session past its 5,000 newest (6,400 in all).
    let gap = store.text_index_gap("w", &search("zanzibar")).await.unwrap();
    assert_eq!(gap, roncho_core::store::GAP_COUNT_LIMIT);
    let in_other = MessageQuery {
        session_ids: Some(vec!["other-1".to_owned()]),
        ..search("zanzibar")
    };
    assert_eq!(
        store.text_index_gap("w", &in_other).await.unwrap(),
        roncho_core::store::GAP_COUNT_LIMIT
    );
    // Below the limit the count is exact, also where the backlog's newest
    // entries are all another workspace's.
    assert_eq!(store.text_index_gap("v", &search("zanzibar")).await.unwrap(), 3);
    let by_carol = MessageQuery {
        peer_id: Some("carol".to_owned()),
        ..search("zanzibar")
    };
    assert_eq!(store.text_index_gap("v", &by_carol).await.unwrap(), 3);
    assert_eq!(store.text_index_gap("w", &by_carol).await.unwrap(), 0);
    // Once indexed, nothing is left out.
    let mark = store.text_index_mark().await.unwrap().unwrap();
    while store.index_text(mark, 10_000).await.unwrap() > 0 {}
    assert_eq!(store.text_index_gap("w", &search("zanzibar")).await.unwrap(), 0);
    assert_eq!(found(&*store, "w", &in_first, &all()).await.len(), 10);
    fixture.finish().await;
}

/// The column `value` of the one row `sql` selects with `$1` bound to `bind`.
async fn select_value<T>(store: &SqlStore, sql: &'static str, bind: &str) -> T
where
    T: for<'r> sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    let row = sqlx::query(sql)
        .bind(bind.to_owned())
        .fetch_one(store.pool())
        .await
        .unwrap();
    sqlx::Row::get::<T, _>(&row, "value")
}

/// How many times `table` was vacuumed by a VACUUM statement.
async fn vacuum_count(store: &SqlStore, table: &str) -> i64 {
    select_value(
        store,
        "SELECT vacuum_count AS value FROM pg_stat_user_tables WHERE relname = $1",
        table,
    )
    .await
}

/// `table`'s vacuum count once it is above zero, or zero after 15 s.
async fn vacuumed(store: &SqlStore, table: &str) -> i64 {
    for _ in 0..150 {
        let count = vacuum_count(store, table).await;
        if count > 0 {
            return count;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    0
}

/// A store on a fresh Postgres database with a pool of `connections`;
/// `None` without Postgres.
async fn pooled_store(connections: u32) -> Option<(FreshDatabase, SqlStore)> {
    let database = FreshDatabase::create().await?;
    let mut options = StoreOptions::new(database.url.clone());
    options.max_connections = connections;
    let store = roncho_store::connect(&options).await.unwrap();
    Some((database, store))
}

/// A pooled connection is not pinged before each statement, only after a
/// second idle: those a database restart broke meanwhile are replaced
/// before a statement would fail on them.
#[tokio::test]
async fn postgres_connections_a_restart_broke_are_replaced_before_use() {
    use roncho_core::store::Health;
    let Some((database, store)) = pooled_store(4).await else {
        return;
    };
    let (a, b, c, d) = tokio::join!(store.ping(), store.ping(), store.ping(), store.ping());
    for pinged in [a, b, c, d] {
        pinged.unwrap();
    }
    // Every backend ends, as at a restart.
    database.set_available(false).await;
    database.set_available(true).await;
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    for attempt in 0..8 {
        store
            .ping()
            .await
            .unwrap_or_else(|error| panic!("statement {attempt} after the restart: {error}"));
    }
    store.close().await;
    database.drop_database().await;
}

#[tokio::test]
async fn postgres_erasure_vacuum_reclaims_the_touched_tables() {
    let Some(database) = FreshDatabase::create().await else {
        return;
    };
    let mut options = StoreOptions::new(database.url.clone());
    options.vacuum_after_erasure = true;
    let store = roncho_store::connect(&options).await.unwrap();
    roncho_store::migrate(&store).await.unwrap();
    let written = store
        .create_messages("w", "s", vec![new_message("alice", "erase me")])
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    assert_eq!(
        vacuum_count(&store, "messages").await,
        0,
        "nothing erased, nothing vacuumed"
    );
    store.delete_message("w", "s", &written[0].id).await.unwrap();
    assert_eq!(vacuumed(&store, "messages").await, 1, "vacuumed once after the erasure");
    store.close().await;
    database.drop_database().await;
}

/// Every message synced or indexed leaves a dead row in a queue table,
/// which each search's "is anything behind?" probe pays for until a
/// vacuum: the store vacuums them after 10,000 removals, and the fewer
/// left at the end of a sync once the removals stop, but not while they go on.
#[tokio::test]
async fn postgres_vacuums_its_queue_tables_after_many_removals() {
    let Some((database, store)) = pooled_store(16).await else {
        return;
    };
    roncho_store::migrate(&store).await.unwrap();
    for start in (0..21_000).step_by(500) {
        let batch = (start..start + 500)
            .map(|i| new_message("alice", &format!("message {i}")))
            .collect();
        store.create_messages("w", "s", batch).await.unwrap();
    }
    let mark = store.text_index_mark().await.unwrap().unwrap();
    // 9,000 taken off over 9 s: every 5-s look finds new removals.
    for _ in 0..18 {
        assert_eq!(store.index_text(mark, 500).await.unwrap(), 500);
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert_eq!(
        vacuum_count(&store, "message_unindexed").await,
        0,
        "9,000 removed, still being taken: not vacuumed yet"
    );
    assert_eq!(
        vacuumed(&store, "message_unindexed").await,
        1,
        "vacuumed once the removals stopped, below 10,000"
    );
    // Past 10,000 at once, while removals go on: vacuumed without waiting for quiet.
    assert_eq!(store.index_text(mark, 10_000).await.unwrap(), 10_000);
    let mut count = 1;
    for _ in 0..16 {
        store.index_text(mark, 100).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        count = vacuum_count(&store, "message_unindexed").await;
        if count > 1 {
            break;
        }
    }
    assert_eq!(count, 2, "vacuumed again past 10,000 removals, though not quiet");
    store.close().await;
    database.drop_database().await;
}

#[tokio::test]
async fn postgres_cancels_statements_past_the_statement_timeout() {
    let Some(database) = FreshDatabase::create().await else {
        return;
    };
    let mut options = StoreOptions::new(database.url.clone());
    options.statement_timeout = Some(std::time::Duration::from_millis(200));
    let store = roncho_store::connect(&options).await.unwrap();
    let started = std::time::Instant::now();
    let error = sqlx::query("SELECT pg_sleep(5)")
        .execute(store.pool())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("statement timeout"), "{error}");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    sqlx::query("SELECT 1")
        .execute(store.pool())
        .await
        .expect("the connection lives on");
    assert_eq!(setting(&store, "jit").await, "off", "with the timeout, JIT stays off");
    store.close().await;
    database.drop_database().await;
}

/// SQLite compiles a statement again on its next run whenever a value is
/// bound to a parameter its planner looked at (a `LIMIT ?`), and sqlx binds
/// every value on every run: each run of such a statement was parsed and
/// planned anew. Every connection of the embedded store, opened at once or
/// not, plans with the values left out: the limit stays a parameter in the
/// compiled program (`Variable`) instead of the bound value (`Integer 7`).
#[tokio::test]
async fn sqlite_connections_plan_a_statement_once_whatever_is_bound() {
    use sqlx::Row;
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let explain = |limit: i64| {
        let store = store.clone();
        async move {
            let rows = sqlx::query("EXPLAIN SELECT 1 FROM (SELECT 1 UNION ALL SELECT 2) LIMIT $1")
                .bind(limit)
                .fetch_all(store.pool())
                .await
                .unwrap();
            rows.iter()
                .map(|row| (row.get::<String, _>("opcode"), row.get::<i64, _>("p1")))
                .collect::<Vec<_>>()
        }
    };
    let programs = futures::future::join_all((0..6).map(|_| explain(7))).await;
    for program in programs {
        assert!(program.iter().any(|(opcode, _)| opcode == "Variable"), "{program:?}");
        assert!(
            !program.contains(&("Integer".to_owned(), 7)),
            "the bound limit was planned in: {program:?}"
        );
    }
    store.close().await;
}

/// A Postgres setting as the store's connections have it.
async fn setting(store: &SqlStore, name: &str) -> String {
    select_value(store, "SELECT current_setting($1) AS value", name).await
}

/// Postgres compiles a statement whose estimated cost passes
/// `jit_above_cost` to machine code first: 18 ms of a 22 ms search. Every
/// connection of the store starts with JIT off, whatever the server's
/// default, and no statement timeout unless one is set.
#[tokio::test]
async fn postgres_connections_never_compile_statements_to_machine_code() {
    let Some((database, store)) = pooled_store(3).await else {
        return;
    };
    let (a, b, c) = tokio::join!(setting(&store, "jit"), setting(&store, "jit"), setting(&store, "jit"));
    assert_eq!([a, b, c], ["off", "off", "off"]);
    assert_eq!(setting(&store, "statement_timeout").await, "0");
    store.close().await;
    database.drop_database().await;
}

/// Messages in Postgres have no foreign keys to their session and peer
/// (checked row by row, they cost a third of the write): a write locks both
/// once, and deleting either deletes its messages (migration 0017). A peer
/// or session deleted while a batch is being written takes the batch with
/// it, and no message is left without its session and peer.
#[tokio::test]
async fn postgres_a_peer_or_session_deleted_during_a_write_leaves_no_message_behind() {
    let Some(fixture) = postgres_fixture().await else {
        return;
    };
    let store = fixture.store.clone();
    for session in ["s", "t"] {
        store
            .create_messages("w", session, vec![new_message("alice", "a1"), new_message("bob", "b1")])
            .await
            .unwrap();
    }
    let orphans = || async {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM messages m WHERE NOT EXISTS (SELECT 1 FROM peers p \
             WHERE p.workspace_name = m.workspace_name AND p.name = m.peer_name) OR NOT EXISTS \
             (SELECT 1 FROM sessions s WHERE s.workspace_name = m.workspace_name AND s.name = m.session_name)",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        sqlx::Row::get::<i64, _>(&row, "n")
    };
    let contents = |session: &'static str| {
        let store = store.clone();
        async move {
            let listed = store.list_messages("w", session, &all(), page(1, 10)).await.unwrap();
            listed.items.into_iter().map(|m| m.content).collect::<Vec<_>>()
        }
    };
    for (delete, table, session, error_kind) in [
        (
            "DELETE FROM peers WHERE workspace_name = 'w' AND name = 'bob'",
            "peer bob",
            "s",
            "peer",
        ),
        (
            "DELETE FROM sessions WHERE workspace_name = 'w' AND name = 't'",
            "session t",
            "t",
            "session",
        ),
    ] {
        // The delete holds its row until it commits; the write starts meanwhile.
        let mut deleting = store.pool().begin().await.unwrap();
        sqlx::query(delete).execute(&mut *deleting).await.unwrap();
        let writer = store.clone();
        let write = tokio::spawn(async move {
            writer
                .create_messages("w", session, vec![new_message("bob", "b2"), new_message("alice", "a2")])
                .await
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            !write.is_finished(),
            "the write waits for the delete of its {error_kind}"
        );
        deleting.commit().await.unwrap();
        // NOT_FOUND, or FAILED_PRECONDITION where the write was joining the
        // peer to the session (its membership row's foreign key found it gone).
        match write.await.unwrap() {
            Err(Error::NotFound { resource, .. }) => assert_eq!(resource, error_kind),
            Err(Error::FailedPrecondition(reason)) => assert!(reason.contains("deleted meanwhile"), "{reason}"),
            other => panic!("a write whose {error_kind} was deleted under it: {other:?}"),
        }
        assert_eq!(orphans().await, 0, "after deleting {table}");
    }
    // The peer's messages went with it, the session's with it.
    assert_eq!(contents("s").await, ["a1"]);
    assert!(matches!(
        store.list_messages("w", "t", &all(), page(1, 10)).await,
        Err(Error::NotFound { .. })
    ));
    // A write after the delete makes the peer anew, as any first write does.
    store
        .create_messages("w", "s", vec![new_message("bob", "b3")])
        .await
        .unwrap();
    assert_eq!(contents("s").await, ["a1", "b3"]);
    fixture.finish().await;
}

/// Messages synced, pending and failed.
async fn sync_counts(store: &SqlStore) -> (i64, i64, i64) {
    let counts = store.sync_counts(SyncKind::Message).await.unwrap();
    (counts.synced, counts.pending, counts.failed)
}

/// The messages due to be embedded, in order, with their versions.
async fn due_versions(store: &SqlStore) -> Vec<(String, i64)> {
    let due = store
        .unsynced(SyncKind::Message, 10, roncho_core::model::now_micros(), 0)
        .await
        .unwrap();
    due.into_iter().map(|item| (item.id, item.version)).collect()
}

/// A store written before migration 0019 (sync state and words in the
/// message rows) upgrades with every message's state: synced, pending in
/// order, failed; on Postgres the indexed words move and the rest wait for
/// the text indexer. Migration 0023 then queues every message again.
async fn a_store_from_before_0019_upgrades_with_its_sync_state(url: String) {
    let store = roncho_store::connect(&StoreOptions::new(url)).await.expect("connect");
    roncho_store::migrate_to(&store, 18).await.expect("migrate to 0018");
    let postgres = store.dialect() == roncho_store::Dialect::Postgres;
    let words = if postgres { ", search_vector" } else { "" };
    for statement in [
        "INSERT INTO workspaces (name, created_at) VALUES ('w', 1)".to_owned(),
        "INSERT INTO peers (workspace_name, name, created_at) VALUES ('w', 'alice', 1)".to_owned(),
        "INSERT INTO sessions (workspace_name, name, last_seq, created_at) VALUES ('w', 's', 4, 1)".to_owned(),
        format!(
            "INSERT INTO messages (public_id, workspace_name, session_name, peer_name, seq_in_session, content, \
             token_count, created_at, sync_state, sync_attempts, sync_version{words}) VALUES \
             ('m1', 'w', 's', 'alice', 1, 'a kitten', 2, 1, 'synced', 0, 0{}), \
             ('m2', 'w', 's', 'alice', 2, 'a puppy', 2, 2, 'pending', 0, 3{}), \
             ('m3', 'w', 's', 'alice', 3, 'a parrot', 2, 3, 'failed', 20, 0{}), \
             ('m4', 'w', 's', 'alice', 4, 'a goldfish', 2, 4, 'pending', 0, 0{})",
            if postgres {
                ", to_tsvector('english', 'alice a kitten')"
            } else {
                ""
            },
            if postgres { ", NULL" } else { "" },
            if postgres { ", NULL" } else { "" },
            if postgres { ", NULL" } else { "" },
        ),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(store.pool())
            .await
            .expect("an 0018 row");
    }
    roncho_store::migrate_to(&store, 22).await.expect("the upgrade");
    // Counted as the schema of 0022 holds them (`sync_counts` reads what 0029 added).
    let pool = store.pool();
    let count = |sql: &'static str| async move {
        let (n,): (i64,) = sqlx::query_as(sql).fetch_one(pool).await.expect(sql);
        n
    };
    let (total, pending, failed) = (
        count("SELECT COUNT(*) FROM messages").await,
        count("SELECT COUNT(*) FROM message_sync WHERE state = 'pending'").await,
        count("SELECT COUNT(*) FROM message_sync WHERE state = 'failed'").await,
    );
    assert_eq!((total - pending - failed, pending, failed), (1, 2, 1));
    assert_eq!(
        due_versions(&store).await,
        [("m2".to_owned(), 3), ("m4".to_owned(), 0)],
        "pending, in order, versions kept"
    );
    if postgres {
        assert_eq!(
            store.text_index_backlog().await.unwrap(),
            3,
            "the unindexed wait for the indexer"
        );
    }
    // 0023: message vectors lean to their own text now; every message is
    // embedded again, each with a new version so that a reconciler holding
    // an old one does not mark it done. (Searches read the words as 0026
    // keeps them: searched once every migration ran.)
    roncho_store::migrate(&store).await.expect("0023");
    for (query, content) in [("kitten", "a kitten"), ("goldfish", "a goldfish")] {
        assert_eq!(found(&store, "w", &search(query), &all()).await, [content], "{query}");
    }
    assert_eq!(sync_counts(&store).await, (0, 4, 0));
    assert_eq!(
        due_versions(&store).await,
        [
            ("m1".to_owned(), 1),
            ("m2".to_owned(), 4),
            ("m3".to_owned(), 1),
            ("m4".to_owned(), 1)
        ]
    );
    store.close().await;
}

#[tokio::test]
async fn sqlite_a_store_from_before_0019_upgrades_with_its_sync_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    a_store_from_before_0019_upgrades_with_its_sync_state(StoreOptions::embedded(dir.path()).database_url).await;
}

#[tokio::test]
async fn postgres_a_store_from_before_0019_upgrades_with_its_sync_state() {
    let Some(database) = FreshDatabase::create().await else {
        return;
    };
    a_store_from_before_0019_upgrades_with_its_sync_state(database.url.clone()).await;
    database.drop_database().await;
}

/// Migration 0029 queues again the synced messages the model may not have
/// read whole, so that they get their passages, and times each message's
/// wait from when it was queued, not from its `created_at`.
async fn long_messages_are_embedded_again_with_their_passages(url: String) {
    let store = roncho_store::connect(&StoreOptions::new(url)).await.expect("connect");
    roncho_store::migrate_to(&store, 28).await.expect("migrate to 0028");
    store
        .create_messages(
            "w",
            "s",
            vec![
                new_message("alice", "short"),
                new_message("alice", &"a long plan ".repeat(40)),
            ],
        )
        .await
        .unwrap();
    sqlx::query("DELETE FROM message_sync")
        .execute(store.pool())
        .await
        .expect("both synced");
    roncho_store::migrate(&store).await.expect("0029");
    let counts = store.sync_counts(SyncKind::Message).await.unwrap();
    assert_eq!((counts.synced, counts.pending, counts.failed), (1, 1, 0));
    let waited = roncho_core::model::now_micros() - counts.oldest_pending_at.expect("queued when migrated");
    assert!((0..600_000_000).contains(&waited), "{waited} µs");
    let due = store
        .unsynced(SyncKind::Message, 10, roncho_core::model::now_micros(), 0)
        .await
        .unwrap();
    assert_eq!(due.len(), 1);
    assert!(due[0].text.contains("a long plan"), "{:?}", due[0].text);
    store.close().await;
}

#[tokio::test]
async fn sqlite_long_messages_are_embedded_again_with_their_passages() {
    let dir = tempfile::tempdir().expect("tempdir");
    long_messages_are_embedded_again_with_their_passages(StoreOptions::embedded(dir.path()).database_url).await;
}

#[tokio::test]
async fn postgres_long_messages_are_embedded_again_with_their_passages() {
    let Some(database) = FreshDatabase::create().await else {
        return;
    };
    long_messages_are_embedded_again_with_their_passages(database.url.clone()).await;
    database.drop_database().await;
}

/// Words indexed before migration 0026 move with their workspace and
/// session, so a session's search, which reads its words by them, finds
/// them; words indexed after carry them too.
#[tokio::test]
async fn postgres_words_indexed_before_0026_are_found_by_their_session() {
    let Some((database, store)) = pooled_store(16).await else {
        return;
    };
    roncho_store::migrate_to(&store, 25).await.expect("migrate to 0025");
    for (workspace, session, content) in [
        ("w", "s", "a kitten in s"),
        ("w", "t", "a kitten in t"),
        ("v", "s", "a kitten elsewhere"),
    ] {
        store
            .create_messages(workspace, session, vec![new_message("alice", content)])
            .await
            .unwrap();
    }
    // What 0025's text indexer wrote: the words alone.
    for statement in [
        "INSERT INTO message_text (message_id, search_vector) \
         SELECT id, to_tsvector('english', peer_name || ' ' || content) FROM messages",
        "DELETE FROM message_unindexed",
    ] {
        sqlx::query(statement).execute(store.pool()).await.expect(statement);
    }
    roncho_store::migrate(&store).await.expect("0026");
    let in_session = |session: &str| MessageQuery {
        session_ids: Some(vec![session.to_owned()]),
        ..search("kitten")
    };
    assert_eq!(found(&store, "w", &in_session("s"), &all()).await, ["a kitten in s"]);
    assert_eq!(found(&store, "w", &in_session("t"), &all()).await, ["a kitten in t"]);
    assert_eq!(
        found(&store, "v", &in_session("s"), &all()).await,
        ["a kitten elsewhere"]
    );
    assert_eq!(
        found(&store, "w", &search("kitten"), &all()).await,
        ["a kitten in t", "a kitten in s"]
    );
    store
        .create_messages("w", "s", vec![new_message("bob", "another kitten")])
        .await
        .unwrap();
    let mark = store.text_index_mark().await.unwrap().unwrap();
    assert_eq!(store.index_text(mark, 10).await.unwrap(), 1);
    assert_eq!(store.text_index_backlog().await.unwrap(), 0);
    assert_eq!(
        found(&store, "w", &in_session("s"), &all()).await,
        ["another kitten", "a kitten in s"]
    );
    store.close().await;
    database.drop_database().await;
}

/// SQLite's FTS5 index is kept only while it ranks (no embedder): turned
/// off it is emptied and writes skip it; turned on it is rebuilt from the
/// rows, without the messages deleted meanwhile. Postgres has nothing to do.
#[tokio::test]
async fn sqlite_full_text_index_rests_while_the_vector_store_ranks_words() {
    let fixture = sqlite_fixture().await;
    let store = fixture.store.clone();
    let words = |query: &'static str| {
        let store = store.clone();
        async move { found(&*store, "w", &search(query), &all()).await }
    };
    store
        .create_messages("w", "s", vec![new_message("alice", "an old kitten")])
        .await
        .unwrap();
    assert_eq!(words("kitten").await, ["an old kitten"]);
    assert!(store.maintain_full_text_index(false).await.unwrap(), "turned off");
    assert!(!store.maintain_full_text_index(false).await.unwrap(), "already off");
    match store.search_messages("w", &search("kitten"), &all()).await {
        Err(Error::Unavailable(reason)) => assert!(reason.contains("full-text index is off"), "{reason}"),
        other => panic!("searching a resting index answers UNAVAILABLE, not {other:?}"),
    }
    let written = store
        .create_messages(
            "w",
            "s",
            vec![
                new_message("bob", "a new kitten"),
                new_message("bob", "a kitten to forget"),
            ],
        )
        .await
        .unwrap();
    store.delete_message("w", "s", &written[1].id).await.unwrap();
    let indexed = |store: Arc<SqlStore>| async move {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM messages_fts WHERE messages_fts MATCH 'kitten'")
            .fetch_one(store.pool())
            .await
            .unwrap();
        sqlx::Row::get::<i64, _>(&row, "n")
    };
    assert_eq!(indexed(store.clone()).await, 0, "nothing indexed while off");
    assert!(store.maintain_full_text_index(true).await.unwrap(), "turned on");
    let mut now = words("kitten").await;
    now.sort();
    assert_eq!(now, ["a new kitten", "an old kitten"], "rebuilt from the rows");
    store
        .create_messages("w", "s", vec![new_message("alice", "the newest kitten")])
        .await
        .unwrap();
    assert_eq!(indexed(store.clone()).await, 3, "written while on");
    fixture.finish().await;
    if let Some(fixture) = postgres_fixture().await {
        assert!(!fixture.store.maintain_full_text_index(false).await.unwrap());
        fixture
            .store
            .create_messages("w", "s", vec![new_message("a", "a kitten")])
            .await
            .unwrap();
        assert_eq!(
            found(&*fixture.store, "w", &search("kitten"), &all()).await,
            ["a kitten"]
        );
        fixture.finish().await;
    }
}

/// Returns the 6-byte windows of `marker` found in any file of `dir`.
fn marker_on_disk(dir: &std::path::Path, marker: &str) -> Vec<String> {
    let windows: Vec<&[u8]> = marker.as_bytes().windows(6).collect();
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap_or_default();
        for window in &windows {
            if bytes.windows(window.len()).any(|at| at == *window) {
                found.push(format!("{} in {}", String::from_utf8_lossy(window), path.display()));
            }
        }
    }
    found
}

#[tokio::test]
async fn sqlite_erased_text_leaves_the_data_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(StoreOptions::embedded(dir.path()).database_url).await;
    // Letters no other text shares (FTS5 stores terms prefix-compressed:
    // any six of them in a row is a trace).
    let secret = "my passphrase is qzxwvkjplmbrtq and nobody knows";
    let mut batch = vec![new_message("alice", secret)];
    batch.extend((0..200).map(|i| new_message("bob", &format!("filler message number {i} about the weather"))));
    let written = store.create_messages("w", "s", batch).await.unwrap();
    // Written to the database file too, not only the WAL.
    sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
        .execute(store.pool())
        .await
        .unwrap();
    assert!(
        !marker_on_disk(dir.path(), "qzxwvkjplmbrtq").is_empty(),
        "the text is on disk before"
    );
    let receipt = store.delete_message("w", "s", &written[0].id).await.unwrap();
    assert_eq!(receipt.overwritten_at, None);
    let mut overwritten = None;
    for _ in 0..300 {
        overwritten = store.erasure_receipt("w", &receipt.id).await.unwrap().overwritten_at;
        if overwritten.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let overwritten = overwritten.expect("the receipt says when the bytes were overwritten");
    assert!(overwritten >= receipt.finished_at.unwrap());
    let traces = marker_on_disk(dir.path(), "qzxwvkjplmbrtq");
    assert!(traces.is_empty(), "erased text left on disk: {traces:?}");
    assert_eq!(
        found(&*store, "w", &search("weather"), &all()).await.len(),
        10,
        "the rest is intact"
    );
    store.close().await;
}

#[tokio::test]
async fn sqlite_data_survives_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let url = StoreOptions::embedded(dir.path()).database_url;
    let store = open(url.clone()).await;
    let created = store
        .create_messages("w", "s", vec![new_message("a", "durable")])
        .await
        .unwrap();
    store.close().await;
    let reopened = open(url).await;
    assert_eq!(
        reopened.get_message("w", "s", &created[0].id).await.unwrap(),
        created[0]
    );
    let info = reopened.info().await.unwrap();
    assert_eq!(info.backend, "sqlite");
    assert_eq!(
        info.schema_version,
        Some(roncho_store::latest_schema_version(roncho_store::Dialect::Sqlite))
    );
}

fn search(query: &str) -> MessageQuery {
    MessageQuery {
        terms: roncho_core::search::terms(query),
        session_ids: None,
        peer_id: None,
        peer_perspective: None,
        limit: 10,
    }
}

async fn found(store: &dyn Store, workspace_id: &str, search: &MessageQuery, filter: &Filter) -> Vec<String> {
    store
        .search_messages(workspace_id, search, filter)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.content)
        .collect()
}

/// Marks a message's vector synced as the reconciler does (version read first).
async fn mark_vector_synced(store: &dyn Store, id: &str) {
    let items = store
        .unsynced(SyncKind::Message, 10, roncho_core::model::now_micros(), 0)
        .await
        .unwrap();
    let synced: Vec<(String, i64)> = items
        .iter()
        .filter(|item| item.id == id)
        .map(|item| (item.id.clone(), item.version))
        .collect();
    assert_eq!(synced.len(), 1, "{id} is pending");
    store.mark_synced(SyncKind::Message, &synced).await.unwrap();
}

fn new_conclusion(observer: &str, observed: &str, content: &str) -> NewConclusion {
    NewConclusion {
        observer_id: observer.into(),
        observed_id: observed.into(),
        session_id: None,
        level: "explicit".into(),
        content: content.into(),
        premises: vec![],
        source_ids: vec![],
        metadata: JsonObject::new(),
    }
}

fn once(key: &str, operation: &'static str, body: &str, window: std::time::Duration) -> roncho_core::idempotency::Once {
    let fingerprint = roncho_core::idempotency::Fingerprint::new().text(body);
    roncho_core::idempotency::Once::new("idempotency_key", key, operation, fingerprint, window).unwrap()
}

fn derived(observer: &str, observed: &str, content: &str, sources: &[&str]) -> NewConclusion {
    NewConclusion {
        session_id: Some("s".into()),
        source_ids: sources.iter().map(|id| (*id).to_owned()).collect(),
        ..new_conclusion(observer, observed, content)
    }
}

/// The contents of `observer`'s conclusions about `observed`, sorted.
async fn collection(store: &dyn Store, observer: &str, observed: &str) -> Vec<String> {
    let filter = roncho_core::filter::parse(
        &roncho_core::filter::CONCLUSION,
        Some(&object(json!({"observer_id": observer, "observed_id": observed}))),
    )
    .unwrap();
    let mut contents: Vec<String> = store
        .list_conclusions("w", &filter, page(1, 100))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|conclusion| conclusion.content)
        .collect();
    contents.sort();
    contents
}

/// Batches written at once by many callers (on SQLite, several in one
/// group commit) each land whole, in order, with their work; a batch that
/// fails (the database refuses a message: a trigger of this test's) fails
/// alone and leaves nothing.
async fn concurrent_batches_are_written_whole_and_in_order(fixture: Fixture) {
    use roncho_core::queue::{StatusFilter, WorkQueue};
    use sqlx::Executor;
    let poison = match fixture.store.dialect() {
        roncho_store::Dialect::Sqlite => vec![
            "CREATE TRIGGER poison BEFORE INSERT ON messages WHEN NEW.content = 'poison' \
             BEGIN SELECT RAISE(ABORT, 'poisoned'); END",
        ],
        roncho_store::Dialect::Postgres => vec![
            "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF NEW.content = 'poison' THEN RAISE EXCEPTION 'poisoned'; END IF; RETURN NEW; END $$",
            "CREATE TRIGGER poison BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION poison()",
        ],
    };
    for statement in poison {
        fixture.store.pool().execute(statement).await.unwrap();
    }
    let store: &dyn Store = &*fixture.store;
    let batch = |writer: usize, round: usize| -> Vec<NewMessage> {
        (0..10)
            .map(|i| {
                new_message(
                    ["alice", "bob"][i % 2],
                    &format!("writer {writer} round {round} line {i}"),
                )
            })
            .collect()
    };
    let writes = (0..8).flat_map(|writer| (0..5).map(move |round| (writer, round)));
    let outcomes = futures::future::join_all(writes.map(|(writer, round)| async move {
        let session = format!("s{writer}");
        (writer, store.create_messages("w", &session, batch(writer, round)).await)
    }))
    .await;
    for (writer, outcome) in &outcomes {
        assert!(outcome.is_ok(), "writer {writer}: {outcome:?}");
    }
    let mut poisoned = batch(9, 0);
    poisoned[5].content = "poison".into();
    let failing = futures::future::join_all([
        store.create_messages("w", "s0", batch(0, 5)),
        store.create_messages("w", "s9", poisoned),
        store.create_messages("w", "s1", batch(1, 5)),
    ])
    .await;
    assert!(failing[0].is_ok() && failing[2].is_ok(), "{failing:?}");
    assert!(failing[1].is_err(), "{failing:?}");
    assert!(
        matches!(
            store.list_messages("w", "s9", &all(), page(1, 10)).await,
            Err(Error::NotFound { .. })
        ),
        "the failed batch left nothing, not even its session"
    );
    let mut written = 0;
    for writer in 0..8 {
        let listed = store
            .list_messages("w", &format!("s{writer}"), &all(), page(1, 100))
            .await
            .unwrap()
            .items;
        let rounds = if writer < 2 { 6 } else { 5 };
        assert_eq!(listed.len(), rounds * 10, "writer {writer}");
        let seqs: Vec<i64> = listed.iter().map(|message| message.seq_in_session).collect();
        assert_eq!(
            seqs,
            (1..=i64::try_from(rounds * 10).unwrap()).collect::<Vec<_>>(),
            "writer {writer}"
        );
        // Each batch's ten lines are contiguous: no batch interleaves another.
        for chunk in listed.chunks(10) {
            let round = chunk[0].content.split(" line ").next().unwrap().to_owned();
            assert!(
                chunk.iter().all(|message| message.content.starts_with(&round)),
                "{chunk:?}"
            );
        }
        written += listed.len();
    }
    // Every message's work came with it: one item each, and a summary at the
    // 20th, 40th and 60th message of each session.
    let queue = roncho_store::SqlWorkQueue::new(fixture.store.clone());
    let status = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    let summaries = 2 * 3 + 6 * 2;
    assert_eq!(
        status.counts.pending,
        i64::try_from(written).unwrap() + summaries,
        "{status:?}"
    );
    let (groups, batches) = fixture.store.write_groups();
    match fixture.store.dialect() {
        // SQLite's one writer wrote the waiting batches in groups.
        roncho_store::Dialect::Sqlite => assert!(
            batches == 43 && groups < batches,
            "{groups} groups wrote {batches} batches"
        ),
        roncho_store::Dialect::Postgres => assert_eq!((groups, batches), (0, 0)),
    }
    fixture.finish().await;
}

#[tokio::test]
async fn concurrent_batches_are_written_whole_and_in_order_on_sqlite() {
    concurrent_batches_are_written_whole_and_in_order(sqlite_fixture().await).await;
}

#[tokio::test]
async fn concurrent_batches_are_written_whole_and_in_order_on_postgres() {
    if let Some(fixture) = postgres_fixture().await {
        concurrent_batches_are_written_whole_and_in_order(fixture).await;
    }
}

/// The ids of a page of resources.
macro_rules! ids {
    ($page:expr) => {
        $page
            .expect("list")
            .items
            .into_iter()
            .map(|item| item.id)
            .collect::<Vec<String>>()
    };
}

/// A filter on `key` that the row created by `every_filter_key_reads_its_column`
/// matches; panics for a key it does not know, so a new schema field needs a
/// value here before the suite passes.
fn matching_filter(key: &str, id: &str) -> Value {
    let value = match key {
        "id" => json!(id),
        "workspace_id" => json!("w"),
        "session_id" | "session_name" => json!("s"),
        "peer_id" | "observer_id" | "observed_id" | "observer" | "observed" => json!("alice"),
        "is_active" => json!(true),
        "token_count" => json!({"gte": 1}),
        "times_derived" => json!({"gte": 1}),
        "level" => json!("explicit"),
        "created_at" => json!({"gte": "2000-01-01T00:00:00Z"}),
        "source_ids" => json!({"contains": "m-source"}),
        other => panic!("no matching value for filter key `{other}`: add one"),
    };
    json!({ key: value })
}

fn parsed(schema: &filter::Schema, filters: Value) -> Filter {
    filter::parse(schema, Some(&object(filters))).expect("a valid filter")
}

// The other ports the store implements, and properties over any input.
mod properties;
mod text_index;
mod vectors;
mod work_queue;

mod derivation;
mod dreams;
mod erasure;
mod filters;
mod memory;
mod messages;
mod scopes;
mod search;
mod sync;
mod tenants;
mod webhooks;
mod workspaces;
