//! Webhook delivery as Honcho defines it (honcho-v3 §2.2): an envelope
//! `{"data", "timestamp", "type"}` serialised as compact JSON with sorted
//! keys, POSTed with `X-Honcho-Signature`, the hex HMAC-SHA256 of that body
//! under the configured secret.
//!
//! One POST per call; retries and backoff are the work queue's (a failed
//! delivery fails its task, which runs again later and dies after its
//! attempts, with the error in the queue status). Unless private addresses
//! are allowed, the client connects only to public addresses: names are
//! resolved by a resolver that drops every private, loopback and link-local
//! address, so a name that resolved to a public address when the endpoint
//! was registered cannot be pointed inside later (DNS rebinding).
//!
//! Proxy variables of the environment (`HTTP_PROXY`, `HTTPS_PROXY`,
//! `ALL_PROXY`) are ignored: a proxy resolves the names it is given, past
//! every check here. A proxy is used only when configured
//! (`webhook_proxy`), and then it is given the address roncho resolved and
//! checked, never the name ([`crate::tunnel`]).

pub mod tunnel;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use roncho_core::validate;
use roncho_core::webhook::{DeliveryError, WebhookDelivery};

/// Honcho's signature header.
pub const SIGNATURE_HEADER: &str = "X-Honcho-Signature";

/// Returns the hex HMAC-SHA256 of `body` under `secret`.
pub fn sign(secret: &str, body: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    ring::hmac::sign(&key, body.as_bytes())
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Sends webhook events.
#[derive(Clone)]
pub struct WebhookSender {
    client: reqwest::Client,
    secret: Option<Arc<str>>,
    allow_private: bool,
    timeout: Duration,
    /// The operator's forward proxy, when configured.
    proxy: Option<crate::tunnel::Proxy>,
}

impl std::fmt::Debug for WebhookSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSender")
            .field("signed", &self.secret.is_some())
            .field("allow_private", &self.allow_private)
            .field("proxy", &self.proxy)
            .finish_non_exhaustive()
    }
}

impl WebhookSender {
    /// Returns a sender signing with `secret` (unsigned without one), waiting
    /// at most `timeout` per delivery; with `allow_private`, endpoints on
    /// private and loopback addresses are called too.
    pub fn new(secret: Option<&str>, timeout: Duration, allow_private: bool) -> Result<Self, DeliveryError> {
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            // A redirect could lead anywhere, inside included.
            .redirect(reqwest::redirect::Policy::none())
            // The environment's proxy would resolve names past the checks.
            .no_proxy();
        if !allow_private {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        let client = builder
            .build()
            .map_err(|error| DeliveryError::Transport(format!("building the HTTP client: {error}")))?;
        Ok(Self {
            client,
            secret: secret.filter(|secret| !secret.is_empty()).map(Arc::from),
            allow_private,
            timeout,
            proxy: None,
        })
    }

    /// Returns this sender delivering through `proxy`, which is given
    /// only addresses checked here.
    pub fn with_proxy(mut self, proxy: crate::tunnel::Proxy) -> Self {
        self.proxy = Some(proxy);
        self
    }

    /// Whether events carry a signature.
    pub fn signs(&self) -> bool {
        self.secret.is_some()
    }

    /// POSTs `body` (an [`envelope`]) to `url`, signed; `Ok` on a 2xx answer.
    pub async fn deliver(&self, url: &str, body: &str) -> Result<(), DeliveryError> {
        // Parsed once, as the client parses it, and the parsed URL is what
        // it is given: IP literals (which do not pass through the resolver)
        // are checked here, names by the resolver when it connects.
        let checked = validate::webhook_url("url", url, self.allow_private)
            .map_err(|error| DeliveryError::Refused(error.to_string()))?;
        if let Some(proxy) = &self.proxy {
            return self.deliver_through(proxy, checked, body).await;
        }
        let mut request = self
            .client
            .post(checked.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_owned());
        if let Some(secret) = &self.secret {
            request = request.header(SIGNATURE_HEADER, sign(secret, body));
        }
        // Errors leave the URL out: its query may hold a token.
        let response = request
            .send()
            .await
            .map_err(|error| DeliveryError::Transport(describe(&error.without_url())))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        Err(DeliveryError::Status {
            status: status.as_u16(),
        })
    }
}

impl WebhookSender {
    /// POSTs `body` to the checked URL through `proxy`, giving it the
    /// address resolved and checked here.
    async fn deliver_through(
        &self,
        proxy: &crate::tunnel::Proxy,
        checked: validate::WebhookUrl,
        body: &str,
    ) -> Result<(), DeliveryError> {
        let address = match &checked.host {
            validate::WebhookHost::Ip(ip) => *ip,
            validate::WebhookHost::Name(name) => {
                let lookup = tokio::time::timeout(self.timeout, public_addresses(name, self.allow_private));
                let addresses = lookup
                    .await
                    .map_err(|_| DeliveryError::Transport(format!("looking up `{name}` timed out")))?
                    .map_err(DeliveryError::Refused)?;
                addresses[0]
            }
        };
        let mut headers = vec![("Content-Type", "application/json".to_owned())];
        if let Some(secret) = &self.secret {
            headers.push((SIGNATURE_HEADER, sign(secret, body)));
        }
        let status = tokio::time::timeout(self.timeout, proxy.post(&checked.url, address, &headers, body))
            .await
            .map_err(|_| DeliveryError::Transport("the receiver did not answer in time".to_owned()))?
            .map_err(|failure| match failure {
                crate::tunnel::Failure::Refused(reason) => DeliveryError::Refused(reason),
                crate::tunnel::Failure::Transport(reason) => DeliveryError::Transport(reason),
            })?;
        match status {
            200..=299 => Ok(()),
            status => Err(DeliveryError::Status { status }),
        }
    }
}

/// Returns the addresses `name` resolves to: only its public ones unless
/// `allow_private`; why not, when it has none (or does not resolve).
async fn public_addresses(name: &str, allow_private: bool) -> Result<Vec<std::net::IpAddr>, String> {
    let found: Vec<std::net::IpAddr> = tokio::net::lookup_host((name, 0))
        .await
        .map_err(|error| format!("`{name}` does not resolve: {error}"))?
        .map(|address| address.ip())
        .collect();
    let mut usable: Vec<std::net::IpAddr> = found
        .iter()
        .copied()
        .filter(|ip| allow_private || validate::is_public_ip(ip))
        .collect();
    // IPv4 first: a proxy given one address reaches it wherever IPv6 is off.
    usable.sort_by_key(std::net::IpAddr::is_ipv6);
    if usable.is_empty() {
        let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
        return Err(format!(
            "`{name}` resolves only to private, loopback or link-local addresses ({})",
            shown.join(", ")
        ));
    }
    Ok(usable)
}

/// A reqwest error with its causes (the top level alone says only "error
/// sending request").
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Resolves names to their public addresses only; a name with none is an error.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let public = public_addresses(&host, false).await?;
            let addresses = public.into_iter().map(|ip| SocketAddr::new(ip, 0));
            Ok(Box::new(addresses) as reqwest::dns::Addrs)
        })
    }
}

#[async_trait::async_trait]
impl WebhookDelivery for WebhookSender {
    async fn deliver(&self, url: &str, body: &str) -> Result<(), DeliveryError> {
        WebhookSender::deliver(self, url, body).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roncho_core::webhook::{envelope, timestamp};

    #[test]
    fn envelopes_are_compact_with_sorted_keys_and_signed_as_honcho_does() {
        let data = serde_json::json!({"workspace_id": "w", "queue_type": "summary", "observed": null});
        let body = envelope("queue.empty", &data, "2026-11-25T09:30:00.000000+00:00");
        assert_eq!(
            body,
            r#"{"data":{"observed":null,"queue_type":"summary","workspace_id":"w"},"timestamp":"2026-11-25T09:30:00.000000+00:00","type":"queue.empty"}"#
        );
        // RFC 4231 test case 2.
        assert_eq!(
            sign("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(timestamp(1_764_063_000_123_456), "2025-11-25T09:30:00.123456+00:00");
        assert_eq!(timestamp(1_764_063_000_000_000), "2025-11-25T09:30:00+00:00");
    }

    /// A listener on loopback that counts the connections it gets.
    async fn counting_listener() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let reached = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = reached.clone();
        tokio::spawn(async move {
            while let Ok((mut connection, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut request = vec![0; 64 * 1024];
                let _ = connection.read(&mut request).await;
                let _ = connection
                    .write_all(b"HTTP/1.1 500 Internal\r\ncontent-length: 14\r\n\r\ninternal token")
                    .await;
            }
        });
        (port, reached)
    }

    #[tokio::test]
    async fn no_spelling_of_loopback_reaches_a_listener_on_it() {
        let (port, reached) = counting_listener().await;
        let sender = WebhookSender::new(Some("s"), Duration::from_secs(2), false).unwrap();
        let mut delivered = Vec::new();
        for spelling in validate::LOOPBACK_WEBHOOK_SPELLINGS {
            let url = spelling.replace("{port}", &port.to_string());
            if !matches!(sender.deliver(&url, "{}").await, Err(DeliveryError::Refused(_))) {
                delivered.push(url);
            }
        }
        assert!(delivered.is_empty(), "not refused: {delivered:?}");
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert!(validate::LOOPBACK_WEBHOOK_SPELLINGS.len() >= 30);
    }

    #[tokio::test]
    async fn a_failed_delivery_keeps_the_status_never_the_body() {
        let (port, reached) = counting_listener().await;
        // An operator who allows private addresses reaches it; the error
        // (readable by the workspace) holds no byte of what it answered.
        let sender = WebhookSender::new(None, Duration::from_secs(2), true).unwrap();
        let error = sender
            .deliver(&format!("http://127.0.0.1:{port}/hook"), "{}")
            .await
            .unwrap_err();
        assert_eq!(error, DeliveryError::Status { status: 500 });
        assert!(!error.to_string().contains("token"), "{error}");
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn endpoints_inside_are_refused_unless_allowed() {
        let sender = WebhookSender::new(Some("s"), Duration::from_secs(1), false).unwrap();
        let refused = sender.deliver("http://127.0.0.1:9/hook", "{}").await.unwrap_err();
        assert!(matches!(refused, DeliveryError::Refused(_)), "{refused}");
        let by_name = sender.deliver("http://localhost:9/hook", "{}").await.unwrap_err();
        assert!(matches!(&by_name, DeliveryError::Refused(_)), "{by_name}");
    }

    /// A forward proxy on loopback that records each request's first line
    /// and tunnels `CONNECT` or forwards absolute-form requests to the
    /// address they name.
    async fn recording_proxy() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://user:p%40ss@{}", listener.local_addr().unwrap());
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let record = record.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if client.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    record.lock().unwrap().push(text.clone());
                    let line = text.lines().next().unwrap_or_default().to_owned();
                    let mut parts = line.split(' ');
                    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
                    let authority = match method {
                        "CONNECT" => target.to_owned(),
                        _ => target
                            .trim_start_matches("http://")
                            .split('/')
                            .next()
                            .unwrap_or_default()
                            .to_owned(),
                    };
                    let Ok(mut upstream) = tokio::net::TcpStream::connect(authority.as_str()).await else {
                        let _ = client
                            .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                            .await;
                        return;
                    };
                    if method == "CONNECT" {
                        client
                            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                            .await
                            .unwrap();
                    } else {
                        // Forwarded as the receiver would get it from a proxy.
                        let path = target
                            .trim_start_matches("http://")
                            .split_once('/')
                            .map_or("", |(_, path)| path);
                        let forwarded = text.replacen(target, &format!("/{path}"), 1);
                        upstream.write_all(forwarded.as_bytes()).await.unwrap();
                    }
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                });
            }
        });
        (url, seen)
    }

    /// A receiver that records what it got and answers 204, plain or with TLS.
    async fn receiver(tls: Option<rustls::ServerConfig>) -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = got.clone();
        let acceptor = tls.map(|config| tokio_rustls::TlsAcceptor::from(Arc::new(config)));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let record = record.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
                        mut stream: S,
                        record: Arc<std::sync::Mutex<Vec<String>>>,
                    ) {
                        let mut request = vec![0; 64 * 1024];
                        let read = stream.read(&mut request).await.unwrap_or(0);
                        record
                            .lock()
                            .unwrap()
                            .push(String::from_utf8_lossy(&request[..read]).into_owned());
                        let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await;
                        let _ = stream.shutdown().await;
                    }
                    match acceptor {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                serve(stream, record).await;
                            }
                        }
                        None => serve(stream, record).await,
                    }
                });
            }
        });
        (port, got)
    }

    #[tokio::test]
    async fn through_a_configured_proxy_the_proxy_is_given_the_checked_address_never_the_name() {
        let (proxy_url, seen) = recording_proxy().await;
        // TLS for `localhost`, signed by a CA of the test's own.
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap()).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .signed_by(&leaf_key, &ca)
            .unwrap();
        let server_config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![leaf.der().clone()],
                    rustls_pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).unwrap(),
                )
                .unwrap();
        let (tls_port, tls_got) = receiver(Some(server_config)).await;
        let (plain_port, plain_got) = receiver(None).await;
        let proxy = crate::tunnel::Proxy::parse(&proxy_url)
            .unwrap()
            .trusting(&ca.pem())
            .unwrap();
        // Private addresses allowed, so the test's loopback receivers count as reachable.
        let sender = WebhookSender::new(Some("s"), Duration::from_secs(5), true)
            .unwrap()
            .with_proxy(proxy.clone());
        sender
            .deliver(&format!("https://localhost:{tls_port}/hook?token=t"), "{\"a\":1}")
            .await
            .unwrap();
        sender
            .deliver(&format!("http://localhost:{plain_port}/plain"), "{}")
            .await
            .unwrap();
        let recorded = seen.lock().unwrap().clone();
        assert_eq!(recorded.len(), 2, "{recorded:?}");
        for request in &recorded {
            assert!(
                !request.lines().next().unwrap().contains("localhost"),
                "the proxy saw a name: {request}"
            );
            assert!(request.contains("Proxy-Authorization: Basic dXNlcjpwQHNz"), "{request}");
        }
        assert!(
            recorded[0].starts_with(&format!("CONNECT 127.0.0.1:{tls_port} ")),
            "{}",
            recorded[0]
        );
        assert!(
            recorded[1].starts_with(&format!("POST http://127.0.0.1:{plain_port}/plain ")),
            "{}",
            recorded[1]
        );
        let tls_request = tls_got.lock().unwrap()[0].clone();
        assert!(tls_request.starts_with("POST /hook?token=t HTTP/1.1"), "{tls_request}");
        assert!(
            tls_request.contains(&format!("Host: localhost:{tls_port}")),
            "{tls_request}"
        );
        assert!(tls_request.contains(SIGNATURE_HEADER), "{tls_request}");
        assert!(tls_request.ends_with("{\"a\":1}"), "{tls_request}");
        assert!(plain_got.lock().unwrap()[0].contains(&format!("Host: localhost:{plain_port}")));

        // Without private addresses allowed, the proxy is never asked for one.
        let strict = WebhookSender::new(None, Duration::from_secs(5), false)
            .unwrap()
            .with_proxy(proxy);
        for url in [
            format!("http://127.0.0.1:{plain_port}/plain"),
            format!("https://[::1]:{tls_port}/hook"),
            "http://localhost/x".to_owned(),
            "http://169.254.169.254/latest/meta-data".to_owned(),
        ] {
            let refused = strict.deliver(&url, "{}").await.unwrap_err();
            assert!(matches!(refused, DeliveryError::Refused(_)), "{url}: {refused}");
        }
        assert!(
            public_addresses("localhost", false)
                .await
                .unwrap_err()
                .contains("resolves only")
        );
        assert!(
            public_addresses("name-that-does-not-resolve.invalid", false)
                .await
                .is_err()
        );
        assert_eq!(seen.lock().unwrap().len(), 2, "the proxy got nothing more");
    }
}
