//! JSON as Arroyo's users query it: the operators `->` (the value at a key
//! or index, as a JSON union), `->>` (as text) and `?` (has the key), the
//! `json_get*` family (`json_get_str`, `json_get_int`, ...), all from
//! `datafusion-functions-json` (the crate Arroyo itself uses), and Arroyo's
//! JSONPath functions:
//!
//! - `extract_json(json, path)`: every value the JSONPath matches, each as
//!   JSON text, in a list (empty when nothing matches);
//! - `extract_json_string(json, path)`: the first match when it is a
//!   string, unquoted;
//! - `get_first_json_object(json, path)`: the first match as JSON text.
//!
//! In: a text (or `JSON`) column and, for the path functions, a constant
//! JSONPath (RFC 9535, `$.a.b`, `$.items[*].price`, filters). Out: the
//! values; NULL where the text is not JSON. A JSON union reaching a query's
//! output is written as its JSON text ([`union_to_text`]).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ListBuilder, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use serde_json_path::JsonPath;

/// Registers the JSON operators and functions with a session.
pub fn register(ctx: &SessionContext) -> Result<()> {
    // A context is a handle on shared state: registering through a clone
    // registers with `ctx`.
    let mut shared = ctx.clone();
    datafusion_functions_json::register_all(&mut shared)?;
    for kind in [PathKind::All, PathKind::FirstString, PathKind::First] {
        ctx.register_udf(ScalarUDF::from(JsonPathFunction::new(kind)));
    }
    ctx.register_udf(ScalarUDF::from(JsonText::new()));
    Ok(())
}

/// Binds `->`, `->>`, `#>` and `#>>` tighter than comparisons, as
/// PostgreSQL (and Arroyo) read them: `j->>'k' = 'x'` is `(j->>'k') = 'x'`.
/// The statement parser's generic dialect gives them the lowest precedence
/// of the binary operators, so it reads `j ->> ('k' = 'x')`; each such
/// expression is turned the right way round.
pub fn bind_json_operators(statement: &mut datafusion::sql::sqlparser::ast::Statement) {
    use datafusion::sql::sqlparser::ast::{visit_expressions_mut, BinaryOperator, Expr as Sql};
    use std::ops::ControlFlow;
    fn is_json_operator(op: &BinaryOperator) -> bool {
        matches!(
            op,
            BinaryOperator::Arrow
                | BinaryOperator::LongArrow
                | BinaryOperator::HashArrow
                | BinaryOperator::HashLongArrow
        )
    }
    // The operand a looser construct takes first, which the JSON operator
    // before it should have bound.
    fn first_operand(expr: &mut Sql) -> Option<&mut Box<Sql>> {
        match expr {
            Sql::BinaryOp {
                left,
                op:
                    BinaryOperator::Eq
                    | BinaryOperator::NotEq
                    | BinaryOperator::Lt
                    | BinaryOperator::LtEq
                    | BinaryOperator::Gt
                    | BinaryOperator::GtEq,
                ..
            } => Some(left),
            Sql::IsNull(inner)
            | Sql::IsNotNull(inner)
            | Sql::IsTrue(inner)
            | Sql::IsFalse(inner)
            | Sql::IsNotTrue(inner)
            | Sql::IsNotFalse(inner) => Some(inner),
            Sql::Like { expr, .. } | Sql::ILike { expr, .. } => Some(expr),
            Sql::Between { expr, .. } | Sql::InList { expr, .. } => Some(expr),
            _ => None,
        }
    }
    let _ = visit_expressions_mut(statement, |expr| {
        let Sql::BinaryOp { op, right, .. } = &*expr else {
            return ControlFlow::<()>::Continue(());
        };
        if !is_json_operator(op) {
            return ControlFlow::Continue(());
        }
        let mut looser = (**right).clone();
        let Some(operand) = first_operand(&mut looser) else {
            return ControlFlow::Continue(());
        };
        let Sql::BinaryOp { left, op, .. } = std::mem::replace(
            expr,
            Sql::Value(datafusion::sql::sqlparser::ast::Value::Null.into()),
        ) else {
            return ControlFlow::Continue(());
        };
        let bound = Sql::BinaryOp {
            left,
            op,
            right: std::mem::replace(
                operand,
                Box::new(Sql::Value(
                    datafusion::sql::sqlparser::ast::Value::Null.into(),
                )),
            ),
        };
        **operand = bound;
        *expr = looser;
        ControlFlow::Continue(())
    });
}

/// Wraps the select items of `query` at `positions` (those yielding JSON
/// unions) in the function [`union_to_text`] calls, keeping their names:
/// what a sink that takes its columns from the query receives.
pub fn json_values_as_text(
    query: &mut datafusion::sql::sqlparser::ast::Query,
    positions: &[usize],
) {
    use datafusion::sql::sqlparser::ast::{
        Expr as Sql, Function, FunctionArg, FunctionArgExpr, FunctionArgumentList,
        FunctionArguments, Ident, ObjectName, SelectItem, SetExpr,
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    let wrap = |expr: Sql| {
        Sql::Function(Function {
            name: ObjectName::from(vec![Ident::new("json_text")]),
            uses_odbc_syntax: false,
            parameters: FunctionArguments::None,
            args: FunctionArguments::List(FunctionArgumentList {
                duplicate_treatment: None,
                args: vec![FunctionArg::Unnamed(FunctionArgExpr::Expr(expr))],
                clauses: Vec::new(),
            }),
            filter: None,
            null_treatment: None,
            over: None,
            within_group: Vec::new(),
        })
    };
    for &i in positions {
        let Some(item) = select.projection.get_mut(i) else {
            continue;
        };
        let placeholder = SelectItem::UnnamedExpr(Sql::Value(
            datafusion::sql::sqlparser::ast::Value::Null.into(),
        ));
        *item = match std::mem::replace(item, placeholder) {
            SelectItem::ExprWithAlias { expr, alias } => SelectItem::ExprWithAlias {
                expr: wrap(expr),
                alias,
            },
            SelectItem::UnnamedExpr(expr) => {
                let alias = Ident::new(expr.to_string());
                SelectItem::ExprWithAlias {
                    expr: wrap(expr),
                    alias,
                }
            }
            other => other,
        };
    }
}

/// Whether `data_type` is the JSON union `->` and `json_get` return.
pub fn is_json_union(data_type: &DataType) -> bool {
    *data_type == *datafusion_functions_json::JSON_UNION_DATA_TYPE
}

/// `expr` (a JSON union) as its JSON text, for a place that cannot hold a
/// union (a sink): a string quoted, a number or boolean as written, an
/// object or array as its text, a JSON null (or a path that leads nowhere)
/// as `null`, as Arroyo writes them.
pub fn union_to_text(expr: Expr) -> Expr {
    ScalarUDF::from(JsonText::new()).call(vec![expr])
}

/// The function [`union_to_text`] calls.
#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonText {
    signature: Signature,
}

impl JsonText {
    fn new() -> Self {
        Self {
            signature: Signature::exact(
                vec![datafusion_functions_json::JSON_UNION_DATA_TYPE.clone()],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for JsonText {
    fn name(&self) -> &str {
        "json_text"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        use datafusion::arrow::array::UnionArray;
        use datafusion_functions_json::{JsonUnionEncoder, JsonUnionValue};
        let array = args.args[0].to_array(args.number_rows)?;
        let Some(encoder) = array
            .as_any()
            .downcast_ref::<UnionArray>()
            .and_then(|u| JsonUnionEncoder::from_union(u.clone()))
        else {
            return exec_err!("json_text: a JSON union expected");
        };
        let text: StringArray = (0..encoder.len())
            .map(|i| {
                Some(match encoder.get_value(i) {
                    JsonUnionValue::JsonNull => "null".to_string(),
                    JsonUnionValue::Bool(b) => b.to_string(),
                    JsonUnionValue::Int(n) => n.to_string(),
                    JsonUnionValue::Float(f) => serde_json::Value::from(f).to_string(),
                    JsonUnionValue::Str(s) => serde_json::Value::from(s).to_string(),
                    JsonUnionValue::Array(s) | JsonUnionValue::Object(s) => s.to_string(),
                })
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(text)))
    }
}

/// What a JSONPath function returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum PathKind {
    /// `extract_json`: every match, as JSON text.
    All,
    /// `extract_json_string`: the first match, when it is a string.
    FirstString,
    /// `get_first_json_object`: the first match, as JSON text.
    First,
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JsonPathFunction {
    kind: PathKind,
    signature: Signature,
}

impl JsonPathFunction {
    fn new(kind: PathKind) -> Self {
        Self {
            kind,
            signature: Signature::string(2, Volatility::Immutable),
        }
    }
}

fn list_of_text() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
}

impl ScalarUDFImpl for JsonPathFunction {
    fn name(&self) -> &str {
        match self.kind {
            PathKind::All => "extract_json",
            PathKind::FirstString => "extract_json_string",
            PathKind::First => "get_first_json_object",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            PathKind::All => list_of_text(),
            PathKind::FirstString | PathKind::First => DataType::Utf8,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        let path = match &args.args[1] {
            ColumnarValue::Scalar(value) => match value.try_as_str() {
                Some(Some(path)) => path.to_string(),
                _ => return exec_err!("{name}: the path must be a text constant"),
            },
            ColumnarValue::Array(_) => {
                return exec_err!("{name}: the path must be a constant, not a column")
            }
        };
        let path = match JsonPath::parse(&path) {
            Ok(path) => path,
            Err(e) => return exec_err!("{name}: '{path}' is not a JSONPath: {e}"),
        };
        let rows = args.number_rows;
        let text = cast(&args.args[0].to_array(rows)?, &DataType::Utf8)?;
        let Some(text) = text.as_any().downcast_ref::<StringArray>() else {
            return exec_err!("{name}: a string of JSON expected");
        };
        let parsed = |i: usize| -> Option<serde_json::Value> {
            text.is_valid(i)
                .then(|| serde_json::from_str(text.value(i)).ok())
                .flatten()
        };
        let out: Arc<dyn Array> = match self.kind {
            PathKind::All => {
                let mut builder = ListBuilder::with_capacity(StringBuilder::new(), rows);
                for i in 0..rows {
                    match parsed(i) {
                        Some(value) => {
                            for found in path.query(&value).all() {
                                builder.values().append_value(found.to_string());
                            }
                            builder.append(true);
                        }
                        None => builder.append(false),
                    }
                }
                Arc::new(builder.finish())
            }
            PathKind::FirstString => Arc::new(
                (0..rows)
                    .map(|i| {
                        let value = parsed(i)?;
                        let first = path.query(&value).first()?.as_str()?.to_string();
                        Some(first)
                    })
                    .collect::<StringArray>(),
            ),
            PathKind::First => Arc::new(
                (0..rows)
                    .map(|i| {
                        let value = parsed(i)?;
                        let first = path.query(&value).first()?.to_string();
                        Some(first)
                    })
                    .collect::<StringArray>(),
            ),
        };
        if args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)))
        {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?));
        }
        Ok(ColumnarValue::Array(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(kind: PathKind, texts: &[Option<&str>], path: &str) -> ColumnarValue {
        let f = JsonPathFunction::new(kind);
        let arg = Arc::new(StringArray::from(texts.to_vec()));
        let rows = texts.len();
        f.invoke_with_args(ScalarFunctionArgs {
            args: vec![
                ColumnarValue::Array(arg),
                ColumnarValue::Scalar(ScalarValue::Utf8(Some(path.into()))),
            ],
            arg_fields: vec![
                Arc::new(Field::new("j", DataType::Utf8, true)),
                Arc::new(Field::new("p", DataType::Utf8, true)),
            ],
            number_rows: rows,
            return_field: Arc::new(Field::new("r", f.return_type(&[]).unwrap(), true)),
            config_options: Arc::new(Default::default()),
        })
        .unwrap()
    }

    fn strings(value: ColumnarValue) -> Vec<Option<String>> {
        let ColumnarValue::Array(a) = value else {
            panic!("an array")
        };
        let a = a.as_any().downcast_ref::<StringArray>().unwrap();
        a.iter().map(|s| s.map(str::to_string)).collect()
    }

    /// The expression `sql` parses to, fully parenthesised.
    fn bound(sql: &str) -> String {
        use datafusion::sql::sqlparser::ast::{Expr as Sql, SelectItem, SetExpr, Statement};
        fn shape(e: &Sql) -> String {
            match e {
                Sql::BinaryOp { left, op, right } => {
                    format!("({} {op} {})", shape(left), shape(right))
                }
                Sql::IsNull(inner) => format!("({} IS NULL)", shape(inner)),
                other => other.to_string(),
            }
        }
        let mut statement = datafusion::sql::sqlparser::parser::Parser::new(
            &datafusion::sql::sqlparser::dialect::GenericDialect {},
        )
        .try_with_sql(&format!("SELECT {sql}"))
        .unwrap()
        .parse_statement()
        .unwrap();
        bind_json_operators(&mut statement);
        let Statement::Query(query) = statement else {
            panic!("a query")
        };
        let SetExpr::Select(select) = *query.body else {
            panic!("a select")
        };
        let SelectItem::UnnamedExpr(expr) = &select.projection[0] else {
            panic!("an expression")
        };
        shape(expr)
    }

    #[test]
    fn json_operators_bind_tighter_than_comparisons() {
        assert_eq!(
            bound("j->>'k' = 'x' AND j->'n' IS NULL"),
            "(((j ->> 'k') = 'x') AND ((j -> 'n') IS NULL))"
        );
        assert_eq!(bound("j->'a'->>'b'"), "((j -> 'a') ->> 'b')");
        assert_eq!(bound("a + 1 = 2"), "((a + 1) = 2)");
    }

    #[test]
    fn jsonpath_functions_take_arroyos_meaning() {
        let docs = [
            Some(r#"{"a": 1, "c": {"d": "hello"}, "items": [{"p": 2}, {"p": 3.5}]}"#),
            Some(r#"{"a": 3}"#),
            Some("not json"),
            None,
        ];
        assert_eq!(
            strings(call(PathKind::FirstString, &docs, "$.c.d")),
            [Some("hello".into()), None, None, None]
        );
        assert_eq!(
            strings(call(PathKind::First, &docs, "$.a")),
            [Some("1".into()), Some("3".into()), None, None]
        );
        let ColumnarValue::Array(all) = call(PathKind::All, &docs, "$.items[*].p") else {
            panic!("an array")
        };
        let all = all
            .as_any()
            .downcast_ref::<datafusion::arrow::array::ListArray>()
            .unwrap();
        let first = all.value(0);
        let first = first.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(first.iter().collect::<Vec<_>>(), [Some("2"), Some("3.5")]);
        assert_eq!(all.value(1).len(), 0, "no match: an empty list");
        assert!(all.is_null(2) && all.is_null(3), "not JSON: NULL");
    }
}
