//! Filter pushdown into sources: the `WHERE` conditions a source's
//! connector may use to skip stored data (files, row groups) it can tell
//! from statistics hold no row the job needs.
//!
//! In: every scan of a table as it is planned, and the `WHERE` right above
//! each one. Out: per table, a [`SourceFilter`] on its source node's
//! [`eddy_engine::graph::ConnectorSpec`], or none.
//!
//! - A source node is shared by every query reading the table, so the
//!   pushed condition is the OR of what each scan's `WHERE` asks; one scan
//!   without a usable condition (or reading the table's late or bad rows,
//!   or a change feed) pushes nothing.
//! - Only conjuncts over physical columns, literals, comparisons, boolean
//!   logic, `IN`, `BETWEEN`, `LIKE`, `IS [NOT] NULL` and casts are pushed:
//!   no functions, so nothing costly or with side effects runs in a reader.
//! - Pushdown is advisory (DataFusion's `Inexact`): the query's own filter
//!   still runs on what the source returns.
//! - Skipped rows are still judged on the columns the table computes
//!   from (the filter's `observed_columns`): their event times count
//!   toward the watermark and the bad ones are reported, so pushdown
//!   changes neither which rows are late nor which are bad.
//!
//! The same scans also say which columns they read (each scan's
//! projection): a source's physical columns that no scan reads, nor the
//! table's event time, primary key or computed columns, become its
//! [`eddy_engine::graph::ConnectorSpec::unread_columns`], which an NDJSON
//! source checks but does not decode. One scan without a projection, or
//! taking every row, leaves every column read.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use datafusion::common::tree_node::TreeNode;
use datafusion::common::{Column, DFSchema};
use datafusion::execution::SessionState;
use datafusion::logical_expr::utils::{conjunction, disjunction, split_conjunction};
use datafusion::logical_expr::{Expr, Filter, LogicalPlan};
use datafusion::physical_expr::utils::collect_columns;
use eddy_engine::graph::SourceFilter;
use eddy_engine::source::SourceColumn;

use crate::ddl::TableDef;

/// What the queries planned so far ask of each table's rows.
#[derive(Debug, Default)]
pub(super) struct SourceScans {
    tables: HashMap<String, Scans>,
}

#[derive(Debug, Default)]
struct Scans {
    /// Scans planned.
    scans: usize,
    /// One condition per scan that had one.
    conditions: Vec<Expr>,
    /// Read in a way that needs every row (late or bad rows, a feed).
    whole: bool,
    /// Scans that said which of the table's columns they read.
    projected: usize,
    /// The columns (of the table's schema) those scans read.
    read: BTreeSet<usize>,
}

impl SourceScans {
    /// A scan of `table`'s source; `whole` when it needs every row.
    pub(super) fn scanned(&mut self, table: &str, whole: bool) {
        let scans = self.tables.entry(table.to_string()).or_default();
        scans.scans += 1;
        scans.whole |= whole;
    }

    /// The next scan of `table` is filtered by `condition`.
    pub(super) fn filtered(&mut self, table: &str, condition: Expr) {
        self.tables
            .entry(table.to_string())
            .or_default()
            .conditions
            .push(condition);
    }

    /// The last scan of `table` reads `columns` (of the table's schema).
    pub(super) fn read(&mut self, table: &str, columns: impl IntoIterator<Item = usize>) {
        let scans = self.tables.entry(table.to_string()).or_default();
        scans.projected += 1;
        scans.read.extend(columns);
    }

    /// Per table whose every scan said what it reads (none taking every
    /// row), the physical columns of `def` none of them reads, nor the
    /// table's event time, primary key or computed columns ([`ConnectorSpec::unread_columns`]).
    ///
    /// [`ConnectorSpec::unread_columns`]: eddy_engine::graph::ConnectorSpec::unread_columns
    pub(super) fn unread<'a>(
        &self,
        def: impl Fn(&str) -> Option<&'a TableDef>,
    ) -> BTreeMap<String, Vec<usize>> {
        self.tables
            .iter()
            .filter(|(_, s)| !s.whole && s.scans > 0 && s.projected == s.scans)
            .filter_map(|(table, s)| {
                let def = def(table)?;
                let layout = &def.layout;
                // The event time and the key are read by the engine itself.
                let key = def
                    .primary_key
                    .iter()
                    .filter_map(|k| layout.output_schema.index_of(k).ok());
                let read: BTreeSet<usize> = s
                    .read
                    .iter()
                    .copied()
                    .chain(layout.event_time.map(|et| et.column))
                    .chain(key)
                    .collect();
                let mut needed = BTreeSet::new();
                for (i, column) in layout.columns.iter().enumerate() {
                    match column {
                        SourceColumn::Computed(computed) => {
                            needed
                                .extend(collect_columns(&computed.expr).iter().map(|c| c.index()));
                        }
                        SourceColumn::Physical(p) if read.contains(&i) => {
                            needed.insert(*p);
                        }
                        SourceColumn::Physical(_) => {}
                    }
                }
                let unread: Vec<usize> = (0..layout.physical_schema.fields().len())
                    .filter(|p| !needed.contains(p))
                    .collect();
                (!unread.is_empty()).then(|| (table.clone(), unread))
            })
            .collect()
    }

    /// Per table, the condition every scan of it meets (`None` where a scan
    /// takes every row).
    pub(super) fn pushed(self) -> BTreeMap<String, Expr> {
        self.tables
            .into_iter()
            .filter(|(_, s)| !s.whole && s.scans > 0 && s.conditions.len() == s.scans)
            .filter_map(|(table, s)| disjunction(s.conditions).map(|c| (table, c)))
            .collect()
    }
}

/// The table a `WHERE` reads directly (maybe through an alias) and the
/// part of its condition a source can use, over the table's physical
/// column names; `None` when nothing is usable.
pub(super) fn usable_condition(
    filter: &Filter,
    tables: &BTreeMap<String, TableDef>,
) -> Option<(String, Expr)> {
    let mut below = filter.input.as_ref();
    while let LogicalPlan::SubqueryAlias(alias) = below {
        below = alias.input.as_ref();
    }
    let LogicalPlan::TableScan(scan) = below else {
        return None;
    };
    let def = tables.get(scan.table_name.table())?;
    let physical: HashMap<&str, &str> = def
        .layout
        .columns
        .iter()
        .zip(def.layout.output_schema.fields())
        .filter_map(|(column, field)| match column {
            SourceColumn::Physical(i) => Some((
                field.name().as_str(),
                def.layout.physical_schema.field(*i).name().as_str(),
            )),
            SourceColumn::Computed(_) => None,
        })
        .collect();
    let usable: Vec<Expr> = split_conjunction(&filter.predicate)
        .into_iter()
        .filter(|e| is_plain(e, &physical))
        .filter_map(|e| {
            e.clone()
                .transform(|e| {
                    Ok(match e {
                        Expr::Column(c) => datafusion::common::tree_node::Transformed::yes(
                            Expr::Column(Column::new_unqualified(physical[c.name.as_str()])),
                        ),
                        other => datafusion::common::tree_node::Transformed::no(other),
                    })
                })
                .ok()
                .map(|t| t.data)
        })
        .collect();
    conjunction(usable).map(|c| (def.name.clone(), c))
}

/// Whether `expr` is made only of physical columns, literals and the
/// operators the module docs list.
fn is_plain(expr: &Expr, physical: &HashMap<&str, &str>) -> bool {
    let mut plain = true;
    let _ = expr.apply(|e| {
        plain &= match e {
            Expr::Column(c) => physical.contains_key(c.name.as_str()),
            Expr::Literal(..)
            | Expr::BinaryExpr(_)
            | Expr::Not(_)
            | Expr::IsNull(_)
            | Expr::IsNotNull(_)
            | Expr::IsTrue(_)
            | Expr::IsFalse(_)
            | Expr::Between(_)
            | Expr::InList(_)
            | Expr::Like(_)
            | Expr::Cast(_)
            | Expr::TryCast(_)
            | Expr::Negative(_) => true,
            _ => false,
        };
        Ok(if plain {
            datafusion::common::tree_node::TreeNodeRecursion::Continue
        } else {
            datafusion::common::tree_node::TreeNodeRecursion::Stop
        })
    });
    plain
}

/// The [`SourceFilter`] of `condition` (over `def`'s physical columns).
pub(super) fn source_filter(
    state: &SessionState,
    def: &TableDef,
    condition: Expr,
) -> datafusion::error::Result<SourceFilter> {
    let schema = DFSchema::try_from(def.layout.physical_schema.as_ref().clone())?;
    let condition = crate::context::simplify(state, condition, &schema)?;
    let text = datafusion::sql::unparser::expr_to_sql(&condition)
        .map(|sql| sql.to_string())
        .unwrap_or_else(|_| condition.to_string());
    let predicate = crate::context::physical_expr(state, condition, &schema)?;
    let mut observed_columns: Vec<usize> = def
        .layout
        .columns
        .iter()
        .enumerate()
        .flat_map(|(i, column)| match column {
            SourceColumn::Computed(computed) => collect_columns(&computed.expr)
                .iter()
                .map(|c| c.index())
                .collect(),
            SourceColumn::Physical(p) if def.layout.event_time.is_some_and(|et| et.column == i) => {
                vec![*p]
            }
            SourceColumn::Physical(_) => Vec::new(),
        })
        .collect();
    observed_columns.sort_unstable();
    observed_columns.dedup();
    Ok(SourceFilter {
        predicate,
        text,
        observed_columns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    #[test]
    fn the_pushed_condition_is_the_or_of_every_scans() {
        let mut scans = SourceScans::default();
        scans.filtered("t", col("a").gt(lit(1)));
        scans.scanned("t", false);
        scans.filtered("t", col("b").eq(lit("x")));
        scans.scanned("t", false);
        let pushed = scans.pushed();
        assert_eq!(
            pushed["t"].to_string(),
            "a > Int32(1) OR b = Utf8(\"x\")",
            "{pushed:?}"
        );
    }

    #[test]
    fn one_scan_taking_every_row_pushes_nothing() {
        let mut scans = SourceScans::default();
        scans.filtered("t", col("a").gt(lit(1)));
        scans.scanned("t", false);
        scans.scanned("t", false);
        scans.filtered("u", col("a").gt(lit(1)));
        scans.scanned("u", true);
        assert!(scans.pushed().is_empty());
    }
}
