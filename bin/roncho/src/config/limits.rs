//! The `[limits]` section: bounds on what callers take (docs/security.md).

use std::time::Duration;

use serde::Serialize;

section! {
    /// `[limits]` as one layer gives it.
    LimitsLayer {
        /// Requests in flight in the process before the excess is shed.
        max_concurrent_requests: usize,
        /// Requests in flight on one connection before the excess is shed.
        max_concurrent_requests_per_connection: usize,
        /// Requests in flight for one workspace (the workspace of the caller's
        /// key) before its excess is shed; only with authentication on.
        max_concurrent_requests_per_workspace: usize,
        /// Longest a call may run (dialectic calls have their level deadlines).
        request_timeout_secs: u64,
        /// Longest a request's body may take to arrive after its headers.
        request_body_timeout_secs: u64,
        /// Client connections open at once in the process, on all listeners.
        max_open_connections: usize,
        /// Client connections open at once from one address.
        max_open_connections_per_address: usize,
        /// Longest an HTTP/1 request head may take to arrive (also the idle
        /// time of a kept-alive connection).
        request_header_timeout_secs: u64,
        /// Longest a new connection may take to send its first bytes (HTTP/2's preface).
        connection_handshake_timeout_secs: u64,
        /// Per workspace and minute: Chat and ChatStream calls (0: unmetered).
        rate_limit_chat_per_minute: u32,
        /// Per workspace and minute: messages written, when a model derives from them.
        rate_limit_messages_per_minute: u32,
        /// Per workspace and minute: UploadFile calls.
        rate_limit_uploads_per_minute: u32,
        /// Per workspace and minute: ScheduleDream calls.
        rate_limit_dreams_per_minute: u32,
        /// Per workspace and minute: CloneSession calls.
        rate_limit_clones_per_minute: u32,
        /// Per workspace and minute: TestWebhook and CreateWebhook calls.
        rate_limit_webhooks_per_minute: u32,
        /// Per workspace and minute: calls that leave background work
        /// (deletes, sessions added to or taken out of scopes).
        rate_limit_jobs_per_minute: u32,
        /// Longest an uploaded PDF may take to read.
        upload_pdf_timeout_secs: u64,
        /// Memory (address space) a PDF's reader may use, in MiB.
        upload_pdf_memory_mb: u64,
        /// PDFs read at once; more wait up to 5 s, then are told to retry.
        upload_pdf_concurrency: usize,
    }
}

/// Bounds on what callers take (docs/security.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LimitsConfig {
    pub max_concurrent_requests: usize,
    pub max_concurrent_requests_per_connection: usize,
    pub request_timeout: Duration,
    /// Longest a request's body may take to arrive after its headers.
    pub body_timeout: Duration,
    pub max_concurrent_requests_per_workspace: usize,
    /// Connection-level limits of every listener.
    pub connections: crate::connections::ConnectionLimits,
    /// Per dialectic level (minimal … max), a deadline that replaces the default.
    pub dialectic_timeouts: [Option<Duration>; 5],
    /// Longest a dialectic call may run: its slowest level's deadline and a margin.
    pub dialectic_timeout: Duration,
    /// Per workspace and minute; 0: unmetered.
    pub chat_per_minute: u32,
    /// Applied when a model derives (see [`LimitsConfig::rates`]).
    pub messages_per_minute: u32,
    pub uploads_per_minute: u32,
    pub dreams_per_minute: u32,
    pub clones_per_minute: u32,
    pub webhooks_per_minute: u32,
    pub jobs_per_minute: u32,
    /// Longest an uploaded PDF may take to read.
    pub pdf_timeout: Duration,
    /// Address space of the process reading one PDF, in MiB.
    pub pdf_memory_mb: u64,
    /// PDFs read at once.
    pub pdf_concurrency: usize,
}

impl LimitsLayer {
    /// `dialectic_timeouts` are the levels' deadlines `[llm]` configures.
    pub(super) fn resolve(self, dialectic_timeouts: [Option<Duration>; 5]) -> LimitsConfig {
        LimitsConfig {
            max_concurrent_requests: self.max_concurrent_requests.unwrap_or(512).max(1),
            max_concurrent_requests_per_connection: self.max_concurrent_requests_per_connection.unwrap_or(128).max(1),
            request_timeout: Duration::from_secs(self.request_timeout_secs.unwrap_or(60).max(1)),
            body_timeout: Duration::from_secs(self.request_body_timeout_secs.unwrap_or(30).max(1)),
            max_concurrent_requests_per_workspace: self.max_concurrent_requests_per_workspace.unwrap_or(128).max(1),
            connections: crate::connections::ConnectionLimits {
                max_open: self.max_open_connections.unwrap_or(16_384).max(1),
                max_per_address: self.max_open_connections_per_address.unwrap_or(4_096).max(1),
                header_timeout: Duration::from_secs(self.request_header_timeout_secs.unwrap_or(10).max(1)),
                handshake_timeout: Duration::from_secs(self.connection_handshake_timeout_secs.unwrap_or(10).max(1)),
            },
            dialectic_timeout: dialectic_limit(dialectic_timeouts),
            dialectic_timeouts,
            chat_per_minute: self.rate_limit_chat_per_minute.unwrap_or(120),
            messages_per_minute: self.rate_limit_messages_per_minute.unwrap_or(6_000),
            uploads_per_minute: self.rate_limit_uploads_per_minute.unwrap_or(60),
            dreams_per_minute: self.rate_limit_dreams_per_minute.unwrap_or(10),
            clones_per_minute: self.rate_limit_clones_per_minute.unwrap_or(30),
            webhooks_per_minute: self.rate_limit_webhooks_per_minute.unwrap_or(30),
            jobs_per_minute: self.rate_limit_jobs_per_minute.unwrap_or(600),
            pdf_timeout: Duration::from_secs(self.upload_pdf_timeout_secs.unwrap_or(30).max(1)),
            pdf_memory_mb: self.upload_pdf_memory_mb.unwrap_or(1024).max(64),
            pdf_concurrency: self.upload_pdf_concurrency.unwrap_or(2).max(1),
        }
    }
}

/// The longest a dialectic call may run: the slowest level's deadline
/// (configured, else its default) and 30 s for the rest of the call.
fn dialectic_limit(configured: [Option<Duration>; 5]) -> Duration {
    use roncho_dialectic::agent::Level;
    let slowest = Level::ALL
        .into_iter()
        .zip(configured)
        .map(|(level, deadline)| deadline.unwrap_or_else(|| level.default_deadline()))
        .max()
        .unwrap_or_default();
    slowest + Duration::from_secs(30)
}

impl LimitsConfig {
    /// The admission limits of the gRPC server.
    pub fn admission(&self) -> roncho_gate::admission::Limits {
        roncho_gate::admission::Limits {
            max_in_flight: self.max_concurrent_requests,
            max_in_flight_per_connection: self.max_concurrent_requests_per_connection,
            // One client address (its connections together) takes half the places at most.
            max_in_flight_per_address: (self.max_concurrent_requests / 2)
                .max(self.max_concurrent_requests_per_connection),
            request_timeout: self.request_timeout,
            dialectic_timeout: self.dialectic_timeout,
            body_timeout: self.body_timeout,
            max_in_flight_per_workspace: self.max_concurrent_requests_per_workspace,
            ..roncho_gate::admission::Limits::default()
        }
    }

    /// The per-workspace rates; messages are metered only when `derives_with_model`.
    pub fn rates(&self, derives_with_model: bool) -> roncho_gate::rate::RateLimiter {
        use roncho_gate::rate::RateClass;
        roncho_gate::rate::RateLimiter::new([
            (RateClass::Chat, self.chat_per_minute),
            (
                RateClass::Messages,
                if derives_with_model {
                    self.messages_per_minute
                } else {
                    0
                },
            ),
            (RateClass::Uploads, self.uploads_per_minute),
            (RateClass::Dreams, self.dreams_per_minute),
            (RateClass::Clones, self.clones_per_minute),
            (RateClass::Webhooks, self.webhooks_per_minute),
            (RateClass::Jobs, self.jobs_per_minute),
        ])
    }
}
