//! `roncho serve | migrate | status`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use roncho::config::{Config, ConfigLayer, Role};
use roncho::telemetry::Telemetry;
use tokio_util::sync::CancellationToken;

/// How long giving work back and closing the queue and the store may take
/// once the workers have stopped.
const CLOSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// roncho: memory and social cognition for AI agents, Honcho-compatible.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the server. With no flags: every role, embedded SQLite in ./roncho-data, 127.0.0.1:50051.
    Serve(CommonFlags),
    /// Applies the database migrations and exits.
    Migrate(CommonFlags),
    /// Prints what this configuration connects to and what is degraded; exits 1 when the store or server is not ok.
    Status {
        #[command(flatten)]
        flags: CommonFlags,
        /// Prints JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// API keys, signed with the configured auth_jwt_secret.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// The work queue, straight from the database.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Copies a Honcho v3 database into this roncho's store (resumable: run it again to finish or to catch up).
    Import {
        #[command(flatten)]
        flags: CommonFlags,
        /// The Honcho database, e.g. postgres://honcho@db:5432/honcho (only read).
        #[arg(long, value_name = "POSTGRES_URL")]
        from_honcho: String,
        /// Only this workspace (repeatable) [default: every workspace].
        #[arg(long = "workspace", value_name = "ID")]
        workspaces: Vec<String>,
        /// Queue derivation and summaries for the imported messages (model calls; Honcho's conclusions and summaries are imported either way).
        #[arg(long)]
        derive: bool,
        /// Prints the counts as JSON.
        #[arg(long)]
        json: bool,
    },
    /// An MCP server on stdio for agents: embedded on a data directory, or in front of a roncho server (--addr).
    ///
    /// Embedded, its store is --data-dir, else $XDG_DATA_HOME/roncho (~/.local/share/roncho), not
    /// ./roncho-data; it listens on loopback ports of its own, so --listen and --rest-listen do not apply.
    /// The same tools are served over HTTP at /mcp on `roncho serve`'s REST port. See docs/mcp.md.
    Mcp {
        #[command(flatten)]
        flags: CommonFlags,
        #[command(flatten)]
        mcp: McpFlags,
    },
    /// Reads a PDF on stdin and writes its text (the server's sandboxed PDF reader).
    #[command(name = "extract-pdf", hide = true)]
    ExtractPdf {
        #[arg(long)]
        memory_limit_mb: u64,
        #[arg(long)]
        cpu_limit_secs: u64,
    },
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Prints a new key: admin, or scoped to a workspace, a peer of it or a session of it.
    Create {
        #[command(flatten)]
        flags: CommonFlags,
        /// A key that reaches everything (ListWorkspaces, CreateKey, every workspace).
        #[arg(long, conflicts_with_all = ["workspace", "peer", "session"])]
        admin: bool,
        /// The workspace the key reaches.
        #[arg(long, required_unless_present = "admin")]
        workspace: Option<String>,
        /// Narrows the key to this peer: it acts as the peer.
        #[arg(long, conflicts_with = "session")]
        peer: Option<String>,
        /// Narrows the key to this session.
        #[arg(long)]
        session: Option<String>,
        /// When the key stops working, from now: 90s, 30m, 12h, 30d [default: never].
        #[arg(long, value_parser = parse_duration)]
        expires_in: Option<std::time::Duration>,
    },
}

#[derive(Debug, Subcommand)]
enum QueueCommand {
    /// Runs dead work again from its first attempt (the admin RetryFailedWork RPC, offline); prints how many tasks.
    Retry {
        #[command(flatten)]
        flags: CommonFlags,
        /// The workspace whose dead work runs again.
        #[arg(long)]
        workspace: String,
        /// Only this session's dead work.
        #[arg(long)]
        session: Option<String>,
        /// Only this kind of task: representation, summary, dream, ...
        #[arg(long)]
        task_type: Option<String>,
    },
}

/// `roncho mcp`'s own flags.
#[derive(Debug, Args)]
struct McpFlags {
    /// A roncho server's REST edge, e.g. http://127.0.0.1:8000 [default: embedded, in this process].
    #[arg(long, value_name = "URL")]
    addr: Option<String>,
    /// The API key sent on every call (env RONCHO_API_KEY); a peer key gives the agent that peer's view.
    #[arg(long)]
    key: Option<String>,
    /// The default workspace: tools' omitted workspace_id [default: the key's workspace, else none].
    #[arg(long)]
    workspace: Option<String>,
    /// The default peer: tools' omitted peer_id [default: the key's peer, else none].
    #[arg(long)]
    peer: Option<String>,
    /// The default session: tools' omitted session_id.
    #[arg(long)]
    session: Option<String>,
    /// The tool set: `honcho` (Honcho's 31 tools) or `memory` (remember, recall, ask, forget).
    #[arg(long, default_value = "honcho")]
    profile: String,
}

/// Parses `90s`, `30m`, `12h` or `30d`.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration such as 90s, 30m, 12h or 30d"))?;
    let seconds = match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("`{text}`: the unit must be s, m, h or d")),
    };
    Ok(std::time::Duration::from_secs(number.saturating_mul(seconds)))
}

/// Flags shared by every command; each overrides its `RONCHO_*` variable.
#[derive(Debug, Args)]
struct CommonFlags {
    /// TOML config file (env RONCHO_CONFIG).
    #[arg(long)]
    config: Option<PathBuf>,
    /// gRPC listen address [default: 127.0.0.1:50051].
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Directory of the embedded SQLite store [default: ./roncho-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Postgres URL; unset means the embedded SQLite store.
    #[arg(long)]
    database_url: Option<String>,
    /// Qdrant gRPC URL (e.g. http://qdrant:6334); unset keeps vectors in the relational store.
    #[arg(long)]
    qdrant_url: Option<String>,
    /// NATS URL (e.g. nats://nats:4222) for background work; needs --database-url. Unset: the SQL queue.
    #[arg(long)]
    nats_url: Option<String>,
    /// Roles to run: all, or a list of ingest,recall,dialectic,deriver,dreamer,reconciler [default: all].
    #[arg(long)]
    roles: Option<String>,
    /// Log filter, e.g. info or roncho=debug [default: info].
    #[arg(long)]
    log: Option<String>,
    /// The secret API keys are signed and verified with (env RONCHO_AUTH_JWT_SECRET).
    #[arg(long)]
    auth_jwt_secret: Option<String>,
    /// Serves a non-loopback address without authentication: anyone who reaches it can do anything.
    #[arg(long)]
    insecure_no_auth: bool,
    /// PEM certificate chain: serve gRPC over TLS (env RONCHO_TLS_CERT_FILE).
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file (env RONCHO_TLS_KEY_FILE).
    #[arg(long)]
    tls_key_file: Option<PathBuf>,
    /// PEM CA that client certificates must chain to: mutual TLS (env RONCHO_TLS_CLIENT_CA_FILE).
    #[arg(long)]
    tls_client_ca_file: Option<PathBuf>,
    /// Plain-text address serving only gRPC health checks, for probes (env RONCHO_HEALTH_LISTEN).
    #[arg(long)]
    health_listen: Option<SocketAddr>,
    /// The Honcho v3 REST edge's address, or `off` (env RONCHO_REST_LISTEN);
    /// unset: 127.0.0.1:8000 where a process serves reads and writes.
    #[arg(long)]
    rest_listen: Option<String>,
}

impl CommonFlags {
    fn load(&self) -> anyhow::Result<Config> {
        let env: HashMap<String, String> = std::env::vars()
            .filter(|(name, _)| name.starts_with("RONCHO_"))
            .collect();
        let config_path = self
            .config
            .clone()
            .or_else(|| env.get("RONCHO_CONFIG").map(PathBuf::from));
        let file = match config_path {
            Some(path) => {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                ConfigLayer::from_toml(&text).with_context(|| format!("in {}", path.display()))?
            }
            None => ConfigLayer::default(),
        };
        let flags = ConfigLayer {
            listen: self.listen,
            data_dir: self.data_dir.clone(),
            database_url: self.database_url.clone(),
            roles: self.roles.clone(),
            log: self.log.clone(),
            qdrant_url: self.qdrant_url.clone(),
            nats_url: self.nats_url.clone(),
            auth_jwt_secret: self.auth_jwt_secret.clone(),
            insecure_no_auth: self.insecure_no_auth.then_some(true),
            tls_cert_file: self.tls_cert_file.clone(),
            tls_key_file: self.tls_key_file.clone(),
            tls_client_ca_file: self.tls_client_ca_file.clone(),
            health_listen: self.health_listen,
            rest_listen: self.rest_listen.clone(),
            ..ConfigLayer::default()
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Config::resolve_with_home(file, ConfigLayer::from_env(&env)?, flags, home)
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The PDF reader runs before any runtime thread exists: a lean child
    // whose memory limit is all its parse's.
    if let Command::ExtractPdf {
        memory_limit_mb,
        cpu_limit_secs,
    } = cli.command
    {
        return roncho::pdf::extract_from_stdin(memory_limit_mb, cpu_limit_secs);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(cli))
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::ExtractPdf { .. } => unreachable!("handled before the runtime starts"),
        Command::Serve(flags) => serve(flags.load()?, Launch::default()).await,
        Command::Mcp { flags, mcp } => roncho_mcp_command(flags, mcp).await,
        Command::Migrate(flags) => {
            let config = flags.load()?;
            let _logs = Telemetry::init(&config, false)?;
            let store = roncho_store::connect(&config.store_options()).await?;
            roncho_store::migrate(&store).await?;
            let info = roncho_core::store::Health::info(&store).await?;
            println!(
                "migrated {} at {} to schema {}",
                info.backend,
                info.location,
                info.schema_version.unwrap_or_default()
            );
            Ok(())
        }
        Command::Status { flags, json } => {
            let config = flags.load()?;
            let checks = roncho::status::checks(&config).await;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&roncho::status::to_json(&config, &checks))?
                );
            } else {
                println!("{}", roncho::status::to_text(&checks));
            }
            if !roncho::status::essentials_ok(&checks) {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Keys(KeysCommand::Create {
            flags,
            admin,
            workspace,
            peer,
            session,
            expires_in,
        }) => {
            let config = flags.load()?;
            let keys = roncho::wiring::key_set(&config)?
                .context("no auth_jwt_secret is configured: keys are signed with it (RONCHO_AUTH_JWT_SECRET or --auth-jwt-secret)")?;
            let now = roncho_core::model::now_micros();
            let expires_at = expires_in.map(|after| now + i64::try_from(after.as_micros()).unwrap_or(i64::MAX / 2));
            let key = if admin {
                keys.sign(&roncho_api::keys::Claims {
                    ad: Some(true),
                    exp: expires_at.map(|at| serde_json::Value::from(at / 1_000_000)),
                    iat: Some(now / 1_000_000),
                    ..roncho_api::keys::Claims::default()
                })
            } else {
                let request = roncho_api::keys::CreateKey {
                    workspace_id: workspace.unwrap_or_default(),
                    peer_id: peer,
                    session_id: session,
                    expires_at,
                };
                roncho_api::keys::issue(&keys, request, now)?.key
            };
            println!("{key}");
            Ok(())
        }
        Command::Import {
            flags,
            from_honcho,
            workspaces,
            derive,
            json,
        } => {
            let config = flags.load()?;
            let _logs = Telemetry::init(&config, false)?;
            let store = roncho_store::connect(&config.store_options()).await?;
            roncho_store::migrate(&store).await?;
            let source = roncho::import::connect(&from_honcho).await?;
            let options = roncho::import::ImportOptions { workspaces, derive };
            let counts = roncho::import::import_honcho(&source, &store, &options).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&counts)?);
            } else {
                print!("{counts}");
            }
            Ok(())
        }
        Command::Queue(QueueCommand::Retry {
            flags,
            workspace,
            session,
            task_type,
        }) => {
            let config = flags.load()?;
            let store = roncho_store::connect(&config.store_options()).await?;
            let filter = roncho_core::queue::RetryFilter {
                workspace_id: workspace,
                session_id: session,
                task_type,
            };
            // The SQL ledger is the queue of record in both modes: with NATS
            // the relay publishes the revived tasks as new work.
            let revived =
                roncho_core::queue::WorkQueue::retry_dead(&roncho_store::SqlWorkQueue::new(Arc::new(store)), &filter)
                    .await?;
            println!("{revived} dead task(s) will run again");
            Ok(())
        }
    }
}

/// Binds the REST edge's address. The default address gives way, with a
/// warning, to whatever holds it (another roncho, or Honcho itself).
fn rest_listener(rest: Option<roncho::config::RestListen>) -> anyhow::Result<Option<Arc<std::net::TcpListener>>> {
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

/// How a server is started beyond its configuration: by `roncho serve`
/// (the defaults), or inside `roncho mcp`.
#[derive(Default)]
struct Launch {
    /// The REST edge's listener, bound already (instead of `rest_listen`).
    rest: Option<Arc<std::net::TcpListener>>,
    /// Stops the server as a signal would.
    stop: CancellationToken,
}

async fn serve(config: Config, launch: Launch) -> anyhow::Result<()> {
    config.check_exposure()?;
    let telemetry = Telemetry::init(&config, true)?;
    tracing::info!(config = %config.redacted(), "starting roncho");
    let keys = roncho::wiring::key_set(&config)?;
    let tls = config
        .tls
        .clone()
        .map(roncho::tls::ReloadingTls::load)
        .transpose()?
        .map(Arc::new);
    if keys.is_none() && !config.listen.ip().is_loopback() {
        tracing::error!(
            listen = %config.listen,
            "AUTHENTICATION IS OFF on a non-loopback address (--insecure-no-auth): anyone who reaches this port can read, write and delete every workspace"
        );
    }
    let runtime = roncho::wiring::build(&config).await?;
    tracing::info!(semantic_search = %runtime.embedder_description, "search");
    let store = runtime.store.clone();
    tokio::task::spawn_blocking(roncho_core::tokens::warm_up).await?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;

    let shutdown = CancellationToken::new();
    // The grace period counts from the signal: draining requests and
    // finishing work share it.
    let signalled_at = Arc::new(std::sync::OnceLock::new());
    let (signal_token, signal_time) = (shutdown.clone(), signalled_at.clone());
    let stop = launch.stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = wait_for_signal() => {}
            () = stop.cancelled() => {}
        }
        let _ = signal_time.set(tokio::time::Instant::now());
        signal_token.cancel();
    });
    let mut services = roncho::server::Services::store_only(store.clone());
    services.keys = keys;
    services.tls = tls;
    services.health_listen = config.health_listen;
    services.rest_listener = match launch.rest {
        Some(listener) => Some(listener),
        None => rest_listener(config.rest_listen)?,
    };
    services.allow_private_webhooks = config.limits.webhook_allow_private_addresses;
    services.idempotency_window = config.idempotency_window;
    services.reflection = config.grpc_reflection;
    services.pdf = Some(Arc::new(roncho::pdf::SandboxedPdf::new(
        std::env::current_exe().context("finding this binary for the PDF reader")?,
        config.limits.pdf_memory_mb,
        config.limits.pdf_timeout,
        config.limits.pdf_concurrency,
    )));
    services.admission = roncho_api::admission::Admission::new(config.limits.admission());
    services.connections = roncho::connections::ConnectionGate::new(config.limits.connections.within_descriptors());
    let derives_with_model = config
        .llm
        .as_ref()
        .is_some_and(|llm| llm.roles.contains_key(&roncho::config::LlmRole::Deriver));
    services.rates = Arc::new(config.limits.rates(derives_with_model));
    if let Some(address) = config.metrics_listen {
        let metrics = Arc::new(roncho::metrics::Metrics::new());
        roncho::metrics::install(metrics.clone());
        services.metrics = Some(metrics.clone());
        metrics.watch_admission(services.admission.stats(), services.rates.clone());
        metrics.watch_connections(services.connections.stats());
        if let Some(yielding) = runtime.reconciler.as_ref().and_then(|reconciler| reconciler.yielding()) {
            metrics.watch_yielding("reconciler", yielding);
        }
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("binding the metrics address {address}"))?;
        let ledger = roncho_store::SqlWorkQueue::new(store.clone());
        let (store, stop, gate) = (store.clone(), shutdown.clone(), services.connections.clone());
        tokio::spawn(async move {
            let refresh = std::time::Duration::from_secs(15);
            let served = roncho::metrics::serve(listener, gate, metrics, store, Some(ledger), refresh, stop);
            if let Err(error) = served.await {
                tracing::error!(%error, "the metrics server stopped");
            }
        });
    }
    services.semantic = runtime.semantic.clone();
    services.write_activity = runtime.write_activity.clone();
    services.dialectic = Some(roncho::wiring::dialectic(&config, &services)?);
    let mut nudges: Vec<roncho_ingest::AfterWrite> = Vec::new();
    let queue = roncho::wiring::work_queue(&config, &store).await?;
    if let Some(nats) = queue.nats.clone() {
        // Tasks written with messages are published right after the write.
        let kicked = nats.clone();
        nudges.push(Arc::new(move || kicked.kick()));
        // A worker without NATS has nothing to do; a process that also serves
        // requests keeps serving them (writes wait in the outbox), so it stays ready.
        let consumes = config
            .roles
            .iter()
            .any(|role| matches!(role, Role::Deriver | Role::Dreamer));
        let serves = config
            .roles
            .iter()
            .any(|role| matches!(role, Role::Ingest | Role::Recall | Role::Dialectic));
        if consumes && !serves {
            services.dependencies.push(roncho::server::Dependency::nats(nats));
        }
    }
    let queue = queue.queue;
    services.queue = Some(queue.clone());
    // Background workers; each finishes the unit or batch in hand after shutdown.
    let mut workers = tokio::task::JoinSet::new();
    let mut worker_ids = Vec::new();
    if let Some(reconciler) = &runtime.reconciler {
        workers.spawn(reconciler.clone().run(shutdown.clone()));
        let nudged = reconciler.clone();
        nudges.push(Arc::new(move || nudged.nudge()));
    }
    if let Some(indexer) = &runtime.text_indexer {
        workers.spawn(indexer.clone().run(shutdown.clone()));
        let nudged = indexer.clone();
        nudges.push(Arc::new(move || nudged.nudge()));
    }
    {
        // Which models derive and dream, wherever queue status and
        // ScheduleDream are answered (the REST edge answers them beside ingest).
        use roncho::config::LlmRole;
        let model = |role| anyhow::Ok(roncho::wiring::llm(config.llm.as_ref(), role)?.map(|llm| llm.model_id()));
        services.dream_model = model(LlmRole::Dream)?;
        services.derivation = roncho_deriver::Derivation {
            observations: model(LlmRole::Deriver)?,
            summaries: model(LlmRole::Summary)?,
        };
    }
    if config.roles.contains(&Role::Dreamer) {
        use roncho::config::{LlmConfig, LlmRole};
        match roncho::wiring::llm(config.llm.as_ref(), LlmRole::Dream)? {
            Some(llm) => {
                tracing::info!(model = %llm.model_id(), "dreamer worker");
                let worker_config = roncho_deriver::worker::WorkerConfig {
                    worker_id: roncho_deriver::worker::unique_worker_id("dreamer"),
                    lease: config.deriver_lease,
                    outage_backoff: config.worker_outage_backoff,
                    outage_backoff_max: config.worker_outage_backoff_max,
                    ..roncho_deriver::worker::WorkerConfig::default()
                };
                worker_ids.push(worker_config.worker_id.clone());
                let worker = Arc::new(roncho_dreamer::worker::DreamWorker::new(
                    store.clone(),
                    queue.clone(),
                    runtime.semantic.clone(),
                    llm,
                    LlmConfig::max_tokens(config.llm.as_ref(), LlmRole::Dream),
                    worker_config,
                ));
                workers.spawn(worker.clone().run(shutdown.clone()));
                nudges.push(Arc::new(move || worker.nudge()));
            }
            None => tracing::info!(
                "dreamer: no dream model configured (dream_model or llm_model); ScheduleDream answers FAILED_PRECONDITION"
            ),
        }
    }
    if config.roles.contains(&Role::Deriver) {
        use roncho::config::{LlmConfig, LlmRole};
        let limit = |role: LlmRole| LlmConfig::max_tokens(config.llm.as_ref(), role);
        // Beside the writes of this process, the deriver lets bursts pass first.
        let yielding = runtime
            .write_activity
            .as_ref()
            .map(|activity| roncho::wiring::yielding_to(activity, &config));
        if let (Some(metrics), Some(yielding)) = (&services.metrics, &yielding) {
            metrics.watch_yielding("deriver", yielding.clone());
        }
        let worker_config = roncho_deriver::worker::WorkerConfig {
            lease: config.deriver_lease,
            outage_backoff: config.worker_outage_backoff,
            outage_backoff_max: config.worker_outage_backoff_max,
            yielding,
            ..roncho_deriver::worker::WorkerConfig::default()
        };
        worker_ids.push(worker_config.worker_id.clone());
        let webhooks = roncho_http::webhook::WebhookSender::new(
            config.webhooks.secret.as_ref().map(|secret| secret.expose()),
            config.webhooks.timeout,
            config.limits.webhook_allow_private_addresses,
        )
        .map_err(|error| anyhow::anyhow!("webhook delivery: {error}"))?;
        let mut worker = roncho_deriver::worker::Worker::new(store.clone(), queue.clone(), worker_config)
            .with_max_tokens(limit(LlmRole::Deriver), limit(LlmRole::Summary))
            .with_webhooks(webhooks);
        let deriver = roncho::wiring::llm(config.llm.as_ref(), LlmRole::Deriver)?;
        let summarizer = roncho::wiring::llm(config.llm.as_ref(), LlmRole::Summary)?;
        tracing::info!(
            deriver = deriver
                .as_ref()
                .map_or_else(|| "extractive".to_owned(), |llm| llm.model_id()),
            summary = summarizer
                .as_ref()
                .map_or_else(|| "extractive".to_owned(), |llm| llm.model_id()),
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
        if roncho::wiring::llm(config.llm.as_ref(), LlmRole::Dream)?.is_some() {
            // Dreams run wherever a dreamer role is; the deriver schedules them.
            let policy = roncho_dreamer::DreamPolicy {
                document_threshold: i64::try_from(config.dreams.document_threshold).unwrap_or(i64::MAX),
                min_between: config.dreams.min_between,
                idle: config.dreams.idle,
            };
            worker = worker.with_listener(Arc::new(roncho_dreamer::DreamScheduler::new(
                store.clone(),
                queue.clone(),
                policy,
            )));
        }
        let worker = Arc::new(worker);
        workers.spawn(worker.clone().run(shutdown.clone()));
        nudges.push(Arc::new(move || worker.nudge()));
    }
    if !nudges.is_empty() {
        services.after_write = Some(Arc::new(move || nudges.iter().for_each(|nudge| nudge())));
    }
    let server = roncho::server::run(listener, services, &config.roles, shutdown.clone());
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => result?,
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(config.shutdown_grace).await;
        } => tracing::warn!(grace = ?config.shutdown_grace, "grace period over; exiting with requests in flight"),
    }
    // The server stopped; drain the workers, within what is left of the
    // grace period, before the store closes.
    shutdown.cancel();
    let deadline = signalled_at.get().copied().unwrap_or_else(tokio::time::Instant::now) + config.shutdown_grace;
    let workers_finished = tokio::time::timeout_at(deadline, async { while workers.join_next().await.is_some() {} })
        .await
        .is_ok();
    if !workers_finished {
        tracing::warn!(grace = ?config.shutdown_grace, "grace period over; stopping workers mid-task and giving their units back");
        workers.shutdown().await;
    }
    // What is left is bounded too: the pod's grace period is not much longer
    // than ours, and the last spans must still go out after this.
    let closing = async {
        if !workers_finished {
            for worker_id in &worker_ids {
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
    tracing::info!("stopped");
    telemetry.shutdown().await;
    Ok(())
}

/// `roncho mcp`: MCP on stdio, over a roncho server's REST edge (`--addr`)
/// or over an embedded server in this process, private to it (loopback,
/// ports of its own). Answers `initialize` at once; the embedded server
/// starts meanwhile, and the first tool call waits for it.
async fn roncho_mcp_command(mut flags: CommonFlags, mcp: McpFlags) -> anyhow::Result<()> {
    let profile = roncho_mcp::Profile::parse(&mcp.profile)
        .with_context(|| format!("--profile `{}`: expected `honcho` or `memory`", mcp.profile))?;
    let key = mcp
        .key
        .clone()
        .or_else(|| std::env::var("RONCHO_API_KEY").ok())
        .filter(|key| !key.trim().is_empty());
    let claims = key.as_deref().and_then(roncho_api::keys::peek_claims);
    let defaults = roncho_mcp::Defaults {
        workspace: mcp
            .workspace
            .clone()
            .or_else(|| claims.as_ref().and_then(|claims| claims.w.clone())),
        peer: mcp
            .peer
            .clone()
            .or_else(|| claims.as_ref().and_then(|claims| claims.p.clone())),
        session: mcp
            .session
            .clone()
            .or_else(|| claims.as_ref().and_then(|claims| claims.s.clone())),
    };
    if flags.log.is_none() && std::env::var_os("RONCHO_LOG").is_none() {
        flags.log = Some("warn".to_owned());
    }
    if flags.data_dir.is_none() && flags.config.is_none() && std::env::var_os("RONCHO_DATA_DIR").is_none() {
        flags.data_dir = mcp_data_dir();
    }
    if flags.listen.is_some() || flags.rest_listen.is_some() {
        anyhow::bail!(
            "roncho mcp listens on loopback ports of its own (MCP is on stdio): drop --listen and --rest-listen; \
             for MCP over HTTP, `roncho serve` serves /mcp on its REST port"
        );
    }
    // Private to this process: loopback, ports of its own.
    flags.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    let config = flags.load()?;
    let (upstream, server) = match &mcp.addr {
        Some(addr) => {
            let _logs = Telemetry::init(&config, false)?;
            let upstream = roncho_mcp::Upstream::remote(addr).map_err(|error| anyhow::anyhow!("{error}"))?;
            (upstream, None)
        }
        None => {
            let rest = std::net::TcpListener::bind(("127.0.0.1", 0)).context("binding the embedded REST edge")?;
            let base = format!("http://{}", rest.local_addr()?);
            let stop = CancellationToken::new();
            let launch = Launch {
                rest: Some(Arc::new(rest)),
                stop: stop.clone(),
            };
            let mut config = config;
            config.rest_listen = None;
            let server = tokio::spawn(async move {
                let result = serve(config, launch).await;
                if let Err(error) = &result {
                    // stdout is the protocol's: say it on stderr, and end, so the client sees the server gone.
                    eprintln!("roncho mcp: the embedded server stopped: {error:#}");
                    std::process::exit(1);
                }
                result
            });
            let upstream = roncho_mcp::Upstream::remote(&base).map_err(|error| anyhow::anyhow!("{error}"))?;
            (upstream, Some((server, stop)))
        }
    };
    let mut server_handler = roncho_mcp::McpServer::new(upstream, profile, defaults);
    if let Some(key) = &key {
        server_handler = server_handler.with_key(key).map_err(|error| anyhow::anyhow!(error))?;
    }
    let served = roncho_mcp::serve_stdio(server_handler).await;
    if let Some((server, stop)) = server {
        stop.cancel();
        server.await??;
    }
    served.map_err(|error| anyhow::anyhow!(error))
}

/// Where `roncho mcp` keeps its memory when no directory is configured:
/// `$XDG_DATA_HOME/roncho`, else `~/.local/share/roncho` (an agent starts
/// it from any working directory).
fn mcp_data_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_DATA_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local").join("share")))?;
    Some(base.join("roncho"))
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
