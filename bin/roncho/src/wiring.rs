//! Building the ports a process needs from its configuration: the store, the
//! embedder and vector store for semantic search, and the reconciler.

use std::sync::Arc;

use anyhow::Context;
use roncho_core::activity::WriteActivity;
use roncho_core::embed::Embedder;
use roncho_core::queue::WorkQueue;
use roncho_core::store::SyncLedger;
use roncho_core::vector::VectorStore;
use roncho_embed::cache::{CachedEmbedder, DEFAULT_CAPACITY};
use roncho_llm::Llm;
use roncho_reconciler::{GRACE_WITH_RECONCILER, Reconciler, ReconcilerConfig, TextIndexer};
use roncho_search::Semantic;
use roncho_store::{SqlStore, SqlVectorStore};
use roncho_worker::yielding::{QUIET_BEFORE_BACKGROUND, YieldToWrites};

use crate::config::{
    Config, EmbeddingConfig, EmbeddingProvider, LlmConfig, LlmProvider, LlmRole, QueryPrecision, Role,
};

/// The ports of one process.
pub struct Runtime {
    pub store: Arc<SqlStore>,
    /// `None`: search is full text only, reported as degraded.
    pub semantic: Option<Semantic>,
    /// Present when this process runs the reconciler role with an embedder.
    pub reconciler: Option<Arc<Reconciler>>,
    /// Present when background work (the reconciler role's vectors and, on
    /// Postgres, words; the deriver's work) yields to this process's
    /// writes: it runs beside the ingest role and `background_yield_ms` is
    /// not zero.
    pub write_activity: Option<Arc<WriteActivity>>,
    /// Present when this process runs the reconciler role on a store that
    /// indexes message text off the write path (Postgres).
    pub text_indexer: Option<Arc<TextIndexer>>,
    /// What semantic search runs on, or why it does not, for logs and status.
    pub embedder_description: String,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Runtime")
            .field("embedder", &self.embedder_description)
            .finish_non_exhaustive()
    }
}

/// Returns the local model directory `auto` finds, if any.
pub fn find_model_dir(embedding: &EmbeddingConfig) -> Option<std::path::PathBuf> {
    embedding
        .model_dir
        .iter()
        .chain(&embedding.search_dirs)
        .find(|dir| model_dir_ok(dir))
        .cloned()
}

fn model_dir_ok(dir: &std::path::Path) -> bool {
    ["config.json", "tokenizer.json", "model.safetensors"]
        .iter()
        .all(|file| dir.join(file).is_file())
}

/// Builds the configured embedder; `Ok(None)` means semantic search is off.
pub async fn embedder(embedding: &EmbeddingConfig) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    let precisions = (embedding.query_precision, embedding.document_precision);
    let local = |dir: std::path::PathBuf| async move { load_local(dir, precisions).await };
    let embedder: Arc<dyn Embedder> = match embedding.provider {
        EmbeddingProvider::None => return Ok(None),
        EmbeddingProvider::TestHashing => {
            tracing::warn!("using the test hashing embedder: semantic search quality is meaningless");
            let dimensions = embedding.dimensions.unwrap_or(256);
            match embedding.model_dir.clone() {
                // A benchmark's: the model embeds each query too, at its cost.
                Some(dir) => Arc::new(roncho_embed::testing::QueryCostEmbedder::new(
                    dimensions,
                    local(dir).await?,
                )),
                None => Arc::new(roncho_embed::hashing::TestHashingEmbedder::new(dimensions)),
            }
        }
        EmbeddingProvider::Openai => {
            let mut openai = roncho_embed::openai::OpenAiConfig::new(
                &embedding.base_url,
                &embedding.model,
                embedding.dimensions.context("embedding_dimensions is required")?,
            );
            openai.api_key = embedding.api_key.as_ref().map(|key| key.expose().to_owned());
            Arc::new(roncho_embed::openai::OpenAiEmbedder::new(openai)?)
        }
        EmbeddingProvider::Local => {
            let dir = embedding.model_dir.clone().context("embedding_model_dir is required")?;
            anyhow::ensure!(
                model_dir_ok(&dir),
                "{} does not hold config.json, tokenizer.json and model.safetensors",
                dir.display()
            );
            local(dir).await?
        }
        EmbeddingProvider::Auto => match find_model_dir(embedding) {
            Some(dir) => local(dir).await?,
            None => return Ok(None),
        },
    };
    Ok(Some(Arc::new(CachedEmbedder::new(embedder, DEFAULT_CAPACITY))))
}

#[cfg(feature = "candle")]
async fn load_local(
    dir: std::path::PathBuf,
    (queries, documents): (QueryPrecision, QueryPrecision),
) -> anyhow::Result<Arc<dyn Embedder>> {
    use roncho_embed::bert::{BertEmbedder, QueryPrecision as Precision};
    let shown = dir.display().to_string();
    let precision = |precision| match precision {
        QueryPrecision::Int8 => Precision::Int8,
        QueryPrecision::Float => Precision::Float,
    };
    let (queries, documents) = (precision(queries), precision(documents));
    let loaded = tokio::task::spawn_blocking(move || BertEmbedder::load_with_precisions(&dir, queries, documents))
        .await?
        .with_context(|| format!("loading the embedding model in {shown}"))?;
    tracing::info!(
        model = loaded.model_id(),
        queries = ?loaded.query_precision(),
        documents = ?loaded.document_precision(),
        "local embedding model loaded"
    );
    Ok(Arc::new(loaded))
}

#[cfg(not(feature = "candle"))]
async fn load_local(dir: std::path::PathBuf, _: (QueryPrecision, QueryPrecision)) -> anyhow::Result<Arc<dyn Embedder>> {
    anyhow::bail!(
        "{} holds a local model, but this build has no `candle` feature",
        dir.display()
    )
}

/// A budget of waiting for the writes `activity` watches to pause, for one
/// kind of background work (each has its own).
pub fn yielding_to(activity: &Arc<WriteActivity>, config: &Config) -> Arc<YieldToWrites> {
    Arc::new(YieldToWrites::new(
        activity.clone(),
        QUIET_BEFORE_BACKGROUND,
        config.queue.background_yield,
    ))
}

/// Connects, migrates and builds every port `config` asks for. An embedder
/// whose dimension differs from the stored vectors stops start-up here.
pub async fn build(config: &Config) -> anyhow::Result<Runtime> {
    let options = config.store.options();
    let store = Arc::new(
        with_startup_retries("the database", config.server.startup_timeout, || {
            roncho_store::connect(&options)
        })
        .await?,
    );
    // sqlx takes a migration lock, so processes starting together do not race.
    roncho_store::migrate(&store).await?;
    let embedder = embedder(&config.search.embedding).await?;
    // Beside the writes of its own process, on the same cores, background
    // work lets write bursts pass first (docs/operations.md).
    let write_activity = (config.server.roles.contains(&Role::Ingest)
        && (config.server.roles.contains(&Role::Reconciler) || config.server.roles.contains(&Role::Deriver))
        && !config.queue.background_yield.is_zero())
    .then(|| Arc::new(WriteActivity::default()));
    let text_indexer = match config.server.roles.contains(&Role::Reconciler) {
        true if store.text_index_mark().await?.is_some() => {
            // Beside a vector reconciler, which indexes a message's text as it
            // marks its vector synced, the indexer takes what it did not reach.
            let grace = match embedder {
                Some(_) => GRACE_WITH_RECONCILER,
                None => std::time::Duration::ZERO,
            };
            let indexer = TextIndexer::new(store.clone(), grace, config.queue.reconciler_interval);
            Some(Arc::new(match &write_activity {
                Some(activity) => indexer.yielding_to_writes(activity.clone(), QUIET_BEFORE_BACKGROUND),
                None => indexer,
            }))
        }
        _ => None,
    };
    let writes_and_reads = config.server.roles.contains(&Role::Ingest) || config.server.roles.contains(&Role::Recall);
    if !config.server.roles.contains(&Role::Reconciler) && writes_and_reads && store.text_index_mark().await?.is_some()
    {
        // Nothing here indexes words or syncs vectors: unless another
        // process runs the reconciler role, search soon answers partially.
        tracing::warn!(
            roles = ?config.server.roles.iter().map(|role| role.name()).collect::<Vec<_>>(),
            "degraded unless another process runs the reconciler role: without one, messages' words are never \
             text-indexed nor their vectors synced, and searches past the newest messages say their results are \
             partial (roncho status shows the backlog)"
        );
    }
    let Some(embedder) = embedder else {
        let why = match config.search.embedding.provider {
            EmbeddingProvider::None => "off (embedding_provider = none)".to_owned(),
            _ => format!(
                "off: no local model found in {}; run scripts/fetch-bge-small.sh or configure an embedder",
                config
                    .search
                    .embedding
                    .search_dirs
                    .iter()
                    .map(|dir| dir.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        store.maintain_full_text_index(true).await?;
        return Ok(Runtime {
            store,
            semantic: None,
            reconciler: None,
            write_activity,
            text_indexer,
            embedder_description: why,
        });
    };
    let mut warm = None;
    // Whether the database's own full-text index must be kept: the embedded
    // vector store ranks words itself, and SQLite's FTS5 then rests.
    let mut database_ranks_words = true;
    let (vectors, where_vectors): (Arc<dyn VectorStore>, String) = match &config.search.qdrant {
        Some(qdrant) => {
            let mut options = roncho_qdrant::QdrantOptions::new(&qdrant.url);
            options.collection = qdrant.collection.clone();
            options.api_key = qdrant.api_key.as_ref().map(|key| key.expose().to_owned());
            let store = roncho_qdrant::QdrantVectorStore::connect(&options)?.counting_terms_in(store.clone());
            (
                Arc::new(store),
                format!("qdrant {} collection {}", qdrant.url, qdrant.collection),
            )
        }
        None => {
            let vectors = SqlVectorStore::new(store.clone());
            database_ranks_words = !vectors.ranks_words();
            warm = Some(vectors.clone());
            (Arc::new(vectors), "exact vector store".to_owned())
        }
    };
    match vectors
        .check_dimensions(embedder.dimensions(), &embedder.model_id())
        .await
    {
        Ok(()) => {}
        // A vector store that is down must not stop writes: start, search
        // degrades to full text, and the reconciler syncs once it is back.
        Err(roncho_core::Error::Unavailable(reason)) => {
            tracing::warn!(%reason, "the vector store is unreachable at start-up; rows stay pending until it returns");
        }
        Err(error) => return Err(error).with_context(|| format!("checking the vector store ({where_vectors})")),
    }
    if let Some(warm) = warm.filter(|_| config.server.roles.contains(&Role::Recall)) {
        // What a restart's first search would wait for, loaded before it comes.
        tokio::spawn(async move {
            if let Err(error) = warm.warm().await {
                tracing::warn!(%error, "search indexes were not loaded at start-up; each search loads its own");
            }
        });
    }
    store.maintain_full_text_index(database_ranks_words).await?;
    let description = format!(
        "{} ({} dimensions), {where_vectors}",
        embedder.model_id(),
        embedder.dimensions()
    );
    let reconciler = config.server.roles.contains(&Role::Reconciler).then(|| {
        let reconciler = Reconciler::new(
            store.clone(),
            embedder.clone(),
            vectors.clone(),
            ReconcilerConfig {
                interval: config.queue.reconciler_interval,
                ..ReconcilerConfig::default()
            },
        );
        Arc::new(match &write_activity {
            Some(activity) => reconciler.yielding_to_writes(yielding_to(activity, config)),
            None => reconciler,
        })
    });
    Ok(Runtime {
        store,
        semantic: Some(Semantic::new(embedder, vectors)),
        reconciler,
        write_activity,
        text_indexer,
        embedder_description: description,
    })
}

/// Retries `attempt` while it fails with `UNAVAILABLE` (a dependency that
/// is not up yet: processes start in any order), backing off from 0.5 s to
/// 15 s, for up to `limit`; any other error, or the last one, is returned.
pub async fn with_startup_retries<T, F, Fut>(
    what: &str,
    limit: std::time::Duration,
    mut attempt: F,
) -> roncho_core::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = roncho_core::Result<T>>,
{
    let started = tokio::time::Instant::now();
    let mut backoff = std::time::Duration::from_millis(500);
    loop {
        match attempt().await {
            Err(roncho_core::Error::Unavailable(reason)) if started.elapsed() + backoff < limit => {
                tracing::warn!(%reason, retry_in = ?backoff, "{what} is not reachable yet; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(std::time::Duration::from_secs(15));
            }
            result => return result,
        }
    }
}

/// The LLM of every role that has one, each built once.
#[derive(Clone, Default)]
pub struct Models(std::collections::BTreeMap<LlmRole, Arc<dyn Llm>>);

impl Models {
    /// Builds the model (or fallback chain) of every role `config` names.
    pub fn build(config: Option<&LlmConfig>) -> anyhow::Result<Self> {
        let mut models = std::collections::BTreeMap::new();
        for role in config.into_iter().flat_map(|config| config.roles.keys()) {
            if let Some(built) = llm(config, *role)? {
                models.insert(*role, built);
            }
        }
        Ok(Self(models))
    }

    /// The LLM of `role`; `None`: the role runs extractively (or not at all).
    pub fn get(&self, role: LlmRole) -> Option<Arc<dyn Llm>> {
        self.0.get(&role).cloned()
    }

    /// The model id of `role`'s LLM.
    pub fn model_id(&self, role: LlmRole) -> Option<String> {
        self.0.get(&role).map(|llm| llm.model_id())
    }
}

/// Builds the LLM of `role`: its model, or its fallback chain; `None` when
/// the role has no model (it runs extractively).
pub fn llm(config: Option<&LlmConfig>, role: LlmRole) -> anyhow::Result<Option<Arc<dyn Llm>>> {
    let Some((config, models)) = config.and_then(|config| Some((config, config.roles.get(&role)?))) else {
        return Ok(None);
    };
    let mut chain = Vec::with_capacity(models.chain.len());
    for model in &models.chain {
        let endpoint = config
            .endpoints
            .get(&model.provider)
            .with_context(|| format!("no endpoint for {model}"))?;
        let mut settings = roncho_llm::ProviderConfig::new(&endpoint.base_url, &model.model);
        settings.api_key = endpoint.api_key.as_ref().map(|key| key.expose().to_owned());
        settings.timeout = config.timeout;
        settings.retry.max_retries = config.max_retries;
        if model.provider == LlmProvider::Openai {
            settings.max_concurrent = usize::try_from(config.max_concurrent_requests).unwrap_or(usize::MAX);
            settings.structured = config.structured_output;
        }
        let built: Arc<dyn Llm> = match model.provider {
            LlmProvider::Openai => Arc::new(roncho_llm::openai::OpenAiChat::new(settings)?),
            LlmProvider::Anthropic => Arc::new(roncho_llm::anthropic::AnthropicChat::new(settings)?),
            LlmProvider::Gemini => Arc::new(roncho_llm::gemini::GeminiChat::new(settings)?),
        };
        chain.push(crate::observe::ObservedLlm::wrap(built, crate::metrics::global()));
    }
    Ok(Some(if chain.len() == 1 {
        chain.remove(0)
    } else {
        Arc::new(roncho_llm::FallbackChain::new(chain))
    }))
}

/// Builds the dialectic with each level's configured model (levels without
/// one answer extractively).
pub fn dialectic(
    config: &Config,
    store: &Arc<SqlStore>,
    semantic: &Option<roncho_search::Semantic>,
    models: &Models,
) -> roncho_dialectic::Dialectic {
    use roncho_dialectic::agent::Level;
    let mut dialectic = roncho_dialectic::Dialectic::new(store.clone(), semantic.clone());
    for ((level, role), timeout) in [
        (Level::Minimal, LlmRole::DialecticMinimal),
        (Level::Low, LlmRole::DialecticLow),
        (Level::Medium, LlmRole::DialecticMedium),
        (Level::High, LlmRole::DialecticHigh),
        (Level::Max, LlmRole::DialecticMax),
    ]
    .into_iter()
    .zip(config.limits.dialectic_timeouts)
    {
        if let Some(timeout) = timeout {
            dialectic = dialectic.with_deadline(level, timeout);
        }
        if let Some(llm) = models.get(role) {
            dialectic = dialectic.with_model(level, llm, LlmConfig::max_tokens(config.llm.as_ref(), role));
        }
    }
    dialectic
}

/// The work queue of a process, and the NATS queue itself when that is it.
pub struct Queue {
    pub queue: Arc<dyn WorkQueue>,
    /// Set in the distributed mode: ingest kicks its relay after writes.
    pub nats: Option<roncho_nats::NatsWorkQueue>,
}

/// Builds the configured work queue: NATS JetStream over the store's task
/// ledger, or the SQL queue in the store itself. A process with the
/// deriver role consumes representation and summary work.
pub async fn work_queue(config: &Config, store: &Arc<SqlStore>, models: &Models) -> anyhow::Result<Queue> {
    let ledger = Arc::new(roncho_store::SqlWorkQueue::new(store.clone()));
    let Some(nats) = &config.queue.nats else {
        return Ok(Queue {
            queue: ledger,
            nats: None,
        });
    };
    let mut options = nats.options();
    if config.server.roles.contains(&Role::Deriver) {
        options
            .consume
            .extend(roncho_deriver::worker::TASK_TYPES.map(str::to_owned));
        options
            .consume
            .extend(roncho_deriver::webhooks::TASK_TYPES.map(str::to_owned));
    }
    if config.server.roles.contains(&Role::Dreamer) && models.get(LlmRole::Dream).is_some() {
        options
            .consume
            .extend(roncho_dreamer::worker::TASK_TYPES.map(str::to_owned));
    }
    let queue = with_startup_retries("NATS", config.server.startup_timeout, || {
        roncho_nats::NatsWorkQueue::connect(options.clone(), ledger.clone())
    })
    .await
    .with_context(|| {
        format!(
            "connecting the NATS work queue at {}",
            roncho_store::redact_url(&nats.url)
        )
    })?;
    tracing::info!(url = %roncho_store::redact_url(&nats.url), prefix = %nats.prefix, partitions = nats.partitions, "work queue: NATS JetStream");
    Ok(Queue {
        queue: Arc::new(queue.clone()),
        nats: Some(queue),
    })
}

/// Returns the key set of the configured secrets; `None`: authentication is off.
pub fn key_set(config: &Config) -> anyhow::Result<Option<Arc<roncho_gate::keys::KeySet>>> {
    if !config.auth.enabled() {
        return Ok(None);
    }
    let keys = if config.auth.secrets.is_empty() {
        let secret = crate::local_key::load_or_create(&config.store.data_dir)?;
        roncho_gate::keys::KeySet::new(&[secret])?
    } else {
        let secrets: Vec<&str> = config.auth.secrets.iter().map(|secret| secret.expose()).collect();
        if secrets.iter().any(|secret| secret.len() < 32) {
            tracing::warn!("an auth_jwt_secret is shorter than 32 bytes: keys signed with it can be brute-forced");
        }
        roncho_gate::keys::KeySet::new(&secrets)?
    };
    Ok(Some(Arc::new(keys.multi_tenant(config.auth.multi_tenant))))
}
