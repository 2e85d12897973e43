//! Top-N and deduplication over a whole stream: `ROW_NUMBER() | RANK() |
//! DENSE_RANK() OVER (PARTITION BY k ORDER BY x) ... WHERE rn <= N`, where
//! the ranking is not confined to a window, so every row may change the
//! top N of its partition. Deduplication is the case `ROW_NUMBER() ... = 1`
//! (keep first: ORDER BY time ASC; keep last: DESC).
//!
//! In: an append-only or updating stream. Out: an updating stream: the
//! input's columns, the ranking columns, the row kind. Per input batch,
//! each partition it touched emits the difference between its top N before
//! and after the batch: a row that left (or whose rank changed) is taken
//! out, a row that came in is put in, paired as `-U`/`+U` where both
//! happen, else `-D` or `+I`. Rows compare by their ORDER BY values (Arrow
//! row encoding with the SQL sort options, so byte order is SQL order), ties
//! by the row's own encoding, so the result never depends on batching.
//!
//! State per partition: its rows in rank order as encoded rows, with
//! counts. Over an append-only input only the top N are kept (a row ranked
//! below them can never come back up); over an updating input every row is
//! kept, since a retraction may lift the (N+1)-th row into the top N.
//! Ranking by arrival (`ORDER BY proc`, a `PROCTIME()` column; an
//! append-only input): the sort key is each row's arrival number at the
//! operator, ascending for keep-first, descending for keep-last, so ties
//! in the wall clock never reorder rows.
//!
//! State time-to-live (`SET 'table.exec.state.ttl'`): a partition no row
//! touched while the watermark advanced by more than the TTL is forgotten
//! (its rows leave no change behind; a later row starts it afresh).
//!
//! Checkpoints: one table of (partition, sort key, row, count, the
//! watermark that last touched the partition).
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, StringArray};
//! use datafusion::arrow::compute::SortOptions;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use datafusion::physical_expr::expressions::col;
//! use datafusion::physical_expr::PhysicalSortExpr;
//! use eddy_engine::changelog;
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::updating_rank::UpdatingRankPlan;
//! use eddy_engine::operators::window_rank::RankFunction;
//!
//! let input = Arc::new(Schema::new(vec![
//!     Field::new("k", DataType::Utf8, true),
//!     Field::new("v", DataType::Int64, true),
//! ]));
//! // The largest v per k: ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) = 1.
//! let plan = UpdatingRankPlan {
//!     input_schema: input.clone(),
//!     output_schema: changelog::updating_schema(
//!         &Schema::new(vec![
//!             Field::new("k", DataType::Utf8, true),
//!             Field::new("v", DataType::Int64, true),
//!             Field::new("rn", DataType::UInt64, true),
//!         ]),
//!         &[],
//!     ),
//!     partition_by: vec![col("k", &input).unwrap()],
//!     order_by: vec![PhysicalSortExpr::new(col("v", &input).unwrap(), SortOptions::new(true, false))],
//!     functions: vec![RankFunction::RowNumber],
//!     limited: 0,
//!     limit: 1,
//!     input_updating: false,
//!     state_ttl_ms: None,
//!     arrival: None,
//! };
//! let mut op = plan.create().unwrap();
//! let mut out = Collector::default();
//! let rows = |v: Vec<i64>| {
//!     RecordBatch::try_new(
//!         input.clone(),
//!         vec![Arc::new(StringArray::from(vec!["a"; v.len()])), Arc::new(Int64Array::from(v))],
//!     )
//!     .unwrap()
//! };
//! op.on_batch(0, rows(vec![3, 5]), &mut out).unwrap(); // +I (a, 5, 1)
//! op.on_batch(0, rows(vec![4]), &mut out).unwrap(); // below the top: nothing
//! op.on_batch(0, rows(vec![9]), &mut out).unwrap(); // -U (a, 5, 1), +U (a, 9, 1)
//! let kinds: Vec<i8> = out
//!     .drain()
//!     .flat_map(|(_, b)| changelog::row_kinds(&b).unwrap().values().to_vec())
//!     .collect();
//! assert_eq!(kinds, vec![0, 1, 2]);
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int8Array, UInt64Array};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr};
use hashbrown::HashMap;

use super::ordered_rows::{self, Ordered, OrderedPartitions};
use super::window_rank::RankFunction;
use crate::changelog::{self, RowKind};
use crate::error::{EngineError, Result};
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::state::declared::TableSpec;
use crate::state::StateSnapshot;
use crate::time::{Timestamp, WATERMARK_MIN};

const KIND: &str = "updating_rank";

/// Plan of a Top-N over a whole stream.
#[derive(Debug, Clone)]
pub struct UpdatingRankPlan {
    /// The input's own columns (an updating input's row kind follows them).
    pub input_schema: SchemaRef,
    /// The input's columns, one column per ranking function, the row kind.
    pub output_schema: SchemaRef,
    /// PARTITION BY expressions (none: one partition).
    pub partition_by: Vec<Arc<dyn PhysicalExpr>>,
    /// ORDER BY expressions with their directions.
    pub order_by: Vec<PhysicalSortExpr>,
    /// The ranking functions, in output order (all share the window).
    pub functions: Vec<RankFunction>,
    /// Which function the `WHERE ... <= limit` bounds.
    pub limited: usize,
    /// The most a row's `limited` function value may be.
    pub limit: usize,
    /// Whether the input is updating (then every row is kept).
    pub input_updating: bool,
    /// `SET 'table.exec.state.ttl'`: forget a partition the watermark has
    /// passed by this much since a row last touched it.
    pub state_ttl_ms: Option<i64>,
    /// Ordered by arrival (ORDER BY a `PROCTIME()` column) rather than by
    /// `order_by`'s values; an append-only input only.
    pub arrival: Option<Arrival>,
}

/// Which arrival ranks first when a Top-N ranks by arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The first row to arrive (`ORDER BY proc ASC`: keep first).
    Earliest,
    /// The last row to arrive (`ORDER BY proc DESC`: keep last).
    Latest,
}

impl OperatorPlan for UpdatingRankPlan {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        let order: Vec<String> = self.order_by.iter().map(|s| s.to_string()).collect();
        P::new()
            .exprs("partition_by", &self.partition_by)
            .list("order_by", order)
            .debug("functions", &self.functions)
            .value("limited", self.limited)
            .value("limit", self.limit)
            .flag("input_updating", self.input_updating)
            .debug("arrival", self.arrival)
            .debug("state_ttl_ms", self.state_ttl_ms)
    }

    fn describe(&self) -> String {
        let order: Vec<String> = self.order_by.iter().map(|s| s.to_string()).collect();
        let partition: Vec<String> = self.partition_by.iter().map(|e| e.to_string()).collect();
        let functions: Vec<&str> = self.functions.iter().map(|f| f.name()).collect();
        let order: Vec<String> = match self.arrival {
            Some(Arrival::Earliest) => vec!["arrival, earliest first".into()],
            Some(Arrival::Latest) => vec!["arrival, latest first".into()],
            None => order,
        };
        let keeps = if self.input_updating {
            "keeps every row (updating input)"
        } else {
            "keeps the top rows only"
        };
        let ttl = self
            .state_ttl_ms
            .map(|t| format!(", state ttl {t}ms"))
            .unwrap_or_default();
        format!(
            "[{}] partition by ({}) order by ({}) where {} <= {}, {keeps}{ttl}",
            functions.join(", "),
            partition.join(", "),
            order.join(", "),
            self.functions.get(self.limited).map_or("?", |f| f.name()),
            self.limit
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        crate::operator::Distribution::hash(self.partition_by.clone())
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        let sort_fields = self
            .order_by
            .iter()
            .map(|s| {
                Ok(SortField::new_with_options(
                    s.expr.data_type(&self.input_schema)?,
                    s.options,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let row_fields = self
            .input_schema
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        if self.limited >= self.functions.len() {
            return Err(EngineError::operator(
                KIND,
                "the limit bounds no ranking function",
            ));
        }
        Ok(Box::new(UpdatingRank {
            rows_table: self.state_tables()?.remove(0),
            keys: super::key_converter(&self.partition_by, &self.input_schema)?,
            sort: RowConverter::new(sort_fields)?,
            rows: RowConverter::new(row_fields)?,
            plan: self.clone(),
            state: OrderedPartitions::new(self.state_ttl_ms),
            watermark: WATERMARK_MIN,
            arrivals: 0,
        }))
    }

    /// `rows` holds each partition's ranked rows: the partition key, the
    /// sort key and the row (row-encoded), the row's copies and when its
    /// partition was last touched (for the TTL). Keyed by the partition
    /// key.
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        Ok(vec![ordered_rows::table_spec(
            &self.partition_by,
            &self.input_schema,
            self.state_ttl_ms,
        )?])
    }

    /// The watermark is the least of the parts', the unmatched
    /// retractions their sum.
    fn rescale_state(
        &self,
        parts: Vec<crate::rescale::InstanceState>,
        keys: &crate::rescale::KeyRange,
    ) -> Result<StateSnapshot> {
        crate::rescale::rescaled(
            parts,
            &self.state_tables()?,
            keys,
            |metas: &[(Meta, bool)]| Meta {
                unmatched_retractions: crate::rescale::counted_sum(metas, |m| {
                    m.unmatched_retractions
                }),
                watermark: crate::rescale::least(metas, |m| m.watermark),
                // Arrival numbers order rows within a partition, whose rows
                // all come from one part: go on after the largest.
                arrivals: metas.iter().map(|(m, _)| m.arrivals).max().unwrap_or(0),
            },
        )
    }
}

/// One ranked row of a partition's top: its encoded row and its values of
/// the ranking functions.
type TopRow = (Box<[u8]>, Vec<u64>);

struct UpdatingRank {
    plan: UpdatingRankPlan,
    /// The plan's one state table.
    rows_table: TableSpec,
    keys: RowConverter,
    sort: RowConverter,
    rows: RowConverter,
    /// Each partition's rows in order.
    state: OrderedPartitions,
    watermark: Timestamp,
    /// Rows seen, the arrival number of the next (ranking by arrival).
    arrivals: u64,
}

/// What a checkpoint keeps besides the rows.
#[derive(serde::Serialize, serde::Deserialize)]
struct Meta {
    unmatched_retractions: u64,
    watermark: Timestamp,
    #[serde(default)]
    arrivals: u64,
}

impl UpdatingRank {
    /// A partition's rows that pass the limit, in rank order.
    fn top(&self, ranked: &Ordered) -> Vec<TopRow> {
        let mut top = Vec::new();
        let (mut row_number, mut rank, mut dense) = (0u64, 0u64, 0u64);
        let mut previous: Option<&[u8]> = None;
        for ((sort, row), &copies) in ranked {
            for _ in 0..copies {
                row_number += 1;
                if previous != Some(sort.as_ref()) {
                    rank = row_number;
                    dense += 1;
                    previous = Some(sort.as_ref());
                }
                let values: Vec<u64> = self
                    .plan
                    .functions
                    .iter()
                    .map(|f| match f {
                        RankFunction::RowNumber => row_number,
                        RankFunction::Rank => rank,
                        RankFunction::DenseRank => dense,
                    })
                    .collect();
                if values[self.plan.limited] > self.plan.limit as u64 {
                    return top;
                }
                top.push((row.clone(), values));
            }
        }
        top
    }

    fn output(&self, changes: Vec<(RowKind, TopRow)>) -> Result<RecordBatch> {
        let parser = self.rows.parser();
        let rows: Vec<_> = changes
            .iter()
            .map(|(_, (row, _))| parser.parse(row))
            .collect();
        let mut columns = self.rows.convert_rows(rows)?;
        for f in 0..self.plan.functions.len() {
            columns.push(Arc::new(UInt64Array::from(
                changes.iter().map(|(_, (_, v))| v[f]).collect::<Vec<_>>(),
            )));
        }
        columns.push(Arc::new(Int8Array::from(
            changes.iter().map(|(k, _)| k.byte()).collect::<Vec<_>>(),
        )));
        super::batch_of(&self.plan.output_schema, columns)
    }
}

/// The changes that turn `before` into `after`: rows taken out paired with
/// rows put in (`-U`, `+U`), then lone ones (`-D`, `+I`).
fn difference(before: Vec<TopRow>, after: Vec<TopRow>, out: &mut Vec<(RowKind, TopRow)>) {
    let mut count: HashMap<&TopRow, i64> = HashMap::new();
    for row in &after {
        *count.entry(row).or_insert(0) += 1;
    }
    for row in &before {
        *count.entry(row).or_insert(0) -= 1;
    }
    let mut balance = count.clone();
    let mut removed = Vec::new();
    for row in &before {
        if let Some(n) = balance.get_mut(row).filter(|n| **n < 0) {
            *n += 1;
            removed.push(row.clone());
        }
    }
    let mut balance = count;
    let mut added = Vec::new();
    for row in &after {
        if let Some(n) = balance.get_mut(row).filter(|n| **n > 0) {
            *n -= 1;
            added.push(row.clone());
        }
    }
    let pairs = removed.len().min(added.len());
    let mut added = added.into_iter();
    let mut removed = removed.into_iter();
    for _ in 0..pairs {
        if let (Some(old), Some(new)) = (removed.next(), added.next()) {
            out.push((RowKind::UpdateBefore, old));
            out.push((RowKind::UpdateAfter, new));
        }
    }
    out.extend(removed.map(|r| (RowKind::Delete, r)));
    out.extend(added.map(|r| (RowKind::Insert, r)));
}

impl Operator for UpdatingRank {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let kinds = changelog::checked_row_kinds(&batch, self.plan.input_updating, KIND)?;
        let data = changelog::data_columns(&batch)?;
        let (keys, _) = super::key_rows(&self.keys, &self.plan.partition_by, &data)?;
        let order = self
            .plan
            .order_by
            .iter()
            .map(|s| Ok(s.expr.evaluate(&data)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let sorts = self.sort.convert_columns(&order)?;
        // Ranking by arrival: the sort key is the row's arrival number
        // (big-endian, so byte order is arrival order; inverted for latest
        // first).
        let arrival = self.plan.arrival;
        let first_arrival = self.arrivals;
        self.arrivals += n as u64;
        let sort_key = |r: usize| -> Box<[u8]> {
            match arrival {
                None => sorts.row(r).data().into(),
                Some(Arrival::Earliest) => Box::new((first_arrival + r as u64).to_be_bytes()),
                Some(Arrival::Latest) => {
                    Box::new((u64::MAX - (first_arrival + r as u64)).to_be_bytes())
                }
            }
        };
        let rows = self.rows.convert_columns(data.columns())?;

        let mut changes = Vec::new();
        let touched = OrderedPartitions::touched(&keys);
        self.state
            .read_back(touched.iter().map(|(key, _)| key.as_ref()))?;
        for (key, members) in touched {
            let mut ranked = self.state.take(&key);
            let before = self.top(&ranked);
            for r in members {
                let retraction = kinds
                    .as_ref()
                    .is_some_and(|k| changelog::is_retraction_byte(k.value(r)));
                self.state.apply(
                    &mut ranked,
                    (sort_key(r), rows.row(r).data().into()),
                    retraction,
                );
            }
            let after = self.top(&ranked);
            if !self.plan.input_updating {
                // An append-only partition's rows below its top can never
                // rank in it again.
                self.state.keep_first(&mut ranked, after.len());
            }
            difference(before, after, &mut changes);
            self.state.put_back(key, ranked, self.watermark);
        }
        if !changes.is_empty() {
            out.emit(self.output(changes)?);
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: Timestamp, _out: &mut Collector) -> Result<()> {
        self.watermark = self.watermark.max(watermark);
        self.state.expire(self.watermark);
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.state.held()
    }

    fn state_bytes(&self) -> usize {
        self.state.bytes()
    }

    /// Counted as rows come and go.
    fn state_bytes_are_counted(&self) -> bool {
        true
    }

    /// Every partition in memory goes to disk and memory starts afresh;
    /// a partition comes back the first time a row touches it. Without
    /// PARTITION BY (one partition) nothing spills.
    fn spill(&mut self, space: &Arc<crate::spill::SpillSpace>) -> Result<bool> {
        if self.plan.partition_by.is_empty() {
            return Ok(false);
        }
        self.state.spill(space, KIND)
    }

    fn spill_stats(&self) -> crate::spill::SpillStats {
        self.state.spill_stats()
    }

    fn late_rows(&self) -> u64 {
        self.state.unmatched_retractions()
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&Meta {
            unmatched_retractions: self.state.unmatched_retractions(),
            watermark: self.watermark,
            arrivals: self.arrivals,
        })?;
        self.state.put_table(&self.rows_table, &mut snapshot)?;
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        if state.is_empty() {
            return Ok(());
        }
        let meta: Meta = state.meta()?;
        self.watermark = meta.watermark;
        self.arrivals = meta.arrivals;
        let table = state.take(&self.rows_table)?;
        self.state.restore(
            &self.rows_table,
            &table,
            meta.unmatched_retractions,
            meta.watermark,
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::compute::SortOptions;
    use datafusion::physical_expr::expressions::col;

    use super::*;
    use crate::operators::testing::{changes, keyed as rows};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn input() -> SchemaRef {
        crate::operators::testing::kv_schema()
    }

    /// Top `limit` by v DESC per k, with the given functions.
    fn plan(functions: Vec<RankFunction>, limit: usize, input_updating: bool) -> UpdatingRankPlan {
        let schema = input();
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        for f in &functions {
            fields.push(Field::new(f.name(), DataType::UInt64, true));
        }
        UpdatingRankPlan {
            input_schema: schema.clone(),
            output_schema: changelog::updating_schema(&Schema::new(fields), &[]),
            partition_by: vec![col("k", &schema).unwrap()],
            order_by: vec![PhysicalSortExpr::new(
                col("v", &schema).unwrap(),
                SortOptions::new(true, false),
            )],
            functions,
            limited: 0,
            limit,
            input_updating,
            state_ttl_ms: None,
            arrival: None,
        }
    }

    #[test]
    fn a_new_leader_shifts_the_ranks_below_it() {
        let mut op = plan(vec![RankFunction::RowNumber], 2, false)
            .create()
            .unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&["a", "a", "b"], &[5, 3, 1], None), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["+I a 5 1", "+I a 3 2", "+I b 1 1"]);
        op.on_batch(0, rows(&["a"], &[9], None), &mut out).unwrap();
        assert_eq!(
            changes(&mut out),
            ["-U a 5 1", "+U a 9 1", "-U a 3 2", "+U a 5 2"]
        );
        // Append-only: a's third row is gone for good.
        assert_eq!(op.state_rows(), 3);
        op.on_batch(0, rows(&["a"], &[1], None), &mut out).unwrap();
        assert!(changes(&mut out).is_empty());
    }

    #[test]
    fn a_retraction_lifts_the_next_row_into_the_top() {
        let mut op = plan(vec![RankFunction::RowNumber], 1, true)
            .create()
            .unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&["a", "a"], &[5, 3], Some(&[0, 0])), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["+I a 5 1"]);
        op.on_batch(0, rows(&["a"], &[5], Some(&[3])), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["-U a 5 1", "+U a 3 1"]);
        op.on_batch(0, rows(&["a"], &[3], Some(&[3])), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["-D a 3 1"]);
        assert_eq!(op.state_rows(), 0);
    }

    #[test]
    fn rank_keeps_ties_and_a_snapshot_restores_the_partitions() {
        let plan = plan(vec![RankFunction::Rank, RankFunction::DenseRank], 2, false);
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&["a", "a", "a"], &[5, 5, 3], None), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["+I a 5 1 1", "+I a 5 1 1"]);
        let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
        for op in [&mut op, &mut restored] {
            op.on_batch(0, rows(&["a"], &[7], None), &mut out).unwrap();
            assert_eq!(
                changes(&mut out),
                [
                    "-U a 5 1 1",
                    "+U a 7 1 1",
                    "-U a 5 1 1",
                    "+U a 5 2 2",
                    "+I a 5 2 2"
                ]
            );
        }
    }

    #[test]
    fn a_partition_idle_past_the_ttl_is_forgotten() {
        let mut plan = plan(vec![RankFunction::RowNumber], 1, false);
        plan.state_ttl_ms = Some(10);
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_watermark(0, &mut out).unwrap();
        op.on_batch(0, rows(&["a", "b"], &[5, 3], None), &mut out)
            .unwrap();
        op.on_watermark(8, &mut out).unwrap();
        op.on_batch(0, rows(&["a"], &[6], None), &mut out).unwrap();
        assert_eq!(
            changes(&mut out),
            ["+I a 5 1", "+I b 3 1", "-U a 5 1", "+U a 6 1"]
        );
        op.on_watermark(15, &mut out).unwrap();
        assert_eq!(op.state_rows(), 1, "b, untouched since 0, is gone");
        let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
        for op in [&mut op, &mut restored] {
            op.on_batch(0, rows(&["b", "a"], &[1, 2], None), &mut out)
                .unwrap();
            assert_eq!(
                changes(&mut out),
                ["+I b 1 1"],
                "b starts afresh; a keeps 6"
            );
        }
    }

    #[test]
    fn ranking_by_arrival_keeps_the_first_or_the_last_row() {
        let mut first = plan(vec![RankFunction::RowNumber], 1, false);
        first.arrival = Some(Arrival::Earliest);
        let mut op = first.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&["a", "a"], &[5, 9], None), &mut out)
            .unwrap();
        op.on_batch(0, rows(&["a"], &[1], None), &mut out).unwrap();
        assert_eq!(changes(&mut out), ["+I a 5 1"], "the first stays");

        let mut last = first.clone();
        last.arrival = Some(Arrival::Latest);
        let mut op = last.create().unwrap();
        op.on_batch(0, rows(&["a", "a"], &[5, 9], None), &mut out)
            .unwrap();
        op.on_batch(0, rows(&["a"], &[1], None), &mut out).unwrap();
        assert_eq!(changes(&mut out), ["+I a 9 1", "-U a 9 1", "+U a 1 1"]);
        let mut restored = crate::operators::testing::restored(&last, op.as_mut());
        for op in [&mut op, &mut restored] {
            op.on_batch(0, rows(&["a"], &[3], None), &mut out).unwrap();
            assert_eq!(
                changes(&mut out),
                ["-U a 1 1", "+U a 3 1"],
                "arrivals go on counting"
            );
        }
    }

    #[test]
    fn state_bytes_are_kept_as_rows_come_and_go() {
        let walk = |op: &mut Box<dyn Operator>| {
            // A restore sizes its state by walking it.
            let mut fresh = plan(vec![RankFunction::RowNumber], 2, true)
                .create()
                .unwrap();
            fresh.restore(op.snapshot().unwrap()).unwrap();
            fresh.state_bytes()
        };
        let mut op = plan(vec![RankFunction::RowNumber], 2, true)
            .create()
            .unwrap();
        let mut out = Collector::default();
        op.on_batch(
            0,
            rows(&["a", "a", "b"], &[5, 3, 4], Some(&[0, 0, 0])),
            &mut out,
        )
        .unwrap();
        assert_eq!(op.state_bytes(), walk(&mut op));
        op.on_batch(0, rows(&["a", "b"], &[5, 4], Some(&[3, 3])), &mut out)
            .unwrap();
        assert_eq!(op.state_bytes(), walk(&mut op));
        assert!(op.state_bytes() > 0);
        op.on_batch(0, rows(&["a"], &[3], Some(&[3])), &mut out)
            .unwrap();
        assert_eq!(op.state_bytes(), 0, "nothing held, nothing counted");
        // Over an append-only input rows below the top are trimmed.
        let mut op = plan(vec![RankFunction::RowNumber], 1, false)
            .create()
            .unwrap();
        op.on_batch(0, rows(&["a", "a", "b"], &[5, 3, 4], None), &mut out)
            .unwrap();
        op.on_batch(0, rows(&["a"], &[9], None), &mut out).unwrap();
        let mut fresh = plan(vec![RankFunction::RowNumber], 1, false)
            .create()
            .unwrap();
        fresh.restore(op.snapshot().unwrap()).unwrap();
        assert_eq!(op.state_bytes(), fresh.state_bytes());
        assert_eq!(op.state_rows(), 2);
    }

    #[test]
    fn spilled_partitions_come_back_as_they_left_and_every_change_is_the_same() {
        use crate::operators::testing::{assert_spilling_changes_nothing, kv_churn};
        let mut plan = plan(vec![RankFunction::RowNumber, RankFunction::Rank], 2, true);
        // The watermark passes the TTL: idle partitions expire in memory
        // and on disk alike.
        plan.state_ttl_ms = Some(6);
        let batches: Vec<(usize, RecordBatch)> =
            kv_churn(40, 25).into_iter().map(|b| (0, b)).collect();
        assert_spilling_changes_nothing(&plan, &batches, 4);
    }

    #[test]
    fn one_partition_does_not_spill() {
        let mut plan = plan(vec![RankFunction::RowNumber], 2, false);
        plan.partition_by.clear();
        let mut op = plan.create().unwrap();
        op.on_batch(0, rows(&["a"], &[1], None), &mut Collector::default())
            .unwrap();
        let space = Arc::new(crate::spill::SpillSpace::new(Default::default()));
        assert!(!op.spill(&space).unwrap());
    }
}
