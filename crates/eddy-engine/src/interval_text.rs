//! Interval literals as SQL writes them, for what `eddy explain` prints.
//!
//! DataFusion names an unaliased expression after its arguments, and an
//! interval argument's name is the Rust debug text of its value:
//! `tumble(IntervalMonthDayNano("IntervalMonthDayNano { months: 0, days: 0,
//! nanoseconds: 10000000000 }"))`. In: such a text. Out: the same text with
//! each of those values written as the SQL literal it came from
//! (`tumble(INTERVAL '10' SECOND)`).
//!
//! Only what a reader sees changes: a checkpoint's fingerprint keeps the
//! names as DataFusion gives them (`JobGraph::fingerprint`), so state
//! written before keeps its place.
//!
//! ```
//! use eddy_engine::interval_text::readable_intervals;
//! assert_eq!(
//!     readable_intervals(r#"hop(IntervalMonthDayNano("IntervalMonthDayNano { months: 0, days: 0, nanoseconds: 1000000000 }"),IntervalMonthDayNano("IntervalMonthDayNano { months: 0, days: 0, nanoseconds: 300000000000 }"))"#),
//!     "hop(INTERVAL '1' SECOND,INTERVAL '5' MINUTE)"
//! );
//! ```

/// `text` with every DataFusion interval debug rendering (month-day-nano,
/// day-time, year-month) replaced by its SQL literal; anything it does not
/// recognise is left as it is.
pub fn readable_intervals(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("Interval") {
        out.push_str(&rest[..at]);
        let candidate = &rest[at..];
        match literal_at(candidate) {
            Some((literal, used)) => {
                out.push_str(&literal);
                rest = &candidate[used..];
            }
            None => {
                out.push_str("Interval");
                rest = &candidate["Interval".len()..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The SQL literal for the debug rendering `text` starts with, and how many
/// bytes of `text` it spans.
fn literal_at(text: &str) -> Option<(String, usize)> {
    // `IntervalMonthDayNano("IntervalMonthDayNano { months: 0, ... }")`
    let open = text.find("(\"")?;
    let kind = &text[..open];
    if !kind.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let body_start = open + 2;
    let close = text[body_start..].find("\")")? + body_start;
    let body = &text[body_start..close];
    let fields = body
        .strip_prefix(kind)?
        .trim()
        .strip_prefix('{')?
        .strip_suffix('}')?;
    let mut months = 0i64;
    let mut days = 0i64;
    let mut nanos = 0i128;
    for field in fields.split(',') {
        let (name, value) = field.split_once(':')?;
        let value: i128 = value.trim().parse().ok()?;
        match name.trim() {
            "months" => months += i64::try_from(value).ok()?,
            "years" => months += i64::try_from(value).ok()?.checked_mul(12)?,
            "days" => days += i64::try_from(value).ok()?,
            "nanoseconds" => nanos += value,
            "milliseconds" => nanos += value.checked_mul(1_000_000)?,
            _ => return None,
        }
    }
    Some((sql_literal(months, days, nanos), close + 2))
}

/// `INTERVAL 'n' UNIT` for one part, `INTERVAL '...'` with every part
/// named for several (DataFusion reads both).
fn sql_literal(months: i64, days: i64, nanos: i128) -> String {
    const UNITS: [(&str, i128); 6] = [
        ("HOUR", 3_600_000_000_000),
        ("MINUTE", 60_000_000_000),
        ("SECOND", 1_000_000_000),
        ("MILLISECOND", 1_000_000),
        ("MICROSECOND", 1_000),
        ("NANOSECOND", 1),
    ];
    let mut parts: Vec<(i128, &str)> = Vec::new();
    if months != 0 {
        parts.push((i128::from(months), "MONTH"));
    }
    if days != 0 {
        parts.push((i128::from(days), "DAY"));
    }
    if nanos != 0 {
        let (unit, size) = UNITS
            .iter()
            .find(|(_, size)| nanos % size == 0)
            .copied()
            .unwrap_or(("NANOSECOND", 1));
        parts.push((nanos / size, unit));
    }
    match parts.as_slice() {
        [] => "INTERVAL '0' SECOND".to_string(),
        [(n, unit)] => format!("INTERVAL '{n}' {unit}"),
        _ => {
            let text: Vec<String> = parts
                .iter()
                .map(|(n, unit)| format!("{n} {unit}"))
                .collect();
            format!("INTERVAL '{}'", text.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::readable_intervals;

    #[test]
    fn each_kind_of_interval_reads_as_its_sql_literal() {
        let mdn = |m, d, n| {
            format!(
                "IntervalMonthDayNano(\"IntervalMonthDayNano {{ months: {m}, days: {d}, nanoseconds: {n} }}\")"
            )
        };
        let cases = [
            (mdn(0, 0, 10_000_000_000i64), "INTERVAL '10' SECOND"),
            (mdn(0, 0, 7_200_000_000_000), "INTERVAL '2' HOUR"),
            (mdn(0, 0, 1_500_000_000), "INTERVAL '1500' MILLISECOND"),
            (mdn(0, 1, 0), "INTERVAL '1' DAY"),
            (mdn(2, 0, 0), "INTERVAL '2' MONTH"),
            (
                mdn(1, 2, 60_000_000_000),
                "INTERVAL '1 MONTH 2 DAY 1 MINUTE'",
            ),
            (mdn(0, 0, 0), "INTERVAL '0' SECOND"),
            (mdn(0, 0, -5_000_000_000), "INTERVAL '-5' SECOND"),
            (
                "IntervalDayTime(\"IntervalDayTime { days: 0, milliseconds: 250 }\")".into(),
                "INTERVAL '250' MILLISECOND",
            ),
        ];
        for (debug, sql) in cases {
            assert_eq!(
                readable_intervals(&format!("tumble({debug})@0")),
                format!("tumble({sql})@0")
            );
        }
    }

    #[test]
    fn other_text_is_left_as_it_is() {
        for text in [
            "",
            "IntervalJoin on [k@0]",
            "Interval(\"not a debug text\")",
            "IntervalMonthDayNano(\"IntervalMonthDayNano { weeks: 1 }\")",
            "IntervalMonthDayNano(\"IntervalMonthDayNano { months: 0",
            "naïve Interval",
        ] {
            assert_eq!(readable_intervals(text), text);
        }
    }
}
