//! The tools against a real store (embedded SQLite) with the test embedder
//! and the exact vector store, vectors synced as the reconciler would.

use std::sync::Arc;

use roncho_agent::ToolContext;
use roncho_core::embed::Embedder;
use roncho_core::model::{JsonObject, NewConclusion, NewMessage};
use roncho_core::store::{Memory, Messages};
use roncho_core::vector::{VectorRecord, VectorStore, documents_namespace, messages_namespace};
use roncho_search::Semantic;
use serde_json::json;

struct World {
    store: Arc<roncho_store::SqlStore>,
    semantic: Semantic,
    facts: Vec<String>,
    messages: Vec<String>,
    _dir: tempfile::TempDir,
}

fn said(peer: &str, content: &str, day: i64) -> NewMessage {
    NewMessage {
        peer_id: peer.into(),
        content: content.into(),
        metadata: JsonObject::new(),
        configuration: JsonObject::new(),
        created_at: Some(1_700_000_000_000_000 + day * 86_400_000_000),
        token_count: 8,
    }
}

/// Alice and Bob talk in two sessions; Carol has a session of her own.
/// Bob holds two explicit facts about Alice.
async fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let mut messages = Vec::new();
    for (session, batch) in [
        (
            "s1",
            vec![
                said("alice", "I adopted a grey cat named Mochi.", 0),
                said("bob", "Nice! How old is Mochi?", 0),
                said("alice", "Two years old. I also run every morning.", 0),
            ],
        ),
        (
            "s2",
            vec![
                said("alice", "I moved to Lisbon last month.", 30),
                said("bob", "Do you like Lisbon?", 30),
            ],
        ),
        ("s3", vec![said("carol", "Mochi is my secret codename.", 31)]),
    ] {
        for message in store.create_messages("w", session, batch).await.unwrap() {
            messages.push(message.id);
        }
    }
    let fact = |content: &str, session: &str, source: &str| NewConclusion {
        observer_id: "bob".into(),
        observed_id: "alice".into(),
        session_id: Some(session.into()),
        level: "explicit".into(),
        content: content.into(),
        premises: Vec::new(),
        source_ids: vec![source.into()],
        metadata: JsonObject::new(),
    };
    let facts: Vec<String> = store
        .create_conclusions(
            "w",
            vec![
                fact("Alice has a grey cat named Mochi", "s1", &messages[0]),
                fact("Alice lives in Lisbon", "s2", &messages[3]),
            ],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    let embedder = Arc::new(roncho_embed::hashing::TestHashingEmbedder::new(256));
    let vectors: Arc<dyn VectorStore> = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    vectors.check_dimensions(256, &embedder.model_id()).await.unwrap();
    let all = store
        .messages_by_ids("w", &messages, &roncho_core::filter::Filter::All, None)
        .await
        .unwrap();
    let records = all
        .iter()
        .map(|m| VectorRecord {
            id: m.id.clone(),
            vector: embedder.embed_one(&m.content),
            session_id: Some(m.session_id.clone()),
            peer_id: Some(m.peer_id.clone()),
            level: None,
            lexical: None,
            passages: Vec::new(),
        })
        .collect();
    vectors.upsert(&messages_namespace("w"), records).await.unwrap();
    let conclusions = store.conclusions_by_ids("w", &facts).await.unwrap();
    let records = conclusions
        .iter()
        .map(|c| VectorRecord {
            id: c.id.clone(),
            vector: embedder.embed_one(&c.content),
            session_id: c.session_id.clone(),
            peer_id: None,
            level: Some(c.level.clone()),
            lexical: None,
            passages: Vec::new(),
        })
        .collect();
    vectors
        .upsert(&documents_namespace("w", "bob", "alice"), records)
        .await
        .unwrap();
    World {
        store,
        semantic: Semantic::new(embedder, vectors),
        facts,
        messages,
        _dir: dir,
    }
}

fn bob_about_alice(world: &World, session: Option<&str>) -> ToolContext {
    let store = world.store.clone();
    ToolContext::new(
        store,
        Some(world.semantic.clone()),
        "w",
        "bob",
        "alice",
        session.map(str::to_owned),
    )
}

#[tokio::test]
async fn reading_tools_find_what_the_observer_could_see() {
    let world = world().await;
    let tools = bob_about_alice(&world, Some("s1"));
    let memory = tools
        .execute("search_memory", &json!({"query": "cat Mochi"}))
        .await
        .unwrap();
    assert!(
        memory.starts_with("Found") && memory.contains(&format!("[id:{}]", world.facts[0])),
        "{memory}"
    );
    assert!(
        memory.contains(&format!("(message_ids: {})", world.messages[0])),
        "{memory}"
    );

    let grep = tools
        .execute("grep_messages", &json!({"text": "MOCHI", "context_window": 0}))
        .await
        .unwrap();
    assert!(grep.contains("alice: I adopted a grey cat named Mochi."), "{grep}");
    assert!(
        !grep.contains("secret codename"),
        "Carol's session is not Bob's to read: {grep}"
    );

    let context = tools
        .execute("get_observation_context", &json!({"message_ids": [world.messages[1]]}))
        .await
        .unwrap();
    assert_eq!(
        context.matches("[id:").count(),
        3,
        "the message and one on each side: {context}"
    );

    let dated = tools
        .execute(
            "get_messages_by_date_range",
            &json!({"after_date": "2023-12-01", "order": "asc"}),
        )
        .await
        .unwrap();
    assert!(
        dated.contains("Lisbon last month") && !dated.contains("grey cat"),
        "{dated}"
    );
    let bad = tools
        .execute("get_messages_by_date_range", &json!({"after_date": "yesterday"}))
        .await
        .unwrap();
    assert!(bad.starts_with("error: after_date"), "{bad}");

    let searched = tools
        .execute("search_messages", &json!({"query": "Lisbon"}))
        .await
        .unwrap();
    assert!(
        searched.starts_with("Found") && searched.lines().nth(1) == Some("--- session s2 ---"),
        "best match first: {searched}"
    );
    assert_eq!(
        searched.matches("--- session s2").count(),
        1,
        "nearby matches merge: {searched}"
    );
    assert!(!searched.contains("session s3"), "{searched}");

    let history = tools.execute("get_recent_history", &json!({})).await.unwrap();
    assert_eq!(history.lines().count(), 3, "{history}");

    // Under an allowlist only those sessions are visible.
    let limited = bob_about_alice(&world, None).with_allowed_sessions(Some(vec!["s2".into()]));
    let memory = limited
        .execute("search_memory", &json!({"query": "cat Mochi"}))
        .await
        .unwrap();
    assert!(!memory.contains(&world.facts[0]), "{memory}");
    let grep = limited
        .execute("grep_messages", &json!({"text": "mochi"}))
        .await
        .unwrap();
    assert!(grep.starts_with("No messages"), "{grep}");
}

#[tokio::test]
async fn writing_tools_validate_record_and_chain() {
    let world = world().await;
    let tools = bob_about_alice(&world, Some("s2"));
    let created = tools
        .execute(
            "create_observations_deductive",
            &json!({"observations": [
                {"content": "Alice has a pet in Lisbon", "source_ids": [world.facts[0], world.facts[1]],
                 "premises": ["Alice has a cat", "Alice lives in Lisbon"]},
                {"content": "Alice owns a boat", "source_ids": ["made-up-id"], "premises": ["?"]},
                {"content": "No sources", "source_ids": [], "premises": ["?"]}
            ]}),
        )
        .await
        .unwrap();
    assert!(created.starts_with("Created 1 observations"), "{created}");
    assert!(
        created.contains("Rejected 2") && created.contains("made-up-id"),
        "{created}"
    );
    let deduction = tools.log().created[0].clone();

    let inductive = tools
        .execute(
            "create_observations_inductive",
            &json!({"observations": [{"content": "Alice settles in quickly", "source_ids": [world.facts[1]],
                "sources": ["one"], "pattern_type": "tendency", "confidence": "low"}]}),
        )
        .await
        .unwrap();
    assert!(
        inductive.starts_with("Created 0") && inductive.contains("at least 2"),
        "{inductive}"
    );

    let chain = tools
        .execute("get_reasoning_chain", &json!({"observation_id": world.facts[0]}))
        .await
        .unwrap();
    assert!(
        chain.contains(&format!("from messages: {}", world.messages[0])),
        "an explicit fact's premises are its messages: {chain}"
    );
    assert!(
        chain.contains(&format!("[id:{deduction}]")),
        "what depends on it: {chain}"
    );
    let up = tools
        .execute(
            "get_reasoning_chain",
            &json!({"observation_id": deduction, "direction": "premises"}),
        )
        .await
        .unwrap();
    assert!(up.contains(&world.facts[0]) && up.contains(&world.facts[1]), "{up}");

    let card = tools
        .execute(
            "update_peer_card",
            &json!({"content": ["IDENTITY: Alice", "lives in Lisbon", "IDENTITY: Alice"]}),
        )
        .await
        .unwrap();
    assert!(card.contains("2 entries"), "{card}");
    assert_eq!(
        world.store.get_peer_card("w", "bob", "alice").await.unwrap().unwrap(),
        ["IDENTITY: Alice", "ATTRIBUTE: lives in Lisbon"]
    );
    let shown = tools.execute("get_peer_card", &json!({})).await.unwrap();
    assert!(shown.contains("ATTRIBUTE: lives in Lisbon"), "{shown}");

    let deleted = tools
        .execute(
            "delete_observations",
            &json!({"observation_ids": [world.facts[1], "nope"]}),
        )
        .await
        .unwrap();
    assert_eq!(deleted, "Deleted 1 observations; not found: nope");
    assert!(
        world
            .store
            .conclusions_by_ids("w", &[world.facts[1].clone()])
            .await
            .unwrap()
            .is_empty(),
        "soft-deleted"
    );
    let log = tools.log();
    assert_eq!((log.created.len(), log.deleted.len(), log.card_updated), (1, 1, true));

    // Another observer's tools cannot touch Bob's collection.
    let store = world.store.clone();
    let carol = ToolContext::new(store, None, "w", "carol", "alice", None);
    let refused = carol
        .execute("delete_observations", &json!({"observation_ids": [world.facts[0]]}))
        .await
        .unwrap();
    assert!(refused.starts_with("Deleted 0"), "{refused}");
    let unknown = carol.execute("rm_rf", &json!({})).await.unwrap();
    assert_eq!(unknown, "error: unknown tool `rm_rf`");
}
