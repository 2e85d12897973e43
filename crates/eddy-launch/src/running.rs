//! A launched job, whichever way it runs: whole on this machine
//! ([`JobHandle`]), or this process's share of a group job scaled out
//! over a Kafka consumer group ([`GroupJob`]).
//!
//! In: a started run ([`crate::launch`]). Out: what a caller asks of any
//! run — its state, counters and checkpoint figures, stop, cancel and
//! wait, and how it ended ([`RunReport`]).

use std::time::Duration;

use eddy_engine::checkpoint::CheckpointStats;
use eddy_engine::runtime::{JobHandle, JobReport, JobState, NodeReport};

use crate::group::{GroupJob, GroupReport};
use crate::Result;

/// See the module docs.
#[derive(Clone)]
pub enum RunningJob {
    /// A job run whole here.
    Single(JobHandle),
    /// The tasks of a group job the group gives this process.
    Group(GroupJob),
}

/// How a run ended.
#[derive(Debug, Clone)]
pub enum RunReport {
    /// A job run whole: its run summary.
    Single(JobReport),
    /// A group job: what its tasks did here.
    Group(GroupReport),
}

/// Where a group job stands, seen from this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStanding {
    /// The consumer group.
    pub name: String,
    /// The job's task count (its topics' partitions).
    pub tasks: usize,
    /// The tasks running here now.
    pub tasks_here: Vec<i32>,
    /// The exchange topics cut into each task's graph.
    pub exchanges: Vec<String>,
}

impl std::fmt::Debug for RunningJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Single(h) => f.debug_tuple("Single").field(&h.state()).finish(),
            Self::Group(g) => f.debug_tuple("Group").field(g).finish(),
        }
    }
}

impl RunningJob {
    /// Where the run stands.
    pub fn state(&self) -> JobState {
        match self {
            Self::Single(h) => h.state(),
            Self::Group(g) => g.state(),
        }
    }

    /// What its connectors did beyond rows (a Delta sink's commits,
    /// files and bytes); a group job's tasks report theirs in their logs.
    pub fn connectors(&self) -> Vec<String> {
        match self {
            Self::Single(h) => h.connectors(),
            Self::Group(_) => Vec::new(),
        }
    }

    /// Time its tasks have spent on the worker pool.
    pub fn pool_time(&self) -> Duration {
        match self {
            Self::Single(h) => h.pool_time(),
            Self::Group(g) => g.pool_time(),
        }
    }

    /// Counters per node (a group job's added up over its tasks here).
    pub fn metrics(&self) -> Vec<NodeReport> {
        match self {
            Self::Single(h) => h.metrics(),
            Self::Group(g) => g.metrics(),
        }
    }

    /// Checkpoint figures (a group job's: checkpoints of its tasks here
    /// added up, the latest and longest over them).
    pub fn checkpoints(&self) -> CheckpointStats {
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
    pub fn group(&self) -> Option<GroupStanding> {
        match self {
            Self::Single(_) => None,
            Self::Group(g) => Some(GroupStanding {
                name: g.group().to_string(),
                tasks: g.partitions(),
                tasks_here: g.tasks_here(),
                exchanges: g.exchanges().iter().map(|e| e.topic.clone()).collect(),
            }),
        }
    }

    /// Asks the run to stop gracefully (a group job's tasks here take a
    /// final checkpoint and the group hands them on); returns at once.
    pub fn stop(&self) {
        match self {
            Self::Single(h) => h.stop(),
            Self::Group(g) => g.stop(),
        }
    }

    /// Ends the run at once (a group job's: stopped, as its tasks must
    /// leave a checkpoint for the processes that take them over).
    pub fn cancel(&self) {
        match self {
            Self::Single(h) => h.cancel(),
            Self::Group(g) => g.stop(),
        }
    }

    /// Waits for the run to end: how it did, or why it failed.
    pub fn wait(&self) -> Result<RunReport> {
        Ok(match self {
            Self::Single(h) => RunReport::Single(h.wait()?),
            Self::Group(g) => RunReport::Group(g.wait()?),
        })
    }

    /// Whether the run ended within `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        match self {
            Self::Single(h) => h.wait_timeout(timeout).is_some(),
            Self::Group(g) => g.wait_timeout(timeout).is_some(),
        }
    }
}
