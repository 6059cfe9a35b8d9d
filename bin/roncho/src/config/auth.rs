//! The `[auth]` section: how callers are authenticated.

use std::net::SocketAddr;

use anyhow::bail;
use serde::Serialize;

use super::secret::Secret;

section! {
    /// `[auth]` as one layer gives it.
    AuthLayer {
        /// The secret API keys (HS256 JWTs) are signed and verified with; unset:
        /// no authentication (allowed on a loopback address only).
        auth_jwt_secret: String,
        /// Further secrets keys are still verified with, comma-separated: the
        /// previous ones while keys are rotated.
        auth_jwt_previous_secrets: String,
        /// Serve a non-loopback address without authentication anyway.
        insecure_no_auth: bool,
        /// Require keys without an operator's secret: one is generated into
        /// the data directory at first start, with an admin key beside it
        /// (owner-only files), which the CLI and `roncho mcp --addr` read.
        local_key: bool,
        /// Keys carry a tenant (Honcho's `tn` claim) and every workspace
        /// belongs to one: a key reaches only its tenant's workspaces, and
        /// only the operator's admin key names no tenant (docs/security.md#tenants).
        multi_tenant: bool,
    }
}

/// Shortest auth secret a server off loopback accepts.
pub const MIN_SECRET_BYTES: usize = 32;

/// How callers are authenticated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuthConfig {
    /// The secrets keys are verified with, the signing one first; empty:
    /// authentication is off and every caller is admin.
    pub secrets: Vec<Secret>,
    /// Serving a non-loopback address without authentication was asked for.
    pub insecure_no_auth: bool,
    /// Without `secrets`, keys are verified with the data directory's
    /// local secret ([`crate::local_key`]).
    pub local_key: bool,
    /// Keys carry their tenant, and every workspace belongs to one.
    pub multi_tenant: bool,
}

impl AuthLayer {
    pub(super) fn resolve(self) -> anyhow::Result<AuthConfig> {
        if self.auth_jwt_previous_secrets.is_some() && self.auth_jwt_secret.is_none() {
            bail!(
                "auth_jwt_previous_secrets needs auth_jwt_secret: the current secret signs, the previous ones only verify"
            );
        }
        // The current secret is taken whole; only the previous ones are a list.
        let secrets = self
            .auth_jwt_secret
            .iter()
            .map(|secret| secret.trim())
            .chain(
                self.auth_jwt_previous_secrets
                    .iter()
                    .flat_map(|secrets| secrets.split(','))
                    .map(str::trim),
            )
            .filter(|secret| !secret.is_empty())
            .map(Secret::from)
            .collect();
        let config = AuthConfig {
            secrets,
            insecure_no_auth: self.insecure_no_auth.unwrap_or(false),
            local_key: self.local_key.unwrap_or(false),
            multi_tenant: self.multi_tenant.unwrap_or(false),
        };
        if config.multi_tenant && !config.enabled() {
            bail!(
                "multi_tenant needs keys: without auth_jwt_secret (or local_key) every caller is admin, and no key \
                 names a tenant"
            );
        }
        Ok(config)
    }
}

impl AuthConfig {
    /// Returns whether keys are required.
    pub fn enabled(&self) -> bool {
        !self.secrets.is_empty() || self.local_key
    }

    /// Returns why serving the non-loopback `address` is refused: no
    /// authentication (unless `insecure_no_auth`), or a secret short enough
    /// to guess.
    pub(super) fn check_exposure(&self, address: SocketAddr) -> anyhow::Result<()> {
        if let Some(short) = self
            .secrets
            .iter()
            .find(|secret| secret.expose().len() < MIN_SECRET_BYTES)
        {
            bail!(
                "refusing to serve {} with an auth secret of {} bytes: keys signed with it can be guessed offline. \
                 Use at least {MIN_SECRET_BYTES} random bytes (openssl rand -hex 32)",
                address,
                short.expose().len()
            );
        }
        if self.enabled() || self.insecure_no_auth {
            return Ok(());
        }
        bail!(
            "refusing to serve {} without authentication: anyone who reaches it could read and delete every workspace. \
             Set auth_jwt_secret (RONCHO_AUTH_JWT_SECRET or --auth-jwt-secret), listen on a loopback address, \
             or pass --insecure-no-auth to accept the risk",
            address
        )
    }
}
