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

use super::bad_rows::{raw_text, BadRow, BadRowPolicy, RowOrigins};
use super::layout::{SourceColumn, SourceLayout};
use super::watermark::WatermarkTracker;
use super::SourceContext;
use crate::error::{EngineError, Result};
use crate::time::{format_event_time, to_epoch_millis, Timestamp, WATERMARK_MIN};

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

    /// What the table does with bad rows.
    pub fn bad_row_policy(&self) -> BadRowPolicy {
        self.layout.bad_rows
    }

    /// The watermark last sent on port 0.
    pub fn watermark(&self) -> Timestamp {
        self.last_watermark
    }

    /// Turns one raw batch into on-time rows, late rows and a watermark.
    /// Rows that cannot be judged (a computed column fails on them, NULL
    /// event time, too far ahead) are reported as bad rows via `ctx`, with
    /// their position and text from `origins` when the connector gave them.
    pub fn process(
        &mut self,
        raw: &RecordBatch,
        origins: Option<&dyn RowOrigins>,
        ctx: &mut SourceContext,
    ) -> Result<SourceOutput> {
        let (full, kept) = self.compute_columns(raw, origins, ctx)?;
        let original = |row: usize| kept.as_ref().map_or(row, |k| k[row]);
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
        let time_column = self.layout.output_schema.field(spec.column).name();
        for &row in &judged.null_time_rows {
            let mut bad = origin_of(raw, origins, original(row), ctx.table());
            bad.column = Some(time_column.clone());
            bad.reason = format!("event time '{time_column}' is NULL");
            ctx.bad_row(bad);
        }
        for &row in &judged.out_of_range_rows {
            let mut bad = origin_of(raw, origins, original(row), ctx.table());
            bad.column = Some(time_column.clone());
            bad.reason = format!(
                "event time '{time_column}' ({} ms since 1970) is outside the years 0000 to 9999",
                times.value(row)
            );
            ctx.bad_row(bad);
        }
        for &(row, ahead) in &judged.future_rows {
            let mut bad = origin_of(raw, origins, original(row), ctx.table());
            bad.column = Some(time_column.clone());
            bad.reason = format!(
                "future timestamp: {} is {} ahead of the latest event time seen ({}), more than max_future_skew ({})",
                format_event_time(times.value(row)),
                format_duration_ms(ahead),
                format_event_time(times.value(row).saturating_sub(ahead)),
                format_duration_ms(spec.max_future_skew_ms.unwrap_or_default()),
            );
            ctx.bad_row(bad);
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
                    lag.push(judged.watermark_ms[i].saturating_sub(times.value(i)));
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

    /// The stream's columns for `raw`. When a computed column fails on the
    /// batch, the rows it fails on are reported bad and left out; the second
    /// value then maps each kept row to its row in `raw`.
    fn compute_columns(
        &self,
        raw: &RecordBatch,
        origins: Option<&dyn RowOrigins>,
        ctx: &mut SourceContext,
    ) -> Result<(RecordBatch, Option<Vec<usize>>)> {
        let computed = self
            .layout
            .columns
            .iter()
            .any(|c| matches!(c, SourceColumn::Computed(_)));
        match self.try_compute_columns(raw) {
            Ok(batch) => return Ok((batch, None)),
            Err(e) if !computed => return Err(e),
            Err(_) => {}
        }
        let mut kept = Vec::with_capacity(raw.num_rows());
        for row in 0..raw.num_rows() {
            match self.failing_column(&raw.slice(row, 1)) {
                None => kept.push(row),
                Some((column, error)) => {
                    let mut bad = origin_of(raw, origins, row, ctx.table());
                    bad.reason = format!("computed column '{column}': {error}");
                    bad.column = Some(column);
                    ctx.bad_row(bad);
                }
            }
        }
        let indices =
            datafusion::arrow::array::UInt32Array::from_iter_values(kept.iter().map(|&r| r as u32));
        let good = datafusion::arrow::compute::take_record_batch(raw, &indices)?;
        Ok((self.try_compute_columns(&good)?, Some(kept)))
    }

    /// The first computed column that cannot be evaluated on `row` (a
    /// one-row batch), with the error.
    fn failing_column(&self, row: &RecordBatch) -> Option<(String, String)> {
        for (column, field) in self
            .layout
            .columns
            .iter()
            .zip(self.layout.output_schema.fields())
        {
            if let SourceColumn::Computed(computed) = column {
                let value = computed
                    .expr
                    .evaluate(row)
                    .and_then(|v| v.into_array(1))
                    .map_err(EngineError::from)
                    .and_then(|v| {
                        if v.data_type() == field.data_type() {
                            Ok(v)
                        } else {
                            Ok(datafusion::arrow::compute::cast(&v, field.data_type())?)
                        }
                    });
                if let Err(e) = value {
                    return Some((field.name().clone(), e.to_string()));
                }
            }
        }
        None
    }

    fn try_compute_columns(&self, raw: &RecordBatch) -> Result<RecordBatch> {
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

/// Where row `row` of `raw` came from: from the connector's origins, or
/// else the row's decoded values as JSON.
fn origin_of(
    raw: &RecordBatch,
    origins: Option<&dyn RowOrigins>,
    row: usize,
    table: &str,
) -> BadRow {
    if let Some(origins) = origins {
        return origins.origin(row);
    }
    let mut text = Vec::new();
    {
        let mut writer = datafusion::arrow::json::LineDelimitedWriter::new(&mut text);
        let _ = writer.write(&raw.slice(row, 1));
        let _ = writer.finish();
    }
    while text.last() == Some(&b'\n') {
        text.pop();
    }
    BadRow {
        path: table.to_string(),
        line: None,
        offset: None,
        column: None,
        reason: String::new(),
        raw: raw_text(&text),
    }
}

/// `1d 2h 3m 4.005s`-style text for a span of milliseconds.
fn format_duration_ms(ms: i64) -> String {
    let mut rest = ms.unsigned_abs();
    let mut parts = Vec::new();
    for (unit, size) in [("d", 86_400_000u64), ("h", 3_600_000), ("m", 60_000)] {
        if rest >= size {
            parts.push(format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    if rest > 0 || parts.is_empty() {
        if rest.is_multiple_of(1000) {
            parts.push(format!("{}s", rest / 1000));
        } else {
            parts.push(format!("{}.{:03}s", rest / 1000, rest % 1000));
        }
    }
    parts.join(" ")
}
