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
//! Eviction only moves cursors: an evicted row's index entry stays until
//! the index is compacted, and probes skip it (a row is live while its
//! batch is stored and it is at or after the batch's cursor in time
//! order). Compaction sweeps the whole index once as many rows have been
//! evicted since the last one as are live, so each evicted row costs a
//! share of one sequential sweep instead of a hash lookup and removal of
//! its own.
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
/// range and a compaction keeps a hot key's live rows in one pass: a hot key
/// costs per row what a cold one does, not the length of its bucket.
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
}

/// Rows evicted before a compaction is worth a sweep, however few rows
/// are live.
const COMPACT_MIN_EVICTED: usize = 4096;

struct StoredBatch {
    batch: RecordBatch,
    keys: Rows,
    /// Rows with a time, sorted by it: (time, row).
    order: Vec<(Timestamp, u32)>,
    /// Next position in `order` to evict: rows before it are evicted.
    cursor: usize,
    matched: Vec<bool>,
}

impl StoredBatch {
    /// Whether `r` (a row of this batch) is not yet evicted: it is at or
    /// after the cursor in time order.
    fn holds(&self, r: &RowRef) -> bool {
        self.order
            .get(self.cursor)
            .is_some_and(|&next| (r.time, r.row) >= next)
    }
}

/// Sorts a batch's (time, row) pairs. When the batch's times span less
/// than 2^32 ms (49 days; any batch but a pathological one) each pair is
/// packed into one `u64`, (time - earliest) above the row, and those are
/// sorted: integers sort about twice as fast as pairs.
fn sort_by_time(order: &mut [(Timestamp, u32)]) {
    if order.is_sorted() {
        return;
    }
    let (earliest, latest) = order
        .iter()
        .fold((Timestamp::MAX, Timestamp::MIN), |(lo, hi), &(t, _)| {
            (lo.min(t), hi.max(t))
        });
    match u32::try_from(latest.abs_diff(earliest)) {
        Ok(_) => {
            let mut packed: Vec<u64> = order
                .iter()
                .map(|&(t, row)| (t.abs_diff(earliest) << 32) | u64::from(row))
                .collect();
            packed.sort_unstable();
            for (pair, key) in order.iter_mut().zip(packed) {
                *pair = (earliest + (key >> 32) as Timestamp, key as u32);
            }
        }
        Err(_) => order.sort_unstable(),
    }
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
    /// Whether `r` is buffered and not evicted.
    fn live(&self, r: &RowRef) -> bool {
        self.get(r.batch).is_some_and(|b| b.holds(r))
    }

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
    /// Rows evicted since the index was last compacted (their entries may
    /// still be in it).
    evicted_since_compaction: usize,
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
                .is_some_and(|b| b.holds(r) && b.keys.row(r.row as usize).as_ref() == key);
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
        sort_by_time(&mut order);
        for &(time, row) in &order {
            if valid[row as usize] {
                let r = RowRef {
                    time,
                    batch: id,
                    row,
                };
                match self.index.entry(hashes[row as usize]) {
                    Entry::Occupied(mut bucket) => match bucket.get_mut() {
                        // An evicted row left in the index: take its place
                        // (rows of this batch are not stored yet, but live).
                        Bucket::One(old) if old.batch != id && !self.batches.live(old) => *old = r,
                        bucket => bucket.push(r),
                    },
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
                order,
                cursor: 0,
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
            let Some(stored) = self.batches.get_mut(id) else {
                continue;
            };
            // The batch's rows to evict: a prefix of its time order.
            let from = stored.cursor;
            let to = from
                + stored.order[from..]
                    .iter()
                    .take_while(|&&(time, _)| time < threshold)
                    .count();
            if let Some(unmatched) = unmatched.as_deref_mut() {
                let lonely: Vec<u32> = stored.order[from..to]
                    .iter()
                    .map(|&(_, row)| row)
                    .filter(|&row| !stored.matched[row as usize])
                    .collect();
                if !lonely.is_empty() {
                    unmatched.push((stored.batch.clone(), lonely));
                }
            }
            stored.cursor = to;
            let next = stored.order.get(to).map(|&(time, _)| time);
            self.rows -= to - from;
            self.evicted_since_compaction += to - from;
            match next {
                Some(next) => self.by_time.push(Reverse((next, id))),
                None => self.batches.remove(id),
            }
        }
        if self.rows == 0 {
            self.index.clear();
            self.evicted_since_compaction = 0;
        } else if self.evicted_since_compaction > self.rows.max(COMPACT_MIN_EVICTED) {
            self.compact();
        }
    }

    /// Drops the index entries of evicted rows.
    fn compact(&mut self) {
        let batches = &self.batches;
        self.index.retain(|_, bucket| match bucket {
            Bucket::One(r) => batches.live(r),
            Bucket::Many(rows) => {
                rows.retain(|r| batches.live(r));
                if let (1, Some(&only)) = (rows.len(), rows.first()) {
                    *bucket = Bucket::One(only);
                }
                !matches!(bucket, Bucket::Many(rows) if rows.is_empty())
            }
        });
        if self.index.capacity() > 4 * self.index.len().max(COMPACT_MIN_EVICTED) {
            self.index.shrink_to_fit();
        }
        self.evicted_since_compaction = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::row::{RowConverter, SortField};

    use super::*;

    /// A batch of (key, time) rows with its `KeyedRows` (hash = key).
    fn keyed(rows: &[(i64, Timestamp)]) -> (RecordBatch, KeyedRows) {
        let keys = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0)));
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema, vec![keys.clone()]).unwrap();
        let converter = RowConverter::new(vec![SortField::new(DataType::Int64)]).unwrap();
        let key_rows = converter.convert_columns(&[keys]).unwrap();
        let keyed = KeyedRows {
            keys: key_rows,
            hashes: rows.iter().map(|r| r.0 as u64).collect(),
            valid: vec![true; rows.len()],
            times: rows.iter().map(|r| Some(r.1)).collect(),
        };
        (batch, keyed)
    }

    /// The times of the rows a probe for `key` over `times` visits.
    fn probe(
        side: &SideState,
        key: i64,
        times: std::ops::RangeInclusive<Timestamp>,
    ) -> Vec<Timestamp> {
        let converter = RowConverter::new(vec![SortField::new(DataType::Int64)]).unwrap();
        let rows = converter
            .convert_columns(&[Arc::new(Int64Array::from(vec![key]))])
            .unwrap();
        let mut found = Vec::new();
        side.for_each_candidate(key as u64, rows.row(0).as_ref(), times, |r| {
            found.push(r.time)
        });
        found
    }

    #[test]
    fn evicted_rows_are_never_candidates_and_the_index_stays_bounded() {
        let mut side = SideState::default();
        // Each batch: a hot key 7 at every time, and a unique key per row.
        for batch in 0..200i64 {
            let rows: Vec<(i64, Timestamp)> = (0..100)
                .flat_map(|i| {
                    let t = batch * 100 + i;
                    [(7, t), (1_000 + t, t)]
                })
                .collect();
            let (b, k) = keyed(&rows);
            let n = b.num_rows();
            side.insert(b, k, vec![false; n]);
            // Keep the last 500 ms.
            side.evict_before(batch * 100 + 100 - 500, None);
            assert!(side.len() <= 1_000, "{} rows live", side.len());
            assert!(
                side.index.len() <= 2 * side.len() + COMPACT_MIN_EVICTED + 200,
                "{} index entries for {} live rows",
                side.index.len(),
                side.len()
            );
        }
        // The hot key: only rows at or after the threshold, whatever range
        // the probe asks for (a late probe reaches below it).
        let live = probe(&side, 7, 0..=i64::MAX);
        assert_eq!(live, (19_500..20_000).collect::<Vec<_>>());
        // A unique key: evicted, then live.
        assert!(probe(&side, 1_000 + 100, 0..=i64::MAX).is_empty());
        assert_eq!(probe(&side, 1_000 + 19_999, 0..=i64::MAX), vec![19_999]);
        // An evicted unique key's entry is reused by a new row of that key.
        let (b, k) = keyed(&[(1_000 + 19_000, 30_000)]);
        side.insert(b, k, vec![false]);
        assert_eq!(probe(&side, 1_000 + 19_000, 0..=i64::MAX), vec![30_000]);
        // Everything evicted: the index empties at the next compaction.
        side.evict_before(Timestamp::MAX, None);
        assert!(side.is_empty());
        assert!(side.index.is_empty());
        assert!(probe(&side, 7, 0..=i64::MAX).is_empty());
    }

    #[test]
    fn pairs_sort_by_time_then_row_packed_or_not() {
        let mut near = vec![
            (5, 0),
            (-3, 1),
            (5, 2),
            (i64::from(u32::MAX) - 4, 3),
            (-3, 4),
        ];
        let mut expected = near.clone();
        expected.sort_unstable();
        sort_by_time(&mut near);
        assert_eq!(near, expected);
        let mut far = vec![(i64::MAX, 0), (i64::MIN, 1), (0, 2), (i64::MIN, 3)];
        let mut expected = far.clone();
        expected.sort_unstable();
        sort_by_time(&mut far);
        assert_eq!(far, expected);
    }

    #[test]
    fn rows_of_one_batch_sharing_a_key_all_stay_candidates() {
        let mut side = SideState::default();
        let (b, k) = keyed(&[(3, 10), (3, 5), (3, 7)]);
        side.insert(b, k, vec![false; 3]);
        assert_eq!(probe(&side, 3, 0..=100), vec![5, 7, 10]);
        side.evict_before(6, None);
        assert_eq!(probe(&side, 3, 0..=100), vec![7, 10]);
    }
}
