//! The stdout sink: one `TAG> {json}` line per row (`TAG> +U {json}` for
//! an updating result, the row's kind as Flink's print connector shows it) (`tag` option, default
//! the upper-cased table name; JSON spaced like Python's `json.dumps`;
//! NULL fields left out with `omit_nulls = 'true'`), written whole under the
//! stdout lock so lines of concurrently running sinks never interleave.
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

/// Prints `TAG> {json}` lines.
pub struct StdoutSink {
    table: String,
    tag: String,
    explicit_nulls: bool,
    /// Print Debezium change events (instead of rows with their kind).
    debezium: bool,
    target: StdoutTarget,
    scratch: Vec<u8>,
    text: Vec<u8>,
}

impl StdoutSink {
    /// A stdout sink for `table` printing with `tag`; NULL fields are
    /// printed as `null` when `lines.explicit_nulls`, left out otherwise;
    /// with `format = 'debezium-json'` each line is a Debezium change event.
    pub fn new(table: &str, tag: String, lines: JsonLines, target: StdoutTarget) -> Self {
        Self {
            table: table.to_string(),
            tag,
            explicit_nulls: lines.explicit_nulls,
            debezium: lines.envelope == Envelope::Debezium,
            target,
            scratch: Vec::new(),
            text: Vec::new(),
        }
    }
}

impl SinkWriter for StdoutSink {
    fn write(&mut self, batch: &RecordBatch) -> EngineResult<()> {
        if matches!(self.target, StdoutTarget::Discard) {
            return Ok(());
        }
        self.scratch.clear();
        self.text.clear();
        // An updating result's lines show each row's kind after the tag,
        // or are Debezium change events.
        let kinds = if self.debezium {
            JsonLines {
                explicit_nulls: self.explicit_nulls,
                envelope: Envelope::Debezium,
            }
            .encode(batch, &mut self.scratch)
            .map_err(|e| e.for_table(&self.table))?;
            None
        } else {
            let data = changelog::data_columns(batch)
                .map_err(|e| ConnectorError::from(e).for_table(&self.table))?;
            encode_json_lines_with(&data, &mut self.scratch, self.explicit_nulls)
                .map_err(|e| e.for_table(&self.table))?;
            kind_prefixes(batch)
        };
        let mut start = 0;
        let mut row = 0;
        let ends = memchr::memchr_iter(b'\n', &self.scratch).chain([self.scratch.len()]);
        for end in ends {
            let line = &self.scratch[start..end];
            start = end + 1;
            if line.is_empty() {
                continue;
            }
            self.text.extend_from_slice(self.tag.as_bytes());
            self.text.extend_from_slice(b"> ");
            if let Some(kind) = kinds.as_ref().and_then(|k| k.get(row)) {
                self.text.extend_from_slice(kind.as_bytes());
                self.text.push(b' ');
            }
            row += 1;
            spaced_json(line, &mut self.text);
            self.text.push(b'\n');
        }
        let io = |source| {
            ConnectorError::Io {
                path: "stdout".into(),
                source,
            }
            .for_table(&self.table)
        };
        match &self.target {
            StdoutTarget::Process => {
                let mut out = std::io::stdout().lock();
                out.write_all(&self.text).map_err(io)?;
                out.flush().map_err(io)?;
            }
            StdoutTarget::Buffer(buffer) => {
                if let Ok(mut buffer) = buffer.lock() {
                    buffer.extend_from_slice(&self.text);
                }
            }
            StdoutTarget::Discard => {}
        }
        Ok(())
    }

    fn finish(&mut self) -> EngineResult<()> {
        Ok(())
    }
}
