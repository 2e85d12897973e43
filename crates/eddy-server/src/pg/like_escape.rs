//! `LIKE pattern ESCAPE 'c'` with an escape character other than the
//! backslash, which DataFusion refuses ("LIKE does not support escape_char
//! other than the backslash") and SQLAlchemy sends to list schemas
//! (`nspname NOT LIKE 'pg/_%' ESCAPE '/'`).
//!
//! In: a query's text. Out: the same text when it has no such `LIKE`;
//! otherwise the statement printed again with each such pattern turned
//! into the backslash-escaped one it means:
//!
//! ```text
//!  x LIKE p ESCAPE '/'   ->   x LIKE regexp_replace(replace(p, '\', '\\'), '/(.)', '\\\1', 'g')
//! ```
//!
//! A backslash in `p` is an ordinary character there, so it is escaped
//! first; then each escape character and the character after it become a
//! backslash and that character. This is exact for any pattern, a
//! parameter's included, as it is computed where the pattern is.

use std::borrow::Cow;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{visit_expressions_mut, Expr, Value};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

/// `text` with every `LIKE`/`ILIKE ... ESCAPE 'c'` (c not a backslash)
/// rewritten as the module docs say; `text` itself when there is none or
/// it does not parse (DataFusion then reports it).
pub fn rewrite(text: &str) -> Cow<'_, str> {
    if !text.to_ascii_uppercase().contains("ESCAPE") {
        return Cow::Borrowed(text);
    }
    let dialect = PostgreSqlDialect {};
    let Ok(mut statements) = Parser::parse_sql(&dialect, text) else {
        return Cow::Borrowed(text);
    };
    let mut changed = false;
    let _ = visit_expressions_mut(&mut statements, |expr| {
        let (Expr::Like {
            pattern,
            escape_char,
            ..
        }
        | Expr::ILike {
            pattern,
            escape_char,
            ..
        }) = expr
        else {
            return ControlFlow::<()>::Continue(());
        };
        let Some(escape) = escape_char
            .as_ref()
            .and_then(|v| match &v.value {
                Value::SingleQuotedString(s) => s.chars().next().filter(|_| s.chars().count() == 1),
                _ => None,
            })
            .filter(|c| *c != '\\')
        else {
            return ControlFlow::Continue(());
        };
        if let Some(rewritten) = backslash_pattern(pattern, escape) {
            **pattern = rewritten;
            *escape_char = None;
            changed = true;
        }
        ControlFlow::Continue(())
    });
    if !changed {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        statements
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(";\n"),
    )
}

/// The pattern `pattern` (escaped with `escape`) means, escaped with a
/// backslash.
fn backslash_pattern(pattern: &Expr, escape: char) -> Option<Expr> {
    let escape_in_regex = if escape.is_ascii_alphanumeric() {
        escape.to_string()
    } else {
        format!("\\{escape}")
    }
    .replace('\'', "''");
    let sql = format!(
        "regexp_replace(replace(({pattern}), '\\', '\\\\'), '{escape_in_regex}(.)', '\\\\\\1', 'g')"
    );
    Parser::new(&PostgreSqlDialect {})
        .try_with_sql(&sql)
        .ok()?
        .parse_expr()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    async fn answer(sql: &str) -> String {
        let context = SessionContext::new();
        let batches = context
            .sql(&rewrite(sql))
            .await
            .expect("plans")
            .collect()
            .await
            .expect("runs");
        datafusion::arrow::util::display::array_value_to_string(batches[0].column(0), 0)
            .expect("shown")
    }

    #[test]
    fn text_without_such_a_like_is_left_alone() {
        for sql in [
            "SELECT 1",
            "SELECT 'a' LIKE 'a%'",
            "SELECT 'a' LIKE 'a\\%' ESCAPE '\\'",
            "not sql at all ESCAPE",
        ] {
            assert!(matches!(rewrite(sql), Cow::Borrowed(_)), "{sql}");
        }
    }

    #[tokio::test]
    async fn another_escape_character_means_what_it_says() {
        // '/_' is a literal underscore: 'pgx' does not match, 'pg_x' does.
        assert_eq!(
            answer("SELECT 'pgx' LIKE 'pg/_%' ESCAPE '/'").await,
            "false"
        );
        assert_eq!(
            answer("SELECT 'pg_x' LIKE 'pg/_%' ESCAPE '/'").await,
            "true"
        );
        assert_eq!(
            answer("SELECT 'public' NOT LIKE 'pg/_' || '%' ESCAPE '/'").await,
            "true"
        );
        // '//' is a literal '/', a backslash is an ordinary character.
        assert_eq!(answer("SELECT 'a/b' LIKE 'a//b' ESCAPE '/'").await, "true");
        assert_eq!(answer("SELECT 'a\\b' LIKE 'a\\b' ESCAPE '/'").await, "true");
        assert_eq!(answer("SELECT 'A_B' ILIKE 'a#_b' ESCAPE '#'").await, "true");
        assert_eq!(
            answer("SELECT 'AxB' ILIKE 'a#_b' ESCAPE '#'").await,
            "false"
        );
    }
}
