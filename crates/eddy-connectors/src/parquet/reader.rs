//! Reading a list of Parquet files as a bounded source: the `parquet`
//! connector's files and a Delta table's.
//!
//! In: the files in reading order, each with its partition values (from a
//! Hive-style path or a Delta log), and the table's declared physical
//! columns. Out: batches of those columns.
//!
//! - Only the declared columns are decoded (projection pushdown: the
//!   Parquet reader skips the other column chunks).
//! - A declared column found among a file's partition values is built
//!   from the value (cast from text to the column's type); one a file lacks
//!   is NULL when nullable, an error naming the file otherwise.
//! - File columns are cast to the declared types (a Delta TIMESTAMP, UTC
//!   microseconds, to eddy's TIMESTAMP).
//! - The position is the file's number and rows read from it, so a resumed
//!   job skips straight to the next row (Parquet's row offset), and checks
//!   that the file at that number is the same one.
//! - With a pushed-down filter ([`ParquetFilesReader::with_pruner`]), files
//!   and then row groups that statistics rule out ([`super::pruning`]) are
//!   not decoded; of a table with event time or computed columns, only the
//!   columns those are made from are, and handed over as skipped rows
//!   ([`SourceContext::skipped`]) so lateness and bad rows are judged as
//!   without the filter. The reader logs how much it skipped when it ends.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, Array, ArrayRef, NullArray, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use datafusion::parquet::arrow::ProjectionMask;
use eddy_engine::source::{SourceContext, SourceReader};
use eddy_engine::Result as EngineResult;
use serde::{Deserialize, Serialize};

use super::input::ParquetInput;
use super::pruning::Pruner;
use crate::error::{ConnectorError, Result};
use crate::sinks::io_error;

/// A file to read and the partition values its rows carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileToRead {
    /// Where it is.
    pub path: PathBuf,
    /// Partition column to value (`None`: NULL).
    pub partition_values: BTreeMap<String, Option<String>>,
    /// A Delta file's statistics (its `add`'s `stats` JSON), if known.
    pub stats: Option<String>,
}

/// Where a [`ParquetFilesReader`] is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesPosition {
    /// The number of the file being read (files before it are done).
    pub file: usize,
    /// Rows of that file already read.
    pub row: u64,
    /// Its path, to check on resume that the list is the same.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Extra facts of the connector (a Delta table's version).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub extra: serde_json::Value,
}

/// See the module docs.
pub struct ParquetFilesReader {
    table: String,
    files: Vec<FileToRead>,
    schema: SchemaRef,
    batch_size: usize,
    file: usize,
    row: u64,
    opened: Option<OpenFile>,
    extra: serde_json::Value,
    pruning: Option<Pruning>,
}

/// Skipped rows held at most before they are handed over on their own.
const SKIPPED_HELD: usize = 1 << 16;

/// A pushed-down filter at work (see the module docs).
struct Pruning {
    pruner: Pruner,
    /// Per file, whether it may hold a wanted row.
    files: Vec<bool>,
    /// Skipped rows' shape (see [`ParquetFilesReader::observed_only`]).
    skipped_schema: SchemaRef,
    /// Skipped rows not yet handed over.
    skipped: Vec<RecordBatch>,
    counts: SkipCounts,
    logged: bool,
}

#[derive(Debug, Default)]
struct SkipCounts {
    files: usize,
    files_skipped: usize,
    row_groups: usize,
    row_groups_skipped: usize,
}

/// The file being read: its row groups in runs to read or to skip.
struct OpenFile {
    file: ParquetInput,
    metadata: ArrowReaderMetadata,
    segments: Vec<Segment>,
    segment: usize,
    current: Option<ParquetRecordBatchReader>,
}

/// Consecutive row groups all read or all skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Segment {
    row_groups: Vec<usize>,
    /// Its first row's number in the file.
    start: u64,
    rows: u64,
    read: bool,
}

/// `keep` per row group of `rows` rows each, as runs.
fn segments(rows: &[u64], keep: &[bool]) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    let mut start = 0;
    for (group, (&rows, &read)) in rows.iter().zip(keep).enumerate() {
        match segments.last_mut() {
            Some(last) if last.read == read => {
                last.row_groups.push(group);
                last.rows += rows;
            }
            _ => segments.push(Segment {
                row_groups: vec![group],
                start,
                rows,
                read,
            }),
        }
        start += rows;
    }
    segments
}

impl ParquetFilesReader {
    /// Reads `files` as rows of `schema` for `table`, resumed at `resume`.
    pub fn new(
        table: &str,
        files: Vec<FileToRead>,
        schema: SchemaRef,
        batch_size: usize,
        resume: Option<FilesPosition>,
        extra: serde_json::Value,
    ) -> Result<Self> {
        let (mut file, mut row) = (0, 0);
        if let Some(position) = resume {
            if position.file < files.len() {
                let listed = &files[position.file].path;
                if position.path.as_ref().is_some_and(|p| p != listed) {
                    return Err(ConnectorError::bad_option(
                        "path",
                        format!(
                            "the checkpoint was reading {} as file {}, which is now {} (the files changed; use --ignore-state to read them afresh)",
                            position.path.unwrap_or_default().display(),
                            position.file + 1,
                            listed.display()
                        ),
                    ));
                }
            }
            file = position.file;
            row = position.row;
        }
        Ok(Self {
            table: table.to_string(),
            files,
            schema,
            batch_size: batch_size.max(1),
            file,
            row,
            opened: None,
            extra,
            pruning: None,
        })
    }

    /// Skips the files and row groups `pruner` rules out (see the module
    /// docs).
    pub fn with_pruner(mut self, pruner: Option<Pruner>) -> Self {
        self.pruning = pruner.map(|pruner| Pruning {
            files: pruner.files(&self.files),
            skipped_schema: Arc::new(Schema::new(
                self.schema
                    .fields()
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        if pruner.observed_columns.contains(&i) {
                            f.as_ref().clone().with_nullable(true)
                        } else {
                            Field::new(f.name(), DataType::Null, true)
                        }
                    })
                    .collect::<Vec<Field>>(),
            )),
            pruner,
            skipped: Vec::new(),
            counts: SkipCounts::default(),
            logged: false,
        });
        self
    }

    /// Opens the current file: its footer, and its row groups in runs to
    /// read or skip, positioned at `self.row`.
    fn open(&mut self, prune: bool) -> Result<OpenFile> {
        let to_read = &self.files[self.file];
        let path = &to_read.path;
        let file = ParquetInput::open(path)?;
        let metadata = ArrowReaderMetadata::load(&file, Default::default())
            .map_err(|e| in_file(path, e.to_string()))?;
        let groups = metadata.metadata().row_groups();
        let rows: Vec<u64> = groups.iter().map(|g| g.num_rows() as u64).collect();
        let keep = match &mut self.pruning {
            Some(pruning) if prune => {
                let keep = pruning.pruner.row_groups(to_read, metadata.metadata());
                pruning.counts.row_groups += keep.len();
                keep
            }
            _ => vec![true; rows.len()],
        };
        let segments = segments(&rows, &keep);
        let segment = segments
            .iter()
            .position(|s| s.start + s.rows > self.row)
            .unwrap_or(segments.len());
        Ok(OpenFile {
            file,
            metadata,
            segments,
            segment,
            current: None,
        })
    }

    /// A reader of `row_groups` of the open file, from its `offset`th row,
    /// decoding the declared columns (or only `only` of them).
    fn segment_reader(
        &self,
        open: &OpenFile,
        row_groups: Vec<usize>,
        offset: u64,
        only: Option<&[usize]>,
    ) -> Result<ParquetRecordBatchReader> {
        let to_read = &self.files[self.file];
        let path = &to_read.path;
        let handle = open.file.try_clone().map_err(|e| io_error(path, e))?;
        let builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(handle, open.metadata.clone());
        let file_schema = builder.schema().clone();
        let roots: Vec<usize> = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(i, _)| only.is_none_or(|only| only.contains(i)))
            .filter(|(_, f)| !to_read.partition_values.contains_key(f.name()))
            .filter_map(|(_, f)| file_schema.index_of(f.name()).ok())
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        builder
            .with_projection(mask)
            .with_row_groups(row_groups)
            .with_batch_size(self.batch_size)
            .with_offset(offset as usize)
            .build()
            .map_err(|e| in_file(path, e.to_string()))
    }

    /// Hands the observed columns of skipped row groups over (nothing
    /// when the table has none).
    fn skip(&mut self, open: &OpenFile, row_groups: Vec<usize>, offset: u64) -> Result<()> {
        let Some(pruning) = &self.pruning else {
            return Ok(());
        };
        if pruning.pruner.observed_columns.is_empty() {
            return Ok(());
        }
        let only = pruning.pruner.observed_columns.clone();
        let reader = self.segment_reader(open, row_groups, offset, Some(&only))?;
        for batch in reader {
            let batch = batch.map_err(|e| in_file(&self.files[self.file].path, e.to_string()))?;
            let rows = self.observed_only(&batch, &only)?;
            if let Some(pruning) = &mut self.pruning {
                pruning.skipped.push(rows);
            }
        }
        Ok(())
    }

    /// Skipped rows: the physical schema with only `only` filled (nullable)
    /// and the other columns of type Null, which cost no memory.
    fn observed_only(&self, batch: &RecordBatch, only: &[usize]) -> Result<RecordBatch> {
        let to_read = &self.files[self.file];
        let rows = batch.num_rows();
        let columns = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, field)| {
                if only.contains(&i) {
                    self.column(to_read, batch, field)
                } else {
                    Ok(Arc::new(NullArray::new(rows)) as ArrayRef)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let schema = self
            .pruning
            .as_ref()
            .map_or_else(|| self.schema.clone(), |p| p.skipped_schema.clone());
        Ok(RecordBatch::try_new_with_options(
            schema,
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }

    /// The declared columns of a batch read from the current file.
    fn shape(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let to_read = &self.files[self.file];
        let rows = batch.num_rows();
        let columns = self
            .schema
            .fields()
            .iter()
            .map(|field| self.column(to_read, batch, field))
            .collect::<Result<Vec<_>>>()?;
        let columns = columns
            .into_iter()
            .zip(self.schema.fields())
            .map(|(column, field)| {
                if !field.is_nullable() && column.null_count() > 0 {
                    return Err(in_file(
                        &to_read.path,
                        format!(
                            "column '{}' holds NULLs but is declared NOT NULL",
                            field.name()
                        ),
                    ));
                }
                Ok(column)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }

    /// Declared column `field` of a batch read from `to_read`.
    fn column(&self, to_read: &FileToRead, batch: &RecordBatch, field: &Field) -> Result<ArrayRef> {
        let rows = batch.num_rows();
        if let Some(value) = to_read.partition_values.get(field.name()) {
            let text: ArrayRef = Arc::new(StringArray::from(vec![value.as_deref(); rows]));
            return cast(&text, field.data_type()).map_err(|e| {
                in_file(
                    &to_read.path,
                    format!("partition value {value:?} of '{}': {e}", field.name()),
                )
            });
        }
        match batch.column_by_name(field.name()) {
            Some(column) if column.data_type() == field.data_type() => Ok(column.clone()),
            Some(column) => cast(column, field.data_type()).map_err(|e| {
                in_file(
                    &to_read.path,
                    format!(
                        "column '{}' is {}, the table declares {}: {e}",
                        field.name(),
                        column.data_type(),
                        field.data_type()
                    ),
                )
            }),
            None if field.is_nullable() => Ok(new_null_array(field.data_type(), rows)),
            None => Err(in_file(
                &to_read.path,
                format!("has no column '{}', which is NOT NULL", field.name()),
            )),
        }
    }

    /// Moves on to the next file.
    fn next_file(&mut self) {
        self.opened = None;
        self.file += 1;
        self.row = 0;
    }

    /// An empty batch, to hand the skipped rows over now, once they are
    /// many (they are held until the next batch returned otherwise).
    fn hand_over_skipped(&self) -> Option<RecordBatch> {
        let pending: usize = self
            .pruning
            .as_ref()?
            .skipped
            .iter()
            .map(RecordBatch::num_rows)
            .sum();
        (pending >= SKIPPED_HELD).then(|| RecordBatch::new_empty(self.schema.clone()))
    }

    fn read(&mut self) -> Result<Option<RecordBatch>> {
        while self.file < self.files.len() {
            if self.opened.is_none() {
                if let Some(pruning) = &mut self.pruning {
                    pruning.counts.files += 1;
                    if !pruning.files[self.file] {
                        pruning.counts.files_skipped += 1;
                        if !pruning.pruner.observed_columns.is_empty() {
                            let open = self.open(false)?;
                            let all = (0..open.metadata.metadata().num_row_groups()).collect();
                            self.skip(&open, all, self.row)?;
                        }
                        self.next_file();
                        if let Some(empty) = self.hand_over_skipped() {
                            return Ok(Some(empty));
                        }
                        continue;
                    }
                }
                self.opened = Some(self.open(true)?);
            }
            let Some(mut open) = self.opened.take() else {
                continue;
            };
            let Some(segment) = open.segments.get(open.segment).cloned() else {
                self.next_file();
                continue;
            };
            let offset = self.row.saturating_sub(segment.start);
            if !segment.read {
                if let Some(pruning) = &mut self.pruning {
                    pruning.counts.row_groups_skipped += segment.row_groups.len();
                }
                self.skip(&open, segment.row_groups, offset)?;
                self.row = segment.start + segment.rows;
                open.segment += 1;
                self.opened = Some(open);
                if let Some(empty) = self.hand_over_skipped() {
                    return Ok(Some(empty));
                }
                continue;
            }
            if open.current.is_none() {
                open.current =
                    Some(self.segment_reader(&open, segment.row_groups, offset, None)?);
            }
            let next = open.current.as_mut().and_then(|r| r.next());
            match next {
                Some(batch) => {
                    self.opened = Some(open);
                    let batch =
                        batch.map_err(|e| in_file(&self.files[self.file].path, e.to_string()))?;
                    self.row += batch.num_rows() as u64;
                    if batch.num_rows() == 0 {
                        continue;
                    }
                    return self.shape(&batch).map(Some);
                }
                None => {
                    open.current = None;
                    open.segment += 1;
                    self.row = segment.start + segment.rows;
                    self.opened = Some(open);
                }
            }
        }
        if let Some(pruning) = &mut self.pruning {
            // Rows skipped last go over with a batch of their own.
            if !pruning.skipped.is_empty() {
                return Ok(Some(RecordBatch::new_empty(self.schema.clone())));
            }
            if !pruning.logged {
                pruning.logged = true;
                let c = &pruning.counts;
                tracing::info!(
                    source = %self.table,
                    "the pushed-down filter skipped {} of {} files and {} of {} row groups of the files read",
                    c.files_skipped, c.files, c.row_groups_skipped, c.row_groups
                );
            }
        }
        Ok(None)
    }
}

/// Every row of `file` as `schema`'s columns (a Delta merge reads the
/// files it rewrites with it).
pub fn read_file(file: &FileToRead, schema: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let mut reader = ParquetFilesReader::new(
        "",
        vec![file.clone()],
        schema.clone(),
        crate::DEFAULT_BATCH_SIZE,
        None,
        serde_json::Value::Null,
    )?;
    let mut batches = Vec::new();
    while let Some(batch) = reader.read()? {
        batches.push(batch);
    }
    Ok(batches)
}

/// The checkpointed position of a files reader (`None` for a fresh
/// start); a position of another shape is an error.
pub fn resume_position(resume: Option<&serde_json::Value>) -> Result<Option<FilesPosition>> {
    match resume {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone())
            .map(Some)
            .map_err(|e| ConnectorError::bad_option("path", format!("checkpointed position: {e}"))),
    }
}

fn in_file(path: &std::path::Path, why: String) -> ConnectorError {
    ConnectorError::bad_option("path", format!("{}: {why}", path.display()))
}

impl SourceReader for ParquetFilesReader {
    fn next_batch(&mut self, ctx: &mut SourceContext) -> EngineResult<Option<RecordBatch>> {
        let batch = self.read().map_err(|e| e.for_table(&self.table))?;
        if let Some(pruning) = &mut self.pruning {
            for rows in pruning.skipped.drain(..) {
                ctx.skipped(rows);
            }
        }
        Ok(batch)
    }

    fn position(&self) -> serde_json::Value {
        serde_json::to_value(FilesPosition {
            file: self.file,
            row: self.row,
            path: self.files.get(self.file).map(|f| f.path.clone()),
            extra: self.extra.clone(),
        })
        .unwrap_or_default()
    }

    fn bounded(&self) -> bool {
        true
    }
}
