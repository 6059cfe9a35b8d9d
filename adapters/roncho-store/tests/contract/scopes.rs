//! [`Scopes`]: sessions gathered, memory copied and let go.

use super::*;

store_contract_suite!(
    scopes_gather_their_sessions_memory_and_let_go_of_it,
;
);

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
