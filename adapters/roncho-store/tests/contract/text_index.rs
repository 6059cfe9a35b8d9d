//! The embedded store's full-text index (ADR 0008): messages ranked by their
//! words in memory, found by the next search after they are written whether
//! or not their vectors are synced, scoped by workspace, session and peer,
//! gone once deleted, and rebuilt from the rows after a restart.

use std::sync::Arc;

use roncho_core::filter::Filter;
use roncho_core::lexical;
use roncho_core::model::{JsonObject, NewMessage};
use roncho_core::store::{Erasure, Messages};
use roncho_core::vector::{
    Found, GivenQuery, SearchPlan, VectorFilter, VectorRecord, VectorStore, Words, messages_namespace,
};
use roncho_store::{SqlStore, SqlVectorStore, StoreOptions};

fn said(peer_id: &str, content: &str) -> NewMessage {
    NewMessage {
        peer_id: peer_id.to_owned(),
        content: content.to_owned(),
        metadata: JsonObject::new(),
        configuration: JsonObject::new(),
        created_at: None,
        token_count: 1,
    }
}

/// A message's vector, as the reconciler syncs it (no words: the index reads the rows).
fn vector_of(id: String, vector: Vec<f32>, session: &str, peer: &str) -> VectorRecord {
    VectorRecord {
        id,
        vector,
        session_id: Some(session.into()),
        peer_id: Some(peer.into()),
        level: None,
        lexical: None,
        passages: Vec::new(),
    }
}

async fn open(dir: &std::path::Path) -> (Arc<SqlStore>, SqlVectorStore) {
    let store = Arc::new(
        roncho_store::connect(&StoreOptions::embedded(dir))
            .await
            .expect("connect"),
    );
    roncho_store::migrate(&store).await.expect("migrate");
    let vectors = SqlVectorStore::new(store.clone());
    (store, vectors)
}

/// What the store finds for `query` in workspace `w` under `scope`, with
/// `meaning` as the query's embedding (none: it cannot be embedded).
async fn planned(
    store: &SqlStore,
    vectors: &SqlVectorStore,
    query: &str,
    scope: &VectorFilter,
    meaning: Option<Vec<f32>>,
) -> Found {
    let search = crate::search(query);
    let parts = GivenQuery {
        meaning,
        names: Vec::new(),
    };
    let plan = SearchPlan {
        workspace_id: "w",
        words: lexical::query(query),
        top_k: 10,
        scope: scope.clone(),
        search: &search,
        filter: &Filter::All,
        database: store,
        query: &parts,
    };
    vectors.search(&plan).await.expect("search")
}

/// Ids the index ranks for `query` under `scope`, best first.
async fn ranked(store: &SqlStore, vectors: &SqlVectorStore, query: &str, scope: &VectorFilter) -> Vec<String> {
    let found = planned(store, vectors, query, scope, None).await;
    assert!(found.meaning.is_err(), "no list by meaning without a query vector");
    match found.words {
        Words::Ranked(hits) => hits.into_iter().map(|hit| hit.id).collect(),
        other => panic!("the embedded store ranks every message's words itself: {other:?}"),
    }
}

#[tokio::test]
async fn messages_are_ranked_by_their_words_from_the_moment_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let (store, vectors) = open(dir.path()).await;
    assert!(vectors.ranks_words(), "FTS5 rests beside it");
    let first = store
        .create_messages(
            "w",
            "s1",
            vec![
                said("alice", "we adopted a kitten from the shelter"),
                said("bob", "the kitten sleeps all day"),
                said("alice", "the tax forms are due"),
            ],
        )
        .await
        .unwrap();
    store
        .create_messages(
            "other",
            "s1",
            vec![said("alice", "another workspace's kitten at a shelter")],
        )
        .await
        .unwrap();
    let all = VectorFilter::default();
    assert_eq!(
        ranked(&store, &vectors, "kitten shelter", &all).await,
        [first[0].id.clone(), first[1].id.clone()],
        "both words first, one word next, other workspaces never"
    );

    // Written after the index was built: found by the next search, no vector synced.
    let later = store
        .create_messages("w", "s2", vec![said("bob", "a kitten waited at the shelter door")])
        .await
        .unwrap();
    let found = ranked(&store, &vectors, "kitten shelter", &all).await;
    assert_eq!(found.len(), 3);
    assert!(found.contains(&later[0].id));
    let in_s2 = VectorFilter {
        session_ids: Some(vec!["s2".into()]),
        ..VectorFilter::default()
    };
    assert_eq!(ranked(&store, &vectors, "kitten", &in_s2).await, [later[0].id.clone()]);
    let by_bob = VectorFilter {
        peer_id: Some("bob".into()),
        ..VectorFilter::default()
    };
    let mut bobs = ranked(&store, &vectors, "kitten", &by_bob).await;
    bobs.sort();
    let mut expected = vec![first[1].id.clone(), later[0].id.clone()];
    expected.sort();
    assert_eq!(bobs, expected);

    // A vector synced for one message: the dense list comes with the same request.
    vectors
        .upsert(
            &messages_namespace("w"),
            vec![vector_of(first[2].id.clone(), vec![1.0, 0.0], "s1", "alice")],
        )
        .await
        .unwrap();
    let taxes = planned(&store, &vectors, "tax", &all, Some(vec![1.0, 0.0])).await;
    let Words::Ranked(words) = taxes.words else {
        panic!("ranked by the store")
    };
    assert_eq!(taxes.meaning.unwrap()[0].id, first[2].id);
    assert_eq!(words[0].id, first[2].id);

    // Deletes reach the index: a deleted row's tombstone (or an erasure)
    // deletes through the vector store, as the reconciler does.
    store.delete_message("w", "s1", &first[0].id).await.unwrap();
    vectors
        .delete(&messages_namespace("w"), &[first[0].id.clone()])
        .await
        .unwrap();
    assert!(
        !ranked(&store, &vectors, "kitten shelter", &all)
            .await
            .contains(&first[0].id)
    );
    store.close().await;

    // Nothing is persisted: after a restart the index is rebuilt from the rows.
    let (store, vectors) = open(dir.path()).await;
    let rebuilt = ranked(&store, &vectors, "kitten shelter", &all).await;
    assert_eq!(
        rebuilt,
        found.into_iter().filter(|id| *id != first[0].id).collect::<Vec<_>>()
    );
    store.close().await;
}

/// On Postgres the store ranks no words: the database's full-text search
/// answers beside the nearest vectors, and a query that cannot be embedded
/// still finds its words.
#[tokio::test]
async fn postgres_leaves_the_words_to_the_database_beside_the_nearest_vectors() {
    let Some(fixture) = crate::postgres_fixture().await else {
        return;
    };
    let store = fixture.store.clone();
    let vectors = SqlVectorStore::new(store.clone());
    assert!(!vectors.ranks_words());
    let written = store
        .create_messages(
            "w",
            "s1",
            vec![said("alice", "the kitten naps"), said("bob", "the tax forms are due")],
        )
        .await
        .unwrap();
    vectors
        .upsert(
            &messages_namespace("w"),
            vec![vector_of(written[1].id.clone(), vec![1.0, 0.0], "s1", "bob")],
        )
        .await
        .unwrap();
    let all = VectorFilter::default();
    for meaning in [Some(vec![1.0, 0.0]), None] {
        let found = planned(&store, &vectors, "kitten", &all, meaning.clone()).await;
        match found.words {
            Words::Database { messages, gap } => {
                assert_eq!(messages.len(), 1);
                assert_eq!(messages[0].id, written[0].id);
                assert_eq!(gap, 0);
            }
            other => panic!("the database ranks the words on Postgres: {other:?}"),
        }
        match (meaning, found.meaning) {
            (Some(_), Ok(hits)) => assert_eq!(hits[0].id, written[1].id),
            (None, Err(_)) => {}
            (meaning, found) => panic!("{meaning:?}: {found:?}"),
        }
    }
    fixture.finish().await;
}
