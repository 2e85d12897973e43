//! Flink's `WITHIN` in `MATCH_RECOGNIZE`: `PATTERN (A B) WITHIN INTERVAL
//! '1' MINUTE DEFINE ...`. sqlparser has no `WITHIN` there, so its interval
//! is moved into the `DEFINE` list as a definition of the reserved name
//! [`WITHIN_SYMBOL`] (tokens keep their positions), which the planner reads
//! back as the match's time bound.
//!
//! In: a statement's tokens. Out: the same, each `WITHIN <interval>` after a
//! `PATTERN (...)` moved behind the `DEFINE` that follows it.

use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace, Word};

use crate::dialect::rewrite::is_word;

/// The name a moved `WITHIN` interval is defined under.
pub const WITHIN_SYMBOL: &str = "__eddy_within";

/// Moves every `PATTERN (...) WITHIN <interval> DEFINE` interval behind
/// its `DEFINE` as `__eddy_within AS <interval>,`.
pub fn move_within(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let at = |k: usize| significant.get(k).map(|&i| &tokens[i].token);
    // (WITHIN's token index, DEFINE's token index) per clause.
    let mut moves = Vec::new();
    let mut k = 0;
    while k < significant.len() {
        let pattern = at(k).is_some_and(|t| is_word(t, "PATTERN"))
            && at(k + 1).is_some_and(|t| matches!(t, Token::LParen));
        if !pattern {
            k += 1;
            continue;
        }
        // The pattern's closing parenthesis.
        let mut depth = 0;
        let mut end = k + 1;
        while let Some(token) = at(end) {
            match token {
                Token::LParen => depth += 1,
                Token::RParen => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            end += 1;
        }
        let within = end + 1;
        if !at(within).is_some_and(|t| is_word(t, "WITHIN")) {
            k = end;
            continue;
        }
        let mut define = within + 1;
        while let Some(token) = at(define) {
            if is_word(token, "DEFINE") || matches!(token, Token::RParen | Token::SemiColon) {
                break;
            }
            define += 1;
        }
        if at(define).is_some_and(|t| is_word(t, "DEFINE")) {
            moves.push((significant[within], significant[define]));
        }
        k = define;
    }
    if moves.is_empty() {
        return tokens;
    }
    let mut out = Vec::with_capacity(tokens.len() + 4 * moves.len());
    let mut i = 0;
    for (within, define) in moves {
        out.extend_from_slice(&tokens[i..within]);
        let span = tokens[within].span;
        let interval = &tokens[within + 1..define];
        out.push(tokens[define].clone());
        let synthetic = |token: Token| TokenWithSpan { token, span };
        out.push(synthetic(Token::Whitespace(Whitespace::Space)));
        out.push(synthetic(Token::Word(Word {
            value: WITHIN_SYMBOL.to_string(),
            quote_style: None,
            keyword: datafusion::sql::sqlparser::keywords::Keyword::NoKeyword,
        })));
        out.push(synthetic(Token::Whitespace(Whitespace::Space)));
        out.push(synthetic(Token::make_keyword("AS")));
        out.extend_from_slice(interval);
        out.push(synthetic(Token::Comma));
        i = define + 1;
    }
    out.extend_from_slice(&tokens[i..]);
    out
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    use super::*;

    fn moved(sql: &str) -> String {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        move_within(tokens)
            .iter()
            .map(|t| t.token.to_string())
            .collect()
    }

    #[test]
    fn within_moves_behind_define() {
        assert_eq!(
            moved("PATTERN (A (B | C)+) WITHIN INTERVAL '1' MINUTE DEFINE A AS x > 1"),
            "PATTERN (A (B | C)+) DEFINE __eddy_within AS INTERVAL '1' MINUTE , A AS x > 1"
        );
        assert_eq!(
            moved("PATTERN (A B) DEFINE A AS x"),
            "PATTERN (A B) DEFINE A AS x"
        );
    }
}
