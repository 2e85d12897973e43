//! OVER's per-key state on disk: the keys an OVER over an append-only
//! input moved out of memory when the memory budget refused it more
//! ([`crate::spill`]).
//!
//! In: rows of the `keys` checkpoint table (the key's bytes, its last
//! event time, its row count, and per function the rows seen and the
//! accumulator's state). Out: the same rows, read back (and taken off
//! disk) for the keys released rows bring, and every stored row, left
//! there, for checkpoints. An entry is the key's bytes and the row's
//! other columns in Arrow's row format ([`super::super::spilled_rows`]).
//!
//! Only a plan whose per-key state is that one row spills: running
//! aggregates and `row_number`. `lag`, `lead` and sliding frames keep
//! rows per key in tables of their own, and do not spill yet.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BinaryArray, RecordBatch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatchOptions;
use datafusion::arrow::row::{RowConverter, SortField};

use crate::error::{EngineError, Result};
use crate::operators::spilled_rows::SpilledRows;
use crate::spill::{SpillSpace, SpillStats};

/// Keys' rows of the `keys` table, on disk.
pub(super) struct SpilledKeys {
    rows: SpilledRows,
    /// The `keys` table's schema: key bytes first.
    schema: SchemaRef,
    /// Its columns after the key, in Arrow's row format.
    columns: RowConverter,
}

impl SpilledKeys {
    /// Tables of `space` for `keys` tables laid out as `schema`; `None`
    /// when a column has a type the row format does not take.
    pub(super) fn open(space: &Arc<SpillSpace>, schema: SchemaRef) -> Result<Option<Self>> {
        let fields: Vec<SortField> = schema
            .fields()
            .iter()
            .skip(1)
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        if !RowConverter::supports_fields(&fields) {
            return Ok(None);
        }
        Ok(Some(Self {
            rows: SpilledRows::open(space, "over")?,
            columns: RowConverter::new(fields)?,
            schema,
        }))
    }

    /// Keys on disk.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Writes every row of a `keys` table (keys not on disk yet).
    pub(super) fn write(&mut self, keys: &RecordBatch) -> Result<()> {
        let bytes = keys
            .column(0)
            .as_any()
            .downcast_ref::<BinaryArray>()
            .ok_or_else(|| EngineError::State("over: bad keys table".into()))?;
        let rows = self.columns.convert_columns(&keys.columns()[1..])?;
        self.rows
            .write((0..keys.num_rows()).map(|i| (bytes.value(i), rows.row(i).data())))
    }

    /// The stored rows of these keys (a `keys` table; `None` when none is
    /// stored), taken off disk.
    pub(super) fn take(&mut self, keys: &[&[u8]]) -> Result<Option<RecordBatch>> {
        if self.rows.is_empty() {
            return Ok(None);
        }
        let found = self.rows.take(keys)?;
        if found.is_empty() {
            return Ok(None);
        }
        self.table(&found).map(Some)
    }

    /// Every stored row (a `keys` table), left on disk.
    pub(super) fn all(&self) -> Result<RecordBatch> {
        self.table(&self.rows.all()?)
    }

    /// Forgets every stored key.
    pub(super) fn clear(&mut self) -> Result<()> {
        self.rows.clear()
    }

    /// What spilling has cost.
    pub(super) fn stats(&self) -> SpillStats {
        self.rows.stats()
    }

    fn table(&self, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<RecordBatch> {
        let parser = self.columns.parser();
        let mut columns: Vec<ArrayRef> = vec![Arc::new(BinaryArray::from(
            pairs.iter().map(|(k, _)| &k[..]).collect::<Vec<_>>(),
        ))];
        columns.extend(
            self.columns
                .convert_rows(pairs.iter().map(|(_, row)| parser.parse(row)))?,
        );
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(pairs.len())),
        )?)
    }
}
