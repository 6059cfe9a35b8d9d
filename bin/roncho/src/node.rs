//! A roncho process, started in named steps: [`serve`] reads as the list
//! of them (open the store and search, bind, build the gate, serve
//! metrics, connect the queue, start the workers, build the domain
//! services, serve the listeners, stop), each step one function below
//! that takes what it needs and returns what it built.

use std::sync::Arc;

use anyhow::Context;
use roncho_core::queue::WorkQueue;
use roncho_store::SqlStore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, LlmConfig, LlmRole, RestListen, Role};
use crate::domain::{Domain, Parts};
use crate::server::{Gate, Listeners, Readiness, RestEdge, Serving};
use crate::telemetry::Telemetry;
use crate::wiring::{Models, Queue, Runtime};

/// How long giving work back and closing the queue and the store may take
/// once the workers have stopped.
const CLOSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// How a server is started beyond its configuration: by `roncho serve`
/// (the defaults), or inside `roncho mcp`.
#[derive(Default)]
pub struct Launch {
    /// Where the REST edge is served instead of `rest_listen`, if anywhere.
    pub rest: Option<RestEdge>,
    /// Stops the server as a signal would.
    pub stop: CancellationToken,
    /// A one-shot command's server: it waits for another process's hold on
    /// the embedded data directory to end instead of refusing to start, and
    /// a server starting meanwhile waits for it.
    pub oneshot: bool,
}

impl Launch {
    /// Returns whether the server listens on no port (only the REST
    /// router, handed to this process).
    fn in_process(&self) -> bool {
        matches!(self.rest, Some(RestEdge::InProcess(_)))
    }
}

/// Runs the configured roles until a signal (or `launch.stop`), then stops
/// within the grace period.
pub async fn serve(config: Config, launch: Launch) -> anyhow::Result<()> {
    config.check_exposure()?;
    let telemetry = Telemetry::init(&config, true)?;
    tracing::info!(config = %config.redacted(), "starting roncho");
    let access = Access::load(&config)?;
    let models = Models::build(config.llm.as_ref())?;
    // Held until this function returns: one server per embedded directory.
    let mut data_dir_lock = config
        .is_embedded()
        .then(|| crate::dir_lock::acquire(&config.store.data_dir, launch.oneshot, launch.in_process()))
        .transpose()?;
    let runtime = open_store_and_search(&config, !launch.oneshot).await?;
    let shutdown = Shutdown::on_signal(launch.stop.clone());
    let (grpc, listeners) = bind(&config, launch).await?;
    if let (Some(lock), Some(RestEdge::Listener(rest))) = (&mut data_dir_lock, &listeners.rest) {
        let address = rest.local_addr()?;
        lock.announce(Some(crate::oneshot::base_url_of(address, config.server.tls.is_some())))?;
    }
    let gate = build_gate(&config, access);
    let gate = serve_metrics(&config, &runtime, gate, &shutdown.token).await?;
    let queue = connect_queue(&config, &runtime.store, &models).await?;
    let workers = start_workers(&config, &runtime, &models, &gate, &queue.queue, &shutdown.token)?;
    let parts = domain_parts(&config, &runtime, &models, &queue, &workers)?;
    let domain = Domain::build(&parts, gate.keys.clone(), &config.server.roles);
    let serving = Serving {
        domain: parts,
        gate,
        listeners,
        readiness: readiness(&config, &queue),
    };
    // The workers stop and give their work back however serving ended.
    let served = serve_listeners(grpc, &domain, &serving, &config, &shutdown.token).await;
    stop(workers, &queue.queue, &runtime.store, &config, &shutdown).await;
    tracing::info!("stopped");
    telemetry.shutdown().await;
    drop(data_dir_lock);
    served
}

/// Opens the store (migrated) with the embedder, vector store and
/// reconciler the configuration asks for, and warms up token counting
/// when `warm_up`.
async fn open_store_and_search(config: &Config, warm_up: bool) -> anyhow::Result<Runtime> {
    let runtime = crate::wiring::build(config).await?;
    tracing::info!(semantic_search = %runtime.embedder_description, "search");
    // A one-shot command's server answers one call: the tokenizer loads if
    // that call counts tokens, not before every call.
    if warm_up {
        tokio::task::spawn_blocking(roncho_core::tokens::warm_up).await?;
    }
    Ok(runtime)
}

/// The process's shutdown: cancelled by a signal or by the launcher, with
/// the time it was, from which the grace period counts.
struct Shutdown {
    token: CancellationToken,
    signalled_at: Arc<std::sync::OnceLock<tokio::time::Instant>>,
}

impl Shutdown {
    fn on_signal(stop: CancellationToken) -> Self {
        let shutdown = Shutdown {
            token: CancellationToken::new(),
            signalled_at: Arc::new(std::sync::OnceLock::new()),
        };
        // The grace period counts from the signal: draining requests and
        // finishing work share it.
        let (token, signalled_at) = (shutdown.token.clone(), shutdown.signalled_at.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = wait_for_signal() => {}
                () = stop.cancelled() => {}
            }
            let _ = signalled_at.set(tokio::time::Instant::now());
            token.cancel();
        });
        shutdown
    }

    /// When the grace period ends.
    fn deadline(&self, grace: std::time::Duration) -> tokio::time::Instant {
        self.signalled_at
            .get()
            .copied()
            .unwrap_or_else(tokio::time::Instant::now)
            + grace
    }
}

/// Who may call, and over what: the API keys and the listeners' TLS,
/// loaded before anything is opened so a bad secret or certificate stops
/// start-up first.
struct Access {
    keys: Option<Arc<roncho_gate::keys::KeySet>>,
    tls: Option<Arc<crate::tls::ReloadingTls>>,
}

impl Access {
    fn load(config: &Config) -> anyhow::Result<Self> {
        let keys = crate::wiring::key_set(config)?;
        let tls = config
            .server
            .tls
            .clone()
            .map(crate::tls::ReloadingTls::load)
            .transpose()?
            .map(Arc::new);
        if keys.is_none() && !config.server.listen.ip().is_loopback() {
            tracing::error!(
                listen = %config.server.listen,
                "AUTHENTICATION IS OFF on a non-loopback address (--insecure-no-auth): anyone who reaches this port can read, write and delete every workspace"
            );
        }
        Ok(Access { keys, tls })
    }
}

/// Binds the gRPC listener (none when the server runs in process only),
/// the REST edge's and the health checks', and returns them: an address
/// that is taken stops start-up before anything runs.
async fn bind(config: &Config, launch: Launch) -> anyhow::Result<(Option<tokio::net::TcpListener>, Listeners)> {
    let listener = match launch.in_process() {
        true => None,
        false => Some(
            tokio::net::TcpListener::bind(config.server.listen)
                .await
                .with_context(|| format!("binding {}", config.server.listen))?,
        ),
    };
    let rest = match launch.rest {
        Some(rest) => Some(rest),
        None => rest_listener(config.server.rest_listen)?.map(RestEdge::Listener),
    };
    let health = config
        .server
        .health_listen
        .map(|address| {
            std::net::TcpListener::bind(address).with_context(|| format!("binding the health address {address}"))
        })
        .transpose()?
        .map(Arc::new);
    let listeners = Listeners {
        rest,
        health,
        reflection: config.server.grpc_reflection,
    };
    Ok((listener, listeners))
}

/// The gate every call passes: keys, TLS, admission, connection
/// admission, rates and browser rules, from the configuration.
fn build_gate(config: &Config, access: Access) -> Gate {
    let admission = roncho_gate::admission::Admission::new(config.limits.admission());
    let connections = crate::connections::ConnectionAdmission::new(config.limits.connections.within_descriptors())
        .watching(admission.clone());
    let derives_with_model = config
        .llm
        .as_ref()
        .is_some_and(|llm| llm.roles.contains_key(&LlmRole::Deriver));
    Gate {
        keys: access.keys,
        tls: access.tls,
        admission,
        connections,
        rates: Arc::new(config.limits.rates(derives_with_model)),
        browsers: config.server.browsers(),
        metrics: None,
    }
}

/// What the domain services are built on: the store and search, the
/// queue, the workers to nudge after writes, the dialectic's and the
/// deriver's models, and the PDF reader, from the configuration.
fn domain_parts(
    config: &Config,
    runtime: &Runtime,
    models: &Models,
    queue: &Queue,
    workers: &Workers,
) -> anyhow::Result<Parts> {
    let mut nudges = workers.nudges.clone();
    if let Some(nats) = queue.nats.clone() {
        // Tasks written with messages are published right after the write.
        nudges.push(Arc::new(move || nats.kick()));
    }
    let roles = &config.server.roles;
    // Uploads are read where ingest runs, and questions answered where the
    // dialectic does.
    let pdf = match roles.contains(&Role::Ingest) {
        true => Some(Arc::new(crate::pdf::SandboxedPdf::new(
            std::env::current_exe().context("finding this binary for the PDF reader")?,
            config.limits.pdf_memory_mb,
            config.limits.pdf_timeout,
            config.limits.pdf_concurrency,
        )) as Arc<dyn roncho_core::files::PdfReader>),
        false => None,
    };
    let dialectic = roles
        .contains(&Role::Dialectic)
        .then(|| crate::wiring::dialectic(config, &runtime.store, &runtime.semantic, models));
    // Which models derive and dream, wherever queue status and
    // ScheduleDream are answered (the REST edge answers them beside ingest).
    Ok(Parts {
        store: runtime.store.clone(),
        semantic: runtime.semantic.clone(),
        after_write: (!nudges.is_empty())
            .then(|| Arc::new(move || nudges.iter().for_each(|nudge| nudge())) as roncho_ingest::AfterWrite),
        write_activity: runtime.write_activity.clone(),
        queue: Some(queue.queue.clone()),
        derivation: roncho_deriver::Derivation {
            observations: models.model_id(LlmRole::Deriver),
            summaries: models.model_id(LlmRole::Summary),
        },
        dialectic,
        dream_model: models.model_id(LlmRole::Dream),
        pdf,
        allow_private_webhooks: config.webhooks.allow_private_addresses,
        idempotency_window: config.store.idempotency_window,
    })
}

/// What readiness follows: a worker-only process over NATS is ready while
/// NATS is; a process that also serves requests keeps serving them (writes
/// wait in the outbox), so it stays ready.
fn readiness(config: &Config, queue: &Queue) -> Readiness {
    let roles = &config.server.roles;
    let consumes = roles.iter().any(|role| matches!(role, Role::Deriver | Role::Dreamer));
    let serves = roles
        .iter()
        .any(|role| matches!(role, Role::Ingest | Role::Recall | Role::Dialectic));
    let dependencies = match &queue.nats {
        Some(nats) if consumes && !serves => vec![crate::server::Dependency::nats(nats.clone())],
        _ => Vec::new(),
    };
    Readiness {
        dependencies,
        ..Readiness::default()
    }
}

/// Binds the REST edge's address. The default address gives way, with a
/// warning, to whatever holds it (another roncho, or Honcho itself).
fn rest_listener(rest: Option<RestListen>) -> anyhow::Result<Option<Arc<std::net::TcpListener>>> {
    let Some(rest) = rest else { return Ok(None) };
    match std::net::TcpListener::bind(rest.address) {
        Ok(listener) => Ok(Some(Arc::new(listener))),
        Err(error) if !rest.explicit => {
            tracing::warn!(
                address = %rest.address,
                %error,
                "not serving the Honcho REST edge: its default address is taken; set rest_listen (--rest-listen) \
                 to another address, or to `off`"
            );
            Ok(None)
        }
        Err(error) => Err(error).with_context(|| format!("binding the REST address {}", rest.address)),
    }
}

/// Serves Prometheus metrics at `metrics_listen`, when set, behind
/// `gate`; returns the gate counting every call there.
async fn serve_metrics(
    config: &Config,
    runtime: &Runtime,
    gate: Gate,
    shutdown: &CancellationToken,
) -> anyhow::Result<Gate> {
    let Some(address) = config.telemetry.metrics_listen else {
        return Ok(gate);
    };
    let metrics = Arc::new(crate::metrics::Metrics::new());
    crate::metrics::install(metrics.clone());
    metrics.watch_admission(gate.admission.stats(), gate.rates.clone());
    metrics.watch_connections(gate.connections.stats());
    if let Some(yielding) = runtime.reconciler.as_ref().and_then(|reconciler| reconciler.yielding()) {
        metrics.watch_yielding("reconciler", yielding);
    }
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("binding the metrics address {address}"))?;
    let ledger = roncho_store::SqlWorkQueue::new(runtime.store.clone());
    // The door observes the metrics server's own calls too.
    let gate = Gate {
        metrics: Some(metrics.clone()),
        ..gate
    };
    let entrance = gate.http_entrance();
    let (store, stop, served_metrics) = (runtime.store.clone(), shutdown.clone(), metrics);
    tokio::spawn(async move {
        let refresh = std::time::Duration::from_secs(15);
        let served = crate::metrics::serve(listener, entrance, served_metrics, store, Some(ledger), refresh, stop);
        if let Err(error) = served.await {
            tracing::error!(%error, "the metrics server stopped");
        }
    });
    Ok(gate)
}

/// Connects the configured work queue: NATS JetStream over the store's
/// task ledger, or the SQL queue in the store itself.
async fn connect_queue(config: &Config, store: &Arc<SqlStore>, models: &Models) -> anyhow::Result<Queue> {
    crate::wiring::work_queue(config, store, models).await
}

/// The background workers of a process; each finishes the unit or batch
/// in hand after shutdown.
struct Workers {
    running: JoinSet<()>,
    /// What nudges each of them after a write.
    nudges: Vec<roncho_ingest::AfterWrite>,
    /// The ids under which the queue workers claim units.
    ids: Vec<String>,
    /// Where they run: threads of their own, below the requests' priority.
    background: Background,
}

impl Workers {
    fn spawn(&mut self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        self.running.spawn_on(work, self.background.handle());
    }
}

/// How much lower than the requests' threads the background threads run
/// (a nice value: at 10 the OS gives a busy background thread about a
/// tenth of a core that requests want, and all of an idle one).
const BACKGROUND_NICE: i32 = 10;

/// The runtime the background roles (reconciler, text indexer, dreamer,
/// deriver) run on: as many threads as the requests' runtime, each at
/// [`BACKGROUND_NICE`], so a burst of derivation or indexing does not
/// take the cores from the calls an agent waits on. Their blocking work
/// (embedding, extraction) runs on this runtime's blocking threads, which
/// are lowered too. Shut down without waiting when dropped, so it may be
/// dropped inside the requests' runtime.
struct Background(Option<tokio::runtime::Runtime>);

impl Background {
    fn start() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .thread_name("roncho-background")
            .on_thread_start(lower_this_threads_priority)
            .enable_all()
            .build()
            .context("starting the background runtime")?;
        Ok(Background(Some(runtime)))
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        self.0
            .as_ref()
            .expect("the background runtime runs until dropped")
            .handle()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Lowers the calling thread's scheduling priority to [`BACKGROUND_NICE`]
/// (Linux keeps a nice value per thread; threads it starts inherit it).
fn lower_this_threads_priority() {
    roncho_core::activity::mark_background_thread();
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take and return plain integers.
        #[expect(unsafe_code, reason = "libc's setpriority has no safe binding")]
        let lowered = unsafe {
            let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, thread, BACKGROUND_NICE)
        };
        if lowered != 0 {
            tracing::debug!(error = %std::io::Error::last_os_error(), "background thread kept its priority");
        }
    }
}

/// Starts the reconciler and text indexer, the dreamer and the deriver, as
/// the roles ask; returns them with what nudges each after a write.
fn start_workers(
    config: &Config,
    runtime: &Runtime,
    models: &Models,
    gate: &Gate,
    queue: &Arc<dyn WorkQueue>,
    shutdown: &CancellationToken,
) -> anyhow::Result<Workers> {
    let mut workers = Workers {
        running: JoinSet::new(),
        nudges: Vec::new(),
        ids: Vec::new(),
        background: Background::start()?,
    };
    if let Some(reconciler) = &runtime.reconciler {
        workers.spawn(reconciler.clone().run(shutdown.clone()));
        let nudged = reconciler.clone();
        workers.nudges.push(Arc::new(move || nudged.nudge()));
    }
    if let Some(indexer) = &runtime.text_indexer {
        workers.spawn(indexer.clone().run(shutdown.clone()));
        let nudged = indexer.clone();
        workers.nudges.push(Arc::new(move || nudged.nudge()));
    }
    if config.server.roles.contains(&Role::Dreamer) {
        start_dreamer(config, runtime, models, queue, shutdown, &mut workers);
    }
    if config.server.roles.contains(&Role::Deriver) {
        start_deriver(
            config,
            runtime,
            models,
            gate.metrics.as_ref(),
            queue,
            shutdown,
            &mut workers,
        )?;
    }
    Ok(workers)
}

/// The settings every queue worker shares.
fn worker_config(config: &Config) -> roncho_deriver::worker::WorkerConfig {
    roncho_deriver::worker::WorkerConfig {
        lease: config.queue.deriver_lease,
        outage_backoff: config.queue.worker_outage_backoff,
        outage_backoff_max: config.queue.worker_outage_backoff_max,
        ..roncho_deriver::worker::WorkerConfig::default()
    }
}

/// The dream worker, when a dream model is configured.
fn start_dreamer(
    config: &Config,
    runtime: &Runtime,
    models: &Models,
    queue: &Arc<dyn WorkQueue>,
    shutdown: &CancellationToken,
    workers: &mut Workers,
) {
    let Some(llm) = models.get(LlmRole::Dream) else {
        tracing::info!(
            "dreamer: no dream model configured (dream_model or llm_model); ScheduleDream answers FAILED_PRECONDITION"
        );
        return;
    };
    tracing::info!(model = %llm.model_id(), "dreamer worker");
    let worker_config = roncho_deriver::worker::WorkerConfig {
        worker_id: roncho_deriver::worker::unique_worker_id("dreamer"),
        ..worker_config(config)
    };
    workers.ids.push(worker_config.worker_id.clone());
    let worker = Arc::new(roncho_dreamer::worker::DreamWorker::new(
        runtime.store.clone(),
        queue.clone(),
        runtime.semantic.clone(),
        llm,
        LlmConfig::max_tokens(config.llm.as_ref(), LlmRole::Dream),
        worker_config,
    ));
    workers.spawn(worker.clone().run(shutdown.clone()));
    workers.nudges.push(Arc::new(move || worker.nudge()));
}

/// The derivation worker: observations and summaries (by model or
/// extractive) and dream scheduling when dreams can run; and the webhook
/// lane beside it.
fn start_deriver(
    config: &Config,
    runtime: &Runtime,
    models: &Models,
    metrics: Option<&Arc<crate::metrics::Metrics>>,
    queue: &Arc<dyn WorkQueue>,
    shutdown: &CancellationToken,
    workers: &mut Workers,
) -> anyhow::Result<()> {
    let limit = |role: LlmRole| LlmConfig::max_tokens(config.llm.as_ref(), role);
    // Beside the writes of this process, the deriver lets bursts pass first.
    let yielding = runtime
        .write_activity
        .as_ref()
        .map(|activity| crate::wiring::yielding_to(activity, config));
    if let (Some(metrics), Some(yielding)) = (metrics, &yielding) {
        metrics.watch_yielding("deriver", yielding.clone());
    }
    let worker_config = roncho_deriver::worker::WorkerConfig {
        yielding,
        ..worker_config(config)
    };
    workers.ids.push(worker_config.worker_id.clone());
    let mut webhooks = roncho_webhook::WebhookSender::new(
        config.webhooks.secret.as_ref().map(|secret| secret.expose()),
        config.webhooks.timeout,
        config.webhooks.allow_private_addresses,
    )
    .map_err(|error| anyhow::anyhow!("webhook delivery: {error}"))?;
    if let Some(proxy) = config.webhooks.delivery_proxy()? {
        webhooks = webhooks.with_proxy(proxy);
    }
    // Webhook deliveries wait on receivers the tenants chose: a lane of their own.
    let lane = Arc::new(roncho_deriver::webhooks::WebhookLane::new(
        runtime.store.clone(),
        queue.clone(),
        Arc::new(webhooks),
        worker_config.clone(),
        config.webhooks.lane,
    ));
    workers.spawn(lane.clone().run(shutdown.clone()));
    workers.nudges.push(Arc::new(move || lane.nudge()));
    // Erasures have a worker of their own: one neither waits for
    // derivation nor holds it up.
    let eraser_config = roncho_deriver::worker::WorkerConfig {
        worker_id: roncho_deriver::worker::unique_worker_id("eraser"),
        ..worker_config.clone()
    };
    workers.ids.push(eraser_config.worker_id.clone());
    let eraser = Arc::new(
        roncho_deriver::worker::Worker::new(runtime.store.clone(), queue.clone(), eraser_config)
            .claiming(&roncho_deriver::worker::ERASURES),
    );
    workers.spawn(eraser.clone().run(shutdown.clone()));
    workers.nudges.push(Arc::new(move || eraser.nudge()));
    let mut worker = roncho_deriver::worker::Worker::new(runtime.store.clone(), queue.clone(), worker_config)
        .claiming(&roncho_deriver::worker::DERIVATION)
        .with_max_tokens(limit(LlmRole::Deriver), limit(LlmRole::Summary));
    let deriver = models.get(LlmRole::Deriver);
    let summarizer = models.get(LlmRole::Summary);
    let model_or_extractive = |llm: &Option<Arc<dyn roncho_llm::Llm>>| {
        llm.as_ref()
            .map_or_else(|| "extractive".to_owned(), |llm| llm.model_id())
    };
    tracing::info!(
        deriver = model_or_extractive(&deriver),
        summary = model_or_extractive(&summarizer),
        "deriver worker"
    );
    if let Some(deriver) = deriver {
        worker = worker.with_deriver_llm(deriver);
    }
    if let Some(summarizer) = summarizer {
        worker = worker.with_summary_llm(summarizer);
    }
    if let Some(semantic) = &runtime.semantic {
        worker = worker.with_semantic_dedup(semantic.embedder.clone(), semantic.vectors.clone());
    }
    if let Some(reconciler) = runtime.reconciler.clone() {
        // New conclusions are embedded right away, not at the next poll.
        worker = worker.with_saved_hook(Arc::new(move || reconciler.nudge()));
    }
    if models.get(LlmRole::Dream).is_some() {
        // Dreams run wherever a dreamer role is; the deriver schedules them.
        let policy = roncho_dreamer::DreamPolicy {
            document_threshold: i64::try_from(config.queue.dreams.document_threshold).unwrap_or(i64::MAX),
            min_between: config.queue.dreams.min_between,
            idle: config.queue.dreams.idle,
            max_delay: config.queue.dreams.max_delay,
        };
        let scheduler = roncho_dreamer::DreamScheduler::new(runtime.store.clone(), queue.clone(), policy);
        worker = worker.with_listener(Arc::new(scheduler));
    }
    let worker = Arc::new(worker);
    workers.spawn(worker.clone().run(shutdown.clone()));
    workers.nudges.push(Arc::new(move || worker.nudge()));
    Ok(())
}

/// Serves the listeners until shutdown, then lets requests in flight
/// finish within the grace period.
async fn serve_listeners(
    listener: Option<tokio::net::TcpListener>,
    domain: &Domain,
    serving: &Serving,
    config: &Config,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let server = crate::server::serve(listener, domain, serving, &config.server.roles, shutdown.clone());
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => result?,
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(config.server.shutdown_grace).await;
        } => tracing::warn!(grace = ?config.server.shutdown_grace, "grace period over; exiting with requests in flight"),
    }
    Ok(())
}

/// Drains the workers within what is left of the grace period (giving
/// back the units of those cut short), then closes the queue and the store.
async fn stop(
    mut workers: Workers,
    queue: &Arc<dyn WorkQueue>,
    store: &Arc<SqlStore>,
    config: &Config,
    shutdown: &Shutdown,
) {
    shutdown.token.cancel();
    let deadline = shutdown.deadline(config.server.shutdown_grace);
    let finished = tokio::time::timeout_at(deadline, async { while workers.running.join_next().await.is_some() {} })
        .await
        .is_ok();
    if !finished {
        tracing::warn!(grace = ?config.server.shutdown_grace, "grace period over; stopping workers mid-task and giving their units back");
        workers.running.shutdown().await;
    }
    // What is left is bounded too: the pod's grace period is not much longer
    // than ours, and the last spans must still go out after this.
    let closing = async {
        if !finished {
            for worker_id in &workers.ids {
                match queue.release_worker(worker_id).await {
                    Ok(released) => tracing::info!(worker_id, released, "work units given back for other workers"),
                    Err(error) => tracing::warn!(
                        worker_id,
                        %error,
                        "could not give work units back; they move on when their lease runs out"
                    ),
                }
            }
        }
        // Hands this process's partitions and undelivered work to the others.
        queue.close().await;
        store.close().await;
    };
    if tokio::time::timeout(CLOSE_TIMEOUT, closing).await.is_err() {
        tracing::warn!(limit = ?CLOSE_TIMEOUT, "closing the queue and the store took too long; exiting without");
    }
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
