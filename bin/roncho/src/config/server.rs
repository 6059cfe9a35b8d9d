//! The `[server]` section: what a process runs and where it listens.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::auth::AuthConfig;

section! {
    /// `[server]` as one layer gives it.
    ServerLayer {
        listen: SocketAddr,
        roles: String,
        /// A plain-text address serving only gRPC health checks (probes that
        /// cannot speak TLS); unset: health is served on `listen` alone.
        health_listen: SocketAddr,
        /// The Honcho v3 REST edge's address, or `off`; unset: 127.0.0.1:8000
        /// (Honcho's port) in a process that serves both reads and writes.
        rest_listen: String,
        /// Serve gRPC server reflection; unset: when authentication is off.
        grpc_reflection: bool,
        /// The gRPC listener's TLS certificate chain and key (PEM); unset: plain text.
        tls_cert_file: PathBuf,
        tls_key_file: PathBuf,
        /// CA (PEM) client certificates must chain to: mutual TLS.
        tls_client_ca_file: PathBuf,
        shutdown_grace_secs: u64,
        startup_timeout_secs: u64,
        /// Origins (`https://app.example.com`, comma-separated) whose web
        /// pages may call the HTTP routes, with CORS; unset: none but the
        /// server's own.
        allowed_origins: String,
        /// Host names (comma-separated) a server without keys answers
        /// under, beside loopback names; unset: loopback names only.
        allowed_hosts: String,
    }
}

/// What a process runs and where it listens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerConfig {
    /// Address of the gRPC server (every role serves health there).
    pub listen: SocketAddr,
    pub roles: Vec<Role>,
    /// Where health checks are also served, in plain text.
    pub health_listen: Option<SocketAddr>,
    /// Where the Honcho v3 REST edge listens; `None`: it does not.
    pub rest_listen: Option<RestListen>,
    /// Whether gRPC server reflection is served.
    pub grpc_reflection: bool,
    /// TLS on `listen`; `None`: plain text.
    pub tls: Option<crate::tls::TlsFiles>,
    /// How long SIGTERM waits for in-flight requests before exiting.
    pub shutdown_grace: Duration,
    /// How long start-up waits for unreachable dependencies (the database,
    /// NATS) before giving up.
    pub startup_timeout: Duration,
    /// Origins whose web pages may call the HTTP routes.
    pub allowed_origins: Vec<String>,
    /// Host names served beside loopback ones by a server without keys.
    pub allowed_hosts: Vec<String>,
}

impl ServerLayer {
    pub(super) fn resolve(self, auth: &AuthConfig) -> anyhow::Result<ServerConfig> {
        let roles = parse_roles(self.roles.as_deref().unwrap_or("all"))?;
        let tls = match (self.tls_cert_file, self.tls_key_file) {
            (Some(cert), Some(key)) => Some(crate::tls::TlsFiles {
                cert,
                key,
                client_ca: self.tls_client_ca_file,
            }),
            (None, None) if self.tls_client_ca_file.is_some() => {
                bail!(
                    "tls_client_ca_file needs tls_cert_file and tls_key_file: client certificates are checked over TLS"
                )
            }
            (None, None) => None,
            _ => bail!("tls_cert_file and tls_key_file go together"),
        };
        let list = |text: Option<String>| -> Vec<String> {
            text.iter()
                .flat_map(|text| text.split(','))
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let (allowed_origins, allowed_hosts) = (list(self.allowed_origins), list(self.allowed_hosts));
        // Checked now: a typo stops start-up, not every browser call.
        roncho_gate::BrowserPolicy::new(&allowed_origins, &allowed_hosts).map_err(anyhow::Error::msg)?;
        Ok(ServerConfig {
            listen: self.listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 50051))),
            health_listen: self.health_listen,
            rest_listen: rest_listen(self.rest_listen.as_deref(), &roles)?,
            grpc_reflection: self.grpc_reflection.unwrap_or(!auth.enabled()),
            tls,
            shutdown_grace: Duration::from_secs(self.shutdown_grace_secs.unwrap_or(10)),
            startup_timeout: Duration::from_secs(self.startup_timeout_secs.unwrap_or(120)),
            roles,
            allowed_origins,
            allowed_hosts,
        })
    }
}

impl ServerConfig {
    /// Returns the browser rules the settings give.
    pub fn browsers(&self) -> roncho_gate::BrowserPolicy {
        roncho_gate::BrowserPolicy::new(&self.allowed_origins, &self.allowed_hosts)
            .expect("checked when the configuration was resolved")
    }
}

/// A role this process can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Ingest,
    Recall,
    Dialectic,
    Deriver,
    Dreamer,
    Reconciler,
}

impl Role {
    /// Every role, in start-up order.
    pub const ALL: [Role; 6] = [
        Role::Ingest,
        Role::Recall,
        Role::Dialectic,
        Role::Deriver,
        Role::Dreamer,
        Role::Reconciler,
    ];

    /// Returns whether the role answers clients (and so serves keys).
    pub fn serves_api(self) -> bool {
        !matches!(self, Role::Reconciler)
    }

    /// Returns the role's name as written in `--roles`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Ingest => "ingest",
            Role::Recall => "recall",
            Role::Dialectic => "dialectic",
            Role::Deriver => "deriver",
            Role::Dreamer => "dreamer",
            Role::Reconciler => "reconciler",
        }
    }
}

/// Parses `ingest,recall` or `all` into roles, sorted and deduplicated.
pub fn parse_roles(text: &str) -> anyhow::Result<Vec<Role>> {
    let mut roles = Vec::new();
    for name in text.split(',').map(str::trim).filter(|name| !name.is_empty()) {
        if name == "all" {
            roles.extend(Role::ALL);
            continue;
        }
        let role = Role::ALL
            .into_iter()
            .find(|role| role.name() == name)
            .with_context(|| {
                format!("unknown role `{name}`; roles are all, ingest, recall, dialectic, deriver, dreamer, reconciler")
            })?;
        roles.push(role);
    }
    if roles.is_empty() {
        bail!("no role given; use --roles all or a list such as ingest,recall");
    }
    roles.sort();
    roles.dedup();
    Ok(roles)
}

/// Where the REST edge listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RestListen {
    pub address: SocketAddr,
    /// Set in the configuration: failing to bind it stops start-up. The
    /// default address gives way, with a warning, to whatever holds it.
    pub explicit: bool,
}

/// Honcho's port, where `roncho serve` alone serves the REST edge.
pub const DEFAULT_REST_LISTEN: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8000);

/// Resolves `rest_listen`: `off`, an address, or unset (Honcho's port in a
/// process that serves reads and writes alike, else none).
fn rest_listen(setting: Option<&str>, roles: &[Role]) -> anyhow::Result<Option<RestListen>> {
    match setting.map(str::trim) {
        Some("off") => Ok(None),
        Some(text) => {
            let address = text
                .parse()
                .with_context(|| format!("rest_listen `{text}` is neither `off` nor an address (127.0.0.1:8000)"))?;
            Ok(Some(RestListen {
                address,
                explicit: true,
            }))
        }
        None if roles.contains(&Role::Ingest) && roles.contains(&Role::Recall) => Ok(Some(RestListen {
            address: DEFAULT_REST_LISTEN,
            explicit: false,
        })),
        None => Ok(None),
    }
}
