//! [`TextSearch`]: full-text search over messages, and what an index behind
//! cannot match yet.

use crate::db::{SqlStore, execute, fetch_optional};
use crate::ports::sync::MESSAGE_TERM;
use crate::rows;
use crate::sql::{Dialect, Sql};
use crate::tx::erasing::{self, push_not_erasing};
use crate::tx::vectors::push_perspective;
use crate::tx::vectors::text_vector;
use async_trait::async_trait;
use roncho_core::filter::Filter;
use roncho_core::lexical::TermCounts;
use roncho_core::model::MeaningLag;
use roncho_core::model::{Message, MessageQuery};
use roncho_core::store::{GAP_COUNT_LIMIT, TextSearch};
use roncho_core::{Error, Result};

/// Postgres: unindexed messages of a session-scoped search's sessions
/// matched on the fly beyond the store's newest (`TEXT_TAIL`), newest
/// first. At 5,000 a session's whole backlog is read in one search
/// (docs/benchmarks.md); past it the reply says how many were left out.
pub const SESSION_TEXT_SCAN: i64 = 5_000;

/// Postgres: a session-scoped search whose sessions hold at most this many
/// messages reads their indexed words as one range of the (workspace,
/// session) index and tests each (its unindexed are matched on the fly),
/// instead of ranking every match of the words in the workspace: its cost
/// follows the session, not the workspace (issue 37).
pub const SESSION_READ_WHOLE: i64 = 5_000;

/// How many of a queue's newest entries a gap count of a scope wider than
/// sessions reads before it walks the scope instead (see
/// `SqlStore::waiting_in_scope`).
const GAP_QUEUE_WINDOW: i64 = 10_000;

/// Postgres: how many of the store's best-ranked indexed matches, per hit
/// asked for, a search reads first (see [`TopMatches`]).
const BEST_FIRST_FACTOR: i64 = 8;

#[async_trait]
impl TextSearch for SqlStore {
    #[tracing::instrument(name = "store.search_messages", skip_all, fields(workspace_id = %workspace_id))]
    async fn search_messages(
        &self,
        workspace_id: &str,
        search: &MessageQuery,
        filter: &Filter,
    ) -> Result<Vec<Message>> {
        self.search_text(workspace_id, search, filter, None).await
    }

    async fn search_unsynced_messages(
        &self,
        workspace_id: &str,
        search: &MessageQuery,
        filter: &Filter,
        newest: i64,
    ) -> Result<Vec<Message>> {
        self.search_text(workspace_id, search, filter, Some(newest)).await
    }

    async fn text_index_gap(&self, workspace_id: &str, search: &MessageQuery) -> Result<i64> {
        if self.dialect() != Dialect::Postgres {
            return Ok(0);
        }
        // A session-scoped search matches its sessions' newest
        // SESSION_TEXT_SCAN unindexed messages on the fly: the gap is past them.
        let covered = if search.session_ids.is_some() {
            SESSION_TEXT_SCAN
        } else {
            0
        };
        self.waiting_in_scope(
            workspace_id,
            search,
            "message_unindexed",
            crate::tx::vectors::TEXT_TAIL,
            covered,
        )
        .await
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

    async fn vector_sync_gap(&self, workspace_id: &str, search: &MessageQuery, newest: i64) -> Result<i64> {
        self.waiting_in_scope(workspace_id, search, "message_sync", newest, 0)
            .await
    }

    async fn meaning_lag(&self, workspace_id: &str) -> Result<MeaningLag> {
        // Nothing waits, most of the time: one probe of the queue.
        let probe = Sql::new("SELECT 1 AS n FROM message_sync WHERE state = 'pending' LIMIT 1");
        if self.read_optional(&probe).await?.is_none() {
            return Ok(MeaningLag::default());
        }
        // The workspace's own newest messages, along its key, each looked up
        // in the queue: what others write is neither counted nor read.
        let mut sql = Sql::new(
            "SELECT COUNT(*) AS seen, COUNT(q.message_id) AS n, MIN(q.queued_at) AS oldest FROM \
             (SELECT id FROM messages WHERE workspace_name = ",
        );
        sql.bind(workspace_id)
            .push(" ORDER BY id DESC LIMIT ")
            .bind(GAP_COUNT_LIMIT)
            .push(") m LEFT JOIN message_sync q ON q.message_id = m.id AND q.state = 'pending'");
        let Some(row) = self.read_optional(&sql).await? else {
            return Ok(MeaningLag::default());
        };
        let messages = rows::count(&row)?;
        Ok(MeaningLag {
            messages,
            // Every message looked at waits: older ones may too.
            at_least: messages == GAP_COUNT_LIMIT,
            oldest_queued_at: rows::get(&row, "oldest")?,
        })
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
        search: &MessageQuery,
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
            push_not_erasing(sql, erasing::MESSAGE);
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

    /// Postgres, the whole scope: the best-ranked indexed matches first
    /// (see [`TopMatches`]), from the words of the search's sessions or
    /// from the index of words, whichever costs less (see [`Words`]).
    async fn postgres_search(
        &self,
        workspace_id: &str,
        search: &MessageQuery,
        conditions: &Conditions<'_>,
    ) -> Result<Vec<Message>> {
        let words = match &search.session_ids {
            Some(sessions) if self.messages_in_sessions(workspace_id, sessions).await? <= SESSION_READ_WHOLE => {
                Words::OfSessions(sessions)
            }
            _ => Words::Matching,
        };
        // When enough of the best matches are in scope they are the scope's
        // best, and no other match's row is read.
        let best = TopMatches::Best(search.limit.saturating_mul(BEST_FIRST_FACTOR));
        let rows = self
            .read(&postgres_matches(workspace_id, search, conditions, words, best)?)
            .await?;
        let in_scope = match rows.first() {
            Some(row) => rows::get::<i64>(row, "indexed_in_scope")?,
            None => 0,
        };
        let rows = if in_scope >= search.limit {
            rows
        } else {
            self.read(&postgres_matches(
                workspace_id,
                search,
                conditions,
                words,
                TopMatches::All,
            )?)
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
    /// keyed by `message_id`) below the store's newest `tail`, past the
    /// first `covered` of them and up to [`GAP_COUNT_LIMIT`]; one probe of
    /// the queue's key when none is. A scope of sessions is walked along its
    /// index (its cost is the sessions' size); a wider one from the queue's
    /// newest [`GAP_QUEUE_WINDOW`] entries, where a backlog's messages are,
    /// and along its own index only when the backlog is longer and the
    /// window held too few of its messages.
    async fn waiting_in_scope(
        &self,
        workspace_id: &str,
        search: &MessageQuery,
        queue: &str,
        tail: i64,
        covered: i64,
    ) -> Result<i64> {
        if search.session_ids.as_ref().is_some_and(Vec::is_empty) {
            return Ok(0);
        }
        let count = |sql: Sql| async move { self.read_optional(&sql).await?.map_or(Ok(0), |row| rows::count(&row)) };
        // How many of the queue's entries lie below the tail, up to `most`.
        let queued = |most: i64| {
            let mut sql = Sql::new(&format!(
                "SELECT COUNT(*) AS n FROM (SELECT 1 FROM {queue} WHERE message_id <= (SELECT MAX(id) FROM messages) - "
            ));
            // Along the key from its oldest entry: a generic plan scanned the
            // whole table, its dead rows included (11 ms where the walk took 0.2).
            sql.bind(tail)
                .push(" ORDER BY message_id LIMIT ")
                .bind(most)
                .push(") queued");
            count(sql)
        };
        if queued(1).await? == 0 {
            return Ok(0);
        }
        let wanted = covered.saturating_add(GAP_COUNT_LIMIT);
        let in_scope = |sql: &mut Sql| {
            sql.push(" WHERE m.workspace_name = ").bind(workspace_id);
            if let Some(sessions) = &search.session_ids {
                sql.push(" AND m.session_name IN ").push_list(sessions);
            }
            if let Some(peer_id) = &search.peer_id {
                sql.push(" AND m.peer_name = ").bind(peer_id.as_str());
            }
        };
        if search.session_ids.is_none() {
            let mut sql = Sql::new(&format!(
                "SELECT COUNT(*) AS n FROM (SELECT 1 FROM (SELECT message_id FROM {queue} \
                 WHERE message_id <= (SELECT MAX(id) FROM messages) - "
            ));
            sql.bind(tail)
                .push(" ORDER BY message_id DESC LIMIT ")
                .bind(GAP_QUEUE_WINDOW)
                // Each entry's message by primary key (SQLite has no LATERAL,
                // and walks the subquery's rows first on its own).
                .push(match self.dialect() {
                    Dialect::Postgres => {
                        ") q CROSS JOIN LATERAL (SELECT * FROM messages m WHERE m.id = q.message_id OFFSET 0) m"
                    }
                    Dialect::Sqlite => ") q JOIN messages m ON m.id = q.message_id",
                });
            in_scope(&mut sql);
            sql.push(" LIMIT ").bind(wanted).push(") behind");
            let found = count(sql).await?;
            if found >= wanted || queued(GAP_QUEUE_WINDOW + 1).await? <= GAP_QUEUE_WINDOW {
                return Ok((found - covered).max(0));
            }
        }
        let mut sql = Sql::new("SELECT COUNT(*) AS n FROM (SELECT 1 FROM messages m");
        in_scope(&mut sql);
        sql.push(" AND m.id <= (SELECT MAX(id) FROM messages) - ")
            .bind(tail)
            .push(&format!(
                " AND EXISTS (SELECT 1 FROM {queue} q WHERE q.message_id = m.id) LIMIT "
            ))
            .bind(wanted)
            .push(") behind");
        Ok((count(sql).await? - covered).max(0))
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
        // Walked from the key's right edge: in a generic plan the range's
        // size is unknown, and Postgres scanned the whole queue instead
        // (with a parallel worker: 15 ms a search over a queue a million
        // synced messages had emptied, 1 ms walked; docs/benchmarks.md).
        .push(" ORDER BY q.message_id DESC LIMIT ")
        .bind(newest)
        .push(")");
}

/// What [`SqlStore::search_text`] adds to every branch: the search's scope and filter.
type Conditions<'a> = dyn Fn(&mut Sql) -> Result<()> + Sync + 'a;

/// SQLite: FTS5's matches, ranked by bm25 (among the unsynced newest rows
/// when `unsynced_newest`).
fn sqlite_matches(search: &MessageQuery, unsynced_newest: Option<i64>, conditions: &Conditions<'_>) -> Result<Sql> {
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
fn postgres_pending_matches(search: &MessageQuery, newest: i64, conditions: &Conditions<'_>) -> Result<Sql> {
    // Pending rows, many not text-indexed yet: each is matched by
    // its stored vector, or, among the TEXT_TAIL newest rows, by
    // one computed now (as the full query below does); an older
    // unindexed row waits for the text indexer.
    let query = search.terms.join(" | ");
    let mut sql = Sql::new(&format!(
        "SELECT {} FROM messages m LEFT JOIN LATERAL \
         (SELECT search_vector FROM message_text t WHERE t.message_id = m.id OFFSET 0) t ON true \
         WHERE (t.search_vector @@ ",
        rows::MESSAGE_COLUMNS
    ));
    sql.push_tsquery(&query)
        .push(" OR (t.search_vector IS NULL AND m.id > (SELECT MAX(id) FROM messages) - ")
        .bind(crate::tx::vectors::TEXT_TAIL)
        .push(&format!(" AND {} @@ ", text_vector("m")))
        .push_tsquery(&query)
        .push("))");
    push_unsynced_among_newest(&mut sql, newest);
    conditions(&mut sql)?;
    sql.push(&format!(
        " ORDER BY ts_rank(COALESCE(t.search_vector, {}), ",
        text_vector("m")
    ))
    .push_tsquery(&query)
    .push(") DESC, m.id DESC LIMIT ")
    .bind(search.limit);
    Ok(sql)
}

/// Postgres: a search's words, as an English `tsquery`.
trait PushTsQuery {
    /// Pushes `query` parsed by `to_tsquery` once per statement: a scalar
    /// subquery (an InitPlan). Written bare, `to_tsquery` of a bound value
    /// is folded into a constant only in a custom plan; in the generic plan
    /// Postgres keeps for a prepared statement from its sixth run on, it
    /// parsed the words again for every row tested or ranked (a workspace
    /// search of 36,000 matches: 28 ms, then 131 ms; docs/benchmarks.md).
    fn push_tsquery(&mut self, query: &str) -> &mut Self;
}

impl PushTsQuery for Sql {
    fn push_tsquery(&mut self, query: &str) -> &mut Self {
        self.push("(SELECT to_tsquery('english', ").bind(query).push("))")
    }
}

/// Which of the text-indexed matches [`postgres_matches`] reads.
#[derive(Debug, Clone, Copy)]
enum TopMatches {
    /// Every match, each one's row read and tested against the scope.
    All,
    /// The workspace's (or sessions') best this many, ranked before any
    /// message row is read. Those in scope (the search's peer, perspective
    /// and filter) are the scope's best when there are at least as many as
    /// the search's limit (the column `indexed_in_scope` says how many): a
    /// match in scope ranked below them is below these best too.
    Best(i64),
}

/// Where [`postgres_matches`] finds the indexed messages holding the
/// search's words (`message_text`, which carries each message's workspace
/// and session: migration 0026).
#[derive(Debug, Clone, Copy)]
enum Words<'a> {
    /// The GIN index's matches of the words, those of the workspace (and
    /// sessions) kept: the cost follows the store's matches.
    Matching,
    /// Every indexed message of these sessions, read as one range of the
    /// (workspace, session) index and each tested for the words: the cost
    /// follows the sessions (at most [`SESSION_READ_WHOLE`] messages).
    OfSessions(&'a [String]),
}

/// Postgres, the whole scope.
fn postgres_matches(
    workspace_id: &str,
    search: &MessageQuery,
    conditions: &Conditions<'_>,
    words: Words<'_>,
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
    // The indexed rows: the matches of the workspace (and sessions)
    // first, found as `words` says and ranked (all, or the best, as
    // `top` says), then each one's message by primary key. The `OFFSET
    // 0` and `LIMIT` fences keep the plan so whatever the planner knows:
    // without statistics it started from the workspace's messages
    // (every row tested, or hashed: the whole workspace read per
    // search), and the (workspace, session) index must not stand in for
    // the GIN index's matches, nor the reverse. How many of them are in
    // scope comes back with every row (`indexed_in_scope`).
    let mut sql = Sql::new(&format!(
        "WITH indexed AS (SELECT {}, m.id AS row_id, hits.rank FROM \
         (SELECT message_id, ts_rank(search_vector, ",
        rows::MESSAGE_COLUMNS
    ));
    sql.push_tsquery(&query).push(") AS rank FROM ");
    match words {
        Words::Matching => {
            sql.push(
                "(SELECT message_id, workspace_name, session_name, search_vector FROM message_text \
                 WHERE search_vector @@ ",
            )
            .push_tsquery(&query)
            .push(" OFFSET 0) t WHERE workspace_name = ")
            .bind(workspace_id);
            if let Some(sessions) = &search.session_ids {
                sql.push(" AND session_name IN ").push_list(sessions);
            }
        }
        Words::OfSessions(sessions) => {
            sql.push("(SELECT message_id, search_vector FROM message_text WHERE workspace_name = ")
                .bind(workspace_id)
                .push(" AND session_name IN ")
                .push_list(sessions)
                .push(" OFFSET 0) t WHERE search_vector @@ ")
                .push_tsquery(&query)
                .push("");
        }
    }
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
    // The newest rows not indexed yet, matched on the fly: read from
    // the queue's key, so `to_tsvector` reaches no older row and, with
    // the queue empty, no row is read (the scope's own index, which the
    // planner took without statistics, read a session's every row).
    sql.push(&format!(
        " UNION ALL (SELECT {}, m.id AS row_id, ts_rank({}, ",
        rows::MESSAGE_COLUMNS,
        text_vector("m")
    ));
    sql.push_tsquery(&query)
        .push(
            ") AS rank FROM (SELECT message_id FROM message_unindexed \
             WHERE message_id > (SELECT MAX(id) FROM messages) - ",
        )
        .bind(crate::tx::vectors::TEXT_TAIL)
        .push(
            " OFFSET 0) tail CROSS JOIN LATERAL (SELECT * FROM messages m WHERE m.id = tail.message_id OFFSET 0) m \
             WHERE ",
        )
        .push(&format!("{} @@ ", text_vector("m")))
        .push_tsquery(&query)
        .push("");
    close_branch(&mut sql)?;
    // A session-scoped search also matches its sessions' own
    // older unindexed rows on the fly (the newest
    // SESSION_TEXT_SCAN of them, read along the session's
    // index), so a session's words are found while the indexer
    // is behind or absent; what is left out is reported by
    // `text_index_gap`. The walk is skipped as a whole (one probe
    // of the queue's key) when no message that old waits.
    if let Some(sessions) = &search.session_ids {
        sql.push(&format!(
            " UNION ALL (SELECT {}, m.id AS row_id, ts_rank({}, ",
            rows::MESSAGE_COLUMNS,
            text_vector("m")
        ));
        sql.push_tsquery(&query)
            .push(") AS rank FROM (SELECT s.id FROM messages s WHERE s.workspace_name = ");
        sql.bind(workspace_id)
            .push(" AND s.session_name IN ")
            .push_list(sessions);
        sql.push(" AND s.id <= (SELECT MAX(id) FROM messages) - ")
            .bind(crate::tx::vectors::TEXT_TAIL)
            .push(
                " AND EXISTS (SELECT 1 FROM message_unindexed u WHERE u.message_id = s.id) \
                 AND EXISTS (SELECT 1 FROM message_unindexed WHERE message_id <= (SELECT MAX(id) FROM messages) - ",
            )
            .bind(crate::tx::vectors::TEXT_TAIL)
            .push(") ORDER BY s.seq_in_session DESC LIMIT ")
            .bind(SESSION_TEXT_SCAN)
            .push(") scope CROSS JOIN LATERAL (SELECT * FROM messages m WHERE m.id = scope.id OFFSET 0) m WHERE ")
            .push(&format!("{} @@ ", text_vector("m")))
            .push_tsquery(&query)
            .push("");
        close_branch(&mut sql)?;
    }
    sql.push(") found ORDER BY rank DESC, row_id DESC LIMIT ")
        .bind(search.limit);
    Ok(sql)
}
