//! Buffered rows of one side of an interval join.
//!
//! In: batches of one input with their [`KeyedRows`] (key rows in Arrow row
//! format, their hashes, NULL flags and event times; worked out once per
//! batch by the join, which probes with the same hashes). Out: candidate
//! rows for probes by key, and rows whose time makes further matches
//! impossible, in time order, when evicted.
//!
//! Rows stay in the batches they arrived in (columnar, shared `Arc`s). The
//! key index ([`key_index`]) maps a hash of the key bytes to the rows
//! holding it: a single row inline (the common case of unique keys), or a
//! set ordered by time, so a probe visits only the rows in its time range
//! (a hot key costs per row about what a cold one does); probes confirm
//! candidates by comparing key bytes. For eviction each batch keeps its
//! rows sorted by time with a cursor, and a min-heap holds one entry per
//! batch: the time of its next row to evict. Rows that never matched
//! (outer joins) are handed out batch by batch with their row numbers, so
//! padding them costs one gather.
//!
//! Eviction only moves cursors: an evicted row's index entry stays until an
//! insert takes its slot over or the index is swept, and probes skip it
//! (a row is live while its batch is stored and it is at or after the
//! batch's cursor in time order).
//!
//! A checkpoint keeps the rows not yet evicted with their matched flags
//! ([`SideState::each_live_chunk`]); a restore inserts them again.

pub mod key_index;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::VecDeque;

use datafusion::arrow::compute::interleave_record_batch;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::Rows;

use crate::error::Result;
use crate::time::Timestamp;

pub use key_index::MAX_BATCH_ROWS;
use key_index::{Found, KeyIndex, Liveness, RowAt};

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

impl RowRef {
    /// The row's place, without its time.
    pub fn at(&self) -> RowAt {
        RowAt {
            batch: self.batch,
            row: self.row,
        }
    }
}

/// Rows evicted since the index was last swept, in multiples of the rows
/// live, before it is swept to drop their entries (inserts take over the
/// slots of rows whose batch is gone, and a hot key's set drops its
/// evicted rows as it grows; this bounds the rest).
const SWEEP_AFTER_EVICTED: usize = 4;
/// Rows evicted before a sweep is worth it, however few are live.
const SWEEP_MIN_EVICTED: usize = 4096;

struct StoredBatch {
    batch: RecordBatch,
    keys: Rows,
    /// Each row's event time (rows without one are neither kept nor
    /// indexed).
    times: Vec<Timestamp>,
    /// Rows with a time, sorted by it: (time, row).
    order: Vec<(Timestamp, u32)>,
    /// Next position in `order` to evict: rows before it are evicted.
    cursor: usize,
    matched: Vec<bool>,
    /// Late rows: the watermark at each row's position in its source
    /// (`None` for rows that came on time).
    marks: Option<Vec<Timestamp>>,
    /// Bytes it holds, as [`SideState::size_bytes`] counts them.
    bytes: usize,
}

impl StoredBatch {
    /// Bytes it holds: the batch, its key rows, and what the side keeps
    /// per row.
    fn size_bytes(&self) -> usize {
        self.batch.get_array_memory_size()
            + self.keys.size()
            + self.order.capacity() * 16
            + self.times.capacity() * 8
            + self.matched.capacity() * 2
            + self.marks.as_ref().map_or(0, |m| m.capacity() * 8)
    }
}

impl StoredBatch {
    /// Whether `row` (an indexed row of this batch, so one with a time) is
    /// not yet evicted: it is at or after the cursor in time order.
    fn holds(&self, row: u32) -> bool {
        if self.cursor == 0 {
            // Nothing evicted yet: no need to read the row's time.
            return (row as usize) < self.times.len();
        }
        match (self.order.get(self.cursor), self.times.get(row as usize)) {
            (Some(&next), Some(&time)) => (time, row) >= next,
            _ => false,
        }
    }

    /// Whether `row` is not yet evicted and its key bytes are `key`.
    fn holds_key(&self, row: u32, key: &[u8]) -> bool {
        self.holds(row) && self.keys.row(row as usize).as_ref() == key
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

/// Stored batches by id; ids are consecutive, so a deque offset by the
/// oldest live id finds a batch without hashing.
#[derive(Default)]
struct Batches {
    first_id: u64,
    slots: VecDeque<Option<StoredBatch>>,
}

impl Liveness for Batches {
    fn live(&self, at: RowAt) -> bool {
        self.get(at.batch).is_some_and(|b| b.holds(at.row))
    }

    fn gone(&self, at: RowAt) -> bool {
        self.get(at.batch).is_none()
    }

    fn time(&self, at: RowAt) -> Option<Timestamp> {
        self.get(at.batch)?.times.get(at.row as usize).copied()
    }
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

/// Rows of one stored batch, with their matched flags and, for late
/// rows, their marks (the watermark at each row's position in its source).
pub struct HeldRows {
    /// The rows.
    pub rows: RecordBatch,
    /// Whether each found a partner.
    pub matched: Vec<bool>,
    /// Each row's mark, for rows that came late.
    pub marks: Vec<Option<Timestamp>>,
}

/// Rows of one stored batch that never found a partner, evicted.
pub struct Lonely {
    /// The stored batch.
    pub batch: RecordBatch,
    /// The rows, by number in `batch`, in time order.
    pub rows: Vec<u32>,
    /// Their marks (one per entry of `rows`), when the rows came late.
    pub marks: Option<Vec<Timestamp>>,
}

/// All buffered rows of one side.
#[derive(Default)]
pub struct SideState {
    batches: Batches,
    next_batch: u64,
    index: KeyIndex,
    /// (time of the batch's next row to evict, batch id).
    by_time: BinaryHeap<Reverse<(Timestamp, u64)>>,
    rows: usize,
    /// Rows evicted since the index was last swept (their entries may
    /// still be in it).
    evicted_since_sweep: usize,
    /// Stored batches of late rows (with marks).
    late_batches: usize,
    /// Bytes the stored batches hold, counted as they come and go.
    batch_bytes: usize,
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

    /// Loads the index slots of `hashes` ahead of probes for them (see
    /// [`KeyIndex::touch`]).
    pub fn touch(&self, hashes: impl Iterator<Item = u64>) {
        self.index.touch(hashes);
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
        let Some(found) = self.index.get(hash) else {
            return;
        };
        match found {
            Found::One(at) => {
                let Some(stored) = self.batches.get(at.batch) else {
                    return;
                };
                let Some(&time) = stored.times.get(at.row as usize) else {
                    return;
                };
                if times.contains(&time) && stored.holds_key(at.row, key) {
                    f(RowRef {
                        time,
                        batch: at.batch,
                        row: at.row,
                    });
                }
            }
            Found::Many(rows) => {
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
                if from > to {
                    return;
                }
                for r in rows.range(from..=to) {
                    if self
                        .batches
                        .get(r.batch)
                        .is_some_and(|b| b.holds_key(r.row, key))
                    {
                        f(*r);
                    }
                }
            }
        }
    }

    /// The stored batch with id `batch`.
    pub fn batch(&self, batch: u64) -> Option<&RecordBatch> {
        self.batches.get(batch).map(|b| &b.batch)
    }

    /// Whether any stored row came late (has a mark).
    pub fn has_late(&self) -> bool {
        self.late_batches > 0
    }

    /// The mark of a buffered row that came late: the watermark at its
    /// position in its source.
    pub fn mark(&self, row: RowRef) -> Option<Timestamp> {
        let stored = self.batches.get(row.batch)?;
        stored.marks.as_ref()?.get(row.row as usize).copied()
    }

    /// Whether a buffered row has matched (outer and semi joins).
    pub fn is_matched(&self, row: RowRef) -> bool {
        self.batches
            .get(row.batch)
            .and_then(|b| b.matched.get(row.row as usize))
            .copied()
            .unwrap_or(false)
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

    /// Buffers a batch (of fewer than [`MAX_BATCH_ROWS`] rows). Rows
    /// without a time are not kept; rows whose key has a NULL are kept for
    /// eviction but never indexed, so they match nothing. `matched` carries
    /// what the probe of this batch found; `marks`, for late rows, the
    /// watermark at each row's position in its source.
    pub fn insert(
        &mut self,
        batch: RecordBatch,
        keyed: KeyedRows,
        matched: Vec<bool>,
        marks: Option<Vec<Timestamp>>,
    ) -> Result<()> {
        let KeyedRows {
            keys,
            hashes,
            valid,
            times,
        } = keyed;
        // Kept until evicted: its own bytes, not the source batch's.
        let batch = crate::state::owned_batch::owned(batch);
        let id = self.next_batch;
        self.next_batch += 1;
        let mut order: Vec<(Timestamp, u32)> = times
            .iter()
            .enumerate()
            .filter_map(|(row, t)| t.map(|t| (t, row as u32)))
            .collect();
        if order.is_empty() {
            return Ok(());
        }
        sort_by_time(&mut order);
        let first = order[0].0;
        let live = order.len();
        let row_times = times.iter().map(|t| t.unwrap_or(Timestamp::MIN)).collect();
        self.late_batches += usize::from(marks.is_some());
        let mut stored = StoredBatch {
            batch,
            keys,
            times: row_times,
            order,
            cursor: 0,
            matched,
            marks,
            bytes: 0,
        };
        stored.bytes = stored.size_bytes();
        self.batch_bytes += stored.bytes;
        self.batches.insert(id, stored);
        self.rows += live;
        self.by_time.push(Reverse((first, id)));
        let Some(stored) = self.batches.get(id) else {
            return Ok(());
        };
        let indexed = || stored.order.iter().filter(|&&(_, row)| valid[row as usize]);
        self.index
            .touch(indexed().map(|&(_, row)| hashes[row as usize]));
        for &(time, row) in indexed() {
            self.index.insert(
                hashes[row as usize],
                time,
                RowAt { batch: id, row },
                &self.batches,
            )?;
        }
        Ok(())
    }

    /// Approximate bytes held: the buffered batches, their key rows and
    /// the index (a count kept as they come and go).
    pub fn size_bytes(&self) -> usize {
        self.batch_bytes + self.index.size_bytes()
    }

    /// The rows still buffered (not evicted), in time order, in chunks of
    /// at most `max_rows`, each with its matched flags and marks: what a
    /// checkpoint keeps of this side, and what a spill writes. A chunk is
    /// gathered from the stored batches as it is handed out, so the side
    /// is never copied whole.
    pub fn each_live_chunk(
        &self,
        max_rows: usize,
        mut each: impl FnMut(HeldRows) -> Result<()>,
    ) -> Result<()> {
        let stored: Vec<&StoredBatch> = self.batches.slots.iter().flatten().collect();
        // (time, batch, row): 16 bytes a row, not a copy of the rows.
        let mut live: Vec<(Timestamp, u32, u32)> = stored
            .iter()
            .enumerate()
            .flat_map(|(b, s)| {
                s.order[s.cursor..]
                    .iter()
                    .map(move |&(time, row)| (time, b as u32, row))
            })
            .collect();
        live.sort_unstable();
        let batches: Vec<&RecordBatch> = stored.iter().map(|s| &s.batch).collect();
        for chunk in live.chunks(max_rows.max(1)) {
            let at: Vec<(usize, usize)> = chunk
                .iter()
                .map(|&(_, b, row)| (b as usize, row as usize))
                .collect();
            let rows = interleave_record_batch(&batches, &at)?;
            let matched = at.iter().map(|&(b, row)| stored[b].matched[row]).collect();
            let marks = at
                .iter()
                .map(|&(b, row)| stored[b].marks.as_ref().map(|m| m[row]))
                .collect();
            each(HeldRows {
                rows,
                matched,
                marks,
            })?;
        }
        Ok(())
    }

    /// Removes every row with time below `threshold`; with `unmatched`
    /// (outer joins), collects the rows that never matched, batch by batch,
    /// in time order.
    pub fn evict_before(&mut self, threshold: Timestamp, mut unmatched: Option<&mut Vec<Lonely>>) {
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
                    let marks = stored
                        .marks
                        .as_ref()
                        .map(|m| lonely.iter().map(|&row| m[row as usize]).collect());
                    unmatched.push(Lonely {
                        batch: stored.batch.clone(),
                        rows: lonely,
                        marks,
                    });
                }
            }
            stored.cursor = to;
            let next = stored.order.get(to).map(|&(time, _)| time);
            self.rows -= to - from;
            self.evicted_since_sweep += to - from;
            match next {
                Some(next) => self.by_time.push(Reverse((next, id))),
                None => {
                    self.late_batches -= usize::from(stored.marks.is_some());
                    self.batch_bytes -= stored.bytes;
                    self.batches.remove(id)
                }
            }
        }
        if self.rows == 0 {
            self.index.clear();
            self.evicted_since_sweep = 0;
        } else if self.evicted_since_sweep > SWEEP_AFTER_EVICTED * self.rows.max(SWEEP_MIN_EVICTED)
        {
            self.index.sweep(&self.batches);
            self.evicted_since_sweep = 0;
        }
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
            side.insert(b, k, vec![false; n], None).unwrap();
            // Keep the last 500 ms.
            side.evict_before(batch * 100 + 100 - 500, None);
            assert!(side.len() <= 1_000, "{} rows live", side.len());
            let walked: usize = side
                .batches
                .slots
                .iter()
                .flatten()
                .map(StoredBatch::size_bytes)
                .sum();
            assert_eq!(
                side.batch_bytes, walked,
                "bytes counted as they come and go"
            );
            assert!(side.index.set_rows_are_counted());
            assert!(
                side.index.capacity() <= 2048,
                "{} index slots for {} live rows",
                side.index.capacity(),
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
        side.insert(b, k, vec![false], None).unwrap();
        assert_eq!(probe(&side, 1_000 + 19_000, 0..=i64::MAX), vec![30_000]);
        // Everything evicted: the index empties.
        side.evict_before(Timestamp::MAX, None);
        assert!(side.is_empty());
        assert_eq!(side.index.occupied(), 0);
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
    fn live_rows_come_out_in_time_order_a_chunk_at_a_time_without_the_evicted() {
        let mut side = SideState::default();
        // Two batches interleaved in time, the second late (marks).
        let (b, k) = keyed(&[(1, 40), (2, 10), (3, 30), (4, 20)]);
        side.insert(b, k, vec![true, false, false, true], None)
            .unwrap();
        let (b, k) = keyed(&[(5, 35), (6, 5), (7, 25)]);
        side.insert(b, k, vec![false; 3], Some(vec![100, 101, 102]))
            .unwrap();
        side.evict_before(10, None);
        let mut chunks = Vec::new();
        side.each_live_chunk(2, |held| {
            let keys = held
                .rows
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            chunks.push((keys.values().to_vec(), held.matched, held.marks));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            chunks,
            vec![
                (vec![2, 4], vec![false, true], vec![None, None]),
                (vec![7, 3], vec![false, false], vec![Some(102), None]),
                (vec![5, 1], vec![false, true], vec![Some(100), None]),
            ],
            "times 10, 20 | 25, 30 | 35, 40; the row at 5 evicted"
        );
    }

    #[test]
    fn rows_of_one_batch_sharing_a_key_all_stay_candidates() {
        let mut side = SideState::default();
        let (b, k) = keyed(&[(3, 10), (3, 5), (3, 7)]);
        side.insert(b, k, vec![false; 3], None).unwrap();
        assert_eq!(probe(&side, 3, 0..=100), vec![5, 7, 10]);
        side.evict_before(6, None);
        assert_eq!(probe(&side, 3, 0..=100), vec![7, 10]);
    }
}
