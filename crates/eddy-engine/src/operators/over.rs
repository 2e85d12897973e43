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
//! State time-to-live (`SET 'table.exec.state.ttl'`): a key whose last row is
//! more than the TTL of event time before its next one starts that row from
//! empty state, exactly as if it had never been seen; keys idle that long
//! are dropped from memory as the watermark passes them (a sweep every half
//! TTL of event time), so state stays bounded by the keys active within
//! the TTL.
//!
//! Checkpoints: table `pending` (rows waiting for the watermark), table
//! `keys` (per key: its key bytes, last event time, row count, and per
//! function the rows seen and the accumulator's intermediate state), and a
//! table `lag<f>` per `lag` function with each key's remembered values.
//!
//! Sliding frames, `RANGE BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW`
//! and `ROWS BETWEEN n PRECEDING AND CURRENT ROW`, use DataFusion's sliding
//! accumulators: each key keeps the rows in its frame (time and argument
//! values) and takes them back out (`retract_batch`) as they leave. A
//! checkpoint keeps those rows (table `frame<f>`) and, for sums, counts,
//! averages and variances, the accumulator's state (table `slide<f>`), so a
//! restore continues bit for bit; min and max are rebuilt from the rows.
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

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Int64Array, UInt32Array, UInt64Array,
};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, not, take_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::row::RowConverter;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::PhysicalExpr;
use hashbrown::HashMap;

use crate::error::{EngineError, Result};
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::state::{scalars_to_array, StateSnapshot};
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MAX, WATERMARK_MIN};

/// Which rows an aggregate sees for the current row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// All earlier rows and this one (`ROWS ... AND CURRENT ROW`).
    UpToCurrentRow,
    /// All earlier rows (`ROWS ... AND 1 PRECEDING`).
    BeforeCurrentRow,
    /// All earlier rows and every row with the same event time (`RANGE ... AND CURRENT ROW`).
    UpToPeers,
    /// Rows of the last `range_ms` of event time, peers included (`RANGE
    /// BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW`): rows leave the
    /// accumulator (`retract_batch`) as they fall out of the range.
    RangePreceding {
        /// How far back the frame reaches.
        range_ms: i64,
    },
    /// This row and the `rows` before it (`ROWS BETWEEN n PRECEDING AND
    /// CURRENT ROW`).
    RowsPreceding {
        /// How many earlier rows.
        rows: usize,
    },
}

impl Frame {
    /// Whether rows leave the frame again (the accumulator must retract).
    pub fn slides(&self) -> bool {
        matches!(
            self,
            Frame::RangePreceding { .. } | Frame::RowsPreceding { .. }
        )
    }

    /// Whether the row's value is read only once all its peers are in.
    fn reads_after_peers(&self) -> bool {
        matches!(self, Frame::UpToPeers | Frame::RangePreceding { .. })
    }
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
    /// Drop a key's state after this much event time without a row.
    pub state_ttl_ms: Option<i64>,
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
        let ttl = self
            .state_ttl_ms
            .map(|t| format!(", state ttl {t}ms"))
            .unwrap_or_default();
        format!(
            "ordered by {} (released at watermark > t + {}ms{ttl}): [{}]",
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
            last_sweep: WATERMARK_MIN,
        }))
    }
}

/// A batch waiting for the watermark, with bounds of its event times: a
/// watermark below all of them leaves it alone, one above all releases it
/// whole; only a batch it cuts is filtered.
struct Pending {
    batch: RecordBatch,
    /// No row is earlier than this.
    first: Timestamp,
    /// No row is later than this.
    last: Timestamp,
}

impl Pending {
    fn new(batch: RecordBatch, time_column: usize) -> Result<Self> {
        let times = to_epoch_millis(batch.column(time_column))?;
        Ok(Pending {
            first: datafusion::arrow::compute::min(&times).unwrap_or(WATERMARK_MAX),
            last: datafusion::arrow::compute::max(&times).unwrap_or(WATERMARK_MIN),
            batch,
        })
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
    /// Event time of the key's latest row (state time-to-live).
    last_time: Timestamp,
    /// Sliding frames: the rows in the frame, oldest first: time and the
    /// aggregate's argument values (`None`: the row is in the frame but its
    /// FILTER left it out of the aggregate).
    frames: Vec<VecDeque<(Timestamp, Option<Vec<ScalarValue>>)>>,
}

struct OverOperator {
    plan: OverPlan,
    converter: RowConverter,
    pending: Vec<Pending>,
    pending_rows: usize,
    keys: HashMap<Vec<u8>, KeyState>,
    /// Horizon of the last time-to-live sweep.
    last_sweep: Timestamp,
}

impl OverOperator {
    fn new_key_state(&self) -> Result<KeyState> {
        Self::key_state_for(&self.plan)
    }

    fn key_state_for(plan: &OverPlan) -> Result<KeyState> {
        let accumulators = plan
            .functions
            .iter()
            .map(|f| match f {
                OverFunction::Aggregate { expr, frame, .. } if frame.slides() => {
                    expr.create_sliding_accumulator().map(Some)
                }
                OverFunction::Aggregate { expr, .. } => expr.create_accumulator().map(Some),
                _ => Ok(None),
            })
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let functions = plan.functions.len();
        Ok(KeyState {
            accumulators,
            seen: vec![0; functions],
            rows: 0,
            lags: vec![VecDeque::new(); functions],
            last_time: WATERMARK_MIN,
            frames: vec![VecDeque::new(); functions],
        })
    }

    /// Runs released rows (sorted by time, arrival) through the functions.
    fn process(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let n = batch.num_rows();
        let eval = |e: &Arc<dyn PhysicalExpr>| -> Result<ArrayRef> {
            Ok(e.evaluate(&batch)?.into_array(n)?)
        };
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
                                .ok_or_else(|| {
                                    EngineError::operator("over", "FILTER clause is not boolean")
                                })?,
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
        let mut values: Vec<Vec<ScalarValue>> =
            vec![Vec::with_capacity(n); self.plan.functions.len()];
        for value in values.iter_mut() {
            value.resize(n, ScalarValue::Null);
        }
        let plan = &self.plan;
        let peers_frames = plan.functions.iter().any(
            |f| matches!(f, OverFunction::Aggregate { frame, .. } if frame.reads_after_peers()),
        );
        let fold = |f: usize, state: &mut KeyState, row: usize| -> Result<()> {
            if filters[f]
                .as_ref()
                .is_some_and(|m| !m.is_valid(row) || !m.value(row))
            {
                return Ok(());
            }
            if let Some(acc) = state.accumulators[f].as_mut() {
                let slice: Vec<ArrayRef> = args[f].iter().map(|a| a.slice(row, 1)).collect();
                acc.update_batch(&slice)?;
            }
            Ok(())
        };
        let read = |f: usize, state: &mut KeyState| -> Result<ScalarValue> {
            match state.accumulators[f].as_mut() {
                Some(acc) => Ok(acc.evaluate()?),
                None => Err(EngineError::operator("over", "missing accumulator")),
            }
        };
        // Sliding frames: a row enters (folded, remembered with its values)...
        let enter = |f: usize, state: &mut KeyState, row: usize, t: Timestamp| -> Result<()> {
            let included = !filters[f]
                .as_ref()
                .is_some_and(|m| !m.is_valid(row) || !m.value(row));
            let values = if included {
                let values = args[f]
                    .iter()
                    .map(|a| ScalarValue::try_from_array(a.as_ref(), row))
                    .collect::<datafusion::error::Result<Vec<_>>>()?;
                fold(f, state, row)?;
                Some(values)
            } else {
                None
            };
            state.frames[f].push_back((t, values));
            Ok(())
        };
        // ...and the oldest rows leave while `leaves(time, rows held)`.
        let slide = |f: usize,
                     state: &mut KeyState,
                     leaves: &dyn Fn(Timestamp, usize) -> bool|
         -> Result<()> {
            let mut gone: Vec<Vec<ScalarValue>> = Vec::new();
            while let Some(&(time, _)) = state.frames[f].front() {
                if !leaves(time, state.frames[f].len()) {
                    break;
                }
                if let Some((_, Some(values))) = state.frames[f].pop_front() {
                    gone.push(values);
                }
            }
            if gone.is_empty() {
                return Ok(());
            }
            let Some(acc) = state.accumulators[f].as_mut() else {
                return Err(EngineError::operator("over", "missing accumulator"));
            };
            acc.retract_batch(&retracted(gone, args[f].len())?)?;
            Ok(())
        };
        let mut start = 0;
        while start < n {
            // A run of peers: rows with the same event time.
            let t = times.value(start);
            let mut end = start + 1;
            while end < n && times.value(end) == t {
                end += 1;
            }
            // One key lookup per row, every function folded and read there.
            for row in start..end {
                let key = keys.row(row);
                let state = match self.keys.get_mut(key.as_ref()) {
                    Some(state)
                        if plan
                            .state_ttl_ms
                            .is_none_or(|ttl| t.saturating_sub(state.last_time) <= ttl) =>
                    {
                        state
                    }
                    _ => {
                        // New, or idle past the time-to-live: starts empty.
                        let fresh = Self::key_state_for(plan)?;
                        self.keys.insert(key.as_ref().to_vec(), fresh);
                        self.keys
                            .get_mut(key.as_ref())
                            .ok_or_else(|| EngineError::operator("over", "key state vanished"))?
                    }
                };
                state.last_time = t;
                for (f, function) in plan.functions.iter().enumerate() {
                    match function {
                        // Read once every peer is folded, below.
                        OverFunction::Aggregate {
                            frame: Frame::UpToPeers,
                            ..
                        } => fold(f, state, row)?,
                        OverFunction::Aggregate {
                            frame: Frame::RangePreceding { range_ms },
                            ..
                        } => {
                            slide(f, state, &|time, _| time < t.saturating_sub(*range_ms))?;
                            enter(f, state, row, t)?;
                        }
                        OverFunction::Aggregate {
                            frame: Frame::RowsPreceding { rows },
                            ..
                        } => {
                            enter(f, state, row, t)?;
                            slide(f, state, &|_, held| held > rows + 1)?;
                            values[f][row] = read(f, state)?;
                        }
                        OverFunction::Aggregate { frame, expr, .. } => {
                            if *frame == Frame::UpToCurrentRow {
                                fold(f, state, row)?;
                                values[f][row] = read(f, state)?;
                            } else {
                                values[f][row] = if state.seen[f] == 0 {
                                    expr.fun().default_value(expr.field().data_type())?
                                } else {
                                    read(f, state)?
                                };
                                fold(f, state, row)?;
                            }
                            state.seen[f] += 1;
                        }
                        OverFunction::RowNumber => {
                            state.rows += 1;
                            values[f][row] = ScalarValue::UInt64(Some(state.rows as u64));
                        }
                        OverFunction::Lag {
                            offset, default, ..
                        } => {
                            let history = &mut state.lags[f];
                            values[f][row] = if history.len() == *offset {
                                history.front().cloned().unwrap_or(default.clone())
                            } else {
                                default.clone()
                            };
                            history
                                .push_back(ScalarValue::try_from_array(args[f][0].as_ref(), row)?);
                            if history.len() > *offset {
                                history.pop_front();
                            }
                        }
                    }
                }
            }
            if peers_frames {
                for row in start..end {
                    let Some(state) = self.keys.get_mut(keys.row(row).as_ref()) else {
                        continue;
                    };
                    for (f, function) in plan.functions.iter().enumerate() {
                        if matches!(function, OverFunction::Aggregate { frame, .. } if frame.reads_after_peers())
                        {
                            values[f][row] = read(f, state)?;
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

/// Whether a sliding aggregate's state is restored as saved (its state is
/// all retraction needs: sums, counts, averages, variances), rather than
/// rebuilt by adding the frame's rows again (min and max need the rows).
fn state_restores_sliding(expr: &AggregateFunctionExpr) -> bool {
    super::retracts_in_any_order(expr)
}

/// Sliding accumulators' states (one row per key) as a table.
fn sliding_state_table(states: Vec<Vec<ScalarValue>>) -> Result<RecordBatch> {
    let width = states.first().map_or(0, Vec::len);
    let mut columns: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(states.len()); width];
    for row in states {
        for (column, value) in columns.iter_mut().zip(row) {
            column.push(value);
        }
    }
    let arrays = columns
        .into_iter()
        .map(ScalarValue::iter_to_array)
        .collect::<datafusion::error::Result<Vec<ArrayRef>>>()?;
    let fields: Vec<Field> = arrays
        .iter()
        .enumerate()
        .map(|(i, a)| Field::new(format!("state_{i}"), a.data_type().clone(), true))
        .collect();
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

/// A sliding frame's row in a checkpoint: the key's index, its time, and its
/// argument values (`None`: its FILTER left it out).
type FrameRow = (u64, Timestamp, Option<Vec<ScalarValue>>);

/// Rows' argument values (one `Vec` per row) as one array per argument.
fn retracted(rows: Vec<Vec<ScalarValue>>, width: usize) -> Result<Vec<ArrayRef>> {
    let mut columns: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(rows.len()); width];
    for row in rows {
        for (column, value) in columns.iter_mut().zip(row) {
            column.push(value);
        }
    }
    columns
        .into_iter()
        .map(|c| Ok(ScalarValue::iter_to_array(c)?))
        .collect()
}

/// What an OVER node checkpoints besides its tables.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct OverMeta {
    last_sweep: Timestamp,
}

impl OverOperator {
    /// Drops keys idle for longer than the time-to-live before `horizon`
    /// (every row still to come has a time at or after it). Runs every half
    /// TTL of event time.
    fn sweep(&mut self, horizon: Timestamp) {
        let Some(ttl) = self.plan.state_ttl_ms else {
            return;
        };
        if horizon == WATERMARK_MAX || horizon.saturating_sub(self.last_sweep) < (ttl / 2).max(1) {
            return;
        }
        self.last_sweep = horizon;
        let cutoff = horizon.saturating_sub(ttl);
        self.keys.retain(|_, state| state.last_time >= cutoff);
    }

    /// A sliding frame's rows as a checkpoint table: key index, time,
    /// whether the aggregate took the row, its argument values.
    fn frame_table(
        &self,
        expr: &AggregateFunctionExpr,
        rows: Vec<FrameRow>,
    ) -> Result<RecordBatch> {
        let arg_types = expr
            .expressions()
            .iter()
            .map(|e| e.data_type(&self.plan.input_schema))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let mut fields = vec![
            Field::new("key_index", DataType::UInt64, false),
            Field::new("time", DataType::Int64, false),
            Field::new("included", DataType::Boolean, false),
        ];
        for (i, data_type) in arg_types.iter().enumerate() {
            fields.push(Field::new(format!("arg_{i}"), data_type.clone(), true));
        }
        let mut owners = Vec::with_capacity(rows.len());
        let mut times = Vec::with_capacity(rows.len());
        let mut included = Vec::with_capacity(rows.len());
        let mut args: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(rows.len()); arg_types.len()];
        for (owner, time, values) in rows {
            owners.push(owner);
            times.push(time);
            included.push(values.is_some());
            match values {
                Some(values) => {
                    for (column, value) in args.iter_mut().zip(values) {
                        column.push(value);
                    }
                }
                None => {
                    for (column, data_type) in args.iter_mut().zip(&arg_types) {
                        column.push(ScalarValue::try_from(data_type)?);
                    }
                }
            }
        }
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(owners)),
            Arc::new(Int64Array::from(times)),
            Arc::new(BooleanArray::from(included)),
        ];
        for (values, data_type) in args.into_iter().zip(&arg_types) {
            columns.push(scalars_to_array(values, data_type)?);
        }
        Ok(RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns,
        )?)
    }

    fn keys_schema(&self) -> Result<Schema> {
        let mut fields = vec![
            Field::new("key", DataType::Binary, false),
            Field::new("last_time", DataType::Int64, false),
            Field::new("rows", DataType::Int64, false),
        ];
        for (f, function) in self.plan.functions.iter().enumerate() {
            fields.push(Field::new(format!("seen_{f}"), DataType::UInt64, false));
            if let OverFunction::Aggregate { expr, .. } = function {
                for (i, field) in expr.state_fields()?.iter().enumerate() {
                    fields.push(Field::new(
                        format!("state_{f}_{i}"),
                        field.data_type().clone(),
                        true,
                    ));
                }
            }
        }
        Ok(Schema::new(fields))
    }

    /// The per-key state as checkpoint tables. Accumulators hand their state
    /// over by draining it, so each is replaced by a fresh one holding the
    /// same state.
    fn key_tables(&mut self) -> Result<Vec<(String, RecordBatch)>> {
        let schema = Arc::new(self.keys_schema()?);
        let functions = self.plan.functions.clone();
        let count = self.keys.len();
        let mut key_bytes: Vec<&[u8]> = Vec::with_capacity(count);
        let mut last_times = Vec::with_capacity(count);
        let mut rows = Vec::with_capacity(count);
        let mut seen: Vec<Vec<u64>> = vec![Vec::with_capacity(count); functions.len()];
        let mut states: Vec<Vec<Vec<ScalarValue>>> = functions
            .iter()
            .map(|f| match f {
                OverFunction::Aggregate { expr, .. } => {
                    Ok(vec![Vec::with_capacity(count); expr.state_fields()?.len()])
                }
                _ => Ok(Vec::new()),
            })
            .collect::<Result<_>>()?;
        let mut lag_keys: Vec<Vec<u64>> = vec![Vec::new(); functions.len()];
        let mut lag_values: Vec<Vec<ScalarValue>> = vec![Vec::new(); functions.len()];
        // Sliding frames: (key index, time, included, argument values) per row held.
        let mut frame_rows: Vec<Vec<FrameRow>> = vec![Vec::new(); functions.len()];
        // Sliding accumulators' own state, by key (its shape is theirs, not
        // the aggregate's `state_fields`).
        let mut slide_states: Vec<Vec<Vec<ScalarValue>>> = vec![Vec::new(); functions.len()];
        for (index, (key, state)) in self.keys.iter_mut().enumerate() {
            key_bytes.push(key.as_slice());
            last_times.push(state.last_time);
            rows.push(state.rows);
            for (f, function) in functions.iter().enumerate() {
                seen[f].push(state.seen[f]);
                match function {
                    // A sliding frame keeps its rows (to take them out later).
                    // Sums, counts, averages and variances also keep their
                    // state, restored exactly (replaying the rows would add
                    // them in another order than they were added and taken
                    // out); min, max and the rest are rebuilt from the rows,
                    // their state columns left NULL.
                    OverFunction::Aggregate { frame, expr, .. } if frame.slides() => {
                        if let Some(acc) = state.accumulators[f].as_mut() {
                            if state_restores_sliding(expr) {
                                slide_states[f].push(acc.state()?);
                            }
                        }
                        for column in states[f].iter_mut() {
                            column.push(ScalarValue::Null);
                        }
                        for (time, values) in &state.frames[f] {
                            frame_rows[f].push((index as u64, *time, values.clone()));
                        }
                    }
                    OverFunction::Aggregate { expr, .. } => {
                        let Some(acc) = state.accumulators[f].as_mut() else {
                            return Err(EngineError::operator("over", "missing accumulator"));
                        };
                        let values = acc.state()?;
                        let arrays = values
                            .iter()
                            .map(|v| v.to_array())
                            .collect::<datafusion::error::Result<Vec<_>>>()?;
                        let mut fresh = expr.create_accumulator()?;
                        fresh.merge_batch(&arrays)?;
                        *acc = fresh;
                        for (column, value) in states[f].iter_mut().zip(values) {
                            column.push(value);
                        }
                    }
                    OverFunction::Lag { .. } => {
                        for value in &state.lags[f] {
                            lag_keys[f].push(index as u64);
                            lag_values[f].push(value.clone());
                        }
                    }
                    OverFunction::RowNumber => {}
                }
            }
        }
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(BinaryArray::from(key_bytes)),
            Arc::new(Int64Array::from(last_times)),
            Arc::new(Int64Array::from(rows)),
        ];
        for (f, values) in seen.into_iter().enumerate() {
            columns.push(Arc::new(UInt64Array::from(values)));
            for column in std::mem::take(&mut states[f]) {
                let field = schema.field(columns.len());
                columns.push(scalars_to_array(column, field.data_type())?);
            }
        }
        let mut tables = vec![("keys".to_string(), RecordBatch::try_new(schema, columns)?)];
        for (f, function) in functions.iter().enumerate() {
            if let OverFunction::Aggregate { expr, frame, .. } = function {
                if frame.slides() {
                    let rows = std::mem::take(&mut frame_rows[f]);
                    tables.push((format!("frame{f}"), self.frame_table(expr, rows)?));
                    let kept = std::mem::take(&mut slide_states[f]);
                    if !kept.is_empty() {
                        tables.push((format!("slide{f}"), sliding_state_table(kept)?));
                    }
                }
            }
            if let OverFunction::Lag { value, .. } = function {
                let data_type = value.data_type(&self.plan.input_schema)?;
                let schema = Arc::new(Schema::new(vec![
                    Field::new("key_index", DataType::UInt64, false),
                    Field::new("value", data_type.clone(), true),
                ]));
                let keys: ArrayRef = Arc::new(UInt64Array::from(std::mem::take(&mut lag_keys[f])));
                let values = scalars_to_array(std::mem::take(&mut lag_values[f]), &data_type)?;
                tables.push((
                    format!("lag{f}"),
                    RecordBatch::try_new(schema, vec![keys, values])?,
                ));
            }
        }
        Ok(tables)
    }

    fn load_keys(&mut self, state: &mut StateSnapshot) -> Result<()> {
        let table = state.take_table("keys")?;
        let bad = |what: &str| {
            EngineError::State(format!("over: checkpoint column {what} has the wrong type"))
        };
        let keys = table
            .column(0)
            .as_any()
            .downcast_ref::<BinaryArray>()
            .ok_or_else(|| bad("key"))?;
        let last_times = table
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| bad("last_time"))?;
        let rows = table
            .column(2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| bad("rows"))?;
        let mut states = Vec::with_capacity(table.num_rows());
        for i in 0..table.num_rows() {
            let mut key_state = self.new_key_state()?;
            key_state.last_time = last_times.value(i);
            key_state.rows = rows.value(i);
            states.push(key_state);
        }
        let mut column = 3;
        for (f, function) in self.plan.functions.clone().iter().enumerate() {
            let seen = table
                .column(column)
                .as_any()
                .downcast_ref::<UInt64Array>()
                .ok_or_else(|| bad("seen"))?;
            column += 1;
            for (i, key_state) in states.iter_mut().enumerate() {
                key_state.seen[f] = seen.value(i);
            }
            match function {
                OverFunction::Aggregate { expr, frame, .. } if frame.slides() => {
                    let kept = state_restores_sliding(expr);
                    if kept && !states.is_empty() {
                        let saved = state.take_table(&format!("slide{f}"))?;
                        for (i, key_state) in states.iter_mut().enumerate() {
                            if let Some(acc) = key_state.accumulators[f].as_mut() {
                                let slice: Vec<ArrayRef> =
                                    saved.columns().iter().map(|c| c.slice(i, 1)).collect();
                                acc.merge_batch(&slice)?;
                            }
                        }
                    }
                    column += expr.state_fields()?.len();
                    let rows = state.take_table(&format!("frame{f}"))?;
                    let owners = rows
                        .column(0)
                        .as_any()
                        .downcast_ref::<UInt64Array>()
                        .ok_or_else(|| bad("key_index"))?;
                    let times = rows
                        .column(1)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .ok_or_else(|| bad("time"))?;
                    let included = rows
                        .column(2)
                        .as_any()
                        .downcast_ref::<BooleanArray>()
                        .ok_or_else(|| bad("included"))?;
                    for j in 0..rows.num_rows() {
                        let owner = states.get_mut(owners.value(j) as usize).ok_or_else(|| {
                            EngineError::State("over: frame row of an unknown key".into())
                        })?;
                        let values = if included.value(j) {
                            if !kept {
                                let args: Vec<ArrayRef> =
                                    rows.columns()[3..].iter().map(|c| c.slice(j, 1)).collect();
                                if let Some(acc) = owner.accumulators[f].as_mut() {
                                    acc.update_batch(&args)?;
                                }
                            }
                            Some(
                                rows.columns()[3..]
                                    .iter()
                                    .map(|c| ScalarValue::try_from_array(c.as_ref(), j))
                                    .collect::<datafusion::error::Result<Vec<_>>>()?,
                            )
                        } else {
                            None
                        };
                        owner.frames[f].push_back((times.value(j), values));
                    }
                }
                OverFunction::Aggregate { expr, .. } => {
                    let width = expr.state_fields()?.len();
                    let columns = &table.columns()[column..column + width];
                    column += width;
                    for (i, key_state) in states.iter_mut().enumerate() {
                        if let Some(acc) = key_state.accumulators[f].as_mut() {
                            let slice: Vec<ArrayRef> =
                                columns.iter().map(|c| c.slice(i, 1)).collect();
                            acc.merge_batch(&slice)?;
                        }
                    }
                }
                OverFunction::Lag { .. } => {
                    let lags = state.take_table(&format!("lag{f}"))?;
                    let owners = lags
                        .column(0)
                        .as_any()
                        .downcast_ref::<UInt64Array>()
                        .ok_or_else(|| bad("key_index"))?;
                    for j in 0..lags.num_rows() {
                        let owner = states.get_mut(owners.value(j) as usize).ok_or_else(|| {
                            EngineError::State("over: lag value of an unknown key".into())
                        })?;
                        owner.lags[f]
                            .push_back(ScalarValue::try_from_array(lags.column(1).as_ref(), j)?);
                    }
                }
                OverFunction::RowNumber => {}
            }
        }
        self.keys = (0..table.num_rows())
            .map(|i| keys.value(i).to_vec())
            .zip(states)
            .collect();
        Ok(())
    }
}

impl Operator for OverOperator {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, _out: &mut Collector) -> Result<()> {
        self.pending_rows += batch.num_rows();
        self.pending
            .push(Pending::new(batch, self.plan.time_column)?);
        Ok(())
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        let horizon = if watermark == WATERMARK_MAX {
            WATERMARK_MAX
        } else {
            watermark.saturating_sub(self.plan.allowed_lateness_ms)
        };
        self.release(watermark, horizon, out)?;
        self.sweep(horizon);
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.pending_rows + self.keys.len()
    }

    fn state_bytes(&self) -> usize {
        let pending: usize = self
            .pending
            .iter()
            .map(|p| p.batch.get_array_memory_size())
            .sum();
        let keys: usize = self
            .keys
            .iter()
            .map(|(key, state)| {
                key.capacity()
                    + std::mem::size_of::<KeyState>()
                    + state
                        .accumulators
                        .iter()
                        .flatten()
                        .map(|a| a.size())
                        .sum::<usize>()
                    + state
                        .lags
                        .iter()
                        .flatten()
                        .map(ScalarValue::size)
                        .sum::<usize>()
            })
            .sum();
        pending + keys
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&OverMeta {
            last_sweep: self.last_sweep,
        })?;
        let pending = concat_batches(
            &self.plan.input_schema,
            self.pending.iter().map(|p| &p.batch),
        )?;
        snapshot.push_table("pending", pending);
        for (name, table) in self.key_tables()? {
            snapshot.push_table(name, table);
        }
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        let meta: OverMeta = state.meta()?;
        self.last_sweep = meta.last_sweep;
        let pending = state.take_table("pending")?;
        self.pending_rows = pending.num_rows();
        if pending.num_rows() > 0 {
            self.pending = vec![Pending::new(pending, self.plan.time_column)?];
        }
        self.load_keys(&mut state)
    }
}

impl OverOperator {
    /// Releases pending rows before `horizon` in event-time order.
    fn release(
        &mut self,
        watermark: Timestamp,
        horizon: Timestamp,
        out: &mut Collector,
    ) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // Split each pending batch on its own (never concatenating what stays:
        // a string-view column would keep every earlier batch's buffers alive).
        let mut released_parts = Vec::new();
        let mut kept = Vec::new();
        for pending in std::mem::take(&mut self.pending) {
            if watermark == WATERMARK_MAX || pending.last < horizon {
                released_parts.push(pending.batch);
                continue;
            }
            if pending.first >= horizon {
                kept.push(pending);
                continue;
            }
            let batch = pending.batch;
            let times = to_epoch_millis(batch.column(self.plan.time_column))?;
            let release: BooleanArray = times
                .iter()
                .map(|t| Some(t.is_some_and(|t| t < horizon)))
                .collect();
            match release.true_count() {
                0 => kept.push(Pending { batch, ..pending }),
                n if n == batch.num_rows() => released_parts.push(batch),
                _ => {
                    released_parts.push(filter_record_batch(&batch, &release)?);
                    kept.push(Pending {
                        batch: filter_record_batch(&batch, &not(&release)?)?,
                        // What stays is at or after the horizon.
                        first: horizon,
                        last: pending.last,
                    });
                }
            }
        }
        self.pending_rows = kept.iter().map(|p| p.batch.num_rows()).sum();
        self.pending = kept;
        if released_parts.is_empty() {
            return Ok(());
        }
        let released = concat_batches(&self.plan.input_schema, &released_parts)?;
        // Sort by (event time, arrival order): a stable sort by time (rows
        // without a time, left out below, first). Mostly they come sorted.
        let released_times = to_epoch_millis(released.column(self.plan.time_column))?;
        let mut order: Vec<(Timestamp, u32)> = (0..released.num_rows())
            .map(|i| {
                let time = if released_times.is_valid(i) {
                    released_times.value(i)
                } else {
                    Timestamp::MIN
                };
                (time, i as u32)
            })
            .collect();
        let sorted = if order.is_sorted() {
            released
        } else {
            order.sort_unstable();
            let order = UInt32Array::from_iter_values(order.iter().map(|&(_, i)| i));
            take_record_batch(&released, &order)?
        };
        // Rows without an event time cannot be ordered; they were counted as bad at the source.
        let sorted = if sorted.column(self.plan.time_column).null_count() > 0 {
            let valid =
                datafusion::arrow::compute::is_not_null(sorted.column(self.plan.time_column))?;
            filter_record_batch(&sorted, &valid)?
        } else {
            sorted
        };
        out.emit(self.process(sorted)?);
        Ok(())
    }
}
