//! Executes a [`JobGraph`]: its tasks (chains of nodes, [`crate::chains`])
//! on a shared [`WorkerPool`], one bounded channel per edge between tasks,
//! a checkpoint coordinator, and a [`JobHandle`] to watch and steer it.
//!
//! ```text
//!  source task:     reader thread -> SourceRunner -> Batch / Watermark / Barrier ... Watermark(+inf), End
//!  operator task:   inputs (aligned) -> Operator::{on_batch, on_watermark, snapshot, on_end} -> consumers
//!  sink task:       inputs (aligned) -> SinkWriter::{write, precommit, finish}
//!  chained nodes:   the task's first node -> Link::push -> next node -> ... (by call, on the task's worker)
//!  coordinator:     a task too: triggers checkpoints, writes them, commits sinks;
//!                   then awaits the other tasks and sets the job's final state
//! ```
//!
//! Each edge between tasks is its own bounded channel: a slow consumer
//! stops its producers at their next message (backpressure), and a node
//! can stop reading one input while a checkpoint barrier is aligned. A
//! task waiting for input or room holds no worker thread. A node tracks one watermark
//! per input and acts on their minimum; an ended input no longer holds the
//! minimum back. Inside a task, each node hands the next what it emits by a
//! call, so backpressure reaches the task's first node through its last.
//!
//! When a node fails, it records the error and cancels the job, which wakes
//! every other task waiting; each gives up at once. The first error is the job's
//! result, named for the node it arose in.
//!
//! - [`pool`]: the worker threads every job's tasks run on; [`share`]: a
//!   job's share of them;
//! - [`control`]: the flags, wake-up and events a job's tasks share;
//! - `inputs` / `outputs`: channels or chained nodes, the input clock,
//!   barrier alignment;
//! - `source_task`: a source and the loop of the task it heads;
//!   `operator_task`, `sink_task`: the lifecycles of the nodes that read
//!   inputs, driven by `stage` (the loop of a task one heads) or by
//!   `chain_link` (a node chained after another);
//! - `start`: [`start_job`] in its steps, from the state directory to
//!   the spawned tasks;
//! - `resume`: the state a job starts from (checkpoint or savepoint), mapped
//!   onto a changed query and spread over the job's instances;
//! - [`handle`]: [`JobHandle`], [`JobState`], [`JobReport`].

pub(crate) mod alignment;
mod chain_link;
pub(crate) mod control;
pub(crate) mod drop_later;
pub mod handle;
mod inputs;
mod operator_task;
mod outputs;
pub mod pool;
mod resume;
pub mod share;
mod sink_task;
mod source_task;
mod stage;
mod start;

use std::sync::Arc;

pub use handle::{JobHandle, JobReport, JobState, NodeReport};
pub use pool::WorkerPool;
pub use share::{Fairness, JobShare};
pub use start::start_job;

use crate::checkpoint::CheckpointConfig;
use crate::error::Result;
use crate::graph::{ConnectorFactory, JobGraph};
use crate::key_groups::KeyGroups;
use crate::parallel::Parallelism;

/// Messages buffered per edge before the producer blocks.
const EDGE_CAPACITY: usize = 4;

/// How a job runs.
#[derive(Debug, Clone, Default)]
pub struct JobConfig {
    /// Checkpoints (`--state-dir`); `None` runs without them.
    pub checkpoints: Option<CheckpointConfig>,
    /// Instances of each keyed operator (`--parallelism`; by default one
    /// per core, or the N of the checkpoint the job resumes from). The
    /// graph run is the plan laid out for it
    /// ([`crate::distribute::physical::PhysicalGraph`]).
    pub parallelism: Parallelism,
    /// The key groups keyed state is spread in for a job that starts
    /// afresh (`--max-parallelism`); `None`: the default for its N
    /// ([`KeyGroups::for_parallelism`]). A resumed job keeps its
    /// checkpoint's.
    pub key_groups: Option<KeyGroups>,
    /// Start from this savepoint ([`crate::checkpoint::savepoint`]) when
    /// the state directory holds no checkpoints of its own.
    pub from_savepoint: Option<std::path::PathBuf>,
    /// Resume a changed query even when some of the checkpoint's state has
    /// no place in it, dropping that state
    /// ([`crate::checkpoint::evolve`]); refused otherwise.
    pub allow_dropped_state: bool,
    /// The budgets the job's operator state is charged to (its own, its
    /// server's); none: unbounded.
    pub memory: Vec<Arc<crate::memory::MemoryBudget>>,
    /// Where state the budgets refuse is spilled, and how much may be
    /// ([`crate::spill`]).
    pub spill: crate::spill::SpillConfig,
    /// How the job's nodes are named to a budget shared with other jobs
    /// (`<label>/<node>`); empty: the node's name alone.
    pub label: String,
    /// The most rows in a batch an operator passes on: what it emits at
    /// once (a window firing, everything released by the final watermark)
    /// goes on in slices of this many rows, so downstream work and memory
    /// per message stay bounded. 0: [`DEFAULT_BATCH_ROWS`].
    pub batch_rows: usize,
    /// Run every node as a task of its own, with a channel on every edge
    /// (`--no-chaining`), instead of chaining nodes into tasks
    /// ([`crate::chains`]): for comparison and for finding which node of
    /// a task is slow.
    pub disable_chaining: bool,
    /// The worker threads the job's tasks run on, shared with the other
    /// jobs given the same pool; `None`: [`WorkerPool::shared`].
    pub pool: Option<Arc<WorkerPool>>,
    /// The share of `pool` the job runs in ([`WorkerPool::job_share`]),
    /// for runs that are one job to the pool's others (a group job's
    /// tasks); `None`: a share of its own.
    pub share: Option<Arc<JobShare>>,
}

/// Rows per batch passed between operators unless configured.
pub const DEFAULT_BATCH_ROWS: usize = 8192;

/// Runs a job to completion.
pub fn run_job(
    graph: Arc<JobGraph>,
    connectors: Arc<dyn ConnectorFactory>,
    config: &JobConfig,
) -> Result<JobReport> {
    start_job(graph, connectors, config)?.wait()
}
