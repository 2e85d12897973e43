//! File formats of the rolling file sinks: how one file is written.
//!
//! In: the file schema and batches. Out: a complete file. [`ParquetFormat`]
//! writes TIMESTAMP columns as Parquet timestamps adjusted to UTC
//! (`isAdjustedToUTC = true`; second and millisecond columns in
//! milliseconds, micro- and nanosecond ones in microseconds), with the
//! Arrow schema in the file metadata, the chosen compression and row group
//! size; struct columns (a window's `start`/`end`) stay Parquet groups;
//! string views are written as plain strings, which every reader knows.
//! [`NdjsonFormat`] writes the JSON lines of the NDJSON sink;
//! [`CsvFormat`] comma-separated lines without a header, as Flink's `csv`
//! format writes them (timestamps `yyyy-MM-dd HH:mm:ss.SSS`, text quoted
//! where it holds a comma, quote or line break).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, GzipLevel, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;

use super::changelog::JsonLines;
use crate::error::{ConnectorError, Result};

/// A format the rolling file sink writes.
pub trait FileFormat: Send + Sync {
    /// File name extension (`parquet`, `ndjson`).
    fn extension(&self) -> &'static str;
    /// Starts writing `file`.
    fn create(&self, file: File) -> Result<Box<dyn FormatWriter>>;
}

/// One file being written.
pub trait FormatWriter: Send {
    /// Writes rows.
    fn write(&mut self, batch: &RecordBatch) -> Result<()>;
    /// Bytes written so far, buffered ones included (for `rolling_bytes`).
    fn bytes(&self) -> u64;
    /// Completes the file and hands it back (not yet synced).
    fn close(self: Box<Self>) -> Result<File>;
}

/// Parquet compression, as the `compression` option names it.
pub fn parse_compression(text: Option<&str>) -> Result<Compression> {
    Ok(
        match text.map(|t| t.trim().to_ascii_lowercase()).as_deref() {
            None | Some("zstd") => Compression::ZSTD(ZstdLevel::default()),
            Some("snappy") => Compression::SNAPPY,
            Some("gzip") => Compression::GZIP(GzipLevel::default()),
            Some("none" | "uncompressed") => Compression::UNCOMPRESSED,
            Some(other) => {
                return Err(ConnectorError::bad_option(
                    "compression",
                    format!("'{other}' is not one of 'zstd', 'snappy', 'gzip', 'none'"),
                ))
            }
        },
    )
}

/// Parquet files.
#[derive(Debug, Clone)]
pub struct ParquetFormat {
    schema: SchemaRef,
    properties: WriterProperties,
}

impl ParquetFormat {
    /// Writes rows of `schema` (the sink's file schema; timestamps are
    /// marked UTC on the way) with `compression` and at most
    /// `row_group_size` rows per row group.
    pub fn new(
        schema: &SchemaRef,
        compression: Compression,
        row_group_size: Option<usize>,
    ) -> Self {
        let mut properties = WriterProperties::builder().set_compression(compression);
        if let Some(rows) = row_group_size {
            properties = properties.set_max_row_group_row_count(Some(rows.max(1)));
        }
        Self {
            schema: utc_schema(schema),
            properties: properties.build(),
        }
    }

    /// The schema the files carry.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }
}

/// `schema` with every TIMESTAMP (also inside structs) in UTC, at
/// millisecond or microsecond precision, and string views as strings.
pub fn utc_schema(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| utc_field(f))
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    ))
}

fn utc_field(field: &Field) -> Field {
    field.clone().with_data_type(utc_type(field.data_type()))
}

fn utc_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Timestamp(unit, _) => {
            let unit = match unit {
                TimeUnit::Second | TimeUnit::Millisecond => TimeUnit::Millisecond,
                TimeUnit::Microsecond | TimeUnit::Nanosecond => TimeUnit::Microsecond,
            };
            DataType::Timestamp(unit, Some("UTC".into()))
        }
        DataType::Struct(fields) => DataType::Struct(Fields::from(
            fields.iter().map(|f| utc_field(f)).collect::<Vec<_>>(),
        )),
        // Plain strings and bytes: what every Parquet reader knows.
        DataType::Utf8View => DataType::Utf8,
        DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    }
}

struct ParquetWriter {
    schema: SchemaRef,
    writer: ArrowWriter<File>,
}

impl FileFormat for ParquetFormat {
    fn extension(&self) -> &'static str {
        "parquet"
    }

    fn create(&self, file: File) -> Result<Box<dyn FormatWriter>> {
        let writer =
            ArrowWriter::try_new(file, self.schema.clone(), Some(self.properties.clone()))?;
        Ok(Box::new(ParquetWriter {
            schema: self.schema.clone(),
            writer,
        }))
    }
}

impl FormatWriter for ParquetWriter {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let columns = batch
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(column, field)| {
                if column.data_type() == field.data_type() {
                    Ok(column.clone())
                } else {
                    cast(column, field.data_type())
                }
            })
            .collect::<std::result::Result<Vec<ArrayRef>, _>>()?;
        self.writer
            .write(&RecordBatch::try_new(self.schema.clone(), columns)?)?;
        Ok(())
    }

    fn bytes(&self) -> u64 {
        (self.writer.bytes_written() + self.writer.in_progress_size()) as u64
    }

    fn close(self: Box<Self>) -> Result<File> {
        Ok(self.writer.into_inner()?)
    }
}

/// NDJSON files (the NDJSON sink's lines).
#[derive(Debug, Clone)]
pub struct NdjsonFormat {
    /// How rows become lines.
    pub lines: JsonLines,
}

struct NdjsonWriter {
    out: BufWriter<File>,
    bytes: u64,
    lines: JsonLines,
    line: Vec<u8>,
}

impl FileFormat for NdjsonFormat {
    fn extension(&self) -> &'static str {
        "ndjson"
    }

    fn create(&self, file: File) -> Result<Box<dyn FormatWriter>> {
        Ok(Box::new(NdjsonWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            bytes: 0,
            lines: self.lines,
            line: Vec::new(),
        }))
    }
}

impl FormatWriter for NdjsonWriter {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.line.clear();
        self.lines.encode(batch, &mut self.line)?;
        self.out
            .write_all(&self.line)
            .map_err(|source| ConnectorError::Io {
                path: "an NDJSON part".into(),
                source,
            })?;
        self.bytes += self.line.len() as u64;
        Ok(())
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn close(self: Box<Self>) -> Result<File> {
        self.out.into_inner().map_err(|e| ConnectorError::Io {
            path: "an NDJSON part".into(),
            source: e.into_error(),
        })
    }
}

/// CSV files: one line per row, no header, as Flink's `csv` format.
#[derive(Debug, Clone, Copy, Default)]
pub struct CsvFormat;

/// A writer that counts the bytes through it (in a counter its owner
/// keeps: the CSV writer does not lend its inner writer out).
struct Counting<W> {
    inner: W,
    bytes: Arc<std::sync::atomic::AtomicU64>,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

struct CsvWriter {
    writer: datafusion::arrow::csv::Writer<Counting<BufWriter<File>>>,
    bytes: Arc<std::sync::atomic::AtomicU64>,
}

impl FileFormat for CsvFormat {
    fn extension(&self) -> &'static str {
        "csv"
    }

    fn create(&self, file: File) -> Result<Box<dyn FormatWriter>> {
        let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let out = Counting {
            inner: BufWriter::with_capacity(1 << 20, file),
            bytes: bytes.clone(),
        };
        Ok(Box::new(CsvWriter {
            bytes,
            writer: datafusion::arrow::csv::WriterBuilder::new()
                .with_header(false)
                .with_timestamp_format("%Y-%m-%d %H:%M:%S%.3f".to_string())
                .with_datetime_format("%Y-%m-%d %H:%M:%S%.3f".to_string())
                .build(out),
        }))
    }
}

impl FormatWriter for CsvWriter {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.writer.write(batch)?;
        Ok(())
    }

    fn bytes(&self) -> u64 {
        self.bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn close(self: Box<Self>) -> Result<File> {
        self.writer
            .into_inner()
            .inner
            .into_inner()
            .map_err(|e| ConnectorError::Io {
                path: "a CSV part".into(),
                source: e.into_error(),
            })
    }
}
