//! `SqlVectorStore`: exact nearest-neighbour search over vectors kept in the
//! relational database (the SQLite file in the embedded mode). Scans run off
//! the async runtime. On SQLite — one process — each namespace is cached in
//! memory and kept current by this store's own writes; on Postgres, where
//! other processes write too, every query reads the namespace afresh (the
//! distributed mode's vector store is Qdrant; this is its fallback).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use roncho_core::vector::{VectorFilter, VectorHit, VectorRecord, VectorStore};
use roncho_core::{Error, Result};
use sqlx::Row;
use sqlx::any::AnyRow;
use tokio::sync::Mutex;

use crate::SqlStore;
use crate::sql::{Bind, Dialect, Sql};
use crate::store::{db_error, execute};

/// One namespace's vectors, contiguous for scanning.
///
/// Each vector is kept twice: as f32 (exact) and as int8 codes with a
/// per-vector scale (a quarter of the bytes). A query scans the codes — the
/// scan is bound by memory traffic — keeps the [`OVERSAMPLE`]-fold best
/// candidates, and ranks those by their exact f32 distance, as Qdrant does
/// with scalar quantization and rescoring.
#[derive(Debug, Default)]
struct Namespace {
    dimensions: usize,
    ids: Vec<String>,
    fields: Vec<(Option<String>, Option<String>, Option<String>)>,
    data: Vec<f32>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    index: HashMap<String, usize>,
}

/// Candidates per wanted hit that the int8 scan passes to exact rescoring.
const OVERSAMPLE: usize = 4;
/// The fewest candidates rescored, however small `top_k`.
const MIN_CANDIDATES: usize = 64;

/// Quantizes `vector` to int8 codes (written to `codes`) and returns the scale
/// that maps a code back: `value ≈ code * scale`.
fn quantize(vector: &[f32], codes: &mut [i8]) -> f32 {
    let max = vector.iter().fold(0.0_f32, |max, value| max.max(value.abs()));
    if max == 0.0 {
        codes.fill(0);
        return 0.0;
    }
    let scale = max / 127.0;
    for (code, value) in codes.iter_mut().zip(vector) {
        *code = (value / scale).round().clamp(-127.0, 127.0) as i8;
    }
    scale
}

/// The integer dot product of two code vectors (the compiler vectorises it).
fn code_dot(a: &[i8], b: &[i8]) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
}

impl Namespace {
    fn row<T>(values: &[T], dimensions: usize, position: usize) -> &[T] {
        &values[position * dimensions..(position + 1) * dimensions]
    }

    fn put(&mut self, record: VectorRecord) {
        let fields = (record.session_id, record.peer_id, record.level);
        if self.dimensions == 0 {
            self.dimensions = record.vector.len();
        }
        let dimensions = self.dimensions;
        let position = match self.index.get(&record.id) {
            Some(&position) => {
                self.fields[position] = fields;
                position
            }
            None => {
                let position = self.ids.len();
                self.index.insert(record.id.clone(), position);
                self.ids.push(record.id);
                self.fields.push(fields);
                self.data.resize((position + 1) * dimensions, 0.0);
                self.codes.resize((position + 1) * dimensions, 0);
                self.scales.push(0.0);
                position
            }
        };
        let rows = position * dimensions..(position + 1) * dimensions;
        self.data[rows.clone()].copy_from_slice(&record.vector);
        self.scales[position] = quantize(&record.vector, &mut self.codes[rows]);
    }

    fn remove(&mut self, id: &str) {
        let Some(position) = self.index.remove(id) else { return };
        let last = self.ids.len() - 1;
        let dimensions = self.dimensions;
        if position != last {
            let moved = self.ids[last].clone();
            self.index.insert(moved, position);
            self.data
                .copy_within(last * dimensions..(last + 1) * dimensions, position * dimensions);
            self.codes
                .copy_within(last * dimensions..(last + 1) * dimensions, position * dimensions);
        }
        self.ids.swap_remove(position);
        self.fields.swap_remove(position);
        self.scales.swap_remove(position);
        self.data.truncate(last * dimensions);
        self.codes.truncate(last * dimensions);
    }

    fn scan(&self, query: &[f32], top_k: usize, filter: &VectorFilter, max_distance: Option<f32>) -> Vec<VectorHit> {
        if self.dimensions != query.len() || top_k == 0 || self.ids.is_empty() {
            return Vec::new();
        }
        let dimensions = self.dimensions;
        let mut query_codes = vec![0_i8; dimensions];
        let query_scale = quantize(query, &mut query_codes);
        let candidates = (top_k * OVERSAMPLE).max(MIN_CANDIDATES);
        let unfiltered = *filter == VectorFilter::default();
        // Approximate distances of a range of rows that pass the filter; the
        // best `candidates` of them.
        // Pruned as it goes: whenever twice `candidates` are held, only the best
        // `candidates` stay, and rows further than the worst of them are skipped.
        let approximate = |rows: std::ops::Range<usize>| -> Vec<(f32, usize)> {
            let mut scored = Vec::with_capacity(candidates * 2);
            let mut worst = f32::INFINITY;
            for position in rows {
                if !unfiltered {
                    let (session, peer, level) = &self.fields[position];
                    if !filter.matches(session.as_deref(), peer.as_deref(), level.as_deref()) {
                        continue;
                    }
                }
                let dot = code_dot(Self::row(&self.codes, dimensions, position), &query_codes);
                let distance = 1.0 - dot as f32 * self.scales[position] * query_scale;
                if distance > worst {
                    continue;
                }
                scored.push((distance, position));
                if scored.len() == candidates * 2 {
                    scored = top(scored, candidates, &self.ids);
                    worst = scored.last().map_or(f32::INFINITY, |(distance, _)| *distance);
                }
            }
            top(scored, candidates, &self.ids)
        };
        let rows = self.ids.len();
        let mut shortlist = if rows >= PARALLEL_SCAN_ROWS {
            // Two halves on two threads.
            let middle = rows / 2;
            let (mut first, second) = std::thread::scope(|scope| {
                let second = scope.spawn(|| approximate(middle..rows));
                (approximate(0..middle), second.join().unwrap_or_default())
            });
            first.extend(second);
            first
        } else {
            approximate(0..rows)
        };
        // Rescore exactly.
        for (distance, position) in &mut shortlist {
            *distance = 1.0 - roncho_core::embed::dot(Self::row(&self.data, dimensions, *position), query);
        }
        shortlist.retain(|(distance, _)| max_distance.is_none_or(|max| *distance <= max));
        top(shortlist, top_k, &self.ids)
            .into_iter()
            .map(|(distance, position)| VectorHit {
                id: self.ids[position].clone(),
                distance,
            })
            .collect()
    }
}

/// Rows from which a scan is split across two threads.
const PARALLEL_SCAN_ROWS: usize = 20_000;

/// Keeps the `top_k` nearest of `scored`, nearest first (ties by id).
fn top(mut scored: Vec<(f32, usize)>, top_k: usize, ids: &[String]) -> Vec<(f32, usize)> {
    let order = |a: &(f32, usize), b: &(f32, usize)| a.0.total_cmp(&b.0).then_with(|| ids[a.1].cmp(&ids[b.1]));
    if scored.len() > top_k {
        scored.select_nth_unstable_by(top_k - 1, order);
        scored.truncate(top_k);
    }
    scored.sort_by(order);
    scored
}

/// Loaded namespaces by name.
type NamespaceCache = HashMap<String, Arc<RwLock<Namespace>>>;

fn encode(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|value| value.to_le_bytes()).collect()
}

fn decode(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
        .collect()
}

/// The exact vector store over a `SqlStore`'s database.
#[derive(Debug, Clone)]
pub struct SqlVectorStore {
    store: Arc<SqlStore>,
    /// Loaded namespaces (SQLite only).
    cache: Option<Arc<Mutex<NamespaceCache>>>,
}

impl SqlVectorStore {
    /// Returns the vector store sharing `store`'s database.
    pub fn new(store: Arc<SqlStore>) -> Self {
        let cache = (store.dialect() == Dialect::Sqlite).then(|| Arc::new(Mutex::new(HashMap::new())));
        Self { store, cache }
    }

    async fn load(&self, namespace: &str) -> Result<Namespace> {
        let mut sql = Sql::new("SELECT id, session_name, peer_name, level, vector FROM vectors WHERE namespace = ");
        sql.bind(namespace);
        let rows: Vec<AnyRow> = self.store.read(&sql).await?;
        let mut loaded = Namespace::default();
        for row in rows {
            let get_text = |column: &str| row.try_get::<Option<String>, _>(column).map_err(db_error);
            let bytes: Vec<u8> = row.try_get("vector").map_err(db_error)?;
            loaded.put(VectorRecord {
                id: row.try_get("id").map_err(db_error)?,
                vector: decode(&bytes),
                session_id: get_text("session_name")?,
                peer_id: get_text("peer_name")?,
                level: get_text("level")?,
                lexical: None,
            });
        }
        Ok(loaded)
    }

    async fn cached(&self, namespace: &str) -> Result<Option<Arc<RwLock<Namespace>>>> {
        let Some(cache) = &self.cache else { return Ok(None) };
        let mut cache = cache.lock().await;
        if let Some(found) = cache.get(namespace) {
            return Ok(Some(found.clone()));
        }
        let loaded = Arc::new(RwLock::new(self.load(namespace).await?));
        cache.insert(namespace.to_owned(), loaded.clone());
        Ok(Some(loaded))
    }

    async fn if_cached(&self, namespace: &str) -> Option<Arc<RwLock<Namespace>>> {
        self.cache.as_ref()?.lock().await.get(namespace).cloned()
    }
}

fn poisoned<T>(_: T) -> Error {
    Error::Internal("vector cache lock poisoned".into())
}

#[async_trait]
impl VectorStore for SqlVectorStore {
    async fn check_dimensions(&self, dimensions: usize, model_id: &str) -> Result<()> {
        let mut tx = self.store.begin_write().await?;
        let stored: Option<String> = Sql::new("SELECT value FROM vector_settings WHERE name = 'dimensions'")
            .query()?
            .fetch_optional(tx.conn())
            .await
            .map_err(db_error)?
            .map(|row| row.try_get("value"))
            .transpose()
            .map_err(db_error)?;
        match stored {
            Some(stored) if stored != dimensions.to_string() => {
                let stored_model: Option<String> = Sql::new("SELECT value FROM vector_settings WHERE name = 'model'")
                    .query()?
                    .fetch_optional(tx.conn())
                    .await
                    .map_err(db_error)?
                    .and_then(|row| row.try_get("value").ok());
                Err(Error::FailedPrecondition(format!(
                    "the vector store holds {stored}-dimension vectors (model {}), but the configured embedder {model_id} makes {dimensions}: \
                     configure the same model, or re-embed into a new vector store",
                    stored_model.unwrap_or_else(|| "unknown".into())
                )))
            }
            Some(_) => tx.commit().await,
            None => {
                for (name, value) in [("dimensions", dimensions.to_string()), ("model", model_id.to_owned())] {
                    let mut insert = Sql::new("INSERT INTO vector_settings (name, value) VALUES (");
                    insert.bind(name).push(", ").bind(value).push(")");
                    execute(tx.conn(), &insert).await?;
                }
                tx.commit().await
            }
        }
    }

    async fn upsert(&self, namespace: &str, records: Vec<VectorRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin_write().await?;
        for chunk in records.chunks(100) {
            let mut sql =
                Sql::new("INSERT INTO vectors (namespace, id, session_name, peer_name, level, vector) VALUES ");
            for (index, record) in chunk.iter().enumerate() {
                if index > 0 {
                    sql.push(", ");
                }
                let optional = |value: &Option<String>| value.clone().map_or(Bind::NullText, Bind::Text);
                sql.push("(")
                    .bind(namespace)
                    .push(", ")
                    .bind(record.id.as_str())
                    .push(", ");
                sql.bind(optional(&record.session_id))
                    .push(", ")
                    .bind(optional(&record.peer_id))
                    .push(", ");
                sql.bind(optional(&record.level))
                    .push(", ")
                    .bind(Bind::Bytes(encode(&record.vector)))
                    .push(")");
            }
            sql.push(
                " ON CONFLICT (namespace, id) DO UPDATE SET session_name = excluded.session_name, \
                 peer_name = excluded.peer_name, level = excluded.level, vector = excluded.vector",
            );
            execute(tx.conn(), &sql).await?;
        }
        tx.commit().await?;
        if let Some(loaded) = self.if_cached(namespace).await {
            let mut loaded = loaded.write().map_err(poisoned)?;
            records.into_iter().for_each(|record| loaded.put(record));
        }
        Ok(())
    }

    async fn query(
        &self,
        namespace: &str,
        vector: &[f32],
        top_k: usize,
        filter: &VectorFilter,
        max_distance: Option<f32>,
    ) -> Result<Vec<VectorHit>> {
        let loaded = match self.cached(namespace).await? {
            Some(loaded) => loaded,
            None => Arc::new(RwLock::new(self.load(namespace).await?)),
        };
        let query = vector.to_vec();
        let filter = filter.clone();
        tokio::task::spawn_blocking(move || {
            let loaded = loaded.read().map_err(poisoned)?;
            Ok(loaded.scan(&query, top_k, &filter, max_distance))
        })
        .await
        .map_err(|error| Error::Internal(format!("vector scan failed: {error}")))?
    }

    async fn delete(&self, namespace: &str, ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin_write().await?;
        for chunk in ids.chunks(500) {
            let mut sql = Sql::new("DELETE FROM vectors WHERE namespace = ");
            sql.bind(namespace).push(" AND id IN (");
            for (index, id) in chunk.iter().enumerate() {
                if index > 0 {
                    sql.push(", ");
                }
                sql.bind(id.as_str());
            }
            sql.push(")");
            execute(tx.conn(), &sql).await?;
        }
        tx.commit().await?;
        if let Some(loaded) = self.if_cached(namespace).await {
            let mut loaded = loaded.write().map_err(poisoned)?;
            ids.iter().for_each(|id| loaded.remove(id));
        }
        Ok(())
    }

    async fn delete_namespace(&self, namespace: &str) -> Result<()> {
        let mut tx = self.store.begin_write().await?;
        let mut sql = Sql::new("DELETE FROM vectors WHERE namespace = ");
        sql.bind(namespace);
        execute(tx.conn(), &sql).await?;
        tx.commit().await?;
        if let Some(cache) = &self.cache {
            cache.lock().await.remove(namespace);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, vector: Vec<f32>, session: &str) -> VectorRecord {
        VectorRecord {
            id: id.into(),
            vector,
            session_id: Some(session.into()),
            peer_id: None,
            level: None,
            lexical: None,
        }
    }

    #[test]
    fn namespace_put_remove_and_scan() {
        let mut namespace = Namespace::default();
        namespace.put(record("a", vec![1.0, 0.0], "s1"));
        namespace.put(record("b", vec![0.0, 1.0], "s2"));
        namespace.put(record("c", vec![0.6, 0.8], "s1"));
        namespace.put(record("a", vec![0.8, 0.6], "s1"));
        let hits = namespace.scan(&[1.0, 0.0], 2, &VectorFilter::default(), None);
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["a", "c"]);
        namespace.remove("a");
        let hits = namespace.scan(
            &[1.0, 0.0],
            5,
            &VectorFilter {
                session_ids: Some(vec!["s1".into()]),
                ..VectorFilter::default()
            },
            None,
        );
        assert_eq!(hits.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["c"]);
        let near = namespace.scan(&[0.0, 1.0], 5, &VectorFilter::default(), Some(0.1));
        assert_eq!(near.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), ["b"]);
        assert_eq!(decode(&encode(&[1.5, -2.0])), [1.5, -2.0]);
    }

    /// The int8 shortlist with exact rescoring finds what an exact scan finds.
    #[test]
    fn quantized_scan_with_rescoring_matches_exact_search() {
        let dimensions = 64;
        let mut state = 0x2545_F491_4F6C_DD1D_u64;
        let mut random_unit = || {
            let mut vector: Vec<f32> = (0..dimensions)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            roncho_core::embed::normalize(&mut vector);
            vector
        };
        let mut namespace = Namespace::default();
        let vectors: Vec<Vec<f32>> = (0..3000).map(|_| random_unit()).collect();
        for (i, vector) in vectors.iter().enumerate() {
            namespace.put(record(&format!("v{i}"), vector.clone(), "s"));
        }
        let (mut found, mut wanted) = (0, 0);
        for _ in 0..50 {
            let query = random_unit();
            let mut exact: Vec<(f32, usize)> = vectors
                .iter()
                .enumerate()
                .map(|(i, v)| (1.0 - roncho_core::embed::dot(v, &query), i))
                .collect();
            exact.sort_by(|a, b| a.0.total_cmp(&b.0));
            let hits = namespace.scan(&query, 10, &VectorFilter::default(), None);
            for (distance, i) in &exact[..10] {
                wanted += 1;
                if let Some(hit) = hits.iter().find(|hit| hit.id == format!("v{i}")) {
                    found += 1;
                    assert!((hit.distance - distance).abs() < 1e-5, "distances are exact");
                }
            }
        }
        // Random vectors in 64 dimensions are a hard case (near-equal distances).
        assert!(found as f64 / wanted as f64 >= 0.98, "recall {found}/{wanted}");
    }
}
