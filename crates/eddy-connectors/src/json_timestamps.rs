//! TIMESTAMP values in JSON lines, written digit by digit.
//!
//! In: TIMESTAMP columns (any unit; no zone, or UTC). Out: quoted RFC 3339
//! UTC strings, exactly what chrono's `%Y-%m-%dT%H:%M:%S%.fZ` (no zone) and
//! `%Y-%m-%dT%H:%M:%S%.f%:z` (UTC) print: the fraction left out when it is
//! zero, else 3, 6 or 9 digits, as few as hold it
//! (`2023-11-14T22:13:48.057Z`).
//!
//! arrow-json formats every timestamp through chrono's `strftime`, which
//! parses the format string again for each value: on a result of many
//! short rows with a window start in each, that was a third of a job's
//! time. [`TimestampEncoders`] plugs into arrow-json's writer and leaves
//! every other column to it; a value outside years 0-9999, and a column in
//! another zone, still go through chrono.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::TimestampMillisecondArray;
//! use datafusion::arrow::json::{writer::LineDelimited, WriterBuilder};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_connectors::json_timestamps::TimestampEncoders;
//!
//! let t = Arc::new(TimestampMillisecondArray::from(vec![1_700_000_028_057])) as _;
//! let batch = RecordBatch::try_from_iter([("t", t)]).unwrap();
//! let mut out = Vec::new();
//! let mut writer = WriterBuilder::new()
//!     .with_encoder_factory(Arc::new(TimestampEncoders))
//!     .build::<_, LineDelimited>(&mut out);
//! writer.write(&batch).unwrap();
//! writer.finish().unwrap();
//! assert_eq!(out, b"{\"t\":\"2023-11-14T22:13:48.057Z\"}\n");
//! ```

use std::fmt::Write as _;

use datafusion::arrow::array::{Array, ArrowPrimitiveType, AsArray, PrimitiveArray};
use datafusion::arrow::datatypes::{
    DataType, FieldRef, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::json::writer::{Encoder, EncoderFactory, EncoderOptions, NullableEncoder};

/// Encodes no-zone and UTC TIMESTAMP columns for arrow-json's writer.
#[derive(Debug, Default)]
pub struct TimestampEncoders;

/// How a column's zone is written after the time.
#[derive(Debug, Clone, Copy)]
enum Zone {
    /// No zone: `Z`.
    None,
    /// UTC: `+00:00`.
    Utc,
}

impl Zone {
    fn suffix(self) -> &'static [u8] {
        match self {
            Zone::None => b"Z",
            Zone::Utc => b"+00:00",
        }
    }
}

struct TimestampEncoder<'a, T: ArrowPrimitiveType<Native = i64>> {
    array: &'a PrimitiveArray<T>,
    /// Units per second.
    per_second: i64,
    zone: Zone,
}

impl EncoderFactory for TimestampEncoders {
    fn make_default_encoder<'a>(
        &self,
        _field: &'a FieldRef,
        array: &'a dyn Array,
        _options: &'a EncoderOptions,
    ) -> Result<Option<NullableEncoder<'a>>, ArrowError> {
        let DataType::Timestamp(unit, zone) = array.data_type() else {
            return Ok(None);
        };
        let zone = match zone.as_deref() {
            None => Zone::None,
            Some("UTC" | "+00:00" | "Z") => Zone::Utc,
            Some(_) => return Ok(None),
        };
        fn boxed<'a, T: ArrowPrimitiveType<Native = i64>>(
            array: &'a dyn Array,
            per_second: i64,
            zone: Zone,
        ) -> NullableEncoder<'a> {
            let array = array.as_primitive::<T>();
            let encoder = TimestampEncoder {
                array,
                per_second,
                zone,
            };
            NullableEncoder::new(Box::new(encoder), array.nulls().cloned())
        }
        Ok(Some(match unit {
            TimeUnit::Second => boxed::<TimestampSecondType>(array, 1, zone),
            TimeUnit::Millisecond => boxed::<TimestampMillisecondType>(array, 1_000, zone),
            TimeUnit::Microsecond => boxed::<TimestampMicrosecondType>(array, 1_000_000, zone),
            TimeUnit::Nanosecond => boxed::<TimestampNanosecondType>(array, 1_000_000_000, zone),
        }))
    }
}

impl<T: ArrowPrimitiveType<Native = i64>> Encoder for TimestampEncoder<'_, T> {
    fn encode(&mut self, idx: usize, out: &mut Vec<u8>) {
        let value = self.array.value(idx);
        let seconds = value.div_euclid(self.per_second);
        let nanos = (value.rem_euclid(self.per_second) * (1_000_000_000 / self.per_second)) as u32;
        out.push(b'"');
        write_timestamp(seconds, nanos, self.zone, out);
        out.push(b'"');
    }
}

/// Days since 1970-01-01 as (year, month, day): Howard Hinnant's
/// `civil_from_days`.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn two_digits(value: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&[b'0' + (value / 10) as u8, b'0' + (value % 10) as u8]);
}

fn digits(mut value: u32, width: usize, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + width, b'0');
    for slot in out[start..].iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// Writes `seconds` (since the epoch, UTC) and `nanos` as chrono's
/// `%Y-%m-%dT%H:%M:%S%.f` followed by the zone's suffix.
fn write_timestamp(seconds: i64, nanos: u32, zone: Zone, out: &mut Vec<u8>) {
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    if !(0..=9999).contains(&year) {
        // chrono signs years outside 0-9999; let it write those.
        if let Some(time) = chrono::DateTime::from_timestamp(seconds, nanos) {
            let mut text = String::new();
            let _ = write!(text, "{}", time.naive_utc().format("%Y-%m-%dT%H:%M:%S%.f"));
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(zone.suffix());
        }
        return;
    }
    let of_day = seconds.rem_euclid(86_400) as u32;
    digits(year as u32, 4, out);
    out.push(b'-');
    two_digits(month, out);
    out.push(b'-');
    two_digits(day, out);
    out.push(b'T');
    two_digits(of_day / 3600, out);
    out.push(b':');
    two_digits(of_day / 60 % 60, out);
    out.push(b':');
    two_digits(of_day % 60, out);
    if nanos != 0 {
        out.push(b'.');
        if nanos.is_multiple_of(1_000_000) {
            digits(nanos / 1_000_000, 3, out);
        } else if nanos.is_multiple_of(1_000) {
            digits(nanos / 1_000, 6, out);
        } else {
            digits(nanos, 9, out);
        }
    }
    out.extend_from_slice(zone.suffix());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chrono_text(seconds: i64, nanos: u32, zone: &str) -> String {
        let time = chrono::DateTime::from_timestamp(seconds, nanos).unwrap();
        format!("{}{zone}", time.naive_utc().format("%Y-%m-%dT%H:%M:%S%.f"))
    }

    #[test]
    fn writes_what_chrono_writes() {
        let mut seconds = vec![
            0,
            -1,
            1_700_000_028,
            951_782_400, // 2000-02-29
            4_107_542_400,
            -62_135_596_800, // 0001-01-01
            -62_167_219_200, // 0000-01-01
            253_402_300_799, // 9999-12-31T23:59:59
            253_402_300_800, // 10000-01-01: chrono's own text
            -62_167_219_201, // year -1
        ];
        // Every day of four years around a leap year, at varying times.
        seconds.extend((0..1461).map(|d| 946_684_800 + d * 86_400 + d * 37 % 86_400));
        for s in seconds {
            for nanos in [0, 57_000_000, 57_100_000, 123_456_000, 123_456_789, 1] {
                for (zone, suffix) in [(Zone::None, "Z"), (Zone::Utc, "+00:00")] {
                    let mut out = Vec::new();
                    write_timestamp(s, nanos, zone, &mut out);
                    assert_eq!(
                        String::from_utf8(out).unwrap(),
                        chrono_text(s, nanos, suffix),
                        "{s} s {nanos} ns"
                    );
                }
            }
        }
    }

    #[test]
    fn every_unit_and_negative_values() {
        use datafusion::arrow::array::{
            TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
            TimestampSecondArray,
        };
        use datafusion::arrow::datatypes::{Field, Schema};
        use datafusion::arrow::json::writer::LineDelimited;
        use datafusion::arrow::json::WriterBuilder;
        use datafusion::arrow::record_batch::RecordBatch;
        use std::sync::Arc;

        let columns: Vec<Arc<dyn Array>> = vec![
            Arc::new(TimestampSecondArray::from(vec![Some(-1), None, Some(1)])),
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(-1),
                None,
                Some(1_700_000_028_057),
            ])),
            Arc::new(TimestampMicrosecondArray::from(vec![
                Some(-1),
                None,
                Some(1),
            ])),
            Arc::new(
                TimestampNanosecondArray::from(vec![Some(-1), None, Some(1)]).with_timezone("UTC"),
            ),
        ];
        let fields: Vec<Field> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| Field::new(format!("t{i}"), c.data_type().clone(), true))
            .collect();
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
        let encode = |factory: bool| {
            let mut out = Vec::new();
            let mut builder = WriterBuilder::new()
                .with_explicit_nulls(true)
                .with_timestamp_format("%Y-%m-%dT%H:%M:%S%.fZ".to_string())
                .with_timestamp_tz_format("%Y-%m-%dT%H:%M:%S%.f%:z".to_string());
            if factory {
                builder = builder.with_encoder_factory(Arc::new(TimestampEncoders));
            }
            let mut writer = builder.build::<_, LineDelimited>(&mut out);
            writer.write(&batch).unwrap();
            writer.finish().unwrap();
            String::from_utf8(out).unwrap()
        };
        let ours = encode(true);
        assert_eq!(ours, encode(false));
        assert!(
            ours.starts_with(r#"{"t0":"1969-12-31T23:59:59Z","t1":"1969-12-31T23:59:59.999Z","t2":"1969-12-31T23:59:59.999999Z","t3":"1969-12-31T23:59:59.999999999+00:00"}"#),
            "{ours}"
        );
    }
}
