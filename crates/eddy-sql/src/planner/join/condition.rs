//! The conditions of a join, read for what they say about time: which
//! side an expression reads, `time column +/- interval` terms, and the
//! bound on `right time - left time` that comparisons of them make (see
//! the parent module's docs for where each conjunct goes); and the time
//! side of a planned join ([`JoinTime`]).

use datafusion::common::DFSchema;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator as BinaryOp};
use eddy_engine::operators::interval_join::{JoinBound, TimeBound};

use crate::functions::windows::{interval_expr_ms, strip_casts};

/// Which input an expression reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Left,
    Right,
}

pub(super) fn side_of(expr: &Expr, left: &DFSchema, right: &DFSchema) -> Option<Side> {
    let columns = expr.column_refs();
    if columns.is_empty() {
        return None;
    }
    if columns.iter().all(|c| left.has_column(c)) {
        Some(Side::Left)
    } else if columns.iter().all(|c| right.has_column(c)) {
        Some(Side::Right)
    } else {
        None
    }
}

/// `time column (+|-) constant interval` of one side: (side, offset ms).
pub(super) fn time_term(expr: &Expr, ctx: &TimeColumns<'_>) -> Option<(Side, i64)> {
    match strip_casts(expr) {
        Expr::Column(c) => {
            if ctx.left_time.is_some()
                && ctx.left.index_of_column(c).ok() == ctx.left_time
                && ctx.left.has_column(c)
            {
                Some((Side::Left, 0))
            } else if ctx.right_time.is_some()
                && ctx.right.index_of_column(c).ok() == ctx.right_time
            {
                Some((Side::Right, 0))
            } else {
                None
            }
        }
        // A window struct's bounds (`a.window.start = b.window.start`, as
        // Arroyo writes a window join): its time is `end - 1 ms`.
        Expr::ScalarFunction(call) if call.func.name() == "get_field" && call.args.len() == 2 => {
            let (side, 0) = time_term(&call.args[0], ctx)? else {
                return None;
            };
            let bound = match &call.args[1] {
                Expr::Literal(value, _) => value.try_as_str().flatten()?.to_string(),
                _ => return None,
            };
            let width = match side {
                Side::Left => ctx.left_window_ms,
                Side::Right => ctx.right_window_ms,
            };
            match bound.as_str() {
                "end" => Some((side, 1)),
                "start" => Some((side, 1 - width?)),
                _ => None,
            }
        }
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: BinaryOp::Plus,
            right,
        }) => {
            let (side, offset) = time_term(left, ctx)?;
            Some((side, offset + interval_expr_ms(right)?))
        }
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: BinaryOp::Minus,
            right,
        }) => {
            let (side, offset) = time_term(left, ctx)?;
            Some((side, offset - interval_expr_ms(right)?))
        }
        _ => None,
    }
}

pub(super) struct TimeColumns<'a> {
    pub(super) left: &'a DFSchema,
    pub(super) right: &'a DFSchema,
    /// Event-time column of each side (none: no time terms on that side).
    pub(super) left_time: Option<usize>,
    pub(super) right_time: Option<usize>,
    /// The width of each side's windows, when its time column is a window
    /// struct of fixed-width windows.
    pub(super) left_window_ms: Option<i64>,
    pub(super) right_window_ms: Option<i64>,
}

/// Accumulates constraints on d = right time - left time.
#[derive(Default)]
pub(super) struct Bounds {
    pub(super) lower: Option<(i64, bool)>,
    pub(super) upper: Option<(i64, bool)>,
}

impl Bounds {
    pub(super) fn add_lower(&mut self, value: i64, inclusive: bool) {
        let tighter = match self.lower {
            None => true,
            Some((v, inc)) => value > v || (value == v && inc && !inclusive),
        };
        if tighter {
            self.lower = Some((value, inclusive));
        }
    }

    pub(super) fn add_upper(&mut self, value: i64, inclusive: bool) {
        let tighter = match self.upper {
            None => true,
            Some((v, inc)) => value < v || (value == v && inc && !inclusive),
        };
        if tighter {
            self.upper = Some((value, inclusive));
        }
    }

    /// Records `a op b` where both are time terms; false if not a time comparison.
    pub(super) fn add_comparison(&mut self, a: (Side, i64), op: BinaryOp, b: (Side, i64)) -> bool {
        // Rewrite as `R - L op' k`.
        let (op, k) = match (a.0, b.0) {
            // R + ca op L + cb  =>  R - L op cb - ca
            (Side::Right, Side::Left) => (op, b.1 - a.1),
            // L + ca op R + cb  =>  R - L op~ ca - cb (op mirrored)
            (Side::Left, Side::Right) => (
                match op {
                    BinaryOp::Gt => BinaryOp::Lt,
                    BinaryOp::GtEq => BinaryOp::LtEq,
                    BinaryOp::Lt => BinaryOp::Gt,
                    BinaryOp::LtEq => BinaryOp::GtEq,
                    other => other,
                },
                a.1 - b.1,
            ),
            _ => return false,
        };
        match op {
            BinaryOp::Gt => self.add_lower(k, false),
            BinaryOp::GtEq => self.add_lower(k, true),
            BinaryOp::Lt => self.add_upper(k, false),
            BinaryOp::LtEq => self.add_upper(k, true),
            _ => return false,
        }
        true
    }
}

/// An interval join's time: both inputs' event-time columns (the left
/// one is the output's), the bound between them and the larger allowed
/// lateness.
#[derive(Clone, Copy)]
pub(super) struct JoinTime {
    pub(super) left_time: usize,
    pub(super) right_time: usize,
    pub(super) bound: TimeBound,
    pub(super) allowed_lateness_ms: i64,
}

impl JoinTime {
    /// The same time with column numbers after the inputs were pruned to
    /// the columns `left` and `right` (old numbers, in order).
    pub(super) fn remapped(self, left: &[usize], right: &[usize]) -> JoinTime {
        let new = |kept: &[usize], old: usize| kept.iter().position(|&c| c == old).unwrap_or(old);
        JoinTime {
            left_time: new(left, self.left_time),
            right_time: new(right, self.right_time),
            ..self
        }
    }

    /// The operator's form of it.
    pub(super) fn join_bound(self) -> JoinBound {
        JoinBound::Interval {
            left_time: self.left_time,
            right_time: self.right_time,
            bound: self.bound,
        }
    }
}
