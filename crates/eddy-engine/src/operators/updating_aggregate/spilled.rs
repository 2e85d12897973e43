//! The updating aggregate's groups on disk: what it moved out of memory
//! when the memory budget refused it more ([`crate::spill`]).
//!
//! In: rows of the aggregate's `groups` table (key columns, then the row
//! count, the watermark that last touched the group and every aggregate's
//! state columns, the checkpoint's layout), with a packed column per
//! aggregate keeping a table of its own (a group's multiset). Out: the same rows read back by
//! key. Keys and states are stored in Arrow's row format (one converter
//! for the key columns, one for the rest), so a group's entry is the bytes
//! its key sorts by and the bytes of its state; a spill converts and
//! writes the table 16,384 groups at a time, a lookup converts the keys a
//! batch brought that memory does not hold and reads each by point lookup.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::row::{RowConverter, SortField};
use hashbrown::HashSet;

use crate::error::Result;
use crate::spill::{SpillSpace, SpillStats, SpillTable};
use crate::state::table_file::{TableFileWriter, CHUNK_ROWS};

/// Groups written to disk, by key.
pub struct SpilledGroups {
    table: SpillTable,
    /// The groups table's schema.
    schema: SchemaRef,
    key_count: usize,
    keys: RowConverter,
    states: RowConverter,
}

/// Spilled groups found for some keys: which of the keys asked for, and
/// their state columns (the groups table's columns after the keys), a row
/// per key found.
pub struct Found {
    pub positions: Vec<usize>,
    pub states: Vec<ArrayRef>,
}

impl SpilledGroups {
    /// A table of `space` for groups laid out as `schema` (its first
    /// `key_count` columns the key); `None` when a column has a type the
    /// row format does not take, so the groups cannot be spilled.
    pub fn open(
        space: &Arc<SpillSpace>,
        kind: &str,
        schema: SchemaRef,
        key_count: usize,
    ) -> Result<Option<Self>> {
        let sort_fields = |fields: &[Arc<datafusion::arrow::datatypes::Field>]| {
            fields
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect::<Vec<_>>()
        };
        let (key_fields, state_fields) = schema.fields().split_at(key_count);
        let (key_fields, state_fields) = (sort_fields(key_fields), sort_fields(state_fields));
        let supported = |fields: &[SortField]| RowConverter::supports_fields(fields);
        if !supported(&key_fields) || !supported(&state_fields) {
            return Ok(None);
        }
        Ok(Some(Self {
            table: space.table(kind)?,
            keys: RowConverter::new(key_fields)?,
            states: RowConverter::new(state_fields)?,
            schema,
            key_count,
        }))
    }

    /// Writes every group of `groups` (a groups table) that holds rows,
    /// and forgets the stored copy of every one that holds none.
    pub fn write(&mut self, groups: &RecordBatch) -> Result<()> {
        // A chunk at a time: the encoded rows never copy the table whole.
        let mut start = 0;
        while start < groups.num_rows() {
            let len = CHUNK_ROWS.min(groups.num_rows() - start);
            self.write_chunk(&groups.slice(start, len))?;
            start += len;
        }
        Ok(())
    }

    fn write_chunk(&mut self, groups: &RecordBatch) -> Result<()> {
        let (keys, states) = groups.columns().split_at(self.key_count);
        let key_rows = self.keys.convert_columns(keys)?;
        let state_rows = self.states.convert_columns(states)?;
        let counts = row_counts(groups, self.key_count)?;
        let held = counts.iter().enumerate().filter(|(_, &count)| count > 0);
        self.table
            .write(held.map(|(g, _)| (key_rows.row(g).data(), state_rows.row(g).data())))?;
        let empty = counts.iter().enumerate().filter(|(_, &count)| count <= 0);
        self.table
            .remove(empty.map(|(g, _)| key_rows.row(g).data()))
    }

    /// Forgets the stored copies of the groups with these keys.
    pub fn forget(&mut self, keys: &[ArrayRef]) -> Result<()> {
        let rows = self.keys.convert_columns(keys)?;
        self.table.remove(rows.iter().map(|r| r.data()))
    }

    /// The stored groups among `keys` (one row a key).
    pub fn read(&mut self, keys: &[ArrayRef]) -> Result<Found> {
        let rows = self.keys.convert_columns(keys)?;
        let mut positions = Vec::new();
        let mut values = Vec::new();
        for (i, key) in rows.iter().enumerate() {
            if let Some(value) = self.table.read(key.as_ref())? {
                positions.push(i);
                values.push(value);
            }
        }
        let parser = self.states.parser();
        let states = self
            .states
            .convert_rows(values.iter().map(|v| parser.parse(v)))?;
        Ok(Found { positions, states })
    }

    /// Calls `each` with the stored groups whose keys are not among
    /// `in_memory` (the key columns of the groups memory holds), laid out
    /// as stored, [`CHUNK_ROWS`] groups at a time: a checkpoint streams
    /// them to its file, never holding them all.
    pub fn each_stored_except(
        &self,
        in_memory: &[ArrayRef],
        mut each: impl FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let held: HashSet<Vec<u8>> = self
            .keys
            .convert_columns(in_memory)?
            .iter()
            .map(|r| r.as_ref().to_vec())
            .collect();
        let mut keys = Vec::new();
        let mut states = Vec::new();
        for entry in self.table.entries() {
            let (key, state) = entry?;
            if !held.contains(&key) {
                keys.push(key);
                states.push(state);
            }
            if keys.len() == CHUNK_ROWS {
                each(self.decoded(&keys, &states)?)?;
                keys.clear();
                states.clear();
            }
        }
        if !keys.is_empty() {
            each(self.decoded(&keys, &states)?)?;
        }
        Ok(())
    }

    /// Stored entries back as groups-table rows.
    fn decoded(&self, keys: &[Vec<u8>], states: &[Vec<u8>]) -> Result<RecordBatch> {
        let key_parser = self.keys.parser();
        let state_parser = self.states.parser();
        let mut columns = self
            .keys
            .convert_rows(keys.iter().map(|k| key_parser.parse(k)))?;
        columns.extend(
            self.states
                .convert_rows(states.iter().map(|s| state_parser.parse(s)))?,
        );
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &datafusion::arrow::record_batch::RecordBatchOptions::new()
                .with_row_count(Some(keys.len())),
        )?)
    }

    /// A file for the snapshot table `name` beside the store.
    pub fn snapshot_file(&self, name: &str, schema: &SchemaRef) -> Result<TableFileWriter> {
        self.table.snapshot_file(name, schema)
    }

    /// What spilling has cost.
    pub fn stats(&self) -> SpillStats {
        self.table.stats()
    }
}

/// The groups table's row counts.
fn row_counts(groups: &RecordBatch, key_count: usize) -> Result<&[i64]> {
    groups
        .column(key_count)
        .as_any()
        .downcast_ref::<datafusion::arrow::array::Int64Array>()
        .map(|a| a.values().as_ref())
        .ok_or_else(|| {
            crate::error::EngineError::State("updating_aggregate: bad groups table".into())
        })
}
