//! A message is found by its own meaning, and never outranked by a
//! neighbour that only stands beside it. SearchMessages for "pet cat" — no
//! word in common with any line — must return a line about the kitten
//! first, in every variant of a conversation about sourdough bread, a
//! motorbike carburetor, a kitten from a shelter and tax forms: one speaker
//! or two alternating, the kitten first, in the middle or last, said twice
//! with small talk between, and told over several lines in a row (which
//! then lead the results together). Embedding each message together with
//! the turn before it made the line after the kitten inherit its meaning:
//! "pet cat" found the tax forms, then small talk about the weather. With
//! the real default model, bge-small-en-v1.5 (`RONCHO_TEST_EMBED_MODEL_DIR`), on SQLite
//! with the embedded vector store and on Postgres with the real Qdrant.

use std::sync::Arc;

use roncho_core::embed::Embedder;
use roncho_core::vector::VectorStore;
use roncho_proto::v1 as pb;
use roncho_proto::v1::ingest_service_client::IngestServiceClient;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use tonic::transport::Channel;

use crate::support;

const BREAD: &str = "I baked a loaf of sourdough bread this weekend.";
const MOTORBIKE: &str = "The carburetor on my motorbike needs a good cleaning.";
const KITTEN: &str = "We adopted a little kitten from the animal shelter.";
const TAXES: &str = "I still have to fill in my tax forms before the deadline.";
const KITTEN_MORE: [&str; 2] = [
    "She is a tiny grey tabby with white paws.",
    "She purrs on my lap every evening and chases the laser dot.",
];
const SMALL_TALK: [&str; 6] = [
    "The weather has been lovely lately.",
    "Oh really? Tell me more.",
    "Haha, that sounds like you.",
    "I know what you mean.",
    "How was the rest of your week?",
    "Sounds good to me.",
];

/// A conversation to search, and which of its lines are about the cat.
struct Variant {
    name: &'static str,
    lines: Vec<&'static str>,
    /// Speakers take turns (alice, bob, alice, …); else alice says everything.
    alternating: bool,
    /// How many of the first results must all be lines about the cat.
    leading: usize,
}

fn variants() -> Vec<Variant> {
    let [weather, really, haha, know, week, good] = SMALL_TALK;
    let variant = |name, lines: Vec<&'static str>, alternating, leading| Variant {
        name,
        lines,
        alternating,
        leading,
    };
    vec![
        variant(
            "one speaker, kitten third",
            vec![BREAD, MOTORBIKE, KITTEN, TAXES],
            false,
            1,
        ),
        variant("kitten first", vec![KITTEN, TAXES, BREAD, MOTORBIKE], false, 1),
        variant("kitten last", vec![BREAD, TAXES, MOTORBIKE, KITTEN], true, 1),
        variant(
            "small talk after each line",
            vec![BREAD, weather, MOTORBIKE, really, KITTEN, weather, TAXES, haha],
            true,
            1,
        ),
        // The case: 20 lines, two speakers, each topic said twice.
        variant(
            "twenty lines, topics repeated",
            vec![
                BREAD, really, MOTORBIKE, haha, KITTEN, weather, TAXES, know, week, good, BREAD, weather, KITTEN,
                weather, MOTORBIKE, know, TAXES, haha, good, really,
            ],
            true,
            2,
        ),
        variant(
            "kitten, small talk, kitten again",
            vec![TAXES, KITTEN, weather, KITTEN, BREAD, MOTORBIKE],
            true,
            2,
        ),
        variant(
            "the cat over three lines in a row",
            vec![
                BREAD,
                MOTORBIKE,
                KITTEN,
                KITTEN_MORE[0],
                KITTEN_MORE[1],
                TAXES,
                weather,
                haha,
            ],
            true,
            3,
        ),
    ]
}

fn is_about_the_cat(line: &str) -> bool {
    line == KITTEN || KITTEN_MORE.contains(&line)
}

/// Writes each variant in a workspace of its own.
async fn write(channel: &Channel, workspace_id: &str, variant: &Variant) {
    let messages = variant
        .lines
        .iter()
        .enumerate()
        .map(|(at, line)| pb::MessageCreate {
            peer_id: if variant.alternating && at % 2 == 1 {
                "bob"
            } else {
                "alice"
            }
            .into(),
            content: (*line).into(),
            ..Default::default()
        })
        .collect();
    IngestServiceClient::new(channel.clone())
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: workspace_id.into(),
            session_id: "s".into(),
            messages,
            idempotency_key: None,
        })
        .await
        .unwrap();
}

/// Writes every variant, syncs their vectors and asks "pet cat" of each.
async fn pet_cat_finds_the_cat_first(
    store: Arc<roncho_store::SqlStore>,
    embedder: Arc<dyn Embedder>,
    vectors: Arc<dyn VectorStore>,
) {
    let (served, reconciler) = support::serve_semantic(store, embedder, vectors).await;
    let variants = variants();
    for (at, variant) in variants.iter().enumerate() {
        write(&served.channel, &format!("w{at}"), variant).await;
    }
    let report = reconciler.pass().await.unwrap();
    assert_eq!(report.failed, 0, "{report:?}");
    let mut failures = Vec::new();
    for (at, variant) in variants.iter().enumerate() {
        let found = RecallServiceClient::new(served.channel.clone())
            .search_messages(pb::SearchMessagesRequest {
                workspace_id: format!("w{at}"),
                query: "pet cat".into(),
                limit: 5,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(found.mode, "hybrid", "{}: {found:?}", variant.name);
        let order: Vec<&str> = found.messages.iter().map(|message| message.content.as_str()).collect();
        if !order.iter().take(variant.leading).all(|line| is_about_the_cat(line)) {
            failures.push(format!("{}: {order:?}", variant.name));
        }
    }
    assert!(failures.is_empty(), "the cat did not lead:\n{}", failures.join("\n"));
    served.shutdown.cancel();
}

#[tokio::test]
async fn pet_cat_finds_the_kitten_on_sqlite() {
    let Some(embedder) = support::local_model().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let vectors = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    pet_cat_finds_the_cat_first(store, embedder, vectors).await;
}

#[tokio::test]
async fn pet_cat_finds_the_kitten_on_postgres_and_qdrant() {
    let Some(embedder) = support::local_model().await else {
        return;
    };
    let Some(backends) = support::Distributed::open("meaning").await else {
        return;
    };
    pet_cat_finds_the_cat_first(backends.store.clone(), embedder, backends.qdrant.clone()).await;
    backends.close().await;
}
