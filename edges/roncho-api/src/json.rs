//! Conversion between `google.protobuf.Struct` and JSON.
//!
//! Protobuf numbers are all doubles; integral values within ±2^53 become JSON
//! integers so that `{"n": 1}` round-trips as `1`, not `1.0`, and filters on
//! metadata compare the way the client wrote them.

use prost_types::value::Kind;
use serde_json::{Map, Number, Value};

/// Largest integer a double holds exactly.
const MAX_EXACT_INTEGER: f64 = 9_007_199_254_740_992.0;

/// Returns the JSON object held by a `Struct`.
pub fn struct_to_json(fields: &prost_types::Struct) -> Map<String, Value> {
    fields
        .fields
        .iter()
        .map(|(key, value)| (key.clone(), value_to_json(value)))
        .collect()
}

/// Returns the JSON value held by a protobuf `Value`.
pub fn value_to_json(value: &prost_types::Value) -> Value {
    match &value.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(*b),
        Some(Kind::StringValue(s)) => Value::String(s.clone()),
        Some(Kind::NumberValue(n)) => number_to_json(*n),
        Some(Kind::StructValue(s)) => Value::Object(struct_to_json(s)),
        Some(Kind::ListValue(list)) => Value::Array(list.values.iter().map(value_to_json).collect()),
    }
}

fn number_to_json(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() <= MAX_EXACT_INTEGER {
        #[expect(clippy::cast_possible_truncation, reason = "checked to be integral and within ±2^53")]
        return Value::Number(Number::from(n as i64));
    }
    Number::from_f64(n).map(Value::Number).unwrap_or(Value::Null)
}

/// Returns a `Struct` holding a JSON object.
pub fn json_to_struct(object: &Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: object
            .iter()
            .map(|(key, value)| (key.clone(), json_to_value(value)))
            .collect(),
    }
}

/// Returns the protobuf `Value` of a JSON value.
pub fn json_to_value(value: &Value) -> prost_types::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.iter().map(json_to_value).collect(),
        }),
        Value::Object(object) => Kind::StructValue(json_to_struct(object)),
    };
    prost_types::Value { kind: Some(kind) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integral_numbers_round_trip_as_integers() {
        let original = json!({"n": 1, "f": 1.5, "nested": {"list": [true, null, "x", 3]}});
        let object = original.as_object().expect("object");
        let back = struct_to_json(&json_to_struct(object));
        assert_eq!(Value::Object(back), original);
    }
}
