//! `roncho import --from-honcho`: a Honcho v3 database (tests/honcho-v3-database.sql,
//! created here on the test Postgres server) copied into roncho's store on
//! SQLite and on Postgres. Ids, times, members, summaries, peer cards,
//! conclusions, webhooks and scopes (with their sessions and memory)
//! arrive; deleted rows don't; no
//! derivation is queued; a second run adds nothing, and a run after Honcho
//! took more messages adds just those.

use std::sync::Arc;

use roncho::import::{Counts, ImportOptions, Tally, import_honcho};
use roncho_core::filter::Filter;
use roncho_core::model::{PageRequest, SummaryKind};
use roncho_core::queue::{StatusFilter, WorkQueue};
use roncho_core::store::{Memory, Messages, Scopes, Webhooks, Workspaces};
use roncho_store::SqlStore;
use roncho_store::testing::FreshDatabase;

const HONCHO_DATABASE: &str = include_str!("../honcho-v3-database.sql");

/// A fresh database on the test server holding the Honcho fixture.
async fn honcho_database() -> Option<(FreshDatabase, sqlx::PgPool)> {
    let database = FreshDatabase::create().await?;
    let pool = roncho::import::connect(&database.url).await.unwrap();
    sqlx::raw_sql(HONCHO_DATABASE).execute(&pool).await.unwrap();
    Some((database, pool))
}

fn tally(new: u64, present: u64, skipped: u64) -> Tally {
    Tally { new, present, skipped }
}

#[tokio::test]
async fn a_honcho_database_imports_into_sqlite() {
    let Some((honcho, source)) = honcho_database().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    import_and_check(&source, store).await;
    source.close().await;
    honcho.drop_database().await;
}

#[tokio::test]
async fn a_honcho_database_imports_into_postgres() {
    let Some((honcho, source)) = honcho_database().await else {
        return;
    };
    let target = FreshDatabase::create().await.unwrap();
    let store = roncho_store::testing::open_migrated(&target.url).await;
    import_and_check(&source, store.clone()).await;
    store.close().await;
    source.close().await;
    target.drop_database().await;
    honcho.drop_database().await;
}

async fn import_and_check(source: &sqlx::PgPool, store: Arc<SqlStore>) {
    let options = ImportOptions::default();
    let counts = import_honcho(source, store.as_ref(), &options).await.unwrap();
    assert_eq!(
        strip_notes(&counts),
        Counts {
            workspaces: tally(2, 0, 0),
            webhooks: tally(1, 0, 0),
            peers: tally(4, 0, 0),
            scopes: tally(1, 0, 0),
            peer_cards: tally(2, 0, 0),
            sessions: tally(2, 0, 1),
            messages: tally(5, 0, 0),
            summaries: tally(1, 0, 0),
            conclusions: tally(4, 0, 1),
            notes: Default::default(),
        },
        "{counts}"
    );
    assert!(
        counts.notes.iter().any(|note| note.contains("inactive sessions")),
        "{counts}"
    );

    // Honcho's ids and times.
    let message = store
        .get_message("acme", "chat-1", "Ms1aaaaaaaaaaaaaaaaaa")
        .await
        .unwrap();
    assert_eq!(message.content, "I adopted a grey kitten from the shelter last week");
    assert_eq!(message.created_at, 1_772_359_260_123_456, "2026-03-01T10:01:00.123456Z");
    assert_eq!(message.seq_in_session, 1);
    let third = store
        .get_message("acme", "chat-1", "Ms3cccccccccccccccccc")
        .await
        .unwrap();
    assert_eq!(third.metadata.get("mood").and_then(|v| v.as_str()), Some("happy"));
    assert_eq!(third.seq_in_session, 3);
    let workspace = store
        .list_workspaces(&Filter::All, PageRequest::default())
        .await
        .unwrap();
    let acme = workspace.items.iter().find(|w| w.id == "acme").unwrap();
    assert_eq!(acme.metadata.get("plan").and_then(|v| v.as_str()), Some("pro"));

    // Deleted in Honcho: not here.
    assert!(
        store
            .get_message("acme", "deleted-chat", "Ms5eeeeeeeeeeeeeeeeee")
            .await
            .is_err()
    );

    // Members with their configuration; carol had left.
    let members = store
        .list_session_peers("acme", "chat-1", PageRequest::default())
        .await
        .unwrap();
    let ids: Vec<&str> = members.items.iter().map(|peer| peer.id.as_str()).collect();
    assert_eq!(ids, ["alice", "bot"]);
    let bot = store.get_session_peer_config("acme", "chat-1", "bot").await.unwrap();
    assert_eq!((bot.observe_me, bot.observe_others), (Some(false), Some(true)));

    // Cards, summary, conclusions, webhooks.
    assert_eq!(
        store.get_peer_card("acme", "alice", "alice").await.unwrap(),
        Some(vec![
            "IDENTITY: Alice, a nurse in Lisbon".to_owned(),
            "ATTRIBUTE: adopted a grey kitten".to_owned()
        ])
    );
    assert_eq!(
        store.get_peer_card("acme", "alice", "bot").await.unwrap(),
        Some(vec!["IDENTITY: Alice's assistant".to_owned()])
    );
    let summaries = store.session_summaries("acme", "chat-1").await.unwrap();
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0].kind, SummaryKind::Short);
    assert_eq!(summaries[0].message_id, "Ms3cccccccccccccccccc");
    assert_eq!(summaries[0].message_seq, 3);
    let conclusions = store
        .conclusions_by_ids(
            "acme",
            &[
                "Dc1aaaaaaaaaaaaaaaaaa".into(),
                "Dc2bbbbbbbbbbbbbbbbbb".into(),
                "Dc3cccccccccccccccccc".into(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(conclusions.len(), 2, "the soft-deleted one stays out: {conclusions:?}");
    let deduction = conclusions.iter().find(|c| c.id == "Dc2bbbbbbbbbbbbbbbbbb").unwrap();
    assert_eq!(deduction.level, "deductive");
    assert_eq!(deduction.premises, ["Alice adopted a grey kitten named Mochi"]);
    assert_eq!(deduction.source_ids, ["Dc1aaaaaaaaaaaaaaaaaa"]);
    let explicit = conclusions.iter().find(|c| c.id == "Dc1aaaaaaaaaaaaaaaaaa").unwrap();
    assert_eq!(
        (explicit.times_derived, explicit.session_id.as_deref()),
        (2, Some("chat-1"))
    );
    // The scope, its session and its memory; not a member among the peers.
    assert_eq!(
        store.list_scopes("acme", PageRequest::default()).await.unwrap().total,
        1
    );
    assert_eq!(
        store.scope_session_ids("acme", &["team".into()]).await.unwrap(),
        ["chat-1"]
    );
    let memory = store
        .conclusions_by_ids("acme", &["Dc6ffffffffffffffffff".into()])
        .await
        .unwrap();
    assert_eq!(memory[0].observer_id, "scope.team");
    let webhooks = store.list_webhooks("acme", PageRequest::default()).await.unwrap();
    assert_eq!(webhooks.items[0].url, "https://hooks.example.com/honcho");

    // Nothing to derive: Honcho's conclusions and summaries came along.
    let queue = roncho_store::SqlWorkQueue::new(store.clone());
    let status = queue
        .status(&StatusFilter {
            workspace_id: "acme".into(),
            session_id: None,
            observer_id: None,
            sender_id: None,
        })
        .await
        .unwrap();
    assert_eq!(status.counts.total, 0, "{status:?}");

    // Again: nothing new.
    let again = import_honcho(source, store.as_ref(), &options).await.unwrap();
    assert_eq!(
        (
            again.workspaces.new,
            again.peers.new,
            again.sessions.new,
            again.messages.new
        ),
        (0, 0, 0, 0),
        "{again}"
    );
    assert_eq!(
        (
            again.peer_cards.new,
            again.summaries.new,
            again.conclusions.new,
            again.webhooks.new
        ),
        (0, 0, 0, 0),
        "{again}"
    );
    assert_eq!((again.messages.present, again.conclusions.present), (5, 4), "{again}");
    assert_eq!(again.scopes, tally(0, 1, 0), "{again}");

    // Honcho took more messages while the import ran: the next run adds them, after the others.
    sqlx::raw_sql(
        "INSERT INTO messages (public_id, session_name, content, peer_name, workspace_name, seq_in_session, created_at) \
         VALUES ('Ms7gggggggggggggggggg', 'chat-1', 'Mochi knocked over my plant today', 'alice', 'acme', 5, \
         '2026-03-02 08:00:00+00')",
    )
    .execute(source)
    .await
    .unwrap();
    let caught_up = import_honcho(
        source,
        store.as_ref(),
        &ImportOptions {
            workspaces: vec!["acme".into()],
            derive: true,
        },
    )
    .await
    .unwrap();
    assert_eq!(
        (caught_up.workspaces.new + caught_up.workspaces.present),
        1,
        "{caught_up}"
    );
    assert_eq!(
        (caught_up.messages.new, caught_up.messages.present),
        (1, 4),
        "{caught_up}"
    );
    let late = store
        .get_message("acme", "chat-1", "Ms7gggggggggggggggggg")
        .await
        .unwrap();
    assert_eq!(late.seq_in_session, 5);
    // --derive: the new message's work is queued, as a write's would be.
    let status = queue
        .status(&StatusFilter {
            workspace_id: "acme".into(),
            session_id: Some("chat-1".into()),
            observer_id: None,
            sender_id: None,
        })
        .await
        .unwrap();
    assert!(status.counts.total > 0, "{status:?}");
}

fn strip_notes(counts: &Counts) -> Counts {
    Counts {
        notes: Default::default(),
        ..counts.clone()
    }
}
