//! The columns an OVER node appends, filled row by row as released rows
//! run through their keys' state, then finished into Arrow arrays.
//!
//! In: per row, a function's value: a number from a native running
//! aggregate, a `ScalarValue` from a DataFusion accumulator, a row number,
//! or where a `lag` finds its value. Out: one array per function.
//!
//! Numbers go straight into typed buffers and `lag` records only where each
//! value comes from (a row of this batch, a value held from an earlier one,
//! or the default), gathered at the end with one `interleave`; only
//! DataFusion accumulators' values pass through `ScalarValue`s.

use std::sync::Arc;

use datafusion::arrow::array::{
    new_empty_array, new_null_array, Array, ArrayRef, Float64Array, Int64Array, UInt64Array,
};
use datafusion::arrow::buffer::{BooleanBuffer, NullBuffer};
use datafusion::arrow::compute::{cast, interleave};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;

use super::running::{RunningAggregate, RunningValue};
use crate::error::{EngineError, Result};

/// Where a `lag` value comes from: `(LAG_BATCH, row)`, `(LAG_HELD, index)`
/// or `(LAG_DEFAULT, 0)`.
pub(super) const LAG_BATCH: usize = 0;
pub(super) const LAG_HELD: usize = 1;
pub(super) const LAG_DEFAULT: usize = 2;

/// One function's output column while its rows are filled in.
pub(super) enum OutputColumn {
    /// Values of a DataFusion accumulator.
    Scalars(Vec<ScalarValue>),
    /// A native aggregate's DOUBLE values.
    Float { values: Vec<f64>, valid: Vec<bool> },
    /// A native aggregate's BIGINT values.
    Int { values: Vec<i64>, valid: Vec<bool> },
    /// `row_number()`.
    RowNumbers(Vec<u64>),
    /// `lag`: per row where its value is, and the values held from earlier
    /// batches it takes.
    Lag {
        sources: Vec<(usize, usize)>,
        held: Vec<ScalarValue>,
    },
    /// Filled later (`lead`): `n` nulls for now.
    Later(usize),
}

impl OutputColumn {
    /// A column of `n` rows for a native aggregate of kind `running`, or for
    /// a DataFusion accumulator (`None`).
    pub(super) fn aggregate(running: Option<RunningAggregate>, n: usize) -> Self {
        match running {
            Some(RunningAggregate::Count | RunningAggregate::SumInt) => OutputColumn::Int {
                values: vec![0; n],
                valid: vec![false; n],
            },
            Some(_) => OutputColumn::Float {
                values: vec![0.0; n],
                valid: vec![false; n],
            },
            None => OutputColumn::Scalars(vec![ScalarValue::Null; n]),
        }
    }

    pub(super) fn row_numbers(n: usize) -> Self {
        OutputColumn::RowNumbers(vec![0; n])
    }

    pub(super) fn lag(n: usize) -> Self {
        OutputColumn::Lag {
            sources: vec![(LAG_DEFAULT, 0); n],
            held: Vec::new(),
        }
    }

    /// Sets `row` to a native aggregate's value.
    #[inline]
    pub(super) fn set_running(&mut self, row: usize, value: RunningValue) {
        match (self, value) {
            (OutputColumn::Float { values, valid }, RunningValue::Float(v)) => {
                values[row] = v.unwrap_or_default();
                valid[row] = v.is_some();
            }
            (OutputColumn::Int { values, valid }, RunningValue::Int(v)) => {
                values[row] = v.unwrap_or_default();
                valid[row] = v.is_some();
            }
            // A column is made for its aggregate's kind of value.
            _ => {}
        }
    }

    /// Sets `row` to `value` (a DataFusion accumulator's, or an empty
    /// frame's default).
    pub(super) fn set_scalar(&mut self, row: usize, value: ScalarValue) -> Result<()> {
        match self {
            OutputColumn::Scalars(values) => values[row] = value,
            OutputColumn::Float { values, valid } => match value.cast_to(&DataType::Float64)? {
                ScalarValue::Float64(v) => {
                    values[row] = v.unwrap_or_default();
                    valid[row] = v.is_some();
                }
                other => return Err(unexpected(&other)),
            },
            OutputColumn::Int { values, valid } => match value.cast_to(&DataType::Int64)? {
                ScalarValue::Int64(v) => {
                    values[row] = v.unwrap_or_default();
                    valid[row] = v.is_some();
                }
                other => return Err(unexpected(&other)),
            },
            OutputColumn::RowNumbers(_) | OutputColumn::Lag { .. } | OutputColumn::Later(_) => {
                return Err(unexpected(&value))
            }
        }
        Ok(())
    }

    /// The finished array of type `data_type`. `lag` gathers from its
    /// argument column `lag_values` and its `lag_default`.
    pub(super) fn finish(
        self,
        data_type: &DataType,
        lag_values: Option<&ArrayRef>,
        lag_default: Option<&ScalarValue>,
    ) -> Result<ArrayRef> {
        let array: ArrayRef = match self {
            OutputColumn::Scalars(values) if values.is_empty() => new_empty_array(data_type),
            OutputColumn::Scalars(values) => ScalarValue::iter_to_array(values)?,
            OutputColumn::Float { values, valid } => {
                Arc::new(Float64Array::new(values.into(), nulls(valid)))
            }
            OutputColumn::Int { values, valid } => {
                Arc::new(Int64Array::new(values.into(), nulls(valid)))
            }
            OutputColumn::RowNumbers(values) => Arc::new(UInt64Array::from(values)),
            OutputColumn::Later(n) => new_null_array(data_type, n),
            OutputColumn::Lag { sources, held } => {
                let (Some(values), Some(default)) = (lag_values, lag_default) else {
                    return Err(EngineError::operator("over", "lag without its values"));
                };
                let value_type = values.data_type();
                let held = if held.is_empty() {
                    new_empty_array(value_type)
                } else {
                    cast(&ScalarValue::iter_to_array(held)?, value_type)?
                };
                let default = cast(&default.to_array_of_size(1)?, value_type)?;
                interleave(
                    &[values.as_ref(), held.as_ref(), default.as_ref()],
                    &sources,
                )?
            }
        };
        Ok(if array.data_type() == data_type {
            array
        } else {
            cast(&array, data_type)?
        })
    }
}

fn nulls(valid: Vec<bool>) -> Option<NullBuffer> {
    let buffer = NullBuffer::new(BooleanBuffer::from(valid));
    (buffer.null_count() > 0).then_some(buffer)
}

fn unexpected(value: &ScalarValue) -> EngineError {
    EngineError::operator(
        "over",
        format!("unexpected value {value:?} for a numeric output column"),
    )
}
