//! A message is found by its own meaning. In a four-line conversation
//! (sourdough bread, a motorbike carburetor, a kitten from a shelter, tax
//! forms) SearchMessages for "pet cat" — no word in common with any line —
//! must return the kitten first. It returned the tax forms while each
//! message was embedded together with the turn before it: the turn after a
//! message inherited its meaning, and the message itself was diluted. With
//! the real default model, bge-small-en-v1.5 (`RONCHO_TEST_EMBED_MODEL_DIR`), on SQLite
//! with the embedded vector store and on Postgres with the real Qdrant.

use std::sync::Arc;

use roncho::config::Role;
use roncho::server::Services;
use roncho_core::embed::Embedder;
use roncho_core::vector::VectorStore;
use roncho_proto::v1 as pb;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use roncho_reconciler::{Reconciler, ReconcilerConfig};

use crate::support;

const LINES: [&str; 4] = [
    "I baked a loaf of sourdough bread this weekend.",
    "The carburetor on my motorbike needs a good cleaning.",
    "We adopted a little kitten from the animal shelter.",
    "I still have to fill in my tax forms before the deadline.",
];

async fn local_model() -> Option<Arc<dyn Embedder>> {
    let dir = roncho_store::testing::integration_env("RONCHO_TEST_EMBED_MODEL_DIR")?;
    let embedder = tokio::task::spawn_blocking(move || roncho_embed::bert::BertEmbedder::load(dir.as_ref()))
        .await
        .unwrap()
        .unwrap();
    Some(Arc::new(embedder))
}

/// Writes the conversation, syncs its vectors and asks "pet cat".
async fn first_hit_for_pet_cat(
    store: Arc<roncho_store::SqlStore>,
    embedder: Arc<dyn Embedder>,
    vectors: Arc<dyn VectorStore>,
) {
    let reconciler = Reconciler::new(
        store.clone(),
        embedder.clone(),
        vectors.clone(),
        ReconcilerConfig::default(),
    );
    let services = Services {
        semantic: Some(roncho_search::Semantic::new(embedder, vectors)),
        ..Services::store_only(store)
    };
    let served = support::serve(services, &Role::ALL).await;
    let created = support::write_as(&served.channel, "alice", &LINES).await;
    reconciler.pass().await.unwrap();
    let found = RecallServiceClient::new(served.channel.clone())
        .search_messages(pb::SearchMessagesRequest {
            workspace_id: "w".into(),
            query: "pet cat".into(),
            limit: 4,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(found.mode, "hybrid", "{found:?}");
    let order: Vec<&str> = found.messages.iter().map(|message| message.content.as_str()).collect();
    assert_eq!(found.messages[0].id, created[2].id, "the kitten first: {order:?}");
    served.shutdown.cancel();
}

#[tokio::test]
async fn pet_cat_finds_the_kitten_on_sqlite() {
    let Some(embedder) = local_model().await else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = roncho_store::testing::open_embedded(dir.path()).await;
    let vectors = Arc::new(roncho_store::SqlVectorStore::new(store.clone()));
    first_hit_for_pet_cat(store, embedder, vectors).await;
}

#[tokio::test]
async fn pet_cat_finds_the_kitten_on_postgres_and_qdrant() {
    let Some(embedder) = local_model().await else { return };
    let Some((database, qdrant_url)) = support::postgres_and_qdrant().await else {
        return;
    };
    let store = roncho_store::testing::open_migrated(&database.url).await;
    let mut options = roncho_qdrant::QdrantOptions::new(qdrant_url);
    options.collection = format!("meaning_{}", roncho_store::testing::unique_name());
    let qdrant = Arc::new(roncho_qdrant::QdrantVectorStore::connect(&options).unwrap());
    first_hit_for_pet_cat(store.clone(), embedder, qdrant.clone()).await;
    qdrant.drop_collection().await.unwrap();
    store.close().await;
    database.drop_database().await;
}
