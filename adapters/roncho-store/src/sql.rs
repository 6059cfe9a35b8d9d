//! SQL text building with numbered binds, and rendering of filter trees in
//! the two dialects.

use roncho_core::filter::{Comparison, Field, FieldType, Filter, Scalar, Target};
use roncho_core::{Error, Result};
use sqlx::any::AnyArguments;
use sqlx::{Any, Arguments};

/// The SQL flavour a store speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    Sqlite,
}

impl Dialect {
    /// Returns text `column` in a form the planner will not use an index for
    /// (SQLite's unary `+`, Postgres' `|| ''`), so that a more selective
    /// condition's index drives the query. SQLite without statistics takes
    /// `workspace_name = ?` for selective, and scanned a whole workspace to
    /// find a few ids; Postgres did the same with statistics older than a
    /// bulk load (no analyze yet): 40 ids in a million-message workspace took
    /// 50 ms through a bitmap of the workspace instead of 2 ms by id.
    pub fn unindexed(self, column: &str) -> String {
        match self {
            Dialect::Sqlite => format!("+{column}"),
            Dialect::Postgres => format!("({column} || '')"),
        }
    }

    /// Returns the aggregate that gathers `columns` of each row into one
    /// JSON array of arrays, as text (`[]` for no row), in `order_by`'s
    /// order: a page of rows in one column, read in one trip.
    pub fn json_rows(self, columns: &str, order_by: &str) -> String {
        match self {
            Dialect::Sqlite => format!("json_group_array(json_array({columns}) ORDER BY {order_by})"),
            Dialect::Postgres => {
                format!("COALESCE(json_agg(json_build_array({columns}) ORDER BY {order_by})::text, '[]')")
            }
        }
    }
}

/// A value bound to a `$N` placeholder.
#[derive(Debug, Clone, PartialEq)]
pub enum Bind {
    Text(String),
    Integer(i64),
    Float(f64),
    /// A NULL typed as an integer, so Postgres accepts it for BIGINT columns.
    NullInteger,
    /// A NULL typed as text.
    NullText,
    Bytes(Vec<u8>),
}

impl From<&str> for Bind {
    fn from(value: &str) -> Self {
        Bind::Text(value.to_owned())
    }
}

impl From<String> for Bind {
    fn from(value: String) -> Self {
        Bind::Text(value)
    }
}

impl From<i64> for Bind {
    fn from(value: i64) -> Self {
        Bind::Integer(value)
    }
}

impl From<Option<String>> for Bind {
    fn from(value: Option<String>) -> Self {
        value.map_or(Bind::NullText, Bind::Text)
    }
}

impl From<Option<i64>> for Bind {
    fn from(value: Option<i64>) -> Self {
        value.map_or(Bind::NullInteger, Bind::Integer)
    }
}

/// SQL text under construction with its binds; placeholders are `$1, $2, ...`
/// in both dialects.
#[derive(Debug, Default)]
pub struct Sql {
    pub text: String,
    pub binds: Vec<Bind>,
}

impl Sql {
    /// Returns a builder starting with `text`.
    pub fn new(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            binds: Vec::new(),
        }
    }

    /// Appends SQL text.
    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends a placeholder bound to `value`.
    /// Appends `(v1, v2, ...)`, binding each value.
    pub fn push_list<T: Clone + Into<Bind>>(&mut self, items: &[T]) -> &mut Self {
        self.push("(");
        for (index, item) in items.iter().enumerate() {
            if index > 0 {
                self.push(", ");
            }
            self.bind(item.clone());
        }
        self.push(")")
    }

    pub fn bind(&mut self, value: impl Into<Bind>) -> &mut Self {
        self.binds.push(value.into());
        let placeholder = format!("${}", self.binds.len());
        self.text.push_str(&placeholder);
        self
    }

    /// Returns the sqlx arguments of the binds.
    pub fn arguments(&self) -> Result<AnyArguments> {
        let mut arguments = AnyArguments::default();
        for bind in &self.binds {
            let added = match bind {
                Bind::Text(value) => arguments.add(value.clone()),
                Bind::Integer(value) => arguments.add(*value),
                Bind::Float(value) => arguments.add(*value),
                Bind::NullInteger => arguments.add(Option::<i64>::None),
                Bind::NullText => arguments.add(Option::<String>::None),
                Bind::Bytes(value) => arguments.add(value.clone()),
            };
            added.map_err(|error| Error::Internal(format!("binding a query argument: {error}")))?;
        }
        Ok(arguments)
    }

    /// Returns a sqlx query over this text and its binds, in `dialect`'s
    /// placeholders.
    pub fn query(&self, dialect: Dialect) -> Result<sqlx::query::Query<'_, Any, AnyArguments>> {
        let text = match dialect {
            Dialect::Sqlite => positional(&self.text, self.binds.len()).unwrap_or_else(|| self.text.clone()),
            Dialect::Postgres => self.text.clone(),
        };
        // Every value is a bind; the text holds only SQL written in this crate and quoted JSON paths of validated keys.
        Ok(sqlx::query_with(sqlx::AssertSqlSafe(text), self.arguments()?))
    }
}

impl Dialect {
    /// Returns the dialect a connection speaks.
    pub fn of(connection: &sqlx::AnyConnection) -> Self {
        if connection.backend_name() == "SQLite" {
            Dialect::Sqlite
        } else {
            Dialect::Postgres
        }
    }
}

/// Returns `text` with its placeholders `$1, $2, ..., $binds` (each once, in
/// that order, outside quotes) as SQLite's anonymous `?`; `None` when they
/// are not exactly that.
///
/// SQLite takes `$N` for a named parameter, and finding a parameter's name
/// walks the list of all of them, so binding a statement of n parameters
/// cost O(n²): 14 % of the SQLite writer's time for a batch of 100 messages
/// (1,000 parameters). Anonymous parameters bind by position.
fn positional(text: &str, binds: usize) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut next = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(open), c) if c == open => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, '$') if chars.peek().is_some_and(char::is_ascii_digit) => {
                let mut number = 0usize;
                while let Some(digit) = chars.peek().and_then(|d| d.to_digit(10)) {
                    number = number.checked_mul(10)?.checked_add(digit as usize)?;
                    chars.next();
                }
                if number != next {
                    return None;
                }
                next += 1;
                out.push('?');
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    (next == binds + 1).then_some(out)
}

/// The alias of the table a filter's columns belong to in a statement
/// (`m` for `messages m`); `""` when the statement names no alias.
pub type Alias = &'static str;

/// `column` of the table `alias`: the SQL a filter condition reads.
fn qualified(alias: Alias, column: &str) -> String {
    if alias.is_empty() {
        column.to_owned()
    } else {
        format!("{alias}.{column}")
    }
}

/// Appends the SQL condition of `filter` to `sql`: each key reads the
/// column its schema field names (see [`roncho_core::filter::Field`]).
pub fn render_filter(sql: &mut Sql, dialect: Dialect, filter: &Filter, alias: Alias) -> Result<()> {
    match filter {
        Filter::All => {
            sql.push("1=1");
        }
        Filter::Nothing => {
            sql.push("1=0");
        }
        Filter::And(items) | Filter::Or(items) => {
            let joiner = if matches!(filter, Filter::And(_)) {
                " AND "
            } else {
                " OR "
            };
            sql.push("(");
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    sql.push(joiner);
                }
                render_filter(sql, dialect, item, alias)?;
            }
            sql.push(")");
        }
        Filter::Not(items) => {
            sql.push("(");
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    sql.push(" AND ");
                }
                sql.push("(");
                render_filter(sql, dialect, item, alias)?;
                sql.push(") IS NOT TRUE");
            }
            sql.push(")");
        }
        Filter::Condition {
            target: Target::Column(field),
            comparison,
        } if field.field_type == FieldType::Sources => render_sources(sql, alias, *field, comparison)?,
        Filter::Condition {
            target: Target::Column(field),
            comparison,
        } => {
            render_column(sql, dialect, &qualified(alias, field.column), *field, comparison)?;
        }
        Filter::Condition {
            target: Target::Metadata(path),
            comparison,
        } => {
            let column = qualified(alias, roncho_core::filter::METADATA_COLUMN);
            let json = JsonPath {
                dialect,
                column: &column,
                path,
            };
            render_json(sql, &json, comparison)?;
        }
    }
    Ok(())
}

/// A conclusion's sources are rows of `conclusion_sources`: each id asked
/// for must have one (`contains`, every id of a list), or one of the ids
/// must (`in`). Each is one indexed lookup by source, which gives the
/// conclusions' ids, not a lookup per conclusion row.
fn render_sources(sql: &mut Sql, alias: Alias, field: Field, comparison: &Comparison) -> Result<()> {
    let groups: Vec<Vec<&Scalar>> = match comparison {
        Comparison::Contains(id) => vec![vec![id]],
        Comparison::ContainsAll(ids) => ids.iter().map(|id| vec![id]).collect(),
        Comparison::In(ids) if ids.is_empty() => {
            sql.push("(1 = 0)");
            return Ok(());
        }
        Comparison::In(ids) => vec![ids.iter().collect()],
        _ => {
            return Err(Error::invalid(
                format!("filters.{}", field.key),
                "takes only `contains` or `in`",
            ));
        }
    };
    sql.push("(");
    for (index, ids) in groups.into_iter().enumerate() {
        if index > 0 {
            sql.push(" AND ");
        }
        sql.push(&qualified(alias, "id"))
            .push(" IN (SELECT cs.document_id FROM conclusion_sources cs WHERE cs.workspace_name = ")
            .push(&qualified(alias, "workspace_name"))
            .push(" AND cs.source_id IN (");
        for (position, id) in ids.into_iter().enumerate() {
            let Scalar::Text(id) = id else {
                return Err(Error::invalid(format!("filters.{}", field.key), "ids are strings"));
            };
            if position > 0 {
                sql.push(", ");
            }
            sql.bind(id.as_str());
        }
        sql.push("))");
    }
    sql.push(")");
    Ok(())
}

fn column_bind(field: Field, scalar: &Scalar) -> Result<Bind> {
    let mismatch = || Error::invalid(format!("filters.{}", field.key), "has a value of the wrong type");
    match (field.field_type, scalar) {
        (FieldType::Text, Scalar::Text(text)) => Ok(Bind::Text(text.clone())),
        (FieldType::Integer, Scalar::Integer(value)) | (FieldType::Timestamp, Scalar::Timestamp(value)) => {
            Ok(Bind::Integer(*value))
        }
        (FieldType::Boolean, Scalar::Boolean(value)) => Ok(Bind::Integer(i64::from(*value))),
        _ => Err(mismatch()),
    }
}

fn render_column(sql: &mut Sql, dialect: Dialect, column: &str, field: Field, comparison: &Comparison) -> Result<()> {
    let binary = |sql: &mut Sql, operator: &str, scalar: &Scalar| -> Result<()> {
        sql.push(column).push(operator).bind(column_bind(field, scalar)?);
        Ok(())
    };
    match comparison {
        Comparison::Eq(scalar) => binary(sql, " = ", scalar)?,
        Comparison::Ne(scalar) => {
            let operator = if dialect == Dialect::Postgres {
                " IS DISTINCT FROM "
            } else {
                " IS NOT "
            };
            binary(sql, operator, scalar)?;
        }
        Comparison::Gt(scalar) => binary(sql, " > ", scalar)?,
        Comparison::Gte(scalar) => binary(sql, " >= ", scalar)?,
        Comparison::Lt(scalar) => binary(sql, " < ", scalar)?,
        Comparison::Lte(scalar) => binary(sql, " <= ", scalar)?,
        Comparison::In(items) => {
            sql.push(column).push(" IN (");
            for (index, scalar) in items.iter().enumerate() {
                if index > 0 {
                    sql.push(", ");
                }
                sql.bind(column_bind(field, scalar)?);
            }
            sql.push(")");
        }
        Comparison::Contains(Scalar::Text(needle)) => {
            sql.push(substring_function(dialect))
                .push("(")
                .push(column)
                .push(", ")
                .bind(needle.as_str())
                .push(") > 0");
        }
        Comparison::IContains(needle) => {
            sql.push(substring_function(dialect))
                .push("(lower(")
                .push(column)
                .push("), lower(");
            sql.bind(needle.as_str()).push(")) > 0");
        }
        Comparison::IsNull => {
            sql.push(column).push(" IS NULL");
        }
        Comparison::IsNotNull => {
            sql.push(column).push(" IS NOT NULL");
        }
        Comparison::Contains(_) | Comparison::ContainsAll(_) => {
            return Err(Error::invalid(
                format!("filters.{}", field.key),
                "contains needs a string on a text column",
            ));
        }
    }
    Ok(())
}

fn substring_function(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Postgres => "strpos",
        Dialect::Sqlite => "instr",
    }
}

/// A JSON value at a path inside a text column holding a JSON object.
struct JsonPath<'a> {
    dialect: Dialect,
    column: &'a str,
    path: &'a [String],
}

/// The JSON type of a value, as each dialect names it.
#[derive(Clone, Copy)]
enum JsonKind {
    String,
    Number,
    Array,
    True,
    False,
    Null,
}

impl JsonPath<'_> {
    /// Appends the expression of the JSON value (Postgres) or the path (SQLite).
    fn push_value(&self, sql: &mut Sql) {
        match self.dialect {
            Dialect::Postgres => {
                sql.push("(").push(self.column).push("::jsonb");
                for key in self.path {
                    sql.push(" -> ").bind(key.as_str());
                }
                sql.push(")");
            }
            Dialect::Sqlite => {
                let path: String = std::iter::once("$".to_owned())
                    .chain(self.path.iter().map(|key| format!(".\"{key}\"")))
                    .collect();
                sql.push(self.column).push(", ").bind(path);
            }
        }
    }

    /// Appends "the value at the path has this JSON kind".
    fn push_is_kind(&self, sql: &mut Sql, kind: JsonKind) {
        match self.dialect {
            Dialect::Postgres => {
                let name = match kind {
                    JsonKind::String => "= 'string'",
                    JsonKind::Number => "= 'number'",
                    JsonKind::Array => "= 'array'",
                    JsonKind::True | JsonKind::False => "= 'boolean'",
                    JsonKind::Null => "= 'null'",
                };
                sql.push("jsonb_typeof");
                self.push_value(sql);
                sql.push(" ").push(name);
                match kind {
                    JsonKind::True => {
                        sql.push(" AND ");
                        self.push_text(sql);
                        sql.push(" = 'true'");
                    }
                    JsonKind::False => {
                        sql.push(" AND ");
                        self.push_text(sql);
                        sql.push(" = 'false'");
                    }
                    _ => {}
                }
            }
            Dialect::Sqlite => {
                let name = match kind {
                    JsonKind::String => "= 'text'",
                    JsonKind::Number => "IN ('integer', 'real')",
                    JsonKind::Array => "= 'array'",
                    JsonKind::True => "= 'true'",
                    JsonKind::False => "= 'false'",
                    JsonKind::Null => "= 'null'",
                };
                sql.push("json_type(");
                self.push_value(sql);
                sql.push(") ").push(name);
            }
        }
    }

    /// Appends the scalar at the path as SQL text.
    fn push_text(&self, sql: &mut Sql) {
        match self.dialect {
            Dialect::Postgres => {
                self.push_value(sql);
                sql.push(" #>> '{}'");
            }
            Dialect::Sqlite => {
                sql.push("json_extract(");
                self.push_value(sql);
                sql.push(")");
            }
        }
    }

    /// Appends the number at the path as a SQL float.
    fn push_number(&self, sql: &mut Sql) {
        match self.dialect {
            Dialect::Postgres => {
                sql.push("(");
                self.push_text(sql);
                sql.push(")::float8");
            }
            Dialect::Sqlite => self.push_text(sql),
        }
    }
}

fn render_json(sql: &mut Sql, json: &JsonPath<'_>, comparison: &Comparison) -> Result<()> {
    match comparison {
        Comparison::Eq(scalar) => json_compare(sql, json, " = ", scalar)?,
        Comparison::Ne(scalar) => {
            sql.push("NOT COALESCE(");
            json_compare(sql, json, " = ", scalar)?;
            sql.push(", FALSE)");
        }
        Comparison::Gt(scalar) => json_ordered(sql, json, " > ", scalar)?,
        Comparison::Gte(scalar) => json_ordered(sql, json, " >= ", scalar)?,
        Comparison::Lt(scalar) => json_ordered(sql, json, " < ", scalar)?,
        Comparison::Lte(scalar) => json_ordered(sql, json, " <= ", scalar)?,
        Comparison::In(items) => {
            sql.push("(");
            for (index, scalar) in items.iter().enumerate() {
                if index > 0 {
                    sql.push(" OR ");
                }
                json_compare(sql, json, " = ", scalar)?;
            }
            sql.push(")");
        }
        Comparison::Contains(scalar) => {
            sql.push("(");
            json_array_contains(sql, json, scalar);
            if let Scalar::Text(needle) = scalar {
                sql.push(" OR (");
                json.push_is_kind(sql, JsonKind::String);
                sql.push(" AND ").push(substring_function(json.dialect)).push("(");
                json.push_text(sql);
                sql.push(", ").bind(needle.as_str()).push(") > 0)");
            }
            sql.push(")");
        }
        Comparison::ContainsAll(items) => {
            sql.push("(");
            json.push_is_kind(sql, JsonKind::Array);
            for scalar in items {
                sql.push(" AND ");
                json_array_contains(sql, json, scalar);
            }
            sql.push(")");
        }
        Comparison::IContains(needle) => {
            sql.push("(");
            json.push_is_kind(sql, JsonKind::String);
            sql.push(" AND ").push(substring_function(json.dialect)).push("(lower(");
            json.push_text(sql);
            sql.push("), lower(").bind(needle.as_str()).push(")) > 0)");
        }
        Comparison::IsNull => {
            sql.push("(");
            json.push_is_kind(sql, JsonKind::Null);
            sql.push(") IS NOT FALSE");
        }
        Comparison::IsNotNull => {
            sql.push("(");
            json.push_is_kind(sql, JsonKind::Null);
            sql.push(") IS FALSE");
        }
    }
    Ok(())
}

/// Appends "the value at the path equals (or compares with) the scalar",
/// type-aware: a string never equals a number.
fn json_compare(sql: &mut Sql, json: &JsonPath<'_>, operator: &str, scalar: &Scalar) -> Result<()> {
    sql.push("COALESCE((");
    match scalar {
        Scalar::Text(text) => {
            json.push_is_kind(sql, JsonKind::String);
            sql.push(" AND ");
            json.push_text(sql);
            sql.push(operator).bind(text.as_str());
        }
        Scalar::Integer(_) | Scalar::Float(_) => {
            json.push_is_kind(sql, JsonKind::Number);
            sql.push(" AND ");
            json.push_number(sql);
            sql.push(operator).bind(float_bind(scalar));
        }
        Scalar::Boolean(value) => json.push_is_kind(sql, if *value { JsonKind::True } else { JsonKind::False }),
        Scalar::Timestamp(_) => {
            return Err(Error::invalid(
                "filters.metadata",
                "timestamps are compared as ISO strings",
            ));
        }
    }
    sql.push("), FALSE)");
    Ok(())
}

fn json_ordered(sql: &mut Sql, json: &JsonPath<'_>, operator: &str, scalar: &Scalar) -> Result<()> {
    if matches!(scalar, Scalar::Boolean(_)) {
        return Err(Error::invalid(
            "filters.metadata",
            "gt/gte/lt/lte need a number or a string",
        ));
    }
    json_compare(sql, json, operator, scalar)
}

fn float_bind(scalar: &Scalar) -> Bind {
    match scalar {
        #[expect(
            clippy::cast_precision_loss,
            reason = "JSON numbers compare as doubles, as in Postgres jsonb"
        )]
        Scalar::Integer(value) => Bind::Float(*value as f64),
        Scalar::Float(value) => Bind::Float(*value),
        _ => Bind::NullInteger,
    }
}

/// Appends "the value at the path is an array holding the scalar".
fn json_array_contains(sql: &mut Sql, json: &JsonPath<'_>, scalar: &Scalar) {
    match json.dialect {
        Dialect::Postgres => {
            sql.push("COALESCE(");
            json.push_value(sql);
            sql.push(" @> jsonb_build_array(");
            match scalar {
                Scalar::Text(text) => {
                    sql.bind(text.as_str()).push("::text");
                }
                Scalar::Boolean(value) => {
                    sql.push(if *value { "true" } else { "false" });
                }
                other => {
                    sql.bind(float_bind(other)).push("::float8");
                }
            }
            sql.push(") AND jsonb_typeof");
            json.push_value(sql);
            sql.push(" = 'array', FALSE)");
        }
        Dialect::Sqlite => {
            sql.push("(COALESCE(json_type(");
            json.push_value(sql);
            sql.push(") = 'array', FALSE) AND EXISTS (SELECT 1 FROM json_each(");
            json.push_value(sql);
            sql.push(") AS element WHERE ");
            match scalar {
                Scalar::Text(text) => {
                    sql.push("element.type = 'text' AND element.value = ")
                        .bind(text.as_str());
                }
                Scalar::Boolean(value) => {
                    sql.push(if *value {
                        "element.type = 'true'"
                    } else {
                        "element.type = 'false'"
                    });
                }
                other => {
                    sql.push("element.type IN ('integer', 'real') AND element.value = ")
                        .bind(float_bind(other));
                }
            }
            sql.push("))");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::positional;

    #[test]
    fn sqlite_gets_anonymous_placeholders_in_order_outside_quotes() {
        assert_eq!(
            positional("SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)", 3).as_deref(),
            Some("SELECT a FROM t WHERE b = ? AND c IN (?, ?)")
        );
        // JSON paths and quoted names keep their dollars.
        assert_eq!(
            positional(
                "SELECT json_extract(m, '$.a') FROM \"t$1\" WHERE x = $1 AND y = 'it''s $2'",
                1
            )
            .as_deref(),
            Some("SELECT json_extract(m, '$.a') FROM \"t$1\" WHERE x = ? AND y = 'it''s $2'")
        );
        assert_eq!(positional("SELECT 1", 0).as_deref(), Some("SELECT 1"));
        assert_eq!(positional("$1, $10, $2", 3), None, "out of order stays numbered");
        assert_eq!(
            positional("$1 OR $1", 1),
            None,
            "a placeholder used twice stays numbered"
        );
        assert_eq!(positional("$1, $2", 3), None, "a bind without a placeholder");
    }
}
