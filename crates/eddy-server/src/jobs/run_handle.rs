//! The current run of a server job, whichever way it runs: one job on
//! this server ([`JobHandle`]), or this server's share of a group job
//! scaled out over a Kafka consumer group ([`GroupJob`]).
//!
//! In: a started run. Out: what the job manager asks of any run — its
//! state, counters and checkpoint figures, stop, cancel and wait.

use std::time::Duration;

use eddy_connectors::kafka::group_job::GroupJob;
use eddy_engine::checkpoint::CheckpointStats;
use eddy_engine::runtime::{JobHandle, JobState, NodeReport};

use crate::views::GroupView;

/// See the module docs.
#[derive(Clone)]
pub(super) enum RunHandle {
    /// A job run whole by this server.
    Single(JobHandle),
    /// The tasks of a group job the group gives this server.
    Group(GroupJob),
}

impl RunHandle {
    /// Where the run stands.
    pub(super) fn state(&self) -> JobState {
        match self {
            Self::Single(h) => h.state(),
            Self::Group(g) => g.state(),
        }
    }

    /// What its connectors did beyond rows (a Delta sink's commits,
    /// files and bytes); a group job's tasks report theirs in their logs.
    pub(super) fn connectors(&self) -> Vec<String> {
        match self {
            Self::Single(h) => h.connectors(),
            Self::Group(_) => Vec::new(),
        }
    }

    /// Time its tasks have spent on the server's worker pool.
    pub(super) fn pool_time(&self) -> Duration {
        match self {
            Self::Single(h) => h.pool_time(),
            Self::Group(g) => g.pool_time(),
        }
    }

    /// Counters per node (a group job's added up over its tasks here).
    pub(super) fn metrics(&self) -> Vec<NodeReport> {
        match self {
            Self::Single(h) => h.metrics(),
            Self::Group(g) => g.metrics(),
        }
    }

    /// Checkpoint figures (a group job's: checkpoints of its tasks here
    /// added up, the latest and longest over them).
    pub(super) fn checkpoints(&self) -> CheckpointStats {
        match self {
            Self::Single(h) => h.checkpoints(),
            Self::Group(g) => {
                let mut total = CheckpointStats::default();
                for (_, c) in g.task_checkpoints() {
                    total.completed += c.completed;
                    total.last_id = total.last_id.max(c.last_id);
                    total.restored_from = total.restored_from.max(c.restored_from);
                    total.last_bytes += c.last_bytes;
                    total.total_bytes += c.total_bytes;
                    total.max_bytes = total.max_bytes.max(c.max_bytes);
                    total.last_duration_ms = total.last_duration_ms.max(c.last_duration_ms);
                    total.max_duration_ms = total.max_duration_ms.max(c.max_duration_ms);
                    total.total_duration_ms += c.total_duration_ms;
                }
                total
            }
        }
    }

    /// The group job's standing, for a group job.
    pub(super) fn group(&self) -> Option<GroupView> {
        match self {
            Self::Single(_) => None,
            Self::Group(g) => Some(GroupView {
                name: g.group().to_string(),
                tasks: g.partitions(),
                tasks_here: g.tasks_here(),
                exchanges: g.exchanges().iter().map(|e| e.topic.clone()).collect(),
            }),
        }
    }

    /// Asks the run to stop gracefully (a group job's tasks here take a
    /// final checkpoint and the group hands them on); returns at once.
    pub(super) fn stop(&self) {
        match self {
            Self::Single(h) => h.stop(),
            Self::Group(g) => g.stop(),
        }
    }

    /// Ends the run at once (a group job's: stopped, as its tasks must
    /// leave a checkpoint for the processes that take them over).
    pub(super) fn cancel(&self) {
        match self {
            Self::Single(h) => h.cancel(),
            Self::Group(g) => g.stop(),
        }
    }

    /// Waits for the run to end; why it failed, if it did.
    pub(super) fn wait(&self) -> Result<(), String> {
        match self {
            Self::Single(h) => h.wait().map(|_| ()).map_err(|e| e.to_string()),
            Self::Group(g) => g.wait().map(|_| ()).map_err(|e| e.to_string()),
        }
    }

    /// Whether the run ended within `timeout`.
    pub(super) fn wait_timeout(&self, timeout: Duration) -> bool {
        match self {
            Self::Single(h) => h.wait_timeout(timeout).is_some(),
            Self::Group(g) => g.wait_timeout(timeout).is_some(),
        }
    }
}
