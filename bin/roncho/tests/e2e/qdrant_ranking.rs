//! In the distributed mode Qdrant ranks full text: once a message's vectors
//! are synced, SearchMessages takes both candidate lists (BM25 over the
//! sparse `text` vectors, and the nearest dense vectors) from Qdrant, side
//! by side, and Postgres only looks up their rows and searches the newest
//! messages Qdrant has not seen. On the real Postgres and the real Qdrant.
//!
//! What tells the rankers apart: after the sync, the test rewrites two rows
//! behind roncho's back. A row whose words are gone from Postgres is still
//! found by them (Qdrant indexed them); a row that gained words only in
//! Postgres is not (Postgres did not rank the workspace). The same holds
//! with the embedder down: Qdrant still ranks the query's words. A message
//! written after the sync is found at once (the unsynced tail). And the
//! query's words go to Qdrant without waiting for its embedding.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use roncho::config::Role;
use roncho::server::Serving;
use roncho_core::Result;
use roncho_core::embed::Embedder;
use roncho_core::filter::Filter;
use roncho_core::lexical::TermCounts;
use roncho_core::model::{MeaningLag, Message, MessageQuery, SyncKind};
use roncho_core::store::{SyncLedger, TextSearch};
use roncho_core::vector::{Found, SearchFailure, SearchPlan, VectorFilter, VectorHit, VectorRecord, VectorStore};
use roncho_proto::v1 as pb;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use roncho_reconciler::{Reconciler, ReconcilerConfig};
use tokio::sync::Notify;
use tonic::transport::Channel;

use crate::support;

/// Postgres, a fresh Qdrant collection, a switchable test embedder (up), a
/// reconciler and every role served over them.
struct Setup {
    database: roncho_store::testing::FreshDatabase,
    store: Arc<roncho_store::SqlStore>,
    qdrant: Arc<roncho_qdrant::QdrantVectorStore>,
    embedder: Arc<roncho_embed::testing::SwitchableTestEmbedder>,
    reconciler: Reconciler,
    served: support::Served,
}

impl Setup {
    async fn start(collection: &str) -> Option<Self> {
        let (database, qdrant_url) = support::postgres_and_qdrant().await?;
        let store = roncho_store::testing::open_migrated(&database.url).await;
        let mut options = roncho_qdrant::QdrantOptions::new(qdrant_url);
        options.collection = format!("{collection}_{}", roncho_store::testing::unique_name());
        let qdrant = Arc::new(
            roncho_qdrant::QdrantVectorStore::connect(&options)
                .unwrap()
                .counting_terms_in(store.clone()),
        );
        let embedder = Arc::new(roncho_embed::testing::SwitchableTestEmbedder::down(64));
        embedder.set_up(true);
        let reconciler = Reconciler::new(
            store.clone(),
            embedder.clone(),
            qdrant.clone(),
            ReconcilerConfig::default(),
        );
        let dyn_store = store.clone();
        let mut services = Serving::store_only(dyn_store);
        services.domain.semantic = Some(roncho_search::Semantic::new(embedder.clone(), qdrant.clone()));
        let served = support::serve(services, &Role::ALL).await;
        Some(Self {
            database,
            store,
            qdrant,
            embedder,
            reconciler,
            served,
        })
    }

    async fn finish(self) {
        self.served.shutdown.cancel();
        self.qdrant.drop_collection().await.unwrap();
        self.store.close().await;
        self.database.drop_database().await;
    }
}

async fn search(channel: &Channel, query: &str, limit: i32) -> pb::SearchMessagesResponse {
    RecallServiceClient::new(channel.clone())
        .search_messages(pb::SearchMessagesRequest {
            workspace_id: "w".into(),
            query: query.into(),
            limit,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

fn ids(found: &pb::SearchMessagesResponse) -> Vec<&str> {
    found.messages.iter().map(|message| message.id.as_str()).collect()
}

#[tokio::test]
async fn qdrant_ranks_full_text_once_synced_and_the_database_the_unsynced_tail() {
    let Some(setup) = Setup::start("ranking").await else {
        return;
    };

    let kittens: Vec<String> = (0..20)
        .map(|i| format!("The kitten number {i} sleeps on the sofa"))
        .collect();
    let fillers: Vec<String> = (0..30)
        .map(|i| format!("Filler line {i} about weather and trains"))
        .collect();
    let mut texts: Vec<&str> = vec!["I still have to fill in my tax forms before the deadline."];
    texts.extend(kittens.iter().map(String::as_str));
    texts.extend(fillers.iter().map(String::as_str));
    let created = support::write_as(&setup.served.channel, "alice", &texts).await;
    let (taxes, first_kitten) = (&created[0], &created[1]);
    setup.reconciler.pass().await.unwrap();

    // Behind roncho's back: the tax line says "kitten" in Postgres only, and
    // the first kitten line no longer says it there.
    for (id, content) in [
        (&taxes.id, "kitten kitten kitten kitten"),
        (&first_kitten.id, "nothing to see"),
    ] {
        sqlx::query("UPDATE messages SET content = $1 WHERE public_id = $2")
            .bind(content)
            .bind(id.clone())
            .execute(setup.store.pool())
            .await
            .unwrap();
    }
    let found = search(&setup.served.channel, "kitten", 20).await;
    assert_eq!(found.mode, "hybrid", "{found:?}");
    assert!(
        ids(&found).contains(&first_kitten.id.as_str()),
        "found by the words Qdrant indexed: {:?}",
        ids(&found)
    );
    assert!(
        !ids(&found).contains(&taxes.id.as_str()),
        "words only Postgres has do not rank: {:?}",
        ids(&found)
    );
    assert_eq!(found.messages.len(), 20);

    // The embedder down: no query vector, and still Qdrant ranks the words.
    // (A new query: "kitten" again would take its vector from the query cache.)
    setup.embedder.set_up(false);
    let found = search(&setup.served.channel, "kittens", 20).await;
    assert_eq!(found.mode, "full_text", "{found:?}");
    assert!(
        found.degraded_reason.contains("semantic search unavailable"),
        "{found:?}"
    );
    assert!(ids(&found).contains(&first_kitten.id.as_str()), "{:?}", ids(&found));
    assert!(!ids(&found).contains(&taxes.id.as_str()), "{:?}", ids(&found));
    assert_eq!(found.messages.len(), 20);
    setup.embedder.set_up(true);

    // Written after the sync: not in Qdrant, found through the database's tail.
    let fresh = support::write_as(&setup.served.channel, "alice", &["A zebra crossed the road"]).await;
    assert_eq!(
        setup.store.sync_counts(SyncKind::Message).await.unwrap().pending,
        1,
        "the new message is not synced yet"
    );
    let found = search(&setup.served.channel, "zebra", 5).await;
    assert_eq!(ids(&found)[0], fresh[0].id, "{:?}", ids(&found));
    setup.reconciler.pass().await.unwrap();
    let found = search(&setup.served.channel, "zebra", 5).await;
    assert_eq!(ids(&found)[0], fresh[0].id, "still first once Qdrant has it");

    setup.finish().await;
}

/// Writes `count` messages of `peer` to workspace `x`, all about trains.
async fn trains_elsewhere(channel: &Channel, count: usize) {
    let trains: Vec<pb::MessageCreate> = (0..count)
        .map(|i| pb::MessageCreate {
            peer_id: "carol".into(),
            content: format!("Train {i} left the station on time"),
            ..Default::default()
        })
        .collect();
    let mut ingest = roncho_proto::v1::ingest_service_client::IngestServiceClient::new(channel.clone());
    for batch in trains.chunks(100) {
        ingest
            .create_messages(pb::CreateMessagesRequest {
                workspace_id: "x".into(),
                session_id: "s".into(),
                messages: batch.to_vec(),
                idempotency_key: None,
            })
            .await
            .unwrap();
    }
}

/// One Qdrant collection holds every workspace, and Qdrant's own `Idf`
/// modifier would count a word over all of them: a neighbour talking of
/// trains all the time made "trains" weigh next to nothing in another
/// workspace. BM25's statistics are the workspace's own instead (the
/// reconciler counts each message's terms in the database; search weighs
/// the query by them): the neighbour moves nothing.
#[tokio::test]
async fn a_neighbouring_workspace_never_moves_a_ranking_by_words() {
    let Some(setup) = Setup::start("neighbours").await else {
        return;
    };
    let written = support::write_as(
        &setup.served.channel,
        "alice",
        &[
            "The trains were late again today",
            "My garden roses bloomed",
            "The garden needs water every single morning",
            "I had pancakes",
        ],
    )
    .await;
    let sync = || async {
        while setup.store.sync_counts(SyncKind::Message).await.unwrap().pending > 0 {
            setup.reconciler.pass().await.unwrap();
        }
    };
    sync().await;
    // Words alone (no query vector), so the lexical list decides.
    setup.embedder.set_up(false);
    let before = search(&setup.served.channel, "trains in the garden", 5).await;
    assert_eq!(before.mode, "full_text", "{before:?}");
    assert_eq!(
        ids(&before),
        [&written[0].id, &written[1].id, &written[2].id].map(String::as_str),
        "the workspace's rarer word first: {before:?}"
    );

    setup.embedder.set_up(true);
    trains_elsewhere(&setup.served.channel, 200).await;
    sync().await;
    setup.embedder.set_up(false);
    let after = search(&setup.served.channel, "trains in the garden", 5).await;
    assert_eq!(ids(&after), ids(&before), "{after:?}");

    setup.finish().await;
}

/// Qdrant, telling when a search's words are weighed: the request of its
/// words goes out right after, in the same task.
struct WordsTold {
    qdrant: Arc<roncho_qdrant::QdrantVectorStore>,
    store: Arc<roncho_store::SqlStore>,
    words_sent: Arc<Notify>,
}

/// The database of a search's plan, telling when the words' statistics are read.
struct StatisticsTold {
    database: Arc<roncho_store::SqlStore>,
    words_sent: Arc<Notify>,
}

#[async_trait]
impl TextSearch for StatisticsTold {
    async fn search_messages(
        &self,
        workspace_id: &str,
        search: &MessageQuery,
        filter: &Filter,
    ) -> Result<Vec<Message>> {
        self.database.search_messages(workspace_id, search, filter).await
    }

    async fn search_unsynced_messages(
        &self,
        workspace_id: &str,
        search: &MessageQuery,
        filter: &Filter,
        newest: i64,
    ) -> Result<Vec<Message>> {
        self.database
            .search_unsynced_messages(workspace_id, search, filter, newest)
            .await
    }

    async fn text_index_gap(&self, workspace_id: &str, search: &MessageQuery) -> Result<i64> {
        self.database.text_index_gap(workspace_id, search).await
    }

    async fn vector_sync_gap(&self, workspace_id: &str, search: &MessageQuery, newest: i64) -> Result<i64> {
        self.database.vector_sync_gap(workspace_id, search, newest).await
    }

    async fn meaning_lag(&self, workspace_id: &str) -> Result<MeaningLag> {
        self.database.meaning_lag(workspace_id).await
    }

    async fn term_counts(&self, workspace_id: &str, terms: &[u32]) -> Result<TermCounts> {
        let counts = self.database.term_counts(workspace_id, terms).await;
        self.words_sent.notify_one();
        counts
    }
}

#[async_trait]
impl VectorStore for WordsTold {
    async fn check_dimensions(&self, dimensions: usize, model_id: &str) -> Result<()> {
        self.qdrant.check_dimensions(dimensions, model_id).await
    }

    async fn upsert(&self, namespace: &str, records: Vec<VectorRecord>) -> Result<()> {
        self.qdrant.upsert(namespace, records).await
    }

    async fn query(
        &self,
        namespace: &str,
        vector: &[f32],
        top_k: usize,
        filter: &VectorFilter,
        max_distance: Option<f32>,
    ) -> Result<Vec<VectorHit>> {
        self.qdrant.query(namespace, vector, top_k, filter, max_distance).await
    }

    async fn search(&self, plan: &SearchPlan<'_>) -> std::result::Result<Found, SearchFailure> {
        let told = StatisticsTold {
            database: self.store.clone(),
            words_sent: self.words_sent.clone(),
        };
        let plan = SearchPlan {
            words: plan.words.clone(),
            scope: plan.scope.clone(),
            database: &told,
            ..*plan
        };
        self.qdrant.search(&plan).await
    }

    async fn delete(&self, namespace: &str, ids: &[String]) -> Result<()> {
        self.qdrant.delete(namespace, ids).await
    }

    async fn delete_namespace(&self, namespace: &str) -> Result<()> {
        self.qdrant.delete_namespace(namespace).await
    }
}

/// The test embedder, whose search queries wait until their words have
/// gone to Qdrant (a slow model's embedding, which the words need not wait for).
struct AfterTheWords {
    inner: roncho_embed::hashing::TestHashingEmbedder,
    words_sent: Arc<Notify>,
}

#[async_trait]
impl Embedder for AfterTheWords {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>> {
        self.inner.embed(texts).await
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.words_sent.notified().await;
        self.inner.embed_query(text).await
    }

    fn dimensions(&self) -> usize {
        self.inner.dimensions()
    }

    fn model_id(&self) -> String {
        self.inner.model_id()
    }
}

/// A hybrid search sends the query's words to Qdrant as soon as their
/// statistics are read, while the query is still being embedded: with a
/// search whose embedding waits for those statistics, it answers, by both
/// lists.
#[tokio::test]
async fn a_querys_words_go_to_qdrant_while_it_is_embedded() {
    let Some(setup) = Setup::start("words_first").await else {
        return;
    };
    let written = support::write_as(
        &setup.served.channel,
        "alice",
        &["The kitten sleeps on the sofa", "Trains were late today"],
    )
    .await;
    setup.reconciler.pass().await.unwrap();

    let words_sent = Arc::new(Notify::new());
    let mut services = Serving::store_only(setup.store.clone());
    services.domain.semantic = Some(roncho_search::Semantic::new(
        Arc::new(AfterTheWords {
            inner: roncho_embed::hashing::TestHashingEmbedder::new(64),
            words_sent: words_sent.clone(),
        }),
        Arc::new(WordsTold {
            qdrant: setup.qdrant.clone(),
            store: setup.store.clone(),
            words_sent,
        }),
    ));
    let served = support::serve(services, &Role::ALL).await;
    let found = tokio::time::timeout(Duration::from_secs(30), search(&served.channel, "kitten", 5))
        .await
        .expect("the words' query waited for the embedding, which waited for it");
    assert_eq!(found.mode, "hybrid", "{found:?}");
    assert!(found.degraded_reason.is_empty(), "{found:?}");
    assert_eq!(ids(&found)[0], written[0].id, "{found:?}");

    served.shutdown.cancel();
    setup.finish().await;
}
