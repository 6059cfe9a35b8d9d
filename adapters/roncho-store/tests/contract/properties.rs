//! Property tests against the real databases: any filter a client can send
//! (generated, metadata JSON paths included) and any search text either
//! runs on SQLite and on Postgres or is refused as `INVALID_ARGUMENT` —
//! never a database error, never a panic. Values are bound, never spliced
//! into SQL; this checks that nothing a client writes reaches the SQL text
//! or breaks a full-text query's syntax.

use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use roncho_core::arbitrary::{filter as grammar, object};
use roncho_core::filter::{self, Filter};
use roncho_core::model::{MessageQuery, NewConclusion, NewMessage, PageRequest, SessionPeerConfig};
use roncho_core::store::{Memory, Messages, TextSearch, Workspaces};
use roncho_core::{Error, Result, search};
use roncho_store::SqlStore;
use serde_json::json;

/// A store holding a little of everything, with metadata under keys a
/// JSON path must quote.
async fn seeded(store: &SqlStore) {
    let metadata = json!({"topic": "hiking", "a.b": {"it's": [1, "two", null]}, "%_\\": true, "n": 3.5});
    let metadata = metadata.as_object().cloned();
    store
        .get_or_create_session(
            "w",
            "s",
            metadata.clone(),
            None,
            vec![("bob".to_owned(), SessionPeerConfig::default())],
        )
        .await
        .unwrap();
    let messages = [
        "Alice's trip to the \"Alps\"",
        "bob: 100% (maybe) -- yes!",
        "naïve café 東京",
    ]
    .iter()
    .map(|content| NewMessage {
        peer_id: "alice".into(),
        content: (*content).into(),
        metadata: metadata.clone().unwrap_or_default(),
        configuration: Default::default(),
        created_at: None,
        token_count: 5,
    })
    .collect();
    store.create_messages("w", "s", messages).await.unwrap();
    store
        .create_conclusions(
            "w",
            vec![NewConclusion {
                observer_id: "bob".into(),
                observed_id: "alice".into(),
                session_id: Some("s".into()),
                level: "explicit".into(),
                content: "alice likes mountains".into(),
                premises: Vec::new(),
                source_ids: Vec::new(),
                metadata: Default::default(),
            }],
        )
        .await
        .unwrap();
}

/// Runs `filters` on every list that takes them, and `query` as a search;
/// returns how many of them reached the database.
async fn run(store: &SqlStore, filters: &serde_json::Map<String, serde_json::Value>, query: &str) -> Result<usize> {
    let page = PageRequest::from_wire(1, 10, false)?;
    let parsed = |schema| filter::parse(schema, Some(filters));
    let outcomes = [
        match parsed(&filter::WORKSPACE) {
            Ok(filter) => store.list_workspaces(&filter, page).await.map(drop),
            Err(error) => Err(error),
        },
        match parsed(&filter::PEER) {
            Ok(filter) => store
                .list_peers("w", roncho_core::model::PeerKind::Peer, &filter, page)
                .await
                .map(drop),
            Err(error) => Err(error),
        },
        match parsed(&filter::SESSION) {
            Ok(filter) => store.list_sessions("w", &filter, page).await.map(drop),
            Err(error) => Err(error),
        },
        match parsed(&filter::MESSAGE) {
            Ok(filter) => store.list_messages("w", "s", &filter, page).await.map(drop),
            Err(error) => Err(error),
        },
        match parsed(&filter::CONCLUSION) {
            Ok(filter) => store.list_conclusions("w", &filter, page).await.map(drop),
            Err(error) => Err(error),
        },
    ];
    let mut ran = 0;
    for outcome in outcomes {
        match outcome {
            Ok(()) => ran += 1,
            Err(Error::InvalidArgument { .. }) => {}
            Err(error) => return Err(error),
        }
    }
    let terms = search::terms(query);
    if !terms.is_empty() {
        let search = MessageQuery {
            terms,
            session_ids: None,
            peer_id: None,
            peer_perspective: None,
            limit: 10,
        };
        store.search_messages("w", &search, &Filter::All).await?;
        ran += 1;
    }
    Ok(ran)
}

fn check(store: Arc<SqlStore>, cases: u32) {
    let runtime = tokio::runtime::Handle::current();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let ran = std::sync::atomic::AtomicUsize::new(0);
    let outcome = runner.run(
        &(prop_oneof![3 => grammar(), 1 => object()], "\\PC{0,120}"),
        |(filters, query)| {
            let result = tokio::task::block_in_place(|| runtime.block_on(run(&store, &filters, &query)));
            prop_assert!(result.is_ok(), "{result:?} for filters {filters:?} and query {query:?}");
            ran.fetch_add(result.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
            Ok(())
        },
    );
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    // Not a vacuous pass: most cases reach the database.
    let ran = ran.into_inner();
    eprintln!("{ran} queries ran over {cases} cases");
    assert!(ran >= 2 * cases as usize, "only {ran} queries ran over {cases} cases");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_filter_and_query_runs_or_is_refused_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    seeded(&store).await;
    check(store.clone(), 2_000);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_filter_and_query_runs_or_is_refused_on_postgres() {
    let Some(database) = roncho_store::testing::FreshDatabase::create().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    seeded(&store).await;
    check(store.clone(), 1_000);
    store.close().await;
    database.drop_database().await;
}
