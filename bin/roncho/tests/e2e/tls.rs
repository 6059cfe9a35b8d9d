//! TLS on the gRPC listener and the REST edge's: a client trusting the CA
//! connects and a plain-text one is refused; with a client CA, only clients
//! holding a certificate it signed get in; new certificate files are picked
//! up without a restart.

use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use roncho::config::Role;
use roncho::tls::{ReloadingTls, TlsFiles};
use roncho_proto::v1 as pb;
use roncho_proto::v1::recall_service_client::RecallServiceClient;
use rustls_pki_types::pem::PemObject;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::support;

/// A certificate authority for the test.
pub(crate) struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Authority {
    pub(crate) fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Self {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    pub(crate) fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// Returns a (certificate, key) PEM pair for `names`, signed by this authority.
    pub(crate) fn issue(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, "roncho test");
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

struct Server {
    address: std::net::SocketAddr,
    /// The REST edge's address.
    rest: std::net::SocketAddr,
    tls: Arc<ReloadingTls>,
    shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

async fn start(server_ca: &Authority, client_ca: Option<&Authority>) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = server_ca.issue(&["localhost", "127.0.0.1"]);
    let files = TlsFiles {
        cert: write(dir.path(), "server.pem", &cert),
        key: write(dir.path(), "server.key", &key),
        client_ca: client_ca.map(|ca| write(dir.path(), "clients.pem", &ca.pem())),
    };
    let tls = Arc::new(ReloadingTls::load(files).unwrap());
    let store = support::embedded_store(dir.path()).await;
    let rest = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let rest_address = rest.local_addr().unwrap();
    let mut services = roncho::server::Serving::store_only(store);
    services.gate.tls = Some(tls.clone());
    services.listeners.rest = Some(roncho::server::RestEdge::Listener(Arc::new(rest)));
    let support::Served { address, shutdown, .. } = support::serve(services, &[Role::Recall]).await;
    Server {
        address,
        rest: rest_address,
        tls,
        shutdown,
        _dir: dir,
    }
}

async fn tls_channel(server: &Server, ca: &Authority, identity: Option<(String, String)>) -> anyhow::Result<Channel> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.pem()))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Ok(
        Endpoint::from_shared(format!("https://localhost:{}", server.address.port()))?
            .tls_config(tls)?
            .connect_timeout(std::time::Duration::from_secs(5))
            .connect()
            .await?,
    )
}

/// Lists workspaces over the REST edge with HTTPS, trusting `ca`,
/// presenting `identity` when given; the status, or the connection's error.
async fn list_over_rest(server: &Server, ca: &Authority, identity: Option<(String, String)>) -> anyhow::Result<u16> {
    let mut client = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes())?)
        .timeout(std::time::Duration::from_secs(5));
    if let Some((cert, key)) = identity {
        client = client.identity(reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes())?);
    }
    let response = client
        .build()?
        .post(format!("https://localhost:{}/v3/workspaces/list", server.rest.port()))
        .json(&serde_json::json!({}))
        .send()
        .await?;
    Ok(response.status().as_u16())
}

async fn list(channel: Channel) -> Result<pb::ListWorkspacesResponse, tonic::Status> {
    RecallServiceClient::new(channel)
        .list_workspaces(pb::ListWorkspacesRequest::default())
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn a_client_trusting_the_ca_connects_and_a_plain_text_one_is_refused() {
    let ca = Authority::new("server CA");
    let server = start(&ca, None).await;
    let channel = tls_channel(&server, &ca, None).await.unwrap();
    list(channel).await.unwrap();

    let plain = Endpoint::from_shared(format!("http://{}", server.address))
        .unwrap()
        .connect()
        .await;
    let refused = match plain {
        Err(_) => true,
        Ok(channel) => list(channel).await.is_err(),
    };
    assert!(refused, "a plain-text client got an answer");

    let stranger = Authority::new("some other CA");
    assert!(
        tls_channel(&server, &stranger, None).await.is_err(),
        "a client that does not trust the server's CA connected"
    );

    // The REST edge: HTTPS with the same certificate, and nothing in plain text.
    assert_eq!(list_over_rest(&server, &ca, None).await.unwrap(), 200);
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{}/health", server.rest.port()))
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await;
    assert!(plain.is_err(), "a plain-text REST client got an answer: {plain:?}");
    assert!(
        list_over_rest(&server, &stranger, None).await.is_err(),
        "a REST client that does not trust the server's CA connected"
    );
    server.shutdown.cancel();
}

#[tokio::test]
async fn with_a_client_ca_only_clients_holding_its_certificates_get_in() {
    let ca = Authority::new("server CA");
    let clients = Authority::new("client CA");
    let server = start(&ca, Some(&clients)).await;
    assert!(server.tls.verifies_clients());
    let pinned = tls_channel(&server, &ca, Some(clients.issue(&["ingest-role"])))
        .await
        .unwrap();
    list(pinned).await.unwrap();

    let anonymous = match tls_channel(&server, &ca, None).await {
        Err(_) => true,
        Ok(channel) => list(channel).await.is_err(),
    };
    assert!(anonymous, "a client without a certificate got an answer");
    let impostor = Authority::new("an impostor's CA");
    let forged = match tls_channel(&server, &ca, Some(impostor.issue(&["ingest-role"]))).await {
        Err(_) => true,
        Ok(channel) => list(channel).await.is_err(),
    };
    assert!(forged, "a client certificate from another CA got an answer");

    // The REST edge asks for the same client certificates.
    let pinned_rest = list_over_rest(&server, &ca, Some(clients.issue(&["an-sdk-client"]))).await;
    assert_eq!(pinned_rest.unwrap(), 200);
    assert!(
        list_over_rest(&server, &ca, None).await.is_err(),
        "a REST client without a certificate got an answer"
    );
    assert!(
        list_over_rest(&server, &ca, Some(impostor.issue(&["an-sdk-client"])))
            .await
            .is_err(),
        "a REST client certificate from another CA got an answer"
    );
    server.shutdown.cancel();
}

#[tokio::test]
async fn new_certificate_files_are_served_without_a_restart() {
    let old_ca = Authority::new("old CA");
    let server = start(&old_ca, None).await;
    list(tls_channel(&server, &old_ca, None).await.unwrap()).await.unwrap();
    assert!(!server.tls.reload_if_changed(), "nothing changed yet");

    // The operator (or cert-manager) replaces both files.
    let new_ca = Authority::new("new CA");
    let (cert, key) = new_ca.issue(&["localhost", "127.0.0.1"]);
    let dir = server._dir.path();
    // Past the file system's timestamp granularity, so the change shows.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    write(dir, "server.pem", &cert);
    write(dir, "server.key", &key);
    assert!(server.tls.reload_if_changed());
    list(tls_channel(&server, &new_ca, None).await.unwrap()).await.unwrap();
    assert!(
        tls_channel(&server, &old_ca, None).await.is_err(),
        "new connections still get the old certificate"
    );

    // A broken replacement keeps the working certificate.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    write(dir, "server.key", "not a key");
    assert!(!server.tls.reload_if_changed());
    list(tls_channel(&server, &new_ca, None).await.unwrap()).await.unwrap();
    server.shutdown.cancel();
}

/// A flood of connections that never speak holds up nobody else: past 16
/// handshakes from one address, its connections are closed at once, and a
/// client from elsewhere completes its handshake meanwhile.
#[tokio::test]
async fn silent_connections_do_not_hold_up_other_clients() {
    use tokio::io::AsyncReadExt;
    let ca = Authority::new("server CA");
    let server = start(&ca, None).await;
    let mut silent = Vec::new();
    for _ in 0..40 {
        silent.push(tokio::net::TcpStream::connect(server.address).await.unwrap());
    }
    let mut closed = 0;
    for stream in &mut silent {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0)) = tokio::time::timeout(std::time::Duration::from_millis(500), stream.read(&mut byte)).await {
            closed += 1;
        }
    }
    assert!(closed >= 24, "only {closed} of 40 silent connections were closed");

    // A client from another address of the loopback network.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let stream = socket.connect(server.address).await.unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca.pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let started = std::time::Instant::now();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(3), connector.connect(name, stream))
        .await
        .expect("the handshake was not held up")
        .unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    drop(silent);
    server.shutdown.cancel();
}

#[tokio::test]
async fn half_a_tls_handshake_is_closed_within_its_timeout_whatever_bytes_arrived() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ca = Authority::new("server CA");
    let server = start(&ca, None).await;
    // A real ClientHello, cut at several offsets; and one whole, its
    // handshake then left unfinished.
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let mut client = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    assert!(hello.len() > 100, "{} bytes", hello.len());
    let offsets = [1, 5, hello.len() / 2, hello.len() - 1, hello.len()];
    let mut stalled = Vec::new();
    for (index, &offset) in offsets.iter().enumerate() {
        for target in [server.address, server.rest] {
            // From addresses of their own: the per-address handshake cap is not what closes them.
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket
                .bind(format!("127.0.1.{}:0", index + 1).parse().unwrap())
                .unwrap();
            let mut stream = socket.connect(target).await.unwrap();
            stream.write_all(&hello[..offset]).await.unwrap();
            stalled.push((offset, target, stream));
        }
    }
    let started = std::time::Instant::now();
    for (offset, target, stream) in &mut stalled {
        let mut buf = [0u8; 4096];
        let closed = tokio::time::timeout(std::time::Duration::from_secs(9), async {
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    // The server's half of the handshake; the client never answers it.
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(
            closed.is_ok(),
            "{target}: a handshake stopped after {offset} bytes is still open"
        );
    }
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(3),
        "closed for another reason"
    );
    server.shutdown.cancel();
}
