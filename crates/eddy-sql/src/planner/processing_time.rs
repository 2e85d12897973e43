//! Processing time as a time attribute: a window over a `PROCTIME()`
//! column (`TUMBLE(TABLE t, DESCRIPTOR(proc), ...)`, Nexmark q12) runs on
//! the wall clock.
//!
//! The same holds for a window table function read row by row (window
//! deduplication and Top-N over `TUMBLE(TABLE t, DESCRIPTOR(proc), ...)`):
//! its `date_bin(width, proc)` bounds make `proc` the time attribute.
//!
//! A window over a table that declares no event time at all (Arroyo's
//! tables without a watermark) windows by arrival: the stream gains a
//! hidden arrival-time column ([`ARRIVAL_TIME`]), stamped the same way.
//!
//! In: a stream and the processing-time column a window names. Out: the
//! stream behind a `processing_time` node
//! ([`eddy_engine::operators::processing_time`]), which stamps that column
//! as rows pass and makes its watermark follow the wall clock; the column
//! is the stream's time attribute from there on.

use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::Expr;
use eddy_engine::operators::processing_time::ProcessingTimeClockPlan;

use super::stream::{add_operator, Stream, TimeAttr};
use super::Compiler;

/// The column `named` is, if it is a processing-time attribute of `input`.
pub(super) fn proctime_column(input: &Stream, named: &Expr) -> Option<usize> {
    let Expr::Column(column) = named else {
        return None;
    };
    let index = input.schema.index_of_column(column).ok()?;
    crate::functions::flink::is_proctime(input.schema.field(index)).then_some(index)
}

/// The processing-time column a projection bins into windows
/// (`date_bin(width, proc)`, what a window table function read row by row
/// becomes), when it is not yet `input`'s time attribute.
pub(super) fn windowed_proctime(exprs: &[Expr], input: &Stream) -> Option<usize> {
    let mut found = None;
    for expr in exprs {
        let _ = expr.apply(|e| {
            if let Expr::ScalarFunction(call) = e {
                if call.func.name() == "date_bin" {
                    if let Some(column) = call.args.get(1).and_then(|a| proctime_column(input, a)) {
                        found = Some(column);
                        return Ok(TreeNodeRecursion::Stop);
                    }
                }
            }
            Ok(TreeNodeRecursion::Continue)
        });
    }
    found.filter(|&column| input.time.map(|t| t.column) != Some(column))
}

/// The column a stream without event time gains when a window groups its
/// rows by arrival.
pub(super) const ARRIVAL_TIME: &str = "__eddy_arrival_time";

impl Compiler {
    /// `input`, which has no event time, with a column of each row's
    /// arrival time appended as its time attribute (on the wall clock).
    pub(super) fn arrival_time(&mut self, mut input: Stream) -> datafusion::error::Result<Stream> {
        use datafusion::arrow::datatypes::{DataType, Field, TimeUnit};
        use datafusion::common::{DFSchema, ScalarValue};
        use datafusion::physical_expr::expressions::{Column, Literal};
        use eddy_engine::operators::calc::CalcStep;
        input.materialize(&mut self.graph);
        let field = crate::functions::flink::mark_proctime(Field::new(
            ARRIVAL_TIME,
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        ));
        let mut fields: Vec<_> = input
            .schema
            .iter()
            .map(|(qualifier, field)| (qualifier.cloned(), Arc::clone(field)))
            .collect();
        let mut exprs: Vec<Arc<dyn datafusion::physical_expr::PhysicalExpr>> = fields
            .iter()
            .enumerate()
            .map(|(i, (_, f))| Arc::new(Column::new(f.name(), i)) as _)
            .collect();
        exprs.push(Arc::new(Literal::new(ScalarValue::TimestampMillisecond(
            None, None,
        ))));
        fields.push((None, Arc::new(field)));
        let schema = Arc::new(DFSchema::new_with_metadata(
            fields,
            input.schema.metadata().clone(),
        )?);
        let column = schema.fields().len() - 1;
        input.steps.push(CalcStep::Project {
            exprs,
            schema: Arc::new(schema.as_arrow().clone()),
        });
        input.schema = schema;
        Ok(self.processing_time_clock(input, column))
    }

    /// `input` with `column` as its time attribute, on the wall clock.
    pub(super) fn processing_time_clock(&mut self, mut input: Stream, column: usize) -> Stream {
        let schema = input.schema.clone();
        let plan = ProcessingTimeClockPlan {
            schema: Arc::new(schema.as_arrow().clone()),
            column,
        };
        let from = input.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from]);
        Stream::of_node(
            node,
            &self.graph,
            schema,
            Some(TimeAttr {
                column,
                allowed_lateness_ms: 0,
                window_ms: None,
            }),
        )
    }
}
