//! Writing rows as a Delta table's data files: one open Parquet file per
//! partition, rolled at the target size.
//!
//! In: batches in the sink's schema (partition columns included). Out:
//! closed [`DataFile`]s under the table directory, named
//! `<partition>/part-<seq>-<stem>.zstd.parquet`, ready to be added by a
//! commit. The stream's appends, a merge's rewritten files and a
//! compaction's bin-packed ones are all written here.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::Int64Array;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use datafusion::parquet::basic::Compression;
//! use eddy_connectors::delta::files::DataFileWriter;
//! use eddy_connectors::sinks::partition::PartitionBy;
//!
//! let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
//! let dir = tempfile::tempdir().unwrap();
//! let mut writer = DataFileWriter::new(dir.path(), &schema, PartitionBy::None, Compression::SNAPPY, None, u64::MAX, "run1".into());
//! writer.write(&RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2]))]).unwrap()).unwrap();
//! let files = writer.finish().unwrap();
//! assert_eq!(files[0].rows, 2);
//! assert!(files[0].path.ends_with("-run1.zstd.parquet"));
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::basic::Compression;
use serde::{Deserialize, Serialize};

use super::log::{self, Action, Add};
use super::schema;
use super::stats::FileStats;
use crate::error::Result;
use crate::sinks::format::{FileFormat, FormatWriter, ParquetFormat};
use crate::sinks::partition::{directory_values, PartitionBy};
use crate::sinks::target::Spool;
use crate::sinks::{create_file, io_error};
use crate::storage::{Bucket, Location};

/// A file written, ready to be added to the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFile {
    /// Relative to the table directory (not URL-encoded).
    pub path: String,
    /// Partition values.
    pub partition_values: BTreeMap<String, Option<String>>,
    /// Bytes.
    pub size: i64,
    /// Rows.
    pub rows: u64,
    /// Its statistics (`stats` of its `add`); `None`: the row count only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
}

impl DataFile {
    /// The `add` action of the file (`data_change`: false for a
    /// compaction, which moves rows without changing the table).
    pub fn add(&self, now: i64, data_change: bool) -> Action {
        Action::Add(Add {
            path: log::encode_path(&self.path),
            partition_values: self.partition_values.clone(),
            size: self.size,
            modification_time: now,
            data_change,
            stats: Some(
                self.stats
                    .clone()
                    .unwrap_or_else(|| format!("{{\"numRecords\":{}}}", self.rows)),
            ),
            deletion_vector: None,
        })
    }
}

struct OpenFile {
    path: String,
    partition_values: BTreeMap<String, Option<String>>,
    writer: Box<dyn FormatWriter>,
    rows: u64,
    stats: FileStats,
}

/// Writes batches as data files. See the module docs.
pub struct DataFileWriter {
    dir: PathBuf,
    /// A table in a bucket: files are written to `spool` and uploaded
    /// under their final names when they close (a data file is invisible
    /// until a commit adds it, so nothing is staged).
    bucket: Option<(Bucket, Option<Spool>)>,
    physical: SchemaRef,
    format: ParquetFormat,
    partition: PartitionBy,
    target_file_size: u64,
    stem: String,
    next_seq: u64,
    open: BTreeMap<String, OpenFile>,
    closed: Vec<DataFile>,
}

impl DataFileWriter {
    /// A writer of `sink`-schema rows into `dir`, files named with `stem`.
    pub fn new(
        dir: &Path,
        sink: &SchemaRef,
        partition: PartitionBy,
        compression: Compression,
        row_group_size: Option<usize>,
        target_file_size: u64,
        stem: String,
    ) -> Self {
        let physical = schema::physical_schema(&partition.file_schema(sink));
        let bucket = match Location::parse(&dir.to_string_lossy()) {
            Ok(Location::Bucket(bucket)) => Some((bucket, None)),
            _ => None,
        };
        Self {
            dir: dir.to_path_buf(),
            bucket,
            format: ParquetFormat::new(&physical, compression, row_group_size),
            physical,
            partition,
            target_file_size,
            stem,
            next_seq: 0,
            open: BTreeMap::new(),
            closed: Vec::new(),
        }
    }

    /// Names files with `stem` from now on.
    pub fn set_stem(&mut self, stem: String) {
        self.stem = stem;
    }

    /// The sequence number of the next file.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Numbers the next file `seq` (a resumed run goes on counting).
    pub fn set_next_seq(&mut self, seq: u64) {
        self.next_seq = seq;
    }

    /// Sets the size at which files roll.
    pub fn set_target_file_size(&mut self, bytes: u64) {
        self.target_file_size = bytes;
    }

    /// Writes rows, each into its partition's open file; a file reaching
    /// the target size is closed.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        for (partition, rows) in self.partition.split(batch)? {
            if !self.open.contains_key(&partition) {
                self.start_file(&partition)?;
            }
            let Some(file) = self.open.get_mut(&partition) else {
                continue;
            };
            let columns = rows
                .columns()
                .iter()
                .zip(self.physical.fields())
                .map(|(c, f)| {
                    if c.data_type() == f.data_type() {
                        Ok(c.clone())
                    } else {
                        cast(c, f.data_type())
                    }
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let physical = RecordBatch::try_new(self.physical.clone(), columns)?;
            file.stats.update(&physical)?;
            file.writer.write(&physical)?;
            file.rows += rows.num_rows() as u64;
            if file.writer.bytes() >= self.target_file_size {
                self.close_file(&partition)?;
            }
        }
        Ok(())
    }

    /// The files closed since the last call.
    pub fn take_closed(&mut self) -> Vec<DataFile> {
        std::mem::take(&mut self.closed)
    }

    /// Closes every open file; returns all closed files not yet taken.
    pub fn finish(&mut self) -> Result<Vec<DataFile>> {
        let partitions: Vec<String> = self.open.keys().cloned().collect();
        for partition in partitions {
            self.close_file(&partition)?;
        }
        Ok(self.take_closed())
    }

    fn start_file(&mut self, partition: &str) -> Result<()> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let path = format!("{partition}part-{seq:05}-{}.zstd.parquet", self.stem);
        let file = match &mut self.bucket {
            Some((_, spool)) => {
                let spool = match spool {
                    Some(spool) => spool,
                    None => spool.insert(Spool::new()?),
                };
                create_file(&spool.file(&path))?
            }
            None => create_file(&self.dir.join(&path))?,
        };
        let writer = self.format.create(file)?;
        self.open.insert(
            partition.to_string(),
            OpenFile {
                path,
                partition_values: directory_values(partition).into_iter().collect(),
                writer,
                rows: 0,
                stats: FileStats::new(&self.physical),
            },
        );
        Ok(())
    }

    fn close_file(&mut self, partition: &str) -> Result<()> {
        let Some(mut open) = self.open.remove(partition) else {
            return Ok(());
        };
        let full = self.dir.join(&open.path);
        let file = open.writer.close()?;
        file.sync_all().map_err(|e| io_error(&full, e))?;
        let size = file.metadata().map_err(|e| io_error(&full, e))?.len();
        drop(file);
        if let Some((bucket, Some(spool))) = &self.bucket {
            let local = spool.file(&open.path);
            bucket.upload(&local, &open.path)?;
            std::fs::remove_file(&local).map_err(|e| io_error(&local, e))?;
        }
        let stats = open.stats.to_json(open.rows)?;
        self.closed.push(DataFile {
            path: open.path,
            partition_values: open.partition_values,
            size: size as i64,
            rows: open.rows,
            stats: Some(stats),
        });
        Ok(())
    }
}
