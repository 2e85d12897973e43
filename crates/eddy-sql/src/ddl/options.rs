//! A `CREATE TABLE`'s `WITH (...)` options: read as lower-cased keys with
//! literal values (each given once), Flink's `PARTITIONED BY` as the file
//! sinks' `partition_by`, Arroyo's `event_time_field` as a watermark, and
//! the connector they name.
//!
//! In: the parsed statement. Out: the options map (connector taken out),
//! the connector's name, the watermark clause that applies.

use std::collections::BTreeMap;

use datafusion::sql::sqlparser::ast::{
    CreateTable, CreateTableOptions, Expr as SqlExpr, SqlOption, Value,
};

use super::MEMORY_CONNECTOR;
use crate::dialect::arroyo_tables::ArroyoTable;
use crate::dialect::identifiers::IdentifierCase;
use crate::dialect::statements::WatermarkClause;
use crate::error::{Position, Result, SqlError};

fn option_value(expr: &SqlExpr) -> Option<String> {
    match expr {
        SqlExpr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) | Value::Number(s, _) => {
                Some(s.clone())
            }
            Value::Boolean(b) => Some(b.to_string()),
            _ => None,
        },
        SqlExpr::Identifier(id) => Some(id.value.clone()),
        _ => None,
    }
}

/// The table's options, keys lower-cased, with `PARTITIONED BY` as
/// `partition_by`.
pub(super) fn with_options(
    create: &CreateTable,
    case: IdentifierCase,
    position: &Position,
) -> Result<BTreeMap<String, String>> {
    let raw_options = match &create.table_options {
        CreateTableOptions::With(options) | CreateTableOptions::Options(options) => options.clone(),
        CreateTableOptions::None => Vec::new(),
        _ => {
            return Err(SqlError::at(
                position,
                "table options must be given as WITH (key = 'value', ...)",
            ))
        }
    };
    let mut options = BTreeMap::new();
    for option in raw_options {
        let SqlOption::KeyValue { key, value } = option else {
            return Err(SqlError::at(
                position,
                "table options must be key = 'value' pairs",
            ));
        };
        let text = option_value(&value).ok_or_else(|| {
            SqlError::at(
                position,
                format!(
                    "option '{}' needs a literal value, found {value}",
                    key.value
                ),
            )
        })?;
        let name = key.value.to_lowercase();
        if options.insert(name.clone(), text).is_some() {
            return Err(SqlError::at(
                position,
                format!("option '{name}' is given twice in the WITH clause of table '{name_of_table}'; give it once", name_of_table = create.name),
            ));
        }
    }
    // Flink's `PARTITIONED BY (dt, hm)`: the file sinks' `partition_by`.
    if let datafusion::sql::sqlparser::ast::HiveDistributionStyle::PARTITIONED { columns } =
        &create.hive_distribution
    {
        let names: Vec<String> = columns.iter().map(|c| case.name(&c.name)).collect();
        for name in &names {
            if !create.columns.iter().any(|c| case.name(&c.name) == *name) {
                return Err(SqlError::at(
                    position,
                    format!(
                        "PARTITIONED BY column '{name}' is not a column of '{}'",
                        create.name
                    ),
                ));
            }
        }
        if options
            .insert("partition_by".to_string(), names.join(","))
            .is_some()
        {
            return Err(SqlError::at(
                position,
                "PARTITIONED BY and the partition_by option say the same thing: give one",
            ));
        }
    }
    Ok(options)
}

/// The watermark that applies: the `WATERMARK FOR` clause, or Arroyo's
/// `event_time_field` with its default bound (not both).
pub(super) fn watermark(
    clause: Option<&WatermarkClause>,
    arroyo: &ArroyoTable,
    position: &Position,
) -> Result<Option<WatermarkClause>> {
    match (clause, &arroyo.event_time_field) {
        (None, Some(field)) => {
            let column = datafusion::sql::sqlparser::ast::Ident::new(field.clone());
            Ok(Some(WatermarkClause {
                bound_column: column.clone(),
                column,
                bound_ms: crate::dialect::arroyo_tables::DEFAULT_BOUND_MS,
                position: position.clone(),
            }))
        }
        (Some(_), Some(_)) => Err(SqlError::at(
            position,
            "event_time_field and a WATERMARK clause say the same thing: give one",
        )),
        (clause, None) => Ok(clause.cloned()),
    }
}

/// The `connector` option, taken out of `options`; a table without a
/// `WITH` clause is a memory table, which declares no watermark.
pub(super) fn connector(
    options: &mut BTreeMap<String, String>,
    table: &str,
    has_watermark: bool,
    position: &Position,
) -> Result<String> {
    let connector = match options.remove("connector") {
        Some(connector) => connector.to_lowercase(),
        // No WITH at all: a table that passes rows between queries.
        None if options.is_empty() => MEMORY_CONNECTOR.to_string(),
        None => {
            return Err(SqlError::at(
                position,
                format!("table '{table}' needs WITH (connector = '...') (a table without a connector takes no options)"),
            ))
        }
    };
    if connector == MEMORY_CONNECTOR && has_watermark {
        return Err(SqlError::at(
            position,
            format!("table '{table}' has no connector: it passes on the rows inserted into it with their event time and watermark, so it declares none (drop its WATERMARK clause)"),
        ));
    }

    Ok(connector)
}

/// Whether the table reads a Debezium change feed.
pub(super) fn is_debezium(options: &BTreeMap<String, String>) -> bool {
    options
        .get("format")
        .is_some_and(|f| f.trim().eq_ignore_ascii_case("debezium-json"))
}
