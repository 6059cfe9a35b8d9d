//! `roncho status`: what this configuration connects to, and what is degraded.

use std::time::Duration;

use roncho_core::store::{Health, SyncLedger};
use roncho_qdrant::WordRanking;
use serde_json::{Value, json};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::config::Config;

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// Runs every check of `config` and returns them in report order. The
/// checks run at once, so several dependencies that do not answer cost one
/// time-out, not one each (`roncho status` is a container health check).
pub async fn checks(config: &Config) -> Vec<Check> {
    let (mut checks, server, semantic, vector_store, nats, tracing, metrics, agents) = tokio::join!(
        store_checks(config),
        server_check(config),
        semantic_check(config),
        vector_store_check(config),
        nats_check(config),
        tracing_check(config),
        metrics_check(config),
        agents_check(config),
    );
    let embedded = if config.is_embedded() {
        "embedded"
    } else {
        "distributed"
    };
    let mode = Check {
        name: "mode",
        ok: true,
        detail: format!(
            "{embedded}; roles {}",
            config
                .server
                .roles
                .iter()
                .map(|role| role.name())
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    checks.extend([server, mode, auth_check(config), semantic, vector_store]);
    checks.extend(nats);
    checks.push(tracing);
    checks.extend(metrics);
    checks.push(agents);
    checks
}

/// Whether callers must present keys.
fn auth_check(config: &Config) -> Check {
    let (ok, detail) = match (config.auth.enabled(), config.server.listen.ip().is_loopback()) {
        (true, _) if config.auth.secrets.is_empty() => (
            true,
            format!(
                "keys required: the local key (admin key in {})",
                crate::local_key::admin_key_path(&config.store.data_dir).display()
            ),
        ),
        (true, _) => (
            true,
            format!(
                "keys required (HS256 JWTs; {} secret(s) accepted)",
                config.auth.secrets.len()
            ),
        ),
        (false, true) => (
            true,
            "off: every caller is admin (loopback only; set auth_jwt_secret to require keys)".to_owned(),
        ),
        (false, false) if config.auth.insecure_no_auth => (
            false,
            format!(
                "OFF on {} (--insecure-no-auth): anyone who reaches it can read, write and delete every workspace",
                config.server.listen
            ),
        ),
        (false, false) => (
            false,
            format!(
                "off on {}: the server refuses to start this way (set auth_jwt_secret)",
                config.server.listen
            ),
        ),
    };
    Check {
        name: "auth",
        ok,
        detail,
    }
}

/// The metrics endpoint, when one is configured.
async fn metrics_check(config: &Config) -> Option<Check> {
    let address = config.telemetry.metrics_listen?;
    let reached = reachable_address(&address.to_string()).await;
    Some(Check {
        name: "metrics",
        ok: reached.is_ok(),
        detail: match reached {
            Ok(()) => format!("served at http://{address}/metrics"),
            Err(error) => format!("nothing answers at {address} ({error})"),
        },
    })
}

/// The agents' models, and whether their providers can be reached.
async fn agents_check(config: &Config) -> Check {
    // Extractive agents and capabilities not built yet are degraded, never hidden.
    let models = match &config.llm {
        Some(llm) => llm.describe(),
        None => "no LLM configured: the deriver and the dialectic are extractive (conclusions quote messages, \
                 summaries list turns, answers quote memory with ids) and dreams cannot run"
            .to_owned(),
    };
    let every_role = config
        .llm
        .as_ref()
        .is_some_and(|llm| llm.roles.len() == crate::config::LlmRole::ALL.len());
    // A provider nobody can reach fails every call of its roles: say so now.
    let endpoints: Vec<_> = config.llm.iter().flat_map(|llm| &llm.endpoints).collect();
    let reached = futures::future::join_all(endpoints.iter().map(|(_, endpoint)| reachable(&endpoint.base_url))).await;
    let unreachable: Vec<String> = endpoints
        .iter()
        .zip(reached)
        .filter_map(|((provider, endpoint), reached)| {
            let error = reached.err()?;
            Some(format!(
                "{} at {} is unreachable ({error})",
                provider.name(),
                roncho_store::redact_url(&endpoint.base_url)
            ))
        })
        .collect();
    let ok = every_role && unreachable.is_empty();
    Check {
        name: "agents",
        ok,
        detail: if ok {
            models
        } else {
            let mut problems = unreachable;
            problems.push(models);
            format!("degraded: {}", problems.join("; "))
        },
    }
}

/// Where spans go: nowhere, or a collector that does or does not answer.
async fn tracing_check(config: &Config) -> Check {
    let Some(tracing) = &config.telemetry.tracing else {
        return Check {
            name: "tracing",
            ok: true,
            detail: "off (otlp_endpoint unset)".into(),
        };
    };
    match reachable(&tracing.endpoint).await {
        Ok(()) => Check {
            name: "tracing",
            ok: true,
            detail: format!(
                "OTLP to {} as {}, sampling {}",
                roncho_store::redact_url(&tracing.endpoint),
                tracing.service_name,
                tracing.sample_ratio
            ),
        },
        Err(error) => Check {
            name: "tracing",
            ok: false,
            detail: format!(
                "degraded: the collector at {} is unreachable ({error}); spans are dropped",
                roncho_store::redact_url(&tracing.endpoint)
            ),
        },
    }
}

/// Opens (and closes) a TCP connection to an `http(s)://host[:port]/...`
/// URL's host within 3 s.
pub async fn reachable(url: &str) -> Result<(), String> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| format!("`{url}` is not a URL"))?;
    let authority = rest.split('/').next().unwrap_or_default();
    let authority = authority.rsplit('@').next().unwrap_or_default();
    let has_port = match authority.rfind(']') {
        Some(bracket) => authority[bracket..].contains(':'),
        None => authority.contains(':'),
    };
    let address = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:{}", if scheme == "https" { 443 } else { 80 })
    };
    reachable_address(&address).await
}

async fn reachable_address(address: &str) -> Result<(), String> {
    match tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("no answer within 3 s".into()),
    }
}

async fn semantic_check(config: &Config) -> Check {
    use crate::config::EmbeddingProvider;
    let embedding = &config.search.embedding;
    let (ok, detail) = match embedding.provider {
        EmbeddingProvider::None => (
            false,
            "degraded: off (embedding_provider = none); search is full text only".to_owned(),
        ),
        EmbeddingProvider::TestHashing => (false, "degraded: the test hashing embedder is configured".to_owned()),
        EmbeddingProvider::Openai => match reachable(&embedding.base_url).await {
            Ok(()) => (
                true,
                format!(
                    "{} at {}",
                    embedding.model,
                    roncho_store::redact_url(&embedding.base_url)
                ),
            ),
            Err(error) => (
                false,
                format!(
                    "degraded: the embedder at {} is unreachable ({error}); new rows wait unembedded, search is full text",
                    roncho_store::redact_url(&embedding.base_url)
                ),
            ),
        },
        EmbeddingProvider::Local | EmbeddingProvider::Auto => match crate::wiring::find_model_dir(embedding) {
            Some(dir) => (true, format!("local model {}", dir.display())),
            None => (
                false,
                "degraded: no local model found; run scripts/fetch-bge-small.sh, search is full text only".to_owned(),
            ),
        },
    };
    Check {
        name: "semantic search",
        ok,
        detail,
    }
}

async fn vector_store_check(config: &Config) -> Check {
    let Some(qdrant) = &config.search.qdrant else {
        let detail = if config.is_embedded() {
            "in memory beside the rows: vectors scanned, full text ranked by an in-memory index"
        } else {
            "exact search in the database, full text ranked by the database (small workspaces: see docs/operations.md)"
        };
        return Check {
            name: "vector store",
            ok: true,
            detail: detail.into(),
        };
    };
    let mut options = roncho_qdrant::QdrantOptions::new(&qdrant.url);
    options.collection = qdrant.collection.clone();
    options.api_key = qdrant.api_key.as_ref().map(|key| key.expose().to_owned());
    options.timeout = Duration::from_secs(3);
    let health = match roncho_qdrant::QdrantVectorStore::connect(&options) {
        Ok(store) => match store.health().await {
            Ok(version) => store.word_ranking().await.map(|ranking| (version, ranking)),
            Err(error) => Err(error),
        },
        Err(error) => Err(error),
    };
    match health {
        Ok((version, ranking)) => Check {
            name: "vector store",
            ok: true,
            detail: format!(
                "qdrant {version} at {}, collection {}; full text ranked {}",
                roncho_store::redact_url(&qdrant.url),
                qdrant.collection,
                match ranking {
                    WordRanking::Database =>
                        "by the database (the collection predates lexical vectors: see docs/operations.md)",
                    WordRanking::Collection =>
                        "in qdrant, words weighed over every workspace of the collection (it predates \
                         per-workspace term counts: see docs/operations.md)",
                    WordRanking::Workspace => "in qdrant, words weighed over each workspace",
                }
            ),
        },
        Err(error) => Check {
            name: "vector store",
            ok: false,
            detail: format!(
                "degraded: qdrant at {} unreachable ({error}); search is full text only",
                roncho_store::redact_url(&qdrant.url)
            ),
        },
    }
}

/// The NATS work queue: reachable, and how much work is in flight.
async fn nats_check(config: &Config) -> Option<Check> {
    let nats = config.queue.nats.as_ref()?;
    let url = roncho_store::redact_url(&nats.url);
    let mut options = config.store.options();
    options.max_connections = 1;
    let store = std::sync::Arc::new(roncho_store::connect(&options).await.ok()?);
    let ledger = roncho_store::SqlWorkQueue::new(store.clone());
    let unpublished = roncho_core::queue::DeliveryLedger::unpublished(&ledger, 10_000, None)
        .await
        .map(|rows| rows.len())
        .unwrap_or(0);
    let mut queue = nats.options();
    queue.relay = false;
    let check = match roncho_nats::NatsWorkQueue::connect(queue, std::sync::Arc::new(ledger)).await {
        Ok(queue) => {
            let waiting = queue.stream_messages().await;
            roncho_core::queue::WorkQueue::close(&queue).await;
            match waiting {
                Ok(waiting) => Check {
                    name: "nats",
                    ok: true,
                    detail: format!(
                        "{url}: stream {}_work holds {waiting} undelivered or unacked tasks; {unpublished} waiting to be published",
                        nats.prefix
                    ),
                },
                Err(error) => Check {
                    name: "nats",
                    ok: false,
                    detail: format!("{url}: {error}"),
                },
            }
        }
        Err(error) => Check {
            name: "nats",
            ok: false,
            detail: format!("degraded: {error}; new work waits in the outbox ({unpublished} tasks) until NATS is back"),
        },
    };
    store.close().await;
    Some(check)
}

/// How far a kind of vector is behind: counts by state, and how long the
/// oldest pending row has waited (its meaning is not searchable yet).
fn sync_detail(counts: &roncho_core::model::SyncCounts, now: i64) -> String {
    let behind = match counts.oldest_pending_at {
        Some(written) if counts.pending > 0 => format!(
            " (meaning {:.1} s behind the writes)",
            now.saturating_sub(written).max(0) as f64 / 1e6
        ),
        _ => String::new(),
    };
    format!(
        "{} synced, {} pending{behind}, {} failed",
        counts.synced, counts.pending, counts.failed
    )
}

async fn store_checks(config: &Config) -> Vec<Check> {
    let check = store_check(config).await;
    if !check.ok {
        return vec![check];
    }
    let mut options = config.store.options();
    options.max_connections = 1;
    let mut checks = vec![check];
    if let Ok(store) = roncho_store::connect(&options).await {
        for kind in [
            roncho_core::model::SyncKind::Message,
            roncho_core::model::SyncKind::Conclusion,
        ] {
            if let Ok(counts) = store.sync_counts(kind).await {
                checks.push(Check {
                    name: if kind == roncho_core::model::SyncKind::Message {
                        "message vectors"
                    } else {
                        "conclusion vectors"
                    },
                    ok: counts.failed == 0,
                    detail: sync_detail(&counts, roncho_core::model::now_micros()),
                });
            }
        }
        if let (Ok(Some(_)), Ok(waiting)) = (store.text_index_mark().await, store.text_index_backlog().await) {
            checks.push(Check {
                name: "message text index",
                // Past the tail matched on the fly, searches can miss words: degraded.
                ok: waiting <= roncho_store::TEXT_TAIL,
                detail: text_index_detail(waiting),
            });
        }
        let store = std::sync::Arc::new(store);
        if let Ok(counts) = roncho_store::SqlWorkQueue::new(store.clone()).totals().await {
            checks.push(Check {
                name: "work queue",
                ok: counts.failed == 0,
                detail: format!(
                    "{} pending, {} in progress, {} completed, {} failed{}",
                    counts.pending,
                    counts.in_progress,
                    counts.completed,
                    counts.failed,
                    if counts.failed > 0 {
                        " (GetQueueStatus lists them with their errors)"
                    } else {
                        ""
                    }
                ),
            });
        }
        if let Ok(degraded) = roncho_core::store::DerivationHealth::degraded_derivations(store.as_ref()).await {
            checks.push(derivation_check(&degraded));
        }
        store.close().await;
    }
    checks
}

/// Workspaces whose model derivations keep giving no observations.
fn derivation_check(degraded: &[roncho_core::store::DerivationRecord]) -> Check {
    Check {
        name: "derivation",
        ok: degraded.is_empty(),
        detail: if degraded.is_empty() {
            "no workspace's derivations are degraded".to_owned()
        } else {
            let reasons: Vec<String> = degraded
                .iter()
                .filter_map(|record| Some(format!("workspace `{}`: {}", record.workspace_id, record.degraded()?)))
                .collect();
            format!("degraded: {}", reasons.join("; "))
        },
    }
}

/// What `roncho status` says of Postgres' full-text indexing backlog.
fn text_index_detail(waiting: i64) -> String {
    if waiting == 0 {
        return "every message's words are indexed".to_owned();
    }
    format!(
        "{waiting} messages waiting for their words to be indexed (by the reconciler role: is one running?); \
         search matches the newest {} of the store's messages, and a session's newest {} of its own, on the \
         fly meanwhile, and says when its results are partial",
        roncho_store::TEXT_TAIL,
        roncho_store::SESSION_TEXT_SCAN
    )
}

async fn store_check(config: &Config) -> Check {
    let embedded_file = config.store.data_dir.join("roncho.db");
    if config.is_embedded() && !embedded_file.exists() {
        // Opening would create it; status only looks.
        return Check {
            name: "store",
            ok: false,
            detail: format!(
                "no database at {} yet: `roncho serve` or `roncho migrate` creates it",
                embedded_file.display()
            ),
        };
    }
    let mut options = config.store.options();
    options.acquire_timeout = Duration::from_secs(3);
    options.max_connections = 1;
    let store = match roncho_store::connect(&options).await {
        Ok(store) => store,
        Err(error) => {
            return Check {
                name: "store",
                ok: false,
                detail: error.to_string(),
            };
        }
    };
    let check = match store.info().await {
        Ok(info) => {
            let latest = roncho_store::latest_schema_version(store.dialect());
            let schema = match info.schema_version {
                Some(version) if version >= latest => format!("schema {version} (current)"),
                Some(version) => format!("schema {version}, {latest} available: run `roncho migrate`"),
                None => "not migrated: run `roncho migrate`".to_owned(),
            };
            Check {
                name: "store",
                ok: info.schema_version.is_some_and(|version| version >= latest),
                detail: format!("{} at {}; {schema}", info.backend, info.location),
            }
        }
        Err(error) => Check {
            name: "store",
            ok: false,
            detail: error.to_string(),
        },
    };
    store.close().await;
    check
}

async fn server_check(config: &Config) -> Check {
    // Health is served in plain text on health_listen too; over TLS alone
    // this process may not hold what the server asks of clients.
    let address = match (config.server.health_listen, &config.server.tls) {
        (Some(address), _) => address,
        (None, None) => config.server.listen,
        (None, Some(_)) => {
            return Check {
                name: "server",
                ok: true,
                detail: format!(
                    "{} serves TLS: not checked here (set health_listen for probes and roncho status)",
                    config.server.listen
                ),
            };
        }
    };
    let endpoint = format!("http://{address}");
    let probe = async {
        let channel = tonic::transport::Endpoint::from_shared(endpoint.clone())?
            .connect_timeout(Duration::from_secs(2))
            .connect()
            .await?;
        let response = HealthClient::new(channel)
            .check(HealthCheckRequest { service: String::new() })
            .await?;
        anyhow::Ok(response.into_inner().status)
    };
    match tokio::time::timeout(Duration::from_secs(3), probe).await {
        Ok(Ok(status)) if status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32 => Check {
            name: "server",
            ok: true,
            detail: format!("{} is serving", config.server.listen)
                + &config.server.tls.as_ref().map_or(String::new(), |tls| {
                    format!(
                        " over TLS{} (health checked on {address})",
                        if tls.client_ca.is_some() {
                            " with client certificates"
                        } else {
                            ""
                        }
                    )
                }),
        },
        Ok(Ok(status)) => Check {
            name: "server",
            ok: false,
            detail: format!("{address} reports health status {status}"),
        },
        Ok(Err(error)) => Check {
            name: "server",
            ok: false,
            detail: format!("{address} is not reachable: {error}") + &served_elsewhere(config),
        },
        Err(_) => Check {
            name: "server",
            ok: false,
            detail: format!("{address} did not answer within 3 s"),
        },
    }
}

/// Where nothing answers at the configured address but a server holds the
/// embedded data directory (started with another `--listen`), who it is.
fn served_elsewhere(config: &Config) -> String {
    if !config.is_embedded() {
        return String::new();
    }
    match crate::dir_lock::holder(&config.store.data_dir) {
        Some(holder) if !holder.oneshot && !holder.in_process => format!(
            "; {} is served by process {}{} on another gRPC address (give its --listen)",
            config.store.data_dir.display(),
            holder.pid,
            holder
                .rest_origin()
                .map_or(String::new(), |rest| format!(" (REST at {rest})"))
        ),
        _ => String::new(),
    }
}

/// Returns whether the checks that a running deployment needs (store, server) pass.
pub fn essentials_ok(checks: &[Check]) -> bool {
    checks
        .iter()
        .filter(|check| matches!(check.name, "store" | "server"))
        .all(|check| check.ok)
}

/// Returns the report as JSON.
pub fn to_json(config: &Config, checks: &[Check]) -> Value {
    json!({
        "config": config.redacted(),
        "checks": checks.iter().map(|check| json!({"name": check.name, "ok": check.ok, "detail": check.detail})).collect::<Vec<_>>(),
    })
}

/// Returns the report as text, one check per line.
pub fn to_text(checks: &[Check]) -> String {
    checks
        .iter()
        .map(|check| {
            format!(
                "{:<14} {:<4} {}",
                check.name,
                if check.ok { "ok" } else { "!!" },
                check.detail
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
