//! Plans `ORDER BY` on a stream into an `event_time_sort` node.
//!
//! Accepted, as Flink accepts it: the input's event time first, ascending,
//! then any keys, or a `PROCTIME()` column alone (arrival order: the rows
//! pass as they come); no LIMIT (a stream's first N rows would be all it ever
//! emits, and its last N never settle). Anything else never finishes on an
//! unbounded stream and is refused with the reason.

use std::sync::Arc;

use datafusion::logical_expr::{Expr, Sort};
use eddy_engine::operators::event_time_sort::EventTimeSortPlan;

use super::stream::{add_operator, Stream};
use super::Compiler;
use crate::error::{Result, SqlError};
use crate::planner::statement_text::StatementText;

impl Compiler {
    pub(super) fn plan_sort(&mut self, sort: &Sort, cx: &StatementText) -> Result<Stream> {
        let at = cx.anchor(&["ORDER"]);
        if sort.fetch.is_some() {
            return Err(SqlError::at(
                &cx.anchor(&["LIMIT", "FETCH"]),
                "LIMIT is not supported on streams: for the top N rows per key or window, use ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) with WHERE rn <= N",
            ));
        }
        let mut input = self.plan_stream(&sort.input, cx)?;
        let refuse = |why: String| {
            SqlError::at(
                &at,
                format!("ORDER BY on a stream must start with its event time, ascending (rows are released in that order as the watermark passes them); {why}"),
            )
        };
        input
            .append_only("ORDER BY")
            .map_err(|m| SqlError::at(&at, m.to_string()))?;
        // ORDER BY a PROCTIME() column alone: rows in the order they
        // arrive, which is the order they pass on in (Flink's processing-time
        // sort emits them so).
        if let [only] = sort.expr.as_slice() {
            let by_arrival = only.asc
                && matches!(&only.expr, Expr::Column(c) if input.schema.index_of_column(c).is_ok_and(|i| crate::functions::flink::is_proctime(input.schema.field(i))));
            if by_arrival {
                return Ok(input);
            }
        }
        let Some(time) = input.time else {
            return Err(refuse(format!(
                "{} is not an event time: this stream has none ({})",
                sort.expr[0].expr,
                input.why_no_time()
            )));
        };
        let time_name = input.schema.field(time.column).name().clone();
        let first = &sort.expr[0];
        let on_time = first.asc
            && matches!(&first.expr, Expr::Column(c) if input.schema.index_of_column(c).ok() == Some(time.column));
        if !on_time {
            return Err(refuse(format!(
                "here that is '{time_name}', not {}",
                first.expr
            )));
        }
        let state = self.ctx.state();
        let order_by = sort.expr[1..]
            .iter()
            .map(|key| {
                crate::context::physical_expr(&state, key.expr.clone(), &input.schema)
                    .map(|e| (e, !key.asc))
            })
            .collect::<datafusion::error::Result<Vec<_>>>()
            .map_err(|e| self.df_error(cx, e))?;
        let plan = EventTimeSortPlan {
            schema: Arc::new(input.schema.as_arrow().clone()),
            time_column: time.column,
            order_by,
            allowed_lateness_ms: time.allowed_lateness_ms,
        };
        let windows = input.windows.clone();
        let from = input.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from]);
        let mut stream =
            Stream::of_node(node, &self.graph, sort.input.schema().clone(), Some(time));
        stream.windows = windows;
        Ok(stream)
    }
}
