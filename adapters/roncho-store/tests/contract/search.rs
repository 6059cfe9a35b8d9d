//! [`TextSearch`]: full-text search and what an index behind leaves out.

use std::collections::HashMap;

use roncho_core::lexical::{self, TermCounts};

use super::*;

store_contract_suite!(
    full_text_search_stems_scopes_and_never_errors,
    the_unsynced_tail_is_searched_within_its_bound,
    words_are_searchable_at_once_and_indexed_off_the_write_path,
    searches_count_what_an_unsynced_vector_store_cannot_return,
    terms_are_counted_once_per_workspace_and_leave_with_their_messages,
    a_neighbours_better_matches_do_not_hide_a_workspaces_own,
;
);

/// Postgres ranks the store's best indexed matches before reading any row
/// (`TopMatches::Best`), and reads every match when too few of those are
/// in scope: another workspace's better matches must not hide this one's.
async fn a_neighbours_better_matches_do_not_hide_a_workspaces_own(store: &dyn Store) {
    for start in (0..400).step_by(100) {
        let batch = (start..start + 100)
            .map(|i| new_message("bob", &format!("kiwi kiwi kiwi kiwi {i}")))
            .collect();
        store.create_messages("busy", "s", batch).await.unwrap();
    }
    let alice = (0..3)
        .map(|i| new_message("alice", &format!("one kiwi for alice {i}")))
        .collect();
    store.create_messages("busy", "t", alice).await.unwrap();
    let alice_in_s = (0..2)
        .map(|i| new_message("alice", &format!("one kiwi via alice s{i}")))
        .collect();
    store.create_messages("busy", "s", alice_in_s).await.unwrap();
    let own = (0..12)
        .map(|i| new_message("alice", &format!("one kiwi in message {i}")))
        .collect();
    store.create_messages("w", "s", own).await.unwrap();
    if let Some(mark) = store.text_index_mark().await.unwrap() {
        while store.index_text(mark, 10_000).await.unwrap() > 0 {}
    }
    // Equal ranks within each workspace: the newest first.
    let expected = |from: usize, text: &dyn Fn(usize) -> String| (from - 9..=from).rev().map(text).collect::<Vec<_>>();
    let kiwi = search("kiwi");
    assert_eq!(
        found(store, "w", &kiwi, &all()).await,
        expected(11, &|i| format!("one kiwi in message {i}")),
        "below the neighbour's best, still this workspace's best ten"
    );
    assert_eq!(
        found(store, "busy", &kiwi, &all()).await,
        expected(399, &|i| format!("kiwi kiwi kiwi kiwi {i}"))
    );
    let in_session = MessageQuery {
        session_ids: Some(vec!["s".to_owned()]),
        ..search("kiwi")
    };
    assert_eq!(
        found(store, "w", &in_session, &all()).await,
        expected(11, &|i| format!("one kiwi in message {i}"))
    );
    // A scope inside the workspace that holds fewer than the limit, none
    // of them among the store's best.
    let by_alice = MessageQuery {
        peer_id: Some("alice".to_owned()),
        ..search("kiwi")
    };
    assert_eq!(
        found(store, "busy", &by_alice, &all()).await,
        [
            "one kiwi via alice s1",
            "one kiwi via alice s0",
            "one kiwi for alice 2",
            "one kiwi for alice 1",
            "one kiwi for alice 0"
        ]
    );
    // The same inside a session: its best are all another peer's.
    let in_s = |peer_id: Option<&str>| MessageQuery {
        session_ids: Some(vec!["s".to_owned()]),
        peer_id: peer_id.map(str::to_owned),
        ..search("kiwi")
    };
    assert_eq!(
        found(store, "busy", &in_s(Some("alice")), &all()).await,
        ["one kiwi via alice s1", "one kiwi via alice s0"]
    );
    assert_eq!(
        found(store, "busy", &in_s(None), &all()).await,
        expected(399, &|i| format!("kiwi kiwi kiwi kiwi {i}"))
    );
}

async fn full_text_search_stems_scopes_and_never_errors(store: &dyn Store) {
    store
        .create_messages(
            "w",
            "s1",
            vec![
                new_message("alice", "Alice runs every morning by the river"),
                new_message("bob", "I prefer swimming"),
            ],
        )
        .await
        .unwrap();
    store
        .create_messages(
            "w",
            "s2",
            vec![new_message("bob", "Bob went running in the park yesterday")],
        )
        .await
        .unwrap();
    store
        .create_messages(
            "other",
            "s1",
            vec![new_message("alice", "Running is a secret of another workspace")],
        )
        .await
        .unwrap();

    let mut hits = found(store, "w", &search("Who likes running?"), &all()).await;
    hits.sort();
    assert_eq!(
        hits,
        [
            "Alice runs every morning by the river",
            "Bob went running in the park yesterday"
        ],
        "stemmed, workspace-scoped"
    );
    let swimming = found(store, "w", &search("swim"), &all()).await;
    assert_eq!(swimming, ["I prefer swimming"]);
    let by_speaker = found(store, "w", &search("bob"), &all()).await;
    assert!(by_speaker.contains(&"Bob went running in the park yesterday".to_owned()));

    let in_session = MessageQuery {
        session_ids: Some(vec!["s2".into()]),
        ..search("running")
    };
    assert_eq!(
        found(store, "w", &in_session, &all()).await,
        ["Bob went running in the park yesterday"]
    );
    let by_peer = MessageQuery {
        peer_id: Some("alice".into()),
        ..search("running")
    };
    assert_eq!(
        found(store, "w", &by_peer, &all()).await,
        ["Alice runs every morning by the river"]
    );
    let perspective = MessageQuery {
        peer_perspective: Some("alice".into()),
        ..search("running swimming")
    };
    let mut seen_by_alice = found(store, "w", &perspective, &all()).await;
    seen_by_alice.sort();
    assert_eq!(
        seen_by_alice,
        ["Alice runs every morning by the river", "I prefer swimming"],
        "only sessions alice is in"
    );
    let filtered = filter::parse(&filter::MESSAGE, json!({"peer_id": "bob"}).as_object()).unwrap();
    assert_eq!(
        found(store, "w", &search("running"), &filtered).await,
        ["Bob went running in the park yesterday"]
    );
    let limited = MessageQuery {
        limit: 1,
        ..search("running")
    };
    assert_eq!(found(store, "w", &limited, &all()).await.len(), 1);

    for hostile in [
        r#"'); DROP TABLE messages; --"#,
        r#""unbalanced"#,
        "NEAR(a b) AND OR NOT *",
        "a:b ^c {d} [e]",
        "running*",
    ] {
        store
            .search_messages("w", &search(hostile), &all())
            .await
            .unwrap_or_else(|error| panic!("{hostile}: {error}"));
    }
    assert!(found(store, "w", &search("?!"), &all()).await.is_empty());

    let created = store
        .create_messages("w", "s3", vec![new_message("carol", "ephemeral kayak trip")])
        .await
        .unwrap();
    assert_eq!(found(store, "w", &search("kayak"), &all()).await.len(), 1);
    store.delete_message("w", "s3", &created[0].id).await.unwrap();
    assert!(
        found(store, "w", &search("kayak"), &all()).await.is_empty(),
        "deleted messages leave the index"
    );
    store
        .create_messages("w", "s4", vec![new_message("dave", "canoe")])
        .await
        .unwrap();
    store.delete_session("w", "s4").await.unwrap();
    assert!(
        found(store, "w", &search("canoe"), &all()).await.is_empty(),
        "so do messages of deleted sessions"
    );
}

async fn the_unsynced_tail_is_searched_within_its_bound(store: &dyn Store) {
    let texts = ["an old kitten", "a synced kitten", "a new kitten", "the newest kitten"];
    let created = store
        .create_messages("w", "s", texts.iter().map(|text| new_message("alice", text)).collect())
        .await
        .unwrap();
    mark_vector_synced(store, &created[1].id).await;
    store
        .create_messages("other", "s", vec![new_message("alice", "another workspace's kitten")])
        .await
        .unwrap();
    let tail = |newest: i64| async move {
        let mut found: Vec<String> = store
            .search_unsynced_messages("w", &search("kitten"), &all(), newest)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.content)
            .collect();
        found.sort();
        found
    };
    assert_eq!(
        tail(100).await,
        ["a new kitten", "an old kitten", "the newest kitten"],
        "pending rows of the workspace only"
    );
    // The bound counts the store's newest rows, synced and the other workspace's included.
    assert_eq!(tail(3).await, ["a new kitten", "the newest kitten"]);
    assert_eq!(tail(2).await, ["the newest kitten"]);
}

async fn words_are_searchable_at_once_and_indexed_off_the_write_path(store: &dyn Store) {
    let first = store
        .create_messages("w", "s", vec![new_message("alice", "we saw a zebra at the zoo")])
        .await
        .unwrap();
    let zebra = search("zebra");
    assert_eq!(found(store, "w", &zebra, &all()).await, ["we saw a zebra at the zoo"]);
    let Some(mark) = store.text_index_mark().await.unwrap() else {
        // SQLite indexes words as it writes them.
        assert_eq!(store.text_index_backlog().await.unwrap(), 0);
        return;
    };
    assert_eq!(
        store.text_index_backlog().await.unwrap(),
        1,
        "written without its words indexed"
    );

    // Marking a vector synced indexes the words in the same row update.
    let okapi = store
        .create_messages("w", "s", vec![new_message("bob", "an okapi is shy")])
        .await
        .unwrap();
    mark_vector_synced(store, &okapi[0].id).await;
    assert_eq!(store.text_index_backlog().await.unwrap(), 1);

    // Once the store's newest rows push it out of the tail matched on the
    // fly, an unindexed message waits for the indexer; an indexed one does not.
    let fillers = usize::try_from(roncho_store::TEXT_TAIL).unwrap();
    store
        .create_messages(
            "w",
            "filler",
            (0..fillers)
                .map(|n| new_message("bob", &format!("filler {n}")))
                .collect(),
        )
        .await
        .unwrap();
    assert!(
        found(store, "w", &zebra, &all()).await.is_empty(),
        "below the on-the-fly tail"
    );
    let pending_tail = |search: MessageQuery| async move {
        store
            .search_unsynced_messages("w", &search, &all(), 10_000)
            .await
            .unwrap()
            .len()
    };
    assert_eq!(
        pending_tail(zebra.clone()).await,
        0,
        "pending, but below the on-the-fly tail"
    );
    assert_eq!(found(store, "w", &search("okapi"), &all()).await, ["an okapi is shy"]);
    assert_eq!(store.text_index_backlog().await.unwrap(), 1 + fillers as i64);

    // The indexer takes what is due (up to a mark), oldest first, in batches.
    assert_eq!(store.index_text(mark, 10).await.unwrap(), 1, "rows up to the mark only");
    assert_eq!(found(store, "w", &zebra, &all()).await, ["we saw a zebra at the zoo"]);
    assert_eq!(pending_tail(zebra.clone()).await, 1, "pending and indexed");
    assert_eq!(
        pending_tail(search("filler")).await,
        10,
        "pending, newest, matched on the fly"
    );
    let newest = store.text_index_mark().await.unwrap().unwrap();
    let batch = fillers as i64 / 2 + 1;
    assert_eq!(store.index_text(newest, batch).await.unwrap(), batch as u64);
    assert_eq!(
        store.index_text(newest, batch).await.unwrap(),
        (fillers as i64 - batch) as u64
    );
    assert_eq!(store.index_text(newest, batch).await.unwrap(), 0);
    assert_eq!(store.text_index_backlog().await.unwrap(), 0);
    let filler = found(store, "w", &search("filler"), &all()).await;
    assert_eq!(filler.len(), 10, "{filler:?}");
    assert_eq!(
        store.get_message("w", "s", &first[0].id).await.unwrap().content,
        "we saw a zebra at the zoo"
    );
}

async fn searches_count_what_an_unsynced_vector_store_cannot_return(store: &dyn Store) {
    let batch = |session: &str| {
        (0..20)
            .map(|i| new_message("alice", &format!("{session} line {i}")))
            .collect()
    };
    let first = store.create_messages("w", "s1", batch("s1")).await.unwrap();
    store.create_messages("w", "s2", batch("s2")).await.unwrap();
    let scoped = |sessions: Option<&[&str]>| MessageQuery {
        session_ids: sessions.map(|ids| ids.iter().map(|id| (*id).to_owned()).collect()),
        ..search("line")
    };
    // The newest 10 are read from the database: the 30 below them are not.
    assert_eq!(store.vector_sync_gap("w", &scoped(None), 10).await.unwrap(), 30);
    assert_eq!(
        store.vector_sync_gap("w", &scoped(Some(&["s1"])), 10).await.unwrap(),
        20
    );
    assert_eq!(store.vector_sync_gap("w", &scoped(Some(&[])), 10).await.unwrap(), 0);
    assert_eq!(
        store.vector_sync_gap("w", &scoped(None), 100).await.unwrap(),
        0,
        "all within the tail"
    );
    let synced: Vec<(String, i64)> = first.iter().take(15).map(|m| (m.id.clone(), 0)).collect();
    store.mark_synced(SyncKind::Message, &synced).await.unwrap();
    assert_eq!(store.vector_sync_gap("w", &scoped(Some(&["s1"])), 10).await.unwrap(), 5);
    assert_eq!(store.vector_sync_gap("other", &scoped(None), 10).await.unwrap(), 0);
}

async fn terms_are_counted_once_per_workspace_and_leave_with_their_messages(store: &dyn Store) {
    let texts = [
        ("alice", "a kitten from the shelter"),
        ("bob", "the red sofa"),
        ("alice", "another kitten"),
    ];
    let created = store
        .create_messages(
            "w",
            "s1",
            texts.iter().map(|(peer, text)| new_message(peer, text)).collect(),
        )
        .await
        .unwrap();
    let later = store
        .create_messages("w", "s2", vec![new_message("bob", "a kitten on the sofa")])
        .await
        .unwrap();
    let neighbour = store
        .create_messages("other", "s1", vec![new_message("carol", "kitten kitten kitten")])
        .await
        .unwrap();
    // What the reconciler counts: the lexical vector Qdrant is given.
    let terms = |peer: &str, text: &str| lexical::document(&format!("{peer}: {text}")).indices;
    let mut counted: Vec<(String, Vec<u32>)> = created
        .iter()
        .zip(texts)
        .map(|(message, (peer, text))| (message.id.clone(), terms(peer, text)))
        .collect();
    counted.push((neighbour[0].id.clone(), terms("carol", "kitten kitten kitten")));
    store.count_terms(&counted).await.unwrap();
    store.count_terms(&counted[..2]).await.unwrap();
    let word = |word: &str| lexical::query(word).indices[0];
    let (kitten, sofa, carburetor) = (word("kitten"), word("sofa"), word("carburetor"));
    let counts = |workspace: &'static str| async move {
        store.term_counts(workspace, &[kitten, sofa, carburetor]).await.unwrap()
    };
    assert_eq!(
        counts("w").await,
        TermCounts {
            documents: 3,
            frequencies: HashMap::from([(kitten, 2), (sofa, 1)]),
        },
        "each message once, however often synced; none of the other workspace's"
    );
    assert_eq!(counts("other").await.documents, 1);
    assert_eq!(counts("nowhere").await, TermCounts::default());

    store
        .count_terms(&[(later[0].id.clone(), terms("bob", "a kitten on the sofa"))])
        .await
        .unwrap();
    assert_eq!(counts("w").await.frequencies, HashMap::from([(kitten, 3), (sofa, 2)]));

    // Deleting a message uncounts it; a deleted one is not counted again.
    store.delete_message("w", "s1", &created[1].id).await.unwrap();
    store.count_terms(&counted[1..2]).await.unwrap();
    assert_eq!(
        counts("w").await,
        TermCounts {
            documents: 3,
            frequencies: HashMap::from([(kitten, 3), (sofa, 1)]),
        }
    );
    // Erased, a workspace's words leave no count behind.
    store.delete_session("w", "s1").await.unwrap();
    store.delete_session("w", "s2").await.unwrap();
    assert_eq!(counts("w").await, TermCounts::default());
    let all_terms: Vec<u32> = counted.iter().flat_map(|(_, terms)| terms.clone()).collect();
    assert_eq!(store.term_counts("w", &all_terms).await.unwrap(), TermCounts::default());
    assert_eq!(counts("other").await.frequencies, HashMap::from([(kitten, 1)]));
}
