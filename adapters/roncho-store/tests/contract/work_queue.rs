//! The `WorkQueue` contract suite against the SQL queue on SQLite (the
//! embedded mode's queue) and on Postgres.

use roncho_core::store::{Messages, Workspaces};
use std::sync::Arc;

use roncho_core::queue::contract::Check;
use roncho_store::testing::FreshDatabase;
use roncho_store::{SqlStore, SqlWorkQueue, StoreOptions};

async fn open(url: String) -> (Arc<SqlStore>, SqlWorkQueue) {
    let store = Arc::new(roncho_store::connect(&StoreOptions::new(url)).await.expect("connect"));
    roncho_store::migrate(&store).await.expect("migrate");
    let queue = SqlWorkQueue::new(store.clone());
    (store, queue)
}

async fn on_sqlite(check: Check) {
    let dir = tempfile::tempdir().unwrap();
    let (store, queue) = open(StoreOptions::embedded(dir.path()).database_url).await;
    check(&queue).await;
    store.close().await;
}

async fn on_postgres(check: Check) {
    let Some(database) = FreshDatabase::create().await else {
        return;
    };
    let (store, queue) = open(database.url.clone()).await;
    check(&queue).await;
    store.close().await;
    database.drop_database().await;
}

roncho_core::work_queue_contract!(sqlite, super::on_sqlite);
roncho_core::work_queue_contract!(postgres, super::on_postgres);

/// Writing messages enqueues their work in the same transaction, by
/// Honcho's observer rules: `carol` (observe_me=false) creates no
/// representation work, `bob` observes others, and the 20th message of the
/// session brings a short summary.
async fn messages_enqueue_their_work(url: String) {
    use roncho_core::model::{JsonObject, NewMessage, SessionPeerConfig};
    use roncho_core::queue::{StatusFilter, WorkQueue};

    let (store, queue) = open(url).await;
    let shy = serde_json::json!({"observe_me": false}).as_object().cloned();
    store.get_or_create_peer("w", "carol", None, shy).await.unwrap();
    let watcher = SessionPeerConfig {
        observe_me: None,
        observe_others: Some(true),
    };
    store
        .get_or_create_session("w", "s", None, None, vec![("bob".into(), watcher)])
        .await
        .unwrap();
    let messages: Vec<NewMessage> = (0..20)
        .map(|i| NewMessage {
            peer_id: ["alice", "bob", "carol", "alice"][i % 4].to_owned(),
            content: format!("message {i}"),
            metadata: JsonObject::new(),
            configuration: JsonObject::new(),
            created_at: None,
            token_count: 2,
        })
        .collect();
    store.create_messages("w", "s", messages).await.unwrap();
    let status = queue
        .status(&StatusFilter {
            workspace_id: "w".into(),
            ..StatusFilter::default()
        })
        .await
        .unwrap();
    // alice 10 + bob 5 messages to represent (carol is not observed) + 1
    // summary: counted per message, in two representation tasks.
    assert_eq!(status.counts.pending, 16);
    // Filtered by observer: the representation work each peer derives from
    // (alice her own, bob alice's and his own; nobody observes carol), the
    // summary none's; by sender, what each peer's messages brought.
    let pending = |observer: Option<&str>, sender: Option<&str>| {
        let filter = StatusFilter {
            workspace_id: "w".into(),
            observer_id: observer.map(str::to_owned),
            sender_id: sender.map(str::to_owned),
            ..StatusFilter::default()
        };
        let queue = &queue;
        async move { queue.status(&filter).await.unwrap().counts.pending }
    };
    for (observer, expected) in [
        ("alice", 10),
        ("bob", 15),
        ("carol", 0),
        ("dave", 0),
        ("\"alice\"", 0),
        ("%", 0),
        ("", 0),
    ] {
        assert_eq!(pending(Some(observer), None).await, expected, "observer {observer:?}");
    }
    assert_eq!(pending(Some("bob"), Some("alice")).await, 10);
    assert_eq!(pending(Some("alice"), Some("bob")).await, 0);
    assert_eq!(
        pending(None, Some("alice")).await,
        11,
        "alice's ten and the summary her 20th brought"
    );
    let claim = queue
        .claim("w1", &["representation"], 100, std::time::Duration::from_secs(30))
        .await
        .unwrap()
        .expect("alice's unit");
    assert_eq!(claim.work_unit_key, "representation:w:s:alice");
    // One task carries the batch's ten messages of alice, in order.
    assert_eq!(claim.tasks.len(), 1);
    let ids = roncho_core::derivation::task_message_ids(&claim.tasks[0].payload);
    assert_eq!(ids.len(), 10);
    let listed = store
        .list_messages("w", "s", &roncho_core::filter::Filter::All, Default::default())
        .await
        .unwrap();
    let alices: Vec<&str> = listed
        .items
        .iter()
        .filter(|message| message.peer_id == "alice")
        .map(|message| message.id.as_str())
        .collect();
    assert_eq!(ids, alices);
    assert_eq!(claim.tasks[0].payload["observers"], serde_json::json!(["alice", "bob"]));
    let summary = queue
        .claim("w2", &["summary"], 10, std::time::Duration::from_secs(30))
        .await
        .unwrap()
        .expect("the summary unit");
    assert_eq!(summary.tasks[0].payload["seq_in_session"], 20);
    assert_eq!(summary.tasks[0].payload["summaries"], serde_json::json!(["short"]));
    store.close().await;
}

#[tokio::test]
async fn messages_enqueue_their_work_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    messages_enqueue_their_work(StoreOptions::embedded(dir.path()).database_url).await;
}

#[tokio::test]
async fn messages_enqueue_their_work_on_postgres() {
    let Some(database) = FreshDatabase::create().await else {
        return;
    };
    messages_enqueue_their_work(database.url.clone()).await;
    database.drop_database().await;
}
