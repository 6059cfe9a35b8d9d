//! Admission control: what one caller may take from everyone else.
//!
//! - [`Admission`] bounds requests in flight, in the whole process and per
//!   connection, and sheds the excess at once (`RESOURCE_EXHAUSTED` with a
//!   retry delay) instead of queuing it; it also sets the request timeout
//!   past which calls end `DEADLINE_EXCEEDED`, and the time a request's body
//!   may take to arrive. A place is held until the reply's last byte (a chat
//!   stream holds it while it streams). The gate applies it to every call,
//!   on every wire.
//! - Calls that need no key (health checks and their `Watch` streams,
//!   reflection, metrics, docs) are never shed for the requests' sake, but
//!   have places of their own, bounded per process, client address and
//!   connection: what anyone can open holds bounded memory.
//!
//! Limits are per process: N replicas admit N times as much.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roncho_core::{Error, Result};

/// Limits on requests in flight and their duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Requests in flight in the process; further ones are shed.
    pub max_in_flight: usize,
    /// Requests in flight on one connection; further ones are shed.
    pub max_in_flight_per_connection: usize,
    /// Requests in flight from one client address (its connections
    /// together); further ones are shed.
    pub max_in_flight_per_address: usize,
    /// Requests in flight for one workspace (the workspace a key is bound
    /// to); further ones are shed, so one tenant cannot take every place.
    pub max_in_flight_per_workspace: usize,
    /// Longest a call may run, but the dialectic's.
    pub request_timeout: Duration,
    /// Longest a dialectic call may run: its longest level deadline and a margin.
    pub dialectic_timeout: Duration,
    /// Longest a request's body may take to arrive once its headers have: a
    /// client that starts a call and sends nothing holds its place no longer.
    pub body_timeout: Duration,
    /// The retry delay a shed request is told.
    pub retry_after: Duration,
    /// Calls that need no key in flight in the process (health checks,
    /// their `Watch` streams, reflection, metrics, docs).
    pub max_open_calls: usize,
    /// Of those, from one client address.
    pub max_open_calls_per_address: usize,
    /// Of those, on one connection.
    pub max_open_calls_per_connection: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_in_flight: 512,
            max_in_flight_per_connection: 128,
            max_in_flight_per_address: 256,
            max_in_flight_per_workspace: 128,
            request_timeout: Duration::from_secs(60),
            dialectic_timeout: Duration::from_secs(330),
            body_timeout: Duration::from_secs(30),
            retry_after: Duration::from_millis(250),
            max_open_calls: 2_048,
            max_open_calls_per_address: 256,
            max_open_calls_per_connection: 16,
        }
    }
}

/// Calls that need no key, by path prefix (gRPC's probes and tooling) or
/// whole path (the HTTP listeners'): places of their own.
const OPEN_PREFIXES: [&str; 3] = [
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
];
const OPEN_PATHS: [&str; 8] = [
    "/health",
    "/docs",
    "/openapi.json",
    "/metrics",
    "/ui",
    "/ui/",
    "/ui/console.js",
    "/ui/console.css",
];
/// Of those, the calls that stream for as long as the client likes (a
/// health `Watch`, reflection): they take at most three quarters of the
/// places, so the probes' short calls always find one.
const OPEN_STREAMS: [&str; 3] = [
    "/grpc.health.v1.Health/Watch",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
];

/// Returns whether a call to `path` needs no key (see [`OPEN_PREFIXES`]).
pub fn is_open(path: &str) -> bool {
    OPEN_PREFIXES.iter().any(|prefix| path.starts_with(prefix)) || OPEN_PATHS.contains(&path)
}

/// Calls that may run as long as the dialectic's slowest level.
const DIALECTIC: &str = "/roncho.v1.DialecticService/";

/// What a call does, as far as how long it may run: the one place the
/// gRPC and REST edges (and MCP, over REST) learn a call's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallClass {
    /// Any call but the dialectic's: `request_timeout`.
    Request,
    /// The dialectic (a model answering, within its level's deadline):
    /// gRPC's DialecticService, REST's peer and workspace `/chat`, and MCP
    /// over HTTP (whose tools include chat).
    Dialectic,
}

impl CallClass {
    /// The class of a call by its path: a gRPC method's
    /// (`/roncho.v1.DialecticService/Chat`) or a REST route's
    /// (`/v3/workspaces/w/peers/p/chat`).
    pub fn of(path: &str) -> CallClass {
        let segments: Vec<&str> = path.split('/').collect();
        let rest_chat = matches!(
            segments.as_slice(),
            ["", "v3", "workspaces", _, "peers", _, "chat"] | ["", "v3", "workspaces", _, "chat"]
        );
        let mcp = matches!(segments.as_slice(), ["", "mcp"] | ["", "mcp", _]);
        if path.starts_with(DIALECTIC) || rest_chat || mcp {
            CallClass::Dialectic
        } else {
            CallClass::Request
        }
    }
}

/// Places held per key (a connection, a workspace, a client address), each
/// given back by its holder.
#[derive(Debug)]
pub struct Tally<K>(Mutex<HashMap<K, usize>>);

impl<K> Default for Tally<K> {
    fn default() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
}

impl<K: std::hash::Hash + Eq + Clone> Tally<K> {
    /// Takes a place for `key` unless it already holds `limit`.
    pub fn take(&self, key: &K, limit: usize) -> bool {
        let mut counts = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = counts.entry(key.clone()).or_insert(0);
        if *count >= limit {
            if *count == 0 {
                counts.remove(key);
            }
            return false;
        }
        *count += 1;
        true
    }

    /// Returns the places each key holds now.
    pub fn snapshot(&self) -> HashMap<K, usize> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Gives back a place `key` took.
    pub fn give_back(&self, key: &K) {
        let mut counts = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = counts.get_mut(key) {
            *count -= 1;
            if *count == 0 {
                counts.remove(key);
            }
        }
    }
}

/// Counts of what admission control refused, for metrics.
#[derive(Debug, Default)]
pub struct AdmissionStats {
    in_flight: AtomicUsize,
    shed_process: AtomicU64,
    shed_connection: AtomicU64,
    shed_workspace: AtomicU64,
    timed_out: AtomicU64,
    open_in_flight: AtomicUsize,
    open_streams: AtomicUsize,
    shed_open: AtomicU64,
    shed_address: AtomicU64,
    /// Every call let in or refused, ever: how busy the process has been.
    calls: AtomicU64,
}

impl AdmissionStats {
    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Requests shed because the process was at its limit.
    pub fn shed_process(&self) -> u64 {
        self.shed_process.load(Ordering::Relaxed)
    }

    /// Requests shed because their connection was at its limit.
    pub fn shed_connection(&self) -> u64 {
        self.shed_connection.load(Ordering::Relaxed)
    }

    /// Requests shed because their client address was at its limit.
    pub fn shed_address(&self) -> u64 {
        self.shed_address.load(Ordering::Relaxed)
    }

    /// Requests shed because their workspace was at its limit.
    pub fn shed_workspace(&self) -> u64 {
        self.shed_workspace.load(Ordering::Relaxed)
    }

    /// Calls ended by the request timeout.
    pub fn timed_out(&self) -> u64 {
        self.timed_out.load(Ordering::Relaxed)
    }

    /// Calls that need no key in flight now (a `Watch` stream while it lasts).
    pub fn open_in_flight(&self) -> usize {
        self.open_in_flight.load(Ordering::Relaxed)
    }

    /// Calls that need no key refused at one of their limits.
    pub fn shed_open(&self) -> u64 {
        self.shed_open.load(Ordering::Relaxed)
    }

    /// Every call admitted or refused since the process started.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// Bounds requests in flight and their duration (see the module docs).
#[derive(Debug, Clone)]
pub struct Admission {
    limits: Limits,
    stats: Arc<AdmissionStats>,
    connections: Arc<Tally<SocketAddr>>,
    workspaces: Arc<Tally<String>>,
    addresses: Arc<Tally<IpAddr>>,
    open_connections: Arc<Tally<SocketAddr>>,
    open_addresses: Arc<Tally<IpAddr>>,
    stalled: Arc<std::sync::OnceLock<Stalled>>,
    replies: Arc<Replies>,
    /// When each connection's last request (one that needs a key) ended.
    served: Arc<Mutex<HashMap<SocketAddr, tokio::time::Instant>>>,
}

/// Connections whose last request is remembered before the oldest are forgotten.
const SERVED_REMEMBERED: usize = 65_536;
/// How long a connection's last request is remembered past that many.
const SERVED_KEPT: Duration = Duration::from_secs(600);

/// A reply's place, held by its body until it ends (see [`Replies`]).
pub(crate) type HeldSlot = Arc<Mutex<Option<Slot>>>;

/// A reply's deadline, and its place while the reply lasts.
type HeldReply = (tokio::time::Instant, std::sync::Weak<Mutex<Option<Slot>>>);

/// The replies whose places are held until they end or their deadline
/// passes, looked over once a second by one task: a reply costs a push,
/// not a timer and a task of its own.
#[derive(Debug, Default)]
struct Replies {
    held: Mutex<Vec<HeldReply>>,
    watching: std::sync::OnceLock<()>,
}

/// How often the replies' deadlines are looked at.
const REPLY_CHECK_INTERVAL: Duration = Duration::from_secs(1);

impl Replies {
    /// Gives back the places of the replies past their deadline (their
    /// connections closed) and forgets those that ended.
    fn look_over(&self) {
        let now = tokio::time::Instant::now();
        let mut expired = Vec::new();
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .retain(|(deadline, held)| {
                let Some(held) = held.upgrade() else {
                    return false;
                };
                if *deadline > now {
                    return true;
                }
                expired.extend(held.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take());
                false
            });
        for slot in expired {
            slot.stalled();
        }
    }
}

/// What to do with a connection whose reply was not read within its
/// deadline (connection admission closes it: what it holds goes with it).
#[derive(Clone)]
struct Stalled(Arc<dyn Fn(SocketAddr) + Send + Sync>);

impl std::fmt::Debug for Stalled {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Stalled")
    }
}

impl Admission {
    /// Returns admission control enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            stats: Arc::default(),
            connections: Arc::default(),
            workspaces: Arc::default(),
            addresses: Arc::default(),
            open_connections: Arc::default(),
            open_addresses: Arc::default(),
            stalled: Arc::default(),
            replies: Arc::default(),
            served: Arc::default(),
        }
    }

    /// Returns the counters.
    pub fn stats(&self) -> Arc<AdmissionStats> {
        self.stats.clone()
    }

    /// Admits a request for `path` on `connection` (its peer's address)
    /// of `workspace` (the workspace its key is bound to; `None` for admin
    /// keys and servers without keys): a slot held until the call ends
    /// (from the open calls' places for calls that need no key), or why
    /// it is refused.
    pub fn admit(&self, path: &str, connection: Option<SocketAddr>, workspace: Option<&str>) -> Result<Slot> {
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        if is_open(path) {
            let stream = OPEN_STREAMS.iter().any(|prefix| path.starts_with(prefix));
            return self.take_open_slot(connection, stream);
        }
        let mut slot = self.take_slot(connection, workspace)?;
        slot.reply_within = Some(self.timeout(path));
        Ok(slot)
    }

    /// Returns the connections with a request in flight: a connection with
    /// none is idle, and may be closed to make room at the connection caps.
    /// Calls that need no key (health, its `Watch` streams, metrics) keep
    /// no connection: anyone may make them.
    pub fn busy(&self) -> HashSet<SocketAddr> {
        self.connections.snapshot().into_keys().collect()
    }

    /// Returns when each connection's last request ended, of those that
    /// made one (a request needs a key where keys are on: frames, refused
    /// calls and calls that need no key are not requests).
    pub fn last_requests(&self) -> HashMap<SocketAddr, tokio::time::Instant> {
        self.served
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Notes that a request of `connection` ended now.
    fn served(&self, connection: SocketAddr) {
        let now = tokio::time::Instant::now();
        let mut served = self.served.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if served.len() >= SERVED_REMEMBERED {
            served.retain(|_, at| now.duration_since(*at) < SERVED_KEPT);
        }
        served.insert(connection, now);
    }

    /// Holds `held`'s place until its reply ends or `within` passes (then
    /// [`Slot::stalled`]); the first reply starts the task that looks.
    pub(crate) fn hold_reply(&self, held: &HeldSlot, within: Duration) {
        self.replies
            .held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((tokio::time::Instant::now() + within, Arc::downgrade(held)));
        self.replies.watching.get_or_init(|| {
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return;
            };
            let replies = Arc::downgrade(&self.replies);
            runtime.spawn(async move {
                let mut ticks = tokio::time::interval(REPLY_CHECK_INTERVAL);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticks.tick().await;
                    let Some(replies) = replies.upgrade() else {
                        return;
                    };
                    replies.look_over();
                }
            });
        });
    }

    /// Calls `close` with the connection of a reply that was not read
    /// within its deadline (once per process: the first caller wins).
    pub fn on_stalled(&self, close: impl Fn(SocketAddr) + Send + Sync + 'static) {
        let _ = self.stalled.set(Stalled(Arc::new(close)));
    }

    /// Takes one of the open calls' places for a call on `connection`; a
    /// `stream` (a health `Watch`, reflection) only within three quarters
    /// of them.
    fn take_open_slot(&self, connection: Option<SocketAddr>, stream: bool) -> Result<Slot> {
        let shed = |reason: &str| {
            self.stats.shed_open.fetch_add(1, Ordering::Relaxed);
            Error::Throttled {
                reason: reason.to_owned(),
                retry_after: self.limits.retry_after,
            }
        };
        let in_flight = self.stats.open_in_flight.fetch_add(1, Ordering::AcqRel);
        let mut slot = Slot {
            layer: self.clone(),
            open: true,
            // Counted among the streams once it takes one of their places.
            stream: false,
            address: None,
            connection: None,
            workspace: None,
            reply_within: (!stream).then_some(self.limits.request_timeout),
        };
        if in_flight >= self.limits.max_open_calls {
            return Err(shed(
                "the server is at its limit of health, reflection and metrics calls",
            ));
        }
        if stream {
            let streams = self.stats.open_streams.fetch_add(1, Ordering::AcqRel);
            slot.stream = true;
            if streams >= self.limits.max_open_calls / 4 * 3 {
                return Err(shed("the server is at its limit of health and reflection streams"));
            }
        }
        let Some(connection) = connection else {
            return Ok(slot);
        };
        if !self
            .open_addresses
            .take(&connection.ip(), self.limits.max_open_calls_per_address)
        {
            return Err(shed(
                "this address is at its limit of health, reflection and metrics calls",
            ));
        }
        if !self
            .open_connections
            .take(&connection, self.limits.max_open_calls_per_connection)
        {
            self.open_addresses.give_back(&connection.ip());
            return Err(shed(
                "this connection is at its limit of health, reflection and metrics calls",
            ));
        }
        slot.connection = Some(connection);
        Ok(slot)
    }

    /// Returns how long a call to `path` may run, on any wire (see
    /// [`CallClass::of`]).
    pub fn timeout(&self, path: &str) -> Duration {
        match CallClass::of(path) {
            CallClass::Request => self.limits.request_timeout,
            CallClass::Dialectic => self.limits.dialectic_timeout,
        }
    }

    /// Returns how long a request's body may take to arrive.
    pub fn body_timeout(&self) -> Duration {
        self.limits.body_timeout
    }

    /// Returns the limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Counts a call ended by the request timeout.
    pub fn timed_out(&self) {
        self.stats.timed_out.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes a slot for a request of `workspace` on `connection`, or says why there is none.
    fn take_slot(&self, connection: Option<SocketAddr>, workspace: Option<&str>) -> Result<Slot> {
        let shed = |reason: &str| Error::Throttled {
            reason: reason.to_owned(),
            retry_after: self.limits.retry_after,
        };
        let in_flight = self.stats.in_flight.fetch_add(1, Ordering::AcqRel);
        let mut slot = Slot {
            layer: self.clone(),
            open: false,
            stream: false,
            address: None,
            connection: None,
            workspace: None,
            reply_within: None,
        };
        if in_flight >= self.limits.max_in_flight {
            self.stats.shed_process.fetch_add(1, Ordering::Relaxed);
            return Err(shed("the server is at its limit of requests in flight"));
        }
        if let Some(workspace) = workspace.map(str::to_owned) {
            if !self
                .workspaces
                .take(&workspace, self.limits.max_in_flight_per_workspace)
            {
                self.stats.shed_workspace.fetch_add(1, Ordering::Relaxed);
                return Err(shed("this workspace is at its limit of requests in flight"));
            }
            slot.workspace = Some(workspace);
        }
        let Some(connection) = connection else {
            return Ok(slot);
        };
        if !self
            .addresses
            .take(&connection.ip(), self.limits.max_in_flight_per_address)
        {
            self.stats.shed_address.fetch_add(1, Ordering::Relaxed);
            return Err(shed("this address is at its limit of requests in flight"));
        }
        slot.address = Some(connection.ip());
        if !self
            .connections
            .take(&connection, self.limits.max_in_flight_per_connection)
        {
            self.stats.shed_connection.fetch_add(1, Ordering::Relaxed);
            return Err(shed("this connection is at its limit of requests in flight"));
        }
        slot.connection = Some(connection);
        Ok(slot)
    }
}

/// A request's place in flight, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    layer: Admission,
    /// One of the places of calls that need no key ...
    open: bool,
    /// ... and of those, one that streams.
    stream: bool,
    /// The client address whose places it counts in (requests).
    address: Option<IpAddr>,
    connection: Option<SocketAddr>,
    workspace: Option<String>,
    /// How long the reply may take to be sent once it starts; `None`: as
    /// long as it streams (a health `Watch`).
    reply_within: Option<std::time::Duration>,
}

impl Slot {
    /// Returns whether the call needs no key (a probe, reflection,
    /// metrics, docs): it runs without the requests' time limit.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Returns how long the reply may take to be sent before the place is
    /// given back anyway (a client that stops reading holds it no longer).
    pub fn reply_within(&self) -> Option<std::time::Duration> {
        self.reply_within
    }

    /// Returns the admission control this place belongs to.
    pub(crate) fn admission(&self) -> &Admission {
        &self.layer
    }

    /// Gives the place back for a reply not read within its deadline, and
    /// has its connection closed ([`Admission::on_stalled`]): what the
    /// reply holds is freed with it, and a client that stops reading holds
    /// neither a place nor memory.
    pub fn stalled(self) {
        let (connection, close) = (self.connection, self.layer.stalled.get().cloned());
        drop(self);
        if let (Some(connection), Some(Stalled(close))) = (connection, close) {
            close(connection);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.open {
            self.layer.stats.open_in_flight.fetch_sub(1, Ordering::AcqRel);
            if self.stream {
                self.layer.stats.open_streams.fetch_sub(1, Ordering::AcqRel);
            }
            if let Some(connection) = &self.connection {
                self.layer.open_connections.give_back(connection);
                self.layer.open_addresses.give_back(&connection.ip());
            }
            return;
        }
        self.layer.stats.in_flight.fetch_sub(1, Ordering::AcqRel);
        if let Some(address) = &self.address {
            self.layer.addresses.give_back(address);
        }
        if let Some(workspace) = &self.workspace {
            self.layer.workspaces.give_back(workspace);
        }
        if let Some(connection) = &self.connection {
            self.layer.connections.give_back(connection);
            self.layer.served(*connection);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_dialectic_has_its_deadline_on_every_wire_and_nothing_else_does() {
        use super::CallClass;
        for path in [
            "/roncho.v1.DialecticService/Chat",
            "/roncho.v1.DialecticService/ChatStream",
            "/v3/workspaces/w/peers/alice/chat",
            "/v3/workspaces/w/chat",
            "/mcp",
            "/mcp/memory",
        ] {
            assert_eq!(CallClass::of(path), CallClass::Dialectic, "{path}");
        }
        for path in [
            "/roncho.v1.RecallService/SearchMessages",
            "/roncho.v1.IngestService/CreateMessages",
            "/v3/workspaces/w/peers/alice/representation",
            "/v3/workspaces/w/sessions/chat/messages",
            "/v3/workspaces/chat",
            "/v3/workspaces/w/peers/chat",
            "/v3/workspaces/w/sessions/s/peers/chat",
        ] {
            assert_eq!(CallClass::of(path), CallClass::Request, "{path}");
        }
    }

    use super::*;

    #[test]
    fn calls_that_need_no_key_have_bounded_places_of_their_own() {
        let admission = Admission::new(Limits {
            max_in_flight: 1,
            max_open_calls: 8,
            max_open_calls_per_address: 3,
            max_open_calls_per_connection: 2,
            ..Limits::default()
        });
        let connection = |address: &str| Some(address.parse::<SocketAddr>().unwrap());
        let watch = "/grpc.health.v1.Health/Watch";
        // A request's place does not take a probe's, nor the other way round.
        let _request = admission
            .admit("/roncho.v1.RecallService/ListPeers", None, None)
            .unwrap();
        let first = admission.admit(watch, connection("10.0.0.1:1"), None).unwrap();
        assert!(first.is_open());
        assert_eq!(first.reply_within(), None, "a Watch streams as long as it likes");
        let _second = admission.admit(watch, connection("10.0.0.1:1"), None).unwrap();
        for (path, from) in [
            (watch, "10.0.0.1:1"),
            (
                "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                "10.0.0.1:1",
            ),
        ] {
            assert!(
                admission.admit(path, connection(from), None).is_err(),
                "the connection's cap"
            );
        }
        let metrics = admission.admit("/metrics", connection("10.0.0.1:2"), None).unwrap();
        assert!(metrics.reply_within().is_some(), "a short call's reply has a deadline");
        assert!(
            admission.admit("/health", connection("10.0.0.1:3"), None).is_err(),
            "the address's cap, whichever connection"
        );
        // Streams take three quarters of the places at most ...
        let mut streams = Vec::new();
        for from in ["10.0.0.2:1", "10.0.0.2:1", "10.0.0.3:1", "10.0.0.3:1"] {
            streams.push(admission.admit(watch, connection(from), None).unwrap());
        }
        assert!(
            admission.admit(watch, connection("10.0.0.4:1"), None).is_err(),
            "the streams' cap"
        );
        // ... so a probe's short call still finds one, up to the process's cap.
        let _probe = admission
            .admit("/grpc.health.v1.Health/Check", connection("10.0.0.5:1"), None)
            .unwrap();
        assert!(
            admission.admit("/health", connection("10.0.0.6:1"), None).is_err(),
            "the process's cap"
        );
        assert_eq!(admission.stats().open_in_flight(), 8);
        drop(first);
        admission
            .admit(watch, connection("10.0.0.1:3"), None)
            .expect("a place given back is taken again");
        assert!(
            admission
                .admit("/roncho.v1.RecallService/ListPeers", None, None)
                .is_err(),
            "requests have their own cap"
        );
        assert!(
            admission.busy().is_empty(),
            "calls that need no key keep no connection from being closed"
        );
    }

    #[test]
    fn one_client_address_takes_half_the_places_at_most() {
        let admission = Admission::new(Limits {
            max_in_flight: 4,
            max_in_flight_per_address: 2,
            ..Limits::default()
        });
        let path = "/roncho.v1.RecallService/ListPeers";
        let from = |address: &str| Some(address.parse::<SocketAddr>().unwrap());
        let _one = admission.admit(path, from("10.0.0.1:1"), None).unwrap();
        let two = admission.admit(path, from("10.0.0.1:2"), None).unwrap();
        assert!(two.reply_within().is_some(), "its reply has a deadline");
        assert!(
            admission.admit(path, from("10.0.0.1:3"), None).is_err(),
            "a third connection of the same address"
        );
        let _other = admission.admit(path, from("10.0.0.2:1"), None).unwrap();
        assert_eq!(admission.stats().shed_address(), 1);
    }

    #[test]
    fn slots_are_given_back_and_the_excess_is_shed() {
        let layer = Admission::new(Limits {
            max_in_flight: 3,
            max_in_flight_per_connection: 2,
            ..Limits::default()
        });
        let a: SocketAddr = "10.0.0.1:1000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:1000".parse().unwrap();
        let first = layer.take_slot(Some(a), None).unwrap();
        let _second = layer.take_slot(Some(a), None).unwrap();
        assert!(
            matches!(layer.take_slot(Some(a), None), Err(Error::Throttled { .. })),
            "per connection"
        );
        let _third = layer.take_slot(Some(b), None).unwrap();
        assert!(
            matches!(layer.take_slot(Some(b), None), Err(Error::Throttled { .. })),
            "per process"
        );
        drop(first);
        layer.take_slot(Some(b), None).expect("a slot came back");
        assert_eq!(layer.stats().shed_connection(), 1);
        assert_eq!(layer.stats().shed_process(), 1);
    }

    #[test]
    fn one_workspace_cannot_take_every_place() {
        let layer = Admission::new(Limits {
            max_in_flight: 4,
            max_in_flight_per_workspace: 2,
            ..Limits::default()
        });
        let flood: Vec<Slot> = (0..2).map(|_| layer.take_slot(None, Some("loud")).unwrap()).collect();
        assert!(
            matches!(layer.take_slot(None, Some("loud")), Err(Error::Throttled { ref reason, .. }) if reason.contains("workspace")),
            "the flooding workspace is at its limit"
        );
        let _quiet = layer
            .take_slot(None, Some("quiet"))
            .expect("another workspace is served");
        let _admin = layer
            .take_slot(None, None)
            .expect("admin and keyless calls are not capped per workspace");
        drop(flood);
        let _again = layer.take_slot(None, Some("loud")).expect("its places came back");
        assert_eq!(layer.stats().shed_workspace(), 1);
        assert_eq!(layer.stats().in_flight(), 3);
    }
}
