//! Sources: the connector-facing [`SourceReader`] trait, and how raw
//! connector batches become the stream the rest of the job sees.
//!
//! ```text
//!  SourceReader::next_batch ──> raw batch (declared physical columns)
//!        │                       + SourceReader::position (for checkpoints)
//!        ▼  SourceRunner::process
//!  computed columns appended (e.g. event_time = to_timestamp_millis(order_ts))
//!        │
//!        ▼  lateness, per row in source order (WatermarkTracker)
//!  on-time rows ──> port 0            late rows + watermark_ms, lag_ms ──> port 1
//!        │
//!        ▼
//!  Watermark(max event time seen - bound) on port 0;
//!  the late rows' own Watermark(max late event time seen - bound) on port 1
//! ```
//!
//! - [`layout`]: the immutable description of a source's columns and event time;
//! - [`watermark`]: per-row lateness and the watermark;
//! - [`runner`]: the per-run state tying them together (checkpointed).
//!
//! The late stream is a stream of its own: its rows keep their event time
//! (so a window over late rows groups them by when they happened) and its
//! watermark is derived from the late rows alone.
//!
//! A reader runs on a thread of its own, so a read that blocks (stdin, a
//! pipe) never keeps the job from noticing a stop or a checkpoint; its
//! position travels with each batch, so a checkpoint records exactly the
//! rows the job has consumed.

pub mod bad_rows;
pub mod choice;
pub mod feed_table;
pub mod layout;
pub mod runner;
pub mod watermark;

pub use bad_rows::{BadRow, BadRowPolicy, RowOrigins};
pub use layout::{
    is_json_column, is_unstructured, metadata_key, ChangeMetadata, ComputedColumn, EventTimeSpec,
    LatePolicy, SourceColumn, SourceLayout, JSON_COLUMN_KEY, METADATA_COLUMN_KEY,
    UNSTRUCTURED_COLUMN_KEY,
};
pub use runner::{SourceOutput, SourceRunner, SourceRunnerState};

pub use watermark::{Judged, WatermarkTracker};

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::Result;

/// Reads raw batches from the outside world (a file, stdin, a generator).
///
/// Batches carry the table's physical (non-computed) columns in declared
/// order. Malformed input is reported through [`SourceContext::bad_row`] and
/// left out of the batch; only failures that make further reading impossible are errors.
///
/// ```
/// use std::sync::Arc;
/// use datafusion::arrow::array::Int64Array;
/// use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
/// use datafusion::arrow::record_batch::RecordBatch;
/// use eddy_engine::source::{SourceContext, SourceReader};
///
/// /// Counts 0..limit, two rows a batch; resumable at any batch boundary.
/// struct Counter { next: i64, limit: i64, schema: SchemaRef }
///
/// impl SourceReader for Counter {
///     fn next_batch(&mut self, _ctx: &mut SourceContext) -> eddy_engine::Result<Option<RecordBatch>> {
///         if self.next >= self.limit {
///             return Ok(None);
///         }
///         let values: Vec<i64> = (self.next..(self.next + 2).min(self.limit)).collect();
///         self.next += values.len() as i64;
///         Ok(Some(RecordBatch::try_new(self.schema.clone(), vec![Arc::new(Int64Array::from(values))])?))
///     }
///     fn position(&self) -> serde_json::Value {
///         serde_json::json!({ "next": self.next })
///     }
/// }
///
/// let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
/// let mut source = Counter { next: 0, limit: 3, schema };
/// let mut ctx = SourceContext::new("numbers");
/// assert_eq!(source.next_batch(&mut ctx).unwrap().unwrap().num_rows(), 2);
/// assert_eq!(source.position(), serde_json::json!({ "next": 2 }));
/// ```
pub trait SourceReader: Send {
    /// The next batch, or `None` once a bounded input is exhausted.
    fn next_batch(&mut self, ctx: &mut SourceContext) -> Result<Option<RecordBatch>>;

    /// Where reading resumes after the last batch [`SourceReader::next_batch`]
    /// returned (a file offset, a sequence number). It is checkpointed with
    /// the rows before it and handed back to the connector when the job
    /// resumes. `Null` (the default) means the source cannot resume.
    fn position(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// Whether the input is stored data read as fast as the job takes it
    /// (a file, a generator that is not paced), never waiting for rows to
    /// arrive. Such sources are read in step by event time (see
    /// `runtime::alignment`); a live one (a pipe, Kafka) never waits for,
    /// nor holds back, the others. `false` by default.
    fn bounded(&self) -> bool {
        false
    }
}

/// What a source connector may report while it reads.
pub struct SourceContext {
    table: String,
    reported: u64,
    bad_rows: Vec<BadRow>,
    origins: Option<Box<dyn RowOrigins>>,
    splits: SplitEvents,
    watermark: Option<crate::time::Timestamp>,
    skipped: Vec<RecordBatch>,
    metrics: Vec<(String, i64)>,
}

/// What a reader of a partitioned input (Kafka partitions) says about its
/// splits: each split has its own watermark, and the source's watermark is
/// the least over the splits that are neither finished nor idle.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SplitEvents {
    /// The split every row of the batch being returned belongs to (`None`:
    /// the source has one split).
    pub current: Option<u32>,
    /// Splits the reader will read (an empty split holds the watermark back
    /// until it is idle, as a silent partition does in Flink).
    pub opened: Vec<u32>,
    /// Splits read to their end (a bounded read): they no longer hold the
    /// watermark back.
    pub finished: Vec<u32>,
}

impl std::fmt::Debug for SourceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceContext")
            .field("table", &self.table)
            .field("bad_rows", &self.bad_rows.len())
            .finish()
    }
}

/// How many malformed rows per source are logged in full before the rest are
/// only counted.
const BAD_ROWS_LOGGED: u64 = 20;

impl SourceContext {
    /// A context for the source of `table`.
    pub fn new(table: impl Into<String>) -> Self {
        Self {
            table: table.into(),
            reported: 0,
            bad_rows: Vec::new(),
            origins: None,
            splits: SplitEvents::default(),
            watermark: None,
            skipped: Vec::new(),
            metrics: Vec::new(),
        }
    }

    /// Says that the reader passed over rows, before those of the batch
    /// about to be returned, because the table's pushed-down filter
    /// ([`crate::graph::ConnectorSpec::filter`]) rejects them all.
    /// `rows` has the physical columns, only the filter's
    /// `observed_columns` filled (nullable), the others of type Null: the
    /// source judges them (event time seen, bad rows) and sends none on.
    pub fn skipped(&mut self, rows: RecordBatch) {
        if rows.num_rows() > 0 {
            self.skipped.push(rows);
        }
    }

    /// Takes what [`SourceContext::skipped`] said since the last call.
    pub fn take_skipped(&mut self) -> Vec<RecordBatch> {
        std::mem::take(&mut self.skipped)
    }

    /// Says that the source's watermark is now `watermark`, for a reader
    /// whose input carries its own watermark (a Kafka exchange, written by
    /// jobs that judged lateness already) rather than a table that declares
    /// one. The source sends it on once it is past the last one sent.
    pub fn advance_watermark(&mut self, watermark: crate::time::Timestamp) {
        self.watermark = Some(self.watermark.map_or(watermark, |w| w.max(watermark)));
    }

    /// Takes what [`SourceContext::advance_watermark`] said since the last call.
    pub fn take_watermark(&mut self) -> Option<crate::time::Timestamp> {
        self.watermark.take()
    }

    /// Says that the batch about to be returned holds rows of `split` only.
    pub fn set_split(&mut self, split: u32) {
        self.splits.current = Some(split);
    }

    /// Says that the reader reads `splits` (before their first rows).
    pub fn open_splits(&mut self, splits: impl IntoIterator<Item = u32>) {
        self.splits.opened.extend(splits);
    }

    /// Says that `split` has been read to its end.
    pub fn finish_split(&mut self, split: u32) {
        self.splits.finished.push(split);
    }

    /// Takes what the split calls since the last batch said.
    pub fn take_split_events(&mut self) -> SplitEvents {
        std::mem::take(&mut self.splits)
    }

    /// Reports a malformed input row: it is logged and handed on with the
    /// batch being read (to `bad_rows(table)`, or counted, or failing the
    /// job, as the table's `bad_rows` option says).
    pub fn bad_row(&mut self, row: BadRow) {
        self.reported += 1;
        if self.reported <= BAD_ROWS_LOGGED {
            tracing::warn!(source = %self.table, "bad input row at {}: {}", row.location(), row.describe());
        } else if self.reported == BAD_ROWS_LOGGED + 1 {
            tracing::warn!(source = %self.table, "more bad input rows; see bad_rows({}) and the bad row count", self.table);
        }
        self.bad_rows.push(row);
    }

    /// Takes the bad rows reported since the last call.
    pub fn take_bad_rows(&mut self) -> Vec<BadRow> {
        std::mem::take(&mut self.bad_rows)
    }

    /// Says where the rows of the batch about to be returned came from
    /// (optional: without it a row found bad later is reported with its
    /// decoded values).
    pub fn set_origins(&mut self, origins: Box<dyn RowOrigins>) {
        self.origins = Some(origins);
    }

    /// Takes what [`SourceContext::set_origins`] left.
    pub fn take_origins(&mut self) -> Option<Box<dyn RowOrigins>> {
        self.origins.take()
    }

    /// Sets a figure of the connector's own (a replication slot's lag),
    /// shown with the source's counters in the API, `/metrics` and the
    /// console.
    pub fn metric(&mut self, name: &str, value: i64) {
        self.metrics.push((name.to_string(), value));
    }

    /// The figures set since the last call.
    pub fn take_metrics(&mut self) -> Vec<(String, i64)> {
        std::mem::take(&mut self.metrics)
    }

    /// The table this source feeds.
    pub fn table(&self) -> &str {
        &self.table
    }
}
