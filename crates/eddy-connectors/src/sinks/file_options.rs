//! What a file sink's options say, read in one place for the `file` and
//! `parquet` connectors and for `--output DIR`: how rows become JSON
//! lines, when files roll, how they are partitioned, the Parquet
//! settings; and opening the set of files they describe.
//!
//! In: a sink table's [`ConnectorSpec`]. Out: [`JsonLines`],
//! [`RollingPolicy`], a [`FileFormat`], a [`SinkWriter`].

use std::path::Path;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};

use super::changelog::{Envelope, JsonLines};
use super::format::{parse_compression, FileFormat, NdjsonFormat, ParquetFormat};
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
    "the file (or, rolled or partitioned, the directory) written",
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

/// The JSON lines a text sink's options ask for.
pub fn json_lines(spec: &ConnectorSpec) -> Result<JsonLines> {
    let values = OptionValues::new(&spec.options);
    Ok(JsonLines {
        explicit_nulls: !values.flag(OMIT_NULLS.name, false)?,
        envelope: Envelope::from_format(values.text("format"))?,
    })
}

/// Whether the sink rolls or partitions its files (so writes a directory).
pub fn rolled(spec: &ConnectorSpec) -> bool {
    [ROLLING_ROWS, ROLLING_BYTES, ROLLING_INTERVAL, PARTITION_BY]
        .iter()
        .any(|o| spec.options.contains_key(o.name))
}

/// When the sink's files roll (zero: never by that measure).
pub fn rolling_policy(spec: &ConnectorSpec) -> Result<RollingPolicy> {
    let values = OptionValues::new(&spec.options);
    Ok(RollingPolicy {
        rows: values.count::<u64>(ROLLING_ROWS.name)?.filter(|&n| n > 0),
        bytes: values.size(ROLLING_BYTES.name)?.filter(|&n| n > 0),
        interval: values
            .duration(ROLLING_INTERVAL.name)?
            .filter(|d| !d.is_zero()),
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
    dir: &Path,
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
    } else {
        json_lines(spec)?;
        partitioning(spec)?;
    }
    Ok(())
}
