//! The `Store` contract suite, run against every backend: SQLite (embedded)
//! and Postgres (`RONCHO_TEST_DATABASE_URL`). Each test gets a fresh database.

use std::sync::Arc;

use roncho_core::Error;
use roncho_core::filter::{self, Filter};
use roncho_core::model::{
    CollectionQuery, JsonObject, MessageSearch, NewConclusion, NewMessage, PageRequest, SessionPeerConfig,
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
                    let fixture = super::sqlite_fixture().await;
                    super::$name(&*fixture.store).await;
                    fixture.finish().await;
                }
            )*
            $(
                #[tokio::test]
                async fn $sql() {
                    let fixture = super::sqlite_fixture().await;
                    super::$sql(fixture.store.clone()).await;
                    fixture.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let Some(fixture) = super::postgres_fixture().await else { return };
                    super::$name(&*fixture.store).await;
                    fixture.finish().await;
                }
            )*
            $(
                #[tokio::test]
                async fn $sql() {
                    let Some(fixture) = super::postgres_fixture().await else { return };
                    super::$sql(fixture.store.clone()).await;
                    fixture.finish().await;
                }
            )*
        }
    };
}

store_contract_suite!(
    every_filter_key_reads_its_column,
    searches_count_what_an_unsynced_vector_store_cannot_return,
    workspaces_are_get_or_create_and_update_merges_configuration,
    peers_replace_metadata_and_configuration_only_when_given,
    sessions_merge_configuration_and_ensure_peers,
    session_membership_add_set_remove_and_config,
    observers_are_limited_to_ten_per_session,
    messages_are_ordered_counted_and_paged,
    message_update_and_delete,
    session_delete_removes_it_and_its_messages_at_once,
    workspace_delete_is_refused_while_a_session_is_active,
    clone_copies_up_to_an_inclusive_cutoff,
    peer_delete_removes_its_messages_and_memberships,
    filters_follow_the_honcho_grammar,
    workspaces_are_isolated,
    webhooks_are_get_or_create_and_limited,
    peer_sessions_and_session_peers_are_listed,
    full_text_search_stems_scopes_and_never_errors,
    the_unsynced_tail_is_searched_within_its_bound,
    words_are_searchable_at_once_and_indexed_off_the_write_path,
    context_messages_fit_the_token_budget,
    context_messages_walk_back_across_pages,
    session_summaries_are_set_replaced_and_bound_context,
    conclusions_are_created_listed_and_soft_deleted,
    rederived_conclusions_count_up,
    a_superseded_conclusion_hands_on_its_count,
    message_scans_grep_date_and_window,
    conclusions_citing_walks_source_ids,
    dreams_are_counted_per_collection,
    collection_conclusions_take_recent_and_most_derived,
    peer_cards_are_set_and_read,
    sync_state_and_tombstones_track_vectors,
    failed_rows_at_the_head_of_the_queue_hide_no_pending_message,
    a_batch_past_the_bind_limit_is_written_whole,
    idempotent_writes_happen_once_and_twins_wait_for_the_first,
    erasing_a_message_reaches_everything_derived_from_it,
    erasing_a_session_or_peer_runs_in_chunks_with_a_receipt,
    scopes_gather_their_sessions_memory_and_let_go_of_it;
    another_model_of_the_same_size_embeds_everything_again,
    deleted_messages_leave_nothing_in_the_side_tables,
);

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

async fn workspaces_are_get_or_create_and_update_merges_configuration(store: &dyn Store) {
    let (created, was_created) = store
        .get_or_create_workspace(
            "w1",
            object(json!({"team": "a"})),
            object(json!({"reasoning": {"enabled": true}})),
        )
        .await
        .unwrap();
    assert!(was_created);
    assert_eq!(created.metadata, object(json!({"team": "a"})));

    let (again, was_created) = store
        .get_or_create_workspace("w1", object(json!({"team": "b"})), JsonObject::new())
        .await
        .unwrap();
    assert!(!was_created, "an existing workspace is returned unchanged");
    assert_eq!(again, created);

    let updated = store
        .update_workspace(
            "w1",
            Some(object(json!({"x": 1}))),
            Some(object(json!({"summary": {"enabled": false}}))),
        )
        .await
        .unwrap();
    assert_eq!(updated.metadata, object(json!({"x": 1})), "metadata is replaced");
    assert_eq!(
        updated.configuration,
        object(json!({"reasoning": {"enabled": true}, "summary": {"enabled": false}})),
        "configuration is shallow-merged"
    );
    let unchanged = store.update_workspace("w1", None, None).await.unwrap();
    assert_eq!(unchanged, updated);

    let fresh = store
        .update_workspace("w2", Some(object(json!({"k": "v"}))), None)
        .await
        .unwrap();
    assert_eq!(fresh.metadata, object(json!({"k": "v"})), "update creates when absent");

    let listed = store.list_workspaces(&all(), page(1, 50)).await.unwrap();
    assert_eq!(
        listed.items.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
        ["w1", "w2"]
    );
    let reversed = store
        .list_workspaces(
            &all(),
            PageRequest {
                reverse: true,
                ..page(1, 50)
            },
        )
        .await
        .unwrap();
    assert_eq!(
        reversed.items.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
        ["w2", "w1"]
    );
}

async fn peers_replace_metadata_and_configuration_only_when_given(store: &dyn Store) {
    let (peer, created) = store
        .get_or_create_peer(
            "w",
            "alice",
            Some(object(json!({"a": 1}))),
            Some(object(json!({"observe_me": false}))),
        )
        .await
        .unwrap();
    assert!(created);
    assert_eq!(peer.workspace_id, "w");
    let (same, created) = store.get_or_create_peer("w", "alice", None, None).await.unwrap();
    assert!(!created);
    assert_eq!(same, peer, "nothing given, nothing changed");
    let (replaced, _) = store
        .get_or_create_peer("w", "alice", None, Some(object(json!({"x": true}))))
        .await
        .unwrap();
    assert_eq!(replaced.metadata, object(json!({"a": 1})));
    assert_eq!(
        replaced.configuration,
        object(json!({"x": true})),
        "peer configuration is replaced, not merged"
    );
    let workspace = store.list_workspaces(&all(), page(1, 10)).await.unwrap();
    assert_eq!(workspace.total, 1, "creating a peer creates its workspace");
}

async fn sessions_merge_configuration_and_ensure_peers(store: &dyn Store) {
    let peers = vec![
        ("alice".to_owned(), config(None, Some(true))),
        ("bob".to_owned(), config(Some(false), None)),
    ];
    let (session, created) = store
        .get_or_create_session(
            "w",
            "s",
            Some(object(json!({"topic": "x"}))),
            Some(object(json!({"a": 1}))),
            peers,
        )
        .await
        .unwrap();
    assert!(created);
    assert!(session.is_active);
    let (session, created) = store
        .get_or_create_session(
            "w",
            "s",
            Some(object(json!({"topic": "y"}))),
            Some(object(json!({"b": 2}))),
            vec![("carol".into(), config(None, None))],
        )
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(session.metadata, object(json!({"topic": "y"})));
    assert_eq!(session.configuration, object(json!({"a": 1, "b": 2})));
    let members = store.list_session_peers("w", "s", page(1, 10)).await.unwrap();
    assert_eq!(
        members.items.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        ["alice", "bob", "carol"]
    );
    assert_eq!(
        store.get_session_peer_config("w", "s", "alice").await.unwrap(),
        config(None, Some(true))
    );
    assert_eq!(
        store.get_session_peer_config("w", "s", "bob").await.unwrap(),
        config(Some(false), None)
    );
}

async fn session_membership_add_set_remove_and_config(store: &dyn Store) {
    store.get_or_create_session("w", "s", None, None, vec![]).await.unwrap();
    store
        .add_session_peers(
            "w",
            "s",
            vec![("a".into(), config(None, None)), ("b".into(), config(None, None))],
        )
        .await
        .unwrap();
    store
        .set_session_peers(
            "w",
            "s",
            vec![("b".into(), config(Some(true), None)), ("c".into(), config(None, None))],
        )
        .await
        .unwrap();
    let members = store.list_session_peers("w", "s", page(1, 10)).await.unwrap();
    let mut ids: Vec<_> = members.items.iter().map(|p| p.id.clone()).collect();
    ids.sort();
    assert_eq!(ids, ["b", "c"], "set makes the exact member set");
    assert_eq!(
        store.get_session_peer_config("w", "s", "b").await.unwrap(),
        config(Some(true), None)
    );
    assert!(
        matches!(
            store.get_session_peer_config("w", "s", "a").await,
            Err(Error::NotFound { .. })
        ),
        "a has left"
    );

    store.remove_session_peers("w", "s", &["b".into()]).await.unwrap();
    assert_eq!(store.list_session_peers("w", "s", page(1, 10)).await.unwrap().total, 1);

    store
        .set_session_peer_config("w", "s", "c", config(None, Some(true)))
        .await
        .unwrap();
    store
        .set_session_peer_config("w", "s", "c", config(Some(false), None))
        .await
        .unwrap();
    assert_eq!(
        store.get_session_peer_config("w", "s", "c").await.unwrap(),
        config(Some(false), Some(true)),
        "unset fields are kept"
    );
    assert!(matches!(
        store.set_session_peer_config("w", "s", "zed", config(None, None)).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.add_session_peers("w", "nope", vec![]).await,
        Err(Error::NotFound { .. })
    ));
}

async fn observers_are_limited_to_ten_per_session(store: &dyn Store) {
    let observers: Vec<_> = (0..10).map(|i| (format!("p{i}"), config(None, Some(true)))).collect();
    store
        .get_or_create_session("w", "s", None, None, observers)
        .await
        .unwrap();
    let error = store
        .add_session_peers("w", "s", vec![("p10".into(), config(None, Some(true)))])
        .await
        .unwrap_err();
    assert!(matches!(error, Error::InvalidArgument { .. }), "{error}");
    assert_eq!(
        store.list_session_peers("w", "s", page(1, 50)).await.unwrap().total,
        10,
        "the refused change wrote nothing"
    );
}

/// 7,000 messages carry 70,000 bound values: more than SQLite (32,766) or
/// Postgres (65,535) take in one statement. Written in chunks, in one
/// transaction, they all land, in order.
async fn a_batch_past_the_bind_limit_is_written_whole(store: &dyn Store) {
    let messages: Vec<NewMessage> = (0..7_000)
        .map(|index| new_message("alice", &format!("line {index}")))
        .collect();
    let created = store.create_messages("w", "s", messages).await.unwrap();
    assert_eq!(created.len(), 7_000);
    assert_eq!(created.last().unwrap().seq_in_session, 7_000);
    let listed = store.list_messages("w", "s", &all(), page(70, 100)).await.unwrap();
    assert_eq!(listed.total, 7_000);
    assert_eq!(listed.items.last().unwrap().content, "line 6999");
    // Cloned a page at a time, every message in its place.
    let clone = store.clone_session("w", "s", None).await.unwrap();
    let copied = store
        .list_messages("w", &clone.id, &all(), page(70, 100))
        .await
        .unwrap();
    assert_eq!(copied.total, 7_000);
    let last = copied.items.last().unwrap();
    assert_eq!((last.content.as_str(), last.seq_in_session), ("line 6999", 7_000));
}

async fn messages_are_ordered_counted_and_paged(store: &dyn Store) {
    let batch: Vec<_> = (1..=25)
        .map(|i| new_message(if i % 2 == 0 { "bob" } else { "alice" }, &format!("message number {i}")))
        .collect();
    let created = store.create_messages("w", "s", batch).await.unwrap();
    assert_eq!(created.len(), 25);
    assert_eq!(
        created.iter().map(|m| m.seq_in_session).collect::<Vec<_>>(),
        (1..=25).collect::<Vec<_>>()
    );
    assert!(created.iter().all(|m| m.id.len() == 21));
    let mut with_time = new_message("carol", "dated");
    with_time.created_at = Some(1_600_000_000_000_000);
    let dated = store.create_messages("w", "s", vec![with_time]).await.unwrap();
    assert_eq!(dated[0].seq_in_session, 26);
    assert_eq!(dated[0].created_at, 1_600_000_000_000_000);
    let members = store.list_session_peers("w", "s", page(1, 10)).await.unwrap();
    assert_eq!(members.total, 3, "authors join the session");

    let first = store.list_messages("w", "s", &all(), page(1, 10)).await.unwrap();
    assert_eq!((first.total, first.pages, first.items.len()), (26, 3, 10));
    assert_eq!(first.items[0].content, "message number 1");
    assert_eq!(first.items[0].token_count, 3);
    let last = store.list_messages("w", "s", &all(), page(3, 10)).await.unwrap();
    assert_eq!(last.items.len(), 6);
    assert_eq!(last.items[5].content, "dated");
    let newest = store
        .list_messages(
            "w",
            "s",
            &all(),
            PageRequest {
                reverse: true,
                ..page(1, 2)
            },
        )
        .await
        .unwrap();
    assert_eq!(
        newest.items.iter().map(|m| m.seq_in_session).collect::<Vec<_>>(),
        [26, 25]
    );
    let beyond = store.list_messages("w", "s", &all(), page(9, 10)).await.unwrap();
    assert!(beyond.items.is_empty());
    assert_eq!(beyond.total, 26);

    let fetched = store.get_message("w", "s", &created[3].id).await.unwrap();
    assert_eq!(fetched, created[3]);
    assert!(matches!(
        store.list_messages("w", "missing", &all(), page(1, 10)).await,
        Err(Error::NotFound { .. })
    ));
}

async fn message_update_and_delete(store: &dyn Store) {
    let created = store
        .create_messages("w", "s", vec![new_message("a", "one"), new_message("a", "two")])
        .await
        .unwrap();
    let updated = store
        .update_message("w", "s", &created[0].id, object(json!({"k": "v"})))
        .await
        .unwrap();
    assert_eq!(updated.metadata, object(json!({"k": "v"})));
    assert_eq!(updated.content, "one");
    store.delete_message("w", "s", &created[1].id).await.unwrap();
    assert!(matches!(
        store.get_message("w", "s", &created[1].id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete_message("w", "s", &created[1].id).await,
        Err(Error::NotFound { .. })
    ));
    let next = store
        .create_messages("w", "s", vec![new_message("a", "three")])
        .await
        .unwrap();
    assert_eq!(next[0].seq_in_session, 3, "sequence numbers are never reused");
    assert!(matches!(
        store.update_message("w", "s", "nope", JsonObject::new()).await,
        Err(Error::NotFound { .. })
    ));
}

async fn session_delete_removes_it_and_its_messages_at_once(store: &dyn Store) {
    let created = store
        .create_messages("w", "s", vec![new_message("a", "secret")])
        .await
        .unwrap();
    store
        .create_messages("w", "other", vec![new_message("a", "kept")])
        .await
        .unwrap();
    store.delete_session("w", "s").await.unwrap();
    let sessions = store.list_sessions("w", &all(), page(1, 10)).await.unwrap();
    assert_eq!(
        sessions.items.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["other"]
    );
    assert!(matches!(
        store.get_message("w", "s", &created[0].id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete_session("w", "s").await,
        Err(Error::NotFound { .. })
    ));
    let again = store
        .create_messages("w", "s", vec![new_message("a", "new")])
        .await
        .unwrap();
    assert_eq!(again[0].seq_in_session, 1, "a re-created session starts afresh");
    assert_eq!(
        store.list_messages("w", "s", &all(), page(1, 10)).await.unwrap().total,
        1
    );
}

async fn workspace_delete_is_refused_while_a_session_is_active(store: &dyn Store) {
    store
        .create_messages("w", "s", vec![new_message("a", "hello")])
        .await
        .unwrap();
    store.create_webhook("w", "https://example.com/hook").await.unwrap();
    let error = store.delete_workspace("w").await.unwrap_err();
    assert!(matches!(error, Error::FailedPrecondition(_)), "{error}");
    store.delete_session("w", "s").await.unwrap();
    store.delete_workspace("w").await.unwrap();
    assert_eq!(store.list_workspaces(&all(), page(1, 10)).await.unwrap().total, 0);
    assert_eq!(
        store
            .list_peers("w", PeerKind::Peer, &all(), page(1, 10))
            .await
            .unwrap()
            .total,
        0,
        "peers go with the workspace"
    );
    assert_eq!(store.list_webhooks("w", page(1, 10)).await.unwrap().total, 0);
    assert!(matches!(store.delete_workspace("w").await, Err(Error::NotFound { .. })));
}

async fn clone_copies_up_to_an_inclusive_cutoff(store: &dyn Store) {
    let peers = vec![("alice".to_owned(), config(None, Some(true)))];
    store
        .get_or_create_session(
            "w",
            "s",
            Some(object(json!({"m": 1}))),
            Some(object(json!({"c": 2}))),
            peers,
        )
        .await
        .unwrap();
    let created = store
        .create_messages(
            "w",
            "s",
            (1..=5).map(|i| new_message("alice", &format!("m{i}"))).collect(),
        )
        .await
        .unwrap();
    let clone = store.clone_session("w", "s", Some(&created[2].id)).await.unwrap();
    assert_ne!(clone.id, "s");
    assert_eq!(clone.metadata, object(json!({"m": 1})));
    assert_eq!(clone.configuration, object(json!({"c": 2})));
    let copied = store.list_messages("w", &clone.id, &all(), page(1, 50)).await.unwrap();
    assert_eq!(
        copied.items.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["m1", "m2", "m3"]
    );
    assert!(
        copied
            .items
            .iter()
            .all(|m| created.iter().all(|original| original.id != m.id)),
        "copies get new ids"
    );
    assert_eq!(
        store.get_session_peer_config("w", &clone.id, "alice").await.unwrap(),
        config(None, Some(true))
    );
    let appended = store
        .create_messages("w", &clone.id, vec![new_message("alice", "m4'")])
        .await
        .unwrap();
    assert_eq!(appended[0].seq_in_session, 4);

    let full = store.clone_session("w", "s", None).await.unwrap();
    assert_eq!(
        store
            .list_messages("w", &full.id, &all(), page(1, 50))
            .await
            .unwrap()
            .total,
        5
    );

    let other = store
        .create_messages("w", "t", vec![new_message("alice", "elsewhere")])
        .await
        .unwrap();
    assert!(
        matches!(
            store.clone_session("w", "s", Some(&other[0].id)).await,
            Err(Error::NotFound { .. })
        ),
        "cutoff must be in the session"
    );
    assert!(matches!(
        store.clone_session("w", "missing", None).await,
        Err(Error::NotFound { .. })
    ));
}

async fn peer_delete_removes_its_messages_and_memberships(store: &dyn Store) {
    store
        .create_messages(
            "w",
            "s",
            vec![
                new_message("alice", "a1"),
                new_message("bob", "b1"),
                new_message("alice", "a2"),
            ],
        )
        .await
        .unwrap();
    store.delete_peer("w", "alice").await.unwrap();
    let left = store.list_messages("w", "s", &all(), page(1, 10)).await.unwrap();
    assert_eq!(
        left.items.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["b1"]
    );
    let members = store.list_session_peers("w", "s", page(1, 10)).await.unwrap();
    assert_eq!(members.items.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["bob"]);
    assert!(matches!(
        store.delete_peer("w", "alice").await,
        Err(Error::NotFound { .. })
    ));
}

async fn filters_follow_the_honcho_grammar(store: &dyn Store) {
    let mut batch = Vec::new();
    let metadata = [
        json!({"kind": "note", "score": 5, "tags": ["x", "y"], "nested": {"level": 2}, "flag": true}),
        json!({"kind": "Note", "score": 7.5, "tags": ["y"], "nested": {"level": 3}, "flag": false}),
        json!({"kind": "chat", "score": "9", "nested": {"level": null}}),
        json!({}),
    ];
    for (index, metadata) in metadata.iter().enumerate() {
        let mut message = new_message(
            if index < 2 { "alice" } else { "bob" },
            &format!("Content {index} about Coffee"),
        );
        message.metadata = object(metadata.clone());
        message.created_at = Some(1_700_000_000_000_000 + i64::try_from(index).unwrap() * 86_400_000_000);
        batch.push(message);
    }
    store.create_messages("w", "s", batch).await.unwrap();

    let cases: Vec<(Value, Vec<usize>)> = vec![
        (json!({}), vec![0, 1, 2, 3]),
        (json!({"peer_id": "alice"}), vec![0, 1]),
        (json!({"peer_id": ["bob"]}), vec![2, 3]),
        (json!({"peer_id": {"in": []}}), vec![]),
        (json!({"peer_id": {"ne": "alice"}}), vec![2, 3]),
        (json!({"metadata": {"kind": "note"}}), vec![0]),
        (json!({"metadata": {"kind": {"icontains": "NOTE"}}}), vec![0, 1]),
        (json!({"metadata": {"kind": {"contains": "ot"}}}), vec![0, 1]),
        (json!({"metadata": {"score": {"gte": 6}}}), vec![1]),
        (json!({"metadata": {"score": {"gt": 4, "lt": 6}}}), vec![0]),
        (json!({"metadata": {"score": "9"}}), vec![2]),
        (json!({"metadata": {"score": 5}}), vec![0]),
        (json!({"metadata": {"tags": ["y"]}}), vec![0, 1]),
        (json!({"metadata": {"tags": ["x", "y"]}}), vec![0]),
        (json!({"metadata": {"tags": {"contains": "x"}}}), vec![0]),
        (json!({"metadata": {"nested": {"level": {"gte": 3}}}}), vec![1]),
        (json!({"metadata": {"nested": {"level": null}}}), vec![2, 3]),
        (json!({"metadata": {"nested": {"level": {"ne": null}}}}), vec![0, 1]),
        (json!({"metadata": {"flag": true}}), vec![0]),
        (json!({"metadata": {"flag": {"ne": true}}}), vec![1, 2, 3]),
        (json!({"metadata": {"kind": {"in": ["chat", "note"]}}}), vec![0, 2]),
        (json!({"content": "x"}), vec![]),
        (json!({"created_at": {"gte": "2023-11-15T22:13:20Z"}}), vec![1, 2, 3]),
        (json!({"created_at": {"lt": "2023-11-15"}}), vec![0]),
        (json!({"token_count": {"gte": 4}}), vec![0, 1, 2, 3]),
        (json!({"token_count": {"lt": 4}}), vec![]),
        (
            json!({"OR": [{"peer_id": "bob"}, {"metadata": {"kind": "note"}}]}),
            vec![0, 2, 3],
        ),
        (
            json!({"AND": [{"peer_id": "alice"}, {"metadata": {"score": {"lt": 6}}}]}),
            vec![0],
        ),
        (json!({"NOT": [{"metadata": {"kind": "note"}}]}), vec![1, 2, 3]),
        (
            json!({"NOT": [{"peer_id": "alice"}], "metadata": {"kind": "chat"}}),
            vec![2],
        ),
        (
            json!({"metadata": {"kind": "*"}, "peer_id": {"in": ["*"]}}),
            vec![0, 1, 2, 3],
        ),
    ];
    for (filters, expected) in cases {
        let parsed = match filter::parse(&filter::MESSAGE, filters.as_object()) {
            Ok(parsed) => parsed,
            Err(error) => {
                assert!(expected.is_empty(), "{filters} failed to parse: {error}");
                continue;
            }
        };
        let page = store
            .list_messages("w", "s", &parsed, page(1, 50))
            .await
            .unwrap_or_else(|error| panic!("{filters}: {error}"));
        let found: Vec<usize> = page
            .items
            .iter()
            .map(|m| usize::try_from(m.seq_in_session - 1).unwrap())
            .collect();
        assert_eq!(found, expected, "filters {filters}");
        assert_eq!(
            page.total,
            i64::try_from(expected.len()).unwrap(),
            "total for {filters}"
        );
    }

    store
        .get_or_create_peer("w", "carol", Some(object(json!({"role": "admin"}))), None)
        .await
        .unwrap();
    let admins = filter::parse(&filter::PEER, json!({"metadata": {"role": "admin"}}).as_object()).unwrap();
    let peers = store
        .list_peers("w", PeerKind::Peer, &admins, page(1, 10))
        .await
        .unwrap();
    assert_eq!(peers.items.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["carol"]);
    let sessions = filter::parse(
        &filter::SESSION,
        json!({"is_active": true, "id": {"contains": "s"}}).as_object(),
    )
    .unwrap();
    assert_eq!(store.list_sessions("w", &sessions, page(1, 10)).await.unwrap().total, 1);
}

async fn workspaces_are_isolated(store: &dyn Store) {
    let in_a = store
        .create_messages("a", "s", vec![new_message("p", "only in a")])
        .await
        .unwrap();
    store
        .create_messages("b", "s", vec![new_message("p", "only in b")])
        .await
        .unwrap();
    let listed = store.list_messages("b", "s", &all(), page(1, 10)).await.unwrap();
    assert_eq!(
        listed.items.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["only in b"]
    );
    assert!(matches!(
        store.get_message("b", "s", &in_a[0].id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.update_message("b", "s", &in_a[0].id, JsonObject::new()).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete_message("b", "s", &in_a[0].id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(
        matches!(
            store.clone_session("b", "s", Some(&in_a[0].id)).await,
            Err(Error::NotFound { .. })
        ),
        "clone never reaches another workspace's messages"
    );
    let workspace_filter = filter::parse(&filter::MESSAGE, json!({"workspace_id": "a"}).as_object()).unwrap();
    assert_eq!(
        store
            .list_messages("b", "s", &workspace_filter, page(1, 10))
            .await
            .unwrap()
            .total,
        0
    );
    store.delete_session("b", "s").await.unwrap();
    assert_eq!(
        store.list_messages("a", "s", &all(), page(1, 10)).await.unwrap().total,
        1,
        "deleting b's session spares a's"
    );
    store.delete_peer("b", "p").await.unwrap();
    assert_eq!(
        store
            .list_peers("a", PeerKind::Peer, &all(), page(1, 10))
            .await
            .unwrap()
            .total,
        1
    );
    assert_eq!(
        store
            .list_peer_sessions("a", "p", &all(), page(1, 10))
            .await
            .unwrap()
            .total,
        1
    );
}

async fn webhooks_are_get_or_create_and_limited(store: &dyn Store) {
    let (first, created) = store.create_webhook("w", "https://example.com/0").await.unwrap();
    assert!(created);
    let (again, created) = store.create_webhook("w", "https://example.com/0").await.unwrap();
    assert!(!created);
    assert_eq!(again, first);
    for i in 1..10 {
        store
            .create_webhook("w", &format!("https://example.com/{i}"))
            .await
            .unwrap();
    }
    let error = store.create_webhook("w", "https://example.com/10").await.unwrap_err();
    assert!(matches!(error, Error::ResourceExhausted(_)), "{error}");
    let listed = store.list_webhooks("w", page(1, 100)).await.unwrap();
    assert_eq!(listed.total, 10);
    store.delete_webhook("w", &first.id).await.unwrap();
    assert!(matches!(
        store.delete_webhook("w", &first.id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete_webhook("other", &listed.items[1].id).await,
        Err(Error::NotFound { .. })
    ));
}

async fn peer_sessions_and_session_peers_are_listed(store: &dyn Store) {
    store
        .create_messages("w", "s1", vec![new_message("alice", "x")])
        .await
        .unwrap();
    store
        .create_messages("w", "s2", vec![new_message("bob", "y")])
        .await
        .unwrap();
    store
        .add_session_peers("w", "s2", vec![("alice".into(), config(None, None))])
        .await
        .unwrap();
    store.remove_session_peers("w", "s2", &["alice".into()]).await.unwrap();
    let sessions = store
        .list_peer_sessions("w", "alice", &all(), page(1, 10))
        .await
        .unwrap();
    assert_eq!(
        sessions.items.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["s1", "s2"],
        "past memberships count"
    );
    assert!(matches!(
        store.list_peer_sessions("w", "nobody", &all(), page(1, 10)).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.list_session_peers("w", "missing", page(1, 10)).await,
        Err(Error::NotFound { .. })
    ));
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
    let in_first = MessageSearch {
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
    // it says how many it left out.
    let gap = store.text_index_gap("w", &search("zanzibar")).await.unwrap();
    assert!(gap > 40_000, "{gap}");
    // Once indexed, nothing is left out.
    let mark = store.text_index_mark().await.unwrap().unwrap();
    while store.index_text(mark, 10_000).await.unwrap() > 0 {}
    assert_eq!(store.text_index_gap("w", &search("zanzibar")).await.unwrap(), 0);
    assert_eq!(found(&*store, "w", &in_first, &all()).await.len(), 10);
    fixture.finish().await;
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
    let vacuums = || async {
        let row = sqlx::query("SELECT vacuum_count AS n FROM pg_stat_user_tables WHERE relname = 'messages'")
            .fetch_one(store.pool())
            .await
            .unwrap();
        sqlx::Row::get::<i64, _>(&row, "n")
    };
    let written = store
        .create_messages("w", "s", vec![new_message("alice", "erase me")])
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    assert_eq!(vacuums().await, 0, "nothing erased, nothing vacuumed");
    store.delete_message("w", "s", &written[0].id).await.unwrap();
    let mut count = 0;
    for _ in 0..150 {
        count = vacuums().await;
        if count > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(count, 1, "vacuumed once after the erasure");
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

/// Another embedding model of the same size (bge-small-en-v1.5 after
/// all-MiniLM-L6-v2, both 384): the database's vector store drops the old
/// model's vectors and queues every message and conclusion again, in one
/// transaction; the same model again changes nothing.
async fn another_model_of_the_same_size_embeds_everything_again(store: Arc<SqlStore>) {
    let (before, after) = ("local/all-MiniLM-L6-v2", "local/bge-small-en-v1.5");
    let vectors = SqlVectorStore::new(store.clone());
    vectors.check_dimensions(384, before).await.unwrap();
    store
        .create_messages(
            "w",
            "s",
            vec![new_message("alice", "Did you hike?"), new_message("bob", "Yes!")],
        )
        .await
        .unwrap();
    store
        .create_conclusions("w", vec![new_conclusion("alice", "bob", "Bob hikes")])
        .await
        .unwrap();
    let pending = |kind| {
        let store = store.clone();
        async move {
            store
                .unsynced(kind, 10, roncho_core::model::now_micros(), 0)
                .await
                .unwrap()
        }
    };
    let sync = |kind| {
        let (store, vectors) = (store.clone(), vectors.clone());
        async move {
            let items = store
                .unsynced(kind, 10, roncho_core::model::now_micros(), 0)
                .await
                .unwrap();
            for item in &items {
                let mut vector = vec![0.0; 384];
                vector[0] = 1.0;
                let record = VectorRecord {
                    id: item.id.clone(),
                    vector,
                    session_id: item.session_id.clone(),
                    peer_id: item.peer_id.clone(),
                    level: item.level.clone(),
                    lexical: None,
                };
                vectors.upsert(&item.namespace, vec![record]).await.unwrap();
            }
            let synced: Vec<(String, i64)> = items.iter().map(|item| (item.id.clone(), item.version)).collect();
            store.mark_synced(kind, &synced).await.unwrap();
        }
    };
    let stored = |namespace: &'static str| {
        let vectors = vectors.clone();
        async move {
            let mut query = vec![0.0; 384];
            query[0] = 1.0;
            vectors
                .query(namespace, &query, 10, &VectorFilter::default(), None)
                .await
                .unwrap()
                .len()
        }
    };
    sync(SyncKind::Message).await;
    sync(SyncKind::Conclusion).await;
    assert_eq!((stored("msg/w").await, stored("doc/w/alice/bob").await), (2, 1));

    vectors.check_dimensions(384, before).await.unwrap();
    assert!(
        pending(SyncKind::Message).await.is_empty(),
        "the same model keeps its vectors"
    );
    assert_eq!(stored("msg/w").await, 2);

    vectors.check_dimensions(384, after).await.unwrap();
    assert_eq!(pending(SyncKind::Message).await.len(), 2, "every message queued again");
    assert_eq!(pending(SyncKind::Conclusion).await.len(), 1, "and every conclusion");
    assert_eq!(
        (stored("msg/w").await, stored("doc/w/alice/bob").await),
        (0, 0),
        "the old model's vectors are gone"
    );
    sync(SyncKind::Message).await;
    vectors.check_dimensions(384, after).await.unwrap();
    assert!(
        pending(SyncKind::Message).await.is_empty(),
        "the new model is recorded: checking it again queues nothing"
    );
    assert_eq!(stored("msg/w").await, 2);
    let error = vectors.check_dimensions(768, after).await.unwrap_err();
    assert!(
        matches!(error, Error::FailedPrecondition(_)),
        "another size is refused: {error}"
    );
}

/// A store written before migration 0019 (sync state and words in the
/// message rows) upgrades with every message's state: synced, pending in
/// order, failed; on Postgres the indexed words move and the rest wait for
/// the text indexer.
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
    roncho_store::migrate(&store).await.expect("the upgrade");
    let counts = store.sync_counts(SyncKind::Message).await.unwrap();
    assert_eq!((counts.synced, counts.pending, counts.failed), (1, 2, 1));
    let due = store
        .unsynced(SyncKind::Message, 10, roncho_core::model::now_micros(), 0)
        .await
        .unwrap();
    let due: Vec<(String, i64)> = due.into_iter().map(|item| (item.id, item.version)).collect();
    assert_eq!(
        due,
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
    for (query, content) in [("kitten", "a kitten"), ("goldfish", "a goldfish")] {
        assert_eq!(found(&store, "w", &search(query), &all()).await, [content], "{query}");
    }
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

/// A message row is written once (ADR 0012): what is left to do for it is
/// in side tables, and a deleted message leaves nothing there (its words in
/// `message_text` least of all), whether erased alone or with its session.
async fn deleted_messages_leave_nothing_in_the_side_tables(store: Arc<SqlStore>) {
    let postgres = store.dialect() == roncho_store::Dialect::Postgres;
    let tables: &[&str] = if postgres {
        &["message_sync", "message_unindexed", "message_text"]
    } else {
        &["message_sync"]
    };
    let rows = |table: &'static str| {
        let store = store.clone();
        async move {
            // `table` is one of the names above.
            let counted = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT (SELECT COUNT(*) FROM {table}) AS total, (SELECT COUNT(*) FROM {table} t \
                 WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = t.message_id)) AS orphans"
            )))
            .fetch_one(store.pool())
            .await
            .unwrap();
            (
                sqlx::Row::get::<i64, _>(&counted, "total"),
                sqlx::Row::get::<i64, _>(&counted, "orphans"),
            )
        }
    };
    let kept = store
        .create_messages(
            "w",
            "s",
            vec![new_message("alice", "my secret is hunter2"), new_message("bob", "kept")],
        )
        .await
        .unwrap();
    store
        .create_messages("w", "t", vec![new_message("alice", "hunter2 again")])
        .await
        .unwrap();
    // Each queued for its vector (and on Postgres its words); one synced,
    // which indexes its words and takes it off both queues.
    for table in tables {
        let expected = if *table == "message_text" { 0 } else { 3 };
        assert_eq!(rows(table).await, (expected, 0), "{table} after the writes");
    }
    store
        .mark_synced(SyncKind::Message, &[(kept[0].id.clone(), 0)])
        .await
        .unwrap();
    if postgres {
        assert_eq!(
            rows("message_text").await,
            (1, 0),
            "the synced message's words are indexed"
        );
        assert_eq!(rows("message_unindexed").await, (2, 0));
    }
    assert_eq!(rows("message_sync").await, (2, 0), "a synced message leaves the queue");
    store.delete_message("w", "s", &kept[0].id).await.unwrap();
    store.delete_session("w", "t").await.unwrap();
    for table in tables {
        let (total, orphans) = rows(table).await;
        assert_eq!(orphans, 0, "{table} keeps nothing of a deleted message");
        assert_eq!(
            total,
            i64::from(*table != "message_text"),
            "{table} holds only the message kept"
        );
    }
    assert_eq!(
        found(&*store, "w", &search("hunter2"), &all()).await,
        Vec::<String>::new(),
        "the deleted messages' words are gone"
    );
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

fn search(query: &str) -> MessageSearch {
    MessageSearch {
        terms: roncho_core::search::terms(query),
        session_ids: None,
        peer_id: None,
        peer_perspective: None,
        limit: 10,
    }
}

async fn found(store: &dyn Store, workspace_id: &str, search: &MessageSearch, filter: &Filter) -> Vec<String> {
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

async fn the_unsynced_tail_is_searched_within_its_bound(store: &dyn Store) {
    let texts = ["an old kitten", "a synced kitten", "a new kitten", "the newest kitten"];
    let created = store
        .create_messages("w", "s", texts.iter().map(|text| new_message("alice", text)).collect())
        .await
        .unwrap();
    mark_vector_synced(store, &created[1].id).await;
    store
        .create_messages("other", "s", vec![new_message("alice", "another workspace's kitten")])
        .await
        .unwrap();
    let tail = |newest: i64| async move {
        let mut found: Vec<String> = store
            .search_unsynced_messages("w", &search("kitten"), &all(), newest)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.content)
            .collect();
        found.sort();
        found
    };
    assert_eq!(
        tail(100).await,
        ["a new kitten", "an old kitten", "the newest kitten"],
        "pending rows of the workspace only"
    );
    // The bound counts the store's newest rows, synced and the other workspace's included.
    assert_eq!(tail(3).await, ["a new kitten", "the newest kitten"]);
    assert_eq!(tail(2).await, ["the newest kitten"]);
}

async fn words_are_searchable_at_once_and_indexed_off_the_write_path(store: &dyn Store) {
    let first = store
        .create_messages("w", "s", vec![new_message("alice", "we saw a zebra at the zoo")])
        .await
        .unwrap();
    let zebra = search("zebra");
    assert_eq!(found(store, "w", &zebra, &all()).await, ["we saw a zebra at the zoo"]);
    let Some(mark) = store.text_index_mark().await.unwrap() else {
        // SQLite indexes words as it writes them.
        assert_eq!(store.text_index_backlog().await.unwrap(), 0);
        return;
    };
    assert_eq!(
        store.text_index_backlog().await.unwrap(),
        1,
        "written without its words indexed"
    );

    // Marking a vector synced indexes the words in the same row update.
    let okapi = store
        .create_messages("w", "s", vec![new_message("bob", "an okapi is shy")])
        .await
        .unwrap();
    mark_vector_synced(store, &okapi[0].id).await;
    assert_eq!(store.text_index_backlog().await.unwrap(), 1);

    // Once the store's newest rows push it out of the tail matched on the
    // fly, an unindexed message waits for the indexer; an indexed one does not.
    let fillers = usize::try_from(roncho_store::TEXT_TAIL).unwrap();
    store
        .create_messages(
            "w",
            "filler",
            (0..fillers)
                .map(|n| new_message("bob", &format!("filler {n}")))
                .collect(),
        )
        .await
        .unwrap();
    assert!(
        found(store, "w", &zebra, &all()).await.is_empty(),
        "below the on-the-fly tail"
    );
    let pending_tail = |search: MessageSearch| async move {
        store
            .search_unsynced_messages("w", &search, &all(), 10_000)
            .await
            .unwrap()
            .len()
    };
    assert_eq!(
        pending_tail(zebra.clone()).await,
        0,
        "pending, but below the on-the-fly tail"
    );
    assert_eq!(found(store, "w", &search("okapi"), &all()).await, ["an okapi is shy"]);
    assert_eq!(store.text_index_backlog().await.unwrap(), 1 + fillers as i64);

    // The indexer takes what is due (up to a mark), oldest first, in batches.
    assert_eq!(store.index_text(mark, 10).await.unwrap(), 1, "rows up to the mark only");
    assert_eq!(found(store, "w", &zebra, &all()).await, ["we saw a zebra at the zoo"]);
    assert_eq!(pending_tail(zebra.clone()).await, 1, "pending and indexed");
    assert_eq!(
        pending_tail(search("filler")).await,
        10,
        "pending, newest, matched on the fly"
    );
    let newest = store.text_index_mark().await.unwrap().unwrap();
    let batch = fillers as i64 / 2 + 1;
    assert_eq!(store.index_text(newest, batch).await.unwrap(), batch as u64);
    assert_eq!(
        store.index_text(newest, batch).await.unwrap(),
        (fillers as i64 - batch) as u64
    );
    assert_eq!(store.index_text(newest, batch).await.unwrap(), 0);
    assert_eq!(store.text_index_backlog().await.unwrap(), 0);
    let filler = found(store, "w", &search("filler"), &all()).await;
    assert_eq!(filler.len(), 10, "{filler:?}");
    assert_eq!(
        store.get_message("w", "s", &first[0].id).await.unwrap().content,
        "we saw a zebra at the zoo"
    );
}

async fn full_text_search_stems_scopes_and_never_errors(store: &dyn Store) {
    store
        .create_messages(
            "w",
            "s1",
            vec![
                new_message("alice", "Alice runs every morning by the river"),
                new_message("bob", "I prefer swimming"),
            ],
        )
        .await
        .unwrap();
    store
        .create_messages(
            "w",
            "s2",
            vec![new_message("bob", "Bob went running in the park yesterday")],
        )
        .await
        .unwrap();
    store
        .create_messages(
            "other",
            "s1",
            vec![new_message("alice", "Running is a secret of another workspace")],
        )
        .await
        .unwrap();

    let mut hits = found(store, "w", &search("Who likes running?"), &all()).await;
    hits.sort();
    assert_eq!(
        hits,
        [
            "Alice runs every morning by the river",
            "Bob went running in the park yesterday"
        ],
        "stemmed, workspace-scoped"
    );
    let swimming = found(store, "w", &search("swim"), &all()).await;
    assert_eq!(swimming, ["I prefer swimming"]);
    let by_speaker = found(store, "w", &search("bob"), &all()).await;
    assert!(by_speaker.contains(&"Bob went running in the park yesterday".to_owned()));

    let in_session = MessageSearch {
        session_ids: Some(vec!["s2".into()]),
        ..search("running")
    };
    assert_eq!(
        found(store, "w", &in_session, &all()).await,
        ["Bob went running in the park yesterday"]
    );
    let by_peer = MessageSearch {
        peer_id: Some("alice".into()),
        ..search("running")
    };
    assert_eq!(
        found(store, "w", &by_peer, &all()).await,
        ["Alice runs every morning by the river"]
    );
    let perspective = MessageSearch {
        peer_perspective: Some("alice".into()),
        ..search("running swimming")
    };
    let mut seen_by_alice = found(store, "w", &perspective, &all()).await;
    seen_by_alice.sort();
    assert_eq!(
        seen_by_alice,
        ["Alice runs every morning by the river", "I prefer swimming"],
        "only sessions alice is in"
    );
    let filtered = filter::parse(&filter::MESSAGE, json!({"peer_id": "bob"}).as_object()).unwrap();
    assert_eq!(
        found(store, "w", &search("running"), &filtered).await,
        ["Bob went running in the park yesterday"]
    );
    let limited = MessageSearch {
        limit: 1,
        ..search("running")
    };
    assert_eq!(found(store, "w", &limited, &all()).await.len(), 1);

    for hostile in [
        r#"'); DROP TABLE messages; --"#,
        r#""unbalanced"#,
        "NEAR(a b) AND OR NOT *",
        "a:b ^c {d} [e]",
        "running*",
    ] {
        store
            .search_messages("w", &search(hostile), &all())
            .await
            .unwrap_or_else(|error| panic!("{hostile}: {error}"));
    }
    assert!(found(store, "w", &search("?!"), &all()).await.is_empty());

    let created = store
        .create_messages("w", "s3", vec![new_message("carol", "ephemeral kayak trip")])
        .await
        .unwrap();
    assert_eq!(found(store, "w", &search("kayak"), &all()).await.len(), 1);
    store.delete_message("w", "s3", &created[0].id).await.unwrap();
    assert!(
        found(store, "w", &search("kayak"), &all()).await.is_empty(),
        "deleted messages leave the index"
    );
    store
        .create_messages("w", "s4", vec![new_message("dave", "canoe")])
        .await
        .unwrap();
    store.delete_session("w", "s4").await.unwrap();
    assert!(
        found(store, "w", &search("canoe"), &all()).await.is_empty(),
        "so do messages of deleted sessions"
    );
}

async fn context_messages_walk_back_across_pages(store: &dyn Store) {
    // Single-token messages, more than several pages of the walk.
    for chunk in (0..700).collect::<Vec<_>>().chunks(100) {
        let batch = chunk.iter().map(|i| new_message("a", &format!("m{i}"))).collect();
        store.create_messages("w", "s", batch).await.unwrap();
    }
    let tokens = store.context_messages("w", "s", 1, 0).await.unwrap()[0].token_count;
    let budget = 500 * tokens;
    let messages = store.context_messages("w", "s", budget, 0).await.unwrap();
    assert_eq!(messages.len(), 500);
    assert_eq!(messages.first().unwrap().content, "m200");
    assert_eq!(messages.last().unwrap().content, "m699");
    assert!(messages.windows(2).all(|w| w[0].seq_in_session < w[1].seq_in_session));
    let from = messages[450].seq_in_session;
    let tail = store.context_messages("w", "s", budget, from).await.unwrap();
    assert_eq!(tail.len(), 50, "nothing before from_seq");
    assert_eq!(tail[0].content, "m650");
}

async fn session_summaries_are_set_replaced_and_bound_context(store: &dyn Store) {
    let batch = (0..4).map(|i| new_message("a", &format!("message {i}"))).collect();
    let created = store.create_messages("w", "s", batch).await.unwrap();
    assert!(store.session_summaries("w", "s").await.unwrap().is_empty());
    let long = store
        .set_session_summary("w", "s", SummaryKind::Long, "long so far", &created[1].id, 40)
        .await
        .unwrap();
    assert_eq!(long.message_seq, created[1].seq_in_session);
    store
        .set_session_summary("w", "s", SummaryKind::Short, "first", &created[0].id, 5)
        .await
        .unwrap();
    store
        .set_session_summary("w", "s", SummaryKind::Short, "short so far", &created[2].id, 7)
        .await
        .unwrap();
    let summaries = store.session_summaries("w", "s").await.unwrap();
    assert_eq!(
        summaries
            .iter()
            .map(|s| (s.kind, s.content.as_str(), s.message_id.as_str(), s.token_count))
            .collect::<Vec<_>>(),
        [
            (SummaryKind::Short, "short so far", created[2].id.as_str(), 7),
            (SummaryKind::Long, "long so far", created[1].id.as_str(), 40),
        ],
        "one per kind, replaced, short first"
    );
    let foreign = store
        .create_messages("w", "other", vec![new_message("a", "elsewhere")])
        .await
        .unwrap();
    assert!(
        matches!(
            store
                .set_session_summary("w", "s", SummaryKind::Short, "x", &foreign[0].id, 1)
                .await,
            Err(Error::NotFound { .. })
        ),
        "the covered message must belong to the session"
    );
    assert!(matches!(
        store.session_summaries("w", "missing").await,
        Err(Error::NotFound { .. })
    ));
    store.delete_session("w", "s").await.unwrap();
    assert!(
        store.session_summaries("w", "s").await.is_err(),
        "summaries go with the session"
    );
}

async fn context_messages_fit_the_token_budget(store: &dyn Store) {
    let batch: Vec<_> = ["one two three", "four five", "six", "seven eight nine ten"]
        .iter()
        .map(|c| new_message("a", c))
        .collect();
    store.create_messages("w", "s", batch).await.unwrap();
    let contents =
        |messages: Vec<roncho_core::model::Message>| messages.into_iter().map(|m| m.content).collect::<Vec<_>>();
    assert_eq!(
        contents(store.context_messages("w", "s", 4, 0).await.unwrap()),
        ["seven eight nine ten"]
    );
    assert_eq!(
        contents(store.context_messages("w", "s", 5, 0).await.unwrap()),
        ["six", "seven eight nine ten"]
    );
    assert_eq!(
        contents(store.context_messages("w", "s", 7, 0).await.unwrap()),
        ["four five", "six", "seven eight nine ten"]
    );
    assert_eq!(
        contents(store.context_messages("w", "s", 100, 0).await.unwrap()).len(),
        4
    );
    assert!(
        store.context_messages("w", "s", 3, 0).await.unwrap().is_empty(),
        "the newest message does not fit"
    );
    assert!(store.context_messages("w", "s", 0, 0).await.unwrap().is_empty());
    assert!(matches!(
        store.context_messages("w", "missing", 10, 0).await,
        Err(Error::NotFound { .. })
    ));
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

async fn conclusions_are_created_listed_and_soft_deleted(store: &dyn Store) {
    store
        .create_messages("w", "s", vec![new_message("alice", "hi"), new_message("bob", "hello")])
        .await
        .unwrap();
    let mut in_session = new_conclusion("alice", "bob", "Bob greets people");
    in_session.session_id = Some("s".into());
    let mut deduction = new_conclusion("alice", "bob", "Bob is polite");
    deduction.level = "deductive".into();
    deduction.premises = vec!["Bob greets people".into()];
    let created = store
        .create_conclusions(
            "w",
            vec![in_session, deduction, new_conclusion("bob", "bob", "I said hello")],
        )
        .await
        .unwrap();
    assert_eq!(created.len(), 3);
    assert_eq!(created[1].premises, ["Bob greets people"]);
    let listed = store.list_conclusions("w", &all(), page(1, 10)).await.unwrap();
    assert_eq!(listed.total, 3);
    let by_observer = filter::parse(
        &filter::CONCLUSION,
        json!({"observer_id": "alice", "level": "deductive"}).as_object(),
    )
    .unwrap();
    let deductions = store.list_conclusions("w", &by_observer, page(1, 10)).await.unwrap();
    assert_eq!(
        deductions.items.iter().map(|c| c.content.as_str()).collect::<Vec<_>>(),
        ["Bob is polite"]
    );
    let by_session = filter::parse(&filter::CONCLUSION, json!({"session_id": "s"}).as_object()).unwrap();
    assert_eq!(
        store
            .list_conclusions("w", &by_session, page(1, 10))
            .await
            .unwrap()
            .items[0]
            .session_id
            .as_deref(),
        Some("s")
    );

    store.delete_conclusion("w", &created[0].id).await.unwrap();
    assert_eq!(
        store.list_conclusions("w", &all(), page(1, 10)).await.unwrap().total,
        2,
        "soft-deleted rows are hidden"
    );
    assert!(matches!(
        store.delete_conclusion("w", &created[0].id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete_conclusion("other", &created[1].id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store
            .create_conclusions("w", vec![new_conclusion("alice", "zed", "x")])
            .await,
        Err(Error::NotFound { .. })
    ));
    let mut bad_session = new_conclusion("alice", "bob", "x");
    bad_session.session_id = Some("nope".into());
    assert!(matches!(
        store.create_conclusions("w", vec![bad_session]).await,
        Err(Error::NotFound { .. })
    ));
}

async fn collection_conclusions_take_recent_and_most_derived(store: &dyn Store) {
    store
        .create_messages("w", "s", vec![new_message("alice", "hi"), new_message("bob", "hello")])
        .await
        .unwrap();
    store
        .create_messages("w", "t", vec![new_message("bob", "elsewhere")])
        .await
        .unwrap();
    for i in 0..5 {
        let mut conclusion = new_conclusion("alice", "bob", &format!("fact {i}"));
        conclusion.session_id = Some(if i % 2 == 0 { "s" } else { "t" }.into());
        store.create_conclusions("w", vec![conclusion]).await.unwrap();
    }
    let mut derived = new_conclusion("alice", "bob", "derived");
    derived.level = "inductive".into();
    derived.session_id = Some("s".into());
    store.create_conclusions("w", vec![derived]).await.unwrap();
    store
        .create_conclusions("w", vec![new_conclusion("bob", "alice", "other direction")])
        .await
        .unwrap();

    let recent = CollectionQuery {
        recent: 3,
        ..CollectionQuery::default()
    };
    let newest = store
        .collection_conclusions("w", "alice", "bob", &recent)
        .await
        .unwrap();
    assert_eq!(newest.len(), 3);
    assert!(
        newest
            .iter()
            .all(|c| c.observer_id == "alice" && c.observed_id == "bob")
    );
    let everything = CollectionQuery {
        recent: 50,
        most_derived: 50,
        ..CollectionQuery::default()
    };
    assert_eq!(
        store
            .collection_conclusions("w", "alice", "bob", &everything)
            .await
            .unwrap()
            .len(),
        6,
        "no duplicates"
    );
    let allow = CollectionQuery {
        allowed_sessions: Some(vec!["s".into()]),
        recent: 50,
        most_derived: 0,
    };
    let mut allowed: Vec<_> = store
        .collection_conclusions("w", "alice", "bob", &allow)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.content)
        .collect();
    allowed.sort();
    assert_eq!(
        allowed,
        ["fact 0", "fact 2", "fact 4"],
        "explicit conclusions of allowed sessions only"
    );
    let none = CollectionQuery {
        allowed_sessions: Some(vec![]),
        recent: 50,
        most_derived: 50,
    };
    assert!(
        store
            .collection_conclusions("w", "alice", "bob", &none)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn peer_cards_are_set_and_read(store: &dyn Store) {
    store
        .set_peer_card("w", "alice", "bob", vec!["ATTRIBUTE: likes espresso".into()])
        .await
        .unwrap();
    assert_eq!(
        store.get_peer_card("w", "alice", "bob").await.unwrap(),
        Some(vec!["ATTRIBUTE: likes espresso".to_owned()])
    );
    assert_eq!(store.get_peer_card("w", "alice", "alice").await.unwrap(), None);
    store.set_peer_card("w", "alice", "bob", vec![]).await.unwrap();
    assert_eq!(store.get_peer_card("w", "alice", "bob").await.unwrap(), Some(vec![]));
    assert!(matches!(
        store.get_peer_card("w", "nobody", "bob").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.get_peer_card("other", "alice", "bob").await,
        Err(Error::NotFound { .. })
    ));
    store.delete_peer("w", "bob").await.unwrap();
    assert_eq!(
        store.get_peer_card("w", "alice", "bob").await.unwrap(),
        None,
        "cards go with their peers"
    );
}

/// The reconciler reads the queue in windows along its key and steps over
/// failed rows: more failed rows at its head than one window holds hide no
/// pending message behind them.
async fn failed_rows_at_the_head_of_the_queue_hide_no_pending_message(store: &dyn Store) {
    let mut ids = Vec::new();
    for batch in 0..7 {
        let messages = (0..100)
            .map(|n| new_message("alice", &format!("message {batch}-{n}")))
            .collect();
        ids.extend(
            store
                .create_messages("w", "s", messages)
                .await
                .unwrap()
                .into_iter()
                .map(|message| message.id),
        );
    }
    store
        .mark_sync_failed(SyncKind::Message, &ids[..650], "embedder down", 1)
        .await
        .unwrap();
    let counts = store.sync_counts(SyncKind::Message).await.unwrap();
    assert_eq!((counts.failed, counts.pending, counts.synced), (650, 50, 0));
    let due = store
        .unsynced(SyncKind::Message, 10, roncho_core::model::now_micros(), 0)
        .await
        .unwrap();
    let due: Vec<String> = due.into_iter().map(|item| item.id).collect();
    assert_eq!(due, ids[650..660].to_vec(), "the oldest pending, past the failed head");
}

async fn sync_state_and_tombstones_track_vectors(store: &dyn Store) {
    let created = store
        .create_messages(
            "w",
            "s",
            vec![
                new_message("alice", "Did you hike on Sunday?"),
                new_message("bob", "Yes, the ridge trail!"),
            ],
        )
        .await
        .unwrap();
    store
        .create_conclusions("w", vec![new_conclusion("alice", "bob", "Bob hikes")])
        .await
        .unwrap();
    let now = roncho_core::model::now_micros();
    let pending = store.unsynced(SyncKind::Message, 10, now, 0).await.unwrap();
    assert_eq!(pending.len(), 2);
    assert_eq!(
        (pending[0].text.as_str(), pending[0].context.as_deref()),
        ("alice: Did you hike on Sunday?", None)
    );
    assert_eq!(
        (pending[1].text.as_str(), pending[1].context.as_deref()),
        ("bob: Yes, the ridge trail!", Some("alice: Did you hike on Sunday?")),
        "a reply carries the turn it answers"
    );
    assert_eq!(pending[1].namespace, "msg/w");
    let conclusions = store.unsynced(SyncKind::Conclusion, 10, now, 0).await.unwrap();
    assert_eq!(
        (conclusions[0].namespace.as_str(), conclusions[0].text.as_str()),
        ("doc/w/alice/bob", "Bob hikes")
    );

    store
        .mark_sync_failed(SyncKind::Message, &[created[0].id.clone()], "embedder down", 2)
        .await
        .unwrap();
    let backoff = 60_000_000;
    let due = store
        .unsynced(SyncKind::Message, 10, roncho_core::model::now_micros(), backoff)
        .await
        .unwrap();
    assert_eq!(
        due.iter().map(|item| item.id.as_str()).collect::<Vec<_>>(),
        [created[1].id.as_str()],
        "backing off"
    );
    let later = store
        .unsynced(
            SyncKind::Message,
            10,
            roncho_core::model::now_micros() + 2 * backoff,
            backoff,
        )
        .await
        .unwrap();
    assert_eq!(later.len(), 2, "due again after the backoff");
    store
        .mark_sync_failed(SyncKind::Message, &[created[0].id.clone()], "embedder down", 2)
        .await
        .unwrap();
    store
        .mark_synced(SyncKind::Message, &[(created[1].id.clone(), 0)])
        .await
        .unwrap();
    let counts = store.sync_counts(SyncKind::Message).await.unwrap();
    assert_eq!((counts.pending, counts.synced, counts.failed), (0, 1, 1));

    assert!(store.tombstones(10).await.unwrap().is_empty());
    store.delete_message("w", "s", &created[1].id).await.unwrap();
    store.delete_peer("w", "alice").await.unwrap();
    let mut tombstones: Vec<(String, String)> = store
        .tombstones(10)
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.namespace, t.id))
        .collect();
    tombstones.sort();
    assert_eq!(tombstones.len(), 3, "two messages and a conclusion: {tombstones:?}");
    assert!(tombstones.iter().any(|(namespace, _)| namespace == "doc/w/alice/bob"));
    let all_tombstones = store.tombstones(10).await.unwrap();
    store.clear_tombstones(&all_tombstones).await.unwrap();
    assert!(store.tombstones(10).await.unwrap().is_empty());

    let kept = store
        .create_messages("w", "s2", vec![new_message("carol", "kept")])
        .await
        .unwrap();
    let found = store
        .messages_by_ids("w", &[kept[0].id.clone(), created[0].id.clone()], &all(), None)
        .await
        .unwrap();
    assert_eq!(
        found.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["kept"],
        "deleted rows never come back"
    );
    assert!(
        store
            .messages_by_ids("w", &[kept[0].id.clone()], &all(), Some("alice"))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn rederived_conclusions_count_up(store: &dyn Store) {
    store.get_or_create_peer("w", "alice", None, None).await.unwrap();
    let made = store
        .create_conclusions(
            "w",
            vec![roncho_core::model::NewConclusion {
                observer_id: "alice".into(),
                observed_id: "alice".into(),
                session_id: None,
                level: "explicit".into(),
                content: "Alice likes tea".into(),
                premises: Vec::new(),
                source_ids: Vec::new(),
                metadata: JsonObject::new(),
            }],
        )
        .await
        .unwrap();
    let ids = vec![made[0].id.clone(), "missing".to_owned()];
    store.increment_times_derived("w", &ids).await.unwrap();
    store.increment_times_derived("w", &ids[..1]).await.unwrap();
    let again = store.conclusions_by_ids("w", &ids[..1]).await.unwrap();
    assert_eq!(again[0].times_derived, 3);
    store.increment_times_derived("other", &ids[..1]).await.unwrap();
    assert_eq!(
        store.conclusions_by_ids("w", &ids[..1]).await.unwrap()[0].times_derived,
        3,
        "scoped to the workspace"
    );
}

async fn a_superseded_conclusion_hands_on_its_count(store: &dyn Store) {
    store.get_or_create_peer("w", "alice", None, None).await.unwrap();
    let old = store
        .create_conclusions("w", vec![new_conclusion("alice", "alice", "Alice likes tea")])
        .await
        .unwrap()
        .remove(0);
    store
        .increment_times_derived("w", std::slice::from_ref(&old.id))
        .await
        .unwrap();
    let before = store.tombstones(100).await.unwrap().len();
    let better = store
        .supersede_conclusion("w", &old.id, new_conclusion("alice", "alice", "Alice likes green tea"))
        .await
        .unwrap();
    assert_eq!(better.times_derived, 3, "the old count (2) plus this derivation");
    let stored = store
        .conclusions_by_ids("w", &[old.id.clone(), better.id.clone()])
        .await
        .unwrap();
    assert_eq!(
        stored
            .iter()
            .map(|c| (c.content.as_str(), c.times_derived))
            .collect::<Vec<_>>(),
        [("Alice likes green tea", 3)],
        "the old one is soft-deleted"
    );
    let tombstones = store.tombstones(100).await.unwrap();
    assert_eq!(tombstones.len(), before + 1, "its vector goes too");
    assert!(tombstones.iter().any(|t| t.id == old.id));
    assert!(matches!(
        store
            .supersede_conclusion("w", &old.id, new_conclusion("alice", "alice", "again"))
            .await,
        Err(Error::NotFound { .. })
    ));
}

async fn message_scans_grep_date_and_window(store: &dyn Store) {
    let dated = |peer: &str, content: &str, day: i64| NewMessage {
        created_at: Some(1_700_000_000_000_000 + day * 86_400_000_000),
        ..new_message(peer, content)
    };
    store
        .create_messages(
            "w",
            "s",
            vec![
                dated("alice", "I adopted a cat named 100%_Mochi", 0),
                dated("bob", "What colour is MOCHI?", 1),
                dated("alice", "Mochi is grey.", 2),
                dated("alice", "I also like dogs.", 3),
            ],
        )
        .await
        .unwrap();
    store
        .create_messages("w", "other", vec![dated("carol", "mochi ice cream", 4)])
        .await
        .unwrap();
    let scan = |scan: MessageScan| async move {
        store
            .scan_messages("w", &MessageScan { limit: 10, ..scan })
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.content)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        scan(MessageScan {
            contains: Some("mochi".into()),
            ..MessageScan::default()
        })
        .await,
        [
            "I adopted a cat named 100%_Mochi",
            "What colour is MOCHI?",
            "Mochi is grey.",
            "mochi ice cream"
        ],
        "case-insensitive, oldest first"
    );
    assert_eq!(
        scan(MessageScan {
            contains: Some("0%_m".into()),
            ..MessageScan::default()
        })
        .await,
        ["I adopted a cat named 100%_Mochi"],
        "% and _ are literal"
    );
    assert_eq!(
        scan(MessageScan {
            contains: Some("mochi".into()),
            peer_perspective: Some("bob".into()),
            newest_first: true,
            ..MessageScan::default()
        })
        .await,
        [
            "Mochi is grey.",
            "What colour is MOCHI?",
            "I adopted a cat named 100%_Mochi"
        ],
        "only sessions bob is in"
    );
    assert_eq!(
        scan(MessageScan {
            after: Some(1_700_000_000_000_000 + 86_400_000_000),
            before: Some(1_700_000_000_000_000 + 4 * 86_400_000_000),
            session_ids: Some(vec!["s".into(), "other".into()]),
            ..MessageScan::default()
        })
        .await,
        ["Mochi is grey.", "I also like dogs."],
        "both bounds exclusive"
    );
    assert_eq!(
        scan(MessageScan {
            session_ids: Some(vec!["s".into()]),
            seq_range: Some((2, 3)),
            ..MessageScan::default()
        })
        .await,
        ["What colour is MOCHI?", "Mochi is grey."]
    );
    assert!(
        scan(MessageScan {
            session_ids: Some(Vec::new()),
            ..MessageScan::default()
        })
        .await
        .is_empty(),
        "an empty allowlist selects nothing"
    );
}

async fn conclusions_citing_walks_source_ids(store: &dyn Store) {
    store.get_or_create_peer("w", "alice", None, None).await.unwrap();
    let facts = store
        .create_conclusions(
            "w",
            vec![
                new_conclusion("alice", "alice", "Alice has a cat"),
                new_conclusion("alice", "alice", "Alice has a dog"),
            ],
        )
        .await
        .unwrap();
    let derived = |content: &str, sources: Vec<String>| NewConclusion {
        level: "deductive".into(),
        premises: vec!["premise".into()],
        source_ids: sources,
        ..new_conclusion("alice", "alice", content)
    };
    let made = store
        .create_conclusions(
            "w",
            vec![
                derived("Alice has pets", vec![facts[0].id.clone(), facts[1].id.clone()]),
                derived("Alice buys cat food", vec![facts[0].id.clone()]),
            ],
        )
        .await
        .unwrap();
    let citing = |id: String| async move {
        store
            .conclusions_citing("w", &id)
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.content)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        citing(facts[0].id.clone()).await,
        ["Alice has pets", "Alice buys cat food"]
    );
    assert_eq!(citing(facts[1].id.clone()).await, ["Alice has pets"]);
    store.delete_conclusion("w", &made[0].id).await.unwrap();
    assert_eq!(
        citing(facts[1].id.clone()).await,
        Vec::<String>::new(),
        "deleted ones are gone"
    );
    assert!(citing("_".into()).await.is_empty(), "a wildcard matches nothing");
}

async fn dreams_are_counted_per_collection(store: &dyn Store) {
    store.get_or_create_peer("w", "alice", None, None).await.unwrap();
    store.get_or_create_peer("w", "bob", None, None).await.unwrap();
    store
        .create_conclusions(
            "w",
            vec![
                new_conclusion("bob", "alice", "Alice rows"),
                new_conclusion("bob", "alice", "Alice sails"),
                NewConclusion {
                    level: "inductive".into(),
                    ..new_conclusion("bob", "alice", "Alice likes water")
                },
            ],
        )
        .await
        .unwrap();
    let fresh = store.dream_state("w", "bob", "alice").await.unwrap();
    assert_eq!(
        (fresh.generation, fresh.last_dream_at, fresh.explicit_count),
        (0, None, 2),
        "never dreamt; explicit observations only"
    );
    store.record_dream("w", "bob", "alice", 2).await.unwrap();
    store.record_dream("w", "bob", "alice", 2).await.unwrap();
    let dreamt = store.dream_state("w", "bob", "alice").await.unwrap();
    assert_eq!((dreamt.generation, dreamt.last_dream_document_count), (2, 2));
    assert!(dreamt.last_dream_at.is_some());
    assert_eq!(
        store.dream_state("w", "alice", "alice").await.unwrap().generation,
        0,
        "per collection"
    );
    assert!(matches!(
        store.record_dream("w", "bob", "nobody", 0).await,
        Err(Error::NotFound { .. })
    ));
}

async fn searches_count_what_an_unsynced_vector_store_cannot_return(store: &dyn Store) {
    let batch = |session: &str| {
        (0..20)
            .map(|i| new_message("alice", &format!("{session} line {i}")))
            .collect()
    };
    let first = store.create_messages("w", "s1", batch("s1")).await.unwrap();
    store.create_messages("w", "s2", batch("s2")).await.unwrap();
    let scoped = |sessions: Option<&[&str]>| MessageSearch {
        session_ids: sessions.map(|ids| ids.iter().map(|id| (*id).to_owned()).collect()),
        ..search("line")
    };
    // The newest 10 are read from the database: the 30 below them are not.
    assert_eq!(store.vector_sync_gap("w", &scoped(None), 10).await.unwrap(), 30);
    assert_eq!(
        store.vector_sync_gap("w", &scoped(Some(&["s1"])), 10).await.unwrap(),
        20
    );
    assert_eq!(store.vector_sync_gap("w", &scoped(Some(&[])), 10).await.unwrap(), 0);
    assert_eq!(
        store.vector_sync_gap("w", &scoped(None), 100).await.unwrap(),
        0,
        "all within the tail"
    );
    let synced: Vec<(String, i64)> = first.iter().take(15).map(|m| (m.id.clone(), 0)).collect();
    store.mark_synced(SyncKind::Message, &synced).await.unwrap();
    assert_eq!(store.vector_sync_gap("w", &scoped(Some(&["s1"])), 10).await.unwrap(), 5);
    assert_eq!(store.vector_sync_gap("other", &scoped(None), 10).await.unwrap(), 0);
}

fn once(key: &str, operation: &'static str, body: &str, window: std::time::Duration) -> roncho_core::idempotency::Once {
    let fingerprint = roncho_core::idempotency::Fingerprint::new().text(body);
    roncho_core::idempotency::Once::new("idempotency_key", key, operation, fingerprint, window).unwrap()
}

async fn idempotent_writes_happen_once_and_twins_wait_for_the_first(store: &dyn Store) {
    let hour = std::time::Duration::from_secs(3600);
    let batch = || vec![new_message("alice", "one"), new_message("bob", "two")];
    let first = store
        .create_messages_once("w", "s", batch(), &once("k1", "CreateMessages", "body", hour))
        .await
        .unwrap();
    let again = store
        .create_messages_once("w", "s", batch(), &once("k1", "CreateMessages", "body", hour))
        .await
        .unwrap();
    assert_eq!(again, first, "a repeat returns the first call's messages");
    let replayed = store
        .replayed_messages("w", "s", &once("k1", "CreateMessages", "body", hour))
        .await
        .unwrap();
    assert_eq!(replayed.as_ref(), Some(&first));
    assert_eq!(
        store
            .replayed_messages("w", "s", &once("unused", "CreateMessages", "body", hour))
            .await
            .unwrap(),
        None
    );
    let other_body = store
        .create_messages_once("w", "s", batch(), &once("k1", "CreateMessages", "other", hour))
        .await;
    assert!(
        matches!(other_body, Err(Error::FailedPrecondition(_))),
        "{other_body:?}"
    );
    assert!(matches!(
        store
            .replayed_messages("w", "s", &once("k1", "CreateMessages", "other", hour))
            .await,
        Err(Error::FailedPrecondition(_))
    ));
    let count = || async { store.list_messages("w", "s", &all(), page(1, 100)).await.unwrap().total };
    assert_eq!(count().await, 2);

    // Eight twins at once: one writes, the others wait for it and replay.
    let key = once("k2", "CreateMessages", "three", hour);
    let twins = (0..8).map(|_| store.create_messages_once("w", "s", vec![new_message("alice", "three")], &key));
    let results: Vec<_> = futures::future::join_all(twins).await;
    let ids: std::collections::BTreeSet<String> = results
        .into_iter()
        .map(|result| result.unwrap()[0].id.clone())
        .collect();
    assert_eq!(ids.len(), 1, "every twin got the same message");
    assert_eq!(count().await, 3);

    // Keys are per workspace and per operation, and expire.
    store
        .create_messages_once("w2", "s", batch(), &once("k1", "CreateMessages", "body", hour))
        .await
        .unwrap();
    let short = std::time::Duration::from_millis(1);
    store
        .create_messages_once("w", "s", batch(), &once("k3", "CreateMessages", "body", short))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    store
        .create_messages_once("w", "s", batch(), &once("k3", "CreateMessages", "body", short))
        .await
        .unwrap();
    assert_eq!(count().await, 7, "an expired key is a new key");
    let conclusion = || vec![new_conclusion("alice", "bob", "Bob counts")];
    let made = store
        .create_conclusions_once("w", conclusion(), &once("k1", "CreateConclusions", "c", hour))
        .await
        .unwrap();
    let remade = store
        .create_conclusions_once("w", conclusion(), &once("k1", "CreateConclusions", "c", hour))
        .await
        .unwrap();
    assert_eq!(remade, made);
    assert_eq!(store.list_conclusions("w", &all(), page(1, 10)).await.unwrap().total, 1);
}

fn derived(observer: &str, observed: &str, content: &str, sources: &[&str]) -> NewConclusion {
    NewConclusion {
        session_id: Some("s".into()),
        source_ids: sources.iter().map(|id| (*id).to_owned()).collect(),
        ..new_conclusion(observer, observed, content)
    }
}

async fn erasing_a_message_reaches_everything_derived_from_it(store: &dyn Store) {
    use roncho_core::model::{ErasureState, SummaryKind};
    let hour = std::time::Duration::from_secs(3600);
    let three = || {
        vec![
            new_message("alice", "my password is hunter2"),
            new_message("bob", "noted, I will remember"),
            new_message("alice", "thanks for the help"),
        ]
    };
    let messages = store
        .create_messages_once("w", "s", three(), &once("k", "CreateMessages", "three", hour))
        .await
        .unwrap();
    let ids: Vec<&str> = messages.iter().map(|message| message.id.as_str()).collect();
    let (secret, reply, thanks) = (ids[0], ids[1], ids[2]);
    // Derived: a fact from the secret alone, one from two messages, a
    // deduction from the first fact, and one from both facts.
    let facts = store
        .create_conclusions(
            "w",
            vec![
                derived("alice", "alice", "alice's password is hunter2", &[secret]),
                derived(
                    "bob",
                    "alice",
                    "alice shares hunter2 and says thanks",
                    &[secret, thanks],
                ),
            ],
        )
        .await
        .unwrap();
    let mut deduction = derived("alice", "alice", "alice reuses hunter2", &[&facts[0].id]);
    deduction.level = "deductive".into();
    deduction.premises = vec![facts[0].content.clone()];
    let mut joint = derived("bob", "alice", "alice trusts bob", &[&facts[0].id, &facts[1].id]);
    joint.level = "deductive".into();
    joint.premises = vec![facts[0].content.clone(), facts[1].content.clone()];
    let deductions = store.create_conclusions("w", vec![deduction, joint]).await.unwrap();
    store
        .set_session_summary("w", "s", SummaryKind::Short, "alice said hunter2", thanks, 5)
        .await
        .unwrap();
    let synced: Vec<(String, i64)> = ids.iter().map(|id| ((*id).to_owned(), 0)).collect();
    store.mark_synced(SyncKind::Message, &synced).await.unwrap();
    store
        .mark_synced(SyncKind::Conclusion, &[(facts[0].id.clone(), 0)])
        .await
        .unwrap();
    assert_eq!(found(store, "w", &search("hunter2"), &all()).await.len(), 1);

    let receipt = store.delete_message("w", "s", secret).await.unwrap();
    assert_eq!(receipt.state, ErasureState::Complete);
    let counts = receipt.counts;
    assert_eq!(
        (
            counts.messages,
            counts.message_vectors,
            counts.conclusions,
            counts.conclusion_vectors
        ),
        (1, 1, 2, 1),
        "the message, its vector, the fact from it and the deduction from that fact, the fact's vector: {counts:?}"
    );
    assert_eq!(
        counts.conclusions_trimmed, 2,
        "the two-source fact and the joint deduction: {counts:?}"
    );
    assert_eq!(
        (
            counts.summaries_rebuilt,
            counts.messages_reembedded,
            counts.idempotency_keys
        ),
        (1, 1, 1),
        "{counts:?}"
    );
    // One removal per erased row that has or may get a vector: the
    // deduction had none yet, but an embedding in flight could add it.
    assert_eq!(receipt.vectors_pending, 3);
    assert_eq!(store.erasure_receipt("w", &receipt.id).await.unwrap(), receipt);

    // Nothing readable holds the text.
    assert_eq!(found(store, "w", &search("hunter2"), &all()).await.len(), 0);
    assert!(matches!(
        store.get_message("w", "s", secret).await,
        Err(Error::NotFound { .. })
    ));
    let left = store.list_conclusions("w", &all(), page(1, 10)).await.unwrap().items;
    let mut contents: Vec<&str> = left.iter().map(|c| c.content.as_str()).collect();
    contents.sort_unstable();
    assert_eq!(contents, ["alice shares hunter2 and says thanks", "alice trusts bob"]);
    let kept = left.iter().find(|c| c.id == facts[1].id).unwrap();
    assert_eq!(kept.source_ids, [thanks]);
    let joint = left.iter().find(|c| c.id == deductions[1].id).unwrap();
    assert_eq!(joint.source_ids, [facts[1].id.clone()]);
    assert_eq!(
        joint.premises,
        [facts[1].content.clone()],
        "the erased premise's text is gone"
    );
    assert!(store.session_summaries("w", "s").await.unwrap().is_empty());
    // The key that wrote it is disarmed, not forgotten: a retry returns
    // what is left and writes nothing (it no longer expires).
    let survivors = |replayed: Vec<roncho_core::model::Message>| replayed.into_iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(
        store
            .replayed_messages("w", "s", &once("k", "CreateMessages", "three", hour))
            .await
            .unwrap()
            .map(survivors),
        Some(vec![reply.to_owned(), thanks.to_owned()]),
    );
    let retried = store
        .create_messages_once("w", "s", three(), &once("k", "CreateMessages", "three", hour))
        .await
        .unwrap();
    assert_eq!(survivors(retried), [reply, thanks], "a retry writes nothing");
    assert_eq!(found(store, "w", &search("hunter2"), &all()).await.len(), 0);
    assert_eq!(
        store
            .replayed_messages("w", "s", &once("k", "CreateMessages", "another body", hour))
            .await
            .unwrap()
            .map(survivors),
        Some(vec![reply.to_owned(), thanks.to_owned()]),
        "no digest of the erased text is left to compare another request with"
    );
    // The reply is embedded again, without the erased turn.
    let pending = store.unsynced(SyncKind::Message, 10, i64::MAX, 0).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, reply);
    assert!(!pending[0].text.contains("hunter2"), "{}", pending[0].text);
    // An embedding computed from the old text is not taken for the new one.
    store
        .mark_synced(SyncKind::Message, &[(reply.to_owned(), 0)])
        .await
        .unwrap();
    assert_eq!(
        store.unsynced(SyncKind::Message, 10, i64::MAX, 0).await.unwrap().len(),
        1
    );
    store
        .mark_synced(SyncKind::Message, &[(reply.to_owned(), pending[0].version)])
        .await
        .unwrap();
    assert!(
        store
            .unsynced(SyncKind::Message, 10, i64::MAX, 0)
            .await
            .unwrap()
            .is_empty()
    );
    // The reconciler removes the vectors; the receipt says when.
    let tombstones = store.tombstones(10).await.unwrap();
    let ours: Vec<&str> = tombstones.iter().map(|t| t.id.as_str()).collect();
    assert!(
        ours.contains(&secret) && ours.contains(&facts[0].id.as_str()),
        "{ours:?}"
    );
    store.clear_tombstones(&tombstones).await.unwrap();
    assert_eq!(
        store.erasure_receipt("w", &receipt.id).await.unwrap().vectors_pending,
        0
    );

    // A derivation that read the message before it was erased stores nothing from it.
    let late = store
        .create_conclusions(
            "w",
            vec![
                derived("alice", "alice", "late: hunter2 again", &[secret]),
                derived("alice", "alice", "late: thanks", &[secret, thanks]),
            ],
        )
        .await
        .unwrap();
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].source_ids, [thanks]);
    assert!(matches!(
        store.erasure_receipt("w", "no-such-receipt").await,
        Err(Error::NotFound { .. })
    ));
}

async fn erasing_a_session_or_peer_runs_in_chunks_with_a_receipt(store: &dyn Store) {
    use roncho_core::model::{ErasureScope, ErasureState};
    for batch in 0..12 {
        let messages = (0..100)
            .map(|i| new_message(["alice", "bob"][i % 2], &format!("batch {batch} line {i}")))
            .collect();
        store.create_messages("w", "big", messages).await.unwrap();
    }
    let first = store.list_messages("w", "big", &all(), page(1, 1)).await.unwrap().items;
    let mut fact = new_conclusion("alice", "bob", "bob counts lines");
    fact.session_id = Some("big".into());
    fact.source_ids = vec![first[0].id.clone()];
    store.create_conclusions("w", vec![fact]).await.unwrap();

    let scope = ErasureScope::Session {
        session_id: "big".into(),
    };
    let receipt = store.begin_erasure("w", &scope).await.unwrap();
    assert_eq!(receipt.state, ErasureState::Running);
    assert_eq!(
        store.begin_erasure("w", &scope).await.unwrap().id,
        receipt.id,
        "one erasure per target"
    );
    let step = store.continue_erasure("w", &receipt.id, 500).await.unwrap();
    assert_eq!((step.state, step.counts.messages), (ErasureState::Running, 500));
    assert_eq!(
        store.list_messages("w", "big", &all(), page(1, 1)).await.unwrap().total,
        700
    );
    let mut done = step;
    while done.state == ErasureState::Running {
        done = store.continue_erasure("w", &receipt.id, 500).await.unwrap();
    }
    assert_eq!(
        (done.counts.messages, done.counts.conclusions, done.counts.sessions),
        (1200, 1, 1),
        "{:?}",
        done.counts
    );
    assert!(done.finished_at.is_some());
    assert!(matches!(
        store.list_messages("w", "big", &all(), page(1, 1)).await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(store.list_conclusions("w", &all(), page(1, 10)).await.unwrap().total, 0);
    assert_eq!(
        store.continue_erasure("w", &receipt.id, 500).await.unwrap(),
        done,
        "done stays done"
    );

    // A peer: its messages everywhere, the turns after them embedded again,
    // conclusions by and about it, its cards.
    store
        .create_messages(
            "w",
            "s1",
            vec![
                new_message("carol", "carol's secret"),
                new_message("dave", "dave replies"),
            ],
        )
        .await
        .unwrap();
    store
        .create_messages("w", "s2", vec![new_message("carol", "carol again")])
        .await
        .unwrap();
    let mut about = new_conclusion("dave", "carol", "carol has a secret");
    about.source_ids = vec![];
    store
        .create_conclusions("w", vec![about, new_conclusion("dave", "dave", "dave replies a lot")])
        .await
        .unwrap();
    store
        .set_peer_card("w", "dave", "carol", vec!["SECRET: yes".into()])
        .await
        .unwrap();
    let dave_reply = store.list_messages("w", "s1", &all(), page(1, 10)).await.unwrap().items[1].clone();
    store
        .mark_synced(SyncKind::Message, &[(dave_reply.id.clone(), 0)])
        .await
        .unwrap();
    let receipt = store.delete_peer("w", "carol").await.unwrap();
    let counts = receipt.counts;
    assert_eq!(
        (
            counts.messages,
            counts.conclusions,
            counts.peer_cards,
            counts.peers,
            counts.messages_reembedded
        ),
        (2, 1, 1, 1, 1),
        "{counts:?}"
    );
    assert_eq!(
        store.list_messages("w", "s1", &all(), page(1, 10)).await.unwrap().total,
        1
    );
    assert_eq!(store.list_conclusions("w", &all(), page(1, 10)).await.unwrap().total, 1);
    assert_eq!(store.get_peer_card("w", "dave", "carol").await.unwrap(), None);
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

async fn scopes_gather_their_sessions_memory_and_let_go_of_it(store: &dyn Store) {
    use roncho_core::model::{BackfillState, ErasureScope, ErasureState};
    let both = vec![
        ("alice".to_owned(), config(None, None)),
        ("bob".to_owned(), config(None, None)),
    ];
    store
        .get_or_create_session("w", "s1", None, None, both.clone())
        .await
        .unwrap();
    store.get_or_create_session("w", "s2", None, None, both).await.unwrap();
    store
        .get_or_create_session("w", "empty", None, None, vec![])
        .await
        .unwrap();
    let s1 = store
        .create_messages(
            "w",
            "s1",
            vec![new_message("alice", "I like tea"), new_message("bob", "I ride bikes")],
        )
        .await
        .unwrap();
    let s2 = store
        .create_messages("w", "s2", vec![new_message("alice", "I live in Oslo")])
        .await
        .unwrap();
    let fact = |observer: &str, observed: &str, content: &str, session: &str, source: &str| NewConclusion {
        session_id: Some(session.into()),
        source_ids: vec![source.to_owned()],
        ..new_conclusion(observer, observed, content)
    };
    store
        .create_conclusions(
            "w",
            vec![
                fact("alice", "alice", "alice likes tea", "s1", &s1[0].id),
                fact("bob", "bob", "bob rides bikes", "s1", &s1[1].id),
                // Another observer's copy: the peer's own collection is the source.
                fact("alice", "bob", "bob rides bikes", "s1", &s1[1].id),
                fact("alice", "alice", "alice lives in Oslo", "s2", &s2[0].id),
            ],
        )
        .await
        .unwrap();

    // A scope is a peer of its own kind, get-or-create.
    let (scope, created) = store
        .get_or_create_scope("w", "team", Some(object(json!({"name": "Team"}))))
        .await
        .unwrap();
    assert!(created);
    assert_eq!(
        (scope.id.as_str(), scope.metadata["name"].as_str()),
        ("team", Some("Team"))
    );
    assert!(!store.get_or_create_scope("w", "team", None).await.unwrap().1);
    assert_eq!(store.get_scope("w", "team").await.unwrap().metadata["name"], "Team");
    assert!(matches!(
        store.get_scope("w", "nope").await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(store.list_scopes("w", page(1, 10)).await.unwrap().total, 1);
    let kinds = [PeerKind::Peer, PeerKind::Scope, PeerKind::All];
    let mut totals = Vec::new();
    for kind in kinds {
        totals.push(store.list_peers("w", kind, &all(), page(1, 10)).await.unwrap().total);
    }
    assert_eq!(totals, [2, 1, 3], "peers, scopes, all");

    // Sessions must exist; adding one queues its backfill.
    assert!(matches!(
        store
            .add_scope_sessions("w", "team", &["s1".into(), "missing".into()])
            .await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.add_scope_sessions("w", "nope", &["s1".into()]).await,
        Err(Error::NotFound { .. })
    ));
    store
        .add_scope_sessions("w", "team", &["s1".into(), "empty".into()])
        .await
        .unwrap();
    let states: Vec<(String, BackfillState)> = store
        .scope_backfills("w", "team")
        .await
        .unwrap()
        .into_iter()
        .map(|backfill| (backfill.session_id, backfill.state))
        .collect();
    assert_eq!(
        states,
        [
            ("empty".into(), BackfillState::Completed),
            ("s1".into(), BackfillState::Pending)
        ],
        "a session without messages has nothing to copy"
    );
    assert_eq!(
        store.scope_session_ids("w", &["team".into()]).await.unwrap(),
        ["empty", "s1"]
    );
    let listed = store.list_scope_sessions("w", "team", page(1, 10)).await.unwrap();
    assert_eq!(
        listed.items.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["s1", "empty"],
        "oldest member first"
    );
    // The scope is no participant: not listed among the session's peers.
    let members = store.list_session_peers("w", "s1", page(1, 10)).await.unwrap();
    assert_eq!(
        members.items.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        ["alice", "bob"]
    );

    // The backfill copies each peer's own observations of the session, a chunk at a time.
    let step = store.continue_scope_backfill("w", "team", "s1", 1).await.unwrap();
    assert_eq!((step.state, step.docs_copied), (BackfillState::Pending, 1));
    let mut step = step;
    while step.state == BackfillState::Pending {
        step = store.continue_scope_backfill("w", "team", "s1", 1).await.unwrap();
    }
    assert_eq!((step.state, step.docs_copied), (BackfillState::Completed, 2));
    assert_eq!(collection(store, "scope.team", "alice").await, ["alice likes tea"]);
    assert_eq!(collection(store, "scope.team", "bob").await, ["bob rides bikes"]);

    // Added again, it catches up without doubling anything.
    store.add_scope_sessions("w", "team", &["s1".into()]).await.unwrap();
    let again = store.continue_scope_backfill("w", "team", "s1", 100).await.unwrap();
    assert_eq!((again.state, again.docs_copied), (BackfillState::Completed, 2));
    assert_eq!(collection(store, "scope.team", "alice").await, ["alice likes tea"]);

    // Replacing a session's peers, or cloning it, leaves scopes alone.
    store
        .set_session_peers("w", "empty", vec![("alice".into(), config(None, None))])
        .await
        .unwrap();
    let clone = store.clone_session("w", "s1", None).await.unwrap();
    assert_eq!(
        store.scope_session_ids("w", &["team".into()]).await.unwrap(),
        ["empty", "s1"]
    );
    assert!(
        !store
            .scope_session_ids("w", &["team".into()])
            .await
            .unwrap()
            .contains(&clone.id)
    );

    // A session leaving the scope takes what the scope observed there with it.
    let leave = ErasureScope::ScopeSession {
        scope_id: "team".into(),
        session_id: "s1".into(),
    };
    let receipt = roncho_core::store::erase(store, "w", leave.clone()).await.unwrap();
    assert_eq!((receipt.state, receipt.counts.conclusions), (ErasureState::Complete, 2));
    assert_eq!(receipt.counts.messages, 0, "nothing said is erased");
    assert!(collection(store, "scope.team", "alice").await.is_empty());
    assert_eq!(
        collection(store, "alice", "alice").await,
        ["alice likes tea", "alice lives in Oslo"]
    );
    assert_eq!(store.scope_session_ids("w", &["team".into()]).await.unwrap(), ["empty"]);
    assert_eq!(store.scope_backfills("w", "team").await.unwrap().len(), 1);
    assert!(matches!(
        store.begin_erasure("w", &leave).await,
        Err(Error::NotFound { .. })
    ));

    // A search limited to sessions finds only theirs; to none, nothing.
    let mut in_s2 = search("Oslo tea");
    in_s2.session_ids = Some(vec!["s2".into()]);
    assert_eq!(found(store, "w", &in_s2, &all()).await, ["I live in Oslo"]);
    in_s2.session_ids = Some(vec![]);
    assert!(found(store, "w", &in_s2, &all()).await.is_empty());
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
        other => panic!("no matching value for filter key `{other}`: add one"),
    };
    json!({ key: value })
}

fn parsed(schema: &filter::Schema, filters: Value) -> Filter {
    filter::parse(schema, Some(&object(filters))).expect("a valid filter")
}

/// Every key of every schema reads its own column in each list and search
/// that takes it (the row is found by its own values, metadata included);
/// a key no schema knows is refused before any store sees it.
async fn every_filter_key_reads_its_column(store: &dyn Store) {
    store
        .get_or_create_workspace("w", object(json!({"tag": "x"})), JsonObject::new())
        .await
        .unwrap();
    store
        .get_or_create_peer("w", "alice", Some(object(json!({"tag": "x"}))), None)
        .await
        .unwrap();
    store
        .get_or_create_session("w", "s", Some(object(json!({"tag": "x"}))), None, vec![])
        .await
        .unwrap();
    let mut message = new_message("alice", "the kitten from the shelter");
    message.metadata = object(json!({"tag": "x"}));
    let message = store.create_messages("w", "s", vec![message]).await.unwrap().remove(0);
    let mut conclusion = new_conclusion("alice", "alice", "adopted a kitten");
    conclusion.session_id = Some("s".into());
    conclusion.metadata = object(json!({"tag": "x"}));
    let conclusion = store.create_conclusions("w", vec![conclusion]).await.unwrap().remove(0);
    let search = MessageSearch {
        terms: vec!["kitten".into()],
        session_ids: None,
        peer_id: None,
        peer_perspective: None,
        limit: 10,
    };
    let schemas: [(&filter::Schema, &str); 5] = [
        (&filter::WORKSPACE, "w"),
        (&filter::PEER, "alice"),
        (&filter::SESSION, "s"),
        (&filter::MESSAGE, &message.id),
        (&filter::CONCLUSION, &conclusion.id),
    ];
    for (schema, id) in schemas {
        let keys = schema.fields.iter().map(|field| field.key).chain(["metadata"]);
        for key in keys {
            let filters = if key == "metadata" {
                json!({"metadata": {"tag": "x"}})
            } else {
                matching_filter(key, id)
            };
            let filter = parsed(schema, filters.clone());
            let found: Vec<String> = match schema.resource {
                "workspace" => ids!(store.list_workspaces(&filter, page(1, 100)).await),
                "peer" => ids!(store.list_peers("w", PeerKind::Peer, &filter, page(1, 100)).await),
                "session" => {
                    let by_peer = ids!(store.list_peer_sessions("w", "alice", &filter, page(1, 100)).await);
                    assert_eq!(by_peer, ["s"], "{filters}: the peer's sessions");
                    ids!(store.list_sessions("w", &filter, page(1, 100)).await)
                }
                "message" => {
                    let searched = store.search_messages("w", &search, &filter).await;
                    let searched: Vec<String> = searched.expect("search").into_iter().map(|m| m.id).collect();
                    assert_eq!(searched, [id], "{filters}: search");
                    let by_id = store.messages_by_ids("w", &[id.to_owned()], &filter, None).await;
                    assert_eq!(by_id.expect("by ids").len(), 1, "{filters}: by ids");
                    ids!(store.list_messages("w", "s", &filter, page(1, 100)).await)
                }
                "conclusion" => ids!(store.list_conclusions("w", &filter, page(1, 100)).await),
                other => panic!("no list for {other}"),
            };
            assert!(
                found.iter().any(|found| found == id),
                "{filters} on {}: {found:?}",
                schema.resource
            );
        }
        let unknown = filter::parse(schema, Some(&object(json!({"no_such_key": "x"}))));
        assert!(
            matches!(unknown, Err(Error::InvalidArgument { .. })),
            "{}: {unknown:?}",
            schema.resource
        );
    }
}
