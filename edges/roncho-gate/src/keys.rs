//! API keys: Honcho's JWTs, `Authorization: Bearer <jwt>`, HS256 over a
//! configured secret. Claims: `ad` (admin), `w` (workspace), `p` (peer), `s`
//! (session), `tn` (tenant), `exp` (seconds since the epoch; Honcho's
//! tooling writes an ISO-8601 string, also accepted), `iat`. A key is
//! authorized by its narrowest claim: `s`, else `p`, else `w`. A
//! multi-tenant server requires `tn` of every key but the operator's admin
//! key; any other server refuses keys that carry one.
//!
//! Several secrets may be accepted at once (rotation): the first signs, every
//! one verifies. Verification is by constant-time HMAC comparison; only
//! `alg: HS256` is accepted, so `none` and algorithm confusion fail.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use roncho_core::store::Tenants;
use roncho_core::{Caller, Error, Result, validate};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The secrets keys are signed and verified with.
pub struct KeySet {
    /// The first signs; all verify.
    secrets: Vec<hmac::Key>,
    /// Keys carry their tenant (`tn`).
    multi_tenant: bool,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KeySet")
            .field("secrets", &self.secrets.len())
            .field("multi_tenant", &self.multi_tenant)
            .finish()
    }
}

/// The claims of a key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ad: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<String>,
    /// Seconds since the epoch (or an ISO-8601 string, as Honcho writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<i64>,
    /// The tenant (Honcho's `tn`): accepted only by a multi-tenant server,
    /// where every key but the operator's admin key names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tn: Option<String>,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
}

const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

/// Returns a new secret of 32 random bytes from the system's generator,
/// hex-encoded.
pub fn random_secret() -> Result<String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Error::Internal("the system's random generator failed".into()))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

impl KeySet {
    /// Returns the key set of these secrets (the first signs); none may be empty.
    pub fn new<S: AsRef<[u8]>>(secrets: &[S]) -> Result<Self> {
        if secrets.is_empty() || secrets.iter().any(|secret| secret.as_ref().is_empty()) {
            return Err(Error::invalid("auth_jwt_secret", "must not be empty"));
        }
        Ok(Self {
            secrets: secrets
                .iter()
                .map(|secret| hmac::Key::new(hmac::HMAC_SHA256, secret.as_ref()))
                .collect(),
            multi_tenant: false,
        })
    }

    /// Makes keys carry their tenant: every key but the operator's admin
    /// key must name one (`tn`), and reaches only what its tenant holds.
    /// Otherwise a key that names a tenant is refused.
    pub fn multi_tenant(mut self, on: bool) -> Self {
        self.multi_tenant = on;
        self
    }

    /// Returns whether keys carry their tenant.
    pub fn is_multi_tenant(&self) -> bool {
        self.multi_tenant
    }

    /// Returns a signed key carrying `claims`.
    pub fn sign(&self, claims: &Claims) -> String {
        let header = URL_SAFE_NO_PAD.encode(HEADER);
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap_or_default());
        let signing_input = format!("{header}.{payload}");
        let tag = hmac::sign(&self.secrets[0], signing_input.as_bytes());
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// Returns the caller a key authenticates, at `now` (seconds since the
    /// epoch); `UNAUTHENTICATED` with the reason when it does not.
    pub fn verify(&self, token: &str, now: i64) -> Result<Caller> {
        let unauthenticated = |reason: &str| Error::Unauthenticated(reason.to_owned());
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(unauthenticated("malformed key: a JWT has three dot-separated parts"));
        };
        let header: Header = decode_json(header).ok_or_else(|| unauthenticated("malformed key header"))?;
        if header.alg != "HS256" {
            return Err(Error::Unauthenticated(format!(
                "key algorithm `{}` is not accepted: only HS256",
                header.alg
            )));
        }
        let signature = URL_SAFE_NO_PAD
            .decode(signature.trim_end_matches('='))
            .map_err(|_| unauthenticated("malformed key signature"))?;
        let signing_input = &token[..token.len() - token.rsplit('.').next().map_or(0, str::len) - 1];
        if !self
            .secrets
            .iter()
            .any(|secret| hmac::verify(secret, signing_input.as_bytes(), &signature).is_ok())
        {
            return Err(unauthenticated("invalid key signature"));
        }
        let raw: Value = decode_json(payload).ok_or_else(|| unauthenticated("malformed key claims"))?;
        // A tenant claim that is there but names no tenant is no claim to
        // read as absent: on a multi-tenant server that would be the
        // operator's key.
        if raw
            .get("tn")
            .is_some_and(|tenant| tenant.as_str().is_none_or(str::is_empty))
        {
            return Err(unauthenticated("malformed key tenant (tn): it names no tenant"));
        }
        let claims: Claims = serde_json::from_value(raw).map_err(|_| unauthenticated("malformed key claims"))?;
        if let Some(exp) = &claims.exp {
            let expires = expiry_seconds(exp).ok_or_else(|| unauthenticated("malformed key expiry (exp)"))?;
            if now >= expires {
                return Err(unauthenticated("key expired"));
            }
        }
        caller(&claims, self.multi_tenant)
    }
}

/// Reads a key's claims without verifying it: only for defaults a client
/// fills in from its own key (`roncho mcp`'s workspace and peer). The
/// server verifies the key on every call.
pub fn peek_claims(token: &str) -> Option<Claims> {
    let payload = token.trim().split('.').nth(1)?;
    decode_json(payload)
}

/// Returns the caller a verified key's claims name (its narrowest claim),
/// on a server that is `multi_tenant` or not.
pub fn caller(claims: &Claims, multi_tenant: bool) -> Result<Caller> {
    let present = |claim: &Option<String>| claim.clone().filter(|value| !value.is_empty());
    let tenant = match (present(&claims.tn), multi_tenant) {
        (Some(_), false) => {
            return Err(Error::Unauthenticated(
                "the key names a tenant (tn), and this server is not multi-tenant".into(),
            ));
        }
        (Some(tenant), true) => {
            validate::resource_id("tn", &tenant)
                .map_err(|_| Error::Unauthenticated("malformed key tenant (tn)".into()))?;
            Some(tenant)
        }
        (None, _) => None,
    };
    if claims.ad == Some(true) {
        return Ok(match tenant {
            Some(tenant) => Caller::TenantAdmin { tenant },
            None => Caller::Admin,
        });
    }
    if multi_tenant && tenant.is_none() {
        return Err(Error::Unauthenticated(
            "this server is multi-tenant: a key must name its tenant (tn); only the operator's admin key names none"
                .into(),
        ));
    }
    let (workspace, peer, session) = (present(&claims.w), present(&claims.p), present(&claims.s));
    match (workspace, peer, session) {
        (None, None, None) => Err(Error::Unauthenticated("the key names no scope".into())),
        (None, _, _) => Err(Error::Unauthenticated(
            "a peer or session key must name its workspace (w)".into(),
        )),
        (Some(workspace), _, Some(session)) => Ok(Caller::Session {
            workspace,
            session,
            tenant,
        }),
        (Some(workspace), Some(peer), None) => Ok(Caller::Peer {
            workspace,
            peer,
            tenant,
        }),
        (Some(workspace), None, None) => Ok(Caller::Workspace { workspace, tenant }),
    }
}

fn decode_json<T: serde::de::DeserializeOwned>(part: &str) -> Option<T> {
    let bytes = URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Returns `exp` in seconds since the epoch: a number, or an ISO-8601 string.
fn expiry_seconds(exp: &Value) -> Option<i64> {
    match exp {
        Value::Number(number) => number
            .as_i64()
            .or_else(|| number.as_f64().map(|seconds| seconds as i64)),
        Value::String(text) => roncho_core::filter::parse_timestamp(text).map(|micros| micros.div_euclid(1_000_000)),
        _ => None,
    }
}

/// Asks for a key scoped to a workspace, a peer of it or a session of it.
#[derive(Debug, Clone, Default)]
pub struct CreateKey {
    pub workspace_id: String,
    pub peer_id: Option<String>,
    pub session_id: Option<String>,
    /// Microseconds since the epoch; `None`: the key does not expire.
    pub expires_at: Option<i64>,
    /// The tenant the key belongs to (multi-tenant servers, where every
    /// key names one; a tenant's admin key mints keys of its own tenant
    /// alone).
    pub tenant_id: Option<String>,
}

/// A minted key (its `Debug` leaves the key out).
#[derive(Clone)]
pub struct IssuedKey {
    pub key: String,
    /// Microseconds since the epoch, to the second.
    pub expires_at: Option<i64>,
}

impl std::fmt::Debug for IssuedKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("IssuedKey")
            .field("key", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Mints the key `request` asks for at `now` (microseconds since the epoch).
pub fn issue(keys: &KeySet, request: CreateKey, now: i64) -> Result<IssuedKey> {
    let optional = |field: &str, id: Option<String>| {
        id.filter(|id| !id.is_empty())
            .map(|id| validate::resource_id(field, &id))
            .transpose()
    };
    let workspace = validate::resource_id("workspace_id", &request.workspace_id)?;
    let peer = optional("peer_id", request.peer_id)?;
    let session = optional("session_id", request.session_id)?;
    if peer.is_some() && session.is_some() {
        return Err(Error::invalid(
            "session_id",
            "a key names a peer or a session, not both (the session would be its narrowest claim)",
        ));
    }
    let expires = match request.expires_at {
        Some(at) if at <= now => return Err(Error::invalid("expires_at", "must be in the future")),
        Some(at) => Some(at.div_euclid(1_000_000)),
        None => None,
    };
    let tenant = optional("tenant_id", request.tenant_id)?;
    match (&tenant, keys.multi_tenant) {
        (None, true) => {
            return Err(Error::invalid(
                "tenant_id",
                "this server is multi-tenant: every key it mints names its tenant",
            ));
        }
        (Some(_), false) => return Err(Error::invalid("tenant_id", "this server is not multi-tenant")),
        _ => {}
    }
    let claims = Claims {
        ad: None,
        w: Some(workspace),
        p: peer,
        s: session,
        exp: expires.map(Value::from),
        iat: Some(now.div_euclid(1_000_000)),
        tn: tenant,
    };
    Ok(IssuedKey {
        key: keys.sign(&claims),
        expires_at: expires.map(|seconds| seconds * 1_000_000),
    })
}

/// Mints an admin key at `now` (microseconds since the epoch): the
/// operator's, or with `tenant` (multi-tenant servers only) an admin of
/// that tenant's workspaces.
pub fn issue_admin(keys: &KeySet, tenant: Option<String>, expires_at: Option<i64>, now: i64) -> Result<String> {
    let tenant = tenant
        .map(|tenant| validate::resource_id("tenant", &tenant))
        .transpose()?;
    if tenant.is_some() && !keys.multi_tenant {
        return Err(Error::invalid("tenant", "this server is not multi-tenant"));
    }
    Ok(keys.sign(&Claims {
        ad: Some(true),
        exp: expires_at.map(|at| Value::from(at.div_euclid(1_000_000))),
        iat: Some(now.div_euclid(1_000_000)),
        tn: tenant,
        ..Claims::default()
    }))
}

/// Gives a workspace id to a tenant: the operator's call, on a multi-tenant server.
#[derive(Debug, Clone, Default)]
pub struct AssignWorkspace {
    pub workspace_id: String,
    pub tenant_id: String,
}

/// A workspace given to a tenant, and the tenant that held it before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned {
    pub workspace_id: String,
    pub tenant_id: String,
    pub previous_tenant_id: Option<String>,
}

/// Key creation and tenants' workspaces, as every edge calls them.
#[derive(Clone)]
pub struct KeyIssuer {
    /// `None`: the server runs without authentication and mints nothing.
    keys: Option<Arc<KeySet>>,
    /// Which tenant holds each workspace.
    tenants: Arc<dyn Tenants>,
}

impl std::fmt::Debug for KeyIssuer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KeyIssuer")
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl KeyIssuer {
    /// Returns the issuer signing with `keys`, assigning workspaces in `tenants`.
    pub fn new(keys: Option<Arc<KeySet>>, tenants: Arc<dyn Tenants>) -> Self {
        Self { keys, tenants }
    }

    fn keys(&self) -> Result<&Arc<KeySet>> {
        self.keys.as_ref().ok_or_else(|| {
            Error::FailedPrecondition(
                "this server runs without authentication (auth_jwt_secret is unset): it has no keys to create".into(),
            )
        })
    }

    /// Mints a key (the caller was authorized, and confined to its tenant, by the edge).
    pub async fn create_key(&self, request: CreateKey) -> Result<IssuedKey> {
        issue(self.keys()?, request, roncho_core::model::now_micros())
    }

    /// Gives a workspace to a tenant (the operator was authorized by the edge).
    pub async fn assign_workspace(&self, request: AssignWorkspace) -> Result<Assigned> {
        let workspace_id = validate::resource_id("workspace_id", &request.workspace_id)?;
        let tenant_id = validate::resource_id("tenant_id", &request.tenant_id)?;
        if !self.keys()?.is_multi_tenant() {
            return Err(Error::FailedPrecondition(
                "this server is not multi-tenant (auth multi_tenant is off): workspaces belong to no tenant".into(),
            ));
        }
        // The operator's own ids are held under the empty name: no tenant.
        let previous_tenant_id = self
            .tenants
            .assign_workspace(&workspace_id, &tenant_id)
            .await?
            .filter(|previous| !previous.is_empty());
        Ok(Assigned {
            workspace_id,
            tenant_id,
            previous_tenant_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn keys() -> KeySet {
        KeySet::new(&["a-secret-of-at-least-thirty-two-bytes!"]).unwrap()
    }

    fn claims(w: Option<&str>, p: Option<&str>, s: Option<&str>) -> Claims {
        Claims {
            w: w.map(str::to_owned),
            p: p.map(str::to_owned),
            s: s.map(str::to_owned),
            ..Claims::default()
        }
    }

    fn reason(result: Result<Caller>) -> String {
        match result {
            Err(Error::Unauthenticated(reason)) => reason,
            other => panic!("expected unauthenticated, got {other:?}"),
        }
    }

    #[test]
    fn keys_authenticate_by_their_narrowest_claim() {
        let keys = keys();
        let verify = |claims: &Claims| keys.verify(&keys.sign(claims), NOW).unwrap();
        let admin = Claims {
            ad: Some(true),
            ..Claims::default()
        };
        assert_eq!(verify(&admin), Caller::Admin);
        assert_eq!(
            verify(&claims(Some("w"), None, None)),
            Caller::Workspace {
                workspace: "w".into(),
                tenant: None
            }
        );
        assert_eq!(
            verify(&claims(Some("w"), Some("p"), None)),
            Caller::Peer {
                workspace: "w".into(),
                peer: "p".into(),
                tenant: None
            }
        );
        assert_eq!(
            verify(&claims(Some("w"), Some("p"), Some("s"))),
            Caller::Session {
                workspace: "w".into(),
                session: "s".into(),
                tenant: None
            }
        );
        // Empty claims are absent, as in Honcho.
        assert_eq!(
            verify(&claims(Some("w"), Some(""), Some(""))),
            Caller::Workspace {
                workspace: "w".into(),
                tenant: None
            }
        );
    }

    #[test]
    fn bad_keys_are_unauthenticated_with_a_reason() {
        let keys = keys();
        let good = keys.sign(&claims(Some("w"), None, None));
        assert!(reason(keys.verify("not-a-jwt", NOW)).contains("three"));
        let (header, rest) = good.split_once('.').unwrap();
        assert!(!header.is_empty());
        let none_header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
        let payload = rest.split('.').next().unwrap();
        assert!(reason(keys.verify(&format!("{none_header}.{payload}."), NOW)).contains("`none`"));
        let other = KeySet::new(&["another-secret-entirely-of-32-bytes"]).unwrap();
        assert!(reason(keys.verify(&other.sign(&claims(Some("w"), None, None)), NOW)).contains("signature"));
        let expired = Claims {
            exp: Some(Value::from(NOW - 1)),
            ..claims(Some("w"), None, None)
        };
        assert!(reason(keys.verify(&keys.sign(&expired), NOW)).contains("expired"));
        assert!(reason(keys.verify(&keys.sign(&claims(None, Some("p"), None)), NOW)).contains("workspace"));
        assert!(reason(keys.verify(&keys.sign(&claims(None, None, Some("s"))), NOW)).contains("workspace"));
        assert!(reason(keys.verify(&keys.sign(&Claims::default()), NOW)).contains("no scope"));
        // A tampered payload breaks the signature.
        let admin_payload = URL_SAFE_NO_PAD.encode(r#"{"ad":true}"#);
        let signature = good.rsplit('.').next().unwrap();
        assert!(reason(keys.verify(&format!("{header}.{admin_payload}.{signature}"), NOW)).contains("signature"));
    }

    #[test]
    fn honchos_iso_expiry_is_understood() {
        let keys = keys();
        let future = Claims {
            exp: Some(Value::from("2030-01-01T00:00:00")),
            ..claims(Some("w"), None, None)
        };
        assert!(keys.verify(&keys.sign(&future), NOW).is_ok());
        let past = Claims {
            exp: Some(Value::from("2020-01-01T00:00:00+00:00")),
            ..claims(Some("w"), None, None)
        };
        assert!(reason(keys.verify(&keys.sign(&past), NOW)).contains("expired"));
    }

    #[test]
    fn every_accepted_secret_verifies_and_the_first_signs() {
        let old = KeySet::new(&["the-old-secret-that-is-being-rotated"]).unwrap();
        let rotating = KeySet::new(&[
            "the-new-secret-that-signs-from-now-on",
            "the-old-secret-that-is-being-rotated",
        ])
        .unwrap();
        let minted_before = old.sign(&claims(Some("w"), None, None));
        assert!(rotating.verify(&minted_before, NOW).is_ok());
        let minted_after = rotating.sign(&claims(Some("w"), None, None));
        assert!(old.verify(&minted_after, NOW).is_err(), "signed with the new secret");
    }

    #[test]
    fn issued_keys_carry_their_scope_and_expiry() {
        let keys = keys();
        let now = NOW * 1_000_000;
        let issued = issue(
            &keys,
            CreateKey {
                workspace_id: "w".into(),
                peer_id: Some("p".into()),
                session_id: None,
                expires_at: Some(now + 3_600_000_000),
                tenant_id: None,
            },
            now,
        )
        .unwrap();
        assert_eq!(
            keys.verify(&issued.key, NOW).unwrap(),
            Caller::Peer {
                workspace: "w".into(),
                peer: "p".into(),
                tenant: None
            }
        );
        assert!(keys.verify(&issued.key, NOW + 3_600).is_err(), "expired an hour later");
        let both = CreateKey {
            workspace_id: "w".into(),
            peer_id: Some("p".into()),
            session_id: Some("s".into()),
            expires_at: None,
            tenant_id: None,
        };
        assert!(issue(&keys, both, now).is_err());
        let past = CreateKey {
            workspace_id: "w".into(),
            expires_at: Some(now - 1),
            ..CreateKey::default()
        };
        assert!(issue(&keys, past, now).is_err());
    }

    #[test]
    fn a_tenant_is_named_on_a_multi_tenant_server_and_refused_elsewhere() {
        let single = keys();
        let multi = keys().multi_tenant(true);
        let with_tenant = |claims: Claims, tenant: &str| Claims {
            tn: Some(tenant.into()),
            ..claims
        };
        let admin = Claims {
            ad: Some(true),
            ..Claims::default()
        };
        // One server: a key naming a tenant is refused, whatever else it says.
        for claims in [
            with_tenant(admin.clone(), "acme"),
            with_tenant(claims(Some("w"), None, None), "acme"),
            with_tenant(claims(Some("w"), Some("p"), None), "acme"),
        ] {
            assert!(reason(single.verify(&single.sign(&claims), NOW)).contains("not multi-tenant"));
        }
        assert_eq!(multi.verify(&multi.sign(&admin), NOW).unwrap(), Caller::Admin);
        assert_eq!(
            multi
                .verify(&multi.sign(&with_tenant(admin.clone(), "acme")), NOW)
                .unwrap(),
            Caller::TenantAdmin { tenant: "acme".into() }
        );
        assert_eq!(
            multi
                .verify(
                    &multi.sign(&with_tenant(claims(Some("w"), Some("p"), None), "acme")),
                    NOW
                )
                .unwrap(),
            Caller::Peer {
                workspace: "w".into(),
                peer: "p".into(),
                tenant: Some("acme".into())
            }
        );
        // Multi-tenant: every scoped key names its tenant.
        for claims in [claims(Some("w"), None, None), claims(Some("w"), None, Some("s"))] {
            assert!(reason(multi.verify(&multi.sign(&claims), NOW)).contains("must name its tenant"));
        }
        // A tenant claim naming no tenant is refused, not read as absent
        // (an admin key would be the operator's), on either server.
        for payload in [
            r#"{"ad":true,"tn":""}"#,
            r#"{"ad":true,"tn":null}"#,
            r#"{"w":"w","tn":5}"#,
            r#"{"ad":true,"tn":[]}"#,
        ] {
            for keys in [&single, &multi] {
                let header = URL_SAFE_NO_PAD.encode(HEADER);
                let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(payload));
                let tag = hmac::sign(&keys.secrets[0], input.as_bytes());
                let token = format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()));
                assert!(reason(keys.verify(&token, NOW)).contains("tenant"), "{payload}");
            }
        }
        for malformed in ["a b", "../x", "é", &"t".repeat(600)] {
            let claims = with_tenant(claims(Some("w"), None, None), malformed);
            assert!(
                reason(multi.verify(&multi.sign(&claims), NOW)).contains("tenant"),
                "{malformed}"
            );
        }
        // Minting follows the same rule.
        let now = NOW * 1_000_000;
        let request = |tenant: Option<&str>| CreateKey {
            workspace_id: "w".into(),
            tenant_id: tenant.map(str::to_owned),
            ..CreateKey::default()
        };
        assert!(issue(&multi, request(None), now).is_err());
        assert!(issue(&single, request(Some("acme")), now).is_err());
        let minted = issue(&multi, request(Some("acme")), now).unwrap();
        assert_eq!(multi.verify(&minted.key, NOW).unwrap().tenant(), Some("acme"));
    }
}
