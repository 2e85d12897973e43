//! UNION ALL: merges several inputs of the same column types into one stream.
//!
//! In: batches on any input. Out: the same rows, re-labelled with the union's
//! schema. The output watermark is the minimum of the inputs' (the runtime
//! computes it), so a union never makes an on-time row late.

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};

use crate::error::Result;
use crate::operator::{Collector, Operator, OperatorPlan};

/// Plan of a union.
#[derive(Debug, Clone)]
pub struct UnionPlan {
    schema: SchemaRef,
    inputs: usize,
}

impl UnionPlan {
    /// A union of `inputs` streams producing `schema`.
    pub fn new(schema: SchemaRef, inputs: usize) -> Self {
        Self { schema, inputs }
    }
}

impl OperatorPlan for UnionPlan {
    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        crate::operator::Distribution::Any
    }

    fn kind(&self) -> &'static str {
        "union"
    }
    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        P::new().value("inputs", self.inputs)
    }

    fn describe(&self) -> String {
        format!("{} inputs", self.inputs)
    }
    fn output_schema(&self) -> SchemaRef {
        self.schema.clone()
    }
    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(UnionOperator {
            schema: self.schema.clone(),
        }))
    }
}

struct UnionOperator {
    schema: SchemaRef,
}

impl Operator for UnionOperator {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        let rows = batch.num_rows();
        out.emit(RecordBatch::try_new_with_options(
            self.schema.clone(),
            batch.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?);
        Ok(())
    }

    fn on_late_batch(
        &mut self,
        _input: usize,
        late: crate::message::LateBatch,
        out: &mut Collector,
    ) -> Result<()> {
        let rows = late.num_rows();
        let relabeled = RecordBatch::try_new_with_options(
            self.schema.clone(),
            late.rows().columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?;
        out.emit_late(late.with_rows(relabeled)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::operator::Distribution;
    use crate::operators::testing::{keyed, kv_schema};

    #[test]
    fn rows_of_every_input_come_out_under_the_unions_schema() {
        // The union's own names (inputs may name their columns otherwise).
        let schema = Arc::new(Schema::new(vec![
            Field::new("key", DataType::Utf8, true),
            Field::new("value", DataType::Int64, true),
        ]));
        let plan = UnionPlan::new(schema.clone(), 2);
        assert_eq!(plan.distribution(), Distribution::Any);
        assert_eq!(plan.describe(), "2 inputs");
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, keyed(&["a", "b"], &[1, 2], None), &mut out)
            .unwrap();
        op.on_batch(1, keyed(&["c"], &[3], None), &mut out).unwrap();
        // An empty batch emits nothing.
        op.on_batch(1, RecordBatch::new_empty(kv_schema()), &mut out)
            .unwrap();
        let emitted: Vec<(usize, RecordBatch)> = out.drain().collect();
        assert_eq!(emitted.len(), 2);
        assert!(emitted
            .iter()
            .all(|(port, b)| *port == 0 && b.schema() == schema));
        let rows: usize = emitted.iter().map(|(_, b)| b.num_rows()).sum();
        assert_eq!(rows, 3);
        // Stateless: nothing to checkpoint.
        assert!(op.snapshot().unwrap().is_empty());
    }
}
