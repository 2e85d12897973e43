//! Rows in PostgreSQL's text form, collected and turned into Arrow columns
//! of a table's declared types, a column at a time.
//!
//! In: rows of text values (from the snapshot's queries, which cast each
//! column to `text`, and from the replication stream, which sends text),
//! each with its row kind. Out: a batch of the declared physical columns
//! and the row-kind column, and the rows a value of which does not fit its
//! column's type (with the column and the value), which the reader reports
//! as bad rows.
//!
//! Values convert with Arrow's casts from text, which read PostgreSQL's
//! output forms of integers, `numeric` (into DECIMAL, DOUBLE or STRING),
//! floats (`NaN`, `Infinity`), booleans (`t`, `f`), dates, times and
//! timestamps (the sessions run with `TimeZone = UTC` and `DateStyle =
//! ISO`, so `timestamptz` reads `2024-01-31 09:00:00+00`). Two forms are
//! read here: `bytea` in hex (`\x0a0b`) into BYTES, and one-dimensional
//! arrays (`{1,2,NULL,"a b"}`) into ARRAY<T>. `json`, `jsonb`, `uuid`,
//! `text` and anything else read into STRING as they print.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use eddy_connectors::postgres::text_columns::TextRows;
//! use eddy_engine::changelog::RowKind;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("id", DataType::Int64, false),
//!     Field::new("tags", DataType::new_list(DataType::Int32, true), true),
//!     Field::new("_row_kind", DataType::Int8, false),
//! ]));
//! let mut rows = TextRows::new(schema);
//! rows.push(RowKind::Insert, [Some(&b"1"[..]), Some(&b"{1,NULL,3}"[..])]);
//! rows.push(RowKind::Insert, [Some(&b"x"[..]), None]);
//! let (batch, bad) = rows.finish().unwrap();
//! assert_eq!(batch.num_rows(), 1);
//! assert_eq!(bad.len(), 1);
//! assert_eq!(bad[0].column, "id");
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryBuilder, BooleanArray, Int8Array, ListArray, RecordBatch, StringArray,
    StringBuilder,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use datafusion::arrow::compute::{filter_record_batch, kernels::zip::zip};
use datafusion::arrow::datatypes::{DataType, Field, SchemaRef, TimeUnit};
use datafusion::arrow::error::ArrowError;
use datafusion::scalar::ScalarValue;
use eddy_engine::changelog::RowKind;

use crate::error::{ConnectorError, Result};

/// A value that does not fit its column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadValue {
    /// The row's index among those pushed.
    pub row: usize,
    /// The column's name.
    pub column: String,
    /// The value as PostgreSQL printed it.
    pub text: String,
}

/// Rows being collected. See the module docs.
#[derive(Debug)]
pub struct TextRows {
    /// The physical columns, then the row kind.
    schema: SchemaRef,
    columns: Vec<StringBuilder>,
    kinds: Vec<i8>,
}

impl TextRows {
    /// Collects rows of `schema` (data columns, then the row-kind column).
    pub fn new(schema: SchemaRef) -> Self {
        let width = schema.fields().len().saturating_sub(1);
        Self {
            schema,
            columns: (0..width).map(|_| StringBuilder::new()).collect(),
            kinds: Vec::new(),
        }
    }

    /// Rows collected so far.
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// Adds a row: its values in column order (`None` for NULL; missing
    /// trailing values are NULL).
    pub fn push<'a>(&mut self, kind: RowKind, values: impl IntoIterator<Item = Option<&'a [u8]>>) {
        let mut values = values.into_iter();
        for column in &mut self.columns {
            match values.next().flatten() {
                Some(bytes) => column.append_value(String::from_utf8_lossy(bytes)),
                None => column.append_null(),
            }
        }
        self.kinds.push(kind.byte());
    }

    /// The batch of the rows whose values all fit, and those that do not.
    pub fn finish(&mut self) -> Result<(RecordBatch, Vec<BadValue>)> {
        let kinds = Int8Array::from(std::mem::take(&mut self.kinds));
        let rows = kinds.len();
        let mut bad: Vec<BadValue> = Vec::new();
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.columns.len() + 1);
        for (c, builder) in self.columns.iter_mut().enumerate() {
            let field = self.schema.field(c);
            let texts = builder.finish();
            let array = convert(&texts, field.data_type()).map_err(|e| {
                ConnectorError::bad_option("table-name", format!("column '{}': {e}", field.name()))
            })?;
            for r in 0..rows {
                if texts.is_valid(r) && array.is_null(r) {
                    bad.push(BadValue {
                        row: r,
                        column: field.name().clone(),
                        text: texts.value(r).to_string(),
                    });
                }
            }
            arrays.push(array);
        }
        // A NOT NULL column's NULL: in a delete, a value its key-only image
        // left out (only the key of a delete counts), filled with the type's
        // default; in any other row, a bad row.
        let deletes: Vec<bool> = kinds
            .values()
            .iter()
            .map(|&k| k == RowKind::Delete.byte())
            .collect();
        for (c, array) in arrays.iter_mut().enumerate() {
            let field = self.schema.field(c);
            if field.is_nullable() || array.null_count() == 0 {
                continue;
            }
            for r in 0..rows {
                if array.is_null(r) && !deletes[r] && !bad.iter().any(|b| b.row == r) {
                    bad.push(BadValue {
                        row: r,
                        column: field.name().clone(),
                        text: "NULL".into(),
                    });
                }
            }
            let fill = ScalarValue::new_default(field.data_type())
                .and_then(|v| v.to_scalar())
                .map_err(|e| ConnectorError::bad_option("table-name", e.to_string()))?;
            let present =
                BooleanArray::from((0..rows).map(|r| array.is_valid(r)).collect::<Vec<_>>());
            *array = zip(&present, array, &fill)?;
        }
        arrays.push(Arc::new(kinds));
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)?;
        if bad.is_empty() {
            return Ok((batch, bad));
        }
        bad.sort_by_key(|b| b.row);
        let mut keep = vec![true; rows];
        for b in &bad {
            keep[b.row] = false;
        }
        Ok((filter_record_batch(&batch, &BooleanArray::from(keep))?, bad))
    }
}

/// Text values as an array of `data_type`; a value that does not convert
/// is NULL in the result.
pub(super) fn convert(
    texts: &StringArray,
    data_type: &DataType,
) -> std::result::Result<ArrayRef, ArrowError> {
    let safe = CastOptions {
        safe: true,
        ..Default::default()
    };
    match data_type {
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let mut out = BinaryBuilder::new();
            for text in texts.iter() {
                match text.map(hex_bytea) {
                    Some(Some(bytes)) => out.append_value(bytes),
                    _ => out.append_null(),
                }
            }
            cast_with_options(&out.finish(), data_type, &safe)
        }
        DataType::List(item) => {
            let list = array_literals(texts)?;
            cast_with_options(&list, &DataType::List(item.clone()), &safe)
        }
        DataType::Timestamp(_, _) => {
            let texts: StringArray = texts.iter().map(|t| t.map(timestamp_text)).collect();
            let wide = cast_with_options(
                &texts,
                &DataType::Timestamp(TimeUnit::Microsecond, None),
                &safe,
            )?;
            cast_with_options(&wide, data_type, &safe)
        }
        _ => cast_with_options(texts, data_type, &safe),
    }
}

/// A timestamp as Arrow reads it: PostgreSQL's `+00` zone (a UTC
/// session's `timestamptz`) dropped, the value being UTC already.
fn timestamp_text(text: &str) -> String {
    text.strip_suffix("+00").unwrap_or(text).to_string()
}

/// `bytea`'s hex output form.
fn hex_bytea(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?.as_bytes();
    if hex.len() % 2 != 0 {
        return None;
    }
    let nibble = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    hex.chunks(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

/// One-dimensional array literals as lists of their elements' text.
fn array_literals(texts: &StringArray) -> std::result::Result<ArrayRef, ArrowError> {
    let mut items = StringBuilder::new();
    let mut offsets: Vec<i32> = vec![0];
    let mut valid = Vec::with_capacity(texts.len());
    let mut count = 0i32;
    for text in texts.iter() {
        match text.and_then(array_elements) {
            Some(elements) => {
                for e in elements {
                    match e {
                        Some(v) => items.append_value(v),
                        None => items.append_null(),
                    }
                    count += 1;
                }
                valid.push(true);
            }
            None => valid.push(false),
        }
        offsets.push(count);
    }
    let field = Arc::new(Field::new("item", DataType::Utf8, true));
    let list = ListArray::try_new(
        field,
        OffsetBuffer::new(offsets.into()),
        Arc::new(items.finish()),
        Some(valid.into()),
    )?;
    Ok(Arc::new(list))
}

/// The elements of `{a,"b c",NULL}`; `None` for anything else (a
/// multi-dimensional array, a malformed literal).
fn array_elements(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    if inner.is_empty() {
        return Some(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        let element = if chars.peek() == Some(&'"') {
            chars.next();
            let mut value = String::new();
            loop {
                match chars.next()? {
                    '\\' => value.push(chars.next()?),
                    '"' => break,
                    c => value.push(c),
                }
            }
            Some(value)
        } else {
            let mut value = String::new();
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                if c == '{' || c == '"' {
                    return None;
                }
                value.push(c);
                chars.next();
            }
            (!value.eq_ignore_ascii_case("NULL")).then_some(value)
        };
        out.push(element);
        match chars.next() {
            None => return Some(out),
            Some(',') => continue,
            Some(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{
        BinaryArray, Date32Array, Decimal128Array, Float64Array, Int32Array,
        TimestampMillisecondArray,
    };
    use datafusion::arrow::datatypes::Schema;

    fn one(text: &str, data_type: DataType) -> ArrayRef {
        convert(&StringArray::from(vec![Some(text)]), &data_type).unwrap()
    }

    #[test]
    fn postgresql_output_forms_read_into_their_types() {
        let ts = one(
            "2024-01-31 09:00:00.25+00",
            DataType::Timestamp(TimeUnit::Millisecond, None),
        );
        let ts = ts
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .unwrap();
        assert_eq!(ts.value(0), 1_706_691_600_250);
        let plain = one(
            "2024-01-31 09:00:00",
            DataType::Timestamp(TimeUnit::Millisecond, None),
        );
        assert_eq!(
            plain
                .as_any()
                .downcast_ref::<TimestampMillisecondArray>()
                .unwrap()
                .value(0),
            1_706_691_600_000
        );
        let b = one("t", DataType::Boolean);
        assert!(b.as_any().downcast_ref::<BooleanArray>().unwrap().value(0));
        let d = one("2024-02-29", DataType::Date32);
        assert_eq!(
            d.as_any().downcast_ref::<Date32Array>().unwrap().value(0),
            19782
        );
        let n = one("12.50", DataType::Decimal128(10, 2));
        assert_eq!(
            n.as_any()
                .downcast_ref::<Decimal128Array>()
                .unwrap()
                .value(0),
            1250
        );
        let f = one("-Infinity", DataType::Float64);
        assert_eq!(
            f.as_any().downcast_ref::<Float64Array>().unwrap().value(0),
            f64::NEG_INFINITY
        );
        let bytes = one("\\x00ff", DataType::Binary);
        assert_eq!(
            bytes
                .as_any()
                .downcast_ref::<BinaryArray>()
                .unwrap()
                .value(0),
            &[0, 255]
        );
    }

    #[test]
    fn arrays_read_with_quotes_escapes_and_nulls() {
        assert_eq!(
            array_elements(r#"{a,"b c",NULL,"x\"y"}"#),
            Some(vec![
                Some("a".into()),
                Some("b c".into()),
                None,
                Some("x\"y".into())
            ])
        );
        assert_eq!(array_elements("{}"), Some(vec![]));
        assert_eq!(array_elements("{{1,2},{3,4}}"), None);
        let list = one("{1,NULL,3}", DataType::new_list(DataType::Int32, true));
        let list = list.as_any().downcast_ref::<ListArray>().unwrap();
        let items = list.value(0);
        let items = items.as_any().downcast_ref::<Int32Array>().unwrap();
        assert_eq!(
            items.iter().collect::<Vec<_>>(),
            vec![Some(1), None, Some(3)]
        );
    }

    #[test]
    fn a_value_that_does_not_fit_is_a_bad_row_and_key_only_deletes_fill_not_null_columns() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("amount", DataType::Decimal128(10, 2), false),
            Field::new("_row_kind", DataType::Int8, false),
        ]));
        let mut rows = TextRows::new(schema);
        rows.push(RowKind::Insert, [Some(&b"1"[..]), Some(&b"NaN"[..])]);
        rows.push(RowKind::Delete, [Some(&b"2"[..]), None]);
        let (batch, bad) = rows.finish().unwrap();
        assert_eq!(
            bad,
            vec![BadValue {
                row: 0,
                column: "amount".into(),
                text: "NaN".into()
            }]
        );
        assert_eq!(batch.num_rows(), 1);
        assert_eq!(batch.column(1).null_count(), 0);
        assert!(rows.is_empty());
    }
}
