//! Prometheus metrics of a process, served at `GET /metrics` on
//! `metrics_listen` (and on the REST port): request latency and outcome by
//! wire, route and status class (and, as before, by gRPC method), work queue depth
//! and age by task type, vector sync state, and LLM calls, tokens and
//! errors by model.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use roncho_core::model::SyncKind;
use roncho_core::store::{DerivationHealth, SyncLedger};

roncho_core::store_view! {
    /// The store as the gauges read it: sync counts and derivation health.
    pub trait GaugeStore: SyncLedger, DerivationHealth
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcCode {
    rpc: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Rpc {
    rpc: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteStatus {
    wire: &'static str,
    route: String,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Route {
    wire: &'static str,
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskState {
    task_type: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Workspace {
    workspace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskType {
    task_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SyncState {
    kind: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelOutcome {
    model: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Limit {
    limit: String,
}

/// Admission control's counters, read at each scrape.
struct Admission {
    stats: Arc<roncho_gate::admission::AdmissionStats>,
    rates: Arc<roncho_gate::rate::RateLimiter>,
    /// What was already added to the counters: shed (process, connection,
    /// workspace), timed out, per rate class.
    seen: std::sync::Mutex<(u64, u64, u64, Vec<u64>, u64)>,
}

/// Connection admission's counters, read at each scrape.
struct Connections {
    stats: Arc<crate::connections::ConnectionStats>,
    /// What was already added: refused (process, address), timed out, evicted.
    seen: std::sync::Mutex<(u64, u64, u64, u64)>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabel {
    role: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelTokens {
    model: String,
    kind: String,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The metrics of one process.
pub struct Metrics {
    registry: Registry,
    /// The name of every sample the registry can export.
    samples: Vec<String>,
    calls: Calls,
    queue_tasks: Family<TaskState, Gauge>,
    queue_oldest_pending_seconds: Family<TaskType, Gauge<f64, std::sync::atomic::AtomicU64>>,
    sync_rows: Family<SyncState, Gauge>,
    text_index_backlog: Gauge,
    derivation_degraded: Family<Workspace, Gauge>,
    llm_calls: Family<ModelOutcome, Counter>,
    llm_tokens: Family<ModelTokens, Counter>,
    requests_in_flight: Gauge,
    requests_shed: Family<Reason, Counter>,
    requests_timed_out: Counter,
    rate_limited: Family<Limit, Counter>,
    write_groups: Gauge,
    grouped_writes: Gauge,
    admission: OnceLock<Admission>,
    connections_open: Gauge,
    connections_refused: Family<Reason, Counter>,
    connections_timed_out: Counter,
    connections_evicted: Counter,
    connections: OnceLock<Connections>,
    background_yielded: Family<RoleLabel, Counter<f64, std::sync::atomic::AtomicU64>>,
    yielding: std::sync::Mutex<Vec<(&'static str, Arc<roncho_worker::yielding::YieldToWrites>)>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Metrics").finish_non_exhaustive()
    }
}

static GLOBAL: OnceLock<Arc<Metrics>> = OnceLock::new();

/// The process's metrics, once [`install`]ed.
pub fn global() -> Option<Arc<Metrics>> {
    GLOBAL.get().cloned()
}

/// Makes `metrics` the process's (the LLM wrappers find them there).
pub fn install(metrics: Arc<Metrics>) {
    let _ = GLOBAL.set(metrics);
}

impl roncho_gate::RequestMetrics for Metrics {
    fn record(&self, call: roncho_gate::Finished<'_>) {
        self.calls.record(call);
    }
}

/// The registry being filled, and the name of every sample it can export.
struct Registrar {
    registry: Registry,
    samples: Vec<String>,
}

impl Registrar {
    /// Registers `metric` as `roncho_<name>`, and keeps the names its
    /// samples take: a counter's `_total`, a histogram's `_bucket`, `_sum`
    /// and `_count`, a gauge's own.
    fn add<M>(&mut self, name: &str, help: &str, metric: M)
    where
        M: prometheus_client::registry::Metric + prometheus_client::metrics::TypedMetric,
    {
        use prometheus_client::metrics::MetricType;
        let full = format!("roncho_{name}");
        match M::TYPE {
            MetricType::Counter => self.samples.push(format!("{full}_total")),
            MetricType::Histogram => self
                .samples
                .extend(["_bucket", "_sum", "_count"].map(|suffix| format!("{full}{suffix}"))),
            _ => self.samples.push(full),
        }
        self.registry.register(name, help, metric);
    }
}

/// Calls on every wire, counted and timed, and gRPC's by code.
struct Calls {
    requests: Family<RouteStatus, Counter>,
    request_seconds: Family<Route, Histogram, fn() -> Histogram>,
    rpc_requests: Family<RpcCode, Counter>,
    rpc_seconds: Family<Rpc, Histogram, fn() -> Histogram>,
}

impl Calls {
    fn register(registrar: &mut Registrar) -> Self {
        let requests = Family::<RouteStatus, Counter>::default();
        registrar.add(
            "requests",
            "calls on every wire (grpc, rest, mcp) by route (a REST route's template, a gRPC method, \
             an MCP tool call as `tools/call <tool>`) and status class (ok, client_error, cancelled: the caller \
             went away first, server_error), refusals at the gate included",
            requests.clone(),
        );
        let request_seconds = Family::<Route, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        registrar.add(
            "request_duration_seconds",
            "call latency (to the reply's head) by wire and route",
            request_seconds.clone(),
        );
        let rpc_requests = Family::<RpcCode, Counter>::default();
        registrar.add(
            "rpc_requests",
            "gRPC requests by method and status code (the gRPC wire of `requests`, by code)",
            rpc_requests.clone(),
        );
        let rpc_seconds = Family::<Rpc, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        registrar.add(
            "rpc_duration_seconds",
            "gRPC request latency (to the response headers) by method",
            rpc_seconds.clone(),
        );
        Self {
            requests,
            request_seconds,
            rpc_requests,
            rpc_seconds,
        }
    }

    fn record_rpc(&self, rpc: &str, code: &str, elapsed: Duration) {
        self.rpc_requests
            .get_or_create(&RpcCode {
                rpc: rpc.to_owned(),
                code: code.to_owned(),
            })
            .inc();
        self.rpc_seconds
            .get_or_create(&Rpc { rpc: rpc.to_owned() })
            .observe(elapsed.as_secs_f64());
    }

    /// Records one call of any wire.
    fn record(&self, call: roncho_gate::Finished<'_>) {
        let wire = call.wire.as_str();
        self.requests
            .get_or_create(&RouteStatus {
                wire,
                route: call.route.to_owned(),
                status: call.class.as_str(),
            })
            .inc();
        self.request_seconds
            .get_or_create(&Route {
                wire,
                route: call.route.to_owned(),
            })
            .observe(call.elapsed.as_secs_f64());
        if call.wire == roncho_gate::Wire::Grpc {
            self.record_rpc(call.route, call.code, call.elapsed);
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registrar = Registrar {
            registry: Registry::with_prefix("roncho"),
            samples: Vec::new(),
        };
        let calls = Calls::register(&mut registrar);
        let queue_tasks = Family::<TaskState, Gauge>::default();
        registrar.add(
            "queue_tasks",
            "work queue tasks by type and state (pending, in_progress, postponed: waiting out an outage, \
             waiting: due later, as a dream waiting for its peer to be quiet, done, dead), \
             each counted by its items as queue status counts (a representation task: its messages)",
            queue_tasks.clone(),
        );
        let queue_oldest_pending_seconds = Family::default();
        registrar.add(
            "queue_oldest_pending_age_seconds",
            "age of the oldest ready pending task by type",
            Family::clone(&queue_oldest_pending_seconds),
        );
        let sync_rows = Family::<SyncState, Gauge>::default();
        registrar.add(
            "vector_sync_rows",
            "rows by vector sync state (pending, synced, failed) and kind",
            sync_rows.clone(),
        );
        let text_index_backlog = Gauge::default();
        registrar.add("text_index_backlog_messages",
            "messages whose words are not full-text indexed yet (Postgres indexes them off the write path; search matches the newest on the fly)",
            text_index_backlog.clone(),
        );
        let derivation_degraded = Family::<Workspace, Gauge>::default();
        registrar.add(
            "derivation_degraded",
            "1 for each workspace whose model derivations keep giving no observations (queue status and \
             roncho status say why)",
            derivation_degraded.clone(),
        );
        let llm_calls = Family::<ModelOutcome, Counter>::default();
        registrar.add("llm_calls", "LLM calls by model and outcome", llm_calls.clone());
        let llm_tokens = Family::<ModelTokens, Counter>::default();
        registrar.add("llm_tokens", "LLM tokens by model, input or output", llm_tokens.clone());
        let requests_in_flight = Gauge::default();
        registrar.add("requests_in_flight",
            "calls being served on every wire (gRPC, REST, MCP), each holding a place in flight (health checks excepted)",
            requests_in_flight.clone(),
        );
        let requests_shed = Family::<Reason, Counter>::default();
        registrar.add("requests_shed",
            "requests refused RESOURCE_EXHAUSTED at once because the process, their connection or their workspace was at its limit",
            requests_shed.clone(),
        );
        let connections_open = Gauge::default();
        registrar.add(
            "connections_open",
            "client connections open on every listener (gRPC, REST, metrics, health)",
            connections_open.clone(),
        );
        let connections_refused = Family::<Reason, Counter>::default();
        registrar.add("connections_refused",
            "connections closed as soon as accepted: the process (max_open_connections) or the client address (max_open_connections_per_address) was at its limit",
            connections_refused.clone(),
        );
        let connections_timed_out = Counter::default();
        registrar.add(
            "connections_timed_out",
            "connections closed because their first bytes did not arrive within connection_handshake_timeout_secs",
            connections_timed_out.clone(),
        );
        let connections_evicted = Counter::default();
        registrar.add(
            "connections_evicted",
            "connections that had sent no request, closed to make room for a new one at a connection limit",
            connections_evicted.clone(),
        );
        let background_yielded = Family::<RoleLabel, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        registrar.add("background_yielded_seconds",
            "time background work (reconciler, deriver) waited for this process's write bursts to pause, in all (background_yield_ms)",
            background_yielded.clone(),
        );
        let requests_timed_out = Counter::default();
        registrar.add(
            "requests_timed_out",
            "calls ended DEADLINE_EXCEEDED by the server's request timeout",
            requests_timed_out.clone(),
        );
        let rate_limited = Family::<Limit, Counter>::default();
        registrar.add(
            "rate_limited",
            "calls refused because their workspace was over a rate (chat, messages, uploads, dreams)",
            rate_limited.clone(),
        );
        let write_groups = Gauge::default();
        registrar.add("sqlite_write_groups",
            "group commits on the embedded store since start: one transaction for the CreateMessages batches waiting for the writer",
            write_groups.clone(),
        );
        let grouped_writes = Gauge::default();
        registrar.add(
            "sqlite_grouped_writes",
            "CreateMessages batches written by group commits since start (batches / groups: the mean group)",
            grouped_writes.clone(),
        );
        Self {
            write_groups,
            grouped_writes,
            requests_in_flight,
            requests_shed,
            requests_timed_out,
            rate_limited,
            admission: OnceLock::new(),
            connections_open,
            connections_refused,
            connections_timed_out,
            connections_evicted,
            connections: OnceLock::new(),
            background_yielded,
            yielding: std::sync::Mutex::new(Vec::new()),
            registry: registrar.registry,
            samples: registrar.samples,
            calls,
            queue_tasks,
            queue_oldest_pending_seconds,
            sync_rows,
            text_index_backlog,
            derivation_degraded,
            llm_calls,
            llm_tokens,
        }
    }

    /// Reports admission control's counters from now on.
    pub fn watch_admission(
        &self,
        stats: Arc<roncho_gate::admission::AdmissionStats>,
        rates: Arc<roncho_gate::rate::RateLimiter>,
    ) {
        let _ = self.admission.set(Admission {
            stats,
            rates,
            seen: std::sync::Mutex::new((0, 0, 0, Vec::new(), 0)),
        });
    }

    /// Reports connection admission's counters from now on.
    pub fn watch_connections(&self, stats: Arc<crate::connections::ConnectionStats>) {
        let _ = self.connections.set(Connections {
            stats,
            seen: std::sync::Mutex::new((0, 0, 0, 0)),
        });
    }

    /// Brings the connection metrics up to date with the gate's counters.
    fn sync_connections(&self) {
        let Some(connections) = self.connections.get() else {
            return;
        };
        let stats = &connections.stats;
        self.connections_open
            .set(i64::try_from(stats.open()).unwrap_or(i64::MAX));
        let mut seen = connections.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = (
            stats.refused_process(),
            stats.refused_address(),
            stats.timed_out(),
            stats.evicted(),
        );
        for (reason, count, before) in [("process", now.0, seen.0), ("address", now.1, seen.1)] {
            self.connections_refused
                .get_or_create(&Reason { reason: reason.into() })
                .inc_by(count.saturating_sub(before));
        }
        self.connections_timed_out.inc_by(now.2.saturating_sub(seen.2));
        self.connections_evicted.inc_by(now.3.saturating_sub(seen.3));
        *seen = now;
    }

    /// Reports how long `role`'s background work yielded to writes from now on.
    pub fn watch_yielding(&self, role: &'static str, yielding: Arc<roncho_worker::yielding::YieldToWrites>) {
        self.yielding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((role, yielding));
    }

    /// Brings the admission metrics up to date with its counters.
    fn sync_admission(&self) {
        let Some(admission) = self.admission.get() else {
            return;
        };
        self.requests_in_flight
            .set(i64::try_from(admission.stats.in_flight()).unwrap_or(i64::MAX));
        let mut seen = admission.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (process, connection, workspace, timed_out) = (
            admission.stats.shed_process(),
            admission.stats.shed_connection(),
            admission.stats.shed_workspace(),
            admission.stats.timed_out(),
        );
        for (reason, now, before) in [
            ("process", process, seen.0),
            ("connection", connection, seen.1),
            ("workspace", workspace, seen.4),
        ] {
            self.requests_shed
                .get_or_create(&Reason { reason: reason.into() })
                .inc_by(now.saturating_sub(before));
        }
        self.requests_timed_out.inc_by(timed_out.saturating_sub(seen.2));
        let refused = admission.rates.refused();
        seen.3.resize(refused.len(), 0);
        for ((class, now), before) in refused.iter().zip(seen.3.iter_mut()) {
            self.rate_limited
                .get_or_create(&Limit {
                    limit: class.name().into(),
                })
                .inc_by(now.saturating_sub(*before));
            *before = *now;
        }
        (seen.0, seen.1, seen.2, seen.4) = (process, connection, timed_out, workspace);
    }

    /// The name of every sample this process can export, whether it has
    /// been recorded yet or not (dashboards and alert rules are checked
    /// against it).
    pub fn sample_names(&self) -> &[String] {
        &self.samples
    }

    /// The metrics in Prometheus' text format.
    pub fn encode(&self) -> String {
        self.sync_admission();
        self.sync_connections();
        for (role, yielding) in self
            .yielding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            // A total that only grows: counted on by what it grew since
            // the last scrape (scrapes take turns under the lock above).
            let counted = self
                .background_yielded
                .get_or_create(&RoleLabel { role: (*role).into() });
            let grown = yielding.total().as_secs_f64() - counted.get();
            if grown > 0.0 {
                counted.inc_by(grown);
            }
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// Records one LLM call: its outcome (`ok` or the error class) and tokens.
    pub fn record_llm(&self, model: &str, outcome: &str, usage: roncho_llm::Usage) {
        self.llm_calls
            .get_or_create(&ModelOutcome {
                model: model.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
        for (kind, tokens) in [("input", usage.input_tokens), ("output", usage.output_tokens)] {
            self.llm_tokens
                .get_or_create(&ModelTokens {
                    model: model.to_owned(),
                    kind: kind.to_owned(),
                })
                .inc_by(tokens);
        }
    }

    /// Refreshes the queue and sync gauges from the database.
    pub async fn refresh(&self, store: &dyn GaugeStore, ledger: Option<&roncho_store::SqlWorkQueue>) {
        if let Some(ledger) = ledger {
            let (groups, batches) = ledger.store().write_groups();
            self.write_groups.set(i64::try_from(groups).unwrap_or(i64::MAX));
            self.grouped_writes.set(i64::try_from(batches).unwrap_or(i64::MAX));
            match ledger.type_stats().await {
                Ok(stats) => {
                    self.queue_tasks.clear();
                    self.queue_oldest_pending_seconds.clear();
                    let now = roncho_core::model::now_micros();
                    for stat in stats {
                        self.queue_tasks
                            .get_or_create(&TaskState {
                                task_type: stat.task_type.clone(),
                                state: stat.state.clone(),
                            })
                            .set(stat.count);
                        if let Some(oldest) = stat.oldest_ready_pending {
                            self.queue_oldest_pending_seconds
                                .get_or_create(&TaskType {
                                    task_type: stat.task_type,
                                })
                                .set((now - oldest).max(0) as f64 / 1e6);
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "metrics: reading the queue failed"),
            }
        }
        for kind in [SyncKind::Message, SyncKind::Conclusion] {
            match store.sync_counts(kind).await {
                Ok(counts) => {
                    for (state, n) in [
                        ("pending", counts.pending),
                        ("synced", counts.synced),
                        ("failed", counts.failed),
                    ] {
                        self.sync_rows
                            .get_or_create(&SyncState {
                                kind: kind.name().to_owned(),
                                state: state.to_owned(),
                            })
                            .set(n);
                    }
                }
                Err(error) => tracing::warn!(%error, "metrics: reading sync counts failed"),
            }
        }
        match store.text_index_backlog().await {
            Ok(waiting) => {
                self.text_index_backlog.set(waiting);
            }
            Err(error) => tracing::warn!(%error, "metrics: reading the text index backlog failed"),
        }
        match store.degraded_derivations().await {
            Ok(degraded) => {
                self.derivation_degraded.clear();
                for record in degraded {
                    self.derivation_degraded
                        .get_or_create(&Workspace {
                            workspace: record.workspace_id,
                        })
                        .set(1);
                }
            }
            Err(error) => tracing::warn!(%error, "metrics: reading derivation health failed"),
        }
    }
}

/// Lets only an admin key's calls through (after the door has let the
/// caller in): 403 in Honcho's shape otherwise.
pub async fn admins_only(request: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    let admin = request
        .extensions()
        .get::<roncho_core::Caller>()
        .is_some_and(roncho_core::Caller::is_admin);
    if !admin {
        let detail = serde_json::json!({"detail": "the metrics name every workspace: they need an admin key"});
        return (http::StatusCode::FORBIDDEN, axum::Json(detail)).into_response();
    }
    next.run(request).await
}

/// `GET /metrics`, on the metrics address and on the REST edge's port (as
/// Honcho serves it on its API port; there, with keys, to admin keys only).
pub fn router(metrics: Arc<Metrics>) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move {
                (
                    [(
                        "content-type",
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    metrics.encode(),
                )
            }
        }),
    )
}

/// Serves `GET /metrics` until `shutdown`, refreshing the database gauges
/// every `every`, behind `edge` (each call takes one of the places of
/// calls that need no key).
pub async fn serve(
    listener: tokio::net::TcpListener,
    entrance: crate::connections::HttpEntrance,
    metrics: Arc<Metrics>,
    store: Arc<dyn GaugeStore>,
    ledger: Option<roncho_store::SqlWorkQueue>,
    every: Duration,
    shutdown: tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let refresher = {
        let (metrics, shutdown) = (metrics.clone(), shutdown.clone());
        tokio::spawn(async move {
            loop {
                metrics.refresh(store.as_ref(), ledger.as_ref()).await;
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                }
            }
        })
    };
    let address = listener.local_addr()?;
    tracing::info!(%address, "serving metrics at /metrics");
    let header_timeout = entrance.connections.limits().header_timeout;
    let listener = crate::connections::AdmittedListener::new(listener, entrance.connections);
    let app = roncho_rest::open(router(metrics), entrance.door.clone());
    crate::connections::serve_http(
        listener,
        app,
        header_timeout,
        entrance.browsers,
        entrance.door,
        shutdown,
    )
    .await;
    refresher.abort();
    Ok(())
}
