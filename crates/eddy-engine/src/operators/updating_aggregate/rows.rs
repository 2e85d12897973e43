//! Any aggregate kept a group at a time: one DataFusion row `Accumulator`
//! per group, or the group's argument values as a multiset.
//!
//! In: a batch's argument columns, grouped by [`BatchRows::order`]. Out:
//! each group's value (an `evaluate` per group), checkpoint columns (the
//! accumulators' `state()`) or a table of its own (the multisets).
//!
//! Over an append-only input every aggregate keeps its plain accumulator
//! (nothing is ever taken out). Over an updating input the aggregates whose
//! accumulators retract exactly in any order (count, sum, avg, the
//! variances: `retract_batch` of DataFusion's sliding accumulators) keep
//! one; the others (MIN, MAX, DISTINCT aggregates, medians, ...) keep the
//! group's argument values as a multiset (Arrow row encoding to count) and
//! are recomputed from it when it changes. DataFusion's sliding MIN/MAX
//! retract oldest-first, which a changelog does not promise.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryArray, BinaryBuilder, BooleanArray, Int64Array, RecordBatch,
    UInt32Array, UInt64Array,
};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use hashbrown::HashMap;

use super::column::{retain_marked, AggregateColumn, BatchRows};
use super::AggregateCall;
use crate::error::{EngineError, Result};
use crate::state::scalars_to_array;

const KIND: &str = "updating_aggregate";

/// How the aggregate is kept per group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keeping {
    /// An accumulator (its sliding form when rows are taken back out).
    Accumulated { retracting: bool },
    /// The arguments' multiset, the value recomputed from it.
    Multiset,
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

/// An aggregate kept as one accumulator (or multiset) per group.
pub struct RowAccumulators {
    call: AggregateCall,
    keeping: Keeping,
    converter: RowConverter,
    states: Vec<AggState>,
}

impl RowAccumulators {
    /// `call` over `input`; `input_updating` fixes how it is kept.
    pub fn new(call: &AggregateCall, input: &Schema, input_updating: bool) -> Result<Self> {
        let keeping = if !input_updating {
            Keeping::Accumulated { retracting: false }
        } else if !call.expr.is_distinct() && super::super::retracts_in_any_order(&call.expr) {
            Keeping::Accumulated { retracting: true }
        } else {
            Keeping::Multiset
        };
        let fields = call
            .expr
            .expressions()
            .iter()
            .map(|e| Ok(SortField::new(e.data_type(input)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            call: call.clone(),
            keeping,
            converter: RowConverter::new(fields)?,
            states: Vec::new(),
        })
    }

    fn fresh(&self) -> Result<AggState> {
        let expr = &self.call.expr;
        Ok(match self.keeping {
            Keeping::Accumulated { retracting: false } => {
                AggState::Accumulated(expr.create_accumulator()?)
            }
            Keeping::Accumulated { retracting: true } => {
                AggState::Accumulated(expr.create_sliding_accumulator()?)
            }
            Keeping::Multiset => AggState::Multiset {
                values: HashMap::new(),
                current: expr.create_accumulator()?.evaluate()?,
            },
        })
    }

    /// Folds `inserted` and `retracted` argument rows into group `g`.
    fn apply(
        &mut self,
        g: usize,
        inserted: Option<Vec<ArrayRef>>,
        retracted: Option<Vec<ArrayRef>>,
    ) -> Result<()> {
        let Self {
            call,
            converter,
            states,
            ..
        } = self;
        match &mut states[g] {
            AggState::Accumulated(acc) => {
                if let Some(columns) = &inserted {
                    acc.update_batch(columns)?;
                }
                if let Some(columns) = &retracted {
                    acc.retract_batch(columns)?;
                }
            }
            AggState::Multiset { values, current } => {
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
                *current = recompute(call, converter, values)?;
            }
        }
        Ok(())
    }
}

/// A multiset aggregate's value, recomputed from its values.
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

impl AggregateColumn for RowAccumulators {
    fn resize(&mut self, groups: usize) -> Result<()> {
        while self.states.len() < groups {
            let state = self.fresh()?;
            self.states.push(state);
        }
        Ok(())
    }

    fn needs_order(&self) -> bool {
        true
    }

    fn update(
        &mut self,
        rows: &BatchRows<'_>,
        args: &[ArrayRef],
        filter: Option<&BooleanArray>,
    ) -> Result<()> {
        let order = rows
            .order
            .ok_or_else(|| EngineError::operator(KIND, "rows not grouped for an aggregate"))?;
        // Without a FILTER each group's rows are one slice of the
        // arguments taken in `order` once.
        let permuted = match filter {
            None => Some(
                args.iter()
                    .map(|c| Ok(take(c.as_ref(), order, None)?))
                    .collect::<Result<Vec<ArrayRef>>>()?,
            ),
            Some(_) => None,
        };
        let pick = |range: &std::ops::Range<usize>| -> Result<Option<Vec<ArrayRef>>> {
            if range.is_empty() {
                return Ok(None);
            }
            if let Some(columns) = &permuted {
                return Ok(Some(
                    columns
                        .iter()
                        .map(|c| c.slice(range.start, range.len()))
                        .collect(),
                ));
            }
            let picked: Vec<u32> = order.values()[range.clone()]
                .iter()
                .copied()
                .filter(|&r| super::column::passes(filter, r as usize))
                .collect();
            if picked.is_empty() {
                return Ok(None);
            }
            let indices = UInt32Array::from(picked);
            Ok(Some(
                args.iter()
                    .map(|a| Ok(take(a.as_ref(), &indices, None)?))
                    .collect::<Result<Vec<_>>>()?,
            ))
        };
        for (&g, (ins, ret)) in rows.touched.iter().zip(rows.spans) {
            let (inserted, retracted) = (pick(ins)?, pick(ret)?);
            if inserted.is_some() || retracted.is_some() {
                self.apply(g, inserted, retracted)?;
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, groups: &[usize]) -> Result<ArrayRef> {
        let values = groups
            .iter()
            .map(|&g| match &mut self.states[g] {
                AggState::Accumulated(acc) => Ok(acc.evaluate()?),
                AggState::Multiset { current, .. } => Ok(current.clone()),
            })
            .collect::<Result<Vec<_>>>()?;
        scalars_to_array(values, self.call.expr.field().data_type())
    }

    fn reset(&mut self, g: usize) -> Result<()> {
        // An emptied group starts afresh (no float residue, no multiset
        // entries left behind).
        self.states[g] = self.fresh()?;
        Ok(())
    }

    fn retain(&mut self, keep: &[bool]) -> Result<()> {
        retain_marked(&mut self.states, keep);
        Ok(())
    }

    /// As its accumulator's `state()` gives them (a sliding sum's state
    /// holds a count besides the sum its plain form keeps), read off a
    /// fresh accumulator of the kind kept; none for a multiset.
    fn state_fields(&self) -> Result<Vec<Field>> {
        match self.fresh()? {
            AggState::Accumulated(mut acc) => Ok(acc
                .state()?
                .iter()
                .enumerate()
                .map(|(i, v)| Field::new(format!("s{i}"), v.data_type(), true))
                .collect()),
            AggState::Multiset { .. } => Ok(Vec::new()),
        }
    }

    fn state_columns(&mut self) -> Result<Vec<ArrayRef>> {
        let fields = self.state_fields()?;
        if fields.is_empty() {
            return Ok(Vec::new());
        }
        let mut per_column: Vec<Vec<ScalarValue>> =
            vec![Vec::with_capacity(self.states.len()); fields.len()];
        for state in &mut self.states {
            let AggState::Accumulated(acc) = state else {
                return Err(EngineError::operator(KIND, "aggregate state changed kind"));
            };
            for (column, value) in per_column.iter_mut().zip(acc.state()?) {
                column.push(value);
            }
        }
        per_column
            .into_iter()
            .zip(&fields)
            .map(|(values, field)| scalars_to_array(values, field.data_type()))
            .collect()
    }

    /// Each group's multiset as one binary value ([`pack`]): a spilled
    /// group carries its values with it.
    fn packed_state(&self) -> Result<Option<ArrayRef>> {
        if self.keeping != Keeping::Multiset {
            return Ok(None);
        }
        let mut packed = BinaryBuilder::new();
        let mut bytes = Vec::new();
        for state in &self.states {
            bytes.clear();
            if let AggState::Multiset { values, .. } = state {
                pack(values, &mut bytes);
            }
            packed.append_value(&bytes);
        }
        Ok(Some(Arc::new(packed.finish())))
    }

    fn load_packed(&mut self, groups: &[usize], packed: &ArrayRef) -> Result<()> {
        let packed = packed
            .as_any()
            .downcast_ref::<BinaryArray>()
            .ok_or_else(|| EngineError::State(format!("{KIND}: bad spilled multiset")))?;
        for (row, &g) in groups.iter().enumerate() {
            let mut values = HashMap::new();
            unpack(packed.value(row), |bytes, count| {
                values.insert(bytes.into(), count);
            })?;
            let current = recompute(&self.call, &self.converter, &values)?;
            self.states[g] = AggState::Multiset { values, current };
        }
        Ok(())
    }

    /// A multiset's table ([`multiset_table_schema`]).
    fn state_table(&self) -> Result<Option<RecordBatch>> {
        if self.keeping != Keeping::Multiset {
            return Ok(None);
        }
        let mut group_column = Vec::new();
        let mut bytes: Vec<&[u8]> = Vec::new();
        let mut counts = Vec::new();
        for (g, state) in self.states.iter().enumerate() {
            if let AggState::Multiset { values, .. } = state {
                for (row, &count) in values {
                    group_column.push(g as u64);
                    bytes.push(row);
                    counts.push(count);
                }
            }
        }
        Ok(Some(RecordBatch::try_new(
            multiset_table_schema(),
            vec![
                Arc::new(UInt64Array::from(group_column)),
                Arc::new(BinaryArray::from(bytes)),
                Arc::new(Int64Array::from(counts)),
            ],
        )?))
    }

    fn restore(
        &mut self,
        groups: usize,
        columns: &[ArrayRef],
        table: Option<RecordBatch>,
    ) -> Result<()> {
        self.states.clear();
        self.resize(groups)?;
        if self.keeping != Keeping::Multiset {
            return self.load(&(0..groups).collect::<Vec<_>>(), columns);
        }
        let values = table
            .ok_or_else(|| EngineError::State(format!("{KIND}: a multiset's table is missing")))?;
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
            if let AggState::Multiset { values, .. } = state {
                values.insert(bytes.value(r).into(), counts.value(r));
            }
        }
        for state in &mut self.states {
            if let AggState::Multiset { values, current } = state {
                *current = recompute(&self.call, &self.converter, values)?;
            }
        }
        Ok(())
    }

    /// Each of `groups` afresh, then merged with its state row.
    fn load(&mut self, groups: &[usize], columns: &[ArrayRef]) -> Result<()> {
        for (row, &g) in groups.iter().enumerate() {
            self.states[g] = self.fresh()?;
            let AggState::Accumulated(acc) = &mut self.states[g] else {
                return Err(EngineError::operator(
                    KIND,
                    "an aggregate kept as a multiset is not loaded by group",
                ));
            };
            let one: Vec<ArrayRef> = columns.iter().map(|s| s.slice(row, 1)).collect();
            acc.merge_batch(&one)?;
        }
        Ok(())
    }

    /// Its accumulators' sizes are summed when asked.
    fn size_is_counted(&self) -> bool {
        false
    }

    fn size(&self) -> usize {
        self.states
            .iter()
            .map(|a| match a {
                AggState::Accumulated(acc) => acc.size(),
                AggState::Multiset { values, current } => {
                    values.keys().map(|k| k.len() + 24).sum::<usize>() + current.size()
                }
            })
            .sum()
    }
}

/// Appends `values` to `out`: per value its length (u32), its bytes and
/// its count (i64), little-endian.
fn pack(values: &HashMap<Box<[u8]>, i64>, out: &mut Vec<u8>) {
    for (bytes, count) in values {
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
        out.extend_from_slice(&count.to_le_bytes());
    }
}

/// Calls `each` with every (value, count) [`pack`] wrote into `packed`.
fn unpack(mut packed: &[u8], mut each: impl FnMut(&[u8], i64)) -> Result<()> {
    let bad = || EngineError::State(format!("{KIND}: a spilled multiset is cut short"));
    while !packed.is_empty() {
        let (len, rest) = packed.split_first_chunk::<4>().ok_or_else(bad)?;
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(bad());
        }
        let (bytes, rest) = rest.split_at(len);
        let (count, rest) = rest.split_first_chunk::<8>().ok_or_else(bad)?;
        each(bytes, i64::from_le_bytes(*count));
        packed = rest;
    }
    Ok(())
}

/// The rows of multiset tables for `packed` ([`RowAccumulators`]'s
/// spilled form, a group a row), the groups numbered from `first_group`.
pub(super) fn unpacked_table(packed: &ArrayRef, first_group: u64) -> Result<RecordBatch> {
    let packed = packed
        .as_any()
        .downcast_ref::<BinaryArray>()
        .ok_or_else(|| EngineError::State(format!("{KIND}: bad spilled multiset")))?;
    let mut groups = Vec::new();
    let mut bytes = BinaryBuilder::new();
    let mut counts = Vec::new();
    for row in 0..packed.len() {
        unpack(packed.value(row), |value, count| {
            groups.push(first_group + row as u64);
            bytes.append_value(value);
            counts.push(count);
        })?;
    }
    Ok(RecordBatch::try_new(
        multiset_table_schema(),
        vec![
            Arc::new(UInt64Array::from(groups)),
            Arc::new(bytes.finish()),
            Arc::new(Int64Array::from(counts)),
        ],
    )?)
}

/// `table` (a multiset table) with its groups numbered `offset` higher.
pub(super) fn numbered_from(table: RecordBatch, offset: u64) -> Result<RecordBatch> {
    let groups = table
        .column(0)
        .as_any()
        .downcast_ref::<UInt64Array>()
        .ok_or_else(|| EngineError::State(format!("{KIND}: bad value table")))?;
    let moved = UInt64Array::from_iter_values(groups.values().iter().map(|g| g + offset));
    let mut columns = table.columns().to_vec();
    columns[0] = Arc::new(moved);
    Ok(RecordBatch::try_new(table.schema(), columns)?)
}

/// A multiset's own state table: the group's row in the groups table, the
/// arguments row-encoded, how many times they are held.
pub(super) fn multiset_table_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("group", DataType::UInt64, false),
        Field::new("row", DataType::Binary, false),
        Field::new("count", DataType::Int64, false),
    ]))
}
