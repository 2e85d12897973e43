//! Sinks: the connector-facing [`SinkWriter`] trait. A sink node receives the
//! rows of every `INSERT INTO` that targets it and hands them to its writer.

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::Result;

/// Writes result rows to the outside world (stdout, files).
pub trait SinkWriter: Send {
    /// Writes one batch.
    fn write(&mut self, batch: &RecordBatch) -> Result<()>;
    /// Flushes and closes; called once after the last batch.
    fn finish(&mut self) -> Result<()>;
}
