//! Plans Top-N: ranking functions over window results, and over whole
//! streams.
//!
//! `ROW_NUMBER() | RANK() | DENSE_RANK() OVER (PARTITION BY <window> ...
//! ORDER BY ...)` whose PARTITION BY holds the input's event-time column —
//! a window result's time: `window_time`, `window_end`, or the window itself
//! in Arroyo's `PARTITION BY window` — becomes a `window_rank` operator that
//! ranks each window's rows once they are all in. A `WHERE rn <= N` (or
//! `rn < N`, `rn = 1`) above it lets the operator keep only the top N.
//!
//! A ranking not confined to a window, bounded by such a `WHERE`, is a
//! Top-N over the whole stream (deduplication when N is 1): an
//! `updating_rank` whose output is an updating stream. Keep-first
//! deduplication on the event time (`ROW_NUMBER() OVER (PARTITION BY k
//! ORDER BY <event time>) = 1` over an append-only stream) stays an OVER
//! `row_number` under the watermark, whose output is append-only: a row is
//! released once no earlier one can come.

use std::sync::Arc;

use datafusion::arrow::compute::SortOptions;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::expr::WindowFunction;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{
    BinaryExpr, Expr, Filter, LogicalPlan, Operator, Window, WindowFunctionDefinition,
};
use datafusion::physical_expr::PhysicalSortExpr;
use eddy_engine::operators::updating_rank::{Arrival, UpdatingRankPlan};
use eddy_engine::operators::window_rank::{RankFunction, WindowRankPlan};

use super::stream::{
    add_operator, updating_output, Changelog, Endpoint, Stream, TimeAttr, WindowColumn,
};
use super::Compiler;
use crate::error::{Result, SqlError};
use crate::planner::statement_text::StatementText;

/// A filter's bound on a ranking column: `column <= limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RankLimit {
    /// The window expression's column name in the `Window` node.
    column: String,
    /// Rows per partition the filter can keep at most.
    limit: usize,
}

fn function_params(expr: &Expr) -> Option<&WindowFunction> {
    match expr {
        Expr::Alias(a) => function_params(&a.expr),
        Expr::WindowFunction(f) => Some(f.as_ref()),
        _ => None,
    }
}

fn rank_function(function: &WindowFunction) -> Option<RankFunction> {
    let WindowFunctionDefinition::WindowUDF(udwf) = &function.fun else {
        return None;
    };
    match udwf.name() {
        "row_number" => Some(RankFunction::RowNumber),
        "rank" => Some(RankFunction::Rank),
        "dense_rank" => Some(RankFunction::DenseRank),
        _ => None,
    }
}

/// The ranking functions of `window` and its first function, when every
/// function is a ranking and all share one PARTITION BY and ORDER BY.
fn rankings(window: &Window) -> Option<(Vec<RankFunction>, &WindowFunction)> {
    let first = function_params(window.window_expr.first()?)?;
    let mut functions = Vec::with_capacity(window.window_expr.len());
    for expr in &window.window_expr {
        let function = function_params(expr)?;
        if function.params.partition_by != first.params.partition_by
            || function.params.order_by != first.params.order_by
        {
            return None;
        }
        functions.push(rank_function(function)?);
    }
    Some((functions, first))
}

/// How a ranking finds each row's window.
pub(super) struct RankWindow {
    /// The ranking functions.
    pub functions: Vec<RankFunction>,
    /// The partition column that names the window.
    pub column: usize,
    /// Its value plus this is the window's end.
    pub to_end_ms: i64,
}

/// The ranking functions of `window` when it ranks within windows: every
/// function is a ranking, all share one PARTITION BY and ORDER BY, and the
/// PARTITION BY holds the event-time column `time` (a window's results) or a
/// window bound column of a window table function's rows.
pub(super) fn rank_functions(
    window: &Window,
    schema: &DFSchema,
    time: usize,
    windows: &[WindowColumn],
) -> Option<RankWindow> {
    let (functions, first) = rankings(window)?;
    let columns: Vec<usize> = first
        .params
        .partition_by
        .iter()
        .filter_map(|e| match e {
            Expr::Column(c) => schema.index_of_column(c).ok(),
            _ => None,
        })
        .collect();
    if columns.contains(&time) {
        // A window's results: their event time is the window's time (end - 1 ms)
        // or its end; end - 1 ms is the safe reading of both.
        return Some(RankWindow {
            functions,
            column: time,
            to_end_ms: 1,
        });
    }
    let bound = windows.iter().find(|w| columns.contains(&w.column))?;
    Some(RankWindow {
        functions,
        column: bound.column,
        to_end_ms: bound.to_end_ms,
    })
}

/// The bound a `WHERE` puts on a ranking column below it, if any.
pub(super) fn rank_limit(filter: &Filter) -> Option<RankLimit> {
    split_conjunction(&filter.predicate)
        .into_iter()
        .find_map(|conjunct| {
            let Expr::BinaryExpr(BinaryExpr { left, op, right }) = conjunct else {
                return None;
            };
            let (column, op, value) = match (column_of(left), column_of(right)) {
                (Some(c), None) => (c, *op, integer(right)?),
                (None, Some(c)) => (c, op.swap()?, integer(left)?),
                _ => return None,
            };
            let limit = match op {
                Operator::LtEq | Operator::Eq => value,
                Operator::Lt => value.checked_sub(1)?,
                _ => return None,
            };
            let column = window_column(&filter.input, &column.name)?;
            Some(RankLimit {
                column,
                limit: usize::try_from(limit).ok()?,
            })
        })
}

/// A column, possibly cast (a ranking's UInt64 compared with an integer).
fn column_of(expr: &Expr) -> Option<&datafusion::common::Column> {
    match expr {
        Expr::Column(c) => Some(c),
        Expr::Cast(c) => column_of(&c.expr),
        Expr::TryCast(c) => column_of(&c.expr),
        _ => None,
    }
}

fn integer(expr: &Expr) -> Option<u64> {
    match expr {
        Expr::Literal(value, _) => match value.cast_to(&DataType::UInt64).ok()? {
            ScalarValue::UInt64(Some(v)) => Some(v),
            _ => None,
        },
        Expr::Cast(c) => integer(&c.expr),
        _ => None,
    }
}

/// Follows a column down through aliases and projections to the `Window`
/// node that computes it; its name there.
fn window_column(plan: &LogicalPlan, name: &str) -> Option<String> {
    match plan {
        LogicalPlan::SubqueryAlias(alias) => window_column(&alias.input, name),
        LogicalPlan::Filter(filter) => window_column(&filter.input, name),
        LogicalPlan::Projection(projection) => {
            let index = (0..projection.schema.fields().len())
                .find(|&i| projection.schema.field(i).name() == name)?;
            let mut expr = projection.expr.get(index)?;
            while let Expr::Alias(alias) = expr {
                expr = &alias.expr;
            }
            match expr {
                Expr::Column(c) => window_column(&projection.input, &c.name),
                _ => None,
            }
        }
        LogicalPlan::Window(window) => {
            let first = window.input.schema().fields().len();
            window
                .schema
                .fields()
                .iter()
                .skip(first)
                .any(|f| f.name() == name)
                .then(|| name.to_string())
        }
        _ => None,
    }
}

/// A ranking over a whole stream that a `WHERE` bounds: the functions,
/// which of them the bound applies to, and the bound.
pub(super) struct StreamRanking {
    functions: Vec<RankFunction>,
    limited: usize,
    limit: usize,
}

/// The Top-N over the whole stream `window` computes, if it is one: every
/// function a ranking with one shared window, not confined to a window of
/// the input's event time, bounded by the `WHERE` above it; and not the
/// keep-first deduplication on event time that OVER runs append-only.
pub(super) fn stream_ranking(
    window: &Window,
    input: &Stream,
    bound: Option<&RankLimit>,
) -> Option<StreamRanking> {
    let bound = bound?;
    let (functions, first) = rankings(window)?;
    if let Some(time) = input.time {
        if input.changelog.is_none()
            && rank_functions(window, &input.schema, time.column, &input.windows).is_some()
        {
            return None; // a window Top-N
        }
        let keep_first_on_time = functions == [RankFunction::RowNumber]
            && bound.limit == 1
            && input.changelog.is_none()
            && first.params.order_by.len() == 1
            && first.params.order_by[0].asc
            && matches!(&first.params.order_by[0].expr, Expr::Column(c) if input.schema.index_of_column(c).ok() == Some(time.column));
        if keep_first_on_time {
            return None;
        }
    }
    let first_output = window.input.schema().fields().len();
    let limited = (first_output..window.schema.fields().len())
        .find(|&i| *window.schema.field(i).name() == bound.column)?
        - first_output;
    Some(StreamRanking {
        functions,
        limited,
        limit: bound.limit,
    })
}

impl Compiler {
    pub(super) fn plan_window_rank(
        &mut self,
        window: &Window,
        mut input: Stream,
        time: TimeAttr,
        ranking: RankWindow,
        limit: Option<RankLimit>,
        cx: &StatementText,
    ) -> Result<Stream> {
        let RankWindow {
            functions,
            column: window_column,
            to_end_ms,
        } = ranking;
        let input_schema = input.schema.clone();
        let (partition_by, order_by) = self.ranking_window(window, &input_schema, cx)?;
        // A limit holds for a row_number or rank column; what it keeps is a
        // prefix of each partition in rank order, so every function's values
        // on the kept rows are what they would be over all rows.
        let first_output = input_schema.fields().len();
        let limit = limit.and_then(|bound| {
            let index = (first_output..window.schema.fields().len())
                .find(|&i| *window.schema.field(i).name() == bound.column)?;
            matches!(
                functions.get(index - first_output),
                Some(RankFunction::RowNumber | RankFunction::Rank)
            )
            .then_some(bound.limit)
        });
        let output_schema = Arc::new(Schema::new(
            window
                .schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        let plan = WindowRankPlan {
            input_schema: Arc::new(input_schema.as_arrow().clone()),
            output_schema: output_schema.clone(),
            time_column: window_column,
            to_end_ms,
            allowed_lateness_ms: time.allowed_lateness_ms,
            partition_by: partition_by.clone(),
            order_by,
            functions,
            limit,
        };
        let from = input.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from]);
        // The input's columns come first and unchanged.
        let mut stream = Stream::of_node(node, &self.graph, window.schema.clone(), Some(time));
        stream.windows = input.windows;
        Ok(stream)
    }

    /// A Top-N over the whole stream (see the module docs).
    pub(super) fn plan_stream_rank(
        &mut self,
        window: &Window,
        mut input: Stream,
        ranking: StreamRanking,
        cx: &StatementText,
    ) -> Result<Stream> {
        let input_schema = input.schema.clone();
        let params = window
            .window_expr
            .first()
            .and_then(function_params)
            .map(|f| &f.params)
            .ok_or_else(|| SqlError::Internal("a ranking without function".into()))?;
        if params.order_by.is_empty() {
            return Err(SqlError::at(
                &cx.anchor(&["OVER"]),
                "a Top-N needs an ORDER BY in its OVER clause (which rows come first)",
            ));
        }
        let (partition_by, order_by) = self.ranking_window(window, &input_schema, cx)?;
        // ORDER BY a `PROCTIME()` column: ranked by arrival.
        let arrival = match params.order_by.as_slice() {
            [only] => match &only.expr {
                Expr::Column(c) => input_schema
                    .index_of_column(c)
                    .ok()
                    .filter(|&i| crate::functions::flink::is_proctime(input_schema.field(i)))
                    .map(|_| {
                        if only.asc {
                            Arrival::Earliest
                        } else {
                            Arrival::Latest
                        }
                    }),
                _ => None,
            },
            _ => None,
        };
        input
            .no_change_metadata("a Top-N", 0..input_schema.fields().len())
            .map_err(|m| SqlError::at(&cx.anchor(&["OVER"]), m.to_string()))?;
        if let (Some(_), Some(changelog)) = (arrival, &input.changelog) {
            return Err(SqlError::at(
                &cx.anchor(&["OVER"]),
                format!(
                    "ranking by arrival (ORDER BY a PROCTIME() column) needs an append-only input, and this one is updating: {} makes it so; rank by a value instead",
                    changelog.origin
                ),
            ));
        }
        // Keep-first on arrival over an append-only input never takes a
        // row back: its output is append-only.
        let append_only = arrival == Some(Arrival::Earliest);
        // Upsert key: the partition columns and a row number (unique per
        // partition), when the partition is plain columns.
        let first_output = input_schema.fields().len();
        let partition_columns: Option<Vec<usize>> = params
            .partition_by
            .iter()
            .map(|e| match e {
                Expr::Column(c) => input_schema.index_of_column(c).ok(),
                _ => None,
            })
            .collect();
        let upsert_key = partition_columns
            .filter(|_| ranking.functions[ranking.limited] == RankFunction::RowNumber)
            .map(|mut key| {
                key.push(first_output + ranking.limited);
                key
            });
        let key_names: Vec<String> = upsert_key
            .iter()
            .flatten()
            .map(|&i| window.schema.field(i).name().clone())
            .collect();
        let at = cx.anchor(&["OVER", "ROW_NUMBER", "RANK", "DENSE_RANK"]);
        let what = if ranking.limit == 1
            && ranking.functions[ranking.limited] == RankFunction::RowNumber
        {
            "the deduplication"
        } else {
            "the Top-N"
        };
        let origin = format!(
            "{what} ({}() OVER ... <= {}) at {at}",
            ranking.functions[ranking.limited].name().to_uppercase(),
            ranking.limit
        );
        let output_schema = updating_output(&window.schema, &key_names, &origin);
        let plan = UpdatingRankPlan {
            input_schema: Arc::new(input_schema.as_arrow().clone()),
            output_schema,
            partition_by: partition_by.clone(),
            order_by,
            functions: ranking.functions,
            limited: ranking.limited,
            limit: ranking.limit,
            input_updating: input.changelog.is_some(),
            state_ttl_ms: self.state_ttl_ms,
            arrival,
        };
        let from = input.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from]);
        if append_only {
            let rows = super::stream::without_row_kind(&mut self.graph, Endpoint { node, port: 0 });
            let mut stream = Stream::of_node(rows.node, &self.graph, window.schema.clone(), None);
            stream.time_lost = Some(format!(
                "{origin} keeps rows by arrival, which has no event time"
            ));
            return Ok(stream);
        }
        let mut stream = Stream::of_node(node, &self.graph, window.schema.clone(), None);
        stream.time_lost = Some(format!(
            "{origin} revises its rows, which have no event time"
        ));
        stream.changelog = Some(Changelog { origin, upsert_key });
        Ok(stream)
    }

    /// A ranking's PARTITION BY and ORDER BY as physical expressions over
    /// its input's rows.
    fn ranking_window(
        &self,
        window: &Window,
        input_schema: &DFSchema,
        cx: &StatementText,
    ) -> Result<RankingWindow> {
        let state = self.ctx.state();
        let physical = |e: &Expr| {
            crate::context::physical_expr(&state, e.clone(), input_schema)
                .map_err(|e| self.df_error(cx, e))
        };
        let params = window
            .window_expr
            .first()
            .and_then(function_params)
            .map(|f| &f.params)
            .ok_or_else(|| SqlError::Internal("a ranking without function".into()))?;
        let partition_by = params
            .partition_by
            .iter()
            .map(physical)
            .collect::<Result<Vec<_>>>()?;
        let order_by = params
            .order_by
            .iter()
            .map(|sort| {
                Ok(PhysicalSortExpr::new(
                    physical(&sort.expr)?,
                    SortOptions::new(!sort.asc, sort.nulls_first),
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((partition_by, order_by))
    }
}

/// A ranking's PARTITION BY and ORDER BY over its input's rows.
type RankingWindow = (
    Vec<std::sync::Arc<dyn datafusion::physical_expr::PhysicalExpr>>,
    Vec<PhysicalSortExpr>,
);
