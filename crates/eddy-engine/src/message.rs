//! What travels along the edges of a job graph.
//!
//! An edge carries a totally ordered sequence of [`Message`]s from one node's
//! output port to one input of another node: data batches, watermarks that
//! promise no earlier event time will follow on that edge (except rows that
//! travel as [`Message::Late`]), checkpoint barriers, and finally
//! [`Message::End`] once the producer has finished.
//!
//! Rows that arrived behind their source's watermark and are kept
//! (`late_rows = 'keep'`, the default) travel as [`LateBatch`]es: the rows
//! with the watermark at each row's position in its source. An operator
//! whose state for a row may already be final (a window that fired, a
//! join side already evicted, an ordered operator that released past the
//! row) judges the row against that watermark, never against its own
//! current one, so what it keeps and drops does not depend on batch sizes,
//! parallelism or timing.

use datafusion::arrow::array::{Array, BooleanArray, Int64Array, UInt32Array};
use datafusion::arrow::compute::{filter, filter_record_batch, take, take_record_batch};
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{EngineError, Result};
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
    /// Rows in the edge's schema that arrived behind their source's
    /// watermark, each with that watermark (see [`LateBatch`]).
    Late(LateBatch),
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

/// Rows that arrived behind the watermark of their source and go on
/// (`late_rows = 'keep'`), each with the watermark at its position in its
/// source: the largest event time of the rows before it, less the bound.
///
/// Stateless operators pass the marks on with the rows they keep; an
/// operator that may drop late rows judges each against its own mark
/// ([`LateBatch::horizon`]); every other operator takes the rows as it
/// takes any.
///
/// ```
/// use std::sync::Arc;
/// use datafusion::arrow::array::{BooleanArray, Int64Array};
/// use datafusion::arrow::datatypes::{DataType, Field, Schema};
/// use datafusion::arrow::record_batch::RecordBatch;
/// use eddy_engine::message::LateBatch;
///
/// let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, false)]));
/// let rows = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![100, 40]))]).unwrap();
/// // Both rows came when the watermark stood at 500.
/// let late = LateBatch::new(rows, Int64Array::from(vec![500, 500])).unwrap();
/// // A filter keeps the marks of the rows it keeps.
/// let kept = late.filter(&BooleanArray::from(vec![false, true])).unwrap();
/// assert_eq!(kept.num_rows(), 1);
/// // Judged with 200 ms of allowed lateness: state up to 300 is final.
/// assert_eq!(kept.horizon(0, 200), 300);
/// ```
#[derive(Debug, Clone)]
pub struct LateBatch {
    rows: RecordBatch,
    watermarks: Int64Array,
}

impl LateBatch {
    /// `rows` with the watermark at each one's position (one per row, no
    /// NULLs).
    pub fn new(rows: RecordBatch, watermarks: Int64Array) -> Result<Self> {
        if watermarks.len() != rows.num_rows() || watermarks.null_count() > 0 {
            return Err(EngineError::Graph(format!(
                "late rows need one watermark each: {} rows, {} watermarks ({} NULL)",
                rows.num_rows(),
                watermarks.len(),
                watermarks.null_count()
            )));
        }
        Ok(Self { rows, watermarks })
    }

    /// The rows.
    pub fn rows(&self) -> &RecordBatch {
        &self.rows
    }

    /// The rows, without their marks.
    pub fn into_rows(self) -> RecordBatch {
        self.rows
    }

    /// The rows and their marks.
    pub fn into_parts(self) -> (RecordBatch, Int64Array) {
        (self.rows, self.watermarks)
    }

    /// The watermark at each row's position in its source.
    pub fn watermarks(&self) -> &Int64Array {
        &self.watermarks
    }

    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        self.rows.num_rows()
    }

    /// The watermark at row `row`'s position.
    pub fn watermark(&self, row: usize) -> Timestamp {
        self.watermarks.value(row)
    }

    /// Where state was final at row `row`'s position for an operator that
    /// allows `lateness_ms`: its watermark less the lateness. A window
    /// ending at or before it had fired; a row behind it had been passed.
    pub fn horizon(&self, row: usize, lateness_ms: i64) -> Timestamp {
        self.watermarks.value(row).saturating_sub(lateness_ms)
    }

    /// The rows where `mask` is true, with their marks.
    pub fn filter(&self, mask: &BooleanArray) -> Result<Self> {
        let watermarks = filter(&self.watermarks, mask)?;
        Ok(Self {
            rows: filter_record_batch(&self.rows, mask)?,
            watermarks: downcast_marks(watermarks.as_ref())?,
        })
    }

    /// The rows at `indices`, with their marks.
    pub fn take(&self, indices: &UInt32Array) -> Result<Self> {
        let watermarks = take(&self.watermarks, indices, None)?;
        Ok(Self {
            rows: take_record_batch(&self.rows, indices)?,
            watermarks: downcast_marks(watermarks.as_ref())?,
        })
    }

    /// `len` rows from `offset`, zero-copy.
    pub fn slice(&self, offset: usize, len: usize) -> Self {
        Self {
            rows: self.rows.slice(offset, len),
            watermarks: self.watermarks.slice(offset, len),
        }
    }

    /// The same rows transformed one for one (a projection): `rows` must
    /// have as many rows, in the same order.
    pub fn with_rows(self, rows: RecordBatch) -> Result<Self> {
        Self::new(rows, self.watermarks)
    }
}

fn downcast_marks(array: &dyn Array) -> Result<Int64Array> {
    array
        .as_any()
        .downcast_ref::<Int64Array>()
        .cloned()
        .ok_or_else(|| EngineError::Graph("late-row marks are not BIGINT".into()))
}
