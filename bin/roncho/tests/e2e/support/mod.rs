//! An in-process server on a free loopback port, for the tests that talk to
//! one over gRPC.

use std::net::SocketAddr;

use roncho::config::Role;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

/// A running server: a plain-text channel to it (connected on first use),
/// its address, and the token that stops it.
#[allow(dead_code, reason = "each test binary uses the fields it needs")]
pub struct Served {
    pub channel: Channel,
    pub address: SocketAddr,
    pub shutdown: CancellationToken,
}

/// Returns a loopback port nothing listens on now.
#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Serves `roles` over `services` until `shutdown` is cancelled.
#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
pub async fn serve(services: roncho::server::Serving, roles: &[Role]) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let (token, roles) = (shutdown.clone(), roles.to_vec());
    tokio::spawn(async move { roncho::server::run(Some(listener), services, &roles, token).await });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect_lazy();
    Served {
        channel,
        address,
        shutdown,
    }
}

/// Creates session `session` of `workspace` in which `observer` observes
/// the other peers (and so derives conclusions about them).
#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
pub async fn session_observed_by(channel: &Channel, workspace: &str, session: &str, observer: &str) {
    use roncho_proto::v1 as pb;
    let config = pb::SessionPeerConfig {
        observe_me: None,
        observe_others: Some(true),
    };
    roncho_proto::v1::ingest_service_client::IngestServiceClient::new(channel.clone())
        .get_or_create_session(pb::GetOrCreateSessionRequest {
            workspace_id: workspace.into(),
            id: session.into(),
            peers: [(observer.to_owned(), config)].into(),
            ..Default::default()
        })
        .await
        .unwrap();
}

/// A TCP relay to a real server that can be cut and restored: cutting
/// closes every relayed connection and refuses new ones.
#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
pub struct Relay {
    pub address: std::net::SocketAddr,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut: std::sync::Arc<std::sync::Mutex<tokio_util::sync::CancellationToken>>,
}

#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
impl Relay {
    /// Relays a loopback port to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = Relay {
            address: listener.local_addr().unwrap(),
            up: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)),
            cut: std::sync::Arc::default(),
        };
        let (up, cut) = (relay.up.clone(), relay.cut.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if !up.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await else {
                    continue;
                };
                let cut = cut.lock().unwrap().clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        () = cut.cancelled() => {}
                    }
                });
            }
        });
        relay
    }

    /// Cuts (`false`) or restores the relay.
    pub fn set_up(&self, up: bool) {
        self.up.store(up, std::sync::atomic::Ordering::SeqCst);
        if !up {
            std::mem::take(&mut *self.cut.lock().unwrap()).cancel();
        }
    }
}

/// The distributed mode's test backends: a fresh Postgres database and the
/// real Qdrant's URL; `None` (the test skips) when either is not configured,
/// a failure under `RONCHO_REQUIRE_INTEGRATION=1`.
#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
pub async fn postgres_and_qdrant() -> Option<(roncho_store::testing::FreshDatabase, String)> {
    let qdrant_url = roncho_store::testing::integration_env(roncho_store::testing::QDRANT_URL_VAR)?;
    let database = roncho_store::testing::FreshDatabase::create().await?;
    Some((database, qdrant_url))
}

/// The default local model, from `RONCHO_TEST_EMBED_MODEL_DIR`; `None`
/// (the test skips) when it is not set, a failure under
/// `RONCHO_REQUIRE_INTEGRATION=1`.
#[cfg(feature = "candle")]
#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
pub async fn local_model() -> Option<std::sync::Arc<dyn roncho_core::embed::Embedder>> {
    let dir = roncho_store::testing::integration_env("RONCHO_TEST_EMBED_MODEL_DIR")?;
    let embedder = tokio::task::spawn_blocking(move || roncho_embed::bert::BertEmbedder::load(dir.as_ref()))
        .await
        .unwrap()
        .unwrap();
    Some(std::sync::Arc::new(embedder))
}

/// Serves every role over `store` with search by `embedder` and
/// `vectors`, and returns the reconciler that fills them, for the test to
/// run pass by pass.
#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
pub async fn serve_semantic(
    store: std::sync::Arc<roncho_store::SqlStore>,
    embedder: std::sync::Arc<dyn roncho_core::embed::Embedder>,
    vectors: std::sync::Arc<dyn roncho_core::vector::VectorStore>,
) -> (Served, roncho_reconciler::Reconciler) {
    let reconciler = roncho_reconciler::Reconciler::new(
        store.clone(),
        embedder.clone(),
        vectors.clone(),
        roncho_reconciler::ReconcilerConfig::default(),
    );
    let mut services = roncho::server::Serving::store_only(store);
    services.domain.semantic = Some(roncho_search::Semantic::new(embedder, vectors));
    (serve(services, &Role::ALL).await, reconciler)
}

/// A fresh Postgres database, migrated, and a Qdrant collection of its own.
#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
pub struct Distributed {
    pub store: std::sync::Arc<roncho_store::SqlStore>,
    pub qdrant: std::sync::Arc<roncho_qdrant::QdrantVectorStore>,
    database: roncho_store::testing::FreshDatabase,
}

#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
impl Distributed {
    /// The backends of [`postgres_and_qdrant`], with a collection named
    /// `{prefix}_{unique}`; `None` when they are not configured.
    pub async fn open(prefix: &str) -> Option<Self> {
        let (database, qdrant_url) = postgres_and_qdrant().await?;
        let store = roncho_store::testing::open_migrated(&database.url).await;
        let mut options = roncho_qdrant::QdrantOptions::new(qdrant_url);
        options.collection = format!("{prefix}_{}", roncho_store::testing::unique_name());
        let qdrant = std::sync::Arc::new(
            roncho_qdrant::QdrantVectorStore::connect(&options)
                .unwrap()
                .counting_terms_in(store.clone()),
        );
        Some(Self {
            store,
            qdrant,
            database,
        })
    }

    /// Drops the collection and the database.
    pub async fn close(self) {
        self.qdrant.drop_collection().await.unwrap();
        self.store.close().await;
        self.database.drop_database().await;
    }
}

/// Writes `texts` as `peer`'s messages into session `s` of workspace `w`;
/// returns them as stored.
#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
pub async fn write_as(channel: &Channel, peer: &str, texts: &[&str]) -> Vec<roncho_proto::v1::Message> {
    use roncho_proto::v1 as pb;
    roncho_proto::v1::ingest_service_client::IngestServiceClient::new(channel.clone())
        .create_messages(pb::CreateMessagesRequest {
            workspace_id: "w".into(),
            session_id: "s".into(),
            messages: texts
                .iter()
                .map(|content| pb::MessageCreate {
                    peer_id: peer.into(),
                    content: (*content).into(),
                    ..Default::default()
                })
                .collect(),
            idempotency_key: None,
        })
        .await
        .unwrap()
        .into_inner()
        .messages
}

/// An embedded (SQLite) store in `dir`, migrated.
pub async fn embedded_store(dir: &std::path::Path) -> std::sync::Arc<roncho_store::SqlStore> {
    let store = roncho_store::connect(&roncho_store::StoreOptions::embedded(dir))
        .await
        .unwrap();
    roncho_store::migrate(&store).await.unwrap();
    std::sync::Arc::new(store)
}
