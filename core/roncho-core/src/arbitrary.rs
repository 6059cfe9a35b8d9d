//! Generators of client input for property tests: JSON trees made of the
//! filter grammar's words, schema keys and arbitrary text (quotes,
//! backslashes, LIKE wildcards, NULs, any Unicode).

use proptest::prelude::*;
use serde_json::{Map, Value};

/// Keys and words a filter is made of, the grammar's and arbitrary text.
pub fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "AND", "OR", "NOT", "metadata", "id", "workspace_id", "session_id", "peer_id", "observer_id",
            "observed_id", "observer", "observed", "level", "times_derived", "token_count", "is_active",
            "created_at", "content", "gte", "lte", "gt", "lt", "ne", "in", "contains", "icontains", "*",
        ])
        .prop_map(str::to_owned),
        2 => "\\PC{0,12}",
        1 => "[a-z'\".\\\\%_]{1,8}",
    ]
}

/// Scalars, including the ones the grammar treats specially.
pub fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|number| serde_json::Number::from_f64(number).map_or(Value::Null, Value::Number)),
        key().prop_map(Value::from),
        prop::sample::select(vec![
            "2024-01-01T00:00:00Z",
            "2024-13-45",
            "1999-12-31 23:59:59+05:30",
            "-1",
            "1e309",
            "9223372036854775808",
            "",
            "\u{0}",
        ])
        .prop_map(Value::from),
    ]
}

/// JSON trees up to six levels deep.
pub fn json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(6, 96, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8).prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

pub fn object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((key(), json()), 0..8).prop_map(|fields| fields.into_iter().collect())
}

/// Filters shaped like the grammar, so that most parse for some resource:
/// schema keys with values of their type (scalars, lists, operator
/// objects; a few of another type), `"*"`, `metadata` paths (keys that need
/// quoting included), and `AND`/`OR`/`NOT` lists.
pub fn filter() -> impl Strategy<Value = Map<String, Value>> {
    let text = prop_oneof![4 => key().prop_map(Value::from), 1 => scalar()];
    let integer = prop_oneof![4 => any::<i64>().prop_map(Value::from), 1 => scalar()];
    let time = prop_oneof![
        4 => prop::sample::select(vec!["2024-01-01T00:00:00Z", "2030-06-30T12:00:00.5+02:00", "1970-01-01"])
            .prop_map(Value::from),
        1 => scalar(),
    ];
    let boolean = prop_oneof![4 => any::<bool>().prop_map(Value::from), 1 => scalar()];
    let leaf = prop_oneof![
        4 => typed(
            vec!["id", "workspace_id", "session_id", "peer_id", "observer_id", "observed_id", "level"],
            text.clone(),
        ),
        1 => typed(vec!["token_count", "times_derived"], integer.clone()),
        1 => typed(vec!["created_at"], time),
        1 => typed(vec!["is_active"], boolean),
        2 => (key(), metadata_path(prop_oneof![text, integer]))
            .prop_map(|(key, value)| Map::from_iter([("metadata".to_owned(), Value::Object(Map::from_iter([(key, value)])))])),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (
                prop::sample::select(vec!["AND", "OR", "NOT"]),
                prop::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(operator, items)| {
                    let items = items.into_iter().map(Value::Object).collect();
                    Map::from_iter([(operator.to_owned(), Value::Array(items))])
                }),
            prop::collection::vec(inner, 1..3).prop_map(|parts| parts.into_iter().flatten().collect()),
        ]
    })
}

/// One of `fields` with a condition over `values`: a value, a list, `"*"`
/// or an operator object.
fn typed(
    fields: Vec<&'static str>,
    values: impl Strategy<Value = Value> + Clone + 'static,
) -> impl Strategy<Value = Map<String, Value>> {
    (prop::sample::select(fields), condition(values))
        .prop_map(|(field, value)| Map::from_iter([(field.to_owned(), value)]))
}

fn condition(values: impl Strategy<Value = Value> + Clone + 'static) -> impl Strategy<Value = Value> + Clone {
    let operator = prop::sample::select(vec!["gte", "lte", "gt", "lt", "ne", "in", "contains", "icontains"]);
    let list = prop::collection::vec(values.clone(), 0..4).prop_map(Value::Array);
    prop_oneof![
        3 => values.clone(),
        1 => list.clone(),
        3 => (operator, prop_oneof![3 => values, 1 => list])
            .prop_map(|(operator, value)| Value::Object(Map::from_iter([(operator.to_owned(), value)]))),
        1 => Just(Value::from("*")),
    ]
}

/// A `metadata` condition, one to three keys deep.
fn metadata_path(values: impl Strategy<Value = Value> + Clone + 'static) -> impl Strategy<Value = Value> {
    condition(values).prop_recursive(3, 8, 2, |inner| {
        (key(), inner).prop_map(|(key, value)| Value::Object(Map::from_iter([(key, value)])))
    })
}
