//! The navigations of `DEFINE` and `MEASURES` (`A.x`, `LAST(A.x, 1)`,
//! `PREV(x)`, `SUM(A.x)`, `CLASSIFIER()`, `MATCH_ROWTIME()`) cut out of the
//! SQL expression: each becomes a column `__nav<i>` of the expression and a
//! [`NavigationSpec`] of what it reads.
//!
//! In: a DEFINE or MEASURES expression and the pattern's variables. Out:
//! the expression over navigation columns, and the navigations.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, Value as SqlValue,
    VisitorMut,
};
use eddy_engine::operators::match_recognize::navigation::{Aggregate, Reach};

use super::Variables;

/// A navigation as written: what it reads, and its argument with the
/// variable qualifiers taken off.
pub(super) struct NavigationSpec {
    pub(super) reach: Reach,
    pub(super) var: Option<usize>,
    pub(super) arg: Option<SqlExpr>,
}

/// Replaces navigations in an expression by `__nav<i>` columns.
pub(super) struct NavigationCutter<'a> {
    pub(super) variables: &'a Variables,
    pub(super) found: Vec<NavigationSpec>,
    /// The number of the first navigation's column.
    pub(super) base: usize,
    pub(super) error: Option<String>,
    /// A column of the input that carries the event time (`MATCH_ROWTIME()`).
    pub(super) time_column: &'a str,
}

pub(super) fn nav_column(i: usize) -> String {
    eddy_engine::operators::match_recognize::navigation::column_name(i)
}

fn function_args(function: &datafusion::sql::sqlparser::ast::Function) -> Vec<&FunctionArgExpr> {
    match &function.args {
        FunctionArguments::List(list) => list
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(e) => e,
                FunctionArg::Named { arg, .. } | FunctionArg::ExprNamed { arg, .. } => arg,
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl NavigationCutter<'_> {
    /// The variable an argument's columns are qualified with, and the
    /// argument without the qualifiers.
    pub(super) fn unqualify(&mut self, arg: &SqlExpr) -> (Option<usize>, SqlExpr) {
        let mut arg = arg.clone();
        let mut vars: Vec<usize> = Vec::new();
        let variables = self.variables;
        let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(&mut arg, |e| {
            if let SqlExpr::CompoundIdentifier(parts) = e {
                if parts.len() == 2 {
                    if let Some(v) = variables.index(&parts[0]) {
                        if !vars.contains(&v) {
                            vars.push(v);
                        }
                        *e = SqlExpr::Identifier(parts[1].clone());
                    }
                }
            }
            ControlFlow::<()>::Continue(())
        });
        if vars.len() > 1 {
            self.error = Some(format!(
                "'{arg}' reads the rows of more than one pattern variable; a navigation reads one variable's rows"
            ));
        }
        (vars.first().copied(), arg)
    }

    fn offset(&mut self, function: &str, arg: Option<&&FunctionArgExpr>) -> usize {
        match arg {
            None => match function {
                "prev" => 1,
                _ => 0,
            },
            Some(FunctionArgExpr::Expr(SqlExpr::Value(v))) => match &v.value {
                SqlValue::Number(n, _) => n.parse().unwrap_or_else(|_| {
                    self.error = Some(format!("{function}(): the offset must be a whole number"));
                    0
                }),
                _ => {
                    self.error = Some(format!("{function}(): the offset must be a whole number"));
                    0
                }
            },
            Some(_) => {
                self.error = Some(format!("{function}(): the offset must be a whole number"));
                0
            }
        }
    }

    fn navigation(&mut self, expr: &SqlExpr) -> Option<NavigationSpec> {
        match expr {
            SqlExpr::Identifier(ident) => Some(NavigationSpec {
                reach: Reach::Last(0),
                var: None,
                arg: Some(SqlExpr::Identifier(ident.clone())),
            }),
            SqlExpr::CompoundIdentifier(parts) if parts.len() == 2 => {
                let var = self.variables.index(&parts[0])?;
                Some(NavigationSpec {
                    reach: Reach::Last(0),
                    var: Some(var),
                    arg: Some(SqlExpr::Identifier(parts[1].clone())),
                })
            }
            SqlExpr::Function(function) => {
                let name = function.name.to_string().to_ascii_lowercase();
                let args = function_args(function);
                let first = |cutter: &mut Self| match args.first() {
                    Some(FunctionArgExpr::Expr(e)) => {
                        let (var, arg) = cutter.unqualify(e);
                        Some((var, Some(arg)))
                    }
                    Some(FunctionArgExpr::QualifiedWildcard(name)) => {
                        let var = name
                            .0
                            .first()
                            .and_then(|p| p.as_ident())
                            .and_then(|i| cutter.variables.index(i));
                        if var.is_none() {
                            cutter.error = Some(format!("'{name}.*' names no pattern variable"));
                        }
                        Some((var, None))
                    }
                    Some(FunctionArgExpr::Wildcard) => Some((None, None)),
                    _ => None,
                };
                let reach = match name.as_str() {
                    "last" => Reach::Last(self.offset("last", args.get(1))),
                    "first" => Reach::First(self.offset("first", args.get(1))),
                    "prev" => Reach::Prev(self.offset("prev", args.get(1))),
                    "next" => {
                        self.error = Some("NEXT() reads rows after the current one; a condition reads the match so far (use PREV or LAST)".into());
                        return None;
                    }
                    "match_number" => {
                        self.error = Some("MATCH_NUMBER() is not supported".into());
                        return None;
                    }
                    "classifier" => {
                        return Some(NavigationSpec {
                            reach: Reach::Classifier,
                            var: None,
                            arg: None,
                        })
                    }
                    "match_rowtime" => {
                        return Some(NavigationSpec {
                            reach: Reach::Last(0),
                            var: None,
                            arg: Some(SqlExpr::Identifier(Ident::with_quote(
                                '"',
                                self.time_column,
                            ))),
                        })
                    }
                    "count" => Reach::Aggregate(Aggregate::Count),
                    "sum" => Reach::Aggregate(Aggregate::Sum),
                    "avg" => Reach::Aggregate(Aggregate::Avg),
                    "min" => Reach::Aggregate(Aggregate::Min),
                    "max" => Reach::Aggregate(Aggregate::Max),
                    _ => return None,
                };
                let (var, arg) = first(self)?;
                if arg.is_none() && reach != Reach::Aggregate(Aggregate::Count) {
                    self.error = Some(format!("{name}(*) is not a navigation; name a column"));
                    return None;
                }
                Some(NavigationSpec { reach, var, arg })
            }
            _ => None,
        }
    }
}

impl VisitorMut for NavigationCutter<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut SqlExpr) -> ControlFlow<()> {
        if let Some(spec) = self.navigation(expr) {
            *expr = SqlExpr::Identifier(Ident::new(nav_column(self.base + self.found.len())));
            self.found.push(spec);
        }
        if self.error.is_some() {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}
