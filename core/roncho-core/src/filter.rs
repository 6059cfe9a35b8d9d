//! Honcho's filter grammar, parsed into a typed tree that storage adapters
//! render into SQL.
//!
//! Grammar (honcho-v3 §2.3): an object whose keys are ANDed; `AND`/`OR`/`NOT`
//! take lists (`NOT` negates each item with "is not true" semantics, so rows
//! with NULLs match); a key maps to a scalar (equality), `null` (is null), a
//! list (sugar for `in`), `"*"` (no condition) or an object of operators
//! `gte, lte, gt, lt, ne, in, contains, icontains`. `metadata` takes an object
//! whose nested keys form a JSON path.

use serde_json::{Map, Value};

use crate::{Error, Result};

/// Deepest nesting of AND/OR/NOT.
pub const MAX_FILTER_DEPTH: usize = 5;
/// Most nodes (keys and list items, at any depth) in one filter.
pub const MAX_FILTER_NODES: usize = 2_000;
/// Most items in one list of a filter (`in` values, `AND`/`OR`/`NOT` branches).
pub const MAX_FILTER_LIST: usize = 1_000;
/// Most keys in one object of a filter.
pub const MAX_FILTER_KEYS: usize = 50;

/// The type of a filterable column; decides how values are coerced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    Text,
    Integer,
    Boolean,
    Timestamp,
    /// The ids a conclusion was derived from, kept beside it (one row per
    /// id): only `contains`, one id or a list of ids that must all be there.
    Sources,
}

/// A filterable key of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The key as clients write it (`peer_id`).
    pub key: &'static str,
    /// The stored column it reads (`peer_name`): a store renders filters
    /// from this, so a key and its column are declared in one place.
    pub column: &'static str,
    pub field_type: FieldType,
}

/// The keys a resource can be filtered on.
#[derive(Debug, Clone, Copy)]
pub struct Schema {
    pub resource: &'static str,
    pub fields: &'static [Field],
    /// Whether `metadata` is filterable.
    pub metadata: bool,
}

const fn field(key: &'static str, column: &'static str, field_type: FieldType) -> Field {
    Field {
        key,
        column,
        field_type,
    }
}

/// The stored column of `metadata`, in every resource that has it.
pub const METADATA_COLUMN: &str = "metadata";

/// Keys of workspaces.
pub const WORKSPACE: Schema = Schema {
    resource: "workspace",
    fields: &[
        field("id", "name", FieldType::Text),
        field("created_at", "created_at", FieldType::Timestamp),
    ],
    metadata: true,
};

/// Keys of peers.
pub const PEER: Schema = Schema {
    resource: "peer",
    fields: &[
        field("id", "name", FieldType::Text),
        field("workspace_id", "workspace_name", FieldType::Text),
        field("created_at", "created_at", FieldType::Timestamp),
    ],
    metadata: true,
};

/// Keys of sessions.
pub const SESSION: Schema = Schema {
    resource: "session",
    fields: &[
        field("id", "name", FieldType::Text),
        field("workspace_id", "workspace_name", FieldType::Text),
        field("is_active", "is_active", FieldType::Boolean),
        field("created_at", "created_at", FieldType::Timestamp),
    ],
    metadata: true,
};

/// Keys of messages.
pub const MESSAGE: Schema = Schema {
    resource: "message",
    fields: &[
        field("id", "public_id", FieldType::Text),
        field("workspace_id", "workspace_name", FieldType::Text),
        field("session_id", "session_name", FieldType::Text),
        field("peer_id", "peer_name", FieldType::Text),
        field("token_count", "token_count", FieldType::Integer),
        field("created_at", "created_at", FieldType::Timestamp),
    ],
    metadata: true,
};

/// Keys of conclusions (Honcho's documents), including the raw column names.
pub const CONCLUSION: Schema = Schema {
    resource: "conclusion",
    fields: &[
        field("id", "public_id", FieldType::Text),
        field("workspace_id", "workspace_name", FieldType::Text),
        field("observer_id", "observer", FieldType::Text),
        field("observed_id", "observed", FieldType::Text),
        field("observer", "observer", FieldType::Text),
        field("observed", "observed", FieldType::Text),
        field("session_id", "session_name", FieldType::Text),
        field("session_name", "session_name", FieldType::Text),
        field("level", "level", FieldType::Text),
        field("times_derived", "times_derived", FieldType::Integer),
        field("created_at", "created_at", FieldType::Timestamp),
        field("source_ids", "source_ids", FieldType::Sources),
        // Honcho 3.3: a message id is never a conclusion's, so "learned from
        // this message" is "this message among its sources".
        field("source_message_ids", "source_ids", FieldType::Sources),
    ],
    metadata: true,
};

/// A typed scalar compared against a column or a JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Text(String),
    Integer(i64),
    Float(f64),
    Boolean(bool),
    /// Microseconds since the epoch.
    Timestamp(i64),
}

/// A comparison on a column or a metadata path.
#[derive(Debug, Clone, PartialEq)]
pub enum Comparison {
    Eq(Scalar),
    Ne(Scalar),
    Gt(Scalar),
    Gte(Scalar),
    Lt(Scalar),
    Lte(Scalar),
    In(Vec<Scalar>),
    /// At a metadata path: substring, case-sensitive; on a JSON array:
    /// contains the element. (On a column `contains` parses as [`IContains`](Comparison::IContains).)
    Contains(Scalar),
    /// Substring, case-insensitive.
    IContains(String),
    IsNull,
    IsNotNull,
    /// JSON only: the array at the path holds every given element.
    ContainsAll(Vec<Scalar>),
}

/// What a condition looks at.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Column(Field),
    /// A path of object keys inside `metadata`.
    Metadata(Vec<String>),
}

/// A parsed filter tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// Matches every row (an empty filter, or only wildcards).
    All,
    /// Matches no row (`in: []`).
    Nothing,
    And(Vec<Filter>),
    Or(Vec<Filter>),
    /// Each item "is not true", ANDed.
    Not(Vec<Filter>),
    Condition {
        target: Target,
        comparison: Comparison,
    },
}

/// Parses client `filters` for a resource; `None` or `{}` matches everything.
pub fn parse(schema: &Schema, filters: Option<&Map<String, Value>>) -> Result<Filter> {
    match filters {
        None => Ok(Filter::All),
        Some(object) => {
            check_size(object)?;
            parse_object(schema, object, 0).map(simplify)
        }
    }
}

/// Checks a filter's size before it is parsed: its nodes, lists and objects
/// (what a query and its bound values grow with); and that no key or text
/// holds a NUL character (stored text never does, and Postgres refuses it
/// in a query).
pub fn check_size(filters: &Map<String, Value>) -> Result<()> {
    fn walk(path: &str, value: &Value, nodes: &mut usize) -> Result<()> {
        match value {
            Value::String(text) if text.contains('\0') => {
                return Err(Error::invalid(path, "must not contain NUL characters"));
            }
            Value::Object(object) => {
                if let Some(key) = object.keys().find(|key| key.contains('\0')) {
                    return Err(Error::invalid(path, format!("has a key with a NUL character: {key:?}")));
                }
                if object.len() > MAX_FILTER_KEYS {
                    return Err(Error::invalid(
                        path,
                        format!("has {} keys, at most {MAX_FILTER_KEYS} are allowed", object.len()),
                    ));
                }
                for (key, value) in object {
                    *nodes += 1;
                    walk(&format!("{path}.{key}"), value, nodes)?;
                }
            }
            Value::Array(items) => {
                if items.len() > MAX_FILTER_LIST {
                    return Err(Error::invalid(
                        path,
                        format!("holds {} items, at most {MAX_FILTER_LIST} are allowed", items.len()),
                    ));
                }
                for item in items {
                    *nodes += 1;
                    walk(path, item, nodes)?;
                }
            }
            _ => {}
        }
        if *nodes > MAX_FILTER_NODES {
            return Err(Error::invalid(
                "filters",
                format!("has more than {MAX_FILTER_NODES} keys and list items, at most {MAX_FILTER_NODES} are allowed"),
            ));
        }
        Ok(())
    }
    walk("filters", &Value::Object(filters.clone()), &mut 0)
}

fn parse_object(schema: &Schema, object: &Map<String, Value>, depth: usize) -> Result<Filter> {
    if depth > MAX_FILTER_DEPTH {
        return Err(Error::invalid(
            "filters",
            format!("nest at most {MAX_FILTER_DEPTH} levels of AND/OR/NOT"),
        ));
    }
    let mut conditions = Vec::with_capacity(object.len());
    for (key, value) in object {
        let condition = match key.as_str() {
            "AND" => Filter::And(parse_list(schema, key, value, depth)?),
            "OR" => Filter::Or(parse_list(schema, key, value, depth)?),
            "NOT" => Filter::Not(parse_list(schema, key, value, depth)?),
            "metadata" if schema.metadata => parse_metadata(value)?,
            _ => {
                let field = schema.fields.iter().find(|field| field.key == key).ok_or_else(|| {
                    Error::invalid(
                        format!("filters.{key}"),
                        format!(
                            "column `{key}` is not allowed for {}; allowed: {}",
                            schema.resource,
                            allowed_keys(schema)
                        ),
                    )
                })?;
                parse_column(*field, value)?
            }
        };
        conditions.push(condition);
    }
    Ok(Filter::And(conditions))
}

fn allowed_keys(schema: &Schema) -> String {
    let mut keys: Vec<&str> = schema.fields.iter().map(|field| field.key).collect();
    if schema.metadata {
        keys.push("metadata");
    }
    keys.join(", ")
}

fn parse_list(schema: &Schema, key: &str, value: &Value, depth: usize) -> Result<Vec<Filter>> {
    let Value::Array(items) = value else {
        return Err(Error::invalid(
            format!("filters.{key}"),
            "must be a list of filter objects",
        ));
    };
    items
        .iter()
        .map(|item| match item {
            Value::Object(object) => parse_object(schema, object, depth + 1),
            _ => Err(Error::invalid(
                format!("filters.{key}"),
                "must be a list of filter objects",
            )),
        })
        .collect()
}

const OPERATORS: &[&str] = &["gte", "lte", "gt", "lt", "ne", "in", "contains", "icontains"];

fn is_operator_object(object: &Map<String, Value>) -> bool {
    !object.is_empty() && object.keys().all(|key| OPERATORS.contains(&key.as_str()))
}

fn is_wildcard(value: &Value) -> bool {
    value.as_str() == Some("*")
}

fn parse_column(field: Field, value: &Value) -> Result<Filter> {
    let key = field.key;
    if field.field_type == FieldType::Sources {
        return parse_sources(field, value);
    }
    let condition = |comparison| {
        Ok(Filter::Condition {
            target: Target::Column(field),
            comparison,
        })
    };
    match value {
        v if is_wildcard(v) => Ok(Filter::All),
        Value::Null => condition(Comparison::IsNull),
        Value::Array(items) => parse_in(items, |item| coerce(field, item)).map(|maybe| match maybe {
            Some(comparison) => Filter::Condition {
                target: Target::Column(field),
                comparison,
            },
            None => Filter::All,
        }),
        Value::Object(object) => {
            if !is_operator_object(object) {
                return Err(Error::invalid(
                    format!("filters.{key}"),
                    format!("unknown operator; use one of {}", OPERATORS.join(", ")),
                ));
            }
            let mut conditions = Vec::new();
            for (operator, operand) in object {
                if is_wildcard(operand) {
                    continue;
                }
                let comparison = match (operator.as_str(), operand) {
                    ("ne", Value::Null) => Comparison::IsNotNull,
                    (_, Value::Null) => {
                        return Err(Error::invalid(
                            format!("filters.{key}.{operator}"),
                            "null is only allowed with ne",
                        ));
                    }
                    ("in", Value::Array(items)) => match parse_in(items, |item| coerce(field, item))? {
                        Some(comparison) => comparison,
                        None => continue,
                    },
                    ("in", _) => return Err(Error::invalid(format!("filters.{key}.in"), "must be a list")),
                    ("contains" | "icontains", _) if field.field_type != FieldType::Text => {
                        return Err(Error::invalid(
                            format!("filters.{key}.{operator}"),
                            "only applies to text columns",
                        ));
                    }
                    // On a column Honcho reads both as `ILIKE %v%`: a
                    // substring in any case (honcho-v3 §2.3).
                    ("contains" | "icontains", Value::String(s)) => Comparison::IContains(s.clone()),
                    ("contains" | "icontains", _) => {
                        return Err(Error::invalid(format!("filters.{key}.{operator}"), "must be a string"));
                    }
                    (op, operand) => ordered(op, coerce(field, operand)?),
                };
                conditions.push(Filter::Condition {
                    target: Target::Column(field),
                    comparison,
                });
            }
            Ok(Filter::And(conditions))
        }
        scalar => condition(Comparison::Eq(coerce(field, scalar)?)),
    }
}

/// `{"contains": id}` or `{"contains": [ids]}`: the conclusions derived
/// from that id, or from every one of those ids (Honcho SDK's `derived()`);
/// roncho's `{"in": [ids]}`: from any of them.
fn parse_sources(field: Field, value: &Value) -> Result<Filter> {
    let key = field.key;
    let refuse = || {
        Error::invalid(
            format!("filters.{key}"),
            "takes only `contains` (an id, or a list of ids that must all be sources) or `in` (a list of ids, \
             any of which is a source)",
        )
    };
    let Some((operator, operand)) = value
        .as_object()
        .filter(|object| object.len() == 1)
        .and_then(|object| object.iter().next())
        .filter(|(operator, _)| matches!(operator.as_str(), "contains" | "in"))
    else {
        return Err(refuse());
    };
    let text = |item: &Value| item.as_str().map(|id| Scalar::Text(id.to_owned())).ok_or_else(refuse);
    let comparison = match (operator.as_str(), operand) {
        ("contains", Value::Array(items)) if items.is_empty() => return Ok(Filter::All),
        ("contains", Value::Array(items)) => Comparison::ContainsAll(items.iter().map(text).collect::<Result<_>>()?),
        ("contains", item) => Comparison::Contains(text(item)?),
        ("in", Value::Array(items)) => Comparison::In(items.iter().map(text).collect::<Result<_>>()?),
        _ => return Err(refuse()),
    };
    Ok(Filter::Condition {
        target: Target::Column(field),
        comparison,
    })
}

fn ordered(operator: &str, scalar: Scalar) -> Comparison {
    match operator {
        "gte" => Comparison::Gte(scalar),
        "lte" => Comparison::Lte(scalar),
        "gt" => Comparison::Gt(scalar),
        "lt" => Comparison::Lt(scalar),
        _ => Comparison::Ne(scalar),
    }
}

/// Returns `In`, or `None` when the list holds a wildcard (no condition).
fn parse_in(items: &[Value], coerce_item: impl Fn(&Value) -> Result<Scalar>) -> Result<Option<Comparison>> {
    if items.iter().any(is_wildcard) {
        return Ok(None);
    }
    Ok(Some(Comparison::In(
        items.iter().map(coerce_item).collect::<Result<_>>()?,
    )))
}

fn coerce(field: Field, value: &Value) -> Result<Scalar> {
    let name = format!("filters.{}", field.key);
    match (field.field_type, value) {
        (FieldType::Text, Value::String(s)) => Ok(Scalar::Text(s.clone())),
        (FieldType::Text, _) => Err(Error::invalid(name, "expects a string")),
        (FieldType::Boolean, Value::Bool(b)) => Ok(Scalar::Boolean(*b)),
        (FieldType::Boolean, _) => Err(Error::invalid(name, "expects a boolean")),
        (FieldType::Integer, Value::Number(n)) => n
            .as_i64()
            .map(Scalar::Integer)
            .ok_or_else(|| Error::invalid(name, "expects an integer")),
        (FieldType::Integer, _) => Err(Error::invalid(name, "expects an integer")),
        (FieldType::Timestamp, Value::String(s)) => parse_timestamp(s)
            .map(Scalar::Timestamp)
            .ok_or_else(|| Error::invalid(name, format!("`{s}` is not an ISO 8601 date or datetime"))),
        (FieldType::Timestamp, _) => Err(Error::invalid(name, "expects an ISO 8601 string")),
        (FieldType::Sources, _) => Err(Error::invalid(name, "takes only `contains`")),
    }
}

/// Parses ISO 8601 (RFC 3339, a naive datetime taken as UTC, or a date) into
/// microseconds since the epoch.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    use time::format_description::well_known::Rfc3339;
    use time::macros::format_description;
    let micros = |t: time::OffsetDateTime| i64::try_from(t.unix_timestamp_nanos() / 1_000).ok();
    let normalized = text.trim().replace(' ', "T");
    if let Ok(parsed) = time::OffsetDateTime::parse(&normalized, &Rfc3339) {
        return micros(parsed);
    }
    let naive_formats = [
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond]"),
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]"),
        format_description!("[year]-[month]-[day]T[hour]:[minute]"),
    ];
    for format in naive_formats {
        if let Ok(parsed) = time::PrimitiveDateTime::parse(&normalized, format) {
            return micros(parsed.assume_utc());
        }
    }
    let date = time::Date::parse(&normalized, format_description!("[year]-[month]-[day]")).ok()?;
    micros(date.midnight().assume_utc())
}

fn parse_metadata(value: &Value) -> Result<Filter> {
    let Value::Object(object) = value else {
        return Err(Error::invalid("filters.metadata", "must be an object"));
    };
    let mut conditions = Vec::new();
    collect_metadata(&mut Vec::new(), object, &mut conditions)?;
    Ok(Filter::And(conditions))
}

fn collect_metadata(path: &mut Vec<String>, object: &Map<String, Value>, out: &mut Vec<Filter>) -> Result<()> {
    for (key, value) in object {
        if key.contains(['"', '\\']) || key.is_empty() {
            return Err(Error::invalid(
                "filters.metadata",
                format!("key `{key}` must be non-empty without quotes or backslashes"),
            ));
        }
        path.push(key.clone());
        let field_name = format!("filters.metadata.{}", path.join("."));
        let condition = |comparison| Filter::Condition {
            target: Target::Metadata(path.clone()),
            comparison,
        };
        match value {
            v if is_wildcard(v) => {}
            Value::Null => out.push(condition(Comparison::IsNull)),
            Value::Array(items) => {
                let elements = items
                    .iter()
                    .map(|item| json_scalar(&field_name, item))
                    .collect::<Result<_>>()?;
                out.push(condition(Comparison::ContainsAll(elements)));
            }
            Value::Object(inner) if is_operator_object(inner) => {
                for (operator, operand) in inner {
                    if is_wildcard(operand) {
                        continue;
                    }
                    let comparison = match (operator.as_str(), operand) {
                        ("ne", Value::Null) => Comparison::IsNotNull,
                        (_, Value::Null) => {
                            return Err(Error::invalid(
                                format!("{field_name}.{operator}"),
                                "null is only allowed with ne",
                            ));
                        }
                        ("in", Value::Array(items)) => match parse_in(items, |item| json_scalar(&field_name, item))? {
                            Some(comparison) => comparison,
                            None => continue,
                        },
                        ("in", _) => return Err(Error::invalid(format!("{field_name}.in"), "must be a list")),
                        ("icontains", Value::String(s)) => Comparison::IContains(s.clone()),
                        ("icontains", _) => {
                            return Err(Error::invalid(format!("{field_name}.icontains"), "must be a string"));
                        }
                        ("contains", operand) => Comparison::Contains(json_scalar(&field_name, operand)?),
                        (op, operand) => ordered(op, json_scalar(&field_name, operand)?),
                    };
                    out.push(condition(comparison));
                }
            }
            Value::Object(inner) => collect_metadata(path, inner, out)?,
            scalar => out.push(condition(Comparison::Eq(json_scalar(&field_name, scalar)?))),
        }
        path.pop();
    }
    Ok(())
}

fn json_scalar(field_name: &str, value: &Value) -> Result<Scalar> {
    match value {
        Value::String(s) => Ok(Scalar::Text(s.clone())),
        Value::Bool(b) => Ok(Scalar::Boolean(*b)),
        Value::Number(n) => Ok(n
            .as_i64()
            .map(Scalar::Integer)
            .unwrap_or_else(|| Scalar::Float(n.as_f64().unwrap_or_default()))),
        _ => Err(Error::invalid(field_name, "expects a string, number or boolean")),
    }
}

/// Flattens trivially true/false branches so renderers see a small tree.
fn simplify(filter: Filter) -> Filter {
    match filter {
        Filter::And(items) => {
            let mut kept = Vec::new();
            for item in items.into_iter().map(simplify) {
                match item {
                    Filter::All => {}
                    Filter::Nothing => return Filter::Nothing,
                    other => kept.push(other),
                }
            }
            match kept.len() {
                0 => Filter::All,
                1 => kept.pop().unwrap_or(Filter::All),
                _ => Filter::And(kept),
            }
        }
        Filter::Or(items) => {
            let mut kept = Vec::new();
            for item in items.into_iter().map(simplify) {
                match item {
                    Filter::All => return Filter::All,
                    Filter::Nothing => {}
                    other => kept.push(other),
                }
            }
            match kept.len() {
                0 => Filter::Nothing,
                1 => kept.pop().unwrap_or(Filter::Nothing),
                _ => Filter::Or(kept),
            }
        }
        Filter::Not(items) => {
            let mut kept = Vec::new();
            for item in items.into_iter().map(simplify) {
                match item {
                    Filter::All => return Filter::Nothing,
                    Filter::Nothing => {}
                    other => kept.push(other),
                }
            }
            if kept.is_empty() {
                Filter::All
            } else {
                Filter::Not(kept)
            }
        }
        Filter::Condition {
            comparison: Comparison::In(items),
            ..
        } if items.is_empty() => Filter::Nothing,
        other => other,
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;
    use serde_json::json;

    fn parsed(value: Value) -> Result<Filter> {
        parse(&MESSAGE, value.as_object())
    }

    fn refusal(result: Result<Filter>) -> (String, String) {
        match result {
            Err(Error::InvalidArgument { field, reason }) => (field, reason),
            other => panic!("expected invalid argument, got {other:?}"),
        }
    }

    #[test]
    fn an_in_list_just_over_the_bound_is_refused_naming_it() {
        let ids: Vec<String> = (0..MAX_FILTER_LIST).map(|i| format!("p{i}")).collect();
        assert!(parsed(json!({"peer_id": {"in": ids}})).is_ok());
        let ids: Vec<String> = (0..=MAX_FILTER_LIST).map(|i| format!("p{i}")).collect();
        let (field, reason) = refusal(parsed(json!({"peer_id": {"in": ids}})));
        assert_eq!(field, "filters.peer_id.in");
        assert!(reason.contains("at most 1000"), "{reason}");
    }

    #[test]
    fn a_filter_with_too_many_nodes_or_keys_is_refused() {
        // Four lists of 500 ids: each list within its bound, the whole over it.
        let ids: Vec<String> = (0..500).map(|i| format!("p{i}")).collect();
        let branches = vec![json!({"peer_id": {"in": ids}}); 4];
        let (field, reason) = refusal(parsed(json!({"OR": branches})));
        assert_eq!(field, "filters");
        assert!(reason.contains("at most 2000"), "{reason}");
        assert!(parsed(json!({"OR": branches[..3]})).is_ok());
        let wide: Map<String, Value> = (0..=MAX_FILTER_KEYS).map(|i| (format!("k{i}"), json!(i))).collect();
        let (field, reason) = refusal(parsed(json!({"metadata": wide})));
        assert_eq!(field, "filters.metadata");
        assert!(reason.contains("at most 50"), "{reason}");
    }

    #[test]
    fn a_nul_in_a_filter_is_refused_naming_where() {
        // Found by the store's property test: Postgres refused the query.
        let (field, _) = refusal(parsed(json!({"id": ["\u{0}"]})));
        assert_eq!(field, "filters.id");
        let (field, reason) = refusal(parsed(json!({"metadata": {"a\u{0}b": 1}})));
        assert_eq!(field, "filters.metadata");
        assert!(reason.contains("NUL"), "{reason}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_json(schema: &Schema, value: Value) -> Result<Filter> {
        parse(schema, value.as_object())
    }

    #[test]
    fn empty_and_wildcards_match_everything() {
        assert_eq!(parse_json(&MESSAGE, json!({})).unwrap(), Filter::All);
        assert_eq!(parse_json(&MESSAGE, json!({"peer_id": "*"})).unwrap(), Filter::All);
        assert_eq!(
            parse_json(&MESSAGE, json!({"peer_id": {"in": ["a", "*"]}})).unwrap(),
            Filter::All
        );
    }

    #[test]
    fn empty_in_matches_nothing() {
        assert_eq!(
            parse_json(&MESSAGE, json!({"peer_id": {"in": []}})).unwrap(),
            Filter::Nothing
        );
        assert_eq!(parse_json(&MESSAGE, json!({"peer_id": []})).unwrap(), Filter::Nothing);
    }

    #[test]
    fn unknown_keys_are_rejected_with_the_key_named() {
        let error = parse_json(&PEER, json!({"token_count": 3})).unwrap_err();
        assert!(
            matches!(&error, Error::InvalidArgument { field, .. } if field == "filters.token_count"),
            "{error}"
        );
    }

    #[test]
    fn values_are_coerced_to_the_column_type() {
        assert!(parse_json(&MESSAGE, json!({"token_count": "3"})).is_err());
        assert!(parse_json(&SESSION, json!({"is_active": 1})).is_err());
        assert!(parse_json(&MESSAGE, json!({"created_at": {"gte": "not a date"}})).is_err());
        assert!(parse_json(&MESSAGE, json!({"token_count": {"contains": "x"}})).is_err());
        assert!(parse_json(&MESSAGE, json!({"peer_id": {"gt": null}})).is_err());
        let parsed = parse_json(&MESSAGE, json!({"created_at": {"gte": "2024-01-02"}})).unwrap();
        let Filter::Condition {
            comparison: Comparison::Gte(Scalar::Timestamp(micros)),
            ..
        } = parsed
        else {
            panic!("unexpected {parsed:?}")
        };
        assert_eq!(micros, 1_704_153_600_000_000);
    }

    #[test]
    fn timestamps_accept_rfc3339_naive_and_dates() {
        assert_eq!(parse_timestamp("2024-01-02T00:00:00Z"), Some(1_704_153_600_000_000));
        assert_eq!(
            parse_timestamp("2024-01-02T01:00:00+01:00"),
            Some(1_704_153_600_000_000)
        );
        assert_eq!(parse_timestamp("2024-01-02 00:00:00"), Some(1_704_153_600_000_000));
        assert_eq!(parse_timestamp("2024-01-02T00:00:00.5"), Some(1_704_153_600_500_000));
        assert_eq!(parse_timestamp("yesterday"), None);
    }

    #[test]
    fn metadata_paths_and_operators() {
        let parsed = parse_json(
            &MESSAGE,
            json!({"metadata": {"a": {"b": {"gte": 2}}, "tags": ["x"], "k": "v"}}),
        )
        .unwrap();
        let Filter::And(items) = parsed else {
            panic!("expected AND")
        };
        assert_eq!(items.len(), 3);
        assert!(items.contains(&Filter::Condition {
            target: Target::Metadata(vec!["a".into(), "b".into()]),
            comparison: Comparison::Gte(Scalar::Integer(2)),
        }));
        assert!(items.contains(&Filter::Condition {
            target: Target::Metadata(vec!["tags".into()]),
            comparison: Comparison::ContainsAll(vec![Scalar::Text("x".into())]),
        }));
    }

    #[test]
    fn logical_operators_need_lists_and_bounded_depth() {
        assert!(parse_json(&MESSAGE, json!({"AND": {"peer_id": "a"}})).is_err());
        let mut deep = json!({"peer_id": "a"});
        for _ in 0..7 {
            deep = json!({"AND": [deep]});
        }
        assert!(parse_json(&MESSAGE, deep).is_err());
        let parsed = parse_json(&MESSAGE, json!({"OR": [{"peer_id": "a"}, {"peer_id": "*"}]})).unwrap();
        assert_eq!(parsed, Filter::All);
        let parsed = parse_json(&MESSAGE, json!({"NOT": [{"peer_id": "a"}]})).unwrap();
        assert!(matches!(parsed, Filter::Not(items) if items.len() == 1));
    }
}
