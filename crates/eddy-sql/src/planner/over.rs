//! Plans a logical `Window` (OVER clauses) into an `over` operator, or, when
//! its rows would change (another order, no event time, an updating
//! input), into an `updating_over` one (`updating_over`).
//!
//! For `over`: `ORDER BY <the input's event time>` ascending, any PARTITION BY,
//! and either a running aggregate with frame `ROWS BETWEEN UNBOUNDED
//! PRECEDING AND CURRENT ROW | 1 PRECEDING` or `RANGE BETWEEN UNBOUNDED
//! PRECEDING AND CURRENT ROW` (the default), or `row_number()`, or
//! `lag(x [, n [, default]])`, or `lead(x [, n [, default]])` (rows wait
//! for their `n` successors). Everything else needs the history of a key
//! and is rejected with the reason.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::{AggregateFunction, WindowFunction};
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{
    Expr, ExprSchemable, Window, WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition,
};
use datafusion::physical_expr::aggregate::LoweredAggregateBuilder;
use eddy_engine::operators::over::{Frame, OverFunction, OverPlan, RunningAggregate};

use super::rank::RankLimit;
use super::stream::{add_operator, Stream};
use super::Compiler;
use crate::error::{Result, SqlError};
use crate::planner::statement_text::StatementText;

fn constant(expr: &Expr) -> Option<&ScalarValue> {
    match expr {
        Expr::Literal(v, _) => Some(v),
        Expr::Cast(c) => constant(&c.expr),
        Expr::TryCast(c) => constant(&c.expr),
        _ => None,
    }
}

impl Compiler {
    /// `window` (an OVER), bounded by `limit` when a `WHERE rn <= N` above
    /// limits one of its rankings.
    pub(super) fn plan_over(
        &mut self,
        window: &Window,
        cx: &StatementText,
        limit: Option<RankLimit>,
    ) -> Result<Stream> {
        let mut input = self.plan_stream(&window.input, cx)?;
        if let Some(ranking) = super::rank::stream_ranking(window, &input, limit.as_ref()) {
            return self.plan_stream_rank(window, input, ranking, cx);
        }
        if let (None, Some(time)) = (&input.changelog, input.time) {
            if let Some(ranking) =
                super::rank::rank_functions(window, &input.schema, time.column, &input.windows)
            {
                return self.plan_window_rank(window, input, time, ranking, limit, cx);
            }
        }
        // In event-time order over an append-only stream, rows go out final
        // (`over`); in any other order, or over rows that change, results
        // change as rows arrive (`updating_over`).
        let time_ordered = input.changelog.is_none()
            && input.time.is_some_and(|time| {
                window.window_expr.iter().all(|expr| {
                    let inner = match expr {
                        Expr::Alias(a) => a.expr.as_ref(),
                        e => e,
                    };
                    matches!(inner, Expr::WindowFunction(f) if f.params.order_by.len() == 1
                        && f.params.order_by[0].asc
                        && matches!(&f.params.order_by[0].expr, Expr::Column(c) if input.schema.index_of_column(c).ok() == Some(time.column)))
                })
            });
        if !time_ordered {
            let ranking = window.window_expr.iter().any(|expr| {
                let inner = match expr {
                    Expr::Alias(a) => a.expr.as_ref(),
                    e => e,
                };
                matches!(inner, Expr::WindowFunction(f) if matches!(&f.fun, WindowFunctionDefinition::WindowUDF(u) if matches!(u.name(), "row_number" | "rank" | "dense_rank")))
            });
            if ranking {
                let order = match input.time {
                    Some(time) if input.changelog.is_none() => format!(
                        " that is not ORDER BY {}",
                        input.schema.field(time.column).name()
                    ),
                    _ => String::new(),
                };
                return Err(SqlError::at(&cx.anchor(&["OVER"]),
                    format!("a ranking on a stream{order} needs a bound: a WHERE rn <= N above it (a Top-N over the stream, whose rows change), or PARTITION BY window_start, window_end (or the window) of a window aggregate (a window Top-N); unbounded, every row would re-rank its whole partition"),
                ));
            }
            return self.plan_updating_over(window, input, cx);
        }
        let Some(time) = input.time else {
            return Err(SqlError::Internal(
                "an event-time OVER without event time".into(),
            ));
        };
        let state = self.ctx.state();
        let input_schema = input.schema.clone();
        let input_arrow = Arc::new(input_schema.as_arrow().clone());
        let mut partition_by: Option<Vec<Expr>> = None;
        let mut functions = Vec::with_capacity(window.window_expr.len());
        for expr in &window.window_expr {
            let inner = match expr {
                Expr::Alias(a) => a.expr.as_ref(),
                e => e,
            };
            let Expr::WindowFunction(function) = inner else {
                return Err(SqlError::Internal(format!(
                    "unexpected window expression {expr}"
                )));
            };
            let WindowFunction { fun, params } = function.as_ref();
            match &partition_by {
                Some(p) if *p != params.partition_by => {
                    return Err(SqlError::at(
                        &cx.anchor(&["OVER"]),
                        "all OVER clauses of one SELECT must use the same PARTITION BY",
                    ));
                }
                _ => partition_by = Some(params.partition_by.clone()),
            }
            let function = match fun {
                WindowFunctionDefinition::AggregateUDF(udaf) => {
                    let frame = &params.window_frame;
                    let unbounded_start = matches!(&frame.start_bound, WindowFrameBound::Preceding(v) if v.is_null());
                    let frame = match (&frame.units, unbounded_start, &frame.end_bound) {
                        (WindowFrameUnits::Rows, true, WindowFrameBound::CurrentRow) => Frame::UpToCurrentRow,
                        (WindowFrameUnits::Rows, true, WindowFrameBound::Preceding(v))
                            if v.cast_to(&datafusion::arrow::datatypes::DataType::UInt64).ok() == Some(ScalarValue::UInt64(Some(1))) =>
                        {
                            Frame::BeforeCurrentRow
                        }
                        (WindowFrameUnits::Range, true, WindowFrameBound::CurrentRow) => Frame::UpToPeers,
                        (WindowFrameUnits::Range, false, WindowFrameBound::CurrentRow) => match &frame.start_bound {
                            WindowFrameBound::Preceding(v) => match crate::functions::windows::interval_value_ms(v) {
                                Some(range_ms) => Frame::RangePreceding { range_ms },
                                None => {
                                    return Err(SqlError::at(
                                        &cx.anchor(&["RANGE", "OVER"]),
                                        format!("{}: a RANGE frame on a stream reaches back a constant INTERVAL of event time (RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW), not {v}", udaf.name()),
                                    ))
                                }
                            },
                            _ => Frame::UpToPeers,
                        },
                        (WindowFrameUnits::Rows, false, WindowFrameBound::CurrentRow) => match &frame.start_bound {
                            WindowFrameBound::Preceding(v) => match v.cast_to(&datafusion::arrow::datatypes::DataType::UInt64) {
                                Ok(ScalarValue::UInt64(Some(rows))) => Frame::RowsPreceding { rows: rows as usize },
                                _ => return Err(SqlError::at(&cx.anchor(&["ROWS", "OVER"]), format!("{}: ROWS BETWEEN n PRECEDING needs a constant n", udaf.name()))),
                            },
                            _ => Frame::UpToCurrentRow,
                        },
                        _ => {
                            return Err(SqlError::at(
                                &cx.anchor(&["ROWS", "RANGE", "OVER"]),
                                format!(
                                    "{}: on streams a frame ends at the current row (or 1 PRECEDING): ROWS or RANGE BETWEEN UNBOUNDED PRECEDING, ROWS BETWEEN n PRECEDING or RANGE BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW; a frame reaching into later rows would wait for them",
                                    udaf.name()
                                ),
                            ))
                        }
                    };
                    let aggregate = Expr::AggregateFunction(AggregateFunction::new_udf(
                        Arc::clone(udaf),
                        params.args.clone(),
                        params.distinct,
                        params.filter.clone(),
                        Vec::new(),
                        params.null_treatment,
                    ));
                    let aggregate =
                        crate::context::simplify(&state, aggregate, &input_schema).map_err(|e| self.df_error(cx, e))?;
                    let planning = PhysicalPlanningContext::default();
                    let lowered = LoweredAggregateBuilder::new(
                        &aggregate,
                        &input_schema,
                        &input_arrow,
                        state.execution_props(),
                        &planning,
                    )
                    .build()
                    .map_err(|e| self.df_error(cx, e))?;
                    if frame.slides() {
                        let retracts = lowered.aggregate.create_sliding_accumulator().is_ok_and(|acc| acc.supports_retract_batch());
                        if !retracts {
                            return Err(SqlError::at(
                                &cx.anchor(&["ROWS", "RANGE", "OVER"]),
                                format!("{}: this aggregate cannot take rows back out, so it cannot run over a sliding frame (n PRECEDING); use a running frame (UNBOUNDED PRECEDING) or a window", udaf.name()),
                            ));
                        }
                    }
                    let running = RunningAggregate::builtin(&lowered.aggregate, &input_arrow)
                        .or_else(|| crate::functions::running_stats::running_form(&lowered.aggregate));
                    OverFunction::Aggregate { expr: lowered.aggregate, filter: lowered.filter, frame, running }
                }
                WindowFunctionDefinition::WindowUDF(udwf) => match udwf.name() {
                    "row_number" => OverFunction::RowNumber,
                    name @ ("lag" | "lead") => {
                        let value = params
                            .args
                            .first()
                            .ok_or_else(|| SqlError::at(&cx.anchor(&["OVER"]), format!("{name}() needs a value")))?;
                        let offset = match params.args.get(1).map(constant) {
                            None => 1,
                            Some(Some(v)) => match v.cast_to(&datafusion::arrow::datatypes::DataType::UInt64) {
                                Ok(ScalarValue::UInt64(Some(n))) if n > 0 => n as usize,
                                _ => return Err(SqlError::at(&cx.anchor(&["OVER"]), format!("{name}(): the offset must be a positive constant"))),
                            },
                            Some(None) => return Err(SqlError::at(&cx.anchor(&["OVER"]), format!("{name}(): the offset must be a constant"))),
                        };
                        let value_type = value.get_type(&input_schema).map_err(|e| self.df_error(cx, e))?;
                        let default = match params.args.get(2).map(constant) {
                            None => ScalarValue::try_from(&value_type).map_err(|e| self.df_error(cx, e))?,
                            Some(Some(v)) => v.cast_to(&value_type).map_err(|e| self.df_error(cx, e))?,
                            Some(None) => return Err(SqlError::at(&cx.anchor(&["OVER"]), format!("{name}(): the default must be a constant"))),
                        };
                        let value = crate::context::physical_expr(&state, value.clone(), &input_schema)
                            .map_err(|e| self.df_error(cx, e))?;
                        if name == "lag" {
                            OverFunction::Lag { value, offset, default }
                        } else {
                            OverFunction::Lead { value, offset, default }
                        }
                    }
                    other => {
                        return Err(SqlError::at(&cx.anchor(&["OVER"]),
                            format!("{other}() OVER is not supported on streams (supported: running aggregates, row_number, lag, lead)"),
                        ))
                    }
                },
            };
            functions.push(function);
        }
        let partition_by = partition_by
            .unwrap_or_default()
            .into_iter()
            .map(|e| crate::context::physical_expr(&state, e, &input_schema))
            .collect::<datafusion::error::Result<Vec<_>>>()
            .map_err(|e| self.df_error(cx, e))?;
        let output_schema = Arc::new(Schema::new(
            window
                .schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        let plan = OverPlan {
            input_schema: input_arrow,
            output_schema: output_schema.clone(),
            partition_by: partition_by.clone(),
            time_column: time.column,
            allowed_lateness_ms: time.allowed_lateness_ms,
            functions,
            state_ttl_ms: self.state_ttl_ms,
        };
        let from = input.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from]);
        // The input's columns come first and unchanged.
        let mut stream = Stream::of_node(node, &self.graph, window.schema.clone(), Some(time));
        stream.windows = input.windows;
        Ok(stream)
    }
}
