//! NDJSON source: reads newline-delimited JSON objects from a file or stdin
//! and decodes them into record batches with arrow-json, vectorized.
//!
//! In: lines of JSON objects (blank lines ignored, `\r\n` accepted). Out:
//! batches of up to `batch_size` rows in the table's physical schema.
//!
//! Lines are read in chunks of `batch_size` on the source thread and decoded
//! on worker threads (results are taken back in chunk order, so rows keep
//! their input order). Fast path: a whole chunk goes through one arrow-json
//! decoder.
//! If the chunk holds a malformed line (not JSON, not an object, a value of
//! the wrong type, a missing NOT NULL field), the chunk is re-checked line by
//! line: each bad line is reported with its source, line number and reason
//! and skipped, and the good lines are decoded together. A bad line never
//! stops the job.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::json::reader::{Decoder, ReaderBuilder};
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::source::{SourceContext, SourceReader};
use eddy_engine::Result as EngineResult;

use crate::error::ConnectorError;

/// A chunk of input lines: the bytes (each line ending in `\n`) and, per
/// line, its number and byte range.
struct Chunk {
    bytes: Vec<u8>,
    lines: Vec<(u64, usize, usize)>,
}

/// A decoded chunk: its rows, and the bad lines found (location, reason).
struct Decoded {
    batch: Result<Option<RecordBatch>, ConnectorError>,
    bad: Vec<(String, String)>,
}

/// Decodes chunks on worker threads; results come back in chunk order.
struct DecodePool {
    jobs: Vec<SyncSender<Chunk>>,
    results: Vec<Receiver<Decoded>>,
    next_job: usize,
    next_result: usize,
    in_flight: usize,
}

impl DecodePool {
    fn new(workers: usize, schema: SchemaRef, location: String) -> Self {
        let mut jobs = Vec::with_capacity(workers);
        let mut results = Vec::with_capacity(workers);
        for i in 0..workers {
            let (job_tx, job_rx) = sync_channel::<Chunk>(1);
            let (result_tx, result_rx) = sync_channel::<Decoded>(1);
            let (schema, location) = (schema.clone(), location.clone());
            let spawned = std::thread::Builder::new().name(format!("eddy-decode-{i}")).spawn(move || {
                while let Ok(chunk) = job_rx.recv() {
                    if result_tx.send(decode(&schema, &location, &chunk)).is_err() {
                        return;
                    }
                }
            });
            if spawned.is_ok() {
                jobs.push(job_tx);
                results.push(result_rx);
            }
        }
        Self { jobs, results, next_job: 0, next_result: 0, in_flight: 0 }
    }

    fn capacity(&self) -> usize {
        self.jobs.len()
    }
}

/// Reads NDJSON from any buffered reader.
pub struct NdjsonSource {
    reader: BufReader<Box<dyn Read + Send>>,
    /// File path or `stdin`, used in bad-row reports.
    location: String,
    schema: SchemaRef,
    batch_size: usize,
    line_number: u64,
    line: Vec<u8>,
    finished: bool,
    /// A pipe or stdin: never wait for a full batch while nothing more is buffered.
    live: bool,
    pool: Option<DecodePool>,
}

impl NdjsonSource {
    /// A source decoding `reader` into `schema`, `batch_size` rows at a
    /// time, on `decode_threads` worker threads (0 or 1: on the caller's).
    /// A `live` input (stdin, a pipe) hands on what it has instead of waiting
    /// for full batches.
    pub fn new(
        reader: BufReader<Box<dyn Read + Send>>,
        location: String,
        schema: SchemaRef,
        batch_size: usize,
        decode_threads: usize,
        live: bool,
    ) -> Self {
        let pool = (decode_threads > 1).then(|| DecodePool::new(decode_threads, schema.clone(), location.clone()));
        Self {
            reader,
            location,
            schema,
            batch_size: batch_size.max(1),
            line_number: 0,
            line: Vec::new(),
            finished: false,
            live,
            pool: pool.filter(|p| p.capacity() > 0),
        }
    }

    /// Reads up to `batch_size` non-blank lines; from a live input, fewer
    /// when nothing more is buffered, so a pipe or stdin is not held back
    /// waiting for a full batch.
    fn read_chunk(&mut self) -> Result<Chunk, ConnectorError> {
        let mut chunk = Chunk { bytes: Vec::new(), lines: Vec::with_capacity(self.batch_size.min(1 << 16)) };
        while chunk.lines.len() < self.batch_size {
            if self.live && !chunk.lines.is_empty() && self.reader.buffer().is_empty() {
                break;
            }
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
            let start = chunk.bytes.len();
            chunk.bytes.extend_from_slice(text);
            chunk.bytes.push(b'\n');
            chunk.lines.push((self.line_number, start, chunk.bytes.len()));
        }
        Ok(chunk)
    }
}

fn new_decoder(schema: &SchemaRef, batch_size: usize) -> Result<Decoder, ConnectorError> {
    Ok(ReaderBuilder::new(schema.clone()).with_batch_size(batch_size.max(1)).build_decoder()?)
}

/// Decodes a chunk: in one go when every line is good, else line by line,
/// collecting the bad lines.
fn decode(schema: &SchemaRef, location: &str, chunk: &Chunk) -> Decoded {
    let fast = || -> Result<Option<RecordBatch>, ConnectorError> {
        let mut decoder = new_decoder(schema, chunk.lines.len())?;
        decode_all(&mut decoder, &chunk.bytes)?;
        Ok(decoder.flush()?)
    };
    if let Ok(batch) = fast() {
        return Decoded { batch: Ok(batch), bad: Vec::new() };
    }
    let mut bad = Vec::new();
    let mut good = Vec::with_capacity(chunk.bytes.len());
    let mut good_lines = 0;
    for &(number, start, end) in &chunk.lines {
        let line = &chunk.bytes[start..end];
        let verdict = new_decoder(schema, 1)
            .map_err(|e| datafusion::arrow::error::ArrowError::ExternalError(Box::new(e)))
            .and_then(|mut probe| decode_all(&mut probe, line).and_then(|_| probe.flush()));
        match verdict {
            Ok(_) => {
                good.extend_from_slice(line);
                good_lines += 1;
            }
            Err(e) => bad.push((format!("{location}:{number}"), clean_reason(&e.to_string()))),
        }
    }
    if good_lines == 0 {
        return Decoded { batch: Ok(None), bad };
    }
    let batch = new_decoder(schema, good_lines).and_then(|mut decoder| {
        decode_all(&mut decoder, &good)?;
        Ok(decoder.flush()?)
    });
    Decoded { batch, bad }
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

impl NdjsonSource {
    /// The next decoded chunk, in input order; `None` at the end.
    fn next_decoded(&mut self) -> Result<Option<Decoded>, ConnectorError> {
        let Some(mut pool) = self.pool.take() else {
            if self.finished {
                return Ok(None);
            }
            let chunk = self.read_chunk()?;
            return Ok(Some(decode(&self.schema, &self.location, &chunk)));
        };
        let result = (|| {
            while pool.in_flight < pool.capacity() && !self.finished {
                // Do not block reading a live input while decoded rows wait.
                if self.live && pool.in_flight > 0 && self.reader.buffer().is_empty() {
                    break;
                }
                let chunk = self.read_chunk()?;
                if chunk.lines.is_empty() {
                    continue;
                }
                pool.jobs[pool.next_job]
                    .send(chunk)
                    .map_err(|_| ConnectorError::bad_option("decode", "a decode worker stopped"))?;
                pool.next_job = (pool.next_job + 1) % pool.capacity();
                pool.in_flight += 1;
            }
            if pool.in_flight == 0 {
                return Ok(None);
            }
            let decoded = pool.results[pool.next_result]
                .recv()
                .map_err(|_| ConnectorError::bad_option("decode", "a decode worker stopped"))?;
            pool.next_result = (pool.next_result + 1) % pool.capacity();
            pool.in_flight -= 1;
            Ok(Some(decoded))
        })();
        self.pool = Some(pool);
        result
    }
}

impl SourceReader for NdjsonSource {
    fn next_batch(&mut self, ctx: &mut SourceContext) -> EngineResult<Option<RecordBatch>> {
        let table = ctx.table().to_string();
        loop {
            let Some(decoded) = self.next_decoded().map_err(|e| e.for_table(&table))? else {
                return Ok(None);
            };
            for (location, reason) in &decoded.bad {
                ctx.bad_row(location, reason);
            }
            if let Some(batch) = decoded.batch.map_err(|e| e.for_table(&table))?.filter(|b| b.num_rows() > 0) {
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

    fn read_all(text: &str, batch_size: usize, threads: usize) -> (Vec<RecordBatch>, u64) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("amount", DataType::Float64, true),
        ]));
        let reader: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(text.as_bytes().to_vec()));
        let reader = BufReader::with_capacity(7, reader);
        let mut source = NdjsonSource::new(reader, "t.ndjson".into(), schema, batch_size, threads, threads > 1);
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
        for threads in [1, 3] {
            for size in [1, 2, 3, 100] {
                let (batches, bad) = read_all(text, size, threads);
                let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
                assert_eq!(rows, 2, "batch size {size}, {threads} threads");
                assert_eq!(bad, 3, "batch size {size}, {threads} threads");
                let ids: Vec<String> = batches
                    .iter()
                    .flat_map(|b| {
                        let ids = datafusion::arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
                        let ids = ids.as_any().downcast_ref::<datafusion::arrow::array::StringArray>().unwrap().clone();
                        ids.iter().map(|v| v.unwrap_or_default().to_string()).collect::<Vec<_>>()
                    })
                    .collect();
                assert_eq!(ids, vec!["a", "c"], "rows keep their input order");
            }
        }
    }
}
