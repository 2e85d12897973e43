//! What the tasks of one job share: the control flags that stop, cancel
//! and checkpoint it, the first error, the events nodes send the
//! checkpoint coordinator, and the wake-up that tells a waiting task one of
//! the flags changed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::checkpoint::NodeCheckpoint;
use crate::error::EngineError;
use crate::graph::NodeId;
use crate::message::CheckpointId;
use crate::metrics::NodeMetrics;

/// Flags every task of a job reads, and the wake-up that tells a task
/// waiting for input (or for room downstream) that they changed.
#[derive(Debug)]
pub(crate) struct Control {
    /// Every task gives up at its next look.
    cancel: AtomicBool,
    /// The user cancelled (as opposed to a node failing).
    user_cancel: AtomicBool,
    /// The user asked for a graceful stop; the coordinator turns it into a
    /// stop barrier.
    stop_requested: AtomicBool,
    /// Sources inject barriers up to this checkpoint.
    requested: AtomicU64,
    /// The barrier of this checkpoint is a stop barrier (0: none yet).
    stop_at: AtomicU64,
    /// The latest checkpoint whose sinks are committed.
    completed: AtomicU64,
    /// Whether nodes snapshot state at barriers.
    pub checkpointing: bool,
    /// Whether operators may hand over keyed tables as their changes
    /// ([`crate::operator::Operator::snapshot_incremental`]).
    pub incremental: bool,
    /// The first error of the job.
    error: Mutex<Option<String>>,
    /// Bumped whenever a flag changes: a cancel, a failure, a checkpoint
    /// or stop request. Waiting tasks watch it, so nothing polls.
    wake: tokio::sync::watch::Sender<u64>,
}

/// A task's view of [`Control`]'s wake-up.
pub(crate) type Wakes = tokio::sync::watch::Receiver<u64>;

impl Control {
    pub fn new(checkpointing: bool, incremental: bool, restored: CheckpointId) -> Arc<Self> {
        Arc::new(Self {
            cancel: AtomicBool::new(false),
            user_cancel: AtomicBool::new(false),
            stop_requested: AtomicBool::new(false),
            requested: AtomicU64::new(restored),
            stop_at: AtomicU64::new(0),
            completed: AtomicU64::new(restored),
            checkpointing,
            incremental,
            error: Mutex::new(None),
            wake: tokio::sync::watch::Sender::new(0),
        })
    }

    /// The wake-up a task waits on beside its input: it fires on every
    /// change of the flags after this call.
    pub fn wakes(&self) -> Wakes {
        self.wake.subscribe()
    }

    fn wake_all(&self) {
        self.wake.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    pub fn cancel_by_user(&self) {
        self.user_cancel.store(true, Ordering::SeqCst);
        self.cancel.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    pub fn cancelled_by_user(&self) -> bool {
        self.user_cancel.load(Ordering::SeqCst)
    }

    pub fn request_stop(&self) {
        self.stop_requested.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    pub fn stop_requested(&self) -> bool {
        self.stop_requested.load(Ordering::SeqCst)
    }

    /// Asks sources for barriers up to `checkpoint`; `stop` marks it the
    /// job's last.
    pub fn request_checkpoint(&self, checkpoint: CheckpointId, stop: bool) {
        if stop {
            self.stop_at.store(checkpoint, Ordering::SeqCst);
        }
        self.requested.store(checkpoint, Ordering::SeqCst);
        self.wake_all();
    }

    /// The latest requested checkpoint and whether it is a stop.
    pub fn requested(&self) -> (CheckpointId, CheckpointId) {
        let requested = self.requested.load(Ordering::SeqCst);
        (requested, self.stop_at.load(Ordering::SeqCst))
    }

    pub fn set_completed(&self, checkpoint: CheckpointId) {
        self.completed.store(checkpoint, Ordering::SeqCst);
    }

    pub fn completed(&self) -> CheckpointId {
        self.completed.load(Ordering::SeqCst)
    }

    /// Records a failure (the first one wins) and ends the job.
    pub fn fail(&self, error: EngineError) {
        self.cancel.store(true, Ordering::SeqCst);
        if !matches!(error, EngineError::Aborted | EngineError::Cancelled) {
            if let Ok(mut slot) = self.error.lock() {
                if slot.is_none() {
                    *slot = Some(error.to_string());
                }
            }
        }
        self.wake_all();
    }

    pub fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|e| e.clone())
    }
}

/// What nodes tell the coordinator.
#[derive(Debug)]
pub(crate) enum NodeEvent {
    /// The node's state at a barrier.
    Snapshot {
        node: NodeId,
        checkpoint: CheckpointId,
        data: NodeCheckpoint,
    },
    /// The node ended normally (it sent `End`); its final state.
    Finished { node: NodeId, data: NodeCheckpoint },
    /// A node passed a stop barrier on and exited.
    Stopped,
}

/// What every node of a task gets.
pub(crate) struct NodeContext {
    pub id: NodeId,
    pub name: String,
    pub metrics: Arc<NodeMetrics>,
    pub control: Arc<Control>,
    pub events: tokio::sync::mpsc::UnboundedSender<NodeEvent>,
    /// The node's reservation against the job's memory budgets (released
    /// when the node's task ends and this context with it).
    pub memory: crate::memory::MemoryReservation,
    /// Where the node's operator spills state the budget refuses.
    pub spill: Arc<crate::spill::SpillSpace>,
}

impl NodeContext {
    /// The node's state now takes `bytes`: the gauge, and the reservation;
    /// an error when a budget refuses it (a node that cannot spill fails,
    /// naming the budget).
    pub fn set_state_bytes(&mut self, bytes: usize) -> crate::Result<()> {
        self.metrics.set_state_bytes(bytes);
        Ok(self.memory.try_resize(bytes as u64)?)
    }

    /// The runtime part of the node's checkpoint: its metrics now, its
    /// input clock and the watermark it last forwarded.
    pub fn runtime_state(
        &self,
        clock: &super::inputs::InputClock,
        forwarded: crate::time::Timestamp,
        finished: bool,
    ) -> crate::checkpoint::NodeRuntimeState {
        crate::checkpoint::NodeRuntimeState {
            finished,
            metrics: self.metrics.snapshot(),
            clock: Some(clock.state()),
            forwarded,
        }
    }

    /// Tells the coordinator; a coordinator that is gone means the job is ending.
    pub fn report(&self, event: NodeEvent) -> crate::Result<()> {
        self.events.send(event).map_err(|_| EngineError::Aborted)
    }
}

/// An error of node `name` as the job reports it: errors that already name
/// where they arose keep their words; any other is said to be the node's.
pub(crate) fn attributed(name: &str, error: EngineError) -> EngineError {
    match error {
        EngineError::Operator { .. } | EngineError::Connector { .. } | EngineError::Aborted => {
            error
        }
        other => EngineError::operator(name.to_string(), other.to_string()),
    }
}

/// A panic in node `name`: a bug, but it must still end the job with a
/// message that names the node, not take the process down.
pub(crate) fn panicked(name: &str, payload: Box<dyn std::any::Any + Send>) -> EngineError {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    EngineError::operator(
        name.to_string(),
        format!("internal error (please report): {message}"),
    )
}
