//! Flink's group windows in eddy's terms.
//!
//! In: a parsed statement. Out: the same statement with Flink's legacy group
//! window functions rewritten to eddy's window functions:
//!
//! | Flink | eddy |
//! |---|---|
//! | `GROUP BY TUMBLE(ts, size)` | `GROUP BY tumble(size, ts)` |
//! | `GROUP BY HOP(ts, slide, size)` | `GROUP BY hop(slide, size, ts)` |
//! | `TUMBLE_START(ts, size)`, `HOP_START(ts, slide, size)` | `get_field(tumble(size, ts), 'start')` ... |
//! | `TUMBLE_END(...)`, `HOP_END(...)` | `get_field(..., 'end')` |
//! | `TUMBLE_ROWTIME(...)`, `HOP_ROWTIME(...)` | `get_field(..., 'end') - INTERVAL '1' MILLISECOND` |
//!
//! Flink's window table functions are read the same way:
//!
//! ```sql
//! SELECT window_start, window_end, k, count(*)
//! FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))   -- or HOP(TABLE t, DESCRIPTOR(ts), slide, size)
//! GROUP BY window_start, window_end, k
//! ```
//!
//! [`cut_window_tvfs`] replaces the `TABLE(...)` call with the table itself
//! (on tokens, before parsing) and [`rewrite_tvf_selects`] makes the query
//! over it group by `tumble(size, ts)`, with `window_start`, `window_end` and
//! `window_time` (end - 1 ms) taken from the window.
//!
//! eddy's windows always use their input's event time: the time argument
//! travels as the window call's last argument and the planner refuses one
//! that is not that column. `SESSION` and `CUMULATE` windows are not supported yet and are
//! left for the planner to reject.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, BinaryOperator, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, GroupByExpr, Ident, ObjectName, ObjectNamePart, Select, SelectItem,
    Statement, TableFactor, Value, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::ast::{DateTimeField, Interval};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// A window table function cut out of a statement's tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowTvf {
    /// The table it windows (as written).
    pub table: String,
    /// eddy's window call, e.g. `tumble(INTERVAL '5' SECOND)`.
    pub window: String,
}

fn word(token: &Token) -> Option<&str> {
    match token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.value.as_str()),
        _ => None,
    }
}

/// Replaces each `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))` (and `HOP`)
/// in `tokens` with `t`, returning the windows found.
pub fn cut_window_tvfs(
    tokens: Vec<TokenWithSpan>,
) -> Result<(Vec<TokenWithSpan>, Vec<WindowTvf>), Unsupported> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let at = |k: usize| significant.get(k).map(|&i| &tokens[i].token);
    let mut cuts: Vec<(usize, usize, usize, WindowTvf)> = Vec::new();
    let mut k = 0;
    while k < significant.len() {
        let matched = (|| {
            let is_table = |t: Option<&Token>| matches!(t, Some(Token::Word(w)) if w.keyword == Keyword::TABLE && w.quote_style.is_none());
            if !is_table(at(k)) || at(k + 1) != Some(&Token::LParen) {
                return None;
            }
            let kind = word(at(k + 2)?)?.to_ascii_lowercase();
            if at(k + 3) != Some(&Token::LParen) {
                return None;
            }
            if matches!(kind.as_str(), "session" | "cumulate") {
                let location = tokens[significant[k + 2]].span.start;
                return Some(Err((
                    location.line,
                    location.column,
                    format!("{} {UNSUPPORTED}", kind.to_uppercase()),
                )));
            }
            if !matches!(kind.as_str(), "tumble" | "hop") {
                return None;
            }
            if !is_table(at(k + 4)) {
                return None;
            }
            let name = k + 5;
            word(at(name)?)?;
            let descriptor = word(at(k + 7)?)?;
            let time_column = at(k + 9)?.to_string();
            if at(k + 6) != Some(&Token::Comma)
                || !descriptor.eq_ignore_ascii_case("descriptor")
                || at(k + 8) != Some(&Token::LParen)
                || at(k + 10) != Some(&Token::RParen)
                || at(k + 11) != Some(&Token::Comma)
            {
                return None;
            }
            // The window's own arguments run to the TUMBLE call's `)`.
            let first_arg = k + 12;
            let mut depth = 0;
            let mut j = first_arg;
            while let Some(token) = at(j) {
                match token {
                    Token::LParen => depth += 1,
                    Token::RParen if depth == 0 => break,
                    Token::RParen => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            if at(j) != Some(&Token::RParen) || at(j + 1) != Some(&Token::RParen) {
                return None;
            }
            let args: String = tokens[significant[first_arg]..significant[j]]
                .iter()
                .map(|t| t.token.to_string())
                .collect();
            let table = tokens[significant[name]].token.to_string();
            Some(Ok((
                j + 1,
                WindowTvf {
                    table,
                    window: format!("{kind}({}, {time_column})", args.trim()),
                },
            )))
        })();
        match matched {
            Some(Err(unsupported)) => return Err(unsupported),
            Some(Ok((last, tvf))) => {
                cuts.push((significant[k], significant[last], significant[k + 5], tvf));
                k = last + 1;
            }
            None => k += 1,
        }
    }
    if cuts.is_empty() {
        return Ok((tokens, Vec::new()));
    }
    let mut out = Vec::with_capacity(tokens.len());
    let mut windows = Vec::new();
    let mut next = 0;
    for (start, end, name, tvf) in cuts {
        out.extend_from_slice(&tokens[next..start]);
        out.push(tokens[name].clone());
        next = end + 1;
        windows.push(tvf);
    }
    out.extend_from_slice(&tokens[next..]);
    Ok((out, windows))
}

/// Rewrites the queries reading a table whose window table function
/// [`cut_window_tvfs`] cut: they group by the window, and `window_start`,
/// `window_end`, `window_time` come from it.
pub fn rewrite_tvf_selects(statement: &mut Statement, windows: &[WindowTvf]) -> Result<(), String> {
    struct Rewriter<'a> {
        windows: &'a [WindowTvf],
        error: Option<String>,
    }
    impl VisitorMut for Rewriter<'_> {
        type Break = ();
        fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
            let table = select.from.iter().find_map(|from| match &from.relation {
                TableFactor::Table { name, .. } => self
                    .windows
                    .iter()
                    .find(|w| w.table.eq_ignore_ascii_case(&name.to_string())),
                _ => None,
            });
            if let Some(tvf) = table {
                if let Err(e) = rewrite_select(select, tvf) {
                    self.error = Some(e);
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
    }
    if windows.is_empty() {
        return Ok(());
    }
    let mut rewriter = Rewriter {
        windows,
        error: None,
    };
    let _ = statement.visit(&mut rewriter);
    rewriter.error.map_or(Ok(()), Err)
}

fn window_column(expr: &Expr) -> Option<&'static str> {
    let name = match expr {
        Expr::Identifier(ident) => ident.value.to_ascii_lowercase(),
        Expr::CompoundIdentifier(parts) => parts.last()?.value.to_ascii_lowercase(),
        _ => return None,
    };
    match name.as_str() {
        "window_start" => Some("start"),
        "window_end" => Some("end"),
        "window_time" => Some("rowtime"),
        _ => None,
    }
}

fn rewrite_select(select: &mut Select, tvf: &WindowTvf) -> Result<(), String> {
    let window = Parser::new(&GenericDialect {})
        .try_with_sql(&tvf.window)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| format!("window table function over {}: {e}", tvf.table))?;
    let GroupByExpr::Expressions(groups, _) = &mut select.group_by else {
        return Err("GROUP BY ALL over a window table function is not supported".into());
    };
    if !groups.iter().any(|g| window_column(g).is_some()) {
        return Err(format!(
            "a window table function over {} needs GROUP BY window_start, window_end (eddy runs window table functions as window aggregations)",
            tvf.table
        ));
    }
    let mut seen_window = false;
    groups.retain_mut(|g| {
        if window_column(g).is_none() {
            return true;
        }
        let keep = !seen_window;
        seen_window = true;
        *g = window.clone();
        keep
    });
    let field = |column: &str| match column {
        "rowtime" => Expr::BinaryOp {
            left: Box::new(get_field(window.clone(), "end")),
            op: BinaryOperator::Minus,
            right: Box::new(one_millisecond()),
        },
        other => get_field(window.clone(), other),
    };
    for item in &mut select.projection {
        match item {
            SelectItem::UnnamedExpr(expr) => {
                if let Some(column) = window_column(expr) {
                    let name = match column {
                        "start" => "window_start",
                        "end" => "window_end",
                        _ => "window_time",
                    };
                    *item = SelectItem::ExprWithAlias {
                        expr: field(column),
                        alias: Ident::new(name),
                    };
                }
            }
            SelectItem::ExprWithAlias { expr, .. } => {
                if let Some(column) = window_column(expr) {
                    *expr = field(column);
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A Flink window eddy does not run yet: where it is written (line,
/// column) and what to say.
pub type Unsupported = (u64, u64, String);

const UNSUPPORTED: &str = "windows are not supported yet (TUMBLE and HOP are)";

/// Rewrites Flink's group window functions in `statement` (see the module
/// docs); a SESSION or CUMULATE window is an error at its name.
pub fn rewrite_group_windows(statement: &mut Statement) -> Result<(), Unsupported> {
    let mut unsupported = None;
    let _ = visit_expressions_mut(statement, |expr| {
        if let Expr::Function(function) = expr {
            let name = function.name.to_string().to_ascii_lowercase();
            let kind = name.split('_').next().unwrap_or_default();
            if matches!(kind, "session" | "cumulate")
                && plain_args(function).is_some_and(|a| a.len() >= 2)
            {
                let at = function
                    .name
                    .0
                    .last()
                    .and_then(|part| part.as_ident())
                    .map(|ident| (ident.span.start.line, ident.span.start.column))
                    .unwrap_or((1, 1));
                unsupported = Some((at.0, at.1, format!("{} {UNSUPPORTED}", kind.to_uppercase())));
                return ControlFlow::Break(());
            }
        }
        if let Some(rewritten) = rewrite(expr) {
            *expr = rewritten;
        }
        ControlFlow::Continue(())
    });
    unsupported.map_or(Ok(()), Err)
}

fn rewrite(expr: &Expr) -> Option<Expr> {
    let Expr::Function(function) = expr else {
        return None;
    };
    let name = function.name.to_string().to_ascii_lowercase();
    let args = plain_args(function)?;
    let (kind, field) = match name.as_str() {
        "tumble" => ("tumble", None),
        "hop" => ("hop", None),
        "tumble_start" => ("tumble", Some("start")),
        "tumble_end" => ("tumble", Some("end")),
        "tumble_rowtime" => ("tumble", Some("rowtime")),
        "hop_start" => ("hop", Some("start")),
        "hop_end" => ("hop", Some("end")),
        "hop_rowtime" => ("hop", Some("rowtime")),
        _ => return None,
    };
    // Flink's forms carry the time column first: one more argument than eddy's.
    let wanted = if kind == "tumble" { 2 } else { 3 };
    if args.len() != wanted {
        return None;
    }
    // The time column goes last, where the planner checks it.
    let mut window_args = args[1..].to_vec();
    window_args.push(args[0].clone());
    let window = call(kind, window_args);
    Some(match field {
        None => window,
        Some("rowtime") => Expr::BinaryOp {
            left: Box::new(get_field(window, "end")),
            op: BinaryOperator::Minus,
            right: Box::new(one_millisecond()),
        },
        Some(field) => get_field(window, field),
    })
}

/// The arguments of a plain `f(a, b, ...)` call.
fn plain_args(function: &Function) -> Option<Vec<Expr>> {
    let FunctionArguments::List(list) = &function.args else {
        return None;
    };
    if !list.clauses.is_empty() || list.duplicate_treatment.is_some() {
        return None;
    }
    list.args
        .iter()
        .map(|arg| match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

fn call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(datafusion::sql::sqlparser::ast::FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: Vec::new(),
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: Vec::new(),
    })
}

fn get_field(window: Expr, field: &str) -> Expr {
    call(
        "get_field",
        vec![
            window,
            Expr::Value(Value::SingleQuotedString(field.to_string()).into()),
        ],
    )
}

fn one_millisecond() -> Expr {
    Expr::Interval(Interval {
        value: Box::new(Expr::Value(Value::SingleQuotedString("1".into()).into())),
        leading_field: Some(DateTimeField::Millisecond),
        leading_precision: None,
        last_field: None,
        fractional_seconds_precision: None,
    })
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut statement = Parser::new(&GenericDialect {})
            .try_with_sql(sql)
            .unwrap()
            .parse_statement()
            .unwrap();
        rewrite_group_windows(&mut statement).unwrap();
        statement.to_string()
    }

    #[test]
    fn legacy_group_windows_become_eddys() {
        assert_eq!(
            rewritten("SELECT TUMBLE_START(ts, INTERVAL '5' SECOND), TUMBLE_ROWTIME(ts, INTERVAL '5' SECOND), count(*) FROM t GROUP BY TUMBLE(ts, INTERVAL '5' SECOND)"),
            "SELECT get_field(tumble(INTERVAL '5' SECOND, ts), 'start'), get_field(tumble(INTERVAL '5' SECOND, ts), 'end') - INTERVAL '1' MILLISECOND, count(*) FROM t GROUP BY tumble(INTERVAL '5' SECOND, ts)"
        );
        assert_eq!(
            rewritten("SELECT HOP_END(ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND) FROM t GROUP BY HOP(ts, INTERVAL '1' SECOND, INTERVAL '3' SECOND), k"),
            "SELECT get_field(hop(INTERVAL '1' SECOND, INTERVAL '3' SECOND, ts), 'end') FROM t GROUP BY hop(INTERVAL '1' SECOND, INTERVAL '3' SECOND, ts), k"
        );
        // eddy's own forms are left alone.
        assert_eq!(
            rewritten("SELECT count(*) FROM t GROUP BY tumble(INTERVAL '5' SECOND)"),
            "SELECT count(*) FROM t GROUP BY tumble(INTERVAL '5' SECOND)"
        );
    }
}
