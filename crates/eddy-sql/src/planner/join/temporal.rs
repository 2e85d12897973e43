//! Plans the event-time temporal join (`JOIN versioned FOR SYSTEM_TIME AS
//! OF probe.t ON ...`, see `crate::dialect::temporal_joins`) into a `temporal_join`.
//!
//! In: the join, the clause. Out: an append-only stream of the probe's and
//! the version's columns, keeping the probe's event time. Both inputs need
//! event time, the `AS OF` column the probe's; the probe is append-only,
//! the versioned side append-only or a changelog (a change feed with a
//! WATERMARK); its event time is when each version (or deletion) starts.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Join, JoinType};
use datafusion::physical_expr::PhysicalExpr;
use eddy_engine::operators::temporal_join::TemporalJoinPlan;

use super::updating::equi_keys;
use crate::dialect::temporal_joins::TemporalJoin;
use crate::error::{Position, Result, SqlError};
use crate::planner::statement_text::StatementText;
use crate::planner::stream::{add_operator, Stream, TimeAttr};
use crate::planner::Compiler;

impl Compiler {
    pub(super) fn plan_temporal_join(
        &mut self,
        join: &Join,
        clause: &TemporalJoin,
        cx: &StatementText,
    ) -> Result<Stream> {
        // AS OF a PROCTIME() column: a lookup join on processing time.
        let left_schema = join.left.schema();
        let proctime = left_schema.fields().iter().any(|f| {
            f.name().eq_ignore_ascii_case(&clause.time_column)
                && crate::functions::flink::is_proctime(f)
        });
        if proctime {
            return self.plan_lookup_join(join, cx);
        }
        let at = cx.anchor(&["SYSTEM_TIME", "FOR", "JOIN"]);
        let left_outer = match join.join_type {
            JoinType::Inner => false,
            JoinType::Left => true,
            other => {
                return Err(SqlError::at(
                    &at,
                    format!(
                        "a temporal join (FOR SYSTEM_TIME AS OF) is INNER or LEFT, not {other}"
                    ),
                ))
            }
        };
        let mut left = self.plan_stream(&join.left, cx)?;
        let mut right = self.plan_stream(&join.right, cx)?;
        // The versioned side may be a change feed's changelog.
        left.append_only("the probe side of a temporal join")
            .map_err(|m| SqlError::at(&at, m.to_string()))?;
        let (Some(left_time), Some(right_time)) = (left.time, right.time) else {
            let (side, stream) = if left.time.is_none() {
                ("probe", &left)
            } else {
                ("versioned", &right)
            };
            return Err(SqlError::at(
                &at,
                format!(
                    "a temporal join needs event time on both sides (the versioned side's says when each version starts), but the {side} side has none: {}",
                    stream.why_no_time()
                ),
            ));
        };
        let (left_schema, right_schema) =
            (join.left.schema().as_ref(), join.right.schema().as_ref());
        let probe_time = left_schema.field(left_time.column).name();
        if !probe_time.eq_ignore_ascii_case(&clause.time_column) {
            return Err(SqlError::at(
                &at,
                format!(
                    "FOR SYSTEM_TIME AS OF names '{}', but the probe side's event time is '{probe_time}': the version met is the one valid at the probe row's event time",
                    clause.time_column
                ),
            ));
        }
        let ProbeJoinParts {
            left_keys: left_key_exprs,
            right_keys: right_key_exprs,
            residual,
            output_schema,
        } = self.probe_join_parts(
            join,
            &at,
            "a temporal join needs an equality between the probe and the versioned table's key (ON o.currency = r.currency)",
            cx,
        )?;
        let allowed_lateness_ms = left_time
            .allowed_lateness_ms
            .max(right_time.allowed_lateness_ms);
        let plan = TemporalJoinPlan {
            left_outer,
            left_schema: Arc::new(left_schema.as_arrow().clone()),
            right_schema: Arc::new(right_schema.as_arrow().clone()),
            output_schema,
            left_keys: left_key_exprs.clone(),
            right_keys: right_key_exprs.clone(),
            left_time: left_time.column,
            right_time: right_time.column,
            residual,
            allowed_lateness_ms,
        };
        let from_left = left.materialize(&mut self.graph);
        let from_right = right.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from_left, from_right]);
        // Rows are emitted once the watermark passes their time plus the
        // lateness, so they keep the probe's event time without being late.
        Ok(Stream::of_node(
            node,
            &self.graph,
            join.schema.clone(),
            Some(TimeAttr {
                column: left_time.column,
                allowed_lateness_ms,
                window_ms: None,
            }),
        ))
    }

    /// The `FOR SYSTEM_TIME AS OF` clause of the statement being planned
    /// that marks `join` (by its right side's alias or table name).
    pub(super) fn temporal_clause(&self, join: &Join, cx: &StatementText) -> Option<TemporalJoin> {
        let name = match join.right.as_ref() {
            datafusion::logical_expr::LogicalPlan::SubqueryAlias(alias) => {
                alias.alias.table().to_lowercase()
            }
            datafusion::logical_expr::LogicalPlan::TableScan(scan) => {
                scan.table_name.table().to_lowercase()
            }
            _ => return None,
        };
        cx.temporal.iter().find(|c| c.table == name).cloned()
    }

    /// What a join that probes one side with the other's rows needs: the
    /// key pairs (refused without one, saying `no_keys`), the residual
    /// condition over the joined columns, and the output schema (every
    /// column nullable: a LEFT join pads).
    pub(super) fn probe_join_parts(
        &self,
        join: &Join,
        at: &Position,
        no_keys: &str,
        cx: &StatementText,
    ) -> Result<ProbeJoinParts> {
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
        Ok(ProbeJoinParts {
            left_keys,
            right_keys,
            residual,
            output_schema: Arc::new(Schema::new(fields)),
        })
    }
}

/// See [`Compiler::probe_join_parts`].
pub(super) struct ProbeJoinParts {
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    pub residual: Option<Arc<dyn PhysicalExpr>>,
    pub output_schema: SchemaRef,
}
