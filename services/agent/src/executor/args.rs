//! Reads the arguments of a tool call from its JSON input: texts, lists,
//! clamped integers and dates. A missing or malformed required argument is
//! an `InvalidArgument` error naming it.

use roncho_core::{Error, Result};
use serde_json::Value;

/// A text argument, if given.
pub(super) fn text_arg(input: &Value, key: &str) -> Option<String> {
    input.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// A text argument that must be given and not blank.
pub(super) fn required_text(input: &Value, key: &str) -> Result<String> {
    text_arg(input, key)
        .filter(|text| !text.trim().is_empty())
        .ok_or_else(|| Error::invalid(key, "is required"))
}

/// A list-of-texts argument that must be given (non-texts in it are skipped).
pub(super) fn text_list(input: &Value, key: &str) -> Result<Vec<String>> {
    input
        .get(key)
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .ok_or_else(|| Error::invalid(key, "must be a list of strings"))
}

/// An integer argument, defaulted and clamped to `[min, max]`.
pub(super) fn int_arg(input: &Value, key: &str, default: i64, min: i64, max: i64) -> i64 {
    input
        .get(key)
        .and_then(Value::as_i64)
        .unwrap_or(default)
        .clamp(min, max)
}

/// An ISO date (`2024-01-15`) or date-time (RFC 3339) as microseconds.
pub(super) fn date_arg(input: &Value, key: &str) -> Result<Option<i64>> {
    let Some(text) = input.get(key).and_then(Value::as_str).filter(|text| !text.is_empty()) else {
        return Ok(None);
    };
    let invalid = || Error::invalid(key, format!("`{text}` is not an ISO date such as 2024-01-15"));
    let moment = match time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339) {
        Ok(moment) => moment,
        Err(_) => {
            let date = time::Date::parse(text, time::macros::format_description!("[year]-[month]-[day]"))
                .map_err(|_| invalid())?;
            date.midnight().assume_utc()
        }
    };
    Ok(Some(
        i64::try_from(moment.unix_timestamp_nanos() / 1_000).map_err(|_| invalid())?,
    ))
}
