//! Flink functions DataFusion has under another name or argument order,
//! rewritten in the parsed statement: `CEILING` -> `ceil`, `SIGN` ->
//! `signum`, `TRUNCATE` -> `trunc`, `STARTSWITH`/`ENDSWITH` ->
//! `starts_with`/`ends_with`, `LOCATE(a, b)` -> `strpos(b, a)`, `IF(c, a, b)`
//! -> `CASE WHEN c THEN a ELSE b END`, `SPLIT` -> `string_to_array`,
//! `LISTAGG(s [, sep])` -> `string_agg(s, sep)` (`,` by default),
//! `CURRENT_ROW_TIMESTAMP()` -> `now()` (eddy's wall clock per batch),
//! `TO_BASE64`/`FROM_BASE64` -> padded base64 `encode`/`decode` (as text),
//! `SHA1`... `SHA512` and `SHA2(s, bits)` -> the digest as lower-case hex
//! (DataFusion's `sha256` gives bytes), `ELEMENT(a)` -> the array's only
//! element (NULL unless it has exactly one), `REGEXP_REPLACE` and
//! `ARRAY_REMOVE` of every match (DataFusion's replace the first only).
//!
//! In: a parsed statement. Out: the same, calls rewritten; column names
//! are chosen before (`dialect::output_names`), so an unaliased `CEILING(x)`
//! column keeps Flink's name.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments,
    Statement,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// The plain positional arguments of a call, if that is all it has.
fn plain_args(function: &Function) -> Option<Vec<&Expr>> {
    match &function.args {
        FunctionArguments::List(list)
            if list.duplicate_treatment.is_none() && list.clauses.is_empty() =>
        {
            list.args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect()
        }
        FunctionArguments::None => Some(Vec::new()),
        _ => None,
    }
}

fn parse_expr(sql: &str) -> Option<Expr> {
    Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .ok()
}

/// The rewrite of one call, as SQL text over its arguments' text.
fn rewrite(name: &str, args: &[String]) -> Option<String> {
    let renamed = |to: &str| Some(format!("{to}({})", args.join(", ")));
    match (name, args) {
        ("ceiling", [_]) => renamed("ceil"),
        ("sign", [_]) => renamed("signum"),
        ("truncate", [x]) => Some(format!("trunc({x})")),
        ("truncate", [_, _]) => renamed("trunc"),
        ("startswith", [_, _]) => renamed("starts_with"),
        ("endswith", [_, _]) => renamed("ends_with"),
        ("locate", [needle, haystack]) => Some(format!("strpos({haystack}, {needle})")),
        ("if", [c, a, b]) => Some(format!("CASE WHEN {c} THEN {a} ELSE {b} END")),
        ("split", [_, _]) => renamed("string_to_array"),
        ("listagg", [s]) => Some(format!("string_agg({s}, ',')")),
        ("listagg", [_, _]) => renamed("string_agg"),
        ("current_row_timestamp", []) => Some("now()".into()),
        ("to_base64", [s]) => Some(format!("encode({s}, 'base64pad')")),
        ("from_base64", [s]) => Some(format!("CAST(decode({s}, 'base64pad') AS VARCHAR)")),
        ("sha224" | "sha256" | "sha384" | "sha512", [s]) => {
            Some(format!("encode({name}(CAST({s} AS VARCHAR)), 'hex')"))
        }
        ("sha2", [s, bits]) if ["224", "256", "384", "512"].contains(&bits.as_str()) => {
            Some(format!("encode(sha{bits}(CAST({s} AS VARCHAR)), 'hex')"))
        }
        ("element", [a]) => Some(format!("CASE WHEN cardinality({a}) = 1 THEN {a}[1] END")),
        // Flink replaces every match and removes every equal element;
        // DataFusion's plain forms stop at the first.
        ("regexp_replace", [s, p, r]) => Some(format!("regexp_replace({s}, {p}, {r}, 'g')")),
        ("array_remove", [_, _]) => renamed("array_remove_all"),
        _ => None,
    }
}

/// Rewrites the Flink spellings in `statement`.
pub fn rename_functions(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::Function(function) = expr {
            let name = function.name.to_string().to_ascii_lowercase();
            let replacement = plain_args(function).and_then(|args| {
                let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
                rewrite(&name, &args)
            });
            if let Some(new) = replacement.as_deref().and_then(parse_expr) {
                *expr = new;
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renamed(sql: &str) -> String {
        let mut statement = Parser::new(&GenericDialect {})
            .try_with_sql(sql)
            .and_then(|mut p| p.parse_statement())
            .unwrap();
        rename_functions(&mut statement);
        statement.to_string()
    }

    #[test]
    fn flink_spellings_become_datafusion_calls() {
        assert_eq!(
            renamed("SELECT CEILING(x), SIGN(y) FROM t"),
            "SELECT CEIL(x), signum(y) FROM t"
        );
        assert_eq!(
            renamed("SELECT LOCATE('in', s) FROM t"),
            "SELECT strpos(s, 'in') FROM t"
        );
        assert_eq!(
            renamed("SELECT IF(x > 1, 'a', 'b') FROM t"),
            "SELECT CASE WHEN x > 1 THEN 'a' ELSE 'b' END FROM t"
        );
        assert_eq!(
            renamed("SELECT LISTAGG(s) FROM t"),
            "SELECT string_agg(s, ',') FROM t"
        );
        // Nested calls are rewritten too; unknown arities are left alone.
        assert_eq!(
            renamed("SELECT IF(SIGN(x) > 0, 1, 0) FROM t"),
            "SELECT CASE WHEN signum(x) > 0 THEN 1 ELSE 0 END FROM t"
        );
        assert_eq!(
            renamed("SELECT LOCATE('a', s, 3) FROM t"),
            "SELECT LOCATE('a', s, 3) FROM t"
        );
    }
}
