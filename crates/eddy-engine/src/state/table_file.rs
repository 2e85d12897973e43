//! A snapshot's table written to a local file a chunk at a time, for state
//! larger than memory: an operator whose state is partly on disk (spilled)
//! streams it into the file while it takes the snapshot, so the snapshot
//! never holds that state in memory.
//!
//! In: the table's batches, one after another ([`TableFileWriter`]). Out: a
//! [`TableFile`] in the snapshot ([`super::StateSnapshot::files`]): an
//! Arrow IPC file in the checkpoint store's own format, already counted
//! and checksummed, which the store links (or copies) into the checkpoint
//! instead of writing the rows again. Anything else that reads the
//! snapshot in memory (a restore in the same process, a test) reads the
//! file back whole. The file is removed when the last snapshot holding it
//! is dropped.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::Int64Array;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::state::table_file::TableFileWriter;
//! use eddy_engine::state::StateSnapshot;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, false)]));
//! let mut file = TableFileWriter::create(dir.path(), "rows", &schema).unwrap();
//! for chunk in [vec![1, 2], vec![3]] {
//!     let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(chunk))]);
//!     file.write(&batch.unwrap()).unwrap();
//! }
//! let mut snapshot = StateSnapshot::default();
//! snapshot.files.push(file.finish().unwrap());
//! assert_eq!(snapshot.take_table("rows").unwrap().num_rows(), 3);
//! ```

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::arrow::record_batch::RecordBatch;

use crate::checkpoint::TableWriter;
use crate::error::{EngineError, Result};
use crate::state::declared::TableSpec;

/// Rows a streamed table's chunk holds at most: an operator builds a chunk
/// of its checkpoint table up to this many rows ...
pub const CHUNK_ROWS: usize = 16 * 1024;
/// ... or this many bytes of row data, then writes it to the file.
pub const CHUNK_BYTES: usize = 4 << 20;

/// A checkpoint table built entry by entry (an operator's own builder:
/// key, row bytes, counts), for [`ChunkedTableFile`].
pub trait TableChunk: Default {
    /// Rows pushed so far, and bytes of row data they hold.
    fn size(&self) -> (usize, usize);
    /// The rows pushed, as a batch of the table `spec`.
    fn finish(self, spec: &TableSpec) -> Result<RecordBatch>;
}

/// A table file filled through a [`TableChunk`] builder, written out each
/// time the chunk reaches [`CHUNK_ROWS`] rows or [`CHUNK_BYTES`] bytes:
/// what an operator with spilled state checkpoints its stored entries,
/// then its memory's, through.
pub struct ChunkedTableFile<'s, C> {
    file: TableFileWriter,
    spec: &'s TableSpec,
    chunk: C,
}

impl<'s, C: TableChunk> ChunkedTableFile<'s, C> {
    /// Fills `file` with rows of the table `spec`.
    pub fn new(file: TableFileWriter, spec: &'s TableSpec) -> Self {
        Self {
            file,
            spec,
            chunk: C::default(),
        }
    }

    /// Pushes rows with `push`, writing the chunk out once it is full.
    pub fn push(&mut self, push: impl FnOnce(&mut C)) -> Result<()> {
        push(&mut self.chunk);
        let (rows, bytes) = self.chunk.size();
        if rows >= CHUNK_ROWS || bytes >= CHUNK_BYTES {
            let full = std::mem::take(&mut self.chunk);
            self.file.write(&full.finish(self.spec)?)?;
        }
        Ok(())
    }

    /// The finished file, the last chunk written.
    pub fn finish(mut self) -> Result<TableFile> {
        self.file.write(&self.chunk.finish(self.spec)?)?;
        self.file.finish()
    }
}

/// A table of a snapshot that is already a file.
#[derive(Debug, Clone)]
pub struct TableFile {
    /// The table's name in the snapshot.
    pub name: String,
    pub schema: SchemaRef,
    /// The file, removed when the last holder drops it.
    pub path: Arc<tempfile::TempPath>,
    pub bytes: u64,
    pub crc32: u32,
    pub rows: u64,
}

impl TableFile {
    /// The rows, read back whole.
    pub fn read(&self) -> Result<RecordBatch> {
        let path: &Path = self.path.as_ref();
        let failed = |e: &dyn std::fmt::Display| {
            EngineError::State(format!(
                "cannot read the state table file {}: {e}",
                path.display()
            ))
        };
        let file = File::open(path).map_err(|e| failed(&e))?;
        let reader = FileReader::try_new(BufReader::new(file), None).map_err(|e| failed(&e))?;
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| failed(&e))?;
        Ok(concat_batches(&self.schema, &batches)?)
    }
}

/// Writes a [`TableFile`] a batch at a time.
pub struct TableFileWriter {
    name: String,
    schema: SchemaRef,
    path: tempfile::TempPath,
    writer: TableWriter,
}

impl TableFileWriter {
    /// A new file in `dir` for the table `name` of rows laid out as
    /// `schema`.
    pub fn create(dir: &Path, name: &str, schema: &SchemaRef) -> Result<Self> {
        let path = tempfile::Builder::new()
            .prefix("snapshot-")
            .suffix(".arrow")
            .tempfile_in(dir)
            .map_err(|e| {
                EngineError::State(format!(
                    "cannot create a state table file in {}: {e}",
                    dir.display()
                ))
            })?
            .into_temp_path();
        let writer = TableWriter::create(&path, schema)?;
        Ok(Self {
            name: name.to_string(),
            schema: schema.clone(),
            path,
            writer,
        })
    }

    /// Appends `batch` (laid out as the table's schema).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if batch.schema().fields() != self.schema.fields() {
            return Err(EngineError::State(format!(
                "state table {}: a batch of another layout than the table's",
                self.name
            )));
        }
        self.writer.write(batch)
    }

    /// The finished file.
    pub fn finish(self) -> Result<TableFile> {
        let (bytes, crc32, rows) = self.writer.finish()?;
        Ok(TableFile {
            name: self.name,
            schema: self.schema,
            path: Arc::new(self.path),
            bytes,
            crc32,
            rows,
        })
    }
}
