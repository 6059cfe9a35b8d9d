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
pub use crate::model::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE};
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

/// Most o200k tokens of one `custom_instructions` (Honcho's
/// `DERIVER_MAX_CUSTOM_INSTRUCTIONS_TOKENS`).
pub const MAX_CUSTOM_INSTRUCTIONS_TOKENS: i64 = 2_000;

/// Checks a configuration's `custom_instructions`, at its top and in each
/// section: strings of at most 2,000 tokens (they go into prompts).
pub fn custom_instructions(field: &str, configuration: &Map<String, Value>) -> Result<()> {
    let key = crate::derivation::CUSTOM_INSTRUCTIONS;
    let top = configuration.get(key).map(|value| (format!("{field}.{key}"), value));
    let sections = configuration.iter().filter_map(|(section, value)| {
        let value = value.as_object()?.get(key)?;
        Some((format!("{field}.{section}.{key}"), value))
    });
    for (name, value) in top.into_iter().chain(sections) {
        match value {
            Value::Null => {}
            Value::String(text) => {
                let tokens = crate::tokens::count(text);
                if tokens > MAX_CUSTOM_INSTRUCTIONS_TOKENS {
                    return Err(Error::invalid(
                        name,
                        format!("has {tokens} tokens, at most {MAX_CUSTOM_INSTRUCTIONS_TOKENS} are allowed"),
                    ));
                }
            }
            _ => return Err(Error::invalid(name, "must be a string")),
        }
    }
    Ok(())
}

/// The configuration switches roncho reads (a peer's `observe_me`, and
/// `enabled` of `reasoning` and `summary`): each `null` or a boolean in any
/// form [`lax_bool`](crate::derivation::lax_bool) reads, stored as a JSON boolean (as Honcho's models
/// store it), else `INVALID_ARGUMENT` naming it.
pub fn configuration_switches(field: &str, configuration: &mut Map<String, Value>) -> Result<()> {
    let check = |name: String, value: &mut Value| match value {
        Value::Null => Ok(()),
        _ => match crate::derivation::lax_bool(value) {
            Some(flag) => {
                *value = Value::Bool(flag);
                Ok(())
            }
            None => Err(Error::invalid(name, format!("must be a boolean, not {value}"))),
        },
    };
    if let Some(value) = configuration.get_mut("observe_me") {
        check(format!("{field}.observe_me"), value)?;
    }
    for section in ["reasoning", "summary"] {
        match configuration.get_mut(section) {
            None | Some(Value::Null) => {}
            Some(Value::Object(settings)) => {
                if let Some(value) = settings.get_mut("enabled") {
                    check(format!("{field}.{section}.enabled"), value)?;
                }
            }
            // `"reasoning": "off"` would be stored and do nothing.
            Some(other) => {
                return Err(Error::invalid(
                    format!("{field}.{section}"),
                    format!("must be an object such as {{\"enabled\": false}}, not {other}"),
                ));
            }
        }
    }
    Ok(())
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

/// A webhook endpoint's URL, parsed once by the WHATWG rules the HTTP
/// client uses (`url`, which reqwest re-exports): its host is the host the
/// client will connect to, whatever the spelling (a trailing dot, full-width
/// digits, percent-encoding, `0x7f.1`, a backslash before `@`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl {
    /// The URL as parsed (normalised); deliver to this, not the text given.
    pub url: url::Url,
    pub host: WebhookHost,
    pub port: u16,
}

/// The host a webhook URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookHost {
    /// An IP literal: no resolver sees it, so it is checked here.
    Ip(std::net::IpAddr),
    /// A name (lowercase, IDNA-mapped, without a trailing dot), resolved and
    /// checked at connection time.
    Name(String),
}

impl std::fmt::Display for WebhookHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WebhookHost::Ip(ip) => write!(f, "{ip}"),
            WebhookHost::Name(name) => f.write_str(name),
        }
    }
}

/// Why a webhook URL pointing inside is refused.
pub const PRIVATE_WEBHOOK: &str = "must not point at a private, loopback, link-local, multicast or \
     otherwise non-public address (set webhook_allow_private_addresses to allow it)";

/// Checks a webhook URL: http(s), naming a host; unless `allow_private`, the
/// host may not be a non-public IP literal (in any spelling the HTTP client
/// accepts) nor `localhost` or a name under it. What other names resolve to
/// is checked by the caller, which can look them up, and again by the
/// delivery's resolver when it connects.
pub fn webhook_url(field: &str, url: &str, allow_private: bool) -> Result<WebhookUrl> {
    let parsed = url::Url::parse(url).map_err(|error| Error::invalid(field, format!("is not a URL: {error}")))?;
    let default_port = match parsed.scheme() {
        "http" => 80,
        "https" => 443,
        _ => return Err(Error::invalid(field, "must be an http or https URL")),
    };
    let host = match parsed.host() {
        None => return Err(Error::invalid(field, "must name a host")),
        Some(url::Host::Ipv4(v4)) => WebhookHost::Ip(std::net::IpAddr::V4(v4)),
        Some(url::Host::Ipv6(v6)) => WebhookHost::Ip(std::net::IpAddr::V6(v6)),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            // What the connector would take for a literal (it skips the resolver).
            match name.parse::<std::net::IpAddr>() {
                Ok(ip) => WebhookHost::Ip(ip),
                Err(_) if name.is_empty() => return Err(Error::invalid(field, "must name a host")),
                Err(_) => WebhookHost::Name(name),
            }
        }
    };
    if !allow_private {
        let inside = match &host {
            WebhookHost::Ip(ip) => !is_public_ip(ip),
            // RFC 6761: every name under localhost is loopback, whatever a resolver says.
            WebhookHost::Name(name) => name == "localhost" || name.ends_with(".localhost"),
        };
        if inside {
            return Err(Error::invalid(field, PRIVATE_WEBHOOK));
        }
    }
    let port = parsed.port().unwrap_or(default_port);
    if port == 0 {
        return Err(Error::invalid(field, "must name a port other than 0"));
    }
    Ok(WebhookUrl {
        url: parsed,
        host,
        port,
    })
}

/// Returns whether an address is reachable on the public internet: not
/// private, loopback, link-local (cloud metadata), shared, multicast,
/// reserved, documentation, benchmarking or unspecified, and, for IPv6, not
/// one of those inside an IPv4-mapped, IPv4-compatible, NAT64 or 6to4
/// address, nor unique-local, site-local, Teredo or another IETF-reserved
/// block.
pub fn is_public_ip(ip: &std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || a == 0
                || a >= 240
                // shared address space (carrier-grade NAT)
                || (a == 100 && (b & 0xc0) == 64)
                // IETF protocol assignments, and the 6to4 relay anycast
                || (a == 192 && b == 0 && c == 0)
                || (a == 192 && b == 88 && c == 99)
                // benchmarking
                || (a == 198 && (b & 0xfe) == 18))
        }
        std::net::IpAddr::V6(v6) => {
            let segments = v6.segments();
            let embedded_v4 = |high: u16, low: u16| {
                let [a, b] = high.to_be_bytes();
                let [c, d] = low.to_be_bytes();
                std::net::IpAddr::V4(std::net::Ipv4Addr::new(a, b, c, d))
            };
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_ip(&std::net::IpAddr::V4(v4));
            }
            match segments {
                // NAT64, well-known prefix: the IPv4 address it reaches
                [0x64, 0xff9b, 0, 0, 0, 0, high, low] => return is_public_ip(&embedded_v4(high, low)),
                // IPv4-translated (SIIT, ::ffff:0:0/96): never a public address of its own
                [0, 0, 0, 0, 0xffff, 0, _, _] => return false,
                // 6to4: the IPv4 address of the relay it tunnels to
                [0x2002, high, low, ..] => return is_public_ip(&embedded_v4(high, low)),
                _ => {}
            }
            let first = segments[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // IPv4-compatible (deprecated) and the rest of ::/96
                || segments[..6] == [0; 6]
                // NAT64 local-use prefix
                || (first == 0x64 && segments[1] == 0xff9b)
                // discard-only
                || (first == 0x100 && segments[1..4] == [0; 3])
                // IETF protocol assignments: Teredo, benchmarking, ORCHID
                || (first == 0x2001 && segments[1] < 0x200)
                // documentation
                || (first == 0x2001 && segments[1] == 0xdb8)
                || (first == 0x3fff && segments[1] < 0x1000)
                // unique local, link-local, site-local
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first & 0xffc0) == 0xfec0)
        }
    }
}

/// Spellings of loopback that the WHATWG parser (the HTTP client's) reads
/// as an address of this machine, each with a `{port}` to fill in: for tests
/// that try to deliver to a listener on loopback, here and in the delivery's
/// crate.
#[cfg(any(test, feature = "testing"))]
pub const LOOPBACK_WEBHOOK_SPELLINGS: &[&str] = &[
    "http://127.0.0.1:{port}/",
    "http://127.0.0.1.:{port}/",
    "http://127.1:{port}/",
    "http://127.0.0.2:{port}/",
    "http://0x7f.1:{port}/",
    "http://0x7f000001:{port}/",
    "http://2130706433:{port}/",
    "http://0177.0.0.1:{port}/",
    "http://017700000001:{port}/",
    "http://\u{ff11}\u{ff12}\u{ff17}\u{ff0e}\u{ff10}\u{ff0e}\u{ff10}\u{ff0e}\u{ff11}:{port}/",
    "http://127\u{3002}0\u{3002}0\u{3002}1:{port}/",
    "http://\u{2460}\u{2461}\u{2466}.0.0.1:{port}/",
    "http://%31%32%37.0.0.1:{port}/",
    "http://127.0.0.1%2e:{port}/",
    "http://127.0.0.1:{port}\\@example.com/",
    "http:/\\127.0.0.1:{port}/",
    "http:127.0.0.1:{port}/",
    "http://127.0.0.\t1:{port}/",
    "http://user:pass@127.0.0.1:{port}/",
    "http://example.com@127.0.0.1:{port}/",
    "http://example.com:80@127.0.0.1:{port}/",
    "HTTP://127.0.0.1:{port}/",
    "https://127.0.0.1:{port}/",
    "http://0:{port}/",
    "http://0.0.0.0:{port}/",
    "http://[::]:{port}/",
    "http://[::1]:{port}/",
    "http://[0:0:0:0:0:0:0:1]:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",
    "http://[::ffff:7f00:1]:{port}/",
    "http://[::127.0.0.1]:{port}/",
    "http://[::ffff:0:127.0.0.1]:{port}/",
    "http://[::ffff:0:7f00:1]:{port}/",
    "http://localhost:{port}/",
    "http://LOCALHOST.:{port}/",
    "http://%6c%6fcalhost:{port}/",
    "http://api.localhost:{port}/",
    "http://\u{ff4c}ocalhost:{port}/",
];

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
    fn custom_instructions_are_strings_within_their_token_limit() {
        let fits = json!({"custom_instructions": "word ".repeat(1_500), "dream": {"custom_instructions": null}});
        assert!(custom_instructions("configuration", fits.as_object().unwrap()).is_ok());
        let long = json!({"dialectic": {"custom_instructions": "word ".repeat(2_500)}});
        let error = custom_instructions("configuration", long.as_object().unwrap()).unwrap_err();
        assert!(
            matches!(&error, Error::InvalidArgument { field, reason } if field == "configuration.dialectic.custom_instructions" && reason.contains("at most 2000")),
            "{error:?}"
        );
        let number = json!({"custom_instructions": 3});
        assert!(custom_instructions("configuration", number.as_object().unwrap()).is_err());
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
        let name = |host: &str| WebhookHost::Name(host.to_owned());
        let checked = webhook_url("url", "https://example.com/hook", false).unwrap();
        assert_eq!((checked.host, checked.port), (name("example.com"), 443));
        let checked = webhook_url("url", "http://user@example.com:8080/x", false).unwrap();
        assert_eq!((checked.host, checked.port), (name("example.com"), 8080));
        let checked = webhook_url("url", "http://Example.COM./x", false).unwrap();
        assert_eq!(checked.host, name("example.com"));
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

    /// Spellings of addresses inside other networks, checked by parsing
    /// alone (nothing is ever sent to them).
    const ELSEWHERE_INSIDE: &[&str] = &[
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[2002:a9fe:a9fe::1]/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://[fec0::1]/",
        "http://[2001::1]/",
        "http://10.0.0.1/",
        "http://10.1/",
        "http://172.16.0.1/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://100.64.0.1/",
        "http://192.0.0.8/",
        "http://198.18.0.1/",
        "http://224.0.0.1/",
        "http://255.255.255.255/",
    ];

    #[test]
    fn every_spelling_of_an_inside_address_is_refused() {
        let loopback = LOOPBACK_WEBHOOK_SPELLINGS
            .iter()
            .flat_map(|url| [url.replace("{port}", "80"), url.replace(":{port}", "")]);
        let accepted: Vec<String> = loopback
            .chain(ELSEWHERE_INSIDE.iter().map(|url| (*url).to_owned()))
            .filter(|url| webhook_url("url", url, false).is_ok())
            .collect();
        assert!(accepted.is_empty(), "accepted: {accepted:?}");
        // The parser is the client's: each spelling names the address the client would reach.
        let checked = webhook_url("url", "http://0x7f.1/", true).unwrap();
        assert_eq!(checked.host, WebhookHost::Ip("127.0.0.1".parse().unwrap()));
        let checked = webhook_url("url", "http://127.0.0.1\\@example.com/", true).unwrap();
        assert_eq!(checked.host, WebhookHost::Ip("127.0.0.1".parse().unwrap()));
        // Port 0 reaches nothing a receiver listens on.
        assert!(webhook_url("url", "http://8.8.8.8:0/", false).is_err());
        // Public spellings stay accepted.
        for url in [
            "http://8.8.8.8/",
            "http://[2606:4700::1111]/",
            "http://[64:ff9b::808:808]/",
            "http://127.0.0.1:80@example.com/",
        ] {
            assert!(webhook_url("url", url, false).is_ok(), "{url}");
        }
    }
}
