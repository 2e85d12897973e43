//! The DataFusion session eddy plans with, and a [`ContextProvider`] over it
//! for DDL work that DataFusion's statement planner does not do for us
//! (column types of `CREATE TABLE`, computed-column expressions).
//!
//! The session has eddy's window functions registered, span collection on
//! (so planning errors carry positions) and no optimizer rules: eddy turns
//! the analyzed (type-coerced) logical plan into operators itself.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::{plan_datafusion_err, DFSchema, Result, TableReference};
use datafusion::datasource::provider_as_source;
use datafusion::execution::context::{SessionConfig, SessionContext, SessionState};
use datafusion::logical_expr::planner::{ContextProvider, ExprPlanner};
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::{AggregateUDF, HigherOrderUDF, ScalarUDF, TableSource, WindowUDF};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_expr::PhysicalExpr;

/// A session for planning streaming SQL.
pub fn new_session() -> SessionContext {
    let mut config = SessionConfig::new().with_information_schema(false);
    config.options_mut().sql_parser.collect_spans = true;
    config.options_mut().sql_parser.enable_ident_normalization = true;
    let ctx = SessionContext::new_with_config(config);
    crate::functions::register_all(&ctx);
    ctx
}

/// Resolves functions (and the session's own tables) for DDL planning.
pub struct DdlContext<'a> {
    state: &'a SessionState,
    ctx: &'a SessionContext,
}

impl<'a> DdlContext<'a> {
    /// Wraps a session.
    pub fn new(ctx: &'a SessionContext, state: &'a SessionState) -> Self {
        Self { state, ctx }
    }
}

impl ContextProvider for DdlContext<'_> {
    fn get_table_source(&self, name: TableReference) -> Result<Arc<dyn TableSource>> {
        let table = futures::executor::block_on(self.ctx.table_provider(name.clone()))
            .map_err(|_| plan_datafusion_err!("table '{name}' not found"))?;
        Ok(provider_as_source(table))
    }
    fn get_expr_planners(&self) -> &[Arc<dyn ExprPlanner>] {
        self.state.expr_planners()
    }
    fn get_function_meta(&self, name: &str) -> Option<Arc<ScalarUDF>> {
        self.state.scalar_functions().get(name).cloned()
    }
    fn get_higher_order_meta(&self, name: &str) -> Option<Arc<HigherOrderUDF>> {
        self.state.higher_order_functions().get(name).cloned()
    }
    fn get_aggregate_meta(&self, name: &str) -> Option<Arc<AggregateUDF>> {
        self.state.aggregate_functions().get(name).cloned()
    }
    fn get_window_meta(&self, name: &str) -> Option<Arc<WindowUDF>> {
        self.state.window_functions().get(name).cloned()
    }
    fn get_variable_type(&self, _names: &[String]) -> Option<DataType> {
        None
    }
    fn options(&self) -> &ConfigOptions {
        self.state.config_options()
    }
    fn udf_names(&self) -> Vec<String> {
        self.state.scalar_functions().keys().cloned().collect()
    }
    fn higher_order_function_names(&self) -> Vec<String> {
        self.state
            .higher_order_functions()
            .keys()
            .cloned()
            .collect()
    }
    fn udaf_names(&self) -> Vec<String> {
        self.state.aggregate_functions().keys().cloned().collect()
    }
    fn udwf_names(&self) -> Vec<String> {
        self.state.window_functions().keys().cloned().collect()
    }
}

/// Turns a logical expression over `schema` into a physical one the way
/// DataFusion's optimizer would see it: simplified (some functions, such as
/// `coalesce`, only run in simplified form), type-coerced, then planned.
pub fn physical_expr(
    state: &SessionState,
    expr: Expr,
    schema: &DFSchema,
) -> Result<Arc<dyn PhysicalExpr>> {
    let expr = simplify(state, expr, schema)?;
    state.create_physical_expr(expr, schema)
}

/// [`physical_expr`] for a projection's column: when simplifying the
/// expression changes its type from the one planned (DataFusion's `round`
/// of a DECIMAL reads its places only once they are a folded literal), the
/// value is cast back to `wanted`, the type the rest of the plan was built
/// on.
pub fn physical_expr_of_type(
    state: &SessionState,
    expr: Expr,
    schema: &DFSchema,
    wanted: &datafusion::arrow::datatypes::DataType,
) -> Result<Arc<dyn PhysicalExpr>> {
    let physical = physical_expr(state, expr, schema)?;
    if physical.data_type(schema.as_arrow())? == *wanted {
        return Ok(physical);
    }
    datafusion::physical_expr::expressions::cast(physical, schema.as_arrow(), wanted.clone())
}

/// Simplifies a logical expression over `schema`.
pub fn simplify(state: &SessionState, expr: Expr, schema: &DFSchema) -> Result<Expr> {
    let context = SimplifyContext::builder()
        .with_schema(Arc::new(schema.clone()))
        .with_config_options(Arc::clone(state.config_options()))
        .with_query_execution_start_time(state.execution_props().query_execution_start_time)
        .build();
    ExprSimplifier::new(context).simplify(expr)
}
