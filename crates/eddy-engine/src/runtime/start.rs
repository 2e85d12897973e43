//! Starting a job: [`start_job`] in the steps a reader can follow.
//!
//! In: a job graph (as planned, or expanded already to show it), the
//! connectors, the job's [`JobConfig`]. Out: a running job's
//! [`JobHandle`], or the configuration error that stopped it before any
//! task started.
//!
//! ```text
//!  open the state directory ─> where to resume from (checkpoint, savepoint, afresh)
//!  ─> the layout: instances and key groups ─> the graph to run (distribution pass)
//!  ─> restore its state, commit what the checkpoint's sinks had pending
//!  ─> chains ─> a channel per edge between tasks ─> open and restore every node
//!  ─> link chained nodes ─> spawn the tasks ─> spawn the coordinator and supervisor
//! ```

use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use tokio::sync::mpsc::Receiver;

use super::alignment::{self, SourceAlignment};
use super::chain_link::Link;
use super::control::{self, Control, NodeContext};
use super::handle::JobInner;
use super::inputs::{InputClock, Inputs};
use super::operator_task::{OperatorStage, OperatorWork};
use super::outputs::{Outputs, Target};
use super::resume::{self, Restored};
use super::sink_task::SinkStage;
use super::source_task::{self, SourceMeta, SourceWork};
use super::{stage, JobConfig, JobHandle, JobState, WorkerPool, DEFAULT_BATCH_ROWS, EDGE_CAPACITY};
use crate::chains::Chains;
use crate::checkpoint::coordinator::{commit_sinks, Coordinator, Outcome};
use crate::checkpoint::store::StateDir;
use crate::checkpoint::{CheckpointKind, CheckpointStats, NodeCheckpoint, DEFAULT_INTERVAL};
use crate::distribute::physical::PhysicalGraph;
use crate::error::{EngineError, Result};
use crate::graph::{check_topological, ConnectorFactory, JobGraph, Node, NodeKind};
use crate::key_groups::KeyGroups;
use crate::message::Message;
use crate::metrics::NodeMetrics;
use crate::sink::{SinkMode, SinkWriter};
use crate::source::SourceRunner;

/// A node ready to run: opened, its state restored.
enum Work {
    Source(SourceWork),
    Operator(OperatorWork),
    Sink(Box<dyn SinkWriter>, Inputs),
    /// Finished in the run the job resumes from.
    Done,
}

/// A task's first node with what it needs to run.
type Head = (Work, NodeContext, Outputs);

/// Opens every connector, restores state when resuming, and starts the job.
/// Configuration errors (a missing input file, an `--input` naming no
/// source, a state directory of another query) are returned before any
/// task starts. The module docs list its steps.
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
///     explain: None,
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
    let store = open_state_dir(config)?;
    let source = resume::source(config.from_savepoint.as_deref(), store.as_ref())?;
    let checkpointed = source.layout;
    let (parallelism, key_groups) = layout(config, checkpointed.as_ref())?;
    // The distribution pass, once: the plan laid out as the job runs.
    let graph = Arc::new(PhysicalGraph::new(graph, parallelism, key_groups));
    check_topological(&graph)?;
    connectors.check(&graph)?;
    let pool = match &config.pool {
        Some(pool) => pool.clone(),
        None => WorkerPool::shared()?,
    };
    let share = config.share.clone().unwrap_or_else(|| pool.job_share());
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
        commit_restored(
            restored,
            &graph,
            connectors.as_ref(),
            store.as_ref(),
            source.savepoint.is_some(),
        )?;
    }
    let restored_id = restored.as_ref().map(|r| r.id).unwrap_or(0);
    let already_finished = restored
        .as_ref()
        .filter(|r| r.kind == CheckpointKind::Finished)
        .map(|r| r.id);
    let mut saved: Vec<Option<NodeCheckpoint>> = match restored {
        Some(restored) => restored.nodes,
        None => vec![None; graph.nodes.len()],
    };

    let control = Control::new(
        store.is_some(),
        config.checkpoints.as_ref().is_some_and(|c| c.incremental),
        restored_id,
    );
    let metrics: Vec<Arc<NodeMetrics>> = graph
        .nodes
        .iter()
        .map(|node| NodeMetrics::new_shared(node.inputs.len()))
        .collect();
    for (m, s) in metrics.iter().zip(&saved) {
        if let Some(s) = s {
            m.restore(&s.runtime.metrics);
        }
    }
    let stats = Arc::new(Mutex::new(CheckpointStats {
        restored_from: (restored_id > 0).then_some(restored_id),
        ..Default::default()
    }));
    let handle = JobHandle {
        inner: Arc::new(JobInner {
            names: graph
                .nodes
                .iter()
                .map(|node| (node.name.clone(), node_kind(&node.kind)))
                .collect(),
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
    let chains = chains(&graph, config.disable_chaining, &done);
    let (mut receivers, ports) = channels(&graph, &chains)?;
    let mut work = Vec::with_capacity(graph.nodes.len());
    let mut opening = Opening {
        connectors: connectors.as_ref(),
        transactional: store.is_some(),
        restored_id,
        done: &done,
        ends: Vec::with_capacity(graph.nodes.len()),
    };
    for (id, node) in graph.nodes.iter().enumerate() {
        let inputs = std::mem::take(&mut receivers[id]);
        work.push(opening.open(node, saved[id].take(), inputs)?);
    }
    align_bounded_sources(&graph, &mut work);

    let (events_tx, events_rx) = tokio::sync::mpsc::unbounded_channel();
    let (heads, finished) = Linking {
        graph: &graph,
        chains: &chains,
        metrics: &metrics,
        control: &control,
        events: &events_tx,
        spill: Arc::new(crate::spill::SpillSpace::new(config.spill.clone())),
        config,
    }
    .link(work, ports)?;
    let mut tasks = Vec::with_capacity(heads.len());
    for head in heads {
        tasks.push(pool.spawn(share.run(task(head)))?);
    }
    drop(events_tx);

    let coordinator = Coordinator {
        graph: graph.clone(),
        connectors,
        store,
        interval: config
            .checkpoints
            .as_ref()
            .map(|c| c.interval)
            .unwrap_or(DEFAULT_INTERVAL),
        control,
        events: events_rx,
        stats,
        next_id: restored_id + 1,
        finished,
    };
    supervise(&pool, coordinator, tasks, handle.clone())?;
    Ok(handle)
}

/// The job's state directory (`--state-dir`), cleared first for
/// `--ignore-state`; `None` for a job run without checkpoints.
fn open_state_dir(config: &JobConfig) -> Result<Option<StateDir>> {
    let Some(c) = &config.checkpoints else {
        return Ok(None);
    };
    let store = match &c.replica {
        Some(replica) => StateDir::open_replicated(&c.state_dir, replica.clone(), c.ignore_state)?,
        None => StateDir::open(&c.state_dir)?,
    };
    if c.ignore_state {
        store.clear()?;
    }
    Ok(Some(store))
}

/// Instances of each keyed operator and the key groups they own ranges
/// of: the configured N (or the checkpoint's), and the checkpoint's key
/// groups (keys must stay in their groups), or for a fresh job the
/// configured ones or the default for N.
fn layout(
    config: &JobConfig,
    checkpointed: Option<&crate::checkpoint::store::CheckpointLayout>,
) -> Result<(usize, KeyGroups)> {
    let parallelism = config
        .parallelism
        .resolve(checkpointed.map(|c| c.parallelism))?;
    let key_groups = match (checkpointed, config.key_groups) {
        (Some(c), _) => c.key_groups,
        (None, Some(groups)) => groups,
        (None, None) => KeyGroups::for_parallelism(parallelism),
    };
    key_groups.check_parallelism(parallelism)?;
    Ok((parallelism, key_groups))
}

/// What a resumed job finishes first: its sinks commit what the
/// checkpoint had them hold (two-phase commit), and a finished job's own
/// checkpoint is marked committed.
fn commit_restored(
    restored: &Restored,
    graph: &JobGraph,
    connectors: &dyn ConnectorFactory,
    store: Option<&StateDir>,
    from_savepoint: bool,
) -> Result<()> {
    commit_sinks(graph, connectors, restored.nodes.iter().map(Option::as_ref))?;
    if let (Some(store), CheckpointKind::Finished, false) = (store, restored.kind, from_savepoint) {
        store.mark_committed(restored.id)?;
    }
    tracing::info!(
        "resuming from checkpoint {} ({:?})",
        restored.id,
        restored.kind
    );
    Ok(())
}

/// How the nodes run as tasks: chained where they can be, leaving out the
/// nodes that `done` says finished before.
fn chains(graph: &JobGraph, disable_chaining: bool, done: &[bool]) -> Chains {
    let chains = if disable_chaining {
        Chains::unchained(graph)
    } else {
        Chains::with(graph, |id| !done[id])
    };
    tracing::info!(
        "{} nodes run as {} task(s){}",
        graph.nodes.len(),
        chains.tasks().len(),
        if disable_chaining {
            " (chaining off)"
        } else {
            ""
        }
    );
    chains
}

/// One bounded channel per edge between tasks (a chained node is called
/// instead): each node's receivers, in input order, and each node's
/// output ports' targets.
#[allow(clippy::type_complexity)]
fn channels(
    graph: &JobGraph,
    chains: &Chains,
) -> Result<(Vec<Vec<Receiver<Message>>>, Vec<Vec<Vec<Target>>>)> {
    let n = graph.nodes.len();
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
    Ok((receivers, ports))
}

/// What opening a node needs besides the node.
struct Opening<'a> {
    connectors: &'a dyn ConnectorFactory,
    /// Whether sinks write transactionally (the job checkpoints).
    transactional: bool,
    /// The checkpoint resumed from (0: none), where sources start counting.
    restored_id: crate::message::CheckpointId,
    /// Nodes that finished in the run resumed from.
    done: &'a [bool],
    /// Whether each node opened so far ends: a source that reads stored
    /// data ([`crate::source::SourceReader::bounded`]), a node whose
    /// inputs all end, a node that finished before.
    ends: Vec<bool>,
}

impl Opening<'_> {
    /// `node` opened (a connector) or created (an operator), with its
    /// checkpointed state `saved` restored, reading `inputs`; all before
    /// any task starts.
    fn open(
        &mut self,
        node: &Node,
        saved: Option<NodeCheckpoint>,
        inputs: Vec<Receiver<Message>>,
    ) -> Result<Work> {
        let inputs_end: Vec<bool> = node
            .inputs
            .iter()
            .map(|e| self.ends.get(e.from).copied().unwrap_or(false))
            .collect();
        if saved.as_ref().is_some_and(|s| s.runtime.finished) {
            self.ends.push(true);
            return Ok(Work::Done);
        }
        let work = match &node.kind {
            NodeKind::Source { spec, layout } => {
                let meta: Option<SourceMeta> =
                    saved.as_ref().map(|s| s.state.meta()).transpose()?;
                let reader = self
                    .connectors
                    .open_source(spec, meta.as_ref().map(|m| &m.position))?;
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
                self.ends.push(reader.bounded());
                Work::Source(SourceWork {
                    position: reader.position(),
                    reader,
                    runner,
                    idle_timeout: layout.idle_timeout,
                    injected: self.restored_id,
                    idle: meta.as_ref().is_some_and(|m| m.idle),
                    alignment: None,
                })
            }
            NodeKind::Operator(plan) => {
                let clock = self.clock(node, saved.as_ref())?;
                let mut operator = plan.create()?;
                let tables = crate::state::declared::of_plan(plan.as_ref())?;
                let mut forwarded = crate::time::WATERMARK_MIN;
                if let Some(saved) = saved {
                    forwarded = saved.runtime.forwarded;
                    crate::state::declared::check_restored(&tables, &saved.state)
                        .and_then(|()| operator.restore(saved.state))
                        .map_err(|e| EngineError::State(format!("{}: {e}", node.name)))?;
                }
                operator.inputs_bounded(&inputs_end);
                if let Some(table) = plan.lookup_table() {
                    operator.lookup_opened(self.connectors.open_lookup(table)?);
                }
                self.ends.push(inputs_end.iter().all(|&end| end));
                Work::Operator(OperatorWork {
                    operator,
                    tables,
                    inputs: Inputs::new(inputs, clock),
                    forwarded,
                })
            }
            NodeKind::Sink { spec } => {
                let clock = self.clock(node, saved.as_ref())?;
                let mode = if self.transactional {
                    SinkMode::Transactional {
                        resume: saved.as_ref().map(|s| &s.state),
                    }
                } else {
                    SinkMode::Direct
                };
                self.ends.push(inputs_end.iter().all(|&end| end));
                Work::Sink(
                    self.connectors.open_sink(spec, mode)?,
                    Inputs::new(inputs, clock),
                )
            }
        };
        Ok(work)
    }

    /// A node's input clock as checkpointed, with the inputs from nodes
    /// that finished before ended.
    fn clock(&self, node: &Node, saved: Option<&NodeCheckpoint>) -> Result<InputClock> {
        let mut clock = restored_clock(&node.name, node.inputs.len(), saved)?;
        for (input, edge) in node.inputs.iter().enumerate() {
            if self.done[edge.from] && !clock.ended(input) {
                clock.end(input);
            }
        }
        Ok(clock)
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

/// Bounded sources with event time read in step (`alignment`); one alone
/// waits for nobody.
fn align_bounded_sources(graph: &JobGraph, work: &mut [Work]) {
    let aligned: Vec<usize> = work
        .iter()
        .enumerate()
        .filter(|(id, item)| match (item, &graph.nodes[*id].kind) {
            (Work::Source(source), NodeKind::Source { layout, .. }) => {
                layout.event_time.is_some() && source.reader.bounded()
            }
            _ => false,
        })
        .map(|(id, _)| id)
        .collect();
    if aligned.len() < 2 {
        return;
    }
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

/// What linking the opened nodes into tasks needs.
struct Linking<'a> {
    graph: &'a JobGraph,
    chains: &'a Chains,
    metrics: &'a [Arc<NodeMetrics>],
    control: &'a Arc<Control>,
    events: &'a tokio::sync::mpsc::UnboundedSender<control::NodeEvent>,
    /// The job's spill store, shared by its nodes (gone with the last).
    spill: Arc<crate::spill::SpillSpace>,
    config: &'a JobConfig,
}

impl Linking<'_> {
    /// Each node given its context and outputs: a chained node becomes a
    /// link its predecessor calls, the others head a task. Returns the
    /// tasks' heads in node order, and the nodes that finished before as
    /// their final checkpoints.
    fn link(
        &self,
        work: Vec<Work>,
        mut ports: Vec<Vec<Vec<Target>>>,
    ) -> Result<(Vec<Head>, Vec<Option<NodeCheckpoint>>)> {
        let mut finished = vec![None; self.graph.nodes.len()];
        // Built from the last node back, so that a node's chained successor
        // is ready to be put in its outputs.
        let mut links: Vec<Option<Link>> = (0..self.graph.nodes.len()).map(|_| None).collect();
        let mut heads: Vec<Head> = Vec::new();
        for (id, item) in work.into_iter().enumerate().rev() {
            let node = &self.graph.nodes[id];
            if matches!(item, Work::Done) {
                finished[id] = Some(NodeCheckpoint {
                    runtime: crate::checkpoint::NodeRuntimeState {
                        finished: true,
                        metrics: self.metrics[id].snapshot(),
                        ..Default::default()
                    },
                    state: Default::default(),
                });
                continue;
            }
            let mut node_ports = std::mem::take(&mut ports[id]);
            if let Some(next) = self.chains.next(id) {
                let link = links[next].take().ok_or_else(|| {
                    EngineError::Graph(format!("node #{next} is chained but was not built"))
                })?;
                let port = self.graph.nodes[next].inputs[0].port;
                node_ports
                    .get_mut(port)
                    .ok_or_else(|| {
                        EngineError::Graph(format!("node #{next} reads a port that does not exist"))
                    })?
                    .push(Target::Chained(Box::new(link)));
            }
            let outputs = Outputs {
                ports: node_ports,
                metrics: self.metrics[id].clone(),
                max_rows: if self.config.batch_rows == 0 {
                    DEFAULT_BATCH_ROWS
                } else {
                    self.config.batch_rows
                },
            };
            let ctx = NodeContext {
                id,
                name: node.name.clone(),
                metrics: self.metrics[id].clone(),
                control: self.control.clone(),
                events: self.events.clone(),
                spill: self.spill.clone(),
                memory: crate::memory::MemoryReservation::new(
                    self.config.memory.clone(),
                    if self.config.label.is_empty() {
                        node.name.clone()
                    } else {
                        format!("{}/{}", self.config.label, node.name)
                    },
                ),
            };
            if self.chains.is_chained(id) {
                links[id] = Some(chained(id, item, ctx, outputs)?);
            } else {
                heads.push((item, ctx, outputs));
            }
        }
        heads.reverse();
        Ok((heads, finished))
    }
}

/// A node chained after another: called by it instead of reading a channel.
fn chained(id: usize, item: Work, ctx: NodeContext, outputs: Outputs) -> Result<Link> {
    Ok(match item {
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
    })
}

/// The task a chain's first node heads: its loop, a failure or panic in it
/// recorded as the job's (named for the node), which cancels the rest.
fn task((item, mut ctx, mut outputs): Head) -> impl std::future::Future<Output = ()> + Send {
    let name = ctx.name.clone();
    let job_control = ctx.control.clone();
    // Held until the failure is recorded: the coordinator takes every
    // sender gone for the nodes having ended.
    let events = ctx.events.clone();
    async move {
        let run = async move {
            match item {
                Work::Source(source) => {
                    source_task::run_source(&mut ctx, source, &mut outputs).await
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
    }
}

/// One task coordinates the job's checkpoints and, once they are over,
/// supervises its end: it waits for the other tasks and sets the job's
/// final state. It holds the pool until then.
fn supervise(
    pool: &Arc<WorkerPool>,
    coordinator: Coordinator,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    supervisor: JobHandle,
) -> Result<()> {
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
    Ok(())
}

fn node_kind(kind: &NodeKind) -> String {
    match kind {
        NodeKind::Source { .. } => "source".to_string(),
        NodeKind::Operator(plan) => plan.kind().to_string(),
        NodeKind::Sink { .. } => "sink".to_string(),
    }
}
