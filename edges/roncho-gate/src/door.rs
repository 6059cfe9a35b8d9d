//! The door every request passes before its body is read, on every wire:
//! its visit opened (a span and a clock, see [`observe`](crate::observe)),
//! authentication, then admission (a place in flight, the request's
//! deadline and its body's).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use roncho_core::{Caller, Error};

use crate::admission::{Admission, Slot};
use crate::keys::KeySet;
use crate::observe::{RequestMetrics, Visit, Wire};

/// The address a request's connection comes from: the listener puts it
/// in the request's extensions, and admission bounds requests per
/// connection by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub SocketAddr);

/// Authenticates calls: the `authorization: Bearer <key>` header becomes
/// the request's [`Caller`], or the call ends `UNAUTHENTICATED` with the
/// reason. Without keys (auth off) every caller is admin.
#[derive(Debug, Clone)]
pub struct Authenticator {
    keys: Option<Arc<KeySet>>,
}

impl Authenticator {
    /// Returns the authenticator verifying with `keys`; `None`: authentication is off.
    pub fn new(keys: Option<Arc<KeySet>>) -> Self {
        Self { keys }
    }

    /// Returns the caller the headers of a call authenticate.
    pub fn authenticate(&self, headers: &http::HeaderMap) -> roncho_core::Result<Caller> {
        let Some(keys) = &self.keys else {
            return Ok(Caller::Admin);
        };
        let value = headers
            .get(http::header::AUTHORIZATION)
            .ok_or_else(|| Error::Unauthenticated("no access token provided (authorization: Bearer <key>)".into()))?;
        let token = value
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")))
            .map(str::trim)
            .ok_or_else(|| Error::Unauthenticated("the authorization metadata must be `Bearer <key>`".into()))?;
        let now = roncho_core::model::now_micros().div_euclid(1_000_000);
        keys.verify(token, now)
    }
}

/// A caller another wire of this process authenticated and admitted, on a
/// request it makes in process (an MCP tool calling the REST routes) while
/// its own call holds its place: the door lets it in as that caller, within
/// the route's deadline but holding no second place, and leaves the call
/// uncounted (the wire that made it counts it). The wire that makes such
/// requests drops them when its own call ends. Only code puts it in a
/// request's extensions; nothing a client sends becomes one.
#[derive(Debug, Clone)]
pub struct Vouched(pub Caller);

/// Observation, authentication and admission, shared by every wire.
#[derive(Debug, Clone)]
pub struct Door {
    authenticator: Authenticator,
    admission: Admission,
    metrics: Option<Arc<dyn RequestMetrics>>,
}

/// A request let in: who calls, the place it holds, and its deadlines.
#[derive(Debug)]
pub struct Pass {
    /// The authenticated caller; `None` for calls that need none (probes).
    pub caller: Option<Caller>,
    /// The place in flight, held until the reply's last byte.
    pub slot: Option<Slot>,
    /// How long the call may run; `None` for calls that need no key (a
    /// health `Watch` stream lasts).
    pub timeout: Option<Duration>,
    /// How long its body may take to arrive.
    pub body_timeout: Option<Duration>,
}

impl Door {
    /// Returns the door authenticating with `authenticator` and admitting with `admission`.
    pub fn new(authenticator: Authenticator, admission: Admission) -> Self {
        Self {
            authenticator,
            admission,
            metrics: None,
        }
    }

    /// Counts every call's visit in `metrics`.
    pub fn observed_by(mut self, metrics: Option<Arc<dyn RequestMetrics>>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Opens the visit of a call to `route` on `wire` (see [`Visit::open`]).
    pub fn visit(
        &self,
        wire: Wire,
        route: String,
        method: Option<&str>,
        headers: &http::HeaderMap,
        traced: bool,
    ) -> Visit {
        Visit::open(wire, route, method, headers, traced, self.metrics.clone())
    }

    /// Lets in a request for `path` with `headers`, from the connection
    /// its extensions name ([`Peer`]), or says why not. The caller is
    /// authenticated first (when `authenticate`): a key bound to a
    /// tenant or a workspace takes that party's places, so one tenant
    /// cannot take every place.
    pub fn enter<B>(&self, request: &http::Request<B>, authenticate: bool) -> roncho_core::Result<Pass> {
        let caller = match authenticate {
            true => Some(self.authenticator.authenticate(request.headers())?),
            false => None,
        };
        let path = request.uri().path();
        let connection = request.extensions().get::<Peer>().map(|peer| peer.0);
        let party = caller.as_ref().and_then(Caller::party);
        let slot = self.admission.admit(path, connection, party.as_deref())?;
        // Calls that need no key run as long as they like (a health
        // `Watch` stream), in a place of their own; their bodies arrive in time.
        let limited = !slot.is_open();
        Ok(Pass {
            caller,
            slot: Some(slot),
            timeout: limited.then(|| self.admission.timeout(path)),
            body_timeout: Some(self.admission.body_timeout()),
        })
    }

    /// How long a call to `path` may run.
    pub fn timeout(&self, path: &str) -> Duration {
        self.admission.timeout(path)
    }

    /// Counts a call that ran past its `timeout` and returns what it ends with.
    pub fn timed_out(&self, timeout: Duration) -> Error {
        self.admission.timed_out();
        Error::DeadlineExceeded(format!(
            "the request ran past the server's {} s limit",
            timeout.as_secs_f32()
        ))
    }
}

/// Logs an internal error's detail under a new id and returns what the
/// client is told, on every wire: the id alone.
pub fn hide_internal(detail: &str) -> String {
    let error_id = roncho_core::model::new_public_id();
    tracing::error!(%error_id, %detail, "internal error");
    format!("internal error (id {error_id}); the server's log has the detail")
}
