//! `roncho serve | migrate | status`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use roncho::config::{Config, ConfigLayer};
use roncho::node::{Launch, serve};
use roncho::telemetry::Telemetry;
use tokio_util::sync::CancellationToken;

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
    /// Imports an export's JSON lines through a server (`roncho import FILE`), or copies a Honcho v3 database into this roncho's store (`--from-honcho`). Both resumable: run again to finish.
    Import {
        #[command(flatten)]
        flags: CommonFlags,
        /// An export's JSON lines (`-`: standard input), sent to the server as `roncho search` reaches it (--addr, --key) into --workspace [default: the key's workspace, else the export's]. See docs/cli.md.
        #[arg(
            value_name = "FILE",
            required_unless_present = "from_honcho",
            conflicts_with = "from_honcho"
        )]
        file: Option<PathBuf>,
        /// The Honcho database, e.g. postgres://honcho@db:5432/honcho (only read).
        #[arg(long, value_name = "POSTGRES_URL")]
        from_honcho: Option<String>,
        /// Only this workspace (repeatable) [default: every workspace]; with FILE, the workspace imported into.
        #[arg(long = "workspace", value_name = "ID")]
        workspaces: Vec<String>,
        /// Queue derivation and summaries for the imported messages (model calls; the conclusions and summaries are imported either way).
        #[arg(long)]
        derive: bool,
        /// Prints the counts as JSON.
        #[arg(long)]
        json: bool,
        /// With FILE: the server's REST edge (env RONCHO_ADDR) [default: the rest_listen this configuration serves].
        #[arg(long, value_name = "URL", requires = "file")]
        addr: Option<String>,
        /// With FILE: the API key (env RONCHO_API_KEY) [default: the local key's admin key in the data directory, if any].
        #[arg(long, requires = "file")]
        key: Option<String>,
        /// With FILE: PEM CA certificate(s) the server's certificate may chain to.
        #[arg(long, value_name = "PEM_FILE", requires = "file")]
        ca_file: Option<PathBuf>,
        /// With FILE: records sent per call.
        #[arg(long, default_value_t = roncho::transfer::DEFAULT_BATCH, requires = "file",
              value_parser = clap::value_parser!(u16).range(1..=1000))]
        batch: u16,
    },
    /// An MCP server on stdio for agents: embedded on a data directory, or in front of a roncho server (--addr).
    ///
    /// Embedded, its store is --data-dir, else $XDG_DATA_HOME/roncho (~/.local/share/roncho), not
    /// ./roncho-data, readable by its owner only; it opens no port (its tools call the store in
    /// process), so --listen and --rest-listen do not apply.
    /// The same tools are served over HTTP at /mcp on `roncho serve`'s REST port. See docs/mcp.md.
    Mcp {
        #[command(flatten)]
        flags: CommonFlags,
        #[command(flatten)]
        mcp: McpFlags,
    },
    /// Searches messages by their words and meaning (exit 1: nothing matched). See docs/cli.md.
    Search(OneShot<SearchArgs>),
    /// Prints a session's context: its summary and newest messages within a token budget.
    Context(OneShot<ContextArgs>),
    /// Lists conclusions, newest first, or the nearest to --query (exit 1: none).
    Conclusions(OneShot<ConclusionsArgs>),
    /// Asks a peer's memory a question and prints the answer.
    Chat(OneShot<ChatArgs>),
    /// Erases a message, a session, a conclusion or the whole workspace, and prints the erasure's receipt.
    Erase(OneShot<EraseArgs>),
    /// Writes a workspace, or a peer's or a session's part of it, as JSON lines (erased data never included); `roncho import FILE` reads it back.
    Export {
        #[command(flatten)]
        flags: CommonFlags,
        #[command(flatten)]
        reach: ReachFlags,
        /// Only this peer's part: its sessions, cards and the conclusions by or about it.
        #[arg(long, conflicts_with = "session")]
        peer: Option<String>,
        /// Only this session: its members, messages, summaries and conclusions.
        #[arg(long)]
        session: Option<String>,
        /// The file to write (whole or not at all) [default: standard output].
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
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
        /// A key that reaches everything (ListWorkspaces, CreateKey, every workspace); with --tenant, everything of that tenant.
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
        /// The key's tenant (its `tn` claim), on a multi-tenant server: required there but for the operator's admin key; with --admin, an admin of that tenant's workspaces alone.
        #[arg(long)]
        tenant: Option<String>,
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

/// How a one-shot command reaches a server, and what it prints.
#[derive(Debug, Args)]
struct ReachFlags {
    /// The server's REST edge, e.g. http://127.0.0.1:8000 (env RONCHO_ADDR) [default: the rest_listen this configuration serves].
    #[arg(long, value_name = "URL")]
    addr: Option<String>,
    /// The API key (env RONCHO_API_KEY) [default: the local key's admin key in the data directory, if any].
    #[arg(long)]
    key: Option<String>,
    /// The workspace [default: the key's workspace].
    #[arg(long)]
    workspace: Option<String>,
    /// Prints the server's JSON reply instead of text.
    #[arg(long)]
    json: bool,
    /// PEM CA certificate(s) the server's certificate may chain to, beside the system's (a server with its own certificate).
    #[arg(long, value_name = "PEM_FILE")]
    ca_file: Option<PathBuf>,
}

/// A one-shot command: how it reaches the server, and what it asks.
#[derive(Debug, Args)]
struct OneShot<A: Args + Into<roncho::oneshot::Ask>> {
    #[command(flatten)]
    flags: CommonFlags,
    #[command(flatten)]
    reach: ReachFlags,
    #[command(flatten)]
    ask: A,
}

impl<A: Args + Into<roncho::oneshot::Ask>> OneShot<A> {
    async fn run(self) -> anyhow::Result<()> {
        one_shot(self.flags, self.reach, self.ask.into()).await
    }
}

#[derive(Debug, Args)]
struct SearchArgs {
    /// What to look for.
    query: String,
    /// Only this session's messages.
    #[arg(long, conflicts_with = "peer")]
    session: Option<String>,
    /// Only this peer's messages.
    #[arg(long)]
    peer: Option<String>,
    /// At most this many messages.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100))]
    limit: u32,
}

impl From<SearchArgs> for roncho::oneshot::Ask {
    fn from(
        SearchArgs {
            query,
            session,
            peer,
            limit,
        }: SearchArgs,
    ) -> Self {
        Self::Search {
            query,
            session,
            peer,
            limit,
        }
    }
}

#[derive(Debug, Args)]
struct ContextArgs {
    /// The session.
    session: String,
    /// The token budget [default: the server's].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    tokens: Option<u32>,
}

impl From<ContextArgs> for roncho::oneshot::Ask {
    fn from(ContextArgs { session, tokens }: ContextArgs) -> Self {
        Self::Context { session, tokens }
    }
}

#[derive(Debug, Args)]
struct ConclusionsArgs {
    /// The conclusions nearest to this text instead of the newest (with --observed, or a peer key's peer).
    #[arg(long)]
    query: Option<String>,
    /// Only those this peer holds.
    #[arg(long)]
    observer: Option<String>,
    /// Only those about this peer.
    #[arg(long)]
    observed: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100))]
    limit: u32,
}

impl From<ConclusionsArgs> for roncho::oneshot::Ask {
    fn from(
        ConclusionsArgs {
            query,
            observer,
            observed,
            limit,
        }: ConclusionsArgs,
    ) -> Self {
        Self::Conclusions {
            query,
            observer,
            observed,
            limit,
        }
    }
}

#[derive(Debug, Args)]
struct ChatArgs {
    /// The peer whose memory answers.
    peer: String,
    /// The question.
    question: String,
    /// The session the question is asked in: its recent turns come with it (the answer may draw on every session).
    #[arg(long)]
    session: Option<String>,
    /// The peer asked about, as the first one sees it.
    #[arg(long)]
    target: Option<String>,
}

impl From<ChatArgs> for roncho::oneshot::Ask {
    fn from(
        ChatArgs {
            peer,
            question,
            session,
            target,
        }: ChatArgs,
    ) -> Self {
        Self::Chat {
            peer,
            question,
            session,
            target,
        }
    }
}

#[derive(Debug, Args)]
struct EraseArgs {
    /// The session (with --message: only that message of it).
    #[arg(long, required_unless_present_any = ["conclusion", "peer", "everything"], conflicts_with_all = ["conclusion", "peer", "everything"])]
    session: Option<String>,
    /// Only this message of --session.
    #[arg(long, requires = "session", conflicts_with_all = ["conclusion", "peer", "everything"])]
    message: Option<String>,
    /// The conclusion.
    #[arg(long, conflicts_with_all = ["peer", "everything"])]
    conclusion: Option<String>,
    /// The peer: its messages in every session, what was learned from them, by it and about it.
    #[arg(long, conflicts_with = "everything")]
    peer: Option<String>,
    /// The whole workspace: its peers, sessions, messages and all that was
    /// learned from them (refused while a session is active, as in Honcho:
    /// erase those with --session first).
    #[arg(long)]
    everything: bool,
    /// Waits until the receipt says every derived row and vector is gone.
    #[arg(long)]
    wait: bool,
}

impl From<EraseArgs> for roncho::oneshot::Ask {
    fn from(args: EraseArgs) -> Self {
        use roncho::oneshot::Erased;
        let erased = match (args.session, args.message, args.conclusion, args.peer) {
            (Some(session), Some(message), ..) => Erased::Message { session, message },
            (Some(session), None, ..) => Erased::Session(session),
            (None, _, Some(conclusion), _) => Erased::Conclusion(conclusion),
            (None, _, None, Some(peer)) => Erased::Peer(peer),
            (None, _, None, None) => Erased::Workspace,
        };
        Self::Erase {
            erased,
            wait: args.wait,
        }
    }
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
    /// Requires keys with a secret generated into the data directory (admin key in <data-dir>/auth/admin.key).
    #[arg(long)]
    local_key: bool,
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
    /// The layer of settings these flags give: each flag is the setting of
    /// its name (`--nats-url` is `nats_url`).
    fn layer(&self) -> ConfigLayer {
        let mut flags = ConfigLayer::default();
        flags.server.listen = self.listen;
        flags.server.roles = self.roles.clone();
        flags.server.health_listen = self.health_listen;
        flags.server.rest_listen = self.rest_listen.clone();
        flags.server.tls_cert_file = self.tls_cert_file.clone();
        flags.server.tls_key_file = self.tls_key_file.clone();
        flags.server.tls_client_ca_file = self.tls_client_ca_file.clone();
        flags.store.data_dir = self.data_dir.clone();
        flags.store.database_url = self.database_url.clone();
        flags.queue.nats_url = self.nats_url.clone();
        flags.search.qdrant_url = self.qdrant_url.clone();
        flags.auth.auth_jwt_secret = self.auth_jwt_secret.clone();
        flags.auth.insecure_no_auth = self.insecure_no_auth.then_some(true);
        flags.auth.local_key = self.local_key.then_some(true);
        flags.telemetry.log = self.log.clone();
        flags
    }

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
        let flags = self.layer();
        // Where the fetch scripts install models: $RONCHO_CACHE, else ~/.cache/roncho.
        let caches = env
            .get("RONCHO_CACHE")
            .filter(|cache| !cache.is_empty())
            .map(PathBuf::from)
            .into_iter()
            .chain(std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/roncho")))
            .collect();
        Config::resolve_with_caches(file, ConfigLayer::from_env(&env)?, flags, caches)
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
        Command::Search(command) => command.run().await,
        Command::Context(command) => command.run().await,
        Command::Conclusions(command) => command.run().await,
        Command::Chat(command) => command.run().await,
        Command::Erase(command) => command.run().await,
        Command::Export {
            flags,
            reach,
            peer,
            session,
            output,
        } => export_command(flags, reach, peer, session, output).await,
        Command::Migrate(flags) => {
            let config = flags.load()?;
            let _logs = Telemetry::init(&config, false)?;
            let store = roncho_store::connect(&config.store.options()).await?;
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
            tenant,
        }) => {
            let config = flags.load()?;
            let keys = roncho::wiring::key_set(&config)?
                .context("no auth_jwt_secret is configured: keys are signed with it (RONCHO_AUTH_JWT_SECRET or --auth-jwt-secret)")?;
            let now = roncho_core::model::now_micros();
            let expires_at = expires_in.map(|after| now + i64::try_from(after.as_micros()).unwrap_or(i64::MAX / 2));
            let key = if admin {
                roncho_gate::keys::issue_admin(&keys, tenant, expires_at, now)?
            } else {
                let request = roncho_gate::keys::CreateKey {
                    workspace_id: workspace.unwrap_or_default(),
                    peer_id: peer,
                    session_id: session,
                    expires_at,
                    tenant_id: tenant,
                };
                roncho_gate::keys::issue(&keys, request, now)?.key
            };
            println!("{key}");
            Ok(())
        }
        Command::Import {
            flags,
            file: Some(file),
            workspaces,
            derive,
            json,
            addr,
            key,
            ca_file,
            batch,
            ..
        } => {
            if workspaces.len() > 1 {
                fail(
                    roncho::oneshot::Exit::Invalid,
                    "an export is imported into one workspace",
                );
            }
            let reach = ReachFlags {
                addr,
                key,
                workspace: workspaces.into_iter().next(),
                json,
                ca_file,
            };
            import_command(flags, reach, file, usize::from(batch), derive).await
        }
        Command::Import {
            flags,
            from_honcho,
            workspaces,
            derive,
            json,
            ..
        } => {
            let from_honcho = from_honcho.context("give an export FILE or --from-honcho")?;
            honcho_import(flags, from_honcho, workspaces, derive, json).await
        }
        Command::Queue(QueueCommand::Retry {
            flags,
            workspace,
            session,
            task_type,
        }) => {
            let config = flags.load()?;
            let store = roncho_store::connect(&config.store.options()).await?;
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

/// A one-shot command: one call to the server, its answer on stdout, and
/// an exit code that says how it went (`roncho::oneshot::Exit`); a refusal
/// or failure is said on stderr.
/// `roncho import --from-honcho`: a Honcho v3 database into this store.
async fn honcho_import(
    flags: CommonFlags,
    from_honcho: String,
    workspaces: Vec<String>,
    derive: bool,
    json: bool,
) -> anyhow::Result<()> {
    let config = flags.load()?;
    let _logs = Telemetry::init(&config, false)?;
    let store = roncho_store::connect(&config.store.options()).await?;
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

/// Ends a one-shot command: `message` on standard error, `exit` its code.
fn fail(exit: roncho::oneshot::Exit, message: &str) -> ! {
    eprintln!("roncho: {}", roncho::oneshot::printable(message, true));
    std::process::exit(exit as i32);
}

/// The server a one-shot command reaches, as whom, and in which workspace.
struct Reached {
    server: roncho::oneshot::Reach,
    /// Where the server is, for messages.
    base: String,
    /// `--workspace`, else the key's.
    workspace: Option<String>,
    /// The peer the key acts as, if any.
    peer: Option<String>,
    /// The server this process runs for the command, when no server
    /// serves the embedded data directory.
    direct: Option<(CancellationToken, tokio::task::JoinHandle<anyhow::Result<()>>)>,
}

impl Reached {
    /// Stops the server this process ran for the command, if any.
    async fn close(self) {
        if let Some((stop, server)) = self.direct {
            stop.cancel();
            if let Ok(Err(error)) = server.await {
                eprintln!("roncho: the embedded server stopped: {error:#}");
            }
        }
    }
}

/// What a one-shot command needs of a server run in its own process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// Reads and writes: ingest, recall and dialectic, on a store that exists.
    Calls,
    /// An import: the same roles, into a new store too.
    Import,
    /// Every role: an erasure's background part and its vectors too.
    Everything,
}

/// Resolves a one-shot command's server and key and workspace; exits with
/// the code of what is wrong.
///
/// The server: `--addr` (env `RONCHO_ADDR`). Else, on an embedded data
/// directory, the server that holds it (its lock file says where it
/// serves; one starting is waited for), or, when none does, a server in
/// this process on the directory (no port; [`Needs`] says which roles).
/// Else (Postgres) the rest_listen this configuration serves. The key:
/// `--key`, `RONCHO_API_KEY`, else the local admin key, sent only to this
/// user's own loopback server (or to the server in this process).
async fn reach_server(mut flags: CommonFlags, reach: ReachFlags, needs: Needs) -> Reached {
    use roncho::oneshot::{Exit, Reach, base_url_of};
    // A command's output is its answer: a server it runs in its own process
    // says only what went wrong (and what it would warn a server's operator
    // of, a backlog with no reconciler beside it, is not this command's).
    if flags.log.is_none() && std::env::var_os("RONCHO_LOG").is_none() {
        flags.log = Some("error".to_owned());
    }
    let config = flags
        .load()
        .unwrap_or_else(|error| fail(Exit::Invalid, &format!("{error:#}")));
    let given = reach.key.clone().or_else(|| std::env::var("RONCHO_API_KEY").ok());
    if given.as_deref().is_some_and(|key| key.trim().is_empty()) {
        fail(Exit::Invalid, "the key given (--key, RONCHO_API_KEY) is empty");
    }
    let base = match reach.addr.clone().or_else(|| std::env::var("RONCHO_ADDR").ok()) {
        Some(addr) => addr,
        None if config.is_embedded() => match holding_server(&config, needs).await {
            Ok(base) => base,
            Err(direct) => return direct.reached(given, &reach),
        },
        None => match &config.server.rest_listen {
            Some(listen) => base_url_of(listen.address, config.server.tls.is_some()),
            None => fail(
                Exit::Invalid,
                "this configuration serves no REST edge (rest_listen = off): give --addr",
            ),
        },
    };
    // A key read from the data directory goes only to this user's server on this machine.
    let key = match given {
        Some(key) => Some(key),
        None => roncho::local_key::admin_key_for(&config.store.data_dir, &base)
            .unwrap_or_else(|error| fail(Exit::NotAllowed, &format!("{error:#}"))),
    };
    let ca = reach.ca_file.as_ref().map(|path| {
        std::fs::read(path).unwrap_or_else(|error| fail(Exit::Invalid, &format!("reading {}: {error}", path.display())))
    });
    let upstream = roncho_mcp::Upstream::remote_trusting(&base, ca.as_deref())
        .unwrap_or_else(|error| fail(Exit::of(&error), &error.message));
    let server = Reach::new(upstream, key.as_deref()).unwrap_or_else(|error| fail(Exit::of(&error), &error.message));
    let claims = key.as_deref().and_then(roncho_gate::keys::peek_claims);
    Reached {
        server,
        base,
        workspace: reach
            .workspace
            .clone()
            .or_else(|| claims.as_ref().and_then(|claims| claims.w.clone())),
        peer: claims.and_then(|claims| claims.p),
        direct: None,
    }
}

/// How long a one-shot command waits for a server that holds the data
/// directory and is still starting to say where it serves.
const STARTING_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A server this process runs on the data directory for one command.
struct Direct {
    router: axum::Router,
    data_dir: PathBuf,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Direct {
    fn reached(self, given: Option<String>, reach: &ReachFlags) -> Reached {
        use roncho::oneshot::{Exit, Reach};
        let key = given.or_else(|| roncho::local_key::admin_key(&self.data_dir).ok().flatten());
        let claims = key.as_deref().and_then(roncho_gate::keys::peek_claims);
        let server = Reach::new(roncho_mcp::Upstream::Local(self.router), key.as_deref())
            .unwrap_or_else(|error| fail(Exit::of(&error), &error.message));
        Reached {
            server,
            base: format!("the data directory {}", self.data_dir.display()),
            workspace: reach
                .workspace
                .clone()
                .or_else(|| claims.as_ref().and_then(|claims| claims.w.clone())),
            peer: claims.and_then(|claims| claims.p),
            direct: Some((self.stop, self.server)),
        }
    }
}

/// The REST address of the server that holds the embedded data directory
/// (`Ok`), or, when none does, a server run here on it (`Err`); exits
/// with the code of what is wrong.
async fn holding_server(config: &Config, needs: Needs) -> Result<String, Direct> {
    use roncho::oneshot::Exit;
    let data_dir = config.store.data_dir.clone();
    let started = std::time::Instant::now();
    // Why the server of this command did not start, once it has not: a
    // server took the directory meanwhile, and is waited for.
    let mut refused: Option<String> = None;
    loop {
        match roncho::dir_lock::holder(&data_dir) {
            Some(holder) if !holder.oneshot => {
                if let Some(origin) = holder.rest_origin() {
                    return Ok(origin);
                }
                if holder.in_process || holder.rest.is_some() || started.elapsed() > STARTING_WAIT {
                    fail(
                        Exit::Unavailable,
                        &format!(
                            "the data directory {} is held by roncho process {}, which serves no REST port this \
                             command may call (an embedded roncho mcp?): stop it, or give --addr",
                            data_dir.display(),
                            holder.pid
                        ),
                    );
                }
                // A server starting: it says where it serves once it listens.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            // No server holds it (a one-shot command may, for a moment).
            _ if refused.is_none() => match run_direct(config.clone(), needs).await {
                Ok(direct) => return Err(direct),
                // A server took the directory meanwhile: it is reached there.
                Err(reason) if reason.contains("in use by another roncho") => refused = Some(reason),
                Err(reason) => fail(
                    Exit::Unavailable,
                    &format!("the embedded store at {} did not open: {reason}", data_dir.display()),
                ),
            },
            _ if started.elapsed() > STARTING_WAIT => fail(
                Exit::Unavailable,
                &format!(
                    "the embedded store at {} did not open: {}",
                    data_dir.display(),
                    refused.as_deref().unwrap_or_default()
                ),
            ),
            _ => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}

/// Starts the server of one command on the embedded data directory, in
/// this process and with no port; the reason when it does not start.
async fn run_direct(mut config: Config, needs: Needs) -> Result<Direct, String> {
    use roncho::oneshot::Exit;
    let data_dir = config.store.data_dir.clone();
    let database = data_dir.join(roncho_store::EMBEDDED_FILE);
    if needs != Needs::Import && !database.exists() {
        fail(
            Exit::NotFound,
            &format!(
                "no server serves {}, and no memory is stored there ({} is missing): start `roncho serve`, or give \
                 --data-dir or --addr",
                data_dir.display(),
                database.display()
            ),
        );
    }
    if needs != Needs::Everything {
        config.server.roles = vec![
            roncho::config::Role::Ingest,
            roncho::config::Role::Recall,
            roncho::config::Role::Dialectic,
        ];
    }
    let (handed, mut started) = tokio::sync::watch::channel(None);
    let stop = CancellationToken::new();
    let launch = Launch {
        rest: Some(roncho::server::RestEdge::InProcess(Arc::new(handed))),
        stop: stop.clone(),
        oneshot: true,
    };
    let mut server = tokio::spawn(serve(config, launch));
    let why = |result: Result<anyhow::Result<()>, tokio::task::JoinError>| match result {
        Ok(Err(error)) => format!("{error:#}"),
        _ => "it stopped before it served".to_owned(),
    };
    let outcome = tokio::select! {
        router = started.wait_for(Option::is_some) => Ok(router.ok().and_then(|router| router.clone())),
        result = &mut server => Err(result),
    };
    match outcome {
        Ok(Some(router)) => Ok(Direct {
            router,
            data_dir,
            stop,
            server,
        }),
        // Stopped before it served: why, from the server itself.
        Ok(None) => Err(why(server.await)),
        Err(result) => Err(why(result)),
    }
}

/// The workspace a one-shot command works in, or exit 2.
fn workspace_of(workspace: Option<String>) -> String {
    workspace.unwrap_or_else(|| {
        fail(
            roncho::oneshot::Exit::Invalid,
            "which workspace? Give --workspace (a workspace or peer key names its own)",
        )
    })
}

async fn one_shot(flags: CommonFlags, reach: ReachFlags, mut ask: roncho::oneshot::Ask) -> anyhow::Result<()> {
    use roncho::oneshot::Exit;
    let json = reach.json;
    let needs = match ask {
        roncho::oneshot::Ask::Erase { .. } => Needs::Everything,
        _ => Needs::Calls,
    };
    let reached = reach_server(flags, reach, needs).await;
    let (server, base) = (&reached.server, &reached.base);
    ask.default_to(reached.peer.as_deref());
    let workspace = workspace_of(reached.workspace.clone());
    let reply = match server.ask(&ask, &workspace).await {
        Ok(reply) => reply,
        Err(error) if error.status == 0 => fail(Exit::of(&error), &format!("no answer from {base}: {error}")),
        Err(error) => fail(Exit::of(&error), &format!("HTTP {}: {error}", error.status)),
    };
    let (text, exit) = ask.render(&reply).unwrap_or_else(|error| {
        fail(
            Exit::Unavailable,
            &format!("{base} answered what roncho does not: {error}"),
        )
    });
    if json {
        println!("{reply}");
    } else {
        print!("{text}");
    }
    reached.close().await;
    std::process::exit(exit as i32);
}

/// The exit code of a failed export or import.
fn transfer_exit(failure: &roncho::transfer::Failure) -> roncho::oneshot::Exit {
    use roncho::transfer::Failure;
    match failure {
        Failure::Api(error) => roncho::oneshot::Exit::of(error),
        Failure::Data(_) | Failure::Io(_) => roncho::oneshot::Exit::Invalid,
    }
}

/// `roncho export`: the JSON lines to standard output or `--output`; what
/// was written to standard error (`--json`: as JSON).
async fn export_command(
    flags: CommonFlags,
    reach: ReachFlags,
    peer: Option<String>,
    session: Option<String>,
    output: Option<PathBuf>,
) -> anyhow::Result<()> {
    let json = reach.json;
    let reached = reach_server(flags, reach, Needs::Calls).await;
    let workspace = workspace_of(reached.workspace.clone());
    let written = roncho::transfer::Output::open(output.as_deref())
        .unwrap_or_else(|failure| fail(transfer_exit(&failure), &failure.to_string()));
    let exported = roncho::transfer::export(
        &reached.server,
        &workspace,
        peer.as_deref(),
        session.as_deref(),
        written,
    )
    .await
    .unwrap_or_else(|failure| fail(transfer_exit(&failure), &format!("{}: {failure}", reached.base)));
    if json {
        eprintln!(
            "{}",
            serde_json::json!({"records": exported.records, "bytes": exported.bytes})
        );
    } else {
        eprintln!(
            "exported {} records ({} bytes) of workspace {workspace}",
            exported.records, exported.bytes
        );
    }
    Ok(())
}

/// `roncho import FILE`: checks the whole file, then sends it in batches;
/// prints the counts (`--json`: as JSON).
async fn import_command(
    flags: CommonFlags,
    reach: ReachFlags,
    file: PathBuf,
    batch: usize,
    derive: bool,
) -> anyhow::Result<()> {
    let json = reach.json;
    let reached = reach_server(flags, reach, Needs::Import).await;
    let export =
        roncho::transfer::read(&file).unwrap_or_else(|failure| fail(transfer_exit(&failure), &failure.to_string()));
    let workspace = reached.workspace.clone().unwrap_or_else(|| export.workspace.clone());
    let workspace = workspace_of(Some(workspace).filter(|workspace| !workspace.is_empty()));
    let total = export.records.len();
    let counts = roncho::transfer::import(&reached.server, &workspace, &export, batch, derive, |sent| {
        if !json && total > batch {
            eprintln!("imported {sent} of {total} records");
        }
    })
    .await
    .unwrap_or_else(|failure| fail(transfer_exit(&failure), &format!("{}: {failure}", reached.base)));
    if json {
        println!("{}", serde_json::to_string(&counts)?);
    } else {
        print!("{counts}");
    }
    reached.close().await;
    Ok(())
}

/// `roncho mcp`: MCP on stdio, over a roncho server's REST edge (`--addr`)
/// or over an embedded server in this process, private to it (no port:
/// its REST router is called in process). Answers `initialize` at once;
/// the embedded server starts meanwhile, and the first tool call waits
/// for it.
async fn roncho_mcp_command(mut flags: CommonFlags, mcp: McpFlags) -> anyhow::Result<()> {
    let profile = roncho_mcp::Profile::parse(&mcp.profile)
        .with_context(|| format!("--profile `{}`: expected `honcho` or `memory`", mcp.profile))?;
    let key = mcp
        .key
        .clone()
        .or_else(|| std::env::var("RONCHO_API_KEY").ok())
        .filter(|key| !key.trim().is_empty());
    let claims = key.as_deref().and_then(roncho_gate::keys::peek_claims);
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
            "roncho mcp opens no port (MCP is on stdio, and its memory is reached in process): drop --listen and \
             --rest-listen; for MCP over HTTP, `roncho serve` serves /mcp on its REST port"
        );
    }
    let config = flags.load()?;
    // A server with a local key keeps its admin key in its data directory.
    let key = match (&key, &mcp.addr) {
        (None, Some(addr)) => roncho::local_key::admin_key_for(&config.store.data_dir, addr)?,
        _ => key,
    };
    let (upstream, server) = match &mcp.addr {
        Some(addr) => {
            let _logs = Telemetry::init(&config, false)?;
            let upstream = roncho_mcp::Upstream::remote(addr).map_err(|error| anyhow::anyhow!("{error}"))?;
            (upstream, None)
        }
        None => {
            // Private to this process: no listener, the REST router called
            // in process, so no other process on the machine reaches it;
            // nor another user its files.
            if config.is_embedded() {
                roncho::local_key::make_private(&config.store.data_dir)?;
            }
            let (handed, started) = tokio::sync::watch::channel(None);
            let stop = CancellationToken::new();
            let launch = Launch {
                rest: Some(roncho::server::RestEdge::InProcess(Arc::new(handed))),
                stop: stop.clone(),
                oneshot: false,
            };
            let server = tokio::spawn(async move {
                let result = serve(config, launch).await;
                if let Err(error) = &result {
                    // stdout is the protocol's: say it on stderr, and end, so the client sees the server gone.
                    eprintln!("roncho mcp: the embedded server stopped: {error:#}");
                    std::process::exit(1);
                }
                result
            });
            (roncho_mcp::Upstream::Starting(started), Some((server, stop)))
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// A value of each kind a flag can take.
    const SAMPLES: [&str; 3] = ["127.0.0.1:9", "/tmp/roncho-flag", "postgres://db/roncho"];

    #[test]
    fn every_flag_sets_the_setting_of_its_name_and_the_docs_say_so() {
        let docs = include_str!("../../../docs/configuration.md");
        let command = Cli::command();
        let serve = command.find_subcommand("serve").expect("roncho serve");
        let flags: Vec<&str> = serve.get_arguments().filter_map(|arg| arg.get_long()).collect();
        assert!(flags.len() > 10, "{flags:?}");
        for flag in flags.into_iter().filter(|flag| !matches!(*flag, "config" | "help")) {
            let key = flag.replace('-', "_");
            let section = ConfigLayer::section_of(&key).unwrap_or_else(|| panic!("--{flag} names no setting"));
            let parsed = SAMPLES.iter().find_map(|sample| {
                let mut arguments = vec!["roncho".to_owned(), "serve".to_owned(), format!("--{flag}")];
                if !matches!(flag, "insecure-no-auth" | "local-key") {
                    arguments.push((*sample).to_owned());
                }
                Cli::try_parse_from(arguments).ok()
            });
            let Some(Cli {
                command: Command::Serve(flags),
            }) = parsed
            else {
                panic!("no sample value parses for --{flag}");
            };
            assert_eq!(flags.layer().given(), [format!("{section}.{key}")], "--{flag}");
            let row = docs
                .lines()
                .find(|line| {
                    line.starts_with("| `")
                        && line
                            .split(" | ")
                            .next()
                            .is_some_and(|cell| cell.contains(&format!("`{key}`")))
                })
                .unwrap_or_else(|| panic!("docs/configuration.md has no row for `{key}`"));
            assert!(
                row.contains(&format!("`--{flag}`")),
                "docs/configuration.md's row for `{key}` does not name --{flag}"
            );
        }
    }
}
