//! The shapes of results, as Honcho's MCP server gives them (honcho-mcp.md §8).

use serde_json::{Value, json};

/// A message as Honcho's MCP server shows it.
pub(crate) fn message(value: &Value) -> Value {
    json!({
        "id": value["id"],
        "content": value["content"],
        "peer_id": value["peer_id"],
        "session_id": value["session_id"],
        "metadata": value["metadata"],
        "created_at": value["created_at"],
    })
}

/// Picks `fields` of `value`.
pub(crate) fn pick(value: &Value, fields: &[&str]) -> Value {
    Value::Object(
        fields
            .iter()
            .map(|field| ((*field).to_owned(), value[*field].clone()))
            .collect(),
    )
}

pub(crate) fn items(page: &Value) -> &[Value] {
    page["items"].as_array().map_or(&[], Vec::as_slice)
}

/// A page as Honcho's MCP server shows it: `{<key>: [...], total, page, pages}`.
pub(crate) fn page(value: &Value, key: &str, item: impl Fn(&Value) -> Value) -> Value {
    json!({
        key: items(value).iter().map(item).collect::<Vec<_>>(),
        "total": value["total"],
        "page": value["page"],
        "pages": value["pages"],
    })
}

pub(crate) fn ids(value: &Value) -> Value {
    pick(value, &["id"])
}

/// snake_case keys in camelCase, all the way down (configurations, which
/// Honcho's server shows as its TypeScript SDK holds them).
pub(crate) fn camel(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().map(|(key, value)| (camel_key(key), camel(value))).collect()),
        other => other.clone(),
    }
}

pub(crate) fn camel_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for character in key.chars() {
        if character == '_' {
            upper = true;
        } else if upper {
            out.extend(character.to_uppercase());
            upper = false;
        } else {
            out.push(character);
        }
    }
    out
}

pub(crate) fn text_or(value: &Value, otherwise: &str) -> String {
    match value.as_str() {
        Some(text) if !text.is_empty() => text.to_owned(),
        _ => otherwise.to_owned(),
    }
}

pub(crate) fn workspace_summary(value: &Value) -> Value {
    json!({
        "id": value["id"],
        "metadata": if value["metadata"].is_null() { json!({}) } else { value["metadata"].clone() },
        "created_at": value["created_at"],
    })
}
