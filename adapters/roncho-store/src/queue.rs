//! `SqlWorkQueue`: the `WorkQueue` over the relational database — the
//! embedded mode's durable queue, on the same SQLite file as everything else
//! (it also runs on Postgres). Tasks are rows; a worker holds a work unit by
//! a lease row (`work_leases`), taken with an upsert that only replaces an
//! expired lease, so two workers can never hold one unit; a dead worker's
//! lease runs out and its tasks, never marked done, are claimed again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use roncho_core::model::{new_public_id, now_micros};
use roncho_core::queue::history::{TaskSpan, samples};
use roncho_core::queue::{
    Claim, Counts, DeliveryLedger, FailedTask, HISTORY_MAX_TASKS, NewTask, PostponedTask, QueueSample, QueueStatus,
    RetryFilter, StatusFilter, Task, Unpublished, WorkQueue,
};
use roncho_core::trace::TraceContext;
use roncho_core::{Error, Result};
use sqlx::AnyConnection;
use sqlx::Row;

use crate::SqlStore;
use crate::db::{db_error, execute};
use crate::sql::{Dialect, Sql};
use crate::tx::tasks::{insert_tasks_ready_in, micros};

/// Work units considered per claim, for when other workers win some.
const CLAIM_CANDIDATES: i64 = 8;
/// Dead tasks a status lists.
const MAX_FAILURES: i64 = 100;

/// The SQL work queue.
#[derive(Debug, Clone)]
pub struct SqlWorkQueue {
    store: Arc<SqlStore>,
    /// Which workspace had the last claim here: the next looks on from it.
    turns: Arc<roncho_core::queue::Turns>,
}

impl SqlWorkQueue {
    /// Runs one write statement with a `RETURNING` clause in a transaction
    /// of its own; returns its rows once committed.
    async fn write_returning(&self, sql: &Sql) -> Result<Vec<sqlx::any::AnyRow>> {
        let mut tx = self.store.begin_write().await?;
        let rows = sql
            .query(self.store.dialect())?
            .fetch_all(tx.conn())
            .await
            .map_err(db_error)?;
        tx.commit().await?;
        Ok(rows)
    }

    /// Sets `column` to now on the tasks of `task_ids` that pass `condition`
    /// (SQL over `work_tasks`, written here, never from input).
    async fn stamp_now(&self, column: &'static str, condition: &'static str, task_ids: &[i64]) -> Result<()> {
        if task_ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin_write().await?;
        for chunk in task_ids.chunks(500) {
            let mut sql = Sql::new(&format!("UPDATE work_tasks SET {column} = "));
            sql.bind(now_micros())
                .push(&format!(" WHERE {condition} AND id IN "))
                .push_list(chunk);
            execute(tx.conn(), &sql).await?;
        }
        tx.commit().await
    }

    /// Returns the queue in `store`'s database.
    pub fn new(store: Arc<SqlStore>) -> Self {
        Self {
            store,
            turns: Arc::default(),
        }
    }

    /// The store whose tables hold the queue.
    pub fn store(&self) -> &Arc<SqlStore> {
        &self.store
    }

    /// Counts tasks by type and state (`pending`, `in_progress` for pending
    /// tasks of held units, `done`, `dead`), each by its items as queue
    /// status counts (a representation task its messages), with the creation time of the
    /// oldest ready pending task of each type (for metrics). Tasks queued
    /// for later and not yet due (a dream waiting for its peer to be quiet)
    /// are `waiting`.
    pub async fn type_stats(&self) -> Result<Vec<TypeStats>> {
        let now = now_micros();
        let mut sql = Sql::new(
            "SELECT t.task_type, CASE WHEN t.state = 'pending' AND EXISTS (SELECT 1 FROM work_leases l \
             WHERE l.work_unit_key = t.work_unit_key AND l.expires_at > ",
        );
        sql.bind(now)
            .push(") THEN 'in_progress' WHEN t.state = 'pending' AND t.deferrals > 0 AND t.available_at > ")
            .bind(now)
            .push(" THEN 'postponed' WHEN t.state = 'pending' AND t.attempts = 0 AND t.available_at > ")
            .bind(now)
            .push(
                " THEN 'waiting' ELSE t.state END AS state, CAST(SUM(t.items) AS BIGINT) AS n, \
                 MIN(CASE WHEN t.state = 'pending' AND t.available_at <= ",
            );
        sql.bind(now)
            .push(" THEN t.created_at END) AS oldest FROM work_tasks t GROUP BY 1, 2");
        let mut stats = Vec::new();
        for row in self.store.read(&sql).await? {
            stats.push(TypeStats {
                task_type: row.try_get("task_type").map_err(db_error)?,
                state: row.try_get("state").map_err(db_error)?,
                count: row.try_get("n").map_err(db_error)?,
                oldest_ready_pending: row.try_get("oldest").map_err(db_error)?,
            });
        }
        Ok(stats)
    }

    /// Counts every workspace's tasks by state, by their items as queue
    /// status does (for `roncho status`).
    pub async fn totals(&self) -> Result<Counts> {
        let now = now_micros();
        let mut sql = Sql::new(
            "SELECT t.state, CASE WHEN t.state = 'pending' AND EXISTS (SELECT 1 FROM work_leases l \
             WHERE l.work_unit_key = t.work_unit_key AND l.expires_at > ",
        );
        sql.bind(now)
            .push(") THEN 1 ELSE 0 END AS held, CAST(SUM(t.items) AS BIGINT) AS n FROM work_tasks t WHERE ");
        push_not_scheduled(&mut sql, now);
        sql.push(" GROUP BY 1, 2");
        let mut counts = Counts::default();
        for row in self.store.read(&sql).await? {
            let state: String = row.try_get("state").map_err(db_error)?;
            let held: i64 = row.try_get("held").map_err(db_error)?;
            let n: i64 = row.try_get("n").map_err(db_error)?;
            add_counts(&mut counts, &state, held, n);
        }
        Ok(counts)
    }
}

/// Reads a row's `trace_context` (unreadable text is no context: tracing
/// never fails work).
fn trace_column(row: &sqlx::any::AnyRow) -> Result<Option<TraceContext>> {
    let text: Option<String> = row.try_get("trace_context").map_err(db_error)?;
    Ok(text.as_deref().and_then(TraceContext::decode))
}

/// Adds `n` tasks in `state` (`held`: leased now) to `counts`.
fn add_counts(counts: &mut Counts, state: &str, held: i64, n: i64) {
    counts.total += n;
    match (state, held) {
        ("done", _) => counts.completed += n,
        ("dead", _) => counts.failed += n,
        (_, 1) => counts.in_progress += n,
        _ => counts.pending += n,
    }
}

/// Fails unless `claim` still holds its work unit.
async fn check_lease(conn: &mut AnyConnection, claim: &Claim) -> Result<()> {
    let mut sql = Sql::new("SELECT 1 AS held FROM work_leases WHERE work_unit_key = ");
    sql.bind(claim.work_unit_key.as_str())
        .push(" AND token = ")
        .bind(claim.token.as_str());
    let held = sql
        .query(Dialect::of(conn))?
        .fetch_optional(conn)
        .await
        .map_err(db_error)?;
    match held {
        Some(_) => Ok(()),
        None => Err(lost(claim)),
    }
}

fn lost(claim: &Claim) -> Error {
    Error::FailedPrecondition(format!(
        "the lease on {} was lost (it expired and another worker claimed it); stop working on it",
        claim.work_unit_key
    ))
}

/// Appends the status filter's conditions on `work_tasks t`. A task's
/// observer is its `observer` (a dream's, a scope's), or one of the
/// `observers` a representation task carries in its payload (Honcho's: one
/// task derives for every observer of a message).
fn push_filter(sql: &mut Sql, filter: &StatusFilter, dialect: Dialect) {
    sql.push(" WHERE t.workspace_name = ")
        .bind(filter.workspace_id.as_str());
    for (column, value) in [("t.session_name", &filter.session_id), ("t.sender", &filter.sender_id)] {
        if let Some(value) = value {
            sql.push(" AND ").push(column).push(" = ").bind(value.as_str());
        }
    }
    if let Some(observer) = &filter.observer_id {
        sql.push(" AND (t.observer = ")
            .bind(observer.as_str())
            .push(" OR (t.task_type = 'representation' AND ");
        match dialect {
            Dialect::Postgres => sql
                .push("(t.payload::jsonb -> 'observers') @> jsonb_build_array(CAST(")
                .bind(observer.as_str())
                .push(" AS TEXT))))"),
            Dialect::Sqlite => sql
                .push("EXISTS (SELECT 1 FROM json_each(t.payload, '$.observers') o WHERE o.value = ")
                .bind(observer.as_str())
                .push(")))"),
        };
    }
}

/// Where a claim looks for ready work (see [`roncho_core::queue::Turns`]).
enum Turn<'a> {
    /// Erasures, oldest first.
    Erasures,
    /// Any, oldest first (before any claim).
    Oldest,
    /// The workspaces after this one, in order, each's oldest first.
    After(&'a str),
    /// Every workspace, in order, each's oldest first.
    FromFirst,
}

/// Returns up to [`CLAIM_CANDIDATES`] work units of `task_types` whose
/// oldest pending task is ready and that nobody holds, where `turn` says.
async fn ready_heads(conn: &mut AnyConnection, task_types: &[&str], now: i64, turn: Turn<'_>) -> Result<Vec<String>> {
    let mut sql = Sql::new("SELECT t.work_unit_key FROM work_tasks t WHERE t.state = 'pending' AND t.task_type IN ");
    let types: Vec<String> = task_types.iter().map(|kind| (*kind).to_owned()).collect();
    sql.push_list(&types).push(" AND t.available_at <= ").bind(now);
    if let Turn::After(last) = turn {
        sql.push(" AND t.workspace_name > ").bind(last);
    }
    sql.push(
        " AND NOT EXISTS (SELECT 1 FROM work_tasks e WHERE e.state = 'pending' \
         AND e.work_unit_key = t.work_unit_key AND e.id < t.id) \
         AND NOT EXISTS (SELECT 1 FROM work_leases l WHERE l.work_unit_key = t.work_unit_key AND l.expires_at > ",
    )
    .bind(now);
    sql.push(match turn {
        Turn::Erasures | Turn::Oldest => ") ORDER BY t.id LIMIT ",
        Turn::After(_) | Turn::FromFirst => ") ORDER BY t.workspace_name, t.id LIMIT ",
    })
    .bind(CLAIM_CANDIDATES);
    sql.query(Dialect::of(conn))?
        .fetch_all(&mut *conn)
        .await
        .map_err(db_error)?
        .iter()
        .map(|row| row.try_get("work_unit_key"))
        .collect::<std::result::Result<_, _>>()
        .map_err(db_error)
}

/// Leases the first of `candidates` (work unit keys, in preference order)
/// that nobody holds and whose next pending task is ready — and, where a
/// candidate names the task ids delivered to this worker, has been
/// delivered — and returns up to `max` of its tasks in order.
async fn claim_first(
    conn: &mut AnyConnection,
    worker: &str,
    candidates: Vec<(&str, Option<&BTreeSet<i64>>)>,
    max: usize,
    lease: Duration,
) -> Result<Option<Claim>> {
    let now = now_micros();
    let token = new_public_id();
    for (key, delivered) in candidates {
        // Takes a free or expired lease; another worker's live lease is left alone.
        let mut take = Sql::new("INSERT INTO work_leases (work_unit_key, owner, token, expires_at) VALUES (");
        take.bind(key)
            .push(", ")
            .bind(worker)
            .push(", ")
            .bind(token.as_str())
            .push(", ")
            .bind(now + micros(lease));
        take.push(
            ") ON CONFLICT (work_unit_key) DO UPDATE SET owner = excluded.owner, token = excluded.token, \
             expires_at = excluded.expires_at WHERE work_leases.expires_at <= ",
        )
        .bind(now);
        if execute(&mut *conn, &take).await? == 0 {
            continue;
        }
        let mut tasks_sql = Sql::new(
            "SELECT id, dedup_id, payload, attempts, deferrals, available_at, trace_context, items FROM work_tasks \
             WHERE state = 'pending' AND work_unit_key = ",
        );
        tasks_sql
            .bind(key)
            .push(" ORDER BY id LIMIT ")
            .bind(i64::try_from(max).unwrap_or(i64::MAX));
        let mut tasks = Vec::new();
        // `max` counts items (messages): a representation task carries many.
        let mut items = 0;
        for row in tasks_sql
            .query(Dialect::of(conn))?
            .fetch_all(&mut *conn)
            .await
            .map_err(db_error)?
        {
            let id: i64 = row.try_get("id").map_err(db_error)?;
            let available_at: i64 = row.try_get("available_at").map_err(db_error)?;
            // A task waiting for its retry (or not yet delivered) holds back the ones behind it.
            if available_at > now || delivered.is_some_and(|delivered| !delivered.contains(&id)) {
                break;
            }
            let carried = usize::try_from(row.try_get::<i64, _>("items").map_err(db_error)?).unwrap_or(1);
            if !tasks.is_empty() && items + carried > max {
                break;
            }
            items += carried;
            let payload: String = row.try_get("payload").map_err(db_error)?;
            tasks.push(Task {
                id,
                dedup_id: row.try_get("dedup_id").map_err(db_error)?,
                payload: serde_json::from_str(&payload)
                    .map_err(|error| Error::Internal(format!("task payload is not JSON: {error}")))?,
                attempts: row.try_get("attempts").map_err(db_error)?,
                deferrals: row.try_get::<i64, _>("deferrals").map_err(db_error)?,
                trace: trace_column(&row)?,
            });
        }
        if tasks.is_empty() {
            let mut give_back = Sql::new("DELETE FROM work_leases WHERE work_unit_key = ");
            give_back.bind(key).push(" AND token = ").bind(token.as_str());
            execute(&mut *conn, &give_back).await?;
            continue;
        }
        return Ok(Some(Claim {
            work_unit_key: key.to_owned(),
            token,
            tasks,
        }));
    }
    Ok(None)
}

/// Tasks of one type in one state (see [`SqlWorkQueue::type_stats`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeStats {
    pub task_type: String,
    pub state: String,
    pub count: i64,
    /// Creation time (microseconds) of the oldest ready pending task.
    pub oldest_ready_pending: Option<i64>,
}

/// Leaves out tasks enqueued for later and not yet due (a dream waiting for
/// its peer to go quiet): they are not work yet, and a client waiting for
/// the queue to drain must not wait for them. Retries (attempts > 0) count.
fn push_not_scheduled(sql: &mut Sql, now: i64) {
    sql.push("NOT (t.state = 'pending' AND t.attempts = 0 AND t.deferrals = 0 AND t.available_at > ")
        .bind(now)
        .push(")");
}

#[async_trait]
impl DeliveryLedger for SqlWorkQueue {
    async fn claim_delivered(
        &self,
        worker: &str,
        candidates: &[(String, BTreeSet<i64>)],
        max: usize,
        lease: Duration,
    ) -> Result<Option<Claim>> {
        if candidates.is_empty() || max == 0 {
            return Ok(None);
        }
        let mut tx = self.store.begin_write().await?;
        let candidates = candidates
            .iter()
            .map(|(key, delivered)| (key.as_str(), Some(delivered)))
            .collect();
        let claim = claim_first(tx.conn(), worker, candidates, max, lease).await?;
        tx.commit().await?;
        Ok(claim)
    }

    async fn pending_among(&self, task_ids: &[i64]) -> Result<BTreeSet<i64>> {
        let mut pending = BTreeSet::new();
        for chunk in task_ids.chunks(500) {
            let mut sql = Sql::new("SELECT id FROM work_tasks WHERE state = 'pending' AND id IN ");
            sql.push_list(chunk);
            for row in self.store.read(&sql).await? {
                pending.insert(row.try_get::<i64, _>("id").map_err(db_error)?);
            }
        }
        Ok(pending)
    }

    async fn unpublished(&self, limit: i64, older_than: Option<i64>) -> Result<Vec<Unpublished>> {
        let mut sql = Sql::new(
            "SELECT id, work_unit_key, trace_context FROM work_tasks WHERE published_at IS NULL AND state = 'pending'",
        );
        if let Some(before) = older_than {
            sql.push(" AND created_at < ").bind(before);
        }
        sql.push(" ORDER BY id LIMIT ").bind(limit);
        self.store
            .read(&sql)
            .await?
            .iter()
            .map(|row| {
                Ok(Unpublished {
                    id: row.try_get("id").map_err(db_error)?,
                    work_unit_key: row.try_get("work_unit_key").map_err(db_error)?,
                    trace: trace_column(row)?,
                })
            })
            .collect()
    }

    async fn release_units_of(&self, worker: &str) -> Result<Vec<String>> {
        let mut sql = Sql::new("DELETE FROM work_leases WHERE owner = ");
        sql.bind(worker).push(" RETURNING work_unit_key");
        self.write_returning(&sql)
            .await?
            .iter()
            .map(|row| row.try_get("work_unit_key").map_err(db_error))
            .collect()
    }

    async fn installation(&self) -> Result<String> {
        let rows = self
            .store
            .read(&Sql::new("SELECT id FROM installation ORDER BY created_at LIMIT 1"))
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| Error::Internal("the installation id is missing (migration 0009)".into()))?;
        row.try_get("id").map_err(db_error)
    }

    async fn mark_seen(&self, task_ids: &[i64]) -> Result<()> {
        self.stamp_now("seen_at", "state = 'pending'", task_ids).await
    }

    async fn take_lost(&self, limit: i64, quiet: Duration) -> Result<Vec<(Unpublished, i64)>> {
        let now = now_micros();
        let lost = |sql: &mut Sql| {
            sql.push(
                "t.state = 'pending' AND t.published_at IS NOT NULL \
                 AND (CASE WHEN t.seen_at IS NULL OR t.seen_at < t.published_at THEN t.published_at ELSE t.seen_at END) < ",
            );
            sql.bind(now)
                .push(" - (")
                .bind(micros(quiet))
                .push(" * (CASE WHEN t.republished < 6 THEN t.republished ELSE 6 END + 1))");
            sql.push(" AND NOT EXISTS (SELECT 1 FROM work_leases l WHERE l.work_unit_key = t.work_unit_key AND l.expires_at > ")
                .bind(now)
                .push(")");
        };
        let mut sql = Sql::new("UPDATE work_tasks AS t SET published_at = ");
        sql.bind(now)
            .push(", republished = t.republished + 1 WHERE t.id IN (SELECT t.id FROM work_tasks t WHERE ");
        lost(&mut sql);
        sql.push(" ORDER BY t.id LIMIT ").bind(limit).push(") AND ");
        // Again outside the subquery: a sweeper that waited for another's row
        // locks sees the row it republished and leaves it.
        lost(&mut sql);
        sql.push(" RETURNING t.id, t.work_unit_key, t.trace_context, t.republished");
        let mut taken = self
            .write_returning(&sql)
            .await?
            .iter()
            .map(|row| {
                let task = Unpublished {
                    id: row.try_get("id").map_err(db_error)?,
                    work_unit_key: row.try_get("work_unit_key").map_err(db_error)?,
                    trace: trace_column(row)?,
                };
                Ok((task, row.try_get::<i64, _>("republished").map_err(db_error)?))
            })
            .collect::<Result<Vec<_>>>()?;
        taken.sort_by_key(|(task, _)| task.id);
        Ok(taken)
    }

    async fn mark_published(&self, task_ids: &[i64]) -> Result<()> {
        self.stamp_now("published_at", "published_at IS NULL", task_ids).await
    }
}

#[async_trait]
impl WorkQueue for SqlWorkQueue {
    async fn enqueue(&self, tasks: Vec<NewTask>) -> Result<usize> {
        self.enqueue_delayed(tasks, Duration::ZERO).await
    }

    async fn enqueue_delayed(&self, tasks: Vec<NewTask>, delay: Duration) -> Result<usize> {
        if tasks.is_empty() {
            return Ok(0);
        }
        let mut tx = self.store.begin_write().await?;
        let added = insert_tasks_ready_in(tx.conn(), &tasks, delay).await?;
        tx.commit().await?;
        Ok(usize::try_from(added).unwrap_or(usize::MAX))
    }

    async fn postpone(&self, work_unit_key: &str, delay: Duration, latest: Duration) -> Result<u64> {
        let until = now_micros() + micros(delay);
        let latest = micros(latest);
        // The later of now + delay, but no later than enqueued + latest.
        let ready_at = |sql: &mut Sql| {
            sql.push("CASE WHEN created_at + ")
                .bind(latest)
                .push(" < ")
                .bind(until)
                .push(" THEN created_at + ")
                .bind(latest)
                .push(" ELSE ")
                .bind(until)
                .push(" END");
        };
        let mut tx = self.store.begin_write().await?;
        let mut sql = Sql::new("UPDATE work_tasks SET available_at = ");
        ready_at(&mut sql);
        sql.push(" WHERE state = 'pending' AND work_unit_key = ")
            .bind(work_unit_key)
            .push(" AND available_at < ");
        ready_at(&mut sql);
        let moved = execute(tx.conn(), &sql).await?;
        tx.commit().await?;
        Ok(moved)
    }

    async fn claim(&self, worker: &str, task_types: &[&str], max: usize, lease: Duration) -> Result<Option<Claim>> {
        if task_types.is_empty() || max == 0 {
            return Ok(None);
        }
        let now = now_micros();
        let mut tx = self.store.begin_write().await?;
        // Erasures first; then the workspaces after the last one claimed,
        // then from the first around to it (see `Turns`).
        let last = self.turns.last();
        let mut candidates = Vec::new();
        if task_types.contains(&roncho_core::queue::FIRST) {
            candidates = ready_heads(tx.conn(), &[roncho_core::queue::FIRST], now, Turn::Erasures).await?;
        }
        if candidates.is_empty() {
            candidates = match &last {
                None => ready_heads(tx.conn(), task_types, now, Turn::Oldest).await?,
                Some(last) => ready_heads(tx.conn(), task_types, now, Turn::After(last)).await?,
            };
        }
        if candidates.is_empty() && last.is_some() {
            candidates = ready_heads(tx.conn(), task_types, now, Turn::FromFirst).await?;
        }
        let candidates = candidates.iter().map(|key| (key.as_str(), None)).collect();
        let claim = claim_first(tx.conn(), worker, candidates, max, lease).await?;
        tx.commit().await?;
        if let Some(claim) = &claim {
            self.turns.claimed(&claim.work_unit_key);
        }
        Ok(claim)
    }

    async fn renew(&self, claim: &Claim, lease: Duration) -> Result<()> {
        let mut tx = self.store.begin_write().await?;
        let mut sql = Sql::new("UPDATE work_leases SET expires_at = ");
        sql.bind(now_micros() + micros(lease))
            .push(" WHERE work_unit_key = ")
            .bind(claim.work_unit_key.as_str())
            .push(" AND token = ")
            .bind(claim.token.as_str());
        let renewed = execute(tx.conn(), &sql).await?;
        tx.commit().await?;
        if renewed == 0 { Err(lost(claim)) } else { Ok(()) }
    }

    async fn complete(&self, claim: &Claim, task_ids: &[i64]) -> Result<()> {
        if task_ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin_write().await?;
        check_lease(tx.conn(), claim).await?;
        let mut sql = Sql::new("UPDATE work_tasks SET state = 'done', finished_at = ");
        sql.bind(now_micros())
            .push(" WHERE state = 'pending' AND work_unit_key = ")
            .bind(claim.work_unit_key.as_str())
            .push(" AND id IN ")
            .push_list(task_ids);
        execute(tx.conn(), &sql).await?;
        let last = task_ids.iter().copied().max().unwrap_or_default();
        crate::tx::tasks::queue_empty_if_drained(tx.conn(), &claim.work_unit_key, last).await?;
        tx.commit().await
    }

    async fn fail(
        &self,
        claim: &Claim,
        task_ids: &[i64],
        error: &str,
        retry_after: Duration,
        max_attempts: i64,
    ) -> Result<()> {
        if task_ids.is_empty() {
            return Ok(());
        }
        let now = now_micros();
        let mut tx = self.store.begin_write().await?;
        check_lease(tx.conn(), claim).await?;
        let mut sql = Sql::new("UPDATE work_tasks SET attempts = attempts + 1, last_error = ");
        sql.bind(error)
            .push(", available_at = ")
            .bind(now + micros(retry_after))
            .push(", state = CASE WHEN attempts + 1 >= ")
            .bind(max_attempts);
        sql.push(" THEN 'dead' ELSE 'pending' END, finished_at = CASE WHEN attempts + 1 >= ")
            .bind(max_attempts)
            .push(" THEN ")
            .bind(now);
        sql.push(" ELSE NULL END WHERE state = 'pending' AND work_unit_key = ")
            .bind(claim.work_unit_key.as_str())
            .push(" AND id IN ")
            .push_list(task_ids);
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }

    async fn defer(&self, claim: &Claim, task_ids: &[i64], reason: &str, delay: Duration) -> Result<()> {
        if task_ids.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin_write().await?;
        check_lease(tx.conn(), claim).await?;
        let mut sql = Sql::new("UPDATE work_tasks SET deferrals = deferrals + 1, deferred_reason = ");
        sql.bind(reason)
            .push(", available_at = ")
            .bind(now_micros() + micros(delay))
            .push(" WHERE state = 'pending' AND work_unit_key = ")
            .bind(claim.work_unit_key.as_str())
            .push(" AND id IN ")
            .push_list(task_ids);
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }

    async fn retry_dead(&self, filter: &RetryFilter) -> Result<u64> {
        let mut sql = Sql::new(
            "UPDATE work_tasks SET state = 'pending', attempts = 0, deferrals = 0, deferred_reason = NULL, \
             finished_at = NULL, published_at = NULL, available_at = ",
        );
        sql.bind(now_micros())
            .push(" WHERE state = 'dead' AND workspace_name = ")
            .bind(filter.workspace_id.as_str());
        if let Some(session) = &filter.session_id {
            sql.push(" AND session_name = ").bind(session.as_str());
        }
        if let Some(task_type) = &filter.task_type {
            sql.push(" AND task_type = ").bind(task_type.as_str());
        }
        // Counted by items, as queue status counts them.
        sql.push(" RETURNING items");
        let mut tx = self.store.begin_write().await?;
        let mut retried = 0;
        for row in crate::db::fetch_all(tx.conn(), &sql).await? {
            retried += u64::try_from(row.try_get::<i64, _>("items").map_err(db_error)?).unwrap_or(0);
        }
        tx.commit().await?;
        Ok(retried)
    }

    async fn release(&self, claim: &Claim) -> Result<()> {
        let mut tx = self.store.begin_write().await?;
        let mut sql = Sql::new("DELETE FROM work_leases WHERE work_unit_key = ");
        sql.bind(claim.work_unit_key.as_str())
            .push(" AND token = ")
            .bind(claim.token.as_str());
        execute(tx.conn(), &sql).await?;
        tx.commit().await
    }

    async fn release_worker(&self, worker: &str) -> Result<u64> {
        Ok(self.release_units_of(worker).await?.len() as u64)
    }

    async fn purge(&self, done_age: Duration, dead_age: Duration) -> Result<u64> {
        let now = now_micros();
        let mut tx = self.store.begin_write().await?;
        let mut sql = Sql::new("DELETE FROM work_tasks WHERE (state = 'done' AND finished_at < ");
        sql.bind(now - micros(done_age))
            .push(") OR (state = 'dead' AND finished_at < ")
            .bind(now - micros(dead_age))
            .push(")");
        let purged = execute(tx.conn(), &sql).await?;
        tx.commit().await?;
        Ok(purged)
    }

    async fn history(&self, filter: &StatusFilter, window: Duration, steps: usize) -> Result<Vec<QueueSample>> {
        let now = now_micros();
        let mut since = now - micros(window);
        // The tasks that waited at some point of the window, newest first
        // (work scheduled for later, a dream waiting for quiet, is not
        // waiting yet).
        let mut sql = Sql::new("SELECT t.created_at, t.finished_at, t.state, t.items FROM work_tasks t");
        push_filter(&mut sql, filter, self.store.dialect());
        sql.push(" AND (t.finished_at IS NULL OR t.finished_at >= ")
            .bind(since)
            .push(") AND ");
        push_not_scheduled(&mut sql, now);
        sql.push(" ORDER BY t.created_at DESC LIMIT ").bind(HISTORY_MAX_TASKS);
        let mut tasks = Vec::new();
        for row in self.store.read(&sql).await? {
            tasks.push(TaskSpan {
                created_at: row.try_get("created_at").map_err(db_error)?,
                finished_at: row.try_get("finished_at").map_err(db_error)?,
                done: row.try_get::<String, _>("state").map_err(db_error)? == "done",
                items: row.try_get("items").map_err(db_error)?,
            });
        }
        // Cut short, the window starts where what was read starts.
        if tasks.len() as i64 >= HISTORY_MAX_TASKS
            && let Some(oldest) = tasks.last()
        {
            since = since.max(oldest.created_at);
        }
        Ok(samples(&tasks, since, now, steps))
    }

    async fn status(&self, filter: &StatusFilter) -> Result<QueueStatus> {
        let now = now_micros();
        let mut sql = Sql::new(
            "SELECT t.session_name, t.state, CASE WHEN t.state = 'pending' AND EXISTS (SELECT 1 FROM work_leases l \
             WHERE l.work_unit_key = t.work_unit_key AND l.expires_at > ",
        );
        sql.bind(now)
            .push(") THEN 1 ELSE 0 END AS held, CAST(SUM(t.items) AS BIGINT) AS n FROM work_tasks t");
        push_filter(&mut sql, filter, self.store.dialect());
        sql.push(" AND ");
        push_not_scheduled(&mut sql, now);
        sql.push(" GROUP BY 1, 2, 3");
        let mut status = QueueStatus::default();
        let mut sessions: BTreeMap<String, Counts> = BTreeMap::new();
        for row in self.store.read(&sql).await? {
            let session: Option<String> = row.try_get("session_name").map_err(db_error)?;
            let state: String = row.try_get("state").map_err(db_error)?;
            let held: i64 = row.try_get("held").map_err(db_error)?;
            let n: i64 = row.try_get("n").map_err(db_error)?;
            add_counts(&mut status.counts, &state, held, n);
            if let Some(session) = session {
                add_counts(sessions.entry(session).or_default(), &state, held, n);
            }
        }
        status.sessions = sessions.into_iter().collect();
        // Postponed: pending, waiting out an outage, and not held by a worker
        // (held ones count as in progress).
        let waiting = |sql: &mut Sql| {
            sql.push(" AND t.state = 'pending' AND t.deferrals > 0 AND t.available_at > ")
                .bind(now)
                .push(" AND NOT EXISTS (SELECT 1 FROM work_leases l WHERE l.work_unit_key = t.work_unit_key AND l.expires_at > ")
                .bind(now)
                .push(")");
        };
        let mut postponed = Sql::new("SELECT t.session_name, CAST(SUM(t.items) AS BIGINT) AS n FROM work_tasks t");
        push_filter(&mut postponed, filter, self.store.dialect());
        waiting(&mut postponed);
        postponed.push(" GROUP BY 1");
        for row in self.store.read(&postponed).await? {
            let n: i64 = row.try_get("n").map_err(db_error)?;
            status.counts.postponed += n;
            let session: Option<String> = row.try_get("session_name").map_err(db_error)?;
            if let Some((_, counts)) = status.sessions.iter_mut().find(|(id, _)| Some(id) == session.as_ref()) {
                counts.postponed += n;
            }
        }
        let mut postponed = Sql::new(
            "SELECT t.work_unit_key, t.dedup_id, t.deferrals, t.deferred_reason, t.available_at FROM work_tasks t",
        );
        push_filter(&mut postponed, filter, self.store.dialect());
        waiting(&mut postponed);
        postponed
            .push(" ORDER BY t.available_at, t.id LIMIT ")
            .bind(MAX_FAILURES);
        for row in self.store.read(&postponed).await? {
            status.postponed.push(PostponedTask {
                work_unit_key: row.try_get("work_unit_key").map_err(db_error)?,
                dedup_id: row.try_get("dedup_id").map_err(db_error)?,
                deferrals: row.try_get::<i64, _>("deferrals").map_err(db_error)?,
                reason: row
                    .try_get::<Option<String>, _>("deferred_reason")
                    .map_err(db_error)?
                    .unwrap_or_default(),
                ready_at: row.try_get("available_at").map_err(db_error)?,
            });
        }
        let mut dreams = Sql::new("SELECT CASE WHEN t.available_at > ");
        dreams
            .bind(now)
            .push(
                " THEN 1 ELSE 0 END AS waiting, COUNT(*) AS n, MIN(t.created_at) AS oldest FROM work_tasks t \
                 WHERE t.state = 'pending' AND t.task_type = 'dream' AND t.workspace_name = ",
            )
            .bind(filter.workspace_id.as_str())
            .push(" GROUP BY 1");
        for row in self.store.read(&dreams).await? {
            let n: i64 = row.try_get("n").map_err(db_error)?;
            match row.try_get::<i64, _>("waiting").map_err(db_error)? {
                1 => status.dreams.waiting += n,
                _ => status.dreams.ready += n,
            }
            let oldest: Option<i64> = row.try_get("oldest").map_err(db_error)?;
            status.dreams.oldest_due_at = status.dreams.oldest_due_at.into_iter().chain(oldest).min();
        }
        let mut failures = Sql::new("SELECT t.work_unit_key, t.dedup_id, t.attempts, t.last_error FROM work_tasks t");
        push_filter(&mut failures, filter, self.store.dialect());
        failures
            .push(" AND t.state = 'dead' ORDER BY t.finished_at DESC, t.id DESC LIMIT ")
            .bind(MAX_FAILURES);
        for row in self.store.read(&failures).await? {
            status.failures.push(FailedTask {
                work_unit_key: row.try_get("work_unit_key").map_err(db_error)?,
                dedup_id: row.try_get("dedup_id").map_err(db_error)?,
                attempts: row.try_get("attempts").map_err(db_error)?,
                last_error: row
                    .try_get::<Option<String>, _>("last_error")
                    .map_err(db_error)?
                    .unwrap_or_default(),
            });
        }
        Ok(status)
    }
}
