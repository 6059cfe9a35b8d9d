//! [`TextSearch`]: full-text search over messages, and what an index behind
//! cannot match yet.

use crate::db::{SqlStore, execute, fetch_optional};
use crate::ports::sync::MESSAGE_TERM;
use crate::rows;
use crate::sql::{Dialect, Sql};
use crate::tx::vectors::push_perspective;
use crate::tx::vectors::text_vector;
use async_trait::async_trait;
use roncho_core::filter::Filter;
use roncho_core::lexical::TermCounts;
use roncho_core::model::{Message, MessageSearch};
use roncho_core::store::TextSearch;
use roncho_core::{Error, Result};

/// Postgres: unindexed messages of a session-scoped search's sessions
/// matched on the fly beyond the store's newest (`TEXT_TAIL`), newest
/// first. At 5,000 a session's whole backlog is read in one search
/// (docs/benchmarks.md); past it the reply says how many were left out.
pub const SESSION_TEXT_SCAN: i64 = 5_000;

/// Postgres: a session-scoped search whose sessions hold at most this many
/// messages reads every one of them along the session's index and matches
/// each by its stored words (or, not indexed yet, on the fly), instead of
/// ranking every match of the words across the store: its cost follows
/// the session, not the workspace (issue 37).
pub const SESSION_READ_WHOLE: i64 = 5_000;

/// Postgres: how many of the store's best-ranked indexed matches, per hit
/// asked for, a search reads first (see [`TopMatches`]).
const BEST_FIRST_FACTOR: i64 = 8;

/// Most unindexed messages counted for a search's gap report.
const GAP_COUNT_LIMIT: i64 = 1_000_000;

#[async_trait]
impl TextSearch for SqlStore {
    #[tracing::instrument(name = "store.search_messages", skip_all, fields(workspace_id = %workspace_id))]
    async fn search_messages(
        &self,
        workspace_id: &str,
        search: &MessageSearch,
        filter: &Filter,
    ) -> Result<Vec<Message>> {
        self.search_text(workspace_id, search, filter, None).await
    }

    async fn search_unsynced_messages(
        &self,
        workspace_id: &str,
        search: &MessageSearch,
        filter: &Filter,
        newest: i64,
    ) -> Result<Vec<Message>> {
        self.search_text(workspace_id, search, filter, Some(newest)).await
    }

    async fn text_index_gap(&self, workspace_id: &str, search: &MessageSearch) -> Result<i64> {
        if self.dialect() != Dialect::Postgres {
            return Ok(0);
        }
        let unindexed = self
            .waiting_in_scope(workspace_id, search, "message_unindexed", crate::tx::vectors::TEXT_TAIL)
            .await?;
        Ok(match search.session_ids {
            Some(_) => (unindexed - SESSION_TEXT_SCAN).max(0),
            None => unindexed,
        })
    }

    async fn term_counts(&self, workspace_id: &str, terms: &[u32]) -> Result<TermCounts> {
        let mut sql = Sql::new("SELECT term, documents FROM workspace_terms WHERE workspace_name = ");
        let wanted: Vec<i64> = std::iter::once(MESSAGE_TERM)
            .chain(terms.iter().map(|&term| i64::from(term)))
            .collect();
        sql.bind(workspace_id).push(" AND term IN ").push_list(&wanted);
        let mut counts = TermCounts::default();
        for row in self.read(&sql).await? {
            let (term, documents): (i64, i64) = (rows::get(&row, "term")?, rows::get(&row, "documents")?);
            let documents = u64::try_from(documents).unwrap_or(0);
            match u32::try_from(term) {
                Ok(term) => {
                    counts.frequencies.insert(term, documents);
                }
                Err(_) => counts.documents = documents,
            }
        }
        Ok(counts)
    }

    async fn vector_sync_gap(&self, workspace_id: &str, search: &MessageSearch, newest: i64) -> Result<i64> {
        self.waiting_in_scope(workspace_id, search, "message_sync", newest)
            .await
    }
}

impl SqlStore {
    /// SQLite: keeps FTS5's index of messages (`maintained`) or drops it.
    /// FTS5 ranks messages by their words only without an embedder; with
    /// one, the embedded vector store ranks them with an index of its own
    /// (ADR 0008), and FTS5's triggers cost every write a fifth or more.
    /// Turned off, the index is emptied (no word of an erased message
    /// stays in it); turned on, it is rebuilt from the rows, in the same
    /// transaction. Returns whether it changed. Postgres: nothing to do.
    pub async fn maintain_full_text_index(&self, maintained: bool) -> Result<bool> {
        if self.dialect != Dialect::Sqlite {
            return Ok(false);
        }
        let mut tx = self.begin_write().await?;
        let row = fetch_optional(tx.conn(), &Sql::new("SELECT maintained FROM full_text_state"))
            .await?
            .ok_or_else(|| Error::Internal("full_text_state has no row".into()))?;
        let was = rows::get::<i64>(&row, "maintained")? == 1;
        if was != maintained {
            let command = if maintained { "rebuild" } else { "delete-all" };
            let started = std::time::Instant::now();
            let mut sql = Sql::new("UPDATE full_text_state SET maintained = ");
            sql.bind(i64::from(maintained));
            execute(tx.conn(), &sql).await?;
            execute(
                tx.conn(),
                &Sql::new(&format!("INSERT INTO messages_fts (messages_fts) VALUES ('{command}')")),
            )
            .await?;
            tx.commit().await?;
            tracing::info!(
                maintained,
                seconds = started.elapsed().as_secs_f64(),
                "SQLite full-text index (FTS5) {}",
                if maintained {
                    "rebuilt from the rows"
                } else {
                    "emptied: the vector store ranks words"
                }
            );
        }
        self.full_text_maintained
            .store(maintained, std::sync::atomic::Ordering::Relaxed);
        Ok(was != maintained)
    }

    pub(crate) async fn search_text(
        &self,
        workspace_id: &str,
        search: &MessageSearch,
        filter: &Filter,
        unsynced_newest: Option<i64>,
    ) -> Result<Vec<Message>> {
        if search.terms.is_empty() || search.session_ids.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let conditions = |sql: &mut Sql| -> Result<()> {
            sql.push(" AND m.workspace_name = ").bind(workspace_id);
            if let Some(sessions) = &search.session_ids {
                sql.push(" AND m.session_name IN ").push_list(sessions);
            }
            if let Some(peer_id) = &search.peer_id {
                sql.push(" AND m.peer_name = ").bind(peer_id.as_str());
            }
            if let Some(observer) = &search.peer_perspective {
                push_perspective(sql, observer);
            }
            sql.push(" AND ");
            crate::sql::render_filter(sql, self.dialect(), filter, "m")
        };
        let sql = match (self.dialect(), unsynced_newest) {
            (Dialect::Sqlite, _) if !self.full_text_maintained() => {
                return Err(Error::Unavailable(
                    "the SQLite full-text index is off while the embedded vector store ranks words; \
                     restart without an embedder to rebuild it"
                        .into(),
                ));
            }
            (Dialect::Sqlite, _) => sqlite_matches(search, unsynced_newest, &conditions)?,
            (Dialect::Postgres, Some(newest)) => postgres_pending_matches(search, newest, &conditions)?,
            (Dialect::Postgres, None) => return self.postgres_search(workspace_id, search, &conditions).await,
        };
        self.read(&sql).await?.iter().map(rows::message).collect()
    }

    /// Postgres, the whole scope: by the plan whose cost follows the scope
    /// (see [`postgres_session_rows`] and [`postgres_matches`]).
    async fn postgres_search(
        &self,
        workspace_id: &str,
        search: &MessageSearch,
        conditions: &Conditions<'_>,
    ) -> Result<Vec<Message>> {
        if let Some(sessions) = &search.session_ids
            && self.messages_in_sessions(workspace_id, sessions).await? <= SESSION_READ_WHOLE
        {
            let sql = postgres_session_rows(workspace_id, sessions, search, conditions)?;
            return self.read(&sql).await?.iter().map(rows::message).collect();
        }
        // The best-ranked indexed matches of every workspace first: when
        // enough of them are in scope they are the scope's best, and no
        // other match's row is read.
        let best = TopMatches::Best(search.limit.saturating_mul(BEST_FIRST_FACTOR));
        let rows = self
            .read(&postgres_matches(workspace_id, search, conditions, best)?)
            .await?;
        let in_scope = match rows.first() {
            Some(row) => rows::get::<i64>(row, "indexed_in_scope")?,
            None => 0,
        };
        let rows = if in_scope >= search.limit {
            rows
        } else {
            self.read(&postgres_matches(workspace_id, search, conditions, TopMatches::All)?)
                .await?
        };
        rows.iter().map(rows::message).collect()
    }

    /// How many messages `sessions` of `workspace_id` hold.
    async fn messages_in_sessions(&self, workspace_id: &str, sessions: &[String]) -> Result<i64> {
        let mut sql = Sql::new(
            "SELECT CAST(COALESCE(SUM(message_count), 0) AS BIGINT) AS n FROM sessions WHERE workspace_name = ",
        );
        sql.bind(workspace_id).push(" AND name IN ").push_list(sessions);
        self.read_optional(&sql).await?.map_or(Ok(0), |row| rows::count(&row))
    }

    /// Counts the messages of `search`'s scope listed in `queue` (a table
    /// keyed by `message_id`) below the store's newest `tail`: one probe
    /// when none is.
    async fn waiting_in_scope(
        &self,
        workspace_id: &str,
        search: &MessageSearch,
        queue: &str,
        tail: i64,
    ) -> Result<i64> {
        if search.session_ids.as_ref().is_some_and(Vec::is_empty) {
            return Ok(0);
        }
        let mut behind = Sql::new(&format!(
            "SELECT COUNT(*) AS n FROM (SELECT 1 FROM {queue} WHERE message_id <= (SELECT MAX(id) FROM messages) - "
        ));
        behind.bind(tail).push(" LIMIT 1) any_behind");
        if self
            .read_optional(&behind)
            .await?
            .map_or(Ok(0), |row| rows::count(&row))?
            == 0
        {
            return Ok(0);
        }
        let mut sql = Sql::new(&format!(
            "SELECT COUNT(*) AS n FROM (SELECT 1 FROM messages m JOIN {queue} q ON q.message_id = m.id \
             WHERE m.id <= (SELECT MAX(id) FROM messages) - "
        ));
        sql.bind(tail).push(" AND m.workspace_name = ").bind(workspace_id);
        if let Some(sessions) = &search.session_ids {
            sql.push(" AND m.session_name IN ").push_list(sessions);
        }
        if let Some(peer_id) = &search.peer_id {
            sql.push(" AND m.peer_name = ").bind(peer_id.as_str());
        }
        sql.push(" LIMIT ").bind(GAP_COUNT_LIMIT).push(") behind");
        self.read_optional(&sql).await?.map_or(Ok(0), |row| rows::count(&row))
    }
}

/// Restricts messages `m` to sessions `observer` is or was a member of, while it was.
/// Restricts a search to the messages whose vectors are not synced yet
/// among the store's `newest` row ids, read from the right edge of the sync
/// queue's key (migration 0019).
fn push_unsynced_among_newest(sql: &mut Sql, newest: i64) {
    // The bound on `m.id` itself keeps any plan to the newest rows.
    sql.push(" AND m.id > (SELECT MAX(id) FROM messages) - ")
        .bind(newest)
        .push(
            " AND m.id IN (SELECT q.message_id FROM message_sync q WHERE q.state = 'pending' \
             AND q.message_id > (SELECT MAX(id) FROM messages) - ",
        )
        .bind(newest)
        .push(")");
}

/// What [`SqlStore::search_text`] adds to every branch: the search's scope and filter.
type Conditions<'a> = dyn Fn(&mut Sql) -> Result<()> + Sync + 'a;

/// SQLite: FTS5's matches, ranked by bm25 (among the unsynced newest rows
/// when `unsynced_newest`).
fn sqlite_matches(search: &MessageSearch, unsynced_newest: Option<i64>, conditions: &Conditions<'_>) -> Result<Sql> {
    // Quoted terms are plain strings to FTS5: no operator can reach it.
    let expression = search
        .terms
        .iter()
        .map(|term| format!("\"{term}\""))
        .collect::<Vec<_>>()
        .join(" OR ");
    // CROSS JOIN makes SQLite walk the full-text matches first and look rows
    // up by id; a plain JOIN let it scan messages and test MATCH per row
    // (6 s per query at 10k messages).
    let mut sql = Sql::new(&format!(
        "SELECT {} FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid WHERE messages_fts MATCH ",
        rows::MESSAGE_COLUMNS
    ));
    sql.bind(expression);
    if let Some(newest) = unsynced_newest {
        push_unsynced_among_newest(&mut sql, newest);
    }
    conditions(&mut sql)?;
    sql.push(" ORDER BY bm25(messages_fts), m.id DESC LIMIT ")
        .bind(search.limit);
    Ok(sql)
}

/// Postgres, among the `newest` rows whose vectors are not synced.
fn postgres_pending_matches(search: &MessageSearch, newest: i64, conditions: &Conditions<'_>) -> Result<Sql> {
    // Pending rows, many not text-indexed yet: each is matched by
    // its stored vector, or, among the TEXT_TAIL newest rows, by
    // one computed now (as the full query below does); an older
    // unindexed row waits for the text indexer.
    let query = search.terms.join(" | ");
    let mut sql = Sql::new(&format!(
        "SELECT {} FROM messages m LEFT JOIN LATERAL \
         (SELECT search_vector FROM message_text t WHERE t.message_id = m.id OFFSET 0) t ON true \
         WHERE (t.search_vector @@ to_tsquery('english', ",
        rows::MESSAGE_COLUMNS
    ));
    sql.bind(query.as_str())
        .push(") OR (t.search_vector IS NULL AND m.id > (SELECT MAX(id) FROM messages) - ")
        .bind(crate::tx::vectors::TEXT_TAIL)
        .push(&format!(" AND {} @@ to_tsquery('english', ", text_vector("m")))
        .bind(query.as_str())
        .push(")))");
    push_unsynced_among_newest(&mut sql, newest);
    conditions(&mut sql)?;
    sql.push(&format!(
        " ORDER BY ts_rank(COALESCE(t.search_vector, {}), to_tsquery('english', ",
        text_vector("m")
    ))
    .bind(query)
    .push(")) DESC, m.id DESC LIMIT ")
    .bind(search.limit);
    Ok(sql)
}

/// Which of the text-indexed matches [`postgres_matches`] reads.
#[derive(Debug, Clone, Copy)]
enum TopMatches {
    /// Every match, each one's row read and tested against the scope.
    All,
    /// The store's best this many, ranked before any row is read. Those in
    /// scope are the scope's best when there are at least as many as the
    /// search's limit (the column `indexed_in_scope` says how many): a
    /// match in scope ranked below them is below the store's best too.
    Best(i64),
}

/// Postgres: a session-scoped search over every message of its sessions
/// (at most [`SESSION_READ_WHOLE`], newest first), each matched by its
/// stored words, or on the fly while it is not indexed.
fn postgres_session_rows(
    workspace_id: &str,
    sessions: &[String],
    search: &MessageSearch,
    conditions: &Conditions<'_>,
) -> Result<Sql> {
    let query = search.terms.join(" | ");
    let mut sql = Sql::new(&format!(
        "SELECT {}, ts_rank(COALESCE(t.search_vector, {}), to_tsquery('english', ",
        rows::MESSAGE_COLUMNS,
        text_vector("m")
    ));
    sql.bind(query.as_str())
        .push(")) AS rank FROM (SELECT * FROM messages s WHERE s.workspace_name = ")
        .bind(workspace_id)
        .push(" AND s.session_name IN ")
        .push_list(sessions);
    // Twice the bound: messages written since the sessions were counted are
    // read too. Each row is read once, along the session's index.
    sql.push(" ORDER BY s.seq_in_session DESC LIMIT ")
        .bind(2 * SESSION_READ_WHOLE)
        .push(
            ") m LEFT JOIN LATERAL (SELECT search_vector FROM message_text t WHERE t.message_id = m.id OFFSET 0) t \
             ON true WHERE (t.search_vector @@ to_tsquery('english', ",
        )
        .bind(query.as_str())
        .push(&format!(
            ") OR (t.search_vector IS NULL AND {} @@ to_tsquery('english', ",
            text_vector("m")
        ))
        .bind(query.as_str())
        .push(")))");
    conditions(&mut sql)?;
    sql.push(" ORDER BY rank DESC, m.id DESC LIMIT ").bind(search.limit);
    Ok(sql)
}

/// Postgres, the whole scope.
fn postgres_matches(
    workspace_id: &str,
    search: &MessageSearch,
    conditions: &Conditions<'_>,
    top: TopMatches,
) -> Result<Sql> {
    // The text-indexed rows through the GIN index, and the newest
    // rows still waiting for the text indexer matched on the fly
    // (see migration 0016): a message is searchable by its words as
    // soon as it is written, at a cost bounded by TEXT_TAIL rows.
    let query = search.terms.join(" | ");
    // Each branch: the search's scope and filter, its best `limit`.
    let close_branch = |sql: &mut Sql| -> Result<()> {
        conditions(sql)?;
        sql.push(" ORDER BY rank DESC, m.id DESC LIMIT ")
            .bind(search.limit)
            .push(")");
        Ok(())
    };
    // The indexed rows: the GIN index's matches first, ranked (all,
    // or the best of the store, as `top` says), then each one's
    // message by primary key. The `OFFSET 0` and `LIMIT` fences keep
    // the plan so whatever the planner knows: without statistics it
    // started from the workspace's messages (every row tested, or
    // hashed: the whole workspace read per search). How many of them
    // are in scope comes back with every row (`indexed_in_scope`).
    let mut sql = Sql::new(&format!(
        "WITH indexed AS (SELECT {}, m.id AS row_id, hits.rank FROM \
         (SELECT message_id, ts_rank(search_vector, to_tsquery('english', ",
        rows::MESSAGE_COLUMNS
    ));
    sql.bind(query.as_str())
        .push(")) AS rank FROM message_text WHERE search_vector @@ to_tsquery('english', ")
        .bind(query.as_str())
        .push(")");
    match top {
        TopMatches::All => sql.push(" OFFSET 0"),
        TopMatches::Best(best) => sql.push(" ORDER BY rank DESC, message_id DESC LIMIT ").bind(best),
    };
    sql.push(
        ") hits CROSS JOIN LATERAL \
         (SELECT * FROM messages m WHERE m.id = hits.message_id OFFSET 0) m WHERE 1 = 1",
    );
    conditions(&mut sql)?;
    sql.push(" ORDER BY rank DESC, m.id DESC LIMIT ")
        .bind(search.limit)
        .push(") SELECT *, (SELECT COUNT(*) FROM indexed) AS indexed_in_scope FROM ((SELECT * FROM indexed)");
    // The newest rows not indexed yet, matched on the fly; the
    // bound on `m.id` itself is what keeps `to_tsvector` off
    // older rows whichever way the planner goes.
    sql.push(&format!(
        " UNION ALL (SELECT {}, m.id AS row_id, ts_rank({}, to_tsquery('english', ",
        rows::MESSAGE_COLUMNS,
        text_vector("m")
    ));
    sql.bind(query.as_str())
        .push(")) AS rank FROM messages m WHERE m.id > (SELECT MAX(id) FROM messages) - ")
        .bind(crate::tx::vectors::TEXT_TAIL)
        .push(
            " AND m.id IN (SELECT message_id FROM message_unindexed \
             WHERE message_id > (SELECT MAX(id) FROM messages) - ",
        )
        .bind(crate::tx::vectors::TEXT_TAIL)
        .push(&format!(") AND {} @@ to_tsquery('english', ", text_vector("m")))
        .bind(query.as_str())
        .push(")");
    close_branch(&mut sql)?;
    // A session-scoped search also matches its sessions' own
    // older unindexed rows on the fly (the newest
    // SESSION_TEXT_SCAN of them, read along the session's
    // index), so a session's words are found while the indexer
    // is behind or absent; what is left out is reported by
    // `text_index_gap`.
    if let Some(sessions) = &search.session_ids {
        sql.push(&format!(
            " UNION ALL (SELECT {}, m.id AS row_id, ts_rank({}, to_tsquery('english', ",
            rows::MESSAGE_COLUMNS,
            text_vector("m")
        ));
        sql.bind(query.as_str())
            .push(")) AS rank FROM (SELECT s.id FROM messages s WHERE s.workspace_name = ");
        sql.bind(workspace_id)
            .push(" AND s.session_name IN ")
            .push_list(sessions);
        sql.push(" AND s.id <= (SELECT MAX(id) FROM messages) - ")
            .bind(crate::tx::vectors::TEXT_TAIL)
            .push(
                " AND EXISTS (SELECT 1 FROM message_unindexed u WHERE u.message_id = s.id) \
                 ORDER BY s.seq_in_session DESC LIMIT ",
            )
            .bind(SESSION_TEXT_SCAN)
            .push(") scope CROSS JOIN LATERAL (SELECT * FROM messages m WHERE m.id = scope.id OFFSET 0) m WHERE ")
            .push(&format!("{} @@ to_tsquery('english', ", text_vector("m")))
            .bind(query.as_str())
            .push(")");
        close_branch(&mut sql)?;
    }
    sql.push(") found ORDER BY rank DESC, row_id DESC LIMIT ")
        .bind(search.limit);
    Ok(sql)
}
