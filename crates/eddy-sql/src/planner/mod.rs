//! Compiles SQL files into a job graph.
//!
//! In: [`SqlFile`]s and `--set` parameters. Out: a [`CompiledJob`] whose
//! [`JobGraph`] the engine runs.
//!
//! Statements are handled in file order: `CREATE TABLE` declares a table,
//! `CREATE VIEW` names a query, `INSERT INTO sink SELECT ...` and bare
//! `SELECT`s (printed to stdout) are the job's outputs. A table that some
//! `INSERT` writes is a sink; every other table a query reads is a source.
//!
//! Each query goes through DataFusion's SQL planner and analyzer (name
//! resolution, type coercion) and is then translated node by node:
//!
//! | logical plan      | streaming plan                                         |
//! |-------------------|--------------------------------------------------------|
//! | TableScan (table) | the table's source node (one per table, shared), given |
//! |                   | the OR of its scans' WHERE to skip data by (`pushdown`) |
//! | TableScan (view)  | the view's stream (planned once, shared)               |
//! | late_rows(table)  | the table's source node, late port                     |
//! | bad_rows(table)   | the table's source node, bad port                      |
//! | Projection/Filter | a step of a fused `calc` node                           |
//! | Aggregate         | `window_aggregate` (tumble/hop/cumulate in GROUP BY),  |
//! |                   | `session_aggregate` (session in GROUP BY),             |
//! |                   | `updating_aggregate` (no window: an updating stream),  |
//! |                   | one of those per set, unioned (GROUPING SETS)          |
//! | Distinct          | `updating_aggregate` keyed by every column             |
//! | Union             | `union`                                                |
//! | Join              | `interval_join` (a time bound between the sides, or    |
//! |                   | the state TTL), `regular_join` (INNER, no bound),      |
//! |                   | `updating_join` (outer without a bound, over updating  |
//! |                   | inputs, semi and anti joins), `temporal_join` (FOR     |
//! |                   | SYSTEM_TIME AS OF the probe's event time)              |
//! | Filter (subquery) | decorrelated by DataFusion into a semi or anti join    |
//! | Window (OVER)     | `over` (ORDER BY event time, running frames)           |
//! | Sort              | `event_time_sort` (ORDER BY the event time first)      |
//! | Unnest            | `unnest` (lists; Flink's CROSS JOIN UNNEST)            |
//! | Window (ranking)  | `window_rank` (PARTITION BY the window: Top-N),        |
//! |                   | `updating_rank` (over the whole stream, WHERE rn <= N) |
//! | anything else     | rejected with the reason                               |
//!
//! Each stream is append-only or updating (`stream::Changelog`); see
//! `eddy_engine::changelog` for how updating rows are carried.
//!
//! The pieces: `declare` reads each statement into the `catalog` (what
//! was declared); `finish` (here) plans each output; `plan_input` turns a
//! logical plan into a stream node by node, passing down what a step asks
//! of the plan below it and the text of the statement being planned
//! (`statement_text`) as arguments; one module per kind of node does the
//! rest.

mod aggregate;
mod carry_time;
mod catalog;
mod change_feed;
mod declare;
mod grouping_sets;
mod insert_names;
mod join;
mod match_recognize;
mod memory_table;
mod not_in;
mod over;
mod plan_input;
mod processing_time;
mod pushdown;
mod python_functions;
mod rank;
mod sort;
mod statement_text;
mod stream;
mod unnest;
mod unplannable;
mod updating;
mod updating_over;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::common::DFSchema;
use datafusion::datasource::empty::EmptyTable;
use datafusion::error::DataFusionError;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::Statement;
use eddy_engine::graph::{ConnectorSpec, Edge, JobGraph, Node, NodeId, NodeKind};

use crate::context::new_session;
use crate::ddl::TableDef;
use crate::dialect::identifiers::IdentifierCase;
use crate::dialect::statements::parse_file;
use crate::error::{Position, Result, SqlError};
use crate::params::substitute;
use crate::side_streams::{SideSchemas, SideStream, SideStreamFunction, BAD_ROWS_OF, LATE_ROWS_OF};
use catalog::Catalog;
use eddy_engine::source::bad_rows::bad_row_schema;
use eddy_python::{PythonConfig, PythonRuntime};
use statement_text::StatementText;
use stream::{Endpoint, Stream, TimeAttr};

/// A SQL file to compile.
#[derive(Debug, Clone)]
pub struct SqlFile {
    /// Its name in error messages (a path, or `<sql>`).
    pub name: String,
    /// Its text.
    pub text: String,
}

/// The result of compilation.
#[derive(Debug, Clone)]
pub struct CompiledJob {
    /// The dataflow graph.
    pub graph: JobGraph,
    /// Declared tables by name.
    pub tables: BTreeMap<String, TableDef>,
    /// The job's Python functions, if it declares any (their workers start
    /// on the first call; [`PythonRuntime::check`] starts one early).
    pub python: Option<Arc<PythonRuntime>>,
}

/// How a job is compiled beyond its SQL and parameters.
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// How Python functions run; `None` refuses `CREATE FUNCTION ...
    /// LANGUAGE PYTHON` (a server without `--allow-python-udfs`).
    pub python: Option<PythonConfig>,
    /// Load each Python function as it is declared (a worker starts while
    /// planning), so that one that does not load is an error at its line.
    pub check_python_functions: bool,
    /// What the connectors say of their tables (which are read by key in
    /// a lookup join); `None`: every table is streamed.
    pub connectors: Option<Arc<dyn eddy_engine::graph::ConnectorFacts>>,
}

impl Default for CompileOptions {
    /// Python functions on, with `EDDY_PYTHON` or `python3`.
    fn default() -> Self {
        Self {
            python: Some(PythonConfig::from_env()),
            check_python_functions: true,
            connectors: None,
        }
    }
}

/// Compiles `files` with parameter values `params` into a job.
///
/// ```
/// use std::collections::BTreeMap;
/// use eddy_sql::{compile, SqlFile};
///
/// let files = [SqlFile {
///     name: "job.sql".into(),
///     text: "CREATE TABLE orders (customer VARCHAR, amount DOUBLE, ts TIMESTAMP,
///              WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
///            WITH (connector = 'file', path = '${INPUT}');
///            SELECT customer, count(*) AS n
///            FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
///            GROUP BY customer, window_start, window_end;"
///         .into(),
/// }];
/// let params = BTreeMap::from([("INPUT".to_string(), "orders.ndjson".to_string())]);
/// let job = compile(&files, &params).unwrap();
/// let plan = job.graph.explain();
/// assert!(plan.contains("source orders [connector=file"), "{plan}");
/// assert!(plan.contains("window_aggregate"), "{plan}");
///
/// // Errors name the file, line and column.
/// let typo = [SqlFile { name: "bad.sql".into(), text: "SELECT nope FROM nowhere;".into() }];
/// assert!(compile(&typo, &BTreeMap::new()).unwrap_err().to_string().starts_with("bad.sql:1:"));
/// ```
pub fn compile(files: &[SqlFile], params: &BTreeMap<String, String>) -> Result<CompiledJob> {
    compile_with(files, params, &CompileOptions::default())
}

/// [`compile`] with `options`.
pub fn compile_with(
    files: &[SqlFile],
    params: &BTreeMap<String, String>,
    options: &CompileOptions,
) -> Result<CompiledJob> {
    // Planning recurses through expressions (DataFusion and sqlparser both
    // do); a thread of its own with a large stack makes that independent of
    // the caller's thread (a server's worker threads have 2 MiB).
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("eddy-plan".into())
            .stack_size(PLANNING_STACK_BYTES)
            .spawn_scoped(scope, || compile_here(files, params, options))
            .map_err(|e| SqlError::Job(format!("cannot start the planning thread: {e}")))?
            .join()
            .map_err(|_| SqlError::Internal("the planner panicked".into()))?
    })
}

/// Stack of the planning thread (reserved, used only as deep as needed).
const PLANNING_STACK_BYTES: usize = 256 << 20;

fn compile_here(
    files: &[SqlFile],
    params: &BTreeMap<String, String>,
    options: &CompileOptions,
) -> Result<CompiledJob> {
    let mut compiler = Compiler::new(options.python.clone());
    compiler.check_python_functions = options.check_python_functions;
    compiler.connector_facts = options.connectors.clone();
    let mut used = BTreeSet::new();
    for file in files {
        let (text, map) = substitute(&file.name, &file.text, params, &mut used)?;
        for statement in parse_file(&text, &map)? {
            compiler.add_statement(statement, &map)?;
        }
    }
    let unknown: Vec<&String> = params.keys().filter(|k| !used.contains(*k)).collect();
    if !unknown.is_empty() {
        let names: Vec<&str> = unknown.iter().map(|s| s.as_str()).collect();
        return Err(SqlError::Job(format!(
            "--set {} names no parameter used by these queries",
            names.join(", ")
        )));
    }
    compiler.finish()
}

struct Output {
    sink: String,
    plan: LogicalPlan,
    /// Where the statement was written.
    text: StatementText,
    /// Where `EMIT ON WINDOW CLOSE` is written, if it is.
    emit_on_window_close: Option<Position>,
    /// Its `/*+ uid('...') */` name.
    uid: Option<String>,
}

/// A `CREATE VIEW`: its plan, planned into a stream where it is first read.
#[derive(Clone)]
struct View {
    plan: LogicalPlan,
    text: StatementText,
    emit_on_window_close: Option<Position>,
    /// What its operators are named by (`view <name>`, or `uid <name>`
    /// from a hint).
    named: String,
}

/// When a column was not found but one of another case was (`datetime`
/// asked, `dateTime` declared quoted), what to do about it.
fn case_hint(error: &DataFusionError, case: IdentifierCase) -> Option<String> {
    let DataFusionError::SchemaError(schema_error, _) = error.find_root() else {
        return None;
    };
    let datafusion::common::SchemaError::FieldNotFound {
        field,
        valid_fields,
    } = schema_error.as_ref()
    else {
        return None;
    };
    let missing = field.name.as_str();
    let candidate = valid_fields
        .iter()
        .map(|c| c.name.as_str())
        .find(|c| c.eq_ignore_ascii_case(missing) && *c != missing)?;
    Some(match case {
        IdentifierCase::Fold => format!(
            "unquoted names are folded to lower case: write \"{candidate}\" (quoted), or SET 'sql.case-sensitive' = 'true' to read every name as written, as Flink does"
        ),
        IdentifierCase::Sensitive => format!(
            "names are read as written ('sql.case-sensitive' is set): write {candidate}"
        ),
    })
}

/// Holds declarations while statements are read, then builds the graph.
pub(crate) struct Compiler {
    ctx: SessionContext,
    late_schemas: SideSchemas,
    bad_schemas: SideSchemas,
    /// What the statements declared.
    catalog: Catalog,
    graph: JobGraph,
    source_nodes: HashMap<String, NodeId>,
    /// What each scan of a source asks of its rows (filter pushdown).
    source_scans: pushdown::SourceScans,
    /// `VALUES` lists planned so far (each is a source of its own).
    values_count: usize,
    match_count: usize,
    /// Upsert feeds: the changelog step behind each one's source.
    normalized: HashMap<String, NodeId>,
    view_streams: HashMap<String, Stream>,
    /// Memory tables whose inserts are being planned (a cycle check).
    memory_planning: BTreeSet<String>,
    /// `SET 'table.exec.state.ttl'`: drop idle keys' OVER state after this
    /// long, bound joins of append-only streams to rows at most this far
    /// apart in event time, and let updating operators (GROUP BY, Top-N,
    /// regular joins) forget keys the watermark passed by this much.
    state_ttl_ms: Option<i64>,
    /// How Python functions run (`None`: refused).
    python_config: Option<PythonConfig>,
    /// The job's Python functions, from the first `CREATE FUNCTION`.
    python: Option<Arc<PythonRuntime>>,
    /// See [`CompileOptions::check_python_functions`].
    check_python_functions: bool,
    /// See [`CompileOptions::connectors`].
    connector_facts: Option<Arc<dyn eddy_engine::graph::ConnectorFacts>>,
}

impl Compiler {
    fn new(python_config: Option<PythonConfig>) -> Self {
        let ctx = new_session();
        let late_schemas = SideSchemas::default();
        let bad_schemas = SideSchemas::default();
        for (kind, schemas) in [
            (SideStream::Late, &late_schemas),
            (SideStream::Bad, &bad_schemas),
        ] {
            ctx.register_udtf(
                kind.function(),
                Arc::new(SideStreamFunction::new(kind, schemas.clone())),
            );
        }
        Self {
            ctx,
            late_schemas,
            bad_schemas,
            catalog: Catalog::default(),
            graph: JobGraph::default(),
            source_nodes: HashMap::new(),
            source_scans: Default::default(),
            values_count: 0,
            match_count: 0,
            normalized: HashMap::new(),
            view_streams: HashMap::new(),
            memory_planning: BTreeSet::new(),
            state_ttl_ms: None,
            python_config,
            python: None,
            check_python_functions: false,
            connector_facts: None,
        }
    }

    /// `CREATE VIEW v (a, b) AS ...`: the query's columns renamed, in
    /// order (as many names as columns); without a list, as they are.
    fn name_view_columns(
        &self,
        view: &str,
        columns: &[datafusion::sql::sqlparser::ast::ViewColumnDef],
        plan: LogicalPlan,
        cx: &StatementText,
    ) -> Result<LogicalPlan> {
        if columns.is_empty() {
            return Ok(plan);
        }
        let count = plan.schema().fields().len();
        if columns.len() != count {
            return Err(SqlError::at(
                &cx.at,
                format!(
                    "view '{view}' names {} columns but its query has {count}",
                    columns.len()
                ),
            ));
        }
        let renamed: Vec<Expr> = plan
            .schema()
            .iter()
            .zip(columns)
            .map(|((qualifier, field), column)| {
                let name = self.identifier_case().name(&column.name);
                Expr::Column(datafusion::common::Column::new(
                    qualifier.cloned(),
                    field.name(),
                ))
                .alias(name)
            })
            .collect();
        datafusion::logical_expr::LogicalPlanBuilder::from(plan)
            .project(renamed)
            .and_then(|b| b.build())
            .map_err(|e| self.df_error(cx, e))
    }

    /// A DataFusion error as a positioned user error: at its own span in
    /// the statement `cx` if it has one, else at the statement.
    fn df_error(&self, cx: &StatementText, error: DataFusionError) -> SqlError {
        let position = error
            .diagnostic()
            .and_then(|d| d.span)
            .map(|span| cx.map.position(span.start.line, span.start.column))
            .unwrap_or_else(|| cx.at.clone());
        let full = error.strip_backtrace();
        let mut message = match error.diagnostic() {
            Some(d) => {
                let mut message = d.message.clone();
                for extra in d
                    .notes
                    .iter()
                    .map(|n| &n.message)
                    .chain(d.helps.iter().map(|h| &h.message))
                {
                    message.push_str("; ");
                    message.push_str(extra);
                }
                message
            }
            None => full.clone(),
        };
        if let Some(hint) = case_hint(&error, self.identifier_case()) {
            message.push_str("; ");
            message.push_str(&hint);
        }
        // DataFusion's own suggestion ("Did you mean 'sqrt'?") when the
        // diagnostic left it out.
        let has_help = error
            .diagnostic()
            .is_some_and(|d| !d.helps.is_empty() || !d.notes.is_empty());
        if let Some(hint) = full
            .lines()
            .find(|l| !has_help && l.trim_start().starts_with("Did you mean"))
        {
            if !message.contains(hint.trim()) {
                message.push_str("; ");
                message.push_str(hint.trim());
            }
        }
        SqlError::at(&position, message)
    }

    fn register(
        &self,
        name: &str,
        schema: datafusion::arrow::datatypes::SchemaRef,
        position: &Position,
    ) -> Result<()> {
        let provider: Arc<dyn TableProvider> = Arc::new(EmptyTable::new(schema));
        // The name as the session's rule read it: not parsed (and so
        // folded) again.
        let reference = datafusion::common::TableReference::bare(name);
        if self.ctx.table_exist(reference.clone()).unwrap_or(false) {
            return Err(SqlError::at(
                position,
                format!("'{name}' is already defined"),
            ));
        }
        self.ctx
            .register_table(reference, provider)
            .map_err(|e| SqlError::at(position, e.strip_backtrace()))?;
        Ok(())
    }

    /// How names are read now (see `dialect::identifiers`).
    pub(crate) fn identifier_case(&self) -> IdentifierCase {
        IdentifierCase::of(self.ctx.state().config_options())
    }

    fn plan_statement(&self, statement: Statement, cx: &StatementText) -> Result<LogicalPlan> {
        if let Some((construct, span)) = unplannable::unplannable_relation(&statement) {
            let at = match span.start.line {
                0 => cx.at.clone(),
                line => cx.map.position(line, span.start.column),
            };
            return Err(SqlError::at(
                &at,
                format!("eddy cannot run {construct} yet"),
            ));
        }
        let state = self.ctx.state();
        let plan = futures::executor::block_on(
            state.statement_to_plan(DFStatement::Statement(Box::new(statement))),
        )
        .map_err(|e| self.df_error(cx, e))?;
        state
            .analyzer()
            .execute_and_check(plan, state.config_options(), |_, _| {})
            .map_err(|e| self.df_error(cx, e))
    }

    /// Names the operators planned from node `first` on that no inner
    /// view named already (see `JobGraph::named_identities`).
    fn name_operators(&mut self, first: NodeId, named: &str) {
        for node in self.graph.nodes.iter_mut().skip(first) {
            if matches!(node.kind, NodeKind::Operator(_)) && node.uid.is_none() {
                node.uid = Some(named.to_string());
            }
        }
    }

    fn finish(mut self) -> Result<CompiledJob> {
        if self.catalog.outputs.is_empty() {
            return Err(SqlError::NothingToRun);
        }
        let outputs = std::mem::take(&mut self.catalog.outputs);
        let mut sink_inputs: BTreeMap<String, Vec<Endpoint>> = BTreeMap::new();
        for output in &outputs {
            let first = self.graph.nodes.len();
            self.note_columns_read(&output.plan);
            let mut stream = self.plan_stream(&output.plan, &output.text)?;
            check_emit_on_window_close(&stream, output.emit_on_window_close.as_ref())?;
            let endpoint = stream.materialize(&mut self.graph);
            if let Some(uid) = &output.uid {
                self.name_operators(first, uid);
            }
            sink_inputs
                .entry(output.sink.clone())
                .or_default()
                .push(endpoint);
        }
        for (sink, endpoints) in sink_inputs {
            let def = self
                .catalog
                .tables
                .get(&sink)
                .ok_or_else(|| SqlError::Internal(format!("sink '{sink}' is not declared")))?;
            if def.layout.event_time.is_some() {
                tracing::debug!(sink = %sink, "the watermark of a sink table is ignored");
            }
            if def.declared_role.as_deref() == Some("source") {
                return Err(SqlError::at(
                    &def.position,
                    format!(
                        "table '{sink}' is declared type = 'source': a query cannot INSERT INTO it"
                    ),
                ));
            }
            self.graph.add(Node {
                name: sink.clone(),
                kind: NodeKind::Sink {
                    spec: self.sink_spec(def),
                },
                inputs: endpoints
                    .into_iter()
                    .map(|e| Edge::new(e.node, e.port))
                    .collect(),
                schema: def.schema(),
                uid: None,
            });
        }
        self.push_source_filters();
        self.graph.prune_dead_operators();
        Ok(CompiledJob {
            graph: self.graph,
            tables: self.catalog.tables,
            python: self.python,
        })
    }

    /// A sink table as its connector sees it, with what the connector adds
    /// about it to `eddy explain` (when the connectors are known).
    fn sink_spec(&self, def: &TableDef) -> ConnectorSpec {
        let mut spec = def.connector_spec();
        spec.explain = self
            .connector_facts
            .as_deref()
            .and_then(|facts| facts.explain_sink(&spec));
        spec
    }

    /// Notes which columns of each source table `plan` (a query, or a
    /// view's) reads, as DataFusion's projection pruning
    /// (`OptimizeProjections`) finds them: every scan of a source in the
    /// pruned plan says which columns it keeps. The plan itself is planned
    /// as written; a plan the rule cannot take notes nothing, so its
    /// scans leave their tables read whole ([`pushdown::SourceScans::unread`]
    /// counts them against the scans planned).
    pub(super) fn note_columns_read(&mut self, plan: &LogicalPlan) {
        use datafusion::common::tree_node::TreeNodeRecursion;
        use datafusion::optimizer::optimize_projections::OptimizeProjections;
        use datafusion::optimizer::{OptimizerContext, OptimizerRule};
        let Ok(pruned) = OptimizeProjections::new().rewrite(plan.clone(), &OptimizerContext::new())
        else {
            return;
        };
        let mut reads = Vec::new();
        let _ = pruned.data.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node {
                let metadata = scan.source.schema().metadata().clone();
                let name = scan.table_name.table().to_string();
                let side =
                    metadata.contains_key(LATE_ROWS_OF) || metadata.contains_key(BAD_ROWS_OF);
                if !side
                    && self.catalog.tables.contains_key(&name)
                    && !self.catalog.views.contains_key(&name)
                {
                    let columns: Vec<usize> = match &scan.projection {
                        Some(projection) => projection.clone(),
                        None => (0..scan.source.schema().fields().len()).collect(),
                    };
                    reads.push((name, columns));
                }
            }
            Ok(TreeNodeRecursion::Continue)
        });
        for (table, columns) in reads {
            self.source_scans.read(&table, columns);
        }
    }

    /// Hands each source the condition every query reading it asks, and
    /// the columns none of them reads (see [`pushdown`]).
    fn push_source_filters(&mut self) {
        let unread = self
            .source_scans
            .unread(|table| self.catalog.tables.get(table));
        for (table, columns) in unread {
            let Some(&node) = self.source_nodes.get(&table) else {
                continue;
            };
            if let NodeKind::Source { spec, .. } = &mut self.graph.nodes[node].kind {
                spec.unread_columns = columns;
            }
        }
        let state = self.ctx.state();
        for (table, condition) in std::mem::take(&mut self.source_scans).pushed() {
            let (Some(&node), Some(def)) = (
                self.source_nodes.get(&table),
                self.catalog.tables.get(&table),
            ) else {
                continue;
            };
            match pushdown::source_filter(&state, def, condition) {
                Ok(filter) => {
                    if let NodeKind::Source { spec, .. } = &mut self.graph.nodes[node].kind {
                        spec.filter = Some(filter);
                    }
                }
                // Advisory: the query's own filter still runs.
                Err(e) => tracing::debug!(table = %table, "no filter pushed: {e}"),
            }
        }
    }

    fn source_stream(&mut self, name: &str, cx: &StatementText) -> Result<Stream> {
        if self.catalog.sinks.contains(name) {
            return Err(SqlError::at(&cx.at,
                format!("table '{name}' is written by an INSERT and read by a query; to reuse a query's result, declare it as a VIEW"),
            ));
        }
        let def = self
            .catalog
            .tables
            .get(name)
            .ok_or_else(|| SqlError::at(&cx.at, format!("table '{name}' not found")))?
            .clone();
        if def.declared_role.as_deref() == Some("sink") {
            return Err(SqlError::at(
                &cx.at,
                format!(
                    "table '{name}' is declared type = 'sink' (at {}): a query cannot read it",
                    def.position
                ),
            ));
        }
        let feed = change_feed::of(&def, self.connector_facts.as_deref())?;
        self.source_scans.scanned(name, feed.is_some());
        let layout = match &feed {
            Some(feed) => feed.layout.clone(),
            None => def.layout.clone(),
        };
        let node = match self.source_nodes.get(name) {
            Some(&node) => node,
            None => {
                let node = self.graph.add(Node {
                    name: name.to_string(),
                    kind: NodeKind::Source {
                        spec: ConnectorSpec {
                            table: name.to_string(),
                            connector: def.connector.clone(),
                            options: def.options.clone(),
                            schema: layout.physical_schema.clone(),
                            declared_at: Some(def.position.clone()),
                            primary_key: def.primary_key.clone(),
                            filter: None,
                            unread_columns: Vec::new(),
                            explain: None,
                        },
                        layout: layout.clone(),
                    },
                    inputs: Vec::new(),
                    schema: layout.output_schema.clone(),
                    uid: None,
                });
                self.source_nodes.insert(name.to_string(), node);
                node
            }
        };
        // An upsert feed's rows become a changelog behind the source.
        let node = match (&feed, self.normalized.get(name)) {
            (_, Some(&normalized)) => normalized,
            (Some(feed), None) if feed.upsert => {
                let schema = layout.output_schema.clone();
                let keys = def
                    .primary_key
                    .iter()
                    .map(|k| datafusion::physical_expr::expressions::col(k, &schema))
                    .collect::<datafusion::error::Result<Vec<_>>>()
                    .map_err(|e| self.df_error(cx, e))?;
                let plan = eddy_engine::operators::changelog_normalize::ChangelogNormalizePlan {
                    schema,
                    keys: keys.clone(),
                };
                let normalized = stream::add_operator(
                    &mut self.graph,
                    Arc::new(plan),
                    vec![Endpoint { node, port: 0 }],
                );
                self.normalized.insert(name.to_string(), normalized);
                normalized
            }
            _ => node,
        };
        let schema = DFSchema::try_from_qualified_schema(name, def.schema().as_ref())
            .map_err(|e| self.df_error(cx, e))?;
        Ok(Stream {
            time_lost: None,
            changelog: feed.map(|f| f.changelog),
            windows: Vec::new(),
            endpoint: Endpoint { node, port: 0 },
            endpoint_schema: layout.output_schema.clone(),
            steps: Vec::new(),
            schema: Arc::new(schema),
            time: def.layout.event_time.map(|et| TimeAttr {
                column: et.column,
                allowed_lateness_ms: et.allowed_lateness_ms,
                window_ms: None,
            }),
        })
    }

    /// `VALUES (...), (...)`: a bounded source of the `values` connector
    /// holding the rows (evaluated now, as NDJSON in its `rows` option).
    /// It has no event time, so it feeds what needs none: set operations,
    /// updating aggregates, joins without a time bound.
    fn values_stream(&mut self, plan: &LogicalPlan, cx: &StatementText) -> Result<Stream> {
        let batches = futures::executor::block_on(async {
            self.ctx
                .execute_logical_plan(plan.clone())
                .await?
                .collect()
                .await
        })
        .map_err(|e| self.df_error(cx, e))?;
        let mut rows = Vec::new();
        {
            let mut writer = datafusion::arrow::json::LineDelimitedWriter::new(&mut rows);
            for batch in &batches {
                writer
                    .write(batch)
                    .map_err(|e| SqlError::at(&cx.at, format!("VALUES: {e}")))?;
            }
            writer
                .finish()
                .map_err(|e| SqlError::at(&cx.at, format!("VALUES: {e}")))?;
        }
        let schema: datafusion::arrow::datatypes::SchemaRef =
            Arc::new(plan.schema().as_arrow().clone());
        self.values_count += 1;
        let name = format!("values#{}", self.values_count);
        let layout = eddy_engine::source::SourceLayout {
            physical_schema: schema.clone(),
            output_schema: schema.clone(),
            columns: (0..schema.fields().len())
                .map(eddy_engine::source::SourceColumn::Physical)
                .collect(),
            event_time: None,
            idle_timeout: None,
            bad_rows: Default::default(),
            change_feed_key: None,
        };
        let node = self.graph.add(Node {
            name: name.clone(),
            kind: NodeKind::Source {
                spec: ConnectorSpec {
                    table: name,
                    // `eddy_connectors::values`: the rows as NDJSON.
                    connector: "values".into(),
                    options: [(
                        "rows".to_string(),
                        String::from_utf8_lossy(&rows).into_owned(),
                    )]
                    .into_iter()
                    .collect(),
                    schema: schema.clone(),
                    declared_at: Some(cx.at.clone()),
                    primary_key: Vec::new(),
                    filter: None,
                    unread_columns: Vec::new(),
                    explain: None,
                },
                layout,
            },
            inputs: Vec::new(),
            schema: schema.clone(),
            uid: None,
        });
        Ok(Stream {
            time_lost: Some(
                "a VALUES list has no event time (its rows are read once, in no time order)".into(),
            ),
            changelog: None,
            windows: Vec::new(),
            endpoint: Endpoint { node, port: 0 },
            endpoint_schema: schema,
            steps: Vec::new(),
            schema: plan.schema().clone(),
            time: None,
        })
    }

    /// The rows source `table` diverted as late (its late port).
    fn late_stream(&mut self, table: &str, cx: &StatementText) -> Result<Stream> {
        let main = self.source_stream(table, cx)?;
        self.source_scans.scanned(table, true);
        let def = self
            .catalog
            .tables
            .get(table)
            .ok_or_else(|| SqlError::at(&cx.at, format!("table '{table}' not found")))?;
        let late_schema = def.layout.late_schema();
        let schema = DFSchema::try_from_qualified_schema(table, late_schema.as_ref())
            .map_err(|e| self.df_error(cx, e))?;
        Ok(Stream {
            time_lost: None,
            changelog: None,
            windows: Vec::new(),
            endpoint: Endpoint {
                node: self
                    .source_nodes
                    .get(table)
                    .copied()
                    .unwrap_or(main.endpoint.node),
                port: eddy_engine::operator::LATE_PORT,
            },
            endpoint_schema: late_schema,
            steps: Vec::new(),
            schema: Arc::new(schema),
            time: main.time.map(|t| TimeAttr {
                column: t.column,
                allowed_lateness_ms: 0,
                window_ms: None,
            }),
        })
    }

    /// The rows source `table` found bad (its bad port); time attribute
    /// `arrival_time`.
    fn bad_stream(&mut self, table: &str, cx: &StatementText) -> Result<Stream> {
        let main = self.source_stream(table, cx)?;
        self.source_scans.scanned(table, true);
        let bad_schema = bad_row_schema();
        let schema = DFSchema::try_from_qualified_schema(table, bad_schema.as_ref())
            .map_err(|e| self.df_error(cx, e))?;
        Ok(Stream {
            time_lost: None,
            changelog: None,
            windows: Vec::new(),
            endpoint: Endpoint {
                node: self
                    .source_nodes
                    .get(table)
                    .copied()
                    .unwrap_or(main.endpoint.node),
                port: eddy_engine::operator::BAD_PORT,
            },
            endpoint_schema: bad_schema,
            steps: Vec::new(),
            schema: Arc::new(schema),
            time: Some(TimeAttr {
                column: eddy_engine::source::bad_rows::ARRIVAL_TIME_COLUMN,
                allowed_lateness_ms: 0,
                window_ms: None,
            }),
        })
    }
}

/// A query's output columns holding JSON unions (what `->` and `json_get`
/// return) as their JSON text: sinks write text, not unions.
fn json_unions_as_text(plan: LogicalPlan) -> datafusion::error::Result<LogicalPlan> {
    use crate::functions::arroyo_json::{is_json_union, union_to_text};
    if !plan
        .schema()
        .fields()
        .iter()
        .any(|f| is_json_union(f.data_type()))
    {
        return Ok(plan);
    }
    let exprs: Vec<Expr> = plan
        .schema()
        .iter()
        .map(|(qualifier, field)| {
            let column = Expr::Column(datafusion::common::Column::from((qualifier, field)));
            if is_json_union(field.data_type()) {
                union_to_text(column).alias(field.name())
            } else {
                column
            }
        })
        .collect();
    datafusion::logical_expr::LogicalPlanBuilder::from(plan)
        .project(exprs)?
        .build()
}

/// RisingWave's `EMIT ON WINDOW CLOSE` asks for final rows only: what
/// eddy's append-only streams emit (a window's rows once the watermark has
/// closed it). An updating query cannot honour it: refused, naming why.
fn check_emit_on_window_close(stream: &Stream, at: Option<&Position>) -> Result<()> {
    match (at, &stream.changelog) {
        (Some(at), Some(changelog)) => Err(SqlError::at(
            at,
            format!(
                "EMIT ON WINDOW CLOSE asks for final rows only, but this query's rows change as input arrives ({}); group by a window (TUMBLE, HOP, CUMULATE, SESSION) to have each window's rows emitted once, when the watermark closes it",
                changelog.origin
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_of_another_case_is_pointed_at() {
        use datafusion::common::{Column, SchemaError};
        let not_found = |missing: &str, valid: &[&str]| {
            DataFusionError::SchemaError(
                Box::new(SchemaError::FieldNotFound {
                    field: Box::new(Column::new(Some("a"), missing)),
                    valid_fields: valid.iter().map(|c| Column::new(Some("b"), *c)).collect(),
                }),
                Box::new(None),
            )
            .context("planning")
        };
        let hint = case_hint(
            &not_found("datetime", &["dateTime", "y"]),
            IdentifierCase::Fold,
        )
        .unwrap();
        assert!(hint.contains("write \"dateTime\" (quoted)"), "{hint}");
        assert!(case_hint(&not_found("x", &["y"]), IdentifierCase::Fold).is_none());
        assert!(
            case_hint(
                &DataFusionError::Plan(
                    "column 'datetime' not found; possible column b.dateTime".into()
                ),
                IdentifierCase::Fold
            )
            .is_none(),
            "text is not read"
        );
    }

    fn compiled(text: &str) -> Result<CompiledJob> {
        compile(
            &[SqlFile {
                name: "job.sql".into(),
                text: text.into(),
            }],
            &BTreeMap::new(),
        )
    }

    const ORDERS: &str = "CREATE TABLE orders (customer VARCHAR, amount DOUBLE, ts TIMESTAMP,
          WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'file', path = 'o.ndjson');
        CREATE TABLE out (customer VARCHAR, n BIGINT) WITH (connector = 'ndjson', path = 'n.ndjson');";

    /// The names of the columns of `table`'s source that no query reads.
    fn unread(job: &CompiledJob, table: &str) -> Vec<String> {
        job.graph
            .nodes
            .iter()
            .find_map(|n| match &n.kind {
                NodeKind::Source { spec, .. } if spec.table == table => Some(
                    spec.unread_columns
                        .iter()
                        .map(|&c| spec.schema.field(c).name().clone())
                        .collect(),
                ),
                _ => None,
            })
            .unwrap()
    }

    #[test]
    fn a_source_leaves_the_columns_no_query_reads_unread() {
        let per_customer = "INSERT INTO out SELECT customer, count(*)
            FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
            GROUP BY customer, window_start, window_end;";
        // The event time is read whether a query reads it or not.
        let job = compiled(&format!("{ORDERS} {per_customer}")).unwrap();
        assert_eq!(unread(&job, "orders"), ["amount"]);
        // Another query reading it, through a view and a WHERE.
        let job = compiled(&format!(
            "{ORDERS} {per_customer}
            CREATE VIEW big AS SELECT customer FROM orders WHERE amount > 10;
            INSERT INTO out SELECT customer, 1 FROM big;"
        ))
        .unwrap();
        assert!(unread(&job, "orders").is_empty());
        // Late rows are whole rows.
        let job = compiled(&format!(
            "{ORDERS} {per_customer}
            INSERT INTO out SELECT customer, 1 FROM late_rows(orders);"
        ))
        .unwrap();
        assert!(unread(&job, "orders").is_empty());
        // A computed column's inputs are read: `ms` makes the event time.
        let job = compiled(
            "CREATE TABLE t (id VARCHAR, note VARCHAR, amount DOUBLE, ms BIGINT,
               ts AS TO_TIMESTAMP_LTZ(ms, 3), big AS amount > 10,
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'file', path = 't');
             CREATE TABLE out (id VARCHAR, n BIGINT) WITH (connector = 'ndjson', path = 'n');
             INSERT INTO out SELECT id, count(*)
             FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
             GROUP BY id, window_start, window_end;",
        )
        .unwrap();
        assert_eq!(unread(&job, "t"), ["note"]);
        assert!(job.graph.explain().contains("columns no query reads: note"));
    }

    #[test]
    fn a_uid_hint_or_a_view_names_the_operators_planned_for_it() {
        let job = compiled(&format!(
            "{ORDERS}
            CREATE VIEW big AS SELECT customer, ts FROM orders WHERE amount > 10;
            INSERT INTO out SELECT /*+ uid('per_customer') */ customer, count(*)
            FROM TABLE(TUMBLE(TABLE big, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
            GROUP BY customer, window_start, window_end;"
        ))
        .unwrap();
        let named: Vec<String> = job
            .graph
            .named_identities()
            .into_iter()
            .flatten()
            .map(|n| n.name)
            .collect();
        assert!(named.contains(&"source orders".to_string()), "{named:?}");
        assert!(named.contains(&"sink out".to_string()), "{named:?}");
        assert!(named.contains(&"view big: calc 0".to_string()), "{named:?}");
        assert!(
            named.contains(&"uid per_customer: window_aggregate 0".to_string()),
            "{named:?}"
        );
    }

    #[test]
    fn a_uid_given_twice_or_on_a_table_is_refused() {
        let twice = compiled(&format!(
            "{ORDERS}
            INSERT INTO out SELECT /*+ uid('q') */ customer, 1 FROM orders;
            INSERT INTO out SELECT /*+ uid('q') */ customer, 2 FROM orders;"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            twice.starts_with("job.sql:5:")
                && twice.contains("already the name of the statement at job.sql:4:"),
            "{twice}"
        );
        let on_table = compiled(&format!(
            "{ORDERS} CREATE TABLE /*+ uid('t') */ t (a INT) WITH (connector = 'stdout');"
        ))
        .unwrap_err()
        .to_string();
        assert!(on_table.contains("belongs in an INSERT"), "{on_table}");
    }
}
