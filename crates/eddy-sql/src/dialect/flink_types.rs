//! Flink's data types as its DDL and casts write them, turned into the
//! types sqlparser reads and DataFusion plans, or refused with what to write
//! instead.
//!
//! | Flink | eddy |
//! |---|---|
//! | `TIMESTAMP_LTZ(p)`, `TIMESTAMP(p) WITH LOCAL TIME ZONE` | `TIMESTAMP(p)`: an instant, shown in UTC (eddy's session zone) |
//! | `TIME(p)`, `TIME(p) WITHOUT TIME ZONE` | `TIME` |
//! | `BYTES`, `BINARY(n)`, `VARBINARY(n)` | `BYTEA` (variable-length bytes) |
//! | `DEC(p, s)` | `DECIMAL(p, s)` |
//! | `MAP<K, V>` | an Arrow map of `K` to `V` |
//! | `MULTISET<T>`, `T MULTISET` | `MAP<T, INT>`: each element and how often it occurs, as Flink holds it |
//! | `T ARRAY` | `ARRAY<T>` |
//! | `VARIANT` | `JSON` |
//! | `NOT NULL` inside a nested type (`MAP<STRING NOT NULL, T>`) | dropped: nested fields are nullable |
//! | `INTERVAL ...` as a column type, `RAW(...)`, `NULL` | refused, naming what to declare instead |
//!
//! In: a statement's tokens. Out: the same tokens with Flink's spellings
//! rewritten where a type is written: a column's or a field's type (after
//! its name, at the start of an item) and a `CAST(... AS type)`, nested
//! types included. A `MAP` travels to the planner as a struct of two
//! marked fields ([`MAP_KEY`], [`MAP_VALUE`]) that [`maps_from_structs`]
//! turns into the map type once the schema is built.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::dialect::rewrite::is_word;

/// The field name a map's key type travels under until the schema is built.
pub const MAP_KEY: &str = "__eddy_map_key";
/// The field name a map's value type travels under.
pub const MAP_VALUE: &str = "__eddy_map_value";

/// A Flink type eddy does not take, where it is written (line, column), and
/// what to write instead.
pub type Refusal = (u64, u64, String);

/// What a `<` opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Angle {
    /// `ARRAY<`, `STRUCT<`: passed on as it is.
    Plain,
    /// `MAP<K, V>`: the `,` at its depth starts the value.
    Map,
    /// `MULTISET<T>`: its `>` gets `, __eddy_map_value INT` before it.
    Multiset,
}

fn word(token: &Token) -> Option<&str> {
    match token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.value.as_str()),
        _ => None,
    }
}

fn keyword(text: &str) -> Token {
    Token::make_keyword(text)
}

/// See the module docs.
pub fn flink_types(tokens: Vec<TokenWithSpan>) -> Result<Vec<TokenWithSpan>, Refusal> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let is_create_table = significant.len() > 2
        && is_word(&tokens[significant[0]].token, "CREATE")
        && significant[1..]
            .iter()
            .take(4)
            .any(|&i| is_word(&tokens[i].token, "TABLE"));
    let has_cast = significant.iter().any(|&i| {
        ["CAST", "TRY_CAST"]
            .iter()
            .any(|w| is_word(&tokens[i].token, w))
    });
    let has_type_word = significant.iter().any(|&i| {
        word(&tokens[i].token).is_some_and(|w| {
            [
                "TIMESTAMP_LTZ",
                "LOCAL",
                "TIME",
                "BYTES",
                "BINARY",
                "VARBINARY",
                "DEC",
                "MAP",
                "MULTISET",
                "ARRAY",
                "VARIANT",
                "INTERVAL",
                "RAW",
                "NULL",
            ]
            .iter()
            .any(|t| w.eq_ignore_ascii_case(t))
        })
    });
    if !(is_create_table || has_cast) || !has_type_word {
        return Ok(tokens);
    }
    let at = |i: usize| -> &Token { &tokens[significant[i]].token };
    let refuse = |k: usize, message: String| -> Refusal {
        let span = tokens[significant[k]].span;
        (span.start.line, span.start.column, message)
    };
    // Per open parenthesis, whether it opened a CAST's argument list.
    let mut parens: Vec<bool> = Vec::new();
    let mut angles: Vec<Angle> = Vec::new();
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len() + 8);
    let mut k = 0;
    // Copies the tokens from the last significant one handed on (exclusive)
    // up to significant token `k` (exclusive): whitespace between them.
    let mut next_raw = 0usize;
    while k < significant.len() {
        let i = significant[k];
        // Whitespace before this token goes out as it was.
        out.extend_from_slice(&tokens[next_raw..i]);
        next_raw = i + 1;
        let span = tokens[i].span;
        let make = |token: Token| TokenWithSpan { token, span };
        let previous = k.checked_sub(1).map(at);
        let before_previous = k.checked_sub(2).map(at);
        let in_cast = parens.last().copied().unwrap_or(false);
        let after_name = matches!(previous, Some(Token::Word(_)))
            && matches!(
                before_previous,
                Some(Token::LParen | Token::Comma | Token::Lt)
            )
            && (is_create_table || !angles.is_empty());
        let type_position = after_name
            || (in_cast && previous.is_some_and(|p| is_word(p, "AS")))
            || (!angles.is_empty() && matches!(previous, Some(Token::Lt | Token::Comma)));
        match &tokens[i].token {
            Token::LParen => {
                let cast = previous.is_some_and(|p| is_word(p, "CAST") || is_word(p, "TRY_CAST"));
                parens.push(cast);
            }
            Token::RParen => {
                parens.pop();
            }
            Token::Gt if !angles.is_empty() => {
                let closed = angles.pop();
                if closed == Some(Angle::Multiset) {
                    out.push(make(Token::Comma));
                    out.push(make(Token::Whitespace(
                        datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
                    )));
                    out.push(make(keyword(MAP_VALUE)));
                    out.push(make(Token::Whitespace(
                        datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
                    )));
                    out.push(make(keyword("INT")));
                }
            }
            Token::ShiftRight if !angles.is_empty() => {
                // `>>` closes two.
                for _ in 0..2 {
                    if angles.pop() == Some(Angle::Multiset) {
                        out.push(make(Token::Comma));
                        out.push(make(keyword(MAP_VALUE)));
                        out.push(make(keyword("INT")));
                    }
                    out.push(make(Token::Gt));
                }
                k += 1;
                continue;
            }
            Token::Comma if angles.last() == Some(&Angle::Map) => {
                out.push(tokens[i].clone());
                out.push(make(Token::Whitespace(
                    datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
                )));
                out.push(make(keyword(MAP_VALUE)));
                k += 1;
                continue;
            }
            Token::Lt if matches!(previous, Some(Token::Word(_))) => {
                // Opened by ARRAY/STRUCT (MAP and MULTISET push their own).
                angles.push(Angle::Plain);
            }
            _ => {}
        }
        // `NOT NULL` on a nested type (`MAP<STRING NOT NULL, ...>`,
        // `ROW<a INT NOT NULL>`): nested fields are nullable in eddy, and
        // the constraint is not checked, so it goes.
        if !angles.is_empty()
            && is_word(&tokens[i].token, "NOT")
            && significant
                .get(k + 1)
                .is_some_and(|&t| is_word(&tokens[t].token, "NULL"))
        {
            next_raw = significant.get(k + 2).copied().unwrap_or(tokens.len());
            k += 2;
            continue;
        }
        if !type_position {
            out.push(tokens[i].clone());
            k += 1;
            continue;
        }
        let Some(name) = word(&tokens[i].token).map(str::to_ascii_uppercase) else {
            out.push(tokens[i].clone());
            k += 1;
            continue;
        };
        let is = |j: usize, w: &str| {
            significant
                .get(j)
                .is_some_and(|&t| is_word(&tokens[t].token, w))
        };
        // `( n )` at significant index j: the index after it, if it is one.
        let precision_after = |j: usize| -> Option<usize> {
            match (
                significant.get(j).map(|&t| &tokens[t].token),
                significant.get(j + 2).map(|&t| &tokens[t].token),
            ) {
                (Some(Token::LParen), Some(Token::RParen)) => Some(j + 3),
                _ => None,
            }
        };
        // Skips significant tokens up to `to` (exclusive), whitespace too.
        let skip_to = |to: usize, next_raw: &mut usize| {
            if let Some(&t) = significant.get(to) {
                *next_raw = t;
            } else {
                *next_raw = tokens.len();
            }
        };
        match name.as_str() {
            "TIMESTAMP_LTZ" => {
                out.push(make(keyword("TIMESTAMP")));
                k += 1;
                continue;
            }
            "TIMESTAMP" => {
                let after = precision_after(k + 1).unwrap_or(k + 1);
                if is(after, "WITH") && is(after + 1, "LOCAL") {
                    // Keep `TIMESTAMP(p)`, drop `WITH LOCAL TIME ZONE`.
                    for j in k..after {
                        out.push(tokens[significant[j]].clone());
                    }
                    skip_to(after + 4, &mut next_raw);
                    k = after + 4;
                    continue;
                }
            }
            "TIME" => {
                if let Some(after) = precision_after(k + 1) {
                    out.push(make(keyword("TIME")));
                    let end = if is(after, "WITHOUT") {
                        after + 3
                    } else {
                        after
                    };
                    skip_to(end, &mut next_raw);
                    k = end;
                    continue;
                }
            }
            "BYTES" => {
                out.push(make(keyword("BYTEA")));
                k += 1;
                continue;
            }
            "BINARY" | "VARBINARY" => {
                let after = precision_after(k + 1).unwrap_or(k + 1);
                out.push(make(keyword("BYTEA")));
                skip_to(after, &mut next_raw);
                k = after;
                continue;
            }
            "DEC" => {
                out.push(make(keyword("DECIMAL")));
                k += 1;
                continue;
            }
            "VARIANT" => {
                out.push(make(keyword("JSON")));
                k += 1;
                continue;
            }
            "MAP" | "MULTISET"
                if matches!(
                    significant.get(k + 1).map(|&t| &tokens[t].token),
                    Some(Token::Lt)
                ) =>
            {
                out.push(make(keyword("STRUCT")));
                out.push(make(Token::Lt));
                out.push(make(keyword(MAP_KEY)));
                out.push(make(Token::Whitespace(
                    datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
                )));
                angles.push(if name == "MAP" {
                    Angle::Map
                } else {
                    Angle::Multiset
                });
                skip_to(k + 2, &mut next_raw);
                k += 2;
                continue;
            }
            "INTERVAL" if is_create_table && !in_cast => {
                return Err(refuse(
                    k,
                    "Flink's INTERVAL types are not column types in eddy: declare a duration as BIGINT milliseconds (and write INTERVAL literals in expressions)".into(),
                ));
            }
            "RAW" => {
                return Err(refuse(
                    k,
                    "RAW holds serialized Java objects, and eddy runs no Java: declare the column BYTES for its bytes, or STRING".into(),
                ));
            }
            "NULL" if after_name && is_create_table => {
                return Err(refuse(
                    k,
                    "a column of type NULL holds nothing: declare the type its values have".into(),
                ));
            }
            _ => {}
        }
        // Postfix collections: `T ARRAY`, `T MULTISET` (T a word, maybe
        // with `(...)` arguments).
        let after_type = precision_after(k + 1)
            .or_else(|| {
                // `DECIMAL(10, 2)`: `( n , m )`.
                match (
                    significant.get(k + 1).map(|&t| &tokens[t].token),
                    significant.get(k + 5).map(|&t| &tokens[t].token),
                ) {
                    (Some(Token::LParen), Some(Token::RParen)) => Some(k + 6),
                    _ => None,
                }
            })
            .unwrap_or(k + 1);
        let postfix = if is(after_type, "ARRAY") {
            Some(false)
        } else if is(after_type, "MULTISET") {
            Some(true)
        } else {
            None
        };
        match postfix {
            Some(multiset) => {
                if multiset {
                    out.push(make(keyword("STRUCT")));
                    out.push(make(Token::Lt));
                    out.push(make(keyword(MAP_KEY)));
                    out.push(make(Token::Whitespace(
                        datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
                    )));
                } else {
                    out.push(make(keyword("ARRAY")));
                    out.push(make(Token::Lt));
                }
                for j in k..after_type {
                    out.push(tokens[significant[j]].clone());
                }
                if multiset {
                    out.push(make(Token::Comma));
                    out.push(make(keyword(MAP_VALUE)));
                    out.push(make(Token::Whitespace(
                        datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
                    )));
                    out.push(make(keyword("INT")));
                }
                out.push(make(Token::Gt));
                skip_to(after_type + 1, &mut next_raw);
                k = after_type + 1;
            }
            None => {
                out.push(tokens[i].clone());
                k += 1;
            }
        }
    }
    out.extend_from_slice(&tokens[next_raw.min(tokens.len())..]);
    Ok(out)
}

/// `data_type` with every struct of the two marked fields (a `MAP<K, V>`
/// as [`flink_types`] passed it on) as the Arrow map of `K` to `V`.
pub fn map_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Struct(fields)
            if fields.len() == 2
                && fields[0].name() == MAP_KEY
                && fields[1].name() == MAP_VALUE =>
        {
            // Keys as plain strings: DataFusion's map functions compare a
            // key with a string literal of that type.
            let key = match map_type(fields[0].data_type()) {
                DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
                other => other,
            };
            let entries = Field::new(
                "entries",
                DataType::Struct(Fields::from(vec![
                    Field::new("key", key, false),
                    Field::new("value", map_type(fields[1].data_type()), true),
                ])),
                false,
            );
            DataType::Map(Arc::new(entries), false)
        }
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| f.as_ref().clone().with_data_type(map_type(f.data_type())))
                .collect::<Vec<_>>()
                .into(),
        ),
        DataType::List(item) => DataType::List(Arc::new(
            item.as_ref()
                .clone()
                .with_data_type(map_type(item.data_type())),
        )),
        other => other.clone(),
    }
}

/// `schema` with its maps' types restored (see [`map_type`]).
pub fn maps_from_structs(schema: Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_data_type(map_type(f.data_type())))
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn rewrite(sql: &str) -> Result<String, Refusal> {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        Ok(flink_types(tokens)?
            .into_iter()
            .map(|t| t.token.to_string())
            .collect())
    }

    #[test]
    fn flink_types_become_types_the_planner_reads() {
        assert_eq!(
            rewrite("CREATE TABLE t (a TIMESTAMP_LTZ(3), b TIMESTAMP(3) WITH LOCAL TIME ZONE, c TIME(3), d BYTES, e VARBINARY(10), f DEC(10, 2), g VARIANT)").unwrap(),
            "CREATE TABLE t (a TIMESTAMP(3), b TIMESTAMP(3), c TIME, d BYTEA, e BYTEA, f DECIMAL(10, 2), g JSON)"
        );
        assert_eq!(
            rewrite("CREATE TABLE t (m MAP<STRING, BIGINT>, s MULTISET<STRING>, x INT ARRAY, y STRING MULTISET)").unwrap(),
            "CREATE TABLE t (m STRUCT<__eddy_map_key STRING, __eddy_map_value BIGINT>, s STRUCT<__eddy_map_key STRING, __eddy_map_value INT>, x ARRAY<INT>, y STRUCT<__eddy_map_key STRING,__eddy_map_value INT>)"
        );
        assert_eq!(
            rewrite("SELECT CAST(ts AS TIMESTAMP_LTZ(3)), time_col FROM t").unwrap(),
            "SELECT CAST(ts AS TIMESTAMP(3)), time_col FROM t"
        );
        // Not a type: left alone.
        assert_eq!(
            rewrite("SELECT bytes, map FROM t WHERE x IS NOT NULL").unwrap(),
            "SELECT bytes, map FROM t WHERE x IS NOT NULL"
        );
        assert_eq!(
            rewrite("CREATE TABLE t (a ARRAY<INT NOT NULL> NOT NULL, b ROW<c STRING NOT NULL>)")
                .unwrap(),
            "CREATE TABLE t (a ARRAY<INT > NOT NULL, b ROW<c STRING >)"
        );
        assert_eq!(
            rewrite("CREATE TABLE t (a INT NOT NULL, b ARRAY<INT>)").unwrap(),
            "CREATE TABLE t (a INT NOT NULL, b ARRAY<INT>)"
        );
    }

    #[test]
    fn types_eddy_does_not_hold_are_refused_with_what_to_write() {
        let (line, column, message) =
            rewrite("CREATE TABLE t (a INT, d INTERVAL DAY TO SECOND(3))").unwrap_err();
        assert_eq!((line, column), (1, 26));
        assert!(message.contains("BIGINT milliseconds"), "{message}");
        let (_, _, message) =
            rewrite("CREATE TABLE t (r RAW('java.util.UUID', 'AA'))").unwrap_err();
        assert!(message.contains("BYTES"), "{message}");
    }

    #[test]
    fn marked_structs_become_maps() {
        let key_value = DataType::Struct(Fields::from(vec![
            Field::new(MAP_KEY, DataType::Utf8, true),
            Field::new(MAP_VALUE, DataType::Int64, true),
        ]));
        let DataType::Map(entries, false) = map_type(&key_value) else {
            panic!("a map")
        };
        let DataType::Struct(fields) = entries.data_type() else {
            panic!("entries")
        };
        assert_eq!(fields[0].data_type(), &DataType::Utf8);
        assert_eq!(fields[1].data_type(), &DataType::Int64);
        let nested = DataType::List(Arc::new(Field::new("item", key_value, true)));
        assert!(
            matches!(map_type(&nested), DataType::List(item) if matches!(item.data_type(), DataType::Map(_, _)))
        );
    }
}
