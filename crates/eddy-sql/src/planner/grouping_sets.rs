//! `GROUPING SETS`, `ROLLUP` and `CUBE`: one aggregate per grouping set,
//! their rows laid out as DataFusion's grouping-set `Aggregate` lays them
//! out, and unioned.
//!
//! In: an `Aggregate` whose GROUP BY is one grouping set expression (with a
//! window, each set holds the window). Out: the union of one aggregate per
//! set (a window aggregate where the sets hold a window, else an updating
//! one), each projected to every grouping column (NULL where the set does
//! not group by it), DataFusion's `__grouping_id` (a bit per grouping
//! column, 1 where it is not grouped, and an ordinal above them for a set
//! that repeats), then the aggregates. HAVING, `GROUPING()` and the outer
//! SELECT apply above it unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Aggregate, Expr, GroupingSet};
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::PhysicalExpr;
use eddy_engine::operators::calc::CalcStep;

use super::stream::{Stream, TimeAttr};
use super::Compiler;
use crate::error::{Result, SqlError};
use crate::planner::statement_text::StatementText;

impl Compiler {
    pub(super) fn plan_grouping_sets(
        &mut self,
        aggregate: &Aggregate,
        set: &GroupingSet,
        cx: &StatementText,
    ) -> Result<Stream> {
        let distinct: Vec<Expr> = set.distinct_expr().into_iter().cloned().collect();
        let sets: Vec<Vec<Expr>> = match set {
            GroupingSet::GroupingSets(sets) => sets.clone(),
            GroupingSet::Rollup(exprs) => (0..=exprs.len()).map(|i| exprs[..i].to_vec()).collect(),
            GroupingSet::Cube(exprs) => (0..1usize << exprs.len())
                .map(|mask| {
                    exprs
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| mask & (1 << i) != 0)
                        .map(|(_, e)| e.clone())
                        .collect()
                })
                .collect(),
        };
        let n = distinct.len();
        let full = aggregate.schema.clone();
        let id_field = full.field(n).clone();
        let mut ordinals: HashMap<Vec<bool>, u64> = HashMap::new();
        let mut streams = Vec::with_capacity(sets.len());
        for grouping in sets {
            let partial = Aggregate::try_new(
                Arc::clone(&aggregate.input),
                grouping.clone(),
                aggregate.aggr_expr.clone(),
            )
            .map_err(|e| self.df_error(cx, e))?;
            let mut stream = self.plan_aggregate(&partial, cx)?;
            let absent: Vec<bool> = distinct.iter().map(|d| !grouping.contains(d)).collect();
            let ordinal = ordinals.entry(absent.clone()).or_insert(0);
            let id = absent
                .iter()
                .fold(0u64, |acc, &a| (acc << 1) | u64::from(a))
                | (*ordinal << n);
            *ordinal += 1;
            let mut exprs: Vec<Arc<dyn PhysicalExpr>> = Vec::with_capacity(full.fields().len());
            let mut fields: Vec<Field> = Vec::with_capacity(full.fields().len());
            let mut time = None;
            for (i, d) in distinct.iter().enumerate() {
                let name = full.field(i).name();
                match grouping.iter().position(|e| e == d) {
                    Some(j) => {
                        exprs.push(Arc::new(Column::new(partial.schema.field(j).name(), j)));
                        fields.push(
                            partial
                                .schema
                                .field(j)
                                .as_ref()
                                .clone()
                                .with_name(name)
                                .with_nullable(true),
                        );
                        if let Some(t) = stream.time.filter(|t| t.column == j) {
                            time = Some(TimeAttr { column: i, ..t });
                        }
                    }
                    None => {
                        let data_type = full.field(i).data_type();
                        let null =
                            ScalarValue::try_from(data_type).map_err(|e| self.df_error(cx, e))?;
                        exprs.push(Arc::new(Literal::new(null)));
                        fields.push(full.field(i).as_ref().clone().with_nullable(true));
                    }
                }
            }
            let id_value = ScalarValue::UInt64(Some(id))
                .cast_to(id_field.data_type())
                .map_err(|e| self.df_error(cx, e))?;
            exprs.push(Arc::new(Literal::new(id_value)));
            fields.push(id_field.as_ref().clone());
            for k in 0..aggregate.aggr_expr.len() {
                let j = grouping.len() + k;
                exprs.push(Arc::new(Column::new(partial.schema.field(j).name(), j)));
                fields.push(
                    partial
                        .schema
                        .field(j)
                        .as_ref()
                        .clone()
                        .with_name(full.field(n + 1 + k).name()),
                );
            }
            if fields.len() != full.fields().len() {
                return Err(SqlError::Internal(format!(
                    "a grouping set's {} columns are not its aggregate's {}",
                    fields.len(),
                    full.fields().len()
                )));
            }
            if let Some(changelog) = stream.changelog.as_mut() {
                changelog.upsert_key = None;
            }
            stream.steps.push(CalcStep::Project {
                exprs,
                schema: Arc::new(Schema::new(fields)),
            });
            stream.schema = Arc::clone(&full);
            stream.time = time;
            stream.windows.clear();
            streams.push(stream);
        }
        Ok(self.union_streams(streams, full))
    }
}
