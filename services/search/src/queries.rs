//! The embeddings of recent queries, by exact text, per workspace: an agent
//! asks the same question turn after turn, and a query's embedding is most
//! of a search's time on a CPU (bge-small: ~19 ms of ~29 ms).
//!
//! Keyed by workspace as well as text, so a workspace cannot learn from
//! the time a search takes whether another asked the same words. Bounded
//! in entries and in the length of what it keeps; in memory only (a
//! query's vector, not a message or anything erasure must reach).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Most queries kept.
pub const QUERY_CACHE_ENTRIES: usize = 1_024;
/// Longest query kept, in bytes (longer ones are embedded every time).
pub const QUERY_CACHE_TEXT_BYTES: usize = 2_048;

type Key = (String, String);

/// The least recently used entries go first when it is full.
#[derive(Debug, Default)]
pub struct QueryCache {
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    vectors: HashMap<Key, (Arc<[f32]>, u64)>,
    clock: u64,
}

impl QueryCache {
    /// Returns the vector of `query` in `workspace`, when kept.
    pub fn get(&self, workspace: &str, query: &str) -> Option<Arc<[f32]>> {
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.clock += 1;
        let now = entries.clock;
        let key = (workspace.to_owned(), query.to_owned());
        let (vector, used) = entries.vectors.get_mut(&key)?;
        *used = now;
        Some(vector.clone())
    }

    /// Keeps the vector of `query` in `workspace` (not a query too long to keep).
    pub fn put(&self, workspace: &str, query: &str, vector: Arc<[f32]>) {
        if query.len() > QUERY_CACHE_TEXT_BYTES {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        entries.clock += 1;
        let now = entries.clock;
        let key = (workspace.to_owned(), query.to_owned());
        if entries.vectors.len() >= QUERY_CACHE_ENTRIES && !entries.vectors.contains_key(&key) {
            let oldest = entries
                .vectors
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                entries.vectors.remove(&oldest);
            }
        }
        entries.vectors.insert(key, (vector, now));
    }

    /// How many queries are kept.
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .vectors
            .len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(value: f32) -> Arc<[f32]> {
        Arc::from(vec![value; 4])
    }

    #[test]
    fn queries_are_kept_per_workspace_and_the_least_recent_goes_first() {
        let cache = QueryCache::default();
        cache.put("w", "pet cat", vector(1.0));
        assert_eq!(cache.get("w", "pet cat").as_deref(), Some(&[1.0; 4][..]));
        assert!(
            cache.get("x", "pet cat").is_none(),
            "another workspace's query is not seen"
        );
        assert!(cache.get("w", "pet  cat").is_none(), "exact text only");
        for n in 0..QUERY_CACHE_ENTRIES {
            if n == QUERY_CACHE_ENTRIES / 2 {
                cache.get("w", "pet cat");
            }
            cache.put("w", &format!("query {n}"), vector(0.0));
        }
        assert_eq!(cache.len(), QUERY_CACHE_ENTRIES, "bounded");
        assert!(cache.get("w", "pet cat").is_some(), "used recently: kept");
        assert!(cache.get("w", "query 0").is_none(), "the least recently used went");
        cache.put("w", &"long ".repeat(QUERY_CACHE_TEXT_BYTES), vector(2.0));
        assert!(
            cache.get("w", &"long ".repeat(QUERY_CACHE_TEXT_BYTES)).is_none(),
            "too long to keep"
        );
    }
}
