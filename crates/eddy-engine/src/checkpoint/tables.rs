//! A checkpoint's state files: one Arrow IPC file per state table of a
//! node, checksummed as it is written and checked as it is read.
//!
//! In: a node's [`StateSnapshot`] tables (a keyed table written as
//! changes is a file of changed rows and one of removed keys). Out: the
//! files, and, read back through a manifest, every node's snapshot with
//! each keyed table whole again ([`super::changes::apply`]).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::arrow::ipc::writer::FileWriter;
use datafusion::arrow::record_batch::RecordBatch;

use super::changes::{self, Change};
use super::damage::Damage;
use super::io_error;
use super::manifest::{read_manifest, Manifest, ManifestFile, ManifestTable};
use super::{Checkpoint, NodeCheckpoint};
use crate::error::{EngineError, Result};
use crate::state::{StateSnapshot, StateTable};

/// Counts and checksums what passes through to the file.
struct ChecksumWriter<W: Write> {
    inner: W,
    crc: crc32fast::Hasher,
    bytes: u64,
}

impl<W: Write> Write for ChecksumWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub(super) fn write_table(path: &Path, batches: &[&RecordBatch]) -> Result<(u64, u32)> {
    let Some(first) = batches.first() else {
        return Err(EngineError::State(format!(
            "{}: a table without a batch",
            path.display()
        )));
    };
    let mut writer = TableWriter::create(path, &first.schema())?;
    for batch in batches {
        writer.write(batch)?;
    }
    let (bytes, crc, _) = writer.finish()?;
    Ok((bytes, crc))
}

/// A state table's file written a batch at a time: an Arrow IPC file,
/// counted and checksummed as it is written, synced when finished.
pub(crate) struct TableWriter {
    path: std::path::PathBuf,
    writer: FileWriter<ChecksumWriter<BufWriter<File>>>,
    rows: u64,
}

impl TableWriter {
    /// Creates (or empties) the file at `path` for rows of `schema`.
    pub(crate) fn create(path: &Path, schema: &SchemaRef) -> Result<Self> {
        let file = File::create(path).map_err(|e| io_error(path, e))?;
        let sink = ChecksumWriter {
            inner: BufWriter::with_capacity(1 << 16, file),
            crc: crc32fast::Hasher::new(),
            bytes: 0,
        };
        let writer = FileWriter::try_new(sink, schema).map_err(|e| io_error(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            writer,
            rows: 0,
        })
    }

    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.rows += batch.num_rows() as u64;
        self.writer
            .write(batch)
            .map_err(|e| io_error(&self.path, e))
    }

    /// Ends and syncs the file: its bytes, CRC-32 and rows.
    pub(crate) fn finish(mut self) -> Result<(u64, u32, u64)> {
        let path = self.path;
        self.writer.finish().map_err(|e| io_error(&path, e))?;
        let mut sink = self.writer.into_inner().map_err(|e| io_error(&path, e))?;
        sink.flush().map_err(|e| io_error(&path, e))?;
        let (bytes, crc) = (sink.bytes, sink.crc.finalize());
        let file = sink
            .inner
            .into_inner()
            .map_err(|e| io_error(&path, e.error()))?;
        file.sync_all().map_err(|e| io_error(&path, e))?;
        Ok((bytes, crc, self.rows))
    }
}

/// Reads and checks a checkpoint directory; the error says what is wrong.
pub(crate) fn read_checkpoint(dir: &Path) -> std::result::Result<(Manifest, Checkpoint), Damage> {
    let manifest = read_manifest(dir)?;
    let mut nodes = Vec::with_capacity(manifest.nodes.len());
    for node in &manifest.nodes {
        let mut tables = Vec::with_capacity(node.tables.len());
        for table in &node.tables {
            tables.push(StateTable {
                name: table.name.clone(),
                batch: read_whole(dir, table)?,
            });
        }
        nodes.push(NodeCheckpoint {
            runtime: node.runtime.clone(),
            state: StateSnapshot {
                meta: node.meta.clone(),
                tables,
                keyed: Vec::new(),
                files: Vec::new(),
            },
        });
    }
    let checkpoint = Checkpoint {
        id: manifest.checkpoint,
        kind: manifest.kind,
        nodes,
    };
    Ok((manifest, checkpoint))
}

/// A table as of the manifest in `dir`: its file, with a keyed table's
/// changes applied.
fn read_whole(dir: &Path, table: &ManifestTable) -> std::result::Result<RecordBatch, Damage> {
    let base = read_table(&table.file.path(dir), &table.file)?;
    let Some(keyed) = &table.keyed else {
        return Ok(base);
    };
    let changes = keyed
        .changes
        .iter()
        .map(|change| {
            Ok(Change {
                changed: read_table(&change.changed.path(dir), &change.changed)?,
                removed: change
                    .removed
                    .as_ref()
                    .map(|r| read_table(&r.path(dir), r))
                    .transpose()?,
            })
        })
        .collect::<std::result::Result<Vec<_>, Damage>>()?;
    changes::apply(base, changes, keyed.key_columns).map_err(|why| Damage::Changes {
        table: table.name.clone(),
        dir: dir.to_path_buf(),
        why,
    })
}

fn read_table(path: &Path, expected: &ManifestFile) -> std::result::Result<RecordBatch, Damage> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|f| BufReader::new(f).read_to_end(&mut bytes))
        .map_err(|source| Damage::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 != expected.bytes {
        return Err(Damage::Size {
            path: path.to_path_buf(),
            found: bytes.len() as u64,
            written: expected.bytes,
        });
    }
    if crc32fast::hash(&bytes) != expected.crc32 {
        return Err(Damage::Checksum {
            path: path.to_path_buf(),
        });
    }
    let table = |source| Damage::Table {
        path: path.to_path_buf(),
        source,
    };
    let reader = FileReader::try_new(std::io::Cursor::new(bytes), None).map_err(table)?;
    let schema = reader.schema();
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(table)?;
    let batch = concat_batches(&schema, &batches).map_err(table)?;
    if batch.num_rows() as u64 != expected.rows {
        return Err(Damage::Rows {
            path: path.to_path_buf(),
            found: batch.num_rows(),
            written: expected.rows,
        });
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table pushed as several batches (a pending buffer, shared rather
    /// than copied at the snapshot) is one file, read back as one batch.
    #[test]
    fn a_table_of_several_batches_is_one_file_read_back_whole() {
        use datafusion::arrow::array::Int64Array;
        use datafusion::arrow::datatypes::{DataType, Field, Schema};
        let schema =
            std::sync::Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let batch = |values: Vec<i64>| {
            RecordBatch::try_new(
                schema.clone(),
                vec![std::sync::Arc::new(Int64Array::from(values))],
            )
            .unwrap()
        };
        let mut snapshot = StateSnapshot::default();
        snapshot.push_batches(
            "pending",
            &schema,
            vec![batch(vec![1, 2]), batch(vec![3]), batch(vec![4, 5])],
        );
        snapshot.push_batches("empty", &schema, Vec::new());
        assert_eq!(
            snapshot.tables.len(),
            4,
            "shared as they are: three batches and an empty one"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n000-pending.arrow");
        let parts: Vec<&RecordBatch> = snapshot
            .tables
            .iter()
            .filter(|t| t.name == "pending")
            .map(|t| &t.batch)
            .collect();
        let (bytes, crc32) = write_table(&path, &parts).unwrap();
        let read = read_table(
            &path,
            &ManifestFile {
                dir: None,
                file: String::new(),
                bytes,
                crc32,
                rows: 5,
            },
        )
        .unwrap();
        let values = read
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(values.values().to_vec(), vec![1, 2, 3, 4, 5]);
        // In memory, taking the table gives the batches as one too.
        assert_eq!(snapshot.take_table("pending").unwrap().num_rows(), 5);
        assert_eq!(snapshot.take_table("empty").unwrap().num_rows(), 0);
        assert!(snapshot.take_table("pending").is_err());
    }
}
