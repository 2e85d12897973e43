//! Plans a logical `Join` into an interval join, or a regular join.
//!
//! The ON condition is split into conjuncts: equalities between a left and a
//! right expression become keys; comparisons between the two sides' event
//! times (`r.t BETWEEN l.t - INTERVAL .. AND l.t + INTERVAL ..`, or `>=`,
//! `>`, `<=`, `<` with constant interval offsets on either side, or `=`:
//! a window join of two window aggregates' results on `window_end` or
//! `window_time` is an interval join of width zero) become the time bound;
//! everything else is applied to each candidate pair.
//!
//! `SET 'table.exec.state.ttl'` bounds every join by the TTL: rows further
//! apart in event time never pair, so a row's state lives at most that long
//! past the watermark. An INNER join with no time bound at all is a regular
//! join: it keeps every row for the life of the job and its output has no
//! event time. An outer join with a time bound needs both a lower and an
//! upper one (or the TTL): its null-padded rows are final only once no
//! partner can arrive. An outer join with no time bound at all, and any
//! join over an updating input, is an updating join (`updating.rs`): its
//! null-padded rows are taken back when a partner comes.

mod condition;
mod inputs;
mod lookup;
mod probe;
mod temporal;
mod updating;

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::DFSchema;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Join, JoinType, Operator as BinaryOp};
use eddy_engine::operators::interval_join::{
    IntervalJoinPlan, JoinBound, JoinInput, JoinKind, JoinWindow, TimeBound,
};
use eddy_engine::operators::updating_join::JoinOutput;

use super::stream::{add_operator, Stream, TimeAttr, WindowColumn};
use crate::planner::statement_text::StatementText;

/// A join key as a physical expression over one side's rows.
type PhysicalKey = Arc<dyn datafusion::physical_expr::PhysicalExpr>;
use super::Compiler;
use crate::error::{Result, SqlError};
use crate::functions::windows::strip_casts;
use condition::{side_of, time_term, Bounds, JoinTime, Side, TimeColumns};
use inputs::{pruned, UsedColumns};

impl Compiler {
    /// Plans `join`; `needed` marks the columns of its output that what
    /// reads it uses (`None`: all of them).
    pub(super) fn plan_join(
        &mut self,
        join: &Join,
        cx: &StatementText,
        needed: Option<Vec<bool>>,
    ) -> Result<Stream> {
        if let Some(clause) = self.temporal_clause(join, cx) {
            return self.plan_temporal_join(join, &clause, cx);
        }
        // EXISTS / NOT EXISTS (and IN): a semi or anti join. Bounded by
        // event time (a window join's windows, or a time condition) it is
        // an interval join's; otherwise an updating one.
        let semi = match join.join_type {
            JoinType::LeftSemi => Some(JoinOutput::LeftSemi),
            JoinType::LeftAnti => Some(JoinOutput::LeftAnti),
            _ => None,
        };
        // A semi join's output is its left input's columns: all kept.
        let needed = if semi.is_some() { None } else { needed };
        let kind = match join.join_type {
            JoinType::Inner => JoinKind::Inner,
            JoinType::Left => JoinKind::Left,
            JoinType::Right => JoinKind::Right,
            JoinType::Full => JoinKind::Full,
            JoinType::LeftSemi => JoinKind::Semi,
            JoinType::LeftAnti => JoinKind::Anti,
            other => {
                return Err(SqlError::at(
                    &cx.anchor(&["JOIN"]),
                    format!("{other} joins of streams are not supported"),
                ))
            }
        };
        let mut left = self.plan_stream(&join.left, cx)?;
        let mut right = self.plan_stream(&join.right, cx)?;
        let (left_schema, right_schema) =
            (join.left.schema().as_ref(), join.right.schema().as_ref());
        let times = TimeColumns {
            left: left_schema,
            right: right_schema,
            left_time: left.time.map(|t| t.column),
            right_time: right.time.map(|t| t.column),
            left_window_ms: left.time.and_then(|t| t.window_ms),
            right_window_ms: right.time.and_then(|t| t.window_ms),
        };

        let mut left_keys = Vec::new();
        let mut right_keys = Vec::new();
        let mut bounds = Bounds::default();
        let mut residual: Vec<Expr> = Vec::new();
        // Equal window bounds (a window join of window table functions' rows
        // on window_start / window_end) bound the event times by the width.
        // The windows of both sides are kept: a late row whose window had
        // fired is dropped, as Flink's window join drops it.
        let window_pair = |l: &Expr, r: &Expr| -> Option<(WindowColumn, WindowColumn)> {
            let window =
                |e: &Expr, schema: &DFSchema, windows: &[WindowColumn]| match strip_casts(e) {
                    Expr::Column(c) => {
                        let index = schema.index_of_column(c).ok()?;
                        windows.iter().find(|w| w.column == index).copied()
                    }
                    _ => None,
                };
            let (a, b) = match (
                side_of(l, left_schema, right_schema),
                side_of(r, left_schema, right_schema),
            ) {
                (Some(Side::Left), Some(Side::Right)) => (l, r),
                (Some(Side::Right), Some(Side::Left)) => (r, l),
                _ => return None,
            };
            Some((
                window(a, left_schema, &left.windows)?,
                window(b, right_schema, &right.windows)?,
            ))
        };
        let mut join_windows: [Option<WindowColumn>; 2] = [None, None];
        let mut window_width = |l: &Expr, r: &Expr| -> Option<i64> {
            let (a, b) = window_pair(l, r)?;
            // The pair nearest the windows' ends decides when a late row's
            // window has fired (window_end itself, over window_start + size).
            let nearer = match join_windows {
                [Some(x), Some(y)] => a.to_end_ms.max(b.to_end_ms) < x.to_end_ms.max(y.to_end_ms),
                _ => true,
            };
            if nearer {
                join_windows = [Some(a), Some(b)];
            }
            Some(a.width_ms.max(b.width_ms))
        };
        for (l, r) in &join.on {
            if let Some(width) = window_width(l, r) {
                bounds.add_lower(-width, false);
                bounds.add_upper(width, false);
            }
            // Equal event times (a window join on window_end or window_time)
            // bound the join to zero width; they stay keys too.
            if let (Some(tl), Some(tr)) = (time_term(l, &times), time_term(r, &times)) {
                bounds.add_comparison(tl, BinaryOp::GtEq, tr);
                bounds.add_comparison(tl, BinaryOp::LtEq, tr);
            }
            left_keys.push(l.clone());
            right_keys.push(r.clone());
        }
        let conjuncts: Vec<&Expr> = join
            .filter
            .as_ref()
            .map(split_conjunction)
            .unwrap_or_default();
        for conjunct in conjuncts {
            match conjunct {
                Expr::BinaryExpr(BinaryExpr {
                    left: a,
                    op: BinaryOp::Eq,
                    right: b,
                }) => {
                    if let Some(width) = window_width(a, b) {
                        bounds.add_lower(-width, false);
                        bounds.add_upper(width, false);
                    }
                    match (
                        side_of(a, left_schema, right_schema),
                        side_of(b, left_schema, right_schema),
                    ) {
                        (Some(Side::Left), Some(Side::Right))
                        | (Some(Side::Right), Some(Side::Left))
                            if time_term(a, &times).is_some() && time_term(b, &times).is_some() =>
                        {
                            if let (Some(ta), Some(tb)) =
                                (time_term(a, &times), time_term(b, &times))
                            {
                                bounds.add_comparison(ta, BinaryOp::GtEq, tb);
                                bounds.add_comparison(ta, BinaryOp::LtEq, tb);
                            }
                            continue;
                        }
                        (Some(Side::Left), Some(Side::Right)) => {
                            left_keys.push(a.as_ref().clone());
                            right_keys.push(b.as_ref().clone());
                            continue;
                        }
                        (Some(Side::Right), Some(Side::Left)) => {
                            left_keys.push(b.as_ref().clone());
                            right_keys.push(a.as_ref().clone());
                            continue;
                        }
                        _ => {}
                    }
                }
                Expr::BinaryExpr(BinaryExpr {
                    left: a,
                    op,
                    right: b,
                }) if matches!(
                    op,
                    BinaryOp::Gt | BinaryOp::GtEq | BinaryOp::Lt | BinaryOp::LtEq
                ) =>
                {
                    if let (Some(ta), Some(tb)) = (time_term(a, &times), time_term(b, &times)) {
                        if bounds.add_comparison(ta, *op, tb) {
                            continue;
                        }
                    }
                }
                Expr::Between(between) if !between.negated => {
                    if let (Some(x), Some(lo), Some(hi)) = (
                        time_term(&between.expr, &times),
                        time_term(&between.low, &times),
                        time_term(&between.high, &times),
                    ) {
                        if bounds.add_comparison(x, BinaryOp::GtEq, lo)
                            && bounds.add_comparison(x, BinaryOp::LtEq, hi)
                        {
                            continue;
                        }
                    }
                }
                _ => {}
            }
            residual.push(conjunct.clone());
        }
        // A join over an updating input, or an outer join with no time
        // bound at all, has a changing result.
        let unbounded_outer = kind != JoinKind::Inner
            && bounds.lower.is_none()
            && bounds.upper.is_none()
            && self.state_ttl_ms.is_none();
        // (A side without event time cannot bound it either.)
        let semi_unbounded = semi.is_some()
            && (bounds.lower.is_none()
                || bounds.upper.is_none()
                || left.time.is_none()
                || right.time.is_none());
        if left.changelog.is_some()
            || right.changelog.is_some()
            || unbounded_outer
            || semi_unbounded
        {
            return self.plan_updating_join(
                join,
                semi.unwrap_or(JoinOutput::Pairs(kind)),
                left,
                right,
                needed,
                cx,
            );
        }
        let regular = kind == JoinKind::Inner
            && bounds.lower.is_none()
            && bounds.upper.is_none()
            && self.state_ttl_ms.is_none();
        let time = if regular {
            None
        } else {
            Some(self.join_time(kind, &left, &right, bounds, cx)?)
        };

        let state = self.ctx.state();
        // Conditions on one side only filter that side's rows before the
        // join, where the join kind allows it (never a preserved side's).
        let (push_left, push_right) = match kind {
            JoinKind::Inner | JoinKind::Semi => (true, true),
            JoinKind::Left | JoinKind::Anti => (false, true),
            JoinKind::Right => (true, false),
            JoinKind::Full => (false, false),
        };
        // (The join applies them, and the column pruning below, to each
        // batch as it arrives: an operator in between would cost a thread
        // and its queues for what is a filter kernel and an Arc clone.)
        let (mut kept, mut side_filters) = (Vec::new(), [Vec::new(), Vec::new()]);
        for conjunct in residual {
            match side_of(&conjunct, left_schema, right_schema) {
                Some(Side::Left) if push_left => side_filters[0].push(conjunct),
                Some(Side::Right) if push_right => side_filters[1].push(conjunct),
                _ => kept.push(conjunct),
            }
        }
        let residual = kept;
        let mut inputs: [JoinInput; 2] = Default::default();
        for ((input, filters), schema) in inputs
            .iter_mut()
            .zip(side_filters)
            .zip([left_schema, right_schema])
        {
            if let Some(filter) = datafusion::logical_expr::utils::conjunction(filters) {
                input.filter = Some(
                    crate::context::physical_expr(&state, filter, schema)
                        .map_err(|e| self.df_error(cx, e))?,
                );
            }
        }

        // Columns that neither the join nor what reads its output uses are
        // dropped from its inputs: its state keeps only the others.
        let used = UsedColumns::of(
            join,
            needed.as_deref(),
            &left_keys,
            &right_keys,
            &residual,
            time,
        );
        let (pruned_left, left_kept) = pruned(left_schema, &used.left);
        let (pruned_right, right_kept) = pruned(right_schema, &used.right);
        let time = time.map(|t| t.remapped(&left_kept, &right_kept));
        // Each side's window, as a column of the side's kept columns.
        let windows = [
            (&join_windows[0], &left_kept),
            (&join_windows[1], &right_kept),
        ]
        .map(|(window, kept)| {
            let window = (*window)?;
            let column = kept.iter().position(|&k| k == window.column)?;
            Some(JoinWindow {
                column,
                to_end_ms: window.to_end_ms,
            })
        });
        for ((input, kept), width) in inputs
            .iter_mut()
            .zip([&left_kept, &right_kept])
            .zip([used.left.len(), used.right.len()])
        {
            input.columns = (kept.len() < width).then(|| kept.clone());
        }
        let (left_schema, right_schema) = (pruned_left.as_ref(), pruned_right.as_ref());
        // The rows a side misses are padded with NULLs, as in `join.schema`.
        let side_fields = |schema: &DFSchema, padded: bool| {
            schema
                .iter()
                .map(|(qualifier, field)| {
                    let field = if padded {
                        Arc::new(field.as_ref().clone().with_nullable(true))
                    } else {
                        Arc::clone(field)
                    };
                    (qualifier.cloned(), field)
                })
                .collect::<Vec<_>>()
        };
        let join_schema = DFSchema::new_with_metadata(
            [
                side_fields(left_schema, kind.keeps_right()),
                side_fields(right_schema, kind.keeps_left()),
            ]
            .concat(),
            join.schema.metadata().clone(),
        )
        .map_err(|e| self.df_error(cx, e))?;

        let (left_key_exprs, right_key_exprs) =
            self.join_keys(&left_keys, &right_keys, left_schema, right_schema, cx)?;
        let residual = match datafusion::logical_expr::utils::conjunction(residual) {
            Some(expr) => Some(
                crate::context::physical_expr(&state, expr, &join_schema)
                    .map_err(|e| self.df_error(cx, e))?,
            ),
            None => None,
        };

        // A semi or anti join outputs its left rows alone.
        let output_fields = if kind.left_only() {
            left_schema.fields()
        } else {
            join_schema.fields()
        };
        let output_schema = Arc::new(Schema::new(
            output_fields
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        let allowed_lateness_ms = time.map_or(0, |t| t.allowed_lateness_ms);
        let plan = IntervalJoinPlan {
            kind,
            left_schema: Arc::new(left_schema.as_arrow().clone()),
            right_schema: Arc::new(right_schema.as_arrow().clone()),
            output_schema: output_schema.clone(),
            left_keys: left_key_exprs.clone(),
            right_keys: right_key_exprs.clone(),
            time: time.map_or(JoinBound::Unbounded, JoinTime::join_bound),
            allowed_lateness_ms,
            residual,
            inputs,
            windows,
        };
        let from_left = left.materialize(&mut self.graph);
        let from_right = right.materialize(&mut self.graph);
        let node = add_operator(&mut self.graph, Arc::new(plan), vec![from_left, from_right]);
        // Output rows carry the left row's event time; right-only rows of
        // RIGHT/FULL joins have none, so those outputs have no event time,
        // and neither have a regular join's (a row can pair with one that
        // arrives arbitrarily later).
        let (output_time, time_lost) = match (time, kind) {
            (None, _) => (None, Some("the rows of a join without a time bound have no event time (a row can pair with one that comes arbitrarily later; bound the join by the two sides' event times to keep it)")),
            (Some(t), JoinKind::Inner | JoinKind::Left | JoinKind::Semi | JoinKind::Anti) => (
                Some(TimeAttr {
                    column: t.left_time,
                    allowed_lateness_ms,
                    window_ms: None,
                }),
                None,
            ),
            (Some(_), JoinKind::Right | JoinKind::Full) => (None, Some("the rows of a RIGHT or FULL join have no event time (rows from only the right side carry none)")),
        };
        let stream_schema = if kind.left_only() {
            Arc::clone(&join.schema)
        } else {
            Arc::new(join_schema)
        };
        let mut stream = Stream::of_node(node, &self.graph, stream_schema, output_time);
        stream.time_lost = time_lost.map(str::to_string);
        if kind.left_only() {
            // The left rows pass as they came: their windows too.
            stream.windows = left.windows.clone();
        }
        Ok(stream)
    }

    /// The key expressions of both sides as physical expressions over
    /// each side's rows; keys of different types are refused.
    fn join_keys(
        &self,
        left_keys: &[Expr],
        right_keys: &[Expr],
        left_schema: &DFSchema,
        right_schema: &DFSchema,
        cx: &StatementText,
    ) -> Result<(Vec<PhysicalKey>, Vec<PhysicalKey>)> {
        let state = self.ctx.state();
        let physical = |exprs: &[Expr], schema: &DFSchema| {
            exprs
                .iter()
                .map(|e| crate::context::physical_expr(&state, e.clone(), schema))
                .collect::<datafusion::error::Result<Vec<_>>>()
                .map_err(|e| self.df_error(cx, e))
        };
        let left = physical(left_keys, left_schema)?;
        let right = physical(right_keys, right_schema)?;
        for (l, r) in left.iter().zip(&right) {
            let (lt, rt) = (
                l.data_type(left_schema.as_arrow()),
                r.data_type(right_schema.as_arrow()),
            );
            if lt.as_ref().ok() != rt.as_ref().ok() {
                return Err(SqlError::at(
                    &cx.anchor(&["ON", "WHERE"]),
                    format!("join keys {l} and {r} have different types; CAST one of them"),
                ));
            }
        }
        Ok((left, right))
    }

    /// The event-time side of a join that is not a regular one: both inputs'
    /// time columns and the bound between them (narrowed by the state TTL).
    fn join_time(
        &self,
        kind: JoinKind,
        left: &Stream,
        right: &Stream,
        mut bounds: Bounds,
        cx: &StatementText,
    ) -> Result<JoinTime> {
        let (Some(left_time), Some(right_time)) = (left.time, right.time) else {
            let (side, stream) = if left.time.is_none() {
                ("left", left)
            } else {
                ("right", right)
            };
            return Err(SqlError::at(
                &cx.anchor(&["JOIN", "WHERE"]),
                format!(
                    "both inputs of a stream join with a time bound (or an outer one) need event time, but the {side} one has none: {}",
                    stream.why_no_time()
                ),
            ));
        };
        if let Some(ttl) = self.state_ttl_ms {
            bounds.add_lower(-ttl, true);
            bounds.add_upper(ttl, true);
        }
        let (Some((lower_ms, lower_inclusive)), Some((upper_ms, upper_inclusive))) =
            (bounds.lower, bounds.upper)
        else {
            let why = if kind != JoinKind::Inner {
                "without one, a row without a partner could never be emitted null-padded, since its partner could still arrive"
            } else if bounds.lower.is_some() {
                "its time condition has a lower end but no upper one"
            } else {
                "its time condition has an upper end but no lower one"
            };
            return Err(SqlError::at(
                &cx.anchor(&[kind.name(), "JOIN", "WHERE"]),
                format!("this {} JOIN of two streams needs a time bound on their event times, e.g. `AND r.event_time BETWEEN l.event_time - INTERVAL '10' SECOND AND l.event_time + INTERVAL '10' SECOND`, or a state TTL (`SET 'table.exec.state.ttl' = '1 h'`: rows further apart never pair); {why}", kind.name()),
            ));
        };
        // An empty bound pairs nothing. An outer join still means something
        // (every preserved row comes out padded, as Flink plans it); an inner
        // one could only ever be empty, which is a mistake worth naming.
        if lower_ms > upper_ms && matches!(kind, JoinKind::Inner | JoinKind::Semi) {
            return Err(SqlError::at(
                &cx.anchor(&["BETWEEN", "JOIN", "WHERE"]),
                "the join's time bound is empty (its lower end is above its upper end), so this inner join could never pair two rows",
            ));
        }
        Ok(JoinTime {
            left_time: left_time.column,
            right_time: right_time.column,
            bound: TimeBound {
                lower_ms,
                lower_inclusive,
                upper_ms,
                upper_inclusive,
            },
            allowed_lateness_ms: left_time
                .allowed_lateness_ms
                .max(right_time.allowed_lateness_ms),
        })
    }
}
