//! The read-path queries of recall: token-budgeted context, full-text
//! search, conclusions and peer cards. Called by the `Store` implementation.

use roncho_core::filter::Filter;
use roncho_core::idempotency::Once;
use roncho_core::model::{
    CollectionQuery, Conclusion, DreamState, ImportedConclusion, JsonObject, Message, MessageScan, MessageSearch,
    NewConclusion, Page, PageRequest, SessionSummary, SummaryKind, new_public_id, now_micros,
};
use roncho_core::{Error, Result};
use sqlx::Row;

use crate::rows;
use crate::sql::{Dialect, Sql};
use crate::store::{
    SqlStore, db_error, ensure_peer, ensure_workspace, execute, load_message, load_peer, load_session, to_json,
};

/// Postgres: unindexed messages of a session-scoped search's sessions
/// matched on the fly beyond the store's newest (`TEXT_TAIL`), newest
/// first. At 5,000 a session's whole backlog is read in one search
/// (docs/benchmarks.md); past it the reply says how many were left out.
pub const SESSION_TEXT_SCAN: i64 = 5_000;

/// Most unindexed messages counted for a search's gap report.
const GAP_COUNT_LIMIT: i64 = 1_000_000;

/// Messages read in the first page of a context walk, and the most in one.
const CONTEXT_FIRST_PAGE: i64 = 64;
const CONTEXT_MAX_PAGE: i64 = 4096;

fn conclusion_column(key: &str) -> &'static str {
    match key {
        "id" => "d.public_id",
        "workspace_id" => "d.workspace_name",
        "observer_id" | "observer" => "d.observer",
        "observed_id" | "observed" => "d.observed",
        "session_id" | "session_name" => "d.session_name",
        "level" => "d.level",
        "times_derived" => "d.times_derived",
        "created_at" => "d.created_at",
        _ => "d.metadata",
    }
}

fn message_column(key: &str) -> &'static str {
    crate::store::message_column(key)
}

fn to_json_list(items: &[String]) -> String {
    serde_json::Value::from(items.to_vec()).to_string()
}

impl SqlStore {
    pub(crate) async fn context_messages_impl(
        &self,
        workspace_id: &str,
        session_id: &str,
        token_budget: i64,
        from_seq: i64,
    ) -> Result<Vec<Message>> {
        {
            let mut conn = self.pool().acquire().await.map_err(db_error)?;
            load_session(&mut conn, workspace_id, session_id).await?;
        }
        if token_budget <= 0 {
            return Ok(Vec::new());
        }
        // Walk back from the newest message in growing pages (the unique
        // (workspace, session, seq) index serves each), stopping at the first
        // message that no longer fits: cost follows the budget, not the session.
        let mut newest_first: Vec<Message> = Vec::new();
        let mut used = 0_i64;
        let mut before: Option<i64> = None;
        let mut page = CONTEXT_FIRST_PAGE;
        loop {
            let mut sql = Sql::new(&format!(
                "SELECT {} FROM messages m WHERE m.workspace_name = ",
                rows::MESSAGE_COLUMNS
            ));
            sql.bind(workspace_id).push(" AND m.session_name = ").bind(session_id);
            sql.push(" AND m.seq_in_session >= ").bind(from_seq);
            if let Some(before) = before {
                sql.push(" AND m.seq_in_session < ").bind(before);
            }
            sql.push(" ORDER BY m.seq_in_session DESC LIMIT ").bind(page);
            let rows = self.read(&sql).await?;
            let fetched = rows.len() as i64;
            for row in &rows {
                let message = rows::message(row)?;
                if used + message.token_count > token_budget {
                    newest_first.reverse();
                    return Ok(newest_first);
                }
                used += message.token_count;
                newest_first.push(message);
            }
            if fetched < page {
                newest_first.reverse();
                return Ok(newest_first);
            }
            before = newest_first.last().map(|message| message.seq_in_session);
            page = (page * 4).min(CONTEXT_MAX_PAGE);
        }
    }

    pub(crate) async fn search_messages_impl(
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
            crate::sql::render_filter(sql, self.dialect(), filter, message_column)
        };
        let sql = match (self.dialect(), unsynced_newest) {
            (Dialect::Sqlite, _) if !self.full_text_maintained() => {
                return Err(Error::Unavailable(
                    "the SQLite full-text index is off while the embedded vector store ranks words; \
                     restart without an embedder to rebuild it"
                        .into(),
                ));
            }
            (Dialect::Sqlite, _) => {
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
                sql
            }
            (Dialect::Postgres, Some(newest)) => {
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
                    .bind(crate::sync::TEXT_TAIL)
                    .push(&format!(" AND {} @@ to_tsquery('english', ", text_vector("m")))
                    .bind(query.as_str())
                    .push(")))");
                push_unsynced_among_newest(&mut sql, newest);
                conditions(&mut sql)?;
                sql.push(&format!(
                    " ORDER BY ts_rank_cd(COALESCE(t.search_vector, {}), to_tsquery('english', ",
                    text_vector("m")
                ))
                .bind(query)
                .push(")) DESC, m.id DESC LIMIT ")
                .bind(search.limit);
                sql
            }
            (Dialect::Postgres, None) => {
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
                // The indexed rows: the GIN index's matches first, ranked,
                // then each one's message by primary key. The `OFFSET 0`
                // fences keep the plan so whatever the planner knows: without
                // statistics it started from the workspace's messages (every
                // row tested, or hashed: the whole workspace read per search).
                let mut sql = Sql::new(&format!(
                    "SELECT * FROM ((SELECT {}, m.id AS row_id, hits.rank FROM \
                     (SELECT message_id, ts_rank_cd(search_vector, to_tsquery('english', ",
                    rows::MESSAGE_COLUMNS
                ));
                sql.bind(query.as_str())
                    .push(")) AS rank FROM message_text WHERE search_vector @@ to_tsquery('english', ")
                    .bind(query.as_str())
                    .push(
                        ") OFFSET 0) hits CROSS JOIN LATERAL \
                         (SELECT * FROM messages m WHERE m.id = hits.message_id OFFSET 0) m WHERE 1 = 1",
                    );
                close_branch(&mut sql)?;
                // The newest rows not indexed yet, matched on the fly; the
                // bound on `m.id` itself is what keeps `to_tsvector` off
                // older rows whichever way the planner goes.
                sql.push(&format!(
                    " UNION ALL (SELECT {}, m.id AS row_id, ts_rank_cd({}, to_tsquery('english', ",
                    rows::MESSAGE_COLUMNS,
                    text_vector("m")
                ));
                sql.bind(query.as_str())
                    .push(")) AS rank FROM messages m WHERE m.id > (SELECT MAX(id) FROM messages) - ")
                    .bind(crate::sync::TEXT_TAIL)
                    .push(
                        " AND m.id IN (SELECT message_id FROM message_unindexed \
                         WHERE message_id > (SELECT MAX(id) FROM messages) - ",
                    )
                    .bind(crate::sync::TEXT_TAIL)
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
                        " UNION ALL (SELECT {}, m.id AS row_id, ts_rank_cd({}, to_tsquery('english', ",
                        rows::MESSAGE_COLUMNS,
                        text_vector("m")
                    ));
                    sql.bind(query.as_str())
                        .push(")) AS rank FROM (SELECT s.id FROM messages s WHERE s.workspace_name = ");
                    sql.bind(workspace_id)
                        .push(" AND s.session_name IN ")
                        .push_list(sessions);
                    sql.push(" AND s.id <= (SELECT MAX(id) FROM messages) - ")
                        .bind(crate::sync::TEXT_TAIL)
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
                sql
            }
        };
        self.read(&sql).await?.iter().map(rows::message).collect()
    }

    /// How many messages of `search`'s scope a full-text search could not
    /// match by their words: Postgres rows the text indexer has not reached,
    /// older than the tail matched on the fly and, for a session-scoped
    /// search, than its sessions' newest [`SESSION_TEXT_SCAN`]. 0 on SQLite,
    /// whose FTS5 indexes in the write's own transaction.
    pub(crate) async fn text_index_gap_impl(&self, workspace_id: &str, search: &MessageSearch) -> Result<i64> {
        if self.dialect() != Dialect::Postgres {
            return Ok(0);
        }
        let unindexed = self
            .waiting_in_scope(workspace_id, search, "message_unindexed", crate::sync::TEXT_TAIL)
            .await?;
        Ok(match search.session_ids {
            Some(_) => (unindexed - SESSION_TEXT_SCAN).max(0),
            None => unindexed,
        })
    }

    /// How many messages of `search`'s scope a vector store that has not
    /// synced them cannot return: rows pending or failed in the sync queue,
    /// older than the `newest` the search reads from the database instead.
    pub(crate) async fn vector_sync_gap_impl(
        &self,
        workspace_id: &str,
        search: &MessageSearch,
        newest: i64,
    ) -> Result<i64> {
        self.waiting_in_scope(workspace_id, search, "message_sync", newest)
            .await
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

    pub(crate) async fn create_conclusions_impl(
        &self,
        workspace_id: &str,
        conclusions: Vec<NewConclusion>,
        once: Option<&Once>,
    ) -> Result<Vec<Conclusion>> {
        let now = now_micros();
        let mut tx = self.begin_write().await?;
        if let Some(once) = once
            && let crate::idempotency::Claim::Done(ids) =
                crate::idempotency::claim(tx.conn(), workspace_id, None, once).await?
        {
            drop(tx);
            return self.replay_conclusions(workspace_id, &ids).await;
        }
        let live = crate::erasure::live_sources(tx.conn(), self.dialect(), workspace_id, &conclusions).await?;
        let mut created = Vec::with_capacity(conclusions.len());
        for new in conclusions {
            created.extend(insert_conclusion(tx.conn(), workspace_id, new_public_id(), new, 1, now, &live).await?);
        }
        if let Some(once) = once {
            let ids: Vec<String> = created.iter().map(|conclusion| conclusion.id.clone()).collect();
            crate::idempotency::record(tx.conn(), workspace_id, once, &ids).await?;
        }
        tx.commit().await?;
        Ok(created)
    }

    /// Stores conclusions carried over from another server (see
    /// [`roncho_core::store::Store::import_conclusions`]), one transaction.
    pub(crate) async fn import_conclusions_impl(
        &self,
        workspace_id: &str,
        conclusions: Vec<ImportedConclusion>,
    ) -> Result<u64> {
        let mut tx = self.begin_write().await?;
        let ids: Vec<String> = conclusions.iter().map(|imported| imported.id.clone()).collect();
        let mut held = std::collections::BTreeSet::new();
        for chunk in ids.chunks(500) {
            let mut sql = Sql::new("SELECT public_id, workspace_name FROM documents WHERE public_id IN ");
            sql.push_list(chunk);
            for row in crate::store::fetch_all(tx.conn(), &sql).await? {
                let id: String = rows::get(&row, "public_id")?;
                if rows::get::<String>(&row, "workspace_name")? != workspace_id {
                    return Err(Error::FailedPrecondition(format!(
                        "conclusion `{id}` is already stored in another workspace"
                    )));
                }
                held.insert(id);
            }
        }
        let fresh: Vec<ImportedConclusion> = conclusions
            .into_iter()
            .filter(|imported| !held.contains(&imported.id))
            .collect();
        let news: Vec<NewConclusion> = fresh.iter().map(|imported| imported.conclusion.clone()).collect();
        // A conclusion may cite one imported before it in this batch.
        let mut live = crate::erasure::live_sources(tx.conn(), self.dialect(), workspace_id, &news).await?;
        let mut stored = 0;
        for (imported, mut new) in fresh.into_iter().zip(news) {
            // The other server kept conclusions whose sources are gone; so does the import.
            new.source_ids.retain(|source| live.contains(source));
            let id = imported.id;
            let (times_derived, created_at) = (imported.times_derived, imported.created_at);
            if let Some(kept) =
                insert_conclusion(tx.conn(), workspace_id, id, new, times_derived, created_at, &live).await?
            {
                live.insert(kept.id);
                stored += 1;
            }
        }
        tx.commit().await?;
        Ok(stored)
    }

    /// Soft-deletes `old_id` (tombstoning its vector) and inserts `new`
    /// carrying the old `times_derived` plus one, in one transaction.
    pub(crate) async fn supersede_conclusion_impl(
        &self,
        workspace_id: &str,
        old_id: &str,
        new: NewConclusion,
    ) -> Result<Conclusion> {
        let now = now_micros();
        let mut tx = self.begin_write().await?;
        let mut sql = Sql::new("SELECT times_derived FROM documents WHERE workspace_name = ");
        sql.bind(workspace_id)
            .push(" AND public_id = ")
            .bind(old_id)
            .push(" AND deleted_at IS NULL");
        let row = crate::store::fetch_optional(tx.conn(), &sql)
            .await?
            .ok_or_else(|| Error::not_found("conclusion", old_id))?;
        let times_derived: i64 = rows::get(&row, "times_derived")?;
        let live =
            crate::erasure::live_sources(tx.conn(), self.dialect(), workspace_id, std::slice::from_ref(&new)).await?;
        soft_delete_conclusion(tx.conn(), workspace_id, old_id, now).await?;
        let created = insert_conclusion(
            tx.conn(),
            workspace_id,
            new_public_id(),
            new,
            times_derived + 1,
            now,
            &live,
        )
        .await?
        .ok_or_else(|| Error::not_found("conclusion source", "every source was erased"))?;
        tx.commit().await?;
        Ok(created)
    }

    pub(crate) async fn list_conclusions_impl(
        &self,
        workspace_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Conclusion>> {
        let mut from_where = Sql::new("documents d WHERE d.deleted_at IS NULL AND d.workspace_name = ");
        from_where.bind(workspace_id).push(" AND ");
        crate::sql::render_filter(&mut from_where, self.dialect(), filter, conclusion_column)?;
        // Newest first by default, as in Honcho.
        let dir = if page.reverse { "ASC" } else { "DESC" };
        self.paged(
            rows::CONCLUSION_COLUMNS,
            from_where,
            &format!("d.created_at {dir}, d.id {dir}"),
            page,
            rows::conclusion,
        )
        .await
    }

    pub(crate) async fn delete_conclusion_impl(&self, workspace_id: &str, id: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        if !soft_delete_conclusion(tx.conn(), workspace_id, id, now_micros()).await? {
            return Err(Error::not_found("conclusion", id));
        }
        tx.commit().await
    }

    pub(crate) async fn collection_conclusions_impl(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        query: &CollectionQuery,
    ) -> Result<Vec<Conclusion>> {
        if query.allowed_sessions.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let collection = |order: &str, limit: i64| {
            let mut sql = Sql::new(&format!(
                "SELECT {} FROM documents d WHERE d.deleted_at IS NULL AND d.workspace_name = ",
                rows::CONCLUSION_COLUMNS
            ));
            sql.bind(workspace_id)
                .push(" AND d.observer = ")
                .bind(observer_id)
                .push(" AND d.observed = ")
                .bind(observed_id);
            if let Some(sessions) = &query.allowed_sessions {
                // Under an allowlist only explicit conclusions are safe: derived ones may rest on other sessions.
                sql.push(" AND d.level = 'explicit' AND d.session_name IN ");
                sql.push_list(sessions);
            }
            sql.push(" ORDER BY ").push(order).push(" LIMIT ").bind(limit);
            sql
        };
        let mut chosen: Vec<Conclusion> = Vec::new();
        for (order, limit) in [
            ("d.times_derived DESC, d.created_at DESC, d.id DESC", query.most_derived),
            ("d.created_at DESC, d.id DESC", query.recent),
        ] {
            if limit <= 0 {
                continue;
            }
            for row in self.read(&collection(order, limit)).await? {
                let conclusion = rows::conclusion(&row)?;
                if chosen.iter().all(|existing| existing.id != conclusion.id) {
                    chosen.push(conclusion);
                }
            }
        }
        Ok(chosen)
    }

    pub(crate) async fn conclusions_by_ids_impl(&self, workspace_id: &str, ids: &[String]) -> Result<Vec<Conclusion>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut sql = Sql::new(&format!(
            "SELECT {} FROM documents d WHERE d.deleted_at IS NULL AND {} = ",
            rows::CONCLUSION_COLUMNS,
            self.dialect().unindexed("d.workspace_name")
        ));
        sql.bind(workspace_id).push(" AND d.public_id IN ");
        sql.push_list(ids);
        self.read(&sql).await?.iter().map(rows::conclusion).collect()
    }

    pub(crate) async fn conclusions_citing_impl(&self, workspace_id: &str, id: &str) -> Result<Vec<Conclusion>> {
        let mut sql = Sql::new(&format!(
            "SELECT {} FROM documents d WHERE d.deleted_at IS NULL AND d.id IN \
             (SELECT s.document_id FROM conclusion_sources s WHERE s.workspace_name = ",
            rows::CONCLUSION_COLUMNS
        ));
        sql.bind(workspace_id)
            .push(" AND s.source_id = ")
            .bind(id)
            .push(") ORDER BY d.created_at, d.id");
        self.read(&sql).await?.iter().map(rows::conclusion).collect()
    }

    pub(crate) async fn scan_messages_impl(&self, workspace_id: &str, scan: &MessageScan) -> Result<Vec<Message>> {
        let mut sql = Sql::new(&format!(
            "SELECT {} FROM messages m WHERE m.workspace_name = ",
            rows::MESSAGE_COLUMNS
        ));
        sql.bind(workspace_id);
        if let Some(sessions) = &scan.session_ids {
            if sessions.is_empty() {
                return Ok(Vec::new());
            }
            sql.push(" AND m.session_name IN ").push_list(sessions);
        }
        if let Some(observer) = &scan.peer_perspective {
            push_perspective(&mut sql, observer);
        }
        if let Some(text) = scan.contains.as_deref().filter(|text| !text.is_empty()) {
            sql.push(" AND LOWER(m.content) LIKE ")
                .bind(format!("%{}%", escape_like(&text.to_lowercase())))
                .push(" ESCAPE '\\'");
        }
        if let Some(after) = scan.after {
            sql.push(" AND m.created_at > ").bind(after);
        }
        if let Some(before) = scan.before {
            sql.push(" AND m.created_at < ").bind(before);
        }
        if let Some((from, to)) = scan.seq_range {
            sql.push(" AND m.seq_in_session >= ")
                .bind(from)
                .push(" AND m.seq_in_session <= ")
                .bind(to);
        }
        let dir = if scan.newest_first { "DESC" } else { "ASC" };
        sql.push(&format!(" ORDER BY m.created_at {dir}, m.id {dir} LIMIT "))
            .bind(scan.limit.max(0));
        self.read(&sql).await?.iter().map(rows::message).collect()
    }

    pub(crate) async fn dream_state_impl(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
    ) -> Result<DreamState> {
        let mut sql = Sql::new(
            "SELECT COALESCE(c.generation, 0) AS generation, c.last_dream_at, \
             COALESCE(c.last_dream_document_count, 0) AS last_dream_document_count, \
             (SELECT COUNT(*) FROM documents d WHERE d.workspace_name = ",
        );
        sql.bind(workspace_id)
            .push(" AND d.observer = ")
            .bind(observer_id)
            .push(" AND d.observed = ")
            .bind(observed_id)
            .push(
                " AND d.level = 'explicit' AND d.deleted_at IS NULL) AS explicit_count \
                   FROM (SELECT 1 AS one) AS o LEFT JOIN collection_dreams c ON c.workspace_name = ",
            );
        sql.bind(workspace_id)
            .push(" AND c.observer = ")
            .bind(observer_id)
            .push(" AND c.observed = ")
            .bind(observed_id);
        let rows = self.read(&sql).await?;
        let row = rows
            .first()
            .ok_or_else(|| Error::Internal("dream state query returned no row".into()))?;
        Ok(DreamState {
            generation: rows::get(row, "generation")?,
            last_dream_at: rows::get(row, "last_dream_at")?,
            last_dream_document_count: rows::get(row, "last_dream_document_count")?,
            explicit_count: rows::get(row, "explicit_count")?,
        })
    }

    pub(crate) async fn record_dream_impl(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        document_count: i64,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for peer in [observer_id, observed_id] {
            load_peer(tx.conn(), workspace_id, peer).await?;
        }
        let mut sql = Sql::new(
            "INSERT INTO collection_dreams (workspace_name, observer, observed, generation, last_dream_at, \
             last_dream_document_count) VALUES (",
        );
        sql.bind(workspace_id)
            .push(", ")
            .bind(observer_id)
            .push(", ")
            .bind(observed_id)
            .push(", 1, ");
        sql.bind(now_micros()).push(", ").bind(document_count);
        sql.push(
            ") ON CONFLICT (workspace_name, observer, observed) DO UPDATE SET \
             generation = collection_dreams.generation + 1, last_dream_at = excluded.last_dream_at, \
             last_dream_document_count = excluded.last_dream_document_count",
        );
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }

    pub(crate) async fn get_peer_card_impl(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
    ) -> Result<Option<Vec<String>>> {
        {
            let mut conn = self.pool().acquire().await.map_err(db_error)?;
            load_peer(&mut conn, workspace_id, observer_id).await?;
        }
        let mut sql = Sql::new("SELECT card FROM peer_cards WHERE workspace_name = ");
        sql.bind(workspace_id)
            .push(" AND observer = ")
            .bind(observer_id)
            .push(" AND observed = ")
            .bind(observed_id);
        self.read_optional(&sql).await?.map(|row| rows::card(&row)).transpose()
    }

    pub(crate) async fn session_summaries_impl(
        &self,
        workspace_id: &str,
        session_id: &str,
    ) -> Result<Vec<SessionSummary>> {
        {
            let mut conn = self.pool().acquire().await.map_err(db_error)?;
            load_session(&mut conn, workspace_id, session_id).await?;
        }
        let mut sql = Sql::new(
            "SELECT summary_type, content, message_public_id, message_seq, token_count, created_at \
             FROM session_summaries WHERE workspace_name = ",
        );
        sql.bind(workspace_id).push(" AND session_name = ").bind(session_id);
        let mut summaries = Vec::new();
        for row in self.read(&sql).await? {
            let kind: String = row.try_get("summary_type").map_err(db_error)?;
            let Some(kind) = SummaryKind::from_name(&kind) else {
                return Err(Error::Internal(format!("unknown summary type `{kind}` stored")));
            };
            summaries.push(SessionSummary {
                kind,
                content: row.try_get("content").map_err(db_error)?,
                message_id: row.try_get("message_public_id").map_err(db_error)?,
                message_seq: row.try_get("message_seq").map_err(db_error)?,
                token_count: row.try_get("token_count").map_err(db_error)?,
                created_at: row.try_get("created_at").map_err(db_error)?,
            });
        }
        summaries.sort_by_key(|summary| summary.kind);
        Ok(summaries)
    }

    pub(crate) async fn set_session_summary_impl(
        &self,
        workspace_id: &str,
        session_id: &str,
        kind: SummaryKind,
        content: &str,
        message_id: &str,
        token_count: i64,
    ) -> Result<SessionSummary> {
        let mut tx = self.begin_write().await?;
        load_session(tx.conn(), workspace_id, session_id).await?;
        let message = load_message(tx.conn(), workspace_id, session_id, message_id).await?;
        let summary = SessionSummary {
            kind,
            content: content.to_owned(),
            message_id: message.id,
            message_seq: message.seq_in_session,
            token_count,
            created_at: now_micros(),
        };
        let mut sql = Sql::new(
            "INSERT INTO session_summaries (workspace_name, session_name, summary_type, content, message_public_id, \
             message_seq, token_count, created_at) VALUES (",
        );
        sql.bind(workspace_id)
            .push(", ")
            .bind(session_id)
            .push(", ")
            .bind(kind.name())
            .push(", ");
        sql.bind(content)
            .push(", ")
            .bind(summary.message_id.as_str())
            .push(", ")
            .bind(summary.message_seq)
            .push(", ");
        sql.bind(token_count).push(", ").bind(summary.created_at).push(
            ") ON CONFLICT (workspace_name, session_name, summary_type) DO UPDATE SET content = excluded.content, \
             message_public_id = excluded.message_public_id, message_seq = excluded.message_seq, \
             token_count = excluded.token_count, created_at = excluded.created_at",
        );
        execute(tx.conn(), &sql).await?;
        tx.commit().await?;
        Ok(summary)
    }

    pub(crate) async fn set_peer_card_impl(
        &self,
        workspace_id: &str,
        observer_id: &str,
        observed_id: &str,
        card: Vec<String>,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        ensure_workspace(tx.conn(), workspace_id, &JsonObject::new(), &JsonObject::new()).await?;
        for peer in [observer_id, observed_id] {
            ensure_peer(tx.conn(), workspace_id, peer, &JsonObject::new(), &JsonObject::new()).await?;
        }
        let mut sql =
            Sql::new("INSERT INTO peer_cards (workspace_name, observer, observed, card, updated_at) VALUES (");
        sql.bind(workspace_id)
            .push(", ")
            .bind(observer_id)
            .push(", ")
            .bind(observed_id)
            .push(", ");
        sql.bind(to_json_list(&card)).push(", ").bind(now_micros());
        sql.push(") ON CONFLICT (workspace_name, observer, observed) DO UPDATE SET card = excluded.card, updated_at = excluded.updated_at");
        execute(tx.conn(), &sql).await?;
        tx.commit().await
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

/// A message's full-text vector as Postgres indexes it, computed from the
/// row `alias` (what the text indexer stores in `message_text`).
pub(crate) fn text_vector(alias: &str) -> String {
    format!("to_tsvector('english', {alias}.peer_name || ' ' || {alias}.content)")
}

pub(crate) fn push_perspective(sql: &mut Sql, observer: &str) {
    sql.push(
        " AND EXISTS (SELECT 1 FROM session_peers sp WHERE sp.workspace_name = m.workspace_name \
         AND sp.session_name = m.session_name AND sp.peer_name = ",
    );
    sql.bind(observer)
        .push(" AND (sp.left_at IS NULL OR m.created_at <= sp.left_at))");
}

/// Escapes `%`, `_` and `\` for a `LIKE ... ESCAPE '\'` pattern.
fn escape_like(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Inserts one conclusion with `times_derived`, checking its peers and
/// session, and recording its sources. Sources not in `live` (erased since
/// the conclusion was derived) are dropped; a conclusion whose every source
/// was erased is not inserted (`None`).
pub(crate) async fn insert_conclusion(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: String,
    mut new: NewConclusion,
    times_derived: i64,
    created_at: i64,
    live: &std::collections::BTreeSet<String>,
) -> Result<Option<Conclusion>> {
    if !new.source_ids.is_empty() {
        new.source_ids.retain(|source| live.contains(source));
        if new.source_ids.is_empty() {
            tracing::info!(observer = %new.observer_id, observed = %new.observed_id, "a conclusion whose sources were erased is not stored");
            return Ok(None);
        }
    }
    load_peer(conn, workspace_id, &new.observer_id).await?;
    load_peer(conn, workspace_id, &new.observed_id).await?;
    if let Some(session_id) = &new.session_id {
        load_session(conn, workspace_id, session_id).await?;
    }
    let conclusion = Conclusion {
        id,
        workspace_id: workspace_id.to_owned(),
        observer_id: new.observer_id,
        observed_id: new.observed_id,
        session_id: new.session_id,
        level: new.level,
        content: new.content,
        premises: new.premises,
        source_ids: new.source_ids,
        times_derived,
        metadata: new.metadata,
        created_at,
    };
    let mut sql = Sql::new(
        "INSERT INTO documents (public_id, workspace_name, observer, observed, session_name, level, content, \
         premises, source_ids, times_derived, metadata, created_at) VALUES (",
    );
    sql.bind(conclusion.id.as_str())
        .push(", ")
        .bind(workspace_id)
        .push(", ");
    sql.bind(conclusion.observer_id.as_str())
        .push(", ")
        .bind(conclusion.observed_id.as_str())
        .push(", ");
    match &conclusion.session_id {
        Some(session_id) => sql.bind(session_id.as_str()),
        None => sql.push("NULL"),
    };
    sql.push(", ")
        .bind(conclusion.level.as_str())
        .push(", ")
        .bind(conclusion.content.as_str())
        .push(", ");
    sql.bind(to_json_list(&conclusion.premises))
        .push(", ")
        .bind(to_json_list(&conclusion.source_ids))
        .push(", ")
        .bind(times_derived)
        .push(", ");
    sql.bind(to_json(&conclusion.metadata))
        .push(", ")
        .bind(created_at)
        .push(") RETURNING id");
    let row = crate::store::fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::Internal("the inserted conclusion returned no id".into()))?;
    crate::erasure::record_sources(conn, workspace_id, rows::get(&row, "id")?, &conclusion.source_ids).await?;
    Ok(Some(conclusion))
}

/// Soft-deletes one live conclusion and tombstones its vector; returns
/// whether there was one.
async fn soft_delete_conclusion(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
    now: i64,
) -> Result<bool> {
    crate::sync::tombstone_documents(conn, |sql| {
        sql.push("d.workspace_name = ")
            .bind(workspace_id)
            .push(" AND d.public_id = ")
            .bind(id);
        sql.push(" AND d.deleted_at IS NULL");
    })
    .await?;
    let mut sql = Sql::new("UPDATE documents SET deleted_at = ");
    sql.bind(now).push(" WHERE workspace_name = ").bind(workspace_id);
    sql.push(" AND public_id = ").bind(id).push(" AND deleted_at IS NULL");
    Ok(execute(conn, &sql).await? > 0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn lists_serialise_as_json_arrays() {
        assert_eq!(super::to_json_list(&["a\"b".to_owned()]), r#"["a\"b"]"#);
    }
}
