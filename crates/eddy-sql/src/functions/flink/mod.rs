//! Functions Flink users reach for, with Flink's meaning:
//!
//! | function | returns |
//! |---|---|
//! | `MOD(a, b)` | `a` modulo `b` (sign of `a`); NULL when `b` is 0 |
//! | `TO_TIMESTAMP_LTZ(n, precision)` | epoch seconds (`precision` 0) or milliseconds (3) as a TIMESTAMP(3) |
//! | `TIMESTAMPDIFF(unit, t1, t2)` | whole `unit`s from `t1` to `t2` (SECOND ... YEAR), truncated toward zero |
//! | `TIMESTAMPADD(unit, n, t)` | `t` plus `n` `unit`s (months and years by the calendar) |
//! | `DATE_FORMAT(t, pattern)` | `t` formatted with a Java `SimpleDateFormat` pattern (`yyyy-MM-dd HH:mm:ss`) |
//! | `VARIANCE(x)` | the sample variance (`var_samp`) |
//! | `JSON_VALUE(text, '$.a.b[0]')` | the scalar at the path in a JSON string, as text; NULL when absent, not a scalar, or not JSON ([`json`]) |
//! | `JSON_EXISTS(text, path)`, `JSON_QUERY(text, path)` | whether the path leads to a value; the object or array there as JSON text ([`json`]) |
//! | `JSON_OBJECT(k VALUE v, ...)`, `JSON_ARRAY(v, ...)`, `JSON_STRING(v)`, `JSON(text)`, `text IS [NOT] JSON [kind]` | JSON text built from values (nested constructors inserted as JSON, `NULL`/`ABSENT ON NULL`); whether text is JSON of the kind ([`json_build`]) |
//! | `JSON_ARRAY_ELEMENTS(text)` | a JSON array's elements as a list, for `UNNEST` (eddy's own) ([`json`]) |
//! | `REGEXP_EXTRACT(s, regex[, group])`, `SPLIT_INDEX(s, delimiter, i)` | a group of the first match (0: all of it); the `i`-th piece from 0 ([`text`]) |
//! | `YEAR`, `QUARTER`, `MONTH`, `WEEK`, `DAYOFYEAR`, `DAYOFMONTH`, `DAYOFWEEK`, `HOUR`, `MINUTE`, `SECOND` | that part of a TIMESTAMP or DATE as BIGINT (`DAYOFWEEK`: 1 = Sunday; `WEEK`: ISO 8601) ([`time_parts`]) |
//! | `PROCTIME()` | the wall-clock time a batch of rows is read, as a TIMESTAMP(3); as a table's computed column (`proc AS PROCTIME()`) it marks the column as the table's arrival order (see [`is_proctime`]) |
//! | `NOW()`, `CURRENT_TIMESTAMP`, `CURRENT_DATE`, `CURRENT_TIME` | the wall clock when a batch of rows is processed (Flink's streaming meaning: per record), never the instant the query was planned; types as DataFusion's (a UTC timestamp, a date, a time) |
//!
//! The unit of `TIMESTAMPDIFF`/`TIMESTAMPADD` is a keyword in Flink; the
//! statement reader turns it into a string before DataFusion parses it. All
//! timestamps are UTC.

use std::sync::Arc;

use chrono::{Datelike, Months, NaiveDateTime, Timelike};
use datafusion::arrow::array::{
    Array, ArrayRef, Float64Array, Int64Array, StringBuilder, TimestampMillisecondArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, TimeUnit, TimestampMillisecondType};
use datafusion::arrow::temporal_conversions::timestamp_ms_to_datetime;
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use datafusion::prelude::SessionContext;

pub mod json;
pub mod json_build;
pub mod renames;
pub mod strings;
pub mod text;
pub mod time_parts;
pub mod types_and_maps;

const TS_MS: DataType = DataType::Timestamp(TimeUnit::Millisecond, None);

/// Timestamps of every unit (a column is TIMESTAMP(3), a literal
/// `TIMESTAMP '...'` nanoseconds): the functions read any as milliseconds.
const TIMESTAMPS: [DataType; 4] = [
    DataType::Timestamp(TimeUnit::Second, None),
    TS_MS,
    DataType::Timestamp(TimeUnit::Microsecond, None),
    DataType::Timestamp(TimeUnit::Nanosecond, None),
];

/// A signature of `args` where each `None` is a timestamp of any unit.
fn with_timestamps(args: &[Option<DataType>]) -> Signature {
    let mut signatures: Vec<Vec<DataType>> = vec![Vec::new()];
    for arg in args {
        signatures = signatures
            .into_iter()
            .flat_map(|prefix| {
                let choices: Vec<DataType> = match arg {
                    Some(t) => vec![t.clone()],
                    None => TIMESTAMPS.to_vec(),
                };
                choices.into_iter().map(move |t| {
                    let mut next = prefix.clone();
                    next.push(t);
                    next
                })
            })
            .collect();
    }
    Signature::one_of(
        signatures.into_iter().map(TypeSignature::Exact).collect(),
        Volatility::Immutable,
    )
}

/// Field metadata marking a table's processing-time column (`proc AS
/// PROCTIME()`): ordering by it is ordering by arrival.
const PROCTIME_MARK: &str = "eddy.proctime";

/// `field` marked as a processing-time column.
pub fn mark_proctime(field: Field) -> Field {
    let mut metadata = field.metadata().clone();
    metadata.insert(PROCTIME_MARK.to_string(), "true".to_string());
    field.with_metadata(metadata)
}

/// Whether `field` is a table's processing-time column.
pub fn is_proctime(field: &Field) -> bool {
    field.metadata().contains_key(PROCTIME_MARK)
}

/// Whether `expr` is a call of `PROCTIME()`.
pub fn is_proctime_call(expr: &datafusion::logical_expr::Expr) -> bool {
    matches!(expr, datafusion::logical_expr::Expr::ScalarFunction(f) if f.func.name() == "proctime")
}

/// Registers the functions (and the `variance` alias) with a session.
pub fn register(ctx: &SessionContext) {
    for udf in [
        ScalarUDF::from(Proctime::new()),
        ScalarUDF::from(WallClock::new(WallClockKind::Timestamp)),
        ScalarUDF::from(WallClock::new(WallClockKind::Date)),
        ScalarUDF::from(WallClock::new(WallClockKind::Time)),
        ScalarUDF::from(Mod::new()),
        ScalarUDF::from(ToTimestampLtz::new()),
        ScalarUDF::from(TimestampDiff::new()),
        ScalarUDF::from(TimestampAdd::new()),
        ScalarUDF::from(DateFormat::new()),
        ScalarUDF::from(json::JsonValue::new()),
        ScalarUDF::from(json::JsonExists::new()),
        ScalarUDF::from(json::JsonQuery::new()),
        ScalarUDF::from(json::JsonArrayElements::new()),
        ScalarUDF::from(json_build::JsonBuildObject::new()),
        ScalarUDF::from(json_build::JsonBuildArray::new()),
        ScalarUDF::from(json_build::JsonString::new()),
        ScalarUDF::from(json_build::JsonRaw::new()),
        ScalarUDF::from(json_build::IsJson::new()),
        ScalarUDF::from(text::RegexpExtract::new()),
        ScalarUDF::from(text::SplitIndex::new()),
        ScalarUDF::from(types_and_maps::TypeOf::new()),
        ScalarUDF::from(types_and_maps::StrToMap::new()),
    ]
    .into_iter()
    .chain(time_parts::functions())
    .chain(strings::functions())
    {
        ctx.register_udf(udf);
    }
    if let Some(var_samp) = ctx.state().aggregate_functions().get("var_samp").cloned() {
        ctx.register_udaf(var_samp.as_ref().clone().with_aliases(["variance"]));
    }
}

/// The arguments as arrays of one length.
fn arrays(args: &ScalarFunctionArgs) -> Result<Vec<ArrayRef>> {
    let rows = args.number_rows;
    args.args.iter().map(|a| a.to_array(rows)).collect()
}

/// A constant string argument (a unit, a pattern).
fn constant_text(value: &ColumnarValue, function: &str, what: &str) -> Result<String> {
    match value {
        ColumnarValue::Scalar(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
        ) => Ok(s.clone()),
        _ => exec_err!("{function}: the {what} must be a constant"),
    }
}

fn millis(array: &ArrayRef) -> Result<Int64Array> {
    let ms = cast(array, &TS_MS)?;
    let ms = cast(&ms, &DataType::Int64)?;
    Ok(ms
        .as_any()
        .downcast_ref::<Int64Array>()
        .cloned()
        .unwrap_or_else(|| Int64Array::from(Vec::<i64>::new())))
}

macro_rules! signature_impl {
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }
        fn signature(&self) -> &Signature {
            &self.signature
        }
    };
}

/// `PROCTIME()`: the wall clock, read once per batch.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Proctime {
    signature: Signature,
}

impl Proctime {
    fn new() -> Self {
        Self {
            signature: Signature::exact(vec![], Volatility::Volatile),
        }
    }
}

impl ScalarUDFImpl for Proctime {
    signature_impl!("proctime");

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(TS_MS)
    }

    /// The column is marked a processing-time attribute (see
    /// [`is_proctime`]), through views and aliases.
    fn return_field_from_args(
        &self,
        _args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> Result<datafusion::arrow::datatypes::FieldRef> {
        Ok(Arc::new(mark_proctime(Field::new(
            self.name(),
            TS_MS,
            true,
        ))))
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or_default();
        Ok(ColumnarValue::Scalar(ScalarValue::TimestampMillisecond(
            Some(now),
            None,
        )))
    }
}

/// What a wall-clock function gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum WallClockKind {
    /// `now()` (`current_timestamp`): a UTC timestamp, nanoseconds.
    Timestamp,
    /// `current_date` (`today`).
    Date,
    /// `current_time`, nanoseconds since midnight UTC.
    Time,
}

/// `NOW()` and its kin read per batch. DataFusion's own fold into a
/// constant when the query is planned (right for a batch query, wrong for
/// a stream that runs for days: `WHERE ts > NOW() - INTERVAL '1' HOUR`
/// would compare with the hour the job started). These replace them under
/// the same names and types, volatile, so nothing folds them.
#[derive(Debug, PartialEq, Eq, Hash)]
struct WallClock {
    kind: WallClockKind,
    aliases: Vec<String>,
    signature: Signature,
}

impl WallClock {
    fn new(kind: WallClockKind) -> Self {
        let aliases: &[&str] = match kind {
            WallClockKind::Timestamp => &["current_timestamp"],
            WallClockKind::Date => &["today"],
            WallClockKind::Time => &[],
        };
        Self {
            kind,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            signature: Signature::exact(vec![], Volatility::Volatile),
        }
    }
}

impl ScalarUDFImpl for WallClock {
    fn name(&self) -> &str {
        match self.kind {
            WallClockKind::Timestamp => "now",
            WallClockKind::Date => "current_date",
            WallClockKind::Time => "current_time",
        }
    }

    fn aliases(&self) -> &[String] {
        &self.aliases
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(match self.kind {
            WallClockKind::Timestamp => {
                DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into()))
            }
            WallClockKind::Date => DataType::Date32,
            WallClockKind::Time => DataType::Time64(TimeUnit::Nanosecond),
        })
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let now = chrono::Utc::now();
        let nanos = now.timestamp_nanos_opt();
        Ok(ColumnarValue::Scalar(match self.kind {
            WallClockKind::Timestamp => {
                ScalarValue::TimestampNanosecond(nanos, Some("+00:00".into()))
            }
            WallClockKind::Date => ScalarValue::Date32(Some(
                now.date_naive().num_days_from_ce() - UNIX_EPOCH_DAYS_FROM_CE,
            )),
            WallClockKind::Time => ScalarValue::Time64Nanosecond(Some(
                i64::from(now.num_seconds_from_midnight()) * 1_000_000_000
                    + i64::from(now.nanosecond() % 1_000_000_000),
            )),
        }))
    }
}

/// Days from 0001-01-01 to 1970-01-01 (chrono's common era count).
const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;

#[derive(Debug, PartialEq, Eq, Hash)]
struct Mod {
    signature: Signature,
}

impl Mod {
    fn new() -> Self {
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::Int64, DataType::Int64]),
                    TypeSignature::Exact(vec![DataType::Float64, DataType::Float64]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for Mod {
    signature_impl!("mod");

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(if args.iter().all(|t| t == &DataType::Int64) {
            DataType::Int64
        } else {
            DataType::Float64
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let a = arrays(&args)?;
        let out: ArrayRef = match (a[0].data_type(), a[1].data_type()) {
            (DataType::Int64, DataType::Int64) => {
                let x = a[0].as_any().downcast_ref::<Int64Array>();
                let y = a[1].as_any().downcast_ref::<Int64Array>();
                let (Some(x), Some(y)) = (x, y) else {
                    return exec_err!("mod: BIGINT arguments expected");
                };
                Arc::new(
                    x.iter()
                        .zip(y.iter())
                        .map(|(x, y)| match (x, y) {
                            (Some(x), Some(y)) if y != 0 => Some(x.wrapping_rem(y)),
                            _ => None,
                        })
                        .collect::<Int64Array>(),
                )
            }
            _ => {
                let x = cast(&a[0], &DataType::Float64)?;
                let y = cast(&a[1], &DataType::Float64)?;
                let x = x.as_any().downcast_ref::<Float64Array>();
                let y = y.as_any().downcast_ref::<Float64Array>();
                let (Some(x), Some(y)) = (x, y) else {
                    return exec_err!("mod: numeric arguments expected");
                };
                Arc::new(
                    x.iter()
                        .zip(y.iter())
                        .map(|(x, y)| match (x, y) {
                            (Some(x), Some(y)) if y != 0.0 => Some(x % y),
                            _ => None,
                        })
                        .collect::<Float64Array>(),
                )
            }
        };
        Ok(ColumnarValue::Array(out))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ToTimestampLtz {
    signature: Signature,
}

impl ToTimestampLtz {
    fn new() -> Self {
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::Int64]),
                    TypeSignature::Exact(vec![DataType::Int64, DataType::Int64]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for ToTimestampLtz {
    signature_impl!("to_timestamp_ltz");

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(TS_MS)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let scale = match args.args.get(1) {
            None => 1000,
            Some(ColumnarValue::Scalar(ScalarValue::Int64(Some(0)))) => 1000,
            Some(ColumnarValue::Scalar(ScalarValue::Int64(Some(3)))) => 1,
            Some(_) => {
                return exec_err!(
                    "to_timestamp_ltz: the precision must be 0 (seconds) or 3 (milliseconds)"
                )
            }
        };
        let a = arrays(&args)?;
        let n = cast(&a[0], &DataType::Int64)?;
        let Some(n) = n.as_any().downcast_ref::<Int64Array>() else {
            return exec_err!("to_timestamp_ltz: a number of seconds or milliseconds expected");
        };
        // Milliseconds are the timestamp's own values (the buffer shared,
        // not copied); seconds are scaled, an overflow becoming null.
        let out: TimestampMillisecondArray = if scale == 1 {
            n.reinterpret_cast::<TimestampMillisecondType>()
        } else {
            n.unary_opt(|v| v.checked_mul(scale))
        };
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

/// Flink's time units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Millis(i64),
    Months(i32),
}

fn unit(text: &str, function: &str) -> Result<Unit> {
    Ok(match text.trim().to_ascii_uppercase().trim_start_matches("SQL_TSI_") {
        "MICROSECOND" | "MILLISECOND" => Unit::Millis(1),
        "SECOND" => Unit::Millis(1_000),
        "MINUTE" => Unit::Millis(60_000),
        "HOUR" => Unit::Millis(3_600_000),
        "DAY" => Unit::Millis(86_400_000),
        "WEEK" => Unit::Millis(7 * 86_400_000),
        "MONTH" => Unit::Months(1),
        "QUARTER" => Unit::Months(3),
        "YEAR" => Unit::Months(12),
        other => {
            return plan_err!(
                "{function}: unknown unit '{other}' (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER, YEAR)"
            )
        }
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampDiff {
    signature: Signature,
}

impl TimestampDiff {
    fn new() -> Self {
        Self {
            signature: with_timestamps(&[Some(DataType::Utf8), None, None]),
        }
    }
}

/// Whole months from `a` to `b` (ms), truncated toward zero.
fn months_between(a: i64, b: i64) -> Option<i64> {
    let (x, y) = (timestamp_ms_to_datetime(a)?, timestamp_ms_to_datetime(b)?);
    let index = |t: &NaiveDateTime| t.year() as i64 * 12 + t.month0() as i64;
    let mut months = index(&y) - index(&x);
    // Not a whole month yet while the day and time of month lag behind.
    let rest = |t: &NaiveDateTime| (t.day(), t.num_seconds_from_midnight(), t.nanosecond());
    if months > 0 && rest(&y) < rest(&x) {
        months -= 1;
    } else if months < 0 && rest(&y) > rest(&x) {
        months += 1;
    }
    Some(months)
}

impl ScalarUDFImpl for TimestampDiff {
    signature_impl!("timestampdiff");

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let unit = unit(
            &constant_text(&args.args[0], "timestampdiff", "unit")?,
            "timestampdiff",
        )?;
        let a = arrays(&args)?;
        let (x, y) = (millis(&a[1])?, millis(&a[2])?);
        let out: Int64Array = x
            .iter()
            .zip(y.iter())
            .map(|(x, y)| {
                let (x, y) = (x?, y?);
                match unit {
                    Unit::Millis(size) => Some(y.checked_sub(x)? / size),
                    Unit::Months(size) => Some(months_between(x, y)? / size as i64),
                }
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampAdd {
    signature: Signature,
}

impl TimestampAdd {
    fn new() -> Self {
        Self {
            signature: with_timestamps(&[Some(DataType::Utf8), Some(DataType::Int64), None]),
        }
    }
}

fn add(unit: Unit, n: i64, t: i64) -> Option<i64> {
    match unit {
        Unit::Millis(size) => t.checked_add(n.checked_mul(size)?),
        Unit::Months(size) => {
            let months = n.checked_mul(size as i64)?;
            let at = timestamp_ms_to_datetime(t)?;
            let moved = if months >= 0 {
                at.checked_add_months(Months::new(u32::try_from(months).ok()?))?
            } else {
                at.checked_sub_months(Months::new(u32::try_from(-months).ok()?))?
            };
            Some(moved.and_utc().timestamp_millis())
        }
    }
}

impl ScalarUDFImpl for TimestampAdd {
    signature_impl!("timestampadd");

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(TS_MS)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let unit = unit(
            &constant_text(&args.args[0], "timestampadd", "unit")?,
            "timestampadd",
        )?;
        let a = arrays(&args)?;
        let n = cast(&a[1], &DataType::Int64)?;
        let Some(n) = n.as_any().downcast_ref::<Int64Array>() else {
            return exec_err!("timestampadd: a whole number of units expected");
        };
        let t = millis(&a[2])?;
        let out: TimestampMillisecondArray = n
            .iter()
            .zip(t.iter())
            .map(|(n, t)| add(unit, n?, t?))
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct DateFormat {
    signature: Signature,
}

impl DateFormat {
    fn new() -> Self {
        Self {
            signature: with_timestamps(&[None, Some(DataType::Utf8)]),
        }
    }
}

/// A Java `SimpleDateFormat` pattern as a chrono one (`yyyy-MM-dd HH:mm:ss`
/// -> `%Y-%m-%d %H:%M:%S`; text in single quotes is literal). A pattern
/// that already holds `%` is taken as chrono's.
pub fn java_pattern(pattern: &str) -> String {
    if pattern.contains('%') {
        return pattern.to_string();
    }
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // Quoted literal; '' is a quote.
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '\'' {
                out.push(chars[j]);
                j += 1;
            }
            if j == i + 1 {
                out.push('\'');
            }
            i = j + 1;
            continue;
        }
        let mut run = 1;
        while i + run < chars.len() && chars[i + run] == c {
            run += 1;
        }
        let field = match (c, run) {
            ('y', 2) => "%y",
            ('y', _) => "%Y",
            ('M', 1 | 2) => "%m",
            ('M', 3) => "%b",
            ('M', _) => "%B",
            ('d', _) => "%d",
            ('H', _) => "%H",
            ('h', _) => "%I",
            ('m', _) => "%M",
            ('s', _) => "%S",
            ('S', _) => "%3f",
            ('a', _) => "%p",
            ('E', 1..=3) => "%a",
            ('E', _) => "%A",
            ('D', _) => "%j",
            ('Z' | 'X', _) => "%z",
            _ => {
                for _ in 0..run {
                    if c == '%' {
                        out.push_str("%%");
                    } else {
                        out.push(c);
                    }
                }
                i += run;
                continue;
            }
        };
        out.push_str(field);
        i += run;
    }
    out
}

impl ScalarUDFImpl for DateFormat {
    signature_impl!("date_format");

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let pattern = java_pattern(&constant_text(&args.args[1], "date_format", "pattern")?);
        let a = arrays(&args)?;
        let t = millis(&a[0])?;
        let mut out = StringBuilder::with_capacity(t.len(), t.len() * 20);
        let mut text = String::new();
        for value in t.iter() {
            match value.and_then(timestamp_ms_to_datetime) {
                Some(at) => {
                    text.clear();
                    use std::fmt::Write as _;
                    if write!(text, "{}", at.format(&pattern)).is_err() {
                        return exec_err!("date_format: '{pattern}' is not a valid pattern");
                    }
                    out.append_value(&text);
                }
                None => out.append_null(),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_700_000_000_000; // 2023-11-14T22:13:20Z

    #[test]
    fn to_timestamp_ltz_keeps_milliseconds_and_scales_seconds() {
        use datafusion::arrow::array::Int64Array;
        use datafusion::common::config::ConfigOptions;
        let call = |precision: i64| {
            let input = Int64Array::from(vec![Some(T), None, Some(i64::MAX), Some(-1)]);
            let args = ScalarFunctionArgs {
                args: vec![
                    ColumnarValue::Array(Arc::new(input)),
                    ColumnarValue::Scalar(ScalarValue::Int64(Some(precision))),
                ],
                arg_fields: vec![
                    Arc::new(Field::new("n", DataType::Int64, true)),
                    Arc::new(Field::new("p", DataType::Int64, false)),
                ],
                number_rows: 4,
                return_field: Arc::new(Field::new("t", TS_MS, true)),
                config_options: Arc::new(ConfigOptions::default()),
            };
            let ColumnarValue::Array(out) = ToTimestampLtz::new().invoke_with_args(args).unwrap()
            else {
                panic!("an array expected");
            };
            assert_eq!(out.data_type(), &TS_MS);
            let out = out
                .as_any()
                .downcast_ref::<TimestampMillisecondArray>()
                .unwrap()
                .clone();
            out.iter().collect::<Vec<_>>()
        };
        assert_eq!(call(3), [Some(T), None, Some(i64::MAX), Some(-1)]);
        // Seconds scaled to milliseconds; one out of range becomes null.
        assert_eq!(call(0), [Some(T * 1000), None, None, Some(-1000)]);
    }

    #[test]
    fn java_patterns_become_chrono_ones() {
        assert_eq!(java_pattern("yyyy-MM-dd HH:mm:ss"), "%Y-%m-%d %H:%M:%S");
        assert_eq!(
            java_pattern("yyyy-MM-dd'T'HH:mm:ss.SSS"),
            "%Y-%m-%dT%H:%M:%S.%3f"
        );
        assert_eq!(java_pattern("%Y"), "%Y");
        let at = timestamp_ms_to_datetime(T + 7).unwrap();
        assert_eq!(
            at.format(&java_pattern("yyyy-MM-dd HH:mm:ss.SSS"))
                .to_string(),
            "2023-11-14 22:13:20.007"
        );
    }

    #[test]
    fn differences_truncate_toward_zero_and_months_follow_the_calendar() {
        let day = 86_400_000;
        assert_eq!(months_between(T, T + 29 * day), Some(0), "Nov 14 -> Dec 13");
        assert_eq!(months_between(T, T + 30 * day), Some(1), "Nov 14 -> Dec 14");
        assert_eq!(
            months_between(T, T + 30 * day - 1),
            Some(0),
            "a millisecond short"
        );
        assert_eq!(months_between(T + 31 * day, T), Some(-1));
        assert_eq!(
            add(Unit::Months(1), 1, T),
            Some(T + 30 * day),
            "Nov 14 + 1 month = Dec 14"
        );
        assert_eq!(add(Unit::Millis(60_000), -5, T), Some(T - 300_000));
        assert_eq!(
            add(Unit::Months(12), 1, T).map(|t| t - T),
            Some(366 * day),
            "2024 is a leap year"
        );
    }

    #[test]
    fn units_are_flinks() {
        assert_eq!(unit("second", "f").unwrap(), Unit::Millis(1000));
        assert_eq!(unit("SQL_TSI_DAY", "f").unwrap(), Unit::Millis(86_400_000));
        assert!(unit("fortnight", "f").is_err());
    }
}

#[cfg(test)]
mod wall_clock_tests {
    use super::*;

    /// The wall-clock functions survive optimization as calls (DataFusion's
    /// own would be folded into the planning instant), and read the clock
    /// when run.
    #[test]
    fn the_wall_clock_is_read_when_rows_are_processed_not_when_planned() {
        use futures::executor::block_on;
        let ctx = SessionContext::new();
        register(&ctx);
        let sql = "SELECT now() AS a, current_timestamp AS b, current_date AS c, current_time AS d";
        let frame = block_on(ctx.sql(sql)).unwrap();
        let optimized = frame.clone().into_optimized_plan().unwrap();
        let shown = optimized.display_indent().to_string();
        for call in ["now()", "current_date()", "current_time()"] {
            assert!(shown.contains(call), "{call} was folded: {shown}");
        }
        let before = chrono::Utc::now().timestamp_nanos_opt().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let batches = block_on(frame.collect()).unwrap();
        let column = cast(batches[0].column(0), &DataType::Int64).unwrap();
        let read = column
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .value(0);
        assert!(read > before, "read at run time, after planning");
        assert_eq!(batches[0].schema().field(2).data_type(), &DataType::Date32);
    }
}
