//! A window aggregation's windows on disk: what it moved out of memory
//! when the memory budget refused it more ([`crate::spill`]).
//!
//! In: state tables of one window (or slice) end: the end, the key
//! columns, every aggregate's intermediate state (the checkpoint's
//! layout). Out: the same rows read back a part at a time, to be merged
//! with `GroupsAccumulator::merge_batch` when the window fires.
//!
//! A spilled window is a set of partial states, not a row per key: rows
//! that reach a window after it spilled fold into a fresh window in
//! memory, and firing merges them all, as DataFusion's multi-phase
//! aggregation merges partial aggregates. Each state table is split by a
//! hash of its keys into [`PARTS`] parts, so a window fires one part at a
//! time and never needs more than a part of its keys in memory. An entry
//! is one chunk of at most [`CHUNK_ROWS`] rows of one part, as Arrow IPC,
//! under the key (end, part, sequence number).
//!
//! ```text
//!   spill: window end e ──split by key hash──> (e, part 0, #0) (e, part 1, #0) ...
//!   more spills of e                           (e, part 0, #1) ...
//!   fire e: for each part p: merge memory's rows of p + every (e, p, #n) ──> emit
//! ```

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Arc;

use datafusion::arrow::array::UInt32Array;
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{EngineError, Result};
use crate::spill::{SpillSpace, SpillStats, SpillTable};

/// Parts a window's keys are split into: a spilled window fires a part at
/// a time.
pub const PARTS: usize = 16;
/// Rows an entry holds at most.
const CHUNK_ROWS: usize = 16 * 1024;

/// Windows written to disk, by end.
pub struct SpilledWindows {
    table: SpillTable,
    schema: SchemaRef,
    /// The key columns of a state table.
    key_count: usize,
    /// Each end's entries: how many chunks each part has, and the rows.
    ends: BTreeMap<i64, Written>,
}

#[derive(Default)]
struct Written {
    chunks: [u32; PARTS],
    rows: usize,
}

impl SpilledWindows {
    /// A table of `space` for state tables laid out as `schema` (the end,
    /// then `key_count` key columns, then the states).
    pub fn open(space: &Arc<SpillSpace>, schema: SchemaRef, key_count: usize) -> Result<Self> {
        Ok(Self {
            table: space.table("window_aggregate")?,
            schema,
            key_count,
            ends: BTreeMap::new(),
        })
    }

    /// `table`'s rows split by the hash of their keys: [`PARTS`] tables
    /// (every row in part 0 when there are no keys).
    pub fn split(&self, table: &RecordBatch) -> Result<Vec<RecordBatch>> {
        let keys = &table.columns()[1..1 + self.key_count];
        let parts = crate::partition::key_part_rows(keys, table.num_rows(), PARTS as u32)?;
        let mut rows: Vec<Vec<u32>> = vec![Vec::new(); PARTS];
        for (row, &part) in parts.iter().enumerate() {
            rows[part as usize].push(row as u32);
        }
        rows.into_iter()
            .map(|rows| {
                if rows.len() == table.num_rows() {
                    return Ok(table.clone());
                }
                Ok(take_record_batch(table, &UInt32Array::from(rows))?)
            })
            .collect()
    }

    /// Writes the rows of `table`, a state table of the window (or slice)
    /// ending at `end`, beside what that end already has on disk.
    pub fn write(&mut self, end: i64, table: &RecordBatch) -> Result<()> {
        if table.num_rows() == 0 {
            return Ok(());
        }
        let parts = self.split(table)?;
        let written = self.ends.entry(end).or_default();
        let mut chunks: Vec<([u8; KEY_BYTES], RecordBatch)> = Vec::new();
        for (part, rows) in parts.into_iter().enumerate() {
            let mut start = 0;
            while start < rows.num_rows() {
                let len = CHUNK_ROWS.min(rows.num_rows() - start);
                chunks.push((
                    entry_key(end, part, written.chunks[part]),
                    rows.slice(start, len),
                ));
                written.chunks[part] += 1;
                start += len;
            }
        }
        written.rows += table.num_rows();
        let mut failed = None;
        self.table.write_encoded(
            chunks.iter().map(|(key, rows)| (&key[..], rows)),
            |rows, out| {
                if let Err(e) = encode(rows, out) {
                    failed.get_or_insert(e);
                }
            },
        )?;
        failed.map_or(Ok(()), Err)
    }

    /// The first end with rows on disk.
    pub fn first_end(&self) -> Option<i64> {
        self.ends.first_key_value().map(|(&end, _)| end)
    }

    /// The ends in `range` with rows on disk.
    pub fn ends_in(&self, range: RangeInclusive<i64>) -> Vec<i64> {
        self.ends.range(range).map(|(&end, _)| end).collect()
    }

    /// Every end with rows on disk.
    pub fn ends(&self) -> Vec<i64> {
        self.ends.keys().copied().collect()
    }

    /// The rows of part `part` of the window ending at `end`, as written.
    pub fn read(&mut self, end: i64, part: usize) -> Result<Vec<RecordBatch>> {
        let chunks = self.ends.get(&end).map_or(0, |w| w.chunks[part]);
        let mut tables = Vec::with_capacity(chunks as usize);
        for n in 0..chunks {
            let value = self
                .table
                .read(&entry_key(end, part, n))?
                .ok_or_else(|| missing(end, part, n))?;
            tables.extend(decode(&value, &self.schema)?);
        }
        Ok(tables)
    }

    /// Forgets what the window ending at `end` has on disk.
    pub fn remove(&mut self, end: i64) -> Result<()> {
        let Some(written) = self.ends.remove(&end) else {
            return Ok(());
        };
        let keys: Vec<[u8; KEY_BYTES]> = (0..PARTS)
            .flat_map(|part| (0..written.chunks[part]).map(move |n| entry_key(end, part, n)))
            .collect();
        self.table.remove(keys.iter().map(|k| &k[..]))
    }

    /// Forgets every end up to and including `last`.
    pub fn remove_through(&mut self, last: i64) -> Result<()> {
        for end in self.ends_in(i64::MIN..=last) {
            self.remove(end)?;
        }
        Ok(())
    }

    /// Forgets everything.
    pub fn clear(&mut self) -> Result<()> {
        self.ends.clear();
        self.table.clear()
    }

    /// Rows on disk (a key may have a row in several spills of a window).
    pub fn rows(&self) -> usize {
        self.ends.values().map(|w| w.rows).sum()
    }

    /// What spilling has cost so far.
    pub fn stats(&self) -> SpillStats {
        self.table.stats()
    }
}

/// An entry's key: the end (sign bit flipped, so keys sort by end), the
/// part, the chunk's number.
const KEY_BYTES: usize = 8 + 1 + 4;

fn entry_key(end: i64, part: usize, n: u32) -> [u8; KEY_BYTES] {
    let mut key = [0u8; KEY_BYTES];
    key[..8].copy_from_slice(&((end as u64) ^ (1 << 63)).to_be_bytes());
    key[8] = part as u8;
    key[9..].copy_from_slice(&n.to_be_bytes());
    key
}

fn encode(rows: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
    let mut writer = StreamWriter::try_new(out, &rows.schema())?;
    writer.write(rows)?;
    writer.finish()?;
    Ok(())
}

fn decode(bytes: &[u8], schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let reader = StreamReader::try_new(bytes, None)?;
    let mut tables = Vec::new();
    for table in reader {
        let table = table?;
        // The stored schema's field names are the operator's own.
        tables.push(RecordBatch::try_new(
            schema.clone(),
            table.columns().to_vec(),
        )?);
    }
    Ok(tables)
}

fn missing(end: i64, part: usize, n: u32) -> EngineError {
    EngineError::Spill {
        doing: "read from",
        place: "the spill store".into(),
        reason: format!(
            "window_aggregate: chunk {n} of part {part} of the window ending at {end} is missing"
        ),
    }
}

/// The window aggregation's side of spilling: what moves out, how a
/// window with rows on disk fires, and how a checkpoint reads it.
impl super::WindowAggregateOperator {
    /// Moves every open window (open slice, when sliced) and every frozen
    /// slice to disk, the windows furthest from firing first.
    pub(super) fn spill_windows(&mut self, space: &Arc<SpillSpace>) -> Result<bool> {
        if self.windows.is_empty() && self.frozen.is_empty() {
            return Ok(false);
        }
        let mut spilled = match self.spilled.take() {
            Some(spilled) => spilled,
            None => SpilledWindows::open(
                space,
                self.state_schema.clone(),
                self.plan.group_by.keys.len(),
            )?,
        };
        let moved = self.move_out(&mut spilled);
        self.spilled = Some(spilled);
        moved.map(|()| true)
    }

    fn move_out(&mut self, spilled: &mut SpilledWindows) -> Result<()> {
        for (end, window) in std::mem::take(&mut self.windows).into_iter().rev() {
            let table = self.state_table(vec![self.window_columns(end, window)?])?;
            spilled.write(end, &table)?;
        }
        for (end, tables) in std::mem::take(&mut self.frozen).into_iter().rev() {
            for table in tables {
                spilled.write(end, &table)?;
            }
        }
        Ok(())
    }

    /// Whether any window (or slice) ending in `ends` has rows on disk.
    pub(super) fn spilled_in(&self, ends: RangeInclusive<i64>) -> bool {
        self.spilled
            .as_ref()
            .is_some_and(|s| !s.ends_in(ends).is_empty())
    }

    /// Fires the window ending at `end` from `memory` (state tables) and
    /// the rows on disk of the windows or slices ending in `disk`, a part
    /// of its keys at a time: a batch per part that holds any.
    pub(super) fn fire_spilled(
        &mut self,
        end: i64,
        memory: &[RecordBatch],
        disk: RangeInclusive<i64>,
        out: &mut crate::operator::Collector,
    ) -> Result<()> {
        let Some(mut spilled) = self.spilled.take() else {
            return Ok(());
        };
        let merged = self.merged_parts(memory, disk, &mut spilled);
        self.spilled = Some(spilled);
        for window in merged? {
            out.emit(self.emit(end, window)?);
        }
        Ok(())
    }

    /// `memory`'s rows and those on disk in `disk`, merged into a window
    /// per part that holds any.
    fn merged_parts(
        &self,
        memory: &[RecordBatch],
        disk: RangeInclusive<i64>,
        spilled: &mut SpilledWindows,
    ) -> Result<Vec<super::OpenWindow>> {
        let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); PARTS];
        for table in memory {
            for (part, rows) in spilled.split(table)?.into_iter().enumerate() {
                if rows.num_rows() > 0 {
                    parts[part].push(rows);
                }
            }
        }
        let ends = spilled.ends_in(disk);
        let mut windows = Vec::new();
        for (part, tables) in parts.into_iter().enumerate() {
            let mut window = self.open_window()?;
            for table in &tables {
                self.merge_table(&mut window, table)?;
            }
            for &slice in &ends {
                for table in spilled.read(slice, part)? {
                    self.merge_table(&mut window, &table)?;
                }
            }
            if window.num_groups > 0 {
                windows.push(window);
            }
        }
        Ok(windows)
    }

    /// For a checkpoint: every window (or slice) with rows on disk merged
    /// a part at a time with memory's rows of it, written back to disk as
    /// one spill (memory keeps none of it), and returned as rows of the
    /// state tables: (open windows, frozen slices). A row per key, as a
    /// job that never spilled checkpoints it.
    pub(super) fn compact_spilled(&mut self) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>)> {
        let Some(mut spilled) = self.spilled.take() else {
            return Ok((Vec::new(), Vec::new()));
        };
        let compacted = self.compact_into(&mut spilled);
        self.spilled = Some(spilled);
        compacted
    }

    fn compact_into(
        &mut self,
        spilled: &mut SpilledWindows,
    ) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>)> {
        let horizon = self
            .watermark
            .saturating_sub(self.plan.group_by.allowed_lateness_ms);
        let (mut open, mut frozen) = (Vec::new(), Vec::new());
        for end in spilled.ends() {
            let mut memory = Vec::new();
            if let Some(window) = self.windows.remove(&end) {
                memory.push(self.state_table(vec![self.window_columns(end, window)?])?);
            }
            memory.extend(self.frozen.remove(&end).unwrap_or_default());
            let merged = self
                .merged_parts(&memory, end..=end, spilled)?
                .into_iter()
                .map(|window| self.state_table(vec![self.window_columns(end, window)?]))
                .collect::<Result<Vec<_>>>()?;
            spilled.remove(end)?;
            for table in &merged {
                spilled.write(end, table)?;
            }
            // A slice the watermark has passed is frozen (`fire_sliced`).
            if self.slice_ms.is_some() && end <= horizon {
                frozen.extend(merged);
            } else {
                open.extend(merged);
            }
        }
        Ok((open, frozen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::SpillConfig;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn table(end: i64, keys: &[&str]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("window_end", DataType::Int64, false),
            Field::new("k", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![end; keys.len()])),
                Arc::new(StringArray::from(keys.to_vec())),
                Arc::new(Int64Array::from_iter_values(0..keys.len() as i64)),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_window_reads_back_every_row_of_every_spill_once_by_part() {
        let space = Arc::new(SpillSpace::new(SpillConfig::default()));
        let first = table(10, &["a", "b", "c", "d", "e"]);
        let mut spilled = SpilledWindows::open(&space, first.schema(), 1).unwrap();
        spilled.write(10, &first).unwrap();
        spilled.write(10, &table(10, &["a", "z"])).unwrap();
        spilled.write(-20, &table(-20, &["q"])).unwrap();
        assert_eq!(spilled.ends(), vec![-20, 10], "ends sort below zero too");
        assert_eq!(spilled.rows(), 8);
        let mut keys = Vec::new();
        for part in 0..PARTS {
            for t in spilled.read(10, part).unwrap() {
                let k = t.column(1).as_any().downcast_ref::<StringArray>().unwrap();
                keys.extend(k.iter().map(|k| (k.unwrap().to_string(), part)));
            }
        }
        keys.sort();
        let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["a", "a", "b", "c", "d", "e", "z"]);
        assert_eq!(keys[0].1, keys[1].1, "a key's rows share a part");
        spilled.remove_through(0).unwrap();
        assert_eq!(spilled.ends(), vec![10]);
        spilled.remove(10).unwrap();
        assert_eq!(spilled.rows(), 0);
        assert!(spilled.table.entries().next().is_none(), "nothing left");
    }
}
