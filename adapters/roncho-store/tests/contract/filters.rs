//! Honcho's filter grammar on every list and search.

use super::*;

store_contract_suite!(
    filters_follow_the_honcho_grammar,
    every_filter_key_reads_its_column,
    conclusions_are_found_by_what_they_were_derived_from,
;
);

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
        // On a column `contains` is Honcho's ILIKE: any case.
        (json!({"peer_id": {"contains": "LIC"}}), vec![0, 1]),
        (json!({"peer_id": {"contains": "lic"}}), vec![0, 1]),
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
    conclusion.source_ids = vec![message.id.clone()];
    let conclusion = store.create_conclusions("w", vec![conclusion]).await.unwrap().remove(0);
    let search = MessageQuery {
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
            } else if key == "source_ids" || key == "source_message_ids" {
                json!({ key: {"contains": message.id} })
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

/// `{"source_ids": {"contains": id}}` (Honcho SDK's `derived()`): the
/// conclusions that cite the id, every id of a list, in this workspace only.
async fn conclusions_are_found_by_what_they_were_derived_from(store: &dyn Store) {
    let mut messages = Vec::new();
    for workspace in ["w", "other"] {
        let said = store
            .create_messages(
                workspace,
                "s",
                vec![new_message("alice", "first"), new_message("alice", "second")],
            )
            .await
            .unwrap();
        messages.push(said);
    }
    let (m1, m2) = (messages[0][0].id.clone(), messages[0][1].id.clone());
    let derived = |content: &str, sources: &[&str]| {
        let mut conclusion = new_conclusion("alice", "alice", content);
        conclusion.source_ids = sources.iter().map(|id| (*id).to_owned()).collect();
        conclusion
    };
    let made = store
        .create_conclusions(
            "w",
            vec![
                derived("from one", &[&m1]),
                derived("from both", &[&m1, &m2]),
                derived("from none", &[]),
            ],
        )
        .await
        .unwrap();
    assert_eq!(made.len(), 3);
    // A neighbour's workspace cites its own message of the same place.
    store
        .create_conclusions("other", vec![derived("neighbour", &[&messages[1][0].id])])
        .await
        .unwrap();
    let contents = |filters: Value| async move {
        let filter = parsed(&filter::CONCLUSION, filters);
        let mut found: Vec<String> = store
            .list_conclusions("w", &filter, page(1, 100))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|conclusion| conclusion.content)
            .collect();
        found.sort();
        found
    };
    assert_eq!(
        contents(json!({"source_ids": {"contains": m1}})).await,
        ["from both", "from one"]
    );
    assert_eq!(contents(json!({"source_ids": {"contains": m2}})).await, ["from both"]);
    assert_eq!(
        contents(json!({"source_ids": {"contains": [m1, m2]}})).await,
        ["from both"]
    );
    assert!(contents(json!({"source_ids": {"contains": "m3"}})).await.is_empty());
    // roncho's `in`: derived from any of the ids.
    assert_eq!(contents(json!({"source_ids": {"in": [m2, "m3"]}})).await, ["from both"]);
    assert_eq!(
        contents(json!({"source_ids": {"in": [m1, m2]}})).await,
        ["from both", "from one"]
    );
    assert!(contents(json!({"source_ids": {"in": []}})).await.is_empty());
    assert!(
        contents(json!({"source_ids": {"in": [messages[1][0].id]}}))
            .await
            .is_empty(),
        "a neighbour's sources stay in its workspace, whatever the operator"
    );
    assert!(
        contents(json!({"source_ids": {"contains": messages[1][0].id}}))
            .await
            .is_empty(),
        "a neighbour's sources stay in its workspace"
    );
    // A conclusion is a source too (deductions cite conclusions).
    let by_conclusion = store
        .create_conclusions("w", vec![derived("deduced", &[&made[0].id])])
        .await
        .unwrap();
    assert_eq!(
        contents(json!({"source_ids": {"contains": made[0].id}, "observer_id": "alice"})).await,
        ["deduced"]
    );
    assert_eq!(by_conclusion.len(), 1);
    for refused in [
        json!({"source_ids": "m1"}),
        json!({"source_ids": ["m1"]}),
        json!({"source_ids": {"in": "m1"}}),
        json!({"source_ids": {"in": [1]}}),
        json!({"source_ids": {"contains": 1}}),
        json!({"source_ids": {"contains": "m1", "ne": "m2"}}),
    ] {
        let parsed = filter::parse(&filter::CONCLUSION, refused.as_object());
        assert!(
            matches!(parsed, Err(Error::InvalidArgument { .. })),
            "{refused}: {parsed:?}"
        );
    }
}
