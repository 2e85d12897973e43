//! Plans the queries whose results change: a GROUP BY without a window, an
//! aggregate without GROUP BY, and SELECT DISTINCT, each an
//! `updating_aggregate` whose output is an updating stream (see
//! `eddy_engine::changelog`).
//!
//! In: the input stream (append-only or updating), the group keys and
//! aggregates. Out: a stream of the aggregate's columns, updating, with the
//! group keys as its upsert key and no event time (a result row is revised
//! whenever its group changes, so it has no time of its own).

use std::sync::Arc;

use datafusion::common::DFSchemaRef;
use datafusion::logical_expr::Aggregate;
use datafusion::physical_expr::PhysicalExpr;
use eddy_engine::operators::updating_aggregate::UpdatingAggregatePlan;
use eddy_engine::operators::AggregateCall;

use super::stream::{add_operator, updating_output, Changelog, Stream};
use super::Compiler;
use crate::error::{Position, Result, SqlError};
use crate::planner::statement_text::StatementText;

impl Compiler {
    /// `GROUP BY keys` (no window) or a global aggregate over `input`.
    pub(super) fn plan_updating_aggregate(
        &mut self,
        aggregate: &Aggregate,
        input: Stream,
        keys: Vec<(Arc<dyn PhysicalExpr>, String)>,
        cx: &StatementText,
    ) -> Result<Stream> {
        let aggregates = self.lower_aggregates(aggregate, &input, cx)?;
        let origin = if aggregate.group_expr.is_empty() {
            let at = cx.anchor(&["SELECT"]);
            format!("the aggregate without GROUP BY at {at}")
        } else {
            let at = cx.anchor(&["GROUP"]);
            format!("the GROUP BY without a window at {at}")
        };
        let at = cx.anchor(&["GROUP", "SELECT"]);
        self.plan_group_changes(
            input,
            keys,
            aggregates,
            aggregate.schema.clone(),
            origin,
            &at,
        )
    }

    /// `SELECT DISTINCT` over `input`: every column a key, no aggregate.
    pub(super) fn plan_distinct(
        &mut self,
        input: &datafusion::logical_expr::LogicalPlan,
        cx: &StatementText,
    ) -> Result<Stream> {
        let stream = self.plan_stream(input, cx)?;
        let arrow = stream.schema.as_arrow().clone();
        let keys = arrow
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let column: Arc<dyn PhysicalExpr> = Arc::new(
                    datafusion::physical_expr::expressions::Column::new(f.name(), i),
                );
                (column, f.name().clone())
            })
            .collect();
        let at = cx.anchor(&["DISTINCT"]);
        let schema = stream.schema.clone();
        self.plan_group_changes(
            stream,
            keys,
            Vec::new(),
            schema,
            format!("the SELECT DISTINCT at {at}"),
            &at,
        )
    }

    fn plan_group_changes(
        &mut self,
        mut input: Stream,
        keys: Vec<(Arc<dyn PhysicalExpr>, String)>,
        aggregates: Vec<AggregateCall>,
        output: DFSchemaRef,
        origin: String,
        at: &Position,
    ) -> Result<Stream> {
        // The aggregate keeps its keys and arguments, matching retractions
        // by their values.
        let mut used = std::collections::BTreeSet::new();
        let arguments: Vec<Arc<dyn PhysicalExpr>> = aggregates
            .iter()
            .flat_map(|a| a.expr.expressions())
            .chain(aggregates.iter().filter_map(|a| a.filter.clone()))
            .collect();
        for expr in keys.iter().map(|(k, _)| k).chain(arguments.iter()) {
            used.extend(
                datafusion::physical_expr::utils::collect_columns(expr)
                    .iter()
                    .map(|c| c.index()),
            );
        }
        input
            .no_change_metadata(&origin, used)
            .map_err(|m| SqlError::at(at, m.to_string()))?;
        if output.fields().len() != keys.len() + aggregates.len() {
            return Err(SqlError::Internal(format!(
                "an aggregate's {} output columns are not its {} keys and {} aggregates",
                output.fields().len(),
                keys.len(),
                aggregates.len()
            )));
        }
        let input_updating = input.changelog.is_some();
        let key_names: Vec<String> = output
            .fields()
            .iter()
            .take(keys.len())
            .map(|f| f.name().clone())
            .collect();
        let output_schema = updating_output(&output, &key_names, &origin);
        let key_count = keys.len();
        let plan = Arc::new(UpdatingAggregatePlan {
            input_schema: Arc::new(input.schema.as_arrow().clone()),
            output_schema,
            keys,
            aggregates,
            input_updating,
            state_ttl_ms: self.state_ttl_ms,
        });
        let from = input.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, plan, vec![from]);
        let mut stream = Stream::of_node(node, &self.graph, output, None);
        stream.time_lost = Some(format!(
            "{origin} emits revisions of its results, which have no event time"
        ));
        stream.changelog = Some(Changelog {
            origin,
            upsert_key: (key_count > 0).then(|| (0..key_count).collect()),
        });
        Ok(stream)
    }
}
