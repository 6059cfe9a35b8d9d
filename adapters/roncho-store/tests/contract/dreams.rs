//! [`DreamLedger`]: dream counts per collection.

use super::*;

store_contract_suite!(
    dreams_are_counted_per_collection,
;
);

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
