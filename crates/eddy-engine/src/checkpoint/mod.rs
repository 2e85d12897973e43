//! Checkpoints: consistent snapshots of a running job, taken with aligned
//! barriers (Chandy–Lamport as Flink does it), so that a job killed at any
//! moment resumes without losing or repeating a row.
//!
//! ```text
//!  coordinator ──request n──> sources: position + watermarks ──> Barrier(n) on every edge
//!  operator:   barrier n on input i ─> stop reading i ... barrier n on every input ─> snapshot, forward Barrier(n)
//!  sink:       aligned ─> precommit (durable, not visible) ─> its state
//!  coordinator: every node's state for n ─> store: state files + manifest (atomic) ─> commit sinks
//! ```
//!
//! - [`store`]: the state directory: one subdirectory per checkpoint, Arrow
//!   IPC state files (`tables`), a checksummed manifest written last and
//!   atomically (`manifest`), fingerprints that refuse a changed query,
//!   the last two kept (and what a damaged file would fall back to);
//! - [`changes`]: keyed tables written as the keys that changed since the
//!   previous checkpoint, applied in order when read back;
//! - [`evolve`]: a checkpoint of a changed query, its state mapped by each
//!   node's identity (kept, started afresh, or dropped when allowed);
//! - [`savepoint`]: a checkpoint copied out of the state directory, to
//!   start a job from (at any parallelism) whatever became of the directory;
//! - [`coordinator`]: triggers checkpoints, collects node states, writes
//!   them, commits sinks, and ends the job once it stopped or finished;
//! - [`replica`]: the state directory copied to a bucket at every
//!   checkpoint, before its sinks commit, and restored from it at start.
//!
//! What a node contributes is a [`NodeCheckpoint`]: the runtime's own part
//! (input watermarks, counters, whether the node finished) and the
//! operator's, source's or sink's [`crate::state::StateSnapshot`].

pub mod changes;
pub mod coordinator;
pub mod damage;
pub mod evolve;
mod manifest;
pub mod replica;
pub mod savepoint;
pub mod store;
mod tables;

pub(crate) use tables::TableWriter;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::message::CheckpointId;
use crate::metrics::MetricsSnapshot;
use crate::state::StateSnapshot;
use crate::time::{Timestamp, WATERMARK_MIN};

/// An I/O failure on a checkpoint file, naming the file.
fn io_error(path: &std::path::Path, e: impl std::fmt::Display) -> crate::error::EngineError {
    crate::error::EngineError::Checkpoint(format!("{}: {e}", path.display()))
}

/// The default time between checkpoints when a state directory is given.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// Checkpoint settings of a job (`--state-dir`, `--checkpoint-interval`,
/// `--ignore-state`).
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// Where checkpoints live.
    pub state_dir: PathBuf,
    /// Time from the end of one checkpoint to the start of the next.
    pub interval: Duration,
    /// Discard existing checkpoints and start afresh.
    pub ignore_state: bool,
    /// Write keyed tables as the keys that changed since the previous
    /// checkpoint where operators can ([`crate::state::KeyedTable`]);
    /// `false` writes every table whole at every checkpoint
    /// (`--full-checkpoints`).
    pub incremental: bool,
    /// Where `state_dir` (then a local working copy) is kept durably: a
    /// bucket (`--state-dir s3://...`); `None` keeps it on the local disk.
    pub replica: Option<std::sync::Arc<dyn replica::StateReplica>>,
}

impl CheckpointConfig {
    /// Checkpoints in `state_dir` every [`DEFAULT_INTERVAL`].
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Self {
            state_dir: state_dir.into(),
            interval: DEFAULT_INTERVAL,
            ignore_state: false,
            incremental: true,
            replica: None,
        }
    }
}

/// The runtime's view of a node's inputs: per-input watermarks, which
/// inputs ended or are idle, and the node's current (minimum) watermark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockState {
    /// Watermark per input.
    pub watermarks: Vec<Timestamp>,
    /// Inputs that ended.
    pub ended: Vec<bool>,
    /// Inputs that are idle.
    pub idle: Vec<bool>,
    /// The node's watermark.
    pub current: Timestamp,
}

/// The runtime's part of a node's checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeRuntimeState {
    /// The node had finished (it sent `End`); a resumed job does not run it.
    pub finished: bool,
    /// Its counters.
    pub metrics: MetricsSnapshot,
    /// Operators and sinks: their inputs' watermarks.
    pub clock: Option<ClockState>,
    /// Operators: the watermark last forwarded downstream.
    pub forwarded: Timestamp,
}

impl Default for NodeRuntimeState {
    fn default() -> Self {
        Self {
            finished: false,
            metrics: MetricsSnapshot::default(),
            clock: None,
            forwarded: WATERMARK_MIN,
        }
    }
}

/// One node's share of a checkpoint.
#[derive(Debug, Clone, Default)]
pub struct NodeCheckpoint {
    /// Kept by the runtime.
    pub runtime: NodeRuntimeState,
    /// Kept by the operator, source or sink.
    pub state: StateSnapshot,
}

/// How the job stood when a checkpoint was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointKind {
    /// Taken while the job ran.
    Running,
    /// The final checkpoint of a stopped job.
    Stopped,
    /// Taken after every node finished: the job is complete.
    Finished,
}

/// A complete checkpoint: every node's state at one barrier.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// Its number.
    pub id: CheckpointId,
    /// How the job stood.
    pub kind: CheckpointKind,
    /// One entry per graph node, in node order.
    pub nodes: Vec<NodeCheckpoint>,
}

/// Figures about a job's checkpoints, for metrics and the run summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointStats {
    /// The checkpoint the job resumed from, if any.
    pub restored_from: Option<CheckpointId>,
    /// Checkpoints completed by this run.
    pub completed: u64,
    /// The latest completed checkpoint.
    pub last_id: Option<CheckpointId>,
    /// Bytes written for it.
    pub last_bytes: u64,
    /// The largest checkpoint of this run, in bytes.
    #[serde(default)]
    pub max_bytes: u64,
    /// Bytes written for all checkpoints of this run.
    #[serde(default)]
    pub total_bytes: u64,
    /// Milliseconds from its trigger to its completion (sinks committed).
    pub last_duration_ms: u64,
    /// The longest such duration of this run.
    pub max_duration_ms: u64,
    /// Sum of all durations of this run.
    pub total_duration_ms: u64,
}
