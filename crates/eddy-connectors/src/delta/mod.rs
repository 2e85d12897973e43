//! The `delta` connector: Delta Lake tables in a local directory, written
//! exactly once as a stream's output ([`sink`]) and read back, at any
//! version, as a bounded source for backfills.
//!
//! In: the table's options. Out: a [`sink::DeltaSink`] or a
//! [`crate::parquet::reader::ParquetFilesReader`] over the table's files at
//! a version. The log itself is [`log`]; types are [`schema`].
//!
//! ```sql
//! CREATE TABLE payments_by_country (country VARCHAR, day DATE, total DOUBLE)
//!   WITH (connector = 'delta', path = 'lake/payments', partition_by = 'day');
//! CREATE TABLE history (...) WITH (connector = 'delta', path = 'lake/payments', version = '12');
//! ```
//!
//! eddy writes the log itself (JSON commits, Parquet checkpoints every
//! [`log::CHECKPOINT_INTERVAL`] commits) rather than through delta-rs,
//! whose crate brings its own HTTP, TLS and object-store stack into every
//! build; the tables are checked with delta-rs's Python package in the
//! tests.

pub mod files;
pub mod log;
pub mod maintenance;
pub mod merge;
pub mod schema;
pub mod sink;
pub mod stats;
pub mod table_store;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use datafusion::arrow::datatypes::DataType;
use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::source::SourceReader;
use eddy_engine::state::StateSnapshot;

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::{ConnectorError, Result};
use crate::options::{OptionDecl, OptionKind, OptionValues};
use crate::parquet::reader::{self, FileToRead, ParquetFilesReader};
use crate::sinks::file_options::PARTITION_BY;
use crate::sinks::format::parse_compression;
use crate::sinks::partition::PartitionBy;
use log::Snapshot;
use sink::{DeltaOptions, DeltaSink, DeltaSinkState};

/// Files roll at about this size unless `target_file_size` says otherwise.
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 128 * 1024 * 1024;

/// See the module docs. Holds each table's log as last read, so a
/// checkpoint's commit reads only the commits after it.
#[derive(Debug, Default)]
pub struct DeltaConnector {
    logs: Mutex<HashMap<PathBuf, Snapshot>>,
    /// What each sink table committed in this run.
    committed: sink::Committed,
    /// Commits since each table's last maintenance (compaction, vacuum).
    since_maintenance: Mutex<HashMap<PathBuf, u64>>,
}

const SINK_OPTIONS: &[OptionDecl] = &[
    OptionDecl::new("path", OptionKind::Path, "the table's directory"),
    OptionDecl::new(
        "partition_by",
        OptionKind::Text,
        "partition columns (comma-separated): col=value/ directories, as Delta lists them",
    ),
    OptionDecl::new(
        "target_file_size",
        OptionKind::Size,
        "start a new file after about this many bytes (default 128MB); every checkpoint also closes the open files",
    ),
    OptionDecl::new(
        "compression",
        OptionKind::Text,
        "Parquet compression: zstd (default), snappy, gzip or none",
    ),
    OptionDecl::new(
        "row_group_size",
        OptionKind::Count,
        "rows per Parquet row group (default: the writer's)",
    ),
    OptionDecl::new(
        "optimize_every",
        OptionKind::Count,
        "compact each partition's small files into files of about target_file_size every this many commits (an OPTIMIZE commit); default never",
    ),
    OptionDecl::new(
        "vacuum_retention",
        OptionKind::Duration,
        "delete files the table removed longer ago than this (checked every optimize_every commits, else every 10); default never",
    ),
    crate::storage::STORAGE_OPTIONS,
];

const SOURCE_OPTIONS: &[OptionDecl] = &[
    OptionDecl::new("path", OptionKind::Path, "the table's directory"),
    OptionDecl::new(
        "version",
        OptionKind::Count,
        "read the table as of this version (time travel); default the newest",
    ),
    OptionDecl::new(
        "timestamp",
        OptionKind::Text,
        "read the table as of this instant (time travel): '2023-11-14 22:13:20' (UTC) or ms since the epoch",
    ),
    crate::file::source::BATCH_SIZE,
    crate::storage::STORAGE_OPTIONS,
];

/// Refuses a table whose protocol asks for features eddy does not
/// implement (`writing`: as a writer, else as a reader).
pub fn check_protocol(table: &Snapshot, writing: bool) -> Result<()> {
    let Some(protocol) = &table.protocol else {
        return Ok(());
    };
    let refuse = |why: String| Err(ConnectorError::bad_option("path", why));
    if writing && protocol.min_writer_version > 2 {
        let features = protocol.writer_features.clone().unwrap_or_default();
        return refuse(format!(
            "the Delta table needs writer version {} ({}); eddy writes version 2 tables (append, no constraints, change data feed or generated columns)",
            protocol.min_writer_version,
            if features.is_empty() { "constraints, change data feed, generated columns or identity columns".into() } else { features.join(", ") }
        ));
    }
    match protocol.min_reader_version {
        1 => Ok(()),
        2 => {
            let mode = table.metadata.as_ref().and_then(|m| {
                m.configuration
                    .get("delta.columnMapping.mode")
                    .cloned()
                    .flatten()
            });
            match mode.as_deref() {
                None | Some("none") => Ok(()),
                Some(mode) => refuse(format!(
                    "the Delta table uses column mapping (mode '{mode}'), which eddy does not read"
                )),
            }
        }
        3 => {
            let unknown: Vec<String> = protocol
                .reader_features
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter(|f| f != "timestampNtz")
                .collect();
            if unknown.is_empty() {
                Ok(())
            } else {
                refuse(format!(
                    "the Delta table needs reader features eddy does not have: {}",
                    unknown.join(", ")
                ))
            }
        }
        v => refuse(format!("the Delta table needs reader version {v}")),
    }
}

/// `2023-11-14 22:13:20.000` (UTC) of ms since the epoch.
pub fn format_ms(ms: i64) -> String {
    datafusion::arrow::temporal_conversions::timestamp_ms_to_datetime(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// Ms since the epoch of a `timestamp` option.
fn parse_instant(text: &str) -> Result<i64> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    let formats = [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%S",
    ];
    let trimmed = text.trim_end_matches('Z');
    for format in formats {
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(trimmed, format) {
            return Ok(t.and_utc().timestamp_millis());
        }
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(trimmed, "%Y-%m-%d") {
        return Ok(d
            .and_hms_opt(0, 0, 0)
            .map(|t| t.and_utc().timestamp_millis())
            .unwrap_or_default());
    }
    Err(ConnectorError::bad_option(
        "timestamp",
        format!("'{text}' is not an instant ('2023-11-14 22:13:20', UTC, or ms since the epoch)"),
    ))
}

impl DeltaConnector {
    /// The table's directory: a local path, or a bucket prefix as its
    /// `s3://...` text ([`table_store::TableStore::of`] reads either).
    fn table_dir(config: &ConnectorConfig, spec: &ConnectorSpec, role: Role) -> Result<PathBuf> {
        let location = match role {
            Role::Source => config.source_location(spec)?,
            Role::Sink => config.sink_location(spec)?,
            Role::Lookup => return Err(crate::connector::not_a("delta", spec, role)),
        };
        Ok(match location {
            crate::storage::Location::Local(dir) => dir,
            bucket => PathBuf::from(bucket.to_string()),
        })
    }

    fn partition_columns(spec: &ConnectorSpec) -> Result<(PartitionBy, Vec<String>)> {
        let text = spec.options.get(PARTITION_BY.name).map(String::as_str);
        let partition = PartitionBy::parse(text, &spec.schema)?;
        let columns = match &partition {
            PartitionBy::None => Vec::new(),
            PartitionBy::EventTime { .. } => {
                return Err(ConnectorError::bad_option(
                    PARTITION_BY.name,
                    "a Delta table is partitioned by columns (an event-time pattern makes no column); add a DATE column, e.g. CAST(window_start AS DATE) AS day",
                ))
            }
            PartitionBy::Columns(indices) => indices
                .iter()
                .map(|&i| {
                    let field = spec.schema.field(i);
                    let plain = matches!(
                        field.data_type(),
                        DataType::Utf8
                            | DataType::Utf8View
                            | DataType::LargeUtf8
                            | DataType::Boolean
                            | DataType::Int8
                            | DataType::Int16
                            | DataType::Int32
                            | DataType::Int64
                            | DataType::Date32
                    );
                    if !plain {
                        return Err(ConnectorError::bad_option(
                            PARTITION_BY.name,
                            format!(
                                "'{}' is {}; Delta partition columns here are text, integers, booleans or DATE (for a time, partition by CAST(... AS DATE))",
                                field.name(),
                                field.data_type()
                            ),
                        ));
                    }
                    Ok(field.name().clone())
                })
                .collect::<Result<Vec<_>>>()?,
        };
        Ok((partition, columns))
    }

    /// What a sink's options say.
    fn sink_options(config: &ConnectorConfig, spec: &ConnectorSpec) -> Result<DeltaOptions> {
        let (partition, partition_columns) = Self::partition_columns(spec)?;
        let values = OptionValues::new(&spec.options);
        merge::key_indices(&spec.schema, &spec.primary_key)?;
        Ok(DeltaOptions {
            dir: Self::table_dir(config, spec, Role::Sink)?,
            partition,
            partition_columns,
            target_file_size: values
                .size("target_file_size")?
                .filter(|&n| n > 0)
                .unwrap_or(DEFAULT_TARGET_FILE_SIZE),
            compression: parse_compression(values.text("compression"))?,
            row_group_size: values.count::<usize>("row_group_size")?,
            task: config.task,
            key: spec.primary_key.clone(),
            optimize_every: values.count::<u64>("optimize_every")?,
            vacuum_retention_ms: values
                .duration("vacuum_retention")?
                .map(|d| d.as_millis() as i64),
        })
    }

    /// The table's files at the version the options ask for, and that version.
    fn files_at(
        dir: &Path,
        spec: &ConnectorSpec,
        pinned: Option<i64>,
    ) -> Result<(Snapshot, Vec<FileToRead>)> {
        let values = OptionValues::new(&spec.options);
        let version = match (
            pinned,
            values.count::<i64>("version")?,
            values.text("timestamp"),
        ) {
            (Some(v), _, _) => Some(v),
            (None, Some(_), Some(_)) => {
                return Err(ConnectorError::bad_option(
                    "timestamp",
                    "give version or timestamp, not both",
                ))
            }
            (None, Some(v), None) => Some(v),
            (None, None, Some(t)) => Some(log::version_at(dir, parse_instant(t)?)?),
            (None, None, None) => None,
        };
        let table = log::snapshot(dir, version)?;
        check_protocol(&table, false)?;
        let files = table
            .files
            .iter()
            .map(|add| {
                if add.deletion_vector.is_some() {
                    return Err(ConnectorError::bad_option(
                        "path",
                        format!("{}: the file {} has deleted rows (a deletion vector), which eddy does not read", dir.display(), add.path),
                    ));
                }
                Ok(FileToRead {
                    path: dir.join(log::decode_path(&add.path)),
                    partition_values: add.partition_values.clone(),
                    stats: add.stats.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((table, files))
    }

    /// Refuses declared columns the table does not have.
    fn check_columns(table: &Snapshot, dir: &Path, spec: &ConnectorSpec) -> Result<()> {
        let metadata = table.metadata(dir)?;
        let schema = schema::from_delta(&metadata.schema_string)?;
        for field in spec.schema.fields() {
            let Ok(found) = schema.field_with_name(field.name()) else {
                let columns: Vec<&str> =
                    schema.fields().iter().map(|f| f.name().as_str()).collect();
                return Err(ConnectorError::bad_option(
                    "path",
                    format!(
                        "the Delta table has no column '{}' (columns: {})",
                        field.name(),
                        columns.join(", ")
                    ),
                ));
            };
            if !datafusion::arrow::compute::can_cast_types(found.data_type(), field.data_type()) {
                return Err(ConnectorError::bad_option(
                    "path",
                    format!(
                        "column '{}' is {} in the Delta table and cannot be read as {}",
                        field.name(),
                        found.data_type(),
                        field.data_type()
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Connector for DeltaConnector {
    fn name(&self) -> &'static str {
        "delta"
    }

    fn summary(&self) -> &'static str {
        "Delta Lake tables: written exactly once (one commit per checkpoint, idempotent by app transaction), \
         read back at any version or instant as a bounded source"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        Some(match role {
            Role::Source => SOURCE_OPTIONS,
            Role::Sink => SINK_OPTIONS,
            Role::Lookup => return None,
        })
    }

    fn check(&self, config: &ConnectorConfig, spec: &ConnectorSpec, role: Role) -> Result<()> {
        let dir = Self::table_dir(config, spec, role)?;
        match role {
            Role::Sink => {
                schema::to_delta(&spec.schema)?;
                let partitions = Self::sink_options(config, spec)?.partition_columns;
                if log::exists(&dir)? {
                    let table = log::snapshot(&dir, None)?;
                    check_protocol(&table, true)?;
                    let metadata = table.metadata(&dir)?;
                    schema::check_append(
                        &metadata.schema_string,
                        &metadata.partition_columns,
                        &spec.schema,
                        &partitions,
                    )?;
                }
                Ok(())
            }
            Role::Source => {
                let (table, _) = Self::files_at(&dir, spec, None)?;
                Self::check_columns(&table, &dir, spec)
            }
            Role::Lookup => Ok(()),
        }
    }

    fn open_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(DeltaSink::open(
            &spec.table,
            &spec.schema,
            Self::sink_options(config, spec)?,
            mode,
            self.committed.clone(),
        )?))
    }

    fn takes_changelog(&self, spec: &ConnectorSpec) -> bool {
        // Changes are merged by the table's primary key.
        !spec.primary_key.is_empty()
    }

    fn commit_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        state: &StateSnapshot,
    ) -> Result<()> {
        let Some(state) = DeltaSinkState::from_snapshot(state)? else {
            return Ok(());
        };
        let mut logs = self
            .logs
            .lock()
            .map_err(|_| ConnectorError::bad_option("path", "a Delta commit failed earlier"))?;
        let log = match logs.get_mut(&state.dir) {
            Some(log) => log,
            None => {
                let read = log::snapshot(&state.dir, None)?;
                logs.entry(state.dir.clone()).or_insert(read)
            }
        };
        let options = Self::sink_options(config, spec)?;
        let counts = sink::commit(&state, log, &options, &spec.schema)?;
        sink::count(&self.committed, &spec.table, &state.dir, counts);
        let Some(every) = options.maintenance_every() else {
            return Ok(());
        };
        let due = {
            let mut since = self.since_maintenance.lock().map_err(|_| {
                ConnectorError::bad_option("path", "a Delta maintenance failed earlier")
            })?;
            let n = since.entry(state.dir.clone()).or_default();
            *n += counts.commits;
            let due = *n >= every;
            if due {
                *n = 0;
            }
            due
        };
        if due {
            let keep: Vec<PathBuf> = state
                .pending
                .iter()
                .map(|p| state.dir.join(&p.file.path))
                .collect();
            let mut options = options;
            options.dir = state.dir.clone();
            let done = maintenance::maintain(log, &options, &spec.schema, &state.app_id, &keep)?;
            sink::count(&self.committed, &spec.table, &state.dir, done);
        }
        Ok(())
    }

    fn report(&self) -> Vec<String> {
        let Ok(committed) = self.committed.lock() else {
            return Vec::new();
        };
        committed
            .iter()
            .map(|(table, (dir, c))| {
                let mut line = format!(
                    "delta sink {table}: {} commits, {} files, {:.1} MiB added to {}",
                    c.commits,
                    c.files,
                    c.bytes as f64 / (1024.0 * 1024.0),
                    dir.display()
                );
                if c.removed > 0 {
                    line.push_str(&format!("; {} files rewritten", c.removed));
                }
                if c.compactions > 0 {
                    line.push_str(&format!("; {} compactions", c.compactions));
                }
                if c.vacuumed > 0 {
                    line.push_str(&format!("; {} files vacuumed", c.vacuumed));
                }
                line
            })
            .collect()
    }

    fn uses_filter(&self) -> bool {
        true
    }

    fn open_source(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        let dir = Self::table_dir(config, spec, Role::Source)?;
        let resume = reader::resume_position(resume)?;
        // A resumed read goes on at the version it started at, whatever
        // was committed since.
        let pinned = resume
            .as_ref()
            .and_then(|p| p.extra.get("version"))
            .and_then(|v| v.as_i64());
        let (table, files) = Self::files_at(&dir, spec, pinned)?;
        Self::check_columns(&table, &dir, spec)?;
        Ok(Box::new(
            ParquetFilesReader::new(
                &spec.table,
                files,
                spec.schema.clone(),
                config.batch_size(spec)?,
                resume,
                serde_json::json!({ "version": table.version }),
            )?
            .with_pruner(crate::parquet::pruning::Pruner::new(
                spec.filter.as_ref(),
                &spec.schema,
            )),
        ))
    }
}
