//! Plans `MATCH_RECOGNIZE` into a `match_recognize` operator.
//!
//! In: a statement whose FROM holds `t MATCH_RECOGNIZE (...) [AS alias]`.
//! Out: the statement reading a hidden table in its place (so DataFusion
//! plans the rest of the query as usual), and that table's operator plan,
//! added to the graph where the query is first planned into a stream.
//!
//! Accepted, as in Flink: `PARTITION BY` columns; `ORDER BY` the input's
//! event time ascending (then any other keys); `MEASURES` over navigations
//! (`A.x`, `FIRST`/`LAST(A.x [, n])`, `SUM`/`AVG`/`MIN`/`MAX`/`COUNT` of a
//! variable's rows, `MATCH_ROWTIME()`, `CLASSIFIER()`); `ONE ROW PER MATCH`;
//! `AFTER MATCH SKIP` (all four); patterns of variables with `*`, `+`, `?`,
//! `{n}`, `{n,}`, `{,m}`, `{n,m}` and their reluctant forms, alternation,
//! groups and `PERMUTE`; `WITHIN <interval>`; `DEFINE` conditions over the
//! tested row and the match so far (`PREV`, `LAST`, `FIRST`, aggregates).
//! Refused with the reason: `ALL ROWS PER MATCH`, `^`/`$`, `{- -}`, `NEXT`,
//! `MATCH_NUMBER()`, an updating input, an input without event time.
//!
//! The output has the partition columns, then the measures; a measure
//! `MATCH_ROWTIME()` carries the event time on.
//!
//! Files: here the lifting and planning; `navigations` the navigations cut
//! from DEFINE and MEASURES; `pattern` the pattern into the engine's.

mod navigations;
mod pattern;

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{DFSchema, DFSchemaRef};
use datafusion::logical_expr::{ExprSchemable, LogicalPlan};
use datafusion::sql::planner::{PlannerContext, SqlToRel};
use datafusion::sql::sqlparser::ast::{
    AfterMatchSkip, Expr as SqlExpr, Ident, Query, RowsPerMatch, SelectItem, SetExpr, Statement,
    TableAlias, TableFactor, VisitMut, VisitorMut,
};
use eddy_engine::operators::match_recognize::navigation::{Aggregate, Navigation, Reach};
use eddy_engine::operators::match_recognize::{AfterMatch, Condition, MatchRecognizePlan};

use self::navigations::{nav_column, NavigationCutter, NavigationSpec};
use self::pattern::to_pattern;
use super::statement_text::StatementText;
use super::stream::{add_operator, Stream, TimeAttr};
use super::Compiler;
use crate::context::DdlContext;
use crate::dialect::identifiers::normalize;
use crate::dialect::match_within::WITHIN_SYMBOL;
use crate::dialect::rewrite::{parse_query, parse_table_factor};
use crate::error::{Position, Result, SqlError};

/// A `MATCH_RECOGNIZE` lifted out of its statement, planned into a stream
/// where the hidden table that took its place is first read.
#[derive(Clone)]
pub(super) struct MatchView {
    /// `SELECT * FROM <its input>`.
    input: LogicalPlan,
    plan: MatchRecognizePlan,
    /// The output column `MATCH_ROWTIME()` fills, if any.
    rowtime_output: Option<usize>,
    position: Position,
    /// The text of the statement it was lifted from.
    text: StatementText,
}

/// Pattern variables by their normalized names.
pub(super) struct Variables {
    /// Normalized names, numbered.
    keys: Vec<String>,
    /// As written.
    names: Vec<String>,
}

impl Variables {
    pub(super) fn index(&self, ident: &Ident) -> Option<usize> {
        let key = normalize(ident);
        self.keys.iter().position(|k| *k == key)
    }

    pub(super) fn add(&mut self, ident: &Ident) -> usize {
        self.index(ident).unwrap_or_else(|| {
            self.keys.push(normalize(ident));
            self.names.push(ident.value.clone());
            self.keys.len() - 1
        })
    }
}

/// `SELECT * FROM <factor>`.
fn select_all_from(factor: TableFactor) -> Result<Query> {
    let mut query = parse_query("SELECT * FROM t")
        .ok_or_else(|| SqlError::Internal("SELECT * FROM t does not parse".into()))?;
    if let SetExpr::Select(select) = query.body.as_mut() {
        select.from[0].relation = factor;
        select.projection = vec![SelectItem::Wildcard(Default::default())];
    }
    Ok(query)
}

/// The hidden table `name` as a table factor, with `alias`.
fn hidden_table(name: &str, alias: Option<TableAlias>) -> Result<TableFactor> {
    let mut factor = parse_table_factor(&format!("\"{name}\""))
        .ok_or_else(|| SqlError::Internal(format!("hidden table {name}")))?;
    if let TableFactor::Table { alias: a, .. } = &mut factor {
        *a = alias;
    }
    Ok(factor)
}

/// Lifts every `MATCH_RECOGNIZE` of a statement (innermost first).
struct Lifter<'a> {
    compiler: &'a mut Compiler,
    cx: &'a StatementText,
    error: Option<SqlError>,
}

impl VisitorMut for Lifter<'_> {
    type Break = ();

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if !matches!(factor, TableFactor::MatchRecognize { .. }) {
            return ControlFlow::Continue(());
        }
        let placeholder = match hidden_table("_", None) {
            Ok(placeholder) => placeholder,
            Err(e) => {
                self.error = Some(e);
                return ControlFlow::Break(());
            }
        };
        let taken = std::mem::replace(factor, placeholder);
        match self.compiler.lift_one(taken, self.cx) {
            Ok(replacement) => {
                *factor = replacement;
                ControlFlow::Continue(())
            }
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}

impl Compiler {
    /// Replaces each `MATCH_RECOGNIZE` in `statement` by a hidden table and
    /// records its plan.
    pub(super) fn lift_match_recognize(
        &mut self,
        statement: &mut Statement,
        cx: &StatementText,
    ) -> Result<()> {
        let mut lifter = Lifter {
            compiler: self,
            cx,
            error: None,
        };
        let _ = statement.visit(&mut lifter);
        match lifter.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn lift_one(&mut self, factor: TableFactor, cx: &StatementText) -> Result<TableFactor> {
        let TableFactor::MatchRecognize {
            table,
            partition_by,
            order_by,
            measures,
            rows_per_match,
            after_match_skip,
            pattern,
            symbols,
            alias,
        } = factor
        else {
            return Err(SqlError::Internal("not a MATCH_RECOGNIZE".into()));
        };
        let at = cx.anchor(&["MATCH_RECOGNIZE"]);
        // Errors of the MATCH_RECOGNIZE, and its input when planned, point
        // at it.
        let here = StatementText {
            at: at.clone(),
            ..cx.clone()
        };
        let fail = |message: String| SqlError::at(&at, format!("MATCH_RECOGNIZE: {message}"));
        if let Some(RowsPerMatch::AllRows(_)) = rows_per_match {
            return Err(fail("ALL ROWS PER MATCH is not supported; eddy reports ONE ROW PER MATCH (as Flink does): put what you need of each match's rows into MEASURES".into()));
        }
        let input =
            self.plan_statement(Statement::Query(Box::new(select_all_from(*table)?)), cx)?;
        let input_schema: DFSchemaRef = input.schema().clone();
        let input_arrow: SchemaRef = Arc::new(input_schema.as_arrow().clone());
        let state = self.ctx.state();
        let provider = DdlContext::new(&self.ctx, &state);
        let planner = SqlToRel::new_with_options(
            &provider,
            datafusion::sql::planner::ParserOptions::from(&state.config_options().sql_parser),
        );
        let to_logical = |expr: &SqlExpr, schema: &DFSchema| {
            planner
                .sql_to_expr(expr.clone(), schema, &mut PlannerContext::new())
                .map_err(|e| self.df_error(&here, e))
        };
        let to_physical = |expr: datafusion::logical_expr::Expr, schema: &DFSchema| {
            crate::context::physical_expr(&state, expr, schema).map_err(|e| self.df_error(&here, e))
        };

        // The pattern and its variables.
        let mut variables = Variables {
            keys: Vec::new(),
            names: Vec::new(),
        };
        let pattern = to_pattern(&pattern, &mut variables).map_err(|e| fail(e.to_string()))?;
        let mut within_ms = None;
        let mut definitions: Vec<Option<SqlExpr>> = vec![None; variables.keys.len()];
        for symbol in &symbols {
            if symbol.symbol.value == WITHIN_SYMBOL {
                let interval = to_logical(&symbol.definition, &input_schema)?;
                within_ms = Some(
                    crate::functions::windows::interval_expr_ms(&interval)
                        .filter(|ms| *ms > 0)
                        .ok_or_else(|| fail(format!("WITHIN takes a positive interval of fixed length (INTERVAL '10' MINUTE), not {}", symbol.definition)))?,
                );
                continue;
            }
            let Some(var) = variables.index(&symbol.symbol) else {
                return Err(fail(format!(
                    "DEFINE names '{}', which the PATTERN does not use",
                    symbol.symbol.value
                )));
            };
            if definitions[var].is_some() {
                return Err(fail(format!("'{}' is defined twice", symbol.symbol.value)));
            }
            definitions[var] = Some(symbol.definition.clone());
        }

        // ORDER BY: the event time first (checked against the stream when
        // planned), then any keys.
        let Some(first) = order_by.first() else {
            return Err(fail(
                "ORDER BY the event time is required: rows are matched in event-time order".into(),
            ));
        };
        let time_column = match &first.expr {
            SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_) => {
                match to_logical(&first.expr, &input_schema)? {
                    datafusion::logical_expr::Expr::Column(c) => {
                        input_schema.index_of_column(&c).ok()
                    }
                    _ => None,
                }
            }
            _ => None,
        }
        .filter(|_| first.options.asc != Some(false))
        .ok_or_else(|| {
            fail(format!(
                "ORDER BY must start with the event-time column, ascending (not {first})"
            ))
        })?;
        let time_name = input_schema.field(time_column).name().clone();
        let mut order_keys = Vec::new();
        for key in &order_by[1..] {
            let expr = to_logical(&key.expr, &input_schema)?;
            order_keys.push((
                to_physical(expr, &input_schema)?,
                key.options.asc == Some(false),
            ));
        }

        // Navigations of conditions and measures share the argument columns.
        let mut args: Vec<Arc<dyn datafusion::physical_expr::PhysicalExpr>> = Vec::new();
        let mut arg_of = |expr: Arc<dyn datafusion::physical_expr::PhysicalExpr>| {
            let text = expr.to_string();
            match args.iter().position(|a| a.to_string() == text) {
                Some(i) => i,
                None => {
                    args.push(expr);
                    args.len() - 1
                }
            }
        };
        // Navigations cut from an expression, numbered from `base`.
        let cut = |expr: &SqlExpr, base: usize| -> Result<(SqlExpr, Vec<NavigationSpec>)> {
            let mut expr = expr.clone();
            let mut cutter = NavigationCutter {
                variables: &variables,
                found: Vec::new(),
                base,
                error: None,
                time_column: &time_name,
            };
            let _ = expr.visit(&mut cutter);
            match cutter.error {
                Some(e) => Err(fail(e)),
                None => Ok((expr, cutter.found)),
            }
        };
        // Each navigation's type and argument column.
        let navigations =
            |specs: Vec<NavigationSpec>,
             arg_of: &mut dyn FnMut(Arc<dyn datafusion::physical_expr::PhysicalExpr>) -> usize|
             -> Result<Vec<Navigation>> {
                specs
                    .into_iter()
                    .map(|spec| {
                        let (arg, arg_type) = match &spec.arg {
                            Some(arg) => {
                                let logical = to_logical(arg, &input_schema)?;
                                let data_type = logical
                                    .get_type(&input_schema)
                                    .map_err(|e| self.df_error(&here, e))?;
                                (
                                    Some(arg_of(to_physical(logical, &input_schema)?)),
                                    data_type,
                                )
                            }
                            None => (None, DataType::Int64),
                        };
                        let data_type = match spec.reach {
                            Reach::Classifier => DataType::Utf8,
                            Reach::Aggregate(Aggregate::Count) => DataType::Int64,
                            Reach::Aggregate(Aggregate::Avg) => DataType::Float64,
                            Reach::Aggregate(Aggregate::Sum) => {
                                sum_type(&arg_type).ok_or_else(|| {
                                    fail(format!(
                                        "SUM of {arg_type} is not supported in MATCH_RECOGNIZE"
                                    ))
                                })?
                            }
                            _ => arg_type,
                        };
                        Ok(Navigation {
                            reach: spec.reach,
                            var: spec.var,
                            arg,
                            data_type,
                        })
                    })
                    .collect()
            };
        let nav_schema = |navigations: &[Navigation]| -> Result<DFSchema> {
            let fields: Vec<Field> = navigations
                .iter()
                .enumerate()
                .map(|(i, n)| Field::new(nav_column(i), n.data_type.clone(), true))
                .collect();
            DFSchema::try_from(Schema::new(fields)).map_err(|e| self.df_error(&here, e))
        };

        // DEFINE: a condition reading only the tested row becomes a column.
        let mut conditions = Vec::with_capacity(variables.keys.len());
        for (var, definition) in definitions.iter().enumerate() {
            let Some(definition) = definition else {
                conditions.push(Condition::Always);
                continue;
            };
            let (rewritten, specs) = cut(definition, 0)?;
            let row_only = specs
                .iter()
                .all(|s| s.reach == Reach::Last(0) && s.var.is_none_or(|v| v == var));
            let navs = navigations(specs, &mut arg_of)?;
            let schema = nav_schema(&navs)?;
            let logical = to_logical(&rewritten, &schema)?;
            let condition_type = logical
                .get_type(&schema)
                .map_err(|e| self.df_error(&here, e))?;
            if condition_type != DataType::Boolean && condition_type != DataType::Null {
                return Err(fail(format!(
                    "the condition of '{}' is {condition_type}, not a boolean",
                    variables.names[var]
                )));
            }
            if row_only {
                // The same condition over the input's own columns.
                let (_, stripped) = NavigationCutter {
                    variables: &variables,
                    found: Vec::new(),
                    base: 0,
                    error: None,
                    time_column: &time_name,
                }
                .unqualify(definition);
                let logical = to_logical(&stripped, &input_schema)?;
                conditions.push(Condition::Row(arg_of(to_physical(logical, &input_schema)?)));
            } else {
                let expr = to_physical(logical, &schema)?;
                conditions.push(Condition::Navigating {
                    navigations: navs,
                    schema: Arc::new(schema.as_arrow().clone()),
                    expr,
                });
            }
        }

        // Outputs: the partition columns, then the measures.
        let mut measure_specs = Vec::new();
        let mut output_exprs = Vec::new();
        let mut output_names = Vec::new();
        let mut partition_keys = Vec::new();
        for key in &partition_by {
            let logical = to_logical(key, &input_schema)?;
            let datafusion::logical_expr::Expr::Column(column) = &logical else {
                return Err(fail(format!("PARTITION BY takes columns, not {key}")));
            };
            output_names.push(column.name.clone());
            partition_keys.push(to_physical(logical.clone(), &input_schema)?);
            output_exprs.push(SqlExpr::Identifier(Ident::new(nav_column(
                measure_specs.len(),
            ))));
            measure_specs.push(NavigationSpec {
                reach: Reach::Last(0),
                var: None,
                arg: Some(SqlExpr::Identifier(Ident::with_quote(
                    '"',
                    column.name.clone(),
                ))),
            });
        }
        let mut rowtime_output = None;
        for measure in &measures {
            let (expr, specs) = cut(&measure.expr, measure_specs.len())?;
            if matches!(&measure.expr, SqlExpr::Function(f) if f.name.to_string().eq_ignore_ascii_case("match_rowtime"))
            {
                rowtime_output = Some(output_names.len());
            }
            measure_specs.extend(specs);
            output_exprs.push(expr);
            output_names.push(self.identifier_case().name(&measure.alias));
        }
        let measures = navigations(measure_specs, &mut arg_of)?;
        let measure_df = nav_schema(&measures)?;
        let mut outputs = Vec::new();
        let mut output_fields = Vec::new();
        for (expr, name) in output_exprs.iter().zip(&output_names) {
            let logical = to_logical(expr, &measure_df)?;
            let data_type = logical
                .get_type(&measure_df)
                .map_err(|e| self.df_error(&here, e))?;
            if output_fields.iter().any(|f: &Field| f.name() == name) {
                return Err(fail(format!("the output has two columns named '{name}'")));
            }
            output_fields.push(Field::new(name, data_type, true));
            outputs.push(to_physical(logical, &measure_df)?);
        }
        let output_schema = Arc::new(Schema::new(output_fields));

        let after_match = match &after_match_skip {
            None | Some(AfterMatchSkip::PastLastRow) => AfterMatch::PastLastRow,
            Some(AfterMatchSkip::ToNextRow) => AfterMatch::ToNextRow,
            Some(AfterMatchSkip::ToFirst(v)) | Some(AfterMatchSkip::ToLast(v)) => {
                let var = variables.index(v).ok_or_else(|| {
                    fail(format!(
                        "AFTER MATCH SKIP names '{}', which the PATTERN does not use",
                        v.value
                    ))
                })?;
                if matches!(after_match_skip, Some(AfterMatchSkip::ToFirst(_))) {
                    AfterMatch::ToFirst(var)
                } else {
                    AfterMatch::ToLast(var)
                }
            }
        };
        if let AfterMatch::ToFirst(var) = after_match {
            if pattern.first_variable() == Some(var) {
                return Err(fail(format!(
                    "AFTER MATCH SKIP TO FIRST {} would start every next match where the last one started ({} is always a match's first row); use SKIP TO NEXT ROW",
                    variables.names[var], variables.names[var]
                )));
            }
        }
        let plan = MatchRecognizePlan {
            input_schema: input_arrow,
            partition_by: partition_keys,
            time_column,
            order_by: order_keys,
            allowed_lateness_ms: 0,
            variables: variables.names,
            pattern,
            conditions,
            args,
            measures,
            measure_schema: Arc::new(measure_df.as_arrow().clone()),
            outputs,
            output_schema: output_schema.clone(),
            after_match,
            within_ms,
        };
        plan.program().map_err(|e| fail(e.to_string()))?;
        self.match_count += 1;
        let name = format!("match_recognize#{}", self.match_count);
        self.register(&name, output_schema, &cx.at)?;
        self.catalog.match_views.insert(
            name.clone(),
            MatchView {
                input,
                plan,
                rowtime_output,
                position: at.clone(),
                text: here.clone(),
            },
        );
        hidden_table(&name, alias)
    }

    /// The stream of a lifted `MATCH_RECOGNIZE` (its hidden table `name`).
    pub(super) fn match_stream(&mut self, name: &str) -> Result<Option<Stream>> {
        let Some(view) = self.catalog.match_views.get(name).cloned() else {
            return Ok(None);
        };
        self.note_columns_read(&view.input);
        let mut input = self.plan_stream(&view.input, &view.text)?;
        let fail =
            |message: String| SqlError::at(&view.position, format!("MATCH_RECOGNIZE: {message}"));
        input
            .append_only("MATCH_RECOGNIZE")
            .map_err(|m| fail(m.to_string()))?;
        let mut plan = view.plan;
        // ORDER BY a PROCTIME() column: rows are matched in the order they
        // are read, on the wall clock (a `processing_time` node stamps them).
        let ordered_by_proctime =
            crate::functions::flink::is_proctime(input.schema.field(plan.time_column));
        if ordered_by_proctime && input.time.map(|t| t.column) != Some(plan.time_column) {
            input = self.processing_time_clock(input, plan.time_column);
        }
        let Some(time) = input.time else {
            return Err(fail(format!(
                "its input needs event time: {}",
                input.why_no_time()
            )));
        };
        if time.column != plan.time_column {
            return Err(fail(format!(
                "ORDER BY must start with the event time '{}', not '{}': rows are matched in event-time order",
                input.schema.field(time.column).name(),
                input.schema.field(plan.time_column).name()
            )));
        }
        plan.allowed_lateness_ms = time.allowed_lateness_ms;
        // A state TTL bounds partial matches as it bounds joins: a match's
        // rows lie within the TTL of event time (WITHIN, if shorter, wins).
        if let Some(ttl) = self.state_ttl_ms {
            plan.within_ms = Some(plan.within_ms.map_or(ttl, |w| w.min(ttl)));
        }
        let output = plan.output_schema.clone();
        let from = input.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from]);
        let schema = DFSchema::try_from_qualified_schema(name, &output)
            .map_err(|e| self.df_error(&view.text, e))?;
        let mut stream = Stream::of_node(
            node,
            &self.graph,
            Arc::new(schema),
            view.rowtime_output.map(|column| TimeAttr {
                column,
                allowed_lateness_ms: 0,
                window_ms: None,
            }),
        );
        if view.rowtime_output.is_none() {
            stream.time_lost =
                Some("a MATCH_RECOGNIZE has event time only as a MATCH_ROWTIME() measure".into());
        }
        Ok(Some(stream))
    }
}

/// DataFusion's `SUM` result type for an argument type.
fn sum_type(arg: &DataType) -> Option<DataType> {
    Some(match arg {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => DataType::Int64,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            DataType::UInt64
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => DataType::Float64,
        DataType::Decimal128(p, s) => DataType::Decimal128((*p + 10).min(38), *s),
        DataType::Null => DataType::Int64,
        _ => return None,
    })
}
