//! The `file` connector (also named `ndjson`, and Arroyo's `single_file`):
//! NDJSON files read as a
//! source ([`source`]), and written as a sink — one file appended to, or,
//! with rolling or partitioning options, a directory of rolled files —
//! exactly once when the job checkpoints ([`crate::sinks`]).
//!
//! In: the table's options (`path`, `format`, ...). Out: an
//! [`crate::ndjson::NdjsonSource`], an [`NdjsonSink`] or a rolled file set.

pub mod source;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::source::SourceReader;

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::Result;
use crate::options::{OptionDecl, OptionKind};
use crate::sinks::changelog::Envelope;
use crate::sinks::file_options::{self as files, json_lines, rolled};
use crate::sinks::NdjsonSink;
use crate::storage::Location;

/// See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileConnector;

const SOURCE_OPTIONS: &[OptionDecl] = &[
    OptionDecl::new(
        "path",
        OptionKind::Path,
        "the NDJSON file read (a local path, or an s3://, gs:// or az:// object)",
    ),
    source::FORMAT,
    source::BATCH_SIZE,
    source::MAX_LINE_BYTES,
    source::JSON_TIMESTAMP_FORMAT,
    crate::storage::STORAGE_OPTIONS,
];

const SINK_OPTIONS: &[OptionDecl] = &[
    files::PATH,
    files::FILE_FORMAT,
    files::OMIT_NULLS,
    files::ROLLING_ROWS,
    files::ROLLING_BYTES,
    files::ROLLING_INTERVAL,
    files::PARTITION_BY,
    files::FLINK_ROLLOVER_INTERVAL,
    files::FLINK_FILE_SIZE,
    files::FLINK_CHECK_INTERVAL,
    files::FLINK_PARTITION_COMMIT,
    files::FLINK_PARTITION_TIME,
    crate::storage::STORAGE_OPTIONS,
];

impl Connector for FileConnector {
    fn name(&self) -> &'static str {
        "file"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["ndjson", "filesystem", "single_file"]
    }

    fn summary(&self) -> &'static str {
        "NDJSON files: read from the start (and resumed at the checkpointed byte), \
         written exactly once with checkpoints, rolled and partitioned on request"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        Some(match role {
            Role::Source => SOURCE_OPTIONS,
            Role::Sink => SINK_OPTIONS,
            Role::Lookup => return None,
        })
    }

    fn check(&self, config: &ConnectorConfig, spec: &ConnectorSpec, role: Role) -> Result<()> {
        match role {
            Role::Source => {
                source::check_format(spec)?;
                config.source_location(spec).map(|_| ())
            }
            Role::Sink => {
                files::check(spec, false)?;
                config.sink_location(spec).map(|_| ())
            }
            Role::Lookup => Ok(()),
        }
    }

    fn open_source(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        source::check_format(spec)?;
        match config.source_location(spec)? {
            Location::Bucket(object) => source::open_object(config, spec, &object, resume),
            Location::Local(path) => source::open(config, spec, &path.to_string_lossy(), resume),
        }
    }

    fn open_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        let location = config.sink_location(spec)?;
        // A bucket has no appends: its sinks are always a set of files.
        let path = match location {
            Location::Local(path) if !rolled(spec) => path,
            location => {
                let format = if files::is_csv(spec) {
                    files::csv_files(spec)?
                } else {
                    files::ndjson_files(spec)?
                };
                let dir = config.task_location(location, true);
                return files::file_set(spec, &dir, format, mode);
            }
        };
        Ok(Box::new(NdjsonSink::open(
            &spec.table,
            config.task_path(path, false),
            json_lines(spec)?,
            mode,
        )?))
    }

    fn takes_changelog(&self, spec: &ConnectorSpec) -> bool {
        !files::is_csv(spec)
            && json_lines(spec).map(|l| l.envelope).ok() == Some(Envelope::Debezium)
    }
}
