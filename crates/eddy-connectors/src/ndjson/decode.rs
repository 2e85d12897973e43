//! Decoding chunks of NDJSON lines into record batches.
//!
//! In: a [`Chunk`] (lines with their numbers, file offsets and byte ranges,
//! lines already found too long, and the reader's position after the
//! chunk). Out: a [`Decoded`] chunk: its rows in the table's physical
//! schema, where each row came from ([`NdjsonOrigins`]), and the bad lines
//! found, with the position carried along.
//!
//! A line is bad when it is not JSON or not UTF-8, not an object, nests
//! deeper than [`MAX_DEPTH`], has a number of more than
//! [`MAX_DECIMAL_DIGITS`] digits (or an exponent of more than
//! [`MAX_DECIMAL_EXPONENT_DIGITS`]) where the table has a DECIMAL column,
//! holds a value of the wrong type for its column
//! (a non-numeric string in a DOUBLE, an object in a BIGINT; numeric
//! strings are read as numbers, as Flink's JSON format does), a number out
//! of its column's range, or misses a NOT NULL column.
//!
//! A column declared `JSON` takes any JSON value as its text: the chunk's
//! lines are rewritten (parsed and written again, a cost only such tables
//! pay) so that the value is a string before arrow-json decodes it.
//!
//! Fastest path: a chunk of flat objects of scalars is parsed straight into
//! column builders by [`FlatDecoder`]. Fast path: a whole chunk goes
//! through one arrow-json decoder, line by line, and counts when every line
//! completes exactly one row. Otherwise the chunk is decoded line by line: each bad line (including one holding two objects, or none) is
//! reported and left out, and the good lines' rows are concatenated.
//! [`DecodePool`] runs this on worker threads; results come back in chunk
//! order, so rows keep their input order.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use datafusion::arrow::array::{Array, BooleanArray, Float16Array, Float32Array, Float64Array};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::json::reader::{Decoder, ReaderBuilder};
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::source::bad_rows::raw_text;
use eddy_engine::source::{BadRow, RowOrigins};

use super::bad_line::why_bad;
use super::flat::FlatDecoder;
use crate::error::ConnectorError;

/// The deepest nesting of arrays and objects a line may have; deeper lines
/// are bad rows (a guard against stack exhaustion in the JSON decoder).
pub const MAX_DEPTH: usize = 64;

/// Where a reader stands: the byte offset and number of the next line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinePosition {
    /// Bytes consumed.
    pub offset: u64,
    /// Lines consumed (the next line is `line + 1`).
    pub line: u64,
}

/// One line of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineSpan {
    /// The line's number in the input (1-based).
    pub number: u64,
    /// Byte offset of the line's start in the input.
    pub offset: u64,
    /// Start of the line in the chunk's bytes.
    pub start: usize,
    /// End of the line in the chunk's bytes (after its `\n`).
    pub end: usize,
}

/// Lines of a chunk not yet split: the decoding worker splits them (so the
/// reading thread only copies whole lines, in bulk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineBlock {
    /// Start of the block in the chunk's bytes.
    pub start: usize,
    /// End of the block in the chunk's bytes (after its last `\n`).
    pub end: usize,
    /// The block's first line's number in the input (1-based).
    pub number: u64,
    /// Byte offset of the block's start in the input.
    pub offset: u64,
}

/// A chunk of input lines: the bytes (each line ending in `\n`) and, per
/// line, where it is.
pub struct Chunk {
    /// The lines' bytes.
    pub bytes: Vec<u8>,
    /// Each line of `bytes` already split.
    pub lines: Vec<LineSpan>,
    /// Blocks of whole lines to split, after `lines`: blank lines are left
    /// out and lines longer than `max_line_bytes` become bad rows.
    pub blocks: Vec<LineBlock>,
    /// Where each line of `blocks` ends in `bytes` (after its `\n`), in
    /// order, as the reader found them while counting lines; a block with
    /// none recorded is searched for its line breaks.
    pub line_ends: Vec<usize>,
    /// The longest line `blocks` may hold, in bytes (without its break).
    pub max_line_bytes: usize,
    /// Lines the reader already found bad (over `max_line_bytes`).
    pub bad: Vec<BadRow>,
    /// The reader's position after the chunk.
    pub end: LinePosition,
}

/// A decoded chunk: its rows, where they came from, the bad lines found,
/// and the reader's position after it.
pub struct Decoded {
    /// The good rows (`None` when there were none).
    pub batch: Result<Option<RecordBatch>, ConnectorError>,
    /// The line each row of `batch` came from.
    pub origins: NdjsonOrigins,
    /// Bad lines.
    pub bad: Vec<BadRow>,
    /// Position after the chunk.
    pub end: LinePosition,
}

/// The input lines behind the rows of a batch.
pub struct NdjsonOrigins {
    path: String,
    bytes: Vec<u8>,
    rows: Vec<LineSpan>,
}

impl NdjsonOrigins {
    /// The line each row of the batch came from, in row order.
    pub fn spans(&self) -> &[LineSpan] {
        &self.rows
    }

    /// The origins of a batch made of these rows (`rows[i]`: the row here
    /// that row `i` of the new batch came from; a row may repeat).
    pub fn select(self, rows: &[usize]) -> NdjsonOrigins {
        let spans = rows
            .iter()
            .filter_map(|&r| self.rows.get(r).copied())
            .collect();
        NdjsonOrigins {
            path: self.path,
            bytes: self.bytes,
            rows: spans,
        }
    }
}

impl RowOrigins for NdjsonOrigins {
    fn origin(&self, row: usize) -> BadRow {
        match self.rows.get(row) {
            Some(span) => line_origin(&self.path, &self.bytes, span),
            None => BadRow {
                path: self.path.clone(),
                line: None,
                offset: None,
                column: None,
                reason: String::new(),
                raw: String::new(),
            },
        }
    }
}

fn line_origin(path: &str, bytes: &[u8], span: &LineSpan) -> BadRow {
    BadRow {
        path: path.to_string(),
        line: Some(span.number),
        offset: Some(span.offset),
        column: None,
        reason: String::new(),
        raw: raw_text(trim_line(&bytes[span.start..span.end])),
    }
}

/// A line without its break (`\n` or `\r\n`).
pub fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The bad row for a line longer than `max_line_bytes`: `at` says where it
/// is and how many bytes it took (its break included), `text` is what was
/// kept of it.
pub fn too_long_line(location: &str, at: &LineSpan, text: &[u8], max_line_bytes: usize) -> BadRow {
    BadRow {
        path: location.to_string(),
        line: Some(at.number),
        offset: Some(at.offset),
        column: None,
        reason: format!(
            "line of {} bytes is longer than max_line_bytes ({max_line_bytes})",
            at.end - at.start
        ),
        raw: raw_text(text),
    }
}

/// Splits a chunk's blocks into its lines: blank lines are left out, lines
/// longer than the chunk's `max_line_bytes` become bad rows.
pub fn split_blocks(chunk: &mut Chunk, location: &str) {
    let line_ends = std::mem::take(&mut chunk.line_ends);
    let mut recorded = line_ends.as_slice();
    for block in std::mem::take(&mut chunk.blocks) {
        let (mut number, mut offset, mut start) = (block.number, block.offset, block.start);
        let bytes = &chunk.bytes[..block.end];
        let (ends, rest) = recorded.split_at(recorded.partition_point(|&end| end <= block.end));
        recorded = rest;
        // The breaks the reader recorded, or one search over the block for
        // them (not one per line).
        let searched: Vec<usize>;
        let ends = if ends.is_empty() {
            searched = memchr::memchr_iter(b'\n', &bytes[start..])
                .map(|i| block.start + i + 1)
                .collect();
            &searched
        } else {
            ends
        };
        let mut breaks = ends.iter().copied();
        while start < block.end {
            let end = breaks.next().unwrap_or(block.end);
            let text = trim_line(&bytes[start..end]);
            if text.len() > chunk.max_line_bytes {
                let at = LineSpan {
                    number,
                    offset,
                    start,
                    end,
                };
                chunk
                    .bad
                    .push(too_long_line(location, &at, text, chunk.max_line_bytes));
            } else if !text.iter().all(u8::is_ascii_whitespace) {
                chunk.lines.push(LineSpan {
                    number,
                    offset,
                    start,
                    end,
                });
            }
            number += 1;
            offset += (end - start) as u64;
            start = end;
        }
    }
}

/// Decodes chunks on worker threads; results come back in chunk order.
pub struct DecodePool {
    jobs: Vec<SyncSender<Chunk>>,
    results: Vec<Receiver<Decoded>>,
    next_job: usize,
    next_result: usize,
    in_flight: usize,
}

impl DecodePool {
    /// Starts `workers` decoding threads (fewer if threads cannot start),
    /// each leaving `unread` columns undecoded where it can
    /// ([`ChunkDecoder::leaving_unread`]).
    pub fn new(workers: usize, schema: SchemaRef, location: String, unread: &[usize]) -> Self {
        let mut jobs = Vec::with_capacity(workers);
        let mut results = Vec::with_capacity(workers);
        for i in 0..workers {
            let (job_tx, job_rx) = sync_channel::<Chunk>(1);
            let (result_tx, result_rx) = sync_channel::<Decoded>(1);
            let (schema, location, unread) = (schema.clone(), location.clone(), unread.to_vec());
            let spawned = std::thread::Builder::new()
                .name(format!("eddy-decode-{i}"))
                .spawn(move || {
                    let mut decoder = ChunkDecoder::new(schema, location).leaving_unread(&unread);
                    while let Ok(chunk) = job_rx.recv() {
                        if result_tx.send(decoder.decode(chunk)).is_err() {
                            return;
                        }
                    }
                });
            if spawned.is_ok() {
                jobs.push(job_tx);
                results.push(result_rx);
            }
        }
        Self {
            jobs,
            results,
            next_job: 0,
            next_result: 0,
            in_flight: 0,
        }
    }

    /// Number of workers.
    pub fn capacity(&self) -> usize {
        self.jobs.len()
    }

    /// Chunks handed out and not yet taken back.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Hands a chunk to the next worker.
    pub fn submit(&mut self, chunk: Chunk) -> Result<(), ConnectorError> {
        self.jobs[self.next_job]
            .send(chunk)
            .map_err(|_| ConnectorError::bad_option("decode", "a decode worker stopped"))?;
        self.next_job = (self.next_job + 1) % self.capacity();
        self.in_flight += 1;
        Ok(())
    }

    /// Takes back the oldest chunk handed out.
    pub fn take(&mut self) -> Result<Decoded, ConnectorError> {
        let decoded = self.results[self.next_result]
            .recv()
            .map_err(|_| ConnectorError::bad_option("decode", "a decode worker stopped"))?;
        self.next_result = (self.next_result + 1) % self.capacity();
        self.in_flight -= 1;
        Ok(decoded)
    }
}

fn new_decoder(schema: &SchemaRef, batch_size: usize) -> Result<Decoder, ArrowError> {
    ReaderBuilder::new(schema.clone())
        .with_batch_size(batch_size.max(1))
        .build_decoder()
}

/// Rows a kept decoder holds at least: a decoder made for a chunk of
/// fewer lines is made this large, so the next chunks fit it.
const KEPT_DECODER_ROWS: usize = 8192;

/// Decodes the chunks of one table, keeping the arrow-json decoder (and
/// the buffers it has grown) from one chunk to the next. A decoder made
/// afresh per chunk grew its buffers from nothing every time, and the
/// memory the allocator handed back to the kernel in between came back
/// as page faults: most of a window query's system time.
pub struct ChunkDecoder {
    schema: SchemaRef,
    location: String,
    /// A decoder whose last chunk decoded cleanly, and its batch size.
    kept: Option<(Decoder, usize)>,
    /// The fast path for chunks of flat objects (`None` for tables it
    /// cannot build, and once it missed [`FLAT_MISSES`] chunks in a row).
    flat: Option<FlatDecoder>,
    /// Chunks in a row the fast path could not take.
    flat_misses: u32,
    /// Each line is the one column's JSON text, not an object of columns
    /// (a table read as unstructured JSON).
    unstructured: bool,
}

/// Chunks in a row the flat decoder may fail to take (an input whose lines
/// are not flat, such as strings with escapes) before it is no longer
/// tried for that input.
const FLAT_MISSES: u32 = 8;

impl ChunkDecoder {
    /// A decoder for chunks of `schema`'s rows read at `location`.
    pub fn new(schema: SchemaRef, location: String) -> Self {
        Self {
            flat: FlatDecoder::new(&schema),
            flat_misses: 0,
            unstructured: eddy_engine::source::is_unstructured(&schema),
            schema,
            location,
            kept: None,
        }
    }

    /// Leaves `columns` (no query reads them) undecoded in the chunks the
    /// flat decoder takes: see [`FlatDecoder::leaving_unread`]. Chunks
    /// arrow-json decodes have every column.
    pub fn leaving_unread(mut self, columns: &[usize]) -> Self {
        self.flat = self.flat.map(|flat| flat.leaving_unread(columns));
        self
    }

    /// Decodes one chunk; see [`decode`].
    pub fn decode(&mut self, mut chunk: Chunk) -> Decoded {
        split_blocks(&mut chunk, &self.location);
        if self.unstructured {
            return decode_unstructured(&self.schema, &self.location, chunk);
        }
        if let Some(flat) = &mut self.flat {
            let lines = chunk.lines.iter().map(|span| span.start..span.end);
            if let Some(batch) = flat.decode(&chunk.bytes, lines) {
                self.flat_misses = 0;
                let Chunk {
                    bytes,
                    lines,
                    bad,
                    end,
                    ..
                } = chunk;
                let batch = (batch.num_rows() > 0).then_some(batch);
                return decoded(&self.location, bytes, lines, bad, end, Ok(batch));
            }
            self.flat_misses += 1;
            if self.flat_misses >= FLAT_MISSES {
                self.flat = None;
            }
        }
        decode_keeping(&self.schema, &self.location, chunk, &mut self.kept)
    }
}

/// A chunk of a table read as unstructured JSON: each line, as written,
/// into the one column; a line that is not JSON is a bad row.
fn decode_unstructured(schema: &SchemaRef, location: &str, chunk: Chunk) -> Decoded {
    let Chunk {
        bytes,
        mut lines,
        mut bad,
        end,
        ..
    } = chunk;
    let mut values = datafusion::arrow::array::StringBuilder::new();
    lines.retain(|span| {
        let line = trim_line(&bytes[span.start..span.end]);
        let verdict = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                serde_json::from_str::<serde::de::IgnoredAny>(text)
                    .map(|_| text)
                    .map_err(|e| format!("not JSON: {e}"))
            });
        match verdict {
            Ok(text) => {
                values.append_value(text.trim());
                true
            }
            Err(reason) => {
                let mut row = line_origin(location, &bytes, span);
                row.reason = reason;
                bad.push(row);
                false
            }
        }
    });
    let batch = if lines.is_empty() {
        Ok(None)
    } else {
        let values: datafusion::arrow::array::ArrayRef = std::sync::Arc::new(values.finish());
        datafusion::arrow::compute::cast(&values, schema.field(0).data_type())
            .and_then(|column| RecordBatch::try_new(schema.clone(), vec![column]))
            .map(Some)
            .map_err(ConnectorError::from)
    };
    decoded(location, bytes, lines, bad, end, batch)
}

/// Decodes a chunk: flat lines straight into columns ([`FlatDecoder`]),
/// else with arrow-json in one go when every line is good, else line by
/// line, collecting the bad lines.
pub fn decode(schema: &SchemaRef, location: &str, chunk: Chunk) -> Decoded {
    ChunkDecoder::new(schema.clone(), location.to_string()).decode(chunk)
}

/// [`decode`], with a decoder kept from the last clean chunk (taken, and
/// put back after this one if it decodes cleanly).
fn decode_keeping(
    schema: &SchemaRef,
    location: &str,
    chunk: Chunk,
    kept: &mut Option<(Decoder, usize)>,
) -> Decoded {
    let Chunk {
        bytes,
        mut lines,
        mut bad,
        end,
        ..
    } = chunk;
    let before = lines.len();
    let has_decimal = schema.fields().iter().any(|f| {
        matches!(
            f.data_type(),
            DataType::Decimal128(..) | DataType::Decimal256(..)
        )
    });
    lines.retain(|span| {
        let line = &bytes[span.start..span.end];
        let reason = if nests_deeper_than(line, MAX_DEPTH) {
            format!("nested deeper than {MAX_DEPTH} levels")
        } else if has_decimal && longest_digit_run(line) > MAX_DECIMAL_DIGITS {
            format!(
                "a number of more than {MAX_DECIMAL_DIGITS} digits (out of range for a DECIMAL)"
            )
        } else if has_decimal && longest_exponent(line) > MAX_DECIMAL_EXPONENT_DIGITS {
            format!(
                "a number with an exponent of more than {MAX_DECIMAL_EXPONENT_DIGITS} digits (out of range for a DECIMAL)"
            )
        } else {
            return true;
        };
        let mut row = line_origin(location, &bytes, span);
        row.reason = reason;
        bad.push(row);
        false
    });
    // JSON columns: each line rewritten so their values are JSON text
    // (decoded from the rewritten copy; origins keep the line as read).
    let json_text = json_columns_as_text(schema, &bytes, &lines);
    let line_bytes = |i: usize, span: &LineSpan| -> &[u8] {
        match &json_text {
            Some((text, ranges)) => &text[ranges[i].clone()],
            None => &bytes[span.start..span.end],
        }
    };
    // One decoder for the chunk, fed line by line: each line must complete
    // exactly one row (a line holding two objects, or none, is bad).
    let fast = || -> Result<Option<RecordBatch>, ArrowError> {
        let (mut decoder, rows) = match kept.take() {
            Some((decoder, rows)) if rows >= lines.len() => (decoder, rows),
            _ => {
                let rows = lines.len().max(KEPT_DECODER_ROWS);
                (new_decoder(schema, rows)?, rows)
            }
        };
        for (i, span) in lines.iter().enumerate() {
            decode_all(&mut decoder, line_bytes(i, span))?;
            if decoder.len() != i + 1 {
                return Err(ArrowError::JsonError("not one value per line".into()));
            }
        }
        let batch = decoder.flush()?;
        // Only a decoder that ended clean is kept (one that failed may
        // hold half a row).
        *kept = Some((decoder, rows));
        Ok(batch)
    };
    let batch = match (lines.len() == before).then(fast) {
        Some(Ok(batch)) if batch.as_ref().map_or(0, |b| b.num_rows()) == lines.len() => Ok(batch),
        _ => {
            // Line by line: keep each good line's row, report the rest.
            let mut rows = Vec::with_capacity(lines.len());
            let mut index = 0;
            lines.retain(|span| {
                let line = line_bytes(index, span);
                index += 1;
                let verdict = new_decoder(schema, 2)
                    .and_then(|mut probe| decode_all(&mut probe, line).and_then(|_| probe.flush()));
                let reason = match verdict {
                    Ok(Some(row)) if row.num_rows() == 1 => {
                        rows.push(row);
                        return true;
                    }
                    Ok(Some(_)) => (None, "more than one JSON value on the line".to_string()),
                    Ok(None) => (None, "no JSON object on the line".to_string()),
                    Err(e) => why_bad(schema, line, &e),
                };
                let mut row = line_origin(location, &bytes, span);
                (row.column, row.reason) = reason;
                bad.push(row);
                false
            });
            if rows.is_empty() {
                Ok(None)
            } else {
                datafusion::arrow::compute::concat_batches(schema, &rows)
                    .map(Some)
                    .map_err(ConnectorError::from)
            }
        }
    };
    decoded(location, bytes, lines, bad, end, batch)
}

/// A chunk's decoded rows, with out-of-range floats moved to the bad rows.
fn decoded(
    location: &str,
    bytes: Vec<u8>,
    lines: Vec<LineSpan>,
    mut bad: Vec<BadRow>,
    end: LinePosition,
    batch: Result<Option<RecordBatch>, ConnectorError>,
) -> Decoded {
    let mut origins = NdjsonOrigins {
        path: location.to_string(),
        bytes,
        rows: lines,
    };
    let batch = batch.and_then(|batch| match batch {
        Some(batch) => drop_out_of_range(batch, &mut origins, &mut bad),
        None => Ok(None),
    });
    bad.sort_by_key(|row| row.line);
    Decoded {
        batch,
        origins,
        bad,
        end,
    }
}

/// For a schema with JSON columns (declared `JSON`), each line rewritten so
/// that those columns' values are strings of their JSON text (a string stays
/// itself, null stays null): the rewritten bytes and each line's range in
/// them. A line that is not a JSON object is left as it is, for the decoder
/// to report. `None` when the schema has no JSON column.
fn json_columns_as_text(
    schema: &SchemaRef,
    bytes: &[u8],
    lines: &[LineSpan],
) -> Option<(Vec<u8>, Vec<std::ops::Range<usize>>)> {
    let columns: Vec<&str> = schema
        .fields()
        .iter()
        .filter(|f| eddy_engine::source::is_json_column(f))
        .map(|f| f.name().as_str())
        .collect();
    if columns.is_empty() {
        return None;
    }
    let mut text = Vec::with_capacity(bytes.len() + bytes.len() / 4);
    let mut ranges = Vec::with_capacity(lines.len());
    for span in lines {
        let line = &bytes[span.start..span.end];
        let start = text.len();
        // The object's values are kept as written (raw), so a JSON column's
        // text is exactly the input's.
        type RawObject = std::collections::BTreeMap<String, Box<serde_json::value::RawValue>>;
        let rewritten = serde_json::from_slice::<RawObject>(line)
            .ok()
            .map(|object| {
                let mut out = Vec::with_capacity(line.len() + 16);
                out.push(b'{');
                for (i, (key, value)) in object.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    let raw = value.get();
                    let as_text =
                        columns.contains(&key.as_str()) && raw != "null" && !raw.starts_with('"');
                    // Writing a string or a raw value into a Vec cannot fail.
                    let _ = serde_json::to_writer(&mut out, key);
                    out.push(b':');
                    if as_text {
                        let _ = serde_json::to_writer(&mut out, raw);
                    } else {
                        out.extend_from_slice(raw.as_bytes());
                    }
                }
                out.push(b'}');
                out
            });
        match rewritten {
            Some(line) => {
                text.extend_from_slice(&line);
                text.push(b'\n');
            }
            None => text.extend_from_slice(line),
        }
        ranges.push(start..text.len());
    }
    Some((text, ranges))
}

/// Leaves out rows holding a number too large for its floating-point
/// column (JSON has no infinity: an infinite value is an overflow).
fn drop_out_of_range(
    batch: RecordBatch,
    origins: &mut NdjsonOrigins,
    bad: &mut Vec<BadRow>,
) -> Result<Option<RecordBatch>, ConnectorError> {
    let mut faults: Vec<(usize, usize)> = Vec::new();
    for (c, column) in batch.columns().iter().enumerate() {
        let any = column.as_any();
        let mut check = |infinite: &dyn Fn(usize) -> bool| {
            for row in 0..column.len() {
                if column.is_valid(row) && infinite(row) {
                    faults.push((row, c));
                }
            }
        };
        match column.data_type() {
            DataType::Float64 => {
                let a = any.downcast_ref::<Float64Array>();
                if let Some(a) = a.filter(|a| a.values().iter().any(|v| v.is_infinite())) {
                    check(&|r| a.value(r).is_infinite());
                }
            }
            DataType::Float32 => {
                let a = any.downcast_ref::<Float32Array>();
                if let Some(a) = a.filter(|a| a.values().iter().any(|v| v.is_infinite())) {
                    check(&|r| a.value(r).is_infinite());
                }
            }
            DataType::Float16 => {
                let a = any.downcast_ref::<Float16Array>();
                if let Some(a) = a.filter(|a| a.values().iter().any(|v| v.is_infinite())) {
                    check(&|r| a.value(r).is_infinite());
                }
            }
            _ => {}
        }
    }
    if faults.is_empty() {
        return Ok(Some(batch));
    }
    let mut keep = vec![true; batch.num_rows()];
    faults.sort_unstable();
    faults.dedup_by_key(|(row, _)| *row);
    for &(row, column) in &faults {
        keep[row] = false;
        let mut bad_row = origins.origin(row);
        let field = batch.schema().field(column).clone();
        bad_row.reason = format!(
            "column '{}': number out of range for {}",
            field.name(),
            field.data_type()
        );
        bad_row.column = Some(field.name().clone());
        bad.push(bad_row);
    }
    let mut row = 0;
    origins.rows.retain(|_| {
        row += 1;
        keep[row - 1]
    });
    let batch = filter_record_batch(&batch, &BooleanArray::from(keep))?;
    Ok((batch.num_rows() > 0).then_some(batch))
}

/// Digits a number may have where the table has a DECIMAL column. The
/// widest DECIMAL has 76; Arrow's decimal parser counts digits in a byte and
/// goes wrong past 255, so longer runs never reach it.
pub const MAX_DECIMAL_DIGITS: usize = 200;

/// Exponent digits a number may have where the table has a DECIMAL
/// column: Arrow's decimal parser keeps the exponent in an `i16` and
/// overflows past four digits (`12.1e-40025`), which no DECIMAL needs (the
/// widest holds 76 digits).
pub const MAX_DECIMAL_EXPONENT_DIGITS: usize = 4;

/// The most digits after an `e` or `E` that follows a digit or a point
/// (an optional sign between), anywhere in `line`: numbers in strings
/// count, as a DECIMAL column also takes its value from a string.
fn longest_exponent(line: &[u8]) -> usize {
    let mut longest = 0;
    for (i, &b) in line.iter().enumerate() {
        if !matches!(b, b'e' | b'E') || i == 0 {
            continue;
        }
        if !(line[i - 1].is_ascii_digit() || line[i - 1] == b'.') {
            continue;
        }
        let mut j = i + 1;
        if matches!(line.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let digits = line[j.min(line.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        longest = longest.max(digits);
    }
    longest
}

fn longest_digit_run(line: &[u8]) -> usize {
    let (mut longest, mut run) = (0, 0);
    for &b in line {
        if b.is_ascii_digit() {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// Whether `line` nests arrays and objects deeper than `limit` (brackets
/// inside strings do not count).
pub fn nests_deeper_than(line: &[u8], limit: usize) -> bool {
    // Cheap bound first: fewer openers than the limit cannot nest deeper.
    if memchr::memchr2_iter(b'[', b'{', line)
        .take(limit + 1)
        .count()
        <= limit
    {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in line {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

fn decode_all(decoder: &mut Decoder, mut bytes: &[u8]) -> Result<(), ArrowError> {
    while !bytes.is_empty() {
        let used = decoder.decode(bytes)?;
        if used == 0 {
            break;
        }
        bytes = &bytes[used..];
    }
    if decoder.has_partial_record() {
        return Err(ArrowError::JsonError("incomplete JSON object".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use datafusion::arrow::datatypes::{Field, Schema};

    fn chunk(lines: &[&str]) -> Chunk {
        let mut bytes = Vec::new();
        let mut spans = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let start = bytes.len();
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
            spans.push(LineSpan {
                number: i as u64 + 1,
                offset: start as u64,
                start,
                end: bytes.len(),
            });
        }
        Chunk {
            bytes,
            lines: spans,
            blocks: Vec::new(),
            line_ends: Vec::new(),
            max_line_bytes: usize::MAX,
            bad: Vec::new(),
            end: LinePosition::default(),
        }
    }

    fn bad_lines(decoded: &Decoded) -> Vec<(u64, String)> {
        decoded
            .bad
            .iter()
            .map(|b| (b.line.unwrap_or_default(), b.reason.clone()))
            .collect()
    }

    #[test]
    fn blocks_split_the_same_with_the_line_ends_recorded_or_searched() {
        // Two blocks: blank lines, a `\r\n`, a line over the limit, and a
        // block of one line (as a line read on its own is).
        let first = "{\"a\":1}\n\n{\"a\":22}\r\n{\"a\":\"far too long\"}\n  \n{\"a\":3}\n";
        let second = "{\"a\":4}\n";
        let bytes = format!("{first}{second}").into_bytes();
        let blocks = vec![
            LineBlock {
                start: 0,
                end: first.len(),
                number: 10,
                offset: 100,
            },
            LineBlock {
                start: first.len(),
                end: bytes.len(),
                number: 16,
                offset: 100 + first.len() as u64,
            },
        ];
        let split = |line_ends: Vec<usize>| {
            let mut chunk = Chunk {
                bytes: bytes.clone(),
                lines: Vec::new(),
                blocks: blocks.clone(),
                line_ends,
                max_line_bytes: 12,
                bad: Vec::new(),
                end: LinePosition::default(),
            };
            split_blocks(&mut chunk, "t.ndjson");
            let bad: Vec<_> = chunk.bad.iter().map(|b| (b.line, b.offset)).collect();
            (chunk.lines, bad)
        };
        let recorded: Vec<usize> = bytes
            .iter()
            .enumerate()
            .filter(|(_, &b)| b == b'\n')
            .map(|(i, _)| i + 1)
            .collect();
        let (lines, bad) = split(recorded);
        assert_eq!((lines.clone(), bad.clone()), split(Vec::new()));
        let numbers: Vec<u64> = lines.iter().map(|l| l.number).collect();
        assert_eq!(numbers, [10, 12, 15, 16]);
        assert_eq!(lines[1].offset, 100 + 9);
        assert_eq!(bad, [(Some(13), Some(100 + 9 + 10))]);
    }

    #[test]
    fn every_line_is_one_row_or_one_bad_row() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        let decoded = decode(
            &schema,
            "t",
            chunk(&[r#"{"a":1}"#, r#"{"a":2}{"a":3}"#, r#"{"a":4}"#, "\u{b}"]),
        );
        assert_eq!(
            decoded.batch.as_ref().unwrap().as_ref().unwrap().num_rows(),
            2
        );
        let bad = bad_lines(&decoded);
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert_eq!(bad[0], (2, "more than one JSON value on the line".into()));
        assert_eq!(
            decoded.origins.origin(1).line,
            Some(3),
            "rows keep their lines"
        );
    }

    #[test]
    fn a_kept_decoder_decodes_each_chunk_as_a_fresh_one_would() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        let chunks: [&[&str]; 4] = [
            &[r#"{"a":1}"#, r#"{"a":2}"#],
            // A bad line in the middle of the stream: the decoder is not kept.
            &[r#"{"a":3}"#, r#"{"a":"#, r#"{"a":5}"#],
            &[r#"{"a":6}"#],
            &[r#"{"a":7}"#, r#"{"a":8}"#, r#"{"a":9}"#],
        ];
        let mut kept = ChunkDecoder::new(schema.clone(), "t".into());
        for lines in chunks {
            let again = kept.decode(chunk(lines));
            let fresh = decode(&schema, "t", chunk(lines));
            assert_eq!(again.batch.as_ref().unwrap(), fresh.batch.as_ref().unwrap());
            assert_eq!(bad_lines(&again), bad_lines(&fresh));
        }
    }

    #[test]
    fn unread_columns_leave_the_same_rows_bad_and_the_read_ones_as_they_were() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("note", DataType::Utf8View, false),
            Field::new("n", DataType::Int32, true),
        ]));
        let chunks: [&[&str]; 3] = [
            // Flat lines: decoded by the flat decoder, `note` left blank.
            &[r#"{"id":1,"note":"a","n":1}"#, r#"{"id":2,"note":"b"}"#],
            // Unread values of the wrong type, or missing, are still bad.
            &[
                r#"{"id":3,"note":7,"n":3}"#,
                r#"{"id":4,"n":4}"#,
                r#"{"id":5,"note":"c","n":99999999999}"#,
                r#"{"id":6,"note":"d","n":6}"#,
            ],
            &[r#"{"id":7,"note":"e","n":7}"#],
        ];
        let mut unread = ChunkDecoder::new(schema.clone(), "t".into()).leaving_unread(&[1, 2]);
        for lines in chunks {
            let fresh = decode(&schema, "t", chunk(lines));
            let left = unread.decode(chunk(lines));
            assert_eq!(bad_lines(&left), bad_lines(&fresh), "{lines:?}");
            let (left, fresh) = (left.batch.unwrap().unwrap(), fresh.batch.unwrap().unwrap());
            assert_eq!(left.column(0), fresh.column(0));
            assert_eq!(left.num_rows(), fresh.num_rows());
        }
    }

    #[test]
    fn exponents_too_long_for_a_decimal_are_bad_rows() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "d",
            DataType::Decimal128(10, 2),
            true,
        )]));
        // The first two overflowed Arrow's exponent (a panic, found by
        // eddy-fuzz); 1e4 fits.
        let lines = [
            r#"{"d": 12.1e-40025}"#,
            r#"{"d": "3.E+99999"}"#,
            r#"{"d": 1e4}"#,
            r#"{"d": 2.5E-1}"#,
        ];
        let decoded = decode(&schema, "t", chunk(&lines));
        let bad = bad_lines(&decoded);
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(
            bad.iter()
                .all(|(_, r)| r.contains("exponent of more than 4 digits")),
            "{bad:?}"
        );
        assert_eq!(
            decoded.batch.as_ref().unwrap().as_ref().unwrap().num_rows(),
            2
        );
        assert_eq!(
            longest_exponent(b"{\"tags\": \"abcde12345\"}"),
            0,
            "not after a digit"
        );
    }

    #[test]
    fn numbers_too_long_for_a_decimal_are_bad_rows() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "d",
            DataType::Decimal128(10, 2),
            true,
        )]));
        let long = "9".repeat(300);
        let lines = [
            r#"{"d": 1.25}"#.to_string(),
            format!(r#"{{"d": "{long}"}}"#),
            format!(r#"{{"d": {long}}}"#),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let decoded = decode(&schema, "t", chunk(&lines));
        assert_eq!(
            decoded.batch.as_ref().unwrap().as_ref().unwrap().num_rows(),
            1
        );
        let bad = bad_lines(&decoded);
        assert_eq!(bad.len(), 2);
        assert!(
            bad.iter().all(|(_, r)| r.contains("more than 200 digits")),
            "{bad:?}"
        );
    }

    #[test]
    fn nesting_is_measured_outside_strings() {
        assert!(!nests_deeper_than(b"{\"a\":[[1]]}", 3));
        assert!(nests_deeper_than(b"{\"a\":[[[1]]]}", 3));
        let quoted = format!("{{\"a\":\"{}\"}}", "[".repeat(100));
        assert!(!nests_deeper_than(quoted.as_bytes(), 3));
        let escaped = format!("{{\"a\":\"\\\"{}\"}}", "[".repeat(100));
        assert!(!nests_deeper_than(escaped.as_bytes(), 3));
        let deep = "[".repeat(50_000);
        assert!(nests_deeper_than(deep.as_bytes(), MAX_DEPTH));
    }
}
