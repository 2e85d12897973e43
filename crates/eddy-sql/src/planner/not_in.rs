//! A correlated `NOT IN (subquery)` as the `NOT EXISTS` it means.
//!
//! In: a WHERE predicate over the outer rows. Out: the same predicate with
//! each correlated `x NOT IN (SELECT y FROM s WHERE s.k = t.k)` rewritten
//!
//! ```text
//!   NOT EXISTS (SELECT y FROM s WHERE s.k = t.k AND (y = x OR y IS NULL OR x IS NULL))
//! ```
//!
//! which is SQL's NULL rule for `NOT IN` row by row: a row passes when its
//! own share of the subquery is empty, or when `x` is not NULL and its share
//! holds neither `x` nor a NULL. DataFusion's decorrelation then makes it an
//! anti join keyed by the correlation (`s.k = t.k`), the rest a condition
//! on each pair, which the updating join runs. (An uncorrelated `NOT IN`
//! stays a null-aware anti join: its NULL rule spans the whole subquery.)

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, Result};
use datafusion::logical_expr::expr::{Exists, InSubquery};
use datafusion::logical_expr::{Expr, LogicalPlanBuilder, Subquery};

/// `predicate` (over rows of `outer`) with every correlated `NOT IN` as a
/// `NOT EXISTS`.
pub(super) fn as_not_exists(predicate: &Expr, outer: &DFSchema) -> Result<Expr> {
    predicate
        .clone()
        .transform(|e| match e {
            Expr::InSubquery(InSubquery {
                expr,
                subquery,
                negated: true,
            }) if !subquery.outer_ref_columns.is_empty() => {
                let (qualifier, field) = subquery.subquery.schema().qualified_field(0);
                let y = Expr::Column(Column::new(qualifier.cloned(), field.name()));
                // `x` as the subquery sees it: outer references.
                let mut outer_refs = subquery.outer_ref_columns.clone();
                let x = expr
                    .as_ref()
                    .clone()
                    .transform(|e| match e {
                        Expr::Column(c) => {
                            let (_, field) = outer.qualified_field_from_column(&c)?;
                            let field = Arc::clone(field);
                            let reference = Expr::OuterReferenceColumn(field, c);
                            outer_refs.push(reference.clone());
                            Ok(Transformed::yes(reference))
                        }
                        other => Ok(Transformed::no(other)),
                    })?
                    .data;
                let blocks = y.clone().eq(x.clone()).or(y.is_null()).or(x.is_null());
                let plan = LogicalPlanBuilder::from(subquery.subquery.as_ref().clone())
                    .filter(blocks)?
                    .build()?;
                Ok(Transformed::yes(Expr::Exists(Exists::new(
                    Subquery {
                        subquery: Arc::new(plan),
                        outer_ref_columns: outer_refs,
                        spans: subquery.spans.clone(),
                    },
                    true,
                ))))
            }
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
}
