//! Inserting conclusions whose sources are live (checked, and on Postgres
//! locked against a concurrent erasure).

use crate::db::to_json;
use crate::db::{SqlStore, execute};
use crate::rows;
use crate::sql::Dialect;
use crate::sql::Sql;
use crate::tx::entities::{load_peer, load_session};
use roncho_core::Error;
use roncho_core::Result;
use roncho_core::model::{Conclusion, NewConclusion};
use roncho_core::store::Memory;
use sqlx::AnyConnection;
use std::collections::BTreeSet;

/// Rows removed in one statement (and one transaction of a large erasure).
pub const CHUNK: i64 = 500;

impl SqlStore {
    /// The live conclusions of `ids`, in the order of `ids`.
    pub(crate) async fn replay_conclusions(&self, workspace_id: &str, ids: &[String]) -> Result<Vec<Conclusion>> {
        let mut found = self.conclusions_by_ids(workspace_id, ids).await?;
        found.sort_by_key(|conclusion| ids.iter().position(|id| *id == conclusion.id));
        Ok(found)
    }
}

pub(crate) fn to_json_list(items: &[String]) -> String {
    serde_json::Value::from(items.to_vec()).to_string()
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
    let row = crate::db::fetch_optional(conn, &sql)
        .await?
        .ok_or_else(|| Error::Internal("the inserted conclusion returned no id".into()))?;
    crate::tx::conclusions::record_sources(conn, workspace_id, rows::get(&row, "id")?, &conclusion.source_ids).await?;
    Ok(Some(conclusion))
}

/// Soft-deletes one live conclusion and tombstones its vector; returns
/// whether there was one.
pub(crate) async fn soft_delete_conclusion(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
    now: i64,
) -> Result<bool> {
    crate::tx::vectors::tombstone_documents(conn, |sql| {
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

/// `FOR SHARE` on Postgres (rows read stay until the transaction ends);
/// SQLite has one writer and needs no row locks.
pub(crate) fn lock_shared(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Postgres => " FOR SHARE",
        Dialect::Sqlite => "",
    }
}

pub(crate) fn lock_update(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Postgres => " FOR UPDATE",
        Dialect::Sqlite => "",
    }
}

/// The sources of `conclusions` that are rows of the workspace (messages
/// or conclusions), locked (shared) so that an erasure cannot remove them
/// until the caller's transaction ends.
pub(crate) async fn live_sources(
    conn: &mut AnyConnection,
    dialect: Dialect,
    workspace_id: &str,
    conclusions: &[NewConclusion],
) -> Result<BTreeSet<String>> {
    existing(
        conn,
        dialect,
        workspace_id,
        &["messages", "documents"],
        &sources_of(conclusions),
    )
    .await
}

/// The first source of `conclusions` that is not a message of the
/// workspace (those that are locked as [`live_sources`] locks them), if any.
pub(crate) async fn missing_message(
    conn: &mut AnyConnection,
    dialect: Dialect,
    workspace_id: &str,
    conclusions: &[NewConclusion],
) -> Result<Option<String>> {
    let wanted = sources_of(conclusions);
    let found = existing(conn, dialect, workspace_id, &["messages"], &wanted).await?;
    Ok(wanted.into_iter().find(|id| !found.contains(id)))
}

/// Every source `conclusions` name, once each.
fn sources_of(conclusions: &[NewConclusion]) -> Vec<String> {
    let wanted: BTreeSet<&str> = conclusions
        .iter()
        .flat_map(|conclusion| conclusion.source_ids.iter().map(String::as_str))
        .collect();
    wanted.into_iter().map(str::to_owned).collect()
}

/// Which of `wanted` are public ids of rows of `tables` in the workspace,
/// locked (shared) until the caller's transaction ends.
async fn existing(
    conn: &mut AnyConnection,
    dialect: Dialect,
    workspace_id: &str,
    tables: &[&str],
    wanted: &[String],
) -> Result<BTreeSet<String>> {
    let mut found = BTreeSet::new();
    for chunk in wanted.chunks(usize::try_from(CHUNK).unwrap_or(500)) {
        for table in tables {
            let mut sql = Sql::new(&format!("SELECT public_id FROM {table} WHERE workspace_name = "));
            sql.bind(workspace_id)
                .push(" AND public_id IN ")
                .push_list(chunk)
                .push(lock_shared(dialect));
            for row in crate::db::fetch_all(conn, &sql).await? {
                found.insert(rows::get::<String>(&row, "public_id")?);
            }
        }
    }
    Ok(found)
}

/// Records which rows a conclusion came from.
pub(crate) async fn record_sources(
    conn: &mut AnyConnection,
    workspace_id: &str,
    document_id: i64,
    source_ids: &[String],
) -> Result<()> {
    if source_ids.is_empty() {
        return Ok(());
    }
    let mut sql = Sql::new("INSERT INTO conclusion_sources (workspace_name, source_id, document_id) VALUES ");
    for (index, source) in source_ids.iter().enumerate() {
        if index > 0 {
            sql.push(", ");
        }
        sql.push("(")
            .bind(workspace_id)
            .push(", ")
            .bind(source.as_str())
            .push(", ")
            .bind(document_id)
            .push(")");
    }
    sql.push(" ON CONFLICT DO NOTHING");
    execute(conn, &sql).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn lists_serialise_as_json_arrays() {
        assert_eq!(super::to_json_list(&["a\"b".to_owned()]), r#"["a\"b"]"#);
    }
}
