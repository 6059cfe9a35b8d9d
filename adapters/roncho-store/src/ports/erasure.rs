//! Erasure: deleting a message, session, peer or workspace removes or
//! rebuilds everything derived from it, and leaves a receipt that counts
//! what went.
//!
//! A message's erasure runs in one transaction. A session, peer or
//! workspace is erased in chunks of messages (each chunk its own
//! transaction, the receipt updated with it), then its conclusions, then
//! its own rows; a `deletion` task in the work queue carries on whatever
//! the request did not finish, so a crash resumes where it stopped.
//! What it has yet to remove is hidden from the start: the receipt, the
//! `deletion` task, a session's `is_active = 0` and the scope's queued work
//! dropped commit together, and every read leaves out the rows of a running
//! erasure (`tx::erasing`), before any chunk and across a crash.
//!
//! For every erased message, in the chunk's transaction:
//! - the row goes, with its full-text entry; its vector is tombstoned for
//!   the reconciler (the tombstone names the receipt, which reports the
//!   vectors still pending);
//! - conclusions citing it lose it from their sources; those left with no
//!   source are deleted (and, in turn, what cites only them), the others
//!   keep their surviving sources and lose the erased premises' text;
//! - the next turn of its session, embedded with it as context, is queued
//!   to be embedded again (its sync version moves, so an embedding computed
//!   from the old text is never marked synced);
//! - summaries covering it are deleted and queued to be summarised again
//!   without it, after any summary work already running;
//! - its queued tasks are dropped, and the idempotency keys naming it
//!   disarmed: their request digests cleared, the keys kept, so a retry
//!   returns what is left and never writes the text again.
//!
//! Conclusions written after an erasure from text read before it are
//! refused by the store: a conclusion's sources must exist when it is
//! inserted, and on Postgres the check locks them against a concurrent
//! erasure (see `live_sources`).

use crate::db::{SqlStore, execute, fetch_optional};
use crate::rows;
use crate::sql::Sql;
use crate::tx::conclusions::{CHUNK, lock_update};
use crate::tx::entities::{load_peer, load_session};
use async_trait::async_trait;
use roncho_core::model::{ErasureCounts, ErasureReceipt, ErasureScope, ErasureState, new_public_id, now_micros};
use roncho_core::queue::NewTask;
use roncho_core::store::Erasure;
use roncho_core::{Error, Result};
use sqlx::AnyConnection;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

/// A message about to be erased.
struct Erased {
    row_id: i64,
    public_id: String,
    session: String,
    seq: i64,
    had_vector: bool,
}

#[async_trait]
impl Erasure for SqlStore {
    async fn delete_message(&self, workspace_id: &str, session_id: &str, id: &str) -> Result<ErasureReceipt> {
        self.erase_message(workspace_id, session_id, id).await
    }

    async fn begin_erasure(&self, workspace_id: &str, scope: &ErasureScope) -> Result<ErasureReceipt> {
        if let ErasureScope::Message { message_id, .. } = scope {
            return Err(Error::Internal(format!(
                "message {message_id} is erased at once (delete_message)"
            )));
        }
        let mut tx = self.begin_write().await?;
        crate::tx::entities::refuse_unless_caller_holds(tx.conn(), workspace_id).await?;
        // Before the target is looked up: it is hidden while its erasure
        // runs, and a repeated delete (or one after a crash) joins that one.
        let mut running = Sql::new("SELECT id FROM erasure_receipts WHERE state = 'running' AND workspace_name = ");
        running
            .bind(workspace_id)
            .push(" AND scope = ")
            .bind(scope.kind())
            .push(" AND target = ")
            .bind(scope.target(workspace_id));
        if let ErasureScope::ScopeSession { session_id, .. } = scope {
            running.push(" AND session_name = ").bind(session_id.as_str());
        }
        if let Some(row) = fetch_optional(tx.conn(), &running).await? {
            let id: String = rows::get(&row, "id")?;
            drop(tx);
            return self.erasure_receipt(workspace_id, &id).await;
        }
        match scope {
            ErasureScope::Message { .. } => {}
            ErasureScope::Session { session_id } => {
                load_session(tx.conn(), workspace_id, session_id).await?;
                // Writes to it stop with the reads (they ask for an active session).
                let mut inactive = Sql::new("UPDATE sessions SET is_active = 0 WHERE workspace_name = ");
                inactive
                    .bind(workspace_id)
                    .push(" AND name = ")
                    .bind(session_id.as_str());
                execute(tx.conn(), &inactive).await?;
            }
            ErasureScope::Peer { peer_id } => {
                load_peer(tx.conn(), workspace_id, peer_id).await?;
                self.hold_writers(tx.conn(), "peers", "workspace_name = ", workspace_id, Some(peer_id))
                    .await?;
            }
            ErasureScope::Workspace => {
                crate::tx::entities::load_workspace(tx.conn(), workspace_id).await?;
                self.hold_writers(tx.conn(), "workspaces", "name = ", workspace_id, None)
                    .await?;
                let mut sql = Sql::new("SELECT COUNT(*) AS n FROM sessions WHERE is_active = 1 AND workspace_name = ");
                sql.bind(workspace_id);
                let active = match fetch_optional(tx.conn(), &sql).await? {
                    Some(row) => rows::count(&row)?,
                    None => 0,
                };
                if active > 0 {
                    return Err(Error::FailedPrecondition(format!(
                        "workspace `{workspace_id}` has {active} active sessions; delete them before the workspace"
                    )));
                }
            }
            ErasureScope::ScopeSession { scope_id, session_id } => {
                crate::tx::scopes::leave_scope(tx.conn(), workspace_id, scope_id, session_id).await?;
            }
        }
        // From this commit on, reads leave the scope out (see
        // `tx::erasing`), whether or not this process lives to erase it.
        let mut receipt = self.insert_receipt(tx.conn(), workspace_id, scope).await?;
        crate::tx::tasks::insert_tasks(tx.conn(), &[deletion_task(workspace_id, &receipt)]).await?;
        // Nor is anything more derived from what it hides.
        let mut counts = ErasureCounts::default();
        counts.tasks_dropped += drop_scope_tasks(tx.conn(), workspace_id, scope, &receipt.id).await?;
        self.save_receipt(tx.conn(), &mut receipt, &counts, false).await?;
        tx.commit().await?;
        Ok(receipt)
    }

    async fn continue_erasure(&self, workspace_id: &str, receipt_id: &str, max_rows: i64) -> Result<ErasureReceipt> {
        let mut tx = self.begin_write().await?;
        let mut sql =
            Sql::new("SELECT scope, target, session_name, state FROM erasure_receipts WHERE workspace_name = ");
        sql.bind(workspace_id)
            .push(" AND id = ")
            .bind(receipt_id)
            .push(lock_update(self.dialect()));
        let row = fetch_optional(tx.conn(), &sql)
            .await?
            .ok_or_else(|| Error::not_found("erasure receipt", receipt_id))?;
        if rows::get::<String>(&row, "state")? != "running" {
            drop(tx);
            return self.erasure_receipt(workspace_id, receipt_id).await;
        }
        let scope = scope_of(
            &rows::get::<String>(&row, "scope")?,
            rows::get(&row, "target")?,
            rows::get(&row, "session_name")?,
        )?;
        let mut receipt = self.load_receipt(tx.conn(), workspace_id, receipt_id).await?;
        let max_rows = max_rows.clamp(1, CHUNK);
        let mut counts = ErasureCounts::default();
        let whole_sessions = !matches!(scope, ErasureScope::Peer { .. });
        let erased = self.next_messages(tx.conn(), workspace_id, &scope, max_rows).await?;
        let complete = if erased.is_empty() {
            self.finish_scope(tx.conn(), workspace_id, &scope, receipt_id, max_rows, &mut counts)
                .await?
        } else {
            erase_messages(
                tx.conn(),
                workspace_id,
                &erased,
                receipt_id,
                whole_sessions,
                &mut counts,
            )
            .await?;
            false
        };
        if complete {
            let mut done = Sql::new("UPDATE work_tasks SET state = 'done', finished_at = ");
            done.bind(now_micros())
                .push(" WHERE state = 'pending' AND dedup_id = ")
                .bind(format!("deletion:{receipt_id}"));
            execute(tx.conn(), &done).await?;
        }
        self.save_receipt(tx.conn(), &mut receipt, &counts, complete).await?;
        tx.commit().await?;
        self.erased_bytes.note();
        self.with_vectors_pending(receipt).await
    }

    async fn erasure_receipt(&self, workspace_id: &str, id: &str) -> Result<ErasureReceipt> {
        let mut conn = self.reads().acquire().await.map_err(crate::db::db_error)?;
        let receipt = self.load_receipt(&mut conn, workspace_id, id).await?;
        drop(conn);
        self.with_vectors_pending(receipt).await
    }
}

impl SqlStore {
    /// Locks the row of the peer or workspace whose erasure begins, on
    /// Postgres (SQLite has one writer): a write that names it holds it
    /// through its foreign keys and asks for a running erasure after its
    /// rows (`tx::erasing::refuse_erasing`), so it either commits before
    /// this erasure begins, and is erased with it, or sees its receipt.
    async fn hold_writers(
        &self,
        conn: &mut AnyConnection,
        table: &str,
        workspace_column: &str,
        workspace_id: &str,
        name: Option<&str>,
    ) -> Result<()> {
        let lock = lock_update(self.dialect());
        if lock.is_empty() {
            return Ok(());
        }
        let mut sql = Sql::new(&format!("SELECT 1 FROM {table} WHERE {workspace_column}"));
        sql.bind(workspace_id);
        if let Some(name) = name {
            sql.push(" AND name = ").bind(name);
        }
        sql.push(lock);
        fetch_optional(conn, &sql).await?;
        Ok(())
    }

    async fn insert_receipt(
        &self,
        conn: &mut AnyConnection,
        workspace_id: &str,
        scope: &ErasureScope,
    ) -> Result<ErasureReceipt> {
        let receipt = ErasureReceipt {
            id: new_public_id(),
            workspace_id: workspace_id.to_owned(),
            scope: scope.clone(),
            state: ErasureState::Running,
            counts: ErasureCounts::default(),
            vectors_pending: 0,
            created_at: now_micros(),
            finished_at: None,
            overwritten_at: None,
        };
        let mut sql = Sql::new(
            "INSERT INTO erasure_receipts (id, workspace_name, scope, target, session_name, state, counts, created_at) VALUES (",
        );
        sql.bind(receipt.id.as_str())
            .push(", ")
            .bind(workspace_id)
            .push(", ")
            .bind(scope.kind())
            .push(", ")
            .bind(scope.target(workspace_id))
            .push(", ");
        match scope {
            ErasureScope::Message { session_id, .. } | ErasureScope::ScopeSession { session_id, .. } => {
                sql.bind(session_id.as_str())
            }
            _ => sql.push("NULL"),
        };
        sql.push(", 'running', '{}', ").bind(receipt.created_at).push(")");
        execute(conn, &sql).await?;
        Ok(receipt)
    }

    /// Adds `counts` to the receipt and, with `complete`, closes it.
    async fn save_receipt(
        &self,
        conn: &mut AnyConnection,
        receipt: &mut ErasureReceipt,
        counts: &ErasureCounts,
        complete: bool,
    ) -> Result<()> {
        receipt.counts.add(counts);
        let mut sql = Sql::new("UPDATE erasure_receipts SET counts = ");
        sql.bind(serde_json::to_string(&receipt.counts).unwrap_or_else(|_| "{}".into()));
        if complete {
            let now = now_micros();
            receipt.state = ErasureState::Complete;
            receipt.finished_at = Some(now);
            sql.push(", state = 'complete', finished_at = ").bind(now);
        }
        sql.push(" WHERE id = ").bind(receipt.id.as_str());
        execute(conn, &sql).await?;
        Ok(())
    }

    /// The messages of a scope to erase next, at most `limit`.
    async fn next_messages(
        &self,
        conn: &mut AnyConnection,
        workspace_id: &str,
        scope: &ErasureScope,
        limit: i64,
    ) -> Result<Vec<Erased>> {
        let mut sql = Sql::new(
            "SELECT id, public_id, session_name, seq_in_session, \
             (SELECT COUNT(*) FROM message_sync q WHERE q.message_id = messages.id) AS queued FROM messages WHERE ",
        );
        push_scope(&mut sql, workspace_id, scope);
        sql.push(" ORDER BY id LIMIT ")
            .bind(limit)
            .push(lock_update(self.dialect()));
        crate::db::fetch_all(conn, &sql)
            .await?
            .iter()
            .map(|row| {
                Ok(Erased {
                    row_id: rows::get(row, "id")?,
                    public_id: rows::get(row, "public_id")?,
                    session: rows::get(row, "session_name")?,
                    seq: rows::get(row, "seq_in_session")?,
                    had_vector: rows::get::<i64>(row, "queued")? == 0,
                })
            })
            .collect()
    }

    /// Erases one message and what was derived from it, in one transaction.
    pub(crate) async fn erase_message(&self, workspace_id: &str, session_id: &str, id: &str) -> Result<ErasureReceipt> {
        let scope = ErasureScope::Message {
            session_id: session_id.to_owned(),
            message_id: id.to_owned(),
        };
        let mut tx = self.begin_write().await?;
        crate::tx::entities::refuse_unless_caller_holds(tx.conn(), workspace_id).await?;
        let erased = self.next_messages(tx.conn(), workspace_id, &scope, 1).await?;
        if erased.is_empty() {
            return Err(Error::not_found("message", id));
        }
        let mut receipt = self.insert_receipt(tx.conn(), workspace_id, &scope).await?;
        let mut counts = ErasureCounts::default();
        erase_messages(tx.conn(), workspace_id, &erased, &receipt.id, false, &mut counts).await?;
        self.save_receipt(tx.conn(), &mut receipt, &counts, true).await?;
        tx.commit().await?;
        self.erased_bytes.note();
        self.with_vectors_pending(receipt).await
    }

    /// After a scope's messages: its conclusions (a chunk at a time), then
    /// its queued work, keys and own rows. Returns whether it is done.
    async fn finish_scope(
        &self,
        conn: &mut AnyConnection,
        workspace_id: &str,
        scope: &ErasureScope,
        receipt_id: &str,
        max_rows: i64,
        counts: &mut ErasureCounts,
    ) -> Result<bool> {
        let mut documents = Sql::new("SELECT id, public_id FROM documents WHERE workspace_name = ");
        documents.bind(workspace_id);
        match scope {
            ErasureScope::Session { session_id } => {
                documents.push(" AND session_name = ").bind(session_id.as_str());
            }
            ErasureScope::Peer { peer_id } => {
                documents
                    .push(" AND (observer = ")
                    .bind(peer_id.as_str())
                    .push(" OR observed = ")
                    .bind(peer_id.as_str())
                    .push(")");
            }
            ErasureScope::ScopeSession { scope_id, session_id } => {
                push_scope_session(&mut documents, scope_id, session_id);
            }
            ErasureScope::Workspace | ErasureScope::Message { .. } => {}
        }
        documents.push(" ORDER BY id LIMIT ").bind(max_rows);
        let found = crate::db::fetch_all(conn, &documents).await?;
        if !found.is_empty() {
            let ids: Vec<i64> = found.iter().map(|row| rows::get(row, "id")).collect::<Result<_>>()?;
            let public: Vec<String> = found
                .iter()
                .map(|row| rows::get(row, "public_id"))
                .collect::<Result<_>>()?;
            delete_documents(conn, workspace_id, &ids, receipt_id, counts).await?;
            // What cites them outside the scope loses them as sources.
            erase_sources(conn, workspace_id, public, receipt_id, counts).await?;
            return Ok(false);
        }
        counts.tasks_dropped += drop_scope_tasks(conn, workspace_id, scope, receipt_id).await?;
        let count = |table: &str, condition: &str| {
            let mut sql = Sql::new(&format!("SELECT COUNT(*) AS n FROM {table} WHERE workspace_name = "));
            sql.bind(workspace_id).push(condition);
            sql
        };
        let delete = match scope {
            ErasureScope::Session { session_id } => {
                counts.idempotency_keys += disarm_keys(conn, workspace_id, receipt_id, |keys| {
                    keys.push(" AND session_name = ").bind(session_id.as_str());
                })
                .await?;
                counts.sessions += 1;
                let mut sql = Sql::new("DELETE FROM sessions WHERE workspace_name = ");
                sql.bind(workspace_id).push(" AND name = ").bind(session_id.as_str());
                sql
            }
            ErasureScope::Peer { peer_id } => {
                let mut cards = count("peer_cards", " AND (observer = ");
                cards
                    .bind(peer_id.as_str())
                    .push(" OR observed = ")
                    .bind(peer_id.as_str())
                    .push(")");
                counts.peer_cards += self.count_of(conn, &cards).await?;
                counts.peers += 1;
                let mut sql = Sql::new("DELETE FROM peers WHERE workspace_name = ");
                sql.bind(workspace_id).push(" AND name = ").bind(peer_id.as_str());
                sql
            }
            ErasureScope::Workspace => {
                counts.peer_cards += self.count_of(conn, &count("peer_cards", "")).await?;
                counts.sessions += self.count_of(conn, &count("sessions", "")).await?;
                counts.peers += self.count_of(conn, &count("peers", "")).await?;
                counts.webhooks += self.count_of(conn, &count("webhook_endpoints", "")).await?;
                counts.idempotency_keys += disarm_keys(conn, workspace_id, receipt_id, |_| {}).await?;
                counts.workspaces += 1;
                let mut sql = Sql::new("DELETE FROM workspaces WHERE name = ");
                sql.bind(workspace_id);
                sql
            }
            // The membership went when the erasure began.
            ErasureScope::Message { .. } | ErasureScope::ScopeSession { .. } => return Ok(true),
        };
        execute(conn, &delete).await?;
        Ok(true)
    }

    async fn count_of(&self, conn: &mut AnyConnection, sql: &Sql) -> Result<i64> {
        match fetch_optional(conn, sql).await? {
            Some(row) => rows::count(&row),
            None => Ok(0),
        }
    }

    async fn load_receipt(&self, conn: &mut AnyConnection, workspace_id: &str, id: &str) -> Result<ErasureReceipt> {
        let mut sql = Sql::new(
            "SELECT id, scope, target, session_name, state, counts, created_at, finished_at, overwritten_at \
             FROM erasure_receipts \
             WHERE workspace_name = ",
        );
        sql.bind(workspace_id).push(" AND id = ").bind(id);
        let row = fetch_optional(conn, &sql)
            .await?
            .ok_or_else(|| Error::not_found("erasure receipt", id))?;
        let counts: String = rows::get(&row, "counts")?;
        Ok(ErasureReceipt {
            id: rows::get(&row, "id")?,
            workspace_id: workspace_id.to_owned(),
            scope: scope_of(
                &rows::get::<String>(&row, "scope")?,
                rows::get(&row, "target")?,
                rows::get(&row, "session_name")?,
            )?,
            state: match rows::get::<String>(&row, "state")?.as_str() {
                "complete" => ErasureState::Complete,
                _ => ErasureState::Running,
            },
            counts: serde_json::from_str(&counts)
                .map_err(|error| Error::Internal(format!("erasure counts are not JSON: {error}")))?,
            vectors_pending: 0,
            created_at: rows::get(&row, "created_at")?,
            finished_at: rows::get(&row, "finished_at")?,
            overwritten_at: rows::get(&row, "overwritten_at")?,
        })
    }

    async fn with_vectors_pending(&self, mut receipt: ErasureReceipt) -> Result<ErasureReceipt> {
        let mut sql = Sql::new("SELECT COUNT(*) AS n FROM vector_tombstones WHERE receipt_id = ");
        sql.bind(receipt.id.as_str());
        receipt.vectors_pending = match self.read_optional(&sql).await? {
            Some(row) => rows::count(&row)?,
            None => 0,
        };
        Ok(receipt)
    }
}

/// Tombstones, for `receipt`, the vectors of the documents of `ids` (row ids).
async fn tombstone_documents(conn: &mut AnyConnection, workspace_id: &str, ids: &[i64], receipt: &str) -> Result<()> {
    let mut sql = Sql::new(
        "INSERT INTO vector_tombstones (namespace, id, deleted_at, receipt_id) \
         SELECT 'doc/' || d.workspace_name || '/' || d.observer || '/' || d.observed, d.public_id, ",
    );
    sql.bind(now_micros())
        .push(", ")
        .bind(receipt)
        .push(" FROM documents d WHERE d.workspace_name = ")
        .bind(workspace_id)
        .push(" AND d.deleted_at IS NULL AND d.id IN ")
        .push_list(ids)
        .push(" ON CONFLICT (namespace, id) DO NOTHING");
    execute(conn, &sql).await?;
    Ok(())
}

/// Deletes the documents of `ids` (row ids) with their vectors; counts them.
async fn delete_documents(
    conn: &mut AnyConnection,
    workspace_id: &str,
    ids: &[i64],
    receipt: &str,
    counts: &mut ErasureCounts,
) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut synced = Sql::new("SELECT COUNT(*) AS n FROM documents WHERE workspace_name = ");
    synced
        .bind(workspace_id)
        .push(" AND deleted_at IS NULL AND sync_state = 'synced' AND id IN ")
        .push_list(ids);
    if let Some(row) = fetch_optional(conn, &synced).await? {
        counts.conclusion_vectors += rows::count(&row)?;
    }
    tombstone_documents(conn, workspace_id, ids, receipt).await?;
    let mut sql = Sql::new("DELETE FROM documents WHERE workspace_name = ");
    sql.bind(workspace_id).push(" AND id IN ").push_list(ids);
    counts.conclusions += i64::try_from(execute(conn, &sql).await?).unwrap_or(i64::MAX);
    Ok(())
}

/// Removes `erased` (public ids of erased messages or conclusions) from the
/// sources of the conclusions citing them: a conclusion left without a
/// source is deleted, and the same follows for what cites it.
async fn erase_sources(
    conn: &mut AnyConnection,
    workspace_id: &str,
    erased: Vec<String>,
    receipt: &str,
    counts: &mut ErasureCounts,
) -> Result<()> {
    let mut gone: BTreeSet<String> = erased.iter().cloned().collect();
    let mut gone_text: BTreeSet<String> = BTreeSet::new();
    let mut frontier = erased;
    // Each round follows one more link of "derived from"; chains are short
    // (message → explicit → deductive → ...), the bound only guards cycles.
    for _ in 0..16 {
        if frontier.is_empty() {
            break;
        }
        let mut citing: BTreeMap<i64, (String, Vec<String>, Vec<String>, String)> = BTreeMap::new();
        for chunk in frontier.chunks(usize::try_from(CHUNK).unwrap_or(500)) {
            let mut sql = Sql::new(
                "SELECT d.id, d.public_id, d.source_ids, d.premises, d.content FROM documents d WHERE d.id IN \
                 (SELECT s.document_id FROM conclusion_sources s WHERE s.workspace_name = ",
            );
            sql.bind(workspace_id)
                .push(" AND s.source_id IN ")
                .push_list(chunk)
                .push(")");
            for row in crate::db::fetch_all(conn, &sql).await? {
                citing.insert(
                    rows::get(&row, "id")?,
                    (
                        rows::get(&row, "public_id")?,
                        rows::string_list(&row, "source_ids")?,
                        rows::string_list(&row, "premises")?,
                        rows::get(&row, "content")?,
                    ),
                );
            }
        }
        let mut next = Vec::new();
        let mut doomed = Vec::new();
        let mut trimmed = Vec::new();
        for (row_id, (public_id, sources, premises, content)) in citing {
            if sources.iter().all(|source| gone.contains(source)) {
                doomed.push(row_id);
                gone_text.insert(content);
                next.push(public_id);
            } else {
                trimmed.push((row_id, sources, premises));
            }
        }
        gone.extend(next.iter().cloned());
        for chunk in doomed.chunks(usize::try_from(CHUNK).unwrap_or(500)) {
            delete_documents(conn, workspace_id, chunk, receipt, counts).await?;
        }
        for (row_id, sources, premises) in trimmed {
            let sources: Vec<String> = sources.into_iter().filter(|source| !gone.contains(source)).collect();
            let premises: Vec<String> = premises
                .into_iter()
                .filter(|premise| !gone_text.contains(premise))
                .collect();
            let mut sql = Sql::new("UPDATE documents SET source_ids = ");
            sql.bind(serde_json::to_string(&sources).unwrap_or_else(|_| "[]".into()))
                .push(", premises = ")
                .bind(serde_json::to_string(&premises).unwrap_or_else(|_| "[]".into()))
                .push(" WHERE id = ")
                .bind(row_id);
            execute(conn, &sql).await?;
            let mut unlink = Sql::new("DELETE FROM conclusion_sources WHERE document_id = ");
            unlink.bind(row_id).push(" AND source_id NOT IN ").push_list(&sources);
            execute(conn, &unlink).await?;
            counts.conclusions_trimmed += 1;
        }
        frontier = next;
    }
    Ok(())
}

/// Erases `erased` (messages of one workspace) and what was derived from
/// them, in the caller's transaction. `whole_sessions`: the sessions go
/// too, so their summaries and neighbouring turns need no rebuilding.
async fn erase_messages(
    conn: &mut AnyConnection,
    workspace_id: &str,
    erased: &[Erased],
    receipt: &str,
    whole_sessions: bool,
    counts: &mut ErasureCounts,
) -> Result<()> {
    if erased.is_empty() {
        return Ok(());
    }
    let now = now_micros();
    let row_ids: Vec<i64> = erased.iter().map(|message| message.row_id).collect();
    let public_ids: Vec<String> = erased.iter().map(|message| message.public_id.clone()).collect();
    let mut tombstones = Sql::new(
        "INSERT INTO vector_tombstones (namespace, id, deleted_at, receipt_id) SELECT 'msg/' || m.workspace_name, m.public_id, ",
    );
    tombstones
        .bind(now)
        .push(", ")
        .bind(receipt)
        .push(" FROM messages m WHERE m.workspace_name = ")
        .bind(workspace_id)
        .push(" AND m.id IN ")
        .push_list(&row_ids)
        .push(" ON CONFLICT (namespace, id) DO NOTHING");
    execute(conn, &tombstones).await?;
    counts.message_vectors += i64::try_from(erased.iter().filter(|message| message.had_vector).count()).unwrap_or(0);
    let mut delete = Sql::new("DELETE FROM messages WHERE workspace_name = ");
    delete.bind(workspace_id).push(" AND id IN ").push_list(&row_ids);
    counts.messages += i64::try_from(execute(conn, &delete).await?).unwrap_or(i64::MAX);

    let mut by_session: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for message in erased {
        by_session.entry(&message.session).or_default().push(message.seq);
    }
    for (session, seqs) in &by_session {
        let mut count = Sql::new("UPDATE sessions SET message_count = message_count - ");
        count
            .bind(i64::try_from(seqs.len()).unwrap_or(i64::MAX))
            .push(" WHERE workspace_name = ")
            .bind(workspace_id)
            .push(" AND name = ")
            .bind(*session);
        execute(conn, &count).await?;
    }
    if !whole_sessions {
        for (session, seqs) in &by_session {
            reembed_next_turns(conn, workspace_id, session, seqs, counts).await?;
            rebuild_summaries(conn, workspace_id, session, seqs, &public_ids, receipt, counts).await?;
        }
    }
    erase_sources(conn, workspace_id, public_ids.clone(), receipt, counts).await?;

    // Their queued work: nothing left to derive.
    let sessions: Vec<&str> = by_session.keys().copied().collect();
    drop_queued_work(conn, workspace_id, &sessions, &public_ids, now, receipt, counts).await?;

    // Keys whose writes made them.
    for (session, _) in by_session {
        let erased_ids = |keys: &mut Sql| {
            keys.push(" AND session_name = ").bind(session).push(" AND (");
            for (index, id) in public_ids.iter().enumerate() {
                if index > 0 {
                    keys.push(" OR ");
                }
                keys.push("result_ids LIKE ").bind(format!("%\"{id}\"%"));
            }
            keys.push(")");
        };
        counts.idempotency_keys += disarm_keys(conn, workspace_id, receipt, erased_ids).await?;
    }
    Ok(())
}

/// Disarms the idempotency keys of `workspace_id` that `condition` picks
/// (SQL appended after the workspace's own condition): their request
/// digests, computed from erased text, are cleared, and they are kept as
/// long as the receipt, so that a client's retry returns what is left and
/// writes nothing (never the erased text again). Returns how many.
async fn disarm_keys(
    conn: &mut AnyConnection,
    workspace_id: &str,
    receipt: &str,
    condition: impl FnOnce(&mut Sql),
) -> Result<i64> {
    let mut keys = Sql::new("UPDATE idempotency_keys SET fingerprint = '', expires_at = ");
    keys.bind(i64::MAX)
        .push(", erased_by = ")
        .bind(receipt)
        .push(" WHERE erased_by IS NULL AND workspace_name = ")
        .bind(workspace_id);
    condition(&mut keys);
    Ok(i64::try_from(execute(conn, &keys).await?).unwrap_or(0))
}

/// Queues the turns after `seqs` in `session`, embedded with an erased turn
/// as their context, to be embedded again.
async fn reembed_next_turns(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session: &str,
    seqs: &[i64],
    counts: &mut ErasureCounts,
) -> Result<()> {
    let next: Vec<i64> = seqs.iter().map(|seq| seq + 1).collect();
    let requeued = crate::tx::vectors::requeue_messages(conn, &|sql: &mut Sql| {
        sql.push("workspace_name = ")
            .bind(workspace_id)
            .push(" AND session_name = ")
            .bind(session)
            .push(" AND seq_in_session IN ")
            .push_list(&next);
    })
    .await?;
    counts.messages_reembedded += i64::try_from(requeued).unwrap_or(0);
    Ok(())
}

/// Deletes the summaries of `session` that covered an erased turn (at
/// `seqs`) and queues them to be written again from what is left, after the
/// summary work already queued or running (which may have read the erased
/// turns). Summary tasks anchored on an erased message are dropped into the
/// rebuild.
async fn rebuild_summaries(
    conn: &mut AnyConnection,
    workspace_id: &str,
    session: &str,
    seqs: &[i64],
    erased_ids: &[String],
    receipt: &str,
    counts: &mut ErasureCounts,
) -> Result<()> {
    let first = seqs.iter().copied().min().unwrap_or(i64::MAX);
    let mut kinds: BTreeSet<String> = BTreeSet::new();
    let mut covered_to = 0;
    let mut summaries = Sql::new("SELECT summary_type, message_seq FROM session_summaries WHERE workspace_name = ");
    summaries
        .bind(workspace_id)
        .push(" AND session_name = ")
        .bind(session)
        .push(" AND message_seq >= ")
        .bind(first);
    for row in crate::db::fetch_all(conn, &summaries).await? {
        // Stored under Honcho's names; summary tasks name the kinds.
        kinds.insert(
            match roncho_core::model::SummaryKind::from_name(&rows::get::<String>(&row, "summary_type")?) {
                Some(roncho_core::model::SummaryKind::Long) => "long",
                _ => "short",
            }
            .to_owned(),
        );
        covered_to = covered_to.max(rows::get::<i64>(&row, "message_seq")?);
    }
    if !kinds.is_empty() {
        let mut delete = Sql::new("DELETE FROM session_summaries WHERE workspace_name = ");
        delete
            .bind(workspace_id)
            .push(" AND session_name = ")
            .bind(session)
            .push(" AND message_seq >= ")
            .bind(first);
        counts.summaries_rebuilt += i64::try_from(execute(conn, &delete).await?).unwrap_or(0);
    }
    let unit = format!("summary:{workspace_id}:{session}:None:None");
    let mut queued = Sql::new("SELECT payload FROM work_tasks WHERE state = 'pending' AND work_unit_key = ");
    queued.bind(unit.as_str());
    for row in crate::db::fetch_all(conn, &queued).await? {
        let payload: serde_json::Value = serde_json::from_str(&rows::get::<String>(&row, "payload")?)
            .map_err(|error| Error::Internal(format!("task payload is not JSON: {error}")))?;
        let anchored_on_erased = payload["message_id"]
            .as_str()
            .is_some_and(|id| erased_ids.iter().any(|erased| erased == id));
        // Work queued after the erasure reads what is left; work on an erased
        // anchor, or running now, is covered by the rebuild.
        let running = work_unit_held(conn, &unit).await?;
        if anchored_on_erased || running {
            for kind in payload["summaries"].as_array().into_iter().flatten() {
                if let Some(kind) = kind.as_str() {
                    kinds.insert(kind.to_owned());
                }
            }
            covered_to = covered_to.max(payload["seq_in_session"].as_i64().unwrap_or(0));
        }
    }
    if kinds.is_empty() {
        return Ok(());
    }
    let mut anchor = Sql::new("SELECT public_id, seq_in_session, peer_name FROM messages WHERE workspace_name = ");
    anchor
        .bind(workspace_id)
        .push(" AND session_name = ")
        .bind(session)
        .push(" AND seq_in_session <= ")
        .bind(covered_to)
        .push(" ORDER BY seq_in_session DESC LIMIT 1");
    let Some(row) = fetch_optional(conn, &anchor).await? else {
        return Ok(());
    };
    let anchor_id: String = rows::get(&row, "public_id")?;
    let task = NewTask {
        work_unit_key: unit,
        dedup_id: format!("summary:{anchor_id}:erasure:{receipt}"),
        workspace_id: workspace_id.to_owned(),
        session_id: Some(session.to_owned()),
        observer_id: None,
        sender_id: Some(rows::get(&row, "peer_name")?),
        payload: serde_json::json!({
            "message_id": anchor_id,
            "seq_in_session": rows::get::<i64>(&row, "seq_in_session")?,
            "summaries": kinds,
        }),
        items: 1,
    };
    crate::tx::tasks::insert_tasks(conn, &[task]).await?;
    Ok(())
}

/// Drops the queued work of erased messages (`erased`, public ids, of
/// `sessions`): their summary tasks, and their place in representation
/// tasks, which carry a batch's messages of one peer; a task left with none
/// is dropped. Counts one per message, as queue status does.
async fn drop_queued_work(
    conn: &mut AnyConnection,
    workspace_id: &str,
    sessions: &[&str],
    erased: &[String],
    now: i64,
    receipt: &str,
    counts: &mut ErasureCounts,
) -> Result<()> {
    let reason = format!("dropped: its message was erased (receipt {receipt})");
    let summaries: Vec<String> = erased.iter().map(|id| format!("summary:{id}")).collect();
    let mut dropped = Sql::new("UPDATE work_tasks SET state = 'done', finished_at = ");
    dropped
        .bind(now)
        .push(", last_error = ")
        .bind(reason.as_str())
        .push(" WHERE state = 'pending' AND dedup_id IN ")
        .push_list(&summaries);
    counts.tasks_dropped += i64::try_from(execute(conn, &dropped).await?).unwrap_or(0);

    let gone: BTreeSet<&str> = erased.iter().map(String::as_str).collect();
    let mut queued = Sql::new(
        "SELECT id, payload FROM work_tasks WHERE state = 'pending' AND task_type = 'representation' \
         AND workspace_name = ",
    );
    queued
        .bind(workspace_id)
        .push(" AND session_name IN ")
        .push_list(sessions);
    for row in crate::db::fetch_all(conn, &queued).await? {
        let id: i64 = rows::get(&row, "id")?;
        let mut payload: serde_json::Value = serde_json::from_str(&rows::get::<String>(&row, "payload")?)
            .map_err(|error| Error::Internal(format!("task payload is not JSON: {error}")))?;
        let carried: Vec<String> = roncho_core::derivation::task_message_ids(&payload)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let left: Vec<String> = carried
            .iter()
            .filter(|id| !gone.contains(id.as_str()))
            .cloned()
            .collect();
        if left.len() == carried.len() {
            continue;
        }
        counts.tasks_dropped += i64::try_from(carried.len() - left.len()).unwrap_or(0);
        let mut update = Sql::new("UPDATE work_tasks SET ");
        if left.is_empty() {
            update
                .push("state = 'done', finished_at = ")
                .bind(now)
                .push(", last_error = ")
                .bind(reason.as_str());
        } else {
            if let Some(object) = payload.as_object_mut() {
                object.remove("message_id");
                object.insert("message_ids".into(), serde_json::json!(left));
            }
            update
                .push("payload = ")
                .bind(payload.to_string())
                .push(", items = ")
                .bind(i64::try_from(left.len()).unwrap_or(i64::MAX));
        }
        update.push(" WHERE id = ").bind(id);
        execute(conn, &update).await?;
    }
    Ok(())
}

async fn work_unit_held(conn: &mut AnyConnection, unit: &str) -> Result<bool> {
    let mut sql = Sql::new("SELECT 1 AS held FROM work_leases WHERE work_unit_key = ");
    sql.bind(unit).push(" AND expires_at > ").bind(now_micros());
    Ok(fetch_optional(conn, &sql).await?.is_some())
}

/// Drops the scope's pending work (its `deletion` task aside): nothing is
/// derived from what it holds. Returns how many tasks.
async fn drop_scope_tasks(
    conn: &mut AnyConnection,
    workspace_id: &str,
    scope: &ErasureScope,
    receipt_id: &str,
) -> Result<i64> {
    let mut tasks = Sql::new("UPDATE work_tasks SET state = 'done', finished_at = ");
    tasks
        .bind(now_micros())
        .push(", last_error = ")
        .bind(format!("dropped: erased (receipt {receipt_id})"))
        .push(" WHERE state = 'pending' AND task_type <> 'deletion' AND workspace_name = ")
        .bind(workspace_id);
    match scope {
        ErasureScope::Session { session_id } => {
            tasks.push(" AND session_name = ").bind(session_id.as_str());
        }
        ErasureScope::Peer { peer_id } => {
            tasks
                .push(" AND (sender = ")
                .bind(peer_id.as_str())
                .push(" OR observer = ")
                .bind(peer_id.as_str())
                .push(")");
        }
        ErasureScope::ScopeSession { scope_id, session_id } => {
            push_scope_session(&mut tasks, scope_id, session_id);
        }
        ErasureScope::Workspace | ErasureScope::Message { .. } => {}
    }
    Ok(i64::try_from(execute(conn, &tasks).await?).unwrap_or(0))
}

/// The scope of a receipt row.
fn scope_of(scope: &str, target: String, session: Option<String>) -> Result<ErasureScope> {
    Ok(match scope {
        "message" => ErasureScope::Message {
            session_id: session.unwrap_or_default(),
            message_id: target,
        },
        "session" => ErasureScope::Session { session_id: target },
        "peer" => ErasureScope::Peer { peer_id: target },
        "workspace" => ErasureScope::Workspace,
        "scope_session" => ErasureScope::ScopeSession {
            scope_id: target,
            session_id: session.unwrap_or_default(),
        },
        other => return Err(Error::Internal(format!("unknown erasure scope {other}"))),
    })
}

/// The `WHERE` condition (over `messages`) of what a scope erases.
fn push_scope(sql: &mut Sql, workspace_id: &str, scope: &ErasureScope) {
    sql.push("workspace_name = ").bind(workspace_id);
    match scope {
        ErasureScope::Message { session_id, message_id } => {
            sql.push(" AND session_name = ")
                .bind(session_id.as_str())
                .push(" AND public_id = ")
                .bind(message_id.as_str());
        }
        ErasureScope::Session { session_id } => {
            sql.push(" AND session_name = ").bind(session_id.as_str());
        }
        ErasureScope::Peer { peer_id } => {
            sql.push(" AND peer_name = ").bind(peer_id.as_str());
        }
        ErasureScope::Workspace => {}
        // What a scope observed, not what was said: no message goes.
        ErasureScope::ScopeSession { .. } => {
            sql.push(" AND 1 = 0");
        }
    }
}

/// The condition (over `documents` or `work_tasks`) of what a scope
/// observed, or was to copy, in one session.
fn push_scope_session(sql: &mut Sql, scope_id: &str, session_id: &str) {
    sql.push(" AND observer = ")
        .bind(roncho_core::model::scope_peer(scope_id))
        .push(" AND session_name = ")
        .bind(session_id);
}

/// The `deletion` task that carries an erasure on in the background.
pub(crate) fn deletion_task(workspace_id: &str, receipt: &ErasureReceipt) -> NewTask {
    let target = receipt.scope.target(workspace_id);
    NewTask {
        work_unit_key: format!("deletion:{workspace_id}:{}:{target}", receipt.scope.kind()),
        dedup_id: format!("deletion:{}", receipt.id),
        workspace_id: workspace_id.to_owned(),
        session_id: match &receipt.scope {
            ErasureScope::Session { session_id } | ErasureScope::ScopeSession { session_id, .. } => {
                Some(session_id.clone())
            }
            _ => None,
        },
        observer_id: None,
        sender_id: None,
        payload: serde_json::json!({
            "receipt_id": receipt.id,
            "deletion_type": receipt.scope.kind(),
            "resource_id": target,
        }),
        items: 1,
    }
}
