//! The interval join's rows on disk: what it moved out of memory when the
//! memory budget refused it more ([`crate::spill`]).
//!
//! In: a side's rows as its checkpoint table has them (the side's columns,
//! `__matched`, `__watermark`), each with the hash of its join key and its
//! event time. Out: the rows of the keys a batch brings, read back (and
//! taken off disk) before the batch probes; the keys whose earliest row
//! the watermark is about to evict, in time order, so that eviction and
//! the null-padded rows of outer joins stay exact; every row on disk, for
//! checkpoints.
//!
//! A key hash is wholly in memory (both sides) or wholly on disk: a spill
//! moves every row, and a read back brings both sides' rows of a hash.
//! So a spill never meets rows of a hash already on disk, and an entry is
//! written once. An entry's key is the hash (8 bytes, big-endian); its
//! value is the hash's rows in Arrow's row format, each with its length
//! first ([`put_bytes`]). Nothing about what is on disk stays in memory,
//! so memory starts afresh after a spill: whether a hash is on disk is a
//! point read (the store's filters answer most misses without reading),
//! and a third table orders the hashes for eviction by the earliest time
//! of their rows on each side: its keys are (side, time, hash), without
//! values. An eviction entry whose hash a batch brought back since finds
//! nothing to read.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{BooleanArray, Int64Array};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::operators::interval_join::spilled::SpilledRows;
//! use eddy_engine::spill::{SpillConfig, SpillSpace};
//!
//! let table = Arc::new(Schema::new(vec![
//!     Field::new("t", DataType::Int64, true),
//!     Field::new("__matched", DataType::Boolean, false),
//!     Field::new("__watermark", DataType::Int64, true),
//! ]));
//! let space = Arc::new(SpillSpace::new(SpillConfig::default()));
//! let mut spilled = SpilledRows::open(&space, [table.clone(), table.clone()]).unwrap().unwrap();
//! let rows = RecordBatch::try_new(table, vec![
//!     Arc::new(Int64Array::from(vec![5, 9])),
//!     Arc::new(BooleanArray::from(vec![false, true])),
//!     Arc::new(Int64Array::from(vec![None, Some(3)])),
//! ]).unwrap();
//! // Hashes 1 and 2, at 5 and 9 ms.
//! spilled.write(0, &rows, &[1, 2], &[5, 9]).unwrap();
//! assert_eq!(spilled.rows(), 2);
//! assert_eq!(spilled.due([6, 0], 10).unwrap(), vec![1]);
//! let [left, right] = spilled.read(&[1]).unwrap();
//! assert_eq!(left.unwrap().num_rows(), 1);
//! assert!(right.is_none() && spilled.read(&[1]).unwrap()[0].is_none());
//! assert_eq!(spilled.rows(), 1);
//! ```

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};

use crate::error::Result;
use crate::spill::{put_bytes, EntryReader, SpillSpace, SpillStats, SpillTable};
use crate::time::Timestamp;

/// Bytes of entries decoded into one batch when a checkpoint reads the disk.
const BYTES_PER_BATCH: usize = 4 << 20;

/// Bytes of an eviction entry's key: side, time, hash.
const DUE_KEY: usize = 17;

/// The key of an eviction entry: the side, then the time (its sign bit
/// flipped, so keys sort as times do), then the hash, big-endian.
fn due_key(side: usize, time: Timestamp, hash: [u8; 8]) -> [u8; DUE_KEY] {
    let mut key = [0; DUE_KEY];
    key[0] = side as u8;
    key[1..9].copy_from_slice(&((time as u64) ^ (1 << 63)).to_be_bytes());
    key[9..].copy_from_slice(&hash);
    key
}

/// Both sides' rows written to disk, by join key hash.
pub struct SpilledRows {
    tables: [SpillTable; 2],
    /// Keys (side, earliest time of a hash's rows on that side, hash),
    /// for eviction.
    due: SpillTable,
    /// Each side's checkpoint rows to and from Arrow's row format.
    converters: [RowConverter; 2],
    schemas: [SchemaRef; 2],
    rows: usize,
    /// Per side, the earliest time an eviction entry may have: scans
    /// start there, not at the first key, which would walk the
    /// tombstones of every entry taken before.
    due_from: [Timestamp; 2],
}

impl SpilledRows {
    /// A table of `space` for each side, whose rows have the schemas
    /// `schemas` (the checkpoint tables'); `None` when a column has no
    /// row format, so the join cannot spill.
    pub fn open(space: &Arc<SpillSpace>, schemas: [SchemaRef; 2]) -> Result<Option<Self>> {
        let converter = |schema: &SchemaRef| {
            RowConverter::new(
                schema
                    .fields()
                    .iter()
                    .map(|f| SortField::new(f.data_type().clone()))
                    .collect(),
            )
        };
        let (Ok(left), Ok(right)) = (converter(&schemas[0]), converter(&schemas[1])) else {
            return Ok(None);
        };
        Ok(Some(Self {
            tables: [
                space.table("interval_join_left")?,
                space.table("interval_join_right")?,
            ],
            due: space.table("interval_join_due")?,
            converters: [left, right],
            schemas,
            rows: 0,
            due_from: [Timestamp::MAX; 2],
        }))
    }

    /// Writes every row of `table` (all of side `side`'s rows: a hash
    /// memory holds has no rows on disk), the hash of each row's key in
    /// `hashes` and its event time in `times`.
    pub fn write(
        &mut self,
        side: usize,
        table: &RecordBatch,
        hashes: &[u64],
        times: &[Timestamp],
    ) -> Result<()> {
        if table.num_rows() == 0 {
            return Ok(());
        }
        let rows = self.converters[side].convert_columns(table.columns())?;
        let mut order: Vec<u32> = (0..table.num_rows() as u32).collect();
        order.sort_unstable_by_key(|&r| hashes[r as usize]);
        // One entry per hash: its key and the range of `order` holding its rows.
        let mut groups: Vec<([u8; 8], Timestamp, std::ops::Range<usize>)> = Vec::new();
        let mut start = 0;
        while start < order.len() {
            let hash = hashes[order[start] as usize];
            let len = order[start..]
                .iter()
                .take_while(|&&r| hashes[r as usize] == hash)
                .count();
            let earliest = order[start..start + len]
                .iter()
                .map(|&r| times[r as usize])
                .min()
                .unwrap_or(Timestamp::MIN);
            groups.push((hash.to_be_bytes(), earliest, start..start + len));
            start += len;
        }
        let due: Vec<[u8; DUE_KEY]> = groups
            .iter()
            .map(|&(hash, earliest, _)| {
                self.due_from[side] = self.due_from[side].min(earliest);
                due_key(side, earliest, hash)
            })
            .collect();
        self.due.write(due.iter().map(|key| (&key[..], &[][..])))?;
        self.tables[side].write_encoded(
            groups
                .iter()
                .map(|(key, _, range)| (&key[..], range.clone())),
            |range, out| {
                for &r in &order[range] {
                    put_bytes(out, rows.row(r as usize).data());
                }
            },
        )?;
        self.rows += table.num_rows();
        Ok(())
    }

    /// The rows of these hashes, each side's as one batch (`None`: none
    /// on that side), taken off disk.
    pub fn read(&mut self, hashes: &[u64]) -> Result<[Option<RecordBatch>; 2]> {
        let keys: Vec<[u8; 8]> = hashes.iter().map(|hash| hash.to_be_bytes()).collect();
        let mut sides = [None, None];
        for (side, read) in sides.iter_mut().enumerate() {
            let mut found = Vec::new();
            let mut values = Vec::new();
            for key in &keys {
                if let Some(value) = self.tables[side].read(key)? {
                    found.push(key);
                    values.push(value);
                }
            }
            if values.is_empty() {
                continue;
            }
            let batch = self.decode(side, values.iter().map(|v| &v[..]))?;
            self.rows -= batch.num_rows();
            self.tables[side].remove(found.into_iter().map(|k| &k[..]))?;
            *read = Some(batch);
        }
        Ok(sides)
    }

    /// Up to `most` hashes with a row on disk that the eviction thresholds
    /// (`thresholds`, per side: rows before it are evicted) reach, earliest
    /// first, side by side; their eviction entries are taken off. (A hash
    /// a batch brought back since may be among them: it reads nothing.)
    pub fn due(&mut self, thresholds: [Timestamp; 2], most: usize) -> Result<Vec<u64>> {
        let mut found = Vec::new();
        let mut taken = Vec::new();
        for (side, threshold) in thresholds.into_iter().enumerate() {
            if threshold <= self.due_from[side] {
                continue;
            }
            let from = due_key(side, self.due_from[side], [0; 8]);
            let to = due_key(side, threshold, [0; 8]);
            let wanted = most - found.len();
            let keys = self.due.keys_between(&from, &to, wanted)?;
            if keys.len() < wanted {
                // Every entry before the threshold is taken.
                self.due_from[side] = threshold;
            }
            for key in keys {
                let hash: [u8; 8] = key[DUE_KEY - 8..].try_into().unwrap_or_default();
                found.push(u64::from_be_bytes(hash));
                taken.push(key);
            }
        }
        self.due.remove(taken.iter().map(Vec::as_slice))?;
        found.sort_unstable();
        found.dedup();
        Ok(found)
    }

    /// Every row side `side` has on disk, in batches.
    pub fn side_rows(&self, side: usize) -> Result<Vec<RecordBatch>> {
        let mut batches = Vec::new();
        let mut values = Vec::new();
        let mut bytes = 0;
        for entry in self.tables[side].entries() {
            let (_, value) = entry?;
            bytes += value.len();
            values.push(value);
            if bytes >= BYTES_PER_BATCH {
                batches.push(self.decode(side, values.iter().map(Vec::as_slice))?);
                values.clear();
                bytes = 0;
            }
        }
        if !values.is_empty() {
            batches.push(self.decode(side, values.iter().map(Vec::as_slice))?);
        }
        Ok(batches)
    }

    /// Rows on disk, both sides.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// What spilling has cost, both sides together.
    pub fn stats(&self) -> SpillStats {
        let [left, right] = [self.tables[0].stats(), self.tables[1].stats()];
        let due = self.due.stats();
        SpillStats {
            written_bytes: left.written_bytes + right.written_bytes + due.written_bytes,
            read_bytes: left.read_bytes + right.read_bytes,
            disk_bytes: left.disk_bytes + right.disk_bytes + due.disk_bytes,
        }
    }

    /// The rows these entry values hold, as one batch of side `side`'s
    /// checkpoint schema.
    fn decode<'a>(
        &self,
        side: usize,
        values: impl Iterator<Item = &'a [u8]>,
    ) -> Result<RecordBatch> {
        let parser = self.converters[side].parser();
        let mut rows = Vec::new();
        for value in values {
            let mut reader = EntryReader::new(value, "interval_join");
            while !reader.is_empty() {
                rows.push(reader.bytes()?);
            }
        }
        let columns = self.converters[side].convert_rows(rows.iter().map(|r| parser.parse(r)))?;
        Ok(RecordBatch::try_new(self.schemas[side].clone(), columns)?)
    }
}
