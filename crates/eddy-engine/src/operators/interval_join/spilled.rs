//! The interval join's rows on disk: what it moved out of memory when the
//! memory budget refused it more ([`crate::spill`]).
//!
//! In: a side's rows as its checkpoint table has them (the side's columns,
//! `__matched`, `__watermark`), each with the hash of its join key and its
//! event time. Out: the rows an arriving batch could pair with, read back
//! (and taken off disk) before it probes; whole runs of rows the watermark
//! is about to evict, so that eviction, and the null-padded rows of outer
//! joins, stay exact; every row on disk, for checkpoints.
//!
//! A spill sorts a side's rows by time and writes them in runs of
//! [`RUN_ROWS`], so a run spans a narrow stretch of event time. Within a
//! run, a hash's rows are one entry, keyed (side, run, hash), its value
//! the rows in Arrow's row format, each with its length first
//! ([`put_bytes`]). Memory keeps per run its first and last time, its row
//! count and a filter of its hashes ([`KeyFilter`], 10 bits a row): a
//! probe reads only the runs whose time span meets the probe's interval
//! and whose filter may hold its key (a point read each), and the
//! watermark reads a run whole, in key order, once its first row is due.
//! So a row is written once per spill and read once: by the probe that
//! pairs with it, or by the eviction that ends it.
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
//! // Left rows of hashes 1 and 2, at 5 and 9 ms.
//! spilled.write(0, &rows, &[1, 2], &[5, 9]).unwrap();
//! assert_eq!(spilled.rows(), 2);
//! // A right row of hash 2 whose interval reaches 0 to 10 ms finds its partner.
//! let partners = spilled.read_partners(0, &[(2, 0, 10)]).unwrap().unwrap();
//! assert_eq!(partners.num_rows(), 1);
//! assert!(spilled.read_partners(0, &[(2, 0, 10)]).unwrap().is_none());
//! // Nothing is due before 5 ms; the run of hash 1 is from then on.
//! assert!(spilled.next_due([5, 5]).unwrap().is_none());
//! let (side, due) = spilled.next_due([6, 0]).unwrap().unwrap();
//! assert_eq!((side, due.num_rows(), spilled.rows()), (0, 1, 0));
//! ```

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};

use crate::error::Result;
use crate::spill::{put_bytes, EntryReader, SpillSpace, SpillStats, SpillTable};
use crate::time::Timestamp;

/// Rows a run holds at most: a spill cuts a side's rows, in time order,
/// into runs of this many.
pub const RUN_ROWS: usize = 8192;
/// Bytes of entries decoded into one batch when a checkpoint reads the disk.
const BYTES_PER_BATCH: usize = 4 << 20;
/// Bytes of an entry's key: side, run, hash.
const KEY_BYTES: usize = 17;

/// Both sides' rows written to disk, in runs by time.
pub struct SpilledRows {
    table: SpillTable,
    /// Each side's checkpoint rows to and from Arrow's row format.
    converters: [RowConverter; 2],
    schemas: [SchemaRef; 2],
    /// Each side's runs on disk, in the order they were written.
    runs: [Vec<Run>; 2],
    next_run: u64,
    rows: usize,
}

/// What memory keeps of a run on disk.
struct Run {
    id: u64,
    /// The earliest and latest time of its rows.
    earliest: Timestamp,
    latest: Timestamp,
    /// The hashes of its rows' keys.
    filter: KeyFilter,
}

impl SpilledRows {
    /// A table of `space` for both sides, whose rows have the schemas
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
            table: space.table("interval_join")?,
            converters: [left, right],
            schemas,
            runs: Default::default(),
            next_run: 0,
            rows: 0,
        }))
    }

    /// Writes every row of `table` (rows of side `side`), the hash of each
    /// row's key in `hashes` and its event time in `times`, in runs of
    /// [`RUN_ROWS`] by time.
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
        let mut by_time: Vec<u32> = (0..table.num_rows() as u32).collect();
        by_time.sort_unstable_by_key(|&r| times[r as usize]);
        for chunk in by_time.chunks_mut(RUN_ROWS) {
            let id = self.next_run;
            self.next_run += 1;
            let earliest = times[chunk[0] as usize];
            let latest = times[chunk[chunk.len() - 1] as usize];
            let mut filter = KeyFilter::new(chunk.len());
            chunk.sort_unstable_by_key(|&r| hashes[r as usize]);
            // One entry per hash: its key and its rows.
            let mut groups: Vec<([u8; KEY_BYTES], &[u32])> = Vec::new();
            let mut rest: &[u32] = chunk;
            while let Some(&first) = rest.first() {
                let hash = hashes[first as usize];
                let len = rest
                    .iter()
                    .take_while(|&&r| hashes[r as usize] == hash)
                    .count();
                filter.insert(hash);
                groups.push((entry_key(side, id, hash), &rest[..len]));
                rest = &rest[len..];
            }
            self.table.write_encoded(
                groups.iter().map(|(key, rows)| (&key[..], *rows)),
                |group, out| {
                    for &r in group {
                        put_bytes(out, rows.row(r as usize).data());
                    }
                },
            )?;
            self.runs[side].push(Run {
                id,
                earliest,
                latest,
                filter,
            });
        }
        self.rows += table.num_rows();
        Ok(())
    }

    /// The rows side `side` has on disk that the probes `probes` could
    /// pair with, as one batch (`None`: none), taken off disk. A probe is
    /// a key hash and the earliest and latest time a partner may have.
    pub fn read_partners(
        &mut self,
        side: usize,
        probes: &[(u64, Timestamp, Timestamp)],
    ) -> Result<Option<RecordBatch>> {
        let mut keys: Vec<[u8; KEY_BYTES]> = Vec::new();
        for run in &self.runs[side] {
            for &(hash, from, to) in probes {
                if from <= run.latest && to >= run.earliest && run.filter.may_hold(hash) {
                    keys.push(entry_key(side, run.id, hash));
                }
            }
        }
        if keys.is_empty() {
            return Ok(None);
        }
        keys.sort_unstable();
        keys.dedup();
        let mut found = Vec::new();
        let mut values = Vec::new();
        for key in &keys {
            if let Some(value) = self.table.read(key)? {
                found.push(key);
                values.push(value);
            }
        }
        if values.is_empty() {
            return Ok(None);
        }
        let batch = self.decode(side, values.iter().map(|v| &v[..]))?;
        self.rows -= batch.num_rows();
        self.table.remove(found.into_iter().map(|k| &k[..]))?;
        Ok(Some(batch))
    }

    /// The run on disk whose first row the eviction thresholds
    /// (`thresholds`, per side: rows before it are evicted) reach, the
    /// earliest first, read whole and taken off disk: its side and rows.
    pub fn next_due(&mut self, thresholds: [Timestamp; 2]) -> Result<Option<(usize, RecordBatch)>> {
        let earliest = (0..2)
            .flat_map(|side| {
                self.runs[side]
                    .iter()
                    .enumerate()
                    .filter(move |(_, run)| run.earliest < thresholds[side])
                    .map(move |(at, run)| (run.earliest, side, at))
            })
            .min();
        let Some((_, side, at)) = earliest else {
            return Ok(None);
        };
        let run = self.runs[side].remove(at);
        let (from, to) = (entry_key(side, run.id, 0), entry_key(side, run.id + 1, 0));
        let entries = self
            .table
            .entries_between(&from, &to)
            .collect::<Result<Vec<_>>>()?;
        self.table
            .remove(entries.iter().map(|(key, _)| key.as_slice()))?;
        let batch = self.decode(side, entries.iter().map(|(_, value)| value.as_slice()))?;
        self.rows -= batch.num_rows();
        Ok(Some((side, batch)))
    }

    /// Calls `each` with side `side`'s rows on disk, as batches of its
    /// checkpoint schema of about [`BYTES_PER_BATCH`] each: a checkpoint
    /// streams them to its file, never holding them all.
    pub fn each_side_batch(
        &mut self,
        side: usize,
        mut each: impl FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let (from, to) = ([side as u8], [side as u8 + 1]);
        let (converter, schema) = (&self.converters[side], &self.schemas[side]);
        let mut values: Vec<Vec<u8>> = Vec::new();
        let mut bytes = 0;
        for entry in self.table.entries_between(&from, &to) {
            let (_, value) = entry?;
            bytes += value.len();
            values.push(value);
            if bytes >= BYTES_PER_BATCH {
                each(decode(converter, schema, values.iter().map(Vec::as_slice))?)?;
                values.clear();
                bytes = 0;
            }
        }
        if !values.is_empty() {
            each(decode(converter, schema, values.iter().map(Vec::as_slice))?)?;
        }
        Ok(())
    }

    /// A file for the snapshot table `name` beside the store.
    pub fn snapshot_file(
        &self,
        name: &str,
        schema: &datafusion::arrow::datatypes::SchemaRef,
    ) -> Result<crate::state::table_file::TableFileWriter> {
        self.table.snapshot_file(name, schema)
    }

    /// Rows on disk, both sides.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// What spilling has cost.
    pub fn stats(&self) -> SpillStats {
        self.table.stats()
    }

    /// The rows these entry values hold, as one batch of side `side`'s
    /// checkpoint schema.
    fn decode<'a>(
        &self,
        side: usize,
        values: impl Iterator<Item = &'a [u8]>,
    ) -> Result<RecordBatch> {
        decode(&self.converters[side], &self.schemas[side], values)
    }
}

/// The rows these entry values hold, as one batch of `schema` (a side's
/// checkpoint schema, whose rows `converter` encodes).
fn decode<'a>(
    converter: &RowConverter,
    schema: &SchemaRef,
    values: impl Iterator<Item = &'a [u8]>,
) -> Result<RecordBatch> {
    let parser = converter.parser();
    let mut rows = Vec::new();
    for value in values {
        let mut reader = EntryReader::new(value, "interval_join");
        while !reader.is_empty() {
            rows.push(reader.bytes()?);
        }
    }
    let columns = converter.convert_rows(rows.iter().map(|r| parser.parse(r)))?;
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// The key of an entry: the side, then the run and the hash, big-endian
/// (so a run's entries are one range of keys).
fn entry_key(side: usize, run: u64, hash: u64) -> [u8; KEY_BYTES] {
    let mut key = [0; KEY_BYTES];
    key[0] = side as u8;
    key[1..9].copy_from_slice(&run.to_be_bytes());
    key[9..].copy_from_slice(&hash.to_be_bytes());
    key
}

/// A Bloom filter of key hashes: whether a run may hold a key, wrong
/// (saying it may) for about 2% of the keys it does not hold.
struct KeyFilter {
    bits: Vec<u64>,
}

/// Bits a filter gives each key it holds, and the bits a key sets.
const BITS_PER_KEY: usize = 10;
const PROBES: u64 = 3;

impl KeyFilter {
    fn new(keys: usize) -> Self {
        let words = (keys * BITS_PER_KEY).div_ceil(64).next_power_of_two();
        Self {
            bits: vec![0; words],
        }
    }

    /// The bits of `hash` in a filter of `words` words: double hashing
    /// over the two halves of the hash.
    fn positions(words: usize, hash: u64) -> impl Iterator<Item = usize> {
        let mask = (words * 64 - 1) as u64;
        let step = hash.rotate_left(32) | 1;
        (0..PROBES).map(move |i| (hash.wrapping_add(i.wrapping_mul(step)) & mask) as usize)
    }

    fn insert(&mut self, hash: u64) {
        for bit in Self::positions(self.bits.len(), hash) {
            self.bits[bit / 64] |= 1 << (bit % 64);
        }
    }

    fn may_hold(&self, hash: u64) -> bool {
        Self::positions(self.bits.len(), hash)
            .all(|bit| self.bits[bit / 64] & (1 << (bit % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_holds_every_key_put_in_and_few_others() {
        let mut filter = KeyFilter::new(1_000);
        let hash = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for i in 0..1_000 {
            filter.insert(hash(i));
        }
        assert!((0..1_000).all(|i| filter.may_hold(hash(i))));
        let wrong = (1_000..101_000)
            .filter(|&i| filter.may_hold(hash(i)))
            .count();
        assert!(wrong < 5_000, "{wrong} of 100,000 keys not held said to be");
    }
}
