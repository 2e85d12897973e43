//! Plans the processing-time lookup join (`JOIN t FOR SYSTEM_TIME AS OF
//! probe.proc ON ...` where `proc` is a `PROCTIME()` column, Nexmark q13)
//! into a `lookup_join`.
//!
//! In: the join, the clause. Out: an append-only stream of the probe's and
//! the table's columns, keeping the probe's event time if it has one. The
//! probe is append-only; the table append-only or a changelog. A table
//! read from a bounded connector is read whole before probe rows are
//! joined (see [`eddy_engine::operators::lookup_join`]).

use std::sync::Arc;

use datafusion::logical_expr::{Join, JoinType};
use eddy_engine::operators::lookup_join::LookupJoinPlan;

use super::temporal::ProbeJoinParts;
use crate::error::{Position, Result, SqlError};
use crate::planner::stream::{add_operator, Stream};
use crate::planner::Compiler;

impl Compiler {
    pub(super) fn plan_lookup_join(&mut self, join: &Join, position: &Position) -> Result<Stream> {
        let at = self.anchor(position, &["SYSTEM_TIME", "FOR", "JOIN"]);
        let left_outer = match join.join_type {
            JoinType::Inner => false,
            JoinType::Left => true,
            other => {
                return Err(SqlError::at(
                    &at,
                    format!("a lookup join (FOR SYSTEM_TIME AS OF a PROCTIME() column) is INNER or LEFT, not {other}"),
                ))
            }
        };
        let mut left = self.plan_stream(&join.left, position)?;
        let mut right = self.plan_stream(&join.right, position)?;
        left.append_only("the probe side of a lookup join")
            .map_err(|m| SqlError::at(&at, m))?;
        let (left_schema, right_schema) =
            (join.left.schema().as_ref(), join.right.schema().as_ref());
        let ProbeJoinParts {
            left_keys: left_key_exprs,
            right_keys: right_key_exprs,
            residual,
            output_schema,
        } = self.probe_join_parts(
            join,
            &at,
            "a lookup join needs an equality between the probe and the table's key (ON mod(b.auction, 10000) = s.key)",
            position,
        )?;
        let time = left.time;
        let from_left = left.materialize(&mut self.graph);
        let from_right = right.materialize(&mut self.graph);
        let plan = LookupJoinPlan {
            left_outer,
            left_schema: Arc::new(left_schema.as_arrow().clone()),
            right_schema: Arc::new(right_schema.as_arrow().clone()),
            output_schema,
            left_keys: left_key_exprs.clone(),
            right_keys: right_key_exprs.clone(),
            residual,
        };
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from_left, from_right]);
        Ok(Stream::of_node(
            node,
            &self.graph,
            join.schema.clone(),
            time,
        ))
    }
}
