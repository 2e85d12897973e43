//! The per-run state of a source node: computes columns, judges lateness,
//! tracks the watermarks of the on-time and the late stream.
//!
//! In: raw connector batches. Out: a [`SourceOutput`] per batch. Its state
//! ([`SourceRunnerState`]: the largest event time seen and the watermarks
//! already sent) is part of every checkpoint, so a resumed source judges
//! lateness exactly as the uninterrupted one would have.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int64Array, RecordBatch};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use serde::{Deserialize, Serialize};

use super::layout::{SourceColumn, SourceLayout};
use super::watermark::WatermarkTracker;
use super::SourceContext;
use crate::error::{EngineError, Result};
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MIN};

/// What a source runner checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRunnerState {
    /// Largest on-time event time seen.
    pub max_seen: Timestamp,
    /// Watermark last sent on the main port.
    pub last_watermark: Timestamp,
    /// Largest late event time seen.
    pub max_late: Timestamp,
    /// Watermark last sent on the late port.
    pub last_late_watermark: Timestamp,
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

    /// The state to checkpoint.
    pub fn state(&self) -> SourceRunnerState {
        SourceRunnerState {
            max_seen: self.tracker.map(|t| t.max_seen()).unwrap_or(WATERMARK_MIN),
            last_watermark: self.last_watermark,
            max_late: self.max_late,
            last_late_watermark: self.last_late_watermark,
        }
    }

    /// Continues from a checkpointed state.
    pub fn restore(&mut self, state: &SourceRunnerState) {
        self.tracker = self
            .layout
            .event_time
            .map(|spec| WatermarkTracker::resumed(spec, state.max_seen));
        self.last_watermark = state.last_watermark;
        self.max_late = state.max_late;
        self.last_late_watermark = state.last_late_watermark;
    }

    /// The watermark last sent on port 0.
    pub fn watermark(&self) -> Timestamp {
        self.last_watermark
    }

    /// Turns one raw batch into on-time rows, late rows and a watermark.
    /// Rows with a NULL event time are reported as bad rows via `ctx`.
    pub fn process(&mut self, raw: &RecordBatch, ctx: &mut SourceContext) -> Result<SourceOutput> {
        let full = self.compute_columns(raw)?;
        let Some(tracker) = self.tracker.as_mut() else {
            return Ok(SourceOutput {
                on_time: Some(full),
                late: None,
                watermark: None,
                late_watermark: None,
            });
        };
        let spec = self
            .layout
            .event_time
            .ok_or_else(|| EngineError::Graph("event time".into()))?;
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
        let late_current = if self.max_late == WATERMARK_MIN {
            WATERMARK_MIN
        } else {
            self.max_late.saturating_sub(spec.bound_ms)
        };
        let late_watermark = (late_current > self.last_late_watermark).then(|| {
            self.last_late_watermark = late_current;
            late_current
        });
        Ok(SourceOutput {
            on_time: Some(on_time),
            late,
            watermark,
            late_watermark,
        })
    }

    fn compute_columns(&self, raw: &RecordBatch) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.layout.columns.len());
        for (column, field) in self
            .layout
            .columns
            .iter()
            .zip(self.layout.output_schema.fields())
        {
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
        Ok(RecordBatch::try_new(
            self.layout.output_schema.clone(),
            columns,
        )?)
    }
}
