//! Flink's row types in a `CREATE TABLE`: `person ROW<id BIGINT, name
//! VARCHAR>` and `person ROW(id BIGINT, name VARCHAR)` become the
//! `STRUCT<id BIGINT, name VARCHAR>` sqlparser reads and DataFusion plans
//! as a struct column (read as `person.id`, `person.name`).
//!
//! In: a statement's tokens. Out: the same tokens, `ROW` types spelt
//! `STRUCT<...>`; other statements, and `ROW(...)` as a value (`x AS
//! ROW(a, b)`), untouched.
//!
//! A `ROW` is a type when it follows a column's or a field's name at the
//! start of an item (after `(`, `,` or `<`).

use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::dialect::rewrite::is_word;

/// See the module docs.
pub fn struct_row_types(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let is_create_table = significant.len() > 2
        && is_word(&tokens[significant[0]].token, "CREATE")
        && significant[1..]
            .iter()
            .take(4)
            .any(|&i| is_word(&tokens[i].token, "TABLE"));
    if !is_create_table {
        return tokens;
    }
    // The depths at which `ROW(` types were opened: their `(` became `<`,
    // which counts no depth, and the `)` met at that depth closes them.
    let mut open_rows: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    for k in 0..significant.len() {
        let i = significant[k];
        match tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => {
                if open_rows.last() == Some(&depth) {
                    open_rows.pop();
                    tokens[i].token = Token::Gt;
                } else {
                    depth = depth.saturating_sub(1);
                }
            }
            _ => {}
        }
        let at_type = k >= 2
            && matches!(tokens[significant[k - 1]].token, Token::Word(_))
            && matches!(
                tokens[significant[k - 2]].token,
                Token::LParen | Token::Comma | Token::Lt
            );
        if !(at_type && is_word(&tokens[i].token, "ROW")) {
            continue;
        }
        match significant.get(k + 1).map(|&j| &tokens[j].token) {
            Some(Token::Lt) => tokens[i].token = Token::make_keyword("STRUCT"),
            Some(Token::LParen) => {
                tokens[i].token = Token::make_keyword("STRUCT");
                tokens[significant[k + 1]].token = Token::Lt;
                open_rows.push(depth);
            }
            _ => {}
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn rewrite(sql: &str) -> String {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        struct_row_types(tokens)
            .iter()
            .map(|t| t.token.to_string())
            .collect()
    }

    #[test]
    fn row_types_become_structs() {
        assert_eq!(
            rewrite("CREATE TABLE t (p ROW<id BIGINT, d TIMESTAMP(3)>, k INT)"),
            "CREATE TABLE t (p STRUCT<id BIGINT, d TIMESTAMP(3)>, k INT)"
        );
        assert_eq!(
            rewrite("CREATE TABLE t (p ROW(id BIGINT, q ROW(x INT)), k INT)"),
            "CREATE TABLE t (p STRUCT<id BIGINT, q STRUCT<x INT>>, k INT)"
        );
    }

    #[test]
    fn row_values_and_other_statements_are_left_alone() {
        assert_eq!(
            rewrite("CREATE TABLE t (a INT, r AS ROW(a, a))"),
            "CREATE TABLE t (a INT, r AS ROW(a, a))"
        );
        assert_eq!(
            rewrite("SELECT ROW(a, b) FROM t"),
            "SELECT ROW(a, b) FROM t"
        );
    }
}
