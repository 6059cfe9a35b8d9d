//! `response_format`: a JSON Schema whose root is an object. roncho checks
//! answers against it itself, so it accepts the keywords it checks and
//! refuses a schema using any other (`INVALID_ARGUMENT` naming it) rather
//! than let an answer through unchecked.

use roncho_core::{Error, Result};
use serde_json::{Map, Value};

/// Keywords whose meaning is checked.
const CHECKED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "anyOf",
    "oneOf",
    "allOf",
];
/// Keywords that only annotate.
const ANNOTATIONS: &[&str] = &["title", "description", "default", "examples", "$schema", "$comment"];

/// Checks that `schema` is a usable response format: an object schema
/// (`"type": "object"`) built from the supported keywords.
pub fn check_format(schema: &Map<String, Value>) -> Result<()> {
    if schema.get("type") != Some(&Value::String("object".into())) {
        return Err(Error::invalid(
            "response_format",
            "must be a JSON Schema whose root is an object (\"type\": \"object\")",
        ));
    }
    check_keywords(schema, "response_format")
}

fn check_keywords(schema: &Map<String, Value>, path: &str) -> Result<()> {
    for (keyword, value) in schema {
        if ANNOTATIONS.contains(&keyword.as_str()) {
            continue;
        }
        if !CHECKED.contains(&keyword.as_str()) {
            return Err(Error::invalid(
                format!("{path}.{keyword}"),
                format!("is not supported; supported keywords: {}", CHECKED.join(", ")),
            ));
        }
        let nested = |value: &Value, at: String| match value {
            Value::Object(inner) => check_keywords(inner, &at),
            Value::Bool(_) => Ok(()),
            _ => Err(Error::invalid(at, "must be a schema")),
        };
        match (keyword.as_str(), value) {
            ("properties", Value::Object(properties)) => {
                for (name, inner) in properties {
                    nested(inner, format!("{path}.properties.{name}"))?;
                }
            }
            ("items" | "additionalProperties", inner) => nested(inner, format!("{path}.{keyword}"))?,
            ("anyOf" | "oneOf" | "allOf", Value::Array(options)) => {
                for (index, inner) in options.iter().enumerate() {
                    nested(inner, format!("{path}.{keyword}[{index}]"))?;
                }
            }
            ("properties" | "anyOf" | "oneOf" | "allOf", _) => {
                return Err(Error::invalid(format!("{path}.{keyword}"), "has the wrong shape"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Validates `value` against `schema`; the error says where and why.
pub fn validate(schema: &Value, value: &Value) -> std::result::Result<(), String> {
    validate_at(schema, value, "$")
}

fn validate_at(schema: &Value, value: &Value, path: &str) -> std::result::Result<(), String> {
    let schema = match schema {
        Value::Bool(true) => return Ok(()),
        Value::Bool(false) => return Err(format!("{path}: nothing is allowed here")),
        Value::Object(schema) => schema,
        _ => return Ok(()),
    };
    if let Some(kind) = schema.get("type") {
        let kinds: Vec<&str> = match kind {
            Value::String(kind) => vec![kind.as_str()],
            Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !kinds.iter().any(|kind| is_type(value, kind)) {
            return Err(format!("{path}: expected {}", kinds.join(" or ")));
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        return Err(format!("{path}: not one of the allowed values"));
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return Err(format!("{path}: must be {constant}"));
    }
    if let Some(number) = value.as_f64() {
        validate_bounds(schema, number, path)?;
    }
    let count = |key: &str| schema.get(key).and_then(Value::as_u64);
    if let Value::String(text) = value {
        let length = text.chars().count() as u64;
        if count("minLength").is_some_and(|min| length < min) || count("maxLength").is_some_and(|max| length > max) {
            return Err(format!("{path}: length {length} is out of bounds"));
        }
    }
    if let Value::Array(items) = value {
        let length = items.len() as u64;
        if count("minItems").is_some_and(|min| length < min) || count("maxItems").is_some_and(|max| length > max) {
            return Err(format!("{path}: {length} items is out of bounds"));
        }
        if let Some(item_schema) = schema.get("items") {
            for (index, item) in items.iter().enumerate() {
                validate_at(item_schema, item, &format!("{path}[{index}]"))?;
            }
        }
    }
    if let Value::Object(object) = value {
        for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            if let Some(name) = name.as_str()
                && !object.contains_key(name)
            {
                return Err(format!("{path}: missing required `{name}`"));
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, inner) in object {
            let at = format!("{path}.{name}");
            match properties.and_then(|properties| properties.get(name)) {
                Some(property) => validate_at(property, inner, &at)?,
                None => {
                    if let Some(extra) = schema.get("additionalProperties") {
                        validate_at(extra, inner, &at)?;
                    }
                }
            }
        }
    }
    if let Some(Value::Array(all)) = schema.get("allOf") {
        for inner in all {
            validate_at(inner, value, path)?;
        }
    }
    if let Some(Value::Array(any)) = schema.get("anyOf")
        && !any.iter().any(|inner| validate_at(inner, value, path).is_ok())
    {
        return Err(format!("{path}: matches none of anyOf"));
    }
    if let Some(Value::Array(one)) = schema.get("oneOf") {
        let matching = one
            .iter()
            .filter(|inner| validate_at(inner, value, path).is_ok())
            .count();
        if matching != 1 {
            return Err(format!("{path}: matches {matching} of oneOf, not exactly one"));
        }
    }
    Ok(())
}

/// Checks a number against the schema's `minimum`, `maximum`,
/// `exclusiveMinimum` and `exclusiveMaximum`; the error names the first it
/// violates.
fn validate_bounds(schema: &Map<String, Value>, number: f64, path: &str) -> std::result::Result<(), String> {
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    for (key, ok) in [
        ("minimum", bound("minimum").is_none_or(|min| number >= min)),
        ("maximum", bound("maximum").is_none_or(|max| number <= max)),
        (
            "exclusiveMinimum",
            bound("exclusiveMinimum").is_none_or(|min| number > min),
        ),
        (
            "exclusiveMaximum",
            bound("exclusiveMaximum").is_none_or(|max| number < max),
        ),
    ] {
        if !ok {
            return Err(format!("{path}: violates {key}"));
        }
    }
    Ok(())
}

fn is_type(value: &Value, kind: &str) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => {
            value.as_i64().is_some() || value.as_u64().is_some() || value.as_f64().is_some_and(|n| n.fract() == 0.0)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "age": {"type": ["integer", "null"], "minimum": 0},
                "pets": {"type": "array", "items": {"enum": ["cat", "dog"]}, "maxItems": 2}
            },
            "required": ["name"],
            "additionalProperties": false
        })
    }

    #[test]
    fn answers_are_checked_against_the_schema() {
        let schema = schema();
        assert!(validate(&schema, &json!({"name": "Alice", "age": 31, "pets": ["cat"]})).is_ok());
        assert!(validate(&schema, &json!({"name": "Alice", "age": null})).is_ok());
        for (bad, why) in [
            (json!({"age": 3}), "missing required `name`"),
            (json!({"name": ""}), "length 0"),
            (json!({"name": "A", "age": -1}), "minimum"),
            (json!({"name": "A", "age": 1.5}), "expected integer"),
            (json!({"name": "A", "pets": ["fish"]}), "$.pets[0]"),
            (json!({"name": "A", "pets": ["cat", "dog", "cat"]}), "3 items"),
            (json!({"name": "A", "extra": 1}), "$.extra"),
            (json!(["not", "an", "object"]), "expected object"),
        ] {
            let error = validate(&schema, &bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn formats_must_be_object_schemas_of_checked_keywords() {
        assert!(check_format(schema().as_object().unwrap()).is_ok());
        let array = json!({"type": "array"});
        assert!(check_format(array.as_object().unwrap()).is_err());
        let unchecked = json!({"type": "object", "properties": {"email": {"type": "string", "format": "email"}}});
        let error = check_format(unchecked.as_object().unwrap()).unwrap_err();
        assert!(
            error.to_string().contains("response_format.properties.email.format"),
            "{error}"
        );
    }
}
