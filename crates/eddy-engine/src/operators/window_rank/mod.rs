//! Ranking within windows (window Top-N):
//! `ROW_NUMBER() | RANK() | DENSE_RANK() OVER (PARTITION BY window_start,
//! window_end, keys... ORDER BY x DESC)` over a window aggregate's results.
//!
//! In: rows that carry their window in one column: a window aggregate's
//! results (whose event time is the window's time, the same for every row of
//! a window), or a window table function's rows (`window_start`,
//! `window_end` or `window_time` of each row's tumbling window).
//! Out: every row with one column per rank function appended, emitted once
//! all rows of its window are in, partition by partition in rank order. A
//! `WHERE rn <= N` above is an ordinary filter step; with [`WindowRankPlan::limit`]
//! set (the planner sets it from such a filter) rows that cannot make the top
//! N of their partition are dropped as they arrive, so state stays at N rows
//! per partition and window.
//!
//! ```text
//!   on_batch:      rows wait in `pending`, grouped by event time
//!   on_watermark:  a window whose end <= W - allowed_lateness is complete:
//!                  sorted by (partition, order, the row), ranked, emitted, dropped
//! ```
//!
//! Past the memory limit every window's waiting rows move to disk and a
//! window is ranked a part of its partitions at a time (`spilled`).
//!
//! Checkpoints: table `pending` (the waiting rows), meta: watermark and the
//! count of rows that came after their window was emitted.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
//! use datafusion::arrow::compute::SortOptions;
//! use datafusion::physical_expr::expressions::col;
//! use datafusion::physical_expr::PhysicalSortExpr;
//! use eddy_engine::operator::OperatorPlan;
//! use eddy_engine::operators::window_rank::{RankFunction, WindowRankPlan};
//!
//! let input = Arc::new(Schema::new(vec![
//!     Field::new("window_time", DataType::Timestamp(TimeUnit::Millisecond, None), true),
//!     Field::new("k", DataType::Utf8, true),
//!     Field::new("total", DataType::Int64, true),
//! ]));
//! let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
//! fields.push(Field::new("rn", DataType::UInt64, true));
//! let plan = WindowRankPlan {
//!     input_schema: input.clone(),
//!     output_schema: Arc::new(Schema::new(fields)),
//!     time_column: 0,
//!     to_end_ms: 1,
//!     allowed_lateness_ms: 0,
//!     partition_by: vec![col("window_time", &input).unwrap()],
//!     order_by: vec![PhysicalSortExpr::new(col("total", &input).unwrap(), SortOptions::new(true, false))],
//!     functions: vec![RankFunction::RowNumber],
//!     limit: Some(3),
//! };
//! assert!(plan.describe().contains("top 3"));
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, UInt32Array, UInt64Array};
use datafusion::arrow::compute::{
    cast, concat_batches, lexsort_to_indices, partition, take_record_batch, SortColumn,
};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr};
use serde::{Deserialize, Serialize};

mod spilled;

use crate::error::Result;
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::rescale::{self, InstanceState, KeyRange};
use crate::state::declared::{TableKey, TableSpec};
use crate::state::StateSnapshot;
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MIN};

/// A ranking function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankFunction {
    /// 1, 2, 3, ... in order; ties go by the rows themselves (row-encoded),
    /// so they rank the same way on every run.
    RowNumber,
    /// Peers (equal ORDER BY values) share a rank; gaps follow them.
    Rank,
    /// Peers share a rank; no gaps.
    DenseRank,
}

impl RankFunction {
    /// The SQL function's name.
    pub fn name(self) -> &'static str {
        match self {
            RankFunction::RowNumber => "row_number",
            RankFunction::Rank => "rank",
            RankFunction::DenseRank => "dense_rank",
        }
    }
}

/// Plan of a ranking within windows.
#[derive(Debug, Clone)]
pub struct WindowRankPlan {
    /// Schema of the input rows.
    pub input_schema: SchemaRef,
    /// Input columns, then one column per function.
    pub output_schema: SchemaRef,
    /// The column naming each row's window: rows of one window share its
    /// value, a time (the window's time, start or end).
    pub time_column: usize,
    /// The column's value plus this is the window's end (1 for a window's
    /// time, end - 1 ms): a window is complete once the watermark minus the
    /// lateness reaches its end.
    pub to_end_ms: i64,
    /// Lateness the input's time carries.
    pub allowed_lateness_ms: i64,
    /// PARTITION BY expressions (the window's columns among them).
    pub partition_by: Vec<Arc<dyn PhysicalExpr>>,
    /// ORDER BY.
    pub order_by: Vec<PhysicalSortExpr>,
    /// The functions, in output order.
    pub functions: Vec<RankFunction>,
    /// Keep at most this many rows per partition (a `WHERE rn <= N` above,
    /// with `rn` a `row_number`); `None` keeps every row.
    pub limit: Option<usize>,
}

impl OperatorPlan for WindowRankPlan {
    fn kind(&self) -> &'static str {
        "window_rank"
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        let order: Vec<String> = self.order_by.iter().map(|o| o.to_string()).collect();
        P::new()
            .column("time", &self.input_schema, self.time_column)
            .value("to_end_ms", self.to_end_ms)
            .value("allowed_lateness_ms", self.allowed_lateness_ms)
            .exprs("partition_by", &self.partition_by)
            .list("order_by", order)
            .debug("functions", &self.functions)
            .debug("limit", self.limit)
    }

    fn describe(&self) -> String {
        let functions: Vec<&str> = self.functions.iter().map(|f| f.name()).collect();
        let order: Vec<String> = self.order_by.iter().map(|o| o.to_string()).collect();
        let top = self
            .limit
            .map(|n| format!(", top {n} per partition"))
            .unwrap_or_default();
        format!(
            "[{}] per window of {} ordered by {}{top} (emits at watermark >= {} + {}ms + {}ms)",
            functions.join(", "),
            self.input_schema.field(self.time_column).name(),
            order.join(", "),
            self.input_schema.field(self.time_column).name(),
            self.to_end_ms,
            self.allowed_lateness_ms
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        crate::operator::Distribution::hash(self.partition_by.clone())
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(WindowRankOperator {
            pending_table: self.state_tables()?.remove(0),
            plan: self.clone(),
            pending: BTreeMap::new(),
            watermark: WATERMARK_MIN,
            late_rows: 0,
            spilled: None,
        }))
    }

    /// `pending` holds input rows waiting for their window to fire: keyed
    /// by the partition columns.
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        Ok(vec![TableSpec::new("pending", self.input_schema.clone())
            .keyed(TableKey::Exprs(self.partition_by.clone()))])
    }

    /// The watermark is the least of the parts', the late rows their sum.
    fn rescale_state(&self, parts: Vec<InstanceState>, keys: &KeyRange) -> Result<StateSnapshot> {
        crate::rescale::rescaled(
            parts,
            &self.state_tables()?,
            keys,
            |metas: &[(RankMeta, bool)]| RankMeta {
                watermark: crate::rescale::least(metas, |m| m.watermark),
                late_rows: rescale::counted_sum(metas, |m| m.late_rows),
            },
        )
    }
}

struct WindowRankOperator {
    plan: WindowRankPlan,
    /// The plan's one state table.
    pending_table: TableSpec,
    /// Waiting rows by event time (one entry per window).
    pending: BTreeMap<Timestamp, Vec<RecordBatch>>,
    watermark: Timestamp,
    late_rows: u64,
    /// Windows moved to disk when memory ran short.
    spilled: Option<super::spilled_windows::SpilledWindows>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RankMeta {
    watermark: Timestamp,
    late_rows: u64,
}

/// The rows of `batch` sorted by partition, then order; and the ranges of
/// each partition in that order.
struct Sorted {
    batch: RecordBatch,
    order: Vec<ArrayRef>,
    partitions: Vec<std::ops::Range<usize>>,
}

impl WindowRankOperator {
    /// A window's rows are complete once no row before its end can come:
    /// end <= W - lateness.
    fn complete(&self, value: Timestamp, watermark: Timestamp) -> bool {
        value.saturating_add(self.plan.to_end_ms)
            <= watermark.saturating_sub(self.plan.allowed_lateness_ms)
    }

    fn sort(&self, batch: &RecordBatch) -> Result<Sorted> {
        let n = batch.num_rows();
        let evaluate = |e: &Arc<dyn PhysicalExpr>| -> Result<ArrayRef> {
            Ok(e.evaluate(batch)?.into_array(n)?)
        };
        let keys = self
            .plan
            .partition_by
            .iter()
            .map(evaluate)
            .collect::<Result<Vec<_>>>()?;
        let order = self
            .plan
            .order_by
            .iter()
            .map(|o| evaluate(&o.expr))
            .collect::<Result<Vec<_>>>()?;
        let mut columns: Vec<SortColumn> = keys
            .iter()
            .map(|k| SortColumn {
                values: Arc::clone(k),
                options: None,
            })
            .collect();
        columns.extend(
            order
                .iter()
                .zip(&self.plan.order_by)
                .map(|(values, o)| SortColumn {
                    values: Arc::clone(values),
                    options: Some(o.options),
                }),
        );
        let indices = if columns.is_empty() {
            UInt32Array::from_iter_values(0..n as u32)
        } else {
            // The rows themselves break ties (their columns in order,
            // row-encoded), so equal rows rank the same way whatever the
            // batch sizes, the parallelism and so the arrival order; then
            // arrival, between identical rows.
            let whole =
                super::row_converter(batch.schema().as_ref())?.convert_columns(batch.columns())?;
            columns.push(SortColumn {
                values: Arc::new(datafusion::arrow::array::BinaryArray::from_iter_values(
                    whole.iter().map(|row| row.as_ref().to_vec()),
                )),
                options: None,
            });
            columns.push(SortColumn {
                values: Arc::new(UInt32Array::from_iter_values(0..n as u32)),
                options: None,
            });
            lexsort_to_indices(&columns, None)?
        };
        let pick = |a: &ArrayRef| datafusion::arrow::compute::take(a.as_ref(), &indices, None);
        let keys = keys.iter().map(pick).collect::<Result<Vec<_>, _>>()?;
        let order = order.iter().map(pick).collect::<Result<Vec<_>, _>>()?;
        let partitions = if keys.is_empty() || n == 0 {
            std::iter::once(0..n).collect()
        } else {
            partition(&keys)?.ranges()
        };
        Ok(Sorted {
            batch: take_record_batch(batch, &indices)?,
            order,
            partitions,
        })
    }

    /// The runs of peers (equal ORDER BY values) within `range` of sorted rows.
    fn peer_groups(
        order: &[ArrayRef],
        range: &std::ops::Range<usize>,
    ) -> Result<Vec<std::ops::Range<usize>>> {
        if order.is_empty() {
            return Ok(std::iter::once(range.clone()).collect());
        }
        let slices: Vec<ArrayRef> = order
            .iter()
            .map(|c| c.slice(range.start, range.len()))
            .collect();
        Ok(partition(&slices)?
            .ranges()
            .into_iter()
            .map(|r| r.start + range.start..r.end + range.start)
            .collect())
    }

    /// Keeps the first `limit` rows of each partition of sorted rows (ties
    /// past the limit are kept too, so `rank` and `dense_rank` see every
    /// peer); the rows stay sorted.
    fn top(&self, sorted: Sorted) -> Result<Sorted> {
        let Some(limit) = self.plan.limit else {
            return Ok(sorted);
        };
        if sorted.partitions.iter().all(|p| p.len() <= limit) {
            return Ok(sorted);
        }
        let mut keep: Vec<u32> = Vec::new();
        let mut partitions = Vec::with_capacity(sorted.partitions.len());
        for range in &sorted.partitions {
            let end = if range.len() <= limit || limit == 0 {
                range.start + range.len().min(limit)
            } else {
                // The end of the peer group holding the limit's last row.
                let last = range.start + limit - 1;
                Self::peer_groups(&sorted.order, range)?
                    .into_iter()
                    .find(|group| group.contains(&last))
                    .map_or(last + 1, |group| group.end)
            };
            let from = keep.len();
            keep.extend(range.start as u32..end as u32);
            partitions.push(from..keep.len());
        }
        let keep = UInt32Array::from(keep);
        let order = sorted
            .order
            .iter()
            .map(|c| datafusion::arrow::compute::take(c.as_ref(), &keep, None))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Sorted {
            batch: take_record_batch(&sorted.batch, &keep)?,
            order,
            partitions,
        })
    }

    /// Keeps only what can make the top (see [`Self::top`]), sorted.
    fn trim(&self, rows: RecordBatch) -> Result<RecordBatch> {
        if self.plan.limit.is_none() {
            return Ok(rows);
        }
        Ok(self.top(self.sort(&rows)?)?.batch)
    }

    fn rank(&self, sorted: Sorted) -> Result<RecordBatch> {
        let n = sorted.batch.num_rows();
        let mut columns: Vec<ArrayRef> = sorted.batch.columns().to_vec();
        for (i, function) in self.plan.functions.iter().enumerate() {
            let mut values: Vec<u64> = Vec::with_capacity(n);
            for range in &sorted.partitions {
                match function {
                    RankFunction::RowNumber => values.extend(1..=range.len() as u64),
                    RankFunction::Rank | RankFunction::DenseRank => {
                        let groups = Self::peer_groups(&sorted.order, range)?;
                        for (group, peers) in groups.into_iter().enumerate() {
                            let rank = match function {
                                RankFunction::Rank => (peers.start - range.start) as u64 + 1,
                                _ => group as u64 + 1,
                            };
                            values.extend(std::iter::repeat_n(rank, peers.len()));
                        }
                    }
                }
            }
            let field = self
                .plan
                .output_schema
                .field(self.plan.input_schema.fields().len() + i);
            let array: ArrayRef = Arc::new(UInt64Array::from(values));
            columns.push(if array.data_type() == field.data_type() {
                array
            } else {
                cast(&array, field.data_type())?
            });
        }
        Ok(RecordBatch::try_new(
            self.plan.output_schema.clone(),
            columns,
        )?)
    }

    fn add(&mut self, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let times = to_epoch_millis(batch.column(self.plan.time_column))?;
        let mut groups: BTreeMap<Timestamp, Vec<u32>> = BTreeMap::new();
        let first = times.value(0);
        if times.null_count() == 0 && times.values().iter().all(|&t| t == first) {
            self.add_group(first, batch)?;
            return Ok(());
        }
        for (row, time) in times.iter().enumerate() {
            match time {
                Some(t) => groups.entry(t).or_default().push(row as u32),
                None => self.late_rows += 1,
            }
        }
        for (time, rows) in groups {
            let part = take_record_batch(&batch, &UInt32Array::from(rows))?;
            self.add_group(time, part)?;
        }
        Ok(())
    }

    fn add_group(&mut self, time: Timestamp, rows: RecordBatch) -> Result<()> {
        if self.complete(time, self.watermark) {
            // Its window was emitted already: only rows of a formerly idle
            // input can get here. Counted, skipped.
            self.late_rows += rows.num_rows() as u64;
            return Ok(());
        }
        let mut group = self.pending.remove(&time).unwrap_or_default();
        group.push(crate::state::owned_batch::owned(rows));
        if self.plan.limit.is_some() && group.len() > 1 {
            let all = concat_batches(&self.plan.input_schema, group.iter())?;
            group = vec![self.trim(all)?];
        }
        self.pending.insert(time, group);
        Ok(())
    }
}

impl Operator for WindowRankOperator {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, _out: &mut Collector) -> Result<()> {
        self.add(batch)
    }

    /// A late row whose window was complete at its source's watermark is
    /// dropped (counted); the rest are ranked with their window.
    fn on_late_batch(
        &mut self,
        _input: usize,
        late: crate::message::LateBatch,
        _out: &mut Collector,
    ) -> Result<()> {
        let times = to_epoch_millis(late.rows().column(self.plan.time_column))?;
        let keep: datafusion::arrow::array::BooleanArray = (0..late.num_rows())
            .map(|row| {
                Some(times.is_null(row) || !self.complete(times.value(row), late.watermark(row)))
            })
            .collect();
        self.late_rows += (keep.len() - keep.true_count()) as u64;
        self.add(late.filter(&keep)?.into_rows())
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        self.watermark = watermark;
        loop {
            let in_memory = self.pending.first_key_value().map(|(&time, _)| time);
            let on_disk = self.spilled.as_ref().and_then(|s| s.first_end());
            let Some(time) = [in_memory, on_disk].into_iter().flatten().min() else {
                break;
            };
            if !self.complete(time, watermark) {
                break;
            }
            let parts = self.pending.remove(&time).unwrap_or_default();
            if on_disk == Some(time) {
                self.fire_spilled(time, parts, out)?;
            } else {
                let rows = concat_batches(&self.plan.input_schema, parts.iter())?;
                out.emit(self.rank(self.top(self.sort(&rows)?)?)?);
            }
        }
        Ok(())
    }

    /// Sized after every message: a walk over the waiting windows' batches.
    fn state_bytes_are_counted(&self) -> bool {
        true
    }

    /// Every window's waiting rows move to disk; a window is ranked from
    /// both, a part of its partitions at a time.
    fn spill(&mut self, space: &Arc<crate::spill::SpillSpace>) -> Result<bool> {
        self.spill_windows(space)
    }

    fn spill_stats(&self) -> crate::spill::SpillStats {
        self.spilled.as_ref().map(|s| s.stats()).unwrap_or_default()
    }

    fn state_rows(&self) -> usize {
        self.spilled.as_ref().map_or(0, |s| s.rows())
            + self
                .pending
                .values()
                .flatten()
                .map(RecordBatch::num_rows)
                .sum::<usize>()
    }

    fn state_bytes(&self) -> usize {
        self.pending
            .values()
            .flatten()
            .map(RecordBatch::get_array_memory_size)
            .sum()
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let on_disk = self.compact_spilled()?;
        let mut snapshot = StateSnapshot::with_meta(&RankMeta {
            watermark: self.watermark,
            late_rows: self.late_rows,
        })?;
        snapshot.put_batches(
            &self.pending_table,
            self.pending.values().flatten().chain(&on_disk).cloned(),
        )?;
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        if let Some(spilled) = self.spilled.as_mut() {
            spilled.clear()?;
        }
        let meta: RankMeta = state.meta()?;
        self.late_rows = meta.late_rows;
        self.watermark = WATERMARK_MIN;
        let pending = state.take(&self.pending_table)?;
        self.add(pending)?;
        self.watermark = meta.watermark;
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.late_rows
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::compute::SortOptions;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_expr::expressions::col;

    use super::*;
    use crate::operators::testing::{timed_rows as rows, timed_schema};

    /// Rows ranked by `v` descending within the window `ts` names (its
    /// time: end - 1 ms), with all three functions.
    fn plan(limit: Option<usize>) -> WindowRankPlan {
        let input = timed_schema();
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        for name in ["rn", "rk", "dr"] {
            fields.push(Field::new(name, DataType::UInt64, true));
        }
        WindowRankPlan {
            output_schema: Arc::new(Schema::new(fields)),
            time_column: 2,
            to_end_ms: 1,
            allowed_lateness_ms: 0,
            partition_by: vec![col("ts", &input).unwrap()],
            order_by: vec![PhysicalSortExpr::new(
                col("v", &input).unwrap(),
                SortOptions::new(true, false),
            )],
            functions: vec![
                RankFunction::RowNumber,
                RankFunction::Rank,
                RankFunction::DenseRank,
            ],
            limit,
            input_schema: input,
        }
    }

    /// Emitted rows, a line each: `k v row_number rank dense_rank`, in order.
    fn ranked(out: &mut Collector) -> Vec<String> {
        let mut lines = Vec::new();
        for (_, batch) in out.drain() {
            let keys = batch
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            let values = batch
                .column(1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let rank = |i: usize| {
                batch
                    .column(i)
                    .as_any()
                    .downcast_ref::<UInt64Array>()
                    .unwrap()
                    .clone()
            };
            let (rn, rk, dr) = (rank(3), rank(4), rank(5));
            for r in 0..batch.num_rows() {
                lines.push(format!(
                    "{} {} {} {} {}",
                    keys.value(r),
                    values.value(r),
                    rn.value(r),
                    rk.value(r),
                    dr.value(r)
                ));
            }
        }
        lines
    }

    #[test]
    fn a_complete_window_is_ranked_with_ties_in_row_order() {
        assert!(plan(None).distribution().is_hash());
        let mut op = plan(None).create().unwrap();
        let mut out = Collector::default();
        // c and a tie: a ranks first, whichever came first.
        op.on_batch(0, rows(&["c", "b", "e"], &[5, 7, 3], &[9, 9, 19]), &mut out)
            .unwrap();
        op.on_batch(0, rows(&["a", "d"], &[5, 1], &[9, 9]), &mut out)
            .unwrap();
        op.on_watermark(9, &mut out).unwrap();
        assert!(ranked(&mut out).is_empty(), "the window ends at 10");
        op.on_watermark(10, &mut out).unwrap();
        assert_eq!(
            ranked(&mut out),
            ["b 7 1 1 1", "a 5 2 2 2", "c 5 3 2 2", "d 1 4 4 3"]
        );
        // The next window's rows survive a checkpoint.
        let mut restored = crate::operators::testing::restored(&plan(None), op.as_mut());
        restored.on_watermark(i64::MAX, &mut out).unwrap();
        assert_eq!(ranked(&mut out), ["e 3 1 1 1"]);
        // A row of a window already emitted is late.
        restored
            .on_batch(0, rows(&["z"], &[9], &[9]), &mut out)
            .unwrap();
        assert_eq!(restored.late_rows(), 1);
    }

    #[test]
    fn a_limit_drops_the_rows_past_the_top_n_but_keeps_ties_of_the_last() {
        let mut op = plan(Some(2)).create().unwrap();
        let mut out = Collector::default();
        op.on_batch(
            0,
            rows(&["a", "b", "c", "d"], &[5, 7, 5, 1], &[9, 9, 9, 9]),
            &mut out,
        )
        .unwrap();
        op.on_watermark(10, &mut out).unwrap();
        // c ties with a, the second: rank and dense_rank must see it (a
        // `WHERE rn <= 2` above drops it); d cannot make the top 2.
        assert_eq!(ranked(&mut out), ["b 7 1 1 1", "a 5 2 2 2", "c 5 3 2 2"]);
    }

    #[test]
    fn windows_spilled_to_disk_rank_and_checkpoint_what_windows_in_memory_do() {
        use crate::operators::testing::{assert_spilled_windows_change_nothing, timed_steps};
        // Five windows a batch, the watermark 6 ms behind.
        let steps = timed_steps(60, 30, 5, 6);
        for limit in [None, Some(2)] {
            // Ranked within each window and key: partitions spread over
            // the spilled parts.
            let mut plan = plan(limit);
            plan.partition_by
                .push(col("k", &plan.input_schema).unwrap());
            assert_spilled_windows_change_nothing(&plan, &steps, 40, ranked);
        }
    }
}
