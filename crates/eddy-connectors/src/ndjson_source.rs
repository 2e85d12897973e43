//! NDJSON source: reads newline-delimited JSON objects from a file or stdin
//! and decodes them into record batches with arrow-json, vectorized.
//!
//! In: lines of JSON objects (blank lines ignored, `\r\n` accepted). Out:
//! batches of up to `batch_size` rows in the table's physical schema.
//!
//! Fast path: a whole chunk of lines goes through one arrow-json decoder.
//! If the chunk holds a malformed line (not JSON, not an object, a value of
//! the wrong type, a missing NOT NULL field), the chunk is re-checked line by
//! line: each bad line is reported with its source, line number and reason
//! and skipped, and the good lines are decoded together. A bad line never
//! stops the job.

use std::io::BufRead;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::json::reader::{Decoder, ReaderBuilder};
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::source::{SourceContext, SourceReader};
use eddy_engine::Result as EngineResult;

use crate::error::ConnectorError;

/// Reads NDJSON from any buffered reader.
pub struct NdjsonSource {
    reader: Box<dyn BufRead + Send>,
    /// File path or `stdin`, used in bad-row reports.
    location: String,
    schema: SchemaRef,
    batch_size: usize,
    line_number: u64,
    /// Bytes of the current chunk; `lines` holds (line number, start, end).
    chunk: Vec<u8>,
    lines: Vec<(u64, usize, usize)>,
    line: Vec<u8>,
    finished: bool,
}

impl NdjsonSource {
    /// A source decoding `reader` into `schema`, `batch_size` rows at a time.
    pub fn new(reader: Box<dyn BufRead + Send>, location: String, schema: SchemaRef, batch_size: usize) -> Self {
        Self {
            reader,
            location,
            schema,
            batch_size: batch_size.max(1),
            line_number: 0,
            chunk: Vec::new(),
            lines: Vec::new(),
            line: Vec::new(),
            finished: false,
        }
    }

    fn decoder(&self, batch_size: usize) -> Result<Decoder, ConnectorError> {
        Ok(ReaderBuilder::new(self.schema.clone()).with_batch_size(batch_size.max(1)).build_decoder()?)
    }

    /// Reads up to `batch_size` non-blank lines into `chunk`.
    fn fill_chunk(&mut self) -> Result<(), ConnectorError> {
        self.chunk.clear();
        self.lines.clear();
        while self.lines.len() < self.batch_size {
            self.line.clear();
            let read = self
                .reader
                .read_until(b'\n', &mut self.line)
                .map_err(|source| ConnectorError::Io { path: self.location.clone(), source })?;
            if read == 0 {
                self.finished = true;
                break;
            }
            self.line_number += 1;
            let text = trim_line(&self.line);
            if text.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            let start = self.chunk.len();
            self.chunk.extend_from_slice(text);
            self.chunk.push(b'\n');
            self.lines.push((self.line_number, start, self.chunk.len()));
        }
        Ok(())
    }

    /// Decodes the whole chunk in one go; `None` if any line is bad.
    fn decode_chunk(&self) -> Result<Option<RecordBatch>, ConnectorError> {
        let mut decoder = self.decoder(self.lines.len())?;
        if decode_all(&mut decoder, &self.chunk).is_err() {
            return Ok(None);
        }
        Ok(decoder.flush().unwrap_or(None))
    }

    /// Checks each line alone, reports the bad ones, decodes the good ones.
    fn decode_line_by_line(&self, ctx: &mut SourceContext) -> Result<Option<RecordBatch>, ConnectorError> {
        let mut good = Vec::with_capacity(self.chunk.len());
        let mut good_lines = 0;
        for &(number, start, end) in &self.lines {
            let line = &self.chunk[start..end];
            let mut probe = self.decoder(1)?;
            let verdict = decode_all(&mut probe, line).and_then(|_| probe.flush());
            match verdict {
                Ok(_) => {
                    good.extend_from_slice(line);
                    good_lines += 1;
                }
                Err(e) => ctx.bad_row(&format!("{}:{}", self.location, number), &clean_reason(&e.to_string())),
            }
        }
        if good_lines == 0 {
            return Ok(None);
        }
        let mut decoder = self.decoder(good_lines)?;
        decode_all(&mut decoder, &good)?;
        Ok(decoder.flush()?)
    }
}

fn trim_line(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && (line[end - 1] == b'\n' || line[end - 1] == b'\r') {
        end -= 1;
    }
    &line[..end]
}

fn decode_all(decoder: &mut Decoder, mut bytes: &[u8]) -> Result<(), datafusion::arrow::error::ArrowError> {
    while !bytes.is_empty() {
        let used = decoder.decode(bytes)?;
        if used == 0 {
            break;
        }
        bytes = &bytes[used..];
    }
    if decoder.has_partial_record() {
        return Err(datafusion::arrow::error::ArrowError::JsonError("incomplete JSON object".into()));
    }
    Ok(())
}

fn clean_reason(reason: &str) -> String {
    reason.trim_start_matches("Json error: ").trim_start_matches("Parser error: ").to_string()
}

impl SourceReader for NdjsonSource {
    fn next_batch(&mut self, ctx: &mut SourceContext) -> EngineResult<Option<RecordBatch>> {
        let table = ctx.table().to_string();
        loop {
            if self.finished && self.lines.is_empty() {
                return Ok(None);
            }
            self.fill_chunk().map_err(|e| e.for_table(&table))?;
            if self.lines.is_empty() {
                if self.finished {
                    return Ok(None);
                }
                continue;
            }
            let batch = match self.decode_chunk().map_err(|e| e.for_table(&table))? {
                Some(batch) => Some(batch),
                None => self.decode_line_by_line(ctx).map_err(|e| e.for_table(&table))?,
            };
            self.lines.clear();
            if let Some(batch) = batch.filter(|b| b.num_rows() > 0) {
                return Ok(Some(batch));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use eddy_engine::metrics::NodeMetrics;

    use super::*;

    fn read_all(text: &str, batch_size: usize) -> (Vec<RecordBatch>, u64) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("amount", DataType::Float64, true),
        ]));
        let reader = Box::new(std::io::Cursor::new(text.as_bytes().to_vec()));
        let mut source = NdjsonSource::new(reader, "t.ndjson".into(), schema, batch_size);
        let metrics = NodeMetrics::new_shared(0);
        let mut ctx = SourceContext::new("t", metrics.clone());
        let mut batches = Vec::new();
        while let Some(b) = source.next_batch(&mut ctx).unwrap() {
            batches.push(b);
        }
        (batches, metrics.snapshot().bad_rows)
    }

    #[test]
    fn decodes_and_skips_bad_lines() {
        let text = "{\"id\":\"a\",\"amount\":1.5}\n\nnot json\n{\"id\":\"b\",\"amount\":\"x\"}\n{\"amount\":2}\n{\"id\":\"c\"}\r\n";
        for size in [1, 2, 3, 100] {
            let (batches, bad) = read_all(text, size);
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            assert_eq!(rows, 2, "batch size {size}");
            assert_eq!(bad, 3, "batch size {size}");
        }
    }
}
