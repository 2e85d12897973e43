//! Plans a logical `Aggregate` into a window aggregation.
//!
//! A streaming GROUP BY must contain exactly one `tumble(...)`, `hop(...)`,
//! `cumulate(...)` (a `window_aggregate`) or `session(...)` (a
//! `session_aggregate`); the other group expressions become keys, every
//! aggregate expression becomes a DataFusion `AggregateFunctionExpr` folded
//! incrementally per window and key. The result's event time is its window
//! (see `stream::projected_time`).

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::Aggregate;
use datafusion::physical_expr::aggregate::LoweredAggregateBuilder;
use eddy_engine::operator::OperatorPlan;
use eddy_engine::operators::session_aggregate::SessionAggregatePlan;
use eddy_engine::operators::window_aggregate::WindowAggregatePlan;
use eddy_engine::operators::windowed_group_by::{GroupColumn, WindowedGroupBy};
use eddy_engine::operators::AggregateCall;
use eddy_engine::window::window_struct_type;
use eddy_engine::window::WindowSpec;

use super::stream::{add_operator, Stream, TimeAttr};
use super::Compiler;
use crate::error::{Result, SqlError};
use crate::functions::windows::{session_gap, window_spec, window_time_argument};
use crate::planner::statement_text::StatementText;

/// The window of a GROUP BY.
enum Window {
    /// Tumble, hop or cumulate: windows fixed by time alone.
    Fixed(WindowSpec),
    /// Per key, closing after a gap.
    Session { gap_ms: i64 },
}

impl Compiler {
    pub(super) fn plan_aggregate(
        &mut self,
        aggregate: &Aggregate,
        cx: &StatementText,
    ) -> Result<Stream> {
        if let [datafusion::logical_expr::Expr::GroupingSet(set)] = aggregate.group_expr.as_slice()
        {
            return self.plan_grouping_sets(aggregate, set, cx);
        }
        let mut input = self.plan_stream(&aggregate.input, cx)?;
        // A window over rows whose event time a projection left out: the
        // time is carried through to it, as Arroyo carries its own.
        let windowed = aggregate
            .group_expr
            .iter()
            .any(|e| window_spec(e).is_some() || session_gap(e).is_some());
        if windowed && input.time.is_none() && input.time_lost.is_some() {
            if let Some((carried, _)) = self.carry_event_time(&aggregate.input) {
                input = self.plan_stream(&carried, cx)?;
            }
        }
        let state = self.ctx.state();
        let input_arrow = Arc::new(input.schema.as_arrow().clone());

        let mut window = None;
        let mut window_time = None;
        let mut group_columns = Vec::new();
        let mut keys = Vec::new();
        // Without a window function, grouping by the event-time column
        // itself (a window's start/end/time after a window aggregate, as in
        // Nexmark q5's `GROUP BY starttime, endtime`) groups rows of equal
        // event time: a 1 ms tumbling window that yields the time.
        let has_window = aggregate
            .group_expr
            .iter()
            .any(|e| window_spec(e).is_some() || session_gap(e).is_some());
        let time_group = (!has_window)
            .then(|| {
                let time = input.time?.column;
                aggregate.group_expr.iter().position(|e| match e {
                    datafusion::logical_expr::Expr::Column(c) => {
                        input.schema.index_of_column(c).ok() == Some(time)
                    }
                    _ => false,
                })
            })
            .flatten();
        for (i, expr) in aggregate.group_expr.iter().enumerate() {
            if time_group == Some(i) {
                window = Some(Window::Fixed(WindowSpec::tumble(1)));
                group_columns.push(GroupColumn::WindowStart);
                continue;
            }
            let spec = match (window_spec(expr), session_gap(expr)) {
                (Some(spec), _) => Some(spec.map(Window::Fixed)),
                (None, Some(gap)) => Some(gap.map(|gap_ms| Window::Session { gap_ms })),
                (None, None) => None,
            };
            match spec {
                Some(spec) => {
                    let spec = spec.map_err(|m| {
                        SqlError::at(
                            &cx.anchor(&["TUMBLE", "HOP", "CUMULATE", "SESSION", "GROUP"]),
                            m.to_string(),
                        )
                    })?;
                    window_time = window_time_argument(expr).cloned();
                    if window.replace(spec).is_some() {
                        return Err(SqlError::at(
                            &cx.anchor(&["TUMBLE", "HOP", "CUMULATE", "SESSION", "GROUP"]),
                            "GROUP BY may contain only one window (tumble, hop, cumulate or session)",
                        ));
                    }
                    group_columns.push(GroupColumn::Window);
                }
                None => {
                    let physical =
                        crate::context::physical_expr(&state, expr.clone(), &input.schema)
                            .map_err(|e| self.df_error(cx, e))?;
                    let name = aggregate.schema.field(i).name().clone();
                    group_columns.push(GroupColumn::Key(keys.len()));
                    keys.push((physical, name));
                }
            }
        }
        let Some(window) = window else {
            return self.plan_updating_aggregate(aggregate, input, keys, cx);
        };
        input.append_only("a window aggregate").map_err(|m| {
            SqlError::at(
                &cx.anchor(&["TUMBLE", "HOP", "CUMULATE", "SESSION", "GROUP"]),
                m.to_string(),
            )
        })?;
        // A window over a table that declares no event time (no WATERMARK
        // anywhere upstream, nothing dropped by a projection) groups rows by
        // arrival, as Arroyo does.
        if input.time.is_none() && input.time_lost.is_none() && window_time.is_none() {
            input = self.arrival_time(input).map_err(|e| self.df_error(cx, e))?;
        }
        // A window over a processing-time column runs on the wall clock.
        if let Some(column) = window_time
            .as_ref()
            .and_then(|named| super::processing_time::proctime_column(&input, named))
        {
            if input.time.map(|t| t.column) != Some(column) {
                input = self.processing_time_clock(input, column);
            }
        }
        let Some(time) = input.time else {
            return Err(SqlError::at(
                &cx.anchor(&["TUMBLE", "HOP", "CUMULATE", "SESSION", "GROUP"]),
                format!(
                    "a window needs event time, but its input has none: {}",
                    input.why_no_time()
                ),
            ));
        };
        if let Some(named) = window_time {
            let event_time = input.schema.field(time.column).name();
            let same = matches!(&named, datafusion::logical_expr::Expr::Column(c) if c.name.eq_ignore_ascii_case(event_time));
            if !same {
                return Err(SqlError::at(
                    &cx.anchor(&["DESCRIPTOR", "TUMBLE", "HOP", "CUMULATE", "SESSION"]),
                    format!("the window is over {named}, but eddy windows by the input's event time, '{event_time}': name that column"),
                ));
            }
        }

        let aggregates = self.lower_aggregates(aggregate, &input, cx)?;

        // Output schema as DataFusion's Aggregate lays it out; the window column
        // carries eddy's window struct type.
        let fields: Vec<Field> = aggregate
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let f = f.as_ref().clone().with_nullable(true);
                match group_columns.get(i) {
                    Some(GroupColumn::Window) => f.with_data_type(window_struct_type()),
                    _ => f,
                }
            })
            .collect();
        let output_schema = Arc::new(Schema::new(fields));
        // A window struct of fixed-width windows: a join can read its start.
        let window_ms = match &window {
            Window::Fixed(spec) => spec.width_ms(),
            _ => None,
        };
        let group_by = WindowedGroupBy {
            input_schema: input_arrow,
            output_schema: output_schema.clone(),
            time_column: time.column,
            allowed_lateness_ms: time.allowed_lateness_ms,
            group_columns: group_columns.clone(),
            keys,
            aggregates,
        };
        let plan: Arc<dyn OperatorPlan> = match window {
            Window::Fixed(window) => Arc::new(WindowAggregatePlan { window, group_by }),
            Window::Session { gap_ms } => Arc::new(SessionAggregatePlan { gap_ms, group_by }),
        };
        // A result's event time is its window's time (end - 1 ms, see
        // `eddy_engine::time::to_epoch_millis`): results fire at watermark >=
        // end + lateness, before that watermark goes on, so none is late
        // downstream when the lateness travels with the time attribute.
        let window_column = group_columns
            .iter()
            .position(|c| matches!(c, GroupColumn::Window | GroupColumn::WindowStart));
        let from = input.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, plan, vec![from]);
        let time = window_column.map(|column| TimeAttr {
            column,
            allowed_lateness_ms: time.allowed_lateness_ms,
            window_ms: window_ms
                .filter(|_| matches!(group_columns.get(column), Some(GroupColumn::Window))),
        });
        Ok(Stream::of_node(
            node,
            &self.graph,
            aggregate.schema.clone(),
            time,
        ))
    }

    /// Every aggregate call of `aggregate` as DataFusion's physical
    /// aggregate over `input`'s rows.
    pub(super) fn lower_aggregates(
        &self,
        aggregate: &Aggregate,
        input: &Stream,
        cx: &StatementText,
    ) -> Result<Vec<AggregateCall>> {
        let state = self.ctx.state();
        let input_arrow = Arc::new(input.schema.as_arrow().clone());
        let mut aggregates = Vec::with_capacity(aggregate.aggr_expr.len());
        for expr in &aggregate.aggr_expr {
            let planning = PhysicalPlanningContext::default();
            let expr = crate::context::simplify(&state, expr.clone(), &input.schema)
                .map_err(|e| self.df_error(cx, e))?;
            let lowered = LoweredAggregateBuilder::new(
                &expr,
                &input.schema,
                &input_arrow,
                state.execution_props(),
                &planning,
            )
            .build()
            .map_err(|e| self.df_error(cx, e))?;
            let (function, filter) = (lowered.aggregate, lowered.filter);
            // An ordered-set aggregate (`percentile_cont(0.5) WITHIN GROUP
            // (ORDER BY x)`) takes the ordering as its argument and orders
            // what it holds itself: nothing to sort upstream.
            if !lowered.order_bys.is_empty() && !function.fun().supports_within_group_clause() {
                return Err(SqlError::at(&cx.at,
                    format!("aggregate {} orders its input (ORDER BY inside the call); eddy folds rows as they arrive, in no order: write it without ORDER BY", function.name()),
                ));
            }
            aggregates.push(AggregateCall {
                expr: function,
                filter,
            });
        }

        Ok(aggregates)
    }
}
