//! Sinks: the connector-facing [`SinkWriter`] trait. A sink node receives the
//! rows of every `INSERT INTO` that targets it and hands them to its writer.
//!
//! A sink runs in one of two modes ([`SinkMode`]):
//!
//! - **direct** (no checkpoints): rows are written as they come;
//!   [`SinkWriter::finish`] flushes and closes at the end.
//! - **transactional** (checkpoints on): rows go to places readers do not
//!   see. At each checkpoint barrier [`SinkWriter::precommit`] makes them
//!   durable and returns a description of what is pending; once the
//!   checkpoint is complete (its manifest durable) the runtime calls
//!   [`crate::graph::ConnectorFactory::commit_sink`] with that description,
//!   which publishes it. Commits are idempotent, so a job resumed from a
//!   checkpoint commits it again before it starts: whatever a crash
//!   interrupted is finished, and nothing is published twice (two-phase
//!   commit, as Flink's file sinks do it).
//!
//! ```text
//!   write* ── barrier n ──> precommit(n) ──> state in checkpoint n ──> commit_sink(state)
//! ```
//!
//! A writer that cannot hold output back (stdout) keeps the default
//! `precommit`, which only flushes: it is at-least-once.
//!
//! ```
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::sink::SinkWriter;
//!
//! /// Counts rows; a sink with nothing to commit keeps the defaults.
//! struct Counter(usize);
//!
//! impl SinkWriter for Counter {
//!     fn write(&mut self, batch: &RecordBatch) -> eddy_engine::Result<()> {
//!         self.0 += batch.num_rows();
//!         Ok(())
//!     }
//!     fn finish(&mut self) -> eddy_engine::Result<()> {
//!         Ok(())
//!     }
//! }
//! ```

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::Result;
use crate::message::CheckpointId;
use crate::state::StateSnapshot;
use crate::time::Timestamp;

/// How a sink is opened.
#[derive(Debug, Clone, Copy)]
pub enum SinkMode<'a> {
    /// Write output as it comes (no checkpoints).
    Direct,
    /// Hold output back until the checkpoint covering it completes.
    Transactional {
        /// The sink's state in the checkpoint the job resumes from (already
        /// committed); `None` for a fresh start, which discards any earlier
        /// output.
        resume: Option<&'a StateSnapshot>,
    },
}

/// Writes result rows to the outside world (stdout, files).
pub trait SinkWriter: Send {
    /// Writes one batch.
    fn write(&mut self, batch: &RecordBatch) -> Result<()>;

    /// Writes rows that arrived behind their source's watermark
    /// ([`crate::message::LateBatch`]). A sink writes them as any others;
    /// one that feeds another job's operators (a Kafka exchange) keeps the
    /// marks with them.
    fn write_late(&mut self, late: &crate::message::LateBatch) -> Result<()> {
        self.write(late.rows())
    }

    /// Transactional mode, at barrier `checkpoint`: makes everything written
    /// so far durable without publishing it, and returns what
    /// `ConnectorFactory::commit_sink` needs to publish it. Output of
    /// checkpoints up to `completed` is known to be published already.
    fn precommit(
        &mut self,
        _checkpoint: CheckpointId,
        _completed: CheckpointId,
    ) -> Result<StateSnapshot> {
        self.flush()?;
        Ok(StateSnapshot::default())
    }

    /// Pushes buffered output on (a stopped or checkpointed at-least-once
    /// sink).
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    /// Direct mode: flushes and closes; called once after the last batch.
    fn finish(&mut self) -> Result<()>;

    /// The sink's input watermark advanced to `watermark` (no row that
    /// arrives after it is older, except late ones the operators let
    /// through); [`crate::time::WATERMARK_MAX`] once every input ended. Most
    /// sinks ignore it; one that feeds another job's source (a Kafka
    /// exchange) writes it down so that job's watermark can follow.
    fn watermark(&mut self, _watermark: Timestamp) -> Result<()> {
        Ok(())
    }

    /// The sink's own figures in this run (a database sink's rows and
    /// transactions written), shown with its node's metrics as a source's
    /// ([`crate::source::SourceContext::metric`]); none by default. Asked
    /// after each message and checkpoint, so figures that move when a
    /// checkpoint is published show at the sink's next message.
    fn figures(&self) -> Vec<(&'static str, i64)> {
        Vec::new()
    }
}
