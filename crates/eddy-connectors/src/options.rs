//! The options each connector understands, and the check that rejects the
//! rest: a misspelt option is an error naming it, the closest valid name
//! and every valid one, never silently ignored.
//!
//! In: a table's connector name and leftover options (the engine's own
//! table options, [`TABLE_OPTIONS`], are taken out by the SQL front end).
//! Out: `Ok` or a [`ConnectorError::UnknownOption`].

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::layout::TABLE_OPTIONS;
use eddy_engine::suggest::closest;

use crate::error::{ConnectorError, Result};

const KAFKA_SOURCE_OPTIONS: [&str; 9] = [
    "bootstrap_servers",
    "key_column",
    "topic",
    "format",
    "group_id",
    "start",
    "stop",
    "batch_size",
    "isolation",
];

const KAFKA_SINK_OPTIONS: [&str; 7] = [
    "bootstrap_servers",
    "topic",
    "format",
    "key_column",
    "delivery",
    "transactional_id",
    "omit_nulls",
];

/// Options of the Kafka tables a group job adds for its exchanges
/// (`format = 'arrow'`; see [`crate::kafka::exchange`]).
const EXCHANGE_OPTIONS: [&str; 3] = ["partition_columns", "partitions", "producers"];

/// A true/false option (`'true'`, `'false'`, any case); `default` when
/// the table does not set it.
pub fn flag(
    options: &std::collections::BTreeMap<String, String>,
    name: &str,
    default: bool,
) -> Result<bool> {
    match options.get(name).map(|v| v.to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) if v == "true" => Ok(true),
        Some(v) if v == "false" => Ok(false),
        Some(v) => Err(ConnectorError::bad_option(
            name,
            format!("'{v}' is not true or false"),
        )),
    }
}

/// Whether a table is read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Read by a query.
    Source,
    /// Written by an INSERT (or a query's result).
    Sink,
}

/// The connectors there are, per role.
pub fn connectors(role: Role) -> &'static [&'static str] {
    match role {
        Role::Source => &["file", "ndjson", "stdin", "generator", "nexmark", "kafka"],
        Role::Sink => &[
            "stdout",
            "print",
            "ndjson",
            "file",
            "parquet",
            "kafka",
            "blackhole",
        ],
    }
}

/// The options `connector` takes in `role` (besides `connector` itself).
pub fn options(connector: &str, role: Role) -> Option<&'static [&'static str]> {
    Some(match (role, connector) {
        (Role::Source, "file" | "ndjson") => &["path", "format", "batch_size", "max_line_bytes"],
        (Role::Source, "stdin") => &["format", "batch_size", "max_line_bytes"],
        (Role::Source, "nexmark") => &["stream", "events", "rate", "batch_size"],
        (Role::Source, "generator") => {
            &["stream", "seed", "rate", "count", "realtime", "batch_size"]
        }
        (Role::Sink, "stdout" | "print") => &["tag", "omit_nulls", "format"],
        (Role::Sink, "ndjson" | "file") => &[
            "path",
            "format",
            "omit_nulls",
            "rolling_rows",
            "rolling_bytes",
            "rolling_interval",
            "partition_by",
        ],
        (Role::Sink, "parquet") => &[
            "path",
            "compression",
            "row_group_size",
            "rolling_rows",
            "rolling_bytes",
            "rolling_interval",
            "partition_by",
        ],
        (Role::Sink, "blackhole") => &[],
        (Role::Source, "kafka") => &KAFKA_SOURCE_OPTIONS,
        (Role::Sink, "kafka") => &KAFKA_SINK_OPTIONS,
        _ => return None,
    })
}

/// Checks `spec`'s connector and options for `role`.
pub fn check(spec: &ConnectorSpec, role: Role) -> Result<()> {
    let Some(valid) = options(&spec.connector, role) else {
        let known = connectors(role);
        return Err(ConnectorError::UnknownConnector {
            connector: spec.connector.clone(),
            hint: hint(&spec.connector, known.iter().copied()),
        });
    };
    let engine: &[&str] = match role {
        Role::Source => &TABLE_OPTIONS,
        Role::Sink => &[],
    };
    for option in spec.options.keys() {
        if valid.contains(&option.as_str()) {
            continue;
        }
        if spec.connector == "kafka" && option.starts_with(crate::kafka::config::PROPERTIES_PREFIX)
        {
            continue;
        }
        if spec.connector == "kafka"
            && spec.options.get("format").map(String::as_str)
                == Some(crate::kafka::exchange::FORMAT)
            && EXCHANGE_OPTIONS.contains(&option.as_str())
        {
            continue;
        }
        let mut all: Vec<&str> = valid.iter().chain(engine).copied().collect();
        all.sort_unstable();
        return Err(ConnectorError::UnknownOption {
            option: option.clone(),
            connector: spec.connector.clone(),
            role: match role {
                Role::Source => "source",
                Role::Sink => "sink",
            },
            hint: hint(option, all.iter().copied()),
            valid: if all.is_empty() {
                "none".to_string()
            } else {
                all.join(", ")
            },
        });
    }
    Ok(())
}

fn hint<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(given, known)
        .map(|name| format!("; did you mean '{name}'?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use datafusion::arrow::datatypes::Schema;

    use super::*;

    fn spec(connector: &str, options: &[(&str, &str)]) -> ConnectorSpec {
        ConnectorSpec {
            table: "t".into(),
            connector: connector.into(),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            schema: Arc::new(Schema::empty()),
            declared_at: String::new(),
        }
    }

    #[test]
    fn a_misspelt_option_is_named_with_the_closest_and_every_valid_one() {
        let err = check(
            &spec("file", &[("path", "x"), ("idel_timeout", "1s")]),
            Role::Source,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown option 'idel_timeout'"), "{err}");
        assert!(err.contains("did you mean 'idle_timeout'?"), "{err}");
        assert!(err.contains("allowed_lateness, bad_rows, batch_size, format, idle_timeout, max_future_skew, max_line_bytes, path"), "{err}");
        assert!(check(&spec("file", &[("path", "x")]), Role::Source).is_ok());
        let err = check(&spec("parquet", &[("tag", "x")]), Role::Sink)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown option 'tag' for a parquet sink"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_connector_is_named_with_a_hint() {
        let err = check(&spec("generater", &[]), Role::Source)
            .unwrap_err()
            .to_string();
        assert!(err.contains("did you mean 'generator'?"), "{err}");
    }
}
