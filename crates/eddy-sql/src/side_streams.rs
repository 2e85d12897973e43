//! `late_rows(table)` and `bad_rows(table)`: the rows a source set aside,
//! as table functions usable anywhere a table is.
//!
//! - `late_rows(t)` has the table's columns plus `watermark_ms` (the
//!   watermark that judged the row late) and `lag_ms` (watermark - event
//!   time); it exists for tables with a WATERMARK. The late stream keeps
//!   each row's event time as its time attribute and has a watermark of its
//!   own (see `eddy_engine::source`).
//! - `bad_rows(t)` has `source, path, line, offset, column_name, reason,
//!   raw, arrival_time` (see `eddy_engine::source::bad_rows`); it exists for
//!   every source table. Its time attribute is `arrival_time`.
//!
//! The planner recognises a function's scan by a schema metadata key and
//! reads the source node's late or bad port instead of its main output.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{plan_err, Result, ScalarValue};
use datafusion::datasource::empty::EmptyTable;
use datafusion::logical_expr::Expr;

/// Schema metadata key naming the table whose late rows a scan reads.
pub const LATE_ROWS_OF: &str = "eddy.late_rows_of";

/// Schema metadata key naming the table whose bad rows a scan reads.
pub const BAD_ROWS_OF: &str = "eddy.bad_rows_of";

/// Side-stream schemas by table, shared between the compiler (which
/// declares tables) and the functions (which DataFusion calls while
/// planning).
pub type SideSchemas = Arc<RwLock<BTreeMap<String, SchemaRef>>>;

/// Which rows a side stream holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideStream {
    /// Rows judged late (`late_rows`).
    Late,
    /// Rows that could not be read or judged (`bad_rows`).
    Bad,
}

impl SideStream {
    /// The function's SQL name.
    pub fn function(self) -> &'static str {
        match self {
            Self::Late => "late_rows",
            Self::Bad => "bad_rows",
        }
    }

    /// The schema metadata key marking a scan of this stream.
    pub fn metadata_key(self) -> &'static str {
        match self {
            Self::Late => LATE_ROWS_OF,
            Self::Bad => BAD_ROWS_OF,
        }
    }
}

/// The `late_rows` or `bad_rows` table function.
#[derive(Debug)]
pub struct SideStreamFunction {
    kind: SideStream,
    schemas: SideSchemas,
}

impl SideStreamFunction {
    /// The function for `kind`, resolving tables in `schemas`.
    pub fn new(kind: SideStream, schemas: SideSchemas) -> Self {
        Self { kind, schemas }
    }
}

impl TableFunctionImpl for SideStreamFunction {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let function = self.kind.function();
        let name = match args.exprs() {
            [Expr::Column(c)] if c.relation.is_none() => c.name.clone(),
            [Expr::Literal(ScalarValue::Utf8(Some(s)), _)] => s.clone(),
            _ => {
                return plan_err!(
                    "{function}() takes one source table name, e.g. {function}(devices)"
                )
            }
        };
        let name = name.to_lowercase();
        let schemas = self
            .schemas
            .read()
            .map_err(|_| datafusion::error::DataFusionError::Internal("lock".into()))?;
        let Some(schema) = schemas.get(&name) else {
            return match self.kind {
                SideStream::Late => plan_err!(
                    "late_rows({name}): no source table '{name}' with a WATERMARK (only tables with event time have late rows)"
                ),
                SideStream::Bad => plan_err!("bad_rows({name}): no source table '{name}'"),
            };
        };
        let mut metadata = schema.metadata().clone();
        metadata.insert(self.kind.metadata_key().to_string(), name);
        let schema = Arc::new(Schema::new_with_metadata(schema.fields().clone(), metadata));
        Ok(Arc::new(EmptyTable::new(schema)))
    }
}
