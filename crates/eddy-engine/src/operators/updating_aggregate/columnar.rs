//! The everyday aggregates kept columnar: one vector a field over all
//! groups, a batch folded in by one pass over its rows, values read out by
//! gathering into an Arrow array. No accumulator object, no `ScalarValue`
//! per group.
//!
//! In: an aggregate's argument column, each row's group and sign. Out: the
//! values of any groups as one array; checkpoint columns laid out exactly
//! as the DataFusion accumulator of the same aggregate lays its state out,
//! so a checkpoint reads the same whichever way a group was kept.
//!
//! ```text
//!   count(x), count(*)          i64 per group                 +/- non-null rows
//!   sum(x)   i64 | f64          sum, non-null count           wrapping, as DataFusion's
//!   avg(x)   f64                sum, non-null count           NULL when no value
//!   min/max  i64 | f64 | ts(ms) value, whether any            append-only input only
//! ```
//!
//! Everything else (DISTINCT, decimals, strings, MIN/MAX over an updating
//! input, ...) is [`super::rows`]'s.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, BooleanArray, Int64Array, PrimitiveArray,
    RecordBatch, UInt64Array,
};
use datafusion::arrow::datatypes::{
    ArrowNativeTypeOp, DataType, Field, Float64Type, Int64Type, Schema, TimestampMillisecondType,
    UInt64Type,
};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;

use super::column::{passes, retain_marked, AggregateColumn, BatchRows};
use crate::error::{EngineError, Result};

const KIND: &str = "updating_aggregate";

/// The columnar form of `expr` over `input`, if it has one.
pub fn columnar(
    expr: &AggregateFunctionExpr,
    input: &Schema,
    input_updating: bool,
) -> Result<Option<Box<dyn AggregateColumn>>> {
    let args = expr.expressions();
    if expr.is_distinct() || args.len() != 1 || !expr.order_bys().is_empty() {
        return Ok(None);
    }
    let arg = args[0].data_type(input)?;
    let result = expr.field().data_type().clone();
    let column: Box<dyn AggregateColumn> = match (expr.fun().name(), &arg, &result) {
        ("count", _, DataType::Int64) => Box::new(Count::default()),
        ("sum", DataType::Int64, DataType::Int64) => {
            Box::new(Sum::<Int64Type>::new(input_updating))
        }
        ("sum", DataType::Float64, DataType::Float64) => {
            Box::new(Sum::<Float64Type>::new(input_updating))
        }
        ("avg", DataType::Float64, DataType::Float64) => Box::new(Avg::default()),
        ("min" | "max", _, _) if input_updating || arg != result => return Ok(None),
        (name @ ("min" | "max"), DataType::Int64, _) => {
            Box::new(Extreme::<Int64Type>::new(name == "max", result))
        }
        (name @ ("min" | "max"), DataType::Float64, _) => {
            Box::new(Extreme::<Float64Type>::new(name == "max", result))
        }
        (name @ ("min" | "max"), DataType::Timestamp(_, _), _)
            if matches!(
                arg,
                DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Millisecond, _)
            ) =>
        {
            Box::new(Extreme::<TimestampMillisecondType>::new(
                name == "max",
                result,
            ))
        }
        _ => return Ok(None),
    };
    Ok(Some(column))
}

fn state_column<T: ArrowPrimitiveType>(
    columns: &[ArrayRef],
    i: usize,
) -> Result<&PrimitiveArray<T>> {
    columns
        .get(i)
        .and_then(|c| c.as_primitive_opt::<T>())
        .ok_or_else(|| EngineError::State(format!("{KIND}: bad aggregate state column {i}")))
}

/// `count(x)`: rows with a non-null argument (`count(*)` counts a literal).
/// Groups `0..groups`, for a restore that loads them all.
fn all_groups(groups: usize) -> Vec<usize> {
    (0..groups).collect()
}

#[derive(Default)]
struct Count {
    counts: Vec<i64>,
}

impl AggregateColumn for Count {
    fn resize(&mut self, groups: usize) -> Result<()> {
        self.counts.resize(groups, 0);
        Ok(())
    }

    fn update(
        &mut self,
        rows: &BatchRows<'_>,
        args: &[ArrayRef],
        filter: Option<&BooleanArray>,
    ) -> Result<()> {
        let arg = &args[0];
        let nulls = arg.logical_nulls();
        for (row, &g) in rows.groups.iter().enumerate() {
            if !passes(filter, row) || nulls.as_ref().is_some_and(|n| n.is_null(row)) {
                continue;
            }
            if rows.retracts(row) {
                self.counts[g] -= 1;
            } else {
                self.counts[g] += 1;
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, groups: &[usize]) -> Result<ArrayRef> {
        Ok(Arc::new(Int64Array::from_iter_values(
            groups.iter().map(|&g| self.counts[g]),
        )))
    }

    fn reset(&mut self, g: usize) -> Result<()> {
        self.counts[g] = 0;
        Ok(())
    }

    fn retain(&mut self, keep: &[bool]) -> Result<()> {
        retain_marked(&mut self.counts, keep);
        Ok(())
    }

    fn state_fields(&self) -> Result<Vec<Field>> {
        Ok(vec![Field::new("count", DataType::Int64, true)])
    }

    fn state_columns(&mut self) -> Result<Vec<ArrayRef>> {
        Ok(vec![Arc::new(Int64Array::from(self.counts.clone()))])
    }

    fn restore(
        &mut self,
        groups: usize,
        columns: &[ArrayRef],
        _: Option<RecordBatch>,
    ) -> Result<()> {
        self.counts.clear();
        self.resize(groups)?;
        self.load(&all_groups(groups), columns)
    }

    fn load(&mut self, groups: &[usize], columns: &[ArrayRef]) -> Result<()> {
        let counts = state_column::<Int64Type>(columns, 0)?;
        for (row, &g) in groups.iter().enumerate() {
            self.counts[g] = counts.value(row);
        }
        Ok(())
    }

    fn size(&self) -> usize {
        self.counts.capacity() * 8
    }
}

/// `sum(x)`: the wrapping sum and how many non-null values it holds (NULL
/// when none). Over an updating input its state is DataFusion's sliding
/// sum's (sum, count); over an append-only one its plain sum's (sum).
struct Sum<T: ArrowPrimitiveType> {
    sums: Vec<T::Native>,
    values: Vec<u64>,
    retracting: bool,
}

impl<T: ArrowPrimitiveType> Sum<T> {
    fn new(retracting: bool) -> Self {
        Self {
            sums: Vec::new(),
            values: Vec::new(),
            retracting,
        }
    }
}

impl<T: ArrowPrimitiveType> AggregateColumn for Sum<T> {
    fn resize(&mut self, groups: usize) -> Result<()> {
        self.sums.resize(groups, T::Native::ZERO);
        self.values.resize(groups, 0);
        Ok(())
    }

    fn update(
        &mut self,
        rows: &BatchRows<'_>,
        args: &[ArrayRef],
        filter: Option<&BooleanArray>,
    ) -> Result<()> {
        let arg = args[0]
            .as_primitive_opt::<T>()
            .ok_or_else(|| EngineError::operator(KIND, "sum argument of an unplanned type"))?;
        let values = arg.values();
        for (row, &g) in rows.groups.iter().enumerate() {
            if !passes(filter, row) || arg.is_null(row) {
                continue;
            }
            if rows.retracts(row) {
                self.sums[g] = self.sums[g].sub_wrapping(values[row]);
                self.values[g] = self.values[g].wrapping_sub(1);
            } else {
                self.sums[g] = self.sums[g].add_wrapping(values[row]);
                self.values[g] += 1;
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, groups: &[usize]) -> Result<ArrayRef> {
        Ok(Arc::new(PrimitiveArray::<T>::from_iter(
            groups
                .iter()
                .map(|&g| (self.values[g] > 0).then_some(self.sums[g])),
        )))
    }

    fn reset(&mut self, g: usize) -> Result<()> {
        self.sums[g] = T::Native::ZERO;
        self.values[g] = 0;
        Ok(())
    }

    fn retain(&mut self, keep: &[bool]) -> Result<()> {
        retain_marked(&mut self.sums, keep);
        retain_marked(&mut self.values, keep);
        Ok(())
    }

    fn state_fields(&self) -> Result<Vec<Field>> {
        let mut fields = vec![Field::new("sum", T::DATA_TYPE, true)];
        if self.retracting {
            fields.push(Field::new("count", DataType::UInt64, true));
        }
        Ok(fields)
    }

    fn state_columns(&mut self) -> Result<Vec<ArrayRef>> {
        let all: Vec<usize> = (0..self.sums.len()).collect();
        let mut columns = vec![self.evaluate(&all)?];
        if self.retracting {
            columns.push(Arc::new(UInt64Array::from(self.values.clone())));
        }
        Ok(columns)
    }

    fn restore(
        &mut self,
        groups: usize,
        columns: &[ArrayRef],
        _: Option<RecordBatch>,
    ) -> Result<()> {
        self.sums.clear();
        self.values.clear();
        self.resize(groups)?;
        self.load(&all_groups(groups), columns)
    }

    fn load(&mut self, groups: &[usize], columns: &[ArrayRef]) -> Result<()> {
        let sums = state_column::<T>(columns, 0)?;
        let counts = if self.retracting {
            Some(state_column::<UInt64Type>(columns, 1)?)
        } else {
            None
        };
        for (row, &g) in groups.iter().enumerate() {
            self.sums[g] = if sums.is_valid(row) {
                sums.value(row)
            } else {
                T::Native::ZERO
            };
            self.values[g] = match counts {
                Some(counts) => counts.value(row),
                // A plain sum's state says only whether it saw a value.
                None => u64::from(sums.is_valid(row)),
            };
        }
        Ok(())
    }

    fn size(&self) -> usize {
        self.sums.capacity() * std::mem::size_of::<T::Native>() + self.values.capacity() * 8
    }
}

/// `avg(x)` over doubles: a (retracting) double sum over its non-null
/// count, NULL when none. Its checkpoint columns are DataFusion's average's
/// state, (count, sum).
struct Avg(Sum<Float64Type>);

impl Default for Avg {
    fn default() -> Self {
        Avg(Sum::new(true))
    }
}

impl AggregateColumn for Avg {
    fn resize(&mut self, groups: usize) -> Result<()> {
        self.0.resize(groups)
    }

    fn update(
        &mut self,
        rows: &BatchRows<'_>,
        args: &[ArrayRef],
        filter: Option<&BooleanArray>,
    ) -> Result<()> {
        self.0.update(rows, args, filter)
    }

    fn evaluate(&mut self, groups: &[usize]) -> Result<ArrayRef> {
        let Sum { sums, values, .. } = &self.0;
        Ok(Arc::new(PrimitiveArray::<Float64Type>::from_iter(
            groups
                .iter()
                .map(|&g| (values[g] > 0).then(|| sums[g] / values[g] as f64)),
        )))
    }

    fn reset(&mut self, g: usize) -> Result<()> {
        self.0.reset(g)
    }

    fn retain(&mut self, keep: &[bool]) -> Result<()> {
        self.0.retain(keep)
    }

    fn state_fields(&self) -> Result<Vec<Field>> {
        Ok(vec![
            Field::new("count", DataType::UInt64, true),
            Field::new("sum", DataType::Float64, true),
        ])
    }

    fn state_columns(&mut self) -> Result<Vec<ArrayRef>> {
        let [sum, count]: [ArrayRef; 2] = self
            .0
            .state_columns()?
            .try_into()
            .map_err(|_| EngineError::operator(KIND, "a retracting sum keeps two columns"))?;
        Ok(vec![count, sum])
    }

    fn restore(
        &mut self,
        groups: usize,
        columns: &[ArrayRef],
        _: Option<RecordBatch>,
    ) -> Result<()> {
        let [count, sum] = columns else {
            return Err(EngineError::State(format!(
                "{KIND}: an average's state is two columns"
            )));
        };
        let (count, sum) = (count.clone(), sum.clone());
        self.0.restore(groups, &[sum, count], None)
    }

    fn load(&mut self, groups: &[usize], columns: &[ArrayRef]) -> Result<()> {
        let [count, sum] = columns else {
            return Err(EngineError::State(format!(
                "{KIND}: an average's state is two columns"
            )));
        };
        self.0.load(groups, &[sum.clone(), count.clone()])
    }

    fn size(&self) -> usize {
        self.0.size()
    }
}

/// `min(x)` / `max(x)` over an append-only input (nothing is ever taken
/// out): the extreme so far in DataFusion's order (floats by total order).
struct Extreme<T: ArrowPrimitiveType> {
    max: bool,
    result: DataType,
    values: Vec<T::Native>,
    seen: Vec<bool>,
}

impl<T: ArrowPrimitiveType> Extreme<T> {
    fn new(max: bool, result: DataType) -> Self {
        Self {
            max,
            result,
            values: Vec::new(),
            seen: Vec::new(),
        }
    }
}

impl<T: ArrowPrimitiveType> AggregateColumn for Extreme<T> {
    fn resize(&mut self, groups: usize) -> Result<()> {
        self.values.resize(groups, T::Native::ZERO);
        self.seen.resize(groups, false);
        Ok(())
    }

    fn update(
        &mut self,
        rows: &BatchRows<'_>,
        args: &[ArrayRef],
        filter: Option<&BooleanArray>,
    ) -> Result<()> {
        if rows.retracts.is_some() {
            return Err(EngineError::operator(
                KIND,
                "a retraction reached a MIN/MAX kept for an append-only input",
            ));
        }
        let arg = args[0]
            .as_primitive_opt::<T>()
            .ok_or_else(|| EngineError::operator(KIND, "min/max argument of an unplanned type"))?;
        let values = arg.values();
        for (row, &g) in rows.groups.iter().enumerate() {
            if !passes(filter, row) || arg.is_null(row) {
                continue;
            }
            let value = values[row];
            let better = if self.max {
                value.is_gt(self.values[g])
            } else {
                value.is_lt(self.values[g])
            };
            if !self.seen[g] || better {
                self.values[g] = value;
                self.seen[g] = true;
            }
        }
        Ok(())
    }

    fn evaluate(&mut self, groups: &[usize]) -> Result<ArrayRef> {
        let array = PrimitiveArray::<T>::from_iter(
            groups
                .iter()
                .map(|&g| self.seen[g].then_some(self.values[g])),
        )
        .with_data_type(self.result.clone());
        Ok(Arc::new(array))
    }

    fn reset(&mut self, g: usize) -> Result<()> {
        self.values[g] = T::Native::ZERO;
        self.seen[g] = false;
        Ok(())
    }

    fn retain(&mut self, keep: &[bool]) -> Result<()> {
        retain_marked(&mut self.values, keep);
        retain_marked(&mut self.seen, keep);
        Ok(())
    }

    fn state_fields(&self) -> Result<Vec<Field>> {
        Ok(vec![Field::new(
            if self.max { "max" } else { "min" },
            self.result.clone(),
            true,
        )])
    }

    fn state_columns(&mut self) -> Result<Vec<ArrayRef>> {
        let all: Vec<usize> = (0..self.values.len()).collect();
        Ok(vec![self.evaluate(&all)?])
    }

    fn restore(
        &mut self,
        groups: usize,
        columns: &[ArrayRef],
        _: Option<RecordBatch>,
    ) -> Result<()> {
        self.values.clear();
        self.seen.clear();
        self.resize(groups)?;
        self.load(&all_groups(groups), columns)
    }

    fn load(&mut self, groups: &[usize], columns: &[ArrayRef]) -> Result<()> {
        let values = state_column::<T>(columns, 0)?;
        for (row, &g) in groups.iter().enumerate() {
            self.seen[g] = values.is_valid(row);
            self.values[g] = if values.is_valid(row) {
                values.value(row)
            } else {
                T::Native::ZERO
            };
        }
        Ok(())
    }

    fn size(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<T::Native>() + self.seen.capacity()
    }
}

#[cfg(test)]
mod tests {
    use datafusion::functions_aggregate::average::avg_udaf;
    use datafusion::functions_aggregate::count::count_udaf;
    use datafusion::functions_aggregate::min_max::{max_udaf, min_udaf};
    use datafusion::functions_aggregate::sum::sum_udaf;
    use datafusion::logical_expr::AggregateUDF;
    use datafusion::physical_expr::aggregate::AggregateExprBuilder;
    use datafusion::physical_expr::expressions::col;

    use super::*;

    fn schema() -> Arc<Schema> {
        Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
        ]))
    }

    fn expr(function: Arc<AggregateUDF>, arg: &str, distinct: bool) -> AggregateFunctionExpr {
        let schema = schema();
        AggregateExprBuilder::new(function, vec![col(arg, &schema).unwrap()])
            .schema(schema)
            .alias("a")
            .with_distinct(distinct)
            .build()
            .unwrap()
    }

    fn rows<'a>(groups: &'a [usize], retracts: Option<&'a [bool]>) -> BatchRows<'a> {
        BatchRows {
            groups,
            retracts,
            touched: &[],
            order: None,
            spans: &[],
        }
    }

    #[test]
    fn everyday_aggregates_are_columnar_and_the_rest_are_not() {
        let s = schema();
        let columnar =
            |e: AggregateFunctionExpr, updating| columnar(&e, &s, updating).unwrap().is_some();
        assert!(columnar(expr(count_udaf(), "s", false), true));
        assert!(columnar(expr(sum_udaf(), "i", false), true));
        assert!(columnar(expr(sum_udaf(), "f", false), true));
        assert!(columnar(expr(avg_udaf(), "f", false), true));
        assert!(columnar(expr(max_udaf(), "i", false), false));
        assert!(
            !columnar(expr(max_udaf(), "i", false), true),
            "MIN/MAX retract through a multiset"
        );
        assert!(!columnar(expr(min_udaf(), "s", false), false));
        assert!(!columnar(expr(count_udaf(), "s", true), false), "DISTINCT");
    }

    #[test]
    fn sums_retract_to_null_when_their_last_value_leaves() {
        let mut sum = Sum::<Int64Type>::new(true);
        sum.resize(2).unwrap();
        let args: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![
            Some(3),
            None,
            Some(4),
            Some(3),
        ]))];
        sum.update(
            &rows(&[0, 0, 1, 0], Some(&[false, false, false, true])),
            &args,
            None,
        )
        .unwrap();
        let values = sum.evaluate(&[0, 1]).unwrap();
        assert_eq!(
            values.as_primitive::<Int64Type>(),
            &Int64Array::from(vec![None, Some(4)])
        );
    }

    #[test]
    fn state_round_trips_through_the_checkpoint_columns() {
        let mut avg = Avg::default();
        avg.resize(3).unwrap();
        let args: Vec<ArrayRef> = vec![Arc::new(PrimitiveArray::<Float64Type>::from(vec![
            Some(1.0),
            Some(2.0),
            None,
        ]))];
        let filter = BooleanArray::from(vec![true, true, true]);
        avg.update(&rows(&[0, 0, 2], None), &args, Some(&filter))
            .unwrap();
        let columns = avg.state_columns().unwrap();
        let mut restored = Avg::default();
        restored.restore(3, &columns, None).unwrap();
        let values = restored.evaluate(&[0, 1, 2]).unwrap();
        assert_eq!(
            values.as_primitive::<Float64Type>(),
            &PrimitiveArray::<Float64Type>::from(vec![Some(1.5), None, None])
        );
        restored.retain(&[false, true, true]).unwrap();
        assert_eq!(restored.0.values, vec![0, 0]);
    }

    #[test]
    fn max_keeps_the_largest_under_a_filter() {
        let mut max = Extreme::<Int64Type>::new(true, DataType::Int64);
        max.resize(1).unwrap();
        let args: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![-5, 9, 7]))];
        let filter = BooleanArray::from(vec![true, false, true]);
        max.update(&rows(&[0, 0, 0], None), &args, Some(&filter))
            .unwrap();
        let values = max.evaluate(&[0]).unwrap();
        assert_eq!(values.as_primitive::<Int64Type>().value(0), 7);
    }
}
