//! Native running aggregates: count, sum, avg and eddy's Welford functions
//! over running frames (`UNBOUNDED PRECEDING`), kept per key as plain
//! numbers and fed straight from the batch's argument column, instead of a
//! DataFusion `Accumulator` called with a one-row slice and read as a
//! `ScalarValue` for every row.
//!
//! In: a [`RunningAggregate`] (which function) and per row the argument
//! column's value. Out: the running value as a number, written into the
//! output column by the operator.
//!
//! Each state also implements DataFusion's `Accumulator` with the layout of
//! the accumulator it replaces (`state()` and `merge_batch` alike), so
//! checkpoints, restores and rescaling read and write the same tables
//! whichever form ran, and the values are bit for bit those of DataFusion's
//! accumulator: the same additions in the same order.
//!
//! ```
//! use eddy_engine::operators::over::RunningAggregate;
//! use eddy_engine::running_stats::WelfordOutput;
//!
//! let threshold = RunningAggregate::Welford(WelfordOutput::Threshold {
//!     k: 3.0,
//!     floor: 5000.0,
//!     min_samples: 5,
//! });
//! assert_ne!(threshold, RunningAggregate::Count);
//! ```

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;

use crate::error::{EngineError, Result};
use crate::running_stats::{Welford, WelfordOutput};

/// An aggregate the OVER operator can run natively over a running frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunningAggregate {
    /// `count(x)` (rows whose `x` is not NULL) or `count(*)`: BIGINT.
    Count,
    /// `sum(x)` of a DOUBLE: NULL until a value is seen.
    SumFloat,
    /// `sum(x)` of a BIGINT, wrapping on overflow as DataFusion's does.
    SumInt,
    /// `avg(x)` of a DOUBLE.
    Avg,
    /// eddy's Welford functions (`welford_*`, `dynamic_threshold`); the
    /// argument is read as DOUBLE.
    Welford(WelfordOutput),
}

impl RunningAggregate {
    /// The native form of DataFusion's `count`, `sum` or `avg` as planned in
    /// `expr` over `input`, if it has one (not DISTINCT, one argument of a
    /// type the native form reads).
    pub fn builtin(expr: &AggregateFunctionExpr, input: &Schema) -> Option<Self> {
        if expr.is_distinct() || !expr.order_bys().is_empty() {
            return None;
        }
        let args = expr.expressions();
        let arg_type = match args.as_slice() {
            [] => None,
            [arg] => Some(arg.data_type(input).ok()?),
            _ => return None,
        };
        let output = expr.field().data_type().clone();
        match (expr.fun().name(), arg_type, output) {
            ("count", _, DataType::Int64) => Some(RunningAggregate::Count),
            ("sum", Some(DataType::Float64), DataType::Float64) => Some(RunningAggregate::SumFloat),
            ("sum", Some(DataType::Int64), DataType::Int64) => Some(RunningAggregate::SumInt),
            ("avg", Some(DataType::Float64), DataType::Float64) => Some(RunningAggregate::Avg),
            _ => None,
        }
    }

    /// An empty state.
    pub(super) fn start(&self) -> RunningState {
        match *self {
            RunningAggregate::Count => RunningState::Count(0),
            RunningAggregate::SumFloat => RunningState::SumFloat(None),
            RunningAggregate::SumInt => RunningState::SumInt(None),
            RunningAggregate::Avg => RunningState::Avg {
                count: 0,
                sum: None,
            },
            RunningAggregate::Welford(output) => RunningState::Welford(Welford::default(), output),
        }
    }

    /// A batch's argument column as the native form reads it (`None` for
    /// `count(*)`: every row counts).
    pub(super) fn argument(&self, args: &[ArrayRef]) -> Result<RunningArgument> {
        let Some(arg) = args.first() else {
            return Ok(RunningArgument::EveryRow);
        };
        Ok(match self {
            RunningAggregate::Count => RunningArgument::Validity(arg.clone()),
            RunningAggregate::SumInt => RunningArgument::Int(
                arg.as_primitive_opt::<Int64Type>()
                    .cloned()
                    .ok_or_else(|| mistyped("BIGINT"))?,
            ),
            RunningAggregate::SumFloat | RunningAggregate::Avg => RunningArgument::Float(
                arg.as_primitive_opt::<Float64Type>()
                    .cloned()
                    .ok_or_else(|| mistyped("DOUBLE"))?,
            ),
            RunningAggregate::Welford(_) => RunningArgument::Float(
                cast(arg, &DataType::Float64)?
                    .as_primitive_opt::<Float64Type>()
                    .cloned()
                    .ok_or_else(|| mistyped("DOUBLE"))?,
            ),
        })
    }
}

fn mistyped(expected: &str) -> EngineError {
    EngineError::operator(
        "over",
        format!("running aggregate expected a {expected} argument"),
    )
}

/// One batch's argument column, downcast once.
pub(super) enum RunningArgument {
    /// `count(*)`.
    EveryRow,
    /// `count(x)`: only whether `x` is NULL matters.
    Validity(ArrayRef),
    /// A DOUBLE argument.
    Float(Float64Array),
    /// A BIGINT argument.
    Int(Int64Array),
}

/// One key's running value of one aggregate.
#[derive(Debug, Clone, Copy)]
pub(super) enum RunningState {
    Count(i64),
    SumFloat(Option<f64>),
    SumInt(Option<i64>),
    Avg { count: u64, sum: Option<f64> },
    Welford(Welford, WelfordOutput),
}

/// A running value read as a number.
pub(super) enum RunningValue {
    Float(Option<f64>),
    Int(Option<i64>),
}

impl RunningState {
    /// The aggregate this state belongs to.
    pub fn kind(&self) -> RunningAggregate {
        match self {
            RunningState::Count(_) => RunningAggregate::Count,
            RunningState::SumFloat(_) => RunningAggregate::SumFloat,
            RunningState::SumInt(_) => RunningAggregate::SumInt,
            RunningState::Avg { .. } => RunningAggregate::Avg,
            RunningState::Welford(_, output) => RunningAggregate::Welford(*output),
        }
    }

    /// Folds in `row` of the batch's argument (a NULL leaves the state alone,
    /// as in DataFusion's accumulators).
    #[inline]
    pub(super) fn push(&mut self, arg: &RunningArgument, row: usize) {
        match (self, arg) {
            (RunningState::Count(n), RunningArgument::EveryRow) => *n += 1,
            (RunningState::Count(n), RunningArgument::Validity(a)) => {
                *n += i64::from(a.is_valid(row))
            }
            (RunningState::SumInt(sum), RunningArgument::Int(a)) if a.is_valid(row) => {
                *sum = Some(sum.unwrap_or(0).wrapping_add(a.value(row)));
            }
            (RunningState::SumFloat(sum), RunningArgument::Float(a)) if a.is_valid(row) => {
                *sum = Some(sum.unwrap_or(0.0) + a.value(row));
            }
            (RunningState::Avg { count, sum }, RunningArgument::Float(a)) if a.is_valid(row) => {
                *count += 1;
                *sum = Some(sum.unwrap_or(0.0) + a.value(row));
            }
            (RunningState::Welford(w, _), RunningArgument::Float(a)) if a.is_valid(row) => {
                w.push(a.value(row));
            }
            // A NULL argument; `argument` pairs each state with its own kind
            // of column.
            _ => {}
        }
    }

    /// The aggregate's value over what was pushed.
    #[inline]
    pub(super) fn value(&self) -> RunningValue {
        match *self {
            RunningState::Count(n) => RunningValue::Int(Some(n)),
            RunningState::SumInt(sum) => RunningValue::Int(sum),
            RunningState::SumFloat(sum) => RunningValue::Float(sum),
            RunningState::Avg { count, sum } => RunningValue::Float(if count == 0 {
                None
            } else {
                sum.map(|s| s / count as f64)
            }),
            RunningState::Welford(w, output) => RunningValue::Float(output.value(&w)),
        }
    }
}

impl Accumulator for RunningState {
    fn update_batch(&mut self, values: &[ArrayRef]) -> datafusion::error::Result<()> {
        let arg = self
            .kind()
            .argument(values)
            .map_err(|e| datafusion::error::DataFusionError::External(Box::new(e)))?;
        let rows = values.first().map_or(0, |a| a.len());
        for row in 0..rows {
            self.push(&arg, row);
        }
        Ok(())
    }

    fn evaluate(&mut self) -> datafusion::error::Result<ScalarValue> {
        Ok(match self.value() {
            RunningValue::Float(v) => ScalarValue::Float64(v),
            RunningValue::Int(v) => ScalarValue::Int64(v),
        })
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }

    /// The state of the DataFusion accumulator this one stands for.
    fn state(&mut self) -> datafusion::error::Result<Vec<ScalarValue>> {
        Ok(match *self {
            RunningState::Count(n) => vec![ScalarValue::Int64(Some(n))],
            RunningState::SumFloat(sum) => vec![ScalarValue::Float64(sum)],
            RunningState::SumInt(sum) => vec![ScalarValue::Int64(sum)],
            RunningState::Avg { count, sum } => {
                vec![ScalarValue::UInt64(Some(count)), ScalarValue::Float64(sum)]
            }
            RunningState::Welford(w, _) => vec![
                ScalarValue::UInt64(Some(w.count)),
                ScalarValue::Float64(Some(w.mean)),
                ScalarValue::Float64(Some(w.m2)),
            ],
        })
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> datafusion::error::Result<()> {
        let bad = || datafusion::error::DataFusionError::Internal("over: bad running state".into());
        let first = states.first().ok_or_else(bad)?;
        for i in 0..first.len() {
            match self {
                RunningState::Count(n) => {
                    let counts = first.as_primitive_opt::<Int64Type>().ok_or_else(bad)?;
                    if counts.is_valid(i) {
                        *n += counts.value(i);
                    }
                }
                RunningState::SumFloat(sum) => {
                    let sums = first.as_primitive_opt::<Float64Type>().ok_or_else(bad)?;
                    if sums.is_valid(i) {
                        *sum = Some(sum.unwrap_or(0.0) + sums.value(i));
                    }
                }
                RunningState::SumInt(sum) => {
                    let sums = first.as_primitive_opt::<Int64Type>().ok_or_else(bad)?;
                    if sums.is_valid(i) {
                        *sum = Some(sum.unwrap_or(0).wrapping_add(sums.value(i)));
                    }
                }
                RunningState::Avg { count, sum } => {
                    let counts = first
                        .as_any()
                        .downcast_ref::<UInt64Array>()
                        .ok_or_else(bad)?;
                    let sums = states
                        .get(1)
                        .and_then(|a| a.as_primitive_opt::<Float64Type>())
                        .ok_or_else(bad)?;
                    if counts.is_valid(i) {
                        *count += counts.value(i);
                    }
                    if sums.is_valid(i) {
                        *sum = Some(sum.unwrap_or(0.0) + sums.value(i));
                    }
                }
                RunningState::Welford(w, _) => {
                    let counts = first
                        .as_any()
                        .downcast_ref::<UInt64Array>()
                        .ok_or_else(bad)?;
                    let column = |c: usize| {
                        states
                            .get(c)
                            .and_then(|a| a.as_primitive_opt::<Float64Type>())
                            .ok_or_else(bad)
                    };
                    let (means, m2s) = (column(1)?, column(2)?);
                    if counts.is_valid(i) {
                        w.merge(Welford {
                            count: counts.value(i),
                            mean: means.value(i),
                            m2: m2s.value(i),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// A function's per-key aggregate: native, or DataFusion's accumulator.
pub(super) enum Aggregator {
    Running(RunningState),
    DataFusion(Box<dyn Accumulator>),
}

impl Aggregator {
    /// The aggregate as a DataFusion accumulator (checkpoints, restores,
    /// sliding frames).
    pub(super) fn accumulator(&mut self) -> &mut dyn Accumulator {
        match self {
            Aggregator::Running(state) => state,
            Aggregator::DataFusion(acc) => acc.as_mut(),
        }
    }

    pub(super) fn size(&self) -> usize {
        match self {
            Aggregator::Running(state) => std::mem::size_of_val(state),
            Aggregator::DataFusion(acc) => acc.size(),
        }
    }
}
