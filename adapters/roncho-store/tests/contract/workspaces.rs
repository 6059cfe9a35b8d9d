//! [`Workspaces`]: workspaces, peers, sessions and their members.

use super::*;

store_contract_suite!(
    workspaces_are_get_or_create_and_update_merges_configuration,
    peers_replace_metadata_and_configuration_only_when_given,
    sessions_merge_configuration_and_ensure_peers,
    session_membership_add_set_remove_and_config,
    observers_are_limited_to_ten_per_session,
    clone_copies_up_to_an_inclusive_cutoff,
    workspaces_are_isolated,
    peer_sessions_and_session_peers_are_listed,
;
);

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
