//! Starting a compiled job: the one launcher `eddy run` and `eddy serve`
//! use, whether the job runs whole on this machine or as the tasks a
//! Kafka consumer group gives this process.
//!
//! In: a job's graph as planned (`eddy_sql` compiles it), its connector
//! settings, how a connector factory is made for it ([`ConnectorsFor`]),
//! and a [`LaunchConfig`]: the engine's run configuration
//! ([`JobConfig`], its defaults in one place) plus, for a group job, the
//! group's own settings ([`GroupSettings`]). Out: a [`RunningJob`] to
//! watch, stop and wait for.
//!
//! ```text
//!  LaunchPlan::new(graph, connectors, group)
//!     ├─ Single(plan) ──── start_single ── eddy_engine::runtime::start_job ──> RunningJob::Single
//!     └─ Group(GroupPlan) ─ group::GroupJob::start ── a start_job per task ──> RunningJob::Group
//! ```
//!
//! The distribution pass runs once per launch, inside the engine, which
//! lays the plan out at the job's (or its checkpoint's) parallelism;
//! [`LaunchPlan::physical`] lays it out the same way for display only
//! (`eddy explain`, the console's graph).
//!
//! ```
//! use std::sync::Arc;
//! use eddy_connectors::ConnectorConfig;
//! use eddy_engine::graph::JobGraph;
//! use eddy_engine::runtime::JobState;
//! use eddy_launch::{launch, plain_connectors, LaunchConfig, LaunchPlan};
//!
//! let plan = LaunchPlan::new(JobGraph::default(), &ConnectorConfig::default(), None).unwrap();
//! assert_eq!(plan.physical(2).parallelism(), 2);
//! let running = launch(plan, LaunchConfig::new(ConnectorConfig::default(), plain_connectors())).unwrap();
//! running.wait().unwrap();
//! assert_eq!(running.state(), JobState::Finished);
//! ```

pub mod group;

mod error;
mod running;

use std::sync::Arc;
use std::time::Duration;

use eddy_connectors::storage::Bucket;
use eddy_connectors::{ConnectorConfig, Connectors};
use eddy_engine::distribute::physical::PhysicalGraph;
use eddy_engine::graph::{ConnectorFactory, JobGraph};
use eddy_engine::runtime::{start_job, JobConfig, JobHandle};

pub use error::{LaunchError, Result};
use group::{GroupJob, GroupJobConfig, GroupPlan};
pub use running::{GroupStanding, RunReport, RunningJob};

/// Makes the connector factory of a job, or of one task of a group job,
/// from its connector settings (a task's: the job's, with its partition
/// and number filled in) and the graph it runs.
pub type ConnectorsFor =
    Arc<dyn Fn(ConnectorConfig, &JobGraph) -> Arc<dyn ConnectorFactory> + Send + Sync>;

/// eddy's connectors as configured, their NDJSON decode threads shared
/// by the graph's file and stdin sources.
pub fn plain_connectors() -> ConnectorsFor {
    Arc::new(|config, graph| {
        Arc::new(Connectors::new(config).sharing_decode_threads(graph)) as Arc<dyn ConnectorFactory>
    })
}

/// What a job starts from: its graph as planned, or a group job's plan
/// (the topics, the task count, each task's graph with its exchanges).
#[derive(Debug, Clone)]
pub enum LaunchPlan {
    /// The whole job, run on this machine.
    Single(Arc<JobGraph>),
    /// A job scaled out over a Kafka consumer group.
    Group(GroupPlan),
}

impl LaunchPlan {
    /// Plans `graph` to run on this machine, or as a group job of `group`
    /// (which asks the brokers for the topics' partitions). Errors: a
    /// group job's, see [`GroupPlan::new`].
    pub fn new(graph: JobGraph, connectors: &ConnectorConfig, group: Option<&str>) -> Result<Self> {
        Ok(match group {
            None => Self::Single(Arc::new(graph)),
            Some(group) => Self::Group(GroupPlan::new(&graph, connectors, group)?),
        })
    }

    /// The graph as it runs at `parallelism` (instances, a group's
    /// exchanges), for display: the run lays it out itself, at its
    /// checkpoint's parallelism where it resumes one.
    pub fn physical(&self, parallelism: usize) -> PhysicalGraph {
        let planned = match self {
            Self::Single(graph) => graph.clone(),
            Self::Group(plan) => Arc::new(plan.task_graph().clone()),
        };
        PhysicalGraph::for_parallelism(planned, parallelism)
    }
}

/// A group job's own settings beside the run configuration every task
/// shares.
#[derive(Debug, Clone)]
pub struct GroupSettings {
    /// The bucket prefix the tasks' state is kept in (each task run in a
    /// working copy under the job's state directory, held by a lease in
    /// the bucket), for processes that share no disk; `None`: the state
    /// directory is shared by every process of the group.
    pub state_bucket: Option<Bucket>,
    /// How long the group waits for a silent process before handing its
    /// partitions to the others.
    pub session_timeout: Duration,
    /// Each task's own budget for its operator state, bytes.
    pub task_memory_limit: Option<u64>,
}

impl Default for GroupSettings {
    fn default() -> Self {
        Self {
            state_bucket: None,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            task_memory_limit: None,
        }
    }
}

/// A group's session timeout unless one is given.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(6);

/// How a job is launched.
#[derive(Clone)]
pub struct LaunchConfig {
    /// The job's connector settings.
    pub connectors: ConnectorConfig,
    /// How its connector factory is made.
    pub connectors_for: ConnectorsFor,
    /// How it runs (a group job: how every task runs; its checkpoints
    /// are the group's, each task's under `task-<p>`, and needed).
    pub job: JobConfig,
    /// A group job's own settings (ignored for a job run whole).
    pub group: GroupSettings,
}

impl LaunchConfig {
    /// A launch with the engine's and the group's defaults.
    pub fn new(connectors: ConnectorConfig, connectors_for: ConnectorsFor) -> Self {
        Self {
            connectors,
            connectors_for,
            job: JobConfig::default(),
            group: GroupSettings::default(),
        }
    }
}

impl std::fmt::Debug for LaunchConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchConfig")
            .field("connectors", &self.connectors)
            .field("job", &self.job)
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

/// Starts `plan` as `config` says; see the module docs. Errors: the
/// engine's refusal of a job run whole; a group job without checkpoints
/// or one the group cannot run (see [`GroupJob::start`]).
pub fn launch(plan: LaunchPlan, config: LaunchConfig) -> Result<RunningJob> {
    let LaunchConfig {
        connectors,
        connectors_for,
        mut job,
        group,
    } = config;
    match plan {
        LaunchPlan::Single(graph) => Ok(RunningJob::Single(start_single(
            graph,
            connectors,
            &connectors_for,
            &job,
        )?)),
        LaunchPlan::Group(plan) => {
            let Some(checkpoints) = job.checkpoints.take() else {
                return Err(LaunchError::Group {
                    group: plan.group().to_string(),
                    message: "a group job needs a state directory (--state-dir) its processes share, or a bucket".into(),
                });
            };
            let config = GroupJobConfig {
                group: plan.group().to_string(),
                checkpoints,
                state_bucket: group.state_bucket,
                session_timeout: group.session_timeout,
                task_memory_limit: group.task_memory_limit,
                task: job,
            };
            Ok(RunningJob::Group(GroupJob::start(
                plan,
                connectors,
                connectors_for,
                config,
            )?))
        }
    }
}

/// Starts `graph` (as planned) whole on this machine, its connectors made
/// by `connectors_for`.
pub fn start_single(
    graph: Arc<JobGraph>,
    connectors: ConnectorConfig,
    connectors_for: &ConnectorsFor,
    job: &JobConfig,
) -> Result<JobHandle> {
    let factory = connectors_for(connectors, &graph);
    Ok(start_job(graph, factory, job)?)
}
