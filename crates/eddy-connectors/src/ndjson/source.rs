//! [`NdjsonSource`]: reads newline-delimited JSON objects from any reader
//! and hands on decoded batches in input order.
//!
//! In: lines of JSON objects (blank lines ignored, `\r\n` accepted). Out:
//! batches of up to `batch_size` rows in the table's physical schema, and
//! after each batch its [position](NdjsonSource::position): the byte offset
//! and line number just after the rows handed on. A checkpoint records it;
//! a resumed job seeks the file there.
//!
//! Lines are read in chunks of `batch_size` on the reading thread (whole
//! lines copied in bulk from the read buffer) and split and decoded on
//! worker threads ([`super::decode`]). A bad line never stops
//! the job: it is reported with its source, line number and reason, and the
//! source task applies the table's `bad_rows` policy. A line longer than
//! `max_line_bytes` is never held in memory whole: its first bytes are kept
//! for the report and the rest is skipped.

use std::io::{BufRead, BufReader, Read};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::source::{SourceContext, SourceReader};
use eddy_engine::Result as EngineResult;
use serde::{Deserialize, Serialize};

use super::debezium::DebeziumEnvelope;
use super::decode::{
    too_long_line, trim_line, Chunk, ChunkDecoder, DecodePool, Decoded, LineBlock, LinePosition,
    LineSpan,
};
use crate::error::ConnectorError;

/// What an NDJSON source checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NdjsonPosition {
    /// The file read (`stdin` for standard input).
    pub path: String,
    /// Bytes consumed.
    pub offset: u64,
    /// Lines consumed.
    pub line: u64,
}

/// Reads NDJSON from any buffered reader.
pub struct NdjsonSource {
    reader: BufReader<Box<dyn Read + Send>>,
    /// File path or `stdin`, used in bad-row reports and positions.
    location: String,
    batch_size: usize,
    /// Position of the reader (what has been read into chunks).
    read: LinePosition,
    /// Position after the last batch handed on.
    returned: LinePosition,
    /// Longest line accepted, in bytes (without its line break).
    max_line_bytes: usize,
    finished: bool,
    /// A pipe or stdin: never wait for a full batch while nothing more is buffered.
    live: bool,
    pool: Option<DecodePool>,
    /// Decodes on the source's own thread when there is no pool.
    inline: ChunkDecoder,
    /// Bytes of the last chunk: the next one starts with room for as many
    /// (growing a chunk from nothing copied it over and over).
    chunk_bytes: usize,
    /// A change feed's envelope (a `schema` ending in the row-kind field:
    /// lines are Debezium change events).
    envelope: Option<DebeziumEnvelope>,
}

impl NdjsonSource {
    /// A source decoding `reader` into `schema`, `batch_size` rows at a
    /// time (a `schema` ending in the row-kind field, see
    /// `eddy_engine::changelog`, reads Debezium change events), on `decode_threads` worker threads (0 or 1: on the caller's).
    /// A `live` input (stdin, a pipe) hands on what it has instead of waiting
    /// for full batches. `unread` columns (of `schema`; no query reads
    /// them) may come out blank ([`ChunkDecoder::leaving_unread`]); a
    /// change feed decodes every column.
    pub fn new(
        reader: BufReader<Box<dyn Read + Send>>,
        location: String,
        schema: SchemaRef,
        batch_size: usize,
        decode_threads: usize,
        live: bool,
        unread: &[usize],
    ) -> Self {
        let envelope = eddy_engine::changelog::is_updating(&schema)
            .then(|| DebeziumEnvelope::new(schema.clone()));
        let unread = if envelope.is_some() { &[] } else { unread };
        let schema = envelope
            .as_ref()
            .map_or(schema, DebeziumEnvelope::envelope_schema);
        let pool = (decode_threads > 1)
            .then(|| DecodePool::new(decode_threads, schema.clone(), location.clone(), unread));
        Self {
            envelope,
            reader,
            inline: ChunkDecoder::new(schema, location.clone()).leaving_unread(unread),
            chunk_bytes: 0,
            location,
            batch_size: batch_size.max(1),
            read: LinePosition::default(),
            returned: LinePosition::default(),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            finished: false,
            live,
            pool: pool.filter(|p| p.capacity() > 0),
        }
    }

    /// Lines longer than `bytes` become bad rows (default
    /// [`DEFAULT_MAX_LINE_BYTES`]).
    pub fn with_max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes.max(1);
        self
    }

    /// Counts offsets and line numbers from `position` (the reader must
    /// already stand there: a resumed job seeks the file first).
    pub fn starting_at(mut self, position: &NdjsonPosition) -> Self {
        let at = LinePosition {
            offset: position.offset,
            line: position.line,
        };
        self.read = at;
        self.returned = at;
        self
    }

    /// Reads up to `batch_size` lines; from a live input, fewer when nothing
    /// more is buffered, so a pipe or stdin is not held back waiting for a
    /// full batch. The whole lines found in the read buffer are copied into
    /// the chunk at once, as a block the decoding worker splits; only a
    /// line crossing the buffer's end is read on its own.
    fn read_chunk(&mut self) -> Result<Chunk, ConnectorError> {
        let mut chunk = Chunk {
            bytes: Vec::with_capacity(self.chunk_bytes + self.chunk_bytes / 8),
            lines: Vec::new(),
            blocks: Vec::new(),
            line_ends: Vec::with_capacity(self.batch_size.min(1 << 16)),
            max_line_bytes: self.max_line_bytes,
            bad: Vec::new(),
            end: self.read,
        };
        let mut wanted = self.batch_size;
        while wanted > 0 && !self.finished {
            let started = !chunk.blocks.is_empty() || !chunk.bad.is_empty();
            if self.live && started && self.reader.buffer().is_empty() {
                break;
            }
            let copied = self.copy_whole_lines(&mut chunk, wanted)?;
            if copied > 0 {
                wanted -= copied;
            } else if self.read_line(&mut chunk)? {
                wanted -= 1;
            }
        }
        chunk.end = self.read;
        self.chunk_bytes = chunk.bytes.len();
        Ok(chunk)
    }

    /// Copies up to `wanted` whole lines from the read buffer into the
    /// chunk as one block; returns how many (0 when the buffer holds no
    /// whole line).
    fn copy_whole_lines(
        &mut self,
        chunk: &mut Chunk,
        wanted: usize,
    ) -> Result<usize, ConnectorError> {
        let available = loop {
            match self.reader.fill_buf() {
                Ok(available) => break available,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(ConnectorError::Io {
                        path: self.location.clone(),
                        source,
                    })
                }
            }
        };
        let (mut lines, mut take) = (0, 0);
        let start = chunk.bytes.len();
        for end in memchr::memchr_iter(b'\n', available) {
            lines += 1;
            take = end + 1;
            // Recorded, so that the decoding worker need not search again.
            chunk.line_ends.push(start + take);
            if lines == wanted {
                break;
            }
        }
        if lines == 0 {
            return Ok(0);
        }
        chunk.bytes.extend_from_slice(&available[..take]);
        self.reader.consume(take);
        chunk.blocks.push(LineBlock {
            start,
            end: chunk.bytes.len(),
            number: self.read.line + 1,
            offset: self.read.offset,
        });
        self.read.line += lines as u64;
        self.read.offset += take as u64;
        Ok(lines)
    }

    /// Reads one line on its own (one crossing the read buffer's end, or
    /// the last without a line break) into the chunk, bounded by
    /// `max_line_bytes`; `false` at the end of the input.
    fn read_line(&mut self, chunk: &mut Chunk) -> Result<bool, ConnectorError> {
        // The line is read straight into the chunk (and taken out again if
        // it is blank or too long). Room for the limit plus a line break
        // (`\r\n`): a line cut short is longer than the limit without its
        // break.
        let start = chunk.bytes.len();
        let (read, complete) = read_line_bounded(
            &mut self.reader,
            &mut chunk.bytes,
            start + self.max_line_bytes + 2,
        )
        .map_err(|source| ConnectorError::Io {
            path: self.location.clone(),
            source,
        })?;
        if read == 0 {
            self.finished = true;
            return Ok(false);
        }
        let offset = self.read.offset;
        self.read.offset += read as u64;
        self.read.line += 1;
        let text_len = trim_line(&chunk.bytes[start..]).len();
        let text = &chunk.bytes[start..start + text_len];
        if !complete || text.len() > self.max_line_bytes {
            // Where it was read: its number, offset and the bytes it took.
            let at = LineSpan {
                number: self.read.line,
                offset,
                start: 0,
                end: read,
            };
            chunk.bad.push(too_long_line(
                &self.location,
                &at,
                text,
                self.max_line_bytes,
            ));
            chunk.bytes.truncate(start);
            return Ok(true);
        }
        chunk.bytes.truncate(start + text_len);
        chunk.bytes.push(b'\n');
        chunk.line_ends.push(chunk.bytes.len());
        chunk.blocks.push(LineBlock {
            start,
            end: chunk.bytes.len(),
            number: self.read.line,
            offset,
        });
        Ok(true)
    }

    /// The next decoded chunk, in input order; `None` at the end.
    fn next_decoded(&mut self) -> Result<Option<Decoded>, ConnectorError> {
        let Some(mut pool) = self.pool.take() else {
            if self.finished {
                return Ok(None);
            }
            let chunk = self.read_chunk()?;
            return Ok(Some(self.inline.decode(chunk)));
        };
        let result = (|| {
            // Two chunks per worker: one decoding, one waiting in its
            // queue, so a worker has its next chunk while this thread hands
            // on the oldest result.
            while pool.in_flight() < 2 * pool.capacity() && !self.finished {
                // Do not block reading a live input while decoded rows wait.
                if self.live && pool.in_flight() > 0 && self.reader.buffer().is_empty() {
                    break;
                }
                let chunk = self.read_chunk()?;
                if chunk.blocks.is_empty() && chunk.bad.is_empty() {
                    // Only blank lines (or none): nothing to decode, but
                    // the position moves on once earlier chunks are handed on.
                    if pool.in_flight() == 0 {
                        self.returned = chunk.end;
                    }
                    continue;
                }
                pool.submit(chunk)?;
            }
            if pool.in_flight() == 0 {
                return Ok(None);
            }
            pool.take().map(Some)
        })();
        self.pool = Some(pool);
        result
    }
}

/// The default `max_line_bytes`: 16 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 << 20;

/// Reads one line (through its `\n`, or to the end of input), appending
/// it to `line` while `line` holds at most `limit` bytes. Returns the
/// bytes consumed and whether the whole line was kept.
fn read_line_bounded(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<(usize, bool)> {
    let mut consumed = 0;
    let mut complete = true;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok((consumed, complete));
        }
        let (take, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        let room = limit.saturating_sub(line.len());
        if take > room {
            complete = false;
        }
        line.extend_from_slice(&available[..take.min(room)]);
        reader.consume(take);
        consumed += take;
        if done {
            return Ok((consumed, complete));
        }
    }
}

impl SourceReader for NdjsonSource {
    fn bounded(&self) -> bool {
        !self.live
    }

    fn next_batch(&mut self, ctx: &mut SourceContext) -> EngineResult<Option<RecordBatch>> {
        let table = ctx.table().to_string();
        loop {
            let Some(decoded) = self.next_decoded().map_err(|e| e.for_table(&table))? else {
                self.returned = self.read;
                return Ok(None);
            };
            for row in decoded.bad {
                ctx.bad_row(row);
            }
            self.returned = decoded.end;
            let batch = decoded
                .batch
                .map_err(|e| e.for_table(&table))?
                .filter(|b| b.num_rows() > 0);
            let (batch, origins) = match (&self.envelope, batch) {
                (Some(envelope), Some(envelopes)) => {
                    let mut bad = Vec::new();
                    let unwrapped = envelope
                        .unwrap(&envelopes, decoded.origins, &mut bad)
                        .map_err(|e| e.for_table(&table))?;
                    for row in bad {
                        ctx.bad_row(row);
                    }
                    unwrapped
                }
                (_, batch) => (batch, decoded.origins),
            };
            if let Some(batch) = batch.filter(|b| b.num_rows() > 0) {
                ctx.set_origins(Box::new(origins));
                return Ok(Some(batch));
            }
        }
    }

    fn position(&self) -> serde_json::Value {
        let position = NdjsonPosition {
            path: self.location.clone(),
            offset: self.returned.offset,
            line: self.returned.line,
        };
        serde_json::to_value(position).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("amount", DataType::Float64, true),
        ]))
    }

    fn source(text: &str, batch_size: usize, threads: usize) -> NdjsonSource {
        let reader: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(text.as_bytes().to_vec()));
        let reader = BufReader::with_capacity(7, reader);
        NdjsonSource::new(
            reader,
            "t.ndjson".into(),
            schema(),
            batch_size,
            threads,
            threads > 1,
            &[],
        )
    }

    fn ids(batches: &[RecordBatch]) -> Vec<String> {
        batches
            .iter()
            .flat_map(|b| {
                let ids = datafusion::arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
                let ids = ids
                    .as_any()
                    .downcast_ref::<datafusion::arrow::array::StringArray>()
                    .unwrap()
                    .clone();
                ids.iter()
                    .map(|v| v.unwrap_or_default().to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn read_all(text: &str, batch_size: usize, threads: usize) -> (Vec<RecordBatch>, u64) {
        let mut source = source(text, batch_size, threads);
        let mut ctx = SourceContext::new("t");
        let mut batches = Vec::new();
        let mut bad = 0;
        while let Some(b) = source.next_batch(&mut ctx).unwrap() {
            batches.push(b);
            bad += ctx.take_bad_rows().len() as u64;
        }
        (batches, bad + ctx.take_bad_rows().len() as u64)
    }

    #[test]
    fn decodes_and_skips_bad_lines() {
        let text = "{\"id\":\"a\",\"amount\":1.5}\n\nnot json\n{\"id\":\"b\",\"amount\":\"x\"}\n{\"amount\":2}\n{\"id\":\"c\"}\r\n";
        for threads in [1, 3] {
            for size in [1, 2, 3, 100] {
                let (batches, bad) = read_all(text, size, threads);
                let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                assert_eq!(rows, 2, "batch size {size}, {threads} threads");
                assert_eq!(bad, 3, "batch size {size}, {threads} threads");
                assert_eq!(ids(&batches), vec!["a", "c"], "rows keep their input order");
            }
        }
    }

    #[test]
    fn long_lines_are_bad_rows_whether_read_whole_or_across_the_buffer() {
        let long = format!("{{\"id\":\"{}\"}}", "x".repeat(40));
        let text = format!("{{\"id\":\"a\"}}\n{long}\n\n{{\"id\":\"b\"}}\r\n{long}");
        for capacity in [7, 1 << 16] {
            for threads in [1, 3] {
                let reader: Box<dyn Read + Send> =
                    Box::new(std::io::Cursor::new(text.as_bytes().to_vec()));
                let mut source = NdjsonSource::new(
                    BufReader::with_capacity(capacity, reader),
                    "t.ndjson".into(),
                    schema(),
                    100,
                    threads,
                    false,
                    &[],
                )
                .with_max_line_bytes(30);
                let mut ctx = SourceContext::new("t");
                let mut batches = Vec::new();
                while let Some(b) = source.next_batch(&mut ctx).unwrap() {
                    batches.push(b);
                }
                assert_eq!(ids(&batches), vec!["a", "b"]);
                let bad: Vec<(Option<u64>, Option<u64>, String)> = ctx
                    .take_bad_rows()
                    .into_iter()
                    .map(|r| (r.line, r.offset, r.reason))
                    .collect();
                let reason =
                    |bytes| format!("line of {bytes} bytes is longer than max_line_bytes (30)");
                assert_eq!(
                    bad,
                    vec![
                        (Some(2), Some(11), reason(50)),
                        (Some(5), Some(74), reason(49)),
                    ],
                    "buffer {capacity}, {threads} threads"
                );
                let end: NdjsonPosition = serde_json::from_value(source.position()).unwrap();
                assert_eq!((end.offset, end.line), (text.len() as u64, 5));
            }
        }
    }

    #[test]
    fn resuming_at_a_position_reads_exactly_the_rest() {
        let text: String = (0..50)
            .map(|i| {
                if i % 7 == 3 {
                    "\n".to_string()
                } else {
                    format!("{{\"id\":\"r{i}\"}}\n")
                }
            })
            .collect();
        let (all, _) = read_all(&text, 100, 1);
        let everything = ids(&all);
        for threads in [1, 3] {
            for size in [1, 4, 9] {
                let mut first = source(&text, size, threads);
                let mut ctx = SourceContext::new("t");
                let mut seen = Vec::new();
                for _ in 0..3 {
                    if let Some(b) = first.next_batch(&mut ctx).unwrap() {
                        seen.extend(ids(&[b]));
                    }
                }
                let position: NdjsonPosition = serde_json::from_value(first.position()).unwrap();
                let rest = &text.as_bytes()[position.offset as usize..];
                let reader: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(rest.to_vec()));
                let mut second = NdjsonSource::new(
                    BufReader::new(reader),
                    "t.ndjson".into(),
                    schema(),
                    size,
                    threads,
                    false,
                    &[],
                )
                .starting_at(&position);
                while let Some(b) = second.next_batch(&mut ctx).unwrap() {
                    seen.extend(ids(&[b]));
                }
                assert_eq!(seen, everything, "batch size {size}, {threads} threads");
                let end: NdjsonPosition = serde_json::from_value(second.position()).unwrap();
                assert_eq!(end.offset, text.len() as u64);
                assert_eq!(end.line, 50);
            }
        }
    }
}
