//! Short names for unaliased function columns.
//!
//! In: a parsed statement. Out: the same statement where each select item
//! that is an unaliased function call of at most one column gets a short
//! alias: `count(*)` -> `count`, `sum(o.amount)` -> `sum_amount`,
//! `row_number() OVER (...)` -> `row_number`, `upper(name)` -> `upper_name`,
//! Flink's `TUMBLE_START(...)`/`_END`/`_ROWTIME` -> `window_start`,
//! `window_end`, `window_time`; a struct field read without an alias
//! (`window.start`) is named by the field (`start`).
//! A name that another item of the same select already has is not given
//! (DataFusion's expression text stays), so no query changes meaning.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, Select, SelectItem, Statement,
    TableFactor, VisitMut, VisitorMut,
};

/// Gives short names to unaliased function columns in `statement`.
pub fn name_function_columns(statement: &mut Statement) {
    struct Namer;
    impl VisitorMut for Namer {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
            name_select(select);
            ControlFlow::Continue(())
        }
    }
    let _ = statement.visit(&mut Namer);
}

fn item_name(item: &SelectItem) -> Option<String> {
    match item {
        SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
        SelectItem::UnnamedExpr(Expr::Identifier(ident)) => Some(ident.value.to_lowercase()),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => {
            parts.last().map(|p| p.value.to_lowercase())
        }
        _ => None,
    }
}

/// `count`, `sum_amount`, ...: the short name of a function call, if it
/// has one.
fn short_name(expr: &Expr) -> Option<String> {
    if let Some(field) = window_field(expr) {
        return Some(field);
    }
    let Expr::Function(function) = expr else {
        return None;
    };
    let name = function.name.0.last()?.to_string().to_lowercase();
    if matches!(
        name.as_str(),
        "tumble" | "hop" | "cumulate" | "session" | "get_field"
    ) {
        return None;
    }
    let args = match &function.args {
        FunctionArguments::None => return Some(name),
        FunctionArguments::List(list) => &list.args,
        FunctionArguments::Subquery(_) => return None,
    };
    match args.as_slice() {
        [] | [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] => Some(name),
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Identifier(column)))] => {
            Some(format!("{name}_{}", column.value.to_lowercase()))
        }
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::CompoundIdentifier(parts)))] => {
            Some(format!("{name}_{}", parts.last()?.value.to_lowercase()))
        }
        _ => None,
    }
}

/// `window_start`, `window_end` or `window_time` for Flink's window
/// columns as `flink_windows` rewrites them (`TUMBLE_START(...)` ->
/// `get_field(tumble(...), 'start')`, `..._ROWTIME` -> `... 'end') - 1 ms`).
fn window_field(expr: &Expr) -> Option<String> {
    let (expr, time) = match expr {
        Expr::BinaryOp {
            left,
            op: datafusion::sql::sqlparser::ast::BinaryOperator::Minus,
            ..
        } => (left.as_ref(), true),
        other => (other, false),
    };
    let Expr::Function(function) = expr else {
        return None;
    };
    if !function.name.to_string().eq_ignore_ascii_case("get_field") {
        return None;
    }
    let FunctionArguments::List(list) = &function.args else {
        return None;
    };
    let [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Function(window))), FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(field)))] =
        list.args.as_slice()
    else {
        return None;
    };
    let window = window.name.to_string().to_lowercase();
    if !matches!(window.as_str(), "tumble" | "hop" | "cumulate" | "session") {
        return None;
    }
    let field = match &field.value {
        datafusion::sql::sqlparser::ast::Value::SingleQuotedString(f) => f.as_str(),
        _ => return None,
    };
    match (field, time) {
        ("start", false) => Some("window_start".into()),
        ("end", false) => Some("window_end".into()),
        ("end", true) => Some("window_time".into()),
        _ => None,
    }
}

/// The names a SELECT's FROM gives its relations (tables and aliases).
fn relation_names(select: &Select) -> HashSet<String> {
    let mut names = HashSet::new();
    for from in &select.from {
        for factor in std::iter::once(&from.relation).chain(from.joins.iter().map(|j| &j.relation))
        {
            match factor {
                TableFactor::Table { name, alias, .. } => {
                    if let Some(last) = name.0.last() {
                        names.insert(last.to_string().to_lowercase());
                    }
                    if let Some(alias) = alias {
                        names.insert(alias.name.value.to_lowercase());
                    }
                }
                TableFactor::Derived {
                    alias: Some(alias), ..
                } => {
                    names.insert(alias.name.value.to_lowercase());
                }
                _ => {}
            }
        }
    }
    names
}

fn name_select(select: &mut Select) {
    let mut taken: HashSet<String> = select.projection.iter().filter_map(item_name).collect();
    // A struct field read without an alias (`window.start`, Arroyo's
    // spelling) is named by the field, as a qualified column (`t.start`) is.
    let relations = relation_names(select);
    let names: Vec<String> = select.projection.iter().filter_map(item_name).collect();
    for item in &mut select.projection {
        if let SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) = item {
            let qualified_column =
                parts.len() == 2 && relations.contains(&parts[0].value.to_lowercase());
            let field = parts
                .last()
                .map(|p| p.value.to_lowercase())
                .unwrap_or_default();
            if parts.len() >= 2
                && !qualified_column
                && names.iter().filter(|n| **n == field).count() == 1
            {
                // The field's name as written: the planner reads it by
                // the session's rule for names.
                let alias = parts.last().cloned().unwrap_or_else(|| Ident::new(field));
                *item = SelectItem::ExprWithAlias {
                    expr: Expr::CompoundIdentifier(parts.clone()),
                    alias,
                };
            }
            continue;
        }
        let SelectItem::UnnamedExpr(expr) = item else {
            continue;
        };
        let Some(name) = short_name(expr) else {
            continue;
        };
        if !taken.insert(name.clone()) {
            continue;
        }
        *item = SelectItem::ExprWithAlias {
            expr: expr.clone(),
            alias: Ident::new(name),
        };
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn named(sql: &str) -> String {
        let mut statement = Parser::new(&GenericDialect {})
            .try_with_sql(sql)
            .unwrap()
            .parse_statement()
            .unwrap();
        name_function_columns(&mut statement);
        statement.to_string()
    }

    #[test]
    fn function_columns_get_short_names_that_do_not_collide() {
        assert_eq!(
            named("SELECT k, count(*), sum(o.amount), max(amount) AS top, round(x, 2) FROM t GROUP BY k"),
            "SELECT k, count(*) AS count, sum(o.amount) AS sum_amount, max(amount) AS top, round(x, 2) FROM t GROUP BY k"
        );
        assert_eq!(
            named("SELECT count(*) AS count, count(*) FROM t"),
            "SELECT count(*) AS count, count(*) FROM t",
            "a taken name is not given twice"
        );
        let mut legacy = Parser::new(&GenericDialect {})
            .try_with_sql("SELECT TUMBLE_START(ts, INTERVAL '5' SECOND), TUMBLE_ROWTIME(ts, INTERVAL '5' SECOND) FROM t GROUP BY TUMBLE(ts, INTERVAL '5' SECOND)")
            .unwrap()
            .parse_statement()
            .unwrap();
        crate::dialect::flink_windows::rewrite_group_windows(&mut legacy);
        name_function_columns(&mut legacy);
        let text = legacy.to_string();
        assert!(
            text.contains("'start') AS window_start")
                && text.contains("MILLISECOND AS window_time"),
            "{text}"
        );
        assert_eq!(
            named("SELECT row_number() OVER (ORDER BY ts) FROM t"),
            "SELECT row_number() OVER (ORDER BY ts) AS row_number FROM t"
        );
    }

    #[test]
    fn struct_fields_are_named_by_the_field_and_qualified_columns_are_left_alone() {
        assert_eq!(
            named("SELECT window.start, s.k, s.w.end FROM stats AS s"),
            "SELECT window.start AS start, s.k, s.w.end AS end FROM stats AS s"
        );
        assert_eq!(
            named("SELECT a.w.start, b.w.start FROM a JOIN b ON a.k = b.k"),
            "SELECT a.w.start, b.w.start FROM a JOIN b ON a.k = b.k",
            "two fields of one name keep DataFusion's names"
        );
    }
}
