//! Where the load goes: an address, and for a server with TLS and API keys
//! the CA to trust and the key to send.

use std::path::PathBuf;

use anyhow::Context;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// A connection to roncho: a channel that sends the key with every call.
pub type Conn = InterceptedService<Channel, Key>;

/// Sends `authorization: Bearer <key>` when there is a key.
#[derive(Debug, Clone, Default)]
pub struct Key(Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>);

impl tonic::service::Interceptor for Key {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// A server to load, and how to reach it.
#[derive(Debug, Clone)]
pub struct Target {
    pub address: String,
    /// The CA of the server's certificate: connect over TLS.
    pub ca_file: Option<PathBuf>,
    /// An API key.
    pub key: Option<String>,
}

impl Target {
    /// Returns this target at another address (a deployment's other roles).
    pub fn at(&self, address: &str) -> Target {
        Target {
            address: address.to_owned(),
            ..self.clone()
        }
    }

    /// Connects, over TLS when a CA is given.
    pub async fn connect(&self) -> anyhow::Result<Conn> {
        let mut endpoint = Endpoint::from_shared(self.address.clone())?;
        if let Some(ca_file) = &self.ca_file {
            let ca = std::fs::read(ca_file).with_context(|| format!("reading {}", ca_file.display()))?;
            endpoint = endpoint.tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))?;
        }
        let channel = endpoint
            .connect()
            .await
            .with_context(|| format!("connecting to {}", self.address))?;
        let key = match &self.key {
            Some(key) => Some(
                format!("Bearer {key}")
                    .parse()
                    .context("the key is not valid metadata")?,
            ),
            None => None,
        };
        Ok(InterceptedService::new(channel, Key(key)))
    }
}
