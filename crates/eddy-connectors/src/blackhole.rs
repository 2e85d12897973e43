//! The `blackhole` connector: discards rows (benchmarks); the sink node
//! still counts them.
//!
//! In: nothing. Out: a [`BlackholeSink`].

use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::Result as EngineResult;

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::Result;
use crate::options::OptionDecl;

/// See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct BlackholeConnector;

impl Connector for BlackholeConnector {
    fn name(&self) -> &'static str {
        "blackhole"
    }

    fn summary(&self) -> &'static str {
        "discards every row (benchmarks); rows are still counted"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        (role == Role::Sink).then_some(&[])
    }

    fn open_sink(
        &self,
        _config: &ConnectorConfig,
        _spec: &ConnectorSpec,
        _mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(BlackholeSink))
    }

    fn takes_changelog(&self, _spec: &ConnectorSpec) -> bool {
        true
    }
}

/// Discards rows.
#[derive(Debug, Default)]
pub struct BlackholeSink;

impl SinkWriter for BlackholeSink {
    fn write(&mut self, _batch: &RecordBatch) -> EngineResult<()> {
        Ok(())
    }

    fn finish(&mut self) -> EngineResult<()> {
        Ok(())
    }
}
