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
//! element (NULL unless it has exactly one), `E()`, `IS_DIGIT`/`IS_ALPHA`/
//! `IS_DECIMAL` (regular expressions, FALSE for NULL), `UNIX_TIMESTAMP`,
//! `FLOOR`/`CEIL(t TO unit)` (`date_trunc`), `LOCALTIMESTAMP`/`LOCALTIME`
//! (the wall clock), `REGEXP` -> `regexp_like`, `ARRAY_PREPEND(a, x)` ->
//! `array_prepend(x, a)`, `ENCODE`/`DECODE` in UTF-8 -> casts, `REGEXP_REPLACE` and
//! `ARRAY_REMOVE` of every match (DataFusion's replace the first only),
//! `REGEXP_SUBSTR` (the first match), `ELT(i, a, b, ...)` (a `CASE`),
//! `RAND_INTEGER(n)`, `MAP_FROM_ARRAYS` -> `map`.
//!
//! In: a parsed statement. Out: the same, calls rewritten; column names
//! are chosen before (`dialect::output_names`), so an unaliased `CEILING(x)`
//! column keeps Flink's name.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, CeilFloorKind, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, Statement,
};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::dialect::rewrite::parse_expr;

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

/// Whether a charset argument names UTF-8.
fn is_utf8(charset: &str) -> bool {
    matches!(
        charset.trim_matches('\'').to_ascii_uppercase().as_str(),
        "UTF-8" | "UTF8"
    )
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
        ("e", []) => Some("exp(1.0)".into()),
        // Keywords in Flink, calls without parentheses for sqlparser: the
        // wall clock (UTC), as NOW() and CURRENT_TIME.
        ("localtimestamp", []) => Some("now()".into()),
        ("localtime", []) => Some("current_time()".into()),
        ("regexp", [_, _]) => renamed("regexp_like"),
        // Flink puts the array first, DataFusion the element.
        ("array_prepend", [array, element]) => Some(format!("array_prepend({element}, {array})")),
        // Text to bytes and back in UTF-8, the one charset eddy's strings have.
        ("encode", [s, charset]) if is_utf8(charset) => Some(format!("CAST({s} AS BYTEA)")),
        ("decode", [b, charset]) if is_utf8(charset) => Some(format!("CAST({b} AS VARCHAR)")),
        // Flink's character classes; FALSE for NULL, as in Flink.
        ("is_digit", [s]) => Some(format!("coalesce(regexp_like({s}, '^[0-9]+$'), false)")),
        ("is_alpha", [s]) => Some(format!("coalesce(regexp_like({s}, '^[A-Za-z]+$'), false)")),
        ("is_decimal", [s]) => Some(format!(
            "coalesce(regexp_like({s}, '^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)$'), false)"
        )),
        ("unix_timestamp", []) => Some("CAST(to_unixtime(now()) AS BIGINT)".into()),
        ("unix_timestamp", [s]) => Some(format!("CAST(to_unixtime({s}) AS BIGINT)")),
        // The first match: REGEXP_EXTRACT's whole-match group.
        ("regexp_substr", [s, p]) => Some(format!("regexp_extract({s}, {p}, 0)")),
        // The index-th argument, from 1; NULL out of range.
        ("elt", [index, rest @ ..]) if !rest.is_empty() => Some(format!(
            "CASE {index} {} END",
            rest.iter()
                .enumerate()
                .map(|(i, e)| format!("WHEN {} THEN {e}", i + 1))
                .collect::<Vec<_>>()
                .join(" ")
        )),
        ("rand_integer", [n]) => Some(format!("CAST(floor(random() * ({n})) AS INT)")),
        ("map_from_arrays", [_, _]) => renamed("map"),
        _ => None,
    }
}

/// `FLOOR(t TO unit)` / `CEIL(t TO unit)`: `t` truncated to the unit, or
/// (ceiling) the next unit boundary unless `t` is on one.
fn time_floor_or_ceil(expr: &Expr) -> Option<String> {
    let (inner, field, ceil) = match expr {
        Expr::Floor {
            expr,
            field: CeilFloorKind::DateTimeField(field),
        } => (expr, field, false),
        Expr::Ceil {
            expr,
            field: CeilFloorKind::DateTimeField(field),
        } => (expr, field, true),
        _ => return None,
    };
    let unit = field.to_string().to_ascii_lowercase();
    if ![
        "second", "minute", "hour", "day", "week", "month", "quarter", "year",
    ]
    .contains(&unit.as_str())
    {
        return None;
    }
    let floor = format!("date_trunc('{unit}', {inner})");
    Some(if ceil {
        format!("CASE WHEN {floor} = {inner} THEN {floor} ELSE {floor} + INTERVAL '1' {unit} END")
    } else {
        floor
    })
}

/// Rewrites the Flink spellings in `statement`.
pub fn rename_functions(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Some(new) = time_floor_or_ceil(expr).as_deref().and_then(parse_expr) {
            *expr = new;
            return ControlFlow::<()>::Continue(());
        }
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

/// Flink's map literal `MAP['a', 1, 'b', 2]` (keys and values in turn) as
/// the `MAP {'a': 1, 'b': 2}` sqlparser and DataFusion read.
pub fn map_literals(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let is_map = crate::dialect::rewrite::is_word(&tokens[i].token, "MAP")
            && matches!(tokens.get(i + 1).map(|t| &t.token), Some(Token::LBracket));
        if !is_map {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        }
        // The items up to the matching bracket, split at top-level commas.
        let mut depth = 0;
        let mut end = i + 1;
        while end < tokens.len() {
            match tokens[end].token {
                Token::LBracket | Token::LParen | Token::LBrace => depth += 1,
                Token::RBracket | Token::RParen | Token::RBrace => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            end += 1;
        }
        if end >= tokens.len() {
            out.extend_from_slice(&tokens[i..]);
            break;
        }
        let inner = &tokens[i + 2..end];
        let mut item = 0;
        let mut level = 0;
        let span = tokens[i + 1].span;
        out.push(tokens[i].clone());
        out.push(TokenWithSpan {
            token: Token::LBrace,
            span,
        });
        for token in inner {
            match token.token {
                Token::LBracket | Token::LParen | Token::LBrace => level += 1,
                Token::RBracket | Token::RParen | Token::RBrace => level -= 1,
                _ => {}
            }
            if level == 0 && matches!(token.token, Token::Comma) {
                item += 1;
                // Between a key and its value: a colon.
                let separator = if item % 2 == 1 {
                    Token::Colon
                } else {
                    Token::Comma
                };
                out.push(TokenWithSpan {
                    token: separator,
                    span: token.span,
                });
                continue;
            }
            out.push(token.clone());
        }
        out.push(TokenWithSpan {
            token: Token::RBrace,
            span: tokens[end].span,
        });
        i = end + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

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
    fn map_literals_take_colons() {
        let tokens = datafusion::sql::sqlparser::tokenizer::Tokenizer::new(
            &GenericDialect {},
            "SELECT MAP['a', 1, 'b', f(2, 3)]['b']",
        )
        .tokenize_with_location()
        .unwrap();
        let text: String = map_literals(tokens)
            .iter()
            .map(|t| t.token.to_string())
            .collect();
        assert_eq!(
            text,
            "SELECT MAP{'a': 1: 'b': f(2, 3)}['b']".replace(": 'b'", ", 'b'")
        );
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
