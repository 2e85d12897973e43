//! Query hints: `/*+ uid('name') */` anywhere in a statement names the
//! query, so that its operators keep their state across changes to it
//! (see `eddy_engine::identity`).
//!
//! In: a statement's tokens (hints are comments to the tokenizer). Out:
//! the statement's name, if it has one, with where it is written. A hint
//! eddy does not know is an error naming it, never silently ignored.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Whitespace};

use crate::error::{Position, Result, SqlError};
use crate::params::SourceMap;

/// A query's name from its `uid` hint.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryUid {
    /// The name, as written.
    pub name: String,
    /// Where the hint is written.
    pub position: Position,
}

/// The `uid` hint among `tokens`, if any.
///
/// ```
/// use datafusion::sql::sqlparser::dialect::GenericDialect;
/// use datafusion::sql::sqlparser::tokenizer::Tokenizer;
/// use eddy_sql::dialect::hints::query_uid;
///
/// let sql = "INSERT INTO alerts SELECT /*+ uid('fraud') */ * FROM payments";
/// let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location().unwrap();
/// let uid = query_uid(&tokens, &Default::default()).unwrap().unwrap();
/// assert_eq!(uid.name, "fraud");
/// ```
pub fn query_uid(tokens: &[TokenWithSpan], map: &SourceMap) -> Result<Option<QueryUid>> {
    let mut found: Option<QueryUid> = None;
    for token in tokens {
        let Token::Whitespace(Whitespace::MultiLineComment(text)) = &token.token else {
            continue;
        };
        let Some(hint) = text.strip_prefix('+') else {
            continue;
        };
        let position = map.position(token.span.start.line, token.span.start.column);
        for (name, args) in hint_items(hint).map_err(|e| SqlError::at(&position, e))? {
            if !name.eq_ignore_ascii_case("uid") {
                return Err(SqlError::at(
                    &position,
                    format!(
                        "eddy knows one query hint, uid('name') (the name a query's state is kept by across changes to it); '{name}' is not one it knows"
                    ),
                ));
            }
            let names: Vec<String> = args
                .iter()
                .map(|token| match token {
                    Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Ok(s.clone()),
                    Token::Word(w) if w.quote_style.is_some() => Ok(w.value.clone()),
                    other => Err(SqlError::at(
                        &position,
                        format!("uid takes a name in quotes, as in /*+ uid('fraud_rules') */; found '{other}'"),
                    )),
                })
                .collect::<Result<_>>()?;
            let [uid] = names.as_slice() else {
                return Err(SqlError::at(
                    &position,
                    format!(
                        "uid takes one name in quotes, as in /*+ uid('fraud_rules') */; it was given {} arguments",
                        names.len()
                    ),
                ));
            };
            if uid.trim().is_empty() {
                return Err(SqlError::at(&position, "uid('') names nothing"));
            }
            if let Some(first) = &found {
                return Err(SqlError::at(
                    &position,
                    format!(
                        "a statement takes one uid; it already has uid('{}') at {}:{}",
                        first.name, first.position.line, first.position.column
                    ),
                ));
            }
            found = Some(QueryUid {
                name: uid.clone(),
                position: position.clone(),
            });
        }
    }
    Ok(found)
}

/// The items of a hint comment's text (after its `+`): `name(args)`,
/// separated by commas or spaces; the arguments' tokens, commas left out.
fn hint_items(text: &str) -> std::result::Result<Vec<(String, Vec<Token>)>, String> {
    let tokens = Tokenizer::new(&GenericDialect {}, text)
        .tokenize()
        .map_err(|e| format!("cannot read the hint /*+{text}*/: {e}"))?;
    let mut tokens = tokens
        .into_iter()
        .filter(|t| !matches!(t, Token::Whitespace(_) | Token::Comma));
    let mut items = Vec::new();
    while let Some(token) = tokens.next() {
        let Token::Word(name) = token else {
            return Err(format!(
                "a hint is written name('argument'), as in /*+ uid('fraud_rules') */; found '{token}'"
            ));
        };
        let mut args = Vec::new();
        if !matches!(tokens.next(), Some(Token::LParen)) {
            return Err(format!(
                "hint '{}' needs its arguments in parentheses, as in /*+ uid('fraud_rules') */",
                name.value
            ));
        }
        let mut depth = 1;
        loop {
            match tokens.next() {
                Some(Token::RParen) if depth == 1 => break,
                Some(token) => {
                    depth += i32::from(token == Token::LParen) - i32::from(token == Token::RParen);
                    args.push(token);
                }
                None => return Err(format!("hint '{}' is missing its ')'", name.value)),
            }
        }
        items.push((name.value, args));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uid_of(sql: &str) -> Result<Option<String>> {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        Ok(query_uid(&tokens, &SourceMap::default())?.map(|u| u.name))
    }

    #[test]
    fn a_uid_hint_names_the_query_and_comments_are_left_alone() {
        assert_eq!(
            uid_of("SELECT /*+ uid('per_customer') */ a FROM t").unwrap(),
            Some("per_customer".into())
        );
        assert_eq!(
            uid_of("INSERT INTO s /*+UID(\"x\")*/ SELECT a FROM t").unwrap(),
            Some("x".into())
        );
        assert_eq!(
            uid_of("SELECT /* uid('no') */ a FROM t -- x").unwrap(),
            None
        );
    }

    #[test]
    fn unknown_or_malformed_hints_are_errors_naming_them() {
        let e = uid_of("SELECT /*+ OPTIONS('a'='b') */ a FROM t").unwrap_err();
        assert!(
            e.to_string().contains("'OPTIONS' is not one it knows"),
            "{e}"
        );
        let e = uid_of("SELECT /*+ uid(a) */ a FROM t").unwrap_err();
        assert!(e.to_string().contains("takes a name in quotes"), "{e}");
        let e = uid_of("SELECT /*+ uid('a', 'b') */ a FROM t").unwrap_err();
        assert!(e.to_string().contains("given 2 arguments"), "{e}");
        let e = uid_of("SELECT /*+ uid('a') */ /*+ uid('b') */ a FROM t").unwrap_err();
        assert!(e.to_string().contains("already has uid('a')"), "{e}");
        let e = uid_of("SELECT /*+ uid('a' */ a FROM t").unwrap_err();
        assert!(e.to_string().contains("missing its ')'"), "{e}");
    }
}
