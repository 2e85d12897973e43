//! Delta Lake schemas: eddy's SQL types as Delta's JSON schema and back,
//! and whether a sink may append to an existing table.
//!
//! In: an Arrow schema (a sink's columns) or a table's `schemaString`.
//! Out: Delta's schema JSON, the Arrow schema of the Parquet files eddy
//! writes, the Arrow schema a reader gets, or an error naming the column.
//!
//! | eddy | Delta | in the files |
//! |---|---|---|
//! | BOOLEAN, TINYINT .. BIGINT | boolean, byte, short, integer, long | the same |
//! | FLOAT, DOUBLE, DECIMAL(p,s) | float, double, decimal(p,s) | the same |
//! | VARCHAR, BYTEA | string, binary | plain strings and bytes |
//! | DATE | date | date |
//! | TIMESTAMP | timestamp (UTC) | microseconds, adjusted to UTC |
//! | ROW(...), ARRAY, MAP | struct, array, map | the same, recursively |
//!
//! Unsigned integers, intervals and times have no Delta type and are
//! refused, as are column names Delta tables without column mapping
//! cannot hold (` ,;{}()\n\t=`).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use serde_json::{json, Value};

use crate::error::{ConnectorError, Result};

fn refused(column: &str, why: impl std::fmt::Display) -> ConnectorError {
    ConnectorError::bad_option("connector", format!("column '{column}': {why}"))
}

/// The Delta type of an Arrow type; `column` names it in errors.
fn delta_type(column: &str, data_type: &DataType) -> Result<Value> {
    Ok(match data_type {
        DataType::Boolean => json!("boolean"),
        DataType::Int8 => json!("byte"),
        DataType::Int16 => json!("short"),
        DataType::Int32 => json!("integer"),
        DataType::Int64 => json!("long"),
        DataType::Float32 => json!("float"),
        DataType::Float64 => json!("double"),
        DataType::Decimal128(p, s) => json!(format!("decimal({p},{s})")),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => json!("string"),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => json!("binary"),
        DataType::Date32 | DataType::Date64 => json!("date"),
        DataType::Timestamp(_, _) => json!("timestamp"),
        DataType::Struct(fields) => struct_type(fields)?,
        DataType::List(item) | DataType::LargeList(item) => json!({
            "type": "array",
            "elementType": delta_type(column, item.data_type())?,
            "containsNull": item.is_nullable(),
        }),
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(refused(column, "a map without key and value"));
            };
            json!({
                "type": "map",
                "keyType": delta_type(column, kv[0].data_type())?,
                "valueType": delta_type(column, kv[1].data_type())?,
                "valueContainsNull": kv[1].is_nullable(),
            })
        }
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            return Err(refused(
                column,
                format!("{data_type} has no Delta type (Delta's integers are signed); CAST it to BIGINT"),
            ))
        }
        other => {
            return Err(refused(
                column,
                format!("{other} has no Delta type; CAST it to one Delta has (string, long, double, timestamp, ...)"),
            ))
        }
    })
}

fn check_name(name: &str) -> Result<()> {
    if let Some(c) = name.chars().find(|c| " ,;{}()\n\t=".contains(*c)) {
        return Err(refused(
            name,
            format!("Delta tables cannot name a column with {c:?} in it; rename it with AS"),
        ));
    }
    Ok(())
}

fn struct_type(fields: &Fields) -> Result<Value> {
    let fields = fields
        .iter()
        .map(|f| {
            check_name(f.name())?;
            Ok(json!({
                "name": f.name(),
                "type": delta_type(f.name(), f.data_type())?,
                "nullable": f.is_nullable(),
                "metadata": {},
            }))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(json!({ "type": "struct", "fields": fields }))
}

/// Delta's schema JSON of `schema` (a sink's columns).
pub fn to_delta(schema: &Schema) -> Result<String> {
    Ok(struct_type(schema.fields())?.to_string())
}

/// The Arrow type eddy writes into the files for `data_type`.
fn physical(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Timestamp(_, _) => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        DataType::Date64 => DataType::Date32,
        DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
        DataType::Struct(fields) => DataType::Struct(physical_fields(fields)),
        DataType::List(item) | DataType::LargeList(item) => {
            DataType::List(Arc::new(physical_field(item)))
        }
        other => other.clone(),
    }
}

fn physical_field(field: &Field) -> Field {
    field.clone().with_data_type(physical(field.data_type()))
}

fn physical_fields(fields: &Fields) -> Fields {
    fields.iter().map(|f| physical_field(f)).collect()
}

/// The Arrow schema of the Parquet files eddy writes for `schema`.
pub fn physical_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(physical_fields(schema.fields())))
}

/// The Arrow type a reader gets for a Delta type.
fn arrow_type(column: &str, value: &Value) -> Result<DataType> {
    if let Some(name) = value.as_str() {
        return Ok(match name {
            "boolean" => DataType::Boolean,
            "byte" => DataType::Int8,
            "short" => DataType::Int16,
            "integer" => DataType::Int32,
            "long" => DataType::Int64,
            "float" => DataType::Float32,
            "double" => DataType::Float64,
            "string" => DataType::Utf8,
            "binary" => DataType::Binary,
            "date" => DataType::Date32,
            "timestamp" => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            "timestamp_ntz" => DataType::Timestamp(TimeUnit::Microsecond, None),
            decimal if decimal.starts_with("decimal(") => {
                let inner = decimal.trim_start_matches("decimal(").trim_end_matches(')');
                let (p, s) = inner
                    .split_once(',')
                    .and_then(|(p, s)| Some((p.trim().parse().ok()?, s.trim().parse().ok()?)))
                    .ok_or_else(|| refused(column, format!("cannot read type '{decimal}'")))?;
                DataType::Decimal128(p, s)
            }
            other => {
                return Err(refused(
                    column,
                    format!("eddy cannot read Delta type '{other}'"),
                ))
            }
        });
    }
    match value.get("type").and_then(Value::as_str) {
        Some("struct") => Ok(DataType::Struct(arrow_fields(value)?)),
        Some("array") => {
            let item = arrow_type(column, &value["elementType"])?;
            let nullable = value["containsNull"].as_bool().unwrap_or(true);
            Ok(DataType::List(Arc::new(Field::new(
                "element", item, nullable,
            ))))
        }
        Some("map") => {
            let key = arrow_type(column, &value["keyType"])?;
            let item = arrow_type(column, &value["valueType"])?;
            let nullable = value["valueContainsNull"].as_bool().unwrap_or(true);
            let entries = Field::new(
                "key_value",
                DataType::Struct(Fields::from(vec![
                    Field::new("key", key, false),
                    Field::new("value", item, nullable),
                ])),
                false,
            );
            Ok(DataType::Map(Arc::new(entries), false))
        }
        _ => Err(refused(
            column,
            format!("eddy cannot read Delta type {value}"),
        )),
    }
}

fn arrow_fields(value: &Value) -> Result<Fields> {
    let fields = value["fields"].as_array().cloned().unwrap_or_default();
    fields
        .iter()
        .map(|f| {
            let name = f["name"].as_str().unwrap_or_default();
            Ok(Field::new(
                name,
                arrow_type(name, &f["type"])?,
                f["nullable"].as_bool().unwrap_or(true),
            ))
        })
        .collect()
}

/// The Arrow schema of a table's `schemaString`.
pub fn from_delta(schema_string: &str) -> Result<SchemaRef> {
    let value: Value = serde_json::from_str(schema_string)
        .map_err(|e| refused("?", format!("the table's schema is not JSON: {e}")))?;
    Ok(Arc::new(Schema::new(arrow_fields(&value)?)))
}

/// Refuses a sink whose columns the existing table cannot take: every
/// column of one must be in the other with the same Delta type, a column
/// the table holds NOT NULL must be so in the sink, and the partition
/// columns must be the same.
pub fn check_append(
    table_schema: &str,
    table_partitions: &[String],
    sink: &Schema,
    sink_partitions: &[String],
) -> Result<()> {
    let table: Value = serde_json::from_str(table_schema)
        .map_err(|e| refused("?", format!("the table's schema is not JSON: {e}")))?;
    let table_fields = table["fields"].as_array().cloned().unwrap_or_default();
    for field in sink.fields() {
        let Some(existing) = table_fields
            .iter()
            .find(|f| f["name"] == field.name().as_str())
        else {
            return Err(refused(
                field.name(),
                "the Delta table has no such column (eddy appends only to a table of the same columns)",
            ));
        };
        let wanted = delta_type(field.name(), field.data_type())?;
        if existing["type"] != wanted {
            return Err(refused(
                field.name(),
                format!(
                    "the Delta table holds {}, the query gives {}",
                    existing["type"], wanted
                ),
            ));
        }
        if existing["nullable"] == false && field.is_nullable() {
            return Err(refused(
                field.name(),
                "the Delta table holds it NOT NULL, the query's may be NULL",
            ));
        }
    }
    if let Some(missing) = table_fields
        .iter()
        .filter_map(|f| f["name"].as_str())
        .find(|name| sink.field_with_name(name).is_err())
    {
        return Err(refused(
            missing,
            "the Delta table has this column and the sink does not",
        ));
    }
    if table_partitions != sink_partitions {
        return Err(ConnectorError::bad_option(
            "partition_by",
            format!(
                "the Delta table is partitioned by [{}], the sink by [{}]",
                table_partitions.join(", "),
                sink_partitions.join(", ")
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8View, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new(
                "window",
                DataType::Struct(Fields::from(vec![Field::new(
                    "start",
                    DataType::Timestamp(TimeUnit::Millisecond, None),
                    true,
                )])),
                true,
            ),
        ])
    }

    #[test]
    fn sql_types_map_to_delta_and_back() {
        let text = to_delta(&schema()).unwrap();
        assert!(
            text.contains(r#""name":"id","nullable":false,"type":"long""#)
                || text.contains(r#""type":"long""#)
        );
        let back = from_delta(&text).unwrap();
        assert_eq!(back.field(0).data_type(), &DataType::Int64);
        assert!(!back.field(0).is_nullable());
        assert_eq!(back.field(1).data_type(), &DataType::Utf8);
        assert_eq!(
            back.field(2).data_type(),
            &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
        assert_eq!(back.as_ref(), physical_schema(&schema()).as_ref());
    }

    #[test]
    fn an_incompatible_table_is_refused_naming_the_column() {
        let text = to_delta(&schema()).unwrap();
        let mut other = schema().fields().to_vec();
        other[1] = Arc::new(Field::new("name", DataType::Int64, true));
        let err = check_append(&text, &[], &Schema::new(other), &[]).unwrap_err();
        assert!(err.to_string().contains("column 'name'"), "{err}");
        let err = check_append(&text, &[], &schema(), &["name".into()]).unwrap_err();
        assert!(err.to_string().contains("partitioned by []"), "{err}");
        check_append(&text, &[], &schema(), &[]).unwrap();
        let unsigned = Schema::new(vec![Field::new("n", DataType::UInt32, true)]);
        assert!(to_delta(&unsigned)
            .unwrap_err()
            .to_string()
            .contains("CAST it to BIGINT"));
        let spaced = Schema::new(vec![Field::new("a b", DataType::Int32, true)]);
        assert!(to_delta(&spaced)
            .unwrap_err()
            .to_string()
            .contains("rename it"));
    }
}
