//! Changelog streams: how a stream whose rows change is carried.
//!
//! A stream is *append-only* (every row is a new fact, as a source's rows
//! are) or *updating* (the result of a query that revises earlier rows: a
//! GROUP BY without a window, for one). An updating stream's batches carry
//! one more column after the row's own columns, [`ROW_KIND`] (`Int8`, never
//! NULL), holding each row's [`RowKind`] with Flink's byte values:
//!
//! | kind | byte | meaning                                        |
//! |------|------|------------------------------------------------|
//! | `+I` | 0    | insert: a row the result did not have          |
//! | `-U` | 1    | update before: the old version of a changed row |
//! | `+U` | 2    | update after: its new version (follows its -U) |
//! | `-D` | 3    | delete: a row the result no longer has         |
//!
//! Replaying a changelog (adding `+I`/`+U` rows to a multiset, taking
//! `-U`/`-D` rows out) gives the query's current result. The mode travels
//! with the schema: a schema whose last field is the row-kind field (it is
//! marked by metadata, so a user column of that name is never mistaken for
//! it) is updating, so every node, split, exchange and sink of a graph knows
//! its input's mode without a second description. The field's metadata may
//! also name the stream's *upsert key*, columns no two current rows share.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, Int8Array};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::changelog::{self, RowKind};
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("n", DataType::Int64, false),
//!     changelog::row_kind_field(&[]),
//! ]));
//! let batch = RecordBatch::try_new(
//!     schema.clone(),
//!     vec![
//!         Arc::new(Int64Array::from(vec![1, 1, 2])),
//!         Arc::new(Int8Array::from(vec![0, 1, 2])),
//!     ],
//! )
//! .unwrap();
//! assert!(changelog::is_updating(&schema));
//! let kinds = changelog::row_kinds(&batch).unwrap();
//! assert_eq!(RowKind::of(kinds.value(1)), Some(RowKind::UpdateBefore));
//! assert_eq!(RowKind::UpdateAfter.short(), "+U");
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, Int8Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};

use crate::error::{EngineError, Result};

/// Name of the row-kind column of an updating stream.
pub const ROW_KIND: &str = "_row_kind";

/// Metadata key marking the row-kind field.
const MARK: &str = "eddy.changelog";

/// Metadata key naming the upsert key (column names, comma separated).
const UPSERT_KEY: &str = "eddy.upsert_key";

/// Metadata key saying what made the stream updating (for messages).
const ORIGIN: &str = "eddy.updating_origin";

/// What a row of an updating stream does to the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum RowKind {
    /// `+I`: a new row.
    Insert = 0,
    /// `-U`: the old version of an updated row.
    UpdateBefore = 1,
    /// `+U`: the new version of an updated row.
    UpdateAfter = 2,
    /// `-D`: a removed row.
    Delete = 3,
}

impl RowKind {
    /// The kind a row-kind byte stands for.
    pub fn of(byte: i8) -> Option<RowKind> {
        match byte {
            0 => Some(RowKind::Insert),
            1 => Some(RowKind::UpdateBefore),
            2 => Some(RowKind::UpdateAfter),
            3 => Some(RowKind::Delete),
            _ => None,
        }
    }

    /// The byte stored in the row-kind column.
    pub fn byte(self) -> i8 {
        self as i8
    }

    /// Flink's short form: `+I`, `-U`, `+U`, `-D`.
    pub fn short(self) -> &'static str {
        match self {
            RowKind::Insert => "+I",
            RowKind::UpdateBefore => "-U",
            RowKind::UpdateAfter => "+U",
            RowKind::Delete => "-D",
        }
    }

    /// Whether the row is taken out of the result (`-U`, `-D`).
    pub fn is_retraction(self) -> bool {
        matches!(self, RowKind::UpdateBefore | RowKind::Delete)
    }
}

/// Whether a row-kind byte takes a row out (`-U` = 1, `-D` = 3).
#[inline]
pub fn is_retraction_byte(byte: i8) -> bool {
    byte & 1 == 1
}

/// The row-kind field appended to an updating stream's columns, naming
/// `upsert_key` (empty: none known).
pub fn row_kind_field(upsert_key: &[String]) -> Field {
    let mut metadata = HashMap::from([(MARK.to_string(), "row_kind".to_string())]);
    if !upsert_key.is_empty() {
        metadata.insert(UPSERT_KEY.to_string(), upsert_key.join(","));
    }
    Field::new(ROW_KIND, DataType::Int8, false).with_metadata(metadata)
}

/// `schema` (updating) with what made it updating recorded, e.g. "the
/// GROUP BY without a window at q.sql:3:1", so that a sink refusing updates
/// can say so.
pub fn with_origin(schema: &Schema, origin: &str) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    if let Some(last) = fields.last_mut().filter(|f| is_row_kind_field(f)) {
        let mut metadata = last.metadata().clone();
        metadata.insert(ORIGIN.to_string(), origin.to_string());
        *last = last.clone().with_metadata(metadata);
    }
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// What made an updating schema's stream updating, when recorded.
pub fn origin(schema: &Schema) -> Option<String> {
    schema
        .fields()
        .last()
        .filter(|f| is_row_kind_field(f))
        .and_then(|f| f.metadata().get(ORIGIN).cloned())
}

/// Whether `field` is the row-kind field.
pub fn is_row_kind_field(field: &Field) -> bool {
    field.metadata().contains_key(MARK)
}

/// Whether rows of `schema` form an updating stream.
pub fn is_updating(schema: &Schema) -> bool {
    schema.fields().last().is_some_and(|f| is_row_kind_field(f))
}

/// The upsert key an updating schema names (empty when none is known or
/// the stream is append-only).
pub fn upsert_key(schema: &Schema) -> Vec<String> {
    match schema.fields().last() {
        Some(f) if is_row_kind_field(f) => f
            .metadata()
            .get(UPSERT_KEY)
            .map(|k| k.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// `schema` with the row-kind field appended (naming `upsert_key`).
pub fn updating_schema(schema: &Schema, upsert_key: &[String]) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(row_kind_field(upsert_key));
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The row kinds of an updating batch; `None` for an append-only one.
pub fn row_kinds(batch: &RecordBatch) -> Option<&Int8Array> {
    if !is_updating(batch.schema_ref()) {
        return None;
    }
    batch.columns().last()?.as_any().downcast_ref::<Int8Array>()
}

/// An updating batch's own columns (the row-kind column dropped); an
/// append-only batch as it is.
pub fn data_columns(
    batch: &RecordBatch,
) -> std::result::Result<RecordBatch, datafusion::arrow::error::ArrowError> {
    if !is_updating(batch.schema_ref()) {
        return Ok(batch.clone());
    }
    let width = batch.num_columns() - 1;
    let fields: Vec<Field> = batch.schema().fields()[..width]
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        batch.columns()[..width].to_vec(),
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
}

/// The row kinds of a batch reaching `operator`, checked: an updating
/// batch where the plan expected appends is an error (a planner bug), and
/// so is a row kind that is none of the four.
pub fn checked_row_kinds(
    batch: &RecordBatch,
    planned_updating: bool,
    operator: &str,
) -> Result<Option<Int8Array>> {
    let Some(kinds) = row_kinds(batch) else {
        return Ok(None);
    };
    if !planned_updating {
        return Err(EngineError::operator(
            operator,
            "an updating batch reached an operator planned for an append-only input",
        ));
    }
    check_kinds(kinds)?;
    Ok(Some(kinds.clone()))
}

/// Checks that every row kind of an updating batch is one of the four.
pub fn check_kinds(kinds: &Int8Array) -> Result<()> {
    match kinds.values().iter().find(|&&k| !(0..=3).contains(&k)) {
        None if kinds.null_count() == 0 => Ok(()),
        None => Err(EngineError::State("a changelog row has no row kind".into())),
        Some(k) => Err(EngineError::State(format!(
            "a changelog row has row kind {k}, not one of 0..=3"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;

    #[test]
    fn mode_travels_with_the_schema() {
        let plain = Schema::new(vec![Field::new("k", DataType::Utf8, true)]);
        assert!(!is_updating(&plain));
        let updating = updating_schema(&plain, &["k".to_string()]);
        assert!(is_updating(&updating));
        assert_eq!(upsert_key(&updating), vec!["k".to_string()]);
        // A user column named like the row-kind column is not one.
        let lookalike = Schema::new(vec![Field::new(ROW_KIND, DataType::Int8, false)]);
        assert!(!is_updating(&lookalike));
    }

    #[test]
    fn data_columns_drop_the_row_kind() {
        let schema = updating_schema(
            &Schema::new(vec![Field::new("n", DataType::Int64, false)]),
            &[],
        );
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![5, 6])),
                Arc::new(Int8Array::from(vec![0, 3])),
            ],
        )
        .unwrap();
        let data = data_columns(&batch).unwrap();
        assert_eq!(data.num_columns(), 1);
        assert_eq!(data.num_rows(), 2);
        assert!(check_kinds(row_kinds(&batch).unwrap()).is_ok());
        assert!(check_kinds(&Int8Array::from(vec![4])).is_err());
        assert!(is_retraction_byte(RowKind::UpdateBefore.byte()));
        assert!(is_retraction_byte(RowKind::Delete.byte()));
        assert!(!is_retraction_byte(RowKind::Insert.byte()));
        assert!(!is_retraction_byte(RowKind::UpdateAfter.byte()));
    }
}
