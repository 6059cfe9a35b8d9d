//! The embedded store's full-text index (ADR 0008): messages ranked by their
//! words in memory, found by the next search after they are written whether
//! or not their vectors are synced, scoped by workspace, session and peer,
//! gone once deleted, and rebuilt from the rows after a restart.

use std::sync::Arc;

use roncho_core::lexical;
use roncho_core::model::{JsonObject, NewMessage};
use roncho_core::store::{Erasure, Messages};
use roncho_core::vector::{VectorFilter, VectorRecord, VectorStore, messages_namespace};
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

/// Ids the index ranks for `query` under `filter`, best first.
async fn ranked(vectors: &SqlVectorStore, query: &str, filter: &VectorFilter) -> Vec<String> {
    let hits = vectors
        .hybrid_query(&messages_namespace("w"), None, &lexical::query(query), 10, filter)
        .await
        .expect("hybrid query")
        .expect("the embedded store ranks full text");
    assert!(hits.dense.is_empty(), "no dense list without a query vector");
    hits.lexical.into_iter().map(|hit| hit.id).collect()
}

#[tokio::test]
async fn messages_are_ranked_by_their_words_from_the_moment_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let (store, vectors) = open(dir.path()).await;
    assert!(vectors.ranks_full_text().await.unwrap());
    assert!(vectors.indexes_text_at_once());
    assert!(
        vectors.ranks_in_process(),
        "search ranks the words while it embeds the query"
    );
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
        ranked(&vectors, "kitten shelter", &all).await,
        [first[0].id.clone(), first[1].id.clone()],
        "both words first, one word next, other workspaces never"
    );

    // Written after the index was built: found by the next search, no vector synced.
    let later = store
        .create_messages("w", "s2", vec![said("bob", "a kitten waited at the shelter door")])
        .await
        .unwrap();
    let found = ranked(&vectors, "kitten shelter", &all).await;
    assert_eq!(found.len(), 3);
    assert!(found.contains(&later[0].id));
    let in_s2 = VectorFilter {
        session_ids: Some(vec!["s2".into()]),
        ..VectorFilter::default()
    };
    assert_eq!(ranked(&vectors, "kitten", &in_s2).await, [later[0].id.clone()]);
    let by_bob = VectorFilter {
        peer_id: Some("bob".into()),
        ..VectorFilter::default()
    };
    let mut bobs = ranked(&vectors, "kitten", &by_bob).await;
    bobs.sort();
    let mut expected = vec![first[1].id.clone(), later[0].id.clone()];
    expected.sort();
    assert_eq!(bobs, expected);

    // A vector synced for one message: the dense list comes with the same request.
    vectors
        .upsert(
            &messages_namespace("w"),
            vec![VectorRecord {
                id: first[2].id.clone(),
                vector: vec![1.0, 0.0],
                session_id: Some("s1".into()),
                peer_id: Some("alice".into()),
                level: None,
                lexical: None,
                passages: Vec::new(),
            }],
        )
        .await
        .unwrap();
    let hits = vectors
        .hybrid_query(
            &messages_namespace("w"),
            Some(&[1.0, 0.0]),
            &lexical::query("tax"),
            10,
            &all,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(hits.dense[0].id, first[2].id);
    assert_eq!(hits.lexical[0].id, first[2].id);

    // Deletes reach the index: a deleted row's tombstone (or an erasure)
    // deletes through the vector store, as the reconciler does.
    store.delete_message("w", "s1", &first[0].id).await.unwrap();
    vectors
        .delete(&messages_namespace("w"), &[first[0].id.clone()])
        .await
        .unwrap();
    assert!(!ranked(&vectors, "kitten shelter", &all).await.contains(&first[0].id));
    store.close().await;

    // Nothing is persisted: after a restart the index is rebuilt from the rows.
    let (store, vectors) = open(dir.path()).await;
    let rebuilt = ranked(&vectors, "kitten shelter", &all).await;
    assert_eq!(
        rebuilt,
        found.into_iter().filter(|id| *id != first[0].id).collect::<Vec<_>>()
    );
    store.close().await;
}
