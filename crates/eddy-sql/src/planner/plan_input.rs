//! A logical plan into a stream, node by node: the heart of the planner.
//!
//! In: a DataFusion logical plan (a query's, a view's, an insert's) and
//! what the step above asks of it ([`Wanted`]: a projection's join
//! columns, a `WHERE rn <= N`'s bound). Out: a [`Stream`] — the operators
//! added to the graph so far and the calculation steps still to apply —
//! each node of the plan handed to the module that plans its kind (joins,
//! aggregates, OVER, sorts, unnest, ...).

use std::sync::Arc;

use datafusion::logical_expr::{Expr, LogicalPlan};
use eddy_engine::operators::calc::CalcStep;
use eddy_engine::operators::union::UnionPlan;

use super::stream::{Stream, TimeAttr};
use super::{
    check_emit_on_window_close, not_in, processing_time, pushdown, rank, stream, Compiler,
};
use crate::error::{Result, SqlError};
use crate::planner::statement_text::StatementText;
use crate::side_streams::{BAD_ROWS_OF, LATE_ROWS_OF};

/// What the step above a plan asks of it while it is planned: passed
/// down as an argument, one step at a time.
#[derive(Debug, Default)]
struct Wanted {
    /// Above a join (a projection, through aliases): the join's output
    /// columns the projection reads (see `plan_join`).
    join_columns: Option<Vec<bool>>,
    /// Above a ranking (a `WHERE rn <= N`, through projections and
    /// aliases): the ranking the filter limits and N (see
    /// `rank::rank_limit`).
    rank_limit: Option<rank::RankLimit>,
}

impl Compiler {
    /// Translates a logical plan into a stream.
    pub(super) fn plan_stream(&mut self, plan: &LogicalPlan, cx: &StatementText) -> Result<Stream> {
        self.plan_input(plan, cx, Wanted::default())
    }

    /// Translates a logical plan into a stream for the step above it,
    /// which asks `wanted` of it.
    fn plan_input(
        &mut self,
        plan: &LogicalPlan,
        cx: &StatementText,
        wanted: Wanted,
    ) -> Result<Stream> {
        let state = self.ctx.state();
        let Wanted {
            join_columns: join_needed,
            rank_limit,
        } = wanted;
        match plan {
            LogicalPlan::TableScan(scan) => {
                let name = scan.table_name.table().to_string();
                let late_of = scan.source.schema().metadata().get(LATE_ROWS_OF).cloned();
                let bad_of = scan.source.schema().metadata().get(BAD_ROWS_OF).cloned();
                let mut stream = if let Some(view) = self.view_streams.get(&name) {
                    view.clone()
                } else if let Some(memory) = self.memory_stream(&name, cx)? {
                    memory
                } else if let Some(mut matched) = self.match_stream(&name)? {
                    matched.materialize(&mut self.graph);
                    self.view_streams.insert(name.clone(), matched.clone());
                    matched
                } else if let Some(view) = self.catalog.views.get(&name).cloned() {
                    // Errors inside the view point into the view.
                    let first = self.graph.nodes.len();
                    self.note_columns_read(&view.plan);
                    let mut stream = self.plan_stream(&view.plan, &view.text)?;
                    check_emit_on_window_close(&stream, view.emit_on_window_close.as_ref())?;
                    stream.materialize(&mut self.graph);
                    self.name_operators(first, &view.named);
                    self.view_streams.insert(name.clone(), stream.clone());
                    stream
                } else if let Some(table) = late_of {
                    self.late_stream(&table, cx)?
                } else if let Some(table) = bad_of {
                    self.bad_stream(&table, cx)?
                } else {
                    self.source_stream(&name, cx)?
                };
                if let Some(projection) = &scan.projection {
                    let exprs = projection
                        .iter()
                        .map(|&i| datafusion::physical_expr::expressions::col(stream.schema.field(i).name(), &stream.endpoint_schema))
                        .collect::<datafusion::error::Result<Vec<_>>>()
                        .map_err(|e| self.df_error(cx, e))?;
                    stream.time = stream
                        .time
                        .and_then(|t| projection.iter().position(|&i| i == t.column).map(|column| TimeAttr { column, ..t }));
                    stream.windows = projection
                        .iter()
                        .enumerate()
                        .filter_map(|(column, &i)| stream.windows.iter().find(|w| w.column == i).map(|w| stream::WindowColumn { column, ..*w }))
                        .collect();
                    if let Some(changelog) = stream.changelog.as_mut() {
                        changelog.upsert_key = changelog.upsert_key.as_ref().and_then(|key| key.iter().map(|k| projection.iter().position(|i| i == k)).collect());
                    }
                    stream.steps.push(CalcStep::Project { exprs, schema: Arc::new(scan.projected_schema.as_arrow().clone()) });
                }
                stream.schema = scan.projected_schema.clone();
                for filter in &scan.filters {
                    let predicate = crate::context::physical_expr(&state, filter.clone(), &stream.schema)
                        .map_err(|e| self.df_error(cx, e))?;
                    stream.steps.push(CalcStep::Filter(predicate));
                }
                Ok(stream)
            }
            LogicalPlan::Projection(projection) => {
                // A `WHERE rn <= N` above reaches through to its ranking.
                let wanted = Wanted {
                    join_columns: columns_read_of_a_join(&projection.expr, &projection.input),
                    rank_limit,
                };
                let mut stream = self.plan_input(&projection.input, cx, wanted)?;
                // Window bounds over a PROCTIME() column (a window table
                // function read row by row, as window deduplication does):
                // that column becomes the time attribute, on the wall clock.
                if let Some(column) = processing_time::windowed_proctime(&projection.expr, &stream) {
                    stream = self.processing_time_clock(stream, column);
                }
                let input_schema = stream.schema.clone();
                let exprs = projection
                    .expr
                    .iter()
                    .zip(projection.schema.fields())
                    .map(|(e, field)| crate::context::physical_expr_of_type(&state, e.clone(), &input_schema, field.data_type()))
                    .collect::<datafusion::error::Result<Vec<_>>>()
                    .map_err(|e| self.df_error(cx, e))?;
                stream.windows = stream::projected_windows(&projection.expr, &input_schema, stream.time.map(|t| t.column), &stream.windows);
                let before = stream.time;
                stream.time = stream.time.and_then(|t| {
                    stream::projected_time(&projection.expr, &input_schema, t.column).map(|column| TimeAttr { column, ..t })
                });
                if let (Some(t), None) = (before, stream.time) {
                    stream.time_lost = Some(format!("the event-time column '{}' is not in the SELECT list", input_schema.field(t.column).name()));
                }
                if let Some(changelog) = stream.changelog.as_mut() {
                    changelog.upsert_key = changelog.upsert_key.as_ref().and_then(|key| stream::projected_columns(&projection.expr, &input_schema, key));
                }
                stream.steps.push(CalcStep::Project { exprs, schema: Arc::new(projection.schema.as_arrow().clone()) });
                stream.schema = projection.schema.clone();
                Ok(stream)
            }
            LogicalPlan::Filter(filter) => {
                // WHERE over an inner (or comma) join: its conditions are the
                // join's, so time bounds and keys count wherever they sit.
                if let LogicalPlan::Join(join) = filter.input.as_ref() {
                    if join.join_type == datafusion::common::JoinType::Inner {
                        let mut merged = join.clone();
                        merged.filter = Some(match &join.filter {
                            Some(on) => on.clone().and(filter.predicate.clone()),
                            None => filter.predicate.clone(),
                        });
                        return self.plan_join(&merged, cx, join_needed);
                    }
                }
                let rank_limit = rank::rank_limit(filter);
                let subquery = datafusion::common::tree_node::TreeNode::exists(&filter.predicate, |e| Ok(matches!(e, Expr::InSubquery(_) | Expr::Exists(_) | Expr::ScalarSubquery(_)))).unwrap_or(false);
                if subquery {
                    // A correlated NOT IN's NULL rule holds per outer row
                    // (its own share of the subquery): it becomes the NOT
                    // EXISTS it means (see `not_in`).
                    let correlated_not_in = datafusion::common::tree_node::TreeNode::exists(&filter.predicate, |e| {
                        Ok(matches!(e, Expr::InSubquery(s) if s.negated && !s.subquery.outer_ref_columns.is_empty()))
                    })
                    .unwrap_or(false);
                    let target = if correlated_not_in {
                        let predicate = not_in::as_not_exists(&filter.predicate, filter.input.schema()).map_err(|e| self.df_error(cx, e))?;
                        LogicalPlan::Filter(datafusion::logical_expr::Filter::try_new(predicate, filter.input.clone()).map_err(|e| self.df_error(cx, e))?)
                    } else {
                        plan.clone()
                    };
                    // IN / EXISTS / NOT EXISTS: DataFusion's decorrelation
                    // turns them into semi and anti joins.
                    use datafusion::optimizer::{OptimizerContext, OptimizerRule};
                    let rewritten = datafusion::optimizer::decorrelate_predicate_subquery::DecorrelatePredicateSubquery::new()
                        .rewrite(target, &OptimizerContext::new())
                        .map_err(|e| self.df_error(cx, e))?;
                    let still = match &rewritten.data {
                        LogicalPlan::Filter(f) => datafusion::common::tree_node::TreeNode::exists(&f.predicate, |e| Ok(matches!(e, Expr::InSubquery(_) | Expr::Exists(_) | Expr::ScalarSubquery(_)))).unwrap_or(true),
                        _ => false,
                    };
                    if !rewritten.transformed || still {
                        return Err(SqlError::at(
                            &cx.anchor(&["EXISTS", "IN", "SELECT"]),
                            "this subquery in WHERE is not supported on streams: IN, EXISTS and NOT EXISTS work at the top of the condition (ANDed), correlated by equalities; a scalar subquery does not",
                        ));
                    }
                    return self.plan_stream(&rewritten.data, cx);
                }
                if let Some((table, condition)) = pushdown::usable_condition(filter, &self.catalog.tables) {
                    if !self.catalog.match_views.contains_key(&table) {
                        self.source_scans.filtered(&table, condition);
                    }
                }
                let wanted = Wanted {
                    join_columns: None,
                    rank_limit,
                };
                let mut stream = self.plan_input(&filter.input, cx, wanted)?;
                let predicate = crate::context::physical_expr(&state, filter.predicate.clone(), &stream.schema)
                    .map_err(|e| self.df_error(cx, e))?;
                // A filter over a changelog must pass a retraction as it
                // passed its insert.
                let used = datafusion::physical_expr::utils::collect_columns(&predicate).iter().map(|c| c.index()).collect::<Vec<_>>();
                stream.no_change_metadata("this WHERE", used).map_err(|m| SqlError::at(&cx.anchor(&["WHERE"]), m.to_string()))?;
                stream.steps.push(CalcStep::Filter(predicate));
                stream.windows = stream::filtered_windows(&filter.predicate, &stream.schema, stream.time.map(|t| t.column), &stream.windows);
                Ok(stream)
            }
            LogicalPlan::SubqueryAlias(alias) => {
                let wanted = Wanted {
                    join_columns: join_needed,
                    rank_limit,
                };
                let mut stream = self.plan_input(&alias.input, cx, wanted)?;
                stream.schema = alias.schema.clone();
                if let Some(lost) = stream.time_lost.as_mut().filter(|l| l.ends_with("SELECT list")) {
                    lost.push_str(&format!(" of '{}'", alias.alias));
                }
                Ok(stream)
            }
            LogicalPlan::Aggregate(aggregate) => self.plan_aggregate(aggregate, cx),
            LogicalPlan::Union(union) => {
                let mut streams = Vec::new();
                for input in &union.inputs {
                    streams.push(self.plan_stream(input, cx)?);
                }
                Ok(self.union_streams(streams, union.schema.clone()))
            }
            LogicalPlan::Join(join) => self.plan_join(join, cx, join_needed),
            LogicalPlan::Window(window) => self.plan_over(window, cx, rank_limit),
            LogicalPlan::Sort(sort) => self.plan_sort(sort, cx),
            LogicalPlan::Unnest(unnest) => self.plan_unnest(unnest, cx),
            LogicalPlan::Limit(_) => Err(SqlError::at(&cx.anchor(&["LIMIT", "FETCH"]), "LIMIT is not supported on streams")),
            LogicalPlan::Distinct(datafusion::logical_expr::Distinct::All(input)) => self.plan_distinct(input, cx),
            LogicalPlan::Distinct(_) => Err(SqlError::at(
                &cx.anchor(&["DISTINCT"]),
                "SELECT DISTINCT ON is not supported on streams; write the deduplication as ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) = 1",
            )),
            LogicalPlan::Values(_) => self.values_stream(plan, cx),
            LogicalPlan::EmptyRelation(_) => Err(SqlError::at(&cx.at,
                "a streaming query must read from a source table (FROM ...)",
            )),
            other => Err(SqlError::at(&cx.at,
                format!("{} is not supported in streaming queries", other.display().to_string().split(':').next().unwrap_or("this plan")),
            )),
        }
    }
}

impl Compiler {
    /// UNION ALL of planned streams into `schema`. One updating input makes
    /// the union updating: the others' rows become inserts. The union keeps
    /// event time when every input has it in the same column.
    pub(super) fn union_streams(
        &mut self,
        streams: Vec<Stream>,
        schema: datafusion::common::DFSchemaRef,
    ) -> Stream {
        let changelog =
            streams
                .iter()
                .find_map(|s| s.changelog.clone())
                .map(|c| stream::Changelog {
                    upsert_key: None,
                    ..c
                });
        let mut endpoints = Vec::new();
        let mut times = Vec::new();
        // A column that is a window bound in every input stays one (a
        // hopping window table function's rows are a union of one copy per
        // slide, each with its window start): input i's rows with value v
        // have times in [v + to_end_i - width_i, v + to_end_i), so the
        // union's in the hull of those ranges.
        let windows: Vec<stream::WindowColumn> = streams
            .first()
            .map(|first| {
                first
                    .windows
                    .iter()
                    .filter_map(|w| {
                        let all: Vec<&stream::WindowColumn> = streams
                            .iter()
                            .map(|s| s.windows.iter().find(|x| x.column == w.column))
                            .collect::<Option<_>>()?;
                        let to_end = all.iter().map(|x| x.to_end_ms).max()?;
                        let from = all.iter().map(|x| x.to_end_ms - x.width_ms).min()?;
                        Some(stream::WindowColumn {
                            column: w.column,
                            width_ms: to_end - from,
                            to_end_ms: to_end,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Whether an input had an event time (or lost one on its way).
        let timed = streams
            .iter()
            .any(|s| s.time.is_some() || s.time_lost.is_some());
        for mut stream in streams {
            let endpoint = stream.materialize(&mut self.graph);
            endpoints.push(match (&changelog, &stream.changelog) {
                (Some(_), None) => {
                    stream::as_inserts(&mut self.graph, endpoint, &stream.endpoint_schema)
                }
                _ => endpoint,
            });
            times.push(stream.time);
        }
        let time = match times.first() {
            Some(Some(first))
                if times
                    .iter()
                    .all(|t| t.map(|t| t.column) == Some(first.column)) =>
            {
                Some(TimeAttr {
                    column: first.column,
                    allowed_lateness_ms: times
                        .iter()
                        .flatten()
                        .map(|t| t.allowed_lateness_ms)
                        .max()
                        .unwrap_or(0),
                    window_ms: None,
                })
            }
            _ => None,
        };
        let arrow = match &changelog {
            Some(c) => eddy_engine::changelog::with_origin(
                &eddy_engine::changelog::updating_schema(schema.as_arrow(), &[]),
                &c.origin,
            ),
            None => Arc::new(schema.as_arrow().clone()),
        };
        let node = stream::add_operator(
            &mut self.graph,
            Arc::new(UnionPlan::new(arrow, endpoints.len())),
            endpoints.clone(),
        );
        let lost = (timed && time.is_none()).then(|| {
            "the inputs of the union do not all pass on their event time in the same column"
                .to_string()
        });
        let mut stream = Stream::of_node(node, &self.graph, schema, time);
        stream.changelog = changelog;
        stream.time_lost = lost;
        if stream.time.is_some() {
            stream.windows = windows;
        }
        stream
    }
}

/// The columns of `input` that `exprs` read, when `input` is a join (maybe
/// under a WHERE or an alias): the join then keeps only those in its state.
fn columns_read_of_a_join(exprs: &[Expr], input: &LogicalPlan) -> Option<Vec<bool>> {
    let mut below = input;
    loop {
        match below {
            LogicalPlan::Join(_) => break,
            LogicalPlan::Filter(filter)
                if matches!(filter.input.as_ref(), LogicalPlan::Join(_)) =>
            {
                break
            }
            LogicalPlan::SubqueryAlias(alias) => below = alias.input.as_ref(),
            _ => return None,
        }
    }
    let schema = input.schema();
    let mut read = vec![false; schema.fields().len()];
    for column in exprs.iter().flat_map(Expr::column_refs) {
        read[schema.index_of_column(column).ok()?] = true;
    }
    Some(read)
}
