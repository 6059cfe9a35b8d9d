//! The gRPC server: the chosen roles' services, health and reflection on one
//! listener, stopped by a cancellation token.

use std::sync::Arc;

use anyhow::Context;
use roncho_api::grpc::{
    DeriverServiceServer, DialecticServiceServer, DoorLayer, DreamerServiceServer, GrpcDeriver, GrpcDialectic,
    GrpcDreamer, GrpcIngest, GrpcKeys, GrpcRecall, IngestServiceServer, KeyServiceServer, RecallServiceServer,
};
use roncho_core::queue::WorkQueue;
use roncho_core::store::Health;
use roncho_gate::admission::{Admission, Limits};
use roncho_gate::authz::Authorizer;
use roncho_gate::keys::{KeyIssuer, KeySet};
use roncho_gate::rate::RateLimiter;
use roncho_gate::{Authenticator, CallPolicy};
use roncho_store::SqlStore;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::server::NamedService;
use tonic_health::ServingStatus;

use crate::config::Role;
use crate::connections::{FirstBytes, GatedListener, serve_http};

/// How often the TLS files are checked for changes.
const TLS_RELOAD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// Largest request accepted: a 5 MiB upload plus its envelope.
const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// What the role services are built on.
#[derive(Clone)]
pub struct Services {
    pub store: Arc<SqlStore>,
    pub semantic: Option<roncho_search::Semantic>,
    /// Nudges an in-process reconciler after writes.
    pub after_write: Option<roncho_ingest::AfterWrite>,
    /// Marks client writes in flight for the reconciler beside them.
    pub write_activity: Option<Arc<roncho_core::activity::WriteActivity>>,
    /// The background work queue (queue status; the workers' source).
    pub queue: Option<Arc<dyn WorkQueue>>,
    /// How the deriver works, reported by queue status.
    pub derivation: roncho_deriver::Derivation,
    /// The dialectic with its models; `None`: every level extractive.
    pub dialectic: Option<roncho_dialectic::Dialectic>,
    /// The dream model's id; `None`: ScheduleDream is FAILED_PRECONDITION.
    pub dream_model: Option<String>,
    /// How often readiness checks the store.
    pub readiness_interval: std::time::Duration,
    /// Where requests are counted and timed; `None`: nowhere.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
    /// What else the roles cannot work without (NATS for a consumer);
    /// readiness follows them as it follows the store.
    pub dependencies: Vec<Dependency>,
    /// The secrets API keys are verified with; `None`: authentication is
    /// off and every caller is admin.
    pub keys: Option<Arc<KeySet>>,
    /// TLS on the listener; `None`: plain text.
    pub tls: Option<Arc<crate::tls::ReloadingTls>>,
    /// A plain-text address that serves health checks alone.
    pub health_listen: Option<std::net::SocketAddr>,
    /// Where the Honcho v3 REST edge is served; `None`: nowhere.
    pub rest: Option<RestEdge>,
    /// Bounds on requests in flight and their duration.
    pub admission: Admission,
    /// Bounds on open connections and how long they may stay silent, on
    /// every listener of the process.
    pub connections: crate::connections::ConnectionAdmission,
    /// Per-workspace rates of the metered calls.
    pub rates: Arc<RateLimiter>,
    /// Where uploaded PDFs are read; `None`: in this process.
    pub pdf: Option<Arc<dyn roncho_core::files::PdfReader>>,
    /// Webhook URLs may point at private addresses.
    pub allow_private_webhooks: bool,
    /// How long idempotency keys of writes are remembered.
    pub idempotency_window: std::time::Duration,
    /// Serve gRPC server reflection (the API's shape, to anyone).
    pub reflection: bool,
    /// Which web pages may call the HTTP routes, and under which host names
    /// a server without keys answers.
    pub browsers: roncho_gate::BrowserPolicy,
}

/// Where the Honcho v3 REST edge is served.
#[derive(Clone)]
pub enum RestEdge {
    /// On this listener, bound already.
    Listener(Arc<std::net::TcpListener>),
    /// Nowhere on the network: its router is handed to this process (what
    /// `roncho mcp` embedded calls), and no other listener is opened.
    InProcess(Arc<tokio::sync::watch::Sender<Option<axum::Router>>>),
}

/// A dependency readiness watches: its name and a check that says why it
/// is down.
#[derive(Clone)]
pub struct Dependency {
    pub name: &'static str,
    pub check: Arc<dyn Fn() -> Result<(), String> + Send + Sync>,
}

impl Dependency {
    /// The NATS connection of a process that consumes work from it.
    pub fn nats(queue: roncho_nats::NatsWorkQueue) -> Self {
        Self {
            name: "NATS",
            check: Arc::new(move || {
                if queue.connected() {
                    Ok(())
                } else {
                    Err("disconnected; reconnecting".to_owned())
                }
            }),
        }
    }
}

/// The health service name that only says the process is alive (liveness
/// probes), whatever its dependencies do.
pub const LIVENESS: &str = "liveness";
/// The health service name that says the process can serve: its store
/// answers and it is not draining (readiness probes; also `""`).
pub const READINESS: &str = "readiness";

impl Services {
    /// Returns the browser rules of every HTTP listener: hosts are checked
    /// when the server answers without keys.
    pub fn browsers(&self) -> Arc<roncho_gate::BrowserPolicy> {
        Arc::new(self.browsers.clone().checking_hosts(self.keys.is_none()))
    }

    /// Returns the door every HTTP and gRPC call passes: observed by the
    /// process's metrics, authentication with these keys, admission with
    /// these limits.
    pub fn door(&self) -> roncho_gate::Door {
        let metrics = self
            .metrics
            .clone()
            .map(|metrics| metrics as Arc<dyn roncho_gate::RequestMetrics>);
        roncho_gate::Door::new(Authenticator::new(self.keys.clone()), self.admission.clone()).observed_by(metrics)
    }

    /// Returns what every HTTP listener of the process applies.
    pub fn http_entrance(&self) -> crate::connections::HttpEntrance {
        crate::connections::HttpEntrance {
            gate: self.connections.clone(),
            browsers: self.browsers(),
            door: self.door(),
        }
    }

    /// Returns services over a store alone: full-text search, no reconciler.
    pub fn store_only(store: Arc<SqlStore>) -> Self {
        Self {
            store,
            semantic: None,
            after_write: None,
            write_activity: None,
            queue: None,
            derivation: roncho_deriver::Derivation {
                observations: None,
                summaries: None,
            },
            dialectic: None,
            dream_model: None,
            readiness_interval: std::time::Duration::from_secs(5),
            metrics: None,
            dependencies: Vec::new(),
            keys: None,
            tls: None,
            health_listen: None,
            rest: None,
            admission: Admission::new(Limits::default()),
            connections: crate::connections::ConnectionAdmission::new(crate::connections::ConnectionLimits::default()),
            rates: Arc::new(RateLimiter::default()),
            pdf: None,
            allow_private_webhooks: false,
            idempotency_window: roncho_ingest::DEFAULT_IDEMPOTENCY_WINDOW,
            reflection: true,
            browsers: roncho_gate::BrowserPolicy::default(),
        }
    }
}

/// Serves the roles on `listener` (and the REST edge where `services`
/// says) until `shutdown` is cancelled, then lets in-flight requests
/// finish. Without a listener, only the REST router is served, in process.
pub async fn run(
    listener: Option<TcpListener>,
    services: Services,
    roles: &[Role],
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(roncho_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let (reflection_v1, reflection_v1alpha) = if services.reflection {
        (Some(reflection().build_v1()?), Some(reflection().build_v1alpha()?))
    } else {
        (None, None)
    };

    let policy = CallPolicy::new(Authorizer::new(services.store.clone()), services.rates.clone());
    // Outermost first: every request is observed, then authenticated (a
    // key's workspace has places of its own), then admitted.
    let limits = services.admission.limits();
    let router = tonic::transport::Server::builder()
        // HTTP/2 bounds each connection's streams (twice what admission
        // lets in: admission sheds the excess with a retry delay first, where
        // HTTP/2 would make the client queue), drops peers that stopped
        // answering, and makes clients reconnect now and then (renewed
        // certificates and client CAs reach every connection).
        .max_concurrent_streams(
            u32::try_from(limits.max_in_flight_per_connection.saturating_mul(2)).unwrap_or(u32::MAX),
        )
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(std::time::Duration::from_secs(10)))
        .max_connection_age(std::time::Duration::from_secs(3600))
        .layer(DoorLayer::new(services.door()))
        .add_service(health_service.clone())
        .add_optional_service(reflection_v1)
        .add_optional_service(reflection_v1alpha);
    // Each service built once, mounted on both wires.
    let domain = Domain::build(&services, roles);
    let (router, served) = domain.grpc(router, &policy);
    let rest = domain.rest(&policy);
    tokio::spawn(crate::connections::hand_back_after_floods(
        services.connections.stats(),
        services.admission.stats(),
        shutdown.clone(),
    ));
    let served = report_serving(&health_reporter, &served, &services, &shutdown).await;
    if let Some(address) = services.health_listen {
        serve_health_only(address, health_service, &services, &shutdown).await?;
    }
    match &services.rest {
        Some(RestEdge::Listener(rest_listener)) => serve_rest(rest_listener, rest, &services, &shutdown)?,
        Some(RestEdge::InProcess(handed)) => {
            let router = rest.router(services.door());
            handed.send_replace(Some(router));
        }
        None => {}
    }
    let Some(listener) = listener else {
        tracing::info!("serving in process only: no listener");
        shutdown.cancelled().await;
        return Ok(());
    };
    let address = listener.local_addr()?;
    tracing::info!(
        %address,
        roles = ?roles.iter().map(|role| role.name()).collect::<Vec<_>>(),
        tls = services.tls.is_some(),
        authentication = services.keys.is_some(),
        "serving gRPC"
    );
    let drain = shutdown.clone();
    let reporter = health_reporter.clone();
    let stopping = async move {
        drain.cancelled().await;
        // Report NOT_SERVING first so load balancers stop sending new work.
        for name in served {
            reporter.set_service_status(name, ServingStatus::NotServing).await;
        }
        tracing::info!("shutting down: finishing in-flight requests");
    };
    // Every connection must send HTTP/2's preface within the handshake timeout.
    match &services.tls {
        Some(tls) => {
            tokio::spawn(tls.clone().watch(TLS_RELOAD_INTERVAL, shutdown.clone()));
            let incoming = crate::tls::incoming(
                listener,
                tls.clone(),
                services.connections.clone(),
                FirstBytes::Http2Preface,
                shutdown.clone(),
            );
            router.serve_with_incoming_shutdown(incoming, stopping).await?;
        }
        None => {
            let incoming = services
                .connections
                .incoming(listener, FirstBytes::Http2Preface, shutdown.clone());
            router.serve_with_incoming_shutdown(incoming, stopping).await?;
        }
    }
    Ok(())
}

/// The domain services of a process's roles, each built once and mounted
/// on every wire that serves it (gRPC and REST).
struct Domain {
    keys: Option<Arc<KeyIssuer>>,
    ingest: Option<Arc<roncho_ingest::Ingest>>,
    recall: Option<Arc<roncho_recall::Recall>>,
    dialectic: Option<Arc<roncho_dialectic::Dialectic>>,
    /// Served on gRPC by the deriver role; on REST by it or by ingest
    /// (Honcho serves every route at one address: where REST writes, it
    /// also answers queue status itself, reading the queue).
    deriver: Option<Arc<roncho_deriver::Deriver>>,
    /// Likewise for the dreamer role (REST schedules dreams where it writes).
    dreamer: Option<Arc<roncho_dreamer::Dreamer>>,
    roles: Vec<Role>,
}

impl Domain {
    /// Builds the services `roles` serve over `services`.
    fn build(services: &Services, roles: &[Role]) -> Self {
        let has = |role: Role| roles.contains(&role);
        let ingest = has(Role::Ingest).then(|| {
            let mut ingest = roncho_ingest::Ingest::new(services.store.clone())
                .allowing_private_webhooks(services.allow_private_webhooks)
                .with_idempotency_window(services.idempotency_window)
                // Unless wiring gives the sandboxed reader: in this process, bounded.
                .with_pdf_reader(
                    services
                        .pdf
                        .clone()
                        .unwrap_or_else(|| Arc::new(roncho_pdf::InProcessPdf::default())),
                );
            if let Some(after_write) = &services.after_write {
                ingest = ingest.with_after_write(after_write.clone());
            }
            if let Some(activity) = &services.write_activity {
                ingest = ingest.with_activity(activity.clone());
            }
            Arc::new(ingest)
        });
        let recall = has(Role::Recall).then(|| {
            Arc::new(roncho_recall::Recall::new(
                services.store.clone(),
                services.semantic.clone(),
            ))
        });
        let dialectic =
            has(Role::Dialectic).then(|| {
                Arc::new(services.dialectic.clone().unwrap_or_else(|| {
                    roncho_dialectic::Dialectic::new(services.store.clone(), services.semantic.clone())
                }))
            });
        let deriver = (has(Role::Deriver) || has(Role::Ingest)).then(|| {
            Arc::new(
                roncho_deriver::Deriver::new(services.queue.clone(), services.derivation.clone())
                    .with_health(services.store.clone()),
            )
        });
        let dreamer = (has(Role::Dreamer) || has(Role::Ingest)).then(|| {
            Arc::new(roncho_dreamer::Dreamer::new(
                services.store.clone(),
                services.queue.clone(),
                services.dream_model.clone(),
            ))
        });
        Self {
            keys: roles
                .iter()
                .any(|role| role.serves_api())
                .then(|| Arc::new(KeyIssuer::new(services.keys.clone()))),
            ingest,
            recall,
            dialectic,
            deriver,
            dreamer,
            roles: roles.to_vec(),
        }
    }

    /// The REST edge's routes over these services.
    fn rest(&self, policy: &CallPolicy) -> roncho_rest::Rest {
        let mut rest = roncho_rest::Rest::new(policy.clone());
        if let Some(keys) = &self.keys {
            rest = rest.with_keys(keys.clone());
        }
        if let Some(ingest) = &self.ingest {
            rest = rest.with_ingest(ingest.clone());
        }
        if let Some(recall) = &self.recall {
            rest = rest.with_recall(recall.clone());
        }
        if let Some(dialectic) = &self.dialectic {
            rest = rest.with_dialectic(dialectic.clone());
        }
        if let Some(deriver) = &self.deriver {
            rest = rest.with_deriver(deriver.clone());
        }
        if let Some(dreamer) = &self.dreamer {
            rest = rest.with_dreamer(dreamer.clone());
        }
        rest
    }

    /// Mounts the roles' gRPC services on `router`; returns it and the
    /// names served (for health).
    fn grpc<L>(
        &self,
        mut router: tonic::transport::server::Router<L>,
        policy: &CallPolicy,
    ) -> (tonic::transport::server::Router<L>, Vec<&'static str>) {
        let mut served = Vec::new();
        let serves = |role: Role| self.roles.contains(&role);
        if let Some(keys) = &self.keys {
            served.push(<KeyServiceServer<GrpcKeys> as NamedService>::NAME);
            router = router.add_service(KeyServiceServer::new(GrpcKeys::new(policy.clone(), keys.clone())));
        }
        if let Some(ingest) = &self.ingest {
            served.push(<IngestServiceServer<GrpcIngest> as NamedService>::NAME);
            let service = IngestServiceServer::new(GrpcIngest::new(policy.clone(), ingest.clone()))
                .max_decoding_message_size(MAX_REQUEST_BYTES);
            router = router.add_service(service);
        }
        if let Some(recall) = &self.recall {
            served.push(<RecallServiceServer<GrpcRecall> as NamedService>::NAME);
            router = router.add_service(RecallServiceServer::new(GrpcRecall::new(
                policy.clone(),
                recall.clone(),
            )));
        }
        if let Some(dialectic) = &self.dialectic {
            served.push(<DialecticServiceServer<GrpcDialectic> as NamedService>::NAME);
            router = router.add_service(DialecticServiceServer::new(GrpcDialectic::new(
                policy.clone(),
                dialectic.clone(),
            )));
        }
        if let Some(deriver) = self.deriver.as_ref().filter(|_| serves(Role::Deriver)) {
            served.push(<DeriverServiceServer<GrpcDeriver> as NamedService>::NAME);
            router = router.add_service(DeriverServiceServer::new(GrpcDeriver::new(
                policy.clone(),
                deriver.clone(),
            )));
        }
        if let Some(dreamer) = self.dreamer.as_ref().filter(|_| serves(Role::Dreamer)) {
            served.push(<DreamerServiceServer<GrpcDreamer> as NamedService>::NAME);
            router = router.add_service(DreamerServiceServer::new(GrpcDreamer::new(
                policy.clone(),
                dreamer.clone(),
            )));
        }
        // The reconciler is a worker without a service of its own.
        (router, served)
    }
}

/// Reports every served name (and liveness and readiness) as serving, and
/// watches readiness from then on; returns the names reported.
async fn report_serving(
    health_reporter: &tonic_health::server::HealthReporter,
    served: &[&'static str],
    services: &Services,
    shutdown: &CancellationToken,
) -> Vec<&'static str> {
    health_reporter
        .set_service_status(LIVENESS, ServingStatus::Serving)
        .await;
    let mut served = served.to_vec();
    served.extend([READINESS, ""]);
    for name in &served {
        health_reporter.set_service_status(*name, ServingStatus::Serving).await;
    }
    tokio::spawn(watch_readiness(
        services.store.clone(),
        services.dependencies.clone(),
        health_reporter.clone(),
        served.clone(),
        services.readiness_interval,
        shutdown.clone(),
    ));
    served
}

/// Serves gRPC health checks alone, in plain text, at `address`.
async fn serve_health_only(
    address: std::net::SocketAddr,
    health_service: tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
    services: &Services,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let health_listener = TcpListener::bind(address)
        .await
        .with_context(|| format!("binding the health address {address}"))?;
    tracing::info!(%address, "serving gRPC health checks in plain text");
    // Probes need no key, and take the places of such calls like any other.
    let health_only = tonic::transport::Server::builder()
        .layer(DoorLayer::new(services.door()))
        .add_service(health_service.clone());
    let stop = shutdown.clone();
    let incoming = services
        .connections
        .incoming(health_listener, FirstBytes::Http2Preface, shutdown.clone());
    tokio::spawn(async move {
        if let Err(error) = health_only
            .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
            .await
        {
            tracing::error!(%error, "the health server stopped");
        }
    });
    Ok(())
}

/// Serves the Honcho v3 REST edge (and MCP, and metrics when on) on its
/// listener, with the gRPC listener's TLS.
fn serve_rest(
    rest_listener: &Arc<std::net::TcpListener>,
    rest: roncho_rest::Rest,
    services: &Services,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let listener = rest_listener.try_clone().context("sharing the REST listener")?;
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let address = listener.local_addr()?;
    let mut app = rest.router(services.door());
    app = app.clone().merge(mcp_routes(app, services, shutdown));
    if let Some(metrics) = &services.metrics {
        app = app.merge(roncho_rest::open(
            crate::metrics::router(metrics.clone()),
            services.door(),
        ));
    }
    tracing::info!(
        %address,
        tls = services.tls.is_some(),
        authentication = services.keys.is_some(),
        "serving the Honcho v3 REST edge"
    );
    let stop = shutdown.clone();
    let gate = services.connections.clone();
    let header_timeout = gate.limits().header_timeout;
    let browsers = services.browsers();
    let door = services.door();
    match &services.tls {
        // The gRPC listener's certificate (and client CA), reloaded with it.
        Some(tls) => {
            let listener = crate::tls::TlsListener::new(listener, tls.clone(), gate, shutdown.clone())?;
            tokio::spawn(serve_http(listener, app, header_timeout, browsers, door, stop));
        }
        None => {
            let listener = GatedListener::new(listener, gate);
            tokio::spawn(serve_http(listener, app, header_timeout, browsers, door, stop));
        }
    }
    Ok(())
}

/// MCP over Streamable HTTP beside the REST edge, whose routes its tools
/// call in process: `/mcp` (Honcho's tools) and `/mcp/memory` (the memory
/// profile), behind the same door as REST: authenticated (401 before MCP
/// without a usable key), admitted, its body and its run held to their
/// deadlines.
fn mcp_routes(rest: axum::Router, services: &Services, stop: &CancellationToken) -> axum::Router {
    use roncho_mcp::{Defaults, McpServer, Profile, Upstream};
    let upstream = Upstream::Local(rest);
    let routes = [("/mcp", Profile::Honcho), ("/mcp/memory", Profile::Memory)]
        .into_iter()
        .fold(axum::Router::new(), |router, (path, profile)| {
            let server = McpServer::new(upstream.clone(), profile, Defaults::default());
            router.merge(roncho_mcp::http_router(path, server, stop.clone()))
        });
    roncho_rest::gated(routes, services.door(), roncho_gate::Wire::Mcp)
}

/// Turns readiness (the role services, `readiness` and `""`) NOT_SERVING
/// while the store does not answer within a few seconds or a dependency is
/// down, and SERVING again when all are back; stops at shutdown (draining
/// reports NOT_SERVING itself).
async fn watch_readiness(
    store: Arc<dyn Health>,
    dependencies: Vec<Dependency>,
    reporter: tonic_health::server::HealthReporter,
    names: Vec<&'static str>,
    interval: std::time::Duration,
    shutdown: CancellationToken,
) {
    let mut ready = true;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let check = tokio::time::timeout(std::time::Duration::from_secs(3), store.ping()).await;
        let down = match check {
            Ok(Ok(_)) => dependencies
                .iter()
                .find_map(|dependency| (dependency.check)().err().map(|error| (dependency.name, error))),
            Ok(Err(error)) => Some(("the store", error.to_string())),
            Err(_) => Some(("the store", "no answer within 3 s".to_owned())),
        };
        let now_ready = down.is_none();
        if now_ready == ready || shutdown.is_cancelled() {
            continue;
        }
        ready = now_ready;
        match down {
            None => tracing::info!("every dependency answers again: ready"),
            Some((dependency, error)) => tracing::warn!(dependency, %error, "a dependency is down: not ready"),
        }
        let status = if ready {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        for name in &names {
            reporter.set_service_status(*name, status).await;
        }
    }
}
