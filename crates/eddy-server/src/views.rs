//! What the API returns and accepts: plain serializable views of jobs,
//! their operator graphs and metrics, each with an OpenAPI schema.

use std::collections::BTreeMap;

use eddy_engine::graph::{JobGraph, NodeKind};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ErrorBody;

/// `POST /api/v1/jobs`: a job to run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// A name for people (default: `job-<id>`).
    #[serde(default)]
    pub name: Option<String>,
    /// The job's SQL: sources, sinks, views and queries, as in a `.sql` file.
    pub sql: String,
    /// `${NAME}` parameter values.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Instances of each keyed operator (1 to 64; default: the server's
    /// cores), as `eddy run --parallelism`.
    #[serde(default)]
    pub parallelism: Option<usize>,
    /// A budget for the job's operator state (`512MiB`, `4GB`): past it
    /// the job fails, naming its operator holding most (the server's own
    /// `--memory-limit` applies besides).
    #[serde(default)]
    pub memory_limit: Option<String>,
    /// Scale-out: run the job as a member of this Kafka consumer group
    /// (letters, digits, `.`, `_`, `-`), as `eddy run --group`. The group
    /// gives this server some of the job's tasks (one per partition
    /// number of its Kafka topics), other servers (or `eddy run --group`
    /// processes) the rest; the tasks' state lives in the server's group
    /// state directory, which they must share. The job's `memory_limit`
    /// applies to each task.
    #[serde(default)]
    pub group: Option<String>,
    /// With `group`: how long a silent member keeps its tasks before the
    /// group hands them to the others, ms (default 6000).
    #[serde(default)]
    pub session_timeout_ms: Option<u64>,
    /// Start from this savepoint (its `id`, as `GET /api/v1/savepoints`
    /// lists them) rather than afresh: the same query, at any
    /// `parallelism` up to the savepoint's `key_groups`.
    #[serde(default)]
    pub from_savepoint: Option<String>,
}

/// A job's new SQL (`PUT /api/v1/jobs/{id}`): the job stops with a final
/// checkpoint and starts again on it with this SQL, each operator that
/// still computes the same thing keeping its state.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RedeployRequest {
    /// The new SQL (the whole job, as at submission).
    pub sql: String,
    /// New `${NAME}` parameters (default: the job's).
    #[serde(default)]
    pub params: Option<BTreeMap<String, String>>,
    /// New instances of each keyed operator (default: the job's); any N
    /// up to the job's key groups.
    #[serde(default)]
    pub parallelism: Option<usize>,
    /// Redeploy even when some state has no place in the new SQL (a
    /// removed query, a changed window), dropping it; refused otherwise.
    #[serde(default)]
    pub allow_dropped_state: bool,
}

/// A redeployed job and what became of its operators' state.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RedeployView {
    /// The job as it now runs.
    pub job: JobView,
    /// Stateful nodes that kept their state.
    pub kept: Vec<String>,
    /// Of the kept, those that kept it by name (a uid, a view or their
    /// table) though what feeds them changed.
    pub kept_by_name: Vec<String>,
    /// Stateful nodes that started afresh (new or changed).
    pub started: Vec<String>,
    /// Nodes whose state was dropped (with `allow_dropped_state`).
    pub dropped: Vec<String>,
}

/// What a redeploy would do (`POST /api/v1/jobs/{id}/redeploy/preview`),
/// checked against the job's newest checkpoint; nothing is stopped.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct RedeployPlan {
    /// The checkpoint the new SQL was checked against; `null` before the
    /// job's first (every stateful node would start afresh) and when
    /// refused (the reason names it).
    pub checkpoint: Option<u64>,
    /// Stateful nodes that would keep their state.
    pub kept: Vec<String>,
    /// Of the kept, those that would keep it by name (a uid, a view or
    /// their table) though what feeds them changed.
    pub kept_by_name: Vec<String>,
    /// Stateful nodes that would start afresh (new or changed).
    pub started: Vec<String>,
    /// Nodes whose state would be dropped (with `allow_dropped_state`).
    pub dropped: Vec<String>,
    /// Why the redeploy would be refused (state with no place in the new
    /// SQL, without `allow_dropped_state`); `null` when it would go ahead.
    pub refused: Option<String>,
}

/// How to stop a job (`POST /api/v1/jobs/{id}/stop`; an empty body stops
/// without a savepoint).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {
    /// Also take a savepoint of the job's final checkpoint, to start a
    /// job from later (`from_savepoint`).
    #[serde(default)]
    pub savepoint: bool,
}

/// A savepoint the server keeps: a stopped job's state, to start a job
/// from.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SavepointView {
    /// Its id (`from_savepoint` names it).
    pub id: String,
    /// The job it was taken of.
    pub job_id: String,
    /// That job's name.
    pub job: Option<String>,
    /// The checkpoint it copies.
    pub checkpoint: u64,
    /// How the job stood then: `stopped`, `running` or `finished`.
    pub kind: String,
    /// When it was taken, epoch ms.
    pub taken_ms: u64,
    /// Instances of each keyed operator it was taken with.
    pub parallelism: usize,
    /// The most instances a job started from it may run.
    pub key_groups: u32,
    /// Bytes of state.
    pub bytes: u64,
}

/// A group job's standing on this server.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GroupView {
    /// The consumer group.
    pub name: String,
    /// The job's tasks (the partition count of its topics); 0 while not
    /// running here.
    pub tasks: usize,
    /// The tasks this server runs now.
    pub tasks_here: Vec<i32>,
    /// The exchange topics its tasks move rows through.
    pub exchanges: Vec<String>,
}

impl From<eddy_launch::GroupStanding> for GroupView {
    fn from(standing: eddy_launch::GroupStanding) -> Self {
        Self {
            name: standing.name,
            tasks: standing.tasks,
            tasks_here: standing.tasks_here,
            exchanges: standing.exchanges,
        }
    }
}

/// `POST /api/v1/validate`: SQL to check without running it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct ValidateRequest {
    /// The SQL.
    pub sql: String,
    /// `${NAME}` parameter values.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

/// The result of a validation: the operator graph, or the errors.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ValidateResponse {
    /// Whether the SQL compiles (and its paths are allowed).
    pub valid: bool,
    /// The operator graph when valid.
    pub graph: Vec<GraphNode>,
    /// The errors, with positions for SQL errors.
    pub errors: Vec<ErrorBody>,
}

/// One input of a node.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GraphEdge {
    /// The producing node's id.
    pub from: usize,
    /// `main`, or `late` for a source's late rows.
    pub port: String,
    /// Whether the edge is inside a task: the producer hands its output to
    /// this node by a call, with no channel between them (`eddy explain`
    /// lists the tasks).
    #[serde(default)]
    pub chained: bool,
}

/// A node of a job's operator graph.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GraphNode {
    /// Id (position in the graph).
    pub id: usize,
    /// Table name for sources and sinks, `kind#id` for operators.
    pub name: String,
    /// `source`, `sink`, or the operator kind (`window_aggregate`, ...).
    pub kind: String,
    /// What it does, as `eddy explain` prints it.
    pub description: String,
    /// Its inputs.
    pub inputs: Vec<GraphEdge>,
    /// Whether its rows change: an updating node emits a changelog (rows
    /// of kind `+I`, `-U`, `+U`, `-D`); otherwise it only appends.
    #[serde(default)]
    pub updating: bool,
    /// An updating node's upsert key (columns no two current rows share),
    /// when known.
    #[serde(default)]
    pub upsert_key: Vec<String>,
    /// Whether the operator keeps state across rows (it declares a keyed
    /// or single distribution; calcs, unions and key splits do not).
    #[serde(default)]
    pub stateful: bool,
    /// The task (thread) the node runs in: a chain of nodes that pass
    /// batches by call; nodes of one task share the number.
    #[serde(default)]
    pub task: usize,
}

/// The graph of a compiled job, its nodes in the tasks they run as
/// (`chaining`: whether the server chains operators).
pub fn graph_view(graph: &JobGraph, chaining: bool) -> Vec<GraphNode> {
    let chains = if chaining {
        eddy_engine::chains::Chains::of(graph)
    } else {
        eddy_engine::chains::Chains::unchained(graph)
    };
    graph
        .nodes
        .iter()
        .enumerate()
        .map(|(id, node)| GraphNode {
            id,
            name: node.name.clone(),
            kind: match &node.kind {
                NodeKind::Source { .. } => "source".into(),
                NodeKind::Sink { .. } => "sink".into(),
                NodeKind::Operator(plan) => plan.kind().into(),
            },
            description: graph.describe_node(id),
            inputs: node
                .inputs
                .iter()
                .map(|e| GraphEdge {
                    chained: chains.next(e.from) == Some(id),
                    from: e.from,
                    port: if e.port == 0 {
                        "main".into()
                    } else {
                        "late".into()
                    },
                })
                .collect(),
            updating: eddy_engine::changelog::is_updating(&node.schema),
            upsert_key: eddy_engine::changelog::upsert_key(&node.schema),
            stateful: matches!(&node.kind, NodeKind::Operator(plan)
                if plan.distribution() != eddy_engine::operator::Distribution::Any),
            task: chains.task_of(id),
        })
        .collect()
}

/// Live counters of one node.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodeMetrics {
    /// Node id.
    pub id: usize,
    /// Node name.
    pub name: String,
    /// Node kind.
    pub kind: String,
    /// Rows received (sources: rows read).
    pub rows_in: u64,
    /// Rows emitted.
    pub rows_out: u64,
    /// Late rows (sources: behind the watermark less the allowed lateness;
    /// operators: dropped because their state for them was final).
    pub late_rows: u64,
    /// Malformed input rows (sources).
    pub bad_rows: u64,
    /// Rows or groups held in state.
    pub state_rows: u64,
    /// The most rows or groups held in state at once.
    pub peak_state_rows: u64,
    /// Approximate bytes held in state in memory.
    pub state_bytes: u64,
    /// Bytes of state spilled to disk now (past the memory budget).
    #[serde(default)]
    pub spill_disk_bytes: u64,
    /// Bytes of state written to disk so far.
    #[serde(default)]
    pub spill_written_bytes: u64,
    /// Bytes of spilled state read back so far.
    #[serde(default)]
    pub spill_read_bytes: u64,
    /// The node's watermark, epoch ms (absent before the first one and after the end).
    pub watermark: Option<i64>,
    /// Wall-clock time minus the watermark, ms.
    pub watermark_lag_ms: Option<i64>,
    /// Rows received per second over the last sampling interval.
    pub events_per_second: f64,
    /// The connector's own figures, by name: a `postgres-cdc` source's
    /// `read_lsn` and `slot_confirmed_lsn` (LSNs as numbers), `lag_bytes`
    /// (WAL not yet read), `lag_ms` (how old the last change read is while
    /// more waits), `snapshot_done` and `snapshot_chunks`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub connector: std::collections::BTreeMap<String, i64>,
}

/// What one of a job's Python functions did in its current run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PythonFunctionView {
    /// The SQL function.
    pub name: String,
    /// Requests sent to its workers (a batch each).
    pub calls: u64,
    /// Rows those requests held.
    pub rows: u64,
    /// Rows whose call raised; their value is NULL (`on_error = 'null'`).
    pub raised: u64,
    /// The first such row's Python message.
    pub first_error: Option<String>,
}

/// Checkpoint figures of a job.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct CheckpointView {
    /// Checkpoints completed by the current run.
    pub completed: u64,
    /// The latest completed checkpoint.
    pub last_id: Option<u64>,
    /// Its size in bytes.
    pub last_bytes: u64,
    /// Bytes written by every checkpoint of the current run (keyed tables
    /// are written as the keys that changed, so this grows with the
    /// traffic, not with the state).
    pub total_bytes: u64,
    /// Its duration, trigger to sinks committed.
    pub last_duration_ms: u64,
    /// The checkpoint the current run resumed from.
    pub restored_from: Option<u64>,
}

/// One sample of a source's health.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SourceSample {
    /// The source table.
    pub name: String,
    /// Rows read so far.
    pub rows_in: u64,
    /// Rows per second.
    pub events_per_second: f64,
    /// Wall-clock time minus the source's watermark, ms.
    pub watermark_lag_ms: Option<i64>,
    /// Late rows so far.
    pub late_rows: u64,
    /// Bad rows so far.
    pub bad_rows: u64,
}

/// A point of a job's history (one per second while it runs, the last 600 kept).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Sample {
    /// Wall-clock time, epoch ms.
    pub at_ms: i64,
    /// Rows read per second, all sources.
    pub events_per_second: f64,
    /// Per source.
    pub sources: Vec<SourceSample>,
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Its threads are running (or it will resume when the server starts).
    Running,
    /// Every input ended and every output was written.
    Finished,
    /// A node failed; the job's `error` says which and why.
    Failed,
    /// Stopped gracefully with a final checkpoint.
    Stopped,
    /// Cancelled: ended at once, committing nothing more.
    Cancelled,
}

impl JobStatus {
    /// The lower-case name, as the API writes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
            Self::Cancelled => "cancelled",
        }
    }
}

impl From<&eddy_engine::runtime::JobState> for JobStatus {
    fn from(state: &eddy_engine::runtime::JobState) -> Self {
        use eddy_engine::runtime::JobState;
        match state {
            JobState::Running => Self::Running,
            JobState::Finished => Self::Finished,
            JobState::Failed(_) => Self::Failed,
            JobState::Stopped => Self::Stopped,
            JobState::Cancelled => Self::Cancelled,
        }
    }
}

/// A job in the list.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobSummary {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Where it is in its life.
    pub state: JobStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// Submission time (RFC 3339).
    pub created_at: String,
    /// Time its current run started.
    pub started_at: Option<String>,
    /// Time it ended.
    pub ended_at: Option<String>,
    /// Rows read per second, all sources.
    pub events_per_second: f64,
    /// The largest watermark lag of its sources, ms.
    pub watermark_lag_ms: Option<i64>,
    /// How far event time has come: the least watermark of its sources
    /// (RFC 3339). Where that is long past (a replay, a generated stream),
    /// the console shows it rather than a lag of years.
    pub event_time: Option<String>,
    /// Late rows of all sources.
    pub late_rows: u64,
    /// Bad rows of all sources.
    pub bad_rows: u64,
    /// Time its tasks have spent on the server's worker pool in this run,
    /// milliseconds: its use of the pool every job shares (its sources'
    /// reads, on threads of their own, not included).
    pub pool_ms: u64,
}

/// A job in full.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    /// Summary fields.
    #[serde(flatten)]
    pub summary: JobSummary,
    /// Its SQL.
    pub sql: String,
    /// Its parameters.
    pub params: BTreeMap<String, String>,
    /// Instances of each keyed operator.
    pub parallelism: usize,
    /// For a group job: its group and the tasks run here.
    pub group: Option<GroupView>,
    /// Its operator graph.
    pub graph: Vec<GraphNode>,
    /// Live counters per node.
    pub metrics: Vec<NodeMetrics>,
    /// Checkpoint figures.
    pub checkpoints: CheckpointView,
    /// Sink names (for the tail route).
    pub sinks: Vec<String>,
    /// Samples over time.
    pub history: Vec<Sample>,
    /// The savepoint it started from, if any.
    pub from_savepoint: Option<String>,
    /// Savepoints taken of it, oldest first.
    pub savepoints: Vec<SavepointView>,
    /// Its Python functions (none unless it declares some).
    pub python_functions: Vec<PythonFunctionView>,
    /// What its connectors did beyond rows, a line each: `delta sink T: 12
    /// commits, 30 files, 4.2 MiB added to DIR; 8 files rewritten; 2
    /// compactions; 6 files vacuumed`.
    pub connectors: Vec<String>,
}
