//! Decoding rows into domain types. Columns are selected by the constants
//! here so that every query of a resource reads the same shape.

use crate::sql::Dialect;
use roncho_core::model::{
    Conclusion, JsonObject, Message, Peer, Session, SessionPeerConfig, WebhookEndpoint, Workspace,
};
use roncho_core::{Error, Result};
use sqlx::Row;
use sqlx::any::AnyRow;

pub const WORKSPACE_COLUMNS: &str = "name, metadata, configuration, created_at";
pub const PEER_COLUMNS: &str = "p.workspace_name, p.name, p.metadata, p.configuration, p.created_at";
pub const SESSION_COLUMNS: &str = "s.workspace_name, s.name, s.is_active, s.metadata, s.configuration, s.created_at";
pub const MESSAGE_COLUMNS: &str = "m.public_id, m.workspace_name, m.session_name, m.peer_name, m.content, m.metadata, m.created_at, m.token_count, m.seq_in_session";
pub const WEBHOOK_COLUMNS: &str = "id, workspace_name, url, created_at";

pub(crate) fn get<'r, T>(row: &'r AnyRow, column: &str) -> Result<T>
where
    T: sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    row.try_get(column)
        .map_err(|error| Error::Internal(format!("decoding column {column}: {error}")))
}

pub fn json(row: &AnyRow, column: &str) -> Result<JsonObject> {
    let text: String = get(row, column)?;
    serde_json::from_str(&text).map_err(|error| Error::Internal(format!("column {column} holds invalid JSON: {error}")))
}

fn flag(row: &AnyRow, column: &str) -> Result<Option<bool>> {
    let value: Option<i64> = get(row, column)?;
    Ok(value.map(|value| value != 0))
}

pub fn workspace(row: &AnyRow) -> Result<Workspace> {
    Ok(Workspace {
        id: get(row, "name")?,
        metadata: json(row, "metadata")?,
        configuration: json(row, "configuration")?,
        created_at: get(row, "created_at")?,
    })
}

pub fn peer(row: &AnyRow) -> Result<Peer> {
    Ok(Peer {
        id: get(row, "name")?,
        workspace_id: get(row, "workspace_name")?,
        metadata: json(row, "metadata")?,
        configuration: json(row, "configuration")?,
        created_at: get(row, "created_at")?,
    })
}

pub fn session(row: &AnyRow) -> Result<Session> {
    Ok(Session {
        id: get(row, "name")?,
        workspace_id: get(row, "workspace_name")?,
        is_active: flag(row, "is_active")?.unwrap_or(true),
        metadata: json(row, "metadata")?,
        configuration: json(row, "configuration")?,
        created_at: get(row, "created_at")?,
    })
}

pub fn message(row: &AnyRow) -> Result<Message> {
    Ok(Message {
        id: get(row, "public_id")?,
        workspace_id: get(row, "workspace_name")?,
        session_id: get(row, "session_name")?,
        peer_id: get(row, "peer_name")?,
        content: get(row, "content")?,
        metadata: json(row, "metadata")?,
        created_at: get(row, "created_at")?,
        token_count: get(row, "token_count")?,
        seq_in_session: get(row, "seq_in_session")?,
    })
}

/// [`MESSAGE_COLUMNS`] as the elements of a JSON array
/// ([`Dialect::json_rows`]): the metadata as an object, not its text.
pub fn message_json_columns(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => {
            "m.public_id, m.workspace_name, m.session_name, m.peer_name, m.content, json(m.metadata), \
             m.created_at, m.token_count, m.seq_in_session"
        }
        Dialect::Postgres => {
            "m.public_id, m.workspace_name, m.session_name, m.peer_name, m.content, m.metadata::json, \
             m.created_at, m.token_count, m.seq_in_session"
        }
    }
}

/// Decodes a JSON array of [`message_json_columns`] arrays.
pub fn messages_from_json(page: &str) -> Result<Vec<Message>> {
    type Columns = (String, String, String, String, String, JsonObject, i64, i64, i64);
    let rows: Vec<Columns> =
        serde_json::from_str(page).map_err(|error| Error::Internal(format!("decoding messages: {error}")))?;
    Ok(rows
        .into_iter()
        .map(
            |(id, workspace_id, session_id, peer_id, content, metadata, created_at, token_count, seq_in_session)| {
                Message {
                    id,
                    workspace_id,
                    session_id,
                    peer_id,
                    content,
                    metadata,
                    created_at,
                    token_count,
                    seq_in_session,
                }
            },
        )
        .collect())
}

pub fn webhook(row: &AnyRow) -> Result<WebhookEndpoint> {
    Ok(WebhookEndpoint {
        id: get(row, "id")?,
        workspace_id: get(row, "workspace_name")?,
        url: get(row, "url")?,
        created_at: get(row, "created_at")?,
    })
}

pub fn session_peer_config(row: &AnyRow) -> Result<SessionPeerConfig> {
    Ok(SessionPeerConfig {
        observe_me: flag(row, "observe_me")?,
        observe_others: flag(row, "observe_others")?,
    })
}

pub fn count(row: &AnyRow) -> Result<i64> {
    get(row, "n")
}

pub const CONCLUSION_COLUMNS: &str = "d.public_id, d.workspace_name, d.observer, d.observed, d.session_name, d.level, \
     d.content, d.premises, d.source_ids, d.times_derived, d.metadata, d.created_at";

pub(crate) fn string_list(row: &AnyRow, column: &str) -> Result<Vec<String>> {
    let text: String = get(row, column)?;
    serde_json::from_str(&text)
        .map_err(|error| Error::Internal(format!("column {column} holds an invalid list: {error}")))
}

pub fn conclusion(row: &AnyRow) -> Result<Conclusion> {
    Ok(Conclusion {
        id: get(row, "public_id")?,
        workspace_id: get(row, "workspace_name")?,
        observer_id: get(row, "observer")?,
        observed_id: get(row, "observed")?,
        session_id: get(row, "session_name")?,
        level: get(row, "level")?,
        content: get(row, "content")?,
        premises: string_list(row, "premises")?,
        source_ids: string_list(row, "source_ids")?,
        times_derived: get(row, "times_derived")?,
        metadata: json(row, "metadata")?,
        created_at: get(row, "created_at")?,
    })
}

pub fn card(row: &AnyRow) -> Result<Vec<String>> {
    string_list(row, "card")
}
