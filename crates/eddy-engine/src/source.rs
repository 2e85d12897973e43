//! Sources: the connector-facing [`SourceReader`] trait, and the
//! [`SourceRunner`] that turns raw connector batches into the stream the rest
//! of the job sees.
//!
//! ```text
//!  SourceReader::next_batch ──> raw batch (declared physical columns)
//!        │
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
//! The late stream is a stream of its own: its rows keep their event time
//! (so a window over late rows groups them by when they happened) and its
//! watermark is derived from the late rows alone.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, BooleanBufferBuilder, Int64Array, RecordBatch};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::{EngineError, Result};
use crate::metrics::NodeMetrics;
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MIN};

/// Reads raw batches from the outside world (a file, stdin, a generator).
///
/// Batches carry the table's physical (non-computed) columns in declared
/// order. Malformed input is reported through [`SourceContext::bad_row`] and
/// skipped; only failures that make further reading impossible are errors.
pub trait SourceReader: Send {
    /// The next batch, or `None` once a bounded input is exhausted.
    fn next_batch(&mut self, ctx: &mut SourceContext) -> Result<Option<RecordBatch>>;
}

/// What a source connector may report while it reads.
#[derive(Debug)]
pub struct SourceContext {
    table: String,
    metrics: Arc<NodeMetrics>,
    reported: u64,
}

/// How many malformed rows per source are logged in full before the rest are
/// only counted.
const BAD_ROWS_LOGGED: u64 = 20;

impl SourceContext {
    /// A context for the source of `table` that counts into `metrics`.
    pub fn new(table: impl Into<String>, metrics: Arc<NodeMetrics>) -> Self {
        Self { table: table.into(), metrics, reported: 0 }
    }

    /// Reports a malformed input row at `location` (e.g. `orders.ndjson:17`):
    /// it is counted in the source's `bad_rows` metric and logged.
    pub fn bad_row(&mut self, location: &str, reason: &str) {
        self.metrics.add_bad_rows(1);
        self.reported += 1;
        if self.reported <= BAD_ROWS_LOGGED {
            tracing::warn!(source = %self.table, "bad input row at {location}: {reason}");
        } else if self.reported == BAD_ROWS_LOGGED + 1 {
            tracing::warn!(source = %self.table, "more bad input rows; counting them without logging");
        }
    }

    /// The table this source feeds.
    pub fn table(&self) -> &str {
        &self.table
    }

}

/// A column computed from the physical columns when a row is read.
#[derive(Debug, Clone)]
pub struct ComputedColumn {
    /// The column as declared.
    pub field: Field,
    /// Expression over the physical columns.
    pub expr: Arc<dyn PhysicalExpr>,
}

/// How a source derives event time and judges lateness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTimeSpec {
    /// Index of the event-time column in the source's output schema.
    pub column: usize,
    /// Out-of-orderness bound: watermark = max event time - bound.
    pub bound_ms: i64,
    /// Extra lateness tolerated on top of the watermark.
    pub allowed_lateness_ms: i64,
}

/// Layout of one output column of a source: read or computed.
#[derive(Debug, Clone)]
pub enum SourceColumn {
    /// Column `i` of the raw batch.
    Physical(usize),
    /// Computed from the raw batch.
    Computed(ComputedColumn),
}

/// Immutable description of how a source's rows become a stream.
#[derive(Debug, Clone)]
pub struct SourceLayout {
    /// The raw (physical) columns a connector must produce.
    pub physical_schema: SchemaRef,
    /// The stream's schema, columns in declared order.
    pub output_schema: SchemaRef,
    /// Where each output column comes from.
    pub columns: Vec<SourceColumn>,
    /// Event time and lateness, if the table declares a watermark.
    pub event_time: Option<EventTimeSpec>,
    /// After this long without input the source is idle: its watermark no
    /// longer holds back the job (option `idle_timeout`).
    pub idle_timeout: Option<std::time::Duration>,
}

impl SourceLayout {
    /// The schema of the late-row port: the output schema plus `watermark_ms`
    /// and `lag_ms`.
    pub fn late_schema(&self) -> SchemaRef {
        let mut fields: Vec<Field> =
            self.output_schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("watermark_ms", DataType::Int64, false));
        fields.push(Field::new("lag_ms", DataType::Int64, false));
        Arc::new(Schema::new(fields))
    }
}

/// Splits one batch into on-time and late rows, in row order.
#[derive(Debug, Clone, Copy)]
pub struct WatermarkTracker {
    spec: EventTimeSpec,
    max_seen: Timestamp,
}

/// Result of judging one batch.
#[derive(Debug)]
pub struct Judged {
    /// true for rows that go on (not late, event time present).
    pub on_time: BooleanArray,
    /// true for late rows.
    pub late: BooleanArray,
    /// Watermark each late row was judged against (same length as the batch;
    /// meaningful only where `late`).
    pub watermark_ms: Vec<i64>,
    /// Rows whose event time is NULL (neither on time nor late).
    pub null_time_rows: Vec<usize>,
}

impl WatermarkTracker {
    /// A tracker that has seen nothing yet.
    pub fn new(spec: EventTimeSpec) -> Self {
        Self { spec, max_seen: WATERMARK_MIN }
    }

    /// The current watermark: max event time seen - bound.
    pub fn watermark(&self) -> Timestamp {
        if self.max_seen == WATERMARK_MIN {
            WATERMARK_MIN
        } else {
            self.max_seen.saturating_sub(self.spec.bound_ms)
        }
    }

    /// Judges each row of `times` in order: row i is late when its time is
    /// below (max of rows 0..i-1) - bound - allowed_lateness.
    pub fn judge(&mut self, times: &Int64Array) -> Judged {
        let n = times.len();
        let mut on_time = BooleanBufferBuilder::new(n);
        let mut late = BooleanBufferBuilder::new(n);
        let mut watermark_ms = vec![0i64; n];
        let mut null_time_rows = Vec::new();
        let slack = self.spec.bound_ms.saturating_add(self.spec.allowed_lateness_ms);
        let mut max_seen = self.max_seen;
        for i in 0..n {
            if times.is_null(i) {
                on_time.append(false);
                late.append(false);
                null_time_rows.push(i);
                continue;
            }
            let t = times.value(i);
            let is_late = max_seen != WATERMARK_MIN && t < max_seen.saturating_sub(slack);
            if is_late {
                watermark_ms[i] = max_seen.saturating_sub(self.spec.bound_ms);
            } else if t > max_seen {
                max_seen = t;
            }
            on_time.append(!is_late);
            late.append(is_late);
        }
        self.max_seen = max_seen;
        Judged {
            on_time: BooleanArray::new(on_time.finish(), None),
            late: BooleanArray::new(late.finish(), None),
            watermark_ms,
            null_time_rows,
        }
    }
}

/// Output of [`SourceRunner::process`].
#[derive(Debug, Default)]
pub struct SourceOutput {
    /// Rows that continue on port 0.
    pub on_time: Option<RecordBatch>,
    /// Late rows with `watermark_ms` and `lag_ms` (port 1).
    pub late: Option<RecordBatch>,
    /// The watermark after this batch, if it advanced.
    pub watermark: Option<Timestamp>,
    /// The late stream's own watermark (max late event time - bound), if it advanced.
    pub late_watermark: Option<Timestamp>,
}

/// Per-run state of a source node: computes columns, judges lateness, tracks
/// the watermark.
#[derive(Debug)]
pub struct SourceRunner {
    layout: SourceLayout,
    late_schema: SchemaRef,
    tracker: Option<WatermarkTracker>,
    last_watermark: Timestamp,
    max_late: Timestamp,
    last_late_watermark: Timestamp,
}

impl SourceRunner {
    /// Creates the runner for `layout`.
    pub fn new(layout: SourceLayout) -> Self {
        let late_schema = layout.late_schema();
        let tracker = layout.event_time.map(WatermarkTracker::new);
        Self {
            layout,
            late_schema,
            tracker,
            last_watermark: WATERMARK_MIN,
            max_late: WATERMARK_MIN,
            last_late_watermark: WATERMARK_MIN,
        }
    }

    /// Turns one raw batch into on-time rows, late rows and a watermark.
    /// Rows with a NULL event time are reported as bad rows via `ctx`.
    pub fn process(&mut self, raw: &RecordBatch, ctx: &mut SourceContext) -> Result<SourceOutput> {
        let full = self.compute_columns(raw)?;
        let Some(tracker) = self.tracker.as_mut() else {
            return Ok(SourceOutput { on_time: Some(full), late: None, watermark: None, late_watermark: None });
        };
        let spec = self.layout.event_time.ok_or_else(|| EngineError::Graph("event time".into()))?;
        let times = to_epoch_millis(full.column(spec.column))?;
        let judged = tracker.judge(&times);
        for &row in &judged.null_time_rows {
            ctx.bad_row(&format!("row {row} of a batch"), "event time is NULL");
        }
        let on_time = filter_record_batch(&full, &judged.on_time)?;
        let late_count = judged.late.true_count();
        let late = if late_count > 0 {
            let late_rows = filter_record_batch(&full, &judged.late)?;
            let mut wm = Vec::with_capacity(late_count);
            let mut lag = Vec::with_capacity(late_count);
            for i in 0..times.len() {
                if judged.late.value(i) {
                    wm.push(judged.watermark_ms[i]);
                    lag.push(judged.watermark_ms[i] - times.value(i));
                    self.max_late = self.max_late.max(times.value(i));
                }
            }
            let mut columns: Vec<ArrayRef> = late_rows.columns().to_vec();
            columns.push(Arc::new(Int64Array::from(wm)));
            columns.push(Arc::new(Int64Array::from(lag)));
            Some(RecordBatch::try_new(self.late_schema.clone(), columns)?)
        } else {
            None
        };
        let current = tracker.watermark();
        let watermark = (current > self.last_watermark).then(|| {
            self.last_watermark = current;
            current
        });
        let late_current =
            if self.max_late == WATERMARK_MIN { WATERMARK_MIN } else { self.max_late.saturating_sub(spec.bound_ms) };
        let late_watermark = (late_current > self.last_late_watermark).then(|| {
            self.last_late_watermark = late_current;
            late_current
        });
        Ok(SourceOutput { on_time: Some(on_time), late, watermark, late_watermark })
    }

    fn compute_columns(&self, raw: &RecordBatch) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.layout.columns.len());
        for (column, field) in self.layout.columns.iter().zip(self.layout.output_schema.fields()) {
            let array = match column {
                SourceColumn::Physical(i) => raw.column(*i).clone(),
                SourceColumn::Computed(computed) => {
                    let value = computed.expr.evaluate(raw)?.into_array(raw.num_rows())?;
                    if value.data_type() == field.data_type() {
                        value
                    } else {
                        datafusion::arrow::compute::cast(&value, field.data_type())?
                    }
                }
            };
            columns.push(array);
        }
        Ok(RecordBatch::try_new(self.layout.output_schema.clone(), columns)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker(bound: i64, lateness: i64) -> WatermarkTracker {
        WatermarkTracker::new(EventTimeSpec { column: 0, bound_ms: bound, allowed_lateness_ms: lateness })
    }

    fn late_rows(judged: &Judged) -> Vec<usize> {
        (0..judged.late.len()).filter(|&i| judged.late.value(i)).collect()
    }

    #[test]
    fn lateness_edges_without_allowed_lateness() {
        let mut t = tracker(2000, 0);
        // max 10_000 -> rows below 8_000 are late; exactly 8_000 is on time.
        let j = t.judge(&Int64Array::from(vec![10_000, 8_000, 7_999]));
        assert_eq!(late_rows(&j), vec![2]);
        assert_eq!(j.watermark_ms[2], 8_000);
        assert_eq!(t.watermark(), 8_000);
    }

    #[test]
    fn lateness_edges_with_allowed_lateness() {
        let mut t = tracker(2000, 2000);
        let j = t.judge(&Int64Array::from(vec![10_000, 6_000, 5_999, 12_000, 7_999]));
        assert_eq!(late_rows(&j), vec![2, 4]);
        assert_eq!(j.watermark_ms[2], 8_000);
        assert_eq!(j.watermark_ms[4], 10_000);
    }

    #[test]
    fn judgement_does_not_depend_on_batch_boundaries() {
        let times: Vec<i64> = vec![5, 1, 9, 3, 2, 15, 12, 4, 20, 13];
        let mut whole = tracker(3, 1);
        let expected = late_rows(&whole.judge(&Int64Array::from(times.clone())));
        for size in 1..times.len() {
            let mut t = tracker(3, 1);
            let mut got = Vec::new();
            for (k, chunk) in times.chunks(size).enumerate() {
                let j = t.judge(&Int64Array::from(chunk.to_vec()));
                got.extend(late_rows(&j).into_iter().map(|i| i + k * size));
            }
            assert_eq!(got, expected, "batch size {size}");
        }
    }
}
