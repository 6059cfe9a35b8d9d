//! `roncho import --from-honcho`: reads a Honcho v3 database into roncho.
//!
//! Everything is written through the [`Store`] port, so an import lands the
//! same on SQLite and on Postgres and can run beside a serving roncho.
//! Honcho's ids are kept: workspace, peer and session names, message and
//! conclusion ids, so a client's stored references still resolve. Every step
//! is idempotent (get-or-create, or skip what the store already holds), so an
//! interrupted import is resumed by running it again, and a finished one run
//! again adds nothing.
//!
//! What is read (Honcho v3's tables): `workspaces`, `webhook_endpoints`,
//! `peers` (peer cards from their `internal_metadata`; scopes, the peers
//! whose `internal_metadata.kind` is `scope`), `sessions` (active ones;
//! summaries from their `internal_metadata`), `session_peers` (a scope's
//! sessions among them), `messages`, and live `documents` (conclusions, a
//! scope's memory among them). Vectors are not copied:
//! roncho's reconciler embeds the imported rows with roncho's own embedder,
//! so rows and queries share one model.

use std::collections::BTreeSet;

use anyhow::{Context, Result};
use roncho_core::model::{
    ImportedConclusion, ImportedMessage, JsonObject, NewConclusion, NewMessage, SessionPeerConfig, SummaryKind,
};
use roncho_core::store::{Import, Memory, Messages, Scopes, Webhooks, Workspaces};
use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};

roncho_core::store_view! {
    /// The store as an import writes it: the resources, messages and
    /// memory carried over, ids and times kept.
    pub trait ImportStore: Workspaces, Messages, Memory, Scopes, Webhooks, Import
}

/// Messages read and written per batch.
const MESSAGE_BATCH: i64 = 500;
/// Conclusions read and written per batch.
const CONCLUSION_BATCH: i64 = 500;

/// What to import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Only these workspaces (all when empty).
    pub workspaces: Vec<String>,
    /// Queue derivation and summaries for the imported messages, as if they
    /// had just been written (costs model calls; off by default, since
    /// Honcho's conclusions and summaries are imported).
    pub derive: bool,
}

pub use roncho_core::export::{Counts, Tally};

/// Connects to a Honcho database (read only: the import runs SELECTs).
pub async fn connect(url: &str) -> Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(2)
        .connect(url)
        .await
        .with_context(|| format!("cannot connect to the Honcho database at {}", redact(url)))
}

/// The URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://…@{}", &url[..scheme], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

/// Imports the Honcho database behind `source` into `store`; progress goes
/// to the log, counts are returned.
pub async fn import_honcho(source: &PgPool, store: &dyn ImportStore, options: &ImportOptions) -> Result<Counts> {
    let mut counts = Counts::default();
    let rows = sqlx::query(
        "SELECT name, COALESCE(metadata::text, '{}') AS metadata, COALESCE(configuration::text, '{}') AS configuration \
         FROM workspaces ORDER BY created_at, name",
    )
    .fetch_all(source)
    .await
    .context("reading Honcho's workspaces (is this a Honcho v3 database?)")?;
    for row in rows {
        let name: String = row.try_get("name")?;
        if !options.workspaces.is_empty() && !options.workspaces.contains(&name) {
            continue;
        }
        import_workspace(source, store, options, &row, &mut counts)
            .await
            .with_context(|| format!("importing workspace `{name}`"))?;
    }
    Ok(counts)
}

async fn import_workspace(
    source: &PgPool,
    store: &dyn ImportStore,
    options: &ImportOptions,
    row: &PgRow,
    counts: &mut Counts,
) -> Result<()> {
    let workspace: String = row.try_get("name")?;
    let (_, created) = store
        .get_or_create_workspace(&workspace, object(row, "metadata")?, object(row, "configuration")?)
        .await?;
    counts.workspaces.add(created);
    tracing::info!(%workspace, created, "importing workspace");

    for row in sqlx::query("SELECT url FROM webhook_endpoints WHERE workspace_name = $1 ORDER BY created_at, id")
        .bind(&workspace)
        .fetch_all(source)
        .await?
    {
        let (_, created) = store
            .create_webhook(&workspace, &row.try_get::<String, _>("url")?)
            .await?;
        counts.webhooks.add(created);
    }

    let peers = import_peers(source, store, &workspace, counts).await?;
    let sessions = import_sessions(source, store, options, &workspace, &peers, counts).await?;
    import_conclusions(source, store, &workspace, &peers, &sessions, counts).await
}

/// Imports a workspace's peers and their cards; returns the peers imported.
async fn import_peers(
    source: &PgPool,
    store: &dyn ImportStore,
    workspace: &str,
    counts: &mut Counts,
) -> Result<BTreeSet<String>> {
    let rows = sqlx::query(
        "SELECT name, COALESCE(metadata::text, '{}') AS metadata, COALESCE(configuration::text, '{}') AS configuration, \
         COALESCE(internal_metadata::text, '{}') AS internal_metadata FROM peers WHERE workspace_name = $1 \
         ORDER BY created_at, name",
    )
    .bind(workspace)
    .fetch_all(source)
    .await?;
    let mut peers = BTreeSet::new();
    let mut cards = Vec::new();
    for row in &rows {
        let name: String = row.try_get("name")?;
        let internal = object(row, "internal_metadata")?;
        if is_scope(&internal) {
            // Its sessions and memory follow as a peer's do: its memberships
            // and its conclusions are imported with the others.
            let Some(scope) = roncho_core::model::scope_of_peer(&name) else {
                counts.scopes.skipped += 1;
                counts
                    .notes
                    .insert("scopes whose peer is not named scope.<id> are skipped".into());
                continue;
            };
            let (_, created) = store
                .get_or_create_scope(workspace, scope, Some(object(row, "metadata")?))
                .await?;
            counts.scopes.add(created);
            peers.insert(name);
            continue;
        }
        let (_, created) = store
            .get_or_create_peer(
                workspace,
                &name,
                Some(object(row, "metadata")?),
                Some(object(row, "configuration")?),
            )
            .await?;
        counts.peers.add(created);
        for (key, value) in &internal {
            let observed = if key == "peer_card" {
                name.clone()
            } else if let Some(observed) = key.strip_suffix("_peer_card") {
                observed.to_owned()
            } else {
                continue;
            };
            let card: Vec<String> = value
                .as_array()
                .map(|entries| {
                    entries
                        .iter()
                        .filter_map(|entry| entry.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            cards.push((name.clone(), observed, card));
        }
        peers.insert(name);
    }
    for (observer, observed, card) in cards {
        if !peers.contains(&observed) {
            counts.peer_cards.skipped += 1;
            counts
                .notes
                .insert("peer cards about peers that are not imported are skipped".into());
            continue;
        }
        let present = store.get_peer_card(workspace, &observer, &observed).await?;
        if present.as_ref() == Some(&card) {
            counts.peer_cards.present += 1;
        } else {
            store.set_peer_card(workspace, &observer, &observed, card).await?;
            counts.peer_cards.new += 1;
        }
    }
    Ok(peers)
}

/// Imports a workspace's active sessions with their members, messages and
/// summaries; returns the sessions imported.
async fn import_sessions(
    source: &PgPool,
    store: &dyn ImportStore,
    options: &ImportOptions,
    workspace: &str,
    peers: &BTreeSet<String>,
    counts: &mut Counts,
) -> Result<BTreeSet<String>> {
    let rows = sqlx::query(
        "SELECT name, is_active, COALESCE(metadata::text, '{}') AS metadata, \
         COALESCE(configuration::text, '{}') AS configuration, \
         COALESCE(internal_metadata::text, '{}') AS internal_metadata FROM sessions WHERE workspace_name = $1 \
         ORDER BY created_at, name",
    )
    .bind(workspace)
    .fetch_all(source)
    .await?;
    let mut sessions = BTreeSet::new();
    for row in &rows {
        let session: String = row.try_get("name")?;
        if !row.try_get::<bool, _>("is_active")? {
            counts.sessions.skipped += 1;
            counts
                .notes
                .insert("inactive sessions (deleted in Honcho, awaiting its cleanup) are not imported".into());
            continue;
        }
        let mut members = Vec::new();
        let mut left = Vec::new();
        for member in sqlx::query(
            "SELECT peer_name, COALESCE(configuration::text, '{}') AS configuration, left_at IS NOT NULL AS has_left \
             FROM session_peers WHERE workspace_name = $1 AND session_name = $2 ORDER BY joined_at, peer_name",
        )
        .bind(workspace)
        .bind(&session)
        .fetch_all(source)
        .await?
        {
            let peer: String = member.try_get("peer_name")?;
            if !peers.contains(&peer) {
                continue;
            }
            let configuration = object(&member, "configuration")?;
            let flag = |key: &str| configuration.get(key).and_then(Value::as_bool);
            if member.try_get::<bool, _>("has_left")? {
                left.push(peer.clone());
            }
            let config = SessionPeerConfig {
                observe_me: flag("observe_me"),
                observe_others: flag("observe_others"),
            };
            members.push((peer, config));
        }
        let (_, created) = store
            .get_or_create_session(
                workspace,
                &session,
                Some(object(row, "metadata")?),
                Some(object(row, "configuration")?),
                members,
            )
            .await?;
        counts.sessions.add(created);
        import_messages(source, store, options, workspace, &session, peers, counts).await?;
        if !left.is_empty() {
            store.remove_session_peers(workspace, &session, &left).await?;
        }
        import_summaries(
            source,
            store,
            workspace,
            &session,
            &object(row, "internal_metadata")?,
            counts,
        )
        .await?;
        sessions.insert(session);
    }
    Ok(sessions)
}

async fn import_messages(
    source: &PgPool,
    store: &dyn ImportStore,
    options: &ImportOptions,
    workspace: &str,
    session: &str,
    peers: &BTreeSet<String>,
    counts: &mut Counts,
) -> Result<()> {
    let mut after = i64::MIN;
    loop {
        let rows = sqlx::query(
            "SELECT id, public_id, peer_name, content, COALESCE(metadata::text, '{}') AS metadata, \
             (EXTRACT(EPOCH FROM created_at) * 1000000)::bigint AS created_us \
             FROM messages WHERE workspace_name = $1 AND session_name = $2 AND id > $3 ORDER BY id LIMIT $4",
        )
        .bind(workspace)
        .bind(session)
        .bind(after)
        .bind(MESSAGE_BATCH)
        .fetch_all(source)
        .await?;
        let Some(last) = rows.last() else {
            return Ok(());
        };
        after = last.try_get("id")?;
        let mut batch = Vec::with_capacity(rows.len());
        for row in &rows {
            let peer_id: String = row.try_get("peer_name")?;
            if !peers.contains(&peer_id) {
                counts.messages.skipped += 1;
                counts
                    .notes
                    .insert("messages by peers that are not imported are skipped".into());
                continue;
            }
            let content: String = row.try_get("content")?;
            batch.push(ImportedMessage {
                id: row.try_get("public_id")?,
                message: NewMessage {
                    peer_id,
                    token_count: roncho_core::tokens::count(&content),
                    content,
                    metadata: object(row, "metadata")?,
                    configuration: JsonObject::new(),
                    created_at: Some(row.try_get("created_us")?),
                },
            });
        }
        let read = batch.len() as u64;
        let new = store.import_messages(workspace, session, batch, options.derive).await?;
        counts.messages.new += new;
        counts.messages.present += read - new;
        tracing::info!(%workspace, %session, through = after, new, "imported messages");
    }
}

/// A session's summaries, kept by Honcho in `internal_metadata.summaries`.
async fn import_summaries(
    source: &PgPool,
    store: &dyn ImportStore,
    workspace: &str,
    session: &str,
    internal: &JsonObject,
    counts: &mut Counts,
) -> Result<()> {
    let Some(summaries) = internal.get("summaries").and_then(Value::as_object) else {
        return Ok(());
    };
    let present = store.session_summaries(workspace, session).await?;
    for kind in [SummaryKind::Short, SummaryKind::Long] {
        let Some(summary) = summaries.get(kind.name()).and_then(Value::as_object) else {
            continue;
        };
        let content = summary.get("content").and_then(Value::as_str).unwrap_or_default();
        let message_id = match summary.get("message_public_id").and_then(Value::as_str) {
            Some(id) => Some(id.to_owned()),
            // Older summaries name the message by its row id only.
            None => match summary.get("message_id").and_then(Value::as_i64) {
                Some(row_id) => sqlx::query("SELECT public_id FROM messages WHERE id = $1")
                    .bind(row_id)
                    .fetch_optional(source)
                    .await?
                    .map(|row| row.try_get::<String, _>("public_id"))
                    .transpose()?,
                None => None,
            },
        };
        let Some(message_id) = message_id else {
            counts.summaries.skipped += 1;
            counts.notes.insert("summaries that name no message are skipped".into());
            continue;
        };
        if present
            .iter()
            .any(|held| held.kind == kind && held.content == content && held.message_id == message_id)
        {
            counts.summaries.present += 1;
            continue;
        }
        let token_count = summary
            .get("token_count")
            .and_then(Value::as_i64)
            .unwrap_or_else(|| roncho_core::tokens::count(content));
        store
            .set_session_summary(workspace, session, kind, content, &message_id, token_count, None)
            .await?;
        counts.summaries.new += 1;
    }
    Ok(())
}

/// A workspace's live conclusions (Honcho's documents), oldest first so that
/// a conclusion's premises are there before it.
async fn import_conclusions(
    source: &PgPool,
    store: &dyn ImportStore,
    workspace: &str,
    peers: &BTreeSet<String>,
    sessions: &BTreeSet<String>,
    counts: &mut Counts,
) -> Result<()> {
    let mut offset = 0;
    loop {
        let rows = sqlx::query(
            "SELECT id, observer, observed, session_name, level, content, times_derived, \
             COALESCE(internal_metadata::text, '{}') AS internal_metadata, \
             COALESCE(source_ids::text, '[]') AS source_ids, \
             (EXTRACT(EPOCH FROM created_at) * 1000000)::bigint AS created_us \
             FROM documents WHERE workspace_name = $1 AND deleted_at IS NULL \
             ORDER BY created_at, id LIMIT $2 OFFSET $3",
        )
        .bind(workspace)
        .bind(CONCLUSION_BATCH)
        .bind(offset)
        .fetch_all(source)
        .await?;
        if rows.is_empty() {
            return Ok(());
        }
        offset += rows.len() as i64;
        let mut batch = Vec::with_capacity(rows.len());
        for row in &rows {
            let observer: String = row.try_get("observer")?;
            let observed: String = row.try_get("observed")?;
            let session_id: Option<String> = row.try_get("session_name")?;
            if !peers.contains(&observer) || !peers.contains(&observed) {
                counts.conclusions.skipped += 1;
                counts
                    .notes
                    .insert("conclusions by or about peers that are not imported are skipped".into());
                continue;
            }
            if session_id.as_ref().is_some_and(|session| !sessions.contains(session)) {
                counts.conclusions.skipped += 1;
                counts
                    .notes
                    .insert("conclusions from sessions that are not imported are skipped".into());
                continue;
            }
            let mut metadata = object(row, "internal_metadata")?;
            let premises = strings(metadata.remove("premises"));
            let source_ids = strings(Some(serde_json::from_str(&row.try_get::<String, _>("source_ids")?)?));
            batch.push(ImportedConclusion {
                id: row.try_get("id")?,
                created_at: row.try_get("created_us")?,
                times_derived: row.try_get::<Option<i32>, _>("times_derived")?.map_or(1, i64::from),
                conclusion: NewConclusion {
                    observer_id: observer,
                    observed_id: observed,
                    session_id,
                    level: row
                        .try_get::<Option<String>, _>("level")?
                        .unwrap_or_else(|| "explicit".into()),
                    content: row.try_get("content")?,
                    premises,
                    source_ids,
                    metadata,
                },
            });
        }
        let read = batch.len() as u64;
        let new = store.import_conclusions(workspace, batch).await?;
        counts.conclusions.new += new;
        counts.conclusions.present += read - new;
    }
}

/// Whether a peer's `internal_metadata` marks it as a scope.
fn is_scope(internal: &JsonObject) -> bool {
    internal.get("kind").and_then(Value::as_str) == Some("scope")
}

/// A JSON object column read as text (`{}` when it holds something else).
fn object(row: &PgRow, column: &str) -> Result<JsonObject> {
    let text: String = row.try_get(column)?;
    Ok(
        match serde_json::from_str(&text).with_context(|| format!("column {column} is not JSON"))? {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        },
    )
}

/// The strings of a JSON list (ids may be numbers in older rows).
fn strings(value: Option<Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .into_iter()
            .filter_map(|item| match item {
                Value::String(text) => Some(text),
                Value::Number(number) => Some(number.to_string()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_url_is_shown_without_its_password() {
        assert_eq!(
            redact("postgres://honcho:s3cret@db:5432/honcho"),
            "postgres://…@db:5432/honcho"
        );
        assert_eq!(redact("postgres://db/honcho"), "postgres://db/honcho");
    }

    #[test]
    fn scope_peers_are_recognised_by_their_internal_kind() {
        let scope: JsonObject = serde_json::from_str(r#"{"kind": "scope"}"#).unwrap();
        assert!(is_scope(&scope));
        assert!(!is_scope(&JsonObject::new()));
    }
}
