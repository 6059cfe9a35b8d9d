//! Honcho v3 input limits, checked once at the edge of the domain.

use serde_json::{Map, Value};

use crate::{Error, Result};

/// Longest id of a workspace, peer or session.
pub const MAX_ID_LEN: usize = 512;
/// Longest message content, in characters.
pub const MAX_MESSAGE_CHARS: usize = 25_000;
/// Most messages (or conclusions) in one batch.
pub const MAX_BATCH: usize = 100;
/// Most top-level metadata keys.
pub const MAX_METADATA_KEYS: usize = 100;
/// Deepest metadata nesting.
pub const MAX_METADATA_DEPTH: usize = 5;
/// Largest page size.
pub const MAX_PAGE_SIZE: i32 = 100;
/// Default page size.
pub const DEFAULT_PAGE_SIZE: i32 = 50;
/// Largest file accepted by UploadFile.
pub const MAX_FILE_BYTES: usize = 5 * 1024 * 1024;
/// Most webhook endpoints per workspace.
pub const MAX_WEBHOOKS_PER_WORKSPACE: i64 = 10;
/// Most peers observing others in one session.
pub const MAX_SESSION_OBSERVERS: usize = 10;

/// Largest metadata or configuration object, serialised as JSON.
pub const MAX_METADATA_BYTES: usize = 64 * 1024;
/// Most peers in one request's session peer map.
pub const MAX_SESSION_PEERS: usize = 100;
/// Most ids in one list of a request (peer ids to remove, ...).
pub const MAX_ID_LIST: usize = 100;
/// Most entries of a peer card.
pub const MAX_PEER_CARD_ENTRIES: usize = 100;
/// Longest peer card entry, in characters.
pub const MAX_PEER_CARD_ENTRY_CHARS: usize = 2_000;

/// Longest conclusion content, in characters.
pub const MAX_CONCLUSION_CHARS: usize = 65_535;
/// Most o200k tokens in a conclusion (what one embedding call takes).
pub const MAX_CONCLUSION_TOKENS: i64 = 8_192;

/// Checks conclusion content: 1..65,535 characters and at most 8,192 tokens.
pub fn conclusion_content(field: &str, content: &str) -> Result<String> {
    let content = strip_nul(content);
    let chars = content.chars().count();
    if content.trim().is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if chars > MAX_CONCLUSION_CHARS {
        return Err(Error::invalid(
            field,
            format!("has {chars} characters, at most {MAX_CONCLUSION_CHARS} are allowed"),
        ));
    }
    let tokens = crate::tokens::count(&content);
    if tokens > MAX_CONCLUSION_TOKENS {
        return Err(Error::invalid(
            field,
            format!("has {tokens} tokens, at most {MAX_CONCLUSION_TOKENS} are allowed"),
        ));
    }
    Ok(content)
}

/// Checks a resource id against `^[a-zA-Z0-9_-]+$` and 1..512 chars.
pub fn resource_id(field: &str, id: &str) -> Result<String> {
    if id.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if id.len() > MAX_ID_LEN {
        return Err(Error::invalid(
            field,
            format!("must be at most {MAX_ID_LEN} characters"),
        ));
    }
    if !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(Error::invalid(field, "must match ^[a-zA-Z0-9_-]+$"));
    }
    Ok(id.to_owned())
}

/// Checks a scope id: a resource id short enough for its peer name
/// (`scope.<id>`) to be one too, so at most 506 characters.
pub fn scope_id(field: &str, id: &str) -> Result<String> {
    let limit = MAX_ID_LEN - crate::model::SCOPE_PEER_PREFIX.len();
    if id.len() > limit {
        return Err(Error::invalid(field, format!("must be at most {limit} characters")));
    }
    resource_id(field, id)
}

/// Checks a reference to an existing resource: non-empty, NUL-free.
pub fn reference_id(field: &str, id: &str) -> Result<String> {
    if id.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    Ok(strip_nul(id))
}

/// Returns `text` without NUL bytes, which Postgres text cannot hold.
pub fn strip_nul(text: &str) -> String {
    if text.contains('\0') {
        text.replace('\0', "")
    } else {
        text.to_owned()
    }
}

/// Checks message content: at most 25,000 characters after NUL stripping.
pub fn message_content(field: &str, content: &str) -> Result<String> {
    let content = strip_nul(content);
    let chars = content.chars().count();
    if chars > MAX_MESSAGE_CHARS {
        return Err(Error::invalid(
            field,
            format!("has {chars} characters, at most {MAX_MESSAGE_CHARS} are allowed"),
        ));
    }
    Ok(content)
}

/// Checks metadata: at most 100 top-level keys, nesting depth ≤ 5, 64 KiB
/// as JSON; strips NULs.
pub fn metadata(field: &str, object: Map<String, Value>) -> Result<Map<String, Value>> {
    if object.len() > MAX_METADATA_KEYS {
        return Err(Error::invalid(
            field,
            format!("has {} keys, at most {MAX_METADATA_KEYS} are allowed", object.len()),
        ));
    }
    let object = Value::Object(object);
    let bytes = serde_json::to_vec(&object).map_or(usize::MAX, |json| json.len());
    if bytes > MAX_METADATA_BYTES {
        return Err(Error::invalid(
            field,
            format!("is {bytes} bytes as JSON, at most {MAX_METADATA_BYTES} are allowed"),
        ));
    }
    let depth = depth_of(&object);
    if depth > MAX_METADATA_DEPTH {
        return Err(Error::invalid(
            field,
            format!("nests {depth} levels deep, at most {MAX_METADATA_DEPTH} are allowed"),
        ));
    }
    match strip_nul_value(object) {
        Value::Object(object) => Ok(object),
        _ => unreachable!("an object stays an object"),
    }
}

/// Returns how deeply objects and lists nest in `value` (a flat object is 1).
fn depth_of(value: &Value) -> usize {
    match value {
        Value::Object(object) => 1 + object.values().map(depth_of).max().unwrap_or(0),
        Value::Array(items) => 1 + items.iter().map(depth_of).max().unwrap_or(0),
        _ => 0,
    }
}

fn strip_nul_value(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(strip_nul(&s)),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_nul_value).collect()),
        Value::Object(object) => Value::Object(
            object
                .into_iter()
                .map(|(k, v)| (strip_nul(&k), strip_nul_value(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Checks the size of a batch of messages or conclusions.
pub fn batch_len(field: &str, len: usize) -> Result<()> {
    if len == 0 {
        return Err(Error::invalid(field, "must hold at least one item"));
    }
    if len > MAX_BATCH {
        return Err(Error::invalid(
            field,
            format!("holds {len} items, at most {MAX_BATCH} are allowed"),
        ));
    }
    Ok(())
}

/// Checks the length of a list or map against its bound.
pub fn list_len(field: &str, len: usize, max: usize) -> Result<()> {
    if len > max {
        return Err(Error::invalid(
            field,
            format!("holds {len} items, at most {max} are allowed"),
        ));
    }
    Ok(())
}

/// Checks a list of references to existing resources, at most `max` of them.
pub fn id_list(field: &str, ids: &[String], max: usize) -> Result<Vec<String>> {
    list_len(field, ids.len(), max)?;
    ids.iter()
        .enumerate()
        .map(|(index, id)| reference_id(&format!("{field}[{index}]"), id))
        .collect()
}

/// Checks a peer card: at most 100 entries of at most 2,000 characters; strips NULs.
pub fn peer_card(field: &str, entries: &[String]) -> Result<Vec<String>> {
    list_len(field, entries.len(), MAX_PEER_CARD_ENTRIES)?;
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let entry = strip_nul(entry);
            let chars = entry.chars().count();
            if chars > MAX_PEER_CARD_ENTRY_CHARS {
                return Err(Error::invalid(
                    format!("{field}[{index}]"),
                    format!("has {chars} characters, at most {MAX_PEER_CARD_ENTRY_CHARS} are allowed"),
                ));
            }
            Ok(entry)
        })
        .collect()
}

/// A webhook endpoint's URL, checked, with the host and port it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl {
    pub url: String,
    pub host: String,
    pub port: u16,
}

/// Checks a webhook URL: http(s), naming a host; unless `allow_private`, the
/// host may not be a private, loopback, link-local or otherwise non-public IP
/// literal (what names resolve to is checked by the caller, which can look
/// them up).
pub fn webhook_url(field: &str, url: &str, allow_private: bool) -> Result<WebhookUrl> {
    let (rest, default_port) = match url.strip_prefix("https://") {
        Some(rest) => (rest, 443),
        None => (
            url.strip_prefix("http://")
                .ok_or_else(|| Error::invalid(field, "must be an http or https URL"))?,
            80,
        ),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').unwrap_or((bracketed, ""));
        (host, after.strip_prefix(':'))
    } else {
        match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err(Error::invalid(field, "must name a host"));
    }
    let port = match port {
        None | Some("") => default_port,
        Some(port) => port
            .parse()
            .map_err(|_| Error::invalid(field, format!("has an invalid port `{port}`")))?,
    };
    if !allow_private
        && let Ok(ip) = host.parse::<std::net::IpAddr>()
        && !is_public_ip(&ip)
    {
        return Err(Error::invalid(
            field,
            "must not point at a private, loopback, link-local, multicast or unspecified address",
        ));
    }
    Ok(WebhookUrl {
        url: url.to_owned(),
        host: host.to_owned(),
        port,
    })
}

/// Returns whether an address is reachable on the public internet: not
/// private, loopback, link-local (cloud metadata), shared, multicast,
/// reserved or unspecified.
pub fn is_public_ip(ip: &std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.octets()[0] == 0
                || v4.octets()[0] >= 240
                || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64))
        }
        std::net::IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| !is_public_ip(&std::net::IpAddr::V4(v4))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_follow_the_honcho_pattern() {
        assert!(resource_id("id", "alice_1-B").is_ok());
        assert!(resource_id("id", "").is_err());
        assert!(resource_id("id", "a b").is_err());
        assert!(resource_id("id", "a.b").is_err());
        assert!(resource_id("id", &"a".repeat(512)).is_ok());
        assert!(resource_id("id", &"a".repeat(513)).is_err());
    }

    #[test]
    fn content_is_limited_in_characters_not_bytes() {
        assert!(message_content("c", &"é".repeat(MAX_MESSAGE_CHARS)).is_ok());
        let error = message_content("messages[0].content", &"x".repeat(MAX_MESSAGE_CHARS + 1)).unwrap_err();
        assert!(matches!(error, Error::InvalidArgument { field, .. } if field == "messages[0].content"));
        assert_eq!(message_content("c", "a\0b").unwrap(), "ab");
    }

    #[test]
    fn metadata_limits_keys_and_depth_and_strips_nul() {
        let deep = json!({"a": {"b": {"c": {"d": {"e": 1}}}}});
        assert!(metadata("m", deep.as_object().unwrap().clone()).is_ok());
        let too_deep = json!({"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}});
        assert!(metadata("m", too_deep.as_object().unwrap().clone()).is_err());
        let many: Map<String, Value> = (0..101).map(|i| (format!("k{i}"), json!(i))).collect();
        assert!(metadata("m", many).is_err());
        let nul = json!({"k\0": "v\0"});
        assert_eq!(
            Value::Object(metadata("m", nul.as_object().unwrap().clone()).unwrap()),
            json!({"k": "v"})
        );
    }

    #[test]
    fn metadata_over_its_size_is_refused_naming_the_limit() {
        let fits: Map<String, Value> = Map::from_iter([("k".to_owned(), json!("x".repeat(MAX_METADATA_BYTES - 10)))]);
        assert!(metadata("m", fits).is_ok());
        let over: Map<String, Value> = Map::from_iter([("k".to_owned(), json!("x".repeat(MAX_METADATA_BYTES)))]);
        let error = metadata("messages[0].metadata", over).unwrap_err();
        assert!(
            matches!(&error, Error::InvalidArgument { field, reason } if field == "messages[0].metadata" && reason.contains("65536")),
            "{error}"
        );
    }

    #[test]
    fn peer_cards_and_id_lists_are_bounded() {
        let card: Vec<String> = (0..MAX_PEER_CARD_ENTRIES).map(|i| format!("fact {i}")).collect();
        assert_eq!(peer_card("peer_card", &card).unwrap().len(), MAX_PEER_CARD_ENTRIES);
        let mut over = card.clone();
        over.push("one more".into());
        let error = peer_card("peer_card", &over).unwrap_err();
        assert!(
            matches!(&error, Error::InvalidArgument { field, reason } if field == "peer_card" && reason.contains("at most 100"))
        );
        let long = vec!["x".repeat(MAX_PEER_CARD_ENTRY_CHARS + 1)];
        let error = peer_card("peer_card", &long).unwrap_err();
        assert!(matches!(&error, Error::InvalidArgument { field, .. } if field == "peer_card[0]"));
        let ids: Vec<String> = (0..=MAX_ID_LIST).map(|i| format!("p{i}")).collect();
        let error = id_list("peer_ids", &ids, MAX_ID_LIST).unwrap_err();
        assert!(
            matches!(&error, Error::InvalidArgument { field, reason } if field == "peer_ids" && reason.contains("at most 100"))
        );
        assert!(id_list("peer_ids", &ids[..MAX_ID_LIST], MAX_ID_LIST).is_ok());
    }

    #[test]
    fn webhook_urls_must_be_public_http() {
        let checked = webhook_url("url", "https://example.com/hook", false).unwrap();
        assert_eq!((checked.host.as_str(), checked.port), ("example.com", 443));
        let checked = webhook_url("url", "http://user@example.com:8080/x", false).unwrap();
        assert_eq!((checked.host.as_str(), checked.port), ("example.com", 8080));
        assert!(webhook_url("url", "ftp://example.com", false).is_err());
        assert!(webhook_url("url", "http://127.0.0.1/x", false).is_err());
        assert!(webhook_url("url", "http://10.1.2.3", false).is_err());
        assert!(webhook_url("url", "http://[::1]:80/", false).is_err());
        assert!(webhook_url("url", "http://169.254.169.254/latest/meta-data", false).is_err());
        assert!(webhook_url("url", "http://[::ffff:10.0.0.1]/", false).is_err());
        assert!(webhook_url("url", "http://8.8.8.8/", false).is_ok());
        assert!(
            webhook_url("url", "http://127.0.0.1:9000/x", true).is_ok(),
            "when allowed"
        );
        assert!(webhook_url("url", "http://example.com:http/", false).is_err());
    }
}
