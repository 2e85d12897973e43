//! Per-node counters, shared between the thread running a node and whoever
//! observes the job (the CLI's summary, the HTTP API).
//!
//! Counters are monotonic atomics; `state_rows` and `state_bytes` are
//! gauges, `peak_state_rows` and `peak_state_bytes` their high-water marks. Reading them never blocks the running node. Counters are part of
//! every checkpoint, so a resumed job's counts continue where they were.
//! A connector adds figures of its own by name (`connector`: a
//! PostgreSQL source's confirmed slot position and lag), set by its reader
//! ([`crate::source::SourceContext::metric`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::time::{Timestamp, WATERMARK_MIN};

/// Live counters of one node.
#[derive(Debug)]
pub struct NodeMetrics {
    rows_in: AtomicU64,
    rows_out: AtomicU64,
    late_rows: AtomicU64,
    bad_rows: AtomicU64,
    state_rows: AtomicU64,
    peak_state_rows: AtomicU64,
    state_bytes: AtomicU64,
    peak_state_bytes: AtomicU64,
    spill_disk_bytes: AtomicU64,
    spill_written_bytes: AtomicU64,
    spill_read_bytes: AtomicU64,
    watermark: AtomicI64,
    rows_in_by_input: Vec<AtomicU64>,
    connector: Mutex<BTreeMap<String, i64>>,
}

impl Default for NodeMetrics {
    fn default() -> Self {
        Self {
            rows_in_by_input: Vec::new(),
            rows_in: AtomicU64::new(0),
            rows_out: AtomicU64::new(0),
            late_rows: AtomicU64::new(0),
            bad_rows: AtomicU64::new(0),
            state_rows: AtomicU64::new(0),
            peak_state_rows: AtomicU64::new(0),
            state_bytes: AtomicU64::new(0),
            peak_state_bytes: AtomicU64::new(0),
            spill_disk_bytes: AtomicU64::new(0),
            spill_written_bytes: AtomicU64::new(0),
            spill_read_bytes: AtomicU64::new(0),
            watermark: AtomicI64::new(WATERMARK_MIN),
            connector: Mutex::default(),
        }
    }
}

/// A point-in-time copy of a node's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    /// Rows received on all inputs (for a source: rows decoded).
    pub rows_in: u64,
    /// Rows received per input, in input order (a join: left, right).
    pub rows_in_by_input: Vec<u64>,
    /// Rows emitted on all outputs.
    pub rows_out: u64,
    /// Rows judged late (sources) or that arrived for an already fired window.
    pub late_rows: u64,
    /// Input rows rejected as malformed (sources).
    pub bad_rows: u64,
    /// Rows (or groups) currently held in operator state.
    pub state_rows: u64,
    /// The most rows (or groups) the state has held at once.
    #[serde(default)]
    pub peak_state_rows: u64,
    /// Approximate bytes of memory held in operator state.
    #[serde(default)]
    pub state_bytes: u64,
    /// The most bytes of memory the state has held at once.
    #[serde(default)]
    pub peak_state_bytes: u64,
    /// Bytes of operator state spilled to disk now ([`crate::spill`]).
    #[serde(default)]
    pub spill_disk_bytes: u64,
    /// Bytes of state written to the spill store so far.
    #[serde(default)]
    pub spill_written_bytes: u64,
    /// Bytes of spilled state read back so far.
    #[serde(default)]
    pub spill_read_bytes: u64,
    /// The node's current input watermark, epoch ms (`i64::MIN` before any).
    pub watermark: Timestamp,
    /// A connector's own figures by name (a PostgreSQL source's
    /// `slot_confirmed_lsn`, `lag_bytes`, `lag_ms`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub connector: BTreeMap<String, i64>,
}

impl NodeMetrics {
    /// A fresh, shareable set of counters for a node with `inputs` inputs.
    pub fn new_shared(inputs: usize) -> Arc<Self> {
        Arc::new(Self {
            rows_in_by_input: (0..inputs).map(|_| AtomicU64::new(0)).collect(),
            ..Self::default()
        })
    }
    /// Adds rows received on input `input`.
    pub fn add_input_rows(&self, input: usize, n: usize) {
        self.add_rows_in(n);
        if let Some(counter) = self.rows_in_by_input.get(input) {
            counter.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
    /// Adds received rows.
    pub fn add_rows_in(&self, n: usize) {
        self.rows_in.fetch_add(n as u64, Ordering::Relaxed);
    }
    /// Adds emitted rows.
    pub fn add_rows_out(&self, n: usize) {
        self.rows_out.fetch_add(n as u64, Ordering::Relaxed);
    }
    /// Adds late rows.
    pub fn add_late_rows(&self, n: usize) {
        self.late_rows.fetch_add(n as u64, Ordering::Relaxed);
    }
    /// Sets the late-row count (operators that keep their own count).
    pub fn set_late_rows(&self, n: u64) {
        self.late_rows.store(n, Ordering::Relaxed);
    }
    /// Adds malformed rows.
    pub fn add_bad_rows(&self, n: usize) {
        self.bad_rows.fetch_add(n as u64, Ordering::Relaxed);
    }
    /// Sets the state-size gauge.
    pub fn set_state_rows(&self, n: usize) {
        self.state_rows.store(n as u64, Ordering::Relaxed);
        self.peak_state_rows.fetch_max(n as u64, Ordering::Relaxed);
    }
    /// Sets the state-memory gauge.
    pub fn set_state_bytes(&self, n: usize) {
        self.state_bytes.store(n as u64, Ordering::Relaxed);
        self.peak_state_bytes.fetch_max(n as u64, Ordering::Relaxed);
    }
    /// Records what the node's spilled state has cost
    /// ([`crate::operator::Operator::spill_stats`]).
    pub fn set_spill(&self, stats: crate::spill::SpillStats) {
        self.spill_disk_bytes
            .store(stats.disk_bytes, Ordering::Relaxed);
        self.spill_written_bytes
            .store(stats.written_bytes, Ordering::Relaxed);
        self.spill_read_bytes
            .store(stats.read_bytes, Ordering::Relaxed);
    }
    /// Sets a connector's own figure.
    pub fn set_connector_metric(&self, name: &str, value: i64) {
        let mut figures = self.connector.lock().unwrap_or_else(|e| e.into_inner());
        figures.insert(name.to_string(), value);
    }
    /// Sets every counter to a checkpointed value (a resumed job).
    pub fn restore(&self, from: &MetricsSnapshot) {
        self.rows_in.store(from.rows_in, Ordering::Relaxed);
        self.rows_out.store(from.rows_out, Ordering::Relaxed);
        self.late_rows.store(from.late_rows, Ordering::Relaxed);
        self.bad_rows.store(from.bad_rows, Ordering::Relaxed);
        self.state_rows.store(from.state_rows, Ordering::Relaxed);
        self.peak_state_rows
            .store(from.peak_state_rows, Ordering::Relaxed);
        self.state_bytes.store(from.state_bytes, Ordering::Relaxed);
        self.peak_state_bytes
            .store(from.peak_state_bytes, Ordering::Relaxed);
        self.watermark.store(from.watermark, Ordering::Relaxed);
        for (counter, value) in self.rows_in_by_input.iter().zip(&from.rows_in_by_input) {
            counter.store(*value, Ordering::Relaxed);
        }
        if let Ok(mut figures) = self.connector.lock() {
            figures.clone_from(&from.connector);
        }
    }
    /// Records the node's current watermark.
    pub fn set_watermark(&self, watermark: Timestamp) {
        self.watermark.store(watermark, Ordering::Relaxed);
    }
    /// Copies the counters.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            rows_in: self.rows_in.load(Ordering::Relaxed),
            rows_in_by_input: self
                .rows_in_by_input
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            rows_out: self.rows_out.load(Ordering::Relaxed),
            late_rows: self.late_rows.load(Ordering::Relaxed),
            bad_rows: self.bad_rows.load(Ordering::Relaxed),
            state_rows: self.state_rows.load(Ordering::Relaxed),
            peak_state_rows: self.peak_state_rows.load(Ordering::Relaxed),
            state_bytes: self.state_bytes.load(Ordering::Relaxed),
            peak_state_bytes: self.peak_state_bytes.load(Ordering::Relaxed),
            spill_disk_bytes: self.spill_disk_bytes.load(Ordering::Relaxed),
            spill_written_bytes: self.spill_written_bytes.load(Ordering::Relaxed),
            spill_read_bytes: self.spill_read_bytes.load(Ordering::Relaxed),
            watermark: self.watermark.load(Ordering::Relaxed),
            connector: self.connector.lock().map(|f| f.clone()).unwrap_or_default(),
        }
    }
}

impl MetricsSnapshot {
    /// Adds the counters of another instance of the same node (a task of
    /// a group job): counts and gauges add up (a connector's figures too),
    /// the peak is the sum of the peaks (a bound), the watermark is the
    /// least of the two.
    pub fn absorb(&mut self, other: &MetricsSnapshot) {
        self.rows_in += other.rows_in;
        if self.rows_in_by_input.len() < other.rows_in_by_input.len() {
            self.rows_in_by_input
                .resize(other.rows_in_by_input.len(), 0);
        }
        for (sum, value) in self
            .rows_in_by_input
            .iter_mut()
            .zip(&other.rows_in_by_input)
        {
            *sum += value;
        }
        self.rows_out += other.rows_out;
        self.late_rows += other.late_rows;
        self.bad_rows += other.bad_rows;
        self.state_rows += other.state_rows;
        self.peak_state_rows += other.peak_state_rows;
        self.state_bytes += other.state_bytes;
        self.peak_state_bytes += other.peak_state_bytes;
        self.spill_disk_bytes += other.spill_disk_bytes;
        self.spill_written_bytes += other.spill_written_bytes;
        self.spill_read_bytes += other.spill_read_bytes;
        self.watermark = self.watermark.min(other.watermark);
        for (name, value) in &other.connector {
            *self.connector.entry(name.clone()).or_default() += value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_of_a_node_add_up_and_keep_the_least_watermark() {
        let mut a = MetricsSnapshot {
            rows_in: 3,
            rows_in_by_input: vec![1, 2],
            state_rows: 4,
            watermark: 1_000,
            ..MetricsSnapshot::default()
        };
        a.connector.insert("lag_bytes".into(), 10);
        a.absorb(&MetricsSnapshot {
            rows_in: 5,
            rows_in_by_input: vec![5, 0],
            state_rows: 1,
            watermark: 400,
            connector: [("lag_bytes".to_string(), 5)].into(),
            ..MetricsSnapshot::default()
        });
        assert_eq!(a.connector["lag_bytes"], 15);
        assert_eq!(a.rows_in, 8);
        assert_eq!(a.rows_in_by_input, vec![6, 2]);
        assert_eq!(a.state_rows, 5);
        assert_eq!(a.watermark, 400);
    }
}
