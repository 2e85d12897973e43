//! Flink's JSON construction and test: `JSON_OBJECT([KEY] k VALUE v, ...
//! [NULL | ABSENT ON NULL])`, `JSON_ARRAY(v, ... [NULL | ABSENT ON NULL])`,
//! `JSON_STRING(v)`, `JSON(text)` and `text IS [NOT] JSON [VALUE | SCALAR |
//! ARRAY | OBJECT]`.
//!
//! In: statements as sqlparser reads them, after [`cut_is_json`] and
//! [`drop_json_object_keys`] prepared their tokens. Out: calls of eddy's
//! functions `json_object(raw, null_mode, k1, v1, ...)`,
//! `json_array(raw, null_mode, v1, ...)`, `json_string(v)` and
//! `is_json(text, kind)`, each returning JSON text (a boolean for
//! `is_json`). `raw` says, per value, whether it is itself JSON made by a
//! constructor (`JSON_OBJECT`, `JSON_ARRAY`, `JSON(...)`), inserted as JSON
//! rather than as a string, as Flink does; NULL values are written as
//! `null` or left out, per `ON NULL` (Flink's defaults: `NULL ON NULL` for
//! objects, `ABSENT ON NULL` for arrays). `IS JSON` of NULL is FALSE.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, Expr, FunctionArg, FunctionArgExpr, FunctionArgumentClause,
    FunctionArguments, JsonNullClause, Statement,
};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::{arrays, constant_text};
use crate::dialect::rewrite::{is_word, parse_expr};

/// The function the token rewrite of `IS JSON` calls (see [`cut_is_json`]).
const IS_JSON_MARK: &str = "__eddy_is_json";

/// `x IS [NOT] JSON [kind]` -> `x IS [NOT] DISTINCT FROM __eddy_is_json('KIND')`:
/// sqlparser reads no `IS JSON`; [`rewrite_json_functions`] turns the
/// comparison into `is_json(x, 'KIND')` once the statement is parsed.
pub fn cut_is_json(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let mut out = Vec::with_capacity(tokens.len());
    let mut next = 0;
    let mut k = 0;
    while k < significant.len() {
        let at = |j: usize| significant.get(j).map(|&i| &tokens[i].token);
        if !at(k).is_some_and(|t| is_word(t, "IS")) {
            k += 1;
            continue;
        }
        let negated = at(k + 1).is_some_and(|t| is_word(t, "NOT"));
        let json = k + 1 + usize::from(negated);
        if !at(json).is_some_and(|t| is_word(t, "JSON")) {
            k += 1;
            continue;
        }
        let kind = ["VALUE", "SCALAR", "ARRAY", "OBJECT"]
            .into_iter()
            .find(|kind| at(json + 1).is_some_and(|t| is_word(t, kind)));
        let last = json + usize::from(kind.is_some());
        let span = tokens[significant[k]].span;
        out.extend_from_slice(&tokens[next..significant[k]]);
        let text = format!(
            "IS {}DISTINCT FROM {IS_JSON_MARK}('{}')",
            if negated { "" } else { "NOT " },
            kind.unwrap_or("VALUE")
        );
        let dialect = datafusion::sql::sqlparser::dialect::GenericDialect {};
        if let Ok(new) =
            datafusion::sql::sqlparser::tokenizer::Tokenizer::new(&dialect, &text).tokenize()
        {
            out.extend(new.into_iter().flat_map(|token| {
                [
                    TokenWithSpan { token, span },
                    TokenWithSpan {
                        token: Token::Whitespace(
                            datafusion::sql::sqlparser::tokenizer::Whitespace::Space,
                        ),
                        span,
                    },
                ]
            }));
        }
        next = significant[last] + 1;
        k = last + 1;
    }
    out.extend_from_slice(&tokens[next..]);
    out
}

/// Drops Flink's optional `KEY` before a key of `JSON_OBJECT(KEY 'k' VALUE v)`.
pub fn drop_json_object_keys(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    // Per open parenthesis: whether it opens a JSON_OBJECT call.
    let mut calls: Vec<bool> = Vec::new();
    let mut previous: Option<Token> = None;
    let mut out = Vec::with_capacity(tokens.len());
    for token in tokens {
        if matches!(token.token, Token::Whitespace(_)) {
            out.push(token);
            continue;
        }
        let in_object = calls.last().copied().unwrap_or(false);
        let after_separator = matches!(previous, Some(Token::LParen) | Some(Token::Comma));
        if in_object && after_separator && is_word(&token.token, "KEY") {
            continue;
        }
        match token.token {
            Token::LParen => calls.push(
                previous
                    .as_ref()
                    .is_some_and(|p| is_word(p, "JSON_OBJECT") || is_word(p, "JSON_OBJECTAGG")),
            ),
            Token::RParen => {
                calls.pop();
            }
            _ => {}
        }
        previous = Some(token.token.clone());
        out.push(token);
    }
    out
}

fn string(value: &str) -> Expr {
    Expr::value(datafusion::sql::sqlparser::ast::Value::SingleQuotedString(
        value.to_string(),
    ))
}

/// `name(args...)`; `None` leaves the constructor as written.
fn call(name: &str, args: Vec<Expr>) -> Option<Expr> {
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    parse_expr(&format!("{name}({})", args.join(", ")))
}

/// Whether `expr` makes JSON (inserted raw into an enclosing constructor).
fn makes_json(expr: &Expr) -> bool {
    matches!(expr, Expr::Function(f) if {
        let name = f.name.to_string().to_ascii_lowercase();
        matches!(
            name.as_str(),
            "json_object" | "json_array" | "json" | "json_build_object" | "json_build_array"
        )
    })
}

/// Rewrites JSON constructors and `IS JSON` marks into eddy's functions.
pub fn rewrite_json_functions(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        let replacement = match expr {
            Expr::IsNotDistinctFrom(value, mark) | Expr::IsDistinctFrom(value, mark) => {
                match mark.as_ref() {
                    Expr::Function(f) if f.name.to_string() == IS_JSON_MARK => {
                        let kind = match &f.args {
                            FunctionArguments::List(list) => {
                                list.args.first().map(|a| a.to_string())
                            }
                            _ => None,
                        }
                        .unwrap_or_else(|| "'VALUE'".into());
                        let test = format!("is_json({value}, {kind})");
                        let negated = matches!(expr, Expr::IsDistinctFrom(..));
                        let sql = if negated { format!("NOT {test}") } else { test };
                        parse_expr(&sql)
                    }
                    _ => None,
                }
            }
            Expr::Function(f) => {
                let name = f.name.to_string().to_ascii_lowercase();
                let FunctionArguments::List(list) = &f.args else {
                    return ControlFlow::<()>::Continue(());
                };
                let null_clause = list.clauses.iter().find_map(|c| match c {
                    FunctionArgumentClause::JsonNullClause(n) => Some(n.clone()),
                    _ => None,
                });
                match name.as_str() {
                    "json_object" => {
                        let mut pairs = Vec::new();
                        for arg in &list.args {
                            match arg {
                                FunctionArg::ExprNamed {
                                    name,
                                    arg: FunctionArgExpr::Expr(value),
                                    ..
                                } => pairs.push((name.clone(), value.clone())),
                                // `'k' VALUE v`: sqlparser reads the key as a name.
                                FunctionArg::Named {
                                    name,
                                    arg: FunctionArgExpr::Expr(value),
                                    ..
                                } => pairs.push((string(&name.value), value.clone())),
                                _ => return ControlFlow::Continue(()),
                            }
                        }
                        let raw: String = pairs
                            .iter()
                            .map(|(_, v)| if makes_json(v) { '1' } else { '0' })
                            .collect();
                        let absent = null_clause == Some(JsonNullClause::AbsentOnNull);
                        let mut args =
                            vec![string(&raw), string(if absent { "absent" } else { "null" })];
                        for (k, v) in pairs {
                            args.push(k);
                            args.push(v);
                        }
                        call("json_build_object", args)
                    }
                    "json_array" => {
                        let mut values = Vec::new();
                        for arg in &list.args {
                            match arg {
                                FunctionArg::Unnamed(FunctionArgExpr::Expr(value)) => {
                                    values.push(value.clone())
                                }
                                _ => return ControlFlow::Continue(()),
                            }
                        }
                        let raw: String = values
                            .iter()
                            .map(|v| if makes_json(v) { '1' } else { '0' })
                            .collect();
                        let null = null_clause == Some(JsonNullClause::NullOnNull);
                        let mut args =
                            vec![string(&raw), string(if null { "null" } else { "absent" })];
                        args.extend(values);
                        call("json_build_array", args)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(new) = replacement {
            *expr = new;
        }
        ControlFlow::Continue(())
    });
}

/// A value as JSON.
fn to_json(value: &ScalarValue) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        v if v.is_null() => J::Null,
        ScalarValue::Boolean(Some(b)) => J::Bool(*b),
        ScalarValue::Utf8(Some(s))
        | ScalarValue::Utf8View(Some(s))
        | ScalarValue::LargeUtf8(Some(s)) => J::String(s.clone()),
        ScalarValue::Float32(Some(f)) => {
            serde_json::Number::from_f64(f64::from(*f)).map_or(J::Null, J::Number)
        }
        ScalarValue::Float64(Some(f)) => {
            serde_json::Number::from_f64(*f).map_or(J::Null, J::Number)
        }
        ScalarValue::Int8(Some(i)) => J::from(*i),
        ScalarValue::Int16(Some(i)) => J::from(*i),
        ScalarValue::Int32(Some(i)) => J::from(*i),
        ScalarValue::Int64(Some(i)) => J::from(*i),
        ScalarValue::UInt8(Some(i)) => J::from(*i),
        ScalarValue::UInt16(Some(i)) => J::from(*i),
        ScalarValue::UInt32(Some(i)) => J::from(*i),
        ScalarValue::UInt64(Some(i)) => J::from(*i),
        ScalarValue::List(list) => {
            let values = list.value(0);
            J::Array(
                (0..values.len())
                    .map(|i| {
                        ScalarValue::try_from_array(values.as_ref(), i)
                            .map_or(J::Null, |v| to_json(&v))
                    })
                    .collect(),
            )
        }
        other => serde_json::from_str(&other.to_string())
            .unwrap_or_else(|_| J::String(other.to_string())),
    }
}

/// A constructor's value at `row`: JSON as given (`raw`) or a value as JSON.
fn value_at(column: &ArrayRef, row: usize, raw: bool) -> Result<serde_json::Value> {
    let value = ScalarValue::try_from_array(column.as_ref(), row)?;
    if raw && !value.is_null() {
        if let Ok(parsed) = serde_json::from_str(&value.to_string()) {
            return Ok(parsed);
        }
    }
    Ok(to_json(&value))
}

macro_rules! json_udf {
    ($type:ident, $name:literal, $returns:expr) => {
        #[derive(Debug, PartialEq, Eq, Hash)]
        pub(super) struct $type {
            signature: Signature,
        }

        impl $type {
            pub(super) fn new() -> Self {
                Self {
                    signature: Signature::variadic_any(Volatility::Immutable),
                }
            }
        }

        impl ScalarUDFImpl for $type {
            fn name(&self) -> &str {
                $name
            }
            fn signature(&self) -> &Signature {
                &self.signature
            }
            fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
                Ok($returns)
            }
            fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
                self.invoke(args)
            }
        }
    };
}

json_udf!(JsonBuildObject, "json_build_object", DataType::Utf8);
json_udf!(JsonBuildArray, "json_build_array", DataType::Utf8);
json_udf!(JsonString, "json_string", DataType::Utf8);
json_udf!(JsonRaw, "json", DataType::Utf8);
json_udf!(IsJson, "is_json", DataType::Boolean);

/// The leading `raw` and `null_mode` constants of a constructor call.
fn modes(args: &ScalarFunctionArgs, function: &str) -> Result<(Vec<bool>, bool)> {
    if args.args.len() < 2 {
        return exec_err!("{function}: missing arguments");
    }
    let raw = constant_text(&args.args[0], function, "raw flags")?;
    let absent = constant_text(&args.args[1], function, "null mode")? == "absent";
    Ok((raw.chars().map(|c| c == '1').collect(), absent))
}

impl JsonBuildObject {
    fn invoke(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (raw, absent) = modes(&args, "json_object")?;
        let columns = arrays(&args)?;
        let pairs = &columns[2..];
        let mut out = Vec::with_capacity(args.number_rows);
        for row in 0..args.number_rows {
            let mut object = serde_json::Map::new();
            for (i, pair) in pairs.chunks(2).enumerate() {
                let [key, value] = pair else {
                    return exec_err!("json_object: a key without a value");
                };
                let key = ScalarValue::try_from_array(key.as_ref(), row)?;
                if key.is_null() {
                    return exec_err!("json_object: a key is NULL");
                }
                let key = match key {
                    ScalarValue::Utf8(Some(s))
                    | ScalarValue::Utf8View(Some(s))
                    | ScalarValue::LargeUtf8(Some(s)) => s,
                    other => other.to_string(),
                };
                let value = value_at(value, row, raw.get(i).copied().unwrap_or(false))?;
                if !(absent && value.is_null()) {
                    object.insert(key, value);
                }
            }
            out.push(Some(serde_json::Value::Object(object).to_string()));
        }
        Ok(ColumnarValue::Array(Arc::new(StringArray::from(out))))
    }
}

impl JsonBuildArray {
    fn invoke(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (raw, absent) = modes(&args, "json_array")?;
        let columns = arrays(&args)?;
        let mut out = Vec::with_capacity(args.number_rows);
        for row in 0..args.number_rows {
            let mut items = Vec::new();
            for (i, column) in columns[2..].iter().enumerate() {
                let value = value_at(column, row, raw.get(i).copied().unwrap_or(false))?;
                if !(absent && value.is_null()) {
                    items.push(value);
                }
            }
            out.push(Some(serde_json::Value::Array(items).to_string()));
        }
        Ok(ColumnarValue::Array(Arc::new(StringArray::from(out))))
    }
}

impl JsonString {
    fn invoke(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let columns = arrays(&args)?;
        let Some(column) = columns.first() else {
            return exec_err!("json_string takes one argument");
        };
        let out: StringArray = (0..args.number_rows)
            .map(|row| {
                ScalarValue::try_from_array(column.as_ref(), row)
                    .map(|v| (!v.is_null()).then(|| to_json(&v).to_string()))
            })
            .collect::<Result<_>>()?;
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

impl JsonRaw {
    fn invoke(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let columns = arrays(&args)?;
        let Some(column) = columns.first() else {
            return exec_err!("json takes one argument");
        };
        Ok(ColumnarValue::Array(cast(column, &DataType::Utf8)?))
    }
}

impl IsJson {
    fn invoke(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let columns = arrays(&args)?;
        let kind = match args.args.get(1) {
            Some(k) => constant_text(k, "is_json", "kind")?,
            None => "VALUE".into(),
        };
        let Some(column) = columns.first() else {
            return exec_err!("IS JSON needs a value");
        };
        let text = cast(column, &DataType::Utf8)?;
        let text = text
            .as_any()
            .downcast_ref::<StringArray>()
            .cloned()
            .unwrap_or_else(|| StringArray::from(Vec::<Option<String>>::new()));
        let out: BooleanArray = text
            .iter()
            .map(|t| {
                Some(
                    t.and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
                        .is_some_and(|v| match kind.as_str() {
                            "OBJECT" => v.is_object(),
                            "ARRAY" => v.is_array(),
                            "SCALAR" => !v.is_object() && !v.is_array(),
                            _ => true,
                        }),
                )
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    use super::*;

    fn rewritten(sql: &str) -> String {
        let tokens = Tokenizer::new(&GenericDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        let tokens = drop_json_object_keys(cut_is_json(tokens));
        let mut statement = Parser::new(&GenericDialect {})
            .with_tokens_with_locations(tokens)
            .parse_statement()
            .unwrap();
        rewrite_json_functions(&mut statement);
        statement.to_string()
    }

    #[test]
    fn is_json_becomes_a_call() {
        assert_eq!(
            rewritten("SELECT s IS JSON FROM t"),
            "SELECT is_json(s, 'VALUE') FROM t"
        );
        assert_eq!(
            rewritten("SELECT s IS NOT JSON OBJECT FROM t"),
            "SELECT NOT is_json(s, 'OBJECT') FROM t"
        );
    }

    #[test]
    fn constructors_mark_nested_json_and_their_null_mode() {
        assert_eq!(
            rewritten("SELECT JSON_OBJECT(KEY 'a' VALUE 1, 'b' VALUE JSON_ARRAY(x) ABSENT ON NULL) FROM t"),
            "SELECT json_build_object('01', 'absent', 'a', 1, 'b', json_build_array('0', 'absent', x)) FROM t"
        );
    }

    #[test]
    fn values_become_json() {
        assert_eq!(
            to_json(&ScalarValue::Utf8(Some("a\"b".into()))).to_string(),
            r#""a\"b""#
        );
        assert_eq!(to_json(&ScalarValue::Int64(Some(3))).to_string(), "3");
        assert_eq!(to_json(&ScalarValue::Int64(None)).to_string(), "null");
    }
}
