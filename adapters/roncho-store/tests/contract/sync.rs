//! [`SyncLedger`]: vector sync state, tombstones, re-embedding.

use super::*;

store_contract_suite!(
    sync_state_and_tombstones_track_vectors,
    failed_rows_at_the_head_of_the_queue_hide_no_pending_message,
;
    another_model_of_the_same_size_embeds_everything_again,
);

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
                    passages: Vec::new(),
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
