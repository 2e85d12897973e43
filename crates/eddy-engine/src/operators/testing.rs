//! Helpers for operator unit tests over (k VARCHAR, v BIGINT) rows, plain
//! or as a changelog, and for reading what an updating operator emitted.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, Int8Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;

use crate::changelog::{self, RowKind};
use crate::operator::Collector;

/// The rows' schema: `k VARCHAR, v BIGINT`.
pub fn kv_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
    ]))
}

/// Rows `(k, v)`; with `kinds`, an updating batch of those row kinds.
pub fn kv_rows(keys: &[Option<&str>], values: &[i64], kinds: Option<&[i8]>) -> RecordBatch {
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(keys.to_vec())),
        Arc::new(Int64Array::from(values.to_vec())),
    ];
    match kinds {
        None => RecordBatch::try_new(kv_schema(), columns).expect("rows"),
        Some(kinds) => {
            columns.push(Arc::new(Int8Array::from(kinds.to_vec())));
            RecordBatch::try_new(changelog::updating_schema(&kv_schema(), &[]), columns)
                .expect("changelog rows")
        }
    }
}

/// [`kv_rows`] with every key present.
pub fn keyed(keys: &[&str], values: &[i64], kinds: Option<&[i8]>) -> RecordBatch {
    let keys: Vec<Option<&str>> = keys.iter().map(|k| Some(*k)).collect();
    kv_rows(&keys, values, kinds)
}

/// What an updating operator emitted, a row a line: its kind, then its
/// values (`+U a 2 13`).
pub fn changes(out: &mut Collector) -> Vec<String> {
    let mut lines = Vec::new();
    for (_, batch) in out.drain() {
        let kinds = changelog::row_kinds(&batch)
            .expect("an updating batch")
            .clone();
        for r in 0..batch.num_rows() {
            let mut line = RowKind::of(kinds.value(r))
                .map_or("?", RowKind::short)
                .to_string();
            for c in 0..batch.num_columns() - 1 {
                let value = ScalarValue::try_from_array(batch.column(c), r).expect("value");
                line.push(' ');
                line.push_str(&value.to_string());
            }
            lines.push(line);
        }
    }
    lines
}
