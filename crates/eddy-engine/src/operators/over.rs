//! OVER aggregates per key in event-time order:
//! `f(...) OVER (PARTITION BY k ORDER BY <event time> <frame>)`.
//!
//! In: batches with an event-time column. Out: the same rows, released in
//! event-time order once the watermark guarantees no earlier row can still
//! arrive, each with one column per window function appended.
//!
//! ```text
//!   on_batch:      rows wait in `pending`
//!   on_watermark:  rows with t < W - allowed_lateness are released, sorted by
//!                  (t, arrival), and run through per-key state
//! ```
//!
//! State per key is what the functions need, never the history: one
//! DataFusion `Accumulator` per aggregate (running frames only), a counter
//! for `row_number`, the last `n` values for `lag(x, n)`.
//!
//! Frames: `ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW` (the row is
//! folded in, then the value read), `... AND 1 PRECEDING` (read, then fold:
//! the value over earlier rows only; a key's first row has an empty frame
//! and gets the aggregate's default value, NULL for most, 0 for `count`,
//! exactly as DataFusion's batch window functions) and `RANGE BETWEEN UNBOUNDED PRECEDING
//! AND CURRENT ROW` (SQL's default with ORDER BY: rows with equal event time
//! are peers and see each other).

use std::collections::VecDeque;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, UInt32Array};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, lexsort_to_indices, not, take_record_batch, SortColumn};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::row::RowConverter;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::PhysicalExpr;
use hashbrown::HashMap;

use crate::error::{EngineError, Result};
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MAX};

/// Which rows an aggregate sees for the current row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// All earlier rows and this one (`ROWS ... AND CURRENT ROW`).
    UpToCurrentRow,
    /// All earlier rows (`ROWS ... AND 1 PRECEDING`).
    BeforeCurrentRow,
    /// All earlier rows and every row with the same event time (`RANGE ... AND CURRENT ROW`).
    UpToPeers,
}

/// One window function of an OVER node.
#[derive(Debug, Clone)]
pub enum OverFunction {
    /// A running aggregate.
    Aggregate {
        /// The DataFusion aggregate.
        expr: Arc<AggregateFunctionExpr>,
        /// Its `FILTER (WHERE ...)`.
        filter: Option<Arc<dyn PhysicalExpr>>,
        /// Its frame.
        frame: Frame,
    },
    /// `row_number()`.
    RowNumber,
    /// `lag(value, offset, default)`.
    Lag {
        /// The value expression.
        value: Arc<dyn PhysicalExpr>,
        /// How many rows back.
        offset: usize,
        /// Value while fewer rows precede.
        default: ScalarValue,
    },
}

/// Plan of an OVER node.
#[derive(Debug, Clone)]
pub struct OverPlan {
    /// Input schema.
    pub input_schema: SchemaRef,
    /// Input columns then one column per function.
    pub output_schema: SchemaRef,
    /// PARTITION BY expressions.
    pub partition_by: Vec<Arc<dyn PhysicalExpr>>,
    /// The event-time column (ORDER BY).
    pub time_column: usize,
    /// Allowed lateness of the input's event time.
    pub allowed_lateness_ms: i64,
    /// The window functions.
    pub functions: Vec<OverFunction>,
}

impl OperatorPlan for OverPlan {
    fn kind(&self) -> &'static str {
        "over"
    }

    fn describe(&self) -> String {
        let functions: Vec<String> = self
            .functions
            .iter()
            .map(|f| match f {
                OverFunction::Aggregate { expr, frame, .. } => format!("{} {frame:?}", expr.name()),
                OverFunction::RowNumber => "row_number()".to_string(),
                OverFunction::Lag { value, offset, .. } => format!("lag({value}, {offset})"),
            })
            .collect();
        format!(
            "ordered by {} (released at watermark > t + {}ms): [{}]",
            self.input_schema.field(self.time_column).name(),
            self.allowed_lateness_ms,
            functions.join(", ")
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    fn partition_keys(&self) -> Vec<Arc<dyn PhysicalExpr>> {
        self.partition_by.clone()
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(OverOperator {
            plan: self.clone(),
            converter: super::key_converter(&self.partition_by, &self.input_schema)?,
            pending: Vec::new(),
            pending_rows: 0,
            keys: HashMap::new(),
        }))
    }
}

/// Per-key state of every function.
struct KeyState {
    accumulators: Vec<Option<Box<dyn Accumulator>>>,
    /// Rows of the key each function has seen (an empty frame reads as the
    /// aggregate's default value, as in DataFusion's batch window functions).
    seen: Vec<u64>,
    rows: i64,
    lags: Vec<VecDeque<ScalarValue>>,
}

struct OverOperator {
    plan: OverPlan,
    converter: RowConverter,
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    keys: HashMap<Vec<u8>, KeyState>,
}

impl OverOperator {
    fn new_key_state(&self) -> Result<KeyState> {
        let accumulators = self
            .plan
            .functions
            .iter()
            .map(|f| match f {
                OverFunction::Aggregate { expr, .. } => expr.create_accumulator().map(Some),
                _ => Ok(None),
            })
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let functions = self.plan.functions.len();
        Ok(KeyState { accumulators, seen: vec![0; functions], rows: 0, lags: vec![VecDeque::new(); functions] })
    }

    /// Runs released rows (sorted by time, arrival) through the functions.
    fn process(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let n = batch.num_rows();
        let eval = |e: &Arc<dyn PhysicalExpr>| -> Result<ArrayRef> { Ok(e.evaluate(&batch)?.into_array(n)?) };
        let (keys, _) = super::key_rows(&self.converter, &self.plan.partition_by, &batch)?;
        let times = to_epoch_millis(batch.column(self.plan.time_column))?;
        let mut args: Vec<Vec<ArrayRef>> = Vec::with_capacity(self.plan.functions.len());
        let mut filters: Vec<Option<BooleanArray>> = Vec::with_capacity(self.plan.functions.len());
        for f in &self.plan.functions {
            match f {
                OverFunction::Aggregate { expr, filter, .. } => {
                    args.push(expr.expressions().iter().map(eval).collect::<Result<_>>()?);
                    let filter = match filter {
                        Some(e) => Some(
                            eval(e)?
                                .as_any()
                                .downcast_ref::<BooleanArray>()
                                .cloned()
                                .ok_or_else(|| EngineError::operator("over", "FILTER clause is not boolean"))?,
                        ),
                        None => None,
                    };
                    filters.push(filter);
                }
                OverFunction::Lag { value, .. } => {
                    args.push(vec![eval(value)?]);
                    filters.push(None);
                }
                OverFunction::RowNumber => {
                    args.push(Vec::new());
                    filters.push(None);
                }
            }
        }
        let mut values: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(n); self.plan.functions.len()];
        for value in values.iter_mut() {
            value.resize(n, ScalarValue::Null);
        }
        let mut start = 0;
        while start < n {
            // A run of peers: rows with the same event time.
            let t = times.value(start);
            let mut end = start + 1;
            while end < n && times.value(end) == t {
                end += 1;
            }
            for row in start..end {
                let key = keys.row(row);
                if !self.keys.contains_key(key.as_ref()) {
                    let state = self.new_key_state()?;
                    self.keys.insert(key.as_ref().to_vec(), state);
                }
            }
            for (f, function) in self.plan.functions.iter().enumerate() {
                let fold = |state: &mut KeyState, row: usize| -> Result<()> {
                    if filters[f].as_ref().is_some_and(|m| !m.is_valid(row) || !m.value(row)) {
                        return Ok(());
                    }
                    if let Some(acc) = state.accumulators[f].as_mut() {
                        let slice: Vec<ArrayRef> = args[f].iter().map(|a| a.slice(row, 1)).collect();
                        acc.update_batch(&slice)?;
                    }
                    Ok(())
                };
                let read = |state: &mut KeyState| -> Result<ScalarValue> {
                    match state.accumulators[f].as_mut() {
                        Some(acc) => Ok(acc.evaluate()?),
                        None => Err(EngineError::operator("over", "missing accumulator")),
                    }
                };
                match function {
                    OverFunction::Aggregate { frame: Frame::UpToPeers, .. } => {
                        for row in start..end {
                            if let Some(state) = self.keys.get_mut(keys.row(row).as_ref()) {
                                fold(state, row)?;
                            }
                        }
                        for row in start..end {
                            if let Some(state) = self.keys.get_mut(keys.row(row).as_ref()) {
                                values[f][row] = read(state)?;
                            }
                        }
                    }
                    OverFunction::Aggregate { frame, expr, .. } => {
                        for row in start..end {
                            let Some(state) = self.keys.get_mut(keys.row(row).as_ref()) else { continue };
                            if *frame == Frame::UpToCurrentRow {
                                fold(state, row)?;
                                values[f][row] = read(state)?;
                            } else {
                                values[f][row] = if state.seen[f] == 0 {
                                    expr.fun().default_value(expr.field().data_type())?
                                } else {
                                    read(state)?
                                };
                                fold(state, row)?;
                            }
                            state.seen[f] += 1;
                        }
                    }
                    OverFunction::RowNumber => {
                        for row in start..end {
                            let Some(state) = self.keys.get_mut(keys.row(row).as_ref()) else { continue };
                            state.rows += 1;
                            values[f][row] = ScalarValue::UInt64(Some(state.rows as u64));
                        }
                    }
                    OverFunction::Lag { offset, default, .. } => {
                        for row in start..end {
                            let Some(state) = self.keys.get_mut(keys.row(row).as_ref()) else { continue };
                            let history = &mut state.lags[f];
                            values[f][row] =
                                if history.len() == *offset { history.front().cloned().unwrap_or(default.clone()) } else { default.clone() };
                            history.push_back(ScalarValue::try_from_array(args[f][0].as_ref(), row)?);
                            if history.len() > *offset {
                                history.pop_front();
                            }
                        }
                    }
                }
            }
            start = end;
        }
        let mut columns = batch.columns().to_vec();
        let base = columns.len();
        for (f, column) in values.into_iter().enumerate() {
            let field = self.plan.output_schema.field(base + f);
            let array = if column.is_empty() {
                datafusion::arrow::array::new_empty_array(field.data_type())
            } else {
                ScalarValue::iter_to_array(column)?
            };
            let array = if array.data_type() == field.data_type() {
                array
            } else {
                datafusion::arrow::compute::cast(&array, field.data_type())?
            };
            columns.push(array);
        }
        Ok(RecordBatch::try_new_with_options(
            self.plan.output_schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )?)
    }
}

impl Operator for OverOperator {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, _out: &mut Collector) -> Result<()> {
        self.pending_rows += batch.num_rows();
        self.pending.push(batch);
        Ok(())
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // Split each pending batch on its own (never concatenating what stays:
        // a string-view column would keep every earlier batch's buffers alive).
        let horizon =
            if watermark == WATERMARK_MAX { WATERMARK_MAX } else { watermark.saturating_sub(self.plan.allowed_lateness_ms) };
        let mut released_parts = Vec::new();
        let mut kept = Vec::new();
        for batch in std::mem::take(&mut self.pending) {
            let times = to_epoch_millis(batch.column(self.plan.time_column))?;
            let release: BooleanArray = if watermark == WATERMARK_MAX {
                BooleanArray::from(vec![true; batch.num_rows()])
            } else {
                times.iter().map(|t| Some(t.is_some_and(|t| t < horizon))).collect()
            };
            match release.true_count() {
                0 => kept.push(batch),
                n if n == batch.num_rows() => released_parts.push(batch),
                _ => {
                    released_parts.push(filter_record_batch(&batch, &release)?);
                    kept.push(filter_record_batch(&batch, &not(&release)?)?);
                }
            }
        }
        self.pending_rows = kept.iter().map(RecordBatch::num_rows).sum();
        self.pending = kept;
        if released_parts.is_empty() {
            return Ok(());
        }
        let released = concat_batches(&self.plan.input_schema, &released_parts)?;
        // Sort by (event time, arrival order).
        let released_times: ArrayRef = Arc::new(to_epoch_millis(released.column(self.plan.time_column))?);
        let arrival: ArrayRef = Arc::new(UInt32Array::from_iter_values(0..released.num_rows() as u32));
        let order = lexsort_to_indices(
            &[SortColumn { values: released_times, options: None }, SortColumn { values: arrival, options: None }],
            None,
        )?;
        let sorted = take_record_batch(&released, &order)?;
        // Rows without an event time cannot be ordered; they were counted as bad at the source.
        let sorted = if sorted.column(self.plan.time_column).null_count() > 0 {
            let valid = datafusion::arrow::compute::is_not_null(sorted.column(self.plan.time_column))?;
            filter_record_batch(&sorted, &valid)?
        } else {
            sorted
        };
        out.emit(self.process(sorted)?);
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.pending_rows + self.keys.len()
    }
}

