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
    fn distribution(&self) -> crate::operator::Distribution {
        crate::operator::Distribution::Any
    }

    fn kind(&self) -> &'static str {
        "union"
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
}
