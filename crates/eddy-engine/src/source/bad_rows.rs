//! Bad input rows: what a source does with them and how they become the
//! `bad_rows(table)` stream.
//!
//! In: [`BadRow`]s reported by a connector while it reads (not JSON, a
//! value of the wrong type, a line over the size limit) or by the source
//! runner while it judges a batch (NULL event time, a computed column that
//! cannot be evaluated, a timestamp too far ahead). Out: per the table's
//! [`BadRowPolicy`], a batch in [`bad_row_schema`] for the source's
//! [`BAD_PORT`](crate::operator::BAD_PORT), a count, or the job's error.
//!
//! A bad row never reaches the watermark tracker, so the rows after it are
//! judged exactly as if it had never come.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Int64Builder, RecordBatch, StringBuilder, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::error::Result;

/// What a source does with a bad row (table option `bad_rows`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BadRowPolicy {
    /// Counted, and sent to `bad_rows(table)` (the default).
    #[default]
    DeadLetter,
    /// Counted, and nothing more.
    Drop,
    /// The job fails with the row's location and reason.
    Fail,
}

impl BadRowPolicy {
    /// The option values, as users write them.
    pub const NAMES: [&'static str; 3] = ["dead_letter", "drop", "fail"];
}

impl std::str::FromStr for BadRowPolicy {
    type Err = super::choice::NotOneOf;

    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "dead_letter" => Ok(Self::DeadLetter),
            "drop" => Ok(Self::Drop),
            "fail" => Ok(Self::Fail),
            other => Err(super::choice::NotOneOf {
                given: other.to_string(),
                choices: &Self::NAMES,
            }),
        }
    }
}

/// One malformed input row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow {
    /// The file read (`stdin`, or the connector's name when it has no file).
    pub path: String,
    /// The row's line number, when the input has lines.
    pub line: Option<u64>,
    /// Byte offset of the row's start, or the connector's sequence number.
    pub offset: Option<u64>,
    /// The column at fault, when one is.
    pub column: Option<String>,
    /// Why the row is bad.
    pub reason: String,
    /// The row as it came (lossy UTF-8; a row over the size limit is cut).
    pub raw: String,
}

impl BadRow {
    /// `path:line`, `path@offset` or `path`: where the row came from.
    pub fn location(&self) -> String {
        match (self.line, self.offset) {
            (Some(line), _) => format!("{}:{line}", self.path),
            (None, Some(offset)) => format!("{}@{offset}", self.path),
            (None, None) => self.path.clone(),
        }
    }

    /// The reason, naming the column when there is one.
    pub fn describe(&self) -> String {
        match &self.column {
            Some(column) if !self.reason.contains(column.as_str()) => {
                format!("column '{column}': {}", self.reason)
            }
            _ => self.reason.clone(),
        }
    }
}

/// Where the rows of a batch came from, so that a row found bad after
/// decoding (its event time, say) is reported with its position and text.
pub trait RowOrigins: Send {
    /// Location and raw text of row `row` of the batch, without a reason.
    fn origin(&self, row: usize) -> BadRow;
}

/// The most bytes of a row kept in `raw`.
pub const RAW_LIMIT: usize = 64 * 1024;

/// The schema of `bad_rows(table)`.
pub fn bad_row_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("source", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("line", DataType::Int64, true),
        Field::new("offset", DataType::Int64, true),
        Field::new("column_name", DataType::Utf8, true),
        Field::new("reason", DataType::Utf8, false),
        Field::new("raw", DataType::Utf8, false),
        Field::new(
            "arrival_time",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
    ]))
}

/// Index of `arrival_time` in [`bad_row_schema`]: the bad stream's event
/// time (its watermark is the latest arrival).
pub const ARRIVAL_TIME_COLUMN: usize = 7;

/// Builds a batch of [`bad_row_schema`] for `rows` of source `source`,
/// every row arriving at `arrival_ms`.
pub fn bad_rows_batch(source: &str, rows: &[BadRow], arrival_ms: i64) -> Result<RecordBatch> {
    let n = rows.len();
    let mut sources = StringBuilder::with_capacity(n, n * source.len());
    let mut paths = StringBuilder::new();
    let mut lines = Int64Builder::with_capacity(n);
    let mut offsets = Int64Builder::with_capacity(n);
    let mut columns = StringBuilder::new();
    let mut reasons = StringBuilder::new();
    let mut raws = StringBuilder::new();
    for row in rows {
        sources.append_value(source);
        paths.append_value(&row.path);
        lines.append_option(row.line.map(|l| l as i64));
        offsets.append_option(row.offset.map(|o| o as i64));
        columns.append_option(row.column.as_deref());
        reasons.append_value(&row.reason);
        raws.append_value(&row.raw);
    }
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(sources.finish()),
        Arc::new(paths.finish()),
        Arc::new(lines.finish()),
        Arc::new(offsets.finish()),
        Arc::new(columns.finish()),
        Arc::new(reasons.finish()),
        Arc::new(raws.finish()),
        Arc::new(TimestampMillisecondArray::from(vec![arrival_ms; n])),
    ];
    Ok(RecordBatch::try_new(bad_row_schema(), arrays)?)
}

/// Keeps at most [`RAW_LIMIT`] bytes of `bytes` as text (invalid UTF-8
/// replaced), noting how much was cut.
pub fn raw_text(bytes: &[u8]) -> String {
    if bytes.len() <= RAW_LIMIT {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut text = String::from_utf8_lossy(&bytes[..RAW_LIMIT]).into_owned();
    text.push_str(&format!("… (cut at {RAW_LIMIT} bytes)"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_name_the_valid_values() {
        assert_eq!(
            "Dead_Letter".parse::<BadRowPolicy>(),
            Ok(BadRowPolicy::DeadLetter)
        );
        assert_eq!("fail".parse::<BadRowPolicy>(), Ok(BadRowPolicy::Fail));
        let err = "skip".parse::<BadRowPolicy>().unwrap_err();
        assert_eq!(err.given, "skip");
        assert!(
            err.to_string()
                .contains("'skip' is not one of 'dead_letter', 'drop', 'fail'"),
            "{err}"
        );
    }

    #[test]
    fn a_batch_holds_every_field() {
        let row = BadRow {
            path: "in.ndjson".into(),
            line: Some(3),
            offset: Some(40),
            column: Some("amount".into()),
            reason: "not a number".into(),
            raw: "{\"amount\":\"x\"}".into(),
        };
        assert_eq!(row.location(), "in.ndjson:3");
        assert_eq!(row.describe(), "column 'amount': not a number");
        let batch = bad_rows_batch("orders", &[row], 1_000).unwrap();
        assert_eq!(batch.num_rows(), 1);
        assert_eq!(batch.schema(), bad_row_schema());
    }

    #[test]
    fn raw_text_keeps_a_prefix_of_a_long_row() {
        let long = "é".repeat(RAW_LIMIT);
        let text = raw_text(long.as_bytes());
        assert!(text.ends_with(&format!("(cut at {RAW_LIMIT} bytes)")));
        assert!(text.len() < RAW_LIMIT + 40);
        assert_eq!(raw_text(b"{\"a\":1}"), "{\"a\":1}");
    }
}
