//! Processing time as a time attribute: a window over a `PROCTIME()`
//! column (`TUMBLE(TABLE t, DESCRIPTOR(proc), ...)`, Nexmark q12) runs on
//! the wall clock.
//!
//! The same holds for a window table function read row by row (window
//! deduplication and Top-N over `TUMBLE(TABLE t, DESCRIPTOR(proc), ...)`):
//! its `date_bin(width, proc)` bounds make `proc` the time attribute.
//!
//! In: a stream and the processing-time column a window names. Out: the
//! stream behind a `processing_time` node
//! ([`eddy_engine::operators::processing_time`]), which stamps that column
//! as rows pass and makes its watermark follow the wall clock; the column
//! is the stream's time attribute from there on.

use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::Expr;
use eddy_engine::graph::Partitioning;
use eddy_engine::operators::processing_time::ProcessingTimeClockPlan;

use super::stream::{add_operator, Stream, TimeAttr};
use super::Compiler;

/// The column `named` is, if it is a processing-time attribute of `input`.
pub(super) fn proctime_column(input: &Stream, named: &Expr) -> Option<usize> {
    let Expr::Column(column) = named else {
        return None;
    };
    let index = input.schema.index_of_column(column).ok()?;
    crate::dialect::flink_functions::is_proctime(input.schema.field(index)).then_some(index)
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

impl Compiler {
    /// `input` with `column` as its time attribute, on the wall clock.
    pub(super) fn processing_time_clock(&mut self, mut input: Stream, column: usize) -> Stream {
        let schema = input.schema.clone();
        let plan = ProcessingTimeClockPlan {
            schema: Arc::new(schema.as_arrow().clone()),
            column,
        };
        let from = input.materialize(&mut self.graph);
        let node = add_operator(
            &mut self.graph,
            Arc::new(plan),
            vec![(from, Partitioning::Forward)],
        );
        Stream::of_node(
            node,
            &self.graph,
            schema,
            Some(TimeAttr {
                column,
                allowed_lateness_ms: 0,
            }),
        )
    }
}
