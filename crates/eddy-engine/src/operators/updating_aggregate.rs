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
//! State per group: its net row count and one DataFusion row `Accumulator`
//! per aggregate. Over an append-only input every aggregate keeps its plain
//! accumulator (nothing is ever taken out). Over an updating input the
//! aggregates whose accumulators retract exactly in any order (count, sum,
//! avg, the variances: `retract_batch` of DataFusion's sliding
//! accumulators) keep one; the others (MIN, MAX, DISTINCT aggregates,
//! medians, ...) keep the group's argument values as a multiset (Arrow row
//! encoding to count) and are recomputed from it when it changes.
//! DataFusion's sliding MIN/MAX retract oldest-first, which a changelog
//! does not promise.
//!
//! Checkpoints: one table `groups` (key columns, net row count, every
//! accumulated aggregate's state columns as `Accumulator::state` gives
//! them) and one table `values{i}` per multiset aggregate (group index,
//! encoded arguments, count). Keys are interned by DataFusion's
//! `GroupValues`, which hands keys over only by draining them; a snapshot
//! re-interns them in order, through the code a restore runs.
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

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Int64Array, Int8Array, UInt32Array, UInt64Array,
};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Accumulator, EmitTo};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use hashbrown::HashMap;

use crate::changelog::{self, RowKind};
use crate::error::{EngineError, Result};
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::state::{scalars_to_array, StateSnapshot};

const KIND: &str = "updating_aggregate";

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
}

/// How one aggregate is kept per group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keeping {
    /// An accumulator (its sliding form when rows are taken back out).
    Accumulated { retracting: bool },
    /// The arguments' multiset, the value recomputed from it.
    Multiset,
}

/// Whether an aggregate's sliding accumulator takes back any row in any
/// order, exactly (sums are exact on integers and decimals).
fn retracts_exactly(expr: &AggregateFunctionExpr) -> bool {
    !expr.is_distinct() && super::retracts_in_any_order(expr)
}

impl UpdatingAggregatePlan {
    fn keeping(&self) -> Vec<Keeping> {
        self.aggregates
            .iter()
            .map(|a| {
                if !self.input_updating {
                    Keeping::Accumulated { retracting: false }
                } else if retracts_exactly(&a.expr) {
                    Keeping::Accumulated { retracting: true }
                } else {
                    Keeping::Multiset
                }
            })
            .collect()
    }
}

impl OperatorPlan for UpdatingAggregatePlan {
    fn kind(&self) -> &'static str {
        KIND
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
        format!(
            "by ({}), {input}, a change per touched key and batch: [{}]",
            keys.join(", "),
            aggs.join(", ")
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    fn partition_keys(&self) -> Vec<Arc<dyn PhysicalExpr>> {
        self.keys.iter().map(|(expr, _)| Arc::clone(expr)).collect()
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        let key_fields = super::key_fields(&self.keys, &self.input_schema)?;
        let mut arg_converters = Vec::with_capacity(self.aggregates.len());
        for aggregate in &self.aggregates {
            let fields = aggregate
                .expr
                .expressions()
                .iter()
                .map(|e| Ok(SortField::new(e.data_type(&self.input_schema)?)))
                .collect::<Result<Vec<_>>>()?;
            arg_converters.push(RowConverter::new(fields)?);
        }
        Ok(Box::new(UpdatingAggregate {
            plan: self.clone(),
            key_schema: Arc::new(Schema::new(key_fields)),
            groups: None,
            states: Vec::new(),
            keeping: self.keeping(),
            arg_converters,
            group_indices: Vec::new(),
            slot_of: Vec::new(),
            live_groups: 0,
            unmatched_retractions: 0,
        }))
    }
}

/// One aggregate of one group.
enum AggState {
    Accumulated(Box<dyn Accumulator>),
    Multiset {
        /// Encoded argument rows and how many times each is in the group.
        values: HashMap<Box<[u8]>, i64>,
        /// The aggregate over `values`.
        current: ScalarValue,
    },
}

/// One group: its net row count and aggregates.
struct GroupState {
    rows: i64,
    aggregates: Vec<AggState>,
}

struct UpdatingAggregate {
    plan: UpdatingAggregatePlan,
    key_schema: SchemaRef,
    /// Interns key rows to group indices; `None` until the first batch and
    /// for a global aggregate.
    groups: Option<Box<dyn GroupValues>>,
    states: Vec<GroupState>,
    /// How each aggregate is kept, which depends on the input's mode.
    keeping: Vec<Keeping>,
    arg_converters: Vec<RowConverter>,
    group_indices: Vec<usize>,
    /// Per group, its slot in the batch being applied (`u32::MAX`: not
    /// touched); kept between batches, reset after each.
    slot_of: Vec<u32>,
    /// Groups with rows.
    live_groups: usize,
    /// Retractions of rows a group never held (an inconsistent input).
    unmatched_retractions: u64,
}

/// A change to emit: the input row holding the group's key (or the
/// group's index, on restore paths), the kind, the aggregate values.
struct Change {
    key_row: u32,
    kind: RowKind,
    values: Vec<ScalarValue>,
}

impl UpdatingAggregate {
    fn new_group(&self) -> Result<GroupState> {
        let mut aggregates = Vec::with_capacity(self.plan.aggregates.len());
        for (call, keeping) in self.plan.aggregates.iter().zip(&self.keeping) {
            aggregates.push(match keeping {
                Keeping::Accumulated { retracting: false } => {
                    AggState::Accumulated(call.expr.create_accumulator()?)
                }
                Keeping::Accumulated { retracting: true } => {
                    AggState::Accumulated(call.expr.create_sliding_accumulator()?)
                }
                Keeping::Multiset => AggState::Multiset {
                    values: HashMap::new(),
                    current: call.expr.create_accumulator()?.evaluate()?,
                },
            });
        }
        Ok(GroupState {
            rows: 0,
            aggregates,
        })
    }

    fn ensure_groups(&mut self, count: usize) -> Result<()> {
        while self.states.len() < count {
            let group = self.new_group()?;
            self.states.push(group);
        }
        Ok(())
    }

    /// The current aggregate values of group `g`.
    fn values(&mut self, g: usize) -> Result<Vec<ScalarValue>> {
        self.states[g]
            .aggregates
            .iter_mut()
            .map(|a| match a {
                AggState::Accumulated(acc) => Ok(acc.evaluate()?),
                AggState::Multiset { current, .. } => Ok(current.clone()),
            })
            .collect()
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
        self.ensure_groups(count)
    }

    /// Recomputes a multiset aggregate's value from its values.
    fn recompute(
        call: &AggregateCall,
        converter: &RowConverter,
        values: &HashMap<Box<[u8]>, i64>,
    ) -> Result<ScalarValue> {
        let mut acc = call.expr.create_accumulator()?;
        if values.is_empty() {
            return Ok(acc.evaluate()?);
        }
        let parser = converter.parser();
        let mut rows = Vec::new();
        for (bytes, &count) in values {
            for _ in 0..count {
                rows.push(parser.parse(bytes));
            }
        }
        let columns = converter.convert_rows(rows)?;
        acc.update_batch(&columns)?;
        Ok(acc.evaluate()?)
    }

    /// Folds the batch rows of group `g` in: `order[ins]` are its inserted
    /// rows, `order[ret]` its retracted ones; `permuted` holds, for each
    /// aggregate without a FILTER, its arguments already in `order`, so a
    /// group's rows are a slice of them.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        g: usize,
        args: &[Vec<ArrayRef>],
        filters: &[Option<BooleanArray>],
        permuted: &[Option<Vec<ArrayRef>>],
        order: &[u32],
        ins: std::ops::Range<usize>,
        ret: std::ops::Range<usize>,
    ) -> Result<()> {
        for (i, call) in self.plan.aggregates.iter().enumerate() {
            // The arguments of the rows in `range` (FILTER applied).
            let pick = |range: &std::ops::Range<usize>| -> Result<Option<Vec<ArrayRef>>> {
                if range.is_empty() {
                    return Ok(None);
                }
                if let Some(columns) = &permuted[i] {
                    return Ok(Some(
                        columns
                            .iter()
                            .map(|c| c.slice(range.start, range.len()))
                            .collect(),
                    ));
                }
                let rows: Vec<u32> = order[range.clone()]
                    .iter()
                    .copied()
                    .filter(|&r| {
                        filters[i]
                            .as_ref()
                            .is_none_or(|m| m.is_valid(r as usize) && m.value(r as usize))
                    })
                    .collect();
                if rows.is_empty() {
                    return Ok(None);
                }
                let indices = UInt32Array::from(rows);
                Ok(Some(
                    args[i]
                        .iter()
                        .map(|a| Ok(take(a.as_ref(), &indices, None)?))
                        .collect::<Result<Vec<_>>>()?,
                ))
            };
            let (inserted, retracted) = (pick(&ins)?, pick(&ret)?);
            if inserted.is_none() && retracted.is_none() {
                continue;
            }
            match &mut self.states[g].aggregates[i] {
                AggState::Accumulated(acc) => {
                    if let Some(columns) = &inserted {
                        acc.update_batch(columns)?;
                    }
                    if let Some(columns) = &retracted {
                        acc.retract_batch(columns)?;
                    }
                }
                AggState::Multiset { values, current } => {
                    let converter = &self.arg_converters[i];
                    for (columns, delta) in [(&inserted, 1i64), (&retracted, -1i64)] {
                        let Some(columns) = columns else {
                            continue;
                        };
                        let encoded = converter.convert_columns(columns)?;
                        for row in encoded.iter() {
                            let count = values.entry(row.as_ref().into()).or_insert(0);
                            *count += delta;
                            if *count <= 0 {
                                values.remove(row.as_ref());
                            }
                        }
                    }
                    *current = Self::recompute(call, converter, values)?;
                }
            }
        }
        Ok(())
    }

    /// Builds the output batch of `changes`, keys taken from `keys` rows.
    fn output(&self, keys: &[ArrayRef], changes: Vec<Change>) -> Result<RecordBatch> {
        let schema = self.plan.output_schema.clone();
        let indices = UInt32Array::from(changes.iter().map(|c| c.key_row).collect::<Vec<_>>());
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for key in keys {
            columns.push(take(key.as_ref(), &indices, None)?);
        }
        let width = self.plan.aggregates.len();
        let mut per_aggregate: Vec<Vec<ScalarValue>> =
            vec![Vec::with_capacity(changes.len()); width];
        let mut kinds = Vec::with_capacity(changes.len());
        for change in changes {
            kinds.push(change.kind.byte());
            for (column, value) in per_aggregate.iter_mut().zip(change.values) {
                column.push(value);
            }
        }
        for (i, values) in per_aggregate.into_iter().enumerate() {
            let field = schema.field(keys.len() + i);
            columns.push(scalars_to_array(values, field.data_type())?);
        }
        columns.push(Arc::new(Int8Array::from(kinds)));
        super::batch_of(&schema, columns)
    }

    /// The state columns of each aggregate in the checkpoint's `groups`
    /// table: as its accumulator's `state()` gives them (a sliding sum's
    /// state holds a count besides the sum its plain form keeps), read off
    /// a fresh accumulator of the kind kept; none for a multiset.
    fn state_fields(&self) -> Result<Vec<Vec<Field>>> {
        let fresh = self.new_group()?;
        fresh
            .aggregates
            .into_iter()
            .map(|a| match a {
                AggState::Accumulated(mut acc) => Ok(acc
                    .state()?
                    .iter()
                    .enumerate()
                    .map(|(i, v)| Field::new(format!("s{i}"), v.data_type(), true))
                    .collect()),
                AggState::Multiset { .. } => Ok(Vec::new()),
            })
            .collect()
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Meta {
    /// The input's mode, which fixed how each aggregate was kept.
    input_updating: bool,
    unmatched_retractions: u64,
}

impl Operator for UpdatingAggregate {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(());
        }
        let kinds = changelog::checked_row_kinds(&batch, self.plan.input_updating, KIND)?;
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

        // Rows by group, groups in the order the batch first touches them:
        // `order` lists each touched group's inserted rows, then its
        // retracted ones, so each group's rows are one slice of the batch's
        // arguments taken in that order once.
        if self.slot_of.len() < self.states.len() {
            self.slot_of.resize(self.states.len(), u32::MAX);
        }
        let retraction = |row: usize| {
            kinds
                .as_ref()
                .is_some_and(|k| changelog::is_retraction_byte(k.value(row)))
        };
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
        let mut starts = Vec::with_capacity(counts.len());
        let mut at = 0;
        for &(ins, ret) in &counts {
            starts.push(at);
            at += ins + ret;
        }
        let mut next_ins = starts.clone();
        let mut next_ret: Vec<usize> = starts.iter().zip(&counts).map(|(s, c)| s + c.0).collect();
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
        for &g in &touched {
            self.slot_of[g] = u32::MAX;
        }
        let order_indices = UInt32Array::from(order);
        let order = order_indices.values();
        let permuted = args
            .iter()
            .zip(&filters)
            .map(|(columns, filter)| {
                filter
                    .is_none()
                    .then(|| {
                        columns
                            .iter()
                            .map(|c| Ok(take(c.as_ref(), &order_indices, None)?))
                            .collect::<Result<Vec<ArrayRef>>>()
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;

        let mut changes = Vec::new();
        for (s, &g) in touched.iter().enumerate() {
            let before = if self.states[g].rows > 0 {
                Some(self.values(g)?)
            } else {
                None
            };
            let (inserted, retracted) = counts[s];
            let ins = starts[s]..starts[s] + inserted;
            let ret = ins.end..ins.end + retracted;
            let held = self.states[g].rows;
            let taken = (retracted as i64).min(held + inserted as i64);
            if taken < retracted as i64 {
                self.unmatched_retractions += retracted as u64 - taken as u64;
            }
            self.apply(g, &args, &filters, &permuted, order, ins, ret)?;
            let after_rows = held + inserted as i64 - taken;
            self.states[g].rows = after_rows;
            let after = if after_rows > 0 {
                Some(self.values(g)?)
            } else {
                // An emptied group starts afresh (no float residue, no
                // multiset entries left behind).
                self.states[g] = self.new_group()?;
                None
            };
            let key_row = first_row[s];
            match (before, after) {
                (None, Some(new)) => {
                    self.live_groups += 1;
                    changes.push(Change {
                        key_row,
                        kind: RowKind::Insert,
                        values: new,
                    });
                }
                (Some(old), Some(new)) if old != new => {
                    changes.push(Change {
                        key_row,
                        kind: RowKind::UpdateBefore,
                        values: old,
                    });
                    changes.push(Change {
                        key_row,
                        kind: RowKind::UpdateAfter,
                        values: new,
                    });
                }
                (Some(_), Some(_)) | (None, None) => {}
                (Some(old), None) => {
                    self.live_groups -= 1;
                    changes.push(Change {
                        key_row,
                        kind: RowKind::Delete,
                        values: old,
                    });
                }
            }
        }
        if !changes.is_empty() {
            out.emit(self.output(&keys, changes)?);
        }
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.live_groups
    }

    fn state_bytes(&self) -> usize {
        let groups = self.groups.as_ref().map_or(0, |g| g.size());
        let aggregates: usize = self
            .states
            .iter()
            .flat_map(|s| s.aggregates.iter())
            .map(|a| match a {
                AggState::Accumulated(acc) => acc.size(),
                AggState::Multiset { values, current } => {
                    values.keys().map(|k| k.len() + 24).sum::<usize>() + current.size()
                }
            })
            .sum();
        groups + aggregates
    }

    fn late_rows(&self) -> u64 {
        self.unmatched_retractions
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let keeping = self.keeping.clone();
        let mut snapshot = StateSnapshot::with_meta(&Meta {
            input_updating: self.plan.input_updating,
            unmatched_retractions: self.unmatched_retractions,
        })?;
        // Keys: drained, and interned again in the same order below.
        let keys = match self.groups.as_mut() {
            Some(groups) => groups.emit(EmitTo::All)?,
            None => self
                .key_schema
                .fields()
                .iter()
                .map(|f| datafusion::arrow::array::new_empty_array(f.data_type()))
                .collect(),
        };
        let state_fields = self.state_fields()?;
        let mut fields: Vec<Field> = self
            .key_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new("rows", DataType::Int64, false));
        let mut columns: Vec<ArrayRef> = keys.clone();
        columns.push(Arc::new(Int64Array::from(
            self.states.iter().map(|s| s.rows).collect::<Vec<_>>(),
        )));
        for (i, keeping) in keeping.iter().enumerate() {
            let Keeping::Accumulated { .. } = keeping else {
                continue;
            };
            let mut per_column: Vec<Vec<ScalarValue>> =
                vec![Vec::with_capacity(self.states.len()); state_fields[i].len()];
            for group in &mut self.states {
                let AggState::Accumulated(acc) = &mut group.aggregates[i] else {
                    return Err(EngineError::operator(KIND, "aggregate state changed kind"));
                };
                for (column, value) in per_column.iter_mut().zip(acc.state()?) {
                    column.push(value);
                }
            }
            for (c, (values, field)) in per_column.into_iter().zip(&state_fields[i]).enumerate() {
                columns.push(scalars_to_array(values, field.data_type())?);
                fields.push(field.clone().with_name(format!("a{i}_{c}")));
            }
        }
        let rows = self.states.len();
        let groups_table = RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields)),
            columns,
            &datafusion::arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(rows)),
        )?;
        for (i, keeping) in keeping.iter().enumerate() {
            if *keeping != Keeping::Multiset {
                continue;
            }
            let mut group_column = Vec::new();
            let mut bytes: Vec<&[u8]> = Vec::new();
            let mut counts = Vec::new();
            for (g, group) in self.states.iter().enumerate() {
                if let AggState::Multiset { values, .. } = &group.aggregates[i] {
                    for (row, &count) in values {
                        group_column.push(g as u64);
                        bytes.push(row);
                        counts.push(count);
                    }
                }
            }
            let table = RecordBatch::try_new(
                Arc::new(Schema::new(vec![
                    Field::new("group", DataType::UInt64, false),
                    Field::new("row", DataType::Binary, false),
                    Field::new("count", DataType::Int64, false),
                ])),
                vec![
                    Arc::new(UInt64Array::from(group_column)),
                    Arc::new(BinaryArray::from(bytes)),
                    Arc::new(Int64Array::from(counts)),
                ],
            )?;
            snapshot.push_table(format!("values{i}"), table);
        }
        // Go on from the snapshot, exactly as a restore would.
        self.restore(StateSnapshot {
            meta: snapshot.meta.clone(),
            tables: vec![crate::state::StateTable {
                name: "groups".into(),
                batch: groups_table.clone(),
            }]
            .into_iter()
            .chain(snapshot.tables.iter().cloned())
            .collect(),
        })?;
        snapshot.push_table("groups", groups_table);
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
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
        let table = state.take_table("groups")?;
        let key_count = self.plan.keys.len();
        let rows = table.num_rows();
        self.groups = None;
        self.states.clear();
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
        self.ensure_groups(rows)?;
        let counts = table
            .column(key_count)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| EngineError::State(format!("{KIND}: bad row counts")))?;
        let mut column = key_count + 1;
        let state_fields = self.state_fields()?;
        let keeping = self.keeping.clone();
        for (i, keeping) in keeping.iter().enumerate() {
            if *keeping == Keeping::Multiset {
                continue;
            }
            let width = state_fields[i].len();
            let states = &table.columns()[column..column + width];
            column += width;
            for (g, group) in self.states.iter_mut().enumerate() {
                let AggState::Accumulated(acc) = &mut group.aggregates[i] else {
                    continue;
                };
                let one: Vec<ArrayRef> = states.iter().map(|s| s.slice(g, 1)).collect();
                acc.merge_batch(&one)?;
            }
        }
        for (g, group) in self.states.iter_mut().enumerate() {
            group.rows = counts.value(g);
        }
        for (i, keeping) in keeping.iter().enumerate() {
            if *keeping != Keeping::Multiset {
                continue;
            }
            let values = state.take_table(&format!("values{i}"))?;
            let (Some(group), Some(bytes), Some(counts)) = (
                values.column(0).as_any().downcast_ref::<UInt64Array>(),
                values.column(1).as_any().downcast_ref::<BinaryArray>(),
                values.column(2).as_any().downcast_ref::<Int64Array>(),
            ) else {
                return Err(EngineError::State(format!("{KIND}: bad value table")));
            };
            for r in 0..values.num_rows() {
                let g = group.value(r) as usize;
                let Some(state) = self.states.get_mut(g) else {
                    return Err(EngineError::State(format!("{KIND}: no group {g}")));
                };
                if let AggState::Multiset { values, .. } = &mut state.aggregates[i] {
                    values.insert(bytes.value(r).into(), counts.value(r));
                }
            }
            let call = &self.plan.aggregates[i];
            for state in &mut self.states {
                if let AggState::Multiset { values, current } = &mut state.aggregates[i] {
                    *current = Self::recompute(call, &self.arg_converters[i], values)?;
                }
            }
        }
        self.live_groups = self.states.iter().filter(|s| s.rows > 0).count();
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
}
