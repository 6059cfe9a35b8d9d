//! `roncho status`: what this configuration connects to, and what is degraded.

use std::time::Duration;

use roncho_core::store::Store;
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

/// Runs every check of `config` and returns them in report order.
pub async fn checks(config: &Config) -> Vec<Check> {
    let mut checks = store_checks(config).await;
    checks.push(server_check(config).await);
    let embedded = if config.is_embedded() {
        "embedded"
    } else {
        "distributed"
    };
    checks.push(Check {
        name: "mode",
        ok: true,
        detail: format!(
            "{embedded}; roles {}",
            config
                .roles
                .iter()
                .map(|role| role.name())
                .collect::<Vec<_>>()
                .join(",")
        ),
    });
    checks.push(semantic_check(config));
    checks.push(vector_store_check(config).await);
    if let Some(check) = nats_check(config).await {
        checks.push(check);
    }
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
    checks.push(Check {
        name: "agents",
        ok: every_role,
        detail: if every_role {
            models
        } else {
            format!("degraded: {models}")
        },
    });
    checks
}

fn semantic_check(config: &Config) -> Check {
    use crate::config::EmbeddingProvider;
    let embedding = &config.embedding;
    let (ok, detail) = match embedding.provider {
        EmbeddingProvider::None => (
            false,
            "degraded: off (embedding_provider = none); search is full text only".to_owned(),
        ),
        EmbeddingProvider::TestHashing => (false, "degraded: the test hashing embedder is configured".to_owned()),
        EmbeddingProvider::Openai => (true, format!("{} at {}", embedding.model, embedding.base_url)),
        EmbeddingProvider::Local | EmbeddingProvider::Auto => match crate::wiring::find_model_dir(embedding) {
            Some(dir) => (true, format!("local model {}", dir.display())),
            None => (
                false,
                "degraded: no local model found; run scripts/fetch-minilm.sh, search is full text only".to_owned(),
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
    let Some(qdrant) = &config.qdrant else {
        return Check {
            name: "vector store",
            ok: true,
            detail: "exact search beside the rows".into(),
        };
    };
    let mut options = roncho_qdrant::QdrantOptions::new(&qdrant.url);
    options.collection = qdrant.collection.clone();
    options.api_key = qdrant.api_key.clone();
    options.timeout = Duration::from_secs(3);
    let health = match roncho_qdrant::QdrantVectorStore::connect(&options) {
        Ok(store) => store.health().await,
        Err(error) => Err(error),
    };
    match health {
        Ok(version) => Check {
            name: "vector store",
            ok: true,
            detail: format!("qdrant {version} at {}, collection {}", qdrant.url, qdrant.collection),
        },
        Err(error) => Check {
            name: "vector store",
            ok: false,
            detail: format!(
                "degraded: qdrant at {} unreachable ({error}); search is full text only",
                qdrant.url
            ),
        },
    }
}

/// The NATS work queue: reachable, and how much work is in flight.
async fn nats_check(config: &Config) -> Option<Check> {
    let nats = config.nats.as_ref()?;
    let url = roncho_store::redact_url(&nats.url);
    let mut options = config.store_options();
    options.max_connections = 1;
    let store = std::sync::Arc::new(roncho_store::connect(&options).await.ok()?);
    let ledger = roncho_store::SqlWorkQueue::new(store.clone());
    let unpublished = ledger
        .unpublished(10_000, None)
        .await
        .map(|rows| rows.len())
        .unwrap_or(0);
    let mut queue = nats.options();
    queue.relay = false;
    let check = match roncho_nats::NatsWorkQueue::connect(queue, ledger).await {
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

async fn store_checks(config: &Config) -> Vec<Check> {
    let check = store_check(config).await;
    if !check.ok {
        return vec![check];
    }
    let mut options = config.store_options();
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
                    detail: format!(
                        "{} synced, {} pending, {} failed",
                        counts.synced, counts.pending, counts.failed
                    ),
                });
            }
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
        store.close().await;
    }
    checks
}

async fn store_check(config: &Config) -> Check {
    let embedded_file = config.data_dir.join("roncho.db");
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
    let mut options = config.store_options();
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
    let endpoint = format!("http://{}", config.listen);
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
            detail: format!("{} is serving", config.listen),
        },
        Ok(Ok(status)) => Check {
            name: "server",
            ok: false,
            detail: format!("{} reports health status {status}", config.listen),
        },
        Ok(Err(error)) => Check {
            name: "server",
            ok: false,
            detail: format!("{} is not reachable: {error}", config.listen),
        },
        Err(_) => Check {
            name: "server",
            ok: false,
            detail: format!("{} did not answer within 3 s", config.listen),
        },
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
