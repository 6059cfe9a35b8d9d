//! `QdrantVectorStore`: roncho's `VectorStore` over Qdrant's gRPC API, for
//! the distributed mode (`--qdrant-url`).
//!
//! # Layout in Qdrant
//! All namespaces share one collection (default `roncho`): one unnamed dense
//! vector per point, cosine distance, and for messages a sparse vector
//! `text` of BM25 term weights ([`roncho_core::lexical`]), so Qdrant ranks
//! both the nearest and the best full-text candidates of a search, side by
//! side (ADR 0007). A query's terms carry their inverse document
//! frequencies over the queried workspace ([`WordRanking::Workspace`]), counted
//! in the database as the store takes the points
//! ([`QdrantVectorStore::counting_terms_in`]): Qdrant's own `Idf` modifier would count
//! them over every workspace of the collection, and a collection made with it
//! (before the counts) keeps it ([`WordRanking::Collection`]). Each point's
//! payload carries
//! - `ns`: the roncho namespace (`msg/{workspace}` or `doc/{ws}/{observer}/{observed}`),
//!   indexed as a keyword with `is_tenant`, so Qdrant co-locates and filters by it;
//! - `rid`: the roncho id of the message or conclusion;
//! - `session`, `peer`, `level`: the fields a query may filter on (keyword indexes);
//! - `passage`: for a message longer than the embedder reads at once, which
//!   of its passages after the first the point holds (absent on the first);
//! - `passages`: on every point of such a message, how many passages it has,
//!   which its rank by meaning allows for
//!   ([`roncho_core::vector::passage_chance`]; a point
//!   synced before this field existed counts as one passage until the
//!   message is synced again).
//!
//! The point id is a UUID derived from `(namespace, rid)` (a later passage:
//! `rid` and its number) by a fixed 128-bit FNV-1a hash, so upserts replace
//! without a lookup; deletes select by `rid` (keyword index), which takes a
//! message's every passage. The collection
//! records the embedding model in its metadata; `check_dimensions` compares
//! the configured size with the collection's and stops start-up on a mismatch.
//! A collection made before the `text` vector existed has no lexical ranking:
//! [`QdrantVectorStore::word_ranking`] says so and full text stays in the
//! database (docs/operations.md says how to move to a new collection).
//!
//! With feature `standin`, [`standin::StandIn`] runs an in-process server
//! speaking the RPCs used here, for tests where Qdrant cannot run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use qdrant_client::Qdrant;
use qdrant_client::QdrantError;
use qdrant_client::qdrant::{
    CollectionExistsRequest, Condition, CreateCollection, CreateFieldIndexCollection, DeletePoints, Distance,
    FieldType, Filter, GetCollectionInfoRequest, KeywordIndexParams, Memory, Modifier, NamedVectors,
    PayloadIndexParams, PointStruct, PointsSelector, QuantizationConfig, QuantizationSearchParams, QuantizationType,
    Query, QueryPoints, ScalarQuantization, ScoredPoint, ScrollPoints, SearchParams, SparseVectorConfig,
    SparseVectorParams, UpsertPoints, Value, Vector, VectorInput, VectorParams, Vectors, VectorsConfig,
    WithPayloadSelector, payload_index_params, points_selector, quantization_config, value, vector_output,
    vectors_config, vectors_output,
};
use roncho_core::lexical::{self, SparseVector};
use roncho_core::store::TermCounter;
use roncho_core::vector::{
    Found, SearchFailure, SearchPlan, VectorFilter, VectorHit, VectorRecord, VectorStore, messages_namespace,
};
use roncho_core::{Error, Result};
use tokio::sync::OnceCell;

#[cfg(feature = "standin")]
pub mod standin;

/// Payload keys.
const NAMESPACE: &str = "ns";
const RONCHO_ID: &str = "rid";
const SESSION: &str = "session";
const PEER: &str = "peer";
const LEVEL: &str = "level";
const PASSAGE: &str = "passage";
const PASSAGES: &str = "passages";
/// The sparse vector of a message's words.
const LEXICAL: &str = "text";
/// Collection metadata keys.
const META_MODEL: &str = "roncho_embedding_model";

/// Points per upsert request.
const UPSERT_BATCH: usize = 256;

/// How to reach Qdrant.
#[derive(Debug, Clone)]
pub struct QdrantOptions {
    /// The gRPC URL, e.g. `http://qdrant:6334`.
    pub url: String,
    pub api_key: Option<String>,
    /// The collection holding every namespace.
    pub collection: String,
    /// Per-request timeout.
    pub timeout: Duration,
}

impl QdrantOptions {
    /// Options for `url` with the default collection and timeouts.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            api_key: None,
            collection: "roncho".into(),
            timeout: Duration::from_secs(10),
        }
    }
}

/// The Qdrant-backed vector store.
pub struct QdrantVectorStore {
    client: Qdrant,
    collection: String,
    url: String,
    /// Set once the collection is known to exist.
    ready: OnceCell<Layout>,
    /// Where the terms of messages' words are counted per workspace, which
    /// weigh a query's words ([`WordRanking::Workspace`]): the database's
    /// sync ledger ([`QdrantVectorStore::counting_terms_in`]).
    term_ledger: Option<Arc<dyn TermCounter>>,
}

/// Where a collection's words are ranked, and over what their weights are
/// counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WordRanking {
    /// In the database: the collection predates the `text` vector.
    Database,
    /// In Qdrant, weighed over every workspace of the collection: it was
    /// made with the `Idf` modifier, before per-workspace term counts.
    Collection,
    /// In Qdrant, weighed over the queried workspace by the counts kept in
    /// the database as messages are upserted.
    Workspace,
}

/// What a collection holds: its dense vectors' size, the model recorded
/// when it was made, and whether it has the lexical `text` vector (and how
/// it is weighed).
#[derive(Debug, Clone, PartialEq)]
struct Layout {
    size: usize,
    model: Option<String>,
    lexical: bool,
    /// Whether Qdrant scales the `text` vector by each term's IDF over the
    /// whole collection (the `Idf` modifier: collections made before
    /// per-workspace term counts); else the query's values carry it.
    collection_idf: bool,
}

impl std::fmt::Debug for QdrantVectorStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdrantVectorStore")
            .field("url", &self.url)
            .field("collection", &self.collection)
            .finish_non_exhaustive()
    }
}

impl QdrantVectorStore {
    /// Returns a store for `options`; connections are made lazily, so an
    /// unreachable Qdrant shows up as `UNAVAILABLE` on first use.
    pub fn connect(options: &QdrantOptions) -> Result<Self> {
        let client = Qdrant::from_url(&options.url)
            .api_key(options.api_key.clone())
            .timeout(options.timeout)
            .connect_timeout(Duration::from_secs(5))
            .skip_compatibility_check()
            .build()
            .map_err(|error| Error::invalid("qdrant_url", format!("{}: {error}", options.url)))?;
        Ok(Self {
            client,
            collection: options.collection.clone(),
            url: options.url.clone(),
            ready: OnceCell::new(),
            term_ledger: None,
        })
    }

    /// Counts the terms of every message upserted in `ledger`, whose
    /// counts per workspace weigh each query's words (searches read them
    /// from the database of their plan). A store without one refuses
    /// messages' words in a collection that weighs per workspace
    /// (`FAILED_PRECONDITION`): uncounted, they would match nothing.
    pub fn counting_terms_in(mut self, ledger: Arc<dyn TermCounter>) -> Self {
        self.term_ledger = Some(ledger);
        self
    }

    /// Returns Qdrant's version, or why it cannot be reached.
    pub async fn health(&self) -> Result<String> {
        let reply = self
            .client
            .health_check()
            .await
            .map_err(|e| qdrant_error("health check", e))?;
        Ok(reply.version)
    }

    /// Deletes the whole collection — every namespace (tests and operators).
    pub async fn drop_collection(&self) -> Result<()> {
        self.client
            .delete_collection(self.collection.clone())
            .await
            .map_err(|e| qdrant_error("delete_collection", e))?;
        Ok(())
    }

    /// Returns the collection's layout, if it exists.
    async fn describe(&self) -> Result<Option<Layout>> {
        let exists = self
            .client
            .collection_exists(CollectionExistsRequest {
                collection_name: self.collection.clone(),
            })
            .await
            .map_err(|e| qdrant_error("collection_exists", e))?;
        if !exists {
            return Ok(None);
        }
        let info = self
            .client
            .collection_info(GetCollectionInfoRequest {
                collection_name: self.collection.clone(),
            })
            .await
            .map_err(|e| qdrant_error("collection_info", e))?;
        let config = info.result.and_then(|info| info.config);
        let size = config
            .as_ref()
            .and_then(|config| config.params.as_ref())
            .and_then(|params| params.vectors_config.as_ref())
            .and_then(|vectors| match &vectors.config {
                Some(vectors_config::Config::Params(params)) => Some(params.size as usize),
                _ => None,
            })
            .ok_or_else(|| {
                Error::FailedPrecondition(format!(
                    "qdrant collection {} has no single unnamed vector: it was not made by roncho; \
                     configure another collection",
                    self.collection
                ))
            })?;
        let text = config
            .as_ref()
            .and_then(|config| config.params.as_ref())
            .and_then(|params| params.sparse_vectors_config.as_ref())
            .and_then(|sparse| sparse.map.get(LEXICAL));
        let (lexical, collection_idf) = (
            text.is_some(),
            text.is_some_and(|params| params.modifier == Some(Modifier::Idf.into())),
        );
        let model = config
            .and_then(|config| config.metadata.get(META_MODEL).cloned())
            .and_then(string_value);
        Ok(Some(Layout {
            size,
            model,
            lexical,
            collection_idf,
        }))
    }

    /// Creates the collection and its payload indexes; another process
    /// creating it first is not an error.
    async fn create(&self, dimensions: usize, model_id: Option<&str>) -> Result<()> {
        let metadata = model_id
            .map(|model| HashMap::from([(META_MODEL.to_owned(), Value::from(model.to_owned()))]))
            .unwrap_or_default();
        let created = self
            .client
            .create_collection(CreateCollection {
                collection_name: self.collection.clone(),
                vectors_config: Some(VectorsConfig {
                    config: Some(vectors_config::Config::Params(VectorParams {
                        size: dimensions as u64,
                        distance: Distance::Cosine.into(),
                        // int8 codes in RAM walk the HNSW graph at a quarter of
                        // the memory traffic; the best are rescored on floats.
                        quantization_config: Some(QuantizationConfig {
                            quantization: Some(quantization_config::Quantization::Scalar(ScalarQuantization {
                                r#type: QuantizationType::Int8.into(),
                                memory: Some(Memory::Pinned.into()),
                                ..Default::default()
                            })),
                        }),
                        ..Default::default()
                    })),
                }),
                sparse_vectors_config: Some(SparseVectorConfig {
                    map: HashMap::from([(
                        LEXICAL.to_owned(),
                        // No `Idf` modifier: it would count terms over every
                        // workspace; queries carry the workspace's own.
                        SparseVectorParams::default(),
                    )]),
                }),
                metadata,
                ..Default::default()
            })
            .await;
        if let Err(error) = created {
            // Lost a race with another process: fine if the collection is there now.
            if self.describe().await?.is_none() {
                return Err(qdrant_error("create_collection", error));
            }
            return Ok(());
        }
        for field in [NAMESPACE, SESSION, PEER, LEVEL, RONCHO_ID] {
            self.index_keyword(field).await?;
        }
        tracing::info!(collection = %self.collection, dimensions, "created qdrant collection");
        Ok(())
    }

    /// Indexes `field` as a keyword (an existing index is kept).
    async fn index_keyword(&self, field: &str) -> Result<()> {
        let params = KeywordIndexParams {
            is_tenant: Some(field == NAMESPACE),
            ..Default::default()
        };
        self.client
            .create_field_index(CreateFieldIndexCollection {
                collection_name: self.collection.clone(),
                wait: Some(true),
                field_name: field.into(),
                field_type: Some(FieldType::Keyword.into()),
                field_index_params: Some(PayloadIndexParams {
                    index_params: Some(payload_index_params::IndexParams::KeywordIndexParams(params)),
                }),
                ..Default::default()
            })
            .await
            .map_err(|e| qdrant_error("create_field_index", e))?;
        Ok(())
    }

    /// Indexes `rid` in a collection made before deletes selected by it (a
    /// no-op where it is); a key that may not index is warned about, and
    /// deletes then filter each namespace's points one by one.
    async fn index_ids(&self) {
        if let Err(error) = self.index_keyword(RONCHO_ID).await {
            tracing::warn!(%error, collection = %self.collection, "could not index `rid`: deletes scan the namespace");
        }
    }

    /// Makes sure the collection exists, creating it for `dimensions`.
    async fn ensure(&self, dimensions: usize, model_id: Option<&str>) -> Result<&Layout> {
        self.ready
            .get_or_try_init(|| async {
                if let Some(layout) = self.describe().await? {
                    self.index_ids().await;
                    return Ok(layout);
                }
                self.create(dimensions, model_id).await?;
                self.describe().await?.ok_or_else(|| {
                    Error::Unavailable(format!(
                        "qdrant collection {} vanished after it was made",
                        self.collection
                    ))
                })
            })
            .await
    }

    fn filter(namespace: &str, filter: &VectorFilter) -> Filter {
        let mut must = vec![Self::scope(namespace)];
        if let Some(sessions) = &filter.session_ids {
            must.push(Condition::matches(SESSION, sessions.clone()));
        }
        if let Some(peer) = &filter.peer_id {
            must.push(Condition::matches(PEER, peer.clone()));
        }
        if let Some(levels) = &filter.levels {
            must.push(Condition::matches(LEVEL, levels.clone()));
        }
        Filter::must(must)
    }

    /// The hits of one query's points, best first; `score` maps a point's
    /// score to the hit's distance.
    fn hits(namespace: &str, points: Vec<ScoredPoint>, score: impl Fn(f32) -> f32) -> Result<Vec<VectorHit>> {
        points
            .into_iter()
            .map(|point| {
                let id = point
                    .payload
                    .get(RONCHO_ID)
                    .cloned()
                    .and_then(string_value)
                    .ok_or_else(|| {
                        Error::Internal(format!("qdrant point in {namespace} has no `{RONCHO_ID}` payload"))
                    })?;
                let passage = integer(&point, PASSAGE).unwrap_or(0);
                Ok(VectorHit {
                    id,
                    distance: score(point.score),
                    passage,
                })
            })
            .collect()
    }

    fn scope(namespace: &str) -> Condition {
        Condition::matches(NAMESPACE, namespace.to_owned())
    }
}

/// The point id of passage `n` (1 and up) of record `id` in `namespace`.
fn passage_point_id(namespace: &str, id: &str, n: u32) -> String {
    point_id(namespace, &format!("{id}\u{1f}{n}"))
}

/// The point id of `(namespace, id)`: a UUID from a 128-bit FNV-1a hash.
pub fn point_id(namespace: &str, id: &str) -> String {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut hash = OFFSET;
    for byte in namespace.bytes().chain([0x1f]).chain(id.bytes()) {
        hash ^= u128::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    uuid_text(&format!("{hash:032x}"))
}

/// Formats 32 hex digits as a UUID (8-4-4-4-12).
fn uuid_text(hex: &str) -> String {
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

fn string_value(value: Value) -> Option<String> {
    match value.kind {
        Some(value::Kind::StringValue(text)) => Some(text),
        _ => None,
    }
}

/// Maps a client error: transport trouble is `UNAVAILABLE` (retried by the
/// reconciler; search degrades), anything else `INTERNAL` with Qdrant's reason.
fn qdrant_error(operation: &str, error: QdrantError) -> Error {
    use tonic::Code;
    match &error {
        QdrantError::ResponseError { status } | QdrantError::ResourceExhaustedError { status, .. } => {
            match status.code() {
                Code::Unavailable
                | Code::DeadlineExceeded
                | Code::ResourceExhausted
                | Code::Aborted
                | Code::Unknown => Error::Unavailable(format!("qdrant {operation}: {}", status.message())),
                // The client's channel pool reports a refused connection as INTERNAL.
                Code::Internal if status.message().starts_with("Failed to connect") => {
                    Error::Unavailable(format!("qdrant {operation}: {}", status.message()))
                }
                _ => Error::Internal(format!("qdrant {operation}: {:?}: {}", status.code(), status.message())),
            }
        }
        _ => Error::Unavailable(format!("qdrant {operation}: {error}")),
    }
}

fn payload(namespace: &str, record: &VectorRecord) -> HashMap<String, Value> {
    let mut payload = HashMap::from([
        (NAMESPACE.to_owned(), Value::from(namespace.to_owned())),
        (RONCHO_ID.to_owned(), Value::from(record.id.clone())),
    ]);
    for (key, value) in [
        (SESSION, &record.session_id),
        (PEER, &record.peer_id),
        (LEVEL, &record.level),
    ] {
        if let Some(value) = value {
            payload.insert(key.to_owned(), Value::from(value.clone()));
        }
    }
    if !record.passages.is_empty() {
        payload.insert(PASSAGES.to_owned(), Value::from(1 + record.passages.len() as i64));
    }
    payload
}

/// A point's whole-number payload field `key`, if it has one.
fn integer(point: &ScoredPoint, key: &str) -> Option<u32> {
    match point.payload.get(key)?.kind.as_ref()? {
        value::Kind::IntegerValue(n) => u32::try_from(*n).ok(),
        _ => None,
    }
}

#[async_trait]
impl VectorStore for QdrantVectorStore {
    async fn check_dimensions(&self, dimensions: usize, model_id: &str) -> Result<()> {
        let Layout {
            size,
            model,
            lexical,
            collection_idf,
        } = self.ensure(dimensions, Some(model_id)).await?.clone();
        if !lexical {
            tracing::warn!(
                collection = %self.collection,
                "qdrant collection has no `text` sparse vector (made by an older roncho): full-text ranking stays \
                 in the database; see docs/operations.md to move to a new collection"
            );
        } else if collection_idf {
            tracing::warn!(
                collection = %self.collection,
                "qdrant collection weighs words over every workspace in it (made before per-workspace term \
                 counts): one tenant's writes move another's ranking by words; see docs/operations.md to move \
                 to a new collection"
            );
        }
        if size != dimensions {
            return Err(Error::FailedPrecondition(format!(
                "the vector store (qdrant collection {}) holds {size}-dimension vectors (model {}), but the \
                 configured embedder {model_id} makes {dimensions}: configure the same model, or re-embed into \
                 a new collection",
                self.collection,
                model.as_deref().unwrap_or("unknown"),
            )));
        }
        if let Some(stored) = model.filter(|stored| stored != model_id) {
            // The same size from another model: its vectors would answer this
            // one's queries with noise. The collection is the operator's to
            // replace (docs/operations.md, "Changing the embedding model").
            return Err(Error::FailedPrecondition(format!(
                "the vector store (qdrant collection {}) holds vectors of model {stored}, but the configured \
                 embedder is {model_id}: configure {stored}, or point qdrant_collection at a new collection and \
                 queue every vector again (docs/operations.md, \"Changing the embedding model\")",
                self.collection,
            )));
        }
        Ok(())
    }

    async fn upsert(&self, namespace: &str, records: Vec<VectorRecord>) -> Result<()> {
        let Some(first) = records.first() else { return Ok(()) };
        let Layout {
            size,
            lexical,
            collection_idf,
            ..
        } = *self.ensure(first.vector.len(), None).await?;
        if let Some(wrong) = records.iter().find(|record| record.vector.len() != size) {
            return Err(Error::FailedPrecondition(format!(
                "vector of {} has {} dimensions; qdrant collection {} holds {size}",
                wrong.id,
                wrong.vector.len(),
                self.collection
            )));
        }
        if let Some(wrong) = records
            .iter()
            .find(|record| record.passages.iter().any(|passage| passage.len() != size))
        {
            return Err(Error::FailedPrecondition(format!(
                "a passage vector of {} is not of {size} dimensions (qdrant collection {})",
                wrong.id, self.collection
            )));
        }
        // A record's first passage carries its words; each later passage is
        // a point of its own, found by meaning only.
        let points: Vec<PointStruct> = records
            .iter()
            .flat_map(|record| {
                let vectors: Vectors = match &record.lexical {
                    Some(words) if lexical && !words.is_empty() => NamedVectors::default()
                        .add_vector("", record.vector.clone())
                        .add_vector(LEXICAL, Vector::new_sparse(words.indices.clone(), words.values.clone()))
                        .into(),
                    _ => Vector::from(record.vector.clone()).into(),
                };
                let first = PointStruct::new(point_id(namespace, &record.id), vectors, payload(namespace, record));
                let later = (1..).zip(&record.passages).map(move |(n, passage)| {
                    let mut payload = payload(namespace, record);
                    payload.insert(PASSAGE.to_owned(), Value::from(i64::from(n)));
                    PointStruct::new(
                        passage_point_id(namespace, &record.id, n),
                        Vector::from(passage.clone()),
                        payload,
                    )
                });
                std::iter::once(first).chain(later)
            })
            .collect();
        let upserts = async {
            for chunk in points.chunks(UPSERT_BATCH) {
                let points = chunk.to_vec();
                self.client
                    .upsert_points(UpsertPoints {
                        collection_name: self.collection.clone(),
                        wait: Some(true),
                        points,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| qdrant_error("upsert", e))?;
            }
            Ok(())
        };
        // Each message's terms counted once, in the database while Qdrant
        // takes the points (a message counted whose upsert then fails is
        // synced again, not counted again); a collection weighing over
        // itself needs no counts.
        let counted: Vec<(String, Vec<u32>)> = match collection_idf {
            false => records
                .iter()
                .filter_map(|record| Some((record.id.clone(), record.lexical.as_ref()?.indices.clone())))
                .collect(),
            true => Vec::new(),
        };
        if lexical && !counted.is_empty() && self.term_ledger.is_none() {
            return Err(Error::FailedPrecondition(format!(
                "qdrant collection {} weighs words by each workspace's term counts, and this store has no \
                 ledger to count them in: the words of {} messages would match nothing",
                self.collection,
                counted.len()
            )));
        }
        let counting = async {
            match &self.term_ledger {
                Some(ledger) if !counted.is_empty() => ledger.count(&counted).await,
                _ => Ok(()),
            }
        };
        let (upserted, counted) = tokio::join!(upserts, counting);
        upserted.and(counted)
    }

    async fn query(
        &self,
        namespace: &str,
        vector: &[f32],
        top_k: usize,
        filter: &VectorFilter,
        max_distance: Option<f32>,
    ) -> Result<Vec<VectorHit>> {
        if Self::finds_nothing(top_k, filter) {
            return Ok(Vec::new());
        }
        let request = QueryPoints {
            collection_name: self.collection.clone(),
            query: Some(Query::new_nearest(vector.to_vec())),
            filter: Some(Self::filter(namespace, filter)),
            score_threshold: max_distance.map(|distance| 1.0 - distance),
            params: Some(nearest_params()),
            ..Default::default()
        };
        self.nearest_records(namespace, request, top_k, max_distance).await
    }

    /// The words and the meaning each in Qdrant, on a core of its own (two
    /// requests at once, not one batch: Qdrant answers a batch's queries
    /// one after the other), beside the database's matches among the
    /// messages not synced yet; a collection made before the `text` vector
    /// leaves the words to the database.
    async fn search(&self, plan: &SearchPlan<'_>) -> std::result::Result<Found, SearchFailure> {
        let namespace = messages_namespace(plan.workspace_id);
        let layout = self.describe_cached().await?;
        let meaning = async {
            let vector = plan.query.meaning().await?;
            self.query(&namespace, &vector, plan.top_k, &plan.scope, None).await
        };
        if layout.as_ref().is_some_and(|layout| !layout.lexical) {
            let (words, meaning) = tokio::join!(plan.database_words(), meaning);
            return Ok(Found { words: words?, meaning });
        }
        let words = async {
            // No collection yet: nothing was ever stored.
            let Some(layout) = layout else { return Ok(Vec::new()) };
            let words = Self::weighed(plan, layout.collection_idf).await?;
            self.rank_words(&namespace, &words, plan.top_k, &plan.scope).await
        };
        let (words, meaning) = tokio::join!(plan.with_unsynced(words), meaning);
        Ok(Found { words: words?, meaning })
    }

    /// Deletes each record's every point: its first passage and the later ones.
    async fn delete(&self, namespace: &str, ids: &[String]) -> Result<()> {
        if ids.is_empty() || self.describe_cached().await?.is_none() {
            return Ok(());
        }
        for chunk in ids.chunks(UPSERT_BATCH) {
            let records = Filter::must([Self::scope(namespace), Condition::matches(RONCHO_ID, chunk.to_vec())]);
            self.delete_points(PointsSelector {
                points_selector_one_of: Some(points_selector::PointsSelectorOneOf::Filter(records)),
            })
            .await?;
        }
        Ok(())
    }

    async fn delete_namespace(&self, namespace: &str) -> Result<()> {
        if self.describe_cached().await?.is_none() {
            return Ok(());
        }
        self.delete_points(PointsSelector {
            points_selector_one_of: Some(points_selector::PointsSelectorOneOf::Filter(Filter::must([
                Self::scope(namespace),
            ]))),
        })
        .await
    }
}

impl QdrantVectorStore {
    /// Where this collection's words are ranked and weighed (`roncho status`).
    pub async fn word_ranking(&self) -> Result<WordRanking> {
        Ok(match self.describe_cached().await? {
            Some(layout) if !layout.lexical => WordRanking::Database,
            Some(layout) if layout.collection_idf => WordRanking::Collection,
            _ => WordRanking::Workspace,
        })
    }

    /// Whether a query of `top_k` under `filter` can find nothing: none
    /// asked for, or an allowlist of no session or level.
    fn finds_nothing(top_k: usize, filter: &VectorFilter) -> bool {
        let empty = |list: &Option<Vec<String>>| list.as_ref().is_some_and(Vec::is_empty);
        top_k == 0 || empty(&filter.session_ids) || empty(&filter.levels)
    }

    /// The plan's words as this collection ranks them: weighed by their
    /// counts over the workspace (the database's), or, in a collection made
    /// with the `Idf` modifier, without the names of the peers the query
    /// names ([`lexical::without_names`]).
    async fn weighed(plan: &SearchPlan<'_>, collection_idf: bool) -> Result<SparseVector> {
        if collection_idf {
            return Ok(lexical::without_names(plan.words.clone(), &plan.query.names().await?));
        }
        if plan.words.is_empty() {
            return Ok(plan.words.clone());
        }
        let counts = plan
            .database
            .term_counts(plan.workspace_id, &plan.words.indices)
            .await?;
        Ok(lexical::weighted(&plan.words, &counts))
    }

    /// The `top_k` best of `namespace` by BM25 for `words` (`distance` is
    /// the negated score), passing `filter`.
    async fn rank_words(
        &self,
        namespace: &str,
        words: &SparseVector,
        top_k: usize,
        filter: &VectorFilter,
    ) -> Result<Vec<VectorHit>> {
        if words.is_empty() || Self::finds_nothing(top_k, filter) {
            return Ok(Vec::new());
        }
        let request = QueryPoints {
            collection_name: self.collection.clone(),
            query: Some(Query::new_nearest(VectorInput::new_sparse(
                words.indices.clone(),
                words.values.clone(),
            ))),
            using: Some(LEXICAL.to_owned()),
            filter: Some(Self::filter(namespace, filter)),
            limit: Some(top_k as u64),
            with_payload: Some(WithPayloadSelector::from(vec![RONCHO_ID])),
            ..Default::default()
        };
        let points = self
            .client
            .query(request)
            .await
            .map_err(|error| qdrant_error("query", error))?
            .result;
        // Only a record's first passage carries its words: one point a record.
        Self::hits(namespace, points, |score| -score)
    }

    /// Every point of `namespace`: its roncho id and vector, read with
    /// Qdrant's scroll (for audits: what the vector store holds, erasures
    /// included).
    pub async fn scroll(&self, namespace: &str) -> Result<Vec<(String, Vec<f32>)>> {
        if self.describe_cached().await?.is_none() {
            return Ok(Vec::new());
        }
        let mut points = Vec::new();
        let mut offset = None;
        loop {
            let page = self
                .client
                .scroll(ScrollPoints {
                    collection_name: self.collection.clone(),
                    filter: Some(Filter::must([Self::scope(namespace)])),
                    offset,
                    limit: Some(256),
                    with_payload: Some(WithPayloadSelector::from(vec![RONCHO_ID])),
                    with_vectors: Some(true.into()),
                    ..Default::default()
                })
                .await
                .map_err(|error| qdrant_error("scroll", error))?;
            for point in page.result {
                let id = point.payload.get(RONCHO_ID).cloned().and_then(string_value);
                // A point with a lexical vector comes back as named vectors; its dense one is "".
                let vector = point
                    .vectors
                    .and_then(|vectors| match vectors.vectors_options {
                        Some(vectors_output::VectorsOptions::Vector(vector)) => Some(vector),
                        Some(vectors_output::VectorsOptions::Vectors(mut named)) => named.vectors.remove(""),
                        None => None,
                    })
                    .and_then(|vector| match vector.into_vector() {
                        vector_output::Vector::Dense(dense) => Some(dense.data),
                        _ => None,
                    });
                if let (Some(id), Some(vector)) = (id, vector) {
                    points.push((id, vector));
                }
            }
            offset = page.next_page_offset;
            if offset.is_none() {
                return Ok(points);
            }
        }
    }

    /// The `top_k` records nearest by `request` (a dense query without a
    /// limit), each by its nearest passage and the allowance for its
    /// passages: while a record's later passages fill the list, or a point
    /// not fetched may outrank a record that its allowance moved back, it
    /// asks again for twice as many points.
    async fn nearest_records(
        &self,
        namespace: &str,
        mut request: QueryPoints,
        top_k: usize,
        max_distance: Option<f32>,
    ) -> Result<Vec<VectorHit>> {
        request.with_payload = Some(WithPayloadSelector::from(vec![RONCHO_ID, PASSAGE, PASSAGES]));
        let mut asked = top_k;
        loop {
            request.limit = Some(asked as u64);
            let points = match self.client.query(request.clone()).await {
                Ok(response) => response.result,
                // No collection yet: nothing was ever stored.
                Err(QdrantError::ResponseError { status }) if status.code() == tonic::Code::NotFound => {
                    return Ok(Vec::new());
                }
                Err(error) => return Err(qdrant_error("query", error)),
            };
            let counts: HashMap<String, u32> = points
                .iter()
                .filter_map(|point| {
                    let count = integer(point, PASSAGES)?;
                    Some((string_value(point.payload.get(RONCHO_ID)?.clone())?, count))
                })
                .collect();
            let hits = Self::hits(namespace, points, |score| 1.0 - score)?;
            let passages = |id: &str| counts.get(id).copied().unwrap_or(1);
            let (kept, short) = roncho_core::vector::best_per_record(hits, top_k, asked, max_distance, passages);
            if !short {
                return Ok(kept);
            }
            asked = asked.saturating_mul(2);
        }
    }

    /// The collection's layout when it exists (cached once seen).
    async fn describe_cached(&self) -> Result<Option<Layout>> {
        if let Some(layout) = self.ready.get() {
            return Ok(Some(layout.clone()));
        }
        let layout = self.describe().await?;
        if let Some(layout) = &layout
            && self.ready.set(layout.clone()).is_ok()
        {
            self.index_ids().await;
        }
        Ok(layout)
    }

    async fn delete_points(&self, points: PointsSelector) -> Result<()> {
        self.client
            .delete_points(DeletePoints {
                collection_name: self.collection.clone(),
                wait: Some(true),
                points: Some(points),
                ..Default::default()
            })
            .await
            .map_err(|e| qdrant_error("delete", e))?;
        Ok(())
    }
}

/// How many times as many of the nearest as asked for Qdrant reads by
/// their int8 codes before it rescores them on their floats, as the
/// in-process vector store does (`roncho-store`'s `OVERSAMPLE`). Qdrant's
/// default reads as many as asked: the codes' error then decides which
/// vectors near the list's end are in it, and so the list's worst score,
/// which score fusion scales every score by (its low end).
const OVERSAMPLE: f64 = 4.0;

/// The search parameters of a query by meaning: the int8 codes read
/// [`OVERSAMPLE`]-fold, the best rescored on floats.
fn nearest_params() -> SearchParams {
    SearchParams {
        quantization: Some(QuantizationSearchParams {
            ignore: Some(false),
            rescore: Some(true),
            oversampling: Some(OVERSAMPLE),
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_ids_are_stable_uuids_per_namespace() {
        let id = point_id("msg/ws", "abc");
        assert_eq!(id, point_id("msg/ws", "abc"));
        assert_ne!(id, point_id("msg/ws2", "abc"));
        assert_ne!(point_id("msg/w", "sabc"), point_id("msg/ws", "abc"));
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12]);
        assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
    }
}
