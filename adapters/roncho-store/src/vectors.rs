//! `SqlVectorStore`: exact nearest-neighbour search over vectors kept in the
//! relational database (the SQLite file in the embedded mode). Scans run off
//! the async runtime. On SQLite — one process — each namespace is cached in
//! memory and kept current by this store's own writes; on Postgres, where
//! other processes write too, every query reads the namespace afresh (the
//! distributed mode's vector store is Qdrant; this is its fallback).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use roncho_core::vector::{
    Found, SearchFailure, SearchPlan, VectorFilter, VectorHit, VectorRecord, VectorStore, Words, messages_namespace,
    messages_workspace,
};
use roncho_core::{Error, Result};
use sqlx::Row;
use sqlx::any::AnyRow;
use tokio::sync::Mutex;

use crate::SqlStore;
use crate::db::{db_error, execute};
use crate::sql::{Bind, Dialect, Sql};
use crate::text_index::{self, IndexedMessage, TextIndex};

mod namespace;

use namespace::{Namespace, decode_into, encode};

/// A namespace's place in the cache: empty until loaded, and locked while
/// it loads, so searches and writes of that namespace wait for the load
/// and those of every other namespace do not.
type Slot = Arc<Mutex<Option<Arc<RwLock<Namespace>>>>>;

/// Loaded namespaces by name.
type NamespaceCache = HashMap<String, Slot>;

/// A workspace's full-text index and the lock its catch-up reads take one at a time.
#[derive(Debug, Default)]
struct TextEntry {
    catch_up: Mutex<()>,
    index: RwLock<TextIndex>,
}

/// Full-text indexes by workspace.
type TextIndexes = HashMap<String, Arc<TextEntry>>;

/// Rows read per statement while a full-text index catches up.
const TEXT_BATCH: i64 = 20_000;
/// Vectors read per statement while a namespace loads.
const VECTOR_BATCH: i64 = 20_000;

/// The exact vector store over a `SqlStore`'s database.
#[derive(Debug, Clone)]
pub struct SqlVectorStore {
    store: Arc<SqlStore>,
    /// Loaded namespaces (SQLite only).
    cache: Option<Arc<Mutex<NamespaceCache>>>,
    /// Full-text indexes of workspaces' messages, by workspace (SQLite only).
    texts: Option<Arc<Mutex<TextIndexes>>>,
    /// Every namespace stays in memory (set by [`SqlVectorStore::warm`]):
    /// a write loads the namespace it finds unloaded and brings its
    /// workspace's full-text index up to date, so no search loads either.
    resident: Arc<AtomicBool>,
}

impl SqlVectorStore {
    /// Returns the vector store sharing `store`'s database.
    pub fn new(store: Arc<SqlStore>) -> Self {
        let sqlite = store.dialect() == Dialect::Sqlite;
        let cache = sqlite.then(|| Arc::new(Mutex::new(HashMap::new())));
        let texts = sqlite.then(|| Arc::new(Mutex::new(HashMap::new())));
        Self {
            store,
            cache,
            texts,
            resident: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether this store ranks messages' words itself, over every row
    /// written (SQLite's in-memory index): the database's own full-text
    /// index then rests.
    pub fn ranks_words(&self) -> bool {
        self.texts.is_some()
    }

    /// The full-text index of `workspace_id`'s messages, brought up to the
    /// rows written so far (`None` on Postgres).
    async fn text_index(&self, workspace_id: &str) -> Result<Option<Arc<TextEntry>>> {
        let Some(texts) = &self.texts else { return Ok(None) };
        let entry = texts.lock().await.entry(workspace_id.to_owned()).or_default().clone();
        let _one_reader = entry.catch_up.lock().await;
        let (started, mut read) = (std::time::Instant::now(), 0);
        loop {
            let after = entry.index.read().map_err(poisoned)?.indexed_upto;
            let mut sql = Sql::new(
                "SELECT m.id, m.public_id, m.session_name, m.peer_name, m.content FROM messages m \
                 WHERE m.workspace_name = ",
            );
            sql.bind(workspace_id).push(" AND m.id > ").bind(after);
            // Hits are read back through the rows, which hide them too; the
            // text of what is being erased is not copied into memory at all.
            crate::tx::erasing::push_not_erasing(&mut sql, crate::tx::erasing::MESSAGE);
            sql.push(" ORDER BY m.id LIMIT ").bind(TEXT_BATCH);
            let rows: Vec<AnyRow> = self.store.read(&sql).await?;
            let complete = (rows.len() as i64) < TEXT_BATCH;
            let messages = rows
                .iter()
                .map(|row| {
                    Ok(IndexedMessage {
                        row: row.try_get("id").map_err(db_error)?,
                        id: row.try_get("public_id").map_err(db_error)?,
                        session_id: row.try_get("session_name").map_err(db_error)?,
                        peer_id: row.try_get("peer_name").map_err(db_error)?,
                        content: row.try_get("content").map_err(db_error)?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            if !messages.is_empty() {
                let vectors = tokio::task::spawn_blocking(move || text_index::vectorize(messages))
                    .await
                    .map_err(|error| Error::Internal(format!("full-text indexing failed: {error}")))?;
                entry.index.write().map_err(poisoned)?.add(vectors);
            }
            read += rows.len();
            if complete {
                if read as i64 >= TEXT_BATCH {
                    tracing::info!(
                        workspace_id,
                        messages = read,
                        seconds = started.elapsed().as_secs_f64(),
                        "messages indexed for full-text search"
                    );
                }
                return Ok(Some(entry.clone()));
            }
        }
    }

    /// Reads a namespace's vectors, [`VECTOR_BATCH`] rows per statement,
    /// each decoded straight into the arrays. On SQLite a namespace of at
    /// least a quarter of the table is read in the table's order (a
    /// million vectors from a warm file: 1.5 s in `sqlite3` against 6.8 s
    /// in the order of the key's index); others, and Postgres, by the key.
    async fn load(&self, namespace: &str) -> Result<Namespace> {
        let mut count = Sql::new("SELECT COUNT(*) AS total FROM vectors WHERE namespace = ");
        count.bind(namespace);
        let total = self.count(&count).await?;
        let in_table_order = self.store.dialect() == Dialect::Sqlite
            && total * 4 >= self.count(&Sql::new("SELECT MAX(rowid) AS total FROM vectors")).await?;
        let mut loaded = Namespace::default();
        let (mut after_id, mut after_row, mut vector, mut passages) = (String::new(), 0_i64, Vec::new(), Vec::new());
        loop {
            let mut sql = if in_table_order {
                let mut sql = Sql::new(
                    "SELECT rowid AS at, id, session_name, peer_name, level, vector, passages FROM vectors \
                     WHERE rowid > ",
                );
                // `+`: the table's own order, not the key's index.
                sql.bind(after_row)
                    .push(" AND +namespace = ")
                    .bind(namespace)
                    .push(" ORDER BY rowid");
                sql
            } else {
                let mut sql = Sql::new(
                    "SELECT id, session_name, peer_name, level, vector, passages FROM vectors WHERE namespace = ",
                );
                sql.bind(namespace)
                    .push(" AND id > ")
                    .bind(after_id.as_str())
                    .push(" ORDER BY id");
                sql
            };
            sql.push(" LIMIT ").bind(VECTOR_BATCH);
            let rows: Vec<AnyRow> = self.store.read(&sql).await?;
            for row in &rows {
                let get_text = |column: &str| row.try_get::<Option<&str>, _>(column).map_err(db_error);
                let bytes: &[u8] = row.try_get("vector").map_err(db_error)?;
                decode_into(bytes, &mut vector);
                if loaded.ids.is_empty() {
                    loaded.reserve(usize::try_from(total).unwrap_or(0), vector.len());
                }
                let id: String = row.try_get("id").map_err(db_error)?;
                if in_table_order {
                    after_row = row.try_get("at").map_err(db_error)?;
                } else {
                    after_id.clone_from(&id);
                }
                let labels = [get_text("session_name")?, get_text("peer_name")?, get_text("level")?];
                let bytes: Option<&[u8]> = row.try_get("passages").map_err(db_error)?;
                decode_into(bytes.unwrap_or_default(), &mut passages);
                if !passages.is_empty() && !vector.is_empty() {
                    loaded.put_passages(&id, labels, passages.chunks_exact(vector.len()));
                }
                loaded.put_parts(id, labels, &vector);
            }
            if (rows.len() as i64) < VECTOR_BATCH {
                return Ok(loaded);
            }
        }
    }

    /// The one number `sql` selects as `total` (0 for none, or NULL).
    async fn count(&self, sql: &Sql) -> Result<i64> {
        Ok(match self.store.read_optional(sql).await? {
            Some(row) => row.try_get::<Option<i64>, _>("total").map_err(db_error)?.unwrap_or(0),
            None => 0,
        })
    }

    async fn cached(&self, namespace: &str) -> Result<Option<Arc<RwLock<Namespace>>>> {
        let Some(cache) = &self.cache else { return Ok(None) };
        let slot = cache.lock().await.entry(namespace.to_owned()).or_default().clone();
        let mut slot = slot.lock().await;
        if let Some(found) = &*slot {
            return Ok(Some(found.clone()));
        }
        let started = std::time::Instant::now();
        let loaded = self.load(namespace).await?;
        tracing::info!(
            namespace,
            vectors = loaded.ids.len(),
            seconds = started.elapsed().as_secs_f64(),
            "vectors loaded into memory"
        );
        let loaded = Arc::new(RwLock::new(loaded));
        *slot = Some(loaded.clone());
        Ok(Some(loaded))
    }

    /// The namespace's vectors if they are loaded, once a load under way ends.
    async fn if_cached(&self, namespace: &str) -> Option<Arc<RwLock<Namespace>>> {
        let slot = self.cache.as_ref()?.lock().await.get(namespace).cloned()?;
        slot.lock().await.clone()
    }

    /// Loads every namespace's vectors and every workspace's full-text
    /// index into memory (SQLite; nothing elsewhere), messages first, one
    /// namespace at a time: what the first search of each would otherwise
    /// wait for. The server runs it in the background at start-up, so a
    /// search after a restart does not wait for a million rows (40–60 s on
    /// two cores, up to the request deadline): ADR 0018.
    pub async fn warm(&self) -> Result<()> {
        if self.cache.is_none() {
            return Ok(());
        }
        // Writes from here on keep what is loaded whole, and load what is not.
        self.resident.store(true, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let rows = self
            .store
            .read(&Sql::new("SELECT DISTINCT namespace FROM vectors"))
            .await?;
        let mut namespaces = rows
            .iter()
            .map(|row| row.try_get::<String, _>("namespace").map_err(db_error))
            .collect::<Result<Vec<_>>>()?;
        namespaces.sort_by_key(|namespace| messages_workspace(namespace).is_none());
        for namespace in &namespaces {
            match messages_workspace(namespace) {
                Some(workspace_id) => {
                    let (vectors, text) = tokio::join!(self.cached(namespace), self.text_index(workspace_id));
                    vectors?;
                    text?;
                }
                None => {
                    self.cached(namespace).await?;
                }
            }
        }
        if !namespaces.is_empty() {
            tracing::info!(
                namespaces = namespaces.len(),
                seconds = started.elapsed().as_secs_f64(),
                "search indexes loaded into memory"
            );
        }
        Ok(())
    }

    /// The full-text index of a messages namespace, if one is loaded.
    async fn if_text_indexed(&self, namespace: &str) -> Option<Arc<TextEntry>> {
        let workspace_id = messages_workspace(namespace)?;
        self.texts.as_ref()?.lock().await.get(workspace_id).cloned()
    }
}

fn poisoned<T>(_: T) -> Error {
    Error::Internal("vector cache lock poisoned".into())
}

#[async_trait]
impl VectorStore for SqlVectorStore {
    /// Records the embedder's size and model, or checks them against what
    /// is recorded. Another size is refused; another model of the same size
    /// (bge-small-en-v1.5 after all-MiniLM-L6-v2, both 384) is a re-embed:
    /// its vectors are dropped and every message and conclusion queued
    /// again in the same transaction, since cosines between two models'
    /// spaces mean nothing. Until the reconciler has filled the store again
    /// (`roncho status` shows the pending rows) search finds by meaning only
    /// what it has re-embedded, and by words everything.
    async fn check_dimensions(&self, dimensions: usize, model_id: &str) -> Result<()> {
        let mut tx = self.store.begin_write().await?;
        let mut settings = HashMap::new();
        let rows = Sql::new("SELECT name, value FROM vector_settings")
            .query(self.store.dialect())?
            .fetch_all(tx.conn())
            .await
            .map_err(db_error)?;
        for row in rows {
            let name: String = row.try_get("name").map_err(db_error)?;
            settings.insert(name, row.try_get::<String, _>("value").map_err(db_error)?);
        }
        let stored_model = settings.get("model").map_or("unknown", String::as_str);
        match settings.get("dimensions") {
            Some(stored) if *stored != dimensions.to_string() => {
                return Err(Error::FailedPrecondition(format!(
                    "the vector store holds {stored}-dimension vectors (model {stored_model}), but the configured \
                     embedder {model_id} makes {dimensions}: configure the same model, or re-embed into a new vector store"
                )));
            }
            Some(_) if settings.get("model").is_some_and(|stored| stored != model_id) => {
                tracing::warn!(
                    from = stored_model,
                    to = model_id,
                    "the embedding model changed: every message and conclusion is embedded again"
                );
                crate::tx::vectors::requeue_messages(tx.conn(), &|sql: &mut Sql| {
                    sql.push("1 = 1");
                })
                .await?;
                for statement in [
                    "DELETE FROM vectors",
                    "UPDATE documents SET sync_state = 'pending', sync_attempts = 0, sync_error = NULL \
                     WHERE sync_state <> 'pending'",
                ] {
                    execute(tx.conn(), &Sql::new(statement)).await?;
                }
                let mut update = Sql::new("UPDATE vector_settings SET value = ");
                update.bind(model_id).push(" WHERE name = 'model'");
                execute(tx.conn(), &update).await?;
            }
            Some(_) => {}
            None => {
                for (name, value) in [("dimensions", dimensions.to_string()), ("model", model_id.to_owned())] {
                    let mut insert = Sql::new("INSERT INTO vector_settings (name, value) VALUES (");
                    insert.bind(name).push(", ").bind(value).push(")");
                    execute(tx.conn(), &insert).await?;
                }
            }
        }
        tx.commit().await?;
        // Nothing loaded before the check may outlive a re-embed.
        if let Some(cache) = &self.cache {
            cache.lock().await.clear();
        }
        Ok(())
    }

    async fn upsert(&self, namespace: &str, records: Vec<VectorRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin_rebuildable().await?;
        for chunk in records.chunks(100) {
            let mut sql = Sql::new(
                "INSERT INTO vectors (namespace, id, session_name, peer_name, level, vector, passages) VALUES ",
            );
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
                    .push(", ")
                    // Empty for a text read whole, as NULL for rows from before passages.
                    .bind(Bind::Bytes(
                        record.passages.iter().flat_map(|passage| encode(passage)).collect(),
                    ))
                    .push(")");
            }
            sql.push(
                " ON CONFLICT (namespace, id) DO UPDATE SET session_name = excluded.session_name, \
                 peer_name = excluded.peer_name, level = excluded.level, vector = excluded.vector, \
                 passages = excluded.passages",
            );
            execute(tx.conn(), &sql).await?;
        }
        tx.commit().await?;
        self.store.erased_bytes.note();
        let resident = self.resident.load(Ordering::Relaxed);
        let loaded = match resident {
            // Loaded with the rows just written; putting them again replaces them.
            true => self.cached(namespace).await?,
            false => self.if_cached(namespace).await,
        };
        if let Some(loaded) = loaded {
            let mut loaded = loaded.write().map_err(poisoned)?;
            records.into_iter().for_each(|record| loaded.put(record));
        }
        if let Some(workspace_id) = messages_workspace(namespace).filter(|_| resident)
            && let Err(error) = self.text_index(workspace_id).await
        {
            // The next search catches the index up instead.
            tracing::warn!(%error, workspace_id, "the full-text index did not catch up after a write");
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

    /// On SQLite, the words in the workspace's in-memory index (every row
    /// written) while the query is embedded, then its nearest vectors; on
    /// Postgres, the database's full text beside the nearest vectors.
    async fn search(&self, plan: &SearchPlan<'_>) -> std::result::Result<Found, SearchFailure> {
        let namespace = messages_namespace(plan.workspace_id);
        let meaning = async {
            let vector = plan.query.meaning().await?;
            self.query(&namespace, &vector, plan.top_k, &plan.scope, None).await
        };
        let words = async {
            match self.text_index(plan.workspace_id).await? {
                Some(text) => {
                    let (words, top_k, scope) = (plan.words.clone(), plan.top_k, plan.scope.clone());
                    let hits = tokio::task::spawn_blocking(move || {
                        Ok::<_, Error>(text.index.read().map_err(poisoned)?.top(&words, top_k, &scope))
                    })
                    .await
                    .map_err(|error| Error::Internal(format!("full-text ranking failed: {error}")))??;
                    Ok(Words::Ranked(hits))
                }
                None => plan.database_words().await,
            }
        };
        let (words, meaning) = tokio::join!(words, meaning);
        Ok(Found { words: words?, meaning })
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
        self.store.erased_bytes.note();
        if let Some(loaded) = self.if_cached(namespace).await {
            let mut loaded = loaded.write().map_err(poisoned)?;
            ids.iter().for_each(|id| loaded.remove(id));
        }
        if let Some(text) = self.if_text_indexed(namespace).await {
            // After any catch-up under way: one that read these rows before
            // they were deleted must not add them back after their removal.
            let _catching_up = text.catch_up.lock().await;
            let mut index = text.index.write().map_err(poisoned)?;
            ids.iter().for_each(|id| index.remove(id));
        }
        Ok(())
    }

    async fn delete_namespace(&self, namespace: &str) -> Result<()> {
        let mut tx = self.store.begin_write().await?;
        let mut sql = Sql::new("DELETE FROM vectors WHERE namespace = ");
        sql.bind(namespace);
        execute(tx.conn(), &sql).await?;
        tx.commit().await?;
        self.store.erased_bytes.note();
        if let Some(cache) = &self.cache {
            cache.lock().await.remove(namespace);
        }
        if let (Some(texts), Some(workspace_id)) = (&self.texts, messages_workspace(namespace)) {
            texts.lock().await.remove(workspace_id);
        }
        Ok(())
    }
}
