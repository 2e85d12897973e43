//! The per-run state of a source node: computes columns, judges lateness,
//! tracks the watermarks of the on-time and the late stream. Rows behind
//! the watermark less the allowed lateness go to `late_rows(table)`, and
//! (`late_rows = 'keep'`, the default) on to the queries as well, each
//! marked with the watermark that judged it.
//!
//! In: raw connector batches. Out: a [`SourceOutput`] per batch. Its state
//! ([`SourceRunnerState`]: the largest event time seen and the watermarks
//! already sent) is part of every checkpoint, so a resumed source judges
//! lateness exactly as the uninterrupted one would have.
//!
//! A partitioned input (Kafka) reads several splits: each split has its
//! own watermark tracker, its rows are judged late against it (and the
//! source watermark already sent), and the source's watermark is the least
//! over the splits that are neither finished nor idle for `idle_timeout`.
//! A file is one split, and everything reduces to one tracker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{Array, ArrayRef, Int64Array, RecordBatch};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use serde::{Deserialize, Serialize};

use super::bad_rows::{raw_text, BadRow, BadRowPolicy, RowOrigins};
use super::feed_table::FeedTable;
use super::layout::{EventTimeSpec, LatePolicy, SourceColumn, SourceLayout};
use super::watermark::WatermarkTracker;
use super::{SourceContext, SplitEvents};
use crate::error::{EngineError, Result};
use crate::message::LateBatch;
use crate::time::{format_event_time, to_epoch_millis, Timestamp, WATERMARK_MIN};

/// What a source runner checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRunnerState {
    /// Largest on-time event time seen (over all splits).
    pub max_seen: Timestamp,
    /// Largest on-time event time seen per split, and whether the split
    /// was read to its end (partitioned sources).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub splits: Vec<SplitState>,
    /// Watermark last sent on the main port.
    pub last_watermark: Timestamp,
    /// Largest late event time seen.
    pub max_late: Timestamp,
    /// Watermark last sent on the late port.
    pub last_late_watermark: Timestamp,
}

/// One split's checkpointed clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitState {
    /// The split (a Kafka partition).
    pub split: u32,
    /// Largest on-time event time seen in it.
    pub max_seen: Timestamp,
    /// Read to its end.
    #[serde(default)]
    pub finished: bool,
}

/// The clock of one split.
#[derive(Debug, Clone, Copy)]
struct SplitClock {
    tracker: WatermarkTracker,
    last_input: Instant,
    finished: bool,
}

/// The split of a source that has no partitions.
const ONLY_SPLIT: u32 = 0;

/// Output of [`SourceRunner::process`].
#[derive(Debug, Default)]
pub struct SourceOutput {
    /// Rows that continue on port 0.
    pub on_time: Option<RecordBatch>,
    /// Late rows with `watermark_ms` and `lag_ms` (port 1).
    pub late: Option<RecordBatch>,
    /// The same late rows as they go on to the queries (port 0, after the
    /// on-time rows), each with the watermark that judged it, when the
    /// table keeps late rows ([`LatePolicy::Keep`]).
    pub late_kept: Option<LateBatch>,
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
    /// Per split; empty until a split is opened or read (and always empty
    /// without event time).
    splits: BTreeMap<u32, SplitClock>,
    last_watermark: Timestamp,
    max_late: Timestamp,
    last_late_watermark: Timestamp,
    /// A Debezium feed's table (made on first use; boxed, as most sources
    /// have none).
    feed: Option<Box<FeedTable>>,
}

impl SourceRunner {
    /// Creates the runner for `layout`.
    pub fn new(layout: SourceLayout) -> Self {
        let late_schema = layout.late_schema();
        Self {
            layout,
            late_schema,
            splits: BTreeMap::new(),
            last_watermark: WATERMARK_MIN,
            max_late: WATERMARK_MIN,
            last_late_watermark: WATERMARK_MIN,
            feed: None,
        }
    }

    /// A Debezium feed's table of current rows, made on first use; `None`
    /// for other sources.
    fn feed_table(&mut self) -> Result<Option<&mut FeedTable>> {
        let Some(key) = &self.layout.change_feed_key else {
            return Ok(None);
        };
        if self.feed.is_none() {
            self.feed = Some(Box::new(FeedTable::new(
                self.layout.output_schema.clone(),
                key.clone(),
            )?));
        }
        Ok(self.feed.as_deref_mut())
    }

    /// A Debezium feed's held rows as a checkpoint table named `name`:
    /// whole, or with `incremental` possibly only the keys changed since
    /// the previous such call ([`FeedTable::snapshot_incremental`]).
    pub fn feed_snapshot(
        &mut self,
        name: &str,
        incremental: bool,
    ) -> Result<Option<(RecordBatch, Option<crate::state::KeyedTable>)>> {
        let Some(feed) = self.feed.as_deref_mut() else {
            return Ok(None);
        };
        if incremental {
            let (table, keyed) = feed.snapshot_incremental(name)?;
            Ok(Some((table, Some(keyed))))
        } else {
            Ok(Some((feed.snapshot()?, None)))
        }
    }

    /// Holds a Debezium feed's rows from a checkpoint table.
    pub fn restore_feed(&mut self, table: &RecordBatch) -> Result<()> {
        match self.feed_table()? {
            Some(feed) => feed.restore(table),
            None => Err(EngineError::State(
                "the checkpoint holds a change feed's rows for a source that reads none".into(),
            )),
        }
    }

    /// Keys and bytes a Debezium feed's table holds.
    pub fn feed_size(&self) -> (usize, usize) {
        self.feed.as_ref().map_or((0, 0), |f| (f.len(), f.size()))
    }

    /// The state to checkpoint.
    pub fn state(&self) -> SourceRunnerState {
        let partitioned = self.splits.len() > 1 || self.splits.keys().any(|&s| s != ONLY_SPLIT);
        SourceRunnerState {
            max_seen: self
                .splits
                .values()
                .map(|c| c.tracker.max_seen())
                .max()
                .unwrap_or(WATERMARK_MIN),
            splits: if partitioned {
                self.splits
                    .iter()
                    .map(|(&split, clock)| SplitState {
                        split,
                        max_seen: clock.tracker.max_seen(),
                        finished: clock.finished,
                    })
                    .collect()
            } else {
                Vec::new()
            },
            last_watermark: self.last_watermark,
            max_late: self.max_late,
            last_late_watermark: self.last_late_watermark,
        }
    }

    /// Continues from a checkpointed state.
    pub fn restore(&mut self, state: &SourceRunnerState) {
        self.splits.clear();
        if let Some(spec) = self.layout.event_time {
            let now = Instant::now();
            let clock = |max_seen, finished| SplitClock {
                tracker: WatermarkTracker::resumed(spec, max_seen),
                last_input: now,
                finished,
            };
            if state.splits.is_empty() {
                if state.max_seen != WATERMARK_MIN {
                    self.splits.insert(ONLY_SPLIT, clock(state.max_seen, false));
                }
            } else {
                for split in &state.splits {
                    self.splits
                        .insert(split.split, clock(split.max_seen, split.finished));
                }
            }
        }
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

    /// Takes note of what the reader said about its splits (before the
    /// batch that came with it is processed).
    pub fn split_events(&mut self, events: &SplitEvents) {
        let Some(spec) = self.layout.event_time else {
            return;
        };
        let now = Instant::now();
        for &split in events.opened.iter().chain(events.current.iter()) {
            self.clock(Some(split), spec, now);
        }
        for split in &events.finished {
            if let Some(clock) = self.splits.get_mut(split) {
                clock.finished = true;
            }
        }
    }

    /// The source's watermark now: the least over the splits neither
    /// finished nor idle. When every unfinished split is idle, the greatest
    /// of theirs: the watermark the source would have reached had they gone
    /// idle one after another while the others still read (`None` when
    /// every split is finished).
    fn combined_watermark(&self, now: Instant) -> Option<Timestamp> {
        let idle_after = self.layout.idle_timeout;
        let live = || self.splits.values().filter(|c| !c.finished);
        live()
            .filter(|c| idle_after.is_none_or(|t| now.duration_since(c.last_input) < t))
            .map(|c| c.tracker.watermark())
            .min()
            .or_else(|| live().map(|c| c.tracker.watermark()).max())
    }

    /// Takes a watermark the reader carried in its input
    /// ([`SourceContext::advance_watermark`]); the new watermark if it is
    /// past the last one sent.
    pub fn carried_watermark(&mut self, watermark: Timestamp) -> Option<Timestamp> {
        (watermark > self.last_watermark).then(|| {
            self.last_watermark = watermark;
            watermark
        })
    }

    /// When the next split that still reads goes idle by the idle timeout
    /// (the watermark may then advance: call [`Self::tick`]); `None` when
    /// no split will.
    pub fn next_idle_at(&self) -> Option<Instant> {
        let after = self.layout.idle_timeout?;
        let now = Instant::now();
        self.splits
            .values()
            .filter(|c| !c.finished)
            .map(|c| c.last_input + after)
            .filter(|&at| at > now)
            .min()
    }

    /// Re-reads the watermark as time passes (a split that goes idle stops
    /// holding the others back); the new watermark if it advanced.
    pub fn tick(&mut self) -> Option<Timestamp> {
        let current = self.combined_watermark(Instant::now())?;
        (current > self.last_watermark).then(|| {
            self.last_watermark = current;
            current
        })
    }

    /// Turns one raw batch into on-time rows, late rows and a watermark.
    /// Rows that cannot be judged (a computed column fails on them, NULL
    /// event time, too far ahead) are reported as bad rows via `ctx`, with
    /// their position and text from `origins` when the connector gave them.
    pub fn process(
        &mut self,
        raw: &RecordBatch,
        split: Option<u32>,
        origins: Option<&dyn RowOrigins>,
        ctx: &mut SourceContext,
    ) -> Result<SourceOutput> {
        let (full, kept) = self.compute_columns(raw, origins, ctx)?;
        let original = |row: usize| kept.as_ref().map_or(row, |k| k[row]);
        // A Debezium feed's changes, checked against its table (its rows
        // are never judged late below, so `original` still maps them).
        let full = match self.feed_table()? {
            Some(feed) => {
                let applied = feed.apply(&full)?;
                for (row, reason) in applied.bad {
                    let mut bad = origin_of(raw, origins, original(row), ctx.table());
                    bad.reason = reason;
                    ctx.bad_row(bad);
                }
                applied.rows
            }
            None => full,
        };
        let Some(spec) = self.layout.event_time else {
            return Ok(SourceOutput {
                on_time: Some(full),
                ..Default::default()
            });
        };
        let now = Instant::now();
        let floor = self.last_watermark;
        let clock = self.clock(split, spec, now);
        clock.last_input = now;
        let times = to_epoch_millis(full.column(spec.column))?;
        let judged = clock.tracker.judge_above(&times, floor);
        if crate::changelog::is_updating(&self.layout.output_schema) {
            // A change feed's rows all go on: dropping a late or untimed
            // change would leave its old row behind downstream. Its
            // watermark only says how far its event time has come.
            let watermark = self.tick();
            return Ok(SourceOutput {
                on_time: Some(full),
                watermark,
                ..Default::default()
            });
        }
        let table = ctx.table().to_string();
        self.report_untimed(
            &judged,
            &times,
            spec,
            &|row| origin_of(raw, origins, original(row), &table),
            ctx,
        );
        let on_time = filter_record_batch(&full, &judged.on_time)?;
        let late_count = judged.late.true_count();
        let mut late_kept = None;
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
            let wm = Int64Array::from(wm);
            columns.push(Arc::new(wm.clone()));
            columns.push(Arc::new(Int64Array::from(lag)));
            if spec.late_rows == LatePolicy::Keep {
                late_kept = Some(LateBatch::new(late_rows, wm)?);
            }
            Some(RecordBatch::try_new(self.late_schema.clone(), columns)?)
        } else {
            None
        };
        let watermark = self.tick();
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
            late_kept,
            watermark,
            late_watermark,
        })
    }

    /// Takes rows the reader skipped (see [`SourceContext::skipped`]) as
    /// [`SourceRunner::process`] would have, except that none is sent on:
    /// their event times count toward the event time seen of `split`, and
    /// a row that `process` would have found bad (a computed column fails
    /// on it, its event time is NULL, out of range or too far ahead) is
    /// reported bad through `ctx` with the columns it has. Returns how
    /// many were.
    pub fn observe_skipped(
        &mut self,
        skipped: &RecordBatch,
        split: Option<u32>,
        ctx: &mut SourceContext,
    ) -> Result<usize> {
        let mut bad = 0;
        let computed_ok = self.layout.columns.iter().all(|c| match c {
            SourceColumn::Physical(_) => true,
            SourceColumn::Computed(computed) => computed
                .expr
                .evaluate(skipped)
                .and_then(|v| v.into_array(skipped.num_rows()))
                .is_ok(),
        });
        let kept = if computed_ok {
            None
        } else {
            let mut kept = Vec::with_capacity(skipped.num_rows());
            for row in 0..skipped.num_rows() {
                match self.failing_column(&skipped.slice(row, 1)) {
                    None => kept.push(row),
                    Some((column, error)) => {
                        let mut report = origin_of(skipped, None, row, ctx.table());
                        report.reason = format!("computed column '{column}': {error}");
                        report.column = Some(column);
                        ctx.bad_row(report);
                        bad += 1;
                    }
                }
            }
            Some(kept)
        };
        let Some(spec) = self.layout.event_time else {
            return Ok(bad);
        };
        let rows = match &kept {
            None => skipped.clone(),
            Some(kept) => datafusion::arrow::compute::take_record_batch(
                skipped,
                &datafusion::arrow::array::UInt32Array::from_iter_values(
                    kept.iter().map(|&r| r as u32),
                ),
            )?,
        };
        let field = self.layout.output_schema.field(spec.column);
        let time = match &self.layout.columns[spec.column] {
            SourceColumn::Physical(i) => rows.column(*i).clone(),
            SourceColumn::Computed(computed) => computed
                .expr
                .evaluate(&rows)
                .and_then(|v| v.into_array(rows.num_rows()))?,
        };
        let time = if time.data_type() == field.data_type() {
            time
        } else {
            datafusion::arrow::compute::cast(&time, field.data_type())?
        };
        let times = to_epoch_millis(&time)?;
        let floor = self.last_watermark;
        let judged = self
            .clock(split, spec, Instant::now())
            .tracker
            .judge_above(&times, floor);
        let original = |row: usize| kept.as_ref().map_or(row, |k| k[row]);
        bad +=
            judged.null_time_rows.len() + judged.out_of_range_rows.len() + judged.future_rows.len();
        let table = ctx.table().to_string();
        self.report_untimed(
            &judged,
            &times,
            spec,
            &|row| origin_of(skipped, None, original(row), &table),
            ctx,
        );
        Ok(bad)
    }

    /// Reports the rows `judged` found without a usable event time (NULL,
    /// out of range, too far ahead) as bad, each located by `origin`.
    fn report_untimed(
        &self,
        judged: &super::watermark::Judged,
        times: &Int64Array,
        spec: EventTimeSpec,
        origin: &dyn Fn(usize) -> BadRow,
        ctx: &mut SourceContext,
    ) {
        let time_column = self.layout.output_schema.field(spec.column).name();
        for &row in &judged.null_time_rows {
            let mut bad = origin(row);
            bad.column = Some(time_column.clone());
            bad.reason = format!("event time '{time_column}' is NULL");
            ctx.bad_row(bad);
        }
        for &row in &judged.out_of_range_rows {
            let mut bad = origin(row);
            bad.column = Some(time_column.clone());
            bad.reason = format!(
                "event time '{time_column}' ({} ms since 1970) is outside the years 0000 to 9999",
                times.value(row)
            );
            ctx.bad_row(bad);
        }
        for &(row, ahead) in &judged.future_rows {
            let mut bad = origin(row);
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
    }

    /// The clock of `split` (made when first seen, at `now`).
    fn clock(&mut self, split: Option<u32>, spec: EventTimeSpec, now: Instant) -> &mut SplitClock {
        self.splits
            .entry(split.unwrap_or(ONLY_SPLIT))
            .or_insert(SplitClock {
                tracker: WatermarkTracker::new(spec),
                last_input: now,
                finished: false,
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

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::TimestampMillisecondArray;
    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    use super::*;

    fn runner() -> SourceRunner {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        )]));
        SourceRunner::new(SourceLayout {
            physical_schema: schema.clone(),
            output_schema: schema,
            columns: vec![SourceColumn::Physical(0)],
            event_time: Some(EventTimeSpec {
                column: 0,
                bound_ms: 1_000,
                allowed_lateness_ms: 0,
                max_future_skew_ms: None,
                late_rows: Default::default(),
            }),
            idle_timeout: None,
            bad_rows: Default::default(),
            change_feed_key: None,
        })
    }

    fn rows(times: &[i64]) -> RecordBatch {
        let runner = runner();
        RecordBatch::try_new(
            runner.layout.physical_schema.clone(),
            vec![Arc::new(TimestampMillisecondArray::from(times.to_vec()))],
        )
        .unwrap()
    }

    /// Rows a reader skipped raise the event time seen, so a later row is
    /// late exactly as it would be had they been read; they are not sent.
    #[test]
    fn skipped_rows_count_toward_lateness_and_nothing_else() {
        let mut ctx = SourceContext::new("t");
        let mut runner = runner();
        runner
            .process(&rows(&[1_000]), None, None, &mut ctx)
            .unwrap();
        assert_eq!(
            runner
                .observe_skipped(&rows(&[60_000]), None, &mut ctx)
                .unwrap(),
            0
        );
        let out = runner
            .process(&rows(&[5_000, 59_500]), None, None, &mut ctx)
            .unwrap();
        assert_eq!(out.on_time.unwrap().num_rows(), 1);
        assert_eq!(out.late.unwrap().num_rows(), 1);
        assert_eq!(out.watermark, Some(59_000));
        assert!(ctx.take_bad_rows().is_empty());
    }

    /// A skipped row without a usable event time is bad, as it would be had
    /// it been read; it moves nothing.
    #[test]
    fn skipped_rows_without_a_usable_event_time_are_reported_bad() {
        let mut ctx = SourceContext::new("t");
        let mut runner = runner();
        runner.layout.event_time = runner.layout.event_time.map(|spec| EventTimeSpec {
            max_future_skew_ms: Some(10_000),
            ..spec
        });
        runner
            .process(&rows(&[1_000]), None, None, &mut ctx)
            .unwrap();
        let nullable = Arc::new(Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        )]));
        let skipped = RecordBatch::try_new(
            nullable,
            vec![Arc::new(TimestampMillisecondArray::from(vec![
                None,
                Some(100_000),
                Some(2_000),
            ]))],
        )
        .unwrap();
        assert_eq!(runner.observe_skipped(&skipped, None, &mut ctx).unwrap(), 2);
        let bad = ctx.take_bad_rows();
        assert!(bad[0].reason.contains("is NULL"), "{}", bad[0].reason);
        assert!(
            bad[1].reason.contains("future timestamp"),
            "{}",
            bad[1].reason
        );
        // The future row did not move the watermark; the last one did.
        let out = runner
            .process(&rows(&[1_500]), None, None, &mut ctx)
            .unwrap();
        assert_eq!(out.on_time.unwrap().num_rows(), 1);
        assert_eq!(out.watermark, Some(1_000));
    }
}
