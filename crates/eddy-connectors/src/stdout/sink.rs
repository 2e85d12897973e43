//! The stdout sink: one `TAG> {json}` line per row (`TAG> +U {json}` for
//! an updating result, the row's kind as Flink's print connector shows it) (`tag` option, default
//! the upper-cased table name; JSON spaced like Python's `json.dumps`;
//! NULL fields left out with `omit_nulls = 'true'`), written whole under the
//! stdout lock so lines of concurrently running sinks never interleave.
//! Batches are encoded on the process's encoding threads and printed in
//! order ([`crate::sinks::encoding`]); a sink drains them when it flushes
//! and finishes.
//!
//! Stdout cannot take back what it printed: with checkpoints, a job that
//! crashes and resumes prints the rows after its last checkpoint again
//! (at-least-once). Use a file sink for exactly-once output.

use std::io::Write;
use std::sync::{Arc, Mutex};

use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::sink::SinkWriter;
use eddy_engine::Result as EngineResult;

use crate::error::ConnectorError;
use crate::json_lines::{encode_json_lines_with, spaced_json};
use crate::sinks::changelog::{kind_prefixes, Envelope, JsonLines};
use crate::sinks::encoding::{Encode, LineOutput, OrderedEncoder};
use eddy_engine::changelog;

/// Where stdout sinks print.
#[derive(Debug, Clone, Default)]
pub enum StdoutTarget {
    /// The process's standard output.
    #[default]
    Process,
    /// An in-memory buffer (tests; the SQL shell reads a query's rows from it).
    Buffer(Arc<Mutex<Vec<u8>>>),
    /// Nowhere: the rows are only counted (and seen by a server's tail).
    Discard,
}

/// Prints `TAG> {json}` lines, encoding batches in parallel
/// ([`crate::sinks::encoding`]).
pub struct StdoutSink {
    table: String,
    /// `None` when the rows go nowhere.
    encoder: Option<OrderedEncoder<StdoutOutput>>,
}

/// Where the encoded lines go.
struct StdoutOutput(StdoutTarget);

impl LineOutput for StdoutOutput {
    fn write_bytes(&mut self, bytes: &[u8]) -> crate::error::Result<()> {
        let io = |source| ConnectorError::Io {
            path: "stdout".into(),
            source,
        };
        match &self.0 {
            StdoutTarget::Process => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes).map_err(io)?;
                out.flush().map_err(io)?;
            }
            StdoutTarget::Buffer(buffer) => {
                if let Ok(mut buffer) = buffer.lock() {
                    buffer.extend_from_slice(bytes);
                }
            }
            StdoutTarget::Discard => {}
        }
        Ok(())
    }
}

impl StdoutSink {
    /// A stdout sink for `table` printing with `tag`; NULL fields are
    /// printed as `null` when `lines.explicit_nulls`, left out otherwise;
    /// with `format = 'debezium-json'` each line is a Debezium change event.
    pub fn new(table: &str, tag: String, lines: JsonLines, target: StdoutTarget) -> Self {
        let encoder = match target {
            StdoutTarget::Discard => None,
            target => {
                let encode: Encode =
                    Arc::new(move |batch, text| tagged_lines(batch, &tag, lines, text));
                Some(OrderedEncoder::new(StdoutOutput(target), encode))
            }
        };
        Self {
            table: table.to_string(),
            encoder,
        }
    }
}

/// Appends `batch`'s `TAG> {json}` lines to `text`.
fn tagged_lines(
    batch: &RecordBatch,
    tag: &str,
    lines: JsonLines,
    text: &mut Vec<u8>,
) -> crate::error::Result<()> {
    // The compact lines are shorter than the spaced ones `text` held last
    // time (its buffer is recycled): sized so, they never grow by copying.
    let mut scratch = Vec::with_capacity((batch.num_rows() * 64).max(text.capacity()));
    // An updating result's lines show each row's kind after the tag,
    // or are Debezium change events.
    let kinds = if lines.envelope == Envelope::Debezium {
        lines.encode(batch, &mut scratch)?;
        None
    } else {
        let data = changelog::data_columns(batch)?;
        encode_json_lines_with(&data, &mut scratch, lines.explicit_nulls)?;
        kind_prefixes(batch)
    };
    let mut start = 0;
    let mut row = 0;
    let ends = memchr::memchr_iter(b'\n', &scratch).chain([scratch.len()]);
    for end in ends {
        let line = &scratch[start..end];
        start = end + 1;
        if line.is_empty() {
            continue;
        }
        text.extend_from_slice(tag.as_bytes());
        text.extend_from_slice(b"> ");
        if let Some(kind) = kinds.as_ref().and_then(|k| k.get(row)) {
            text.extend_from_slice(kind.as_bytes());
            text.push(b' ');
        }
        row += 1;
        spaced_json(line, text);
        text.push(b'\n');
    }
    Ok(())
}

impl SinkWriter for StdoutSink {
    fn write(&mut self, batch: &RecordBatch) -> EngineResult<()> {
        match &mut self.encoder {
            Some(encoder) => encoder
                .write(batch.clone())
                .map_err(|e| e.for_table(&self.table)),
            None => Ok(()),
        }
    }

    fn flush(&mut self) -> EngineResult<()> {
        match &mut self.encoder {
            Some(encoder) => encoder.drain().map_err(|e| e.for_table(&self.table)),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> EngineResult<()> {
        self.flush()
    }
}
