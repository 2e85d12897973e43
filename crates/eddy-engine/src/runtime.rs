//! Executes a [`JobGraph`]: one thread per node, bounded channels between
//! them.
//!
//! Every node has a single bounded inbox; each upstream edge sends
//! `(input index, Message)` into it, so a node with several inputs (a union,
//! a sink fed by several queries) needs no select and a slow consumer blocks
//! its producers (backpressure). A node tracks one watermark per input and
//! acts on their minimum; an ended input no longer holds the minimum back.
//!
//! ```text
//!  source thread:   read -> SourceRunner -> Batch(port 0) / Batch(late port) / Watermark ... Watermark(+inf), End
//!  operator thread: inbox -> Operator::{on_batch, on_watermark, on_end} -> Collector -> consumers
//!  sink thread:     inbox -> SinkWriter::write ... finish
//! ```
//!
//! When a node fails, it records the error and raises a shared cancel flag;
//! every other node stops at its next message or poll. The first error is
//! the job's result.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use datafusion::arrow::record_batch::RecordBatch;
use serde::Serialize;

use crate::error::{EngineError, Result};
use crate::graph::{check_topological, ConnectorFactory, JobGraph, NodeKind};
use crate::message::Message;
use crate::metrics::{MetricsSnapshot, NodeMetrics};
use crate::operator::{Collector, Operator, LATE_PORT};
use crate::sink::SinkWriter;
use crate::source::{SourceContext, SourceReader, SourceRunner};
use crate::time::{Timestamp, WATERMARK_MAX, WATERMARK_MIN};

/// Messages buffered per inbox before producers block.
const INBOX_CAPACITY: usize = 16;
/// How often a blocked node checks the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);

type Envelope = (usize, Message);

/// A subscriber of an output port: its inbox and the input index it expects.
#[derive(Clone)]
struct Subscriber {
    inbox: SyncSender<Envelope>,
    input: usize,
}

/// The output ports of a node.
struct Outputs {
    ports: Vec<Vec<Subscriber>>,
    metrics: Arc<NodeMetrics>,
    cancel: Arc<AtomicBool>,
}

impl Outputs {
    fn send_port(&self, port: usize, message: Message) -> Result<()> {
        let Some(subscribers) = self.ports.get(port) else { return Ok(()) };
        if let Message::Batch(batch) = &message {
            if !subscribers.is_empty() {
                self.metrics.add_rows_out(batch.num_rows());
            }
        }
        for sub in subscribers {
            if self.cancel.load(Ordering::Relaxed) {
                return Err(EngineError::Cancelled);
            }
            sub.inbox.send((sub.input, message.clone())).map_err(|_| EngineError::Cancelled)?;
        }
        Ok(())
    }

    fn send_all(&self, message: Message) -> Result<()> {
        for port in 0..self.ports.len() {
            self.send_port(port, message.clone())?;
        }
        Ok(())
    }

    fn flush(&self, collector: &mut Collector) -> Result<()> {
        for (port, batch) in collector.drain() {
            self.send_port(port, Message::Batch(batch))?;
        }
        Ok(())
    }
}

/// Final counters of one node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeReport {
    /// Node id in the graph.
    pub id: usize,
    /// Node name.
    pub name: String,
    /// `source`, `sink` or the operator kind.
    pub kind: String,
    /// Counters at the end of the run.
    pub metrics: MetricsSnapshot,
}

/// What a finished job reports.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// Per-node counters.
    pub nodes: Vec<NodeReport>,
    /// Wall-clock duration.
    pub elapsed_ms: u128,
}

/// A job whose threads are running.
pub struct RunningJob {
    names: Vec<(String, String)>,
    metrics: Vec<Arc<NodeMetrics>>,
    handles: Vec<JoinHandle<()>>,
    error: Arc<Mutex<Option<EngineError>>>,
    cancel: Arc<AtomicBool>,
    started: Instant,
}

impl std::fmt::Debug for RunningJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningJob").field("nodes", &self.names).finish()
    }
}

impl RunningJob {
    /// Live counters of every node, in node order.
    pub fn snapshot(&self) -> Vec<NodeReport> {
        node_reports(&self.names, &self.metrics)
    }

    /// Asks every node to stop.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Waits for every node to finish; the first node error is the result.
    pub fn wait(self) -> Result<JobReport> {
        for handle in self.handles {
            if handle.join().is_err() {
                record_error(&self.error, &self.cancel, EngineError::Graph("a node thread panicked".into()));
            }
        }
        let nodes = node_reports(&self.names, &self.metrics);
        let error = self.error.lock().map(|mut e| e.take()).unwrap_or(None);
        match error {
            Some(e) => Err(e),
            None => Ok(JobReport { nodes, elapsed_ms: self.started.elapsed().as_millis() }),
        }
    }
}

fn node_reports(names: &[(String, String)], metrics: &[Arc<NodeMetrics>]) -> Vec<NodeReport> {
    names
        .iter()
        .zip(metrics)
        .enumerate()
        .map(|(id, ((name, kind), m))| NodeReport { id, name: name.clone(), kind: kind.clone(), metrics: m.snapshot() })
        .collect()
}

fn record_error(slot: &Mutex<Option<EngineError>>, cancel: &AtomicBool, error: EngineError) {
    cancel.store(true, Ordering::Relaxed);
    if matches!(error, EngineError::Cancelled) {
        return;
    }
    if let Ok(mut slot) = slot.lock() {
        if slot.is_none() {
            *slot = Some(error);
        }
    }
}

/// Opens every connector, creates every operator and starts the job.
/// Errors opening connectors (a missing input file, say) are returned before
/// any thread starts.
pub fn start_job(graph: &JobGraph, connectors: &dyn ConnectorFactory) -> Result<RunningJob> {
    check_topological(graph)?;
    let n = graph.nodes.len();
    let cancel = Arc::new(AtomicBool::new(false));
    let error = Arc::new(Mutex::new(None));
    let metrics: Vec<Arc<NodeMetrics>> =
        graph.nodes.iter().map(|node| NodeMetrics::new_shared(node.inputs.len())).collect();

    // Instantiate everything first so that configuration errors surface early.
    enum Work {
        Source(Box<dyn SourceReader>, SourceRunner, Option<Duration>),
        Operator(Box<dyn Operator>),
        Sink(Box<dyn SinkWriter>),
    }
    let mut work = Vec::with_capacity(n);
    for node in &graph.nodes {
        work.push(match &node.kind {
            NodeKind::Source { spec, layout } => {
                Work::Source(connectors.open_source(spec)?, SourceRunner::new(layout.clone()), layout.idle_timeout)
            }
            NodeKind::Operator(plan) => Work::Operator(plan.create()?),
            NodeKind::Sink { spec } => Work::Sink(connectors.open_sink(spec)?),
        });
    }

    let mut inboxes: Vec<Option<Receiver<Envelope>>> = Vec::with_capacity(n);
    let mut senders: Vec<SyncSender<Envelope>> = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, rx) = sync_channel(INBOX_CAPACITY);
        senders.push(tx);
        inboxes.push(Some(rx));
    }

    let mut handles = Vec::with_capacity(n);
    let mut names = Vec::with_capacity(n);
    for (id, item) in work.into_iter().enumerate() {
        let node = &graph.nodes[id];
        let ports = (0..graph.port_count(id))
            .map(|port| {
                graph
                    .consumers(id, port)
                    .into_iter()
                    .map(|(consumer, input)| Subscriber { inbox: senders[consumer].clone(), input })
                    .collect()
            })
            .collect();
        let outputs = Outputs { ports, metrics: metrics[id].clone(), cancel: cancel.clone() };
        let inbox = inboxes[id].take().ok_or_else(|| EngineError::Graph("inbox taken twice".into()))?;
        let input_count = node.inputs.len();
        let node_metrics = metrics[id].clone();
        let error_slot = error.clone();
        let cancel_flag = cancel.clone();
        let name = node.name.clone();
        let kind = match &node.kind {
            NodeKind::Source { .. } => "source".to_string(),
            NodeKind::Operator(plan) => plan.kind().to_string(),
            NodeKind::Sink { .. } => "sink".to_string(),
        };
        names.push((name.clone(), kind));
        let thread_name = format!("eddy-{id}-{name}");
        let body = move || {
            // A panic is a bug, but it must still end the job with a message
            // that names the node, not take the process down.
            let run = std::panic::AssertUnwindSafe(|| match item {
                Work::Source(reader, runner, idle) => run_source(&name, reader, runner, idle, &outputs, &node_metrics),
                Work::Operator(op) => run_operator(op, inbox, input_count, &outputs, &node_metrics, &cancel_flag),
                Work::Sink(writer) => run_sink(writer, inbox, input_count, &node_metrics, &cancel_flag),
            });
            let result = std::panic::catch_unwind(run).unwrap_or_else(|payload| {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                Err(EngineError::operator(name.clone(), format!("internal error (please report): {message}")))
            });
            if let Err(e) = result {
                let e = match e {
                    EngineError::Operator { .. } | EngineError::Connector { .. } | EngineError::Cancelled => e,
                    other => EngineError::operator(name.clone(), other.to_string()),
                };
                record_error(&error_slot, &cancel_flag, e);
            }
        };
        let handle = std::thread::Builder::new()
            .name(thread_name)
            .spawn(body)
            .map_err(|e| EngineError::Graph(format!("cannot start a thread: {e}")))?;
        handles.push(handle);
    }
    drop(senders);
    Ok(RunningJob { names, metrics, handles, error, cancel, started: Instant::now() })
}

/// Runs a job to completion.
pub fn run_job(graph: &JobGraph, connectors: &dyn ConnectorFactory) -> Result<JobReport> {
    start_job(graph, connectors)?.wait()
}

fn run_source(
    name: &str,
    reader: Box<dyn SourceReader>,
    mut runner: SourceRunner,
    idle_timeout: Option<Duration>,
    outputs: &Outputs,
    metrics: &Arc<NodeMetrics>,
) -> Result<()> {
    let ctx = SourceContext::new(name, metrics.clone());
    let mut emit = |raw: RecordBatch, ctx: &mut SourceContext| -> Result<()> {
        if outputs.cancel.load(Ordering::Relaxed) {
            return Err(EngineError::Cancelled);
        }
        metrics.add_rows_in(raw.num_rows());
        let out = runner.process(&raw, ctx)?;
        if let Some(batch) = out.late {
            metrics.add_late_rows(batch.num_rows());
            outputs.send_port(LATE_PORT, Message::Batch(batch))?;
        }
        if let Some(batch) = out.on_time.filter(|b| b.num_rows() > 0) {
            outputs.send_port(0, Message::Batch(batch))?;
        }
        if let Some(wm) = out.watermark {
            metrics.set_watermark(wm);
            outputs.send_port(0, Message::Watermark(wm))?;
        }
        if let Some(wm) = out.late_watermark {
            outputs.send_port(LATE_PORT, Message::Watermark(wm))?;
        }
        Ok(())
    };
    match idle_timeout {
        None => {
            let (mut reader, mut ctx) = (reader, ctx);
            while let Some(raw) = reader.next_batch(&mut ctx)? {
                emit(raw, &mut ctx)?;
            }
        }
        Some(timeout) => {
            // Read on a helper thread so that silence can be noticed.
            let (tx, rx) = sync_channel::<Result<Option<RecordBatch>>>(1);
            let reader_name = format!("eddy-read-{name}");
            let mut main_ctx = SourceContext::new(name, metrics.clone());
            let helper = std::thread::Builder::new().name(reader_name).spawn(move || {
                let (mut reader, mut ctx) = (reader, ctx);
                loop {
                    let next = reader.next_batch(&mut ctx);
                    let done = !matches!(next, Ok(Some(_)));
                    if tx.send(next).is_err() || done {
                        return;
                    }
                }
            });
            if helper.is_err() {
                return Err(EngineError::Graph("cannot start a reader thread".into()));
            }
            let mut idle = false;
            loop {
                if outputs.cancel.load(Ordering::Relaxed) {
                    return Err(EngineError::Cancelled);
                }
                match rx.recv_timeout(timeout) {
                    Ok(Ok(Some(raw))) => {
                        idle = false;
                        emit(raw, &mut main_ctx)?;
                    }
                    Ok(Ok(None)) => break,
                    Ok(Err(e)) => return Err(e),
                    Err(RecvTimeoutError::Timeout) => {
                        if !idle {
                            idle = true;
                            tracing::info!(source = %name, "idle: no input for {timeout:?}; its watermark no longer holds the job back");
                            outputs.send_all(Message::Idle)?;
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        }
    }
    metrics.set_watermark(WATERMARK_MAX);
    outputs.send_all(Message::Watermark(WATERMARK_MAX))?;
    outputs.send_all(Message::End)
}

/// Per-input watermark bookkeeping shared by operators and sinks.
///
/// The node's watermark is the minimum over its inputs that are not idle;
/// it never goes back. An idle input rejoins the minimum with its next
/// message; its rows may then be behind, and operators count them as late.
struct InputClock {
    watermarks: Vec<Timestamp>,
    ended: Vec<bool>,
    idle: Vec<bool>,
    current: Timestamp,
}

impl InputClock {
    fn new(inputs: usize) -> Self {
        Self {
            watermarks: vec![WATERMARK_MIN; inputs],
            ended: vec![false; inputs],
            idle: vec![false; inputs],
            current: WATERMARK_MIN,
        }
    }

    fn recompute(&mut self) -> Option<Timestamp> {
        let min = (0..self.watermarks.len()).filter(|&i| !self.idle[i]).map(|i| self.watermarks[i]).min()?;
        (min > self.current).then(|| {
            self.current = min;
            min
        })
    }

    /// Returns the new minimum if it advanced.
    fn advance(&mut self, input: usize, watermark: Timestamp) -> Option<Timestamp> {
        self.active(input);
        if let Some(w) = self.watermarks.get_mut(input) {
            *w = (*w).max(watermark);
        }
        self.recompute()
    }

    /// An input sent data: it is no longer idle.
    fn active(&mut self, input: usize) {
        if let Some(idle) = self.idle.get_mut(input) {
            *idle = false;
        }
    }

    /// An input went idle; returns the new minimum if it advanced.
    fn go_idle(&mut self, input: usize) -> Option<Timestamp> {
        if let Some(idle) = self.idle.get_mut(input) {
            *idle = true;
        }
        self.recompute()
    }

    /// Whether every input that has not ended is idle (and one is).
    fn all_idle(&self) -> bool {
        let mut any = false;
        for i in 0..self.idle.len() {
            if !self.ended[i] {
                if !self.idle[i] {
                    return false;
                }
                any = true;
            }
        }
        any
    }

    /// Marks an input ended; returns the new minimum if it advanced.
    fn end(&mut self, input: usize) -> Option<Timestamp> {
        if let Some(e) = self.ended.get_mut(input) {
            *e = true;
        }
        self.advance(input, WATERMARK_MAX)
    }

    fn all_ended(&self) -> bool {
        self.ended.iter().all(|e| *e)
    }
}

fn receive(inbox: &Receiver<Envelope>, cancel: &AtomicBool) -> Result<Envelope> {
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(EngineError::Cancelled);
        }
        match inbox.recv_timeout(CANCEL_POLL) {
            Ok(envelope) => return Ok(envelope),
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return Err(EngineError::Cancelled),
        }
    }
}

fn run_operator(
    mut op: Box<dyn Operator>,
    inbox: Receiver<Envelope>,
    inputs: usize,
    outputs: &Outputs,
    metrics: &Arc<NodeMetrics>,
    cancel: &AtomicBool,
) -> Result<()> {
    let mut clock = InputClock::new(inputs);
    let mut collector = Collector::default();
    let mut forwarded = WATERMARK_MIN;
    while !clock.all_ended() {
        let (input, message) = receive(&inbox, cancel)?;
        let advanced = match message {
            Message::Batch(batch) => {
                clock.active(input);
                metrics.add_input_rows(input, batch.num_rows());
                op.on_batch(input, batch, &mut collector)?;
                outputs.flush(&mut collector)?;
                None
            }
            Message::Watermark(wm) => clock.advance(input, wm),
            Message::Idle => {
                let advanced = clock.go_idle(input);
                if clock.all_idle() {
                    outputs.send_all(Message::Idle)?;
                }
                advanced
            }
            Message::End => clock.end(input),
        };
        if let Some(wm) = advanced {
            metrics.set_watermark(wm);
            op.on_watermark(wm, &mut collector)?;
            outputs.flush(&mut collector)?;
            let out = op.output_watermark(wm);
            if out > forwarded {
                forwarded = out;
                outputs.send_all(Message::Watermark(out))?;
            }
        }
        metrics.set_state_rows(op.state_rows());
        metrics.set_late_rows(op.late_rows());
    }
    op.on_end(&mut collector)?;
    outputs.flush(&mut collector)?;
    metrics.set_state_rows(op.state_rows());
    outputs.send_all(Message::End)
}

fn run_sink(
    mut writer: Box<dyn SinkWriter>,
    inbox: Receiver<Envelope>,
    inputs: usize,
    metrics: &Arc<NodeMetrics>,
    cancel: &AtomicBool,
) -> Result<()> {
    let mut clock = InputClock::new(inputs);
    while !clock.all_ended() {
        let (input, message) = receive(&inbox, cancel)?;
        match message {
            Message::Batch(batch) => {
                metrics.add_input_rows(input, batch.num_rows());
                writer.write(&batch)?;
                metrics.add_rows_out(batch.num_rows());
            }
            Message::Watermark(wm) => {
                if let Some(wm) = clock.advance(input, wm) {
                    metrics.set_watermark(wm);
                }
            }
            Message::Idle => {
                clock.go_idle(input);
            }
            Message::End => {
                clock.end(input);
            }
        }
    }
    writer.finish()
}
