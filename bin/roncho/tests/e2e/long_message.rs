//! A long message is found by meaning past the model's window, and erased
//! whole. A plan of some 600 tokens says only in its last paragraph that
//! the user's daughter cannot eat peanuts; "child nut allergy" shares no
//! word with it. The default model (bge-small-en-v1.5,
//! `RONCHO_TEST_EMBED_MODEL_DIR`) reads 256 tokens of a text, so before
//! passages the message's one vector held none of it. Now the reconciler
//! embeds its passages, search scores it by the nearest and says which
//! (`SearchMatch.passage`), and deleting the message leaves no passage in
//! the vector store. On SQLite with the embedded vector store and on
//! Postgres with the real Qdrant.

use std::sync::Arc;

use roncho_core::embed::Embedder;
use roncho_core::vector::VectorStore;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;

use crate::support;

const FACT: &str = "One more thing before Friday: my daughter cannot eat peanuts. Her reaction last spring put her \
     in hospital for two days, so please keep peanut butter, satay and trail mix out of the team lunch order, and \
     ask the caterer to label every dish she might be offered.";

/// Short turns on other topics, each a candidate by meaning.
const OTHERS: [&str; 8] = [
    "I baked a loaf of sourdough bread this weekend.",
    "The carburetor on my motorbike needs a good cleaning.",
    "I still have to fill in my tax forms before the deadline.",
    "Can you rename the staging bucket before the release?",
    "The weather has been lovely lately.",
    "Our dog loves running on the beach at sunrise.",
    "Please summarise yesterday's standup notes for me.",
    "The quarterly report is due next Tuesday.",
];

/// The assistant's migration plan: numbered steps on schema work (no word
/// of the query), then [`FACT`] after its first 512 tokens.
fn long_plan() -> String {
    let topics = [
        "copy the orders table into a shadow schema",
        "backfill the invoice columns in batches of ten thousand rows",
        "verify the row counts against the replica",
        "switch the read path behind a feature flag",
        "watch the error budget on the dashboard for an hour",
        "drop the old indexes once traffic has moved",
        "rotate the service credentials used by the worker",
        "rebuild the search index from the new tables",
    ];
    let mut plan = String::from("Here is the migration plan we agreed on.\n");
    for step in 0..48 {
        plan.push_str(&format!(
            "Step {}: {} and record the duration in the runbook.\n",
            step + 1,
            topics[step % topics.len()]
        ));
    }
    plan.push_str(FACT);
    plan
}

/// Where the vector store's copy of a message is looked for after it is erased.
enum Held {
    /// The `vectors` table of the SQL store (its `passages` column).
    Rows(Arc<roncho_store::SqlStore>),
    /// Every point of the namespace, read with Qdrant's scroll.
    Points(Arc<roncho_qdrant::QdrantVectorStore>),
}

impl Held {
    /// How many vectors of `id` the store holds: its first passage's and the later ones.
    async fn vectors_of(&self, id: &str) -> usize {
        match self {
            Held::Rows(store) => {
                let rows: Vec<(Vec<u8>, Option<Vec<u8>>)> =
                    sqlx::query_as("SELECT vector, passages FROM vectors WHERE namespace = 'msg/w' AND id = $1")
                        .bind(id)
                        .fetch_all(store.pool())
                        .await
                        .unwrap();
                rows.iter()
                    .map(|(vector, passages)| 1 + passages.as_ref().map_or(0, |bytes| bytes.len() / vector.len()))
                    .sum()
            }
            Held::Points(qdrant) => {
                let points = qdrant.scroll("msg/w").await.unwrap();
                points.iter().filter(|(point, _)| point == id).count()
            }
        }
    }
}

async fn found_by_a_later_passage_and_erased_whole(
    store: Arc<roncho_store::SqlStore>,
    embedder: Arc<dyn Embedder>,
    vectors: Arc<dyn VectorStore>,
    held: Held,
) {
    let plan = long_plan();
    let spoken = format!("assistant: {plan}");
    let passages = embedder.passages(&spoken);
    let fact_at = spoken.find(FACT).unwrap();
    assert!(
        passages.len() >= 3 && passages[1].end < fact_at,
        "the fact lies past the first two windows (512 tokens): {passages:?}, fact at byte {fact_at}"
    );
    let (served, reconciler) = support::serve_semantic(store, embedder, vectors).await;
    let mut messages: Vec<pb::MessageCreate> = OTHERS
        .iter()
        .map(|line| pb::MessageCreate {
            peer_id: "user".into(),
            content: (*line).into(),
            ..Default::default()
        })
        .collect();
    messages.insert(
        4,
        pb::MessageCreate {
            peer_id: "assistant".into(),
            content: plan.clone(),
            ..Default::default()
        },
    );
    let written = IngestServiceClient::new(served.channel.clone())
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages,
            idempotency_key: None,
        })
        .await
        .unwrap()
        .into_inner()
        .messages;
    let long = written
        .iter()
        .find(|message| message.content == plan)
        .unwrap()
        .id
        .clone();
    let search = || async {
        RecallServiceClient::new(served.channel.clone())
            .search_messages(pb::SearchMessagesRequest {
                workspace_id: "w".into(),
                query: "child nut allergy".into(),
                limit: 3,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
    };

    // Before the reconciler: found by words only, and the reply says meaning is behind.
    let waiting = search().await;
    assert_eq!(waiting.unembedded_messages, written.len() as i64, "{waiting:?}");
    assert!(waiting.meaning_lag_seconds >= 0.0, "{waiting:?}");

    let report = reconciler.pass().await.unwrap();
    assert_eq!(report.failed, 0, "{report:?}");
    assert_eq!(held.vectors_of(&long).await, passages.len(), "one vector per passage");

    let found = search().await;
    assert_eq!(found.mode, "hybrid", "{found:?}");
    assert_eq!(
        (found.unembedded_messages, found.meaning_lag_seconds),
        (0, 0.0),
        "caught up"
    );
    let first = found.messages.first().map(|message| message.id.as_str());
    assert_eq!(first, Some(long.as_str()), "the plan leads: {:?}", found.messages);
    let why = &found.matches[0];
    assert_eq!(why.message_id, long);
    assert!(why.by_meaning && !why.by_words, "by meaning alone: {why:?}");
    let nearest = &passages[why.passage as usize];
    assert!(
        why.passage >= 2 && nearest.end > fact_at,
        "by the passage that holds the fact: {why:?} of {passages:?}"
    );

    // Erasing the message takes every passage with it.
    IngestServiceClient::new(served.channel.clone())
        .delete_message(pb::DeleteMessageRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            message_id: long.clone(),
        })
        .await
        .unwrap();
    reconciler.pass().await.unwrap();
    assert_eq!(held.vectors_of(&long).await, 0, "no passage outlives the message");
    let after = search().await;
    assert!(after.messages.iter().all(|message| message.id != long), "{after:?}");
    served.shutdown.cancel();
}

#[tokio::test]
async fn a_fact_past_the_window_is_found_by_meaning_and_erased_whole_on_sqlite() {
    let Some(embedder) = support::local_model().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let vectors = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    found_by_a_later_passage_and_erased_whole(store.clone(), embedder, vectors, Held::Rows(store)).await;
}

#[tokio::test]
async fn a_fact_past_the_window_is_found_by_meaning_and_erased_whole_on_postgres_and_qdrant() {
    let Some(embedder) = support::local_model().await else {
        return;
    };
    let Some(backends) = support::Distributed::open("long").await else {
        return;
    };
    let (store, qdrant) = (backends.store.clone(), backends.qdrant.clone());
    found_by_a_later_passage_and_erased_whole(store, embedder, qdrant.clone(), Held::Points(qdrant)).await;
    backends.close().await;
}
