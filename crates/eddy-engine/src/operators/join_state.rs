//! Buffered rows of one side of an interval join.
//!
//! In: batches of one input with their [`KeyedRows`] (key rows in Arrow row
//! format, their hashes, NULL flags and event times; worked out once per
//! batch by the join, which probes with the same hashes). Out: candidate
//! rows for probes by key, and rows whose time makes further matches
//! impossible, in time order, when evicted.
//!
//! Rows stay in the batches they arrived in (columnar, shared `Arc`s). The
//! key index maps a hash of the key bytes to the rows holding it: a single
//! row inline (the common case of unique keys, no allocation per row), or a
//! set ordered by time, so a probe visits only the rows in its time range
//! and an eviction removes its row in O(log n) (a hot key costs per row
//! about what a cold one does); probes confirm candidates by comparing key
//! bytes. For eviction each batch keeps its rows sorted by time with a
//! cursor, and a min-heap holds one entry per batch: the time of its next
//! row to evict. Rows that never matched (outer joins) are handed out batch
//! by batch with their row numbers, so padding them costs one gather.
//!
//! A checkpoint keeps the rows not yet evicted with their matched flags
//! ([`SideState::live_rows`]); a restore inserts them again.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::{BTreeSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use datafusion::arrow::array::UInt32Array;
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::Rows;
use hashbrown::hash_map::Entry;
use hashbrown::HashMap;

use crate::error::Result;
use crate::time::Timestamp;

/// A batch's join keys, worked out once for the probe, the index and the
/// eviction: the key rows, their hashes (by one hasher for both sides),
/// whether each key is free of NULLs, and each row's event time.
pub struct KeyedRows {
    /// Key rows (Arrow row format).
    pub keys: Rows,
    /// Hash of each key row.
    pub hashes: Vec<u64>,
    /// Whether each row's key has no NULL (only those are indexed).
    pub valid: Vec<bool>,
    /// Each row's event time (`None`: the row is not kept).
    pub times: Vec<Option<Timestamp>>,
}

/// A buffered row: batch id, row within it, event time (ordered by time
/// first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowRef {
    /// Event time (ms).
    pub time: Timestamp,
    /// Id of the stored batch.
    pub batch: u64,
    /// Row within the batch.
    pub row: u32,
}

/// Rows sharing a key hash: one inline (unique keys, no allocation), or
/// many ordered by time, so that a probe visits only the rows in its time
/// range and an eviction removes its row in O(log n): a hot key costs per
/// row what a cold one does, not the length of its bucket.
enum Bucket {
    One(RowRef),
    Many(BTreeSet<RowRef>),
}

impl Bucket {
    fn push(&mut self, r: RowRef) {
        match self {
            Bucket::One(first) => *self = Bucket::Many(BTreeSet::from([*first, r])),
            Bucket::Many(rows) => {
                rows.insert(r);
            }
        }
    }

    /// Removes `r`; true when the bucket is now empty.
    fn remove(&mut self, r: &RowRef) -> bool {
        match self {
            Bucket::One(only) => only == r,
            Bucket::Many(rows) => {
                rows.remove(r);
                rows.is_empty()
            }
        }
    }
}

struct StoredBatch {
    batch: RecordBatch,
    keys: Rows,
    /// Hash of each key row.
    hashes: Vec<u64>,
    /// Rows with a time, sorted by it: (time, row).
    order: Vec<(Timestamp, u32)>,
    /// Next position in `order` to evict.
    cursor: usize,
    /// Whether a row is in the key index (no NULL key).
    indexed: Vec<bool>,
    matched: Vec<bool>,
}

/// Hashes a `u64` that already is a hash: the index is keyed by key hashes.
#[derive(Default)]
struct PrehashedKey(u64);

impl Hasher for PrehashedKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// Stored batches by id; ids are consecutive, so a deque offset by the
/// oldest live id finds a batch without hashing.
#[derive(Default)]
struct Batches {
    first_id: u64,
    slots: VecDeque<Option<StoredBatch>>,
}

impl Batches {
    fn get(&self, id: u64) -> Option<&StoredBatch> {
        let offset = id.checked_sub(self.first_id)? as usize;
        self.slots.get(offset)?.as_ref()
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut StoredBatch> {
        let offset = id.checked_sub(self.first_id)? as usize;
        self.slots.get_mut(offset)?.as_mut()
    }

    fn insert(&mut self, id: u64, batch: StoredBatch) {
        if self.slots.is_empty() {
            self.first_id = id;
        }
        while self.first_id + (self.slots.len() as u64) < id {
            self.slots.push_back(None);
        }
        self.slots.push_back(Some(batch));
    }

    fn remove(&mut self, id: u64) {
        if let Some(offset) = id.checked_sub(self.first_id) {
            if let Some(slot) = self.slots.get_mut(offset as usize) {
                *slot = None;
            }
        }
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.first_id += 1;
        }
    }
}

/// All buffered rows of one side.
#[derive(Default)]
pub struct SideState {
    batches: Batches,
    next_batch: u64,
    index: HashMap<u64, Bucket, BuildHasherDefault<PrehashedKey>>,
    /// (time of the batch's next row to evict, batch id).
    by_time: BinaryHeap<Reverse<(Timestamp, u64)>>,
    rows: usize,
}

impl SideState {
    /// Rows buffered.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Calls `f` for every buffered row whose key equals `key` (whose hash
    /// is `hash`) and whose time is in `times`.
    pub fn for_each_candidate(
        &self,
        hash: u64,
        key: &[u8],
        times: std::ops::RangeInclusive<Timestamp>,
        mut f: impl FnMut(RowRef),
    ) {
        let Some(bucket) = self.index.get(&hash) else {
            return;
        };
        let mut visit = |r: &RowRef| {
            let same = self
                .batches
                .get(r.batch)
                .is_some_and(|b| b.keys.row(r.row as usize).as_ref() == key);
            if same {
                f(*r);
            }
        };
        match bucket {
            Bucket::One(r) => {
                if times.contains(&r.time) {
                    visit(r)
                }
            }
            Bucket::Many(rows) => {
                let (from, to) = (
                    RowRef {
                        time: *times.start(),
                        batch: 0,
                        row: 0,
                    },
                    RowRef {
                        time: *times.end(),
                        batch: u64::MAX,
                        row: u32::MAX,
                    },
                );
                if from <= to {
                    rows.range(from..=to).for_each(visit);
                }
            }
        }
    }

    /// The stored batch with id `batch`.
    pub fn batch(&self, batch: u64) -> Option<&RecordBatch> {
        self.batches.get(batch).map(|b| &b.batch)
    }

    /// Marks a buffered row as matched (outer joins).
    pub fn mark_matched(&mut self, row: RowRef) {
        if let Some(flag) = self
            .batches
            .get_mut(row.batch)
            .and_then(|b| b.matched.get_mut(row.row as usize))
        {
            *flag = true;
        }
    }

    /// Buffers a batch. Rows without a time are not kept; rows whose key
    /// has a NULL are kept for eviction but never indexed, so they match
    /// nothing. `matched` carries what the probe of this batch found.
    pub fn insert(&mut self, batch: RecordBatch, keyed: KeyedRows, matched: Vec<bool>) {
        let KeyedRows {
            keys,
            hashes,
            valid,
            times,
        } = keyed;
        let id = self.next_batch;
        self.next_batch += 1;
        let mut order: Vec<(Timestamp, u32)> = times
            .iter()
            .enumerate()
            .filter_map(|(row, t)| t.map(|t| (t, row as u32)))
            .collect();
        if order.is_empty() {
            return;
        }
        if !order.is_sorted() {
            order.sort_unstable();
        }
        for &(time, row) in &order {
            if valid[row as usize] {
                let r = RowRef {
                    time,
                    batch: id,
                    row,
                };
                match self.index.entry(hashes[row as usize]) {
                    Entry::Occupied(mut bucket) => bucket.get_mut().push(r),
                    Entry::Vacant(slot) => {
                        slot.insert(Bucket::One(r));
                    }
                }
            }
        }
        self.rows += order.len();
        self.by_time.push(Reverse((order[0].0, id)));
        self.batches.insert(
            id,
            StoredBatch {
                batch,
                keys,
                hashes,
                order,
                cursor: 0,
                indexed: valid,
                matched,
            },
        );
    }

    /// Approximate bytes held: the buffered batches, their key rows and the index.
    pub fn size_bytes(&self) -> usize {
        let batches: usize = self
            .batches
            .slots
            .iter()
            .flatten()
            .map(|b| {
                b.batch.get_array_memory_size()
                    + b.keys.size()
                    + b.hashes.capacity() * 8
                    + b.order.capacity() * 16
                    + b.matched.capacity() * 2
            })
            .sum();
        batches + self.index.capacity() * 40
    }

    /// The rows still buffered (not evicted), batch by batch, each with its
    /// matched flags: what a checkpoint keeps of this side.
    pub fn live_rows(&self) -> Result<Vec<(RecordBatch, Vec<bool>)>> {
        let mut out = Vec::new();
        for stored in self.batches.slots.iter().flatten() {
            let rest = &stored.order[stored.cursor..];
            if rest.is_empty() {
                continue;
            }
            let indices = UInt32Array::from_iter_values(rest.iter().map(|&(_, row)| row));
            let rows = take_record_batch(&stored.batch, &indices)?;
            let matched = rest
                .iter()
                .map(|&(_, row)| stored.matched[row as usize])
                .collect();
            out.push((rows, matched));
        }
        Ok(out)
    }

    /// Removes every row with time below `threshold`; with `unmatched`
    /// (outer joins), collects the rows that never matched, batch by batch,
    /// in time order.
    pub fn evict_before(
        &mut self,
        threshold: Timestamp,
        mut unmatched: Option<&mut Vec<(RecordBatch, Vec<u32>)>>,
    ) {
        while let Some(Reverse((time, id))) = self.by_time.peek().copied() {
            if time >= threshold {
                break;
            }
            self.by_time.pop();
            let Some(stored) = self.batches.get(id) else {
                continue;
            };
            // The batch's rows to evict: a prefix of its time order.
            let from = stored.cursor;
            let to = from
                + stored.order[from..]
                    .iter()
                    .take_while(|&&(time, _)| time < threshold)
                    .count();
            let mut lonely = Vec::new();
            let mut indexed = Vec::new();
            for &(time, row) in &stored.order[from..to] {
                if stored.indexed[row as usize] {
                    let hash = stored.hashes[row as usize];
                    indexed.push((
                        hash,
                        RowRef {
                            time,
                            batch: id,
                            row,
                        },
                    ));
                }
                if unmatched.is_some() && !stored.matched[row as usize] {
                    lonely.push(row);
                }
            }
            if !lonely.is_empty() {
                if let Some(unmatched) = unmatched.as_deref_mut() {
                    unmatched.push((stored.batch.clone(), lonely));
                }
            }
            let next = stored.order.get(to).map(|&(time, _)| time);
            if let Some(stored) = self.batches.get_mut(id) {
                stored.cursor = to;
            }
            self.rows -= to - from;
            for (hash, r) in indexed {
                if let Entry::Occupied(mut bucket) = self.index.entry(hash) {
                    if bucket.get_mut().remove(&r) {
                        bucket.remove();
                    }
                }
            }
            match next {
                Some(next) => self.by_time.push(Reverse((next, id))),
                None => self.batches.remove(id),
            }
        }
    }
}
