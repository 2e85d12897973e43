//! Event time: timestamps in epoch milliseconds, watermarks, durations, and
//! the conversion of Arrow timestamp columns into millisecond arrays.
//!
//! All of eddy's time arithmetic is done in `i64` epoch milliseconds. The two
//! sentinels [`WATERMARK_MIN`] ("nothing seen yet") and [`WATERMARK_MAX`]
//! ("end of input", +infinity) bracket every real watermark.

use std::time::Duration;

use datafusion::arrow::array::{Array, ArrayRef, Int64Array, StructArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, TimeUnit};

use crate::error::{EngineError, Result};

/// Epoch milliseconds.
pub type Timestamp = i64;

/// The watermark before any row has been seen.
pub const WATERMARK_MIN: Timestamp = i64::MIN;
/// The watermark at the end of a bounded input: every window may fire.
pub const WATERMARK_MAX: Timestamp = i64::MAX;

/// Converts an event-time column (any Arrow timestamp unit, or Int64 epoch
/// milliseconds) into an `Int64Array` of epoch milliseconds. Sub-millisecond
/// precision is truncated towards negative infinity.
///
/// A window struct `{start, end}` (a window aggregate's output) stands for its
/// window time, `end - 1 ms`: the event time of a window's result, as in Flink.
pub fn to_epoch_millis(column: &ArrayRef) -> Result<Int64Array> {
    if let Some(window) = column.as_any().downcast_ref::<StructArray>() {
        let end = window.column_by_name("end").ok_or_else(|| {
            EngineError::operator("event time", "a struct event time needs an 'end' field")
        })?;
        let end = to_epoch_millis(end)?;
        let window_time: Int64Array = end.iter().map(|v| v.map(|v| v.saturating_sub(1))).collect();
        return Ok(match window.nulls() {
            Some(nulls) => Int64Array::new(window_time.values().clone(), Some(nulls.clone())),
            None => window_time,
        });
    }
    let millis = match column.data_type() {
        DataType::Int64 => column.clone(),
        DataType::Timestamp(TimeUnit::Millisecond, None) => cast(column, &DataType::Int64)?,
        DataType::Timestamp(_, _) => {
            let as_ms = cast(column, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
            cast(&as_ms, &DataType::Int64)?
        }
        other => {
            return Err(EngineError::operator(
                "event time",
                format!("event-time column must be a TIMESTAMP or BIGINT, found {other}"),
            ))
        }
    };
    millis
        .as_any()
        .downcast_ref::<Int64Array>()
        .cloned()
        .ok_or_else(|| EngineError::operator("event time", "cast to Int64 failed"))
}

/// Why a text is not a duration ([`parse_duration`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// No number where one was expected.
    #[error("'{text}' is not a duration (expected e.g. '100ms', '2s', '5 seconds')")]
    NotADuration { text: String },
    /// A unit eddy does not know.
    #[error("unknown time unit '{unit}' in '{text}' (use ms, s, minutes, hours)")]
    Unit { unit: String, text: String },
    /// A negative or infinite amount.
    #[error("duration '{text}' must be a finite, non-negative number")]
    Negative { text: String },
}

/// Parses a duration written the way users write them in options and flags:
/// `100ms`, `2s`, `5 seconds`, `1 minute`, `250 millis`, `1h`. A bare number
/// is milliseconds.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, DurationError> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let value: f64 = number.parse().map_err(|_| DurationError::NotADuration {
        text: text.to_string(),
    })?;
    let unit_ms = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
        "h" | "hour" | "hours" => 3_600_000.0,
        "d" | "day" | "days" => 86_400_000.0,
        other => {
            return Err(DurationError::Unit {
                unit: other.to_string(),
                text: text.to_string(),
            })
        }
    };
    if value < 0.0 || !value.is_finite() {
        return Err(DurationError::Negative {
            text: text.to_string(),
        });
    }
    Ok(Duration::from_millis((value * unit_ms).round() as u64))
}

/// Formats a watermark for humans (`-inf`, `+inf`, or epoch millis).
pub fn format_watermark(watermark: Timestamp) -> String {
    match watermark {
        WATERMARK_MIN => "-inf".to_string(),
        WATERMARK_MAX => "+inf".to_string(),
        ms => ms.to_string(),
    }
}

/// Formats an event time as ISO 8601 UTC with milliseconds
/// (`2023-01-01T00:00:00.000Z`), or epoch millis when out of range.
pub fn format_event_time(ms: Timestamp) -> String {
    match datafusion::arrow::temporal_conversions::timestamp_ms_to_datetime(ms) {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => format!("{ms} ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("100ms").unwrap(), Duration::from_millis(100));
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("5 seconds").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("1 minute").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("1500").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("soon").is_err());
        assert_eq!(
            parse_duration("5 fortnights"),
            Err(DurationError::Unit {
                unit: "fortnights".into(),
                text: "5 fortnights".into()
            })
        );
    }
}
