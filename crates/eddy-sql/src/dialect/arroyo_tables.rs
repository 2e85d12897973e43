//! Arroyo's table options, read as Arroyo reads them, so its tables' DDL
//! runs as written:
//!
//! - `type = 'source' | 'sink'` says how the table is used; a query reading
//!   a table declared a sink (or writing one declared a source) is refused;
//! - `event_time_field = 'col'`: the column is the table's event time, with
//!   Arroyo's default watermark (the largest time seen less 1 s);
//! - `'json.unstructured' = 'true'`: each line is read whole, as JSON text,
//!   into the table's one column (`value JSON`);
//! - `format = 'debezium_json'`: eddy's `debezium-json`.
//!
//! In: a table's options (keys lower-cased). Out: the same options without
//! these, and what they said ([`ArroyoTable`]).

use std::collections::BTreeMap;

use crate::error::{Position, Result, SqlError};

/// Arroyo's default watermark bound for a table with an event-time field.
pub const DEFAULT_BOUND_MS: i64 = 1_000;

/// What a table's Arroyo options said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArroyoTable {
    /// `type`: `source` or `sink`.
    pub role: Option<String>,
    /// `event_time_field`.
    pub event_time_field: Option<String>,
    /// `json.unstructured`.
    pub unstructured: bool,
}

/// Takes Arroyo's options out of `options` (see the module docs).
pub fn take_arroyo_options(
    options: &mut BTreeMap<String, String>,
    position: &Position,
) -> Result<ArroyoTable> {
    let role = match options.remove("type") {
        None => None,
        Some(role) => {
            let role = role.to_ascii_lowercase();
            if !matches!(role.as_str(), "source" | "sink") {
                return Err(SqlError::at(
                    position,
                    format!("type: '{role}' is not one of 'source', 'sink'"),
                ));
            }
            Some(role)
        }
    };
    let unstructured = match options.remove("json.unstructured") {
        None => false,
        Some(flag) => match flag.to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            other => {
                return Err(SqlError::at(
                    position,
                    format!("json.unstructured: '{other}' is not 'true' or 'false'"),
                ))
            }
        },
    };
    if let Some(format) = options.get_mut("format") {
        if format.eq_ignore_ascii_case("debezium_json") {
            *format = "debezium-json".to_string();
        }
    }
    Ok(ArroyoTable {
        role,
        event_time_field: options.remove("event_time_field"),
        unstructured,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arroyo_options_are_taken_out_and_read() {
        let at = Position {
            file: "t.sql".into(),
            line: 1,
            column: 1,
        };
        let mut options: BTreeMap<String, String> = [
            ("type", "source"),
            ("event_time_field", "timestamp"),
            ("json.unstructured", "true"),
            ("format", "debezium_json"),
            ("path", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let table = take_arroyo_options(&mut options, &at).unwrap();
        assert_eq!(table.role.as_deref(), Some("source"));
        assert_eq!(table.event_time_field.as_deref(), Some("timestamp"));
        assert!(table.unstructured);
        assert_eq!(options.len(), 2);
        assert_eq!(options["format"], "debezium-json");
        let mut bad: BTreeMap<String, String> = [("type".to_string(), "lookup".to_string())].into();
        let err = take_arroyo_options(&mut bad, &at).unwrap_err();
        assert!(err.to_string().contains("'lookup' is not one of"), "{err}");
    }
}
