//! Sinks: tagged lines on stdout, NDJSON files, Parquet files.
//!
//! In: result batches in the sink table's schema. Out:
//! - stdout: one `TAG> {json}` line per row (`tag` option, default the
//!   upper-cased table name; JSON spaced like Python's `json.dumps`),
//!   written whole under the stdout lock so lines of
//!   concurrently running sinks never interleave;
//! - ndjson: one JSON object per line in a file, flushed at the end;
//!   (both text sinks leave NULL fields out with `omit_nulls = 'true'`)
//! - parquet: one Parquet file (`part-00000.parquet`) in a directory;
//! - blackhole: discards rows (benchmarks).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use eddy_engine::sink::SinkWriter;
use eddy_engine::Result as EngineResult;

use crate::error::{ConnectorError, Result};
use crate::json_lines::{encode_json_lines_with, spaced_json};

/// Where stdout sinks print.
#[derive(Debug, Clone, Default)]
pub enum StdoutTarget {
    /// The process's standard output.
    #[default]
    Process,
    /// An in-memory buffer (tests, the HTTP server).
    Buffer(Arc<Mutex<Vec<u8>>>),
}

/// Prints `TAG> {json}` lines.
pub struct StdoutSink {
    table: String,
    tag: String,
    explicit_nulls: bool,
    target: StdoutTarget,
    scratch: Vec<u8>,
    text: Vec<u8>,
}

impl StdoutSink {
    /// A stdout sink for `table` printing with `tag`; NULL fields are
    /// printed as `null` when `explicit_nulls`, left out otherwise.
    pub fn new(table: &str, tag: String, explicit_nulls: bool, target: StdoutTarget) -> Self {
        Self { table: table.to_string(), tag, explicit_nulls, target, scratch: Vec::new(), text: Vec::new() }
    }
}

impl SinkWriter for StdoutSink {
    fn write(&mut self, batch: &RecordBatch) -> EngineResult<()> {
        self.scratch.clear();
        self.text.clear();
        encode_json_lines_with(batch, &mut self.scratch, self.explicit_nulls).map_err(|e| e.for_table(&self.table))?;
        for line in self.scratch.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            self.text.extend_from_slice(self.tag.as_bytes());
            self.text.extend_from_slice(b"> ");
            spaced_json(line, &mut self.text);
            self.text.push(b'\n');
        }
        let io = |source| ConnectorError::Io { path: "stdout".into(), source }.for_table(&self.table);
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
        }
        Ok(())
    }

    fn finish(&mut self) -> EngineResult<()> {
        Ok(())
    }
}

fn create_file(path: &Path) -> Result<File> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|source| ConnectorError::Io { path: parent.display().to_string(), source })?;
    }
    File::create(path).map_err(|source| ConnectorError::Io { path: path.display().to_string(), source })
}

/// Writes JSON lines to a file.
pub struct NdjsonSink {
    table: String,
    explicit_nulls: bool,
    path: PathBuf,
    out: BufWriter<File>,
    scratch: Vec<u8>,
}

impl NdjsonSink {
    /// Creates (truncates) `path`; NULL fields as in [`StdoutSink::new`].
    pub fn create(table: &str, path: PathBuf, explicit_nulls: bool) -> Result<Self> {
        let out = BufWriter::new(create_file(&path)?);
        Ok(Self { table: table.to_string(), explicit_nulls, path, out, scratch: Vec::new() })
    }

    fn io(&self, source: std::io::Error) -> eddy_engine::EngineError {
        ConnectorError::Io { path: self.path.display().to_string(), source }.for_table(&self.table)
    }
}

impl SinkWriter for NdjsonSink {
    fn write(&mut self, batch: &RecordBatch) -> EngineResult<()> {
        self.scratch.clear();
        encode_json_lines_with(batch, &mut self.scratch, self.explicit_nulls).map_err(|e| e.for_table(&self.table))?;
        let result = self.out.write_all(&self.scratch);
        result.map_err(|e| self.io(e))
    }

    fn finish(&mut self) -> EngineResult<()> {
        let result = self.out.flush();
        result.map_err(|e| self.io(e))
    }
}

/// Writes a Parquet file into a directory.
pub struct ParquetSink {
    table: String,
    writer: Option<ArrowWriter<File>>,
}

impl ParquetSink {
    /// Creates `dir/part-00000.parquet`.
    pub fn create(table: &str, dir: &Path, schema: SchemaRef) -> Result<Self> {
        let file = create_file(&dir.join("part-00000.parquet"))?;
        let writer = ArrowWriter::try_new(file, schema, None)?;
        Ok(Self { table: table.to_string(), writer: Some(writer) })
    }
}

impl SinkWriter for ParquetSink {
    fn write(&mut self, batch: &RecordBatch) -> EngineResult<()> {
        if let Some(writer) = self.writer.as_mut() {
            writer.write(batch).map_err(|e| ConnectorError::from(e).for_table(&self.table))?;
        }
        Ok(())
    }

    fn finish(&mut self) -> EngineResult<()> {
        if let Some(writer) = self.writer.take() {
            writer.close().map_err(|e| ConnectorError::from(e).for_table(&self.table))?;
        }
        Ok(())
    }
}

/// Discards rows (benchmarks); the sink node still counts them.
#[derive(Debug, Default)]
pub struct BlackholeSink;

impl SinkWriter for BlackholeSink {
    fn write(&mut self, _batch: &RecordBatch) -> EngineResult<()> {
        Ok(())
    }

    fn finish(&mut self) -> EngineResult<()> {
        Ok(())
    }
}
