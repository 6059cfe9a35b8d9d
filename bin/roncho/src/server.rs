//! The listeners of a process: its domain services on gRPC (with health
//! and reflection) and, side by side, on the REST edge with MCP, every call
//! through one gate, stopped by a cancellation token.

use std::sync::Arc;

use anyhow::Context;
use roncho_api::grpc::DoorLayer;
use roncho_core::store::Health;
use roncho_gate::admission::{Admission, Limits};
use roncho_gate::authz::Authorizer;
use roncho_gate::keys::KeySet;
use roncho_gate::rate::RateLimiter;
use roncho_gate::{Authenticator, CallPolicy};
use roncho_store::SqlStore;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic_health::ServingStatus;

use crate::config::Role;
use crate::connections::{AdmittedListener, FirstBytes, serve_http};
use crate::domain::{Domain, Parts};

/// How often the TLS files are checked for changes.
const TLS_RELOAD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// What a process serves with: the parts its domain services are built
/// on, the gate every call passes, its listeners beside gRPC, and what
/// readiness follows.
#[derive(Clone)]
pub struct Serving {
    pub domain: Parts,
    pub gate: Gate,
    pub listeners: Listeners,
    pub readiness: Readiness,
}

/// Everything a call passes before a service runs it, on every wire and
/// listener of the process.
#[derive(Clone)]
pub struct Gate {
    /// The secrets API keys are verified with; `None`: authentication is
    /// off and every caller is admin.
    pub keys: Option<Arc<KeySet>>,
    /// TLS on the listeners; `None`: plain text.
    pub tls: Option<Arc<crate::tls::ReloadingTls>>,
    /// Bounds on requests in flight and their duration.
    pub admission: Admission,
    /// Bounds on open connections and how long they may stay silent, on
    /// every listener of the process.
    pub connections: crate::connections::ConnectionAdmission,
    /// Per-workspace rates of the metered calls.
    pub rates: Arc<RateLimiter>,
    /// Which web pages may call the HTTP routes, and under which host names
    /// a server without keys answers.
    pub browsers: roncho_gate::BrowserPolicy,
    /// Where requests are counted and timed; `None`: nowhere.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
}

/// Where a process serves beside its gRPC listener, bound already.
#[derive(Clone)]
pub struct Listeners {
    /// Where the Honcho v3 REST edge is served; `None`: nowhere.
    pub rest: Option<RestEdge>,
    /// A plain-text listener that serves health checks alone.
    pub health: Option<Arc<std::net::TcpListener>>,
    /// Serve gRPC server reflection (the API's shape, to anyone).
    pub reflection: bool,
}

/// What readiness follows beside the store, and how often it looks.
#[derive(Clone)]
pub struct Readiness {
    /// How often readiness checks the store.
    pub interval: std::time::Duration,
    /// What else the roles cannot work without (NATS for a consumer);
    /// readiness follows them as it follows the store.
    pub dependencies: Vec<Dependency>,
}

impl Default for Readiness {
    fn default() -> Self {
        Self {
            interval: std::time::Duration::from_secs(5),
            dependencies: Vec::new(),
        }
    }
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

impl Gate {
    /// Returns a gate without keys or TLS, with the default limits.
    pub fn open() -> Self {
        Self {
            keys: None,
            tls: None,
            admission: Admission::new(Limits::default()),
            connections: crate::connections::ConnectionAdmission::new(crate::connections::ConnectionLimits::default()),
            rates: Arc::new(RateLimiter::default()),
            browsers: roncho_gate::BrowserPolicy::default(),
            metrics: None,
        }
    }

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
            connections: self.connections.clone(),
            browsers: self.browsers(),
            door: self.door(),
        }
    }

    /// Returns the call policy of the domain services: authorization over
    /// `store`'s workspaces, then these rates.
    pub fn policy(&self, store: Arc<SqlStore>) -> CallPolicy {
        let multi_tenant = self.keys.as_ref().is_some_and(|keys| keys.is_multi_tenant());
        CallPolicy::new(Authorizer::new(store).multi_tenant(multi_tenant), self.rates.clone())
    }
}

impl Serving {
    /// Returns serving over a store alone: full-text search, no reconciler,
    /// no keys, the default limits, REST nowhere.
    pub fn store_only(store: Arc<SqlStore>) -> Self {
        Self {
            domain: Parts::store_only(store),
            gate: Gate::open(),
            listeners: Listeners {
                rest: None,
                health: None,
                reflection: true,
            },
            readiness: Readiness::default(),
        }
    }
}

/// Builds the domain services of `roles` over `serving` and serves them
/// (see [`serve`]).
pub async fn run(
    listener: Option<TcpListener>,
    serving: Serving,
    roles: &[Role],
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let domain = Domain::build(&serving.domain, serving.gate.keys.clone(), roles);
    serve(listener, &domain, &serving, roles, shutdown).await
}

/// Serves `domain` on `listener` (gRPC) and, side by side, on the
/// listeners `serving` names, every call through its gate, until
/// `shutdown` is cancelled, then lets in-flight requests finish. A wire
/// that stops before then stops the process (cancels `shutdown`). Without
/// a listener, only the REST router is served, in process.
pub async fn serve(
    listener: Option<TcpListener>,
    domain: &Domain,
    serving: &Serving,
    roles: &[Role],
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    let policy = serving.gate.policy(serving.domain.store.clone());
    let (router, served) = domain.grpc(grpc_router(serving, health_service.clone())?, &policy);
    tokio::spawn(crate::connections::hand_back_after_floods(
        serving.gate.connections.stats(),
        serving.gate.admission.stats(),
        shutdown.clone(),
    ));
    let served = report_serving(&health_reporter, &served, serving, &shutdown).await;
    let mut beside = Vec::new();
    if let Some(health) = &serving.listeners.health {
        beside.push((
            "health",
            serve_health_only(health, health_service, &serving.gate, &shutdown)?,
        ));
    }
    match &serving.listeners.rest {
        Some(RestEdge::Listener(rest_listener)) => {
            let rest = serve_rest(rest_listener, domain.rest(&policy), &serving.gate, &shutdown)?;
            beside.push(("REST", rest));
        }
        Some(RestEdge::InProcess(handed)) => {
            handed.send_replace(Some(domain.rest(&policy).router(serving.gate.door())));
        }
        None => {}
    }
    let grpc = async {
        let served = match listener {
            Some(listener) => serve_grpc(listener, router, served, &health_reporter, serving, roles, &shutdown).await,
            None => {
                tracing::info!("serving in process only: no gRPC listener");
                shutdown.cancelled().await;
                Ok(())
            }
        };
        stops_the_rest("gRPC", &served, &shutdown);
        served
    };
    let beside = futures::future::join_all(beside.into_iter().map(|(wire, served)| {
        let shutdown = shutdown.clone();
        async move {
            served.await;
            stops_the_rest(wire, &Ok(()), &shutdown);
        }
    }));
    let (grpc, _) = futures::join!(grpc, beside);
    grpc
}

/// Stops the process when `wire` stopped serving before shutdown (or
/// failed): a server that answers on some wires only is not one a
/// balancer should keep sending work to.
fn stops_the_rest(wire: &str, served: &anyhow::Result<()>, shutdown: &CancellationToken) {
    if shutdown.is_cancelled() && served.is_ok() {
        return;
    }
    match served {
        Ok(()) => tracing::error!(wire, "stopped serving before shutdown; stopping the process"),
        Err(error) => tracing::error!(wire, error = %format!("{error:#}"), "failed; stopping the process"),
    }
    shutdown.cancel();
}

/// The gRPC router of every call: the door outermost, then health and
/// reflection; the roles' services are mounted on it.
fn grpc_router(
    serving: &Serving,
    health_service: tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
) -> anyhow::Result<GrpcRouter> {
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(roncho_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let (reflection_v1, reflection_v1alpha) = if serving.listeners.reflection {
        (Some(reflection().build_v1()?), Some(reflection().build_v1alpha()?))
    } else {
        (None, None)
    };
    // Every request is observed, then authenticated (a key's workspace has
    // places of its own), then admitted, by the door.
    let limits = serving.gate.admission.limits();
    Ok(tonic::transport::Server::builder()
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
        .layer(DoorLayer::new(serving.gate.door()))
        .add_service(health_service)
        .add_optional_service(reflection_v1)
        .add_optional_service(reflection_v1alpha))
}

/// The gRPC router behind the door.
type GrpcRouter = tonic::transport::server::Router<tower_layer::Stack<DoorLayer, tower_layer::Identity>>;

/// Serves `router` on `listener` until shutdown, reporting the `served`
/// names NOT_SERVING first when it comes.
async fn serve_grpc(
    listener: TcpListener,
    router: GrpcRouter,
    served: Vec<&'static str>,
    health_reporter: &tonic_health::server::HealthReporter,
    serving: &Serving,
    roles: &[Role],
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let address = listener.local_addr()?;
    tracing::info!(
        %address,
        roles = ?roles.iter().map(|role| role.name()).collect::<Vec<_>>(),
        tls = serving.gate.tls.is_some(),
        authentication = serving.gate.keys.is_some(),
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
    let connections = &serving.gate.connections;
    match &serving.gate.tls {
        Some(tls) => {
            tokio::spawn(tls.clone().watch(TLS_RELOAD_INTERVAL, shutdown.clone()));
            let incoming = crate::tls::incoming(
                listener,
                tls.clone(),
                connections.clone(),
                FirstBytes::Http2Preface,
                shutdown.clone(),
            );
            router.serve_with_incoming_shutdown(incoming, stopping).await?;
        }
        None => {
            let incoming = connections.incoming(listener, FirstBytes::Http2Preface, shutdown.clone());
            router.serve_with_incoming_shutdown(incoming, stopping).await?;
        }
    }
    Ok(())
}

/// Reports every served name (and liveness and readiness) as serving, and
/// watches readiness from then on; returns the names reported.
async fn report_serving(
    health_reporter: &tonic_health::server::HealthReporter,
    served: &[&'static str],
    serving: &Serving,
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
        serving.domain.store.clone(),
        serving.readiness.dependencies.clone(),
        health_reporter.clone(),
        served.clone(),
        serving.readiness.interval,
        shutdown.clone(),
    ));
    served
}

/// A wire served beside gRPC until shutdown.
type Beside = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Returns the service of gRPC health checks alone on `listener`, in
/// plain text.
fn serve_health_only(
    listener: &Arc<std::net::TcpListener>,
    health_service: tonic_health::pb::health_server::HealthServer<
        impl tonic_health::pb::health_server::Health + 'static,
    >,
    gate: &Gate,
    shutdown: &CancellationToken,
) -> anyhow::Result<Beside> {
    let health_listener = listener.try_clone().context("sharing the health listener")?;
    health_listener.set_nonblocking(true)?;
    let health_listener = TcpListener::from_std(health_listener)?;
    tracing::info!(address = %health_listener.local_addr()?, "serving gRPC health checks in plain text");
    // Probes need no key, and take the places of such calls like any other.
    let health_only = tonic::transport::Server::builder()
        .layer(DoorLayer::new(gate.door()))
        .add_service(health_service);
    let stop = shutdown.clone();
    let incoming = gate
        .connections
        .incoming(health_listener, FirstBytes::Http2Preface, shutdown.clone());
    Ok(Box::pin(async move {
        if let Err(error) = health_only
            .serve_with_incoming_shutdown(incoming, stop.cancelled_owned())
            .await
        {
            tracing::error!(%error, "the health server stopped");
        }
    }))
}

/// Returns the service of the Honcho v3 REST edge (and MCP, and metrics
/// when on) on its listener, with the gRPC listener's TLS.
fn serve_rest(
    rest_listener: &Arc<std::net::TcpListener>,
    rest: roncho_rest::Rest,
    gate: &Gate,
    shutdown: &CancellationToken,
) -> anyhow::Result<Beside> {
    let listener = rest_listener.try_clone().context("sharing the REST listener")?;
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let address = listener.local_addr()?;
    let mut app = rest.router(gate.door());
    app = app.clone().merge(mcp_routes(app, gate, shutdown));
    if let Some(metrics) = &gate.metrics {
        let routes = crate::metrics::router(metrics.clone());
        // With keys, what the metrics name (workspaces whose derivation is
        // degraded) is not every tenant's to read: an admin key's, as on
        // every route that spans workspaces. The metrics address stays open
        // for the operator's scraper.
        app = app.merge(match gate.keys {
            Some(_) => roncho_rest::gated(
                routes.layer(axum::middleware::from_fn(crate::metrics::admins_only)),
                gate.door(),
                roncho_gate::Wire::Rest,
            ),
            None => roncho_rest::open(routes, gate.door()),
        });
    }
    tracing::info!(
        %address,
        tls = gate.tls.is_some(),
        authentication = gate.keys.is_some(),
        "serving the Honcho v3 REST edge"
    );
    let stop = shutdown.clone();
    let connections = gate.connections.clone();
    let header_timeout = connections.limits().header_timeout;
    let (browsers, door) = (gate.browsers(), gate.door());
    Ok(match &gate.tls {
        // The gRPC listener's certificate (and client CA), reloaded with it.
        Some(tls) => {
            let listener = crate::tls::TlsListener::new(listener, tls.clone(), connections, shutdown.clone())?;
            Box::pin(serve_http(listener, app, header_timeout, browsers, door, stop))
        }
        None => {
            let listener = AdmittedListener::new(listener, connections);
            Box::pin(serve_http(listener, app, header_timeout, browsers, door, stop))
        }
    })
}

/// MCP over Streamable HTTP beside the REST edge, whose routes its tools
/// call in process: `/mcp` (Honcho's tools) and `/mcp/memory` (the memory
/// profile), behind the same door as REST: authenticated (401 before MCP
/// without a usable key), admitted, its body and its run held to their
/// deadlines.
fn mcp_routes(rest: axum::Router, gate: &Gate, stop: &CancellationToken) -> axum::Router {
    use roncho_mcp::{Defaults, McpServer, Profile, Upstream};
    let upstream = Upstream::Local(rest);
    let routes = [("/mcp", Profile::Honcho), ("/mcp/memory", Profile::Memory)]
        .into_iter()
        .fold(axum::Router::new(), |router, (path, profile)| {
            let server = McpServer::new(upstream.clone(), profile, Defaults::default());
            router.merge(roncho_mcp::http_router(path, server, stop.clone()))
        });
    roncho_rest::gated(routes, gate.door(), roncho_gate::Wire::Mcp)
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
