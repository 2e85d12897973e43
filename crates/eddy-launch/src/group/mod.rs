//! A job scaled out over a Kafka consumer group: what `eddy run --group`
//! and a group job of `eddy serve` run.
//!
//! In: the job's compiled graph, its connector settings, how each task's
//! connector factory is made ([`ConnectorsFor`]), and a [`GroupJobConfig`] (the group's name,
//! a state directory shared by every process of the group, or a bucket
//! prefix where they share no disk). Out: a
//! [`GroupJob`] handle, running the tasks the group gives this process:
//! one per partition number of the job's (co-partitioned) Kafka topics.
//!
//! ```text
//!  process 1: GroupMember ── assigned {0, 2} ──> task-0 (partition 0 of every topic, state DIR/task-0)
//!                                           └──> task-2
//!  process 2: GroupMember ── assigned {1}    ──> task-1
//! ```
//!
//! A task is a whole job: its Kafka sources read one partition, its state
//! lives in `STATE_DIR/task-<p>` (shared by every process: a task moves by
//! resuming from its last checkpoint), its Kafka sinks' transactional ids
//! and its file sinks' names carry `task-<p>`. When the group rebalances
//! (a process joins, leaves or dies) every task is stopped with a final
//! checkpoint before the partitions are handed out again; and a process
//! runs a task only while it holds the task's lock (`STATE_DIR/task-<p>.lock`,
//! an advisory lock the OS drops with a dead process; with the state in a
//! bucket, a lease there that runs out with a dead process), taken before the
//! task starts and let go once it has stopped, so no two processes run a
//! task at once even if the group hands a task on before its old holder
//! has stopped it; a dead process's tasks resume from their
//! last checkpoint on the survivors, losing and repeating nothing in
//! exactly-once sinks. Each key's rows are in one task: those of an
//! operator keyed by the topics' key (`key_column`) are in one partition
//! number already; an operator keyed otherwise gets its rows through an
//! exchange topic keyed by its own key
//! ([`eddy_engine::distribute::exchanges`], topics named by
//! [`KafkaExchanges`]), which every task writes and each reads its
//! partition of. So results equal a single process's.
//!
//! The group job ends when every task of the job has finished (bounded
//! sources, `stop = 'latest'`; its state directory says so, whichever
//! process ran it, and that its final checkpoint's sinks were committed:
//! a process killed between the two leaves the task to whoever is
//! assigned it next, whose start commits again), when [`GroupJob::stop`] is called (the tasks here take
//! a final checkpoint and the group hands their partitions on), or when a
//! task fails.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use eddy_engine::checkpoint::{CheckpointConfig, CheckpointStats};
use eddy_engine::distribute::exchanges::Exchange;
use eddy_engine::runtime::{JobConfig, JobHandle, JobReport, JobState, NodeReport};

use crate::{ConnectorsFor, LaunchError, Result};
use eddy_connectors::kafka::group::{ensure_topic, GroupMember};
use eddy_connectors::ConnectorConfig;

mod plan;
mod runner;
mod task_state;

pub use plan::GroupPlan;
use runner::Runner;
use task_state::{TaskLock, TaskStates};

/// How a group job is set up.
#[derive(Debug, Clone)]
pub struct GroupJobConfig {
    /// The consumer group's name.
    pub group: String,
    /// The state directory shared by every process of the group (each
    /// task's state in `task-<p>` under it) and the checkpoint interval;
    /// with `state_bucket`, this process's own working directory.
    pub checkpoints: CheckpointConfig,
    /// The bucket prefix the tasks' state is kept in instead (`task-<p>`
    /// under it, and each task's lease under `leases/task-<p>`), for
    /// processes that share no disk: each task runs in a working copy
    /// under `checkpoints.state_dir`, held by a lease in the bucket.
    pub state_bucket: Option<eddy_connectors::storage::Bucket>,
    /// How long the group waits for a silent process before handing its
    /// partitions to the others.
    pub session_timeout: Duration,
    /// Each task's own budget for its operator state, bytes.
    pub task_memory_limit: Option<u64>,
    /// How every task runs, as any job does: its instances of each keyed
    /// operator (a task resumes its checkpoint at this N whatever N took
    /// it), key groups, dropped state allowed, the budgets every task is
    /// charged to besides its own (a server's), the prefix of the tasks'
    /// names in them (`<label>/task-<p>`), batch rows, chaining, and the
    /// worker pool. Its checkpoints and share are the group's: each task
    /// gets `checkpoints` under `task-<p>`, and the tasks together are one
    /// job to the pool.
    pub task: JobConfig,
}

/// What a group job did in this process.
#[derive(Debug, Default, Clone)]
pub struct GroupReport {
    /// Each task run here, with how it ended (a task stopped by a
    /// rebalance and started again appears once per run).
    pub tasks: Vec<(i32, JobReport)>,
    /// Whether the job ended by finishing every task (wherever it ran),
    /// not by a stop: with no `tasks`, every task was already done when
    /// this process looked.
    pub finished: bool,
}

/// A task running here, and its lock: held from before it starts until
/// it has stopped (final checkpoint, sinks committed), so that no other
/// process starts it meanwhile, whatever the group's coordinator does.
struct RunningTask {
    handle: JobHandle,
    lock: TaskLock,
}

/// What the runner thread and the handles share.
struct Shared {
    /// The pool the tasks run on, and the share of it they run in.
    pool: Arc<eddy_engine::runtime::WorkerPool>,
    share: Arc<eddy_engine::runtime::JobShare>,
    group: String,
    stop: AtomicBool,
    running: Mutex<BTreeMap<i32, RunningTask>>,
    /// The tasks the group assigns to this process now (cleared when the
    /// group takes them back).
    assigned: Mutex<BTreeSet<i32>>,
    reports: Mutex<Vec<(i32, JobReport)>>,
    /// `None` while running; how the group job ended.
    end: Mutex<Option<JobState>>,
    ended: Condvar,
}

impl Shared {
    /// Stops every running task with a final checkpoint and waits for
    /// them (their locks go once they have stopped).
    fn stop_tasks(&self) -> Result<()> {
        let running: Vec<(i32, RunningTask)> = match self.running.lock() {
            Ok(mut t) => std::mem::take(&mut *t).into_iter().collect(),
            Err(_) => return Ok(()),
        };
        for (_, task) in &running {
            task.handle.stop();
        }
        let mut failed = None;
        for (number, task) in running {
            match task.handle.wait() {
                Ok(report) => self.record(number, report),
                Err(e) => failed = failed.or(Some(task_error(number, e))),
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// The group takes this process's tasks back: none is assigned here
    /// until it hands some out again, and every running one stops.
    fn revoke(&self) -> Result<()> {
        if let Ok(mut assigned) = self.assigned.lock() {
            assigned.clear();
        }
        self.stop_tasks()
    }

    fn record(&self, task: i32, report: JobReport) {
        if let Ok(mut reports) = self.reports.lock() {
            reports.push((task, report));
        }
    }

    fn finish(&self, state: JobState) {
        if let Ok(mut end) = self.end.lock() {
            *end = Some(state);
        }
        self.ended.notify_all();
    }
}

fn task_error(task: i32, error: eddy_engine::EngineError) -> LaunchError {
    LaunchError::Task {
        task,
        source: Box::new(error),
    }
}

/// A group job running in this process. Cloneable: any clone can watch,
/// stop or wait for it. See the module docs.
#[derive(Clone)]
pub struct GroupJob {
    shared: Arc<Shared>,
    partitions: usize,
    exchanges: Arc<Vec<Exchange>>,
}

impl std::fmt::Debug for GroupJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupJob")
            .field("group", &self.shared.group)
            .field("partitions", &self.partitions)
            .finish()
    }
}

impl GroupJob {
    /// Creates the planned exchange topics, joins the group and starts
    /// running the tasks it assigns here (on a thread of its own).
    /// Errors: an exchange topic cannot be made (or exists with another
    /// partition count), the group cannot be joined.
    pub fn start(
        plan: GroupPlan,
        connectors: ConnectorConfig,
        task_connectors: ConnectorsFor,
        config: GroupJobConfig,
    ) -> Result<Self> {
        if plan.group != config.group {
            return Err(LaunchError::Group {
                group: config.group.clone(),
                message: format!("it was planned for group '{}'", plan.group),
            });
        }
        if config.checkpoints.ignore_state {
            return Err(LaunchError::Group {
                group: config.group.clone(),
                message: "the state cannot be ignored in a group (other processes share the state directory); remove the directory instead".into(),
            });
        }
        let GroupPlan {
            servers,
            topics,
            partitions,
            task_graph,
            ..
        } = plan;
        for exchange in &task_graph.exchanges {
            tracing::info!(
                "exchange: {} gets its rows by {} through topic '{}'",
                exchange.consumer,
                if exchange.keys.is_empty() {
                    "one task (not keyed)".to_string()
                } else {
                    exchange.keys.join(", ")
                },
                exchange.topic
            );
            ensure_topic(&servers, &exchange.topic, partitions)?;
        }
        // The tasks run here share one share of the pool: together they
        // are one job to the pool's other jobs.
        let pool = match &config.task.pool {
            Some(pool) => pool.clone(),
            None => eddy_engine::runtime::WorkerPool::shared().map_err(|e| LaunchError::Group {
                group: config.group.clone(),
                message: e.to_string(),
            })?,
        };
        let shared = Arc::new(Shared {
            share: pool.job_share(),
            pool,
            group: config.group.clone(),
            stop: AtomicBool::new(false),
            running: Mutex::new(BTreeMap::new()),
            assigned: Mutex::new(BTreeSet::new()),
            reports: Mutex::new(Vec::new()),
            end: Mutex::new(None),
            ended: Condvar::new(),
        });
        let member = {
            let shared = shared.clone();
            GroupMember::join(
                &servers,
                &config.group,
                &topics,
                config.session_timeout,
                move || {
                    if let Err(e) = shared.revoke() {
                        tracing::error!("stopping tasks for a rebalance: {e}");
                    }
                },
            )?
        };
        let states = match &config.state_bucket {
            Some(bucket) => TaskStates::bucket(
                bucket.clone(),
                config.checkpoints.state_dir.clone(),
                config.session_timeout,
            ),
            None => TaskStates::shared(config.checkpoints.state_dir.clone()),
        };
        let runner = Runner {
            shared: shared.clone(),
            graph: Arc::new(task_graph.graph),
            connectors,
            task_connectors,
            config,
            states,
            partitions,
            known_done: Default::default(),
        };
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name(format!("eddy-group-{}", shared.group))
            .spawn(move || {
                let end = match runner.run(&member) {
                    Ok(state) => state,
                    Err(e) => {
                        if let Err(stop) = runner.shared.stop_tasks() {
                            tracing::warn!("stopping the other tasks: {stop}");
                        }
                        JobState::Failed(e.to_string())
                    }
                };
                member.leave();
                thread_shared.finish(end);
            })
            .map_err(|e| LaunchError::Group {
                group: shared.group.clone(),
                message: format!("cannot start its thread: {e}"),
            })?;
        Ok(Self {
            shared,
            partitions,
            exchanges: Arc::new(task_graph.exchanges),
        })
    }

    /// The group's name.
    pub fn group(&self) -> &str {
        &self.shared.group
    }

    /// The job's task count (the topics' partition count).
    pub fn partitions(&self) -> usize {
        self.partitions
    }

    /// The exchanges cut into each task's graph.
    pub fn exchanges(&self) -> &[Exchange] {
        &self.exchanges
    }

    /// The tasks running in this process now.
    pub fn tasks_here(&self) -> Vec<i32> {
        self.shared
            .running
            .lock()
            .map(|r| r.keys().copied().collect())
            .unwrap_or_default()
    }

    /// Where the group job stands in this process: running until every
    /// task has finished (anywhere), it is stopped, or a task failed.
    pub fn state(&self) -> JobState {
        self.shared
            .end
            .lock()
            .ok()
            .and_then(|end| end.clone())
            .unwrap_or(JobState::Running)
    }

    /// Time the tasks run here have spent on the worker pool's threads.
    pub fn pool_time(&self) -> std::time::Duration {
        self.shared.share.pool_time()
    }

    /// The counters of the tasks run here, added up per node: each task's
    /// live counters if it runs now, else those of its last run.
    pub fn metrics(&self) -> Vec<NodeReport> {
        let mut latest: BTreeMap<i32, Vec<NodeReport>> = BTreeMap::new();
        if let Ok(reports) = self.shared.reports.lock() {
            for (task, report) in reports.iter() {
                latest.insert(*task, report.nodes.clone());
            }
        }
        if let Ok(running) = self.shared.running.lock() {
            for (number, task) in running.iter() {
                latest.insert(*number, task.handle.metrics());
            }
        }
        let mut total: Vec<NodeReport> = Vec::new();
        for nodes in latest.into_values() {
            if total.is_empty() {
                total = nodes;
                continue;
            }
            for (sum, node) in total.iter_mut().zip(&nodes) {
                sum.metrics.absorb(&node.metrics);
            }
        }
        total
    }

    /// The checkpoint figures of each task running here.
    pub fn task_checkpoints(&self) -> Vec<(i32, CheckpointStats)> {
        self.shared
            .running
            .lock()
            .map(|r| {
                r.iter()
                    .map(|(&n, t)| (n, t.handle.checkpoints()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Stops the tasks running here (each with a final checkpoint) and
    /// leaves the group, whose other processes take the tasks over.
    /// Returns at once; [`GroupJob::wait`] tells when it is done.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }

    /// Waits until the group job has ended here; what its tasks did, or
    /// why it failed.
    pub fn wait(&self) -> Result<GroupReport> {
        let guard = self.shared.end.lock().map_err(|_| self.lost())?;
        let guard = self
            .shared
            .ended
            .wait_while(guard, |end| end.is_none())
            .map_err(|_| self.lost())?;
        let end = guard.clone();
        drop(guard);
        if let Some(JobState::Failed(message)) = end {
            return Err(LaunchError::Group {
                group: self.shared.group.clone(),
                message,
            });
        }
        let tasks = self.shared.reports.lock().map_err(|_| self.lost())?.clone();
        Ok(GroupReport {
            tasks,
            finished: end == Some(JobState::Finished),
        })
    }

    /// Like [`GroupJob::wait`], but gives up after `timeout` (`None`: still running).
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<GroupReport>> {
        let guard = self.shared.end.lock().ok()?;
        let (guard, _) = self
            .shared
            .ended
            .wait_timeout_while(guard, timeout, |end| end.is_none())
            .ok()?;
        let ended = guard.is_some();
        drop(guard);
        ended.then(|| self.wait())
    }

    fn lost(&self) -> LaunchError {
        LaunchError::Group {
            group: self.shared.group.clone(),
            message: "its state was lost (a thread panicked)".into(),
        }
    }
}
