//! Decoding chunks of NDJSON lines into record batches.
//!
//! In: a [`Chunk`] (lines with their numbers and byte ranges, plus the
//! reader's position after the chunk). Out: a [`Decoded`] chunk: its rows
//! in the table's physical schema and the bad lines found (location,
//! reason), with the position carried along.
//!
//! Fast path: a whole chunk goes through one arrow-json decoder. If the
//! chunk holds a malformed line (not JSON, not an object, a value of the
//! wrong type, a missing NOT NULL field), it is re-checked line by line:
//! each bad line is reported and skipped, and the good lines are decoded
//! together. [`DecodePool`] runs this on worker threads; results come back
//! in chunk order, so rows keep their input order.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::json::reader::{Decoder, ReaderBuilder};
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::ConnectorError;

/// Where a reader stands: the byte offset and number of the next line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinePosition {
    /// Bytes consumed.
    pub offset: u64,
    /// Lines consumed (the next line is `line + 1`).
    pub line: u64,
}

/// A chunk of input lines: the bytes (each line ending in `\n`) and, per
/// line, its number and byte range.
pub struct Chunk {
    /// The lines' bytes.
    pub bytes: Vec<u8>,
    /// (line number, start, end) of each line in `bytes`.
    pub lines: Vec<(u64, usize, usize)>,
    /// The reader's position after the chunk.
    pub end: LinePosition,
}

/// A decoded chunk: its rows, the bad lines found (location, reason), and
/// the reader's position after it.
pub struct Decoded {
    /// The good rows (`None` when there were none).
    pub batch: Result<Option<RecordBatch>, ConnectorError>,
    /// Bad lines: location (`path:line`) and reason.
    pub bad: Vec<(String, String)>,
    /// Position after the chunk.
    pub end: LinePosition,
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
    /// Starts `workers` decoding threads (fewer if threads cannot start).
    pub fn new(workers: usize, schema: SchemaRef, location: String) -> Self {
        let mut jobs = Vec::with_capacity(workers);
        let mut results = Vec::with_capacity(workers);
        for i in 0..workers {
            let (job_tx, job_rx) = sync_channel::<Chunk>(1);
            let (result_tx, result_rx) = sync_channel::<Decoded>(1);
            let (schema, location) = (schema.clone(), location.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("eddy-decode-{i}"))
                .spawn(move || {
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

fn new_decoder(schema: &SchemaRef, batch_size: usize) -> Result<Decoder, ConnectorError> {
    Ok(ReaderBuilder::new(schema.clone())
        .with_batch_size(batch_size.max(1))
        .build_decoder()?)
}

/// Decodes a chunk: in one go when every line is good, else line by line,
/// collecting the bad lines.
pub fn decode(schema: &SchemaRef, location: &str, chunk: &Chunk) -> Decoded {
    let fast = || -> Result<Option<RecordBatch>, ConnectorError> {
        let mut decoder = new_decoder(schema, chunk.lines.len())?;
        decode_all(&mut decoder, &chunk.bytes)?;
        Ok(decoder.flush()?)
    };
    if let Ok(batch) = fast() {
        return Decoded {
            batch: Ok(batch),
            bad: Vec::new(),
            end: chunk.end,
        };
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
        return Decoded {
            batch: Ok(None),
            bad,
            end: chunk.end,
        };
    }
    let batch = new_decoder(schema, good_lines).and_then(|mut decoder| {
        decode_all(&mut decoder, &good)?;
        Ok(decoder.flush()?)
    });
    Decoded {
        batch,
        bad,
        end: chunk.end,
    }
}

fn decode_all(
    decoder: &mut Decoder,
    mut bytes: &[u8],
) -> Result<(), datafusion::arrow::error::ArrowError> {
    while !bytes.is_empty() {
        let used = decoder.decode(bytes)?;
        if used == 0 {
            break;
        }
        bytes = &bytes[used..];
    }
    if decoder.has_partial_record() {
        return Err(datafusion::arrow::error::ArrowError::JsonError(
            "incomplete JSON object".into(),
        ));
    }
    Ok(())
}

fn clean_reason(reason: &str) -> String {
    reason
        .trim_start_matches("Json error: ")
        .trim_start_matches("Parser error: ")
        .to_string()
}
