//! The thread of a group job: serves the group, starts the tasks it
//! assigns here (each under its lock) and reaps those that end, until the
//! job is done everywhere, stopped, or a task fails.
//!
//! In: the group membership and the shared state. Out: how the group job
//! ended here; each task's report in the shared state.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use eddy_engine::graph::JobGraph;
use eddy_engine::memory::MemoryBudget;
use eddy_engine::runtime::{start_job, JobConfig, JobHandle, JobState};

use super::task_state::{TaskLock, TaskStates};
use super::{task_error, GroupJobConfig, RunningTask, Shared};
use crate::{ConnectorsFor, LaunchError, Result};
use eddy_connectors::kafka::group::GroupMember;
use eddy_connectors::ConnectorConfig;

/// The thread that serves the group and starts and reaps tasks.
pub(super) struct Runner {
    pub(super) shared: Arc<Shared>,
    pub(super) graph: Arc<JobGraph>,
    pub(super) connectors: ConnectorConfig,
    pub(super) task_connectors: ConnectorsFor,
    pub(super) config: GroupJobConfig,
    /// Where the tasks' state lives and how a task is held.
    pub(super) states: TaskStates,
    pub(super) partitions: usize,
    /// Tasks seen done: done stays done, so their state directories are
    /// not read again on every round.
    pub(super) known_done: std::cell::RefCell<BTreeSet<i32>>,
}

impl Runner {
    /// Whether `task` is done: finished, wherever it ran, and its last
    /// checkpoint's sinks committed. A task that finished but whose
    /// process died before its final commit is not: whoever is assigned
    /// it starts it, which commits again and ends at once.
    fn done(&self, task: i32) -> Result<bool> {
        self.ask_done(task, false)
    }

    /// [`Runner::done`], asked now even of a bucket.
    fn done_now(&self, task: i32) -> Result<bool> {
        self.ask_done(task, true)
    }

    fn ask_done(&self, task: i32, now: bool) -> Result<bool> {
        if self.known_done.borrow().contains(&task) {
            return Ok(true);
        }
        let done = self
            .states
            .done(task, now)
            .map_err(|e| task_error(task, e))?;
        if done {
            self.known_done.borrow_mut().insert(task);
        }
        Ok(done)
    }

    fn start_task(&self, task: i32, lock: &TaskLock) -> Result<JobHandle> {
        let mut connectors = self.connectors.clone();
        connectors
            .settings
            .set(eddy_connectors::kafka::TaskPartitions(vec![task]));
        connectors.task = Some(task as u32);
        let checkpoints = self
            .states
            .checkpoints(task, lock, &self.config.checkpoints);
        let name = format!("task-{task}");
        let job = &self.config.task;
        let memory = self
            .config
            .task_memory_limit
            .map(|limit| Arc::new(MemoryBudget::new(name.clone(), limit)))
            .into_iter()
            .chain(job.memory.iter().cloned())
            .collect();
        let label = if job.label.is_empty() {
            name
        } else {
            format!("{}/{name}", job.label)
        };
        start_job(
            self.graph.clone(),
            (self.task_connectors)(connectors, &self.graph),
            &JobConfig {
                checkpoints: Some(checkpoints),
                memory,
                label,
                pool: Some(self.shared.pool.clone()),
                share: Some(self.shared.share.clone()),
                ..job.clone()
            },
        )
        .map_err(|e| task_error(task, e))
    }

    /// Serves the group until the job ends; how it ended.
    pub(super) fn run(&self, member: &GroupMember) -> Result<JobState> {
        let poisoned = || LaunchError::Group {
            group: self.shared.group.clone(),
            message: "its task table was poisoned (a thread panicked)".into(),
        };
        loop {
            if self.shared.stop.load(Ordering::SeqCst) {
                self.shared.stop_tasks()?;
                return Ok(JobState::Stopped);
            }
            if let Some(assigned) = member.poll(Duration::from_millis(200)) {
                tracing::info!(group = %self.shared.group, "assigned partitions {assigned:?}");
                *self.shared.assigned.lock().map_err(|_| poisoned())? = assigned;
            }
            // Start the assigned tasks not running here nor done; one
            // still stopping elsewhere (its lock held) waits its turn.
            let assigned = self.shared.assigned.lock().map_err(|_| poisoned())?.clone();
            for task in assigned {
                let running = self
                    .shared
                    .running
                    .lock()
                    .map_err(|_| poisoned())?
                    .contains_key(&task);
                if running || self.done(task)? {
                    continue;
                }
                let Some(lock) = self.states.lock(task)? else {
                    tracing::debug!(group = %self.shared.group, "task-{task} is still held by another process");
                    continue;
                };
                // Done while it was held elsewhere.
                if self.done_now(task)? {
                    continue;
                }
                tracing::info!(group = %self.shared.group, "task-{task}: running here, held by {}", lock.describe());
                let handle = self.start_task(task, &lock)?;
                self.shared
                    .running
                    .lock()
                    .map_err(|_| poisoned())?
                    .insert(task, RunningTask { handle, lock });
            }
            // Tasks that ended on their own (bounded input, or a failure),
            // and those this process no longer holds (cancelled at once:
            // another process runs them from their last checkpoint).
            let ended: Vec<(i32, RunningTask)> = {
                let mut running = self.shared.running.lock().map_err(|_| poisoned())?;
                let done: Vec<i32> = running
                    .iter()
                    .filter(|(_, t)| t.handle.state().is_terminal() || t.lock.lost().is_some())
                    .map(|(&number, _)| number)
                    .collect();
                done.into_iter()
                    .filter_map(|number| running.remove(&number).map(|t| (number, t)))
                    .collect()
            };
            for (number, task) in ended {
                if let Some(why) = task.lock.lost() {
                    tracing::warn!(group = %self.shared.group, "task-{number} cancelled here: {why}");
                    task.handle.cancel();
                    let _ = task.handle.wait();
                    continue;
                }
                let report = task.handle.wait().map_err(|e| task_error(number, e))?;
                self.shared.record(number, report);
            }
            let mut all_finished = true;
            for task in 0..self.partitions as i32 {
                if !self.done(task)? {
                    all_finished = false;
                    break;
                }
            }
            if all_finished {
                return Ok(JobState::Finished);
            }
        }
    }
}
