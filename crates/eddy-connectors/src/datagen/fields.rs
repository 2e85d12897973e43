//! How the `datagen` connector makes one column: each physical column's
//! `fields.NAME.*` options, as Flink's datagen reads them, become a
//! [`FieldGen`] that builds that column for any range of row numbers.
//!
//! In: the column's name and type, and the table's options. Out: a
//! [`FieldGen`], or an error naming the option or type eddy cannot
//! generate. A value depends only on its row number (and the seed), so a
//! resumed source makes the same rows it would have made.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, StringBuilder, TimestampMillisecondArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field};

use crate::error::{ConnectorError, Result};

/// The options one column reads, after `fields.NAME.`.
pub const FIELD_OPTIONS: [&str; 8] = [
    "kind",
    "start",
    "end",
    "min",
    "max",
    "length",
    "max-past",
    "null-rate",
];

/// One column's values by row number.
#[derive(Debug, Clone)]
pub struct FieldGen {
    data_type: DataType,
    values: Values,
    /// The share of rows (0 to 1) that are NULL (random columns only).
    null_rate: f64,
    /// Distinguishes this column's random draws from every other column's.
    stream: u64,
}

#[derive(Debug, Clone)]
enum Values {
    /// `start + row`, as the column's type (numbers, or their digits as text).
    Sequence {
        start: i64,
    },
    /// Whole numbers drawn evenly from `min..=max`.
    RandomInt {
        min: i64,
        max: i64,
    },
    /// Doubles drawn evenly from `min..max`.
    RandomFloat {
        min: f64,
        max: f64,
    },
    /// `length` letters and digits.
    RandomString {
        length: usize,
    },
    RandomBool,
    /// Epoch milliseconds drawn evenly from `now - max_past ..= now`, `now`
    /// taken when the source is opened (as Flink's datagen does).
    RandomTimestamp {
        now_ms: i64,
        max_past_ms: i64,
    },
}

/// A column's options (`fields.NAME.OPTION`), by option.
pub type FieldOptions<'a> = BTreeMap<&'a str, &'a str>;

impl FieldGen {
    /// The generator of `field` (the `column`-th physical column) from its
    /// options; the rows a sequence has, if it is one.
    pub fn new(
        field: &Field,
        column: usize,
        options: &FieldOptions<'_>,
        seed: u64,
    ) -> Result<(Self, Option<u64>)> {
        let kind = options
            .get("kind")
            .map(|k| k.trim().to_ascii_lowercase())
            .unwrap_or_else(|| "random".into());
        let col = ColumnOptions {
            name: field.name(),
            options,
            kind: &kind,
        };
        let data_type = field.data_type().clone();
        let (values, rows) = match kind.as_str() {
            "sequence" => {
                let (start, rows) = sequence(&col, &data_type)?;
                (Values::Sequence { start }, Some(rows))
            }
            "random" => (random(&col, &data_type)?, None),
            other => {
                return Err(col.bad(
                    "kind",
                    format!("'{other}' is not a kind (sequence or random)"),
                ))
            }
        };
        let null_rate = col.number("null-rate")?.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&null_rate) {
            return Err(col.bad(
                "null-rate",
                format!("{null_rate} is not a share from 0 to 1"),
            ));
        }
        let field_gen = Self {
            data_type,
            values,
            null_rate,
            stream: seed ^ (column as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        };
        Ok((field_gen, rows))
    }

    /// The column's values for row numbers `rows`.
    pub fn column(&self, rows: Range<u64>) -> Result<ArrayRef> {
        let nulls = self.null_rate > 0.0;
        let is_null =
            |row: u64| nulls && unit(draw(self.stream ^ NULL_STREAM, row)) < self.null_rate;
        let made: ArrayRef = match &self.values {
            Values::Sequence { start } => {
                let first = start.wrapping_add(rows.start as i64);
                let values = (0..rows.end - rows.start).map(|i| first.wrapping_add(i as i64));
                match self.data_type {
                    DataType::Utf8 | DataType::LargeUtf8 => {
                        use std::fmt::Write;
                        let mut out = StringBuilder::new();
                        let mut digits = String::new();
                        for v in values {
                            digits.clear();
                            let _ = write!(digits, "{v}");
                            out.append_value(&digits);
                        }
                        Arc::new(out.finish())
                    }
                    _ => Arc::new(Int64Array::from_iter_values(values)),
                }
            }
            Values::RandomInt { min, max } => {
                let span = (*max as i128 - *min as i128 + 1) as u128;
                Arc::new(Int64Array::from_iter(rows.map(|row| {
                    let offset = ((draw(self.stream, row) as u128 * span) >> 64) as i128;
                    (!is_null(row)).then(|| (*min as i128 + offset) as i64)
                })))
            }
            Values::RandomFloat { min, max } => {
                Arc::new(Float64Array::from_iter(rows.map(|row| {
                    (!is_null(row)).then(|| min + unit(draw(self.stream, row)) * (max - min))
                })))
            }
            Values::RandomBool => {
                Arc::new(BooleanArray::from_iter(rows.map(|row| {
                    (!is_null(row)).then(|| draw(self.stream, row) >> 63 == 1)
                })))
            }
            Values::RandomTimestamp {
                now_ms,
                max_past_ms,
            } => {
                let span = *max_past_ms as u128 + 1;
                Arc::new(TimestampMillisecondArray::from_iter(rows.map(|row| {
                    let back = ((draw(self.stream, row) as u128 * span) >> 64) as i64;
                    (!is_null(row)).then(|| now_ms - back)
                })))
            }
            Values::RandomString { length } => {
                const ALPHABET: &[u8; 62] =
                    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
                let mut out = StringBuilder::with_capacity(
                    (rows.end - rows.start) as usize,
                    (rows.end - rows.start) as usize * length,
                );
                let mut text = vec![0u8; *length];
                for row in rows {
                    if is_null(row) {
                        out.append_null();
                        continue;
                    }
                    // Ten letters from each 64-bit draw (6 bits each).
                    for (chunk, letters) in text.chunks_mut(10).enumerate() {
                        let mut bits = draw(self.stream.wrapping_add(chunk as u64), row);
                        for letter in letters {
                            *letter = ALPHABET[(bits & 63) as usize % 62];
                            bits >>= 6;
                        }
                    }
                    // The alphabet is ASCII, so the bytes are UTF-8.
                    out.append_value(std::str::from_utf8(&text).unwrap_or_default());
                }
                Arc::new(out.finish())
            }
        };
        if made.data_type() == &self.data_type {
            return Ok(made);
        }
        Ok(cast(&made, &self.data_type)?)
    }
}

/// The draws deciding a random column's NULLs, apart from its values'.
const NULL_STREAM: u64 = 0xD1B5_4A32_D192_ED03;

/// One column's options, read with errors that name the option in full
/// (`fields.NAME.OPTION`).
struct ColumnOptions<'a> {
    name: &'a str,
    options: &'a FieldOptions<'a>,
    kind: &'a str,
}

impl ColumnOptions<'_> {
    fn bad(&self, option: &str, reason: impl Into<String>) -> ConnectorError {
        ConnectorError::bad_option(&format!("fields.{}.{option}", self.name), reason)
    }

    fn number(&self, option: &str) -> Result<Option<f64>> {
        self.parsed(option)
    }

    fn whole(&self, option: &str) -> Result<Option<i64>> {
        self.parsed(option)
    }

    fn parsed<T: std::str::FromStr>(&self, option: &str) -> Result<Option<T>> {
        self.options
            .get(option)
            .map(|v| crate::options::parse_number(v, &format!("fields.{}.{option}", self.name)))
            .transpose()
    }

    /// Refuses an option the column's kind and type do not read.
    fn only(&self, allowed: &[&str]) -> Result<()> {
        match self.options.keys().find(|o| !allowed.contains(o)) {
            Some(o) => Err(self.bad(
                o,
                format!("a {} column takes {}", self.kind, allowed[1..].join(", ")),
            )),
            None => Ok(()),
        }
    }

    fn cannot(&self, data_type: &DataType) -> ConnectorError {
        self.bad(
            "kind",
            format!(
                "datagen cannot make {} values of column '{}' ({data_type})",
                self.kind, self.name
            ),
        )
    }
}

fn is_integral(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
    )
}

/// A sequence column's first value and its number of rows.
fn sequence(col: &ColumnOptions<'_>, data_type: &DataType) -> Result<(i64, u64)> {
    col.only(&["kind", "start", "end"])?;
    let integral = is_integral(data_type);
    if !integral
        && !matches!(
            data_type,
            DataType::Float32 | DataType::Float64 | DataType::Utf8 | DataType::LargeUtf8
        )
    {
        return Err(col.cannot(data_type));
    }
    let needed = |o: &str| {
        col.whole(o)?
            .ok_or_else(|| col.bad(o, "a sequence needs its start and end"))
    };
    let (start, end) = (needed("start")?, needed("end")?);
    if end < start {
        return Err(col.bad(
            "end",
            format!("the sequence ends ({end}) before it starts ({start})"),
        ));
    }
    if integral {
        let (lo, hi) = int_range(data_type);
        if start < lo || end > hi {
            return Err(col.bad(
                "end",
                format!(
                    "{start}..={end} does not fit column '{}' ({data_type})",
                    col.name
                ),
            ));
        }
    }
    let rows = (end as i128 - start as i128 + 1).min(u64::MAX as i128) as u64;
    Ok((start, rows))
}

/// A random column's values, by its type.
fn random(col: &ColumnOptions<'_>, data_type: &DataType) -> Result<Values> {
    Ok(match data_type {
        t if is_integral(t) => {
            col.only(&["kind", "min", "max", "null-rate"])?;
            let (lo, hi) = int_range(t);
            let (min, max) = (
                col.whole("min")?.unwrap_or(lo),
                col.whole("max")?.unwrap_or(hi),
            );
            if min > max || min < lo || max > hi {
                return Err(col.bad(
                    "max",
                    format!(
                        "{min}..={max} is empty or does not fit column '{}' ({data_type})",
                        col.name
                    ),
                ));
            }
            Values::RandomInt { min, max }
        }
        DataType::Float32 | DataType::Float64 => {
            col.only(&["kind", "min", "max", "null-rate"])?;
            let (min, max) = (
                col.number("min")?.unwrap_or(0.0),
                col.number("max")?.unwrap_or(1.0),
            );
            if min > max || !min.is_finite() || !max.is_finite() {
                return Err(col.bad(
                    "max",
                    format!("{min}..{max} is not a range of finite numbers"),
                ));
            }
            Values::RandomFloat { min, max }
        }
        DataType::Utf8 | DataType::LargeUtf8 => {
            col.only(&["kind", "length", "null-rate"])?;
            let length = col.whole("length")?.unwrap_or(100);
            if !(0..=1 << 20).contains(&length) {
                return Err(col.bad(
                    "length",
                    format!("{length} is not a length from 0 to 1048576"),
                ));
            }
            Values::RandomString {
                length: length as usize,
            }
        }
        DataType::Boolean => {
            col.only(&["kind", "null-rate"])?;
            Values::RandomBool
        }
        DataType::Timestamp(_, _) => {
            col.only(&["kind", "max-past", "null-rate"])?;
            let max_past_ms = match col.options.get("max-past") {
                None => 0,
                Some(v) => eddy_engine::time::parse_duration(v)
                    .map_err(|e| col.bad("max-past", e.to_string()))?
                    .as_millis()
                    .min(i64::MAX as u128) as i64,
            };
            let now_ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or_default();
            Values::RandomTimestamp {
                now_ms,
                max_past_ms,
            }
        }
        _ => return Err(col.cannot(data_type)),
    })
}

/// A well-mixed 64-bit value for row `row` of stream `stream` (SplitMix64's
/// finalizer over their combination): the same inputs, the same value.
fn draw(stream: u64, row: u64) -> u64 {
    let mut z = stream ^ row.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A draw as a number in `0..1`.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The whole numbers a column of integer type `t` holds.
fn int_range(t: &DataType) -> (i64, i64) {
    match t {
        DataType::Int8 => (i8::MIN.into(), i8::MAX.into()),
        DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DataType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN, i64::MAX),
    }
}
