//! Buffered rows of one side of an interval join.
//!
//! In: batches of one input with their key rows (Arrow row format) and event
//! times. Out: candidate rows for probes by key, and rows whose time makes
//! further matches impossible, in time order, when evicted.
//!
//! Rows stay in the batches they arrived in (columnar, shared `Arc`s); an
//! index maps each key to the rows holding it, and a min-heap orders rows by
//! event time for eviction. A batch is dropped when its last row is evicted.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::Rows;
use hashbrown::HashMap;

use crate::time::Timestamp;

/// A buffered row: batch id, row within it, event time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowRef {
    /// Event time (ms).
    pub time: Timestamp,
    /// Id of the stored batch.
    pub batch: u64,
    /// Row within the batch.
    pub row: u32,
}

struct StoredBatch {
    batch: RecordBatch,
    keys: Rows,
    /// Whether a row has key NULLs (never indexed, never matches).
    indexed: Vec<bool>,
    matched: Vec<bool>,
    live: usize,
}

/// All buffered rows of one side.
#[derive(Default)]
pub struct SideState {
    batches: HashMap<u64, StoredBatch>,
    next_batch: u64,
    index: HashMap<Vec<u8>, Vec<RowRef>>,
    by_time: BinaryHeap<Reverse<(Timestamp, u64, u32)>>,
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

    /// Rows whose key equals `key`.
    pub fn candidates(&self, key: &[u8]) -> &[RowRef] {
        self.index.get(key).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The stored batch with id `batch`.
    pub fn batch(&self, batch: u64) -> Option<&RecordBatch> {
        self.batches.get(&batch).map(|b| &b.batch)
    }

    /// Marks a buffered row as matched (outer joins).
    pub fn mark_matched(&mut self, row: RowRef) {
        if let Some(stored) = self.batches.get_mut(&row.batch) {
            if let Some(flag) = stored.matched.get_mut(row.row as usize) {
                *flag = true;
            }
        }
    }

    /// Buffers a batch. Rows without a time are not kept; rows whose key
    /// has a NULL (`key_valid[i]` false) are kept for eviction but never
    /// indexed, so they match nothing. `matched` carries what the probe of
    /// this batch found.
    pub fn insert(
        &mut self,
        batch: RecordBatch,
        keys: Rows,
        times: &[Option<Timestamp>],
        key_valid: &[bool],
        matched: Vec<bool>,
    ) {
        let id = self.next_batch;
        self.next_batch += 1;
        let mut live = 0;
        for (row, time) in times.iter().enumerate() {
            let Some(time) = *time else { continue };
            if key_valid[row] {
                let r = RowRef { time, batch: id, row: row as u32 };
                self.index.entry_ref(keys.row(row).as_ref()).or_default().push(r);
            }
            self.by_time.push(Reverse((time, id, row as u32)));
            live += 1;
        }
        self.rows += live;
        if live > 0 {
            self.batches.insert(id, StoredBatch { batch, keys, indexed: key_valid.to_vec(), matched, live });
        }
    }

    /// Removes every row with time below `threshold`; returns, per evicted
    /// batch part, the rows that never matched (for outer joins), in time order.
    pub fn evict_before(&mut self, threshold: Timestamp, unmatched: &mut Vec<(RecordBatch, u32)>) {
        while let Some(Reverse((time, batch, row))) = self.by_time.peek().copied() {
            if time >= threshold {
                break;
            }
            self.by_time.pop();
            let Some(stored) = self.batches.get_mut(&batch) else { continue };
            if stored.indexed.get(row as usize).copied().unwrap_or(false) {
                let key = stored.keys.row(row as usize);
                if let Some(list) = self.index.get_mut(key.as_ref()) {
                    list.retain(|r| !(r.batch == batch && r.row == row));
                    if list.is_empty() {
                        self.index.remove(key.as_ref());
                    }
                }
            }
            if !stored.matched.get(row as usize).copied().unwrap_or(true) {
                unmatched.push((stored.batch.clone(), row));
            }
            stored.live -= 1;
            self.rows -= 1;
            if stored.live == 0 {
                self.batches.remove(&batch);
            }
        }
    }
}
