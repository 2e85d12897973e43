//! A positional INSERT's SELECT with clashing names: Flink and SQL insert a
//! query's columns by position, so `INSERT INTO t SELECT a, CAST(a AS
//! VARCHAR) FROM s` is fine there, but DataFusion names both columns `a`
//! and refuses the projection. When such an INSERT does not plan, its
//! SELECT's unnamed items are named after the columns they go into, which
//! changes nothing else, and it is planned again.
//!
//! In: an `INSERT` statement and the names of the columns it fills, in
//! order. Out: the same statement, its SELECT's unnamed items aliased.

use datafusion::sql::sqlparser::ast::{Ident, Insert, SelectItem, SetExpr};

/// Names the unnamed items of `insert`'s SELECT after `targets` (the
/// columns they fill, in order); `false` when it cannot (no plain SELECT,
/// a wildcard, or a count that does not match).
pub(super) fn name_after_targets(insert: &mut Insert, targets: &[String]) -> bool {
    let Some(query) = insert.source.as_mut() else {
        return false;
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return false;
    };
    if select.projection.len() != targets.len()
        || select.projection.iter().any(|item| {
            matches!(
                item,
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
            )
        })
    {
        return false;
    }
    for (item, target) in select.projection.iter_mut().zip(targets) {
        if let SelectItem::UnnamedExpr(expr) = item {
            *item = SelectItem::ExprWithAlias {
                expr: expr.clone(),
                alias: Ident::with_quote('"', target.clone()),
            };
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn named(sql: &str, targets: &[&str]) -> Option<String> {
        let mut statement = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0);
        let Statement::Insert(insert) = &mut statement else {
            panic!("an INSERT");
        };
        let targets: Vec<String> = targets.iter().map(|t| t.to_string()).collect();
        name_after_targets(insert, &targets).then(|| statement.to_string())
    }

    #[test]
    fn unnamed_items_take_their_target_columns_names() {
        assert_eq!(
            named(
                "INSERT INTO t SELECT a, CAST(a AS VARCHAR), b AS x FROM s",
                &["a", "a1", "y"]
            )
            .as_deref(),
            Some(r#"INSERT INTO t SELECT a AS "a", CAST(a AS VARCHAR) AS "a1", b AS x FROM s"#)
        );
        assert_eq!(named("INSERT INTO t SELECT * FROM s", &["a"]), None);
        assert_eq!(named("INSERT INTO t SELECT a, b FROM s", &["a"]), None);
    }
}
