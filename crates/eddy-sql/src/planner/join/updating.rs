//! Plans a join whose result changes: any join over an updating input, an
//! outer join without a time bound (its null-padded rows are taken back
//! when a partner comes), and semi and anti joins (`IN`, `EXISTS`, `NOT
//! EXISTS` subqueries as DataFusion decorrelates them, `INTERSECT`,
//! `EXCEPT`). Runs as an `updating_join`.
//!
//! In: the join, its planned inputs. Out: an updating stream of the joined
//! columns, without event time. Equalities between a left and a right
//! expression are the keys; every other condition is checked on each pair.

use std::sync::Arc;

use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{BinaryExpr, Expr, Join, Operator as BinaryOp};
use eddy_engine::operators::updating_join::{JoinOutput, UpdatingJoinPlan};

use super::condition::{side_of, Side};
use super::inputs::{pruned, UsedColumns};
use crate::error::{Result, SqlError};
use crate::planner::statement_text::StatementText;
use crate::planner::stream::{add_operator, updating_output, Changelog, Stream};
use crate::planner::Compiler;
use datafusion::common::DFSchemaRef;
use eddy_engine::operators::calc::CalcStep;

impl Compiler {
    pub(super) fn plan_updating_join(
        &mut self,
        join: &Join,
        kind: JoinOutput,
        mut left: Stream,
        mut right: Stream,
        needed: Option<Vec<bool>>,
        cx: &StatementText,
    ) -> Result<Stream> {
        let (left_keys, right_keys, residual) = equi_keys(join);
        if left_keys.is_empty() {
            return Err(SqlError::at(
                &cx.anchor(&["ON", "JOIN"]),
                format!("this {} JOIN has no equality between its sides (l.a = r.b): a join without keys would pair every row with every other", kind.name()),
            ));
        }
        // Every row is kept: keep only the columns the keys, the condition
        // and what reads the join use (a semi or anti join's output is its
        // left input, kept whole).
        let needed = needed.filter(|_| matches!(kind, JoinOutput::Pairs(_)));
        let used = UsedColumns::of(
            join,
            needed.as_deref(),
            &left_keys,
            &right_keys,
            &residual,
            None,
        );
        let (left_schema, left_kept) = pruned(join.left.schema(), &used.left);
        let (right_schema, right_kept) = pruned(join.right.schema(), &used.right);
        narrow(&mut left, &left_schema, &left_kept);
        narrow(&mut right, &right_schema, &right_kept);
        // Every row is kept whole, retractions matched by value.
        let at = cx.anchor(&[kind.name(), "JOIN", "IN", "EXISTS"]);
        for side in [&left, &right] {
            side.no_change_metadata(
                &format!("this {} JOIN", kind.name()),
                0..side.schema.fields().len(),
            )
            .map_err(|m| SqlError::at(&at, m.to_string()))?;
        }
        let join_schema = match kind {
            JoinOutput::Pairs(_) => Arc::new(
                left_schema
                    .join(&right_schema)
                    .map_err(|e| self.df_error(cx, e))?,
            ),
            JoinOutput::LeftSemi | JoinOutput::LeftAnti => Arc::clone(&join.schema),
        };
        let (left_schema, right_schema) = (left_schema.as_ref(), right_schema.as_ref());
        let (left_key_exprs, right_key_exprs) =
            self.join_keys(&left_keys, &right_keys, left_schema, right_schema, cx)?;
        let state = self.ctx.state();
        let residual_schema = left_schema
            .join(right_schema)
            .map_err(|e| self.df_error(cx, e))?;
        let residual = match conjunction(residual) {
            Some(expr) => Some(
                crate::context::physical_expr(&state, expr, &residual_schema)
                    .map_err(|e| self.df_error(cx, e))?,
            ),
            None => None,
        };
        let origin = match left.changelog.as_ref().or(right.changelog.as_ref()) {
            Some(input) => input.origin.clone(),
            None => {
                let at = cx.anchor(&[kind.name(), "JOIN"]);
                format!("the {} JOIN without a time bound at {at}", kind.name())
            }
        };
        let output_schema = updating_output(&join_schema, &[], &origin);
        let plan = UpdatingJoinPlan {
            kind,
            left_schema: Arc::new(left_schema.as_arrow().clone()),
            right_schema: Arc::new(right_schema.as_arrow().clone()),
            output_schema,
            left_keys: left_key_exprs.clone(),
            right_keys: right_key_exprs.clone(),
            residual,
            nulls_equal: join.null_equality == datafusion::common::NullEquality::NullEqualsNull,
            null_aware: join.null_aware,
            state_ttl_ms: self.state_ttl_ms,
        };
        let from_left = left.materialize(&mut self.graph);
        let from_right = right.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from_left, from_right]);
        let mut stream = Stream::of_node(node, &self.graph, join_schema, None);
        stream.time_lost = Some(format!(
            "{origin} revises its rows, which have no event time"
        ));
        stream.changelog = Some(Changelog {
            origin,
            upsert_key: None,
        });
        Ok(stream)
    }
}

/// Narrows `stream` to the columns `kept` of it (a projection step), as
/// `schema` (its pruned schema) lists them.
fn narrow(stream: &mut Stream, schema: &DFSchemaRef, kept: &[usize]) {
    if kept.len() == stream.schema.fields().len() {
        return;
    }
    let exprs = kept
        .iter()
        .map(|&i| {
            Arc::new(datafusion::physical_expr::expressions::Column::new(
                stream.schema.field(i).name(),
                i,
            )) as Arc<dyn datafusion::physical_expr::PhysicalExpr>
        })
        .collect();
    stream.steps.push(CalcStep::Project {
        exprs,
        schema: Arc::new(schema.as_arrow().clone()),
    });
    stream.schema = Arc::clone(schema);
    stream.time = None;
    stream.windows.clear();
    if let Some(changelog) = stream.changelog.as_mut() {
        changelog.upsert_key = None;
    }
}

/// A join's equalities between a left and a right expression (its keys),
/// and its other conditions.
pub(super) fn equi_keys(join: &Join) -> (Vec<Expr>, Vec<Expr>, Vec<Expr>) {
    let (left_schema, right_schema) = (join.left.schema().as_ref(), join.right.schema().as_ref());
    let mut left_keys: Vec<Expr> = Vec::new();
    let mut right_keys: Vec<Expr> = Vec::new();
    for (l, r) in &join.on {
        left_keys.push(l.clone());
        right_keys.push(r.clone());
    }
    let mut residual = Vec::new();
    for conjunct in join
        .filter
        .as_ref()
        .map(split_conjunction)
        .unwrap_or_default()
    {
        if let Expr::BinaryExpr(BinaryExpr {
            left: a,
            op: BinaryOp::Eq,
            right: b,
        }) = conjunct
        {
            match (
                side_of(a, left_schema, right_schema),
                side_of(b, left_schema, right_schema),
            ) {
                (Some(Side::Left), Some(Side::Right)) => {
                    left_keys.push(a.as_ref().clone());
                    right_keys.push(b.as_ref().clone());
                    continue;
                }
                (Some(Side::Right), Some(Side::Left)) => {
                    left_keys.push(b.as_ref().clone());
                    right_keys.push(a.as_ref().clone());
                    continue;
                }
                _ => {}
            }
        }
        residual.push(conjunct.clone());
    }
    (left_keys, right_keys, residual)
}
