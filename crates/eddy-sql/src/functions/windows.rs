//! The window functions `tumble(width)`, `hop(slide, width)`,
//! `cumulate(step, max)` and `session(gap)`. With the time column as a last
//! argument (Flink's window table functions carry it), an offset may come
//! before it: `tumble(width, offset, ts)`, `hop(slide, width, offset, ts)`,
//! `cumulate(step, max, offset, ts)`.
//!
//! They are placeholders for DataFusion's planner: in a streaming
//! `GROUP BY` the planner recognises them and builds a window aggregation
//! over the input's event time; their value is the window struct
//! `{start, end}`. Called anywhere else they fail with an explanation.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{plan_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use eddy_engine::window::{window_struct_type, WindowSpec};

/// Name of the tumbling-window function.
pub const TUMBLE: &str = "tumble";
/// Name of the hopping-window function.
pub const HOP: &str = "hop";
/// Name of the cumulating-window function.
pub const CUMULATE: &str = "cumulate";
/// Name of the session-window function.
pub const SESSION: &str = "session";

#[derive(Debug, PartialEq, Eq, Hash)]
struct WindowFunction {
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for WindowFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(window_struct_type())
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        plan_err!("{}() assigns rows to event-time windows and can only be used in the GROUP BY of a streaming query", self.name)
    }
}

/// Registers the window functions with a session.
pub fn register(ctx: &datafusion::prelude::SessionContext) {
    for udf in window_functions() {
        ctx.register_udf(udf.as_ref().clone());
    }
}

/// The `tumble` and `hop` functions, ready to register.
pub fn window_functions() -> Vec<Arc<ScalarUDF>> {
    // An optional last argument names the time column (Flink's spellings
    // carry it); the planner checks it is the input's event time.
    vec![
        window_function(TUMBLE, 1..=3),
        window_function(SESSION, 1..=2),
        window_function(CUMULATE, 2..=4),
        window_function(HOP, 2..=4),
    ]
}

/// The window function `name`, taking any of `arities` arguments.
fn window_function(name: &'static str, arities: std::ops::RangeInclusive<usize>) -> Arc<ScalarUDF> {
    Arc::new(ScalarUDF::from(WindowFunction {
        name,
        signature: Signature::one_of(
            arities.map(TypeSignature::Any).collect(),
            Volatility::Volatile,
        ),
    }))
}

/// A constant interval's fixed length in milliseconds (`None` for month-based
/// intervals, which have none, and for other values).
pub(crate) fn interval_value_ms(value: &ScalarValue) -> Option<i64> {
    match value {
        ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
            Some(i64::from(v.days) * 86_400_000 + v.nanoseconds / 1_000_000)
        }
        ScalarValue::IntervalDayTime(Some(v)) => {
            Some(i64::from(v.days) * 86_400_000 + i64::from(v.milliseconds))
        }
        _ => None,
    }
}

/// `expr` without the aliases and casts around it.
pub(crate) fn strip_casts(expr: &Expr) -> &Expr {
    match expr {
        Expr::Cast(c) => strip_casts(&c.expr),
        Expr::TryCast(c) => strip_casts(&c.expr),
        Expr::Alias(a) => strip_casts(&a.expr),
        e => e,
    }
}

/// A constant interval expression's length in milliseconds.
pub(crate) fn interval_expr_ms(expr: &Expr) -> Option<i64> {
    match strip_casts(expr) {
        Expr::Literal(value, _) => interval_value_ms(value),
        _ => None,
    }
}

/// Why a window function's arguments define no window.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowArgError {
    /// Too few or too many arguments (what the function takes).
    #[error("{0}")]
    Arguments(&'static str),
    /// A size of zero or less.
    #[error("{function}(): window sizes must be positive")]
    NotPositive { function: &'static str },
    /// An interval in months, which have no fixed length.
    #[error("{function}(): month-based intervals have no fixed length; use days, hours, minutes or seconds")]
    Months { function: &'static str },
    /// A text that is not a duration.
    #[error("{function}(): {reason}")]
    Duration {
        function: &'static str,
        reason: eddy_engine::time::DurationError,
    },
    /// An argument that is not a constant interval.
    #[error("{function}() takes constant intervals such as INTERVAL '10' SECOND, not {given}")]
    NotConstant {
        function: &'static str,
        given: String,
    },
    /// A hop that slides further than it is wide.
    #[error("hop(): the slide ({slide_ms}ms) must not exceed the width ({width_ms}ms)")]
    SlideOverWidth { slide_ms: i64, width_ms: i64 },
    /// A cumulate whose max size is not a whole number of steps.
    #[error("cumulate(): the max size ({max_ms}ms) must be a multiple of the step ({step_ms}ms)")]
    NotAMultiple { step_ms: i64, max_ms: i64 },
    /// Windows so dense each row falls into more than
    /// [`MAX_WINDOWS_PER_ROW`].
    #[error(
        "{function}(): windows of {} every {} put each row in {per_row} windows (at most {MAX_WINDOWS_PER_ROW}); check the units, e.g. {function}(INTERVAL '1' MINUTE, ...) rather than MILLISECOND",
        human(*width_ms),
        human(*step_ms)
    )]
    TooManyWindows {
        function: &'static str,
        width_ms: i64,
        step_ms: i64,
        per_row: i64,
    },
}

/// Reads a constant duration argument: an INTERVAL, or a string like `'10 seconds'`.
fn duration_ms(function: &'static str, expr: &Expr) -> std::result::Result<i64, WindowArgError> {
    let ms = signed_duration_ms(function, expr)?;
    if ms <= 0 {
        return Err(WindowArgError::NotPositive { function });
    }
    Ok(ms)
}

/// A window's offset argument (Flink's fourth window argument): a constant
/// duration of either sign.
fn offset_ms(function: &'static str, expr: &Expr) -> std::result::Result<i64, WindowArgError> {
    signed_duration_ms(function, expr)
}

/// A constant duration of either sign.
fn signed_duration_ms(
    function: &'static str,
    expr: &Expr,
) -> std::result::Result<i64, WindowArgError> {
    let expr = match expr {
        Expr::Cast(c) => c.expr.as_ref(),
        Expr::TryCast(c) => c.expr.as_ref(),
        e => e,
    };
    let ms = match expr {
        Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) if v.months != 0 => {
            return Err(WindowArgError::Months { function });
        }
        Expr::Literal(
            value @ (ScalarValue::IntervalMonthDayNano(Some(_))
            | ScalarValue::IntervalDayTime(Some(_))),
            _,
        ) => interval_value_ms(value).unwrap_or_default(),
        Expr::Literal(ScalarValue::Utf8(Some(s)), _) => eddy_engine::time::parse_duration(s)
            .map_err(|reason| WindowArgError::Duration { function, reason })?
            .as_millis() as i64,
        other => {
            return Err(WindowArgError::NotConstant {
                function,
                given: other.to_string(),
            })
        }
    };
    Ok(ms)
}

/// The most windows one row may fall into (hop width / slide, cumulate max /
/// step): beyond it a window's results come so often, and each from so many
/// slices, that a job would not keep up, and the cause is nearly always a
/// unit typo (`INTERVAL '1' MILLISECOND` for a minute).
pub const MAX_WINDOWS_PER_ROW: i64 = 100_000;

fn overlapping(
    function: &'static str,
    width_ms: i64,
    step_ms: i64,
) -> std::result::Result<(), WindowArgError> {
    let per_row = width_ms / step_ms;
    if per_row > MAX_WINDOWS_PER_ROW {
        return Err(WindowArgError::TooManyWindows {
            function,
            width_ms,
            step_ms,
            per_row,
        });
    }
    Ok(())
}

/// `1 day`, `5 s`, `250 ms`: a duration as people write it.
fn human(ms: i64) -> String {
    for (unit, name) in [
        (86_400_000, "day"),
        (3_600_000, "h"),
        (60_000, "min"),
        (1_000, "s"),
    ] {
        if ms % unit == 0 {
            let n = ms / unit;
            return if name == "day" && n != 1 {
                format!("{n} days")
            } else {
                format!("{n} {name}")
            };
        }
    }
    format!("{ms} ms")
}

/// The time column a window call names (Flink's spellings do, as an extra
/// last argument), if any.
pub fn window_time_argument(expr: &Expr) -> Option<&Expr> {
    let expr = match expr {
        Expr::Alias(a) => a.expr.as_ref(),
        e => e,
    };
    let Expr::ScalarFunction(call) = expr else {
        return None;
    };
    match (call.func.name(), call.args.len()) {
        (TUMBLE, 2 | 3) | (HOP, 3 | 4) | (CUMULATE, 3 | 4) | (SESSION, 2) => call.args.last(),
        _ => None,
    }
}

/// If `expr` is a call of `tumble` or `hop`, the window it defines.
pub fn window_spec(expr: &Expr) -> Option<std::result::Result<WindowSpec, WindowArgError>> {
    let expr = match expr {
        Expr::Alias(a) => a.expr.as_ref(),
        e => e,
    };
    let Expr::ScalarFunction(call) = expr else {
        return None;
    };
    match call.func.name() {
        TUMBLE => Some((|| {
            let (width, offset) = match call.args.as_slice() {
                [width] | [width, _] => (width, None),
                [width, offset, _] => (width, Some(offset)),
                _ => return Err(WindowArgError::Arguments("tumble() needs a width")),
            };
            let spec = WindowSpec::tumble(duration_ms(TUMBLE, width)?);
            Ok(spec.with_offset(offset.map_or(Ok(0), |o| offset_ms(TUMBLE, o))?))
        })()),
        HOP => Some((|| {
            let (slide, width, offset) = match call.args.as_slice() {
                [slide, width] | [slide, width, _] => (slide, width, None),
                [slide, width, offset, _] => (slide, width, Some(offset)),
                _ => return Err(WindowArgError::Arguments("hop() takes (slide, width)")),
            };
            let (slide_ms, width_ms) = (duration_ms(HOP, slide)?, duration_ms(HOP, width)?);
            if slide_ms > width_ms {
                return Err(WindowArgError::SlideOverWidth { slide_ms, width_ms });
            }
            overlapping(HOP, width_ms, slide_ms)?;
            let offset = offset.map_or(Ok(0), |o| offset_ms(HOP, o))?;
            Ok(WindowSpec::hop(slide_ms, width_ms).with_offset(offset))
        })()),
        CUMULATE => Some((|| {
            let (step, max, offset) = match call.args.as_slice() {
                [step, max] | [step, max, _] => (step, max, None),
                [step, max, offset, _] => (step, max, Some(offset)),
                _ => {
                    return Err(WindowArgError::Arguments(
                        "cumulate() takes (step, max size)",
                    ))
                }
            };
            let (step_ms, max_ms) = (duration_ms(CUMULATE, step)?, duration_ms(CUMULATE, max)?);
            if max_ms % step_ms != 0 {
                return Err(WindowArgError::NotAMultiple { step_ms, max_ms });
            }
            overlapping(CUMULATE, max_ms, step_ms)?;
            let offset = offset.map_or(Ok(0), |o| offset_ms(CUMULATE, o))?;
            Ok(WindowSpec::cumulate(step_ms, max_ms).with_offset(offset))
        })()),
        _ => None,
    }
}

/// If `expr` is a call of `session`, its gap in milliseconds.
pub fn session_gap(expr: &Expr) -> Option<std::result::Result<i64, WindowArgError>> {
    let expr = match expr {
        Expr::Alias(a) => a.expr.as_ref(),
        e => e,
    };
    let Expr::ScalarFunction(call) = expr else {
        return None;
    };
    (call.func.name() == SESSION).then(|| match call.args.first() {
        Some(gap) => duration_ms(SESSION, gap),
        None => Err(WindowArgError::Arguments(
            "session() needs a gap, e.g. session(INTERVAL '30' SECOND)",
        )),
    })
}
