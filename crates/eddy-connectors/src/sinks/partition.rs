//! `partition_by`: how a file sink splits rows into Hive-style directories.
//!
//! In: the option's text and the sink's schema, then result batches. Out:
//! per batch, the rows of each partition with the partition's relative
//! directory (`country=US/`, `dt=2023-11-14/hour=22/`).
//!
//! - `partition_by = 'country, method'`: one directory level per column,
//!   `name=value` (Hive style: values percent-escaped, NULL as
//!   `__HIVE_DEFAULT_PARTITION__`). The partition columns are left out of
//!   the files, as Hive, Spark and Flink do: readers take them from the path.
//! - `partition_by = 'window_start:dt=%Y-%m-%d/hour=%H'`: an event-time
//!   pattern (chrono `strftime` syntax, UTC) over a TIMESTAMP column; every
//!   column stays in the files.
//!
//! Grouping uses one reused key buffer per batch: no allocation per row
//! beyond a new partition's first row.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringArray, UInt32Array};
use datafusion::arrow::compute::{cast, take_record_batch};
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::temporal_conversions::timestamp_ms_to_datetime;
use eddy_engine::time::to_epoch_millis;

use crate::error::{ConnectorError, Result};

/// Hive's name for a NULL partition value.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// How a sink partitions its rows.
#[derive(Debug, Clone)]
pub enum PartitionBy {
    /// One directory.
    None,
    /// `name=value/` levels for these columns (indices into the sink's schema).
    Columns(Vec<usize>),
    /// Directories from an event-time pattern over a TIMESTAMP column.
    EventTime {
        /// The column's index.
        column: usize,
        /// A chrono `strftime` pattern (UTC).
        pattern: String,
    },
}

impl PartitionBy {
    /// Parses the `partition_by` option against `schema`.
    pub fn parse(option: Option<&str>, schema: &SchemaRef) -> Result<Self> {
        let Some(text) = option.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(Self::None);
        };
        let index = |name: &str| {
            schema.index_of(name.trim()).map_err(|_| {
                let columns: Vec<&str> =
                    schema.fields().iter().map(|f| f.name().as_str()).collect();
                ConnectorError::bad_option(
                    "partition_by",
                    format!(
                        "no column '{}' (columns: {})",
                        name.trim(),
                        columns.join(", ")
                    ),
                )
            })
        };
        if let Some((column, pattern)) = text.split_once(':') {
            let column = index(column)?;
            if !matches!(schema.field(column).data_type(), DataType::Timestamp(_, _)) {
                return Err(ConnectorError::bad_option(
                    "partition_by",
                    format!(
                        "'{}' is {}, an event-time pattern needs a TIMESTAMP column",
                        schema.field(column).name(),
                        schema.field(column).data_type()
                    ),
                ));
            }
            let pattern = pattern.trim().trim_matches('/').to_string();
            let mut probe = String::new();
            let sample = timestamp_ms_to_datetime(0)
                .ok_or_else(|| ConnectorError::bad_option("partition_by", "epoch"))?;
            if pattern.is_empty() || write!(probe, "{}", sample.format(&pattern)).is_err() {
                return Err(ConnectorError::bad_option(
                    "partition_by",
                    format!("'{pattern}' is not a valid time pattern (use strftime fields such as dt=%Y-%m-%d/hour=%H)"),
                ));
            }
            return Ok(Self::EventTime { column, pattern });
        }
        let columns = text.split(',').map(index).collect::<Result<Vec<_>>>()?;
        if columns.len() >= schema.fields().len() {
            return Err(ConnectorError::bad_option(
                "partition_by",
                "every column is a partition column: the files would hold nothing",
            ));
        }
        Ok(Self::Columns(columns))
    }

    /// The schema of the rows written into files (partition columns left
    /// out for column partitioning).
    pub fn file_schema(&self, schema: &SchemaRef) -> SchemaRef {
        match self {
            Self::Columns(columns) => Arc::new(Schema::new(
                schema
                    .fields()
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !columns.contains(i))
                    .map(|(_, f)| f.as_ref().clone())
                    .collect::<Vec<_>>(),
            )),
            _ => schema.clone(),
        }
    }

    /// Splits `batch` into (relative directory, rows in the file schema),
    /// partitions in order of their first row. The directory is empty or
    /// ends in `/`.
    pub fn split(&self, batch: &RecordBatch) -> Result<Vec<(String, RecordBatch)>> {
        match self {
            Self::None => Ok(vec![(String::new(), batch.clone())]),
            Self::Columns(columns) => {
                let names: Vec<String> = columns
                    .iter()
                    .map(|&c| escape(batch.schema().field(c).name()))
                    .collect();
                let values: Vec<ArrayRef> = columns
                    .iter()
                    .map(|&c| cast(batch.column(c), &DataType::Utf8))
                    .collect::<std::result::Result<_, _>>()?;
                let values: Vec<&StringArray> = values
                    .iter()
                    .map(|v| {
                        v.as_any().downcast_ref::<StringArray>().ok_or_else(|| {
                            ConnectorError::bad_option(
                                "partition_by",
                                "a partition value is not text",
                            )
                        })
                    })
                    .collect::<Result<_>>()?;
                let groups = group_rows(batch.num_rows(), |row, key| {
                    for (name, value) in names.iter().zip(&values) {
                        key.push_str(name);
                        key.push('=');
                        if value.is_null(row) {
                            key.push_str(NULL_PARTITION);
                        } else {
                            escape_into(value.value(row), key);
                        }
                        key.push('/');
                    }
                    Ok(())
                })?;
                let keep: Vec<usize> = (0..batch.num_columns())
                    .filter(|i| !columns.contains(i))
                    .collect();
                groups
                    .into_iter()
                    .map(|(dir, rows)| Ok((dir, take_record_batch(batch, &rows)?.project(&keep)?)))
                    .collect()
            }
            Self::EventTime { column, pattern } => {
                let times = to_epoch_millis(batch.column(*column))
                    .map_err(|e| ConnectorError::bad_option("partition_by", e.to_string()))?;
                let groups = group_rows(batch.num_rows(), |row, key| {
                    if times.is_null(row) {
                        key.push_str(NULL_PARTITION);
                    } else {
                        let time = timestamp_ms_to_datetime(times.value(row)).ok_or_else(|| {
                            ConnectorError::bad_option("partition_by", "event time out of range")
                        })?;
                        write!(key, "{}", time.format(pattern)).map_err(|_| {
                            ConnectorError::bad_option("partition_by", "invalid time pattern")
                        })?;
                    }
                    key.push('/');
                    Ok(())
                })?;
                groups
                    .into_iter()
                    .map(|(dir, rows)| Ok((dir, take_record_batch(batch, &rows)?)))
                    .collect()
            }
        }
    }
}

/// Groups row numbers by the key `key_of` writes for each row, keys in
/// order of first appearance.
fn group_rows(
    rows: usize,
    mut key_of: impl FnMut(usize, &mut String) -> Result<()>,
) -> Result<Vec<(String, UInt32Array)>> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    let mut key = String::new();
    for row in 0..rows {
        key.clear();
        key_of(row, &mut key)?;
        let slot = match index.get(key.as_str()) {
            Some(&slot) => slot,
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key.clone(), Vec::new()));
                groups.len() - 1
            }
        };
        groups[slot].1.push(row as u32);
    }
    Ok(groups
        .into_iter()
        .map(|(key, rows)| (key, UInt32Array::from(rows)))
        .collect())
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(text, &mut out);
    out
}

/// Hive's escaping: bytes other than letters, digits and `-_.` become `%XX`.
fn escape_into(text: &str, out: &mut String) {
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b' ') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    if out.is_empty() || out == "." || out == ".." {
        out.push_str("%2E");
    }
}

/// The values of a partition directory (`country=US/dt=2023-11-14/`), as
/// written by [`PartitionBy::split`] for column partitioning: escapes
/// undone, [`NULL_PARTITION`] as `None`; a level without `=` is no
/// partition.
pub fn directory_values(dir: &str) -> Vec<(String, Option<String>)> {
    dir.split('/')
        .filter_map(|level| level.split_once('='))
        .map(|(name, value)| {
            let value = (value != NULL_PARTITION).then(|| unescape(value));
            (unescape(name), value)
        })
        .collect()
}

/// Undoes [`escape_into`] (and any `%XX` escaping: a Delta log's
/// URL-encoded paths); a `%` not followed by two hex digits stays.
pub(crate) fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int64Array, TimestampMillisecondArray};
    use datafusion::arrow::datatypes::{Field, TimeUnit};

    use super::*;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("country", DataType::Utf8, true),
            Field::new("n", DataType::Int64, false),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Millisecond, None),
                false,
            ),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec![
                    Some("US"),
                    Some("a/b"),
                    None,
                    Some("US"),
                ])),
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
                Arc::new(TimestampMillisecondArray::from(vec![
                    1_700_000_000_000,
                    1_700_003_600_000,
                    1_700_000_000_001,
                    1_700_086_400_000,
                ])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn columns_become_escaped_directories_and_leave_the_files() {
        let b = batch();
        let by = PartitionBy::parse(Some("country"), &b.schema()).unwrap();
        let parts = by.split(&b).unwrap();
        let dirs: Vec<&str> = parts.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(
            dirs,
            vec![
                "country=US/",
                "country=a%2Fb/",
                "country=__HIVE_DEFAULT_PARTITION__/"
            ]
        );
        assert_eq!(parts[0].1.num_rows(), 2);
        assert_eq!(parts[0].1.schema(), by.file_schema(&b.schema()));
        assert_eq!(parts[0].1.num_columns(), 2);
    }

    #[test]
    fn an_event_time_pattern_names_directories_in_utc() {
        let b = batch();
        let by = PartitionBy::parse(Some("ts:dt=%Y-%m-%d/hour=%H"), &b.schema()).unwrap();
        let parts = by.split(&b).unwrap();
        let dirs: Vec<&str> = parts.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(
            dirs,
            vec![
                "dt=2023-11-14/hour=22/",
                "dt=2023-11-14/hour=23/",
                "dt=2023-11-15/hour=22/"
            ]
        );
        assert_eq!(parts[0].1.num_rows(), 2);
        assert_eq!(parts[0].1.num_columns(), 3);
    }

    #[test]
    fn bad_options_say_why() {
        let schema = batch().schema();
        let err = PartitionBy::parse(Some("nope"), &schema)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no column 'nope' (columns: country, n, ts)"),
            "{err}"
        );
        let err = PartitionBy::parse(Some("n:%Y"), &schema)
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs a TIMESTAMP column"), "{err}");
        let err = PartitionBy::parse(Some("ts:%Q"), &schema)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a valid time pattern"), "{err}");
    }
}
