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

/// Serves `roles` over `services` until `shutdown` is cancelled.
#[allow(dead_code, reason = "each test binary uses the helpers it needs")]
pub async fn serve(services: roncho::server::Services, roles: &[Role]) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let (token, roles) = (shutdown.clone(), roles.to_vec());
    tokio::spawn(async move { roncho::server::run(listener, services, &roles, token).await });
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
