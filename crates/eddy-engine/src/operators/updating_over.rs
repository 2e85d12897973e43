//! OVER in any order, with results that change: `f(...) OVER (PARTITION BY
//! k ORDER BY x ...)` where `x` is not the input's event time, or the input
//! has none, or the input is updating (Flink's OVER ordered by a value,
//! RisingWave's OVER over a table).
//!
//! In: an append-only or updating stream. Out: an updating stream: the
//! input's columns, one column per window function, the row kind. A row
//! that comes in may change the values of others in its partition (a
//! running sum ordered by value changes for every larger value; a `lead`
//! changes for the row before), so per input batch each partition it
//! touched emits the difference between its rows before and after the
//! batch: a row whose values changed is taken out and put back (`-U`,
//! `+U`), a new row put in (`+I`), a retracted one taken out (`-D`).
//!
//! Any DataFusion window function runs here, with any frame: the values are
//! DataFusion's own (`WindowExpr::evaluate`) over the partition's rows in
//! order, so they are exactly a batch query's over the same rows. Rows
//! compare by their ORDER BY values (Arrow row encoding with the SQL sort
//! options), ties by the row's own encoding, so the result never depends on
//! batching.
//!
//! Cost: a touched partition is evaluated whole, twice per batch (before
//! and after). That suits partitions of up to some thousands of rows;
//! larger ones want a PARTITION BY, an event-time order (the `over`
//! operator, which keeps only running state), or a state TTL.
//!
//! State per partition: its rows in order as encoded rows with counts;
//! every row is kept, since any may still change. State time-to-live (`SET
//! 'table.exec.state.ttl'`): a partition no row touched while the watermark
//! advanced by more than the TTL is forgotten (no change goes out for it).
//!
//! Checkpoints: one table of (partition, sort key, row, copies, the
//! watermark that last touched the partition).
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, StringArray};
//! use datafusion::arrow::compute::SortOptions;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use datafusion::functions_aggregate::sum::sum_udaf;
//! use datafusion::logical_expr::{WindowFrame, WindowFunctionDefinition};
//! use datafusion::physical_expr::expressions::col;
//! use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
//! use datafusion::physical_plan::windows::create_window_expr;
//! use eddy_engine::changelog;
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::updating_over::UpdatingOverPlan;
//!
//! let input = Arc::new(Schema::new(vec![
//!     Field::new("k", DataType::Utf8, true),
//!     Field::new("v", DataType::Int64, true),
//! ]));
//! // SUM(v) OVER (PARTITION BY k ORDER BY v), the running sum by value.
//! let partition_by = vec![col("k", &input).unwrap()];
//! let order_by = vec![PhysicalSortExpr::new(col("v", &input).unwrap(), SortOptions::default())];
//! let sum = create_window_expr(
//!     &WindowFunctionDefinition::AggregateUDF(sum_udaf()),
//!     "s".to_string(),
//!     &[col("v", &input).unwrap()],
//!     &partition_by,
//!     &order_by,
//!     Arc::new(WindowFrame::new(Some(true))),
//!     input.clone(),
//!     false,
//!     false,
//!     None,
//! )
//! .unwrap();
//! let plan = UpdatingOverPlan {
//!     input_schema: input.clone(),
//!     output_schema: changelog::updating_schema(
//!         &Schema::new(vec![
//!             Field::new("k", DataType::Utf8, true),
//!             Field::new("v", DataType::Int64, true),
//!             Field::new("s", DataType::Int64, true),
//!         ]),
//!         &[],
//!     ),
//!     partition_by,
//!     order_by,
//!     functions: vec![sum],
//!     input_updating: false,
//!     state_ttl_ms: None,
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
//! op.on_batch(0, rows(vec![1, 5]), &mut out).unwrap(); // +I (a, 1, 1), +I (a, 5, 6)
//! op.on_batch(0, rows(vec![2]), &mut out).unwrap(); // +I (a, 2, 3), -U (a, 5, 6), +U (a, 5, 8)
//! let kinds: Vec<i8> = out
//!     .drain()
//!     .flat_map(|(_, b)| changelog::row_kinds(&b).unwrap().values().to_vec())
//!     .collect();
//! assert_eq!(kinds, vec![0, 0, 1, 2, 0]);
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int8Array};
use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::window::WindowExpr;
use datafusion::physical_expr::{PhysicalExpr, PhysicalSortExpr};
use hashbrown::HashMap;

use super::ordered_rows::{self, Ordered, OrderedPartitions};
use crate::changelog::{self, RowKind};
use crate::error::{EngineError, Result};
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::state::declared::TableSpec;
use crate::state::StateSnapshot;
use crate::time::{Timestamp, WATERMARK_MIN};

const KIND: &str = "updating_over";

/// Plan of an OVER node whose results change.
#[derive(Debug, Clone)]
pub struct UpdatingOverPlan {
    /// The input's own columns (an updating input's row kind follows them).
    pub input_schema: SchemaRef,
    /// The input's columns, one column per window function, the row kind.
    pub output_schema: SchemaRef,
    /// PARTITION BY expressions (none: one partition).
    pub partition_by: Vec<Arc<dyn PhysicalExpr>>,
    /// ORDER BY expressions with their directions.
    pub order_by: Vec<PhysicalSortExpr>,
    /// The window functions (DataFusion's), in output order; all share the
    /// PARTITION BY and ORDER BY above.
    pub functions: Vec<Arc<dyn WindowExpr>>,
    /// Whether the input is updating.
    pub input_updating: bool,
    /// `SET 'table.exec.state.ttl'`: forget a partition the watermark has
    /// passed by this much since a row last touched it.
    pub state_ttl_ms: Option<i64>,
}

impl OperatorPlan for UpdatingOverPlan {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        let order: Vec<String> = self.order_by.iter().map(|s| s.to_string()).collect();
        let functions: Vec<&str> = self.functions.iter().map(|f| f.name()).collect();
        P::new()
            .exprs("partition_by", &self.partition_by)
            .list("order_by", order)
            .list("functions", functions)
            .flag("input_updating", self.input_updating)
            .debug("state_ttl_ms", self.state_ttl_ms)
    }

    fn describe(&self) -> String {
        let order: Vec<String> = self.order_by.iter().map(|s| s.to_string()).collect();
        let partition: Vec<String> = self.partition_by.iter().map(|e| e.to_string()).collect();
        let functions: Vec<&str> = self.functions.iter().map(|f| f.name()).collect();
        let ttl = self
            .state_ttl_ms
            .map(|t| format!(", state ttl {t}ms"))
            .unwrap_or_default();
        format!(
            "[{}] partition by ({}) order by ({}), every row kept, changes re-evaluate their partition{ttl}",
            functions.join(", "),
            partition.join(", "),
            order.join(", "),
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
        let first_value = self.input_schema.fields().len();
        let value_fields: Vec<Field> = (0..self.functions.len())
            .map(|f| self.output_schema.field(first_value + f).clone())
            .collect();
        if self.output_schema.fields().len() != first_value + self.functions.len() + 1 {
            return Err(EngineError::operator(
                KIND,
                "the output is not the input's columns, a column per function and the row kind",
            ));
        }
        Ok(Box::new(UpdatingOver {
            rows_table: self.state_tables()?.remove(0),
            keys: super::key_converter(&self.partition_by, &self.input_schema)?,
            sort: RowConverter::new(sort_fields)?,
            rows: super::row_converter(&self.input_schema)?,
            values: super::row_converter(&Schema::new(value_fields))?,
            plan: self.clone(),
            state: OrderedPartitions::new(self.state_ttl_ms),
            watermark: WATERMARK_MIN,
        }))
    }

    /// `rows` holds each partition's rows in order, keyed by the
    /// partition key ([`ordered_rows::table_spec`]).
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
            },
        )
    }
}

/// One output row: the input row and its functions' values, encoded.
type OutputRow = (Box<[u8]>, Box<[u8]>);

struct UpdatingOver {
    plan: UpdatingOverPlan,
    /// The plan's one state table.
    rows_table: TableSpec,
    keys: RowConverter,
    sort: RowConverter,
    rows: RowConverter,
    values: RowConverter,
    /// Each partition's rows in order.
    state: OrderedPartitions,
    watermark: Timestamp,
}

/// What a checkpoint keeps besides the rows.
#[derive(serde::Serialize, serde::Deserialize)]
struct Meta {
    unmatched_retractions: u64,
    watermark: Timestamp,
}

impl UpdatingOver {
    /// A partition's output rows: every row in order with the functions'
    /// values over the whole partition.
    fn evaluate(&self, ordered: &Ordered) -> Result<Vec<OutputRow>> {
        if ordered.is_empty() {
            return Ok(Vec::new());
        }
        let parser = self.rows.parser();
        let encoded: Vec<&[u8]> = ordered
            .iter()
            .flat_map(|((_, row), &copies)| std::iter::repeat_n(row.as_ref(), copies as usize))
            .collect();
        let columns = self
            .rows
            .convert_rows(encoded.iter().map(|row| parser.parse(row)))?;
        let batch = super::batch_of(&self.plan.input_schema, columns)?;
        let first_value = self.plan.input_schema.fields().len();
        let values = self
            .plan
            .functions
            .iter()
            .enumerate()
            .map(|(f, function)| {
                let column = function.evaluate(&batch)?;
                let wanted = self.plan.output_schema.field(first_value + f).data_type();
                Ok(if column.data_type() == wanted {
                    column
                } else {
                    datafusion::arrow::compute::cast(&column, wanted)?
                })
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let values = self.values.convert_columns(&values)?;
        Ok(encoded
            .into_iter()
            .enumerate()
            .map(|(i, row)| (row.into(), values.row(i).data().into()))
            .collect())
    }

    /// Output rows as a batch of the output schema.
    fn output(&self, changes: Vec<(RowKind, OutputRow)>) -> Result<RecordBatch> {
        let rows = self.rows.parser();
        let values = self.values.parser();
        let mut columns = self
            .rows
            .convert_rows(changes.iter().map(|(_, (row, _))| rows.parse(row)))?;
        columns.extend(
            self.values
                .convert_rows(changes.iter().map(|(_, (_, v))| values.parse(v)))?,
        );
        columns.push(Arc::new(Int8Array::from(
            changes.iter().map(|(k, _)| k.byte()).collect::<Vec<_>>(),
        )));
        super::batch_of(&self.plan.output_schema, columns)
    }
}

/// The changes that turn `before` into `after`: a row whose values changed
/// goes out and back in (`-U`, `+U`), a row only before is deleted (`-D`),
/// one only after inserted (`+I`). Rows compare as multisets.
fn difference(before: Vec<OutputRow>, after: Vec<OutputRow>, out: &mut Vec<(RowKind, OutputRow)>) {
    let mut balance: HashMap<&OutputRow, i64> = HashMap::new();
    for row in &after {
        *balance.entry(row).or_insert(0) += 1;
    }
    for row in &before {
        *balance.entry(row).or_insert(0) -= 1;
    }
    let mut removed: Vec<&OutputRow> = Vec::new();
    let mut added: Vec<&OutputRow> = Vec::new();
    for row in &before {
        if let Some(n) = balance.get_mut(row).filter(|n| **n < 0) {
            *n += 1;
            removed.push(row);
        }
    }
    for row in &after {
        if let Some(n) = balance.get_mut(row).filter(|n| **n > 0) {
            *n -= 1;
            added.push(row);
        }
    }
    // Pair each removed row with an added one of the same input row.
    let mut added_by_row: HashMap<&[u8], Vec<&OutputRow>> = HashMap::new();
    for row in added.iter().rev() {
        added_by_row.entry(row.0.as_ref()).or_default().push(row);
    }
    for old in removed {
        match added_by_row.get_mut(old.0.as_ref()).and_then(Vec::pop) {
            Some(new) => {
                out.push((RowKind::UpdateBefore, old.clone()));
                out.push((RowKind::UpdateAfter, new.clone()));
            }
            None => out.push((RowKind::Delete, old.clone())),
        }
    }
    for row in added {
        if let Some(left) = added_by_row.get_mut(row.0.as_ref()) {
            if let Some(at) = left.iter().position(|r| std::ptr::eq(*r, row)) {
                left.remove(at);
                out.push((RowKind::Insert, row.clone()));
            }
        }
    }
}

impl Operator for UpdatingOver {
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
        // Without an ORDER BY every row is a peer of every other: one
        // empty sort key, ties in row order.
        let sorts = (!order.is_empty())
            .then(|| self.sort.convert_columns(&order))
            .transpose()?;
        let rows = self.rows.convert_columns(data.columns())?;

        let mut changes = Vec::new();
        let touched = OrderedPartitions::touched(&keys);
        self.state
            .read_back(touched.iter().map(|(key, _)| key.as_ref()))?;
        for (key, members) in touched {
            let mut ordered = self.state.take(&key);
            let before = self.evaluate(&ordered)?;
            for r in members {
                let sort: Box<[u8]> = sorts
                    .as_ref()
                    .map_or_else(Box::default, |s| s.row(r).data().into());
                let retraction = kinds
                    .as_ref()
                    .is_some_and(|k| changelog::is_retraction_byte(k.value(r)));
                self.state
                    .apply(&mut ordered, (sort, rows.row(r).data().into()), retraction);
            }
            let after = self.evaluate(&ordered)?;
            difference(before, after, &mut changes);
            self.state.put_back(key, ordered, self.watermark);
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

    /// Retractions of rows the operator never held (counted, ignored).
    fn late_rows(&self) -> u64 {
        self.state.unmatched_retractions()
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&Meta {
            unmatched_retractions: self.state.unmatched_retractions(),
            watermark: self.watermark,
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
    use datafusion::functions_aggregate::sum::sum_udaf;
    use datafusion::functions_window::lead_lag::lead_udwf;
    use datafusion::logical_expr::{WindowFrame, WindowFunctionDefinition};
    use datafusion::physical_expr::expressions::col;
    use datafusion::physical_plan::windows::create_window_expr;

    use super::*;
    use crate::operators::testing::{changes, keyed as rows};
    use datafusion::arrow::datatypes::DataType;

    /// `sum(v)` (running, by value) and `lead(v)` per `k` ordered by `v`.
    fn plan(input_updating: bool, state_ttl_ms: Option<i64>) -> UpdatingOverPlan {
        let schema = crate::operators::testing::kv_schema();
        let partition_by = vec![col("k", &schema).unwrap()];
        let order_by = vec![PhysicalSortExpr::new(
            col("v", &schema).unwrap(),
            SortOptions::default(),
        )];
        let window = |function, name: &str| {
            create_window_expr(
                &function,
                name.to_string(),
                &[col("v", &schema).unwrap()],
                &partition_by,
                &order_by,
                Arc::new(WindowFrame::new(Some(true))),
                schema.clone(),
                false,
                false,
                None,
            )
            .unwrap()
        };
        let functions = vec![
            window(WindowFunctionDefinition::AggregateUDF(sum_udaf()), "s"),
            window(WindowFunctionDefinition::WindowUDF(lead_udwf()), "next"),
        ];
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("s", DataType::Int64, true));
        fields.push(Field::new("next", DataType::Int64, true));
        UpdatingOverPlan {
            input_schema: schema.clone(),
            output_schema: changelog::updating_schema(&Schema::new(fields), &[]),
            partition_by,
            order_by,
            functions,
            input_updating,
            state_ttl_ms,
        }
    }

    #[test]
    fn a_row_changes_the_rows_after_it_in_order() {
        let mut op = plan(false, None).create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&["a", "a", "b"], &[1, 5, 7], None), &mut out)
            .unwrap();
        assert_eq!(
            changes(&mut out),
            ["+I a 1 1 5", "+I a 5 6 NULL", "+I b 7 7 NULL"]
        );
        // 3 falls between 1 and 5: 1's lead and 5's sum change.
        op.on_batch(0, rows(&["a"], &[3], None), &mut out).unwrap();
        assert_eq!(
            changes(&mut out),
            [
                "-U a 1 1 5",
                "+U a 1 1 3",
                "-U a 5 6 NULL",
                "+U a 5 9 NULL",
                "+I a 3 4 5"
            ]
        );
        // A row above every other changes only the last row's lead.
        op.on_batch(0, rows(&["b"], &[9], None), &mut out).unwrap();
        assert_eq!(
            changes(&mut out),
            ["-U b 7 7 NULL", "+U b 7 7 9", "+I b 9 16 NULL"]
        );
        assert_eq!(op.state_rows(), 5, "every row is kept");
    }

    #[test]
    fn a_retraction_takes_its_row_out_and_revises_the_rest_across_a_snapshot() {
        let plan = plan(true, None);
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        let insert = RowKind::Insert.byte();
        let delete = RowKind::Delete.byte();
        op.on_batch(
            0,
            rows(
                &["a", "a", "a"],
                &[1, 2, 3],
                Some(&[insert, insert, insert]),
            ),
            &mut out,
        )
        .unwrap();
        changes(&mut out);
        let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
        for op in [&mut op, &mut restored] {
            op.on_batch(0, rows(&["a"], &[2], Some(&[delete])), &mut out)
                .unwrap();
            assert_eq!(
                changes(&mut out),
                [
                    "-U a 1 1 2",
                    "+U a 1 1 3",
                    "-D a 2 3 3",
                    "-U a 3 6 NULL",
                    "+U a 3 4 NULL"
                ]
            );
            // A retraction of a row never held is counted, not applied.
            op.on_batch(0, rows(&["a"], &[8], Some(&[delete])), &mut out)
                .unwrap();
            assert!(changes(&mut out).is_empty());
            assert_eq!(op.late_rows(), 1);
        }
    }

    #[test]
    fn a_partition_idle_past_the_ttl_is_forgotten() {
        let mut op = plan(false, Some(10)).create().unwrap();
        let mut out = Collector::default();
        op.on_watermark(1, &mut out).unwrap();
        op.on_batch(0, rows(&["a"], &[1], None), &mut out).unwrap();
        op.on_watermark(8, &mut out).unwrap();
        op.on_batch(0, rows(&["b"], &[1], None), &mut out).unwrap();
        op.on_watermark(14, &mut out).unwrap();
        assert_eq!(
            op.state_rows(),
            1,
            "a was last touched at 1, before 14 - 10"
        );
        changes(&mut out);
        op.on_batch(0, rows(&["a"], &[2], None), &mut out).unwrap();
        assert_eq!(changes(&mut out), ["+I a 2 2 NULL"], "a starts afresh");
    }

    #[test]
    fn spilled_partitions_come_back_as_they_left_and_every_change_is_the_same() {
        use crate::operators::testing::{assert_spilling_changes_nothing, kv_churn};
        // The watermark passes the TTL: idle partitions expire in memory
        // and on disk alike.
        let plan = plan(true, Some(6));
        let batches: Vec<(usize, RecordBatch)> =
            kv_churn(40, 25).into_iter().map(|b| (0, b)).collect();
        assert_spilling_changes_nothing(&plan, &batches, 4);
    }
}
