//! The tools that read conversations: message search (by meaning, words,
//! dates or ids, shown in snippets of their sessions), the recent history,
//! session summaries and stated preferences.

use roncho_core::filter;
use roncho_core::model::{Message, MessageQuery, MessageScan};
use roncho_core::{Error, Result};
use serde_json::Value;

use super::ToolContext;
use super::args::{date_arg, int_arg, required_text, text_list};
use super::output::{message_line, message_lines, message_lines_with_session, observation_lines};

impl ToolContext {
    pub(super) async fn search_messages(&self, input: &Value) -> Result<String> {
        let query = required_text(input, "query")?;
        let limit = int_arg(input, "limit", 10, 1, 20);
        let found = self.find_messages(&query, limit, None, None).await?;
        if found.is_empty() {
            return Ok(format!("No messages found for '{query}'."));
        }
        let snippets = self.snippets(&found, 2).await?;
        Ok(format!("Found {} matching messages:\n{snippets}", found.len()))
    }

    /// Messages matching `query` (hybrid search, as SearchMessages ranks
    /// them), within what the observer could see and the dates given.
    pub async fn find_messages(
        &self,
        query: &str,
        limit: i64,
        after: Option<i64>,
        before: Option<i64>,
    ) -> Result<Vec<Message>> {
        let dated = |m: &Message| after.is_none_or(|t| m.created_at > t) && before.is_none_or(|t| m.created_at < t);
        // Dates filter afterwards: ask for more.
        let asked = if after.is_some() || before.is_some() {
            limit * 5
        } else {
            limit * 2
        };
        // The same search as SearchMessages, in every configuration: each
        // store's full text is read where that configuration keeps it (the
        // embedded vector store's index, Qdrant's sparse vectors, SQLite's
        // FTS5 or Postgres' text index).
        let search = MessageQuery {
            terms: roncho_core::search::terms(query),
            session_ids: self.allowed_sessions.clone(),
            peer_id: None,
            peer_perspective: self.perspective(),
            limit: asked,
        };
        let found = roncho_search::messages::search(
            self.store.as_ref(),
            self.semantic.as_ref(),
            &self.workspace,
            query,
            &search,
            &filter::Filter::All,
        )
        .await?;
        if !found.degraded_reason.is_empty() && self.semantic.is_some() {
            tracing::warn!(reason = found.degraded_reason, "agent message search degraded");
        }
        let found = found.messages;
        let mut found: Vec<Message> = found
            .into_iter()
            .filter(|m| dated(m) && self.may_read_session(Some(&m.session_id)))
            .collect();
        found.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        self.read_messages(&found);
        Ok(found)
    }

    /// The matches with `window` messages on each side, overlapping windows
    /// of a session merged into one snippet.
    async fn snippets(&self, matches: &[Message], window: i64) -> Result<String> {
        let mut ranges: Vec<(String, i64, i64)> = Vec::new();
        for message in matches {
            let (from, to) = (message.seq_in_session - window, message.seq_in_session + window);
            match ranges
                .iter_mut()
                .find(|(session, start, end)| *session == message.session_id && from <= *end + 1 && to >= *start - 1)
            {
                Some(range) => {
                    range.1 = range.1.min(from);
                    range.2 = range.2.max(to);
                }
                None => ranges.push((message.session_id.clone(), from, to)),
            }
        }
        let mut text = String::new();
        for (session, from, to) in ranges {
            let messages = self
                .scan(MessageScan {
                    session_ids: Some(vec![session.clone()]),
                    seq_range: Some((from, to)),
                    limit: to - from + 1,
                    ..MessageScan::default()
                })
                .await?;
            text.push_str(&format!("--- session {session} ---\n{}", message_lines(&messages)));
        }
        Ok(text)
    }

    /// Scans messages the observer could see (within the allowlist unless
    /// the scan names its sessions).
    async fn scan(&self, scan: MessageScan) -> Result<Vec<Message>> {
        let scan = MessageScan {
            session_ids: scan.session_ids.or_else(|| self.allowed_sessions.clone()),
            peer_perspective: self.perspective(),
            ..scan
        };
        let found = self.store.scan_messages(&self.workspace, &scan).await?;
        self.read_messages(&found);
        Ok(found)
    }

    pub(super) async fn observation_context(&self, input: &Value) -> Result<String> {
        let ids = text_list(input, "message_ids")?;
        if ids.is_empty() {
            return Err(Error::invalid("message_ids", "give at least one message id"));
        }
        let found: Vec<Message> = self
            .store
            .messages_by_ids(
                &self.workspace,
                &ids,
                &filter::Filter::All,
                self.perspective().as_deref(),
            )
            .await?
            .into_iter()
            .filter(|m| self.may_read_session(Some(&m.session_id)))
            .collect();
        if found.is_empty() {
            return Ok("No messages found for those ids.".to_owned());
        }
        self.snippets(&found, 1).await
    }

    pub(super) async fn grep_messages(&self, input: &Value) -> Result<String> {
        let text = required_text(input, "text")?;
        let limit = int_arg(input, "limit", 10, 1, 30);
        let window = int_arg(input, "context_window", 2, 0, 5);
        let found = self
            .scan(MessageScan {
                contains: Some(text.clone()),
                newest_first: true,
                limit,
                ..MessageScan::default()
            })
            .await?;
        if found.is_empty() {
            return Ok(format!("No messages contain '{text}'."));
        }
        let snippets = self.snippets(&found, window).await?;
        Ok(format!(
            "Found {} messages containing '{text}':\n{snippets}",
            found.len()
        ))
    }

    pub(super) async fn messages_by_date_range(&self, input: &Value) -> Result<String> {
        let after = date_arg(input, "after_date")?;
        let before = date_arg(input, "before_date")?;
        let limit = int_arg(input, "limit", 20, 1, 50);
        let newest_first = !matches!(input.get("order").and_then(Value::as_str), Some("asc"));
        let found = self
            .scan(MessageScan {
                after,
                before,
                newest_first,
                limit,
                ..MessageScan::default()
            })
            .await?;
        if found.is_empty() {
            return Ok("No messages in that date range.".to_owned());
        }
        Ok(format!(
            "Found {} messages:\n{}",
            found.len(),
            message_lines_with_session(&found)
        ))
    }

    pub(super) async fn search_messages_temporal(&self, input: &Value) -> Result<String> {
        let query = required_text(input, "query")?;
        let after = date_arg(input, "after_date")?;
        let before = date_arg(input, "before_date")?;
        let limit = int_arg(input, "limit", 10, 1, 20);
        let window = int_arg(input, "context_window", 2, 0, 5);
        let mut found = self.find_messages(&query, limit, after, before).await?;
        if found.is_empty() {
            return Ok(format!("No messages found for '{query}' in that date range."));
        }
        // Newest first: the most recent discussion is what these questions want.
        found.sort_by_key(|message| std::cmp::Reverse(message.created_at));
        let snippets = self.snippets(&found, window).await?;
        Ok(format!("Found {} matching messages:\n{snippets}", found.len()))
    }

    pub(super) async fn recent_history(&self) -> Result<String> {
        let Some(session) = &self.session else {
            return Ok("No session: there is no conversation history.".to_owned());
        };
        let messages = self
            .store
            .context_messages(&self.workspace, session, self.history_token_limit, 0)
            .await?;
        if messages.is_empty() {
            return Ok("The session has no messages yet.".to_owned());
        }
        Ok(message_lines(&messages))
    }

    pub(super) async fn session_summary(&self, input: &Value) -> Result<String> {
        let (kind, wanted) = match input.get("summary_type").and_then(Value::as_str).unwrap_or("short") {
            "short" => ("short", roncho_core::model::SummaryKind::Short),
            "long" => ("long", roncho_core::model::SummaryKind::Long),
            _ => return Err(Error::invalid("summary_type", "must be short or long")),
        };
        let Some(session) = &self.session else {
            return Ok("No session: there is no summary.".to_owned());
        };
        let summaries = self.store.session_summaries(&self.workspace, session).await?;
        Ok(summaries
            .into_iter()
            .find(|summary| summary.kind == wanted)
            .map_or_else(
                || format!("No {kind} summary of session {session} yet."),
                |summary| {
                    format!(
                        "{kind} summary (up to message {}):\n{}",
                        summary.message_id, summary.content
                    )
                },
            ))
    }

    pub(super) async fn extract_preferences(&self) -> Result<String> {
        const CUES: [&str; 8] = [
            "prefer", "i like", "i love", "i hate", "please", "always", "never", "don't",
        ];
        let mut lines = Vec::new();
        for cue in CUES {
            let found = self
                .scan(MessageScan {
                    contains: Some(cue.to_owned()),
                    newest_first: true,
                    limit: 10,
                    ..MessageScan::default()
                })
                .await?;
            for message in found.into_iter().filter(|m| m.peer_id == self.observed) {
                let line = message_line(&message);
                if !lines.contains(&line) {
                    lines.push(line);
                }
            }
        }
        let observations = self
            .find_observations(
                "preferences, likes, dislikes, standing instructions, communication style",
                10,
                None,
            )
            .await?;
        let mut text = format!("Messages of {} with preferences or instructions:\n", self.observed);
        text.push_str(&if lines.is_empty() {
            "(none)\n".to_owned()
        } else {
            lines.join("")
        });
        text.push_str("\nRelated observations:\n");
        text.push_str(&if observations.is_empty() {
            "(none)\n".to_owned()
        } else {
            observation_lines(&observations)
        });
        Ok(text)
    }
}
