//! Small pieces the dialect's rewrites share: matching a word among a
//! statement's tokens, and reading SQL text a rewrite writes back into an
//! expression, a query or a table factor.
//!
//! In: tokens, or SQL text made by a rewrite. Out: a match, or the parsed
//! piece (`None` when the text does not parse: the rewrite is then left
//! undone and the original reaches the planner, which names the problem).

use datafusion::sql::sqlparser::ast::{Expr, Query, SetExpr, Statement, TableFactor};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::Token;

/// Whether `token` is the unquoted word `word` (any case).
pub fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

/// An expression from SQL text.
pub fn parse_expr(sql: &str) -> Option<Expr> {
    Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_expr())
        .ok()
}

/// A query from SQL text.
pub fn parse_query(sql: &str) -> Option<Query> {
    match Parser::new(&GenericDialect {})
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_statement())
        .ok()?
    {
        Statement::Query(query) => Some(*query),
        _ => None,
    }
}

/// The table factor `from` is (`orders AS o`, `(SELECT ...) AS t`).
pub fn parse_table_factor(from: &str) -> Option<TableFactor> {
    let mut query = parse_query(&format!("SELECT * FROM {from}"))?;
    match query.body.as_mut() {
        SetExpr::Select(select) if !select.from.is_empty() => Some(select.from.remove(0).relation),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_parse_or_say_none() {
        assert!(is_word(&Token::make_word("within", None), "WITHIN"));
        assert!(!is_word(&Token::make_word("within", Some('"')), "WITHIN"));
        assert_eq!(parse_expr("a + 1").unwrap().to_string(), "a + 1");
        assert!(parse_expr("a +").is_none());
        assert!(matches!(
            parse_table_factor("t AS u"),
            Some(TableFactor::Table { .. })
        ));
        assert!(parse_table_factor("(").is_none());
    }
}
