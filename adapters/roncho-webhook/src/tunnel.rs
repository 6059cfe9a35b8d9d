//! One webhook POST through the operator's forward proxy (`webhook_proxy`),
//! to the address roncho resolved and checked, never to one the proxy
//! looks up itself.
//!
//! A proxy resolves the names it is given, so a name that answered a
//! public address to roncho could answer a private one to the proxy. Here
//! the proxy is only ever given an address: `https` endpoints through a
//! `CONNECT` tunnel to that address, with TLS to the endpoint's name inside
//! it (the certificate is checked against the name); `http` endpoints as an
//! absolute-form request to that address, with the name in `Host`. The
//! request is one HTTP/1.1 POST with `Connection: close`; only the status
//! line of the answer is read.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use base64::Engine;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why a POST through the proxy did not get an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The request may not be sent as it is (a name TLS cannot check, a
    /// header that would split the request).
    Refused(String),
    /// The proxy or the receiver did not answer as HTTP/1.1 should.
    Transport(String),
}

/// The most bytes of a reply's head read (a proxy's or a receiver's).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// An operator's forward proxy: where it listens and how to sign in.
#[derive(Clone)]
pub struct Proxy {
    host: String,
    port: u16,
    /// `Proxy-Authorization`'s value, from the URL's user and password.
    authorization: Option<String>,
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Proxy")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("authenticated", &self.authorization.is_some())
            .finish()
    }
}

impl Proxy {
    /// Returns the proxy at `url` (`http://[user:password@]host:port`);
    /// endpoints' certificates are checked against the public web's roots.
    pub fn parse(url: &str) -> Result<Self, String> {
        let parsed = reqwest::Url::parse(url).map_err(|error| format!("webhook_proxy is not a URL: {error}"))?;
        if parsed.scheme() != "http" {
            return Err("webhook_proxy must be an http:// URL (a forward proxy that takes CONNECT)".to_owned());
        }
        let host = parsed
            .host_str()
            .ok_or_else(|| "webhook_proxy must name a host".to_owned())?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let authorization = match parsed.username() {
            "" => None,
            user => {
                let decode = |text: &str| {
                    percent_decode(text)
                        .ok_or_else(|| "webhook_proxy's credentials are not valid percent-encoding".to_owned())
                };
                let credentials = format!("{}:{}", decode(user)?, decode(parsed.password().unwrap_or(""))?);
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(credentials)
                ))
            }
        };
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        Ok(Self {
            host,
            port: parsed.port().unwrap_or(80),
            authorization,
            tls: client_config(roots)?,
        })
    }

    /// Returns this proxy trusting `pem`'s certificates alone for endpoints (tests).
    pub fn trusting(mut self, pem: &str) -> Result<Self, String> {
        let mut roots = rustls::RootCertStore::empty();
        use rustls_pki_types::pem::PemObject;
        for certificate in rustls_pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let certificate = certificate.map_err(|error| format!("reading the certificate: {error}"))?;
            roots.add(certificate).map_err(|error| error.to_string())?;
        }
        self.tls = client_config(roots)?;
        Ok(self)
    }

    /// POSTs `body` with `headers` to `url`, whose host resolved to the
    /// checked `address`, through the proxy; returns the answer's status.
    pub async fn post(
        &self,
        url: &reqwest::Url,
        address: IpAddr,
        headers: &[(&str, String)],
        body: &str,
    ) -> Result<u16, Failure> {
        let transport = |error: std::io::Error| Failure::Transport(format!("through webhook_proxy: {error}"));
        let port = url.port_or_known_default().unwrap_or(80);
        let target = SocketAddr::new(address, port);
        let host = url.host_str().unwrap_or_default().to_owned();
        let host_header = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.clone(),
        };
        let mut proxy = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(transport)?;
        let _ = proxy.set_nodelay(true);
        let mut path = url.path().to_owned();
        if let Some(query) = url.query() {
            path.push('?');
            path.push_str(query);
        }
        if url.scheme() == "https" {
            let mut connect = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
            if let Some(authorization) = &self.authorization {
                connect.push_str(&format!("Proxy-Authorization: {authorization}\r\n"));
            }
            connect.push_str("\r\n");
            proxy.write_all(connect.as_bytes()).await.map_err(transport)?;
            let status = read_status(&mut proxy).await.map_err(transport)?;
            if status != 200 {
                return Err(Failure::Transport(format!(
                    "webhook_proxy refused the tunnel with HTTP {status}"
                )));
            }
            let name = rustls_pki_types::ServerName::try_from(host.clone())
                .map_err(|error| Failure::Refused(format!("`{host}` is not a TLS server name: {error}")))?;
            let stream = tokio_rustls::TlsConnector::from(self.tls.clone())
                .connect(name, proxy)
                .await
                .map_err(|error| Failure::Transport(format!("TLS with the receiver: {error}")))?;
            exchange(stream, &path, &host_header, None, headers, body).await
        } else {
            // The proxy is given the address, the receiver its name.
            let absolute = format!("http://{target}{path}");
            exchange(
                proxy,
                &absolute,
                &host_header,
                self.authorization.as_deref(),
                headers,
                body,
            )
            .await
        }
    }
}

fn client_config(roots: rustls::RootCertStore) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Sends one POST of `body` to `target` (a path, or an absolute URL for a
/// proxy) and returns the answer's status.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    target: &str,
    host: &str,
    proxy_authorization: Option<&str>,
    headers: &[(&str, String)],
    body: &str,
) -> Result<u16, Failure> {
    let transport = |error: std::io::Error| Failure::Transport(format!("through webhook_proxy: {error}"));
    let mut head = format!(
        "POST {target} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(authorization) = proxy_authorization {
        head.push_str(&format!("Proxy-Authorization: {authorization}\r\n"));
    }
    for (name, value) in headers {
        if value.contains(['\r', '\n']) {
            return Err(Failure::Refused(format!("header {name} holds a line break")));
        }
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await.map_err(transport)?;
    stream.write_all(body.as_bytes()).await.map_err(transport)?;
    stream.flush().await.map_err(transport)?;
    read_status(&mut stream).await.map_err(transport)
}

/// Reads a reply's head and returns its status code.
async fn read_status<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<u16> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let mut head = Vec::with_capacity(512);
    let mut byte = [0u8; 1];
    // Byte by byte: what follows the head (a tunnel's TLS) is not ours to take.
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD_BYTES {
            return Err(invalid("a reply head longer than 16 KiB"));
        }
        if stream.read(&mut byte).await? == 0 {
            return Err(invalid("the connection closed before a whole reply head"));
        }
        head.push(byte[0]);
    }
    let line = head.split(|&byte| byte == b'\r').next().unwrap_or_default();
    let line = std::str::from_utf8(line).map_err(|_| invalid("a status line that is not text"))?;
    let mut parts = line.split(' ');
    match (parts.next(), parts.next().and_then(|code| code.parse::<u16>().ok())) {
        (Some(version), Some(code)) if version.starts_with("HTTP/1.") => Ok(code),
        _ => Err(invalid("a reply that is not HTTP/1")),
    }
}

/// Decodes `%XX` escapes; `None` for a bad escape or text that is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(decoded).ok()
}
