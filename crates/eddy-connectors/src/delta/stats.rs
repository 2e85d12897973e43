//! Per-file statistics in a Delta `add` action: row count, and per column
//! the NULL count and the least and greatest values, so readers (and
//! eddy's own merge) can skip files by value.
//!
//! In: the batches written to a file (its physical columns). Out: the
//! `stats` JSON string, `{"numRecords": n, "minValues": {...},
//! "maxValues": {...}, "nullCount": {...}}`. Minimum and maximum are kept
//! for integer, text and DATE columns, whose JSON forms are exact;
//! floating point (NaN) and timestamps (Delta's stats hold milliseconds, a
//! truncated maximum would exclude rows) are left out, which readers take
//! as unknown.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, StringArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_connectors::delta::stats::FileStats;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("id", DataType::Int64, false),
//!     Field::new("name", DataType::Utf8, true),
//! ]));
//! let mut stats = FileStats::new(&schema);
//! stats.update(&RecordBatch::try_new(schema, vec![
//!     Arc::new(Int64Array::from(vec![7, 3])),
//!     Arc::new(StringArray::from(vec![Some("b"), None])),
//! ]).unwrap()).unwrap();
//! assert_eq!(
//!     stats.to_json(2).unwrap(),
//!     r#"{"maxValues":{"id":7,"name":"b"},"minValues":{"id":3,"name":"b"},"nullCount":{"id":0,"name":1},"numRecords":2}"#
//! );
//! ```

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray};
use datafusion::arrow::compute::kernels::cmp::{gt_eq, lt_eq};
use datafusion::arrow::compute::{and, or};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::functions_aggregate::min_max::{MaxAccumulator, MinAccumulator};
use datafusion::logical_expr::Accumulator;
use serde_json::{Map, Value};

use crate::error::{ConnectorError, Result};

/// Whether the least and greatest values of a column of `data_type` are
/// kept (see the module docs).
fn ranged(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Date32
    )
}

struct ColumnStats {
    name: String,
    range: Option<(MinAccumulator, MaxAccumulator)>,
    nulls: u64,
}

/// The statistics of one file being written.
pub struct FileStats {
    columns: Vec<ColumnStats>,
}

impl std::fmt::Debug for FileStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStats")
            .field("columns", &self.columns.len())
            .finish()
    }
}

impl FileStats {
    /// Statistics of a file of `schema`'s columns.
    pub fn new(schema: &Schema) -> Self {
        let columns = schema
            .fields()
            .iter()
            .map(|f| ColumnStats {
                name: f.name().clone(),
                range: ranged(f.data_type())
                    .then(|| {
                        Some((
                            MinAccumulator::try_new(f.data_type()).ok()?,
                            MaxAccumulator::try_new(f.data_type()).ok()?,
                        ))
                    })
                    .flatten(),
                nulls: 0,
            })
            .collect();
        Self { columns }
    }

    /// Takes in a batch written to the file.
    pub fn update(&mut self, batch: &RecordBatch) -> Result<()> {
        for (stats, column) in self.columns.iter_mut().zip(batch.columns()) {
            stats.nulls += column.null_count() as u64;
            if let Some((min, max)) = &mut stats.range {
                min.update_batch(std::slice::from_ref(column)).map_err(df)?;
                max.update_batch(std::slice::from_ref(column)).map_err(df)?;
            }
        }
        Ok(())
    }

    /// The `stats` string of the file's `add` action.
    pub fn to_json(&mut self, rows: u64) -> Result<String> {
        let (mut mins, mut maxes, mut nulls) = (Map::new(), Map::new(), Map::new());
        for column in &mut self.columns {
            nulls.insert(column.name.clone(), column.nulls.into());
            if let Some((min, max)) = &mut column.range {
                if let (Some(low), Some(high)) = (
                    json(&min.evaluate().map_err(df)?),
                    json(&max.evaluate().map_err(df)?),
                ) {
                    mins.insert(column.name.clone(), low);
                    maxes.insert(column.name.clone(), high);
                }
            }
        }
        let mut stats = Map::new();
        stats.insert("numRecords".into(), rows.into());
        stats.insert("minValues".into(), Value::Object(mins));
        stats.insert("maxValues".into(), Value::Object(maxes));
        stats.insert("nullCount".into(), Value::Object(nulls));
        serde_json::to_string(&Value::Object(stats))
            .map_err(|e| ConnectorError::bad_option("stats", e.to_string()))
    }
}

/// A value's JSON form in Delta statistics (`None`: NULL or not kept).
fn json(value: &ScalarValue) -> Option<Value> {
    match value {
        ScalarValue::Int8(v) => v.map(Value::from),
        ScalarValue::Int16(v) => v.map(Value::from),
        ScalarValue::Int32(v) => v.map(Value::from),
        ScalarValue::Int64(v) => v.map(Value::from),
        ScalarValue::Utf8(v) | ScalarValue::LargeUtf8(v) | ScalarValue::Utf8View(v) => {
            v.clone().map(Value::from)
        }
        ScalarValue::Date32(Some(days)) => {
            datafusion::arrow::temporal_conversions::date32_to_datetime(*days)
                .map(|d| Value::from(d.format("%Y-%m-%d").to_string()))
        }
        _ => None,
    }
}

/// Which rows of `keys` (key columns by name) may be in the file whose
/// `stats` these are: every column within the file's least and greatest
/// values. A column without a range (not kept, a partition column), and
/// a NULL where the file may hold NULLs, rule nothing out. `None` when
/// nothing can be ruled out at all.
pub fn may_hold(stats: Option<&str>, keys: &[(&str, ArrayRef)]) -> Result<Option<BooleanArray>> {
    let Some(stats) = stats else {
        return Ok(None);
    };
    let Ok(Value::Object(stats)) = serde_json::from_str::<Value>(stats) else {
        return Ok(None);
    };
    let bound = |side: &str, column: &str| stats.get(side).and_then(|v| v.get(column)).cloned();
    let mut mask: Option<BooleanArray> = None;
    for (name, column) in keys {
        let (Some(low), Some(high)) = (bound("minValues", name), bound("maxValues", name)) else {
            continue;
        };
        let (Some(low), Some(high)) = (
            scalar(&low, column.data_type()),
            scalar(&high, column.data_type()),
        ) else {
            continue;
        };
        // A NULL key compares to NULL: not within.
        let within = and(
            &gt_eq(column, &low.to_scalar().map_err(df)?)?,
            &lt_eq(column, &high.to_scalar().map_err(df)?)?,
        )?;
        let within = match within.nulls() {
            Some(nulls) => BooleanArray::new(within.values() & nulls.inner(), None),
            None => within,
        };
        // A NULL key may be in a file that holds NULLs in this column.
        let file_nulls = bound("nullCount", name).and_then(|n| n.as_u64()) != Some(0);
        let within = if file_nulls && column.null_count() > 0 {
            let nulls = datafusion::arrow::compute::is_null(column)?;
            or(&within, &nulls)?
        } else {
            within
        };
        mask = Some(match mask {
            Some(m) => and(&m, &within)?,
            None => within,
        });
    }
    Ok(mask)
}

fn df(e: datafusion::error::DataFusionError) -> ConnectorError {
    ConnectorError::bad_option("stats", e.to_string())
}

/// A statistics value as a scalar of `data_type`.
fn scalar(value: &Value, data_type: &DataType) -> Option<ScalarValue> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    ScalarValue::try_from_string(text, data_type).ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::Int64Array;

    use super::*;

    #[test]
    fn a_file_rules_out_keys_outside_its_range_and_nulls_it_does_not_hold() {
        let keys: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), Some(5), None, Some(9)]));
        let stats =
            r#"{"numRecords":4,"minValues":{"id":3},"maxValues":{"id":7},"nullCount":{"id":0}}"#;
        let mask = may_hold(Some(stats), &[("id", keys.clone())])
            .unwrap()
            .unwrap();
        assert_eq!(mask, BooleanArray::from(vec![false, true, false, false]));
        let with_nulls = stats.replace(r#""nullCount":{"id":0}"#, r#""nullCount":{"id":2}"#);
        let mask = may_hold(Some(&with_nulls), &[("id", keys.clone())])
            .unwrap()
            .unwrap();
        assert_eq!(mask, BooleanArray::from(vec![false, true, true, false]));
        // No range for the column, or no statistics: nothing is ruled out.
        assert!(
            may_hold(Some(r#"{"numRecords":4}"#), &[("id", keys.clone())])
                .unwrap()
                .is_none()
        );
        assert!(may_hold(None, &[("id", keys)]).unwrap().is_none());
    }

    #[test]
    fn floats_and_timestamps_get_null_counts_but_no_range() {
        use datafusion::arrow::array::{Float64Array, TimestampMicrosecondArray};
        use datafusion::arrow::datatypes::{Field, TimeUnit};
        let schema = Arc::new(Schema::new(vec![
            Field::new("x", DataType::Float64, true),
            Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ]));
        let mut stats = FileStats::new(&schema);
        stats
            .update(
                &RecordBatch::try_new(
                    schema,
                    vec![
                        Arc::new(Float64Array::from(vec![Some(1.5), None])),
                        Arc::new(TimestampMicrosecondArray::from(vec![Some(1), Some(2)])),
                    ],
                )
                .unwrap(),
            )
            .unwrap();
        assert_eq!(
            stats.to_json(2).unwrap(),
            r#"{"maxValues":{},"minValues":{},"nullCount":{"t":0,"x":1},"numRecords":2}"#
        );
    }
}
