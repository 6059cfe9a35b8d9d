//! [`Memory`]: conclusions and peer cards.

use super::*;

store_contract_suite!(
    conclusions_are_created_listed_and_soft_deleted,
    rederived_conclusions_count_up,
    a_superseded_conclusion_hands_on_its_count,
    conclusions_citing_walks_source_ids,
    a_clients_conclusions_name_only_messages_there_as_the_write_commits,
    collection_conclusions_take_recent_and_most_derived,
    peer_cards_are_set_and_read,
;
);

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

async fn a_clients_conclusions_name_only_messages_there_as_the_write_commits(store: &dyn Store) {
    let messages = store
        .create_messages(
            "w",
            "s",
            vec![new_message("alice", "I keep bees"), new_message("alice", "hi")],
        )
        .await
        .unwrap();
    store.get_or_create_peer("w", "bob", None, None).await.unwrap();
    let fact = store
        .create_conclusions("w", vec![new_conclusion("alice", "alice", "Alice says hi")])
        .await
        .unwrap();
    let named = |sources: Vec<String>| NewConclusion {
        source_ids: sources,
        ..new_conclusion("bob", "alice", "Alice keeps bees")
    };
    let hour = std::time::Duration::from_secs(3600);
    // A message of another workspace, none at all, or a conclusion: refused
    // whole, nothing stored.
    store
        .create_messages("other", "s", vec![new_message("alice", "elsewhere")])
        .await
        .unwrap();
    let elsewhere = store
        .list_messages("other", "s", &all(), page(1, 1))
        .await
        .unwrap()
        .items[0]
        .id
        .clone();
    for missing in [elsewhere, "no-such-message".to_owned(), fact[0].id.clone()] {
        let refused = store
            .write_conclusions(
                "w",
                vec![named(vec![messages[0].id.clone()]), named(vec![missing.clone()])],
                None,
            )
            .await;
        assert!(
            matches!(&refused, Err(Error::NotFound { resource: "message", id }) if *id == missing),
            "{missing}: {refused:?}"
        );
    }
    assert_eq!(store.list_conclusions("w", &all(), page(1, 10)).await.unwrap().total, 1);
    // Messages that are there: stored with them as sources, once per key.
    let key = once("k", "CreateConclusions", "bees", hour);
    let first = store
        .write_conclusions("w", vec![named(vec![messages[1].id.clone()])], Some(&key))
        .await
        .unwrap();
    assert_eq!(first[0].source_ids, [messages[1].id.clone()]);
    assert_eq!(first[0].source_message_ids(), [messages[1].id.clone()]);
    // Once its source is erased, a repeat replays what is left (nothing),
    // never NOT_FOUND for a call that did store.
    store.delete_message("w", "s", &messages[1].id).await.unwrap();
    let replayed = store
        .write_conclusions("w", vec![named(vec![messages[1].id.clone()])], Some(&key))
        .await
        .unwrap();
    assert!(replayed.is_empty(), "{replayed:?}");
    // Derivations stay lenient: an erased source is dropped, not refused.
    let derived = store
        .create_conclusions("w", vec![named(vec![messages[0].id.clone(), messages[1].id.clone()])])
        .await
        .unwrap();
    assert_eq!(derived[0].source_ids, [messages[0].id.clone()]);
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
