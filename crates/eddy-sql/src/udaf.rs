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

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Float64Array, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{plan_err, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, TypeSignature, Volatility,
};
use datafusion::physical_expr::expressions::Literal;

/// Running count, mean and sum of squared deviations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Welford {
    /// Values seen.
    pub count: u64,
    /// Their mean.
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
}

impl Welford {
    /// Adds one value.
    pub fn push(&mut self, x: f64) {
        self.count += 1;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Merges another state (Chan et al.'s parallel formula).
    pub fn merge(&mut self, other: Welford) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = other;
            return;
        }
        let count = self.count + other.count;
        let delta = other.mean - self.mean;
        self.mean += delta * other.count as f64 / count as f64;
        self.m2 += other.m2 + delta * delta * self.count as f64 * other.count as f64 / count as f64;
        self.count = count;
    }

    /// Population variance (NULL with no values).
    pub fn var_pop(&self) -> Option<f64> {
        (self.count > 0).then(|| (self.m2 / self.count as f64).max(0.0))
    }
}

/// What a Welford-based function returns.
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
        let settings = if self.output == Output::Threshold {
            let constant = |i: usize, what: &str| -> Result<f64> {
                let value = args
                    .exprs
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
            Some(ThresholdSettings {
                k: constant(1, "k")?,
                floor: constant(2, "floor")?,
                min_samples: constant(3, "min_samples")? as u64,
            })
        } else {
            None
        };
        Ok(Box::new(WelfordAccumulator {
            state: Welford::default(),
            output: self.output,
            settings,
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

#[derive(Debug, Clone, Copy)]
struct ThresholdSettings {
    k: f64,
    floor: f64,
    min_samples: u64,
}

#[derive(Debug)]
struct WelfordAccumulator {
    state: Welford,
    output: Output,
    settings: Option<ThresholdSettings>,
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
        let s = self.state;
        let value = match self.output {
            Output::Mean => (s.count > 0).then_some(s.mean),
            Output::VarPop => s.var_pop(),
            Output::StddevPop => s.var_pop().map(f64::sqrt),
            Output::Threshold => match self.settings {
                Some(t) if s.count >= t.min_samples.max(1) => {
                    s.var_pop().map(|v| s.mean + t.k * v.sqrt())
                }
                Some(t) => Some(t.floor),
                None => None,
            },
        };
        Ok(ScalarValue::Float64(value))
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

/// Registers eddy's functions (windows, aggregates, Flink's functions) with a DataFusion
/// session, e.g. to run eddy's SQL as a batch query.
pub fn register_all(ctx: &datafusion::prelude::SessionContext) {
    for udf in crate::udf::window_functions() {
        ctx.register_udf(udf.as_ref().clone());
    }
    for udaf in aggregate_functions() {
        ctx.register_udaf(udaf);
    }
    crate::dialect::flink_functions::register(ctx);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_pass(values: &[f64]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        (mean, var)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
    }

    #[test]
    fn welford_matches_two_pass_reference() {
        let mut seed = 0x1234_5678_u64;
        for n in [1usize, 2, 5, 100, 10_000] {
            let values: Vec<f64> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    1e6 + (seed % 100_000) as f64 / 7.0
                })
                .collect();
            let mut w = Welford::default();
            values.iter().for_each(|x| w.push(*x));
            let (mean, var) = two_pass(&values);
            assert!(close(w.mean, mean), "mean n={n}");
            assert!(
                close(w.var_pop().unwrap(), var) || var < 1e-12,
                "var n={n}: {} vs {var}",
                w.var_pop().unwrap()
            );
            // Merging halves gives the same state.
            let (a, b) = values.split_at(n / 2);
            let (mut wa, mut wb) = (Welford::default(), Welford::default());
            a.iter().for_each(|x| wa.push(*x));
            b.iter().for_each(|x| wb.push(*x));
            wa.merge(wb);
            assert!(
                close(wa.mean, mean) && (close(wa.var_pop().unwrap(), var) || var < 1e-12),
                "merge n={n}"
            );
        }
    }

    #[test]
    fn threshold_uses_the_floor_until_enough_samples() {
        let mut acc = WelfordAccumulator {
            state: Welford::default(),
            output: Output::Threshold,
            settings: Some(ThresholdSettings {
                k: 3.0,
                floor: 5000.0,
                min_samples: 5,
            }),
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
