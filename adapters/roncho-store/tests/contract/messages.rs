//! [`Messages`]: a session's messages, context and summaries, written once.

use super::*;

store_contract_suite!(
    messages_are_ordered_counted_and_paged,
    pages_past_either_end_and_of_no_session,
    a_page_agrees_with_its_total_under_concurrent_writes,
    message_update_and_delete,
    a_batch_past_the_bind_limit_is_written_whole,
    context_messages_fit_the_token_budget,
    context_messages_walk_back_across_pages,
    context_windows_hold_what_the_walk_reads,
    pages_and_contexts_skip_what_was_erased,
    session_summaries_are_set_replaced_and_bound_context,
    message_scans_grep_date_and_window,
    idempotent_writes_happen_once_and_twins_wait_for_the_first,
;
    a_sessions_messages_from_one_peer_are_one_index_range,
);

async fn messages_are_ordered_counted_and_paged(store: &dyn Store) {
    let batch: Vec<_> = (1..=25)
        .map(|i| new_message(if i % 2 == 0 { "bob" } else { "alice" }, &format!("message number {i}")))
        .collect();
    let created = store.create_messages("w", "s", batch).await.unwrap();
    assert_eq!(created.len(), 25);
    assert_eq!(
        created.iter().map(|m| m.seq_in_session).collect::<Vec<_>>(),
        (1..=25).collect::<Vec<_>>()
    );
    assert!(created.iter().all(|m| m.id.len() == 21));
    let mut with_time = new_message("carol", "dated");
    with_time.created_at = Some(1_600_000_000_000_000);
    let dated = store.create_messages("w", "s", vec![with_time]).await.unwrap();
    assert_eq!(dated[0].seq_in_session, 26);
    assert_eq!(dated[0].created_at, 1_600_000_000_000_000);
    let members = store.list_session_peers("w", "s", page(1, 10)).await.unwrap();
    assert_eq!(members.total, 3, "authors join the session");

    let first = store.list_messages("w", "s", &all(), page(1, 10)).await.unwrap();
    assert_eq!((first.total, first.pages, first.items.len()), (26, 3, 10));
    assert_eq!(first.items[0].content, "message number 1");
    assert_eq!(first.items[0].token_count, 3);
    let last = store.list_messages("w", "s", &all(), page(3, 10)).await.unwrap();
    assert_eq!(last.items.len(), 6);
    assert_eq!(last.items[5].content, "dated");
    let newest = store
        .list_messages(
            "w",
            "s",
            &all(),
            PageRequest {
                reverse: true,
                ..page(1, 2)
            },
        )
        .await
        .unwrap();
    assert_eq!(
        newest.items.iter().map(|m| m.seq_in_session).collect::<Vec<_>>(),
        [26, 25]
    );
    let beyond = store.list_messages("w", "s", &all(), page(9, 10)).await.unwrap();
    assert!(beyond.items.is_empty());
    assert_eq!(beyond.total, 26);

    let fetched = store.get_message("w", "s", &created[3].id).await.unwrap();
    assert_eq!(fetched, created[3]);
    assert!(matches!(
        store.list_messages("w", "missing", &all(), page(1, 10)).await,
        Err(Error::NotFound { .. })
    ));
}

/// Pages past either end are empty and keep the total, up to the largest
/// page number; a partial page holds what is left; a session without
/// messages lists none; a deleted session's messages are not found.
async fn pages_past_either_end_and_of_no_session(store: &dyn Store) {
    let batch: Vec<_> = (1..=5).map(|i| new_message("alice", &format!("m{i}"))).collect();
    store.create_messages("w", "s", batch).await.unwrap();
    let listed = |number: i64, size: i64, reverse: bool| async move {
        let request = PageRequest {
            reverse,
            ..page(number, size)
        };
        let listed = store.list_messages("w", "s", &all(), request).await.unwrap();
        assert_eq!(listed.total, 5, "page {number} of {size}, reverse {reverse}");
        listed.items.iter().map(|m| m.seq_in_session).collect::<Vec<_>>()
    };
    for reverse in [false, true] {
        for number in [2, 3, i64::MAX / 5, i64::MAX - 1, i64::MAX] {
            assert_eq!(
                listed(number, 5, reverse).await,
                Vec::<i64>::new(),
                "page {number}, reverse {reverse}"
            );
        }
    }
    assert_eq!(listed(1, 5, false).await, [1, 2, 3, 4, 5]);
    assert_eq!(listed(1, 5, true).await, [5, 4, 3, 2, 1]);
    assert_eq!(listed(2, 3, false).await, [4, 5]);
    assert_eq!(listed(2, 3, true).await, [2, 1]);
    assert_eq!(listed(5, 1, true).await, [1]);

    store
        .get_or_create_session("w", "empty", None, None, vec![])
        .await
        .unwrap();
    for reverse in [false, true] {
        let request = PageRequest { reverse, ..page(1, 10) };
        let empty = store.list_messages("w", "empty", &all(), request).await.unwrap();
        assert_eq!((empty.items.len(), empty.total), (0, 0));
    }

    store.delete_session("w", "s").await.unwrap();
    for reverse in [false, true] {
        let request = PageRequest { reverse, ..page(1, 10) };
        assert!(matches!(
            store.list_messages("w", "s", &all(), request).await,
            Err(Error::NotFound { .. })
        ));
    }
}

/// A page and its total come from one snapshot: while a writer appends to
/// two sessions, deletes from one (gaps: the general way) and creates
/// sessions, every page read holds exactly the rows its total leaves for
/// it, in order, in both directions. (Read in two statements, an outside
/// churn test found 7-9 % of the pages disagreeing with their totals.)
async fn a_page_agrees_with_its_total_under_concurrent_writes(store: &dyn Store) {
    use std::sync::atomic::{AtomicBool, Ordering};
    const ROUNDS: i64 = 200;
    let writing = AtomicBool::new(true);
    for session in ["gapless", "gaps"] {
        let first: Vec<_> = (0..10)
            .map(|i| new_message("alice", &format!("{session} {i}")))
            .collect();
        store.create_messages("w", session, first).await.unwrap();
    }
    let writer = async {
        for round in 0..ROUNDS {
            for session in ["gapless", "gaps"] {
                let batch: Vec<_> = (0..3)
                    .map(|i| new_message("alice", &format!("{session} {round} {i}")))
                    .collect();
                let created = store.create_messages("w", session, batch).await.unwrap();
                if session == "gaps" {
                    store.delete_message("w", session, &created[1].id).await.unwrap();
                }
            }
            store
                .get_or_create_session("w", &format!("made {round}"), None, None, vec![])
                .await
                .unwrap();
            tokio::task::yield_now().await;
        }
        writing.store(false, Ordering::SeqCst);
    };
    let reader = async {
        let mut pages = 0;
        let agrees = |what: &str, request: PageRequest, total: i64, keys: Vec<i64>| {
            let offset = (request.page - 1) * request.size;
            let expected = (total - offset).clamp(0, request.size);
            assert_eq!(
                keys.len() as i64,
                expected,
                "{what} {request:?}: total {total}, keys {keys:?}"
            );
            let mut sorted = keys.clone();
            sorted.sort_unstable();
            if request.reverse {
                sorted.reverse();
            }
            assert_eq!(keys, sorted, "{what} {request:?} in order");
        };
        while writing.load(Ordering::SeqCst) || pages == 0 {
            for reverse in [false, true] {
                for number in [1, 2, 5, 9] {
                    let request = PageRequest {
                        reverse,
                        ..page(number, 7)
                    };
                    for session in ["gapless", "gaps"] {
                        let listed = store.list_messages("w", session, &all(), request).await.unwrap();
                        let seqs = listed.items.iter().map(|m| m.seq_in_session).collect();
                        agrees(session, request, listed.total, seqs);
                    }
                    let sessions = store.list_sessions("w", &all(), request).await.unwrap();
                    let made = sessions.items.iter().map(|s| s.created_at).collect();
                    agrees("sessions", request, sessions.total, made);
                    pages += 3;
                }
            }
        }
        pages
    };
    let ((), pages) = tokio::join!(writer, reader);
    assert!(pages > 0);
    let gaps = store.list_messages("w", "gaps", &all(), page(1, 1000)).await.unwrap();
    assert_eq!(
        (gaps.total, gaps.items.len()),
        (10 + ROUNDS * 2, 10 + ROUNDS as usize * 2)
    );
}

async fn message_update_and_delete(store: &dyn Store) {
    let created = store
        .create_messages("w", "s", vec![new_message("a", "one"), new_message("a", "two")])
        .await
        .unwrap();
    let updated = store
        .update_message("w", "s", &created[0].id, object(json!({"k": "v"})))
        .await
        .unwrap();
    assert_eq!(updated.metadata, object(json!({"k": "v"})));
    assert_eq!(updated.content, "one");
    store.delete_message("w", "s", &created[1].id).await.unwrap();
    assert!(matches!(
        store.get_message("w", "s", &created[1].id).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete_message("w", "s", &created[1].id).await,
        Err(Error::NotFound { .. })
    ));
    let next = store
        .create_messages("w", "s", vec![new_message("a", "three")])
        .await
        .unwrap();
    assert_eq!(next[0].seq_in_session, 3, "sequence numbers are never reused");
    assert!(matches!(
        store.update_message("w", "s", "nope", JsonObject::new()).await,
        Err(Error::NotFound { .. })
    ));
}

/// 7,000 messages carry 70,000 bound values: more than SQLite (32,766) or
/// Postgres (65,535) take in one statement. Written in chunks, in one
/// transaction, they all land, in order.
async fn a_batch_past_the_bind_limit_is_written_whole(store: &dyn Store) {
    let messages: Vec<NewMessage> = (0..7_000)
        .map(|index| new_message("alice", &format!("line {index}")))
        .collect();
    let created = store.create_messages("w", "s", messages).await.unwrap();
    assert_eq!(created.len(), 7_000);
    assert_eq!(created.last().unwrap().seq_in_session, 7_000);
    let listed = store.list_messages("w", "s", &all(), page(70, 100)).await.unwrap();
    assert_eq!(listed.total, 7_000);
    assert_eq!(listed.items.last().unwrap().content, "line 6999");
    // Cloned a page at a time, every message in its place.
    let clone = store.clone_session("w", "s", None).await.unwrap();
    let copied = store
        .list_messages("w", &clone.id, &all(), page(70, 100))
        .await
        .unwrap();
    assert_eq!(copied.total, 7_000);
    let last = copied.items.last().unwrap();
    assert_eq!((last.content.as_str(), last.seq_in_session), ("line 6999", 7_000));
}

async fn context_messages_fit_the_token_budget(store: &dyn Store) {
    let batch: Vec<_> = ["one two three", "four five", "six", "seven eight nine ten"]
        .iter()
        .map(|c| new_message("a", c))
        .collect();
    store.create_messages("w", "s", batch).await.unwrap();
    let contents =
        |messages: Vec<roncho_core::model::Message>| messages.into_iter().map(|m| m.content).collect::<Vec<_>>();
    assert_eq!(
        contents(store.context_messages("w", "s", 4, 0).await.unwrap()),
        ["seven eight nine ten"]
    );
    assert_eq!(
        contents(store.context_messages("w", "s", 5, 0).await.unwrap()),
        ["six", "seven eight nine ten"]
    );
    assert_eq!(
        contents(store.context_messages("w", "s", 7, 0).await.unwrap()),
        ["four five", "six", "seven eight nine ten"]
    );
    assert_eq!(
        contents(store.context_messages("w", "s", 100, 0).await.unwrap()).len(),
        4
    );
    assert!(
        store.context_messages("w", "s", 3, 0).await.unwrap().is_empty(),
        "the newest message does not fit"
    );
    assert!(store.context_messages("w", "s", 0, 0).await.unwrap().is_empty());
    assert!(matches!(
        store.context_messages("w", "missing", 10, 0).await,
        Err(Error::NotFound { .. })
    ));
}

async fn context_messages_walk_back_across_pages(store: &dyn Store) {
    // Single-token messages, more than several pages of the walk.
    for chunk in (0..700).collect::<Vec<_>>().chunks(100) {
        let batch = chunk.iter().map(|i| new_message("a", &format!("m{i}"))).collect();
        store.create_messages("w", "s", batch).await.unwrap();
    }
    let tokens = store.context_messages("w", "s", 1, 0).await.unwrap()[0].token_count;
    let budget = 500 * tokens;
    let messages = store.context_messages("w", "s", budget, 0).await.unwrap();
    assert_eq!(messages.len(), 500);
    assert_eq!(messages.first().unwrap().content, "m200");
    assert_eq!(messages.last().unwrap().content, "m699");
    assert!(messages.windows(2).all(|w| w[0].seq_in_session < w[1].seq_in_session));
    let from = messages[450].seq_in_session;
    let tail = store.context_messages("w", "s", budget, from).await.unwrap();
    assert_eq!(tail.len(), 50, "nothing before from_seq");
    assert_eq!(tail[0].content, "m650");
}

/// A session's context window (its summaries and the messages that fit,
/// read together) holds what the walk over the messages and the summaries
/// read apart hold, for every budget: none, less than the newest message,
/// within the walk's first page, exactly it and one more, past it, over
/// gaps left by deletes; and a session that is not there, or was deleted,
/// has none.
async fn context_windows_hold_what_the_walk_reads(store: &dyn Store) {
    // Messages of 1 to 9 words, 300 of them: more than a page of the walk.
    let batch: Vec<_> = (0..300)
        .map(|i| new_message("a", &vec![format!("w{i}"); 1 + i % 9].join(" ")))
        .collect();
    let mut batch = batch;
    // Two messages of no tokens: fit any budget but none.
    batch.insert(0, new_message("a", ""));
    batch.push(new_message("a", ""));
    let created = store.create_messages("w", "s", batch).await.unwrap();
    // Neighbours with newer messages: another session, the same session's
    // name in another workspace.
    for (workspace, session) in [("w", "other"), ("w2", "s")] {
        let batch = (0..200).map(|i| new_message("a", &format!("neighbour {i}"))).collect();
        store.create_messages(workspace, session, batch).await.unwrap();
    }
    for gone in [300, 251, 181, 4] {
        store.delete_message("w", "s", &created[gone].id).await.unwrap();
    }
    store
        .set_session_summary("w", "s", SummaryKind::Short, "so far", &created[201].id, 30, None)
        .await
        .unwrap();
    let newest_first: Vec<i64> = store
        .context_messages("w", "s", i64::MAX / 2, 0)
        .await
        .unwrap()
        .iter()
        .rev()
        .map(|m| m.token_count)
        .collect();
    assert_eq!(newest_first.len(), 298);
    assert_eq!(newest_first[0], 0, "the newest has no tokens");
    let first_tokens = |n: usize| newest_first[..n].iter().sum::<i64>();
    let budgets = [
        0,
        newest_first[1] - 1,
        newest_first[1],
        first_tokens(40) + 1,
        first_tokens(127),
        first_tokens(128),
        first_tokens(129),
        first_tokens(200) - 1,
        first_tokens(298),
        i64::MAX / 2,
    ];
    let summaries = store.session_summaries("w", "s").await.unwrap();
    assert_eq!(summaries.len(), 1);
    for budget in budgets {
        let walked = store.context_messages("w", "s", budget, 0).await.unwrap();
        let window = store.context_window("w", "s", budget, true).await.unwrap();
        assert_eq!(window.messages, walked, "budget {budget}");
        assert_eq!(window.summaries, summaries, "budget {budget}");
        let without = store.context_window("w", "s", budget, false).await.unwrap();
        assert_eq!((without.messages, without.summaries), (walked, Vec::new()));
    }
    assert!(
        store
            .context_window("w", "s", 0, true)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    assert!(
        store
            .context_window("w", "s", -5, true)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    for with_summaries in [true, false] {
        assert!(matches!(
            store.context_window("w", "missing", 10, with_summaries).await,
            Err(Error::NotFound { .. })
        ));
    }
    store.delete_session("w", "s").await.unwrap();
    for with_summaries in [true, false] {
        assert!(matches!(
            store.context_window("w", "s", 10, with_summaries).await,
            Err(Error::NotFound { .. })
        ));
    }
}

/// Every page, both ways, of a session as written (its messages numbered
/// 1..n, read as ranges of numbers), after deletes left gaps (read past an
/// offset), after more writes, and of a clone of it: the same messages as
/// one ordered list of them all cut into pages. The context walks over the
/// gaps too.
async fn pages_and_contexts_skip_what_was_erased(store: &dyn Store) {
    let batch: Vec<_> = (1..=35)
        .map(|i| new_message(["alice", "bob"][i % 2], &format!("line {i}")))
        .collect();
    let created = store.create_messages("w", "s", batch).await.unwrap();
    let check = |session: &'static str, expected: Vec<String>| async move {
        for size in [1, 7, 10, 100] {
            for reverse in [false, true] {
                let mut want = expected.clone();
                if reverse {
                    want.reverse();
                }
                let pages = (want.len() as i64 + size - 1) / size;
                let mut got = Vec::new();
                for number in 1..=pages + 1 {
                    let request = PageRequest {
                        reverse,
                        ..page(number, size)
                    };
                    let listed = store.list_messages("w", session, &all(), request).await.unwrap();
                    assert_eq!(
                        (listed.total, listed.pages),
                        (want.len() as i64, pages),
                        "{session} size {size}"
                    );
                    got.extend(listed.items.into_iter().map(|m| m.content));
                }
                assert_eq!(got, want, "{session}: size {size}, reverse {reverse}");
            }
        }
    };
    let mut lines: Vec<String> = (1..=35).map(|i| format!("line {i}")).collect();
    check("s", lines.clone()).await;

    for gone in [4, 16, 34] {
        store.delete_message("w", "s", &created[gone].id).await.unwrap();
    }
    lines.retain(|line| !["line 5", "line 17", "line 35"].contains(&line.as_str()));
    check("s", lines.clone()).await;
    let tokens = created[0].token_count;
    let context = store.context_messages("w", "s", 4 * tokens, 0).await.unwrap();
    assert_eq!(
        context.iter().map(|m| m.content.as_str()).collect::<Vec<_>>(),
        ["line 31", "line 32", "line 33", "line 34"],
        "the context steps over the erased newest message"
    );

    let more: Vec<_> = (36..=40).map(|i| new_message("alice", &format!("line {i}"))).collect();
    store.create_messages("w", "s", more).await.unwrap();
    lines.extend((36..=40).map(|i| format!("line {i}")));
    check("s", lines.clone()).await;

    let clone = store.clone_session("w", "s", None).await.unwrap();
    let clone_id: &'static str = Box::leak(clone.id.into_boxed_str());
    check(clone_id, lines.clone()).await;
    assert_eq!(
        store
            .list_messages("w", clone_id, &all(), page(4, 10))
            .await
            .unwrap()
            .items[0]
            .seq_in_session,
        31,
        "a clone is numbered anew, without gaps"
    );
}

async fn session_summaries_are_set_replaced_and_bound_context(store: &dyn Store) {
    let batch = (0..4).map(|i| new_message("a", &format!("message {i}"))).collect();
    let created = store.create_messages("w", "s", batch).await.unwrap();
    assert!(store.session_summaries("w", "s").await.unwrap().is_empty());
    let long = store
        .set_session_summary("w", "s", SummaryKind::Long, "long so far", &created[1].id, 40, None)
        .await
        .unwrap();
    assert_eq!(long.message_seq, created[1].seq_in_session);
    store
        .set_session_summary("w", "s", SummaryKind::Short, "first", &created[0].id, 5, None)
        .await
        .unwrap();
    store
        .set_session_summary("w", "s", SummaryKind::Short, "short so far", &created[2].id, 7, None)
        .await
        .unwrap();
    let summaries = store.session_summaries("w", "s").await.unwrap();
    assert_eq!(
        summaries
            .iter()
            .map(|s| (s.kind, s.content.as_str(), s.message_id.as_str(), s.token_count))
            .collect::<Vec<_>>(),
        [
            (SummaryKind::Short, "short so far", created[2].id.as_str(), 7),
            (SummaryKind::Long, "long so far", created[1].id.as_str(), 40),
        ],
        "one per kind, replaced, short first"
    );
    let foreign = store
        .create_messages("w", "other", vec![new_message("a", "elsewhere")])
        .await
        .unwrap();
    assert!(
        matches!(
            store
                .set_session_summary("w", "s", SummaryKind::Short, "x", &foreign[0].id, 1, None)
                .await,
            Err(Error::NotFound { .. })
        ),
        "the covered message must belong to the session"
    );
    assert!(matches!(
        store.session_summaries("w", "missing").await,
        Err(Error::NotFound { .. })
    ));
    store.delete_session("w", "s").await.unwrap();
    assert!(
        store.session_summaries("w", "s").await.is_err(),
        "summaries go with the session"
    );
}

async fn message_scans_grep_date_and_window(store: &dyn Store) {
    let dated = |peer: &str, content: &str, day: i64| NewMessage {
        created_at: Some(1_700_000_000_000_000 + day * 86_400_000_000),
        ..new_message(peer, content)
    };
    store
        .create_messages(
            "w",
            "s",
            vec![
                dated("alice", "I adopted a cat named 100%_Mochi", 0),
                dated("bob", "What colour is MOCHI?", 1),
                dated("alice", "Mochi is grey.", 2),
                dated("alice", "I also like dogs.", 3),
            ],
        )
        .await
        .unwrap();
    store
        .create_messages("w", "other", vec![dated("carol", "mochi ice cream", 4)])
        .await
        .unwrap();
    let scan = |scan: MessageScan| async move {
        store
            .scan_messages("w", &MessageScan { limit: 10, ..scan })
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.content)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        scan(MessageScan {
            contains: Some("mochi".into()),
            ..MessageScan::default()
        })
        .await,
        [
            "I adopted a cat named 100%_Mochi",
            "What colour is MOCHI?",
            "Mochi is grey.",
            "mochi ice cream"
        ],
        "case-insensitive, oldest first"
    );
    assert_eq!(
        scan(MessageScan {
            contains: Some("0%_m".into()),
            ..MessageScan::default()
        })
        .await,
        ["I adopted a cat named 100%_Mochi"],
        "% and _ are literal"
    );
    assert_eq!(
        scan(MessageScan {
            contains: Some("mochi".into()),
            peer_perspective: Some("bob".into()),
            newest_first: true,
            ..MessageScan::default()
        })
        .await,
        [
            "Mochi is grey.",
            "What colour is MOCHI?",
            "I adopted a cat named 100%_Mochi"
        ],
        "only sessions bob is in"
    );
    assert_eq!(
        scan(MessageScan {
            after: Some(1_700_000_000_000_000 + 86_400_000_000),
            before: Some(1_700_000_000_000_000 + 4 * 86_400_000_000),
            session_ids: Some(vec!["s".into(), "other".into()]),
            ..MessageScan::default()
        })
        .await,
        ["Mochi is grey.", "I also like dogs."],
        "both bounds exclusive"
    );
    assert_eq!(
        scan(MessageScan {
            session_ids: Some(vec!["s".into()]),
            seq_range: Some((2, 3)),
            ..MessageScan::default()
        })
        .await,
        ["What colour is MOCHI?", "Mochi is grey."]
    );
    assert!(
        scan(MessageScan {
            session_ids: Some(Vec::new()),
            ..MessageScan::default()
        })
        .await
        .is_empty(),
        "an empty allowlist selects nothing"
    );
}

async fn idempotent_writes_happen_once_and_twins_wait_for_the_first(store: &dyn Store) {
    let hour = std::time::Duration::from_secs(3600);
    let batch = || vec![new_message("alice", "one"), new_message("bob", "two")];
    let first = store
        .write_messages("w", "s", batch(), Some(&once("k1", "CreateMessages", "body", hour)))
        .await
        .unwrap();
    let again = store
        .write_messages("w", "s", batch(), Some(&once("k1", "CreateMessages", "body", hour)))
        .await
        .unwrap();
    assert_eq!(again, first, "a repeat returns the first call's messages");
    let replayed = store
        .replayed_messages("w", "s", &once("k1", "CreateMessages", "body", hour))
        .await
        .unwrap();
    assert_eq!(replayed.as_ref(), Some(&first));
    assert_eq!(
        store
            .replayed_messages("w", "s", &once("unused", "CreateMessages", "body", hour))
            .await
            .unwrap(),
        None
    );
    let other_body = store
        .write_messages("w", "s", batch(), Some(&once("k1", "CreateMessages", "other", hour)))
        .await;
    assert!(
        matches!(other_body, Err(Error::FailedPrecondition(_))),
        "{other_body:?}"
    );
    assert!(matches!(
        store
            .replayed_messages("w", "s", &once("k1", "CreateMessages", "other", hour))
            .await,
        Err(Error::FailedPrecondition(_))
    ));
    let count = || async { store.list_messages("w", "s", &all(), page(1, 100)).await.unwrap().total };
    assert_eq!(count().await, 2);

    // Eight twins at once: one writes, the others wait for it and replay.
    let key = once("k2", "CreateMessages", "three", hour);
    let twins = (0..8).map(|_| store.write_messages("w", "s", vec![new_message("alice", "three")], Some(&key)));
    let results: Vec<_> = futures::future::join_all(twins).await;
    let ids: std::collections::BTreeSet<String> = results
        .into_iter()
        .map(|result| result.unwrap()[0].id.clone())
        .collect();
    assert_eq!(ids.len(), 1, "every twin got the same message");
    assert_eq!(count().await, 3);

    // Keys are per workspace and per operation, and expire.
    store
        .write_messages("w2", "s", batch(), Some(&once("k1", "CreateMessages", "body", hour)))
        .await
        .unwrap();
    let short = std::time::Duration::from_millis(1);
    store
        .write_messages("w", "s", batch(), Some(&once("k3", "CreateMessages", "body", short)))
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    store
        .write_messages("w", "s", batch(), Some(&once("k3", "CreateMessages", "body", short)))
        .await
        .unwrap();
    assert_eq!(count().await, 7, "an expired key is a new key");
    let conclusion = || vec![new_conclusion("alice", "bob", "Bob counts")];
    let made = store
        .write_conclusions("w", conclusion(), Some(&once("k1", "CreateConclusions", "c", hour)))
        .await
        .unwrap();
    let remade = store
        .write_conclusions("w", conclusion(), Some(&once("k1", "CreateConclusions", "c", hour)))
        .await
        .unwrap();
    assert_eq!(remade, made);
    assert_eq!(store.list_conclusions("w", &all(), page(1, 10)).await.unwrap().total, 1);
}

/// A session's messages from one peer (Honcho's `peer_id` filter on a
/// session's list) are counted and paged from one index range of the
/// session, never by walking every message the peer sent in the workspace
/// (11 ms a page at 50,000 messages on SQLite; docs/benchmarks.md). The
/// plans of the list's count and page are read on each store: SQLite's
/// without statistics (the embedded store never gathers any), Postgres'
/// with them (autovacuum gathers them), where the session's own index is
/// the range.
async fn a_sessions_messages_from_one_peer_are_one_index_range(store: Arc<SqlStore>) {
    use sqlx::Row;
    for session in ["s", "t", "u", "v"] {
        let batch: Vec<_> = (0..200)
            .map(|i| new_message(["alice", "bob"][i % 2], &format!("{session} {i}")))
            .collect();
        store.create_messages("w", session, batch).await.unwrap();
    }
    let by_alice = filter::parse(&filter::MESSAGE, Some(&object(json!({"peer_id": "alice"})))).unwrap();
    let listed = store.list_messages("w", "t", &by_alice, page(3, 10)).await.unwrap();
    assert_eq!(listed.total, 100);
    assert_eq!(
        listed.items.iter().map(|m| m.seq_in_session).collect::<Vec<_>>(),
        (41..60).step_by(2).collect::<Vec<_>>()
    );
    let postgres = store.dialect() == roncho_store::Dialect::Postgres;
    if postgres {
        sqlx::query("ANALYZE messages").execute(store.pool()).await.unwrap();
    }
    let shape = "FROM messages m WHERE m.workspace_name = 'w' AND m.session_name = 't' AND m.peer_name = 'alice'";
    for statement in [
        format!("SELECT COUNT(*) {shape}"),
        format!("SELECT m.* {shape} ORDER BY m.seq_in_session LIMIT 10 OFFSET 20"),
    ] {
        let plan = if postgres {
            let mut connection = store.pool().begin().await.unwrap();
            // Four sessions fit a few pages, which Postgres would read
            // whole: what is asked is which index it reads them by.
            sqlx::query("SET LOCAL enable_seqscan = off")
                .execute(&mut *connection)
                .await
                .unwrap();
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {statement}")))
                .fetch_all(&mut *connection)
                .await
                .unwrap();
            rows.iter().map(|row| row.get::<String, _>(0)).collect::<Vec<_>>()
        } else {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {statement}")))
                .fetch_all(store.pool())
                .await
                .unwrap();
            rows.iter().map(|row| row.get::<String, _>("detail")).collect()
        }
        .join("\n");
        let one_range = if postgres {
            plan.contains("Index Cond: ((workspace_name = 'w'::text) AND (session_name = 't'::text))")
                && !plan.contains("messages_by_peer")
        } else {
            plan.contains("INDEX messages_by_peer (workspace_name=? AND peer_name=? AND session_name=?)")
                && !plan.contains("TEMP B-TREE")
        };
        assert!(one_range, "{statement}:\n{plan}");
    }
}
