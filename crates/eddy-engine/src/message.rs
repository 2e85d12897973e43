//! What travels along the edges of a job graph.
//!
//! An edge carries a totally ordered sequence of [`Message`]s from one node's
//! output port to one input of another node: data batches, watermarks that
//! promise no earlier event time will follow on that edge (except rows the
//! source already judged late), and finally [`Message::End`] once the
//! producer has finished.

use datafusion::arrow::record_batch::RecordBatch;

use crate::time::Timestamp;

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
    /// The producer has finished; nothing follows.
    End,
}
