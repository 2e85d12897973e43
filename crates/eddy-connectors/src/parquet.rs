//! The `parquet` connector: a directory of Parquet files, rolled by rows,
//! bytes, time and checkpoints, partitioned Hive style on request, written
//! exactly once when the job checkpoints ([`crate::sinks::rolling`]).
//!
//! In: the table's options (`path`, `compression`, `row_group_size`,
//! rolling and partitioning). Out: a [`crate::sinks::RollingFileSink`].

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::Result;
use crate::options::{OptionDecl, OptionKind};
use crate::sinks::file_options::{self as files, parquet_files};

/// See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct ParquetConnector;

const OPTIONS: &[OptionDecl] = &[
    OptionDecl::new("path", OptionKind::Path, "the directory written"),
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
];

impl Connector for ParquetConnector {
    fn name(&self) -> &'static str {
        "parquet"
    }

    fn summary(&self) -> &'static str {
        "a directory of Parquet files, rolled and partitioned, published exactly once at checkpoints"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        (role == Role::Sink).then_some(OPTIONS)
    }

    fn check(&self, config: &ConnectorConfig, spec: &ConnectorSpec, _role: Role) -> Result<()> {
        files::check(spec, true)?;
        config.sink_path(spec).map(|_| ())
    }

    fn open_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        let dir = config.task_path(config.sink_path(spec)?, true);
        files::file_set(spec, &dir, parquet_files(spec)?, mode)
    }
}
