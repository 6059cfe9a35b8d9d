//! [`Erasure`]: deletes that reach everything derived.

use super::*;

store_contract_suite!(
    session_delete_removes_it_and_its_messages_at_once,
    workspace_delete_is_refused_while_a_session_is_active,
    peer_delete_removes_its_messages_and_memberships,
    erasing_a_message_reaches_everything_derived_from_it,
    erasing_a_session_or_peer_runs_in_chunks_with_a_receipt,
    a_session_is_hidden_from_every_read_once_its_erasure_begins,
    a_peer_is_hidden_from_every_read_once_its_erasure_begins,
    a_workspace_is_hidden_from_every_read_once_its_erasure_begins,
    writes_racing_a_peer_erasure_are_refused_or_erased_with_it,
    a_summary_made_while_what_it_read_was_erased_is_not_written,
;
    deleted_messages_leave_nothing_in_the_side_tables,
);

async fn session_delete_removes_it_and_its_messages_at_once(store: &dyn Store) {
    let created = store
        .create_messages("w", "s", vec![new_message("a", "secret")])
        .await
        .unwrap();
    store
        .create_messages("w", "other", vec![new_message("a", "kept")])
        .await
        .unwrap();
    store.delete_session("w", "s").await.unwrap();
    let sessions = store.list_sessions("w", &all(), page(1, 10)).await.unwrap();
    assert_eq!(
        sessions.items.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["other"]
    );
    assert!(matches!(
        store.get_message("w", "s", &created[0].id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete_session("w", "s").await,
        Err(Error::NotFound { .. })
    ));
    let again = store
        .create_messages("w", "s", vec![new_message("a", "new")])
        .await
        .unwrap();
    assert_eq!(again[0].seq_in_session, 1, "a re-created session starts afresh");
    assert_eq!(
        store.list_messages("w", "s", &all(), page(1, 10)).await.unwrap().total,
        1
    );
}

async fn workspace_delete_is_refused_while_a_session_is_active(store: &dyn Store) {
    store
        .create_messages("w", "s", vec![new_message("a", "hello")])
        .await
        .unwrap();
    store.create_webhook("w", "https://example.com/hook").await.unwrap();
    let error = store.delete_workspace("w").await.unwrap_err();
    assert!(matches!(error, Error::FailedPrecondition(_)), "{error}");
    store.delete_session("w", "s").await.unwrap();
    store.delete_workspace("w").await.unwrap();
    assert_eq!(store.list_workspaces(&all(), page(1, 10)).await.unwrap().total, 0);
    assert_eq!(
        store
            .list_peers("w", PeerKind::Peer, &all(), page(1, 10))
            .await
            .unwrap()
            .total,
        0,
        "peers go with the workspace"
    );
    assert_eq!(store.list_webhooks("w", page(1, 10)).await.unwrap().total, 0);
    assert!(matches!(store.delete_workspace("w").await, Err(Error::NotFound { .. })));
}

async fn peer_delete_removes_its_messages_and_memberships(store: &dyn Store) {
    store
        .create_messages(
            "w",
            "s",
            vec![
                new_message("alice", "a1"),
                new_message("bob", "b1"),
                new_message("alice", "a2"),
            ],
        )
        .await
        .unwrap();
    store.delete_peer("w", "alice").await.unwrap();
    let left = store.list_messages("w", "s", &all(), page(1, 10)).await.unwrap();
    assert_eq!(
        left.items.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["b1"]
    );
    let members = store.list_session_peers("w", "s", page(1, 10)).await.unwrap();
    assert_eq!(members.items.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["bob"]);
    assert!(matches!(
        store.delete_peer("w", "alice").await,
        Err(Error::NotFound { .. })
    ));
}

async fn erasing_a_message_reaches_everything_derived_from_it(store: &dyn Store) {
    use roncho_core::model::{ErasureState, SummaryKind};
    let hour = std::time::Duration::from_secs(3600);
    let three = || {
        vec![
            new_message("alice", "my password is hunter2"),
            new_message("bob", "noted, I will remember"),
            new_message("alice", "thanks for the help"),
        ]
    };
    let messages = store
        .write_messages("w", "s", three(), Some(&once("k", "CreateMessages", "three", hour)))
        .await
        .unwrap();
    let ids: Vec<&str> = messages.iter().map(|message| message.id.as_str()).collect();
    let (secret, reply, thanks) = (ids[0], ids[1], ids[2]);
    // Derived: a fact from the secret alone, one from two messages, a
    // deduction from the first fact, and one from both facts.
    let facts = store
        .create_conclusions(
            "w",
            vec![
                derived("alice", "alice", "alice's password is hunter2", &[secret]),
                derived(
                    "bob",
                    "alice",
                    "alice shares hunter2 and says thanks",
                    &[secret, thanks],
                ),
            ],
        )
        .await
        .unwrap();
    let mut deduction = derived("alice", "alice", "alice reuses hunter2", &[&facts[0].id]);
    deduction.level = "deductive".into();
    deduction.premises = vec![facts[0].content.clone()];
    let mut joint = derived("bob", "alice", "alice trusts bob", &[&facts[0].id, &facts[1].id]);
    joint.level = "deductive".into();
    joint.premises = vec![facts[0].content.clone(), facts[1].content.clone()];
    let deductions = store.create_conclusions("w", vec![deduction, joint]).await.unwrap();
    store
        .set_session_summary("w", "s", SummaryKind::Short, "alice said hunter2", thanks, 5, None)
        .await
        .unwrap();
    let synced: Vec<(String, i64)> = ids.iter().map(|id| ((*id).to_owned(), 0)).collect();
    store.mark_synced(SyncKind::Message, &synced).await.unwrap();
    store
        .mark_synced(SyncKind::Conclusion, &[(facts[0].id.clone(), 0)])
        .await
        .unwrap();
    assert_eq!(found(store, "w", &search("hunter2"), &all()).await.len(), 1);

    let receipt = store.delete_message("w", "s", secret).await.unwrap();
    assert_eq!(receipt.state, ErasureState::Complete);
    let counts = receipt.counts;
    assert_eq!(
        (
            counts.messages,
            counts.message_vectors,
            counts.conclusions,
            counts.conclusion_vectors
        ),
        (1, 1, 2, 1),
        "the message, its vector, the fact from it and the deduction from that fact, the fact's vector: {counts:?}"
    );
    assert_eq!(
        counts.conclusions_trimmed, 2,
        "the two-source fact and the joint deduction: {counts:?}"
    );
    assert_eq!(
        (
            counts.summaries_rebuilt,
            counts.messages_reembedded,
            counts.idempotency_keys
        ),
        (1, 1, 1),
        "{counts:?}"
    );
    // One removal per erased row that has or may get a vector: the
    // deduction had none yet, but an embedding in flight could add it.
    assert_eq!(receipt.vectors_pending, 3);
    assert_eq!(store.erasure_receipt("w", &receipt.id).await.unwrap(), receipt);

    // Nothing readable holds the text.
    assert_eq!(found(store, "w", &search("hunter2"), &all()).await.len(), 0);
    assert!(matches!(
        store.get_message("w", "s", secret).await,
        Err(Error::NotFound { .. })
    ));
    let left = store.list_conclusions("w", &all(), page(1, 10)).await.unwrap().items;
    let mut contents: Vec<&str> = left.iter().map(|c| c.content.as_str()).collect();
    contents.sort_unstable();
    assert_eq!(contents, ["alice shares hunter2 and says thanks", "alice trusts bob"]);
    let kept = left.iter().find(|c| c.id == facts[1].id).unwrap();
    assert_eq!(kept.source_ids, [thanks]);
    let joint = left.iter().find(|c| c.id == deductions[1].id).unwrap();
    assert_eq!(joint.source_ids, [facts[1].id.clone()]);
    assert_eq!(
        joint.premises,
        [facts[1].content.clone()],
        "the erased premise's text is gone"
    );
    assert!(store.session_summaries("w", "s").await.unwrap().is_empty());
    // The key that wrote it is disarmed, not forgotten: a retry returns
    // what is left and writes nothing (it no longer expires).
    let survivors = |replayed: Vec<roncho_core::model::Message>| replayed.into_iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(
        store
            .replayed_messages("w", "s", &once("k", "CreateMessages", "three", hour))
            .await
            .unwrap()
            .map(survivors),
        Some(vec![reply.to_owned(), thanks.to_owned()]),
    );
    let retried = store
        .write_messages("w", "s", three(), Some(&once("k", "CreateMessages", "three", hour)))
        .await
        .unwrap();
    assert_eq!(survivors(retried), [reply, thanks], "a retry writes nothing");
    assert_eq!(found(store, "w", &search("hunter2"), &all()).await.len(), 0);
    assert_eq!(
        store
            .replayed_messages("w", "s", &once("k", "CreateMessages", "another body", hour))
            .await
            .unwrap()
            .map(survivors),
        Some(vec![reply.to_owned(), thanks.to_owned()]),
        "no digest of the erased text is left to compare another request with"
    );
    // The reply is embedded again, without the erased turn.
    let pending = store.unsynced(SyncKind::Message, 10, i64::MAX, 0).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, reply);
    assert!(!pending[0].text.contains("hunter2"), "{}", pending[0].text);
    // An embedding computed from the old text is not taken for the new one.
    store
        .mark_synced(SyncKind::Message, &[(reply.to_owned(), 0)])
        .await
        .unwrap();
    assert_eq!(
        store.unsynced(SyncKind::Message, 10, i64::MAX, 0).await.unwrap().len(),
        1
    );
    store
        .mark_synced(SyncKind::Message, &[(reply.to_owned(), pending[0].version)])
        .await
        .unwrap();
    assert!(
        store
            .unsynced(SyncKind::Message, 10, i64::MAX, 0)
            .await
            .unwrap()
            .is_empty()
    );
    // The reconciler removes the vectors; the receipt says when.
    let tombstones = store.tombstones(10).await.unwrap();
    let ours: Vec<&str> = tombstones.iter().map(|t| t.id.as_str()).collect();
    assert!(
        ours.contains(&secret) && ours.contains(&facts[0].id.as_str()),
        "{ours:?}"
    );
    store.clear_tombstones(&tombstones).await.unwrap();
    assert_eq!(
        store.erasure_receipt("w", &receipt.id).await.unwrap().vectors_pending,
        0
    );

    // A derivation that read the message before it was erased stores nothing from it.
    let late = store
        .create_conclusions(
            "w",
            vec![
                derived("alice", "alice", "late: hunter2 again", &[secret]),
                derived("alice", "alice", "late: thanks", &[secret, thanks]),
            ],
        )
        .await
        .unwrap();
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].source_ids, [thanks]);
    assert!(matches!(
        store.erasure_receipt("w", "no-such-receipt").await,
        Err(Error::NotFound { .. })
    ));
}

async fn erasing_a_session_or_peer_runs_in_chunks_with_a_receipt(store: &dyn Store) {
    use roncho_core::model::{ErasureScope, ErasureState};
    for batch in 0..12 {
        let messages = (0..100)
            .map(|i| new_message(["alice", "bob"][i % 2], &format!("batch {batch} line {i}")))
            .collect();
        store.create_messages("w", "big", messages).await.unwrap();
    }
    let first = store.list_messages("w", "big", &all(), page(1, 1)).await.unwrap().items;
    let mut fact = new_conclusion("alice", "bob", "bob counts lines");
    fact.session_id = Some("big".into());
    fact.source_ids = vec![first[0].id.clone()];
    store.create_conclusions("w", vec![fact]).await.unwrap();

    let scope = ErasureScope::Session {
        session_id: "big".into(),
    };
    let receipt = store.begin_erasure("w", &scope).await.unwrap();
    assert_eq!(receipt.state, ErasureState::Running);
    assert_eq!(
        store.begin_erasure("w", &scope).await.unwrap().id,
        receipt.id,
        "one erasure per target"
    );
    let step = store.continue_erasure("w", &receipt.id, 500).await.unwrap();
    assert_eq!((step.state, step.counts.messages), (ErasureState::Running, 500));
    assert!(
        matches!(
            store.list_messages("w", "big", &all(), page(1, 1)).await,
            Err(Error::NotFound { .. })
        ),
        "the 700 left are hidden while they wait"
    );
    let mut done = step;
    while done.state == ErasureState::Running {
        done = store.continue_erasure("w", &receipt.id, 500).await.unwrap();
    }
    assert_eq!(
        (done.counts.messages, done.counts.conclusions, done.counts.sessions),
        (1200, 1, 1),
        "{:?}",
        done.counts
    );
    assert!(done.finished_at.is_some());
    assert!(matches!(
        store.list_messages("w", "big", &all(), page(1, 1)).await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(store.list_conclusions("w", &all(), page(1, 10)).await.unwrap().total, 0);
    assert_eq!(
        store.continue_erasure("w", &receipt.id, 500).await.unwrap(),
        done,
        "done stays done"
    );

    // A peer: its messages everywhere, the turns after them embedded again,
    // conclusions by and about it, its cards.
    store
        .create_messages(
            "w",
            "s1",
            vec![
                new_message("carol", "carol's secret"),
                new_message("dave", "dave replies"),
            ],
        )
        .await
        .unwrap();
    store
        .create_messages("w", "s2", vec![new_message("carol", "carol again")])
        .await
        .unwrap();
    let mut about = new_conclusion("dave", "carol", "carol has a secret");
    about.source_ids = vec![];
    store
        .create_conclusions("w", vec![about, new_conclusion("dave", "dave", "dave replies a lot")])
        .await
        .unwrap();
    store
        .set_peer_card("w", "dave", "carol", vec!["SECRET: yes".into()])
        .await
        .unwrap();
    let dave_reply = store.list_messages("w", "s1", &all(), page(1, 10)).await.unwrap().items[1].clone();
    store
        .mark_synced(SyncKind::Message, &[(dave_reply.id.clone(), 0)])
        .await
        .unwrap();
    let receipt = store.delete_peer("w", "carol").await.unwrap();
    let counts = receipt.counts;
    assert_eq!(
        (
            counts.messages,
            counts.conclusions,
            counts.peer_cards,
            counts.peers,
            counts.messages_reembedded
        ),
        (2, 1, 1, 1, 1),
        "{counts:?}"
    );
    assert_eq!(
        store.list_messages("w", "s1", &all(), page(1, 10)).await.unwrap().total,
        1
    );
    assert_eq!(store.list_conclusions("w", &all(), page(1, 10)).await.unwrap().total, 1);
    assert_eq!(store.get_peer_card("w", "dave", "carol").await.unwrap(), None);
}

/// A message row is written once (ADR 0012): what is left to do for it is
/// in side tables, and a deleted message leaves nothing there (its words in
/// `message_text` least of all), whether erased alone or with its session.
async fn deleted_messages_leave_nothing_in_the_side_tables(store: Arc<SqlStore>) {
    let postgres = store.dialect() == roncho_store::Dialect::Postgres;
    let tables: &[&str] = if postgres {
        &["message_sync", "message_unindexed", "message_text"]
    } else {
        &["message_sync"]
    };
    let rows = |table: &'static str| {
        let store = store.clone();
        async move {
            // `table` is one of the names above.
            let counted = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT (SELECT COUNT(*) FROM {table}) AS total, (SELECT COUNT(*) FROM {table} t \
                 WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = t.message_id)) AS orphans"
            )))
            .fetch_one(store.pool())
            .await
            .unwrap();
            (
                sqlx::Row::get::<i64, _>(&counted, "total"),
                sqlx::Row::get::<i64, _>(&counted, "orphans"),
            )
        }
    };
    let kept = store
        .create_messages(
            "w",
            "s",
            vec![new_message("alice", "my secret is hunter2"), new_message("bob", "kept")],
        )
        .await
        .unwrap();
    store
        .create_messages("w", "t", vec![new_message("alice", "hunter2 again")])
        .await
        .unwrap();
    // Each queued for its vector (and on Postgres its words); one synced,
    // which indexes its words and takes it off both queues.
    for table in tables {
        let expected = if *table == "message_text" { 0 } else { 3 };
        assert_eq!(rows(table).await, (expected, 0), "{table} after the writes");
    }
    store
        .mark_synced(SyncKind::Message, &[(kept[0].id.clone(), 0)])
        .await
        .unwrap();
    if postgres {
        assert_eq!(
            rows("message_text").await,
            (1, 0),
            "the synced message's words are indexed"
        );
        assert_eq!(rows("message_unindexed").await, (2, 0));
    }
    assert_eq!(rows("message_sync").await, (2, 0), "a synced message leaves the queue");
    store.delete_message("w", "s", &kept[0].id).await.unwrap();
    store.delete_session("w", "t").await.unwrap();
    for table in tables {
        let (total, orphans) = rows(table).await;
        assert_eq!(orphans, 0, "{table} keeps nothing of a deleted message");
        assert_eq!(
            total,
            i64::from(*table != "message_text"),
            "{table} holds only the message kept"
        );
    }
    assert_eq!(
        found(&*store, "w", &search("hunter2"), &all()).await,
        Vec::<String>::new(),
        "the deleted messages' words are gone"
    );
}

/// What `store` returns of message `id`'s text by every read of messages:
/// its listing, the message itself, search, lookup by id, scans and the
/// context; empty when none does.
async fn message_reads(store: &dyn Store, session: &str, id: &str, word: &str) -> Vec<String> {
    let mut seen = Vec::new();
    if let Ok(listed) = store.list_messages("w", session, &all(), page(1, 100)).await {
        seen.extend(
            listed
                .items
                .into_iter()
                .filter(|m| m.id == id)
                .map(|m| format!("list: {}", m.content)),
        );
    }
    let filtered = filter::parse(&filter::MESSAGE, Some(&object(json!({"peer_id": {"ne": "nobody"}})))).unwrap();
    if let Ok(listed) = store.list_messages("w", session, &filtered, page(1, 100)).await {
        seen.extend(
            listed
                .items
                .into_iter()
                .filter(|m| m.id == id)
                .map(|m| format!("filtered list: {}", m.content)),
        );
    }
    if let Ok(message) = store.get_message("w", session, id).await {
        seen.push(format!("get: {}", message.content));
    }
    seen.extend(
        found(store, "w", &search(word), &all())
            .await
            .into_iter()
            .map(|c| format!("search: {c}")),
    );
    let in_session = MessageQuery {
        session_ids: Some(vec![session.to_owned()]),
        ..search(word)
    };
    seen.extend(
        found(store, "w", &in_session, &all())
            .await
            .into_iter()
            .map(|c| format!("session search: {c}")),
    );
    let unsynced = store
        .search_unsynced_messages("w", &search(word), &all(), 1_000_000)
        .await
        .unwrap();
    seen.extend(unsynced.into_iter().map(|m| format!("unsynced search: {}", m.content)));
    let by_id = store
        .messages_by_ids("w", &[id.to_owned()], &all(), None)
        .await
        .unwrap();
    seen.extend(by_id.into_iter().map(|m| format!("by id: {}", m.content)));
    let scan = MessageScan {
        contains: Some(word.to_owned()),
        limit: 100,
        ..MessageScan::default()
    };
    let scanned = store.scan_messages("w", &scan).await.unwrap();
    seen.extend(scanned.into_iter().map(|m| format!("scan: {}", m.content)));
    if let Ok(context) = store.context_messages("w", session, 100_000, 0).await {
        seen.extend(
            context
                .into_iter()
                .filter(|m| m.id == id)
                .map(|m| format!("context: {}", m.content)),
        );
    }
    seen
}

/// What `store` returns of conclusion `id` by every read of conclusions.
async fn conclusion_reads(store: &dyn Store, id: &str, observer: &str, observed: &str, source: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let listed = store.list_conclusions("w", &all(), page(1, 100)).await.unwrap();
    seen.extend(
        listed
            .items
            .into_iter()
            .filter(|c| c.id == id)
            .map(|c| format!("list: {}", c.content)),
    );
    let query = CollectionQuery {
        allowed_sessions: None,
        recent: 100,
        most_derived: 100,
    };
    let collection = store
        .collection_conclusions("w", observer, observed, &query)
        .await
        .unwrap();
    seen.extend(
        collection
            .into_iter()
            .filter(|c| c.id == id)
            .map(|c| format!("collection: {}", c.content)),
    );
    let by_id = store.conclusions_by_ids("w", &[id.to_owned()]).await.unwrap();
    seen.extend(by_id.into_iter().map(|c| format!("by id: {}", c.content)));
    let citing = store.conclusions_citing("w", source).await.unwrap();
    seen.extend(
        citing
            .into_iter()
            .filter(|c| c.id == id)
            .map(|c| format!("citing: {}", c.content)),
    );
    seen
}

/// Runs `receipt`'s erasure to its end, as its `deletion` task does.
async fn run_to_completion(store: &dyn Store, workspace: &str, receipt: &str) -> roncho_core::model::ErasureReceipt {
    use roncho_core::model::ErasureState;
    loop {
        let step = store.continue_erasure(workspace, receipt, 500).await.unwrap();
        if step.state == ErasureState::Complete {
            return step;
        }
    }
}

/// From the commit of `begin_erasure` on (the process may die before any
/// chunk is erased), no read returns the session's messages, summaries or
/// conclusions; other sessions read as before, and its queued work is
/// dropped. The erasure then runs to its end as usual.
async fn a_session_is_hidden_from_every_read_once_its_erasure_begins(store: &dyn Store) {
    use roncho_core::model::{ErasureScope, ErasureState};
    store
        .get_or_create_session(
            "w",
            "gone",
            None,
            None,
            vec![
                ("alice".into(), config(Some(true), Some(true))),
                ("bob".into(), config(Some(true), Some(true))),
            ],
        )
        .await
        .unwrap();
    let gone = store
        .create_messages(
            "w",
            "gone",
            vec![
                new_message("alice", "my zanzibar secret"),
                new_message("bob", "zanzibar noted"),
            ],
        )
        .await
        .unwrap();
    let kept = store
        .create_messages("w", "kept", vec![new_message("alice", "kept words")])
        .await
        .unwrap();
    let mut from_gone = derived("bob", "alice", "alice has a zanzibar secret", &[&gone[0].id]);
    from_gone.session_id = Some("gone".into());
    let mut from_kept = derived("bob", "alice", "alice keeps words", &[&kept[0].id]);
    from_kept.session_id = Some("kept".into());
    let conclusions = store.create_conclusions("w", vec![from_gone, from_kept]).await.unwrap();
    store
        .set_session_summary(
            "w",
            "gone",
            SummaryKind::Short,
            "a zanzibar secret",
            &gone[1].id,
            3,
            None,
        )
        .await
        .unwrap();
    assert!(!message_reads(store, "gone", &gone[0].id, "zanzibar").await.is_empty());

    let scope = ErasureScope::Session {
        session_id: "gone".into(),
    };
    let receipt = store.begin_erasure("w", &scope).await.unwrap();
    assert_eq!(receipt.state, ErasureState::Running);
    // Nothing of it is erased yet, and none of it is read.
    assert_eq!(receipt.counts.messages, 0);
    for message in &gone {
        assert_eq!(
            message_reads(store, "gone", &message.id, "zanzibar").await,
            Vec::<String>::new()
        );
    }
    assert_eq!(
        conclusion_reads(store, &conclusions[0].id, "bob", "alice", &gone[0].id).await,
        Vec::<String>::new()
    );
    assert!(matches!(
        store.list_messages("w", "gone", &all(), page(1, 10)).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.context_messages("w", "gone", 1_000, 0).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.session_summaries("w", "gone").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.clone_session("w", "gone", None).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store
            .create_messages("w", "gone", vec![new_message("alice", "more")])
            .await,
        Err(Error::NotFound { .. })
    ));
    let sessions = store.list_sessions("w", &all(), page(1, 10)).await.unwrap();
    assert_eq!(
        sessions.items.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["kept"]
    );
    assert!(store.list_session_peers("w", "gone", page(1, 10)).await.is_err());
    // The other session reads as before.
    assert_eq!(
        message_reads(store, "kept", &kept[0].id, "kept").await.len(),
        9,
        "listed twice, got, found three ways, by id, scanned, in context"
    );
    assert_eq!(
        conclusion_reads(store, &conclusions[1].id, "bob", "alice", &kept[0].id)
            .await
            .len(),
        4
    );
    // A repeated delete, or one after a crash, joins the erasure.
    assert_eq!(store.begin_erasure("w", &scope).await.unwrap().id, receipt.id);
    assert_eq!(store.delete_session("w", "gone").await.unwrap().id, receipt.id);
    let done = store.erasure_receipt("w", &receipt.id).await.unwrap();
    assert_eq!(done.state, ErasureState::Complete);
    assert_eq!(
        (done.counts.messages, done.counts.conclusions, done.counts.sessions),
        (2, 1, 1),
        "{:?}",
        done.counts
    );
    assert!(matches!(
        store.delete_session("w", "gone").await,
        Err(Error::NotFound { .. })
    ));
    let again = store
        .create_messages("w", "gone", vec![new_message("alice", "afresh")])
        .await
        .unwrap();
    assert_eq!(again[0].seq_in_session, 1, "a re-created session starts afresh");
}

/// A peer's erasure hides, at once, its messages in every session, the
/// conclusions by and about it, its cards, the summaries of its sessions
/// and the peer itself.
async fn a_peer_is_hidden_from_every_read_once_its_erasure_begins(store: &dyn Store) {
    use roncho_core::model::{ErasureScope, ErasureState};
    let first = store
        .create_messages(
            "w",
            "s1",
            vec![
                new_message("dave", "dave opens"),
                new_message("carol", "carol's zanzibar secret"),
                new_message("dave", "dave replies"),
            ],
        )
        .await
        .unwrap();
    let second = store
        .create_messages("w", "s2", vec![new_message("carol", "zanzibar again")])
        .await
        .unwrap();
    let mut about = derived("dave", "carol", "carol has a zanzibar secret", &[&first[1].id]);
    about.session_id = Some("s1".into());
    let mut own = derived("dave", "dave", "dave replies a lot", &[&first[2].id]);
    own.session_id = Some("s1".into());
    let conclusions = store.create_conclusions("w", vec![about, own]).await.unwrap();
    store
        .set_peer_card("w", "dave", "carol", vec!["SECRET: zanzibar".into()])
        .await
        .unwrap();
    store
        .set_session_summary(
            "w",
            "s1",
            SummaryKind::Short,
            "carol said zanzibar",
            &first[2].id,
            3,
            None,
        )
        .await
        .unwrap();

    let receipt = store
        .begin_erasure(
            "w",
            &ErasureScope::Peer {
                peer_id: "carol".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!((receipt.state, receipt.counts.messages), (ErasureState::Running, 0));
    assert_eq!(
        message_reads(store, "s1", &first[1].id, "zanzibar").await,
        Vec::<String>::new()
    );
    assert_eq!(
        message_reads(store, "s2", &second[0].id, "zanzibar").await,
        Vec::<String>::new()
    );
    assert_eq!(
        conclusion_reads(store, &conclusions[0].id, "dave", "carol", &first[1].id).await,
        Vec::<String>::new()
    );
    assert_eq!(store.get_peer_card("w", "dave", "carol").await.unwrap(), None);
    assert!(matches!(
        store.get_peer_card("w", "carol", "dave").await,
        Err(Error::NotFound { .. })
    ));
    assert!(store.session_summaries("w", "s1").await.unwrap().is_empty());
    let listed = store.list_messages("w", "s1", &all(), page(1, 10)).await.unwrap();
    assert_eq!(
        (
            listed.total,
            listed.items.iter().map(|m| m.content.as_str()).collect::<Vec<_>>()
        ),
        (2, vec!["dave opens", "dave replies"])
    );
    let context = store.context_messages("w", "s1", 1_000, 0).await.unwrap();
    assert_eq!(
        context.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["dave opens", "dave replies"]
    );
    let peers = store
        .list_peers("w", PeerKind::Peer, &all(), page(1, 10))
        .await
        .unwrap();
    assert_eq!(peers.items.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["dave"]);
    let members = store.list_session_peers("w", "s1", page(1, 10)).await.unwrap();
    assert_eq!(
        members.items.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        ["dave"]
    );
    // Writes naming the peer are refused, not accepted and then erased.
    let not_found = |outcome: roncho_core::Result<()>, what: &str| {
        assert!(matches!(outcome, Err(Error::NotFound { .. })), "{what}: {outcome:?}");
    };
    not_found(
        store
            .create_messages("w", "s2", vec![new_message("carol", "written while erased")])
            .await
            .map(drop),
        "a message by the peer",
    );
    not_found(
        store.set_peer_card("w", "dave", "carol", vec!["x".into()]).await,
        "a card about the peer",
    );
    not_found(
        store
            .add_session_peers("w", "s2", vec![("carol".into(), Default::default())])
            .await
            .map(drop),
        "the peer added to a session",
    );
    not_found(
        store
            .set_session_peer_config("w", "s2", "carol", Default::default())
            .await,
        "the peer's session config",
    );
    store
        .create_messages("w", "s2", vec![new_message("dave", "dave still writes")])
        .await
        .expect("another peer writes as before");
    // What is not the peer's reads as before.
    assert_eq!(
        conclusion_reads(store, &conclusions[1].id, "dave", "dave", &first[2].id)
            .await
            .len(),
        4
    );

    let done = run_to_completion(store, "w", &receipt.id).await;
    assert_eq!(
        (done.counts.messages, done.counts.conclusions, done.counts.peers),
        (2, 1, 1),
        "{:?}",
        done.counts
    );
    assert_eq!(
        store.list_messages("w", "s1", &all(), page(1, 10)).await.unwrap().total,
        2
    );
}

/// A workspace's erasure (its sessions deleted first, their erasures still
/// running) hides the workspace, its peers and its conclusions at once.
async fn a_workspace_is_hidden_from_every_read_once_its_erasure_begins(store: &dyn Store) {
    use roncho_core::model::{ErasureScope, ErasureState};
    let messages = store
        .create_messages("w", "s", vec![new_message("alice", "zanzibar in w")])
        .await
        .unwrap();
    store
        .create_messages("v", "s", vec![new_message("alice", "zanzibar in v")])
        .await
        .unwrap();
    let workspace_wide = store
        .create_conclusions("w", vec![new_conclusion("alice", "alice", "alice likes zanzibar")])
        .await
        .unwrap();
    store
        .create_webhook("w", "https://example.com/secret-hook")
        .await
        .unwrap();
    let session = store
        .begin_erasure("w", &ErasureScope::Session { session_id: "s".into() })
        .await
        .unwrap();
    let receipt = store.begin_erasure("w", &ErasureScope::Workspace).await.unwrap();
    assert_eq!(
        store.list_webhooks("w", page(1, 10)).await.unwrap().total,
        0,
        "its webhooks"
    );
    assert_eq!(receipt.state, ErasureState::Running);
    assert_eq!(
        message_reads(store, "s", &messages[0].id, "zanzibar").await,
        Vec::<String>::new()
    );
    assert_eq!(
        conclusion_reads(store, &workspace_wide[0].id, "alice", "alice", "none").await,
        Vec::<String>::new()
    );
    let workspaces = store.list_workspaces(&all(), page(1, 10)).await.unwrap();
    assert_eq!(
        workspaces.items.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
        ["v"]
    );
    assert_eq!(
        store
            .list_peers("w", PeerKind::All, &all(), page(1, 10))
            .await
            .unwrap()
            .total,
        0
    );
    assert!(matches!(
        store.get_or_create_peer("w", "alice", None, None).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.create_webhook("w", "https://example.com/hook").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store
            .create_messages("w", "t", vec![new_message("bob", "written while erased")])
            .await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(
        store.begin_erasure("w", &ErasureScope::Workspace).await.unwrap().id,
        receipt.id,
        "a repeated delete joins"
    );
    // The other workspace reads as before.
    assert_eq!(found(store, "v", &search("zanzibar"), &all()).await, ["zanzibar in v"]);

    let done = run_to_completion(store, "w", &receipt.id).await;
    assert_eq!(
        (done.counts.messages, done.counts.workspaces),
        (1, 1),
        "{:?}",
        done.counts
    );
    run_to_completion(store, "w", &session.id).await;
    assert_eq!(store.list_workspaces(&all(), page(1, 10)).await.unwrap().total, 1);
}

async fn writes_racing_a_peer_erasure_are_refused_or_erased_with_it(store: &dyn Store) {
    use roncho_core::model::{ErasureScope, ErasureState};
    // On Postgres the writes run on connections of their own beside the
    // erasure's beginning: each is refused or commits before it, and then
    // goes with it. Nothing is written into what an erasure has taken.
    for round in 0..12 {
        let (session, racer) = (format!("race{round}"), format!("racer{round}"));
        store
            .create_messages("w", &session, vec![new_message(&racer, "before")])
            .await
            .unwrap();
        let writes = (0..6).map(|index| {
            store.create_messages(
                "w",
                &session,
                vec![
                    new_message(&racer, &format!("during {index}")),
                    new_message("bystander", "kept"),
                ],
            )
        });
        let scope = ErasureScope::Peer { peer_id: racer.clone() };
        let (outcomes, receipt) = futures::join!(futures::future::join_all(writes), store.begin_erasure("w", &scope));
        for outcome in &outcomes {
            assert!(
                matches!(outcome, Ok(_) | Err(Error::NotFound { .. })),
                "round {round}: {outcome:?}"
            );
        }
        let mut done = receipt.unwrap();
        while done.state == ErasureState::Running {
            done = store.continue_erasure("w", &done.id, 500).await.unwrap();
        }
        let left = store.list_messages("w", &session, &all(), page(1, 100)).await.unwrap();
        let racers: Vec<&str> = left
            .items
            .iter()
            .filter(|message| message.peer_id == racer)
            .map(|message| message.content.as_str())
            .collect();
        assert!(racers.is_empty(), "round {round}: the erased peer's {racers:?}");
        let written = outcomes.iter().filter(|outcome| outcome.is_ok()).count();
        assert_eq!(left.items.len(), written, "round {round}: the bystander's stay");
    }
}

/// A summary is made (by a model, for seconds) from messages and the
/// previous summary of its kind; an erasure meanwhile must not see its
/// words come back when it is stored: what it was made from is checked as
/// it is written.
async fn a_summary_made_while_what_it_read_was_erased_is_not_written(store: &dyn Store) {
    use roncho_core::model::{ErasureScope, SummaryBasis};
    let texts = ["hello", "alice's pin is 4711", "noted", "thanks", "bye"];
    let messages: Vec<NewMessage> = texts
        .iter()
        .enumerate()
        .map(|(index, text)| new_message(["bob", "alice"][index % 2], text))
        .collect();
    let created = store.create_messages("w", "s", messages).await.unwrap();
    let ids: Vec<String> = created.iter().map(|message| message.id.clone()).collect();
    let left: Vec<String> = ids.iter().filter(|id| *id != &ids[1]).cloned().collect();
    let summarize = |content: &'static str, messages: &[String], previous: Option<i64>| {
        let basis = SummaryBasis {
            messages: messages.to_vec(),
            previous,
        };
        let last = ids[4].clone();
        async move {
            store
                .set_session_summary("w", "s", SummaryKind::Short, content, &last, 5, Some(&basis))
                .await
        }
    };
    let refused = |result: roncho_core::Result<roncho_core::model::SessionSummary>, what: &str| match result {
        Err(Error::NotFound { resource, .. }) if resource == what => {}
        other => panic!("stored, or refused for another reason than its {what}: {other:?}"),
    };
    let stored = summarize("alice's pin is 4711", &ids, None).await.unwrap();

    // Made from a message erased before it was stored.
    store.delete_message("w", "s", &ids[1]).await.unwrap();
    assert!(
        store.session_summaries("w", "s").await.unwrap().is_empty(),
        "the erasure took it"
    );
    refused(summarize("alice's pin is 4711", &ids, None).await, "message");
    // Made from what is left, but carrying on the summary the erasure took.
    refused(
        summarize("carried on: alice's pin is 4711", &left, Some(stored.created_at)).await,
        "summary",
    );
    assert!(store.session_summaries("w", "s").await.unwrap().is_empty());

    // Made from messages of a peer whose erasure has begun (hidden, not yet gone).
    summarize("clean", &left, None).await.unwrap();
    let alice = ErasureScope::Peer {
        peer_id: "alice".into(),
    };
    store.begin_erasure("w", &alice).await.unwrap();
    refused(summarize("alice said thanks", &left, None).await, "message");
}
