//! Flink's functions that take a part of a date or time: `YEAR`,
//! `QUARTER`, `MONTH`, `WEEK` (ISO 8601), `DAYOFYEAR`, `DAYOFMONTH`,
//! `DAYOFWEEK` (1 = Sunday ... 7 = Saturday), `HOUR`, `MINUTE`, `SECOND`.
//!
//! In: a TIMESTAMP or DATE column (UTC). Out: a BIGINT column; NULL where
//! the argument is NULL.

use std::sync::Arc;

use chrono::{Datelike, NaiveDateTime, Timelike};
use datafusion::arrow::array::Int64Array;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::temporal_conversions::timestamp_ms_to_datetime;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::{arrays, millis};

/// Which part a function takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Part {
    Year,
    Quarter,
    Month,
    Week,
    DayOfYear,
    DayOfMonth,
    DayOfWeek,
    Hour,
    Minute,
    Second,
}

const PARTS: [(Part, &str); 10] = [
    (Part::Year, "year"),
    (Part::Quarter, "quarter"),
    (Part::Month, "month"),
    (Part::Week, "week"),
    (Part::DayOfYear, "dayofyear"),
    (Part::DayOfMonth, "dayofmonth"),
    (Part::DayOfWeek, "dayofweek"),
    (Part::Hour, "hour"),
    (Part::Minute, "minute"),
    (Part::Second, "second"),
];

impl Part {
    fn of(self, t: NaiveDateTime) -> i64 {
        let v = match self {
            Part::Year => t.year() as u32,
            Part::Quarter => t.month0() / 3 + 1,
            Part::Month => t.month(),
            Part::Week => t.iso_week().week(),
            Part::DayOfYear => t.ordinal(),
            Part::DayOfMonth => t.day(),
            Part::DayOfWeek => t.weekday().number_from_sunday(),
            Part::Hour => t.hour(),
            Part::Minute => t.minute(),
            Part::Second => t.second(),
        };
        i64::from(v)
    }
}

/// Every part function, to register.
pub(super) fn functions() -> Vec<ScalarUDF> {
    PARTS
        .iter()
        .map(|&(part, name)| {
            ScalarUDF::from(TimePart {
                part,
                name,
                signature: Signature::any(1, Volatility::Immutable),
            })
        })
        .collect()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimePart {
    part: Part,
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for TimePart {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let a = arrays(&args)?;
        let ms = millis(&a[0])?;
        let out: Int64Array = ms
            .iter()
            .map(|t| {
                t.and_then(timestamp_ms_to_datetime)
                    .map(|t| self.part.of(t))
            })
            .collect();
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_of_a_tuesday_in_november() {
        // 2023-11-14T22:13:20Z, a Tuesday, day 318, ISO week 46.
        let t = timestamp_ms_to_datetime(1_700_000_000_000).unwrap();
        let got: Vec<i64> = PARTS.iter().map(|(p, _)| p.of(t)).collect();
        assert_eq!(got, vec![2023, 4, 11, 46, 318, 14, 3, 22, 13, 20]);
        // 2023-01-01 is a Sunday in ISO week 52 of 2022.
        let new_year = timestamp_ms_to_datetime(1_672_531_200_000).unwrap();
        assert_eq!(Part::DayOfWeek.of(new_year), 1);
        assert_eq!(Part::Week.of(new_year), 52);
        assert_eq!(Part::Quarter.of(new_year), 1);
    }
}
