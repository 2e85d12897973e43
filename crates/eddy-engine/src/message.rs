//! What travels along the edges of a job graph.
//!
//! An edge carries a totally ordered sequence of [`Message`]s from one node's
//! output port to one input of another node: data batches, watermarks that
//! promise no earlier event time will follow on that edge (except rows the
//! source already judged late), checkpoint barriers, and finally
//! [`Message::End`] once the producer has finished.

use datafusion::arrow::record_batch::RecordBatch;

use crate::time::Timestamp;

/// Identifies a checkpoint; checkpoints of a job are numbered 1, 2, ...
/// across restarts (a restored job continues after the checkpoint it
/// restored).
pub type CheckpointId = u64;

/// A checkpoint barrier: everything before it on an edge belongs to
/// checkpoint `checkpoint`, everything after it to later ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Barrier {
    /// The checkpoint this barrier closes.
    pub checkpoint: CheckpointId,
    /// The job is stopping: after this barrier nothing follows on the edge
    /// (no `End`, no final watermark) and every node exits once it has
    /// passed the barrier on.
    pub stop: bool,
}

/// One item on an edge.
#[derive(Debug, Clone)]
pub enum Message {
    /// A batch of rows in the edge's schema.
    Batch(RecordBatch),
    /// Event time has advanced: no later on-time row on this edge has an event
    /// time below `watermark - allowed_lateness` of its source.
    Watermark(Timestamp),
    /// The producer has had no input for its idle timeout: until it sends
    /// again, its watermark does not hold back the consumer's minimum.
    Idle,
    /// A checkpoint barrier (see [`Barrier`]). A node with several inputs
    /// stops reading an input once its barrier arrived and snapshots its
    /// state when the barrier has arrived on every input (aligned barriers).
    Barrier(Barrier),
    /// The producer has finished; nothing follows.
    End,
}
