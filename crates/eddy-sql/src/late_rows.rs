//! `late_rows(table)`: the rows a source diverted as late, as a table
//! function usable anywhere a table is.
//!
//! In SQL it has the table's columns plus `watermark_ms` (the watermark that
//! judged the row late) and `lag_ms` (watermark - event time). The planner
//! recognises the function's scan by a schema metadata key and reads the
//! source node's late port instead of its main output. The late stream keeps
//! each row's event time as its time attribute and has a watermark of its
//! own (see `eddy_engine::source`).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, Result, ScalarValue};
use datafusion::datasource::empty::EmptyTable;
use datafusion::logical_expr::Expr;

/// Schema metadata key naming the table whose late rows a scan reads.
pub const LATE_ROWS_OF: &str = "eddy.late_rows_of";

/// Late-row schemas by table, shared between the compiler (which declares
/// tables) and the function (which DataFusion calls while planning).
pub type LateSchemas = Arc<RwLock<BTreeMap<String, SchemaRef>>>;

/// The `late_rows` table function.
#[derive(Debug)]
pub struct LateRowsFunction {
    schemas: LateSchemas,
}

impl LateRowsFunction {
    /// A function resolving tables in `schemas`.
    pub fn new(schemas: LateSchemas) -> Self {
        Self { schemas }
    }
}

impl TableFunctionImpl for LateRowsFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let name = match args.exprs() {
            [Expr::Column(c)] if c.relation.is_none() => c.name.clone(),
            [Expr::Literal(ScalarValue::Utf8(Some(s)), _)] => s.clone(),
            _ => {
                return plan_err!(
                    "late_rows() takes one source table name, e.g. late_rows(devices)"
                )
            }
        };
        let name = name.to_lowercase();
        let schemas = self
            .schemas
            .read()
            .map_err(|_| datafusion::error::DataFusionError::Internal("lock".into()))?;
        let Some(schema) = schemas.get(&name) else {
            return plan_err!(
                "late_rows({name}): no source table '{name}' with a WATERMARK (only tables with event time have late rows)"
            );
        };
        let mut metadata = schema.metadata().clone();
        metadata.insert(LATE_ROWS_OF.to_string(), name);
        let schema = Arc::new(Schema::new_with_metadata(schema.fields().clone(), metadata));
        Ok(Arc::new(EmptyTable::new(schema)))
    }
}
