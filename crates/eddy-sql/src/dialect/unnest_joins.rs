//! Flink's `CROSS JOIN UNNEST(t.tags) AS u(tag)` (also `, UNNEST(...)` and
//! `LEFT JOIN UNNEST(...) AS u(tag) ON TRUE`). DataFusion plans an UNNEST
//! table that reads another table's columns as a correlated subquery, which
//! a stream cannot run; as a projection (`SELECT t.*, unnest(t.tags) AS
//! tag FROM t`) it plans an `Unnest` that eddy runs as a node of its own.
//! So the join is rewritten into that projection, named as the table was:
//!
//! ```text
//!   FROM t CROSS JOIN UNNEST(t.tags) AS u(tag)
//!   -> FROM (SELECT t.*, unnest(t.tags) AS tag FROM t WHERE t.tags IS NOT NULL) AS t
//! ```
//!
//! and the query's `u.tag` becomes `t.tag`. A cross join keeps no row for a
//! NULL or empty array; `LEFT JOIN ... ON TRUE` keeps one with NULL.
//!
//! In: a parsed statement. Out: the same with those joins rewritten, or
//! why one cannot be (the message names the join).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, Expr, Ident, JoinConstraint, JoinOperator, Query, SetExpr, Statement,
    TableFactor, TableWithJoins, Value, VisitMut, VisitorMut,
};

/// Why an UNNEST join cannot be rewritten (and so cannot run).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnnestRefusal {
    /// A join other than CROSS JOIN, a comma or LEFT JOIN ... ON TRUE.
    #[error(
        "UNNEST joins its table with CROSS JOIN, a comma or LEFT JOIN ... ON TRUE, not {join}"
    )]
    Join { join: &'static str },
    /// `WITH ORDINALITY` or `WITH OFFSET`.
    #[error("UNNEST ... WITH ORDINALITY (or WITH OFFSET) is not supported")]
    Ordinality,
    /// No named table before it.
    #[error("UNNEST must follow a named table (or one with an alias) whose column it unnests, not {relation}")]
    NoTable { relation: String },
    /// Its columns are not named, one name per array.
    #[error("name the column UNNEST makes, one name per array: UNNEST({arrays}) AS u(name{})", if *several { ", ..." } else { "" })]
    Unnamed { arrays: String, several: bool },
    /// Not right after the table whose column it unnests.
    #[error("{relation}: an UNNEST join must directly follow the table whose column it unnests")]
    NotNext { relation: String },
    /// The rewritten text did not parse (a bug).
    #[error("UNNEST: cannot rewrite the join into {from}")]
    Rewrite { from: String },
}

/// A join operator as SQL names it, for [`UnnestRefusal::Join`].
fn join_words(join: &JoinOperator) -> &'static str {
    match join {
        JoinOperator::Join(_) | JoinOperator::Inner(_) => "JOIN ... ON a condition",
        JoinOperator::Left(_) | JoinOperator::LeftOuter(_) => "LEFT JOIN ... ON a condition",
        JoinOperator::Right(_) | JoinOperator::RightOuter(_) => "RIGHT JOIN",
        JoinOperator::FullOuter(_) => "FULL JOIN",
        JoinOperator::CrossApply => "CROSS APPLY",
        JoinOperator::OuterApply => "OUTER APPLY",
        _ => "this join",
    }
}

/// Rewrites every UNNEST join of `statement`.
pub fn rewrite_unnest_joins(statement: &mut Statement) -> Result<(), UnnestRefusal> {
    let mut rewriter = Rewriter { error: None };
    let _ = statement.visit(&mut rewriter);
    match rewriter.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct Rewriter {
    error: Option<UnnestRefusal>,
}

impl VisitorMut for Rewriter {
    type Break = ();

    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let SetExpr::Select(select) = query.body.as_mut() {
            // `FROM t, UNNEST(...) AS u(x)`: the comma form of a cross join.
            let mut from: Vec<TableWithJoins> = Vec::new();
            for twj in std::mem::take(&mut select.from) {
                match (from.last_mut(), &twj.relation) {
                    (Some(previous), TableFactor::UNNEST { .. }) if twj.joins.is_empty() => {
                        previous.joins.push(datafusion::sql::sqlparser::ast::Join {
                            relation: twj.relation,
                            global: false,
                            join_operator: JoinOperator::CrossJoin(JoinConstraint::None),
                        });
                    }
                    _ => from.push(twj),
                }
            }
            let mut renames: Vec<(String, Ident)> = Vec::new();
            for twj in from.iter_mut() {
                if let Err(e) = rewrite_joins(twj, &mut renames) {
                    self.error = Some(e);
                    return ControlFlow::Break(());
                }
            }
            select.from = from;
            if !renames.is_empty() {
                // `u.tag` -> `t.tag`, wherever the query reads it.
                let _ = visit_expressions_mut(query, |e| {
                    if let Expr::CompoundIdentifier(parts) = e {
                        if parts.len() == 2 {
                            let qualifier = crate::dialect::identifiers::normalize(&parts[0]);
                            if let Some((_, to)) =
                                renames.iter().find(|(from, _)| *from == qualifier)
                            {
                                parts[0] = to.clone();
                            }
                        }
                    }
                    ControlFlow::<()>::Continue(())
                });
            }
        }
        ControlFlow::Continue(())
    }
}

/// Whether a join constraint is `ON TRUE` (or none).
fn on_true(constraint: &JoinConstraint) -> bool {
    match constraint {
        JoinConstraint::None => true,
        JoinConstraint::On(Expr::Value(v)) => matches!(v.value, Value::Boolean(true)),
        _ => false,
    }
}

/// The name a query reads a table factor by, as written (the planner
/// reads it by the session's rule for names).
fn qualifier(factor: &TableFactor) -> Option<Ident> {
    match factor {
        TableFactor::Table { alias: Some(a), .. } | TableFactor::Derived { alias: Some(a), .. } => {
            Some(a.name.clone())
        }
        TableFactor::Table { name, .. } => name.0.last().and_then(|p| p.as_ident()).cloned(),
        _ => None,
    }
}

fn rewrite_joins(
    twj: &mut TableWithJoins,
    renames: &mut Vec<(String, Ident)>,
) -> Result<(), UnnestRefusal> {
    while let Some(join) = twj.joins.first() {
        let TableFactor::UNNEST {
            alias,
            array_exprs,
            with_offset,
            with_ordinality,
            ..
        } = &join.relation
        else {
            break;
        };
        let keep_empty = match &join.join_operator {
            JoinOperator::CrossJoin(c) | JoinOperator::Join(c) | JoinOperator::Inner(c)
                if on_true(c) =>
            {
                false
            }
            JoinOperator::Left(c) | JoinOperator::LeftOuter(c) if on_true(c) => true,
            other => {
                return Err(UnnestRefusal::Join {
                    join: join_words(other),
                })
            }
        };
        if *with_offset || *with_ordinality {
            return Err(UnnestRefusal::Ordinality);
        }
        let Some(table) = qualifier(&twj.relation) else {
            return Err(UnnestRefusal::NoTable {
                relation: twj.relation.to_string(),
            });
        };
        let Some(alias) = alias
            .as_ref()
            .filter(|a| a.columns.len() == array_exprs.len())
        else {
            return Err(UnnestRefusal::Unnamed {
                arrays: array_exprs
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                several: array_exprs.len() > 1,
            });
        };
        let columns: Vec<String> = array_exprs
            .iter()
            .zip(&alias.columns)
            .map(|(e, c)| {
                if keep_empty {
                    // A NULL or empty array becomes one NULL element.
                    format!(
                        "unnest(CASE WHEN cardinality({e}) > 0 THEN {e} ELSE make_array(NULL) END) AS {}",
                        c.name
                    )
                } else {
                    format!("unnest({e}) AS {}", c.name)
                }
            })
            .collect();
        let filter = if keep_empty {
            String::new()
        } else {
            format!(
                " WHERE {}",
                array_exprs
                    .iter()
                    .map(|e| format!("{e} IS NOT NULL"))
                    .collect::<Vec<_>>()
                    .join(" OR ")
            )
        };
        let quoted = table.to_string();
        let from = format!(
            "(SELECT {quoted}.*, {} FROM {}{filter}) AS {quoted}",
            columns.join(", "),
            twj.relation
        );
        let derived = crate::dialect::rewrite::parse_table_factor(&from)
            .ok_or_else(|| UnnestRefusal::Rewrite { from: from.clone() })?;
        renames.push((crate::dialect::identifiers::normalize(&alias.name), table));
        twj.relation = derived;
        twj.joins.remove(0);
    }
    if let Some(join) = twj
        .joins
        .iter()
        .find(|j| matches!(j.relation, TableFactor::UNNEST { .. }))
    {
        return Err(UnnestRefusal::NotNext {
            relation: join.relation.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn rewritten(sql: &str) -> Result<String, UnnestRefusal> {
        let mut statement = Parser::new(&GenericDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_statement())
            .unwrap();
        rewrite_unnest_joins(&mut statement).map(|_| statement.to_string())
    }

    #[test]
    fn a_cross_join_becomes_a_projection_named_as_the_table() {
        assert_eq!(
            rewritten("SELECT o.id, u.tag FROM orders AS o CROSS JOIN UNNEST(o.tags) AS u(tag)")
                .unwrap(),
            "SELECT o.id, o.tag FROM (SELECT o.*, unnest(o.tags) AS tag FROM orders AS o WHERE o.tags IS NOT NULL) AS o"
        );
        // The comma form.
        assert!(rewritten("SELECT tag FROM t, UNNEST(t.tags) AS u(tag)")
            .unwrap()
            .contains("unnest(t.tags) AS tag FROM t WHERE"));
        // LEFT JOIN ... ON TRUE keeps rows without elements.
        assert!(rewritten("SELECT tag FROM t LEFT JOIN UNNEST(t.tags) AS u(tag) ON TRUE")
            .unwrap()
            .contains("unnest(CASE WHEN cardinality(t.tags) > 0 THEN t.tags ELSE make_array(NULL) END) AS tag FROM t) AS"));
    }

    #[test]
    fn what_cannot_be_rewritten_is_named() {
        let unnamed = rewritten("SELECT 1 FROM t CROSS JOIN UNNEST(t.tags)").unwrap_err();
        assert!(
            unnamed.to_string().starts_with(
                "name the column UNNEST makes, one name per array: UNNEST(t.tags) AS u(name)"
            ),
            "{unnamed}"
        );
        assert_eq!(
            rewritten("SELECT 1 FROM t CROSS JOIN UNNEST(t.tags) WITH ORDINALITY AS u(x, n)"),
            Err(UnnestRefusal::Ordinality)
        );
        assert_eq!(
            rewritten("SELECT 1 FROM t RIGHT JOIN UNNEST(t.tags) AS u(x) ON TRUE"),
            Err(UnnestRefusal::Join { join: "RIGHT JOIN" })
        );
    }
}
