//! The `parquet` connector. As a sink: a directory of Parquet files, rolled
//! by rows, bytes, time and checkpoints, partitioned Hive style on request,
//! written exactly once when the job checkpoints
//! ([`crate::sinks::rolling`]). As a source: a Parquet file, or every one
//! under a directory with Hive-style partition columns ([`listing`]), read
//! as a bounded input for backfills ([`reader`]).
//!
//! In: the table's options (`path`, `compression`, `row_group_size`,
//! rolling and partitioning). Out: a [`crate::sinks::RollingFileSink`] or a
//! [`reader::ParquetFilesReader`].

pub mod input;
pub mod listing;
pub mod pruning;
pub mod reader;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::source::SourceReader;

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::Result;
use crate::options::{OptionDecl, OptionKind};
use crate::sinks::file_options::{self as files, parquet_files};

/// See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct ParquetConnector;

const OPTIONS: &[OptionDecl] = &[
    OptionDecl::new(
        "path",
        OptionKind::Path,
        "the directory written (local, or an s3://, gs:// or az:// prefix)",
    ),
    OptionDecl::new(
        "compression",
        OptionKind::Text,
        "zstd (default), snappy, gzip or none",
    ),
    OptionDecl::new(
        "row_group_size",
        OptionKind::Count,
        "rows per row group (default: the writer's)",
    ),
    files::ROLLING_ROWS,
    files::ROLLING_BYTES,
    files::ROLLING_INTERVAL,
    files::PARTITION_BY,
    crate::storage::STORAGE_OPTIONS,
];

const SOURCE_OPTIONS: &[OptionDecl] = &[
    OptionDecl::new(
        "path",
        OptionKind::Path,
        "a Parquet file, or a directory read whole (Hive-style col=value/ directories give partition columns); local, or an s3://, gs:// or az:// object or prefix",
    ),
    crate::file::source::BATCH_SIZE,
    crate::storage::STORAGE_OPTIONS,
];

impl Connector for ParquetConnector {
    fn name(&self) -> &'static str {
        "parquet"
    }

    fn summary(&self) -> &'static str {
        "Parquet files: written as a rolled, partitioned directory published exactly once at checkpoints; \
         read back (a file or a Hive-partitioned directory) as a bounded source"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        Some(match role {
            Role::Source => SOURCE_OPTIONS,
            Role::Sink => OPTIONS,
            Role::Lookup => return None,
        })
    }

    fn check(&self, config: &ConnectorConfig, spec: &ConnectorSpec, role: Role) -> Result<()> {
        match role {
            Role::Source => listing::list_location(&config.source_location(spec)?).map(|_| ()),
            Role::Sink => {
                files::check(spec, true)?;
                config.sink_location(spec).map(|_| ())
            }
            Role::Lookup => Ok(()),
        }
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
        let files = listing::list_location(&config.source_location(spec)?)?;
        let resume = reader::resume_position(resume)?;
        Ok(Box::new(
            reader::ParquetFilesReader::new(
                &spec.table,
                files,
                spec.schema.clone(),
                config.batch_size(spec)?,
                resume,
                serde_json::Value::Null,
            )?
            .with_pruner(pruning::Pruner::new(spec.filter.as_ref(), &spec.schema)),
        ))
    }

    fn open_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        let dir = config.task_location(config.sink_location(spec)?, true);
        files::file_set(spec, &dir, parquet_files(spec)?, mode)
    }
}
