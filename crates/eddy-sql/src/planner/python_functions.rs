//! `CREATE [AGGREGATE] FUNCTION ... LANGUAGE PYTHON`: a Python function
//! registered in the session, callable from every later statement.
//!
//! In: the parsed declaration and its cut-out clauses. Out: a scalar UDF or
//! a UDAF in the planning session, backed by the job's
//! [`PythonRuntime`] (made on the first declaration). Nothing runs here:
//! workers start when the job first calls a function.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::sql::planner::SqlToRel;
use datafusion::sql::sqlparser::ast::{
    ColumnDef, CreateFunction, CreateFunctionBody, DataType as SqlDataType, Expr as SqlExpr,
    FunctionReturnType, Ident, Value,
};
use eddy_python::{
    FunctionBody, FunctionDefinition, FunctionKind, PythonAggregateFunction, PythonRuntime,
    PythonScalarFunction,
};

use super::Compiler;
use crate::context::DdlContext;
use crate::dialect::create_function::FunctionClauses;
use crate::error::{Result, SqlError};
use crate::planner::statement_text::StatementText;

impl Compiler {
    pub(super) fn create_function(
        &mut self,
        create: CreateFunction,
        clauses: FunctionClauses,
        cx: &StatementText,
    ) -> Result<()> {
        let language = create
            .language
            .as_ref()
            .map(|l| l.value.to_ascii_lowercase());
        match language.as_deref() {
            Some("python") => {}
            Some(other) => {
                return Err(SqlError::at(&cx.at,
                    format!("LANGUAGE {other} is not one eddy runs; functions are written in Python (LANGUAGE PYTHON)"),
                ))
            }
            None => {
                return Err(SqlError::at(&cx.at,
                    "a function needs LANGUAGE PYTHON (eddy's functions are written in Python)",
                ))
            }
        }
        if let Some(clause) = unsupported_clause(&create) {
            return Err(SqlError::at(&cx.at,
                format!("{clause} is not taken for a Python function (eddy calls it on every row, NULLs included; its options go in WITH (vectorized, on_error, timeout))"),
            ));
        }
        let Some(config) = self.python_config.clone() else {
            return Err(SqlError::at(&cx.at,
                "Python functions are off in this server (an operator turns them on with eddy serve --allow-python-udfs)",
            ));
        };
        let name = self.identifier_case().object_name(&create.name);
        let kind = if clauses.aggregate {
            FunctionKind::Aggregate
        } else {
            FunctionKind::Scalar
        };

        let mut args = Vec::new();
        for arg in create.args.iter().flatten() {
            if arg.default_expr.is_some() || arg.mode.is_some() {
                return Err(SqlError::at(
                    &cx.at,
                    format!("{name}: arguments are written name TYPE (no modes or defaults)"),
                ));
            }
            args.push(self.function_type(&arg.data_type, cx)?);
        }
        let returns = match &create.return_type {
            Some(FunctionReturnType::DataType(t)) => self.function_type(t, cx)?,
            Some(FunctionReturnType::SetOf(_)) => {
                return Err(SqlError::at(
                    &cx.at,
                    format!(
                    "{name}: RETURNS SETOF (table functions) is not supported; return one value"
                ),
                ))
            }
            None => return Err(SqlError::at(&cx.at, format!("{name} needs RETURNS <type>"))),
        };
        let body_expr = match &create.function_body {
            Some(CreateFunctionBody::AsBeforeOptions { body, .. })
            | Some(CreateFunctionBody::AsAfterOptions(body)) => Some(body),
            _ => None,
        };
        let body_span = match body_expr {
            Some(SqlExpr::Value(v)) => Some(v.span),
            _ => None,
        };
        let Some(body) = body_expr.and_then(function_body) else {
            return Err(SqlError::at(&cx.at,
                format!("{name} needs its code: AS $$ <Python source defining {name}> $$, or AS 'module:function'"),
            ));
        };

        let mut definition = FunctionDefinition::new(&name, kind, args, returns, body)
            .map_err(|e| SqlError::at(&cx.at, e.to_string()))?;
        let mut seen = std::collections::BTreeSet::new();
        for (key, value, at) in &clauses.options {
            if !seen.insert(key.as_str()) {
                return Err(SqlError::at(
                    at,
                    format!("{name}: option {key} is given twice"),
                ));
            }
            definition
                .set_option(key, value)
                .map_err(|e| SqlError::at(at, format!("{name}: {e}")))?;
        }

        let state = self.ctx.state();
        let taken = state.scalar_functions().contains_key(&name)
            || state.aggregate_functions().contains_key(&name);
        if taken && create.if_not_exists {
            return Ok(());
        }
        if taken && !create.or_replace {
            return Err(SqlError::at(&cx.at,
                format!("a function named {name} exists already; CREATE OR REPLACE FUNCTION replaces it"),
            ));
        }
        if taken {
            self.ctx.deregister_udf(&name);
            self.ctx.deregister_udaf(&name);
        }
        let runtime = Arc::clone(
            self.python
                .get_or_insert_with(|| PythonRuntime::new(config.clone())),
        );
        let inline = match &definition.body {
            FunctionBody::Inline(source) => Some(source.clone()),
            FunctionBody::Module { .. } => None,
        };
        match kind {
            FunctionKind::Scalar => {
                self.ctx
                    .register_udf(ScalarUDF::from(PythonScalarFunction::new(
                        definition, &runtime,
                    )))
            }
            FunctionKind::Aggregate => {
                let retracts = definition.retracts(&config.paths);
                self.ctx
                    .register_udaf(AggregateUDF::from(PythonAggregateFunction::new(
                        definition, retracts, &runtime,
                    )))
            }
        }
        if self.check_python_functions {
            // Loaded now, so that a body that does not load (a syntax
            // error, a missing module) is an error at its line.
            if let Err(e) = runtime.check() {
                let at = body_span
                    .map(|span| {
                        let (line, column) = body_line(&e.to_string(), &name, inline.as_deref())
                            .map_or((span.start.line, span.start.column), |(offset, column)| {
                                (span.start.line + offset, column)
                            });
                        cx.map.position(line, column)
                    })
                    .unwrap_or_else(|| cx.at.clone());
                return Err(SqlError::at(&at, e.to_string()));
            }
        }
        Ok(())
    }

    /// The Arrow type a Python function takes or returns for a SQL type
    /// (text and bytes in their plain Arrow forms).
    fn function_type(&self, data_type: &SqlDataType, cx: &StatementText) -> Result<DataType> {
        let state = self.ctx.state();
        let provider = DdlContext::new(&self.ctx, &state);
        let planner = SqlToRel::new_with_options(
            &provider,
            datafusion::sql::planner::ParserOptions::from(&state.config_options().sql_parser),
        );
        let schema = planner
            .build_schema(vec![ColumnDef {
                name: Ident::new("x"),
                data_type: data_type.clone(),
                options: Vec::new(),
            }])
            .map_err(|e| SqlError::at(&cx.at, format!("type {data_type}: {e}")))?;
        Ok(match schema.field(0).data_type() {
            DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
            DataType::BinaryView | DataType::LargeBinary => DataType::Binary,
            other => other.clone(),
        })
    }
}

/// The first PostgreSQL clause of `create` that eddy does not honour
/// (rather than ignore it: `STRICT` would promise NULL for NULL input).
fn unsupported_clause(create: &CreateFunction) -> Option<&'static str> {
    [
        (create.behavior.is_some(), "IMMUTABLE / STABLE / VOLATILE"),
        (
            create.called_on_null.is_some(),
            "CALLED ON NULL INPUT / RETURNS NULL ON NULL INPUT / STRICT",
        ),
        (create.parallel.is_some(), "PARALLEL"),
        (create.security.is_some(), "SECURITY"),
        (!create.set_params.is_empty(), "SET"),
        (create.using.is_some(), "USING"),
        (create.determinism_specifier.is_some(), "DETERMINISTIC"),
        (create.options.is_some(), "OPTIONS (...)"),
        (create.remote_connection.is_some(), "REMOTE WITH CONNECTION"),
        (create.or_alter, "OR ALTER"),
    ]
    .into_iter()
    .find_map(|(given, clause)| given.then_some(clause))
}

/// Where in the file an error in an inline body is: the line (counted from
/// the line the body starts on) and column of the deepest line of the body
/// Python's message names (`File "<function f>", line N`). The worker reads
/// the body with its leading blank lines (the rest of the `$$` line
/// included) dropped, so its line 1 is the first line with code.
fn body_line(message: &str, name: &str, source: Option<&str>) -> Option<(u64, u64)> {
    let source = source?;
    let marker = format!("File \"<function {name}>\", line ");
    let at = message.rfind(&marker)? + marker.len();
    let n: usize = message[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let lines: Vec<&str> = source.split('\n').collect();
    let blank = lines.iter().take_while(|l| l.trim().is_empty()).count();
    let index = blank + n.checked_sub(1)?;
    let text = lines.get(index)?;
    let indent = text.len() - text.trim_start().len();
    Some((index as u64, indent as u64 + 1))
}

/// `$$ source $$` or `'source'` inline; `'module:function'` (dotted module,
/// one colon, nothing else) from the function path.
fn function_body(body: &SqlExpr) -> Option<FunctionBody> {
    let SqlExpr::Value(value) = body else {
        return None;
    };
    let text = match &value.value {
        Value::DollarQuotedString(s) => return Some(FunctionBody::Inline(s.value.clone())),
        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s,
        _ => return None,
    };
    let reference = text.trim();
    if let Some((module, attribute)) = reference.split_once(':') {
        let word = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        };
        if word(module) && word(attribute) && !attribute.contains('.') {
            return Some(FunctionBody::Module {
                module: module.to_string(),
                attribute: attribute.to_string(),
            });
        }
    }
    Some(FunctionBody::Inline(text.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_in_a_body_is_placed_at_its_line() {
        let source = "  \n    import math\n\n    def f(x)\n        return x\n";
        let message =
            "the body of f does not parse: expected ':' (File \"<function f>\", line 3: def f(x))";
        // The rest of the $$ line and one blank line, then code: Python's
        // line 3 is the body's fourth line (offset 3), indented 4.
        assert_eq!(body_line(message, "f", Some(source)), Some((3, 5)));
        assert_eq!(body_line("no position", "f", Some(source)), None);
        assert_eq!(body_line(message, "f", None), None);
    }

    #[test]
    fn module_references_and_inline_bodies_are_told_apart() {
        let string =
            |s: &str| SqlExpr::Value(Value::SingleQuotedString(s.into()).with_empty_span());
        assert_eq!(
            function_body(&string("fraud.rules:score")),
            Some(FunctionBody::Module {
                module: "fraud.rules".into(),
                attribute: "score".into()
            })
        );
        assert!(matches!(
            function_body(&string("def f(x):\n    return {'a': 1}")),
            Some(FunctionBody::Inline(_))
        ));
    }
}
