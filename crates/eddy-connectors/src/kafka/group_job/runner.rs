//! The thread of a group job: serves the group, starts the tasks it
//! assigns here (each under its lock) and reaps those that end, until the
//! job is done everywhere, stopped, or a task fails.
//!
//! In: the group membership and the shared state. Out: how the group job
//! ended here; each task's report in the shared state.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use eddy_engine::checkpoint::store::StateDir;
use eddy_engine::checkpoint::CheckpointConfig;
use eddy_engine::graph::JobGraph;
use eddy_engine::memory::MemoryBudget;
use eddy_engine::runtime::{start_job, JobConfig, JobHandle, JobState};

use super::{task_error, GroupJobConfig, RunningTask, Shared, TaskConnectors};
use crate::error::{ConnectorError, Result};
use crate::kafka::group::GroupMember;
use crate::ConnectorConfig;

fn task_state_dir(root: &Path, task: i32) -> PathBuf {
    root.join(format!("task-{task}"))
}

/// Takes `task`'s lock (`ROOT/task-<p>.lock`, an advisory file lock the
/// OS drops with a dead process); `None` while another process (or
/// another open of the file) holds it: a task still stopping there after
/// a rebalance.
fn lock_task(root: &Path, task: i32) -> Result<Option<std::fs::File>> {
    let path = root.join(format!("task-{task}.lock"));
    let io = |source| ConnectorError::Io {
        path: path.display().to_string(),
        source,
    };
    std::fs::create_dir_all(root).map_err(io)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
    }
}

/// The thread that serves the group and starts and reaps tasks.
pub(super) struct Runner {
    pub(super) shared: Arc<Shared>,
    pub(super) graph: Arc<JobGraph>,
    pub(super) connectors: ConnectorConfig,
    pub(super) task_connectors: TaskConnectors,
    pub(super) config: GroupJobConfig,
    pub(super) partitions: usize,
    /// Tasks seen done: done stays done, so their state directories are
    /// not read again on every round.
    pub(super) known_done: std::cell::RefCell<BTreeSet<i32>>,
}

impl Runner {
    fn root(&self) -> &Path {
        &self.config.checkpoints.state_dir
    }

    /// Whether `task` is done: finished, wherever it ran, and its last
    /// checkpoint's sinks committed. A task that finished but whose
    /// process died before its final commit is not: whoever is assigned
    /// it starts it, which commits again and ends at once.
    fn done(&self, task: i32) -> Result<bool> {
        if self.known_done.borrow().contains(&task) {
            return Ok(true);
        }
        let state =
            StateDir::open(task_state_dir(self.root(), task)).map_err(|e| task_error(task, e))?;
        let done = state
            .finished_and_committed()
            .map_err(|e| task_error(task, e))?;
        if done {
            self.known_done.borrow_mut().insert(task);
        }
        Ok(done)
    }

    fn lock_task(&self, task: i32) -> Result<Option<std::fs::File>> {
        lock_task(self.root(), task)
    }

    fn start_task(&self, task: i32) -> Result<JobHandle> {
        let mut connectors = self.connectors.clone();
        connectors.kafka_partitions = Some(vec![task]);
        connectors.task = Some(task as u32);
        let checkpoints = CheckpointConfig {
            state_dir: task_state_dir(self.root(), task),
            ..self.config.checkpoints.clone()
        };
        let name = format!("task-{task}");
        let memory = self
            .config
            .task_memory_limit
            .map(|limit| Arc::new(MemoryBudget::new(name.clone(), limit)))
            .into_iter()
            .chain(self.config.memory.iter().cloned())
            .collect();
        let label = if self.config.label.is_empty() {
            name
        } else {
            format!("{}/{name}", self.config.label)
        };
        start_job(
            self.graph.clone(),
            (self.task_connectors)(connectors),
            &JobConfig {
                checkpoints: Some(checkpoints),
                parallelism: self.config.parallelism,
                key_groups: self.config.key_groups,
                allow_dropped_state: self.config.allow_dropped_state,
                memory,
                label,
                disable_chaining: self.config.disable_chaining,
                pool: Some(self.shared.pool.clone()),
                share: Some(self.shared.share.clone()),
                ..JobConfig::default()
            },
        )
        .map_err(|e| task_error(task, e))
    }

    /// Serves the group until the job ends; how it ended.
    pub(super) fn run(&self, member: &GroupMember) -> Result<JobState> {
        let poisoned = || ConnectorError::Group {
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
                let Some(lock) = self.lock_task(task)? else {
                    tracing::debug!(group = %self.shared.group, "task-{task} is still held by another process");
                    continue;
                };
                // Done while it was held elsewhere.
                if self.done(task)? {
                    continue;
                }
                let handle = self.start_task(task)?;
                self.shared.running.lock().map_err(|_| poisoned())?.insert(
                    task,
                    RunningTask {
                        handle,
                        _lock: lock,
                    },
                );
            }
            // Tasks that ended on their own (bounded input, or a failure).
            let ended: Vec<(i32, RunningTask)> = {
                let mut running = self.shared.running.lock().map_err(|_| poisoned())?;
                let done: Vec<i32> = running
                    .iter()
                    .filter(|(_, t)| t.handle.state().is_terminal())
                    .map(|(&number, _)| number)
                    .collect();
                done.into_iter()
                    .filter_map(|number| running.remove(&number).map(|t| (number, t)))
                    .collect()
            };
            for (number, task) in ended {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_held_by_one_holder_at_a_time_until_it_lets_go() {
        let root = tempfile::tempdir().unwrap();
        let first = lock_task(root.path(), 2).unwrap();
        assert!(first.is_some());
        assert!(
            lock_task(root.path(), 2).unwrap().is_none(),
            "held: another holder waits"
        );
        assert!(
            lock_task(root.path(), 1).unwrap().is_some(),
            "tasks are locked one by one"
        );
        drop(first);
        assert!(lock_task(root.path(), 2).unwrap().is_some());
    }
}
