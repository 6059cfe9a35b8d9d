//! Connection-level limits on every listener (gRPC, REST and MCP, metrics,
//! health): what a client that opens connections and never finishes a
//! request can hold.
//!
//! - A [`ConnectionAdmission`] counts the open connections of a process and of
//!   each client address. At either cap a new connection takes the place of
//!   the oldest one that has not yet sent a request (its preface on gRPC, a
//!   whole request head on HTTP/1), from the same address at the address
//!   cap, so a flood of half-open connections cannot lock out the next
//!   client; with none to evict it is closed as soon as it is accepted, its
//!   descriptor back at once. The process cap is kept below the descriptor
//!   limit with room for the store's pool, the resolver and the workers.
//!   When a flood has passed, freed memory is handed back to the system.
//! - A [`Guarded`] connection must finish its opening within the handshake
//!   timeout, or it is closed, whatever bytes of it arrived: HTTP/2's
//!   preface and first SETTINGS frame on gRPC, and on the HTTP listeners
//!   its first byte, or the preface and SETTINGS when it speaks HTTP/2.
//! - HTTP/1 listeners ([`serve_http`]) close a connection whose request
//!   head does not arrive within the header timeout; the timer also runs
//!   while a kept-alive connection waits for its next request, which makes
//!   it the idle timeout too. A connection is established (no longer
//!   evicted for others) once a whole request arrived, its body included,
//!   or was answered: one holding a request head is not.
//!
//! docs/security.md, "Connections", lists each limit and its setting.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use roncho_gate::admission::{Admission, Tally};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Descriptors kept free of client connections: the store's pool, the
/// resolver, NATS, Qdrant, model providers, log files and a margin.
pub const DESCRIPTOR_HEADROOM: u64 = 1_024;

/// The length of the bytes an HTTP/2 client sends first (its connection preface).
pub const HTTP2_PREFACE_BYTES: usize = 24;

/// Connection-level limits of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ConnectionLimits {
    /// Connections open at once on all listeners; more are closed at accept.
    pub max_open: usize,
    /// Connections open at once from one client address.
    pub max_per_address: usize,
    /// Longest an HTTP/1 request head may take to arrive, counted from when
    /// the connection is ready for it (so also the keep-alive idle timeout).
    pub header_timeout: Duration,
    /// Longest a connection may take to send its first bytes (the HTTP/2
    /// preface; the TLS handshake has its own bound).
    pub handshake_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_open: 16_384,
            max_per_address: 4_096,
            header_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

impl ConnectionLimits {
    /// Raises the soft descriptor limit to the hard one and returns these
    /// limits with `max_open` lowered, if it must be, to leave
    /// [`DESCRIPTOR_HEADROOM`] descriptors for everything else.
    pub fn within_descriptors(mut self) -> Self {
        let limit = match rlimit::increase_nofile_limit(u64::MAX) {
            Ok(limit) => limit,
            Err(error) => {
                tracing::warn!(%error, "could not read the descriptor limit");
                return self;
            }
        };
        let room = usize::try_from(limit.saturating_sub(DESCRIPTOR_HEADROOM).max(64)).unwrap_or(usize::MAX);
        if room < self.max_open {
            tracing::warn!(
                descriptors = limit,
                max_open = room,
                "the descriptor limit caps open connections below the configured limit"
            );
            self.max_open = room;
        }
        self.max_per_address = self.max_per_address.min(self.max_open);
        self
    }
}

/// Counts of what connection admission refused and closed, for metrics.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    open: AtomicUsize,
    /// Connections accepted, ever (refused ones included).
    accepted: AtomicU64,
    refused_process: AtomicU64,
    refused_address: AtomicU64,
    evicted: AtomicU64,
    timed_out: AtomicU64,
}

impl ConnectionStats {
    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections accepted since the process started, refused ones included.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Connections closed at accept because the process was at its cap.
    pub fn refused_process(&self) -> u64 {
        self.refused_process.load(Ordering::Relaxed)
    }

    /// Connections closed at accept because their address was at its cap.
    pub fn refused_address(&self) -> u64 {
        self.refused_address.load(Ordering::Relaxed)
    }

    /// Connections closed because their first bytes did not arrive in time.
    pub fn timed_out(&self) -> u64 {
        self.timed_out.load(Ordering::Relaxed)
    }

    /// Connections without a request yet, closed to make room for a new one.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }
}

/// Where a connection stands: whether it has sent a request yet, and
/// whether connection admission closed it to make room.
#[derive(Debug, Default)]
struct ConnectionState {
    /// Its client's address and port (admission counts its calls by it).
    peer: Option<SocketAddr>,
    /// When it was let in (`None`: long ago).
    opened: Option<tokio::time::Instant>,
    established: AtomicBool,
    evicted: AtomicBool,
    /// The task reading the connection, woken when it is evicted.
    reader: futures::task::AtomicWaker,
}

/// Marks a connection as having sent a request: it is no longer evicted to
/// make room for others.
#[derive(Debug, Clone)]
pub struct Established(Arc<ConnectionState>);

impl Established {
    /// Marks the connection established.
    pub fn mark(&self) {
        self.0.established.store(true, Ordering::Release);
    }
}

impl ConnectionState {
    /// Closes the connection to make room: its reader is woken, and fails.
    fn evict(&self, stats: &ConnectionStats) {
        self.evicted.store(true, Ordering::Release);
        self.reader.wake();
        stats.evicted.fetch_add(1, Ordering::Relaxed);
    }
}

/// How long a connection whose request just ended (or that just opened)
/// stays out of reach of the idle eviction: its next request may be on its
/// way.
const IDLE_GRACE: Duration = Duration::from_secs(1);

/// Connections and calls past this many since memory was last handed
/// back make a flood: once it has passed, freed memory is handed back.
const FLOOD: u64 = 1_024;
/// What is still open or in flight when a flood counts as passed.
const QUIET: u64 = 64;
/// How often the process looks for a flood that passed.
const FLOOD_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// Hands freed memory back to the system after any flood has passed —
/// connections, requests or calls that need no key, let in or refused —
/// so RSS returns near its baseline: glibc keeps freed pages in its
/// arenas (after 20,000 connections or 100,000 health streams came and
/// went, RSS stayed at its peak). Runs until `shutdown`.
pub async fn hand_back_after_floods(
    connections: Arc<ConnectionStats>,
    calls: Arc<roncho_gate::admission::AdmissionStats>,
    shutdown: CancellationToken,
) {
    let activity = || connections.accepted() + calls.calls();
    let mut since = activity();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(FLOOD_CHECK_INTERVAL) => {}
        }
        let now = activity();
        let busy = connections.open() + calls.in_flight() + calls.open_in_flight();
        if now.saturating_sub(since) >= FLOOD && u64::try_from(busy).unwrap_or(u64::MAX) <= QUIET {
            tracing::debug!(calls = now - since, "a flood passed: handing freed memory back");
            hand_back_memory();
            since = now;
        }
    }
}

/// Counts open connections per process and per client address, shared by
/// every listener of the process.
#[derive(Debug, Clone)]
pub struct ConnectionAdmission {
    limits: ConnectionLimits,
    stats: Arc<ConnectionStats>,
    per_address: Arc<Tally<IpAddr>>,
    /// Connections without a request yet, oldest first (some already gone
    /// or established: dropped as they are met).
    waiting: Arc<Mutex<Waiting>>,
    /// Every connection, oldest first (some already gone: dropped as they
    /// are met): at a cap with none waiting, an idle one makes room.
    all: Arc<Mutex<Waiting>>,
    /// Says which connections have calls in flight; `None`: all are busy.
    calls: Option<Admission>,
}

/// Connections by address, oldest first.
type Waiting = VecDeque<(IpAddr, Weak<ConnectionState>)>;

impl ConnectionAdmission {
    /// Returns the connection admission enforcing `limits`.
    pub fn new(limits: ConnectionLimits) -> Self {
        Self {
            limits,
            stats: Arc::default(),
            per_address: Arc::default(),
            waiting: Arc::default(),
            all: Arc::default(),
            calls: None,
        }
    }

    /// Returns this admission closing, at a cap where no connection is still
    /// without a request, an idle one (no call in flight in `calls`; of the
    /// address holding most connections, the one quiet longest): a
    /// connection that sent one request and then holds its place doing
    /// nothing makes room as a silent one does. A connection whose reply
    /// was not read within its deadline is closed at once.
    pub fn watching(mut self, calls: Admission) -> Self {
        let (all, stats) = (self.all.clone(), self.stats.clone());
        calls.on_stalled(move |peer| {
            let all = all.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let stalled = all
                .iter()
                .filter_map(|(_, state)| state.upgrade())
                .find(|state| state.peer == Some(peer) && !state.evicted.load(Ordering::Acquire));
            if let Some(state) = stalled {
                tracing::debug!(%peer, "connection closed: a reply was not read within its deadline");
                state.evict(&stats);
            }
        });
        self.calls = Some(calls);
        self
    }

    /// Returns the limits.
    pub fn limits(&self) -> ConnectionLimits {
        self.limits
    }

    /// Returns the counters.
    pub fn stats(&self) -> Arc<ConnectionStats> {
        self.stats.clone()
    }

    /// Takes a place for a connection from `client`: at a cap, the place
    /// of the oldest connection without a request yet, else of the oldest
    /// idle one (from `client`'s address itself at the address cap);
    /// `None` when there is none to take.
    pub fn admit(&self, client: SocketAddr) -> Option<ConnectionPermit> {
        let peer = client.ip();
        let open = self.stats.open.fetch_add(1, Ordering::AcqRel) + 1;
        self.stats.accepted.fetch_add(1, Ordering::Relaxed);
        let mut permit = ConnectionPermit {
            admission: self.clone(),
            address: None,
            state: Arc::new(ConnectionState {
                peer: Some(client),
                opened: Some(tokio::time::Instant::now()),
                ..ConnectionState::default()
            }),
        };
        if open > self.limits.max_open && !self.evict(None) {
            self.stats.refused_process.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if !self.per_address.take(&peer, self.limits.max_per_address) {
            if !self.evict(Some(peer)) {
                self.stats.refused_address.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            // The evicted connection gives its place back as it closes.
            self.per_address.take(&peer, usize::MAX);
        }
        permit.address = Some(peer);
        let mut waiting = self.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if waiting.len() > 2 * open + 64 {
            waiting.retain(|(_, state)| {
                state
                    .upgrade()
                    .is_some_and(|state| !state.established.load(Ordering::Acquire))
            });
        }
        waiting.push_back((peer, Arc::downgrade(&permit.state)));
        drop(waiting);
        let mut all = self.all.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if all.len() > 2 * open + 64 {
            all.retain(|(_, state)| state.strong_count() > 0);
        }
        all.push_back((peer, Arc::downgrade(&permit.state)));
        Some(permit)
    }

    /// Closes the oldest connection without a request yet, else the oldest
    /// idle one (from `from`, if given); returns whether there was one.
    fn evict(&self, from: Option<IpAddr>) -> bool {
        self.evict_waiting(from) || self.evict_idle(from)
    }

    /// Closes an idle connection (from `from`, if given): of those with no
    /// request in flight and none for [`IDLE_GRACE`], one of the address
    /// holding most connections, the one without a request longest (a
    /// client between two calls of its pool keeps its place while a flood
    /// of idle ones lasts). Quiet is counted in requests, not bytes: PINGs,
    /// other frames, refused calls and calls that need no key keep no
    /// connection. Returns whether there was one.
    fn evict_idle(&self, from: Option<IpAddr>) -> bool {
        let Some(calls) = &self.calls else {
            return false;
        };
        let (busy, served, held) = (calls.busy(), calls.last_requests(), self.per_address.snapshot());
        let now = tokio::time::Instant::now();
        let mut all = self.all.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        all.retain(|(_, state)| state.strong_count() > 0);
        let victim = all
            .iter()
            .enumerate()
            .filter_map(|(index, (address, state))| {
                let state = state.upgrade()?;
                let peer = state.peer?;
                let quiet_since = served.get(&peer).copied().or(state.opened);
                let idle = !busy.contains(&peer)
                    && !state.evicted.load(Ordering::Acquire)
                    && quiet_since.is_none_or(|since| now.duration_since(since) >= IDLE_GRACE)
                    && from.is_none_or(|from| from == *address);
                idle.then(|| {
                    (
                        held.get(address).copied().unwrap_or(0),
                        std::cmp::Reverse(quiet_since),
                        index,
                    )
                })
            })
            .max_by_key(|&(held, quiet, index)| (held, quiet, std::cmp::Reverse(index)));
        let Some((_, _, index)) = victim else {
            return false;
        };
        let Some((_, state)) = all.remove(index) else {
            return false;
        };
        state.upgrade().is_some_and(|state| {
            state.evict(&self.stats);
            true
        })
    }

    /// Closes the oldest connection without a request yet (from `from`, if
    /// given); returns whether there was one.
    fn evict_waiting(&self, from: Option<IpAddr>) -> bool {
        let mut waiting = self.waiting.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut index = 0;
        while let Some((address, state)) = waiting.get(index) {
            let Some(state) = state
                .upgrade()
                .filter(|state| !state.established.load(Ordering::Acquire))
            else {
                waiting.remove(index);
                continue;
            };
            if from.is_some_and(|from| from != *address) {
                index += 1;
                continue;
            }
            waiting.remove(index);
            state.evict(&self.stats);
            return true;
        }
        false
    }

    /// Accepts the next connection `listener` lets in: those past a cap are
    /// closed at once, and a failing accept (out of descriptors) backs off
    /// briefly instead of spinning.
    pub async fn accept(&self, listener: &TcpListener) -> (TcpStream, SocketAddr, ConnectionPermit) {
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => match self.admit(peer) {
                    Some(permit) => return (stream, peer, permit),
                    // Dropped: closed now, its descriptor back at once.
                    None => {
                        drop(stream);
                        tracing::debug!(%peer, "connection refused: at the open-connection limit");
                    }
                },
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Yields the connections of `listener` that this admission lets in, each
    /// [`Guarded`] to send `first` within the handshake timeout, until
    /// `shutdown`.
    pub fn incoming(
        &self,
        listener: TcpListener,
        first: FirstBytes,
        shutdown: CancellationToken,
    ) -> tokio_stream::wrappers::ReceiverStream<io::Result<Guarded<TcpStream>>> {
        let (sender, receiver) = tokio::sync::mpsc::channel(64);
        let admission = self.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _, permit) = tokio::select! {
                    () = shutdown.cancelled() => return,
                    accepted = admission.accept(&listener) => accepted,
                };
                // Small replies must not wait for delayed ACKs.
                let _ = stream.set_nodelay(true);
                let guarded = Guarded::new(stream, permit, first);
                if sender.send(Ok(guarded)).await.is_err() {
                    return;
                }
            }
        });
        tokio_stream::wrappers::ReceiverStream::new(receiver)
    }
}

/// A connection's place, given back when the connection closes.
#[derive(Debug)]
pub struct ConnectionPermit {
    admission: ConnectionAdmission,
    address: Option<IpAddr>,
    state: Arc<ConnectionState>,
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        self.admission.stats.open.fetch_sub(1, Ordering::AcqRel);
        if let Some(address) = &self.address {
            self.admission.per_address.give_back(address);
        }
    }
}

/// Returns the allocator's free memory to the system, off the async threads.
#[cfg_attr(
    all(target_os = "linux", target_env = "gnu"),
    expect(unsafe_code, reason = "glibc's malloc_trim has no safe binding")
)]
fn hand_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn_blocking(|| {
            // SAFETY: malloc_trim only releases free memory; it takes the
            // allocator's own locks and is safe to call from any thread.
            unsafe { libc::malloc_trim(0) };
        });
    }
}

/// What a connection must send first, and what that makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstBytes {
    /// HTTP/2's preface and its SETTINGS frame within the handshake
    /// timeout; its first request's HEADERS frame establishes it.
    Http2Preface,
    /// Any byte (the protocol is told from the first ones); when they are
    /// HTTP/2's preface, the preface and its SETTINGS. The server marks the
    /// connection established when a whole request arrived.
    Any,
}

/// The bytes an HTTP/2 client sends first (its connection preface).
const HTTP2_PREFACE: &[u8; HTTP2_PREFACE_BYTES] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An HTTP/2 frame header's length, and the frame types the opening reads.
const FRAME_HEADER_BYTES: usize = 9;
const HEADERS_FRAME: u8 = 0x1;
const SETTINGS_FRAME: u8 = 0x4;

/// How far a connection's opening has come: what must arrive, whatever
/// bytes of it arrived, within the handshake timeout. On HTTP/2 that is
/// the preface and the SETTINGS frame that must follow it; then, past any
/// PING, WINDOW_UPDATE or SETTINGS frames, the HEADERS of a first request
/// establish it. Until they come it is waiting (a pooled client's
/// connection may wait as long as it likes), and is the first closed to
/// make room at the caps, as one that says nothing would be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// No byte yet, of a connection that may speak either protocol.
    AnyFirstByte,
    /// This many bytes of HTTP/2's preface arrived.
    Preface(usize),
    /// This many bytes of a frame's header; `first`: no SETTINGS frame
    /// came whole yet.
    FrameHeader {
        header: [u8; FRAME_HEADER_BYTES],
        seen: usize,
        first: bool,
    },
    /// This many bytes of a frame's payload are still to come; `first`: no
    /// SETTINGS frame came whole before it; `settings`: it is one.
    Payload { left: usize, first: bool, settings: bool },
}

/// What a connection's opening bytes came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opened {
    /// More is awaited.
    Awaiting,
    /// HTTP/2's opening came whole: a first request began.
    Http2,
    /// Something else (HTTP/1, or bytes the protocol will refuse): its own
    /// timeouts take over.
    Other,
}

impl Opening {
    fn new(first: FirstBytes) -> Self {
        match first {
            FirstBytes::Http2Preface => Opening::Preface(0),
            FirstBytes::Any => Opening::AnyFirstByte,
        }
    }

    /// Takes `bytes`, the next ones the connection sent.
    fn feed(&mut self, mut bytes: &[u8]) -> Opened {
        while let Some((&byte, rest)) = bytes.split_first() {
            *self = match *self {
                // HTTP/1 begins with a method, which is never `PRI`'s `P`
                // followed by the rest of the preface.
                Opening::AnyFirstByte | Opening::Preface(0) if byte != HTTP2_PREFACE[0] => return Opened::Other,
                Opening::AnyFirstByte => Opening::Preface(1),
                Opening::Preface(seen) if byte != HTTP2_PREFACE[seen] => return Opened::Other,
                Opening::Preface(seen) if seen + 1 == HTTP2_PREFACE_BYTES => Opening::FrameHeader {
                    header: [0; FRAME_HEADER_BYTES],
                    seen: 0,
                    first: true,
                },
                Opening::Preface(seen) => Opening::Preface(seen + 1),
                Opening::FrameHeader {
                    mut header,
                    seen,
                    first,
                } => {
                    header[seen] = byte;
                    if seen + 1 < FRAME_HEADER_BYTES {
                        Opening::FrameHeader {
                            header,
                            seen: seen + 1,
                            first,
                        }
                    } else {
                        let kind = header[3];
                        // Frames before the SETTINGS (PINGs, WINDOW_UPDATEs,
                        // anything HTTP/2 lets pass) leave the deadline running.
                        if kind == HEADERS_FRAME && !first {
                            return Opened::Http2;
                        }
                        let left = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
                        Opening::Payload {
                            left,
                            first,
                            settings: kind == SETTINGS_FRAME,
                        }
                        .or_next_frame()
                    }
                }
                Opening::Payload { left, first, settings } => {
                    // The rest of the payload at once: bytes are only counted.
                    let taken = left.min(bytes.len());
                    bytes = &bytes[taken..];
                    *self = Opening::Payload {
                        left: left - taken,
                        first,
                        settings,
                    }
                    .or_next_frame();
                    continue;
                }
            };
            bytes = rest;
        }
        Opened::Awaiting
    }

    /// Returns whether the preface and its SETTINGS came whole: the stage
    /// with a deadline is over, and what follows is waiting for a request
    /// (a pooled client's connection may wait for long; it is closed first
    /// at the caps, never for taking its time).
    fn settled(&self) -> bool {
        match self {
            Opening::FrameHeader { first, .. } | Opening::Payload { first, .. } => !first,
            Opening::AnyFirstByte | Opening::Preface(_) => false,
        }
    }

    /// Returns the next frame's header once a payload has no bytes left.
    fn or_next_frame(self) -> Self {
        match self {
            Opening::Payload {
                left: 0,
                first,
                settings,
            } => Opening::FrameHeader {
                header: [0; FRAME_HEADER_BYTES],
                seen: 0,
                first: first && !settings,
            },
            other => other,
        }
    }
}

/// A connection that holds its place while open and fails its reads when
/// its opening (see [`FirstBytes`]) does not arrive whole within the
/// handshake timeout (`TimedOut`) or connection admission closed it to make room
/// (`ConnectionAborted`), which closes it.
pub struct Guarded<S> {
    inner: S,
    permit: ConnectionPermit,
    /// The opening still awaited, and by when; `None` once it came.
    opening: Option<(Opening, Pin<Box<tokio::time::Sleep>>)>,
    /// Whether HTTP/2's opening establishes the connection.
    establishes: bool,
}

impl<S> Guarded<S> {
    /// Wraps `inner`, which must send `first` within the handshake timeout.
    pub fn new(inner: S, permit: ConnectionPermit, first: FirstBytes) -> Self {
        let timeout = permit.admission.limits.handshake_timeout;
        Self {
            inner,
            permit,
            opening: Some((Opening::new(first), Box::pin(tokio::time::sleep(timeout)))),
            establishes: first == FirstBytes::Http2Preface,
        }
    }

    /// Returns the wrapped connection.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Returns what marks this connection established.
    pub fn established(&self) -> Established {
        Established(self.permit.state.clone())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(self: Pin<&mut Self>, context: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let state = &this.permit.state;
        state.reader.register(context.waker());
        if state.evicted.load(Ordering::Acquire) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room: the connection had no request in flight while the server was at its limit",
            )));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(context, buf);
        let Some((opening, deadline)) = &mut this.opening else {
            return polled;
        };
        match polled {
            Poll::Ready(Ok(())) => {
                let read = &buf.filled()[before..];
                let opened = match read.is_empty() {
                    // The end: nothing more to wait for.
                    true => Opened::Other,
                    false => opening.feed(read),
                };
                // Bytes that keep coming (PINGs, one at a time) do not move the deadline.
                if opened == Opened::Awaiting && !opening.settled() && deadline.is_elapsed() {
                    this.opening = None;
                    this.permit.admission.stats.timed_out.fetch_add(1, Ordering::Relaxed);
                    return Poll::Ready(Err(opening_timed_out()));
                }
                match opened {
                    Opened::Awaiting => {}
                    Opened::Http2 => {
                        this.opening = None;
                        if this.establishes {
                            state.established.store(true, Ordering::Release);
                        }
                    }
                    Opened::Other => this.opening = None,
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => {
                if !opening.settled() && deadline.as_mut().poll(context).is_ready() {
                    this.opening = None;
                    this.permit.admission.stats.timed_out.fetch_add(1, Ordering::Relaxed);
                    return Poll::Ready(Err(opening_timed_out()));
                }
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(self: Pin<&mut Self>, context: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(context, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(context, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(context)
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(context)
    }
}

impl<S: tonic::transport::server::Connected> tonic::transport::server::Connected for Guarded<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

fn opening_timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the connection's opening (its first bytes; on HTTP/2 the preface, settings and a first request) did not \
         arrive within the handshake timeout",
    )
}

/// A listener of HTTP connections for [`serve_http`]: plain TCP through
/// connection admission, or TLS after its handshake ([`crate::tls::TlsListener`]).
pub trait HttpListener: Send + 'static {
    /// A connection's stream.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// Returns the next connection, or `None` once the listener is closed.
    fn accept(&mut self) -> impl Future<Output = Option<(Guarded<Self::Stream>, SocketAddr)>> + Send;
}

/// What an HTTP listener of the process applies: its connections' limits,
/// the browser rules, and the door (for metrics and probes, the places of
/// calls that need no key).
#[derive(Debug, Clone)]
pub struct HttpEntrance {
    pub connections: ConnectionAdmission,
    pub browsers: Arc<roncho_gate::BrowserPolicy>,
    pub door: roncho_gate::Door,
}

/// Plain TCP connections let in by connection admission.
pub struct AdmittedListener {
    listener: TcpListener,
    admission: ConnectionAdmission,
}

impl AdmittedListener {
    /// Accepts on `listener` what `admission` lets in.
    pub fn new(listener: TcpListener, admission: ConnectionAdmission) -> Self {
        Self { listener, admission }
    }
}

impl HttpListener for AdmittedListener {
    type Stream = TcpStream;

    async fn accept(&mut self) -> Option<(Guarded<TcpStream>, SocketAddr)> {
        let (stream, peer, permit) = self.admission.accept(&self.listener).await;
        // Small replies must not wait for delayed ACKs.
        let _ = stream.set_nodelay(true);
        // Some byte within the handshake timeout (the protocol is told from
        // the first bytes); then HTTP/1's header timeout, or HTTP/2's
        // keep-alive, bounds the rest.
        Some((Guarded::new(stream, permit, FirstBytes::Any), peer))
    }
}

/// Serves `app` over HTTP/1.1 or HTTP/2 on `listener` until `shutdown`,
/// then lets the requests in progress finish. Every request is judged by
/// `browsers` first (web pages of other origins, hosts that are not this
/// server's; `door` counts the refusals). HTTP/1 request heads must
/// arrive within `header_timeout` (also the keep-alive idle timeout);
/// HTTP/2 connections that stop answering pings are dropped. Each request
/// carries its peer's address as the gate's [`roncho_gate::Peer`], which
/// admission control reads to bound requests per connection.
pub async fn serve_http<L: HttpListener>(
    mut listener: L,
    app: axum::Router,
    header_timeout: Duration,
    browsers: Arc<roncho_gate::BrowserPolicy>,
    door: roncho_gate::Door,
    shutdown: CancellationToken,
) {
    let app = crate::browsers::guard(app, browsers, door);
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (io, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Some(accepted) => accepted,
                None => break,
            },
        };
        let info = roncho_gate::Peer(peer);
        let app = app.clone();
        // A connection that sent a whole request (or was answered) is not
        // evicted for another; one that holds a head and a body to come is.
        let established = io.established();
        let service = hyper::service::service_fn(move |mut request: http::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(info);
            let established = established.clone();
            let request = match http_body::Body::is_end_stream(request.body()) {
                true => {
                    established.mark();
                    request.map(axum::body::Body::new)
                }
                false => request.map(|body| {
                    let marks = MarkWhenDone(established.clone());
                    axum::body::Body::new(roncho_gate::SlotBody::new(body, Some(marks)))
                }),
            };
            let call = tower_service::Service::call(&mut app.clone(), request);
            async move {
                let response = call.await;
                established.mark();
                response
            }
        });
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
        let connection = graceful.watch(connection.into_owned());
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, %error, "HTTP connection ended");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Marks its connection established when dropped: held by a request body
/// until the body has arrived whole (or is given up after the answer).
struct MarkWhenDone(Established);

impl Drop for MarkWhenDone {
    fn drop(&mut self) {
        self.0.mark();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(max_open: usize, max_per_address: usize) -> ConnectionAdmission {
        ConnectionAdmission::new(ConnectionLimits {
            max_open,
            max_per_address,
            ..ConnectionLimits::default()
        })
    }

    #[test]
    fn places_are_bounded_per_process_and_address_and_given_back() {
        let admission = admission(3, 2);
        let (a, b) = ("127.0.0.2:1".parse().unwrap(), "127.0.0.3:1".parse().unwrap());
        // Connections that sent a request are never closed for others.
        let established = |permit: ConnectionPermit| {
            Established(permit.state.clone()).mark();
            permit
        };
        let first = established(admission.admit(a).unwrap());
        let _second = established(admission.admit(a).unwrap());
        assert!(admission.admit(a).is_none(), "the address is at its cap");
        let _third = established(admission.admit(b).unwrap());
        assert!(admission.admit(b).is_none(), "the process is at its cap");
        assert_eq!(admission.stats().open(), 3);
        drop(first);
        assert!(admission.admit(b).is_some(), "a closed connection's place is back");
        assert_eq!(
            (admission.stats().refused_address(), admission.stats().refused_process()),
            (1, 1)
        );
    }

    #[test]
    fn at_a_cap_the_oldest_connection_without_a_request_makes_room() {
        let admission = admission(3, 2);
        let (flood, client) = ("127.0.0.2:1".parse().unwrap(), "127.0.0.3:1".parse().unwrap());
        let oldest = admission.admit(flood).unwrap();
        let newer = admission.admit(flood).unwrap();
        // The address's cap: its own oldest silent connection goes.
        let newest = admission.admit(flood).unwrap();
        assert!(oldest.state.evicted.load(Ordering::Acquire));
        assert!(!newer.state.evicted.load(Ordering::Acquire));
        drop(oldest);
        // The process's cap: another client takes a silent one's place.
        let _client = admission.admit(client).unwrap();
        let _another = admission.admit(client).unwrap();
        assert!(newer.state.evicted.load(Ordering::Acquire));
        assert!(!newest.state.evicted.load(Ordering::Acquire));
        assert_eq!(admission.stats().evicted(), 2);
        assert_eq!(
            (admission.stats().refused_address(), admission.stats().refused_process()),
            (0, 0)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn at_a_cap_with_none_silent_an_idle_connection_makes_room_and_a_busy_one_does_not() {
        use roncho_gate::admission::Limits;
        let calls = Admission::new(Limits::default());
        let admission = admission(2, 2).watching(calls.clone());
        let established = |permit: ConnectionPermit| {
            Established(permit.state.clone()).mark();
            permit
        };
        let (busy_peer, idle_peer): (SocketAddr, SocketAddr) =
            ("127.0.0.2:1".parse().unwrap(), "127.0.0.2:2".parse().unwrap());
        let busy = established(admission.admit(busy_peer).unwrap());
        let idle = established(admission.admit(idle_peer).unwrap());
        // The first connection has a request in flight; the second made one and went quiet.
        let call = calls
            .admit("/roncho.v1.RecallService/ListPeers", Some(busy_peer), None)
            .unwrap();
        drop(
            calls
                .admit("/roncho.v1.RecallService/ListPeers", Some(idle_peer), None)
                .unwrap(),
        );
        assert!(
            admission.admit("127.0.0.3:1".parse().unwrap()).is_none(),
            "a request a moment ago: its next may be on its way"
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        // Calls that need no key keep no connection.
        let _watch = calls
            .admit("/grpc.health.v1.Health/Watch", Some(idle_peer), None)
            .unwrap();
        let newcomer = admission.admit("127.0.0.3:1".parse().unwrap()).unwrap();
        assert!(idle.state.evicted.load(Ordering::Acquire), "the idle one made room");
        assert!(
            !busy.state.evicted.load(Ordering::Acquire),
            "a request in flight keeps its connection"
        );
        // A reply not read within its deadline closes its connection.
        call.stalled();
        assert!(
            busy.state.evicted.load(Ordering::Acquire),
            "the stalled reply's connection"
        );
        assert!(!newcomer.state.evicted.load(Ordering::Acquire));
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_process_cap_the_address_holding_most_idle_connections_makes_room() {
        use roncho_gate::admission::Limits;
        let calls = Admission::new(Limits::default());
        let admission = admission(4, 4).watching(calls.clone());
        let idle = |peer: &str| {
            let permit = admission.admit(peer.parse().unwrap()).unwrap();
            Established(permit.state.clone()).mark();
            permit
        };
        // A client's one pooled connection; a flood of three from another
        // address, which keep sending frames but make no request.
        let client = idle("10.0.0.1:1");
        let flood: Vec<ConnectionPermit> = ["10.0.0.2:1", "10.0.0.2:2", "10.0.0.2:3"]
            .into_iter()
            .map(idle)
            .collect();
        tokio::time::advance(Duration::from_secs(5)).await;
        // The client made a request two seconds ago.
        drop(
            calls
                .admit(
                    "/roncho.v1.RecallService/ListPeers",
                    Some("10.0.0.1:1".parse().unwrap()),
                    None,
                )
                .unwrap(),
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        // Newcomers that ask at once (a silent one would be the first to go).
        let newcomers: Vec<ConnectionPermit> = ["10.0.0.3:1", "10.0.0.4:1", "10.0.0.5:1"]
            .into_iter()
            .map(idle)
            .collect();
        assert!(
            newcomers
                .iter()
                .all(|permit| !permit.state.evicted.load(Ordering::Acquire))
        );
        assert!(
            !client.state.evicted.load(Ordering::Acquire),
            "the client keeps its place"
        );
        assert_eq!(
            flood
                .iter()
                .filter(|permit| permit.state.evicted.load(Ordering::Acquire))
                .count(),
            3
        );
    }

    #[test]
    fn the_process_cap_leaves_descriptors_for_everything_else() {
        let limits = ConnectionLimits::default().within_descriptors();
        let (soft, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap();
        assert!(u64::try_from(limits.max_open).unwrap() + DESCRIPTOR_HEADROOM <= soft.max(64 + DESCRIPTOR_HEADROOM));
        assert!(limits.max_per_address <= limits.max_open);
    }

    /// HTTP/2's preface, a PING (which HTTP/2 lets pass before the
    /// SETTINGS), a SETTINGS frame with one setting, a PING and the first
    /// HEADERS frame's header.
    fn http2_opening() -> Vec<u8> {
        let mut bytes = HTTP2_PREFACE.to_vec();
        bytes.extend([0, 0, 8, 0x6, 0, 0, 0, 0, 0]);
        bytes.extend([8, 7, 6, 5, 4, 3, 2, 1]);
        bytes.extend([0, 0, 6, SETTINGS_FRAME, 0, 0, 0, 0, 0]);
        bytes.extend([0, 3, 0, 0, 0, 100]);
        bytes.extend([0, 0, 8, 0x6, 0, 0, 0, 0, 0]);
        bytes.extend([1, 2, 3, 4, 5, 6, 7, 8]);
        bytes.extend([0, 0, 3, HEADERS_FRAME, 0x4, 0, 0, 0, 1]);
        bytes
    }

    #[tokio::test(start_paused = true)]
    async fn an_opening_stopped_at_any_byte_is_closed_at_the_handshake_timeout() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let admission = ConnectionAdmission::new(ConnectionLimits {
            handshake_timeout: Duration::from_secs(5),
            ..ConnectionLimits::default()
        });
        let opening = http2_opening();
        // The preface and its SETTINGS frame: what has a deadline.
        let settled = HTTP2_PREFACE_BYTES + (FRAME_HEADER_BYTES + 8) + (FRAME_HEADER_BYTES + 6);
        for first in [FirstBytes::Http2Preface, FirstBytes::Any] {
            for sent in 0..opening.len() {
                if first == FirstBytes::Any && sent == 0 {
                    // Silence is the other test's.
                    continue;
                }
                let (mut client, server) = tokio::io::duplex(256);
                let mut guarded = Guarded::new(server, admission.admit("127.0.0.2:1".parse().unwrap()).unwrap(), first);
                client.write_all(&opening[..sent]).await.unwrap();
                let mut buf = vec![0; 256];
                let reading = tokio::time::timeout(Duration::from_secs(6), async {
                    loop {
                        match guarded.read(&mut buf).await {
                            Ok(0) => return Ok(()),
                            Ok(_) => continue,
                            Err(error) => return Err(error.kind()),
                        }
                    }
                })
                .await;
                assert!(!guarded.permit.state.established.load(Ordering::Acquire));
                if sent >= settled {
                    // Waiting for a first request: as long as it likes (the caps close it first).
                    assert!(reading.is_err(), "{first:?} settled after {sent} bytes, then cut");
                    continue;
                }
                let outcome = reading
                    .unwrap_or_else(|_| panic!("{first:?} stopped after {sent} bytes: still open past the timeout"));
                assert_eq!(outcome, Err(io::ErrorKind::TimedOut), "{first:?} after {sent} bytes");
            }
        }
        // HTTP/1 is told from its first byte: its own header timeout takes over.
        let (mut client, server) = tokio::io::duplex(256);
        let mut guarded = Guarded::new(
            server,
            admission.admit("127.0.0.2:1".parse().unwrap()).unwrap(),
            FirstBytes::Any,
        );
        client.write_all(b"POST /v3/workspaces HT").await.unwrap();
        let mut buf = vec![0; 256];
        assert_eq!(guarded.read(&mut buf).await.unwrap(), 22);
        assert!(
            tokio::time::timeout(Duration::from_secs(60), guarded.read(&mut buf))
                .await
                .is_err()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_silent_past_the_handshake_timeout_is_closed() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let admission = ConnectionAdmission::new(ConnectionLimits {
            handshake_timeout: Duration::from_secs(5),
            ..ConnectionLimits::default()
        });
        let (client, server) = tokio::io::duplex(256);
        let mut guarded = Guarded::new(
            server,
            admission.admit("127.0.0.2:1".parse().unwrap()).unwrap(),
            FirstBytes::Any,
        );
        let mut buf = [0; 8];
        let read = tokio::time::timeout(Duration::from_secs(6), guarded.read(&mut buf))
            .await
            .unwrap();
        assert_eq!(read.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert_eq!(admission.stats().timed_out(), 1);
        drop(guarded);
        assert_eq!(admission.stats().open(), 0);

        // One that sends its first bytes in time is not bound afterwards.
        let (mut client2, server) = tokio::io::duplex(256);
        let mut guarded = Guarded::new(
            server,
            admission.admit("127.0.0.2:1".parse().unwrap()).unwrap(),
            FirstBytes::Http2Preface,
        );
        client2.write_all(&http2_opening()).await.unwrap();
        let mut preface = vec![0; http2_opening().len()];
        guarded.read_exact(&mut preface).await.unwrap();
        assert!(
            guarded.permit.state.established.load(Ordering::Acquire),
            "the preface, settings and a first request establish it"
        );
        let quiet = tokio::time::timeout(Duration::from_secs(60), guarded.read(&mut buf)).await;
        assert!(quiet.is_err(), "no deadline once the first bytes came");
        drop(client);
    }
}
