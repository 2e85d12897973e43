//! `CREATE FUNCTION` and `CREATE AGGREGATE` for Python functions, in the
//! form sqlparser reads (PostgreSQL's).
//!
//! In: a statement's tokens. Out: for a `CREATE [OR REPLACE] [TEMPORARY]
//! [AGGREGATE] FUNCTION` (or RisingWave's `CREATE AGGREGATE`), the tokens
//! of a plain `CREATE FUNCTION` and what was cut out of them: whether it
//! declares an aggregate, and its `WITH (key = 'value', ...)` options
//! (`vectorized`, `on_error`, `timeout`), which PostgreSQL's form has no
//! place for. Other statements pass untouched.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Word};

use crate::error::{Position, Result, SqlError};
use crate::params::SourceMap;

/// What a function declaration says beyond PostgreSQL's form.
#[derive(Debug, Clone, Default)]
pub struct FunctionClauses {
    /// `CREATE AGGREGATE [FUNCTION]`.
    pub aggregate: bool,
    /// `WITH (key = 'value', ...)`: key (lower case), value, where.
    pub options: Vec<(String, String, Position)>,
}

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

/// Cuts the clauses out of a function declaration; `None` for any other
/// statement.
pub fn cut_function_clauses(
    tokens: &[TokenWithSpan],
    map: &SourceMap,
) -> Result<Option<(Vec<TokenWithSpan>, FunctionClauses)>> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let word = |k: usize, w: &str| {
        significant
            .get(k)
            .is_some_and(|&i| is_word(&tokens[i].token, w))
    };
    if !word(0, "CREATE") {
        return Ok(None);
    }
    // CREATE [OR REPLACE] [TEMPORARY [SYSTEM]] [AGGREGATE] [FUNCTION]
    let mut k = 1;
    if word(k, "OR") && word(k + 1, "REPLACE") {
        k += 2;
    }
    if word(k, "TEMPORARY") || word(k, "TEMP") {
        k += 1;
        if word(k, "SYSTEM") {
            k += 1;
        }
    }
    let mut tokens = tokens.to_vec();
    let mut clauses = FunctionClauses::default();
    if word(k, "AGGREGATE") {
        clauses.aggregate = true;
        let at = significant[k];
        if word(k + 1, "FUNCTION") {
            tokens[at].token =
                Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space);
        } else {
            tokens[at].token = Token::Word(Word {
                value: "FUNCTION".into(),
                quote_style: None,
                keyword: Keyword::FUNCTION,
            });
        }
    } else if !word(k, "FUNCTION") {
        return Ok(None);
    }

    // WITH ( ... ) at the top level.
    let mut depth = 0i32;
    let mut with = None;
    for (n, &i) in significant.iter().enumerate() {
        match tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        let next_is_paren = significant
            .get(n + 1)
            .is_some_and(|&j| matches!(tokens[j].token, Token::LParen));
        if depth == 0 && is_word(&tokens[i].token, "WITH") && next_is_paren {
            with = Some(n);
            break;
        }
    }
    let Some(n) = with else {
        return Ok(Some((tokens, clauses)));
    };
    let start = significant[n];
    let position_of = |t: &TokenWithSpan| map.position(t.span.start.line, t.span.start.column);
    let mut depth = 0i32;
    let mut end = None;
    for (m, &i) in significant.iter().enumerate().skip(n + 1) {
        match tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    end = Some(m);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(end) = end else {
        return Err(SqlError::at(
            &position_of(&tokens[start]),
            "WITH ( has no closing )",
        ));
    };
    let inner: Vec<&TokenWithSpan> = significant[n + 2..end]
        .iter()
        .map(|&i| &tokens[i])
        .collect();
    for pair in inner.split(|t| matches!(t.token, Token::Comma)) {
        let (key, value) = match pair {
            [key, eq, value] if matches!(eq.token, Token::Eq) => (key, value),
            [] => continue,
            [first, ..] => {
                return Err(SqlError::at(
                    &position_of(first),
                    "function options are written key = 'value'",
                ))
            }
        };
        let text = |t: &Token| match t {
            Token::Word(w) => Some(w.value.clone()),
            Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Some(s.clone()),
            Token::Number(n, _) => Some(n.clone()),
            _ => None,
        };
        let (Some(k), Some(v)) = (text(&key.token), text(&value.token)) else {
            return Err(SqlError::at(
                &position_of(key),
                "function options are written key = 'value'",
            ));
        };
        clauses
            .options
            .push((k.to_ascii_lowercase(), v, position_of(key)));
    }
    let cut_end = significant[end];
    for token in &mut tokens[start..=cut_end] {
        token.token = Token::Whitespace(datafusion::sql::sqlparser::tokenizer::Whitespace::Space);
    }
    Ok(Some((tokens, clauses)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn cut(sql: &str) -> Option<(String, FunctionClauses)> {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        let map = SourceMap::default();
        cut_function_clauses(&tokens, &map)
            .unwrap()
            .map(|(tokens, clauses)| {
                let text: String = tokens.iter().map(|t| t.token.to_string()).collect();
                (
                    text.split_whitespace().collect::<Vec<_>>().join(" "),
                    clauses,
                )
            })
    }

    #[test]
    fn aggregate_and_options_are_cut_out() {
        let (text, clauses) = cut(
            "CREATE AGGREGATE wavg(v DOUBLE, w DOUBLE) RETURNS DOUBLE LANGUAGE PYTHON WITH (on_error = 'fail', timeout = '5s') AS 'm:f'",
        )
        .unwrap();
        assert_eq!(
            text,
            "CREATE FUNCTION wavg(v DOUBLE, w DOUBLE) RETURNS DOUBLE LANGUAGE PYTHON AS 'm:f'"
        );
        assert!(clauses.aggregate);
        let options: Vec<(&str, &str)> = clauses
            .options
            .iter()
            .map(|(k, v, _)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(options, [("on_error", "fail"), ("timeout", "5s")]);
    }

    #[test]
    fn other_statements_pass() {
        assert!(cut("CREATE TABLE t (a INT) WITH (connector = 'x')").is_none());
        let (text, clauses) =
            cut("CREATE OR REPLACE FUNCTION f() RETURNS INT LANGUAGE PYTHON AS 'm:f'").unwrap();
        assert!(text.starts_with("CREATE OR REPLACE FUNCTION f()"));
        assert!(!clauses.aggregate && clauses.options.is_empty());
    }
}
