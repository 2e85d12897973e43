//! A fast decoder for the common NDJSON line: one flat object of scalars.
//!
//! In: a chunk's bytes and its lines. Out: the chunk's rows as one record
//! batch in the table's schema, or `None` when some line is anything but
//! the plain case, and the chunk must go through arrow-json (which then
//! also finds and explains its bad lines).
//!
//! The plain case: an object whose keys have no escapes, each key at most
//! once, holding for each of the table's columns a plain scalar of the
//! column's type (a string without raw control characters, its escapes
//! JSON's own, surrogates paired, for a string column; an integer `-?(0|[1-9][0-9]*)` in range for an integer
//! column; a JSON number for a floating-point column; `true`/`false` for a
//! boolean), `null`, or nothing (a nullable column only). Keys the table
//! does not have are skipped when their value is a scalar. Whatever lies
//! outside this (escaped keys, nested values, numeric strings, a number
//! where a string belongs, two objects on a line) returns `None`: on what this
//! decoder accepts its rows are exactly arrow-json's (numbers parsed by the
//! same `lexical-core`), so which of the two decoded a chunk never shows.
//!
//! Why: arrow-json first writes every line to a tape and then decodes the
//! tape per column, looking each key up by name; for flat lines one pass
//! straight into the column builders, guessing each key's column from the
//! one before, costs about a third of that, and NDJSON decoding is most of
//! what a windowed query over a file spends.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use eddy_connectors::ndjson::flat::FlatDecoder;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("id", DataType::Utf8View, false),
//!     Field::new("amount", DataType::Float64, true),
//! ]));
//! let mut decoder = FlatDecoder::new(&schema).expect("flat columns");
//! let bytes = b"{\"id\":\"a\",\"amount\":1.5}\n{\"amount\":null,\"id\":\"b\"}\n";
//! let batch = decoder.decode(bytes, [0..24, 24..bytes.len()].into_iter()).unwrap();
//! assert_eq!(batch.num_rows(), 2);
//! // Escapes are decoded; a nested value is left to arrow-json.
//! let escaped = decoder.decode(b"{\"id\":\"\\u0041\"}\n", std::iter::once(0..15)).unwrap();
//! assert_eq!(escaped.num_rows(), 1);
//! assert!(decoder.decode(b"{\"id\":[1]}\n", std::iter::once(0..11)).is_none());
//! ```

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Float32Builder, Float64Builder, Int16Builder, Int32Builder,
    Int64Builder, Int8Builder, StringBuilder, StringViewBuilder,
};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;

use crate::swar::{below_mask, byte_mask, word_at, HIGH};

/// One column being built.
enum Column {
    Utf8(StringBuilder),
    Utf8View(StringViewBuilder),
    Int8(Int8Builder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Boolean(BooleanBuilder),
    /// A column no query of the job reads: its values are checked as the
    /// column's type (so the same lines are plain, and the same rows bad),
    /// then dropped; it comes out blank (see [`FlatDecoder::leaving_unread`]).
    Unread {
        data_type: DataType,
        rows: usize,
    },
}

impl Column {
    /// An empty builder for `rows` values of `data_type`, when the decoder
    /// builds that type.
    fn new(data_type: &DataType, rows: usize) -> Option<Self> {
        Some(match data_type {
            DataType::Utf8 => Column::Utf8(StringBuilder::with_capacity(rows, rows * 16)),
            DataType::Utf8View => Column::Utf8View(StringViewBuilder::with_capacity(rows)),
            DataType::Int8 => Column::Int8(Int8Builder::with_capacity(rows)),
            DataType::Int16 => Column::Int16(Int16Builder::with_capacity(rows)),
            DataType::Int32 => Column::Int32(Int32Builder::with_capacity(rows)),
            DataType::Int64 => Column::Int64(Int64Builder::with_capacity(rows)),
            DataType::Float32 => Column::Float32(Float32Builder::with_capacity(rows)),
            DataType::Float64 => Column::Float64(Float64Builder::with_capacity(rows)),
            DataType::Boolean => Column::Boolean(BooleanBuilder::with_capacity(rows)),
            _ => return None,
        })
    }

    fn append_null(&mut self) {
        match self {
            Column::Utf8(b) => b.append_null(),
            Column::Utf8View(b) => b.append_null(),
            Column::Int8(b) => b.append_null(),
            Column::Int16(b) => b.append_null(),
            Column::Int32(b) => b.append_null(),
            Column::Int64(b) => b.append_null(),
            Column::Float32(b) => b.append_null(),
            Column::Float64(b) => b.append_null(),
            Column::Boolean(b) => b.append_null(),
            Column::Unread { rows, .. } => *rows += 1,
        }
    }

    /// The column's array; an unread column's is a slice of `blank`, a
    /// column of blanks kept from batch to batch (made, or made longer,
    /// when it has too few rows).
    fn finish(&mut self, blank: &mut Option<ArrayRef>) -> Option<ArrayRef> {
        Some(match self {
            Column::Utf8(b) => Arc::new(b.finish()),
            Column::Utf8View(b) => Arc::new(b.finish()),
            Column::Int8(b) => Arc::new(b.finish()),
            Column::Int16(b) => Arc::new(b.finish()),
            Column::Int32(b) => Arc::new(b.finish()),
            Column::Int64(b) => Arc::new(b.finish()),
            Column::Float32(b) => Arc::new(b.finish()),
            Column::Float64(b) => Arc::new(b.finish()),
            Column::Boolean(b) => Arc::new(b.finish()),
            Column::Unread { data_type, rows } => {
                let rows = std::mem::take(rows);
                if blank.as_ref().is_none_or(|b| b.len() < rows) {
                    let made = ScalarValue::new_default(data_type)
                        .and_then(|v| v.to_array_of_size(rows.max(BLANK_ROWS)))
                        .ok()?;
                    *blank = Some(made);
                }
                blank.as_ref()?.slice(0, rows)
            }
        })
    }
}

/// Rows a column of blanks is made with at least (a chunk mostly has no
/// more), so it is made once.
const BLANK_ROWS: usize = 8192;

/// A table column as the decoder sees it.
struct FlatField {
    name: Box<[u8]>,
    /// The name followed by its closing quote and a colon: the key as a
    /// line mostly writes it (`name":`), matched in one comparison.
    key: Box<[u8]>,
    data_type: DataType,
    nullable: bool,
    /// Some query reads the column (else its values are checked, not kept).
    read: bool,
}

/// Decodes chunks of flat NDJSON objects into record batches; see the
/// module docs for what it takes and what it leaves to arrow-json.
pub struct FlatDecoder {
    schema: SchemaRef,
    fields: Vec<FlatField>,
    /// Per field, the row (plus one) that last gave it a value.
    filled: Vec<usize>,
    /// Per field, the blanks an unread column's arrays are sliced from.
    blanks: Vec<Option<ArrayRef>>,
}

/// Not the plain case: the chunk goes to arrow-json.
#[derive(Debug)]
struct NotPlain;

type Step<T> = Result<T, NotPlain>;

impl FlatDecoder {
    /// A decoder for `schema`, or `None` when a column has a type it does
    /// not build (anything but strings, signed integers, floating point and
    /// booleans) or is declared `JSON`.
    pub fn new(schema: &SchemaRef) -> Option<Self> {
        let fields = schema
            .fields()
            .iter()
            .map(|f| {
                if eddy_engine::source::is_json_column(f) {
                    return None;
                }
                Some(FlatField {
                    name: f.name().as_bytes().into(),
                    key: [f.name().as_bytes(), b"\":"].concat().into(),
                    data_type: Column::new(f.data_type(), 0).map(|_| f.data_type().clone())?,
                    nullable: f.is_nullable(),
                    read: true,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self {
            schema: schema.clone(),
            filled: vec![0; fields.len()],
            blanks: vec![None; fields.len()],
            fields,
        })
    }

    /// Leaves the values of `columns` (indices into the schema: columns no
    /// query of the job reads) undecoded: each is still checked as its
    /// column's type, so the chunks this decoder takes and the rows that
    /// are bad stay the same, but its column comes out blank (an empty
    /// string, zero or `false` in every row, nulls included). Builders,
    /// copies and the batch's memory go to the columns queries read, as
    /// a batch engine's scan decodes only its projection.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use datafusion::arrow::array::AsArray;
    /// use datafusion::arrow::datatypes::{DataType, Field, Schema, Float64Type};
    /// use eddy_connectors::ndjson::flat::FlatDecoder;
    ///
    /// let schema = Arc::new(Schema::new(vec![
    ///     Field::new("id", DataType::Utf8View, false),
    ///     Field::new("amount", DataType::Float64, true),
    /// ]));
    /// let mut decoder = FlatDecoder::new(&schema).unwrap().leaving_unread(&[0]);
    /// let bytes = b"{\"id\":\"a\",\"amount\":1.5}\n";
    /// let batch = decoder.decode(bytes, std::iter::once(0..24)).unwrap();
    /// assert_eq!(batch.column(0).as_string_view().value(0), "");
    /// assert_eq!(batch.column(1).as_primitive::<Float64Type>().value(0), 1.5);
    /// // A value of the wrong type is still not plain.
    /// assert!(decoder.decode(b"{\"id\":1}\n", std::iter::once(0..8)).is_none());
    /// ```
    pub fn leaving_unread(mut self, columns: &[usize]) -> Self {
        for &c in columns {
            if let Some(field) = self.fields.get_mut(c) {
                // Only where a blank of the type can be made.
                field.read = ScalarValue::new_default(&field.data_type).is_err();
            }
        }
        self
    }

    /// The rows of `lines` (byte ranges of `bytes`, each one line), or
    /// `None` when one of them is not a plain flat object.
    pub fn decode(
        &mut self,
        bytes: &[u8],
        lines: impl ExactSizeIterator<Item = Range<usize>>,
    ) -> Option<RecordBatch> {
        // Valid UTF-8 throughout (as JSON must be), checked once: string
        // values are then slices of `text` between ASCII quotes.
        let text = simdutf8::basic::from_utf8(bytes).ok()?;
        let rows = lines.len();
        // Every field's type was checked buildable when the decoder was made.
        let mut columns = self
            .fields
            .iter()
            .map(|f| match f.read {
                true => Column::new(&f.data_type, rows),
                false => Some(Column::Unread {
                    data_type: f.data_type.clone(),
                    rows: 0,
                }),
            })
            .collect::<Option<Vec<Column>>>()?;
        self.filled.fill(0);
        for (row, range) in lines.enumerate() {
            let line = text.get(range)?;
            self.line(line, row + 1, &mut columns).ok()?;
        }
        let arrays = columns
            .iter_mut()
            .zip(&mut self.blanks)
            .map(|(column, blank)| column.finish(blank))
            .collect::<Option<Vec<_>>>()?;
        RecordBatch::try_new(self.schema.clone(), arrays).ok()
    }

    /// Appends one line's values (`stamp`: the row's number, from 1).
    fn line(&mut self, text: &str, stamp: usize, columns: &mut [Column]) -> Step<()> {
        let line = text.as_bytes();
        let mut at = skip_space(line, 0);
        expect(line, &mut at, b'{')?;
        at = skip_space(line, at);
        let mut guess = 0;
        if line.get(at) == Some(&b'}') {
            at += 1;
        } else {
            loop {
                expect(line, &mut at, b'"')?;
                let field = match self.expected_key(line, &mut at, guess) {
                    Some(f) => Some(f),
                    None => self.field_index(plain_string(line, &mut at)?),
                };
                at = skip_space(line, at);
                expect(line, &mut at, b':')?;
                at = skip_space(line, at);
                match field {
                    Some(f) => {
                        if self.filled[f] == stamp {
                            return Err(NotPlain);
                        }
                        self.filled[f] = stamp;
                        let field = &self.fields[f];
                        value(text, &mut at, &mut columns[f], field.nullable)?;
                        guess = f + 1;
                    }
                    None => skip_scalar(text, &mut at)?,
                }
                at = skip_space(line, at);
                match line.get(at) {
                    Some(b',') => {
                        at = skip_space(line, at + 1);
                    }
                    Some(b'}') => {
                        at += 1;
                        break;
                    }
                    _ => return Err(NotPlain),
                }
            }
        }
        if skip_space(line, at) != line.len() {
            return Err(NotPlain);
        }
        for (f, field) in self.fields.iter().enumerate() {
            if self.filled[f] != stamp {
                if !field.nullable {
                    return Err(NotPlain);
                }
                columns[f].append_null();
            }
        }
        Ok(())
    }

    /// Whether the key starting at `at` (after its opening quote) is the
    /// name of column `guess` (the one after the last key's: lines mostly
    /// keep one order), moving past its closing quote when it is. The
    /// common `name":` is matched at once (leaving `at` on the colon).
    fn expected_key(&self, line: &[u8], at: &mut usize, guess: usize) -> Option<usize> {
        let field = self.fields.get(guess)?;
        let colon = *at + field.key.len();
        if line
            .get(*at..colon)
            .is_some_and(|k| same_bytes(k, &field.key))
        {
            *at = colon - 1;
            return Some(guess);
        }
        let end = *at + field.name.len();
        if same_bytes(line.get(*at..end)?, &field.name) && line.get(end) == Some(&b'"') {
            *at = end + 1;
            Some(guess)
        } else {
            None
        }
    }

    /// The column named `key`.
    fn field_index(&self, key: &[u8]) -> Option<usize> {
        self.fields.iter().position(|f| *f.name == *key)
    }
}

/// Whether two short byte strings are equal: keys are a few bytes, where a
/// call to `memcmp` costs more than comparing in line. From 4 bytes on, the
/// first and the last word (4 or 8 bytes, overlapping) are compared, and
/// the words between for longer ones.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| word_at(s, i);
    let half = |s: &[u8], i: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&s[i..i + 4]);
        u32::from_le_bytes(w)
    };
    match n {
        0..4 => a.iter().zip(b).all(|(x, y)| x == y),
        4..8 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => {
            (0..n - 8).step_by(8).all(|i| word(a, i) == word(b, i))
                && word(a, n - 8) == word(b, n - 8)
        }
    }
}

/// Position of the first byte of `bytes` that ends a plain string (a quote,
/// a backslash or a control character), eight bytes at a time.
fn string_end(bytes: &[u8]) -> Option<usize> {
    let mut offset = 0;
    while let Some(word) = word_at(bytes, offset) {
        let flags = byte_mask(word, b'"') | byte_mask(word, b'\\') | below_mask(word, 0x20);
        if flags != 0 {
            return Some(offset + flags.trailing_zeros() as usize / 8);
        }
        offset += 8;
    }
    bytes[offset..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|p| offset + p)
}

fn skip_space(line: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\r' | b'\n') = line.get(at) {
        at += 1;
    }
    at
}

fn expect(line: &[u8], at: &mut usize, byte: u8) -> Step<()> {
    if line.get(*at) == Some(&byte) {
        *at += 1;
        Ok(())
    } else {
        Err(NotPlain)
    }
}

/// The text of a string whose opening quote is just before `at`, when it
/// has no escapes and no control characters; `at` moves past the closing
/// quote.
fn plain_string<'a>(line: &'a [u8], at: &mut usize) -> Step<&'a [u8]> {
    let start = *at;
    let rest = line.get(start..).ok_or(NotPlain)?;
    let len = string_end(rest).ok_or(NotPlain)?;
    if rest[len] != b'"' {
        return Err(NotPlain);
    }
    *at = start + len + 1;
    Ok(&rest[..len])
}

/// A JSON number as [`number`] reads it: its text, and its value as
/// `mantissa` times ten to `exponent` when that holds it exactly.
struct Number<'a> {
    text: &'a [u8],
    /// No fraction and no exponent.
    integer: bool,
    negative: bool,
    /// The digits, leading zeros left out, as one integer (`exact`: all
    /// of them fit, at most 19).
    mantissa: u64,
    /// The power of ten the mantissa is scaled by (the exponent less the
    /// fraction's digits).
    exponent: i32,
    /// Whether `mantissa` and `exponent` hold the value exactly.
    exact: bool,
}

impl Number<'_> {
    /// The value as a 64-bit integer: `None` when it is out of range (an
    /// integer of more than 19 significant digits is).
    fn as_i64(&self) -> Option<i64> {
        if !self.exact {
            return None;
        }
        if self.negative {
            0i64.checked_sub_unsigned(self.mantissa)
        } else {
            i64::try_from(self.mantissa).ok()
        }
    }

    /// The value as the nearest `f64`, when one IEEE operation on exact
    /// operands gives it (Clinger's fast path: a mantissa of at most 2^53
    /// and a power of ten of at most 22, both exactly representable, so the
    /// one rounding is the correct one, as `lexical-core`'s is).
    fn fast_f64(&self) -> Option<f64> {
        const POWERS: [f64; 23] = [
            1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
            1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
        ];
        if !self.exact || self.mantissa > 1 << 53 {
            return None;
        }
        let power = *POWERS.get(self.exponent.unsigned_abs() as usize)?;
        let magnitude = if self.exponent < 0 {
            self.mantissa as f64 / power
        } else {
            self.mantissa as f64 * power
        };
        Some(if self.negative { -magnitude } else { magnitude })
    }
}

/// The run of ASCII digits that the eight bytes at `i` begin with: how
/// many (0 to 8), how many of them are leading zeros, and their value, the
/// first digit the most significant; `None` when fewer than eight bytes
/// are left. The run is found with a mask, moved to the word's top (so the
/// bytes after it count as leading zeros) and combined pairwise in three
/// multiplications (as simdjson does).
#[inline(always)]
fn digit_run(line: &[u8], i: usize) -> Option<(u32, u32, u64)> {
    let w = word_at(line, i)?;
    // '0'..='9' become 0..=9, and only they do.
    let x = w ^ 0x3030_3030_3030_3030;
    // The high bit of each byte below '0' or above '9'.
    let others = below_mask(w, b'0') | (!below_mask(w, b'9' + 1) & HIGH);
    let n = others.trailing_zeros() / 8;
    if n == 0 {
        return Some((0, 0, 0));
    }
    let zeros = (x.trailing_zeros() / 8).min(n);
    let d = x << (64 - 8 * n);
    let d = d.wrapping_mul(2561) >> 8;
    let d = ((d & 0x00FF_00FF_00FF_00FF).wrapping_mul(6_553_601)) >> 16;
    Some((
        n,
        zeros,
        ((d & 0x0000_FFFF_0000_FFFF).wrapping_mul(42_949_672_960_001)) >> 32,
    ))
}

/// Appends the run of digits at `i` to `mantissa` (a word at a time while
/// eight bytes are left), counting its significant digits (leading zeros
/// of the whole number left out) into `significant`; moves `i` past it and
/// returns how many digits there were.
#[inline(always)]
fn digits(line: &[u8], i: &mut usize, mantissa: &mut u64, significant: &mut u32) -> usize {
    const SCALE: [u64; 9] = [
        1,
        10,
        100,
        1_000,
        10_000,
        100_000,
        1_000_000,
        10_000_000,
        100_000_000,
    ];
    let from = *i;
    while let Some((n, zeros, value)) = digit_run(line, *i) {
        *significant += if *mantissa == 0 { n - zeros } else { n };
        *mantissa = mantissa.wrapping_mul(SCALE[n as usize]).wrapping_add(value);
        *i += n as usize;
        if n < 8 {
            return *i - from;
        }
    }
    while let Some(&d) = line.get(*i).filter(|d| d.is_ascii_digit()) {
        if *mantissa != 0 || d != b'0' {
            *significant += 1;
            *mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
        }
        *i += 1;
    }
    *i - from
}

/// A JSON number starting at `at` (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`),
/// read in one pass: its text and value ([`Number`]).
fn number<'a>(line: &'a [u8], at: &mut usize) -> Step<Number<'a>> {
    let start = *at;
    let mut i = start;
    let mut mantissa = 0u64;
    let mut significant = 0u32;
    let negative = line.get(i) == Some(&b'-');
    if negative {
        i += 1;
    }
    let first = i;
    let whole = digits(line, &mut i, &mut mantissa, &mut significant);
    if whole == 0 || (whole > 1 && line[first] == b'0') {
        return Err(NotPlain);
    }
    let mut integer = true;
    let mut exponent = 0i64;
    if line.get(i) == Some(&b'.') {
        i += 1;
        let fraction = digits(line, &mut i, &mut mantissa, &mut significant);
        if fraction == 0 {
            return Err(NotPlain);
        }
        exponent -= fraction as i64;
        integer = false;
    }
    let mut exact = true;
    if let Some(b'e' | b'E') = line.get(i) {
        i += 1;
        let sign = match line.get(i) {
            Some(b'-') => {
                i += 1;
                -1
            }
            Some(b'+') => {
                i += 1;
                1
            }
            _ => 1,
        };
        let from = i;
        let mut written = 0i64;
        while let Some(&d) = line.get(i).filter(|d| d.is_ascii_digit()) {
            written = (written * 10 + i64::from(d - b'0')).min(1 << 40);
            i += 1;
        }
        if i == from {
            return Err(NotPlain);
        }
        exponent += sign * written;
        integer = false;
    }
    // A number runs up to a delimiter.
    if !matches!(
        line.get(i),
        Some(b',' | b'}' | b' ' | b'\t' | b'\r' | b'\n')
    ) {
        return Err(NotPlain);
    }
    *at = i;
    let exponent = i32::try_from(exponent).unwrap_or_else(|_| {
        exact = false;
        0
    });
    Ok(Number {
        text: &line[start..i],
        integer,
        negative,
        mantissa,
        exponent,
        exact: exact && significant <= 19,
    })
}

/// Whether the literal `word` is at `at` (moving past it when it is).
fn literal(line: &[u8], at: &mut usize, word: &[u8]) -> bool {
    if line.get(*at..*at + word.len()) == Some(word) {
        *at += word.len();
        true
    } else {
        false
    }
}

/// Appends the value at `at` to `column`.
fn value(text: &str, at: &mut usize, column: &mut Column, nullable: bool) -> Step<()> {
    let line = text.as_bytes();
    if line.get(*at) == Some(&b'n') && literal(line, at, b"null") {
        if !nullable {
            return Err(NotPlain);
        }
        column.append_null();
        return Ok(());
    }
    // An integer of more than 19 significant digits is out of range for
    // every integer column; the others are exact in the mantissa.
    fn integer<T: TryFrom<i64>>(line: &[u8], at: &mut usize) -> Step<T> {
        let number = number(line, at)?;
        if !number.integer {
            return Err(NotPlain);
        }
        let value = number.as_i64().ok_or(NotPlain)?;
        T::try_from(value).map_err(|_| NotPlain)
    }
    fn float<T: lexical_core::FromLexical>(line: &[u8], at: &mut usize) -> Step<T> {
        let number = number(line, at)?;
        lexical_core::parse::<T>(number.text).map_err(|_| NotPlain)
    }
    fn float64(line: &[u8], at: &mut usize) -> Step<f64> {
        let number = number(line, at)?;
        match number.fast_f64() {
            Some(value) => Ok(value),
            None => lexical_core::parse::<f64>(number.text).map_err(|_| NotPlain),
        }
    }
    match column {
        Column::Utf8(b) => b.append_value(string(text, at)?.as_ref()),
        Column::Utf8View(b) => b.append_value(string(text, at)?.as_ref()),
        Column::Int8(b) => b.append_value(integer(line, at)?),
        Column::Int16(b) => b.append_value(integer(line, at)?),
        Column::Int32(b) => b.append_value(integer(line, at)?),
        Column::Int64(b) => b.append_value(integer(line, at)?),
        Column::Float32(b) => b.append_value(float(line, at)?),
        Column::Float64(b) => b.append_value(float64(line, at)?),
        Column::Boolean(b) => b.append_value(boolean(line, at)?),
        Column::Unread { data_type, rows } => {
            // The same checks as the column's own, the value dropped.
            match data_type {
                DataType::Utf8 | DataType::Utf8View => {
                    string(text, at)?;
                }
                DataType::Int8 => {
                    integer::<i8>(line, at)?;
                }
                DataType::Int16 => {
                    integer::<i16>(line, at)?;
                }
                DataType::Int32 => {
                    integer::<i32>(line, at)?;
                }
                DataType::Int64 => {
                    integer::<i64>(line, at)?;
                }
                DataType::Float32 => {
                    float::<f32>(line, at)?;
                }
                DataType::Float64 => {
                    float64(line, at)?;
                }
                DataType::Boolean => {
                    boolean(line, at)?;
                }
                _ => return Err(NotPlain),
            }
            *rows += 1;
        }
    }
    Ok(())
}

/// A `true` or `false` at `at`.
fn boolean(line: &[u8], at: &mut usize) -> Step<bool> {
    if literal(line, at, b"true") {
        Ok(true)
    } else if literal(line, at, b"false") {
        Ok(false)
    } else {
        Err(NotPlain)
    }
}

/// A plain string value at `at`.
fn string<'a>(text: &'a str, at: &mut usize) -> Step<Cow<'a, str>> {
    expect(text.as_bytes(), at, b'"')?;
    let start = *at;
    if plain_string(text.as_bytes(), at).is_err() {
        *at = start;
        return escaped_string(text.as_bytes(), at).map(Cow::Owned);
    }
    // Between two ASCII quotes: always on character boundaries.
    text.get(start..*at - 1).ok_or(NotPlain).map(Cow::Borrowed)
}

/// A string value with escapes, from just after its opening quote; `at`
/// moves past its closing quote. JSON's escapes only: a lone surrogate, an
/// unknown escape or a raw control character is not plain.
fn escaped_string(line: &[u8], at: &mut usize) -> Step<String> {
    let mut out = Vec::new();
    let mut i = *at;
    loop {
        // Copy up to the next quote or backslash in one go.
        let run = memchr::memchr2(b'"', b'\\', line.get(i..).ok_or(NotPlain)?).ok_or(NotPlain)?;
        let raw = &line[i..i + run];
        if raw.iter().any(|&b| b < 0x20) {
            return Err(NotPlain);
        }
        out.extend_from_slice(raw);
        i += run;
        if line[i] == b'"' {
            *at = i + 1;
            return String::from_utf8(out).map_err(|_| NotPlain);
        }
        let escape = *line.get(i + 1).ok_or(NotPlain)?;
        i += 2;
        let byte = match escape {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let high = hex4(line, i)?;
                i += 4;
                let code = match high {
                    0xD800..=0xDBFF => {
                        if line.get(i..i + 2) != Some(b"\\u") {
                            return Err(NotPlain);
                        }
                        let low = hex4(line, i + 2)?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(NotPlain);
                        }
                        i += 6;
                        0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return Err(NotPlain),
                    _ => high,
                };
                let c = char::from_u32(code).ok_or(NotPlain)?;
                out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                continue;
            }
            _ => return Err(NotPlain),
        };
        out.push(byte);
    }
}

/// The four hex digits at `at`.
fn hex4(line: &[u8], at: usize) -> Step<u32> {
    let digits = line.get(at..at + 4).ok_or(NotPlain)?;
    digits.iter().try_fold(0u32, |value, &d| {
        let digit = (d as char).to_digit(16).ok_or(NotPlain)?;
        Ok(value * 16 + digit)
    })
}

/// Moves past a scalar value of a key the table does not have.
fn skip_scalar(text: &str, at: &mut usize) -> Step<()> {
    let line = text.as_bytes();
    match line.get(*at) {
        Some(b'"') => string(text, at).map(|_| ()),
        Some(b'-' | b'0'..=b'9') => number(line, at).map(|_| ()),
        _ if literal(line, at, b"null") || literal(line, at, b"true") => Ok(()),
        _ if literal(line, at, b"false") => Ok(()),
        _ => Err(NotPlain),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{Field, Float64Type, Int64Type, Schema};
    use datafusion::arrow::json::reader::ReaderBuilder;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("s", DataType::Utf8View, true),
            Field::new("u", DataType::Utf8, true),
            Field::new("i", DataType::Int64, false),
            Field::new("j", DataType::Int32, true),
            Field::new("b", DataType::Int8, true),
            Field::new("f", DataType::Float64, true),
            Field::new("g", DataType::Float32, true),
            Field::new("t", DataType::Boolean, true),
        ]))
    }

    /// The lines' rows as arrow-json decodes them, each line on its own
    /// (`None` when one of them is not exactly one good row).
    fn arrow_json(schema: &SchemaRef, lines: &[String]) -> Option<RecordBatch> {
        let mut rows = Vec::new();
        for line in lines {
            let mut decoder = ReaderBuilder::new(schema.clone()).build_decoder().ok()?;
            let mut bytes = line.as_bytes();
            while !bytes.is_empty() {
                let used = decoder.decode(bytes).ok()?;
                if used == 0 {
                    break;
                }
                bytes = &bytes[used..];
            }
            if decoder.has_partial_record() {
                return None;
            }
            let batch = decoder.flush().ok()??;
            if batch.num_rows() != 1 {
                return None;
            }
            rows.push(batch);
        }
        datafusion::arrow::compute::concat_batches(schema, &rows).ok()
    }

    fn flat(schema: &SchemaRef, lines: &[String]) -> Option<RecordBatch> {
        flat_leaving(schema, lines, &[])
    }

    /// [`flat`], leaving `unread` columns undecoded.
    fn flat_leaving(schema: &SchemaRef, lines: &[String], unread: &[usize]) -> Option<RecordBatch> {
        let mut bytes = Vec::new();
        let mut ranges = Vec::new();
        for line in lines {
            let start = bytes.len();
            bytes.extend_from_slice(line.as_bytes());
            ranges.push(start..bytes.len());
        }
        FlatDecoder::new(schema)?
            .leaving_unread(unread)
            .decode(&bytes, ranges.into_iter())
    }

    #[test]
    fn plain_lines_decode_as_arrow_json_decodes_them() {
        let schema = schema();
        let lines: Vec<String> = [
            r#"{"s":"a","u":"b","i":1,"j":-2,"b":3,"f":1.5,"g":2.25,"t":true}"#,
            r#" { "t" : false , "i" : -9223372036854775808 , "f" : -0.0 , "s" : "ünï" } "#,
            r#"{"i":9223372036854775807,"f":1e308,"g":3.4e38,"j":2147483647,"extra":"x","more":[]}"#,
            r#"{"i":0,"f":12,"g":-1E-5,"s":null,"u":null,"j":null,"b":null,"t":null,"x":1.5e3}"#,
            "{\"i\":5,\"f\":0.1,\"s\":\"a very long string indeed, longer than twelve\"}\r",
            r#"{"i":6,"s":"q\"q\\ \/ \b\f\n\r\t","u":"\u00e9\ud83d\ude00 \u0041","zz":"\"x"}"#,
        ]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
        // "more":[] is nested: not plain.
        assert!(flat(&schema, &lines).is_none());
        let lines: Vec<String> = lines
            .iter()
            .map(|l| l.replace(",\"more\":[]", ""))
            .collect();
        let expected = arrow_json(&schema, &lines).expect("arrow-json decodes them");
        assert_eq!(flat(&schema, &lines).expect("plain lines"), expected);
    }

    #[test]
    fn unread_columns_come_out_blank_and_the_others_as_decoded() {
        let schema = schema();
        let lines: Vec<String> = [
            r#"{"s":"a","u":"b","i":1,"j":-2,"b":3,"f":1.5,"g":2.25,"t":true}"#,
            r#"{"i":0,"f":12,"s":null,"u":null,"j":null,"b":null,"t":null,"x":1.5e3}"#,
            r#"{"i":6,"s":"q\"q\\ \/ \b","u":"\u00e9\ud83d\ude00","g":-1E-5}"#,
        ]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
        let expected = arrow_json(&schema, &lines).unwrap();
        for unread in [vec![0, 1], vec![2, 5, 7], vec![3, 4, 6], (0..8).collect()] {
            let batch = flat_leaving(&schema, &lines, &unread).expect("plain lines");
            for (c, field) in schema.fields().iter().enumerate() {
                if !unread.contains(&c) {
                    assert_eq!(batch.column(c), expected.column(c), "{}", field.name());
                    continue;
                }
                let blank = ScalarValue::new_default(field.data_type())
                    .unwrap()
                    .to_array_of_size(lines.len())
                    .unwrap();
                assert_eq!(batch.column(c), &blank, "{}", field.name());
            }
        }
        // Blanks are kept from chunk to chunk and grown when a chunk is longer.
        let mut decoder = FlatDecoder::new(&schema).unwrap().leaving_unread(&[0]);
        let line = b"{\"i\":1,\"s\":\"x\"}\n";
        for rows in [1, 3, BLANK_ROWS + 5, 2] {
            let bytes = line.repeat(rows);
            let ranges = (0..rows).map(|r| r * line.len()..(r + 1) * line.len());
            let batch = decoder.decode(&bytes, ranges).unwrap();
            assert_eq!(batch.num_rows(), rows);
            assert_eq!(batch.column(0).len(), rows);
            assert_eq!(batch.column(0).as_string_view().value(rows - 1), "");
        }
    }

    #[test]
    fn anything_else_is_left_to_arrow_json() {
        let schema = schema();
        for line in [
            r#"{"i":1,"s":"\ud800"}"#,   // a lone surrogate
            r#"{"i":1,"s":"\x"}"#,       // an unknown escape
            r#"{"i":1,"s":"\u12"}"#,     // a short \u escape
            r#"{"i":1,"s\u0041":"a"}"#,  // escape in a key
            r#"{"i":1,"s":1}"#,          // a number for a string
            r#"{"i":"1"}"#,              // a numeric string
            r#"{"i":1.0}"#,              // a fraction for an integer
            r#"{"i":01}"#,               // a leading zero
            r#"{"i":1,"j":2147483648}"#, // out of range
            r#"{"i":1,"i":2}"#,          // a key twice
            r#"{"j":1}"#,                // a NOT NULL column missing
            r#"{"i":null}"#,             // or null
            r#"{"i":1}{"i":2}"#,         // two objects
            r#"{"i":1,"x":{"y":1}}"#,    // a nested unknown value
            r#"{"i":1,}"#,               // a trailing comma
            r#"{"i":1"#,                 // cut short
            r#"{"i":1,"t":tru}"#,        // a bad literal
            r#"{"i":1,"f":-}"#,          // a bad number
            r#"{"i":1,"f":1.}"#,
            r#"{"i":1,"f":.5}"#,
            r#"{"i":1,"f":1e}"#,
            r#"{"i":1,"f":1x}"#,
            "[1]",
            "",
            "{\"i\":1,\"s\":\"tab\there\"}", // a raw control character
        ] {
            assert!(
                flat(&schema, &[format!("{line}\n")]).is_none(),
                "{line} should not be plain"
            );
            // Nor when no column is read: unread values are checked alike.
            let every: Vec<usize> = (0..schema.fields().len()).collect();
            assert!(
                flat_leaving(&schema, &[format!("{line}\n")], &every).is_none(),
                "{line} should not be plain unread"
            );
        }
        let bad_utf8 = FlatDecoder::new(&schema)
            .unwrap()
            .decode(b"{\"i\":1,\"s\":\"\xff\"}\n", std::iter::once(0..17));
        assert!(bad_utf8.is_none());
    }

    /// Lines made of random pieces, plain and not: wherever the flat decoder
    /// answers, it answers what arrow-json does.
    #[test]
    fn random_lines_decode_as_arrow_json_decodes_them_or_not_at_all() {
        let schema = schema();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let values = [
            "\"\\ud83d\\ude00\"",
            "\"\\ud83d\"",
            "\"a\\nb\\t\\/\\\\\"",
            "\"\\uDEAD\"",
            "null",
            "true",
            "false",
            "0",
            "-0",
            "7",
            "-12",
            "127",
            "128",
            "-129",
            "2147483648",
            "9223372036854775808",
            "1.5",
            "-2.5e3",
            "1E400",
            "0.1",
            "\"x\"",
            "\"ab cd\"",
            "\"q\\\"q\"",
            "\"\\u00e9\"",
            "\"12\"",
            "[]",
            "{}",
            "01",
            "1.",
            "\"é\"",
        ];
        let keys = ["s", "u", "i", "j", "b", "f", "g", "t", "zz", "i "];
        let (mut answered, mut plain) = (0, 0);
        for _ in 0..3000 {
            let lines: Vec<String> = (0..1 + next(3))
                .map(|_| {
                    let mut parts = Vec::new();
                    if next(4) > 0 {
                        parts.push("\"i\":42".to_string());
                    }
                    for _ in 0..next(6) {
                        let key = keys[next(keys.len())];
                        let value = values[next(values.len())];
                        let space = [" ", "", ""][next(3)];
                        parts.push(format!("\"{key}\"{space}:{space}{value}"));
                    }
                    let n = parts.len();
                    if n > 1 {
                        parts.swap(0, next(n));
                    }
                    format!("{{{}}}\n", parts.join(","))
                })
                .collect();
            let expected = arrow_json(&schema, &lines);
            if let Some(batch) = flat(&schema, &lines) {
                answered += 1;
                assert_eq!(Some(batch), expected, "{lines:?}");
            }
            plain += expected.is_some() as usize;
        }
        assert!(
            answered > 150,
            "answered {answered} of {plain} plain chunks"
        );
    }

    #[test]
    fn string_end_finds_the_first_quote_backslash_or_control_byte() {
        let bytewise = |b: &[u8]| b.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
        let alphabet = [
            b'a', b'"', b'\\', 0x1f, 0x20, 0x21, 0x7f, 0x80, 0xc3, 0xff, 0x00, b'\n',
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for len in 0..40 {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        // Mostly plain bytes, so the end falls anywhere.
                        if state.is_multiple_of(8) {
                            alphabet[(state >> 8) as usize % alphabet.len()]
                        } else {
                            b'a' + (state >> 8) as u8 % 26
                        }
                    })
                    .collect();
                assert_eq!(string_end(&bytes), bytewise(&bytes), "{bytes:?}");
            }
        }
    }

    /// A xorshift generator for the randomized tests.
    fn xorshift(mut state: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        }
    }

    /// Numbers read in one pass give what `lexical-core` parses from their
    /// text, bit for bit: doubles on the fast path and off it, integers in
    /// range and out of it.
    #[test]
    fn numbers_read_in_one_pass_equal_lexical() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let digits = |n: u64, next: &mut dyn FnMut(u64) -> u64| -> String {
            (0..n).map(|_| char::from(b'0' + next(10) as u8)).collect()
        };
        let (mut fast, mut integers) = (0, 0);
        for _ in 0..200_000 {
            let mut text = String::new();
            if next(2) == 0 {
                text.push('-');
            }
            let whole = digits(1 + next(21), &mut next);
            let whole = whole.trim_start_matches('0');
            text.push_str(if whole.is_empty() || next(4) == 0 {
                "0"
            } else {
                whole
            });
            if next(2) == 0 {
                text.push('.');
                text.push_str(&digits(1 + next(22), &mut next));
            }
            if next(3) == 0 {
                text.push(['e', 'E'][next(2) as usize]);
                text.push_str(["", "+", "-"][next(3) as usize]);
                text.push_str(&digits(1 + next(4), &mut next));
            }
            let line = format!("{text},");
            let mut at = 0;
            let number = number(line.as_bytes(), &mut at).expect("a JSON number");
            assert_eq!((at, number.text), (text.len(), text.as_bytes()));
            let read = read_value(&line, &DataType::Float64).expect("a double");
            let one_pass = read.as_primitive::<Float64Type>().value(0);
            let expected = lexical_core::parse::<f64>(text.as_bytes()).unwrap();
            assert_eq!(one_pass.to_bits(), expected.to_bits(), "{text}");
            fast += number.fast_f64().is_some() as usize;
            if number.integer {
                integers += 1;
                let read = read_value(&line, &DataType::Int64)
                    .map(|a| a.as_primitive::<Int64Type>().value(0));
                assert_eq!(
                    read,
                    lexical_core::parse::<i64>(text.as_bytes()).ok(),
                    "{text}"
                );
            }
        }
        assert!(
            fast > 20_000 && integers > 20_000,
            "{fast} fast, {integers} integers"
        );
    }

    /// The value `value` reads from `line` into a column of `data_type`,
    /// as a single-row array (`None`: not plain).
    fn read_value(line: &str, data_type: &DataType) -> Option<ArrayRef> {
        let mut column = Column::new(data_type, 1)?;
        value(line, &mut 0, &mut column, false).ok()?;
        column.finish(&mut None)
    }

    #[test]
    fn digit_run_reads_the_digits_a_word_begins_with() {
        let mut next = xorshift(0x1234_5678_9abc_def1);
        for _ in 0..200_000 {
            let mut bytes: Vec<u8> = (0..8).map(|_| b'0' + next(10) as u8).collect();
            if next(4) != 0 {
                bytes[next(8) as usize] = next(256) as u8;
            }
            let run = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
            let value = std::str::from_utf8(&bytes[..run])
                .unwrap()
                .parse::<u64>()
                .unwrap_or(0);
            let zeros = bytes[..run].iter().take_while(|&&b| b == b'0').count();
            assert_eq!(
                digit_run(&bytes, 0),
                Some((run as u32, zeros as u32, value)),
                "{bytes:?}"
            );
        }
        assert_eq!(digit_run(b"1234567", 0), None);
        assert_eq!(digit_run(b"x99999999", 1), Some((8, 0, 99_999_999)));
        assert_eq!(digit_run(b"007.5,\"a\"", 0), Some((3, 2, 7)));
        assert_eq!(digit_run(b"00000000", 0), Some((8, 8, 0)));
        assert_eq!(digit_run(b"-1234567", 0), Some((0, 0, 0)));
    }

    #[test]
    fn same_bytes_is_slice_equality() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for n in 0..40 {
            for _ in 0..200 {
                let a: Vec<u8> = (0..n).map(|_| b'a' + next(3) as u8).collect();
                let mut b = a.clone();
                if n > 0 && next(2) == 0 {
                    b[next(n as u64) as usize] ^= 1 << next(8);
                }
                assert_eq!(same_bytes(&a, &b), a == b, "{a:?} {b:?}");
            }
            assert!(!same_bytes(&vec![b'a'; n], &vec![b'a'; n + 1]));
        }
    }

    #[test]
    fn only_flat_column_types_get_a_decoder() {
        let decimal = Arc::new(Schema::new(vec![Field::new(
            "d",
            DataType::Decimal128(10, 2),
            true,
        )]));
        assert!(FlatDecoder::new(&decimal).is_none());
        assert!(FlatDecoder::new(&schema()).is_some());
    }
}
