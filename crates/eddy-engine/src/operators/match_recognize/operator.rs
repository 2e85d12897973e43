//! The MATCH_RECOGNIZE operator at work: rows wait for the watermark, are
//! appended in order to their partition, and each partition is matched from
//! its first undecided row.
//!
//! In: batches and watermarks. Out: one row per match.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Int64Array, UInt32Array,
};
use datafusion::arrow::compute::{concat, take};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::row::RowConverter;
use datafusion::common::ScalarValue;
use serde::{Deserialize, Serialize};

use super::navigation::{MatchRows, Navigation};
use super::pattern::{Outcome, Program};
use super::{AfterMatch, Condition, MatchRecognizePlan};
use crate::error::{EngineError, Result};
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::operators::event_order::EventOrder;
use crate::state::declared::TableSpec;
use crate::state::StateSnapshot;
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MAX};

/// A partition's kept rows, in order: its undecided rows, after as many
/// decided ones as `PREV` reaches back.
struct Partition {
    times: Vec<Timestamp>,
    /// The plan's `args`, evaluated for these rows.
    args: Vec<ArrayRef>,
    /// Index of the first undecided row (rows before it are kept for `PREV`).
    first: usize,
    /// Rows came since the partition was last matched (else a new run can
    /// only decide more once its first undecided row's WITHIN bound passes).
    fresh: bool,
}

impl Partition {
    fn len(&self) -> usize {
        self.times.len()
    }

    /// The event time of the first undecided row.
    fn first_undecided_time(&self) -> Option<Timestamp> {
        self.times.get(self.first).copied()
    }

    /// Drops the first `n` rows.
    fn drop_front(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.times.drain(..n);
        let left = self.times.len();
        for arg in self.args.iter_mut() {
            *arg = arg.slice(n, left);
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Meta {
    /// Rows earlier than this were released.
    released: Timestamp,
    late: u64,
}

pub(super) struct MatchRecognizeOperator {
    plan: MatchRecognizePlan,
    /// The plan's state tables: `pending`, then `rows`.
    tables: Vec<TableSpec>,
    program: Program,
    /// How many decided rows each partition keeps for `PREV`.
    prev_reach: usize,
    converter: RowConverter,
    /// Rows waiting for the watermark, released in event-time order.
    order: EventOrder,
    /// By key bytes, so partitions are matched (and output) in key order.
    partitions: BTreeMap<Vec<u8>, Partition>,
    /// The earliest kept row's time (the output watermark stays below it).
    hold: Timestamp,
}

impl MatchRecognizeOperator {
    pub(super) fn new(plan: MatchRecognizePlan) -> Result<Self> {
        Ok(Self {
            tables: plan.state_tables()?,
            program: plan.program()?,
            prev_reach: plan.prev_reach(),
            converter: super::super::key_converter(&plan.partition_by, &plan.input_schema)?,
            order: EventOrder::new(
                plan.input_schema.clone(),
                plan.time_column,
                plan.order_by.clone(),
            ),
            plan,
            partitions: BTreeMap::new(),
            hold: WATERMARK_MAX,
        })
    }

    /// Appends released rows (sorted by event time) to their partitions.
    fn append(&mut self, sorted: RecordBatch) -> Result<()> {
        let n = sorted.num_rows();
        let (keys, _) = super::super::key_rows(&self.converter, &self.plan.partition_by, &sorted)?;
        let times = to_epoch_millis(sorted.column(self.plan.time_column))?;
        let args = self
            .plan
            .args
            .iter()
            .map(|a| Ok(a.evaluate(&sorted)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        // Row indices per partition, in order.
        let mut by_key: BTreeMap<&[u8], Vec<u32>> = BTreeMap::new();
        for i in 0..n {
            by_key.entry(keys.row(i).data()).or_default().push(i as u32);
        }
        for (key, rows) in by_key {
            let indices = UInt32Array::from(rows);
            let new_times: Vec<Timestamp> = indices
                .values()
                .iter()
                .map(|&i| times.value(i as usize))
                .collect();
            let new_args = args
                .iter()
                .map(|a| Ok(compact(take(a.as_ref(), &indices, None)?)))
                .collect::<Result<Vec<ArrayRef>>>()?;
            match self.partitions.get_mut(key) {
                Some(partition) => {
                    partition.times.extend(new_times);
                    partition.fresh = true;
                    for (old, new) in partition.args.iter_mut().zip(new_args) {
                        *old = compact(concat(&[old.as_ref(), new.as_ref()])?);
                    }
                }
                None => {
                    self.partitions.insert(
                        key.to_vec(),
                        Partition {
                            times: new_times,
                            args: new_args,
                            first: 0,
                            fresh: true,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// Matches every partition from its first undecided row; returns the
    /// measures' values, one entry per match.
    fn match_all(&mut self, end_of_input: bool) -> Result<Vec<Vec<ScalarValue>>> {
        let mut matches = Vec::new();
        let released = self.order.released();
        let reach = self.prev_reach;
        for partition in self.partitions.values_mut() {
            let bound_passed = match (self.plan.within_ms, partition.first_undecided_time()) {
                (Some(within), Some(first)) => released > first.saturating_add(within),
                _ => false,
            };
            let undecided = partition.first < partition.len();
            if !undecided || !(partition.fresh || bound_passed || end_of_input) {
                continue;
            }
            partition.fresh = false;
            let decided = match_partition(
                &self.plan,
                &self.program,
                partition,
                released,
                end_of_input,
                &mut matches,
            )?;
            // Decided rows go, but for the last `reach` (PREV reads them).
            let dropped = decided.saturating_sub(reach);
            partition.drop_front(dropped);
            partition.first = decided - dropped;
        }
        self.partitions
            .retain(|_, p| p.len() > 0 && (reach > 0 || p.first < p.len()));
        self.hold = self.earliest_undecided();
        Ok(matches)
    }

    /// The earliest undecided row's time (the output watermark's hold).
    fn earliest_undecided(&self) -> Timestamp {
        self.partitions
            .values()
            .filter_map(Partition::first_undecided_time)
            .min()
            .unwrap_or(WATERMARK_MAX)
    }

    fn emit(&self, matches: Vec<Vec<ScalarValue>>, out: &mut Collector) -> Result<()> {
        if matches.is_empty() {
            return Ok(());
        }
        let n = matches.len();
        let mut columns: Vec<Vec<ScalarValue>> =
            vec![Vec::with_capacity(n); self.plan.measures.len()];
        for values in matches {
            for (column, value) in columns.iter_mut().zip(values) {
                column.push(value);
            }
        }
        let arrays = columns
            .into_iter()
            .zip(&self.plan.measures)
            .map(|(values, nav)| crate::state::scalars_to_array(values, &nav.data_type))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let measures = RecordBatch::try_new_with_options(
            self.plan.measure_schema.clone(),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )?;
        let outputs = self
            .plan
            .outputs
            .iter()
            .map(|e| Ok(e.evaluate(&measures)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        out.emit(super::super::batch_of(&self.plan.output_schema, outputs)?);
        Ok(())
    }

    fn rows_table(&self) -> Result<RecordBatch> {
        let schema = self.tables[1].schema().clone();
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut times: Vec<Timestamp> = Vec::new();
        let mut decided: Vec<bool> = Vec::new();
        let mut args: Vec<Vec<&dyn Array>> = vec![Vec::new(); self.plan.args.len()];
        for (key, partition) in &self.partitions {
            keys.extend(std::iter::repeat_n(key.as_slice(), partition.len()));
            times.extend(&partition.times);
            decided.extend((0..partition.len()).map(|i| i < partition.first));
            for (column, arg) in args.iter_mut().zip(&partition.args) {
                column.push(arg.as_ref());
            }
        }
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(BinaryArray::from_iter_values(keys)),
            Arc::new(Int64Array::from(times)),
            Arc::new(BooleanArray::from(decided)),
        ];
        for (i, parts) in args.into_iter().enumerate() {
            columns.push(if parts.is_empty() {
                datafusion::arrow::array::new_empty_array(schema.field(i + 3).data_type())
            } else {
                compact(concat(&parts)?)
            });
        }
        Ok(RecordBatch::try_new(schema, columns)?)
    }

    fn load_rows(&mut self, rows: RecordBatch) -> Result<()> {
        let bad = || EngineError::State("match_recognize: malformed rows table".into());
        let keys = rows
            .column(0)
            .as_any()
            .downcast_ref::<BinaryArray>()
            .ok_or_else(bad)?;
        let times = rows
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(bad)?;
        let decided = rows
            .column(2)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(bad)?;
        let mut start = 0;
        while start < rows.num_rows() {
            let key = keys.value(start);
            let mut end = start + 1;
            while end < rows.num_rows() && keys.value(end) == key {
                end += 1;
            }
            self.partitions.insert(
                key.to_vec(),
                Partition {
                    times: times.values()[start..end].to_vec(),
                    args: rows.columns()[3..]
                        .iter()
                        .map(|c| compact(c.slice(start, end - start)))
                        .collect(),
                    first: (start..end).take_while(|&i| decided.value(i)).count(),
                    fresh: true,
                },
            );
            start = end;
        }
        Ok(())
    }
}

/// `array` holding only the bytes its own rows use: a string or binary
/// view array taken or sliced from a larger one still points into all of
/// that one's data buffers, which kept rows would otherwise keep alive
/// (and every checkpoint write again).
fn compact(array: ArrayRef) -> ArrayRef {
    match array.data_type() {
        DataType::Utf8View => Arc::new(array.as_string_view().gc()),
        DataType::BinaryView => Arc::new(array.as_binary_view().gc()),
        _ => array,
    }
}

/// Matches one partition from its first undecided row; returns how many
/// leading rows are decided (no match can start at them any more).
fn match_partition(
    plan: &MatchRecognizePlan,
    program: &Program,
    partition: &Partition,
    released: Timestamp,
    end_of_input: bool,
    matches: &mut Vec<Vec<ScalarValue>>,
) -> Result<usize> {
    let n = partition.len();
    let mut start = partition.first;
    while start < n {
        let first = partition.times[start];
        let (available, complete) = match plan.within_ms {
            Some(within) => {
                // Rows at most `within` after the first (Flink's documented
                // rule: a match longer than the interval is dropped); all of
                // them are in once rows up to the bound are released.
                let bound = first.saturating_add(within);
                let available = partition.times[start..].partition_point(|&t| t <= bound);
                (available, end_of_input || released > bound)
            }
            None => (n - start, end_of_input),
        };
        let outcome = program.run(available, complete, |var, path| {
            accept(plan, partition, start, var, path)
        })?;
        match outcome {
            Outcome::Pending => break,
            Outcome::NoMatch => start += 1,
            Outcome::Match(path) => {
                let rows = MatchRows {
                    args: &partition.args,
                    start,
                    path: &path,
                    names: &plan.variables,
                };
                matches.push(
                    plan.measures
                        .iter()
                        .map(|nav| rows.value(nav))
                        .collect::<Result<Vec<_>>>()?,
                );
                let position = |var: usize, last: bool| {
                    let mut mapped = (0..path.len()).filter(|&i| path[i] as usize == var);
                    if last {
                        mapped.next_back()
                    } else {
                        mapped.next()
                    }
                };
                // Matching never starts at the same row twice: a skip to the
                // match's own first row (or to a variable it does not
                // hold) goes on at the next row.
                let next = match plan.after_match {
                    AfterMatch::PastLastRow => path.len(),
                    AfterMatch::ToNextRow => 1,
                    AfterMatch::ToFirst(v) => position(v, false).unwrap_or(1),
                    AfterMatch::ToLast(v) => position(v, true).unwrap_or(1),
                };
                start += next.max(1);
            }
        }
    }
    Ok(start)
}

/// Whether the row at `path.len() - 1` from `start` satisfies `var`'s
/// condition, with the rows before it mapped as `path` says.
fn accept(
    plan: &MatchRecognizePlan,
    partition: &Partition,
    start: usize,
    var: usize,
    path: &[u16],
) -> Result<bool> {
    match &plan.conditions[var] {
        Condition::Always => Ok(true),
        Condition::Row(arg) => {
            let row = start + path.len() - 1;
            let column = partition.args[*arg]
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| {
                    EngineError::operator("match_recognize", "a DEFINE condition is not boolean")
                })?;
            Ok(column.is_valid(row) && column.value(row))
        }
        Condition::Navigating {
            navigations,
            schema,
            expr,
        } => {
            let rows = MatchRows {
                args: &partition.args,
                start,
                path,
                names: &plan.variables,
            };
            let columns = navigations
                .iter()
                .map(|nav: &Navigation| Ok(rows.value(nav)?.to_array_of_size(1)?))
                .collect::<Result<Vec<ArrayRef>>>()?;
            let batch = RecordBatch::try_new_with_options(
                schema.clone(),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(1)),
            )?;
            let value = expr.evaluate(&batch)?.into_array(1)?;
            let value = value
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| {
                    EngineError::operator("match_recognize", "a DEFINE condition is not boolean")
                })?;
            Ok(value.is_valid(0) && value.value(0))
        }
    }
}

impl Operator for MatchRecognizeOperator {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, _out: &mut Collector) -> Result<()> {
        self.order.push(batch)
    }

    /// A late row whose place in event-time order had passed at its
    /// source's watermark is dropped (counted); the rest wait as any row.
    fn on_late_batch(
        &mut self,
        _input: usize,
        late: crate::message::LateBatch,
        _out: &mut Collector,
    ) -> Result<()> {
        let (kept, dropped) = crate::operators::late_rows_in_order(
            late,
            self.plan.time_column,
            self.plan.allowed_lateness_ms,
        )?;
        self.order.count_late(dropped);
        self.order.push(kept)
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        let end_of_input = watermark == WATERMARK_MAX;
        let horizon = if end_of_input {
            WATERMARK_MAX
        } else {
            watermark.saturating_sub(self.plan.allowed_lateness_ms)
        };
        if horizon <= self.order.released() {
            return Ok(());
        }
        if let Some(sorted) = self.order.release(horizon)? {
            self.append(sorted)?;
        }
        let matches = self.match_all(end_of_input)?;
        self.emit(matches, out)
    }

    fn state_rows(&self) -> usize {
        self.order.pending_rows() + self.partitions.values().map(Partition::len).sum::<usize>()
    }

    fn state_bytes(&self) -> usize {
        let pending = self.order.pending_bytes();
        let kept: usize = self
            .partitions
            .iter()
            .map(|(key, p)| {
                key.capacity()
                    + p.times.capacity() * std::mem::size_of::<Timestamp>()
                    + p.args
                        .iter()
                        .map(|a| a.get_array_memory_size())
                        .sum::<usize>()
            })
            .sum();
        pending + kept
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&Meta {
            released: self.order.released(),
            late: self.order.late(),
        })?;
        snapshot.put_batches(&self.tables[0], self.order.pending().iter().cloned())?;
        snapshot.put(&self.tables[1], self.rows_table()?)?;
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        let meta: Meta = state.meta()?;
        let pending = state.take(&self.tables[0])?;
        self.order.restore(pending, meta.released, meta.late);
        let rows = state.take(&self.tables[1])?;
        self.load_rows(rows)?;
        self.hold = self.earliest_undecided();
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.order.late()
    }

    fn output_watermark(&self, input: Timestamp) -> Timestamp {
        if input == WATERMARK_MAX {
            return input;
        }
        // A match decided later ends at or after its first row, and rows
        // not yet released are at or after the horizon (a row is late only
        // when earlier than the watermark).
        let horizon = input.saturating_sub(self.plan.allowed_lateness_ms);
        horizon.min(self.hold)
    }
}

/// The state of one instance of a MATCH_RECOGNIZE node resumed at another
/// parallelism ([`crate::rescale`]): its tables kept by their declared keys,
/// the horizon every instance reached, the late rows summed.
pub(super) fn rescale_state(
    plan: &MatchRecognizePlan,
    parts: Vec<crate::rescale::InstanceState>,
    range: &crate::rescale::KeyRange,
) -> Result<StateSnapshot> {
    crate::rescale::rescaled(
        parts,
        &plan.state_tables()?,
        range,
        |metas: &[(Meta, bool)]| Meta {
            // The horizon every instance's watermark reached.
            released: metas
                .iter()
                .map(|(m, _)| m.released)
                .max()
                .unwrap_or(crate::time::WATERMARK_MIN),
            late: crate::rescale::counted_sum(metas, |m| m.late),
        },
    )
}
