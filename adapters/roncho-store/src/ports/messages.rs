//! [`Messages`]: a session's messages and summaries.

use crate::db::{SqlStore, db_error, direction, execute, fetch_optional, to_json};
use crate::rows;
use crate::sql::{Dialect, Sql, render_filter};
use crate::tx::entities::{load_message, load_session};
use crate::tx::erasing::{self, push_not_erasing};
use crate::tx::vectors::push_perspective;
use crate::tx::writes::Origin;
use async_trait::async_trait;
use roncho_core::filter::Filter;
use roncho_core::idempotency::Once;
use roncho_core::model::now_micros;
use roncho_core::model::{
    ContextWindow, JsonObject, Message, MessageScan, NewMessage, Page, PageRequest, SessionSummary,
};
use roncho_core::model::{SummaryBasis, SummaryKind};
use roncho_core::store::Messages;
use roncho_core::{Error, Result};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;

/// Sequence numbers and token counts read in the first page of a context
/// walk (a 4,000-token budget of 50-token messages needs 80), and the most in one.
const CONTEXT_FIRST_PAGE: i64 = 128;

const CONTEXT_MAX_PAGE: i64 = 4096;

/// How a session's messages are numbered: sequence numbers handed out
/// (`last_seq`) and messages held (`message_count`, migration 0025).
struct Numbering {
    last_seq: i64,
    messages: i64,
    /// A peer or the whole workspace is being erased: some of the
    /// session's messages may be hidden, so its numbers are no page's.
    erasing: bool,
}

impl Numbering {
    /// Whether every number from 1 to `last_seq` is a message that can be
    /// read: nothing was erased, and nothing is being erased.
    fn is_gapless(&self) -> bool {
        self.messages == self.last_seq && !self.erasing
    }
}

/// The numbering of the session `s` as [`Numbering::of`] reads it, from
/// `sessions s` (the running erasures that may hide its messages counted).
const NUMBERING_COLUMNS: &str = "s.workspace_name, s.name, s.is_active, s.last_seq, s.message_count, \
     (SELECT COUNT(*) FROM erasure_receipts e WHERE e.state = 'running' \
     AND e.workspace_name = s.workspace_name AND e.scope IN ('peer', 'workspace')) AS erasing";

impl Numbering {
    /// The numbering of a row of [`NUMBERING_COLUMNS`]; `NotFound` when
    /// there is none or the session was deleted (or is being erased).
    fn of(row: Option<&AnyRow>, session_id: &str) -> Result<Numbering> {
        let row = row.ok_or_else(|| Error::not_found("session", session_id))?;
        if rows::get::<i64>(row, "is_active")? == 0 {
            return Err(Error::not_found("session", session_id));
        }
        Ok(Numbering {
            last_seq: rows::get(row, "last_seq")?,
            messages: rows::get(row, "message_count")?,
            erasing: rows::get::<i64>(row, "erasing")? > 0,
        })
    }
}

impl SqlStore {
    /// The session's numbering; `NotFound` as [`Numbering::of`].
    async fn session_numbering(&self, workspace_id: &str, session_id: &str) -> Result<Numbering> {
        let mut sql = Sql::new(&format!(
            "SELECT {NUMBERING_COLUMNS} FROM sessions s WHERE s.workspace_name = "
        ));
        sql.bind(workspace_id).push(" AND s.name = ").bind(session_id);
        Numbering::of(self.read_optional(&sql).await?.as_ref(), session_id)
    }

    /// A page of a gapless session's messages read with its numbering, in
    /// one statement (one trip to Postgres instead of two; one snapshot, so
    /// the total is the count the page was cut from): `None` when the
    /// session has gaps or an erasure runs (the caller reads it the general
    /// way); `NotFound` as [`Numbering::of`].
    async fn gapless_page(
        &self,
        workspace_id: &str,
        session_id: &str,
        page: PageRequest,
    ) -> Result<Option<Page<Message>>> {
        let order = format!("m.seq_in_session {}", direction(page));
        if self.dialect() == Dialect::Sqlite {
            // The page as one JSON value beside the session's row (rows
            // cross threads one at a time on SQLite: `read_messages`).
            let mut sql = Sql::new(&format!(
                "SELECT (SELECT {} FROM messages m WHERE m.workspace_name = s.workspace_name \
                 AND m.session_name = s.name AND ",
                self.dialect()
                    .json_rows(rows::message_json_columns(self.dialect()), &order),
            ));
            push_page_range(&mut sql, page);
            sql.push(&format!(
                ") AS page, {NUMBERING_COLUMNS} FROM sessions s WHERE s.workspace_name = "
            ))
            .bind(workspace_id)
            .push(" AND s.name = ")
            .bind(session_id);
            let found = self.read_optional(&sql).await?;
            let numbering = Numbering::of(found.as_ref(), session_id)?;
            if !numbering.is_gapless() {
                return Ok(None);
            }
            let items = match found.as_ref().map(|row| rows::get::<String>(row, "page")).transpose()? {
                Some(page) => rows::messages_from_json(&page)?,
                None => Vec::new(),
            };
            return Ok(Some(Page::new(items, numbering.messages, page)));
        }
        // The session's row alone first (OFFSET 0: its erasure count is
        // asked once, not once a message).
        let mut sql = Sql::new(&format!(
            "SELECT s.is_active, s.last_seq, s.message_count, s.erasing, {} \
             FROM (SELECT {NUMBERING_COLUMNS} FROM sessions s WHERE s.workspace_name = ",
            rows::MESSAGE_COLUMNS
        ));
        sql.bind(workspace_id).push(" AND s.name = ").bind(session_id).push(
            " OFFSET 0) s LEFT JOIN messages m ON m.workspace_name = s.workspace_name \
             AND m.session_name = s.name AND s.is_active <> 0 AND s.message_count = s.last_seq AND ",
        );
        push_page_range(&mut sql, page);
        sql.push(&format!(" ORDER BY {order}"));
        let found = self.read(&sql).await?;
        let numbering = Numbering::of(found.first(), session_id)?;
        if !numbering.is_gapless() {
            return Ok(None);
        }
        // A page past the last holds the session's row alone.
        let items = match rows::get::<Option<String>>(&found[0], "public_id")? {
            Some(_) => found.iter().map(rows::message).collect::<Result<Vec<_>>>()?,
            None => Vec::new(),
        };
        Ok(Some(Page::new(items, numbering.messages, page)))
    }
}

/// Appends the condition on `m.seq_in_session` of `page` of the gapless
/// session `s`: `offset + 1 ..= offset + size`, the reverse ones counted
/// down from the session's last number.
fn push_page_range(sql: &mut Sql, page: PageRequest) {
    let skipped = page.offset();
    if page.reverse {
        sql.push("m.seq_in_session > s.last_seq - ")
            .bind(skipped.saturating_add(page.size))
            .push(" AND m.seq_in_session <= s.last_seq - ")
            .bind(skipped);
    } else {
        sql.push("m.seq_in_session > ")
            .bind(skipped)
            .push(" AND m.seq_in_session <= ")
            .bind(skipped.saturating_add(page.size));
    }
}

/// `messages m WHERE …` of a session's messages numbered `first..=last`.
fn seq_range(workspace_id: &str, session_id: &str, first: i64, last: i64) -> Sql {
    let mut from_where = Sql::new("messages m WHERE m.workspace_name = ");
    from_where
        .bind(workspace_id)
        .push(" AND m.session_name = ")
        .bind(session_id)
        .push(" AND m.seq_in_session >= ")
        .bind(first)
        .push(" AND m.seq_in_session <= ")
        .bind(last);
    from_where
}

/// The columns of a session's summaries, as [`push_summaries_from`] names them.
const SUMMARY_COLUMNS: &str = "s.is_active, ss.summary_type, ss.content, ss.message_public_id, ss.message_seq, \
     ss.token_count, ss.created_at";

/// Appends `FROM … WHERE …` of a session and its summaries: a row of NULLs
/// beside the session when it has none, or while a member's erasure runs
/// (they may quote it); no row when the session is not there or is being
/// erased.
fn push_summaries_from(sql: &mut Sql, workspace_id: &str, session_id: &str) {
    sql.push(
        "FROM sessions s LEFT JOIN session_summaries ss \
         ON ss.workspace_name = s.workspace_name AND ss.session_name = s.name \
         AND NOT EXISTS (SELECT 1 FROM erasure_receipts e JOIN session_peers sp \
         ON sp.workspace_name = e.workspace_name AND sp.peer_name = e.target \
         WHERE e.state = 'running' AND e.scope = 'peer' AND e.workspace_name = s.workspace_name \
         AND sp.session_name = s.name) WHERE s.workspace_name = ",
    );
    sql.bind(workspace_id).push(" AND s.name = ").bind(session_id);
    push_not_erasing(sql, erasing::SESSION);
}

/// A row of [`SUMMARY_COLUMNS`].
type SummaryRow = (
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// The summaries of the rows of [`push_summaries_from`], short first;
/// `NotFound` when the session is not there, is deleted or is being erased.
fn summaries_of(rows: Vec<SummaryRow>, session_id: &str) -> Result<Vec<SessionSummary>> {
    if rows.first().is_none_or(|row| row.0 == 0) {
        return Err(Error::not_found("session", session_id));
    }
    let mut summaries = Vec::new();
    for (_, kind, content, message_id, message_seq, token_count, created_at) in rows {
        let Some(kind) = kind else {
            continue;
        };
        let Some(kind) = SummaryKind::from_name(&kind) else {
            return Err(Error::Internal(format!("unknown summary type `{kind}` stored")));
        };
        let missing = || Error::Internal("a stored summary lacks a column".into());
        summaries.push(SessionSummary {
            kind,
            content: content.ok_or_else(missing)?,
            message_id: message_id.ok_or_else(missing)?,
            message_seq: message_seq.ok_or_else(missing)?,
            token_count: token_count.ok_or_else(missing)?,
            created_at: created_at.ok_or_else(missing)?,
        });
    }
    summaries.sort_by_key(|summary| summary.kind);
    Ok(summaries)
}

#[async_trait]
impl Messages for SqlStore {
    #[tracing::instrument(name = "store.create_messages", skip_all, fields(workspace_id = %workspace_id, session_id = %session_id, messages = messages.len()))]
    async fn write_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        messages: Vec<NewMessage>,
        once: Option<&Once>,
    ) -> Result<Vec<Message>> {
        self.append_messages(workspace_id, session_id, messages, Origin::Client(once))
            .await
    }

    async fn replayed_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        once: &Once,
    ) -> Result<Option<Vec<Message>>> {
        let mut conn = self.reads().acquire().await.map_err(db_error)?;
        let Some(ids) = crate::tx::idempotency::lookup(&mut conn, workspace_id, once).await? else {
            return Ok(None);
        };
        drop(conn);
        self.replay_messages(workspace_id, session_id, &ids).await.map(Some)
    }

    async fn get_message(&self, workspace_id: &str, session_id: &str, id: &str) -> Result<Message> {
        let mut conn = self.reads().acquire().await.map_err(db_error)?;
        load_message(&mut conn, workspace_id, session_id, id).await
    }

    async fn update_message(
        &self,
        workspace_id: &str,
        session_id: &str,
        id: &str,
        metadata: JsonObject,
    ) -> Result<Message> {
        let mut tx = self.begin_write().await?;
        let mut sql = Sql::new("UPDATE messages SET metadata = ");
        sql.bind(to_json(&metadata))
            .push(" WHERE workspace_name = ")
            .bind(workspace_id);
        sql.push(" AND session_name = ")
            .bind(session_id)
            .push(" AND public_id = ")
            .bind(id);
        if execute(tx.conn(), &sql).await? == 0 {
            return Err(Error::not_found("message", id));
        }
        let message = load_message(tx.conn(), workspace_id, session_id, id).await?;
        tx.commit().await?;
        Ok(message)
    }

    async fn list_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        filter: &Filter,
        page: PageRequest,
    ) -> Result<Page<Message>> {
        // A gapless session's page is a range of sequence numbers, read by
        // the index with the session's numbering in one statement: no
        // OFFSET walk past the pages before it, no COUNT. Otherwise the
        // general way (the session's existence checked first: a filter
        // that matches nothing is an empty page of a session that is there).
        if *filter == Filter::All {
            if let Some(page) = self.gapless_page(workspace_id, session_id, page).await? {
                return Ok(page);
            }
        } else {
            self.session_numbering(workspace_id, session_id).await?;
        }
        let mut from_where = Sql::new("messages m WHERE m.workspace_name = ");
        from_where
            .bind(workspace_id)
            .push(" AND m.session_name = ")
            .bind(session_id);
        push_not_erasing(&mut from_where, erasing::MESSAGE);
        self.push_filter(&mut from_where, filter, "m")?;
        let order = format!("m.seq_in_session {}", direction(page));
        self.paged(rows::MESSAGE_COLUMNS, from_where, &order, page, rows::message)
            .await
    }

    async fn messages_by_ids(
        &self,
        workspace_id: &str,
        ids: &[String],
        filter: &Filter,
        peer_perspective: Option<&str>,
    ) -> Result<Vec<Message>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut from_where = Sql::new(&format!(
            "messages m WHERE {} = ",
            self.dialect().unindexed("m.workspace_name")
        ));
        from_where.bind(workspace_id).push(" AND m.public_id IN ");
        from_where.push_list(ids);
        if let Some(observer) = peer_perspective {
            crate::tx::vectors::push_perspective(&mut from_where, observer);
        }
        push_not_erasing(&mut from_where, erasing::MESSAGE);
        from_where.push(" AND ");
        render_filter(&mut from_where, self.dialect(), filter, "m")?;
        // Callers order the rows themselves (by their hits' ranks).
        self.read_messages(from_where, "m.id").await
    }

    async fn scan_messages(&self, workspace_id: &str, scan: &MessageScan) -> Result<Vec<Message>> {
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
        push_not_erasing(&mut sql, erasing::MESSAGE);
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

    #[tracing::instrument(name = "store.context_messages", skip_all, fields(workspace_id = %workspace_id, session_id = %session_id))]
    async fn context_messages(
        &self,
        workspace_id: &str,
        session_id: &str,
        token_budget: i64,
        from_seq: i64,
    ) -> Result<Vec<Message>> {
        if token_budget <= 0 {
            self.session_numbering(workspace_id, session_id).await?;
            return Ok(Vec::new());
        }
        // Walk back from the newest message over sequence numbers and token
        // counts alone, in growing pages (the unique (workspace, session,
        // seq) index serves each), to the first message that no longer
        // fits; then read the rows that fit, and only those, in one query:
        // cost follows the budget, not the session.
        let mut used = 0_i64;
        let mut span: Option<(i64, i64)> = None;
        let mut page = CONTEXT_FIRST_PAGE;
        'walk: loop {
            let mut from_where = Sql::new("messages m WHERE m.workspace_name = ");
            from_where
                .bind(workspace_id)
                .push(" AND m.session_name = ")
                .bind(session_id);
            from_where.push(" AND m.seq_in_session >= ").bind(from_seq);
            if let Some((oldest, _)) = span {
                from_where.push(" AND m.seq_in_session < ").bind(oldest);
            }
            push_not_erasing(&mut from_where, erasing::MESSAGE);
            let counts = self.read_token_counts(from_where, page).await?;
            if counts.is_empty() && span.is_none() {
                // No message to walk: the session may not exist (a session
                // with messages does; it is checked only when there are none).
                self.session_numbering(workspace_id, session_id).await?;
            }
            for &(seq, tokens) in &counts {
                if used + tokens > token_budget {
                    break 'walk;
                }
                used += tokens;
                span = Some((seq, span.map_or(seq, |(_, newest)| newest)));
            }
            if (counts.len() as i64) < page {
                break;
            }
            page = (page * 4).min(CONTEXT_MAX_PAGE);
        }
        let Some((oldest, newest)) = span else {
            return Ok(Vec::new());
        };
        let mut from_where = seq_range(workspace_id, session_id, oldest, newest);
        push_not_erasing(&mut from_where, erasing::MESSAGE);
        self.read_messages(from_where, "m.seq_in_session").await
    }

    #[tracing::instrument(name = "store.context_window", skip_all, fields(workspace_id = %workspace_id, session_id = %session_id))]
    async fn context_window(
        &self,
        workspace_id: &str,
        session_id: &str,
        token_budget: i64,
        with_summaries: bool,
    ) -> Result<ContextWindow> {
        // The first page of the walk back from the newest message, the
        // rows of it that fit the budget and the session with its
        // summaries, in one statement: one trip to SQLite's connection
        // thread or to Postgres instead of three (two concurrent ones to
        // Postgres before: 0.1 ms of a context call, docs/benchmarks.md). The
        // window starts at the oldest message of the first page whose
        // tokens, with those of every newer one, fit the budget.
        let fitting = |sql: &mut Sql| {
            sql.push("FROM messages m WHERE m.workspace_name = ")
                .bind(workspace_id)
                .push(" AND m.session_name = ")
                .bind(session_id)
                .push(
                    " AND m.seq_in_session >= (SELECT MIN(seq) FROM (SELECT m.seq_in_session AS seq, \
                     SUM(m.token_count) OVER (ORDER BY m.seq_in_session DESC ROWS UNBOUNDED PRECEDING) AS used \
                     FROM messages m WHERE m.workspace_name = ",
                )
                .bind(workspace_id)
                .push(" AND m.session_name = ")
                .bind(session_id);
            push_not_erasing(sql, erasing::MESSAGE);
            sql.push(&format!(
                " ORDER BY m.seq_in_session DESC LIMIT {CONTEXT_FIRST_PAGE}) walked WHERE used <= "
            ))
            .bind(token_budget.max(0))
            .push(")");
            push_not_erasing(sql, erasing::MESSAGE);
        };
        let mut sql = Sql::new(&format!(
            "SELECT (SELECT {} ",
            self.dialect
                .json_rows(rows::message_json_columns(self.dialect), "m.seq_in_session")
        ));
        fitting(&mut sql);
        sql.push(&format!(
            ") AS page, (SELECT {} ",
            self.dialect.json_rows(SUMMARY_COLUMNS, "ss.summary_type")
        ));
        push_summaries_from(&mut sql, workspace_id, session_id);
        sql.push(") AS summaries");
        let row = self
            .read_optional(&sql)
            .await?
            .ok_or_else(|| Error::Internal("the context window read no row".into()))?;
        let summaries: Vec<SummaryRow> = serde_json::from_str(&rows::get::<String>(&row, "summaries")?)
            .map_err(|error| Error::Internal(format!("decoding summaries: {error}")))?;
        let summaries = summaries_of(summaries, session_id)?;
        let mut messages = rows::messages_from_json(&rows::get::<String>(&row, "page")?)?;
        if token_budget <= 0 {
            // Nothing fits, not even a message of no tokens.
            messages.clear();
        } else if messages.len() as i64 >= CONTEXT_FIRST_PAGE {
            // All of the first page fit: walk on.
            messages = self.context_messages(workspace_id, session_id, token_budget, 0).await?;
        }
        Ok(ContextWindow {
            summaries: if with_summaries { summaries } else { Vec::new() },
            messages,
        })
    }

    async fn session_summaries(&self, workspace_id: &str, session_id: &str) -> Result<Vec<SessionSummary>> {
        let mut sql = Sql::new(&format!("SELECT {SUMMARY_COLUMNS} "));
        push_summaries_from(&mut sql, workspace_id, session_id);
        let rows = self
            .read(&sql)
            .await?
            .iter()
            .map(|row| {
                Ok((
                    rows::get(row, "is_active")?,
                    rows::get(row, "summary_type")?,
                    rows::get(row, "content")?,
                    rows::get(row, "message_public_id")?,
                    rows::get(row, "message_seq")?,
                    rows::get(row, "token_count")?,
                    rows::get(row, "created_at")?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        summaries_of(rows, session_id)
    }

    #[tracing::instrument(name = "store.set_session_summary", skip_all, fields(workspace_id = %workspace_id, session_id = %session_id))]
    async fn set_session_summary(
        &self,
        workspace_id: &str,
        session_id: &str,
        kind: SummaryKind,
        content: &str,
        message_id: &str,
        token_count: i64,
        basis: Option<&SummaryBasis>,
    ) -> Result<SessionSummary> {
        let mut tx = self.begin_write().await?;
        load_session(tx.conn(), workspace_id, session_id).await?;
        let message = load_message(tx.conn(), workspace_id, session_id, message_id).await?;
        if let Some(basis) = basis {
            self.check_summary_basis(tx.conn(), workspace_id, session_id, kind, basis)
                .await?;
        }
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
}

impl SqlStore {
    /// `NOT_FOUND` unless what a summary was made from is intact: its
    /// messages there and not being erased (locked until the summary
    /// commits, so an erasure taking them waits and then rebuilds it), and
    /// the previous summary it carried on still the session's.
    async fn check_summary_basis(
        &self,
        conn: &mut AnyConnection,
        workspace_id: &str,
        session_id: &str,
        kind: SummaryKind,
        basis: &SummaryBasis,
    ) -> Result<()> {
        let mut found = std::collections::BTreeSet::new();
        for chunk in basis.messages.chunks(500) {
            let mut sql = Sql::new("SELECT m.public_id FROM messages m WHERE m.workspace_name = ");
            sql.bind(workspace_id)
                .push(" AND m.session_name = ")
                .bind(session_id)
                .push(" AND m.public_id IN ")
                .push_list(chunk);
            push_not_erasing(&mut sql, erasing::MESSAGE);
            sql.push(crate::tx::conclusions::lock_shared(self.dialect()));
            for row in crate::db::fetch_all(conn, &sql).await? {
                found.insert(rows::get::<String>(&row, "public_id")?);
            }
        }
        if let Some(gone) = basis.messages.iter().find(|id| !found.contains(*id)) {
            return Err(Error::not_found("message", gone));
        }
        let mut previous = Sql::new("SELECT created_at FROM session_summaries WHERE workspace_name = ");
        previous
            .bind(workspace_id)
            .push(" AND session_name = ")
            .bind(session_id)
            .push(" AND summary_type = ")
            .bind(kind.name());
        let current = match fetch_optional(conn, &previous).await? {
            Some(row) => Some(rows::get::<i64>(&row, "created_at")?),
            None => None,
        };
        if basis.previous.is_some() && current != basis.previous {
            return Err(Error::not_found("summary", kind.name()));
        }
        Ok(())
    }
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
