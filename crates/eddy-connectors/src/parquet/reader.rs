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

use std::collections::BTreeMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, Array, ArrayRef, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::parquet::arrow::arrow_reader::{
    ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use datafusion::parquet::arrow::ProjectionMask;
use eddy_engine::source::{SourceContext, SourceReader};
use eddy_engine::Result as EngineResult;
use serde::{Deserialize, Serialize};

use crate::error::{ConnectorError, Result};
use crate::sinks::io_error;

/// A file to read and the partition values its rows carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileToRead {
    /// Where it is.
    pub path: PathBuf,
    /// Partition column to value (`None`: NULL).
    pub partition_values: BTreeMap<String, Option<String>>,
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
    current: Option<ParquetRecordBatchReader>,
    extra: serde_json::Value,
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
            current: None,
            extra,
        })
    }

    fn open(&self) -> Result<ParquetRecordBatchReader> {
        let to_read = &self.files[self.file];
        let path = &to_read.path;
        let handle = File::open(path).map_err(|e| io_error(path, e))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(handle)
            .map_err(|e| in_file(path, e.to_string()))?;
        let file_schema = builder.schema().clone();
        let roots: Vec<usize> = self
            .schema
            .fields()
            .iter()
            .filter(|f| !to_read.partition_values.contains_key(f.name()))
            .filter_map(|f| file_schema.index_of(f.name()).ok())
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        builder
            .with_projection(mask)
            .with_batch_size(self.batch_size)
            .with_offset(self.row as usize)
            .build()
            .map_err(|e| in_file(path, e.to_string()))
    }

    /// The declared columns of a batch read from the current file.
    fn shape(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let to_read = &self.files[self.file];
        let rows = batch.num_rows();
        let columns = self
            .schema
            .fields()
            .iter()
            .map(|field| -> Result<ArrayRef> {
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
            })
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

    fn read(&mut self) -> Result<Option<RecordBatch>> {
        while self.file < self.files.len() {
            if self.current.is_none() {
                self.current = Some(self.open()?);
            }
            let next = self.current.as_mut().and_then(|r| r.next());
            match next {
                Some(batch) => {
                    let batch =
                        batch.map_err(|e| in_file(&self.files[self.file].path, e.to_string()))?;
                    self.row += batch.num_rows() as u64;
                    if batch.num_rows() == 0 {
                        continue;
                    }
                    return self.shape(&batch).map(Some);
                }
                None => {
                    self.current = None;
                    self.file += 1;
                    self.row = 0;
                }
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
    fn next_batch(&mut self, _ctx: &mut SourceContext) -> EngineResult<Option<RecordBatch>> {
        self.read().map_err(|e| e.for_table(&self.table))
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
