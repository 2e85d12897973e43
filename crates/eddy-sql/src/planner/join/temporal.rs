//! Plans the event-time temporal join (`JOIN versioned FOR SYSTEM_TIME AS
//! OF probe.t ON ...`, see `crate::dialect::temporal_joins`) into a `temporal_join`.
//!
//! In: the join, the clause. Out: an append-only stream of the probe's and
//! the version's columns, keeping the probe's event time. Both inputs need
//! event time, the `AS OF` column the probe's; the probe is append-only,
//! the versioned side append-only or a changelog (a change feed with a
//! WATERMARK); its event time is when each version (or deletion) starts.

use std::sync::Arc;

use datafusion::logical_expr::Join;
use eddy_engine::operators::temporal_join::TemporalJoinPlan;

use crate::dialect::temporal_joins::TemporalJoin;
use crate::error::{Result, SqlError};
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
        let left_outer =
            super::probe::left_outer(join, &at, "a temporal join (FOR SYSTEM_TIME AS OF)")?;
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
        let probe_time = join.left.schema().field(left_time.column).name();
        if !probe_time.eq_ignore_ascii_case(&clause.time_column) {
            return Err(SqlError::at(
                &at,
                format!(
                    "FOR SYSTEM_TIME AS OF names '{}', but the probe side's event time is '{probe_time}': the version met is the one valid at the probe row's event time",
                    clause.time_column
                ),
            ));
        }
        let probe_join = self.probe_join(
            join,
            left_outer,
            &at,
            "a temporal join needs an equality between the probe and the versioned table's key (ON o.currency = r.currency)",
            cx,
        )?;
        let allowed_lateness_ms = left_time
            .allowed_lateness_ms
            .max(right_time.allowed_lateness_ms);
        let plan = TemporalJoinPlan {
            join: probe_join,
            left_time: left_time.column,
            right_time: right_time.column,
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
}
