//! The checkpoint coordinator: one task per job, on the worker pool, that
//! triggers checkpoints, collects every node's state for them, writes
//! them to the state directory, commits sinks, and decides how the job
//! ended. It is woken by a node's event, a change of the job's control
//! flags (a stop, a cancel) or the next checkpoint's time, and by nothing
//! else; writing a checkpoint and committing sinks (blocking I/O) happen
//! off the worker (`block_in_place`).
//!
//! ```text
//!   every `interval` (one checkpoint at a time):  request n ─> sources inject Barrier(n)
//!   NodeEvent::Snapshot(n, node) ...  all nodes in ─> StateDir::write ─> commit_sink per sink ─> completed = n
//!   stop requested:   request a stop barrier; its checkpoint is the job's last (kind `stopped`)
//!   every node finished: a final checkpoint (kind `finished`): a restart has nothing to do
//! ```
//!
//! A node that finished (sent `End`) before a barrier reached it has no
//! snapshot for that checkpoint; its final state stands in, which is
//! consistent because everything downstream saw its `End` before the
//! barrier. Without a state directory the coordinator only turns a stop
//! request into a stop barrier.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;

use super::store::StateDir;
use super::{Checkpoint, CheckpointKind, CheckpointStats, NodeCheckpoint};
use crate::distribute::physical::PhysicalGraph;
use crate::error::{EngineError, Result};
use crate::graph::{ConnectorFactory, JobGraph, NodeKind};
use crate::message::CheckpointId;
use crate::runtime::control::{Control, NodeEvent};

/// How a job ended, as far as the coordinator saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Every node finished.
    Finished,
    /// The job passed a stop barrier.
    Stopped,
    /// Cancelled or failed.
    Aborted,
}

struct Pending {
    stop: bool,
    started: Instant,
    states: Vec<Option<NodeCheckpoint>>,
}

/// See the module docs.
pub(crate) struct Coordinator {
    pub graph: Arc<PhysicalGraph>,
    pub connectors: Arc<dyn ConnectorFactory>,
    pub store: Option<StateDir>,
    pub interval: Duration,
    pub control: Arc<Control>,
    pub events: UnboundedReceiver<NodeEvent>,
    pub stats: Arc<Mutex<CheckpointStats>>,
    /// The next checkpoint's id.
    pub next_id: CheckpointId,
    /// Final states of nodes that finished (restored ones included).
    pub finished: Vec<Option<NodeCheckpoint>>,
}

/// Publishes the pre-committed output of every sink in `checkpoint`, then
/// tells each source's connector where the checkpoint holds it.
pub(crate) fn commit_sinks<'a>(
    graph: &JobGraph,
    connectors: &dyn ConnectorFactory,
    nodes: impl Iterator<Item = Option<&'a NodeCheckpoint>> + Clone,
) -> Result<()> {
    for (node, data) in graph.nodes.iter().zip(nodes.clone()) {
        if let (NodeKind::Sink { spec }, Some(data)) = (&node.kind, data) {
            connectors.commit_sink(spec, &data.state)?;
        }
    }
    for (node, data) in graph.nodes.iter().zip(nodes) {
        if let (NodeKind::Source { spec, .. }, Some(data)) = (&node.kind, data) {
            if let Some(position) = data.state.meta.get("position") {
                if !position.is_null() {
                    connectors.source_checkpointed(spec, position);
                }
            }
        }
    }
    Ok(())
}

impl Coordinator {
    /// Runs until every node's task has ended.
    pub async fn run(mut self) -> Outcome {
        match self.run_loop().await {
            Ok(outcome) => outcome,
            Err(e) => {
                self.control.fail(e);
                Outcome::Aborted
            }
        }
    }

    fn checkpointing(&self) -> bool {
        self.store.is_some()
    }

    /// Writes checkpoint `id` and commits its sinks, off the worker.
    fn complete_off_worker(&mut self, id: CheckpointId, done: Pending) -> Result<CheckpointKind> {
        tokio::task::block_in_place(|| self.complete(id, done))
    }

    async fn run_loop(&mut self) -> Result<Outcome> {
        let mut wakes = self.control.wakes();
        let nodes = self.graph.nodes.len();
        let mut pending: BTreeMap<CheckpointId, Pending> = BTreeMap::new();
        let mut stopping = false;
        let mut stopped_at: Option<CheckpointKind> = None;
        let mut any_stopped = false;
        let mut next_trigger = Instant::now() + self.interval;
        loop {
            if self.control.cancelled() {
                return Ok(Outcome::Aborted);
            }
            if !stopping && self.control.stop_requested() {
                stopping = true;
                let id = self.take_id();
                self.control.request_checkpoint(id, true);
                if self.checkpointing() {
                    pending.insert(
                        id,
                        Pending {
                            stop: true,
                            started: Instant::now(),
                            states: vec![None; nodes],
                        },
                    );
                }
            }
            let all_finished = self.finished.iter().all(Option::is_some);
            if self.checkpointing()
                && !stopping
                && pending.is_empty()
                && !all_finished
                && Instant::now() >= next_trigger
            {
                let id = self.take_id();
                pending.insert(
                    id,
                    Pending {
                        stop: false,
                        started: Instant::now(),
                        states: vec![None; nodes],
                    },
                );
                self.control.request_checkpoint(id, false);
            }
            // The next checkpoint's time, when one is to be triggered.
            let trigger =
                (self.checkpointing() && !stopping && pending.is_empty() && !all_finished)
                    .then_some(next_trigger);
            let event = tokio::select! {
                biased;
                event = self.events.recv() => event,
                changed = wakes.changed() => {
                    if changed.is_err() {
                        return Ok(Outcome::Aborted);
                    }
                    continue;
                }
                () = crate::runtime::pool::until(trigger) => continue,
            };
            match event {
                Some(NodeEvent::Snapshot {
                    node,
                    checkpoint,
                    data,
                }) => {
                    if let Some(slot) = pending
                        .get_mut(&checkpoint)
                        .and_then(|p| p.states.get_mut(node))
                    {
                        *slot = Some(data);
                    }
                }
                Some(NodeEvent::Finished { node, data }) => {
                    if let Some(slot) = self.finished.get_mut(node) {
                        *slot = Some(data);
                    }
                }
                Some(NodeEvent::Stopped) => any_stopped = true,
                // Every node's task has ended.
                None => break,
            }
            while let Some(entry) = pending.first_entry() {
                let ready = entry
                    .get()
                    .states
                    .iter()
                    .zip(&self.finished)
                    .all(|(s, f)| s.is_some() || f.is_some());
                if !ready {
                    break;
                }
                let (id, done) = entry.remove_entry();
                tracing::debug!(
                    checkpoint = id,
                    aligned_ms = done.started.elapsed().as_millis() as u64,
                    "every node's state is in"
                );
                let kind = self.complete_off_worker(id, done)?;
                if kind != CheckpointKind::Running {
                    stopped_at = Some(kind);
                }
                next_trigger = Instant::now() + self.interval;
            }
        }
        if self.control.cancelled() {
            return Ok(Outcome::Aborted);
        }
        if let Some(kind) = stopped_at {
            return Ok(if kind == CheckpointKind::Finished {
                Outcome::Finished
            } else {
                Outcome::Stopped
            });
        }
        if self.finished.iter().all(Option::is_some) {
            if self.checkpointing() {
                let id = self.take_id();
                let states = vec![None; nodes];
                self.complete_off_worker(
                    id,
                    Pending {
                        stop: false,
                        started: Instant::now(),
                        states,
                    },
                )?;
            }
            return Ok(Outcome::Finished);
        }
        if any_stopped {
            return Ok(Outcome::Stopped);
        }
        Err(EngineError::Graph(
            "the job's nodes ended without finishing or stopping".into(),
        ))
    }

    fn take_id(&mut self) -> CheckpointId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Writes checkpoint `id`, commits its sinks, and returns its kind.
    fn complete(&mut self, id: CheckpointId, done: Pending) -> Result<CheckpointKind> {
        let all_finished = self.finished.iter().all(Option::is_some)
            && done
                .states
                .iter()
                .all(|s| s.as_ref().is_none_or(|s| s.runtime.finished));
        let kind = if all_finished {
            CheckpointKind::Finished
        } else if done.stop {
            CheckpointKind::Stopped
        } else {
            CheckpointKind::Running
        };
        let nodes = done
            .states
            .into_iter()
            .zip(&self.finished)
            .map(|(state, finished)| state.or_else(|| finished.clone()).unwrap_or_default())
            .collect();
        let checkpoint = Checkpoint { id, kind, nodes };
        let Some(store) = &self.store else {
            return Ok(kind);
        };
        let bytes = store.write(&self.graph, &checkpoint)?;
        commit_sinks(
            &self.graph,
            self.connectors.as_ref(),
            checkpoint.nodes.iter().map(Some),
        )?;
        if kind == CheckpointKind::Finished {
            store.mark_committed(id)?;
        }
        self.control.set_completed(id);
        let took = done.started.elapsed().as_millis() as u64;
        tracing::debug!(
            checkpoint = id,
            bytes,
            took_ms = took,
            ?kind,
            "checkpoint complete"
        );
        if let Ok(mut stats) = self.stats.lock() {
            stats.completed += 1;
            stats.last_id = Some(id);
            stats.last_bytes = bytes;
            stats.max_bytes = stats.max_bytes.max(bytes);
            stats.total_bytes += bytes;
            stats.last_duration_ms = took;
            stats.max_duration_ms = stats.max_duration_ms.max(took);
            stats.total_duration_ms += took;
        }
        Ok(kind)
    }
}
