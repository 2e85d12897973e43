//! Flink's group windows in eddy's terms.
//!
//! In: a parsed statement. Out: the same statement with Flink's legacy group
//! window functions rewritten to eddy's window functions:
//!
//! | Flink | eddy |
//! |---|---|
//! | `GROUP BY TUMBLE(ts, size)` | `GROUP BY tumble(size, ts)` |
//! | `GROUP BY HOP(ts, slide, size)` | `GROUP BY hop(slide, size, ts)` |
//! | `GROUP BY SESSION(ts, gap)` | `GROUP BY session(gap, ts)` |
//! | `TUMBLE_START(ts, size)`, `HOP_START(...)`, `SESSION_START(...)` | `get_field(tumble(size, ts), 'start')` ... |
//! | `TUMBLE_END(...)`, `HOP_END(...)`, `SESSION_END(...)` | `get_field(..., 'end')` |
//! | `TUMBLE_ROWTIME(...)`, `HOP_ROWTIME(...)`, `SESSION_ROWTIME(...)` | `get_field(..., 'end') - INTERVAL '1' MILLISECOND` |
//!
//! Flink's window table functions are read the same way:
//!
//! ```sql
//! SELECT window_start, window_end, k, count(*)
//! FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))
//! -- or HOP(TABLE t, DESCRIPTOR(ts), slide, size)
//! -- or CUMULATE(TABLE t, DESCRIPTOR(ts), step, max size)
//! -- (TUMBLE, HOP and CUMULATE take a window offset as a last argument)
//! -- or SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), gap)
//! GROUP BY window_start, window_end, k
//! ```
//!
//! [`cut_window_tvfs`] replaces the `TABLE(...)` call with the table itself
//! (on tokens, before parsing) and [`rewrite_tvf_selects`] makes the query
//! over it group by `tumble(size, ts)` (`hop`, `cumulate`, `session`), with
//! `window_start`, `window_end` and `window_time` (end - 1 ms) taken from the
//! window. Sessions are per GROUP BY key, so SESSION's PARTITION BY columns
//! must be grouped by.
//!
//! eddy's windows always use their input's event time: the time argument
//! travels as the window call's last argument and the planner refuses one
//! that is not that column.

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
    /// SESSION's `PARTITION BY` columns.
    pub partition: Vec<String>,
    /// Where the window function's name is written (line, column).
    pub at: (u64, u64),
}

fn word(token: &Token) -> Option<&str> {
    match token {
        Token::Word(w) if w.quote_style.is_none() => Some(w.value.as_str()),
        _ => None,
    }
}

/// Replaces each `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))` (and `HOP`)
/// in `tokens` with `t`, returning the windows found.
/// A window table function of a form eddy does not read: where (line,
/// column) and what to say.
pub type Unsupported = (u64, u64, String);

/// The form each window table function takes, for errors.
fn tvf_form(kind: &str) -> &'static str {
    match kind {
        "hop" => "HOP(TABLE t, DESCRIPTOR(time column), slide, size [, offset])",
        "cumulate" => "CUMULATE(TABLE t, DESCRIPTOR(time column), step, max size [, offset])",
        "session" => "SESSION(TABLE t [PARTITION BY k], DESCRIPTOR(time column), gap)",
        _ => "TUMBLE(TABLE t, DESCRIPTOR(time column), size [, offset])",
    }
}

pub fn cut_window_tvfs(
    tokens: Vec<TokenWithSpan>,
) -> Result<(Vec<TokenWithSpan>, Vec<WindowTvf>), Unsupported> {
    let tokens = drop_argument_names(tokens);
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
            if !matches!(kind.as_str(), "tumble" | "hop" | "cumulate" | "session") {
                return None;
            }
            // A window table function: from here on, a form eddy does not
            // read is an error at the function's name.
            let location = tokens[significant[k + 2]].span.start;
            let unsupported = || {
                Some(Err((
                    location.line,
                    location.column,
                    format!(
                        "window table functions of this form are not supported: write {} (one time column in DESCRIPTOR)",
                        tvf_form(&kind)
                    ),
                )))
            };
            if !is_table(at(k + 4)) {
                return unsupported();
            }
            let name = k + 5;
            if at(name).and_then(word).is_none() {
                return unsupported();
            }
            // SESSION(TABLE t PARTITION BY a, b, DESCRIPTOR(ts), gap)
            let mut p = k + 6;
            let mut partition = Vec::new();
            let is_keyword = |t: Option<&Token>, keyword: Keyword| matches!(t, Some(Token::Word(w)) if w.keyword == keyword && w.quote_style.is_none());
            if is_keyword(at(p), Keyword::PARTITION) && is_keyword(at(p + 1), Keyword::BY) {
                p += 2;
                while let Some(Token::Word(column)) = at(p) {
                    if column.value.eq_ignore_ascii_case("descriptor") {
                        break;
                    }
                    partition.push(column.value.clone());
                    p += 1;
                    if at(p) != Some(&Token::Comma) {
                        return unsupported();
                    }
                    p += 1;
                }
                p -= 1;
            }
            let descriptor = at(p + 1).and_then(word).unwrap_or_default();
            // The descriptor names a column, quoted or not, as written (a
            // quoted `dateTime` keeps its case; see `identifiers`).
            let time_column = match at(p + 3) {
                Some(token @ Token::Word(_)) => token.to_string(),
                _ => return unsupported(),
            };
            if at(p) != Some(&Token::Comma)
                || !descriptor.eq_ignore_ascii_case("descriptor")
                || at(p + 2) != Some(&Token::LParen)
                || at(p + 4) != Some(&Token::RParen)
                || at(p + 5) != Some(&Token::Comma)
            {
                return unsupported();
            }
            // The window's own arguments run to the TUMBLE call's `)`.
            let first_arg = p + 6;
            let mut depth = 0;
            let mut j = first_arg;
            let mut args_count = 1;
            while let Some(token) = at(j) {
                match token {
                    Token::LParen => depth += 1,
                    Token::RParen if depth == 0 => break,
                    Token::RParen => depth -= 1,
                    Token::Comma if depth == 0 => args_count += 1,
                    _ => {}
                }
                j += 1;
            }
            let wanted = if matches!(kind.as_str(), "hop" | "cumulate") {
                2
            } else {
                1
            };
            // An offset may follow (not for sessions).
            let offset_allowed = kind != "session";
            if at(j) != Some(&Token::RParen)
                || at(j + 1) != Some(&Token::RParen)
                || !(args_count == wanted || (offset_allowed && args_count == wanted + 1))
            {
                return unsupported();
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
                    partition,
                    at: (location.line, location.column),
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

/// Arroyo's window table functions, `FROM hop(t, ts, slide, width)` (and
/// `tumble(t, ts, size)`, `cumulate(t, ts, step, max)`, `session(t, ts,
/// gap)`): each is replaced with `t` and returned like [`cut_window_tvfs`]'s.
pub fn cut_function_tvfs(statement: &mut Statement) -> Vec<WindowTvf> {
    struct Cutter {
        found: Vec<WindowTvf>,
    }
    impl VisitorMut for Cutter {
        type Break = ();
        fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
            let TableFactor::Table { name, args, .. } = factor else {
                return ControlFlow::Continue(());
            };
            let kind = name.to_string().to_ascii_lowercase();
            if !matches!(kind.as_str(), "tumble" | "hop" | "cumulate" | "session") {
                return ControlFlow::Continue(());
            }
            let Some(list) = args.as_ref() else {
                return ControlFlow::Continue(());
            };
            let plain: Option<Vec<&Expr>> = list
                .args
                .iter()
                .map(|arg| match arg {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                    _ => None,
                })
                .collect();
            let Some([Expr::Identifier(table), time, rest @ ..]) = plain.as_deref() else {
                return ControlFlow::Continue(());
            };
            if rest.is_empty() {
                return ControlFlow::Continue(());
            }
            let at = name
                .0
                .last()
                .and_then(|part| part.as_ident())
                .map(|ident| (ident.span.start.line, ident.span.start.column))
                .unwrap_or((1, 1));
            let window_args: Vec<String> = rest.iter().map(|e| e.to_string()).collect();
            self.found.push(WindowTvf {
                table: table.to_string(),
                window: format!("{kind}({}, {time})", window_args.join(", ")),
                partition: Vec::new(),
                at,
            });
            *name = ObjectName(vec![ObjectNamePart::Identifier(table.clone())]);
            *args = None;
            ControlFlow::Continue(())
        }
    }
    let mut cutter = Cutter { found: Vec::new() };
    let _ = statement.visit(&mut cutter);
    cutter.found
}

/// Whether a SELECT list calls an aggregate function (by name: the common
/// ones), so that a window table function read without GROUP BY aggregates
/// per window (Arroyo's `SELECT count(*) FROM hop(...)`).
fn has_aggregate(select: &Select) -> bool {
    const AGGREGATES: &[&str] = &[
        "count",
        "sum",
        "avg",
        "min",
        "max",
        "stddev",
        "stddev_pop",
        "stddev_samp",
        "variance",
        "var_pop",
        "var_samp",
        "median",
        "first_value",
        "last_value",
        "array_agg",
        "string_agg",
        "bool_and",
        "bool_or",
        "approx_distinct",
        "approx_median",
        "approx_percentile_cont",
    ];
    let mut found = false;
    for item in &select.projection {
        let expr = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => continue,
        };
        let _ = datafusion::sql::sqlparser::ast::visit_expressions(expr, |e| {
            if let Expr::Function(f) = e {
                let name = f.name.to_string().to_ascii_lowercase();
                if f.over.is_none() && AGGREGATES.contains(&name.as_str()) {
                    found = true;
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        });
    }
    found
}

/// Flink's named arguments (`TUMBLE(DATA => TABLE t, TIMECOL =>
/// DESCRIPTOR(ts), SIZE => ...)`): the `NAME =>` parts are dropped inside
/// `TABLE(<window>(...))`, leaving the positional form (the names come in
/// that order).
fn drop_argument_names(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_)))
        .collect();
    let mut drop = vec![false; tokens.len()];
    let mut depth_in_tvf: Option<i32> = None;
    let mut depth = 0;
    for (k, &i) in significant.iter().enumerate() {
        let at = |d: usize| significant.get(k + d).map(|&j| &tokens[j].token);
        match &tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth_in_tvf.is_some_and(|d| depth < d) {
                    depth_in_tvf = None;
                }
            }
            Token::Word(w) if w.keyword == Keyword::TABLE && depth_in_tvf.is_none() => {
                let is_window = at(2).and_then(word).is_some_and(|kind| {
                    matches!(
                        kind.to_ascii_lowercase().as_str(),
                        "tumble" | "hop" | "cumulate" | "session"
                    )
                });
                if at(1) == Some(&Token::LParen) && is_window && at(3) == Some(&Token::LParen) {
                    depth_in_tvf = Some(depth + 2);
                }
            }
            Token::Word(_) if depth_in_tvf == Some(depth) && at(1) == Some(&Token::RArrow) => {
                drop[i] = true;
                if let Some(&arrow) = significant.get(k + 1) {
                    drop[arrow] = true;
                }
            }
            _ => {}
        }
    }
    tokens
        .into_iter()
        .zip(drop)
        .filter_map(|(t, d)| (!d).then_some(t))
        .collect()
}

/// Rewrites the queries reading a table whose window table function
/// [`cut_window_tvfs`] cut: they group by the window, and `window_start`,
/// `window_end`, `window_time` come from it.
/// An error names the window function's position (line, column).
pub fn rewrite_tvf_selects(
    statement: &mut Statement,
    windows: &[WindowTvf],
) -> Result<(), ((u64, u64), WindowTvfRefusal)> {
    struct Rewriter<'a> {
        windows: &'a [WindowTvf],
        error: Option<((u64, u64), WindowTvfRefusal)>,
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
                    self.error = Some((tvf.at, e));
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

/// Why a query over a window table function cannot be rewritten (and so
/// cannot run).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WindowTvfRefusal {
    /// `GROUP BY ALL`.
    #[error("GROUP BY ALL over a window table function is not supported")]
    GroupByAll,
    /// Grouped, but not by the window.
    #[error("a window table function over {table} needs GROUP BY window_start, window_end (eddy runs window table functions as window aggregations)")]
    NotByWindow { table: String },
    /// SESSION's PARTITION BY names a column the GROUP BY does not.
    #[error("SESSION(... PARTITION BY {column} ...): sessions are kept per GROUP BY key; add {column} to the GROUP BY")]
    PartitionNotGrouped { column: String },
    /// A window's size is not a constant interval.
    #[error("{function}(): window sizes must be constant intervals such as INTERVAL '5' MINUTES, not {size}")]
    SizeNotConstant { function: String, size: String },
    /// SESSION read row by row.
    #[error("SESSION(TABLE {table}, ...) without GROUP BY window_start, window_end is not supported: a row's session depends on the rows after it; aggregate with GROUP BY window_start, window_end")]
    SessionRows { table: String },
    /// The rewritten text did not parse (a bug).
    #[error("window table function over {table}: {error}")]
    Rewrite {
        table: String,
        error: datafusion::sql::sqlparser::parser::ParserError,
    },
}

fn rewrite_select(select: &mut Select, tvf: &WindowTvf) -> Result<(), WindowTvfRefusal> {
    let rewrite = |error| WindowTvfRefusal::Rewrite {
        table: tvf.table.clone(),
        error,
    };
    let window = Parser::new(&GenericDialect {})
        .try_with_sql(&tvf.window)
        .and_then(|mut p| p.parse_expr())
        .map_err(rewrite)?;
    let aggregates = has_aggregate(select);
    let GroupByExpr::Expressions(groups, _) = &mut select.group_by else {
        return Err(WindowTvfRefusal::GroupByAll);
    };
    if groups.is_empty() && !aggregates {
        return window_rows(select, tvf, &window);
    }
    if groups.is_empty() {
        // Aggregates without GROUP BY: one result per window.
        groups.push(window.clone());
    } else if !groups.iter().any(|g| window_column(g).is_some()) {
        return Err(WindowTvfRefusal::NotByWindow {
            table: tvf.table.clone(),
        });
    }
    // eddy's sessions are per GROUP BY key: PARTITION BY must name keys.
    for column in &tvf.partition {
        let grouped = groups.iter().any(|g| match g {
            Expr::Identifier(ident) => ident.value.eq_ignore_ascii_case(column),
            Expr::CompoundIdentifier(parts) => parts
                .last()
                .is_some_and(|ident| ident.value.eq_ignore_ascii_case(column)),
            _ => false,
        });
        if !grouped {
            return Err(WindowTvfRefusal::PartitionNotGrouped {
                column: column.clone(),
            });
        }
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
            SelectItem::ExprWithAlias { expr, .. } => replace_window_columns(expr, &field),
            _ => {}
        }
        // Window columns inside expressions (`CAST(window_start AS BIGINT)`).
        if let SelectItem::UnnamedExpr(expr) = item {
            if window_column(expr).is_none() {
                replace_window_columns(expr, &field);
            }
        }
    }
    if let Some(having) = &mut select.having {
        replace_window_columns(having, &field);
    }
    Ok(())
}

/// Replaces every `window_start`/`window_end`/`window_time` in `expr`.
fn replace_window_columns(expr: &mut Expr, field: &dyn Fn(&str) -> Expr) {
    let _ = visit_expressions_mut(expr, |e| {
        if let Some(column) = window_column(e) {
            *e = field(column);
        }
        ControlFlow::<()>::Continue(())
    });
}

/// A window table function read without aggregating: each row once per
/// window it falls in, with `window_start`, `window_end` and `window_time`.
/// `FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))` becomes `FROM
/// (SELECT *, <start> AS window_start, <end> AS window_end, <end - 1 ms> AS
/// window_time FROM t) AS t`; HOP and CUMULATE become a UNION ALL of one
/// such branch per window a row can fall in, each keeping the rows its
/// window holds. SESSION's windows depend on later rows, so it needs a
/// GROUP BY.
fn window_rows(
    select: &mut Select,
    tvf: &WindowTvf,
    window: &Expr,
) -> Result<(), WindowTvfRefusal> {
    let (kind, args) = match window {
        Expr::Function(function) => (
            function.name.to_string().to_ascii_lowercase(),
            plain_args(function).unwrap_or_default(),
        ),
        _ => (String::new(), Vec::new()),
    };
    let Some(from) = select.from.iter_mut().find(|from| matches!(&from.relation, TableFactor::Table { name, .. } if name.to_string().eq_ignore_ascii_case(&tvf.table))) else {
        return Ok(());
    };
    let alias = match &from.relation {
        TableFactor::Table {
            alias: Some(alias), ..
        } => alias.name.to_string(),
        _ => tvf.table.clone(),
    };
    // The inner table name is quoted so that this rewrite does not see it again.
    let table = format!("\"{}\"", tvf.table.to_lowercase().replace('"', ""));
    let ms = |e: &Expr| {
        interval_ms(e).ok_or_else(|| WindowTvfRefusal::SizeNotConstant {
            function: kind.to_uppercase(),
            size: e.to_string(),
        })
    };
    // (start expression, window width) per branch.
    let branches: Vec<(String, i64)> = match (kind.as_str(), args.as_slice()) {
        ("tumble", [size, time]) => {
            let size = ms(size)?;
            vec![(
                format!("date_bin(INTERVAL '{size} milliseconds', {time})"),
                size,
            )]
        }
        ("hop", [slide, width, time]) => {
            let (slide, width) = (ms(slide)?, ms(width)?);
            (0..(width + slide - 1) / slide)
                .map(|j| {
                    (
                        format!("date_bin(INTERVAL '{slide} milliseconds', {time}) - INTERVAL '{} milliseconds'", j * slide),
                        width,
                    )
                })
                .collect()
        }
        ("cumulate", [step, max, time]) => {
            let (step, max) = (ms(step)?, ms(max)?);
            (1..=max / step.max(1))
                .map(|k| {
                    (
                        format!("date_bin(INTERVAL '{max} milliseconds', {time})"),
                        k * step,
                    )
                })
                .collect()
        }
        _ => {
            return Err(WindowTvfRefusal::SessionRows {
                table: tvf.table.clone(),
            })
        }
    };
    let time = args.last().map(|t| t.to_string()).unwrap_or_default();
    let sql = if let [(start, width)] = branches.as_slice() {
        format!(
            "SELECT * FROM (SELECT *, {start} AS window_start, {start} + INTERVAL '{width} milliseconds' AS window_end, \
             {start} + INTERVAL '{} milliseconds' AS window_time FROM {table}) AS {alias}",
            width - 1
        )
    } else {
        let union: Vec<String> = branches
            .iter()
            .map(|(start, width)| {
                format!(
                    "SELECT * FROM (SELECT *, window_start + INTERVAL '{width} milliseconds' AS window_end, \
                     window_start + INTERVAL '{} milliseconds' AS window_time \
                     FROM (SELECT *, {start} AS window_start FROM {table})) WHERE {time} < window_end",
                    width - 1
                )
            })
            .collect();
        format!("SELECT * FROM ({}) AS {alias}", union.join(" UNION ALL "))
    };
    let query = Parser::new(&GenericDialect {})
        .try_with_sql(&sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|error| WindowTvfRefusal::Rewrite {
            table: tvf.table.clone(),
            error,
        })?;
    if let datafusion::sql::sqlparser::ast::SetExpr::Select(inner) = *query.body {
        if let Some(derived) = inner.from.into_iter().next() {
            from.relation = derived.relation;
        }
    }
    Ok(())
}

/// A constant interval's length in milliseconds (`INTERVAL '5' MINUTES`,
/// `INTERVAL '5 minutes'`).
fn interval_ms(expr: &Expr) -> Option<i64> {
    let Expr::Interval(interval) = expr else {
        return None;
    };
    let text = match interval.value.as_ref() {
        Expr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::Number(s, _) => s.clone(),
            _ => return None,
        },
        _ => return None,
    };
    let text = match &interval.leading_field {
        Some(unit) => format!("{text} {unit}"),
        None => text,
    };
    let ms = eddy_engine::time::parse_duration(&text).ok()?.as_millis();
    i64::try_from(ms).ok().filter(|ms| *ms > 0)
}

/// Rewrites Flink's group window functions in `statement` (see the module
/// docs).
pub fn rewrite_group_windows(statement: &mut Statement) {
    let _ = visit_expressions_mut(statement, |expr| {
        if let Some(rewritten) = rewrite(expr) {
            *expr = rewritten;
        }
        ControlFlow::<()>::Continue(())
    });
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
        "session" => ("session", None),
        "session_start" => ("session", Some("start")),
        "session_end" => ("session", Some("end")),
        "session_rowtime" => ("session", Some("rowtime")),
        _ => return None,
    };
    // Flink's forms carry the time column first: one more argument than eddy's.
    let wanted = if kind == "hop" { 3 } else { 2 };
    // eddy's own forms take the size first: `tumble(INTERVAL '5' SECOND)`.
    if args.len() != wanted || matches!(args[0], Expr::Interval(_) | Expr::Value(_)) {
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
        rewrite_group_windows(&mut statement);
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
