//! `StandIn`: an in-process server speaking the Qdrant gRPC RPCs that
//! [`QdrantVectorStore`](crate::QdrantVectorStore) uses — health check,
//! collection exists/get/create/delete, field indexes, upsert, delete (by
//! ids or filter) and nearest-neighbour query with keyword filters and a
//! score threshold — with Qdrant's cosine semantics (vectors normalised on
//! insert, score = dot product) and its error codes. Every other RPC answers
//! `UNIMPLEMENTED`, so an adapter change that needs more fails its tests
//! instead of passing against a lenient fake.
//!
//! For tests only: Qdrant itself cannot run in CI here. The same contract
//! suite runs against a real Qdrant when `RONCHO_TEST_QDRANT_URL` is set.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ::qdrant_client::qdrant::collections_server::{Collections, CollectionsServer};
use ::qdrant_client::qdrant::points_server::{Points, PointsServer};
use ::qdrant_client::qdrant::qdrant_server::{Qdrant, QdrantServer};
use ::qdrant_client::qdrant::*;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// One stored point.
#[derive(Debug, Clone)]
struct Point {
    vector: Vec<f32>,
    payload: HashMap<String, Value>,
}

#[derive(Debug)]
struct Collection {
    size: u64,
    distance: i32,
    metadata: HashMap<String, Value>,
    indexed: Vec<(String, i32)>,
    points: HashMap<String, Point>,
}

#[derive(Debug, Default)]
struct State {
    collections: HashMap<String, Collection>,
}

#[derive(Debug, Clone, Default)]
struct Shared {
    state: Arc<Mutex<State>>,
    /// When set, every RPC answers `UNAVAILABLE` (an outage).
    down: Arc<AtomicBool>,
}

impl Shared {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> Result<T, Status>) -> Result<T, Status> {
        if self.down.load(Ordering::SeqCst) {
            return Err(Status::unavailable("stand-in qdrant is down"));
        }
        let mut state = self
            .state
            .lock()
            .map_err(|_| Status::internal("stand-in state poisoned"))?;
        f(&mut state)
    }
}

/// A running stand-in server.
#[derive(Debug)]
pub struct StandIn {
    address: SocketAddr,
    shared: Shared,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl StandIn {
    /// Starts a server on an ephemeral loopback port.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let shared = Shared::default();
        let (shutdown, stopped) = oneshot::channel::<()>();
        let router = tonic::transport::Server::builder()
            .add_service(QdrantServer::new(Service(shared.clone())))
            .add_service(CollectionsServer::new(Service(shared.clone())))
            .add_service(PointsServer::new(Service(shared.clone())));
        let task = tokio::spawn(async move {
            let incoming = TcpIncoming::from(listener);
            let stopped = async {
                let _ = stopped.await;
            };
            if let Err(error) = router.serve_with_incoming_shutdown(incoming, stopped).await {
                tracing::error!(%error, "stand-in qdrant stopped");
            }
        });
        Ok(Self {
            address,
            shared,
            shutdown: Some(shutdown),
            task,
        })
    }

    /// The gRPC URL to give the adapter.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Simulates an outage (`true`: every RPC answers `UNAVAILABLE`) or ends it.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::SeqCst);
    }

    /// Returns the number of points in `collection`.
    pub fn point_count(&self, collection: &str) -> usize {
        let state = self.shared.state.lock().expect("stand-in state");
        state.collections.get(collection).map_or(0, |c| c.points.len())
    }

    /// Stops the server.
    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        let _ = (&mut self.task).await;
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug, Clone)]
struct Service(Shared);

fn unsupported(rpc: &str) -> Status {
    Status::unimplemented(format!("stand-in qdrant does not implement {rpc}"))
}

fn not_found(name: &str) -> Status {
    Status::not_found(format!("Not found: Collection `{name}` doesn't exist!"))
}

fn collection<'a>(state: &'a mut State, name: &str) -> Result<&'a mut Collection, Status> {
    state.collections.get_mut(name).ok_or_else(|| not_found(name))
}

fn completed() -> Response<PointsOperationResponse> {
    Response::new(PointsOperationResponse {
        result: Some(UpdateResult {
            operation_id: Some(0),
            status: UpdateStatus::Completed.into(),
        }),
        ..Default::default()
    })
}

fn id_key(id: &PointId) -> Result<String, Status> {
    match &id.point_id_options {
        Some(point_id::PointIdOptions::Uuid(uuid)) => {
            let hex: String = uuid.chars().filter(|c| *c != '-').collect();
            if hex.len() != 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(Status::invalid_argument(format!("Unable to parse UUID: {uuid}")));
            }
            Ok(crate::uuid_text(&hex.to_ascii_lowercase()))
        }
        Some(point_id::PointIdOptions::Num(number)) => Ok(number.to_string()),
        None => Err(Status::invalid_argument("point id is empty")),
    }
}

#[allow(deprecated)] // `Vector::data` is how clients before 1.16 send dense vectors
fn dense(vectors: Option<Vectors>) -> Result<Vec<f32>, Status> {
    match vectors.and_then(|v| v.vectors_options) {
        Some(vectors::VectorsOptions::Vector(vector)) => match vector.vector {
            Some(vector::Vector::Dense(dense)) => Ok(dense.data),
            None if !vector.data.is_empty() => Ok(vector.data),
            _ => Err(unsupported("non-dense vectors")),
        },
        _ => Err(unsupported("named or missing vectors")),
    }
}

fn normalized(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
    vector
}

fn keyword(value: Option<&Value>) -> Option<&str> {
    match value.and_then(|v| v.kind.as_ref()) {
        Some(value::Kind::StringValue(text)) => Some(text),
        _ => None,
    }
}

fn condition_holds(condition: &Condition, payload: &HashMap<String, Value>) -> Result<bool, Status> {
    match &condition.condition_one_of {
        Some(condition::ConditionOneOf::Field(field)) => {
            let actual = keyword(payload.get(&field.key));
            match field.r#match.as_ref().and_then(|m| m.match_value.as_ref()) {
                Some(r#match::MatchValue::Keyword(wanted)) => Ok(actual == Some(wanted.as_str())),
                Some(r#match::MatchValue::Keywords(wanted)) => {
                    Ok(actual.is_some_and(|actual| wanted.strings.iter().any(|w| w == actual)))
                }
                _ => Err(unsupported("field conditions other than keyword matches")),
            }
        }
        Some(condition::ConditionOneOf::Filter(filter)) => filter_holds(filter, payload),
        _ => Err(unsupported("conditions other than field matches and nested filters")),
    }
}

fn filter_holds(filter: &Filter, payload: &HashMap<String, Value>) -> Result<bool, Status> {
    if filter.min_should.is_some() {
        return Err(unsupported("min_should"));
    }
    for condition in &filter.must {
        if !condition_holds(condition, payload)? {
            return Ok(false);
        }
    }
    for condition in &filter.must_not {
        if condition_holds(condition, payload)? {
            return Ok(false);
        }
    }
    if filter.should.is_empty() {
        return Ok(true);
    }
    for condition in &filter.should {
        if condition_holds(condition, payload)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn select_payload(payload: &HashMap<String, Value>, selector: Option<&WithPayloadSelector>) -> HashMap<String, Value> {
    match selector.and_then(|s| s.selector_options.as_ref()) {
        Some(with_payload_selector::SelectorOptions::Enable(true)) => payload.clone(),
        Some(with_payload_selector::SelectorOptions::Include(include)) => payload
            .iter()
            .filter(|(key, _)| include.fields.contains(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
        Some(with_payload_selector::SelectorOptions::Exclude(exclude)) => payload
            .iter()
            .filter(|(key, _)| !exclude.fields.contains(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
        _ => HashMap::new(),
    }
}

/// Implements a service trait: the given methods, and `UNIMPLEMENTED` for
/// every method listed after `unsupported`.
macro_rules! service {
    (impl $trait:ident { $($implemented:item)* } unsupported { $($rpc:ident: $request:ident => $response:ident;)* }) => {
        #[tonic::async_trait]
        impl $trait for Service {
            $($implemented)*
            $(
                async fn $rpc(&self, _: Request<$request>) -> Result<Response<$response>, Status> {
                    Err(unsupported(stringify!($rpc)))
                }
            )*
        }
    };
}

service! {
    impl Qdrant {
        async fn health_check(&self, _: Request<HealthCheckRequest>) -> Result<Response<HealthCheckReply>, Status> {
            self.0.with(|_| {
                Ok(Response::new(HealthCheckReply {
                    title: "roncho stand-in qdrant".into(),
                    version: "1.16.0-standin".into(),
                    commit: None,
                }))
            })
        }
    }
    unsupported {}
}

service! {
    impl Collections {
        async fn collection_exists(
            &self,
            request: Request<CollectionExistsRequest>,
        ) -> Result<Response<CollectionExistsResponse>, Status> {
            let name = request.into_inner().collection_name;
            self.0.with(|state| {
                Ok(Response::new(CollectionExistsResponse {
                    result: Some(CollectionExists {
                        exists: state.collections.contains_key(&name),
                    }),
                    time: 0.0,
                }))
            })
        }

        async fn get(
            &self,
            request: Request<GetCollectionInfoRequest>,
        ) -> Result<Response<GetCollectionInfoResponse>, Status> {
            let name = request.into_inner().collection_name;
            self.0.with(|state| {
                let found = collection(state, &name)?;
                let params = VectorParams {
                    size: found.size,
                    distance: found.distance,
                    ..Default::default()
                };
                let payload_schema = found
                    .indexed
                    .iter()
                    .map(|(field, kind)| {
                        (field.clone(), PayloadSchemaInfo {
                            data_type: *kind,
                            ..Default::default()
                        })
                    })
                    .collect();
                Ok(Response::new(GetCollectionInfoResponse {
                    result: Some(CollectionInfo {
                        status: CollectionStatus::Green.into(),
                        config: Some(CollectionConfig {
                            params: Some(CollectionParams {
                                shard_number: 1,
                                vectors_config: Some(VectorsConfig {
                                    config: Some(vectors_config::Config::Params(params)),
                                }),
                                ..Default::default()
                            }),
                            metadata: found.metadata.clone(),
                            ..Default::default()
                        }),
                        payload_schema,
                        points_count: Some(found.points.len() as u64),
                        ..Default::default()
                    }),
                    time: 0.0,
                }))
            })
        }

        async fn create(&self, request: Request<CreateCollection>) -> Result<Response<CollectionOperationResponse>, Status> {
            let create = request.into_inner();
            self.0.with(|state| {
                if state.collections.contains_key(&create.collection_name) {
                    return Err(Status::invalid_argument(format!(
                        "Wrong input: Collection `{}` already exists!",
                        create.collection_name
                    )));
                }
                let Some(vectors_config::Config::Params(params)) = create.vectors_config.and_then(|c| c.config) else {
                    return Err(unsupported("collections without a single unnamed vector"));
                };
                if params.distance != i32::from(Distance::Cosine) {
                    return Err(unsupported("distances other than cosine"));
                }
                state.collections.insert(create.collection_name, Collection {
                    size: params.size,
                    distance: params.distance,
                    metadata: create.metadata,
                    indexed: Vec::new(),
                    points: HashMap::new(),
                });
                Ok(Response::new(CollectionOperationResponse { result: true, time: 0.0 }))
            })
        }

        async fn delete(&self, request: Request<DeleteCollection>) -> Result<Response<CollectionOperationResponse>, Status> {
            let name = request.into_inner().collection_name;
            self.0.with(|state| {
                let existed = state.collections.remove(&name).is_some();
                Ok(Response::new(CollectionOperationResponse { result: existed, time: 0.0 }))
            })
        }
    }
    unsupported {
        list: ListCollectionsRequest => ListCollectionsResponse;
        update: UpdateCollection => CollectionOperationResponse;
        update_aliases: ChangeAliases => CollectionOperationResponse;
        list_collection_aliases: ListCollectionAliasesRequest => ListAliasesResponse;
        list_aliases: ListAliasesRequest => ListAliasesResponse;
        collection_cluster_info: CollectionClusterInfoRequest => CollectionClusterInfoResponse;
        update_collection_cluster_setup: UpdateCollectionClusterSetupRequest => UpdateCollectionClusterSetupResponse;
        create_shard_key: CreateShardKeyRequest => CreateShardKeyResponse;
        delete_shard_key: DeleteShardKeyRequest => DeleteShardKeyResponse;
        list_shard_keys: ListShardKeysRequest => ListShardKeysResponse;
    }
}

service! {
    impl Points {
        async fn create_field_index(
            &self,
            request: Request<CreateFieldIndexCollection>,
        ) -> Result<Response<PointsOperationResponse>, Status> {
            let create = request.into_inner();
            self.0.with(|state| {
                let found = collection(state, &create.collection_name)?;
                let kind = create.field_type.unwrap_or_default();
                if kind != i32::from(FieldType::Keyword) {
                    return Err(unsupported("field indexes other than keyword"));
                }
                found.indexed.retain(|(field, _)| *field != create.field_name);
                found.indexed.push((create.field_name, i32::from(PayloadSchemaType::Keyword)));
                Ok(completed())
            })
        }

        async fn upsert(&self, request: Request<UpsertPoints>) -> Result<Response<PointsOperationResponse>, Status> {
            let upsert = request.into_inner();
            if upsert.update_filter.is_some() {
                return Err(unsupported("conditional upserts"));
            }
            self.0.with(|state| {
                let found = collection(state, &upsert.collection_name)?;
                let mut points = Vec::with_capacity(upsert.points.len());
                for point in upsert.points {
                    let key = id_key(&point.id.unwrap_or_default())?;
                    let vector = dense(point.vectors)?;
                    if vector.len() as u64 != found.size {
                        return Err(Status::invalid_argument(format!(
                            "Wrong input: Vector dimension error: expected dim: {}, got {}",
                            found.size,
                            vector.len()
                        )));
                    }
                    points.push((key, Point {
                        vector: normalized(vector),
                        payload: point.payload,
                    }));
                }
                found.points.extend(points);
                Ok(completed())
            })
        }

        async fn delete(&self, request: Request<DeletePoints>) -> Result<Response<PointsOperationResponse>, Status> {
            let delete = request.into_inner();
            self.0.with(|state| {
                let found = collection(state, &delete.collection_name)?;
                match delete.points.and_then(|p| p.points_selector_one_of) {
                    Some(points_selector::PointsSelectorOneOf::Points(list)) => {
                        for id in &list.ids {
                            found.points.remove(&id_key(id)?);
                        }
                    }
                    Some(points_selector::PointsSelectorOneOf::Filter(filter)) => {
                        let mut doomed = Vec::new();
                        for (key, point) in &found.points {
                            if filter_holds(&filter, &point.payload)? {
                                doomed.push(key.clone());
                            }
                        }
                        doomed.iter().for_each(|key| {
                            found.points.remove(key);
                        });
                    }
                    None => return Err(Status::invalid_argument("points selector is empty")),
                }
                Ok(completed())
            })
        }

        async fn query(&self, request: Request<QueryPoints>) -> Result<Response<QueryResponse>, Status> {
            let query = request.into_inner();
            if !query.prefetch.is_empty() || query.using.is_some() {
                return Err(unsupported("prefetch and named vectors"));
            }
            let vector = match query.query.and_then(|q| q.variant) {
                Some(query::Variant::Nearest(VectorInput {
                    variant: Some(vector_input::Variant::Dense(dense)),
                })) => dense.data,
                _ => return Err(unsupported("queries other than nearest to a dense vector")),
            };
            self.0.with(|state| {
                let found = collection(state, &query.collection_name)?;
                if vector.len() as u64 != found.size {
                    return Err(Status::invalid_argument(format!(
                        "Wrong input: Vector dimension error: expected dim: {}, got {}",
                        found.size,
                        vector.len()
                    )));
                }
                let vector = normalized(vector);
                let mut scored = Vec::new();
                for (key, point) in &found.points {
                    if let Some(filter) = &query.filter
                        && !filter_holds(filter, &point.payload)?
                    {
                        continue;
                    }
                    let score: f32 = point.vector.iter().zip(&vector).map(|(a, b)| a * b).sum();
                    if query.score_threshold.is_some_and(|threshold| score < threshold) {
                        continue;
                    }
                    scored.push((score, key, point));
                }
                scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
                let offset = query.offset.unwrap_or(0) as usize;
                let limit = query.limit.unwrap_or(10) as usize;
                let result = scored
                    .into_iter()
                    .skip(offset)
                    .take(limit)
                    .map(|(score, key, point)| ScoredPoint {
                        id: Some(PointId::from(key.clone())),
                        payload: select_payload(&point.payload, query.with_payload.as_ref()),
                        score,
                        ..Default::default()
                    })
                    .collect();
                Ok(Response::new(QueryResponse {
                    result,
                    time: 0.0,
                    usage: None,
                }))
            })
        }
    }
    unsupported {
        get: GetPoints => GetResponse;
        update_vectors: UpdatePointVectors => PointsOperationResponse;
        delete_vectors: DeletePointVectors => PointsOperationResponse;
        set_payload: SetPayloadPoints => PointsOperationResponse;
        overwrite_payload: SetPayloadPoints => PointsOperationResponse;
        delete_payload: DeletePayloadPoints => PointsOperationResponse;
        clear_payload: ClearPayloadPoints => PointsOperationResponse;
        delete_field_index: DeleteFieldIndexCollection => PointsOperationResponse;
        create_vector_name: CreateVectorNameRequest => PointsOperationResponse;
        delete_vector_name: DeleteVectorNameRequest => PointsOperationResponse;
        search: SearchPoints => SearchResponse;
        search_batch: SearchBatchPoints => SearchBatchResponse;
        search_groups: SearchPointGroups => SearchGroupsResponse;
        scroll: ScrollPoints => ScrollResponse;
        recommend: RecommendPoints => RecommendResponse;
        recommend_batch: RecommendBatchPoints => RecommendBatchResponse;
        recommend_groups: RecommendPointGroups => RecommendGroupsResponse;
        discover: DiscoverPoints => DiscoverResponse;
        discover_batch: DiscoverBatchPoints => DiscoverBatchResponse;
        count: CountPoints => CountResponse;
        update_batch: UpdateBatchPoints => UpdateBatchResponse;
        query_batch: QueryBatchPoints => QueryBatchResponse;
        query_groups: QueryPointGroups => QueryGroupsResponse;
        facet: FacetCounts => FacetResponse;
        search_matrix_pairs: SearchMatrixPoints => SearchMatrixPairsResponse;
        search_matrix_offsets: SearchMatrixPoints => SearchMatrixOffsetsResponse;
    }
}
