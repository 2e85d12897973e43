//! [`JobHandle`]: a running job as the outside sees it. Cloneable and
//! shareable across threads: any clone can watch its state and metrics,
//! stop it gracefully, cancel it, or wait for it.
//!
//! ```text
//!            stop() ─> stop barrier ─> final checkpoint, sinks committed ─> Stopped
//!  Running ─ inputs end ───────────────> final checkpoint, sinks committed ─> Finished
//!            cancel() ─────────────────> threads give up, nothing committed ─> Cancelled
//!            a node fails ─────────────> the job is cancelled ──────────────> Failed(error)
//! ```

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::control::Control;
use crate::checkpoint::CheckpointStats;
use crate::error::{EngineError, Result};
use crate::message::CheckpointId;
use crate::metrics::{MetricsSnapshot, NodeMetrics};

/// Where a job stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "error", rename_all = "lowercase")]
pub enum JobState {
    /// Its threads are running.
    Running,
    /// Every input ended and every output was written (and committed).
    Finished,
    /// It was stopped gracefully: a final checkpoint was taken (when
    /// checkpoints are on) and sinks were committed; a restart resumes it.
    Stopped,
    /// It was cancelled: it ended at once, committing nothing more.
    Cancelled,
    /// A node failed; the error says which and why.
    Failed(String),
}

impl JobState {
    /// Whether the job has ended.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, JobState::Running)
    }

    /// The lower-case name (`running`, `finished`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Finished => "finished",
            JobState::Stopped => "stopped",
            JobState::Cancelled => "cancelled",
            JobState::Failed(_) => "failed",
        }
    }
}

/// Counters of one node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeReport {
    /// Node id in the graph.
    pub id: usize,
    /// Node name.
    pub name: String,
    /// `source`, `sink` or the operator kind.
    pub kind: String,
    /// Counters.
    pub metrics: MetricsSnapshot,
}

/// What an ended job reports.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// How it ended (`finished` or `stopped`).
    pub state: JobState,
    /// The job had already finished in an earlier run (its final
    /// checkpoint says so); nothing ran.
    pub already_finished: Option<CheckpointId>,
    /// Per-node counters.
    pub nodes: Vec<NodeReport>,
    /// Checkpoint figures.
    pub checkpoints: CheckpointStats,
    /// Wall-clock duration of this run.
    pub elapsed_ms: u128,
    /// Time the job's tasks spent on the worker pool's threads (its
    /// sources' reads, on threads of their own, not included).
    pub pool_ms: u128,
    /// Instances each keyed operator ran as.
    pub parallelism: usize,
    /// What the connectors did beyond rows
    /// ([`crate::graph::ConnectorFactory::report`]).
    pub connectors: Vec<String>,
}

pub(crate) struct JobInner {
    pub names: Vec<(String, String)>,
    pub metrics: Vec<Arc<NodeMetrics>>,
    pub control: Arc<Control>,
    pub stats: Arc<Mutex<CheckpointStats>>,
    pub started: Instant,
    pub already_finished: Option<CheckpointId>,
    pub parallelism: usize,
    pub state: Mutex<(JobState, Option<u128>)>,
    pub changed: Condvar,
    pub connectors: Arc<dyn crate::graph::ConnectorFactory>,
    /// What to call once the job has ended ([`JobHandle::on_end`]); `None`
    /// once it has.
    pub on_end: Mutex<Option<Vec<EndCallback>>>,
    /// The job's share of the worker pool.
    pub share: Arc<super::share::JobShare>,
}

/// A call made once a job has ended.
pub(crate) type EndCallback = Box<dyn FnOnce() + Send>;

/// A handle on a started job. See the module docs.
#[derive(Clone)]
pub struct JobHandle {
    pub(crate) inner: Arc<JobInner>,
}

impl std::fmt::Debug for JobHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobHandle")
            .field("state", &self.state())
            .finish()
    }
}

impl JobHandle {
    /// The job's current state.
    pub fn state(&self) -> JobState {
        self.inner
            .state
            .lock()
            .map(|s| s.0.clone())
            .unwrap_or(JobState::Failed("job state lost".into()))
    }

    /// Instances each keyed operator runs as (resolved from
    /// [`crate::parallel::Parallelism`] when the job started).
    pub fn parallelism(&self) -> usize {
        self.inner.parallelism
    }

    /// Time the job's tasks have spent on the worker pool's threads so
    /// far: its use of the pool it shares with other jobs.
    pub fn pool_time(&self) -> Duration {
        self.inner.share.pool_time()
    }

    /// Live counters of every node, in node order.
    pub fn metrics(&self) -> Vec<NodeReport> {
        self.inner
            .names
            .iter()
            .zip(&self.inner.metrics)
            .enumerate()
            .map(|(id, ((name, kind), m))| NodeReport {
                id,
                name: name.clone(),
                kind: kind.clone(),
                metrics: m.snapshot(),
            })
            .collect()
    }

    /// Checkpoint figures so far.
    pub fn checkpoints(&self) -> CheckpointStats {
        self.inner
            .stats
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// What the connectors have done beyond rows so far (a Delta sink's
    /// commits, files and bytes), as the run summary prints it.
    pub fn connectors(&self) -> Vec<String> {
        self.inner.connectors.report()
    }

    /// Asks the job to stop gracefully and returns at once: sources stop
    /// reading, a final checkpoint is taken when checkpoints are on, sinks
    /// publish what they hold. Windows still open are not fired (a restart
    /// resumes them). [`JobHandle::wait`] tells when it is done.
    pub fn stop(&self) {
        self.inner.control.request_stop();
    }

    /// Ends the job at once; nothing more is committed. Returns at once.
    pub fn cancel(&self) {
        self.inner.control.cancel_by_user();
    }

    /// Waits until the job has ended and returns its report; an error if it
    /// failed or was cancelled.
    pub fn wait(&self) -> Result<JobReport> {
        let guard = self
            .inner
            .state
            .lock()
            .map_err(|_| EngineError::Graph("job state lost".into()))?;
        let guard = self
            .inner
            .changed
            .wait_while(guard, |(state, _)| !state.is_terminal())
            .map_err(|_| EngineError::Graph("job state lost".into()))?;
        let (state, elapsed) = guard.clone();
        drop(guard);
        self.report(state, elapsed)
    }

    /// Like [`JobHandle::wait`], but gives up after `timeout` (`None`: still running).
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<JobReport>> {
        let guard = self.inner.state.lock().ok()?;
        let (guard, _) = self
            .inner
            .changed
            .wait_timeout_while(guard, timeout, |(state, _)| !state.is_terminal())
            .ok()?;
        let (state, elapsed) = guard.clone();
        drop(guard);
        state.is_terminal().then(|| self.report(state, elapsed))
    }

    fn report(&self, state: JobState, elapsed: Option<u128>) -> Result<JobReport> {
        match state {
            JobState::Cancelled => Err(EngineError::Cancelled),
            JobState::Failed(message) => Err(EngineError::Failed(message)),
            state => Ok(JobReport {
                state,
                already_finished: self.inner.already_finished,
                nodes: self.metrics(),
                checkpoints: self.checkpoints(),
                elapsed_ms: elapsed.unwrap_or_else(|| self.inner.started.elapsed().as_millis()),
                pool_ms: self.pool_time().as_millis(),
                parallelism: self.inner.parallelism,
                connectors: self.inner.connectors.report(),
            }),
        }
    }

    pub(crate) fn set_state(&self, state: JobState) {
        let ended = state.is_terminal();
        if let Ok(mut guard) = self.inner.state.lock() {
            *guard = (state, Some(self.inner.started.elapsed().as_millis()));
        }
        self.inner.changed.notify_all();
        if ended {
            let calls = self
                .inner
                .on_end
                .lock()
                .ok()
                .and_then(|mut calls| calls.take());
            for call in calls.into_iter().flatten() {
                call();
            }
        }
    }

    /// Calls `call` once the job has ended (at once when it has), on the
    /// thread that saw it end: a front end's bookkeeping at the end of a
    /// job without a thread of its own waiting for it. `call` must not
    /// block for long.
    pub fn on_end(&self, call: impl FnOnce() + Send + 'static) {
        let mut slot = match self.inner.on_end.lock() {
            Ok(slot) => slot,
            Err(_) => return call(),
        };
        match slot.as_mut() {
            Some(calls) => calls.push(Box::new(call)),
            None => {
                drop(slot);
                call();
            }
        }
    }
}
