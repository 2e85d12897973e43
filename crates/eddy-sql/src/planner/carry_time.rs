//! Event time carried to a window through projections that drop it, as
//! Arroyo carries its hidden `_timestamp`: a window over a window
//! aggregate that does not select its window, or over a view (a `WITH`
//! clause) that does not select its source's event-time column.
//!
//! ```text
//!   SELECT tumble(1 h), count(*) FROM (
//!     SELECT driver_id, count(*) FROM cars GROUP BY 1, tumble(1 h))  -- window dropped
//!   GROUP BY 1
//! ```
//!
//! In: the logical plan under a window aggregate whose input has no event
//! time because a projection left it out. Out: the same plan with every
//! projection on the way down to where the event time lives (a source
//! table with a watermark, or a window aggregate's window) also passing
//! that column on, as `__eddy_event_time`; `None` where the way goes
//! through anything but projections, filters, aliases, views and unions. The
//! columns the query names are unchanged: one is only added at the end.

use std::sync::Arc;

use datafusion::common::Column;
use datafusion::logical_expr::{Expr, Filter, LogicalPlan, Projection, SubqueryAlias};

use super::Compiler;

/// The name of the column an event time is carried in.
pub(super) const CARRIED_TIME: &str = "__eddy_event_time";

impl Compiler {
    /// `plan` with the event time of what it reads passed on to its
    /// output, and the column holding it there.
    pub(super) fn carry_event_time(&self, plan: &LogicalPlan) -> Option<(LogicalPlan, Column)> {
        match plan {
            LogicalPlan::TableScan(scan) if scan.projection.is_none() => {
                let name = scan.table_name.table().to_string();
                if let Some(view) = self.catalog.views.get(&name) {
                    let (inner, column) = self.carry_event_time(&view.plan)?;
                    let aliased = SubqueryAlias::try_new(Arc::new(inner), name.as_str()).ok()?;
                    return Some((
                        LogicalPlan::SubqueryAlias(aliased),
                        Column::new(Some(name.as_str()), column.name),
                    ));
                }
                let table = self.catalog.tables.get(&name)?;
                let time = table.layout.event_time?;
                let field = table.schema().field(time.column).name().clone();
                Some((
                    plan.clone(),
                    Column::new(Some(scan.table_name.clone()), field),
                ))
            }
            LogicalPlan::Aggregate(aggregate) => {
                let window = aggregate.group_expr.iter().position(|e| {
                    crate::functions::windows::window_spec(e).is_some()
                        || crate::functions::windows::session_gap(e).is_some()
                })?;
                let (qualifier, field) = aggregate.schema.qualified_field(window);
                Some((plan.clone(), Column::from((qualifier, field))))
            }
            LogicalPlan::Filter(filter) => {
                let (input, column) = self.carry_event_time(&filter.input)?;
                let filter = Filter::try_new(filter.predicate.clone(), Arc::new(input)).ok()?;
                Some((LogicalPlan::Filter(filter), column))
            }
            LogicalPlan::SubqueryAlias(alias) => {
                let (input, column) = self.carry_event_time(&alias.input)?;
                let aliased = SubqueryAlias::try_new(Arc::new(input), alias.alias.clone()).ok()?;
                Some((
                    LogicalPlan::SubqueryAlias(aliased),
                    Column::new(Some(alias.alias.clone()), column.name),
                ))
            }
            LogicalPlan::Projection(projection) => {
                let (input, column) = self.carry_event_time(&projection.input)?;
                let carried = Expr::Column(column.clone());
                // Passed on as it is already: the projection keeps it.
                if let Some(i) = projection.expr.iter().position(|e| *e == carried) {
                    let projection =
                        Projection::try_new(projection.expr.clone(), Arc::new(input)).ok()?;
                    let (qualifier, field) = projection.schema.qualified_field(i);
                    let column = Column::from((qualifier, field));
                    return Some((LogicalPlan::Projection(projection), column));
                }
                let mut exprs = projection.expr.clone();
                exprs.push(carried.alias(CARRIED_TIME));
                let projection = Projection::try_new(exprs, Arc::new(input)).ok()?;
                Some((
                    LogicalPlan::Projection(projection),
                    Column::from_name(CARRIED_TIME),
                ))
            }
            LogicalPlan::Union(union) => {
                // Every input carries its own, in the same (last) place.
                let mut inputs = Vec::with_capacity(union.inputs.len());
                for input in &union.inputs {
                    let (carried, column) = self.carry_event_time(input)?;
                    let carried = match carried {
                        LogicalPlan::Projection(p) if column.name == CARRIED_TIME => {
                            LogicalPlan::Projection(p)
                        }
                        other => {
                            let mut exprs: Vec<Expr> = other
                                .schema()
                                .columns()
                                .into_iter()
                                .map(Expr::Column)
                                .collect();
                            exprs.push(Expr::Column(column).alias(CARRIED_TIME));
                            LogicalPlan::Projection(
                                Projection::try_new(exprs, Arc::new(other)).ok()?,
                            )
                        }
                    };
                    inputs.push(Arc::new(carried));
                }
                let union =
                    datafusion::logical_expr::Union::try_new_with_loose_types(inputs).ok()?;
                Some((LogicalPlan::Union(union), Column::from_name(CARRIED_TIME)))
            }
            _ => None,
        }
    }
}
