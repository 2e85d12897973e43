//! Prepared point queries answered without running DataFusion: a
//! statement of the shape `SELECT columns FROM view WHERE key = $1 [AND
//! key2 = $2 ...]`, whose parameters give every key column of the view,
//! is one lookup in the view's snapshot.
//!
//! In: a prepared statement's logical plan (as DataFusion planned it at
//! Parse) and a portal's parameters. Out: the key's row in the client's
//! formats, or `None` for any other statement (DataFusion runs it).
//!
//! Planning, optimizing and running a plan costs DataFusion about 0.3 ms
//! for a one-row answer, ten times the lookup; a dashboard or a service
//! asking for one key's current value asks the same prepared statement
//! over and over. The plan is matched at each Execute (a few comparisons);
//! what the answer is (columns, names, types) is the plan's own, so the
//! client sees the same result either way.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::catalog::TableProvider;
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{utils::split_conjunction, Expr, LogicalPlan, Operator};
use datafusion_postgres::arrow_pg::datatypes::df::deserialize_parameters;
use datafusion_postgres::arrow_pg::datatypes::{arrow_schema_to_pg_fields, encode_recordbatch};
use datafusion_postgres::pgwire::api::portal::Portal;
use datafusion_postgres::pgwire::api::results::{QueryResponse, Response};
use datafusion_postgres::pgwire::error::{PgWireError, PgWireResult};
use datafusion_postgres::pgwire::types::format::FormatOptions;

use super::errors;
use super::tables::ViewTable;

/// A statement recognised as a point query: see the module docs.
pub struct PointQuery<'a> {
    plan: &'a LogicalPlan,
    view: Arc<dyn TableProvider>,
    /// Each equality: the view's column and the parameter (0-based) it
    /// equals.
    key: Vec<(usize, usize)>,
    /// The view's columns the answer has, in order.
    columns: Vec<usize>,
}

impl<'a> PointQuery<'a> {
    /// `plan` as a point query over a view, if it is one.
    pub fn of(plan: &'a LogicalPlan) -> Option<Self> {
        let (output, below) = match plan {
            LogicalPlan::Projection(projection) => {
                (Some(&projection.expr), projection.input.as_ref())
            }
            other => (None, other),
        };
        let LogicalPlan::Filter(filter) = below else {
            return None;
        };
        let LogicalPlan::TableScan(scan) = filter.input.as_ref() else {
            return None;
        };
        if scan.fetch.is_some() || !scan.filters.is_empty() {
            return None;
        }
        let view = source_as_provider(&scan.source).ok()?;
        view.downcast_ref::<ViewTable>()?;
        let table_columns: Vec<usize> = match &scan.projection {
            Some(projection) => projection.clone(),
            None => (0..view.schema().fields().len()).collect(),
        };
        // A column of the scan's output, as the view's column.
        let column_of = |expr: &Expr| -> Option<usize> {
            let Expr::Column(column) = without_alias(expr) else {
                return None;
            };
            let at = scan.projected_schema.index_of_column(column).ok()?;
            table_columns.get(at).copied()
        };
        let mut key = Vec::new();
        for conjunct in split_conjunction(&filter.predicate) {
            let Expr::BinaryExpr(equality) = conjunct else {
                return None;
            };
            if equality.op != Operator::Eq {
                return None;
            }
            let (column, parameter) = match (
                column_of(&equality.left),
                parameter_of(&equality.right),
                column_of(&equality.right),
                parameter_of(&equality.left),
            ) {
                (Some(column), Some(parameter), _, _) | (_, _, Some(column), Some(parameter)) => {
                    (column, parameter)
                }
                _ => return None,
            };
            key.push((column, parameter));
        }
        let columns = match output {
            Some(exprs) => exprs.iter().map(column_of).collect::<Option<Vec<_>>>()?,
            None => table_columns.clone(),
        };
        Some(Self {
            plan,
            view,
            key,
            columns,
        })
    }

    /// The answer for `portal`'s parameters; `None` when the view cannot
    /// answer by key after all (its key is other columns, or it changed),
    /// and DataFusion should run the statement.
    pub fn answer<S: Clone>(
        &self,
        portal: &Portal<S>,
        client_metadata: &HashMap<String, String>,
    ) -> PgWireResult<Option<Response>> {
        let Some(view) = self.view.downcast_ref::<ViewTable>() else {
            return Ok(None);
        };
        let parameters = self.parameters(portal)?;
        let schema = view.schema();
        let mut key = Vec::with_capacity(self.key.len());
        for (column, parameter) in &self.key {
            // `key = NULL` is no row in SQL, not the row of a NULL key.
            let Some(value) = parameters.get(*parameter).filter(|v| !v.is_null()) else {
                return Ok(None);
            };
            let Ok(value) = value.cast_to(schema.field(*column).data_type()) else {
                return Ok(None);
            };
            key.push((*column, value));
        }
        let found = view
            .key_lookup(&key)
            .map_err(|e| errors::from_query(PgWireError::ApiError(Box::new(e))))?;
        let Some(found) = found else {
            return Ok(None);
        };
        let rows = found
            .project(&self.columns)
            .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        let fields = Arc::new(arrow_schema_to_pg_fields(
            self.plan.schema().as_arrow(),
            &portal.result_column_format,
            Some(Arc::new(FormatOptions::from_client_metadata(
                client_metadata,
            ))),
        )?);
        let encoded: Vec<_> = encode_recordbatch(fields.clone(), rows).collect();
        Ok(Some(Response::Query(QueryResponse::new(
            fields,
            futures::stream::iter(encoded),
        ))))
    }

    /// The portal's parameters, decoded as the plan's types, in order.
    fn parameters<S: Clone>(&self, portal: &Portal<S>) -> PgWireResult<Vec<ScalarValue>> {
        let types = self
            .plan
            .get_parameter_types()
            .map_err(|e| PgWireError::ApiError(Box::new(e)))?;
        let mut ordered: Vec<(usize, Option<datafusion::arrow::datatypes::DataType>)> = types
            .into_iter()
            .filter_map(|(id, t)| Some((id.strip_prefix('$')?.parse::<usize>().ok()?, t)))
            .collect();
        ordered.sort_by_key(|(id, _)| *id);
        let types: Vec<_> = ordered.iter().map(|(_, t)| t.as_ref()).collect();
        match deserialize_parameters(portal, &types)? {
            ParamValues::List(values) => Ok(values.into_iter().map(|v| v.value).collect()),
            ParamValues::Map(_) => Ok(Vec::new()),
        }
    }
}

/// `expr` without an alias around it (a cast on a column changes what
/// it is compared or answered as: such a plan is DataFusion's).
fn without_alias(expr: &Expr) -> &Expr {
    match expr {
        Expr::Alias(alias) => without_alias(&alias.expr),
        other => other,
    }
}

/// `$N` as the parameter's 0-based index. A cast around it is kept by
/// [`PointQuery::answer`] casting the value to the column's type.
fn parameter_of(expr: &Expr) -> Option<usize> {
    let unwrapped = match expr {
        Expr::Cast(cast) => cast.expr.as_ref(),
        other => other,
    };
    let Expr::Placeholder(placeholder) = unwrapped else {
        return None;
    };
    placeholder
        .id
        .strip_prefix('$')?
        .parse::<usize>()
        .ok()?
        .checked_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::tables::{tests::keyed_view, ViewSchema};
    use datafusion::catalog::SchemaProvider;
    use datafusion::prelude::SessionContext;

    async fn plan_of(sql: &str) -> LogicalPlan {
        let context = SessionContext::new();
        let table = ViewSchema::new(keyed_view())
            .table("v")
            .await
            .expect("looked up")
            .expect("a view");
        context.register_table("v", table).expect("registers");
        context
            .state()
            .create_logical_plan(sql)
            .await
            .expect("plans")
    }

    #[tokio::test]
    async fn a_key_equal_to_a_parameter_is_a_point_query() {
        let plan = plan_of("SELECT n, k AS key FROM v WHERE k = $1").await;
        let point = PointQuery::of(&plan).expect("a point query");
        assert_eq!(point.key, vec![(0, 0)]);
        assert_eq!(point.columns, vec![1, 0]);
        let plan = plan_of("SELECT * FROM v WHERE $1 = k").await;
        let point = PointQuery::of(&plan).expect("either way round");
        assert_eq!(point.columns, vec![0, 1]);
    }

    #[tokio::test]
    async fn anything_else_is_left_to_datafusion() {
        for sql in [
            "SELECT count(*) FROM v WHERE k = $1",
            "SELECT CAST(n AS DOUBLE) FROM v WHERE k = $1",
            "SELECT n FROM v WHERE k = $1 OR k = $2",
            "SELECT n FROM v WHERE k > $1",
            "SELECT n FROM v WHERE k = 'k1'",
            "SELECT n FROM v WHERE k = $1 LIMIT 1",
            "SELECT n FROM v",
        ] {
            let plan = plan_of(sql).await;
            assert!(PointQuery::of(&plan).is_none(), "{sql}: {plan}");
        }
    }
}
