//! Windows on disk: what a window operator (the window aggregation, the
//! window Top-N) moved out of memory when the memory budget refused it
//! more ([`crate::spill`]).
//!
//! In: tables of one window's rows (or one hop slice's), each row with its
//! key (the GROUP BY keys of an aggregate's partial state, the PARTITION
//! BY values of a Top-N's waiting rows). Out: the same rows read back a
//! part at a time when the window fires.
//!
//! A spilled window is a set of spills, not a row per key: rows that reach
//! a window after it spilled gather in memory again, and firing takes them
//! all (an aggregate merges partial states, as DataFusion's multi-phase
//! aggregation does; a Top-N ranks the union). Each table is split by a
//! hash of its keys into [`PARTS`] parts, so a window fires one part at a
//! time and never needs more than a part of its keys in memory. An entry
//! is one chunk of at most [`CHUNK_ROWS`] rows of one part, as Arrow IPC,
//! under the key (end, part, sequence number).
//!
//! ```text
//!   spill: window end e ──split by key hash──> (e, part 0, #0) (e, part 1, #0) ...
//!   more spills of e                           (e, part 0, #1) ...
//!   fire e: for each part p: memory's rows of p + every (e, p, #n) ──> emit
//! ```

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, UInt32Array};
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
    /// The operator kind, for errors.
    kind: &'static str,
    /// Each end's entries: how many chunks each part has, and the rows.
    ends: BTreeMap<i64, Written>,
}

#[derive(Default)]
struct Written {
    chunks: [u32; PARTS],
    rows: usize,
}

impl SpilledWindows {
    /// A file for the snapshot table `name` beside the store.
    pub fn snapshot_file(
        &self,
        name: &str,
        schema: &SchemaRef,
    ) -> Result<crate::state::table_file::TableFileWriter> {
        self.table.snapshot_file(name, schema)
    }

    /// A table of `space` for an operator of kind `kind` whose windows'
    /// rows are laid out as `schema`.
    pub fn open(space: &Arc<SpillSpace>, kind: &'static str, schema: SchemaRef) -> Result<Self> {
        Ok(Self {
            table: space.table(kind)?,
            schema,
            kind,
            ends: BTreeMap::new(),
        })
    }

    /// `table`'s rows split by the hash of their keys `keys` (a column per
    /// key, a value per row): [`PARTS`] tables (every row in part 0 when
    /// there are no keys).
    pub fn split(table: &RecordBatch, keys: &[ArrayRef]) -> Result<Vec<RecordBatch>> {
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

    /// Writes the rows of `table` (with keys `keys`), rows of the window
    /// (or slice) ending at `end`, beside what that end has on disk.
    pub fn write(&mut self, end: i64, table: &RecordBatch, keys: &[ArrayRef]) -> Result<()> {
        if table.num_rows() == 0 {
            return Ok(());
        }
        let parts = Self::split(table, keys)?;
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
                .ok_or_else(|| missing(self.kind, end, part, n))?;
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

/// `rows` as an Arrow IPC stream, appended to `out` (also the session
/// aggregate's spilled waiting rows).
pub(super) fn encode(rows: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
    let mut writer = StreamWriter::try_new(out, &rows.schema())?;
    writer.write(rows)?;
    writer.finish()?;
    Ok(())
}

/// The tables of an Arrow IPC stream [`encode`] wrote, as `schema`.
pub(super) fn decode(bytes: &[u8], schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
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

fn missing(kind: &str, end: i64, part: usize, n: u32) -> EngineError {
    EngineError::Spill {
        doing: "read from",
        place: "the spill store".into(),
        reason: format!(
            "{kind}: chunk {n} of part {part} of the window ending at {end} is missing"
        ),
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
        let mut spilled = SpilledWindows::open(&space, "window_aggregate", first.schema()).unwrap();
        let write = |spilled: &mut SpilledWindows, t: RecordBatch| {
            let end = t
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .value(0);
            spilled.write(end, &t, &t.columns()[1..2]).unwrap();
        };
        write(&mut spilled, first);
        write(&mut spilled, table(10, &["a", "z"]));
        write(&mut spilled, table(-20, &["q"]));
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
