//! Each partition's rows in order, with their copies: the state of the
//! operators that keep every row of an updating input by partition
//! (updating Top-N, OVER over an updating input), and its state table.
//!
//! In: rows row-encoded as (sort key, row) under their partition key,
//! each added or (a retraction) taken away; the watermark, for the TTL.
//! Out: each partition's rows as they stand ([`OrderedPartitions`], which
//! keeps the rows and bytes held and the retractions of rows never held),
//! the declared table `rows` ([`table_spec`]) a checkpoint holds, and the
//! partitions again from it.
//!
//! Spilling ([`OrderedPartitions::spill`]): every partition in memory goes
//! to a table of the job's spill store ([`crate::spill`]) and memory starts
//! afresh; [`OrderedPartitions::read_back`] brings the partitions a batch
//! touches back before it is applied and takes them off disk, so a
//! partition is in memory or on disk, never both. An entry is the
//! partition key and, little-endian, `touched_at: i64` then per row
//! `sort_len: u32`, the sort key, `row_len: u32`, the row, `copies: u32`.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{BinaryArray, BinaryBuilder, Int64Array, UInt32Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::Rows;
use datafusion::physical_expr::PhysicalExpr;
use hashbrown::HashMap;

use super::ttl::TtlSweeps;
use crate::error::Result;
use crate::spill::{put_bytes, EntryReader, SpillSpace, SpillStats, SpillTable};
use crate::state::declared::TableSpec;
use crate::state::table_file::{ChunkedTableFile, TableChunk};
use crate::state::StateSnapshot;
use crate::time::{Timestamp, WATERMARK_MIN};

/// A partition's rows in order: (sort key, row) -> copies.
pub(crate) type Ordered = BTreeMap<(Box<[u8]>, Box<[u8]>), u32>;

/// A partition: its rows and the watermark when a row last touched it.
struct Partition {
    rows: Ordered,
    touched_at: Timestamp,
}

/// The partitions by their encoded key.
type Partitions = HashMap<Box<[u8]>, Partition>;

/// Bytes a partition costs besides its rows and key bytes: its slot in
/// the partitions' map (key box, rows map, last touch, control byte) and
/// the first node of its rows' B-tree, allocated whole (eleven slots)
/// however few rows it holds. Without it, deduplication over
/// many partitions of one row each (Nexmark q18) counted a third of what
/// it held.
const PARTITION_BYTES: usize = std::mem::size_of::<(Box<[u8]>, Partition)>()
    + 1
    + 16
    + 11 * (std::mem::size_of::<(Box<[u8]>, Box<[u8]>)>() + std::mem::size_of::<u32>());

/// Bytes partition `key` costs in memory besides its rows.
fn key_bytes(key: &[u8]) -> usize {
    key.len() + PARTITION_BYTES
}

/// Bytes a row costs: its sort key, its row, the map's node.
fn entry_bytes((sort, row): &(Box<[u8]>, Box<[u8]>)) -> usize {
    sort.len() + row.len() + 48
}

/// The state table `rows`: the partition key, the sort key and the row
/// (row-encoded), the row's copies and when its partition was last
/// touched (for the TTL); keyed by the partition key.
pub(crate) fn table_spec(
    partition_by: &[Arc<dyn PhysicalExpr>],
    input_schema: &Schema,
    ttl_ms: Option<i64>,
) -> Result<TableSpec> {
    Ok(TableSpec::new(
        "rows",
        Arc::new(Schema::new(vec![
            Field::new("partition", DataType::Binary, false),
            Field::new("sort", DataType::Binary, false),
            Field::new("row", DataType::Binary, false),
            Field::new("copies", DataType::UInt32, false),
            Field::new("touched_at", DataType::Int64, false),
        ])),
    )
    .keyed(super::encoded_key(partition_by, input_schema)?)
    .with_ttl(ttl_ms))
}

/// Every partition's rows, with what a node reports of them.
pub(crate) struct OrderedPartitions {
    partitions: Partitions,
    /// Rows held over all partitions (copies counted).
    held: usize,
    /// Bytes held (keys, rows and their overheads), kept as rows come and
    /// go: sizing walked every row.
    bytes: usize,
    /// Retractions of rows never held (counted, ignored).
    unmatched_retractions: u64,
    /// When partitions untouched for the TTL are dropped.
    sweeps: TtlSweeps,
    /// The cutoff of the last TTL sweep: a spilled partition last touched
    /// before it is gone, as it would be had it stayed in memory.
    expired_before: Timestamp,
    /// The partitions moved to disk when the memory budget refused more.
    spilled: Option<SpillTable>,
}

impl OrderedPartitions {
    /// No partitions; those untouched for `ttl_ms` (when set) are dropped.
    pub(crate) fn new(ttl_ms: Option<i64>) -> Self {
        Self {
            partitions: Partitions::new(),
            held: 0,
            bytes: 0,
            unmatched_retractions: 0,
            sweeps: TtlSweeps::new(ttl_ms),
            expired_before: WATERMARK_MIN,
            spilled: None,
        }
    }

    /// Brings the spilled partitions among `keys` (a batch's, see
    /// [`Self::touched`]) back into memory and takes them off disk; one
    /// the TTL has since expired is forgotten instead.
    pub(crate) fn read_back<'a>(&mut self, keys: impl Iterator<Item = &'a [u8]>) -> Result<()> {
        let Some(spilled) = self.spilled.as_mut() else {
            return Ok(());
        };
        let mut gone: Vec<&[u8]> = Vec::new();
        for key in keys {
            if self.partitions.contains_key(key) {
                continue;
            }
            let Some(value) = spilled.read(key)? else {
                continue;
            };
            gone.push(key);
            let partition = decode(&value)?;
            if partition.touched_at < self.expired_before {
                self.held -= partition.rows.values().map(|&c| c as usize).sum::<usize>();
                continue;
            }
            self.bytes += partition_bytes(key, &partition.rows);
            self.partitions.insert(key.into(), partition);
        }
        if !gone.is_empty() {
            spilled.remove(gone)?;
        }
        Ok(())
    }

    /// Moves every partition in memory to a table of `space` (opened for
    /// an operator of kind `kind` the first time); whether anything moved.
    pub(crate) fn spill(&mut self, space: &Arc<SpillSpace>, kind: &str) -> Result<bool> {
        if self.partitions.is_empty() {
            return Ok(false);
        }
        if self.spilled.is_none() {
            self.spilled = Some(space.table(kind)?);
        }
        let Some(spilled) = self.spilled.as_mut() else {
            return Ok(false);
        };
        let partitions = self.partitions.iter().map(|(key, p)| (key.as_ref(), p));
        spilled.write_encoded(partitions, encode)?;
        crate::runtime::drop_later::drop_later(std::mem::take(&mut self.partitions));
        self.bytes = 0;
        Ok(true)
    }

    /// What spilling has cost.
    pub(crate) fn spill_stats(&self) -> SpillStats {
        self.spilled
            .as_ref()
            .map(SpillTable::stats)
            .unwrap_or_default()
    }

    /// A batch's rows by partition (`keys`: each row's partition key),
    /// partitions in the order the batch first touches them.
    pub(crate) fn touched(keys: &Rows) -> Vec<(Box<[u8]>, Vec<usize>)> {
        let mut touched: Vec<(Box<[u8]>, Vec<usize>)> = Vec::new();
        let mut slots: HashMap<&[u8], usize> = HashMap::new();
        for r in 0..keys.num_rows() {
            let key = keys.row(r).data();
            let slot = *slots.entry(key).or_insert_with(|| {
                touched.push((key.into(), Vec::new()));
                touched.len() - 1
            });
            touched[slot].1.push(r);
        }
        touched
    }

    /// Takes partition `key`'s rows out to change them (empty for a new
    /// partition); [`Self::put_back`] returns them.
    pub(crate) fn take(&mut self, key: &[u8]) -> Ordered {
        match self.partitions.remove(key) {
            Some(partition) => {
                self.bytes -= key_bytes(key);
                partition.rows
            }
            None => Ordered::new(),
        }
    }

    /// Adds a copy of `entry` to `rows`, or, for a retraction, takes one
    /// away (a retraction of a row `rows` does not hold is counted).
    pub(crate) fn apply(
        &mut self,
        rows: &mut Ordered,
        entry: (Box<[u8]>, Box<[u8]>),
        retraction: bool,
    ) {
        if retraction {
            match rows.get_mut(&entry) {
                Some(copies) if *copies > 1 => *copies -= 1,
                Some(_) => {
                    rows.remove(&entry);
                    self.bytes -= entry_bytes(&entry);
                }
                None => {
                    self.unmatched_retractions += 1;
                    return;
                }
            }
            self.held -= 1;
        } else {
            match rows.entry(entry) {
                std::collections::btree_map::Entry::Occupied(mut held) => {
                    *held.get_mut() += 1;
                }
                std::collections::btree_map::Entry::Vacant(slot) => {
                    self.bytes += entry_bytes(slot.key());
                    slot.insert(1);
                }
            }
            self.held += 1;
        }
    }

    /// Keeps the first `keep` rows of `rows` (copies counted).
    pub(crate) fn keep_first(&mut self, rows: &mut Ordered, keep: usize) {
        let mut seen = 0usize;
        let (mut dropped, mut bytes) = (0usize, 0usize);
        rows.retain(|entry, copies| {
            if seen >= keep {
                dropped += *copies as usize;
                bytes += entry_bytes(entry);
                return false;
            }
            let room = keep - seen;
            if (*copies as usize) > room {
                dropped += *copies as usize - room;
                *copies = room as u32;
            }
            seen += *copies as usize;
            true
        });
        self.held -= dropped;
        self.bytes -= bytes;
    }

    /// Returns partition `key`'s rows, touched at `watermark`; a partition
    /// left without rows is dropped.
    pub(crate) fn put_back(&mut self, key: Box<[u8]>, rows: Ordered, watermark: Timestamp) {
        if rows.is_empty() {
            return;
        }
        self.bytes += key_bytes(&key);
        self.partitions.insert(
            key,
            Partition {
                rows,
                touched_at: watermark,
            },
        );
    }

    /// Drops the partitions no row touched for the TTL before `watermark`,
    /// when a sweep is due.
    pub(crate) fn expire(&mut self, watermark: Timestamp) {
        let Some(cutoff) = self.sweeps.due(watermark) else {
            return;
        };
        self.expired_before = cutoff;
        let (mut dropped, mut bytes) = (0, 0);
        self.partitions.retain(|key, p| {
            let keep = p.touched_at >= cutoff;
            if !keep {
                dropped += p.rows.values().map(|&c| c as usize).sum::<usize>();
                bytes += key_bytes(key) + p.rows.keys().map(entry_bytes).sum::<usize>();
            }
            keep
        });
        self.held -= dropped;
        self.bytes -= bytes;
    }

    /// Rows held (copies counted).
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Retractions of rows never held.
    pub(crate) fn unmatched_retractions(&self) -> u64 {
        self.unmatched_retractions
    }

    /// Puts the `rows` table of `spec` into `snapshot`: every partition,
    /// on disk or in memory (a stored one the TTL has expired leaves the
    /// disk instead). Once spilled, it is streamed to a file a chunk at a
    /// time rather than gathered in memory.
    pub(crate) fn put_table(
        &mut self,
        spec: &TableSpec,
        snapshot: &mut StateSnapshot,
    ) -> Result<()> {
        let Some(spilled) = self.spilled.as_mut() else {
            let mut table = Table::default();
            for (key, partition) in &self.partitions {
                table.push(key, partition);
            }
            return snapshot.put(spec, table.finish(spec)?);
        };
        let file = spilled.snapshot_file(spec.name(), spec.schema())?;
        let mut file = ChunkedTableFile::<Table>::new(file, spec);
        let mut expired = Vec::new();
        for entry in spilled.entries() {
            let (key, value) = entry?;
            let partition = decode(&value)?;
            if partition.touched_at < self.expired_before {
                self.held -= partition.rows.values().map(|&c| c as usize).sum::<usize>();
                expired.push(key);
            } else {
                file.push(|table| table.push(&key, &partition))?;
            }
        }
        spilled.remove(expired.iter().map(Vec::as_slice))?;
        for (key, partition) in &self.partitions {
            file.push(|table| table.push(key, partition))?;
        }
        snapshot.put_file(spec, file.finish()?)
    }

    /// The partitions a table of `spec` holds, in place of these, with the
    /// retractions a checkpoint counted, resumed at `watermark`.
    pub(crate) fn restore(
        &mut self,
        spec: &TableSpec,
        table: &RecordBatch,
        unmatched_retractions: u64,
        watermark: Timestamp,
    ) -> Result<()> {
        (self.partitions, self.held, self.bytes) = load(spec, table)?;
        if let Some(spilled) = self.spilled.as_mut() {
            spilled.clear()?;
        }
        self.unmatched_retractions = unmatched_retractions;
        self.sweeps.resume(watermark);
        Ok(())
    }
}

/// The `rows` table, built partition by partition.
#[derive(Default)]
struct Table {
    partition: BinaryBuilder,
    sort: BinaryBuilder,
    row: BinaryBuilder,
    copies: Vec<u32>,
    touched_at: Vec<Timestamp>,
}

impl Table {
    fn push(&mut self, key: &[u8], partition: &Partition) {
        for ((sort, row), &copies) in &partition.rows {
            self.partition.append_value(key);
            self.sort.append_value(sort);
            self.row.append_value(row);
            self.copies.push(copies);
            self.touched_at.push(partition.touched_at);
        }
    }
}

impl TableChunk for Table {
    fn size(&self) -> (usize, usize) {
        (self.copies.len(), self.row.values_slice().len())
    }

    fn finish(mut self, spec: &TableSpec) -> Result<RecordBatch> {
        Ok(RecordBatch::try_new(
            spec.schema().clone(),
            vec![
                Arc::new(self.partition.finish()),
                Arc::new(self.sort.finish()),
                Arc::new(self.row.finish()),
                Arc::new(UInt32Array::from(self.copies)),
                Arc::new(Int64Array::from(self.touched_at)),
            ],
        )?)
    }
}

/// Bytes a partition's key and rows cost in memory.
fn partition_bytes(key: &[u8], rows: &Ordered) -> usize {
    key_bytes(key) + rows.keys().map(entry_bytes).sum::<usize>()
}

/// Appends `partition`'s spilled entry value to `out`.
fn encode(partition: &Partition, out: &mut Vec<u8>) {
    out.extend_from_slice(&partition.touched_at.to_le_bytes());
    for ((sort, row), &copies) in &partition.rows {
        put_bytes(out, sort);
        put_bytes(out, row);
        out.extend_from_slice(&copies.to_le_bytes());
    }
}

/// The partition a spilled entry value holds.
fn decode(value: &[u8]) -> Result<Partition> {
    let mut value = EntryReader::new(value, "ordered partition");
    let touched_at = value.i64()?;
    let mut rows = Ordered::new();
    while !value.is_empty() {
        let sort = value.bytes()?;
        let row = value.bytes()?;
        rows.insert((sort.into(), row.into()), value.u32()?);
    }
    Ok(Partition { rows, touched_at })
}

/// The partitions a table of `spec` holds, with the rows they hold (copies
/// counted) and their bytes.
fn load(spec: &TableSpec, table: &RecordBatch) -> Result<(Partitions, usize, usize)> {
    let partition = spec.column::<BinaryArray>(table, 0)?;
    let sort = spec.column::<BinaryArray>(table, 1)?;
    let row = spec.column::<BinaryArray>(table, 2)?;
    let copies = spec.column::<UInt32Array>(table, 3)?;
    let touched_at = spec.column::<Int64Array>(table, 4)?;
    let mut partitions = Partitions::new();
    let mut held = 0;
    for r in 0..table.num_rows() {
        partitions
            .entry(partition.value(r).into())
            .or_insert_with(|| Partition {
                rows: Ordered::new(),
                touched_at: touched_at.value(r),
            })
            .rows
            .insert((sort.value(r).into(), row.value(r).into()), copies.value(r));
        held += copies.value(r) as usize;
    }
    let bytes = partitions
        .iter()
        .map(|(k, p)| partition_bytes(k, &p.rows))
        .sum();
    Ok((partitions, held, bytes))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::ArrayRef;
    use datafusion::arrow::row::{RowConverter, SortField};

    use super::*;

    fn entry(sort: &str, row: &str) -> (Box<[u8]>, Box<[u8]>) {
        (sort.as_bytes().into(), row.as_bytes().into())
    }

    fn spec() -> TableSpec {
        let schema = Schema::new(vec![Field::new("k", DataType::Int64, true)]);
        let key = datafusion::physical_expr::expressions::col("k", &schema).unwrap();
        table_spec(&[key], &schema, Some(10)).unwrap()
    }

    #[test]
    fn copies_come_and_go_and_a_retraction_of_a_row_never_held_is_counted() {
        let mut state = OrderedPartitions::new(None);
        let mut rows = state.take(b"p");
        state.apply(&mut rows, entry("1", "a"), false);
        state.apply(&mut rows, entry("1", "a"), false);
        state.apply(&mut rows, entry("2", "b"), false);
        assert_eq!((state.held(), rows.len()), (3, 2));
        state.apply(&mut rows, entry("1", "a"), true);
        state.apply(&mut rows, entry("9", "z"), true);
        assert_eq!((state.held(), state.unmatched_retractions()), (2, 1));
        state.put_back(b"p".as_slice().into(), rows, 0);
        let bytes = state.bytes();
        assert_eq!(
            bytes,
            key_bytes(b"p") + entry_bytes(&entry("1", "a")) + entry_bytes(&entry("2", "b"))
        );
        // Taken out and emptied: the partition is dropped, its bytes too.
        let mut rows = state.take(b"p");
        state.apply(&mut rows, entry("1", "a"), true);
        state.apply(&mut rows, entry("2", "b"), true);
        state.put_back(b"p".as_slice().into(), rows, 0);
        assert_eq!((state.held(), state.bytes()), (0, 0));
    }

    #[test]
    fn keep_first_counts_copies_and_what_it_drops() {
        let mut state = OrderedPartitions::new(None);
        let mut rows = state.take(b"p");
        for (s, r) in [("1", "a"), ("1", "a"), ("2", "b"), ("3", "c")] {
            state.apply(&mut rows, entry(s, r), false);
        }
        state.keep_first(&mut rows, 1);
        assert_eq!(rows.get(&entry("1", "a")), Some(&1));
        assert_eq!((rows.len(), state.held()), (1, 1));
        assert_eq!(state.bytes(), entry_bytes(&entry("1", "a")));
    }

    #[test]
    fn batches_group_by_partition_in_first_touch_order() {
        let converter = RowConverter::new(vec![SortField::new(DataType::Int64)]).unwrap();
        let keys: ArrayRef = Arc::new(Int64Array::from(vec![7, 3, 7, 5, 3]));
        let rows = converter.convert_columns(&[keys]).unwrap();
        let touched = OrderedPartitions::touched(&rows);
        let members: Vec<Vec<usize>> = touched.into_iter().map(|(_, m)| m).collect();
        assert_eq!(members, vec![vec![0, 2], vec![1, 4], vec![3]]);
    }

    #[test]
    fn a_table_restores_what_it_holds_and_the_ttl_drops_untouched_partitions() {
        let spec = spec();
        let mut state = OrderedPartitions::new(Some(10));
        for (key, at) in [(b"old".as_slice(), 0), (b"new".as_slice(), 100)] {
            let mut rows = state.take(key);
            state.apply(&mut rows, entry("1", "a"), false);
            state.apply(&mut rows, entry("1", "a"), false);
            state.put_back(key.into(), rows, at);
        }
        let mut snapshot = StateSnapshot::default();
        state.put_table(&spec, &mut snapshot).unwrap();
        let table = snapshot.take(&spec).unwrap();
        let mut restored = OrderedPartitions::new(Some(10));
        restored.restore(&spec, &table, 4, 100).unwrap();
        assert_eq!(
            (
                restored.held(),
                restored.bytes(),
                restored.unmatched_retractions()
            ),
            (state.held(), state.bytes(), 4)
        );
        // At 105 the TTL (10 ms) drops the partition last touched at 0 and
        // keeps the one touched at 100; at 1,000 that one goes too.
        state.expire(105);
        assert_eq!(state.held(), 2);
        state.expire(1_000);
        assert_eq!((state.held(), state.bytes()), (0, 0));
        // A restored state sweeps half a TTL after its watermark.
        restored.expire(104);
        assert_eq!(restored.held(), 4, "no sweep due yet");
        restored.expire(105);
        assert_eq!(restored.held(), 2);
    }
}
