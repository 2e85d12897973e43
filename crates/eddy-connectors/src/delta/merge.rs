//! Merge by key: an updating query's changes applied to a Delta table by
//! copy-on-write, so the table holds the query's current result.
//!
//! In: a checkpoint's changes, rows of the sink's schema each with a row
//! kind (`+I`/`+U` put the row in the table under its key, `-U`/`-D` take
//! the key out; rows of an append-only query are all puts), and the
//! table's files at the version being committed. Out: one commit's
//! actions: a `remove` for every file holding a changed key, an `add` for
//! its rewrite without those keys, and `add`s for the rows put.
//!
//! ```text
//!  changes of checkpoint n ──last change per key──▶ upserts U, deletes D
//!  table files ──key columns read──▶ files holding a key of U ∪ D
//!      each rewritten without those keys; U written; one commit:
//!      remove(old files) + add(rewrites, U) + txn { appId, n }
//! ```
//!
//! Files without a changed key are not touched beyond reading their key
//! columns, and not read at all when their statistics (least and greatest
//! key, [`super::stats`]) rule every changed key out. Delta's deletion vectors would spare the rewrite but need
//! reader version 3, which many readers still lack; copy-on-write tables
//! stay version 1/2.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, Int8Array};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_connectors::delta::merge::last_change_per_key;
//! use eddy_engine::changelog::updating_schema;
//!
//! let sink = Arc::new(Schema::new(vec![
//!     Field::new("k", DataType::Int64, false),
//!     Field::new("v", DataType::Int64, false),
//! ]));
//! let changes = RecordBatch::try_new(
//!     updating_schema(&sink, &[]),
//!     vec![
//!         Arc::new(Int64Array::from(vec![1, 1, 1, 2])),
//!         Arc::new(Int64Array::from(vec![10, 10, 11, 20])),
//!         Arc::new(Int8Array::from(vec![0, 1, 2, 0])), // +I, -U, +U, +I
//!     ],
//! )
//! .unwrap();
//! let last = last_change_per_key(&sink, &[0], &[changes]).unwrap().unwrap();
//! assert_eq!(last.num_rows(), 2); // k=1 → 11, k=2 → 20
//! ```

use std::collections::HashSet;
use std::path::Path;

use super::table_store::TableStore;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Int8Array, UInt32Array};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use eddy_engine::changelog::{self, RowKind};

use super::files::{DataFile, DataFileWriter};
use super::log::{self, Add, Snapshot};
use super::stats;
use crate::error::{ConnectorError, Result};
use crate::parquet::reader::{read_file, FileToRead};

/// The schema of a change batch: the sink's columns and the row kind.
pub fn changes_schema(sink: &Schema) -> SchemaRef {
    changelog::updating_schema(sink, &[])
}

/// The indices of the `key` columns in `sink`, or an error naming the one
/// that is missing.
pub fn key_indices(sink: &Schema, key: &[String]) -> Result<Vec<usize>> {
    key.iter()
        .map(|name| {
            sink.index_of(name).map_err(|_| {
                ConnectorError::bad_option(
                    "primary key",
                    format!("the table has no column '{name}'"),
                )
            })
        })
        .collect()
}

/// `batch` (the sink's columns, with or without a row kind) as a change
/// batch: `sink`'s fields, and `+I` for every row of an append-only one.
fn as_changes(sink: &SchemaRef, batch: &RecordBatch) -> Result<RecordBatch> {
    let width = sink.fields().len();
    let mut columns: Vec<ArrayRef> = batch.columns()[..width].to_vec();
    let kinds: ArrayRef = match changelog::row_kinds(batch) {
        Some(kinds) => Arc::new(kinds.clone()),
        None => Arc::new(Int8Array::from(vec![
            RowKind::Insert.byte();
            batch.num_rows()
        ])),
    };
    columns.push(kinds);
    Ok(RecordBatch::try_new(changes_schema(sink), columns)?)
}

/// Reduces changes, in the order they came, to the last change of each
/// key: a change batch with one row per key, `+I` (put this row) or `-D`
/// (take the key out). `None` when there are no rows.
pub fn last_change_per_key(
    sink: &SchemaRef,
    key: &[usize],
    batches: &[RecordBatch],
) -> Result<Option<RecordBatch>> {
    let batches = batches
        .iter()
        .filter(|b| b.num_rows() > 0)
        .map(|b| as_changes(sink, b))
        .collect::<Result<Vec<_>>>()?;
    if batches.is_empty() {
        return Ok(None);
    }
    let all = concat_batches(&changes_schema(sink), &batches)?;
    let (converter, rows) = key_rows(sink, key, &all)?;
    drop(converter);
    let mut seen: HashSet<&[u8]> = HashSet::with_capacity(rows.num_rows());
    let mut last: Vec<u32> = Vec::with_capacity(rows.num_rows());
    for i in (0..rows.num_rows()).rev() {
        if seen.insert(rows.row(i).data()) {
            last.push(i as u32);
        }
    }
    last.reverse();
    let picked = take_record_batch(&all, &UInt32Array::from(last))?;
    // Every retraction becomes a delete, every put an insert.
    let kinds: Int8Array = kinds_of(&picked)?
        .values()
        .iter()
        .map(|&b| {
            Some(if changelog::is_retraction_byte(b) {
                RowKind::Delete.byte()
            } else {
                RowKind::Insert.byte()
            })
        })
        .collect();
    let mut columns = picked.columns().to_vec();
    if let Some(slot) = columns.last_mut() {
        *slot = Arc::new(kinds);
    }
    Ok(Some(RecordBatch::try_new(picked.schema(), columns)?))
}

/// The row kinds of a change batch.
fn kinds_of(changes: &RecordBatch) -> Result<&Int8Array> {
    changelog::row_kinds(changes)
        .ok_or_else(|| ConnectorError::bad_option("checkpoint", "a change batch has no row kinds"))
}

/// The row-format keys of `batch`'s `key` columns.
fn key_rows(sink: &SchemaRef, key: &[usize], batch: &RecordBatch) -> Result<(RowConverter, Rows)> {
    let converter = RowConverter::new(
        key.iter()
            .map(|&i| SortField::new(sink.field(i).data_type().clone()))
            .collect(),
    )?;
    let columns: Vec<ArrayRef> = key.iter().map(|&i| batch.column(i).clone()).collect();
    let rows = converter.convert_columns(&columns)?;
    Ok((converter, rows))
}

/// What a merge did.
#[derive(Debug, Default)]
pub struct Merged {
    /// Files taken out of the table (rewritten without the changed keys).
    pub removed: Vec<Add>,
    /// Files written: the rewrites and the rows put.
    pub added: Vec<DataFile>,
    /// Rows of the table replaced or deleted.
    pub rows_out: u64,
    /// Rows put.
    pub rows_put: u64,
    /// Files whose key columns were read.
    pub files_read: u64,
    /// Files the statistics ruled out unread.
    pub files_skipped: u64,
}

/// Applies `changes` (from [`last_change_per_key`]) to the table at
/// `table`: rewrites, with `writer`, the files holding a changed key, and
/// writes the rows put. The caller commits the result.
pub fn merge(
    dir: &Path,
    table: &Snapshot,
    sink: &SchemaRef,
    key: &[usize],
    changes: &RecordBatch,
    writer: &mut DataFileWriter,
) -> Result<Merged> {
    let (converter, change_keys) = key_rows(sink, key, changes)?;
    let changed: HashSet<&[u8]> = (0..change_keys.num_rows())
        .map(|i| change_keys.row(i).data())
        .collect();
    let key_schema = Arc::new(sink.project(key)?);
    let mut merged = Merged::default();
    let key_columns: Vec<(&str, ArrayRef)> = key
        .iter()
        .map(|&i| (sink.field(i).name().as_str(), changes.column(i).clone()))
        .collect();
    for add in &table.files {
        // The file's least and greatest keys may rule it out unread.
        if let Some(mask) = stats::may_hold(add.stats.as_deref(), &key_columns)? {
            if mask.true_count() == 0 {
                merged.files_skipped += 1;
                continue;
            }
        }
        merged.files_read += 1;
        let file = FileToRead {
            path: dir.join(log::decode_path(&add.path)),
            partition_values: add.partition_values.clone(),
            stats: None,
        };
        let mut touched = false;
        for batch in read_file(&file, &key_schema)? {
            let rows = converter.convert_columns(batch.columns())?;
            if (0..rows.num_rows()).any(|i| changed.contains(rows.row(i).data())) {
                touched = true;
                break;
            }
        }
        if !touched {
            continue;
        }
        for batch in read_file(&file, sink)? {
            let columns: Vec<ArrayRef> = key.iter().map(|&i| batch.column(i).clone()).collect();
            let rows = converter.convert_columns(&columns)?;
            let keep: BooleanArray = (0..rows.num_rows())
                .map(|i| Some(!changed.contains(rows.row(i).data())))
                .collect();
            let kept = filter_record_batch(&batch, &keep)?;
            merged.rows_out += (batch.num_rows() - kept.num_rows()) as u64;
            if kept.num_rows() > 0 {
                writer.write(&kept)?;
            }
        }
        merged.removed.push(add.clone());
    }
    let puts: BooleanArray = kinds_of(changes)?
        .values()
        .iter()
        .map(|&b| Some(!changelog::is_retraction_byte(b)))
        .collect();
    let put = filter_record_batch(changes, &puts)?;
    if put.num_rows() > 0 {
        let data =
            RecordBatch::try_new(sink.clone(), put.columns()[..sink.fields().len()].to_vec())?;
        merged.rows_put = data.num_rows() as u64;
        writer.write(&data)?;
    }
    merged.added = writer.finish()?;
    Ok(merged)
}

/// Writes a change batch as `relative` in the table `table` (a hidden
/// file that the checkpoint names until its commit is made).
pub fn write_changes(table: &Path, relative: &str, changes: &RecordBatch) -> Result<u64> {
    let mut writer =
        datafusion::parquet::arrow::ArrowWriter::try_new(Vec::new(), changes.schema(), None)?;
    writer.write(changes)?;
    let bytes = writer.into_inner()?;
    TableStore::of(table)?.put(relative, &bytes)?;
    Ok(bytes.len() as u64)
}

/// Reads back what [`write_changes`] wrote, as `sink`'s change batches.
pub fn read_changes(table: &Path, relative: &str, sink: &SchemaRef) -> Result<Vec<RecordBatch>> {
    let bytes = TableStore::of(table)?.read(relative)?;
    let reader =
        datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            bytes::Bytes::from(bytes),
        )?
        .build()?;
    let schema = changes_schema(sink);
    reader
        .map(|batch| {
            let batch = batch?;
            Ok(RecordBatch::try_new(
                schema.clone(),
                batch.columns().to_vec(),
            )?)
        })
        .collect()
}
