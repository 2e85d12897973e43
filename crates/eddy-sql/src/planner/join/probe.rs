//! What the planner does alike for every join that probes a table with
//! each row of a stream (`FOR SYSTEM_TIME AS OF`: the temporal join and
//! both lookup joins).
//!
//! In: the logical join. Out: whether it is LEFT or INNER (refused
//! otherwise), and its [`ProbeJoin`]: the two sides' schemas, the key
//! pairs (refused without one), the residual condition over the joined
//! columns, and the output schema (every column nullable: a LEFT join pads).

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Join, JoinType};
use eddy_engine::operators::probe_join::ProbeJoin;

use super::updating::equi_keys;
use crate::error::{Position, Result, SqlError};
use crate::planner::statement_text::StatementText;
use crate::planner::Compiler;

/// Whether `join` (named `what` in the error) is a LEFT join; refused
/// unless LEFT or INNER.
pub(super) fn left_outer(join: &Join, at: &Position, what: &str) -> Result<bool> {
    match join.join_type {
        JoinType::Inner => Ok(false),
        JoinType::Left => Ok(true),
        other => Err(SqlError::at(
            at,
            format!("{what} is INNER or LEFT, not {other}"),
        )),
    }
}

impl Compiler {
    /// The probe join `join` plans into; refused without a key pair,
    /// saying `no_keys`.
    pub(super) fn probe_join(
        &self,
        join: &Join,
        left_outer: bool,
        at: &Position,
        no_keys: &str,
        cx: &StatementText,
    ) -> Result<ProbeJoin> {
        let (left_keys, right_keys, residual) = equi_keys(join);
        if left_keys.is_empty() {
            return Err(SqlError::at(at, no_keys));
        }
        let (left_keys, right_keys) = self.join_keys(
            &left_keys,
            &right_keys,
            join.left.schema(),
            join.right.schema(),
            cx,
        )?;
        let state = self.ctx.state();
        let residual = match conjunction(residual) {
            Some(expr) => Some(
                crate::context::physical_expr(&state, expr, &join.schema)
                    .map_err(|e| self.df_error(cx, e))?,
            ),
            None => None,
        };
        let fields: Vec<Field> = join
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        Ok(ProbeJoin {
            left_outer,
            left_schema: Arc::new(join.left.schema().as_arrow().clone()),
            right_schema: Arc::new(join.right.schema().as_arrow().clone()),
            output_schema: Arc::new(Schema::new(fields)),
            left_keys,
            right_keys,
            residual,
        })
    }
}
