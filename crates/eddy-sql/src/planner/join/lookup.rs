//! Plans the processing-time lookup join (`JOIN t FOR SYSTEM_TIME AS OF
//! probe.proc ON ...` where `proc` is a `PROCTIME()` column, Nexmark q13):
//! into a `key_lookup_join` when `t`'s connector reads it by key (a
//! database table, `connector = 'jdbc'`: the connectors say which,
//! [`crate::CompileOptions::connectors`]), else into a `lookup_join` that
//! streams `t` in and holds it.
//!
//! In: the join, the clause. Out: an append-only stream of the probe's and
//! the table's columns, keeping the probe's event time if it has one. The
//! probe is append-only; a streamed table append-only or a changelog. A
//! streamed table read from a bounded connector is read whole before probe
//! rows are joined (see [`eddy_engine::operators::lookup_join`]).

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::logical_expr::{Join, LogicalPlan};
use datafusion::physical_expr::expressions::{CastExpr, Column};
use datafusion::physical_expr::PhysicalExpr;
use eddy_engine::lookup::LookupTable;
use eddy_engine::operators::key_lookup_join::KeyLookupJoinPlan;
use eddy_engine::operators::lookup_join::LookupJoinPlan;
use eddy_engine::source::SourceColumn;

use crate::error::{Position, Result, SqlError};
use crate::planner::statement_text::StatementText;
use crate::planner::stream::{add_operator, Stream};
use crate::planner::Compiler;

impl Compiler {
    pub(super) fn plan_lookup_join(&mut self, join: &Join, cx: &StatementText) -> Result<Stream> {
        let at = cx.anchor(&["SYSTEM_TIME", "FOR", "JOIN"]);
        let left_outer = super::probe::left_outer(
            join,
            &at,
            "a lookup join (FOR SYSTEM_TIME AS OF a PROCTIME() column)",
        )?;
        if let Some(table) = self.table_read_by_key(&join.right) {
            return self.plan_key_lookup_join(join, cx, &at, left_outer, table);
        }
        let mut left = self.plan_stream(&join.left, cx)?;
        let mut right = self.plan_stream(&join.right, cx)?;
        left.append_only("the probe side of a lookup join")
            .map_err(|m| SqlError::at(&at, m.to_string()))?;
        let probe_join = self.probe_join(
            join,
            left_outer,
            &at,
            "a lookup join needs an equality between the probe and the table's key (ON mod(b.auction, 10000) = s.key)",
            cx,
        )?;
        let time = left.time;
        let from_left = left.materialize(&mut self.graph);
        let from_right = right.materialize(&mut self.graph);
        let plan = LookupJoinPlan { join: probe_join };
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from_left, from_right]);
        Ok(Stream::of_node(
            node,
            &self.graph,
            join.schema.clone(),
            time,
        ))
    }

    /// The table `plan` scans (under aliases), with the columns it reads,
    /// when its connector reads it by key.
    fn table_read_by_key(&self, plan: &LogicalPlan) -> Option<(String, Vec<usize>)> {
        let facts = self.connector_facts.as_ref()?;
        match plan {
            LogicalPlan::SubqueryAlias(alias) => self.table_read_by_key(&alias.input),
            LogicalPlan::TableScan(scan) if scan.filters.is_empty() => {
                let name = scan.table_name.table().to_lowercase();
                let def = self.catalog.tables.get(&name)?;
                if !facts.looked_up_by_key(&def.connector) {
                    return None;
                }
                let read = match &scan.projection {
                    Some(columns) => columns.clone(),
                    None => (0..def.schema().fields().len()).collect(),
                };
                Some((name, read))
            }
            _ => None,
        }
    }

    /// A lookup join whose table is asked for each probe batch's keys.
    fn plan_key_lookup_join(
        &mut self,
        join: &Join,
        cx: &StatementText,
        at: &Position,
        left_outer: bool,
        (name, read): (String, Vec<usize>),
    ) -> Result<Stream> {
        let def = self
            .catalog
            .tables
            .get(&name)
            .ok_or_else(|| SqlError::Internal(format!("table '{name}' is not declared")))?
            .clone();
        if def
            .layout
            .columns
            .iter()
            .any(|c| !matches!(c, SourceColumn::Physical(_)))
        {
            return Err(SqlError::at(
                &def.position,
                format!("table '{name}' is read by key ({}): it has only the database table's columns, no computed or metadata ones", def.connector),
            ));
        }
        let mut left = self.plan_stream(&join.left, cx)?;
        left.append_only("the probe side of a lookup join")
            .map_err(|m| SqlError::at(at, m.to_string()))?;
        let probe_join = self.probe_join(
            join,
            left_outer,
            at,
            "a lookup join needs an equality between the probe and the table's key (ON o.customer = c.id)",
            cx,
        )?;
        let key_columns = probe_join
            .right_keys
            .iter()
            .map(|k| table_column(k, &probe_join.right_schema))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| {
                SqlError::at(
                    at,
                    format!("a lookup join asks table '{name}' by its columns: compare each with the probe's key as it is (ON o.customer = {name}.id), not an expression of it"),
                )
            })?;
        let time = left.time;
        let from_left = left.materialize(&mut self.graph);
        let plan = KeyLookupJoinPlan {
            join: probe_join,
            right_columns: read,
            table: LookupTable {
                spec: def.connector_spec(),
                key_columns,
            },
        };
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from_left]);
        Ok(Stream::of_node(
            node,
            &self.graph,
            join.schema.clone(),
            time,
        ))
    }
}

/// The table column a key expression over the table's columns reads: a
/// column, or a cast of one (to the probe key's type).
fn table_column(key: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<String> {
    if let Some(column) = key.downcast_ref::<Column>() {
        return Some(schema.field(column.index()).name().clone());
    }
    let cast = key.downcast_ref::<CastExpr>()?;
    table_column(cast.expr(), schema)
}
