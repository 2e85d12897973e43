//! The OVER operator at work: rows wait for the watermark (`Pending`), then
//! run in event-time order through each key's state (`KeyState`).
//!
//! In: batches and watermarks. Out: the batches with one column per OVER
//! function appended, in event-time order.

use std::collections::VecDeque;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, UInt32Array};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, not, take_record_batch};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::row::RowConverter;
use datafusion::common::ScalarValue;
use datafusion::physical_expr::PhysicalExpr;
use hashbrown::HashMap;

use super::checkpoint::{retracted, OverMeta};
use super::output::{OutputColumn, LAG_BATCH, LAG_DEFAULT, LAG_HELD};
use super::running::{Aggregator, RunningArgument};
use super::{Frame, OverFunction, OverPlan};
use crate::error::{EngineError, Result};
use crate::operator::{Collector, Operator};
use crate::state::StateSnapshot;
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MAX, WATERMARK_MIN};

/// A batch waiting for the watermark, with bounds of its event times: a
/// watermark below all of them leaves it alone, one above all releases it
/// whole; only a batch it cuts is filtered.
pub(super) struct Pending {
    pub(super) batch: RecordBatch,
    /// No row is earlier than this.
    pub(super) first: Timestamp,
    /// No row is later than this.
    pub(super) last: Timestamp,
}

impl Pending {
    pub(super) fn new(batch: RecordBatch, time_column: usize) -> Result<Self> {
        let times = to_epoch_millis(batch.column(time_column))?;
        Ok(Pending {
            first: datafusion::arrow::compute::min(&times).unwrap_or(WATERMARK_MAX),
            last: datafusion::arrow::compute::max(&times).unwrap_or(WATERMARK_MIN),
            batch,
        })
    }
}

/// Where a key's `lag` value `offset` rows back is: a row of the batch
/// being processed (only while it is), or a value held from an earlier one.
#[derive(Debug, Clone)]
pub(super) enum LagValue {
    Row(usize),
    Held(ScalarValue),
}

/// Per-key state of every function.
pub(super) struct KeyState {
    pub(super) accumulators: Vec<Option<Aggregator>>,
    /// Rows of the key each function has seen (an empty frame reads as the
    /// aggregate's default value, as in DataFusion's batch window functions).
    pub(super) seen: Vec<u64>,
    pub(super) rows: i64,
    pub(super) lags: Vec<VecDeque<LagValue>>,
    /// Event time of the key's latest row (state time-to-live).
    pub(super) last_time: Timestamp,
    /// Sliding frames: the rows in the frame, oldest first: time and the
    /// aggregate's argument values (`None`: the row is in the frame but its
    /// FILTER left it out of the aggregate).
    pub(super) frames: Vec<VecDeque<(Timestamp, Option<Vec<ScalarValue>>)>>,
    /// The last batch (`OverOperator::batches`) with a row of this key.
    pub(super) batch: u64,
}

pub(super) struct OverOperator {
    pub(super) plan: OverPlan,
    /// The plan's state tables ([`super::checkpoint::state_tables`]).
    pub(super) tables: Vec<crate::state::declared::TableSpec>,
    pub(super) converter: RowConverter,
    pub(super) pending: Vec<Pending>,
    pub(super) pending_rows: usize,
    pub(super) keys: HashMap<Vec<u8>, KeyState>,
    /// Horizon of the last time-to-live sweep.
    pub(super) last_sweep: Timestamp,
    /// Batches processed so far.
    pub(super) batches: u64,
    /// Late rows dropped: their place in event-time order had passed.
    pub(super) late_rows: u64,
    /// Rows waiting for their leads.
    pub(super) waiting: super::lead::Waiting,
    /// Keys moved to disk ([`Operator::spill`]); a key is there or in
    /// `keys`, never both.
    pub(super) spilled: Option<super::spilled::SpilledKeys>,
}

impl OverOperator {
    pub(super) fn new_key_state(&self) -> Result<KeyState> {
        Self::key_state_for(&self.plan)
    }

    pub(super) fn key_state_for(plan: &OverPlan) -> Result<KeyState> {
        let accumulators = plan
            .functions
            .iter()
            .map(|f| match f {
                OverFunction::Aggregate { expr, frame, .. } if frame.slides() => expr
                    .create_sliding_accumulator()
                    .map(|acc| Some(Aggregator::DataFusion(acc))),
                OverFunction::Aggregate {
                    running: Some(running),
                    ..
                } => Ok(Some(Aggregator::Running(running.start()))),
                OverFunction::Aggregate { expr, .. } => expr
                    .create_accumulator()
                    .map(|acc| Some(Aggregator::DataFusion(acc))),
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
            batch: 0,
        })
    }

    /// Whether every key's state is its `keys` row alone (running
    /// aggregates, `row_number`), so that it can spill.
    fn spills(&self) -> bool {
        self.plan.functions.iter().all(|f| match f {
            OverFunction::Aggregate { frame, .. } => !frame.slides(),
            OverFunction::RowNumber => true,
            OverFunction::Lag { .. } | OverFunction::Lead { .. } => false,
        })
    }

    /// Brings back from disk the state of the keys among `keys` that
    /// memory does not hold.
    fn read_back(&mut self, keys: &datafusion::arrow::row::Rows) -> Result<()> {
        let Some(spilled) = self.spilled.as_mut().filter(|s| s.len() > 0) else {
            return Ok(());
        };
        let mut asked = hashbrown::HashSet::new();
        let missing: Vec<&[u8]> = keys
            .iter()
            .map(|k| k.data())
            .filter(|k| !self.keys.contains_key(*k) && asked.insert(*k))
            .collect();
        let Some(table) = spilled.take(&missing)? else {
            return Ok(());
        };
        let mut state = StateSnapshot::default();
        state.put(self.table(super::checkpoint::KEYS)?, table)?;
        let in_memory = std::mem::take(&mut self.keys);
        self.load_keys(&mut state)?;
        let read = std::mem::replace(&mut self.keys, in_memory);
        self.keys.extend(read);
        Ok(())
    }

    /// Every key's state moves to disk, as its `keys` row.
    fn spill_keys(&mut self, space: &std::sync::Arc<crate::spill::SpillSpace>) -> Result<bool> {
        if self.keys.is_empty() || !self.spills() {
            return Ok(false);
        }
        if self.spilled.is_none() {
            let schema = self.table(super::checkpoint::KEYS)?.schema().clone();
            self.spilled = super::spilled::SpilledKeys::open(space, schema)?;
        }
        if self.spilled.is_none() {
            return Ok(false);
        }
        let tables = self.key_tables()?;
        let keys = tables
            .iter()
            .find(|(name, _)| name == super::checkpoint::KEYS)
            .map(|(_, table)| table)
            .ok_or_else(|| EngineError::State("over: no keys table".into()))?;
        if let Some(spilled) = self.spilled.as_mut() {
            spilled.write(keys)?;
        }
        self.keys = HashMap::new();
        Ok(true)
    }

    /// Runs released rows (sorted by time, arrival) through the functions.
    pub(super) fn process(&mut self, batch: RecordBatch) -> Result<RecordBatch> {
        let n = batch.num_rows();
        self.batches += 1;
        let this_batch = self.batches;
        let eval = |e: &Arc<dyn PhysicalExpr>| -> Result<ArrayRef> {
            Ok(e.evaluate(&batch)?.into_array(n)?)
        };
        let (keys, _) = super::super::key_rows(&self.converter, &self.plan.partition_by, &batch)?;
        self.read_back(&keys)?;
        let times = to_epoch_millis(batch.column(self.plan.time_column))?;
        let plan = &self.plan;
        let functions = plan.functions.len();
        let mut args: Vec<Vec<ArrayRef>> = Vec::with_capacity(functions);
        let mut filters: Vec<Option<BooleanArray>> = Vec::with_capacity(functions);
        // Native running aggregates read their argument column downcast once.
        let mut running: Vec<Option<RunningArgument>> = Vec::with_capacity(functions);
        let mut values: Vec<OutputColumn> = Vec::with_capacity(functions);
        for f in &plan.functions {
            match f {
                OverFunction::Aggregate {
                    expr,
                    filter,
                    frame,
                    running: native,
                } => {
                    let arrays: Vec<ArrayRef> =
                        expr.expressions().iter().map(eval).collect::<Result<_>>()?;
                    let native = native.filter(|_| !frame.slides());
                    running.push(native.map(|r| r.argument(&arrays)).transpose()?);
                    values.push(OutputColumn::aggregate(native, n));
                    args.push(arrays);
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
                    running.push(None);
                    values.push(OutputColumn::lag(n));
                }
                OverFunction::RowNumber => {
                    args.push(Vec::new());
                    filters.push(None);
                    running.push(None);
                    values.push(OutputColumn::row_numbers(n));
                }
                OverFunction::Lead { .. } => {
                    args.push(Vec::new());
                    filters.push(None);
                    running.push(None);
                    values.push(OutputColumn::Later(n));
                }
            }
        }
        let peers_frames = plan.functions.iter().any(
            |f| matches!(f, OverFunction::Aggregate { frame, .. } if frame.reads_after_peers()),
        );
        let lags = plan
            .functions
            .iter()
            .any(|f| matches!(f, OverFunction::Lag { .. }));
        // One row of each key this batch touches (its lag rows are made
        // held values at the end).
        let mut touched: Vec<usize> = Vec::new();
        let fold = |f: usize, state: &mut KeyState, row: usize| -> Result<()> {
            if filters[f]
                .as_ref()
                .is_some_and(|m| !m.is_valid(row) || !m.value(row))
            {
                return Ok(());
            }
            match state.accumulators[f].as_mut() {
                Some(Aggregator::Running(acc)) => {
                    if let Some(arg) = &running[f] {
                        acc.push(arg, row);
                    }
                }
                Some(Aggregator::DataFusion(acc)) => {
                    let slice: Vec<ArrayRef> = args[f].iter().map(|a| a.slice(row, 1)).collect();
                    acc.update_batch(&slice)?;
                }
                None => {}
            }
            Ok(())
        };
        let read =
            |f: usize, state: &mut KeyState, out: &mut OutputColumn, row: usize| -> Result<()> {
                match state.accumulators[f].as_mut() {
                    Some(Aggregator::Running(acc)) => out.set_running(row, acc.value()),
                    Some(Aggregator::DataFusion(acc)) => out.set_scalar(row, acc.evaluate()?)?,
                    None => return Err(EngineError::operator("over", "missing accumulator")),
                }
                Ok(())
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
            acc.accumulator()
                .retract_batch(&retracted(gone, args[f].len())?)?;
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
                if lags && state.batch != this_batch {
                    state.batch = this_batch;
                    touched.push(row);
                }
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
                            read(f, state, &mut values[f], row)?;
                        }
                        OverFunction::Aggregate { frame, expr, .. } => {
                            if *frame == Frame::UpToCurrentRow {
                                fold(f, state, row)?;
                                read(f, state, &mut values[f], row)?;
                            } else {
                                if state.seen[f] == 0 {
                                    values[f].set_scalar(
                                        row,
                                        expr.fun().default_value(expr.field().data_type())?,
                                    )?;
                                } else {
                                    read(f, state, &mut values[f], row)?;
                                }
                                fold(f, state, row)?;
                            }
                            state.seen[f] += 1;
                        }
                        OverFunction::RowNumber => {
                            state.rows += 1;
                            if let OutputColumn::RowNumbers(numbers) = &mut values[f] {
                                numbers[row] = state.rows as u64;
                            }
                        }
                        OverFunction::Lag { offset, .. } => {
                            let history = &mut state.lags[f];
                            if let OutputColumn::Lag { sources, held } = &mut values[f] {
                                if history.len() == *offset {
                                    sources[row] = match history.front() {
                                        Some(LagValue::Row(earlier)) => (LAG_BATCH, *earlier),
                                        Some(LagValue::Held(value)) => {
                                            held.push(value.clone());
                                            (LAG_HELD, held.len() - 1)
                                        }
                                        None => (LAG_DEFAULT, 0),
                                    };
                                }
                            }
                            history.push_back(LagValue::Row(row));
                            if history.len() > *offset {
                                history.pop_front();
                            }
                        }
                        OverFunction::Lead { .. } => {}
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
                            read(f, state, &mut values[f], row)?;
                        }
                    }
                }
            }
            start = end;
        }
        // Lag values still pointing into this batch become held values.
        for row in touched {
            let Some(state) = self.keys.get_mut(keys.row(row).as_ref()) else {
                continue;
            };
            for (f, history) in state.lags.iter_mut().enumerate() {
                for value in history.iter_mut() {
                    if let LagValue::Row(earlier) = *value {
                        *value = LagValue::Held(ScalarValue::try_from_array(
                            args[f][0].as_ref(),
                            earlier,
                        )?);
                    }
                }
            }
        }
        let mut columns = batch.columns().to_vec();
        let base = columns.len();
        for (f, (column, function)) in values.into_iter().zip(&plan.functions).enumerate() {
            let field = plan.output_schema.field(base + f);
            let lag_default = match function {
                OverFunction::Lag { default, .. } => Some(default),
                _ => None,
            };
            columns.push(column.finish(field.data_type(), args[f].first(), lag_default)?);
        }
        Ok(RecordBatch::try_new_with_options(
            plan.output_schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )?)
    }
}

impl OverOperator {
    /// Drops keys idle for longer than the time-to-live before `horizon`
    /// (every row still to come has a time at or after it). Runs every half
    /// TTL of event time.
    pub(super) fn sweep(&mut self, horizon: Timestamp) {
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
}

impl Operator for OverOperator {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, _out: &mut Collector) -> Result<()> {
        self.pending_rows += batch.num_rows();
        self.pending.push(Pending::new(
            crate::state::owned_batch::owned(batch),
            self.plan.time_column,
        )?);
        Ok(())
    }

    /// A late row whose place in event-time order had passed at its
    /// source's watermark is dropped (counted); the rest wait as any row.
    fn on_late_batch(
        &mut self,
        input: usize,
        late: crate::message::LateBatch,
        out: &mut Collector,
    ) -> Result<()> {
        let (kept, dropped) = crate::operators::late_rows_in_order(
            late,
            self.plan.time_column,
            self.plan.allowed_lateness_ms,
        )?;
        self.late_rows += dropped;
        if kept.num_rows() == 0 {
            return Ok(());
        }
        self.on_batch(input, kept, out)
    }

    fn late_rows(&self) -> u64 {
        self.late_rows
    }

    /// Rows waiting for their leads go out later with their own times:
    /// the watermark waits for the earliest.
    fn output_watermark(&self, input: Timestamp) -> Timestamp {
        match self.waiting.earliest {
            Some(earliest) if input != WATERMARK_MAX => input.min(earliest),
            _ => input,
        }
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
        self.pending_rows
            + self.keys.len()
            + self.waiting.num_rows()
            + self
                .spilled
                .as_ref()
                .map_or(0, super::spilled::SpilledKeys::len)
    }

    /// Every key's state moves to disk (running aggregates and
    /// `row_number` only); rows waiting for the watermark stay.
    fn spill(&mut self, space: &std::sync::Arc<crate::spill::SpillSpace>) -> Result<bool> {
        self.spill_keys(space)
    }

    fn spill_stats(&self) -> crate::spill::SpillStats {
        self.spilled
            .as_ref()
            .map(super::spilled::SpilledKeys::stats)
            .unwrap_or_default()
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
                        .map(|value| match value {
                            LagValue::Held(value) => value.size(),
                            LagValue::Row(_) => std::mem::size_of::<LagValue>(),
                        })
                        .sum::<usize>()
            })
            .sum();
        pending + keys + self.waiting.bytes()
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&OverMeta {
            last_sweep: self.last_sweep,
            late_rows: self.late_rows,
        })?;
        snapshot.put_batches(
            self.table("pending")?,
            self.pending.iter().map(|p| p.batch.clone()),
        )?;
        for (name, mut table) in self.key_tables()? {
            if let Some(spilled) = self.spilled.as_ref().filter(|s| s.len() > 0) {
                if name == super::checkpoint::KEYS {
                    table = datafusion::arrow::compute::concat_batches(
                        &table.schema(),
                        [&spilled.all()?, &table],
                    )?;
                }
            }
            snapshot.put(self.table(&name)?, table)?;
        }
        if self.has_leads() {
            snapshot.put_batches(self.table("waiting")?, self.waiting.rows.iter().cloned())?;
        }
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        if let Some(spilled) = self.spilled.as_mut() {
            spilled.clear()?;
        }
        let meta: OverMeta = state.meta()?;
        self.last_sweep = meta.last_sweep;
        self.late_rows = meta.late_rows;
        let pending = state.take(self.table("pending")?)?;
        self.pending_rows = pending.num_rows();
        if pending.num_rows() > 0 {
            self.pending = vec![Pending::new(pending, self.plan.time_column)?];
        }
        self.waiting = super::lead::Waiting::default();
        let waiting = match crate::state::declared::find(&self.tables, "waiting") {
            Some(spec) => state.take_if_present(spec)?,
            None => None,
        };
        if let Some(waiting) = waiting {
            if waiting.num_rows() > 0 {
                let times = to_epoch_millis(waiting.column(self.plan.time_column))?;
                self.waiting = super::lead::Waiting {
                    earliest: datafusion::arrow::compute::min(&times),
                    rows: Some(waiting),
                };
            }
        }
        self.load_keys(&mut state)
    }
}

impl OverOperator {
    /// Releases pending rows before `horizon` in event-time order.
    pub(super) fn release(
        &mut self,
        watermark: Timestamp,
        horizon: Timestamp,
        out: &mut Collector,
    ) -> Result<()> {
        if self.pending.is_empty() {
            // Waiting leads may close (the end, or a run past its TTL).
            if self.has_leads() {
                if let Some(done) = self.pair_leads(None, horizon)? {
                    out.emit(done);
                }
            }
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
                        batch: crate::state::owned_batch::owned(filter_record_batch(
                            &batch,
                            &not(&release)?,
                        )?),
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
            if self.has_leads() {
                if let Some(done) = self.pair_leads(None, horizon)? {
                    out.emit(done);
                }
            }
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
        let processed = self.process(sorted)?;
        if self.has_leads() {
            if let Some(done) = self.pair_leads(Some(processed), horizon)? {
                out.emit(done);
            }
        } else {
            out.emit(processed);
        }
        Ok(())
    }
}
