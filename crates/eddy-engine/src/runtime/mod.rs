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

use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use tokio::sync::mpsc::Receiver;

pub use handle::{JobHandle, JobReport, JobState, NodeReport};
pub use pool::WorkerPool;
pub use share::{Fairness, JobShare};

use crate::chains::Chains;
use crate::checkpoint::coordinator::{commit_sinks, Coordinator, Outcome};
use crate::checkpoint::store::StateDir;
use crate::checkpoint::{
    CheckpointConfig, CheckpointKind, CheckpointStats, NodeCheckpoint, DEFAULT_INTERVAL,
};
use crate::error::{EngineError, Result};
use crate::graph::{check_topological, ConnectorFactory, JobGraph, NodeKind};
use crate::key_groups::KeyGroups;
use crate::message::Message;
use crate::metrics::NodeMetrics;
use crate::parallel::Parallelism;
use crate::sink::{SinkMode, SinkWriter};
use crate::source::SourceRunner;
use alignment::SourceAlignment;
use chain_link::Link;
use control::{Control, NodeContext};
use handle::JobInner;
use inputs::{InputClock, Inputs};
use operator_task::{OperatorStage, OperatorWork};
use outputs::{Outputs, Target};
use sink_task::SinkStage;
use source_task::{SourceMeta, SourceWork};

/// Messages buffered per edge before the producer blocks.
const EDGE_CAPACITY: usize = 4;

/// How a job runs.
#[derive(Debug, Clone, Default)]
pub struct JobConfig {
    /// Checkpoints (`--state-dir`); `None` runs without them.
    pub checkpoints: Option<CheckpointConfig>,
    /// Instances of each keyed operator (`--parallelism`; by default one
    /// per core, or the N of the checkpoint the job resumes from). The
    /// graph run is [`crate::distribute::instances::expand`]ed to it.
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

enum Work {
    Source(SourceWork),
    Operator(OperatorWork),
    Sink(Box<dyn SinkWriter>, Inputs),
    /// Finished in the run the job resumes from.
    Done,
}

fn node_kind(kind: &NodeKind) -> String {
    match kind {
        NodeKind::Source { .. } => "source".to_string(),
        NodeKind::Operator(plan) => plan.kind().to_string(),
        NodeKind::Sink { .. } => "sink".to_string(),
    }
}

fn restored_clock(node: &str, inputs: usize, saved: Option<&NodeCheckpoint>) -> Result<InputClock> {
    match saved.and_then(|s| s.runtime.clock.as_ref()) {
        None => Ok(InputClock::new(inputs)),
        Some(state) => InputClock::restored(state, inputs).ok_or_else(|| {
            EngineError::State(format!(
                "{node}: the checkpointed inputs do not fit the node"
            ))
        }),
    }
}

/// Opens every connector, restores state when resuming, and starts the job.
/// Configuration errors (a missing input file, an `--input` naming no
/// source, a state directory of another query) are returned before any
/// task starts.
///
/// A graph of one source and one sink, with connectors that read and
/// write memory (eddy's own are `eddy_connectors::Connectors`; the SQL
/// front end, `eddy_sql::compile`, builds graphs):
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use datafusion::arrow::array::Int64Array;
/// use datafusion::arrow::datatypes::{DataType, Field, Schema};
/// use datafusion::arrow::record_batch::RecordBatch;
/// use eddy_engine::graph::{ConnectorFactory, ConnectorSpec, Edge, JobGraph, Node, NodeKind};
/// use eddy_engine::runtime::{start_job, JobConfig, JobState};
/// use eddy_engine::sink::{SinkMode, SinkWriter};
/// use eddy_engine::source::{BadRowPolicy, SourceColumn, SourceContext, SourceLayout, SourceReader};
///
/// struct Rows(Option<RecordBatch>);
/// impl SourceReader for Rows {
///     fn next_batch(&mut self, _: &mut SourceContext) -> eddy_engine::Result<Option<RecordBatch>> {
///         Ok(self.0.take())
///     }
/// }
/// struct Keep(Arc<Mutex<usize>>);
/// impl SinkWriter for Keep {
///     fn write(&mut self, batch: &RecordBatch) -> eddy_engine::Result<()> {
///         *self.0.lock().unwrap() += batch.num_rows();
///         Ok(())
///     }
///     fn finish(&mut self) -> eddy_engine::Result<()> { Ok(()) }
/// }
/// struct Memory { batch: RecordBatch, written: Arc<Mutex<usize>> }
/// impl ConnectorFactory for Memory {
///     fn open_source(&self, _: &ConnectorSpec, _: Option<&serde_json::Value>)
///         -> eddy_engine::Result<Box<dyn SourceReader>> {
///         Ok(Box::new(Rows(Some(self.batch.clone()))))
///     }
///     fn open_sink(&self, _: &ConnectorSpec, _: SinkMode<'_>)
///         -> eddy_engine::Result<Box<dyn SinkWriter>> {
///         Ok(Box::new(Keep(self.written.clone())))
///     }
/// }
///
/// let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
/// let spec = |table: &str| ConnectorSpec {
///     table: table.into(),
///     connector: "memory".into(),
///     options: Default::default(),
///     schema: schema.clone(),
///     declared_at: None,
///     primary_key: Vec::new(),
///     filter: None,
///     unread_columns: Vec::new(),
/// };
/// let layout = SourceLayout {
///     physical_schema: schema.clone(),
///     output_schema: schema.clone(),
///     columns: vec![SourceColumn::Physical(0)],
///     event_time: None,
///     idle_timeout: None,
///     bad_rows: BadRowPolicy::Fail,
///     change_feed_key: None,
/// };
/// let mut graph = JobGraph::default();
/// let source = graph.add(Node {
///     name: "numbers".into(),
///     kind: NodeKind::Source { spec: spec("numbers"), layout },
///     inputs: vec![],
///     schema: schema.clone(),
///     uid: None,
/// });
/// graph.add(Node {
///     name: "out".into(),
///     kind: NodeKind::Sink { spec: spec("out") },
///     inputs: vec![Edge::new(source, 0)],
///     schema: schema.clone(),
///     uid: None,
/// });
///
/// let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![1, 2, 3]))]).unwrap();
/// let written = Arc::new(Mutex::new(0));
/// let connectors = Arc::new(Memory { batch, written: written.clone() });
/// let report = start_job(Arc::new(graph), connectors, &JobConfig::default()).unwrap().wait().unwrap();
/// assert_eq!(report.state, JobState::Finished);
/// assert_eq!(*written.lock().unwrap(), 3);
/// ```
pub fn start_job(
    graph: Arc<JobGraph>,
    connectors: Arc<dyn ConnectorFactory>,
    config: &JobConfig,
) -> Result<JobHandle> {
    let store = match &config.checkpoints {
        Some(c) => {
            let store = match &c.replica {
                Some(replica) => {
                    StateDir::open_replicated(&c.state_dir, replica.clone(), c.ignore_state)?
                }
                None => StateDir::open(&c.state_dir)?,
            };
            if c.ignore_state {
                store.clear()?;
            }
            Some(store)
        }
        None => None,
    };
    let source = resume::source(config.from_savepoint.as_deref(), store.as_ref())?;
    let checkpointed = source.layout;
    let parallelism = config
        .parallelism
        .resolve(checkpointed.map(|c| c.parallelism))?;
    // The key groups are the checkpoint's (keys must stay in their
    // groups); a fresh job's are the configured ones or the default for N.
    let key_groups = match (checkpointed, config.key_groups) {
        (Some(c), _) => c.key_groups,
        (None, Some(groups)) => groups,
        (None, None) => KeyGroups::for_parallelism(parallelism),
    };
    key_groups.check_parallelism(parallelism)?;
    // A graph as planned is expanded here; one expanded already (to show
    // its instances before it runs) is expanded again from its plan when
    // the N or key groups it was shown with are not the job's.
    let graph = if graph.expansion().is_some()
        && graph.parallelism() == parallelism
        && graph.key_groups() == key_groups
    {
        graph
    } else {
        Arc::new(crate::distribute::instances::expand_with(
            &graph,
            parallelism,
            key_groups,
        ))
    };
    check_topological(&graph)?;
    connectors.check(&graph)?;
    let pool = match &config.pool {
        Some(pool) => pool.clone(),
        None => WorkerPool::shared()?,
    };
    let share = config.share.clone().unwrap_or_else(|| pool.job_share());
    let n = graph.nodes.len();
    let rescaled_from = checkpointed
        .map(|c| c.parallelism)
        .filter(|&taken| taken != parallelism);
    tracing::info!(
        "running {parallelism} instance(s) of each keyed operator over {key_groups} key groups{}",
        match (checkpointed, rescaled_from) {
            (_, Some(taken)) => format!(" (the checkpoint's state spread from {taken})"),
            (Some(_), None) => " (as the checkpoint)".to_string(),
            (None, _) => String::new(),
        }
    );

    let restored = resume::restore(
        &source,
        store.as_ref(),
        &graph,
        key_groups,
        rescaled_from,
        config.allow_dropped_state,
    )?;
    if let Some(restored) = &restored {
        commit_sinks(
            &graph,
            connectors.as_ref(),
            restored.nodes.iter().map(Option::as_ref),
        )?;
        if let (Some(store), CheckpointKind::Finished, None) =
            (&store, restored.kind, &source.savepoint)
        {
            store.mark_committed(restored.id)?;
        }
        tracing::info!(
            "resuming from checkpoint {} ({:?})",
            restored.id,
            restored.kind
        );
    }
    let restored_id = restored.as_ref().map(|r| r.id).unwrap_or(0);
    let already_finished = restored
        .as_ref()
        .filter(|r| r.kind == CheckpointKind::Finished)
        .map(|r| r.id);
    let interval = config
        .checkpoints
        .as_ref()
        .map(|c| c.interval)
        .unwrap_or(DEFAULT_INTERVAL);

    let incremental = config.checkpoints.as_ref().is_some_and(|c| c.incremental);
    let control = Control::new(store.is_some(), incremental, restored_id);
    let metrics: Vec<Arc<NodeMetrics>> = graph
        .nodes
        .iter()
        .map(|node| NodeMetrics::new_shared(node.inputs.len()))
        .collect();
    let mut saved: Vec<Option<NodeCheckpoint>> = match restored {
        Some(restored) => restored.nodes,
        None => vec![None; n],
    };
    for (m, s) in metrics.iter().zip(&saved) {
        if let Some(s) = s {
            m.restore(&s.runtime.metrics);
        }
    }
    let stats = Arc::new(Mutex::new(CheckpointStats {
        restored_from: (restored_id > 0).then_some(restored_id),
        ..Default::default()
    }));
    let names: Vec<(String, String)> = graph
        .nodes
        .iter()
        .map(|node| (node.name.clone(), node_kind(&node.kind)))
        .collect();
    let handle = JobHandle {
        inner: Arc::new(JobInner {
            names,
            metrics: metrics.clone(),
            control: control.clone(),
            stats: stats.clone(),
            started: Instant::now(),
            already_finished,
            parallelism,
            state: Mutex::new((JobState::Running, None)),
            changed: Condvar::new(),
            connectors: connectors.clone(),
            on_end: Mutex::new(Some(Vec::new())),
            share: share.clone(),
        }),
    };
    if already_finished.is_some() {
        handle.set_state(JobState::Finished);
        return Ok(handle);
    }

    // Nodes that finished in the run the job resumes from: they do not run,
    // so a node reading one (a node new to a changed query) starts with
    // that input ended.
    let done: Vec<bool> = saved
        .iter()
        .map(|s| s.as_ref().is_some_and(|s| s.runtime.finished))
        .collect();
    let chains = if config.disable_chaining {
        Chains::unchained(&graph)
    } else {
        Chains::with(&graph, |id| !done[id])
    };
    tracing::info!(
        "{n} nodes run as {} task(s){}",
        chains.tasks().len(),
        if config.disable_chaining {
            " (chaining off)"
        } else {
            ""
        }
    );

    // One channel per edge between tasks; a chained node is called instead.
    let mut receivers: Vec<Vec<Receiver<Message>>> = (0..n).map(|_| Vec::new()).collect();
    let mut ports: Vec<Vec<Vec<Target>>> = (0..n)
        .map(|id| (0..graph.port_count(id)).map(|_| Vec::new()).collect())
        .collect();
    for (id, node) in graph.nodes.iter().enumerate() {
        for edge in &node.inputs {
            if chains.next(edge.from) == Some(id) {
                continue;
            }
            let (tx, rx) = tokio::sync::mpsc::channel(EDGE_CAPACITY);
            receivers[id].push(rx);
            let port = ports
                .get_mut(edge.from)
                .and_then(|p| p.get_mut(edge.port))
                .ok_or_else(|| {
                    EngineError::Graph(format!("node #{id} reads a port that does not exist"))
                })?;
            port.push(Target::channel(tx));
        }
    }

    // Open and restore everything before any task starts.
    let mut work = Vec::with_capacity(n);
    let inputs_of_done = |node: &crate::graph::Node, mut clock: InputClock| {
        for (input, edge) in node.inputs.iter().enumerate() {
            if done[edge.from] && !clock.ended(input) {
                clock.end(input);
            }
        }
        clock
    };
    // Bounded sources with event time, read in step (`alignment`).
    let mut aligned = Vec::new();
    for (id, node) in graph.nodes.iter().enumerate() {
        let saved = saved[id].take();
        if saved.as_ref().is_some_and(|s| s.runtime.finished) {
            work.push(Work::Done);
            continue;
        }
        let inputs = std::mem::take(&mut receivers[id]);
        work.push(match &node.kind {
            NodeKind::Source { spec, layout } => {
                let meta: Option<SourceMeta> =
                    saved.as_ref().map(|s| s.state.meta()).transpose()?;
                let resume = meta.as_ref().map(|m| &m.position);
                let reader = connectors.open_source(spec, resume)?;
                let mut runner = SourceRunner::new(layout.clone());
                if let Some(meta) = &meta {
                    runner.restore(&meta.runner);
                }
                if let Some(feed) = saved.as_ref().and_then(|s| {
                    s.state
                        .tables
                        .iter()
                        .find(|t| t.name == source_task::FEED_TABLE)
                }) {
                    runner.restore_feed(&feed.batch)?;
                }
                let position = reader.position();
                let idle = meta.as_ref().is_some_and(|m| m.idle);
                if layout.event_time.is_some() && reader.bounded() {
                    aligned.push(id);
                }
                Work::Source(SourceWork {
                    reader,
                    runner,
                    idle_timeout: layout.idle_timeout,
                    position,
                    injected: restored_id,
                    idle,
                    alignment: None,
                })
            }
            NodeKind::Operator(plan) => {
                let clock = inputs_of_done(
                    node,
                    restored_clock(&node.name, node.inputs.len(), saved.as_ref())?,
                );
                let mut operator = plan.create()?;
                let tables = crate::state::declared::of_plan(plan.as_ref())?;
                let mut forwarded = crate::time::WATERMARK_MIN;
                if let Some(saved) = saved {
                    forwarded = saved.runtime.forwarded;
                    crate::state::declared::check_restored(&tables, &saved.state)
                        .and_then(|()| operator.restore(saved.state))
                        .map_err(|e| EngineError::State(format!("{}: {e}", node.name)))?;
                }
                Work::Operator(OperatorWork {
                    operator,
                    tables,
                    inputs: Inputs::new(inputs, clock),
                    forwarded,
                })
            }
            NodeKind::Sink { spec } => {
                let clock = inputs_of_done(
                    node,
                    restored_clock(&node.name, node.inputs.len(), saved.as_ref())?,
                );
                let mode = if store.is_some() {
                    SinkMode::Transactional {
                        resume: saved.as_ref().map(|s| &s.state),
                    }
                } else {
                    SinkMode::Direct
                };
                Work::Sink(
                    connectors.open_sink(spec, mode)?,
                    Inputs::new(inputs, clock),
                )
            }
        });
    }
    // One bounded source alone waits for nobody.
    if aligned.len() > 1 {
        let alignment = Arc::new(SourceAlignment::new(
            aligned.len(),
            alignment::DEFAULT_MAX_DRIFT_MS,
        ));
        for (place, &id) in aligned.iter().enumerate() {
            if let Some(Work::Source(source)) = work.get_mut(id) {
                source.alignment = Some((alignment.clone(), place));
            }
        }
    }

    let (events_tx, events_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut finished = vec![None; n];
    // Built from the last node back, so that a node's chained successor
    // is ready to be put in its outputs.
    let mut links: Vec<Option<Link>> = (0..n).map(|_| None).collect();
    let mut heads = Vec::new();
    let mut work: Vec<Option<Work>> = work.into_iter().map(Some).collect();
    for id in (0..n).rev() {
        let node = &graph.nodes[id];
        let item = work[id].take().unwrap_or(Work::Done);
        if matches!(item, Work::Done) {
            finished[id] = Some(NodeCheckpoint {
                runtime: crate::checkpoint::NodeRuntimeState {
                    finished: true,
                    metrics: metrics[id].snapshot(),
                    ..Default::default()
                },
                state: Default::default(),
            });
            continue;
        }
        let mut node_ports = std::mem::take(&mut ports[id]);
        if let Some(next) = chains.next(id) {
            let link = links[next].take().ok_or_else(|| {
                EngineError::Graph(format!("node #{next} is chained but was not built"))
            })?;
            let port = graph.nodes[next].inputs[0].port;
            node_ports
                .get_mut(port)
                .ok_or_else(|| {
                    EngineError::Graph(format!("node #{next} reads a port that does not exist"))
                })?
                .push(Target::Chained(Box::new(link)));
        }
        let outputs = Outputs {
            ports: node_ports,
            metrics: metrics[id].clone(),
            max_rows: if config.batch_rows == 0 {
                DEFAULT_BATCH_ROWS
            } else {
                config.batch_rows
            },
        };
        let ctx = NodeContext {
            id,
            name: node.name.clone(),
            metrics: metrics[id].clone(),
            control: control.clone(),
            events: events_tx.clone(),
            memory: crate::memory::Charge::new(
                config.memory.clone(),
                if config.label.is_empty() {
                    node.name.clone()
                } else {
                    format!("{}/{}", config.label, node.name)
                },
            ),
        };
        if chains.is_chained(id) {
            links[id] = Some(match item {
                Work::Operator(w) => Link::new(
                    Box::new(OperatorStage::new(
                        ctx,
                        w.operator,
                        w.tables,
                        w.forwarded,
                        outputs,
                    )),
                    w.inputs.clock,
                ),
                Work::Sink(writer, inputs) => {
                    Link::new(Box::new(SinkStage::new(ctx, writer)), inputs.clock)
                }
                Work::Source(_) | Work::Done => {
                    return Err(EngineError::Graph(format!(
                        "node #{id} cannot be chained after another"
                    )))
                }
            });
        } else {
            heads.push((id, item, ctx, outputs));
        }
    }
    let mut tasks = Vec::with_capacity(heads.len());
    for (_, item, ctx, mut outputs) in heads.into_iter().rev() {
        let name = ctx.name.clone();
        let job_control = ctx.control.clone();
        // Held until the failure is recorded: the coordinator takes every
        // sender gone for the nodes having ended.
        let events = ctx.events.clone();
        let task = async move {
            let run = async move {
                match item {
                    Work::Source(source) => {
                        source_task::run_source(&ctx, source, &mut outputs).await
                    }
                    Work::Operator(w) => {
                        let mut stage =
                            OperatorStage::new(ctx, w.operator, w.tables, w.forwarded, outputs);
                        stage::run_task(&mut stage, w.inputs).await
                    }
                    Work::Sink(writer, inputs) => {
                        stage::run_task(&mut SinkStage::new(ctx, writer), inputs).await
                    }
                    Work::Done => Ok(()),
                }
            };
            let result = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(run))
                .await
                .unwrap_or_else(|payload| Err(control::panicked(&name, payload)));
            if let Err(e) = result {
                job_control.fail(control::attributed(&name, e));
            }
            drop(events);
        };
        tasks.push(pool.spawn(share.run(task))?);
    }
    drop(events_tx);

    let coordinator = Coordinator {
        graph: graph.clone(),
        connectors,
        store,
        interval,
        control: control.clone(),
        events: events_rx,
        stats,
        next_id: restored_id + 1,
        finished,
    };
    // One task coordinates the job's checkpoints and, once they are over,
    // supervises its end: it waits for the other tasks and sets the job's
    // final state. It holds the pool until then.
    let supervisor = handle.clone();
    let held_pool = pool.clone();
    pool.spawn(async move {
        let outcome =
            futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(coordinator.run()))
                .await
                .unwrap_or(Outcome::Aborted);
        for task in tasks {
            let _ = task.await;
        }
        let control = &supervisor.inner.control;
        let state = if let Some(error) = control.error() {
            JobState::Failed(error)
        } else if control.cancelled_by_user() {
            JobState::Cancelled
        } else {
            match outcome {
                Outcome::Finished => JobState::Finished,
                Outcome::Stopped => JobState::Stopped,
                Outcome::Aborted => JobState::Failed("the job was aborted".into()),
            }
        };
        // What waits for the job's end (a server recording it) may block.
        tokio::task::block_in_place(|| supervisor.set_state(state));
        drop(held_pool);
    })?;
    Ok(handle)
}

/// Runs a job to completion.
pub fn run_job(
    graph: Arc<JobGraph>,
    connectors: Arc<dyn ConnectorFactory>,
    config: &JobConfig,
) -> Result<JobReport> {
    start_job(graph, connectors, config)?.wait()
}
