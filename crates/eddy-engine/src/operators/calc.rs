//! Stateless row transformation: a fused chain of filters and projections,
//! each a DataFusion `PhysicalExpr` evaluated on whole batches.
//!
//! In: batches in the input schema. Out: for each input batch at most one
//! batch in the output schema, rows in input order. Watermarks pass through
//! unchanged (the runtime forwards them). Late rows go on late, with the
//! marks of the rows the filters keep: a calc never drops a row for
//! lateness.

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::physical_expr::PhysicalExpr;

use crate::error::Result;
use crate::message::LateBatch;
use crate::operator::{Collector, Operator, OperatorPlan};

/// One step of a calc chain.
#[derive(Debug, Clone)]
pub enum CalcStep {
    /// Keep rows where the predicate is true (NULL counts as false).
    Filter(Arc<dyn PhysicalExpr>),
    /// Replace the columns by these expressions, producing `schema`.
    Project {
        /// One expression per output column.
        exprs: Vec<Arc<dyn PhysicalExpr>>,
        /// The schema after this step.
        schema: SchemaRef,
    },
}

/// Plan of a calc operator.
#[derive(Debug, Clone)]
pub struct CalcPlan {
    steps: Vec<CalcStep>,
    input_schema: SchemaRef,
}

impl CalcPlan {
    /// An empty chain over `input_schema`.
    pub fn new(input_schema: SchemaRef) -> Self {
        Self {
            steps: Vec::new(),
            input_schema,
        }
    }

    /// Appends a step.
    pub fn push(&mut self, step: CalcStep) {
        self.steps.push(step);
    }

    /// The schema of the rows entering the chain.
    pub fn input_schema(&self) -> SchemaRef {
        self.input_schema.clone()
    }
}

impl OperatorPlan for CalcPlan {
    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        crate::operator::Distribution::Any
    }

    fn kind(&self) -> &'static str {
        "calc"
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        let steps: Vec<String> = self
            .steps
            .iter()
            .map(|s| match s {
                CalcStep::Filter(e) => format!("filter({e})"),
                CalcStep::Project { exprs, schema } => {
                    let columns: Vec<String> = exprs
                        .iter()
                        .zip(schema.fields())
                        .map(|(e, f)| format!("{e} AS {}", f.name()))
                        .collect();
                    format!("project({})", columns.join(", "))
                }
            })
            .collect();
        P::new().list("steps", steps)
    }

    fn describe(&self) -> String {
        let steps: Vec<String> = self
            .steps
            .iter()
            .map(|s| match s {
                CalcStep::Filter(e) => format!("filter({e})"),
                CalcStep::Project { exprs, schema } => {
                    let cols: Vec<String> = exprs
                        .iter()
                        .zip(schema.fields())
                        .map(|(e, f)| {
                            let text = e.to_string();
                            if text.starts_with(&format!("{}@", f.name())) {
                                f.name().to_string()
                            } else {
                                format!("{text} AS {}", f.name())
                            }
                        })
                        .collect();
                    format!("project({})", cols.join(", "))
                }
            })
            .collect();
        steps.join(" -> ")
    }

    fn output_schema(&self) -> SchemaRef {
        self.steps
            .iter()
            .rev()
            .find_map(|s| match s {
                CalcStep::Project { schema, .. } => Some(schema.clone()),
                CalcStep::Filter(_) => None,
            })
            .unwrap_or_else(|| self.input_schema.clone())
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(CalcOperator { plan: self.clone() }))
    }
}

struct CalcOperator {
    plan: CalcPlan,
}

/// Applies the chain to one batch.
pub fn apply_steps(steps: &[CalcStep], mut batch: RecordBatch) -> Result<RecordBatch> {
    for step in steps {
        if batch.num_rows() == 0 {
            break;
        }
        batch = match step {
            CalcStep::Filter(predicate) => {
                let mask = super::predicate_mask(predicate, &batch, "filter")?;
                if mask.true_count() == mask.len() {
                    batch
                } else {
                    filter_record_batch(&batch, &mask)?
                }
            }
            CalcStep::Project { exprs, schema } => project(exprs, schema, &batch)?,
        };
    }
    Ok(batch)
}

/// Applies the chain to late rows: a filter keeps the marks of the rows it
/// keeps, a projection keeps them all (it never drops a row for lateness).
pub fn apply_steps_late(steps: &[CalcStep], mut late: LateBatch) -> Result<LateBatch> {
    for step in steps {
        if late.num_rows() == 0 {
            break;
        }
        late = match step {
            CalcStep::Filter(predicate) => {
                let mask = super::predicate_mask(predicate, late.rows(), "filter")?;
                if mask.true_count() == mask.len() {
                    late
                } else {
                    late.filter(&mask)?
                }
            }
            CalcStep::Project { exprs, schema } => {
                let projected = project(exprs, schema, late.rows())?;
                late.with_rows(projected)?
            }
        };
    }
    Ok(late)
}

/// One projection step over `batch`.
fn project(
    exprs: &[Arc<dyn PhysicalExpr>],
    schema: &SchemaRef,
    batch: &RecordBatch,
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let columns = exprs
        .iter()
        .map(|e| e.evaluate(batch).and_then(|v| v.into_array(rows)))
        .collect::<datafusion::error::Result<Vec<ArrayRef>>>()?;
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

impl Operator for CalcOperator {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        out.emit(apply_steps(&self.plan.steps, batch)?);
        Ok(())
    }

    fn on_late_batch(&mut self, _input: usize, late: LateBatch, out: &mut Collector) -> Result<()> {
        out.emit_late(apply_steps_late(&self.plan.steps, late)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Array, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::logical_expr::Operator as BinaryOp;
    use datafusion::physical_expr::expressions::{binary, col, lit};

    use super::*;
    use crate::operator::Distribution;
    use crate::operators::testing::{kv_rows, kv_schema};

    #[test]
    fn late_rows_keep_their_marks_through_filters_and_projections() {
        let input = kv_schema();
        let mut plan = CalcPlan::new(input.clone());
        let v = col("v", &input).unwrap();
        plan.push(CalcStep::Filter(
            binary(v.clone(), BinaryOp::Gt, lit(1i64), &input).unwrap(),
        ));
        let output = Arc::new(Schema::new(vec![Field::new("w", DataType::Int64, true)]));
        plan.push(CalcStep::Project {
            exprs: vec![binary(v, BinaryOp::Multiply, lit(10i64), &input).unwrap()],
            schema: output,
        });
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        let rows = kv_rows(&[Some("a"), Some("b"), Some("c")], &[1, 2, 3], None);
        op.on_late_batch(
            0,
            LateBatch::new(rows, Int64Array::from(vec![100, 200, 300])).unwrap(),
            &mut out,
        )
        .unwrap();
        let emitted: Vec<_> = out.drain_emitted().collect();
        assert_eq!(emitted.len(), 1);
        let crate::operator::Emitted::Late(late) = &emitted[0].1 else {
            panic!("the rows went on without their marks");
        };
        assert_eq!(late.watermarks().values().to_vec(), vec![200, 300]);
        let w = late
            .rows()
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(w.values().to_vec(), vec![20, 30]);
    }

    #[test]
    fn a_filter_then_a_projection_run_fused_in_row_order() {
        let input = kv_schema();
        let mut plan = CalcPlan::new(input.clone());
        // WHERE v > 1, then SELECT v * 10 AS w.
        let v = col("v", &input).unwrap();
        plan.push(CalcStep::Filter(
            binary(v.clone(), BinaryOp::Gt, lit(1i64), &input).unwrap(),
        ));
        let output = Arc::new(Schema::new(vec![Field::new("w", DataType::Int64, true)]));
        plan.push(CalcStep::Project {
            exprs: vec![binary(v, BinaryOp::Multiply, lit(10i64), &input).unwrap()],
            schema: output.clone(),
        });
        assert_eq!(plan.distribution(), Distribution::Any);
        assert_eq!(plan.output_schema(), output);
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        // NULL > 1 is NULL: the row is dropped like a false one.
        op.on_batch(
            0,
            kv_rows(
                &[Some("a"), None, Some("c"), Some("d")],
                &[3, 1, 2, 0],
                None,
            ),
            &mut out,
        )
        .unwrap();
        let emitted: Vec<(usize, RecordBatch)> = out.drain().collect();
        assert_eq!(emitted.len(), 1);
        let w = emitted[0]
            .1
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .clone();
        assert_eq!(w.values().to_vec(), vec![30, 20]);
        // A batch the filter empties emits nothing.
        op.on_batch(0, kv_rows(&[Some("x")], &[0], None), &mut out)
            .unwrap();
        assert_eq!(out.drain().count(), 0);
    }
}
