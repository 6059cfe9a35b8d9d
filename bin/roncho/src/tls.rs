//! TLS on the gRPC listener and the REST edge's (rustls, ring): the
//! server's certificate and key from PEM files, optionally client
//! certificates verified against a CA (mTLS), and all three reloaded without
//! a restart when the files change.
//!
//! Connections are accepted here and handed to tonic (or axum) once their
//! handshake is done: handshakes run concurrently (a slow or silent client holds up
//! nobody), bounded in number (in all and per client address) and in time;
//! a connection over the bound is closed at once rather than queued, and a
//! client that does not speak TLS is dropped at its first bytes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

use roncho_gate::admission::Tally;

use crate::connections::{ConnectionAdmission, FirstBytes, Guarded, HttpListener};

/// Longest a client may take to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Most handshakes in progress at once; connections beyond are closed.
const MAX_HANDSHAKES: usize = 256;
/// Most handshakes in progress from one client address.
const MAX_HANDSHAKES_PER_ADDRESS: usize = 16;

/// Where the TLS material is.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TlsFiles {
    /// The server's certificate chain, PEM, leaf first.
    pub cert: PathBuf,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates client certificates must chain to; `None`: clients
    /// present none.
    pub client_ca: Option<PathBuf>,
}

impl TlsFiles {
    fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(&self.cert), Some(&self.key), self.client_ca.as_ref()]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
    }

    /// A fingerprint of the files' contents (not their times: copies that
    /// keep timestamps still count as changes).
    fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for path in self.paths() {
            std::fs::read(path).ok().hash(&mut hasher);
        }
        hasher.finish()
    }
}

/// The server's TLS configuration, reloaded when its files change.
pub struct ReloadingTls {
    files: TlsFiles,
    /// The configuration served, and the fingerprint of the files last tried.
    current: RwLock<(Arc<ServerConfig>, u64)>,
}

impl std::fmt::Debug for ReloadingTls {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ReloadingTls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ReloadingTls {
    /// Loads the files; an unreadable or invalid one is an error naming it.
    pub fn load(files: TlsFiles) -> anyhow::Result<Self> {
        let fingerprint = files.fingerprint();
        let config = server_config(&files)?;
        Ok(Self {
            files,
            current: RwLock::new((config, fingerprint)),
        })
    }

    /// Returns whether clients must present a certificate.
    pub fn verifies_clients(&self) -> bool {
        self.files.client_ca.is_some()
    }

    fn acceptor(&self) -> TlsAcceptor {
        let current = self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        TlsAcceptor::from(current.0.clone())
    }

    /// Reloads the files if their contents changed since the last try; a
    /// bad new set is logged and the previous one kept (and tried again once
    /// the files change again, as when a renewal is written in steps).
    /// Returns whether it reloaded.
    pub fn reload_if_changed(&self) -> bool {
        let fingerprint = self.files.fingerprint();
        {
            let current = self.current.read().unwrap_or_else(|poisoned| poisoned.into_inner());
            if current.1 == fingerprint {
                return false;
            }
        }
        match server_config(&self.files) {
            Ok(config) => {
                *self.current.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = (config, fingerprint);
                tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
                true
            }
            Err(error) => {
                tracing::error!(
                    error = format!("{error:#}"),
                    "TLS files changed but do not load; keeping the previous ones"
                );
                self.current.write().unwrap_or_else(|poisoned| poisoned.into_inner()).1 = fingerprint;
                false
            }
        }
    }

    /// Checks the files every `interval` until `shutdown`.
    pub async fn watch(self: Arc<Self>, interval: Duration, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
            }
            let this = self.clone();
            let _ = tokio::task::spawn_blocking(move || this.reload_if_changed()).await;
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the rustls configuration of the files: HTTP/2 only, TLS 1.2 and 1.3.
fn server_config(files: &TlsFiles) -> anyhow::Result<Arc<ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect())
        .with_context(|| format!("reading the certificate chain {}", files.cert.display()))?;
    anyhow::ensure!(!certs.is_empty(), "{} holds no certificate", files.cert.display());
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("reading the private key {}", files.key.display()))?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .context("choosing TLS versions")?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(path)
                .with_context(|| format!("reading the client CA {}", path.display()))?
            {
                roots
                    .add(cert.with_context(|| format!("reading the client CA {}", path.display()))?)
                    .with_context(|| format!("adding the client CA {}", path.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .with_context(|| format!("the client CA {}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .with_context(|| format!("{} does not match {}", files.key.display(), files.cert.display()))?;
    // gRPC clients ask for h2; REST clients for either.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A connection after its TLS handshake, holding its place in the admission.
pub type GuardedTls = Guarded<TlsStream<TcpStream>>;

/// Accepts connections on `listener` that `admission` lets in and yields those
/// whose TLS handshake succeeded, each to send `first` within the
/// handshake timeout after it, until `shutdown`.
pub fn incoming(
    listener: TcpListener,
    tls: Arc<ReloadingTls>,
    admission: ConnectionAdmission,
    first: FirstBytes,
    shutdown: CancellationToken,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<GuardedTls>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    let handshakes = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
    let per_address: Arc<Tally<std::net::IpAddr>> = Arc::default();
    tokio::spawn(async move {
        loop {
            let (stream, peer, connection) = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = admission.accept(&listener) => accepted,
            };
            // Over either bound the connection is closed now: a flood of
            // silent connections must not keep the next client waiting.
            let Ok(permit) = handshakes.clone().try_acquire_owned() else {
                tracing::debug!(%peer, "too many TLS handshakes in progress; connection closed");
                continue;
            };
            let Some(address_slot) = AddressSlot::take(&per_address, peer.ip()) else {
                tracing::debug!(%peer, "too many TLS handshakes from this address; connection closed");
                continue;
            };
            let _ = stream.set_nodelay(true);
            let acceptor = tls.acceptor();
            let sender = sender.clone();
            tokio::spawn(async move {
                let _held = (permit, address_slot);
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        let _ = sender.send(Ok(Guarded::new(stream, connection, first))).await;
                    }
                    Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(receiver)
}

/// The REST edge's connections after their TLS handshake ([`incoming`]).
pub struct TlsListener {
    incoming: tokio_stream::wrappers::ReceiverStream<std::io::Result<GuardedTls>>,
}

impl TlsListener {
    /// Accepts on `listener` through `admission` with `tls` until `shutdown`.
    pub fn new(
        listener: TcpListener,
        tls: Arc<ReloadingTls>,
        admission: ConnectionAdmission,
        shutdown: CancellationToken,
    ) -> std::io::Result<Self> {
        // Some byte within the handshake timeout after the TLS handshake; then
        // HTTP/1's header timeout, or HTTP/2's keep-alive, bounds the rest.
        Ok(Self {
            incoming: incoming(listener, tls, admission, FirstBytes::Any, shutdown),
        })
    }
}

impl HttpListener for TlsListener {
    type Stream = TlsStream<TcpStream>;

    async fn accept(&mut self) -> Option<(GuardedTls, std::net::SocketAddr)> {
        use tokio_stream::StreamExt;
        while let Some(accepted) = self.incoming.next().await {
            if let Ok(stream) = accepted
                && let Ok(peer) = stream.get_ref().get_ref().0.peer_addr()
            {
                return Some((stream, peer));
            }
        }
        None
    }
}

/// One handshake in progress from an address, counted until dropped.
struct AddressSlot {
    counts: Arc<Tally<std::net::IpAddr>>,
    address: std::net::IpAddr,
}

impl AddressSlot {
    fn take(counts: &Arc<Tally<std::net::IpAddr>>, address: std::net::IpAddr) -> Option<Self> {
        counts.take(&address, MAX_HANDSHAKES_PER_ADDRESS).then(|| Self {
            counts: counts.clone(),
            address,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        self.counts.give_back(&self.address);
    }
}
