//! Streaming aggregate functions for running statistics.
//!
//! - `welford_mean(x)`, `welford_var_pop(x)`, `welford_stddev_pop(x)`: the
//!   running mean, population variance and population standard deviation of
//!   `x`, by Welford's online algorithm (numerically stable, O(1) state).
//! - `dynamic_threshold(x, k, floor, min_samples)`: `floor` while fewer than
//!   `min_samples` values were seen, then `mean + k * stddev_pop`. Used over
//!   earlier rows (`ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING`) it is
//!   the cold-start-guarded anomaly threshold of the reference pipeline.
//!
//! All are ordinary DataFusion aggregate UDFs: in windows, OVER clauses and
//! batch SQL alike. Their state (count, mean, M2) merges exactly (Chan et
//! al.), so partial and final aggregation agree. NULL inputs are ignored.
//! The math is `eddy_engine::running_stats`; [`running_form`] hands the OVER
//! operator the same functions to run natively.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Float64Array, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{plan_err, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, TypeSignature, Volatility,
};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::expressions::Literal;
use datafusion::physical_expr::PhysicalExpr;
use eddy_engine::operators::over::RunningAggregate;
use eddy_engine::running_stats::{Welford, WelfordOutput};

/// Which Welford-based function a UDAF is (its settings come from the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Output {
    Mean,
    VarPop,
    StddevPop,
    Threshold,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct WelfordUdaf {
    name: &'static str,
    output: Output,
    signature: Signature,
}

impl WelfordUdaf {
    /// The function's output for a call with arguments `exprs`
    /// (`dynamic_threshold` reads its constant settings from them).
    fn output_for(&self, exprs: &[Arc<dyn PhysicalExpr>]) -> Result<WelfordOutput> {
        Ok(match self.output {
            Output::Mean => WelfordOutput::Mean,
            Output::VarPop => WelfordOutput::VarPop,
            Output::StddevPop => WelfordOutput::StddevPop,
            Output::Threshold => {
                let constant = |i: usize, what: &str| -> Result<f64> {
                    let value = exprs
                        .get(i)
                        .and_then(|e| e.downcast_ref::<Literal>())
                        .map(|l| l.value().clone());
                    match value.map(|v| v.cast_to(&DataType::Float64)) {
                        Some(Ok(ScalarValue::Float64(Some(v)))) => Ok(v),
                        _ => plan_err!(
                            "dynamic_threshold: {what} (argument {}) must be a constant number",
                            i + 1
                        ),
                    }
                };
                WelfordOutput::Threshold {
                    k: constant(1, "k")?,
                    floor: constant(2, "floor")?,
                    min_samples: constant(3, "min_samples")? as u64,
                }
            }
        })
    }
}

impl AggregateUDFImpl for WelfordUdaf {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(WelfordAccumulator {
            state: Welford::default(),
            output: self.output_for(args.exprs)?,
        }))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![
            Arc::new(Field::new(
                format!("{}[count]", args.name),
                DataType::UInt64,
                true,
            )),
            Arc::new(Field::new(
                format!("{}[mean]", args.name),
                DataType::Float64,
                true,
            )),
            Arc::new(Field::new(
                format!("{}[m2]", args.name),
                DataType::Float64,
                true,
            )),
        ])
    }
}

#[derive(Debug)]
struct WelfordAccumulator {
    state: Welford,
    output: WelfordOutput,
}

impl Accumulator for WelfordAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let Some(values) = values.first() else {
            return Ok(());
        };
        let values = cast(values, &DataType::Float64)?;
        let Some(values) = values.as_any().downcast_ref::<Float64Array>() else {
            return plan_err!("welford: expected numbers");
        };
        for x in values.iter().flatten() {
            self.state.push(x);
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(self.output.value(&self.state)))
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![
            ScalarValue::UInt64(Some(self.state.count)),
            ScalarValue::Float64(Some(self.state.mean)),
            ScalarValue::Float64(Some(self.state.m2)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (Some(count), Some(mean), Some(m2)) = (
            states
                .first()
                .and_then(|a| a.as_any().downcast_ref::<UInt64Array>()),
            states
                .get(1)
                .and_then(|a| a.as_any().downcast_ref::<Float64Array>()),
            states
                .get(2)
                .and_then(|a| a.as_any().downcast_ref::<Float64Array>()),
        ) else {
            return plan_err!("welford: bad intermediate state");
        };
        for i in 0..count.len() {
            if count.is_valid(i) {
                self.state.merge(Welford {
                    count: count.value(i),
                    mean: mean.value(i),
                    m2: m2.value(i),
                });
            }
        }
        Ok(())
    }
}

fn numeric(arity: usize) -> Signature {
    let numeric_types = [
        DataType::Float64,
        DataType::Float32,
        DataType::Int64,
        DataType::Int32,
        DataType::UInt64,
        DataType::UInt32,
    ];
    let mut variants = Vec::new();
    for t in numeric_types {
        let mut args = vec![t.clone()];
        args.extend(std::iter::repeat_n(DataType::Float64, arity - 1));
        variants.push(TypeSignature::Exact(args));
    }
    variants.push(TypeSignature::Coercible(
        std::iter::repeat_n(
            datafusion::logical_expr::Coercion::new_exact(
                datafusion::logical_expr::TypeSignatureClass::Native(
                    datafusion::common::types::logical_float64(),
                ),
            ),
            arity,
        )
        .collect(),
    ));
    Signature::one_of(variants, Volatility::Immutable)
}

/// eddy's aggregate functions, ready to register.
pub fn aggregate_functions() -> Vec<AggregateUDF> {
    let make = |name, output, arity| {
        AggregateUDF::from(WelfordUdaf {
            name,
            output,
            signature: numeric(arity),
        })
    };
    vec![
        make("welford_mean", Output::Mean, 1),
        make("welford_var_pop", Output::VarPop, 1),
        make("welford_stddev_pop", Output::StddevPop, 1),
        make("dynamic_threshold", Output::Threshold, 4),
    ]
}

/// Registers the running statistics with a session.
pub fn register(ctx: &datafusion::prelude::SessionContext) {
    for udaf in aggregate_functions() {
        ctx.register_udaf(udaf);
    }
}

/// The OVER operator's native form of one of eddy's Welford aggregates
/// (`None` for any other aggregate): the same values and checkpoint state as
/// its accumulator, computed without a call per row.
pub fn running_form(expr: &AggregateFunctionExpr) -> Option<RunningAggregate> {
    let udaf: &dyn std::any::Any = expr.fun().inner().as_ref();
    let udaf = udaf.downcast_ref::<WelfordUdaf>()?;
    if expr.is_distinct() || expr.expressions().is_empty() {
        return None;
    }
    udaf.output_for(&expr.expressions())
        .ok()
        .map(RunningAggregate::Welford)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_uses_the_floor_until_enough_samples() {
        let mut acc = WelfordAccumulator {
            state: Welford::default(),
            output: WelfordOutput::Threshold {
                k: 3.0,
                floor: 5000.0,
                min_samples: 5,
            },
        };
        assert_eq!(acc.evaluate().unwrap(), ScalarValue::Float64(Some(5000.0)));
        let values: ArrayRef = Arc::new(Float64Array::from(vec![99.66, 119.66, 104.66, 114.66]));
        acc.update_batch(&[values]).unwrap();
        assert_eq!(acc.evaluate().unwrap(), ScalarValue::Float64(Some(5000.0)));
        acc.update_batch(&[Arc::new(Float64Array::from(vec![109.66])) as ArrayRef])
            .unwrap();
        let ScalarValue::Float64(Some(t)) = acc.evaluate().unwrap() else {
            panic!()
        };
        assert!((t - (109.66 + 3.0 * 50f64.sqrt())).abs() < 1e-9, "{t}");
        assert_eq!(format!("{:.2}", t), "130.87");
    }
}
