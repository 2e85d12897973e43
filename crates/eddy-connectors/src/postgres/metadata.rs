//! A `postgres-cdc` table's metadata columns, Flink CDC's: `op_ts` (when
//! the change's transaction committed; 0, the epoch, for a snapshot row),
//! `database_name`, `schema_name` and `table_name`, declared `col TYPE
//! METADATA FROM 'op_ts' VIRTUAL` (or `METADATA` with the key as the
//! column's name).
//!
//! In: the declared columns (metadata ones marked by the planner), and for
//! each row the reader collects, its commit time. Out: the table's own
//! columns for the reader to read ([`MetadataColumns::table_schema`]), and
//! each finished batch with the metadata columns put in their places.
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, Int8Array, RecordBatch};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use eddy_connectors::postgres::metadata::MetadataColumns;
//!
//! let marked = |name: &str, key: &str, t: DataType| {
//!     Field::new(name, t, true).with_metadata(HashMap::from([(
//!         eddy_engine::source::METADATA_COLUMN_KEY.to_string(),
//!         key.to_string(),
//!     )]))
//! };
//! let declared = Arc::new(Schema::new(vec![
//!     Field::new("id", DataType::Int64, false),
//!     marked("changed", "op_ts", DataType::Int64),
//!     marked("t", "table_name", DataType::Utf8),
//!     Field::new("_row_kind", DataType::Int8, false),
//! ]));
//! let mut columns = MetadataColumns::new(&declared, ["db", "public", "accounts"]);
//! assert_eq!(columns.table_schema().fields().len(), 2); // id, the row kind
//! columns.rows_added(1, 1_700_000_000_000);
//! let read = RecordBatch::try_new(columns.table_schema().clone(), vec![
//!     Arc::new(Int64Array::from(vec![7])),
//!     Arc::new(Int8Array::from(vec![0])),
//! ]).unwrap();
//! let batch = columns.complete(read, &[]).unwrap();
//! assert_eq!(batch.num_columns(), 4);
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::compute::{cast, filter};
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef, TimeUnit};
use eddy_engine::source::{metadata_key, ChangeMetadata};

use crate::error::Result;

/// See the module docs.
#[derive(Debug)]
pub struct MetadataColumns {
    /// The declared columns, then the row kind.
    declared: SchemaRef,
    /// The table's own columns, then the row kind.
    table: SchemaRef,
    /// What each declared column (but the row kind) holds: `None` for a
    /// column of the table.
    kinds: Vec<Option<ChangeMetadata>>,
    /// The database's, the schema's and the table's names.
    names: [String; 3],
    /// Each collected row's commit time, epoch milliseconds (kept only
    /// when `op_ts` is declared).
    times: Vec<i64>,
    wants_times: bool,
}

impl MetadataColumns {
    /// The metadata columns of `declared` (columns, then the row kind);
    /// `names` are the database's, the schema's and the table's.
    pub fn new(declared: &SchemaRef, names: [&str; 3]) -> Self {
        let width = declared.fields().len().saturating_sub(1);
        let kinds: Vec<Option<ChangeMetadata>> = declared.fields()[..width]
            .iter()
            .map(|f| {
                metadata_key(f)
                    .and_then(|k| ChangeMetadata::in_keys(&ChangeMetadata::POSTGRES_CDC_KEYS, k))
            })
            .collect();
        let table: Vec<_> = declared
            .fields()
            .iter()
            .enumerate()
            .filter(|(i, _)| kinds.get(*i).is_none_or(Option::is_none))
            .map(|(_, f)| f.clone())
            .collect();
        Self {
            wants_times: kinds.contains(&Some(ChangeMetadata::DatabaseTime)),
            declared: declared.clone(),
            table: Arc::new(Schema::new(table)),
            kinds,
            names: names.map(str::to_string),
            times: Vec::new(),
        }
    }

    /// The columns the reader reads from PostgreSQL, then the row kind.
    pub fn table_schema(&self) -> &SchemaRef {
        &self.table
    }

    /// `rows` more rows were collected, from a transaction that committed
    /// at `op_ts_ms` (0 for the snapshot's).
    pub fn rows_added(&mut self, rows: usize, op_ts_ms: i64) {
        if self.wants_times {
            self.times.extend(std::iter::repeat_n(op_ts_ms, rows));
        }
    }

    /// The declared columns of a finished batch of the table's columns
    /// (`read`), whose collected rows `dropped` (bad ones, by index among
    /// those collected, ascending) were left out of it.
    pub fn complete(&mut self, read: RecordBatch, dropped: &[usize]) -> Result<RecordBatch> {
        let times = std::mem::take(&mut self.times);
        if self.kinds.iter().all(Option::is_none) {
            return Ok(read);
        }
        let times = if dropped.is_empty() || times.is_empty() {
            Int64Array::from(times)
        } else {
            let keep: BooleanArray = (0..times.len())
                .map(|r| Some(dropped.binary_search(&r).is_err()))
                .collect();
            let kept = filter(&Int64Array::from(times), &keep)?;
            kept.as_any()
                .downcast_ref::<Int64Array>()
                .cloned()
                .unwrap_or_else(|| Int64Array::from(Vec::<i64>::new()))
        };
        let rows = read.num_rows();
        let mut from_table = read.columns().iter();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.declared.fields().len());
        for (i, field) in self.declared.fields().iter().enumerate() {
            let column = match self.kinds.get(i).copied().flatten() {
                None => from_table.next().cloned().unwrap_or_else(|| {
                    datafusion::arrow::array::new_null_array(field.data_type(), rows)
                }),
                Some(ChangeMetadata::DatabaseTime | ChangeMetadata::IngestionTime) => {
                    let millis: ArrayRef = Arc::new(if times.len() == rows {
                        times.clone()
                    } else {
                        Int64Array::from(vec![0; rows])
                    });
                    match field.data_type() {
                        DataType::Timestamp(unit, zone) => cast(
                            &cast(
                                &millis,
                                &DataType::Timestamp(TimeUnit::Millisecond, zone.clone()),
                            )?,
                            &DataType::Timestamp(*unit, zone.clone()),
                        )?,
                        other => cast(&millis, other)?,
                    }
                }
                Some(name) => {
                    let value = match name {
                        ChangeMetadata::DatabaseName => &self.names[0],
                        ChangeMetadata::SchemaName => &self.names[1],
                        _ => &self.names[2],
                    };
                    let names: ArrayRef = Arc::new(StringArray::from(vec![value.as_str(); rows]));
                    cast(&names, field.data_type())?
                }
            };
            columns.push(column);
        }
        Ok(RecordBatch::try_new(self.declared.clone(), columns)?)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use datafusion::arrow::array::{Array, Int8Array, TimestampMicrosecondArray};
    use datafusion::arrow::datatypes::Field;

    use super::*;

    fn marked(name: &str, key: &str, t: DataType) -> Field {
        Field::new(name, t, true).with_metadata(HashMap::from([(
            eddy_engine::source::METADATA_COLUMN_KEY.to_string(),
            key.to_string(),
        )]))
    }

    #[test]
    fn metadata_columns_take_their_places_with_each_rows_commit_time_and_bad_rows_left_out() {
        let declared = Arc::new(Schema::new(vec![
            marked("db", "database_name", DataType::Utf8View),
            Field::new("id", DataType::Int64, false),
            marked(
                "at",
                "op_ts",
                DataType::Timestamp(TimeUnit::Microsecond, None),
            ),
            marked("s", "schema_name", DataType::Utf8),
            marked("t", "table_name", DataType::Utf8),
            Field::new("_row_kind", DataType::Int8, false),
        ]));
        let mut columns = MetadataColumns::new(&declared, ["shop", "public", "orders"]);
        assert_eq!(columns.table_schema().fields().len(), 2);
        columns.rows_added(2, 0); // the snapshot's
        columns.rows_added(2, 1_700_000_000_123); // a transaction's
                                                  // The second row collected was bad and left out.
        let read = RecordBatch::try_new(
            columns.table_schema().clone(),
            vec![
                Arc::new(Int64Array::from(vec![1, 3, 4])),
                Arc::new(Int8Array::from(vec![0, 0, 0])),
            ],
        )
        .unwrap();
        let batch = columns.complete(read, &[1]).unwrap();
        assert_eq!(batch.schema(), declared);
        let at = batch
            .column(2)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(
            at.values().to_vec(),
            vec![0, 1_700_000_000_123_000, 1_700_000_000_123_000]
        );
        let t = batch
            .column(4)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!((t.value(0), t.len()), ("orders", 3));
        // Times start again with the next batch.
        columns.rows_added(1, 5);
        let read = RecordBatch::try_new(
            columns.table_schema().clone(),
            vec![
                Arc::new(Int64Array::from(vec![9])),
                Arc::new(Int8Array::from(vec![0])),
            ],
        )
        .unwrap();
        let batch = columns.complete(read, &[]).unwrap();
        let at = batch
            .column(2)
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        assert_eq!(at.value(0), 5_000);
    }

    #[test]
    fn a_table_without_metadata_columns_reads_as_it_is() {
        let declared = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("_row_kind", DataType::Int8, false),
        ]));
        let mut columns = MetadataColumns::new(&declared, ["a", "b", "c"]);
        assert_eq!(columns.table_schema(), &declared);
        columns.rows_added(1, 9);
        let read = RecordBatch::try_new(
            declared.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(Int8Array::from(vec![0])),
            ],
        )
        .unwrap();
        assert_eq!(columns.complete(read.clone(), &[]).unwrap(), read);
    }
}
