//! Flink's event-time temporal join, `JOIN versioned FOR SYSTEM_TIME AS OF
//! probe.t [AS v] ON ...`: sqlparser's generic dialect has no `FOR
//! SYSTEM_TIME AS OF`, so the clause is cut out of the statement's tokens
//! (positions stay with the tokens that remain) and recorded, and the
//! planner plans the join it marks as a temporal join.
//!
//! In: a statement's tokens. Out: the tokens without the clauses, and per
//! clause the versioned table (its alias, else its name) and the probe's
//! time column named after `AS OF`.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// One `FOR SYSTEM_TIME AS OF` clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemporalJoin {
    /// How the query names the versioned table: its alias, else its name
    /// (lower case).
    pub table: String,
    /// The probe time column `AS OF` names (its last part, lower case).
    pub time_column: String,
    /// Where `FOR` is written (line, column).
    pub at: (u64, u64),
}

fn is_keyword(token: &Token, keyword: Keyword) -> bool {
    matches!(token, Token::Word(w) if w.keyword == keyword && w.quote_style.is_none())
}

fn word(token: &Token) -> Option<String> {
    match token {
        Token::Word(w) => Some(if w.quote_style.is_some() {
            w.value.clone()
        } else {
            w.value.to_lowercase()
        }),
        _ => None,
    }
}

/// An error at a (line, column).
pub type CutError = (u64, u64, String);

/// Cuts every `FOR SYSTEM_TIME AS OF <column>` out of `tokens`.
pub fn cut_temporal_joins(
    tokens: Vec<TokenWithSpan>,
) -> Result<(Vec<TokenWithSpan>, Vec<TemporalJoin>), CutError> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let at = |k: usize| significant.get(k).map(|&i| &tokens[i].token);
    let mut cut = vec![false; tokens.len()];
    let mut found = Vec::new();
    let mut k = 0;
    while k < significant.len() {
        let clause = at(k).is_some_and(|t| is_keyword(t, Keyword::FOR))
            && at(k + 1).is_some_and(|t| is_keyword(t, Keyword::SYSTEM_TIME))
            && at(k + 2).is_some_and(|t| is_keyword(t, Keyword::AS))
            && at(k + 3).is_some_and(|t| is_keyword(t, Keyword::OF));
        if !clause {
            k += 1;
            continue;
        }
        let span = tokens[significant[k]].span.start;
        let position = (span.line, span.column);
        let table = k
            .checked_sub(1)
            .and_then(&at)
            .and_then(word)
            .ok_or_else(|| {
                (
                    position.0,
                    position.1,
                    "FOR SYSTEM_TIME AS OF follows the versioned table it applies to".to_string(),
                )
            })?;
        // The time column: a (qualified) column name.
        let mut end = k + 4;
        let mut column = at(end).and_then(word).ok_or_else(|| {
            (
                position.0,
                position.1,
                "FOR SYSTEM_TIME AS OF takes the probe side's event-time column (o.order_time)"
                    .to_string(),
            )
        })?;
        while at(end + 1) == Some(&Token::Period) {
            column = at(end + 2).and_then(word).ok_or_else(|| {
                (
                    position.0,
                    position.1,
                    "FOR SYSTEM_TIME AS OF takes a column name".to_string(),
                )
            })?;
            end += 2;
        }
        for &i in &significant[k..=end] {
            cut[i] = true;
        }
        // The alias after the clause, if any: `AS v` or a bare `v`.
        let alias = match at(end + 1) {
            Some(t) if is_keyword(t, Keyword::AS) => at(end + 2).and_then(word),
            Some(Token::Word(w))
                if w.quote_style.is_some()
                    || !matches!(
                        w.keyword,
                        Keyword::ON
                            | Keyword::USING
                            | Keyword::WHERE
                            | Keyword::JOIN
                            | Keyword::LEFT
                            | Keyword::RIGHT
                            | Keyword::INNER
                            | Keyword::FULL
                            | Keyword::CROSS
                            | Keyword::GROUP
                            | Keyword::ORDER
                            | Keyword::UNION
                    ) =>
            {
                word(&Token::Word(w.clone()))
            }
            _ => None,
        };
        found.push(TemporalJoin {
            table: alias.unwrap_or(table),
            time_column: column,
            at: position,
        });
        k = end + 1;
    }
    let kept = tokens
        .into_iter()
        .zip(cut)
        .filter(|(_, cut)| !cut)
        .map(|(t, _)| t)
        .collect();
    Ok((kept, found))
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    use super::*;

    fn cut(sql: &str) -> (String, Vec<TemporalJoin>) {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        let (kept, found) = cut_temporal_joins(tokens).unwrap();
        let text: String = kept.iter().map(|t| t.token.to_string()).collect();
        (text, found)
    }

    #[test]
    fn the_clause_is_cut_and_its_table_and_time_recorded() {
        let (text, found) = cut(
            "SELECT * FROM orders o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r ON o.c = r.c",
        );
        // The clause's words are gone (the whitespace between them stays).
        assert_eq!(
            text.split_whitespace().collect::<Vec<_>>().join(" "),
            "SELECT * FROM orders o LEFT JOIN rates AS r ON o.c = r.c"
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].table, "r");
        assert_eq!(found[0].time_column, "order_time");
        let (_, found) =
            cut("SELECT * FROM o JOIN Rates FOR SYSTEM_TIME AS OF o.t ON o.c = Rates.c");
        assert_eq!(found[0].table, "rates", "no alias: the table's name");
    }
}
