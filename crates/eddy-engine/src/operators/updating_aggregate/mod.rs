//! GROUP BY without a window: a result table that changes with every input
//! row, emitted as a changelog (see [`crate::changelog`]).
//!
//! In: batches of an append-only or an updating stream (an updating one's
//! `-U`/`-D` rows are taken back out of their group). Out: an updating
//! stream: the group columns, the aggregates (laid out as DataFusion's
//! `Aggregate` node lays them out, so HAVING and the outer SELECT are
//! ordinary calc steps), then the row kind. Per input batch each group it
//! touched emits at most one change:
//!
//! ```text
//!   group had no rows, has rows now       +I new
//!   group had rows, has rows now          -U old, +U new   (nothing if equal)
//!   group had rows, has none now          -D old
//! ```
//!
//! State: keys interned to group indices by DataFusion's `GroupValues`,
//! each group's net row count, and per aggregate one
//! [`column::AggregateColumn`] over all groups: count, sum, avg, min and
//! max over 64-bit numbers are kept columnar ([`columnar`], one vector a
//! field, a batch folded in by one pass); any other aggregate keeps a
//! DataFusion accumulator or an argument multiset per group ([`rows`]). A
//! batch's old and new values of the groups it touched are read out as
//! arrays, compared, and the changes gathered from them: nothing per row
//! or per group allocates.
//!
//! State time-to-live (`SET 'table.exec.state.ttl'`): a group no row has
//! touched while the watermark advanced by more than the TTL is forgotten
//! (swept every half TTL of watermark); a later row of its key starts it
//! afresh with a `+I`, as in Flink, where the TTL counts processing time.
//! Without a watermark (a change feed declares none) nothing expires.
//!
//! Checkpoints: one table `groups` (key columns, net row count, the
//! watermark that last touched the group, then every aggregate's state
//! columns, laid out as DataFusion's accumulator of it lays out its
//! `state()`) and one table `values{i}` per multiset aggregate (group index,
//! encoded arguments, count). `GroupValues` hands keys over only by
//! draining them; a snapshot re-interns them in order, through the code a
//! restore runs. At a checkpoint a keyed aggregate without multisets hands
//! over only the groups touched or expired since the previous one
//! ([`crate::state::changed_keys`]).
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, StringArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use datafusion::functions_aggregate::count::count_udaf;
//! use datafusion::physical_expr::aggregate::AggregateExprBuilder;
//! use datafusion::physical_expr::expressions::col;
//! use eddy_engine::changelog;
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::updating_aggregate::{AggregateCall, UpdatingAggregatePlan};
//!
//! let input = Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)]));
//! let count = AggregateExprBuilder::new(count_udaf(), vec![col("k", &input).unwrap()])
//!     .schema(input.clone())
//!     .alias("n")
//!     .build()
//!     .unwrap();
//! let output = changelog::updating_schema(
//!     &Schema::new(vec![
//!         Field::new("k", DataType::Utf8, true),
//!         Field::new("n", DataType::Int64, true),
//!     ]),
//!     &["k".to_string()],
//! );
//! let plan = UpdatingAggregatePlan {
//!     input_schema: input.clone(),
//!     output_schema: output,
//!     keys: vec![(col("k", &input).unwrap(), "k".into())],
//!     aggregates: vec![AggregateCall { expr: Arc::new(count), filter: None }],
//!     input_updating: false,
//!     state_ttl_ms: None,
//! };
//! let mut op = plan.create().unwrap();
//! let mut out = Collector::default();
//! let rows = RecordBatch::try_new(input, vec![Arc::new(StringArray::from(vec!["a", "a"]))]).unwrap();
//! op.on_batch(0, rows.clone(), &mut out).unwrap();
//! op.on_batch(0, rows, &mut out).unwrap();
//! let kinds: Vec<i8> = out
//!     .drain()
//!     .flat_map(|(_, b)| changelog::row_kinds(&b).unwrap().values().to_vec())
//!     .collect();
//! assert_eq!(kinds, vec![0, 1, 2]); // +I (a, 2), then -U (a, 2), +U (a, 4)
//! ```

mod column;
mod columnar;
mod rows;
mod spilled;

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, Int8Array, RecordBatch, UInt32Array,
};
use datafusion::arrow::compute::kernels::cmp::distinct;
use datafusion::arrow::compute::{filter, interleave, take};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::EmitTo;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;

use self::column::{AggregateColumn, BatchRows};
use super::ttl::TtlSweeps;
use crate::changelog::{self, RowKind};
use crate::error::{EngineError, Result};
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::state::changed_keys::ChangedKeys;
use crate::state::declared::{TableKey, TableSpec};
use crate::state::StateSnapshot;
use crate::time::{Timestamp, WATERMARK_MIN};

const KIND: &str = "updating_aggregate";
/// The state table with a row per group.
const GROUPS: &str = "groups";

pub use super::AggregateCall;

/// Plan of a GROUP BY without a window.
#[derive(Debug, Clone)]
pub struct UpdatingAggregatePlan {
    /// The input's own columns (an updating input's row kind follows them).
    pub input_schema: SchemaRef,
    /// Group columns, aggregates, then the row-kind field.
    pub output_schema: SchemaRef,
    /// Key expressions with their output names (none: one global group).
    pub keys: Vec<(Arc<dyn PhysicalExpr>, String)>,
    /// The aggregates, in output order.
    pub aggregates: Vec<AggregateCall>,
    /// Whether the input is an updating stream (its `-U`/`-D` rows are
    /// taken back out); fixes how each aggregate is kept.
    pub input_updating: bool,
    /// `SET 'table.exec.state.ttl'`: forget a group the watermark has
    /// passed by this much since a row last touched it.
    pub state_ttl_ms: Option<i64>,
}

impl UpdatingAggregatePlan {
    /// The grouping keys, as expressions over the input rows.
    fn key_exprs(&self) -> Vec<Arc<dyn PhysicalExpr>> {
        self.keys.iter().map(|(expr, _)| Arc::clone(expr)).collect()
    }
}

impl OperatorPlan for UpdatingAggregatePlan {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        P::new()
            .exprs("keys", &self.key_exprs())
            .list(
                "aggregates",
                self.aggregates.iter().map(super::AggregateCall::shape),
            )
            .flag("input_updating", self.input_updating)
            .debug("state_ttl_ms", self.state_ttl_ms)
    }

    fn describe(&self) -> String {
        let keys: Vec<&str> = self.keys.iter().map(|(_, n)| n.as_str()).collect();
        let aggs: Vec<String> = self
            .aggregates
            .iter()
            .map(|a| a.expr.name().to_string())
            .collect();
        let input = if self.input_updating {
            "updating input (retractions applied)"
        } else {
            "append-only input"
        };
        let ttl = self
            .state_ttl_ms
            .map(|t| format!(", state ttl {t}ms"))
            .unwrap_or_default();
        format!(
            "by ({}), {input}, a change per touched key and batch: [{}]{ttl}",
            keys.join(", "),
            aggs.join(", ")
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        crate::operator::Distribution::hash(
            self.keys.iter().map(|(expr, _)| Arc::clone(expr)).collect(),
        )
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        let key_fields = super::key_fields(&self.keys, &self.input_schema)?;
        let columns = self.columns()?;
        Ok(Box::new(UpdatingAggregate {
            tables: self.state_tables()?,
            plan: self.clone(),
            key_schema: Arc::new(Schema::new(key_fields)),
            groups: None,
            needs_order: columns.iter().any(|c| c.needs_order()),
            columns,
            rows: Vec::new(),
            touched_at: Vec::new(),
            group_indices: Vec::new(),
            slot_of: Vec::new(),
            live_groups: 0,
            unmatched_retractions: 0,
            watermark: WATERMARK_MIN,
            sweeps: TtlSweeps::new(self.state_ttl_ms),
            expired_before: WATERMARK_MIN,
            changed: ChangedKeys::default(),
            spilled: None,
        }))
    }

    /// `groups` holds a row per group: its keys, its row count, when it
    /// was last touched (for the TTL), each aggregate's state columns; an
    /// aggregate that keeps a table of its own (a multiset: DISTINCT, or
    /// min/max over an updating input) has `values{i}`, whose rows name
    /// their group by its row in `groups`.
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        let mut fields = super::key_fields(&self.keys, &self.input_schema)?;
        fields.push(Field::new("rows", DataType::Int64, false));
        fields.push(Field::new("touched_at", DataType::Int64, false));
        let mut own = Vec::new();
        for (i, column) in self.columns()?.iter().enumerate() {
            let state_fields = column.state_fields()?;
            if state_fields.is_empty() {
                own.push(
                    TableSpec::new(format!("values{i}"), rows::multiset_table_schema()).keyed(
                        TableKey::Dependent {
                            on: GROUPS.into(),
                            by: crate::rescale::KeyedBy::Index,
                        },
                    ),
                );
            }
            for (c, field) in state_fields.into_iter().enumerate() {
                fields.push(field.with_name(format!("a{i}_{c}")));
            }
        }
        let mut tables = vec![TableSpec::new(GROUPS, Arc::new(Schema::new(fields)))
            .keyed(TableKey::Columns(0..self.keys.len()))
            .with_ttl(self.state_ttl_ms)];
        tables.extend(own);
        Ok(tables)
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
                input_updating: self.input_updating,
                unmatched_retractions: crate::rescale::counted_sum(metas, |m| {
                    m.unmatched_retractions
                }),
                watermark: metas.iter().filter_map(|(m, _)| m.watermark).min(),
            },
        )
    }
}

impl UpdatingAggregatePlan {
    /// The aggregates' state holders: columnar where eddy has a native
    /// form, DataFusion's accumulators per group otherwise.
    fn columns(&self) -> Result<Vec<Box<dyn AggregateColumn>>> {
        self.aggregates
            .iter()
            .map(|call| {
                Ok(
                    match columnar::columnar(&call.expr, &self.input_schema, self.input_updating)? {
                        Some(column) => column,
                        None => Box::new(rows::RowAccumulators::new(
                            call,
                            &self.input_schema,
                            self.input_updating,
                        )?),
                    },
                )
            })
            .collect()
    }
}

struct UpdatingAggregate {
    plan: UpdatingAggregatePlan,
    /// The plan's state tables: [`GROUPS`], then each own `values{i}`.
    tables: Vec<TableSpec>,
    key_schema: SchemaRef,
    /// Interns key rows to group indices; `None` until the first batch and
    /// for a global aggregate.
    groups: Option<Box<dyn GroupValues>>,
    /// Per aggregate, its state over all groups.
    columns: Vec<Box<dyn AggregateColumn>>,
    /// Whether a column folds rows in a group at a time.
    needs_order: bool,
    /// Per group, its net row count.
    rows: Vec<i64>,
    /// Per group, the watermark when a row last touched it.
    touched_at: Vec<Timestamp>,
    group_indices: Vec<usize>,
    /// Per group, its slot in the batch being applied (`u32::MAX`: not
    /// touched); kept between batches, reset after each.
    slot_of: Vec<u32>,
    /// Groups with rows.
    live_groups: usize,
    /// Retractions of rows a group never held (an inconsistent input).
    unmatched_retractions: u64,
    watermark: Timestamp,
    sweeps: TtlSweeps,
    /// The cutoff of the last TTL sweep: a spilled group last touched
    /// before it is gone, as it would be had it stayed in memory.
    expired_before: Timestamp,
    /// The groups changed since the previous checkpoint.
    changed: ChangedKeys,
    /// The groups moved to disk when the memory budget refused more
    /// ([`Operator::spill`]); memory then holds those touched since.
    spilled: Option<spilled::SpilledGroups>,
}

/// Where a change's aggregate values come from: the old values (0) or the
/// new ones (1) of a touched group's slot.
type ValuesAt = (usize, usize);

impl UpdatingAggregate {
    fn ensure_groups(&mut self, count: usize) -> Result<()> {
        if self.rows.len() < count {
            self.rows.resize(count, 0);
            self.touched_at.resize(count, self.watermark);
            self.changed.resize(count);
            for column in &mut self.columns {
                column.resize(count)?;
            }
        }
        Ok(())
    }

    /// Interns the batch's keys into `group_indices`.
    fn intern(&mut self, keys: &[ArrayRef], rows: usize) -> Result<()> {
        if self.plan.keys.is_empty() {
            self.group_indices.clear();
            self.group_indices.resize(rows, 0);
            return self.ensure_groups(1);
        }
        if self.groups.is_none() {
            self.groups = Some(new_group_values(
                self.key_schema.clone(),
                &GroupOrdering::None,
            )?);
        }
        let groups = self
            .groups
            .as_mut()
            .ok_or_else(|| EngineError::operator(KIND, "group table vanished"))?;
        groups.intern(keys, &mut self.group_indices)?;
        let count = groups.len();
        let known = self.rows.len();
        self.ensure_groups(count)?;
        self.read_back(keys, known)
    }

    /// Loads the spilled state of the groups the batch brought back into
    /// memory (numbered from `known` on); a spilled group the TTL has
    /// since expired is forgotten instead.
    fn read_back(&mut self, keys: &[ArrayRef], known: usize) -> Result<()> {
        let Some(spilled) = self.spilled.as_mut() else {
            return Ok(());
        };
        let count = self.rows.len();
        if count == known {
            return Ok(());
        }
        let mut first = vec![u32::MAX; count - known];
        for (row, &g) in self.group_indices.iter().enumerate() {
            if g >= known && first[g - known] == u32::MAX {
                first[g - known] = row as u32;
            }
        }
        let first = UInt32Array::from(first);
        let new_keys = keys
            .iter()
            .map(|k| Ok(take(k.as_ref(), &first, None)?))
            .collect::<Result<Vec<_>>>()?;
        let found = spilled.read(&new_keys)?;
        if found.positions.is_empty() {
            return Ok(());
        }
        let int64 = |c: usize| {
            found
                .states
                .get(c)
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
                .ok_or_else(|| EngineError::State(format!("{KIND}: bad spilled group")))
        };
        let (held, touched) = (int64(0)?, int64(1)?);
        let mut groups = Vec::with_capacity(found.positions.len());
        let mut kept = Vec::with_capacity(found.positions.len());
        let mut expired = Vec::new();
        for (i, &position) in found.positions.iter().enumerate() {
            if touched.value(i) < self.expired_before {
                expired.push(position as u32);
                self.live_groups -= usize::from(held.value(i) > 0);
                continue;
            }
            let g = known + position;
            self.rows[g] = held.value(i);
            self.touched_at[g] = touched.value(i);
            groups.push(g);
            kept.push(i as u32);
        }
        if !expired.is_empty() {
            let expired = UInt32Array::from(expired);
            let gone = new_keys
                .iter()
                .map(|k| Ok(take(k.as_ref(), &expired, None)?))
                .collect::<Result<Vec<_>>>()?;
            spilled.forget(&gone)?;
        }
        let loaded: Vec<ArrayRef> = if kept.len() == found.positions.len() {
            found.states
        } else {
            let kept = UInt32Array::from(kept);
            found
                .states
                .iter()
                .map(|c| Ok(take(c.as_ref(), &kept, None)?))
                .collect::<Result<Vec<_>>>()?
        };
        let widths = self
            .columns
            .iter()
            .map(|c| Ok(c.state_fields()?.len()))
            .collect::<Result<Vec<_>>>()?;
        // The state columns, then a packed column per aggregate keeping a
        // table of its own (`spill_schema`).
        let (mut at, mut packed_at) = (2, 2 + widths.iter().sum::<usize>());
        let too_narrow = || EngineError::State(format!("{KIND}: spilled group too narrow"));
        for (column, width) in self.columns.iter_mut().zip(widths) {
            if width == 0 {
                column.load_packed(&groups, loaded.get(packed_at).ok_or_else(too_narrow)?)?;
                packed_at += 1;
            } else {
                column.load(&groups, loaded.get(at..at + width).ok_or_else(too_narrow)?)?;
                at += width;
            }
        }
        Ok(())
    }

    /// The layout of a spilled group: its row in the groups table, then,
    /// per aggregate keeping a table of its own, that table's rows of the
    /// group packed into one binary value.
    fn spill_schema(&self) -> Result<SchemaRef> {
        let mut fields: Vec<Field> = self.tables[0]
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for (i, column) in self.columns.iter().enumerate() {
            if column.state_fields()?.is_empty() {
                fields.push(Field::new(format!("values{i}"), DataType::Binary, false));
            }
        }
        Ok(Arc::new(Schema::new(fields)))
    }

    /// Every aggregate's values for `groups`.
    fn values(&mut self, groups: &[usize]) -> Result<Vec<ArrayRef>> {
        self.columns
            .iter_mut()
            .map(|c| c.evaluate(groups))
            .collect()
    }

    /// Builds the output batch: each change's key from `keys` at its row,
    /// its values from `old`/`new` at its slot.
    fn output(
        &self,
        keys: &[ArrayRef],
        key_rows: Vec<u32>,
        kinds: Vec<i8>,
        at: &[ValuesAt],
        old: &[ArrayRef],
        new: &[ArrayRef],
    ) -> Result<RecordBatch> {
        let schema = self.plan.output_schema.clone();
        let indices = UInt32Array::from(key_rows);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for key in keys {
            columns.push(take(key.as_ref(), &indices, None)?);
        }
        for (old, new) in old.iter().zip(new) {
            columns.push(interleave(&[old.as_ref(), new.as_ref()], at)?);
        }
        columns.push(Arc::new(Int8Array::from(kinds)));
        super::batch_of(&schema, columns)
    }

    /// Forgets the groups no row touched while the watermark advanced by
    /// more than the TTL; runs every half TTL of watermark.
    fn sweep(&mut self) -> Result<()> {
        let Some(cutoff) = self.sweeps.due(self.watermark) else {
            return Ok(());
        };
        self.expired_before = cutoff;
        let keep: Vec<bool> = self.touched_at.iter().map(|&t| t >= cutoff).collect();
        if keep.iter().all(|&k| k) {
            return Ok(());
        }
        let dropped_live = keep
            .iter()
            .zip(&self.rows)
            .filter(|(&kept, &rows)| !kept && rows > 0)
            .count();
        let mut gone = RecordBatch::new_empty(self.key_schema.clone());
        if let Some(groups) = self.groups.as_mut() {
            let keys = groups.emit(EmitTo::All)?;
            let mask = BooleanArray::from(keep.clone());
            let kept = keys
                .iter()
                .map(|k| Ok(filter(k.as_ref(), &mask)?))
                .collect::<Result<Vec<_>>>()?;
            groups.intern(&kept, &mut self.group_indices)?;
            let dropped = datafusion::arrow::compute::not(&mask)?;
            let gone_keys = keys
                .iter()
                .map(|k| Ok(filter(k.as_ref(), &dropped)?))
                .collect::<Result<Vec<_>>>()?;
            if let Some(spilled) = self.spilled.as_mut() {
                // An older copy on disk must not come back.
                spilled.forget(&gone_keys)?;
            }
            gone = RecordBatch::try_new(self.key_schema.clone(), gone_keys)?;
        }
        self.changed.retain(&keep, gone);
        for column in &mut self.columns {
            column.retain(&keep)?;
        }
        column::retain_marked(&mut self.rows, &keep);
        column::retain_marked(&mut self.touched_at, &keep);
        self.live_groups -= dropped_live;
        Ok(())
    }
}

/// Per slot, whether any aggregate's old and new values differ.
fn differing(old: &[ArrayRef], new: &[ArrayRef], slots: usize) -> Result<Vec<bool>> {
    let mut differs = vec![false; slots];
    for (old, new) in old.iter().zip(new) {
        match distinct(old, new) {
            Ok(mask) => {
                for (s, d) in differs.iter_mut().enumerate() {
                    *d |= mask.value(s);
                }
            }
            // Types the comparison kernel does not take (lists, structs).
            Err(_) => {
                for (s, d) in differs.iter_mut().enumerate() {
                    if !*d {
                        *d = ScalarValue::try_from_array(old, s)?
                            != ScalarValue::try_from_array(new, s)?;
                    }
                }
            }
        }
    }
    Ok(differs)
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Meta {
    /// The input's mode, which fixed how each aggregate was kept.
    input_updating: bool,
    unmatched_retractions: u64,
    #[serde(default)]
    watermark: Option<Timestamp>,
}

impl Operator for UpdatingAggregate {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(());
        }
        let kinds = changelog::checked_row_kinds(&batch, self.plan.input_updating, KIND)?;
        let retracts: Option<Vec<bool>> = kinds.as_ref().map(|k| {
            k.values()
                .iter()
                .map(|&b| changelog::is_retraction_byte(b))
                .collect()
        });
        let eval = |e: &Arc<dyn PhysicalExpr>| -> Result<ArrayRef> {
            Ok(e.evaluate(&batch)?.into_array(rows)?)
        };
        let keys = self
            .plan
            .keys
            .iter()
            .map(|(e, _)| eval(e))
            .collect::<Result<Vec<_>>>()?;
        let args = self
            .plan
            .aggregates
            .iter()
            .map(|a| a.expr.expressions().iter().map(eval).collect())
            .collect::<Result<Vec<Vec<ArrayRef>>>>()?;
        let filters = self
            .plan
            .aggregates
            .iter()
            .map(|a| {
                a.filter
                    .as_ref()
                    .map(|f| super::predicate_mask(f, &batch, KIND))
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        self.intern(&keys, rows)?;

        // The groups the batch touches, in the order it first touches
        // them, with their inserted and retracted row counts.
        if self.slot_of.len() < self.rows.len() {
            self.slot_of.resize(self.rows.len(), u32::MAX);
        }
        let retraction = |row: usize| retracts.as_ref().is_some_and(|r| r[row]);
        let mut touched: Vec<usize> = Vec::new();
        let mut first_row: Vec<u32> = Vec::new();
        let mut counts: Vec<(usize, usize)> = Vec::new();
        for (row, &g) in self.group_indices.iter().enumerate() {
            let s = if self.slot_of[g] == u32::MAX {
                self.slot_of[g] = touched.len() as u32;
                touched.push(g);
                first_row.push(row as u32);
                counts.push((0, 0));
                touched.len() - 1
            } else {
                self.slot_of[g] as usize
            };
            if retraction(row) {
                counts[s].1 += 1;
            } else {
                counts[s].0 += 1;
            }
        }
        let mut spans = Vec::with_capacity(counts.len());
        let mut at = 0;
        for &(ins, ret) in &counts {
            spans.push((at..at + ins, at + ins..at + ins + ret));
            at += ins + ret;
        }
        // A group's rows as one run, when an aggregate folds a group at a
        // time.
        let order = if self.needs_order {
            let mut next_ins: Vec<usize> = spans.iter().map(|(i, _)| i.start).collect();
            let mut next_ret: Vec<usize> = spans.iter().map(|(_, r)| r.start).collect();
            let mut order = vec![0u32; rows];
            for (row, &g) in self.group_indices.iter().enumerate() {
                let s = self.slot_of[g] as usize;
                let next = if retraction(row) {
                    &mut next_ret[s]
                } else {
                    &mut next_ins[s]
                };
                order[*next] = row as u32;
                *next += 1;
            }
            Some(UInt32Array::from(order))
        } else {
            None
        };
        for &g in &touched {
            self.slot_of[g] = u32::MAX;
        }

        let old = self.values(&touched)?;
        let held: Vec<i64> = touched.iter().map(|&g| self.rows[g]).collect();
        let group_indices = std::mem::take(&mut self.group_indices);
        let batch_rows = BatchRows {
            groups: &group_indices,
            retracts: retracts.as_deref(),
            touched: &touched,
            order: order.as_ref(),
            spans: &spans,
        };
        let folded = self
            .columns
            .iter_mut()
            .zip(args.iter().zip(&filters))
            .try_for_each(|(column, (args, filter))| {
                column.update(&batch_rows, args, filter.as_ref())
            });
        self.group_indices = group_indices;
        folded?;

        let mut after = Vec::with_capacity(touched.len());
        for (s, &g) in touched.iter().enumerate() {
            let (inserted, retracted) = counts[s];
            let taken = (retracted as i64).min(held[s] + inserted as i64);
            if taken < retracted as i64 {
                self.unmatched_retractions += retracted as u64 - taken as u64;
            }
            let rows_after = held[s] + inserted as i64 - taken;
            self.rows[g] = rows_after;
            self.touched_at[g] = self.watermark;
            self.changed.touch(g);
            if rows_after == 0 {
                for column in &mut self.columns {
                    column.reset(g)?;
                }
            }
            after.push(rows_after);
        }
        let new = self.values(&touched)?;
        let differs = differing(&old, &new, touched.len())?;

        let mut key_rows = Vec::new();
        let mut kinds = Vec::new();
        let mut at: Vec<ValuesAt> = Vec::new();
        let mut change = |slot: usize, kind: RowKind, from: usize| {
            key_rows.push(first_row[slot]);
            kinds.push(kind.byte());
            at.push((from, slot));
        };
        for s in 0..touched.len() {
            match (held[s] > 0, after[s] > 0) {
                (false, true) => {
                    self.live_groups += 1;
                    change(s, RowKind::Insert, 1);
                }
                (true, true) if differs[s] => {
                    change(s, RowKind::UpdateBefore, 0);
                    change(s, RowKind::UpdateAfter, 1);
                }
                (true, false) => {
                    self.live_groups -= 1;
                    change(s, RowKind::Delete, 0);
                }
                (true, true) | (false, false) => {}
            }
        }
        if !kinds.is_empty() {
            out.emit(self.output(&keys, key_rows, kinds, &at, &old, &new)?);
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: Timestamp, _out: &mut Collector) -> Result<()> {
        self.watermark = self.watermark.max(watermark);
        self.sweep()
    }

    fn state_rows(&self) -> usize {
        self.live_groups
    }

    fn state_bytes(&self) -> usize {
        let groups = self.groups.as_ref().map_or(0, |g| g.size());
        let columns: usize = self.columns.iter().map(|c| c.size()).sum();
        groups + columns + self.rows.capacity() * 16
    }

    fn state_bytes_are_counted(&self) -> bool {
        self.columns.iter().all(|c| c.size_is_counted())
    }

    /// Every group in memory goes to disk (those without rows leave it),
    /// and memory starts afresh: it then holds the groups touched since,
    /// each read back from disk the first time a row touches it. A group's
    /// multisets (DISTINCT, MIN/MAX over an updating input) go with it, in
    /// its entry. A global aggregate (one group) does not spill.
    fn spill(&mut self, space: &Arc<crate::spill::SpillSpace>) -> Result<bool> {
        if self.plan.keys.is_empty() || self.rows.is_empty() {
            return Ok(false);
        }
        if self.spilled.is_none() {
            self.spilled = spilled::SpilledGroups::open(
                space,
                KIND,
                self.spill_schema()?,
                self.plan.keys.len(),
            )?;
        }
        if self.spilled.is_none() {
            return Ok(false);
        }
        let (groups, _) = self.groups_table(Own::Packed)?;
        if let Some(spilled) = self.spilled.as_mut() {
            spilled.write(&groups)?;
        }
        self.groups = None;
        self.columns = self.plan.columns()?;
        self.rows = Vec::new();
        self.touched_at = Vec::new();
        self.group_indices = Vec::new();
        self.slot_of = Vec::new();
        self.changed = ChangedKeys::default();
        Ok(true)
    }

    fn spill_stats(&self) -> crate::spill::SpillStats {
        self.spilled
            .as_ref()
            .map(spilled::SpilledGroups::stats)
            .unwrap_or_default()
    }

    fn late_rows(&self) -> u64 {
        self.unmatched_retractions
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&Meta {
            input_updating: self.plan.input_updating,
            unmatched_retractions: self.unmatched_retractions,
            watermark: Some(self.watermark),
        })?;
        let (groups_table, own) = self.groups_table(Own::Tables)?;
        // Go on from the snapshot, exactly as a restore would (the groups
        // keep their numbers, so what changed since the last checkpoint
        // stays marked).
        snapshot.put(&self.tables[0], groups_table)?;
        snapshot.tables.extend(own.tables);
        let live = self.live_groups;
        self.load(snapshot.clone())?;
        let Some(spilled) = self.spilled.as_ref() else {
            return Ok(snapshot);
        };
        // The checkpoint holds every group, on disk or in memory: the
        // stored groups memory does not hold first, then memory's, whose
        // own tables' group numbers move up by the stored count. They are
        // written to files a chunk at a time, not gathered in memory.
        self.live_groups = live;
        let in_memory = snapshot.take(&self.tables[0])?;
        let schema = self.tables[0].schema().clone();
        let width = schema.fields().len();
        let mut own = Vec::new();
        for (i, column) in self.columns.iter().enumerate() {
            if column.state_fields()?.is_empty() {
                own.push(table_of(&self.tables, &format!("values{i}"))?.clone());
            }
        }
        let mut groups_file = spilled.snapshot_file(GROUPS, &schema)?;
        let mut own_files = own
            .iter()
            .map(|spec| spilled.snapshot_file(spec.name(), spec.schema()))
            .collect::<Result<Vec<_>>>()?;
        let mut stored = 0u64;
        spilled.each_stored_except(&in_memory.columns()[..self.plan.keys.len()], |chunk| {
            let groups = RecordBatch::try_new_with_options(
                schema.clone(),
                chunk.columns()[..width].to_vec(),
                &datafusion::arrow::record_batch::RecordBatchOptions::new()
                    .with_row_count(Some(chunk.num_rows())),
            )?;
            groups_file.write(&groups)?;
            for (file, packed) in own_files.iter_mut().zip(&chunk.columns()[width..]) {
                file.write(&rows::unpacked_table(packed, stored)?)?;
            }
            stored += chunk.num_rows() as u64;
            Ok(())
        })?;
        groups_file.write(&in_memory)?;
        for (spec, file) in own.iter().zip(&mut own_files) {
            file.write(&rows::numbered_from(snapshot.take(spec)?, stored)?)?;
        }
        snapshot.put_file(&self.tables[0], groups_file.finish()?)?;
        for (spec, file) in own.iter().zip(own_files) {
            snapshot.put_file(spec, file.finish()?)?;
        }
        Ok(snapshot)
    }

    /// `groups` whole, or only its changed groups when the aggregate is
    /// keyed and keeps no per-group table of its own (a `values{i}` table
    /// names groups by their row in `groups`).
    fn snapshot_incremental(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = self.snapshot()?;
        if self.spilled.is_some() {
            // Group numbers start afresh at every spill: whole each time.
            self.changed.restart();
            return Ok(snapshot);
        }
        if self.plan.keys.is_empty() || snapshot.tables.len() > 1 {
            return Ok(snapshot);
        }
        let groups = snapshot.take(&self.tables[0])?;
        let (table, keyed) = self.changed.snapshot(&self.tables[0], groups)?;
        snapshot.put(&self.tables[0], table)?;
        snapshot.keyed.push(keyed);
        Ok(snapshot)
    }

    fn restore(&mut self, state: StateSnapshot) -> Result<()> {
        self.changed.restart();
        self.load(state)
    }
}

/// Where [`UpdatingAggregate::groups_table`] puts the state of the
/// aggregates keeping a table of their own.
#[derive(Clone, Copy)]
enum Own {
    /// In those tables, as a checkpoint declares them.
    Tables,
    /// In the groups table, a packed column each, as a spill writes them.
    Packed,
}

/// The declared state table `name` of `tables`.
fn table_of<'a>(tables: &'a [TableSpec], name: &str) -> Result<&'a TableSpec> {
    crate::state::declared::find(tables, name)
        .ok_or_else(|| EngineError::State(format!("{KIND}: no state table '{name}' declared")))
}

impl UpdatingAggregate {
    /// The groups in memory as the `groups` table, and the tables of the
    /// aggregates that keep their own ([`Own::Tables`]; with
    /// [`Own::Packed`], those tables are columns of the groups table
    /// instead, laid out as `spill_schema`). `GroupValues` hands keys over
    /// only by draining them: the caller loads the table back or forgets
    /// the groups.
    fn groups_table(&mut self, own_as: Own) -> Result<(RecordBatch, StateSnapshot)> {
        let keys = match self.groups.as_mut() {
            Some(groups) => groups.emit(EmitTo::All)?,
            None => self
                .key_schema
                .fields()
                .iter()
                .map(|f| datafusion::arrow::array::new_empty_array(f.data_type()))
                .collect(),
        };
        let mut columns: Vec<ArrayRef> = keys;
        columns.push(Arc::new(Int64Array::from(self.rows.clone())));
        columns.push(Arc::new(Int64Array::from(self.touched_at.clone())));
        let mut own = StateSnapshot::default();
        let mut packed = Vec::new();
        for (i, column) in self.columns.iter_mut().enumerate() {
            columns.extend(column.state_columns()?);
            match own_as {
                Own::Tables => {
                    if let Some(table) = column.state_table()? {
                        own.put(table_of(&self.tables, &format!("values{i}"))?, table)?;
                    }
                }
                Own::Packed => packed.extend(column.packed_state()?),
            }
        }
        columns.extend(packed);
        let schema = match own_as {
            Own::Tables => self.tables[0].schema().clone(),
            Own::Packed => self.spill_schema()?,
        };
        let table = RecordBatch::try_new_with_options(
            schema,
            columns,
            &datafusion::arrow::record_batch::RecordBatchOptions::new()
                .with_row_count(Some(self.rows.len())),
        )?;
        Ok((table, own))
    }

    /// Takes over the state of a snapshot ([`Operator::restore`] and the
    /// re-interning after a snapshot).
    fn load(&mut self, mut state: StateSnapshot) -> Result<()> {
        if state.is_empty() {
            return Ok(());
        }
        let meta: Meta = state.meta()?;
        self.unmatched_retractions = meta.unmatched_retractions;
        if meta.input_updating != self.plan.input_updating {
            return Err(EngineError::State(format!(
                "{KIND}: the checkpoint's input was {}updating, this job's is {}",
                if meta.input_updating { "" } else { "not " },
                if self.plan.input_updating { "" } else { "not" },
            )));
        }
        self.watermark = meta.watermark.unwrap_or(WATERMARK_MIN);
        self.sweeps.resume(self.watermark);
        let table = state.take(&self.tables[0])?;
        let key_count = self.plan.keys.len();
        let rows = table.num_rows();
        self.groups = None;
        let keys: Vec<ArrayRef> = table.columns()[..key_count].to_vec();
        if key_count > 0 {
            let mut groups = new_group_values(self.key_schema.clone(), &GroupOrdering::None)?;
            groups.intern(&keys, &mut self.group_indices)?;
            if groups.len() != rows {
                return Err(EngineError::State(format!(
                    "{KIND}: {rows} groups in the checkpoint, {} distinct keys",
                    groups.len()
                )));
            }
            self.groups = Some(groups);
        }
        let int64 = |c: usize| {
            table
                .columns()
                .get(c)
                .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
                .ok_or_else(|| EngineError::State(format!("{KIND}: bad groups table")))
        };
        self.rows = int64(key_count)?.values().to_vec();
        self.touched_at = int64(key_count + 1)?.values().to_vec();
        let mut at = key_count + 2;
        for (i, column) in self.columns.iter_mut().enumerate() {
            let width = column.state_fields()?.len();
            let states = table
                .columns()
                .get(at..at + width)
                .ok_or_else(|| EngineError::State(format!("{KIND}: groups table too narrow")))?;
            at += width;
            let own = if width == 0 {
                Some(state.take(table_of(&self.tables, &format!("values{i}"))?)?)
            } else {
                None
            };
            column.restore(rows, states, own)?;
        }
        self.live_groups = self.rows.iter().filter(|&&r| r > 0).count();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::functions_aggregate::count::count_udaf;
    use datafusion::functions_aggregate::min_max::max_udaf;
    use datafusion::functions_aggregate::sum::sum_udaf;
    use datafusion::logical_expr::AggregateUDF;
    use datafusion::physical_expr::aggregate::AggregateExprBuilder;
    use datafusion::physical_expr::expressions::col;

    use super::*;
    use crate::operators::testing::{changes, keyed as rows};

    fn input_schema() -> SchemaRef {
        crate::operators::testing::kv_schema()
    }

    fn call(function: Arc<AggregateUDF>, name: &str, distinct: bool) -> AggregateCall {
        let input = input_schema();
        let expr = AggregateExprBuilder::new(function, vec![col("v", &input).unwrap()])
            .schema(input)
            .alias(name)
            .with_distinct(distinct)
            .build()
            .unwrap();
        AggregateCall {
            expr: Arc::new(expr),
            filter: None,
        }
    }

    /// `SELECT k, count(v), sum(v), max(v), count(DISTINCT v) ... GROUP BY k`
    /// over an updating input.
    fn plan() -> UpdatingAggregatePlan {
        let input = input_schema();
        let output = changelog::updating_schema(
            &Schema::new(vec![
                Field::new("k", DataType::Utf8, true),
                Field::new("n", DataType::Int64, true),
                Field::new("s", DataType::Int64, true),
                Field::new("m", DataType::Int64, true),
                Field::new("d", DataType::Int64, true),
            ]),
            &["k".to_string()],
        );
        UpdatingAggregatePlan {
            input_schema: input.clone(),
            output_schema: output,
            keys: vec![(col("k", &input).unwrap(), "k".into())],
            aggregates: vec![
                call(count_udaf(), "n", false),
                call(sum_udaf(), "s", false),
                call(max_udaf(), "m", false),
                call(count_udaf(), "d", true),
            ],
            input_updating: true,
            state_ttl_ms: None,
        }
    }

    #[test]
    fn append_only_input_inserts_then_updates_once_per_batch() {
        let mut plan = plan();
        plan.input_updating = false;
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&["a", "b", "a"], &[1, 5, 2], None), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["+I a 2 3 2 2", "+I b 1 5 5 1"]);
        op.on_batch(0, rows(&["a", "a", "a"], &[7, 1, 1], None), &mut out)
            .unwrap();
        assert_eq!(
            changes(&mut out),
            ["-U a 2 3 2 2", "+U a 5 12 7 3"],
            "one change for three rows of a"
        );
        assert_eq!(op.state_rows(), 2);
    }

    #[test]
    fn retractions_take_rows_out_and_an_emptied_group_is_deleted() {
        let mut op = plan().create().unwrap();
        let mut out = Collector::default();
        let (i, ub, ua, d) = (0, 1, 2, 3);
        op.on_batch(
            0,
            rows(&["a", "a", "b"], &[4, 9, 1], Some(&[i, i, i])),
            &mut out,
        )
        .unwrap();
        assert_eq!(changes(&mut out), ["+I a 2 13 9 2", "+I b 1 1 1 1"]);
        // 9 leaves a: its max falls back to 4 (the multiset keeps it).
        op.on_batch(0, rows(&["a", "a"], &[9, 4], Some(&[ub, ua])), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["-U a 2 13 9 2", "+U a 2 8 4 1"]);
        op.on_batch(0, rows(&["b"], &[1], Some(&[d])), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["-D b 1 1 1 1"]);
        assert_eq!(op.state_rows(), 1);
        // b starts afresh.
        op.on_batch(0, rows(&["b"], &[3], Some(&[i])), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["+I b 1 3 3 1"]);
    }

    #[test]
    fn an_unchanged_result_emits_nothing() {
        let mut op = plan().create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&["a"], &[4], Some(&[0])), &mut out)
            .unwrap();
        changes(&mut out);
        // The same row out and in again: a's result is what it was.
        op.on_batch(0, rows(&["a", "a"], &[4, 4], Some(&[1, 2])), &mut out)
            .unwrap();
        assert!(changes(&mut out).is_empty());
    }

    #[test]
    fn a_restored_operator_goes_on_where_the_snapshot_was() {
        let plan = plan();
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(
            0,
            rows(&["a", "a", "b"], &[4, 9, 1], Some(&[0, 0, 0])),
            &mut out,
        )
        .unwrap();
        changes(&mut out);
        let snapshot = op.snapshot().unwrap();
        let mut restored = plan.create().unwrap();
        restored.restore(snapshot).unwrap();
        for op in [&mut op, &mut restored] {
            op.on_batch(0, rows(&["a", "b"], &[9, 2], Some(&[3, 0])), &mut out)
                .unwrap();
            assert_eq!(
                changes(&mut out),
                [
                    "-U a 2 13 9 2",
                    "+U a 1 4 4 1",
                    "-U b 1 1 1 1",
                    "+U b 2 3 2 2"
                ]
            );
        }
        assert_eq!(restored.state_rows(), 2);
    }

    #[test]
    fn its_groups_and_their_multisets_move_to_another_parallelism() {
        use crate::key_groups::KeyGroups;
        use crate::operators::testing::rescaled_instance;
        use crate::rescale::KeyRange;
        let groups = KeyGroups::default();
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
        // Two rows a key, the larger its max; then the max leaves.
        let first_keys: Vec<&str> = keys.iter().flat_map(|k| [*k, *k]).collect();
        let first_values: Vec<i64> = (0..16).map(|i| 10 + i * 3 % 7).collect();
        let before = rows(&first_keys, &first_values, Some(&[0; 16]));
        let maxima: Vec<i64> = first_values.chunks(2).map(|p| p[0].max(p[1])).collect();
        let after = rows(&keys, &maxima, Some(&[3; 8]));
        let routed = |batch: &RecordBatch, range: &KeyRange| {
            range.keep(batch, &[batch.column(0).clone()]).unwrap()
        };
        // One instance throughout: what the second batch changes.
        let mut whole = plan().create().unwrap();
        let mut out = Collector::default();
        whole.on_batch(0, before.clone(), &mut out).unwrap();
        changes(&mut out);
        whole.on_batch(0, after.clone(), &mut out).unwrap();
        let mut expected = changes(&mut out);
        expected.sort();
        // Two instances, then three.
        let mut parts = Vec::new();
        for i in 0..2 {
            let mut op = plan().create().unwrap();
            op.on_batch(
                0,
                routed(&before, &KeyRange::of_instance(groups, i, 2)),
                &mut out,
            )
            .unwrap();
            parts.push(op.snapshot().unwrap());
        }
        changes(&mut out);
        let mut got = Vec::new();
        for j in 0..3 {
            // The old instances' state a resumed job hands over to this one.
            let mut op = rescaled_instance(&plan(), &parts, groups, j, 3, 2);
            let range = KeyRange::of_instance(groups, j, 3);
            op.on_batch(0, routed(&after, &range), &mut out).unwrap();
            got.extend(changes(&mut out));
        }
        got.sort();
        assert_eq!(got, expected);
    }

    #[test]
    fn a_global_aggregate_has_one_group() {
        let mut plan = plan();
        plan.input_updating = false;
        plan.keys.clear();
        plan.output_schema = changelog::updating_schema(
            &Schema::new(
                plan.output_schema.fields()[1..5]
                    .iter()
                    .map(|f| f.as_ref().clone())
                    .collect::<Vec<_>>(),
            ),
            &[],
        );
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&["a", "b"], &[1, 2], None), &mut out)
            .unwrap();
        op.on_batch(0, rows(&["c"], &[3], None), &mut out).unwrap();
        assert_eq!(
            changes(&mut out),
            ["+I 2 3 2 2", "-U 2 3 2 2", "+U 3 6 3 3"]
        );
    }

    #[test]
    fn a_group_idle_past_the_ttl_is_forgotten_and_starts_afresh() {
        let mut plan = plan();
        plan.input_updating = false;
        plan.state_ttl_ms = Some(10);
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_watermark(0, &mut out).unwrap();
        op.on_batch(0, rows(&["a", "b"], &[1, 2], None), &mut out)
            .unwrap();
        op.on_watermark(8, &mut out).unwrap();
        op.on_batch(0, rows(&["a"], &[3], None), &mut out).unwrap();
        changes(&mut out);
        // b was last touched at watermark 0, a at 8: at 15 only b is
        // more than 10 behind.
        op.on_watermark(15, &mut out).unwrap();
        assert_eq!(op.state_rows(), 1);
        assert!(changes(&mut out).is_empty(), "expiry emits nothing");
        let snapshot = op.snapshot().unwrap();
        let mut restored = plan.create().unwrap();
        restored.restore(snapshot).unwrap();
        for op in [&mut op, &mut restored] {
            op.on_batch(0, rows(&["b", "a"], &[5, 1], None), &mut out)
                .unwrap();
            assert_eq!(
                changes(&mut out),
                ["+I b 1 5 5 1", "-U a 2 4 3 2", "+U a 3 5 3 2"]
            );
        }
    }

    /// Sorted rows of a state table, a line each.
    fn table_lines(batch: &RecordBatch) -> Vec<String> {
        let mut lines: Vec<String> = (0..batch.num_rows())
            .map(|r| {
                batch
                    .columns()
                    .iter()
                    .map(|c| ScalarValue::try_from_array(c, r).unwrap().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn a_checkpoint_hands_over_the_groups_changed_since_the_last_and_they_read_back_whole() {
        use crate::operators::testing::with_change;
        use crate::state::StateTable;
        let mut plan = plan();
        plan.input_updating = false;
        plan.state_ttl_ms = Some(10);
        plan.aggregates.truncate(3);
        plan.output_schema = changelog::updating_schema(
            &Schema::new(
                plan.output_schema.fields()[..4]
                    .iter()
                    .map(|f| f.as_ref().clone())
                    .collect::<Vec<_>>(),
            ),
            &["k".to_string()],
        );
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
        op.on_watermark(0, &mut out).unwrap();
        op.on_batch(0, rows(&keys, &[1; 8], None), &mut out)
            .unwrap();
        op.on_watermark(8, &mut out).unwrap();
        op.on_batch(0, rows(&keys[..4], &[2; 4], None), &mut out)
            .unwrap();
        let first = op.snapshot_incremental().unwrap();
        assert!(first.keyed[0].change.is_none(), "the first is whole");
        let whole = first.tables[0].batch.clone();
        assert_eq!(whole.num_rows(), 8);

        // e-h expire (last touched at 0, the watermark at 15); a changes,
        // z is new.
        op.on_watermark(15, &mut out).unwrap();
        op.on_batch(0, rows(&["a", "z"], &[3, 4], None), &mut out)
            .unwrap();
        let mut second = op.snapshot_incremental().unwrap();
        let change = second.keyed[0].change.clone().expect("a change");
        assert_eq!(change.base, first.keyed[0].serial);
        let changed = second.take_table("groups").unwrap();
        assert_eq!(table_lines(&changed.project(&[0]).unwrap()), ["a", "z"]);
        assert_eq!(
            table_lines(&change.removed),
            ["e", "f", "g", "h"],
            "the expired keys"
        );
        let read_back = with_change(whole, changed, &second.keyed[0]);
        let now = op.snapshot().unwrap().take_table("groups").unwrap();
        assert_eq!(table_lines(&read_back), table_lines(&now));

        // Restored from what was read back, it goes on as the original,
        // and its first checkpoint is whole again.
        changes(&mut out);
        let mut restored = plan.create().unwrap();
        restored
            .restore(StateSnapshot {
                meta: second.meta.clone(),
                tables: vec![StateTable {
                    name: "groups".into(),
                    batch: read_back,
                }],
                keyed: Vec::new(),
                files: Vec::new(),
            })
            .unwrap();
        for op in [&mut op, &mut restored] {
            op.on_batch(0, rows(&["b", "e"], &[5, 6], None), &mut out)
                .unwrap();
            assert_eq!(
                changes(&mut out),
                ["-U b 2 3 2", "+U b 3 8 5", "+I e 1 6 6"]
            );
        }
        assert!(restored.snapshot_incremental().unwrap().keyed[0]
            .change
            .is_none());
        assert!(op.snapshot_incremental().unwrap().keyed[0].change.is_some());
    }

    /// `SELECT k, count(v), sum(v), avg(CAST(v AS DOUBLE)) ... GROUP BY k`.
    fn spillable_plan(input_updating: bool, state_ttl_ms: Option<i64>) -> UpdatingAggregatePlan {
        use datafusion::functions_aggregate::average::avg_udaf;
        let mut plan = plan();
        plan.input_updating = input_updating;
        plan.state_ttl_ms = state_ttl_ms;
        let input = input_schema();
        let as_double = Arc::new(datafusion::physical_expr::expressions::CastExpr::new(
            col("v", &input).unwrap(),
            DataType::Float64,
            None,
        ));
        let avg = AggregateExprBuilder::new(avg_udaf(), vec![as_double])
            .schema(input)
            .alias("m")
            .build()
            .unwrap();
        plan.aggregates = vec![
            call(count_udaf(), "n", false),
            call(sum_udaf(), "s", false),
            AggregateCall {
                expr: Arc::new(avg),
                filter: None,
            },
        ];
        plan.output_schema = changelog::updating_schema(
            &Schema::new(vec![
                Field::new("k", DataType::Utf8, true),
                Field::new("n", DataType::Int64, true),
                Field::new("s", DataType::Int64, true),
                Field::new("m", DataType::Float64, true),
            ]),
            &["k".to_string()],
        );
        plan
    }

    /// Batches over 40 keys, each row later taken back out once (an
    /// updating input), the watermark a step a batch.
    fn churn(batches: usize) -> Vec<RecordBatch> {
        let keys: Vec<String> = (0..40).map(|i| format!("key{i}")).collect();
        let mut held: Vec<(usize, i64)> = Vec::new();
        let mut out = Vec::new();
        let mut seed = 7u64;
        for b in 0..batches {
            let (mut ks, mut vs, mut kinds) = (Vec::new(), Vec::new(), Vec::new());
            for r in 0..30 {
                let pick = crate::operators::testing::next_pick(&mut seed);
                if r % 4 == 3 && !held.is_empty() {
                    let (k, v) = held.swap_remove(pick % held.len());
                    ks.push(keys[k].as_str());
                    vs.push(v);
                    kinds.push(3);
                } else {
                    // Most rows on a few keys, the rest spread.
                    let k = if pick.is_multiple_of(3) {
                        pick % 40
                    } else {
                        (b + pick) % 6
                    };
                    let v = (pick % 100) as i64;
                    held.push((k, v));
                    ks.push(keys[k].as_str());
                    vs.push(v);
                    kinds.push(0);
                }
            }
            out.push(rows(&ks, &vs, Some(&kinds)));
        }
        out
    }

    #[test]
    fn spilled_groups_come_back_as_they_left_and_every_change_is_the_same() {
        use crate::spill::{SpillConfig, SpillSpace};
        let space = Arc::new(SpillSpace::new(SpillConfig::default()));
        let plan = spillable_plan(true, None);
        let mut whole = plan.create().unwrap();
        let mut spilling = plan.create().unwrap();
        let (mut a, mut b) = (Collector::default(), Collector::default());
        for (i, batch) in churn(30).into_iter().enumerate() {
            whole.on_batch(0, batch.clone(), &mut a).unwrap();
            spilling.on_batch(0, batch, &mut b).unwrap();
            assert_eq!(changes(&mut a), changes(&mut b), "batch {i}");
            if i % 3 == 0 {
                assert!(spilling.spill(&space).unwrap(), "batch {i}");
                assert!(spilling.state_bytes() < 64, "memory starts afresh");
            }
        }
        assert_eq!(whole.state_rows(), spilling.state_rows());
        let stats = spilling.spill_stats();
        assert!(stats.written_bytes > 0 && stats.read_bytes > 0, "{stats:?}");

        // Checkpoints hold every group, on disk or not, and restore.
        let (mut expected, got) = (whole.snapshot().unwrap(), spilling.snapshot().unwrap());
        // (A group every row has left is kept in memory, and leaves the
        // disk: the same as no group.)
        let held = |lines: Vec<String>| -> Vec<String> {
            lines
                .into_iter()
                .filter(|l| l.split(' ').nth(1) != Some("0"))
                .collect()
        };
        assert_eq!(
            held(table_lines(&expected.take_table("groups").unwrap())),
            held(table_lines(&got.clone().take_table("groups").unwrap()))
        );
        assert!(got.keyed.is_empty());
        let mut restored = plan.create().unwrap();
        restored.restore(got).unwrap();
        for batch in churn(33).into_iter().skip(30) {
            whole.on_batch(0, batch.clone(), &mut a).unwrap();
            spilling.on_batch(0, batch.clone(), &mut b).unwrap();
            let expected = changes(&mut a);
            assert_eq!(expected, changes(&mut b));
            restored.on_batch(0, batch, &mut b).unwrap();
            assert_eq!(expected, changes(&mut b));
        }
    }

    #[test]
    fn a_spilled_group_past_the_ttl_starts_afresh_as_one_in_memory_would() {
        use crate::spill::{SpillConfig, SpillSpace};
        let space = Arc::new(SpillSpace::new(SpillConfig::default()));
        let plan = spillable_plan(false, Some(10));
        let mut whole = plan.create().unwrap();
        let mut spilling = plan.create().unwrap();
        let (mut a, mut b) = (Collector::default(), Collector::default());
        let steps: [(i64, &[&str]); 4] = [
            (0, &["a", "b"]),
            (8, &["a"]),
            (15, &["b", "a"]),
            (40, &["a"]),
        ];
        for (watermark, keys) in steps {
            for (op, out) in [(&mut whole, &mut a), (&mut spilling, &mut b)] {
                op.on_watermark(watermark, out).unwrap();
                op.on_batch(0, rows(keys, &vec![1; keys.len()], None), out)
                    .unwrap();
            }
            assert_eq!(changes(&mut a), changes(&mut b), "at {watermark}");
            spilling.spill(&space).unwrap();
        }
        // (A spilled group that expired is counted in state_rows until it
        // is read back or a checkpoint leaves it out.)
    }

    /// Each multiset row of `snapshot`'s `values{i}` as "key value count",
    /// its group named by key, not by its row in `groups`.
    fn multiset_lines(snapshot: &StateSnapshot, i: usize) -> Vec<String> {
        let mut snapshot = snapshot.clone();
        let groups = snapshot.take_table("groups").unwrap();
        let values = snapshot.take_table(&format!("values{i}")).unwrap();
        let group = values
            .column(0)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::UInt64Array>()
            .unwrap();
        let mut lines: Vec<String> = (0..values.num_rows())
            .map(|r| {
                let key = ScalarValue::try_from_array(groups.column(0), group.value(r) as usize);
                let value = ScalarValue::try_from_array(values.column(1), r).unwrap();
                let count = ScalarValue::try_from_array(values.column(2), r).unwrap();
                format!("{} {value} {count}", key.unwrap())
            })
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn groups_keeping_multisets_spill_them_with_the_group() {
        use crate::spill::{SpillConfig, SpillSpace};
        let space = Arc::new(SpillSpace::new(SpillConfig::default()));
        // max over an updating input and count(DISTINCT v) keep multisets.
        let plan = plan();
        let mut whole = plan.create().unwrap();
        let mut spilling = plan.create().unwrap();
        let (mut a, mut b) = (Collector::default(), Collector::default());
        for (i, batch) in churn(30).into_iter().enumerate() {
            whole.on_batch(0, batch.clone(), &mut a).unwrap();
            spilling.on_batch(0, batch, &mut b).unwrap();
            assert_eq!(changes(&mut a), changes(&mut b), "batch {i}");
            if i % 3 == 0 {
                assert!(spilling.spill(&space).unwrap(), "batch {i}");
                assert!(spilling.state_bytes() < 64, "memory starts afresh");
            }
        }
        assert_eq!(whole.state_rows(), spilling.state_rows());
        let stats = spilling.spill_stats();
        assert!(stats.written_bytes > 0 && stats.read_bytes > 0, "{stats:?}");

        // The checkpoint holds every group's multisets, on disk or not,
        // each under its own group.
        let (expected, got) = (whole.snapshot().unwrap(), spilling.snapshot().unwrap());
        assert_eq!(
            (got.tables.len(), got.files.len()),
            (0, 3),
            "groups and both multiset tables streamed to files"
        );
        for i in [2, 3] {
            let lines = multiset_lines(&expected, i);
            assert!(!lines.is_empty());
            assert_eq!(lines, multiset_lines(&got, i), "values{i}");
        }
        let mut restored = plan.create().unwrap();
        restored.restore(got).unwrap();
        for batch in churn(34).into_iter().skip(30) {
            whole.on_batch(0, batch.clone(), &mut a).unwrap();
            spilling.on_batch(0, batch.clone(), &mut b).unwrap();
            let expected = changes(&mut a);
            assert_eq!(expected, changes(&mut b));
            restored.on_batch(0, batch, &mut b).unwrap();
            assert_eq!(expected, changes(&mut b));
        }
    }

    #[test]
    fn a_packed_multiset_unpacks_to_its_values_and_a_cut_one_is_an_error() {
        let packed: ArrayRef = Arc::new(datafusion::arrow::array::BinaryArray::from(vec![
            &[1, 0, 0, 0, 7, 2, 0, 0, 0, 0, 0, 0, 0][..],
            &[][..],
            &[1, 0, 0, 0, 9, 1, 0, 0, 0, 0, 0, 0, 0][..],
        ]));
        let table = rows::unpacked_table(&packed, 5).unwrap();
        assert_eq!(
            table_lines(&table),
            ["5 07 2", "7 09 1"],
            "groups numbered from 5; the empty multiset has no rows"
        );
        let cut: ArrayRef = Arc::new(datafusion::arrow::array::BinaryArray::from(vec![
            &[4, 0, 0, 0, 7][..],
        ]));
        let err = rows::unpacked_table(&cut, 0).unwrap_err().to_string();
        assert!(err.contains("cut short"), "{err}");
    }
}
