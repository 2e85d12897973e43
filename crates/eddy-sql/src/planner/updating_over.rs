//! Plans an OVER whose results change into an `updating_over` operator: an
//! ORDER BY that is not the input's event time, an input without event
//! time, or an updating input (Flink's OVER ordered by a value, RisingWave's
//! OVER over a table).
//!
//! In: a logical `Window` and its planned input. Out: an updating stream of
//! the input's columns and one column per window function. The functions
//! are DataFusion's physical window expressions, any frame; all of one
//! SELECT's share one PARTITION BY and ORDER BY. Rankings (`ROW_NUMBER`,
//! `RANK`, `DENSE_RANK`) are not planned here: unbounded they would re-rank
//! a whole partition on every row; bounded (`WHERE rn <= N`) they are a
//! Top-N (`rank`).

use std::sync::Arc;

use datafusion::logical_expr::expr::WindowFunction;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{Expr, Window};
use eddy_engine::operators::updating_over::UpdatingOverPlan;

use super::stream::{add_operator, updating_output, Changelog, Stream};
use super::Compiler;
use crate::error::{Result, SqlError};
use crate::planner::statement_text::StatementText;

fn function(expr: &Expr) -> Option<&WindowFunction> {
    match expr {
        Expr::Alias(a) => function(&a.expr),
        Expr::WindowFunction(f) => Some(f.as_ref()),
        _ => None,
    }
}

impl Compiler {
    pub(super) fn plan_updating_over(
        &mut self,
        window: &Window,
        mut input: Stream,
        cx: &StatementText,
    ) -> Result<Stream> {
        let at = cx.anchor(&["OVER"]);
        let mut shared = None;
        for expr in &window.window_expr {
            let params = &function(expr)
                .ok_or_else(|| SqlError::Internal(format!("unexpected window expression {expr}")))?
                .params;
            let window_keys = (&params.partition_by, &params.order_by);
            match shared {
                Some(keys) if keys != window_keys => return Err(SqlError::at(
                    &at,
                    "all OVER clauses of one SELECT must use the same PARTITION BY and ORDER BY",
                )),
                _ => shared = Some(window_keys),
            }
        }
        let input_schema = input.schema.clone();
        input
            .no_change_metadata("OVER", 0..input_schema.fields().len())
            .map_err(|m| SqlError::at(&at, m.to_string()))?;
        let state = self.ctx.state();
        let planning = PhysicalPlanningContext::default();
        let functions = window
            .window_expr
            .iter()
            .map(|e| {
                datafusion::physical_planner::create_window_expr(
                    e,
                    &input_schema,
                    state.execution_props(),
                    &planning,
                )
            })
            .collect::<datafusion::error::Result<Vec<_>>>()
            .map_err(|e| self.df_error(cx, e))?;
        let Some(first) = functions.first() else {
            return Err(SqlError::Internal("an OVER without functions".into()));
        };
        let partition_by = first.partition_by().to_vec();
        let order_by = first.order_by().to_vec();
        let origin = format!("the OVER at {at} (its rows change as later rows arrive)");
        // Each input row comes out once: an updating input's key stays one.
        let upsert_key = input.changelog.as_ref().and_then(|c| c.upsert_key.clone());
        let key_names: Vec<String> = upsert_key
            .iter()
            .flatten()
            .map(|&i| window.schema.field(i).name().clone())
            .collect();
        let plan = UpdatingOverPlan {
            input_schema: Arc::new(input_schema.as_arrow().clone()),
            output_schema: updating_output(&window.schema, &key_names, &origin),
            partition_by: partition_by.clone(),
            order_by,
            functions,
            input_updating: input.changelog.is_some(),
            state_ttl_ms: self.state_ttl_ms,
        };
        let from = input.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from]);
        let mut stream = Stream::of_node(node, &self.graph, window.schema.clone(), None);
        stream.time_lost = Some(format!(
            "{origin} revises its rows, which have no event time"
        ));
        stream.changelog = Some(Changelog { origin, upsert_key });
        Ok(stream)
    }
}
