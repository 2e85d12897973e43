//! What a file sink's options say, read in one place for the `file` and
//! `parquet` connectors and for `--output DIR`: how rows become JSON
//! lines, when files roll, how they are partitioned, the Parquet
//! settings; and opening the set of files they describe.
//!
//! In: a sink table's [`ConnectorSpec`]. Out: [`JsonLines`],
//! [`RollingPolicy`], a [`FileFormat`], a [`SinkWriter`].

use crate::storage::Location;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};

use super::changelog::{Envelope, JsonLines};
use super::format::{parse_compression, CsvFormat, FileFormat, NdjsonFormat, ParquetFormat};
use super::partition::PartitionBy;
use super::rolling::{RollingFileSink, RollingPolicy};
use crate::error::Result;
use crate::options::{OptionDecl, OptionKind, OptionValues};

/// `rolling_rows`.
pub const ROLLING_ROWS: OptionDecl = OptionDecl::new(
    "rolling_rows",
    OptionKind::Count,
    "start a new file after this many rows",
);
/// `rolling_bytes`.
pub const ROLLING_BYTES: OptionDecl = OptionDecl::new(
    "rolling_bytes",
    OptionKind::Size,
    "start a new file after this many bytes",
);
/// `rolling_interval`.
pub const ROLLING_INTERVAL: OptionDecl = OptionDecl::new(
    "rolling_interval",
    OptionKind::Duration,
    "start a new file after one has been open this long",
);
/// Flink's name of `rolling_interval`.
pub const FLINK_ROLLOVER_INTERVAL: OptionDecl = OptionDecl::new(
    "sink.rolling-policy.rollover-interval",
    OptionKind::Duration,
    "the same as rolling_interval (Flink's name)",
);
/// Flink's name of `rolling_bytes`.
pub const FLINK_FILE_SIZE: OptionDecl = OptionDecl::new(
    "sink.rolling-policy.file-size",
    OptionKind::Size,
    "the same as rolling_bytes (Flink's name)",
);
/// Flink's `sink.rolling-policy.check-interval`.
pub const FLINK_CHECK_INTERVAL: OptionDecl = OptionDecl::new(
    "sink.rolling-policy.check-interval",
    OptionKind::Duration,
    "accepted (Flink's): eddy checks the rolling policy at every batch",
);
/// Flink's partition-commit options, refused.
pub const FLINK_PARTITION_COMMIT: OptionDecl = OptionDecl::new(
    "sink.partition-commit.",
    OptionKind::Refused("eddy publishes a partition's files at every checkpoint and writes no commit marker (_SUCCESS) or metastore entry; leave Flink's partition-commit options out"),
    "Flink's partition commit: refused (files are published at every checkpoint; no _SUCCESS marker)",
);
/// Flink's partition-time extraction (for partition commit), refused.
pub const FLINK_PARTITION_TIME: OptionDecl = OptionDecl::new(
    "partition.time-extractor.",
    OptionKind::Refused("it serves Flink's partition commit, which eddy does not do (files are published at every checkpoint); leave it out"),
    "Flink's partition-time extraction: refused, as partition commit",
);
/// `partition_by`.
pub const PARTITION_BY: OptionDecl = OptionDecl::new(
    "partition_by",
    OptionKind::Text,
    "columns (comma-separated) naming Hive-style subdirectories, col=value/",
);
/// `path` of a file sink.
pub const PATH: OptionDecl = OptionDecl::new(
    "path",
    OptionKind::Path,
    "the file (or, rolled or partitioned, the directory) written; an s3://, gs:// or az:// prefix is always a directory",
);
/// `omit_nulls`.
pub const OMIT_NULLS: OptionDecl = OptionDecl::new(
    "omit_nulls",
    OptionKind::Flag,
    "leave NULL fields out of each JSON line (default false)",
);
/// `format` of a text sink.
pub const TEXT_FORMAT: OptionDecl = OptionDecl::new(
    "format",
    OptionKind::Text,
    "json (default), or debezium-json to write an updating query's changes",
);
/// `format` of a file sink.
pub const FILE_FORMAT: OptionDecl = OptionDecl::new(
    "format",
    OptionKind::Text,
    "json (default), debezium-json to write an updating query's changes, or csv (Flink's: no header; always a directory of files)",
);

/// Whether the sink writes CSV (`format = 'csv'`).
pub fn is_csv(spec: &ConnectorSpec) -> bool {
    spec.options
        .get(FILE_FORMAT.name)
        .is_some_and(|f| f.trim().eq_ignore_ascii_case("csv"))
}

/// CSV files of the sink's columns (less the partition columns); refused
/// for a column CSV has no text for (a struct, list or map).
pub fn csv_files(spec: &ConnectorSpec) -> Result<Box<dyn FileFormat>> {
    let schema = partitioning(spec)?.file_schema(&spec.schema);
    if let Some(field) = schema.fields().iter().find(|f| f.data_type().is_nested()) {
        return Err(crate::error::ConnectorError::bad_option(
            FILE_FORMAT.name,
            format!(
                "column '{}' is a {}, which CSV cannot hold; write json, or select its fields",
                field.name(),
                field.data_type()
            ),
        ));
    }
    Ok(Box::new(CsvFormat))
}

/// The JSON lines a text sink's options ask for.
pub fn json_lines(spec: &ConnectorSpec) -> Result<JsonLines> {
    let values = OptionValues::new(&spec.options);
    Ok(JsonLines {
        explicit_nulls: !values.flag(OMIT_NULLS.name, false)?,
        envelope: Envelope::from_format(values.text("format"))?,
    })
}

/// Whether the sink rolls or partitions its files, or writes CSV (so
/// writes a directory).
pub fn rolled(spec: &ConnectorSpec) -> bool {
    is_csv(spec)
        || [
            ROLLING_ROWS,
            ROLLING_BYTES,
            ROLLING_INTERVAL,
            PARTITION_BY,
            FLINK_ROLLOVER_INTERVAL,
            FLINK_FILE_SIZE,
        ]
        .iter()
        .any(|o| spec.options.contains_key(o.name))
}

/// When the sink's files roll (zero: never by that measure).
pub fn rolling_policy(spec: &ConnectorSpec) -> Result<RollingPolicy> {
    let values = OptionValues::new(&spec.options);
    values.duration(FLINK_CHECK_INTERVAL.name)?;
    let bytes = match values.size(ROLLING_BYTES.name)? {
        Some(bytes) => Some(bytes),
        None => values.size(FLINK_FILE_SIZE.name)?,
    };
    let interval = match values.duration(ROLLING_INTERVAL.name)? {
        Some(interval) => Some(interval),
        None => values.duration(FLINK_ROLLOVER_INTERVAL.name)?,
    };
    Ok(RollingPolicy {
        rows: values.count::<u64>(ROLLING_ROWS.name)?.filter(|&n| n > 0),
        bytes: bytes.filter(|&n| n > 0),
        interval: interval.filter(|d| !d.is_zero()),
    })
}

/// The sink's partitioning.
pub fn partitioning(spec: &ConnectorSpec) -> Result<PartitionBy> {
    PartitionBy::parse(
        spec.options.get(PARTITION_BY.name).map(String::as_str),
        &spec.schema,
    )
}

/// NDJSON files of the sink's lines.
pub fn ndjson_files(spec: &ConnectorSpec) -> Result<Box<dyn FileFormat>> {
    Ok(Box::new(NdjsonFormat {
        lines: json_lines(spec)?,
    }))
}

/// Parquet files as the sink's options ask (`compression`,
/// `row_group_size`), of its columns less the partition columns.
pub fn parquet_files(spec: &ConnectorSpec) -> Result<Box<dyn FileFormat>> {
    let values = OptionValues::new(&spec.options);
    Ok(Box::new(ParquetFormat::new(
        &partitioning(spec)?.file_schema(&spec.schema),
        parse_compression(values.text("compression"))?,
        values.count::<usize>("row_group_size")?,
    )))
}

/// A rolling (and maybe partitioned) set of `format` files in `dir`.
pub fn file_set(
    spec: &ConnectorSpec,
    dir: &Location,
    format: Box<dyn FileFormat>,
    mode: SinkMode<'_>,
) -> Result<Box<dyn SinkWriter>> {
    Ok(Box::new(RollingFileSink::open(
        &spec.table,
        dir,
        format,
        partitioning(spec)?,
        rolling_policy(spec)?,
        mode,
    )?))
}

/// Reads every file-sink option the table sets, refusing a bad one
/// before the job runs.
pub fn check(spec: &ConnectorSpec, parquet: bool) -> Result<()> {
    rolling_policy(spec)?;
    if parquet {
        parquet_files(spec)?;
    } else if is_csv(spec) {
        csv_files(spec)?;
    } else {
        json_lines(spec)?;
        partitioning(spec)?;
    }
    Ok(())
}
