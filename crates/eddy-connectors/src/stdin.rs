//! The `stdin` connector: NDJSON rows (or Debezium change events) piped
//! into `eddy run`, read until the pipe closes. A job submitted to a
//! server has no stdin and is refused.
//!
//! In: the table's options. Out: an [`crate::ndjson::NdjsonSource`] on the
//! process's standard input.

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::SourceReader;

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::{ConnectorError, Result};
use crate::file::source;
use crate::options::OptionDecl;

/// See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdinConnector;

const OPTIONS: &[OptionDecl] = &[
    source::FORMAT,
    source::BATCH_SIZE,
    source::MAX_LINE_BYTES,
    source::JSON_TIMESTAMP_FORMAT,
];

impl Connector for StdinConnector {
    fn name(&self) -> &'static str {
        "stdin"
    }

    fn summary(&self) -> &'static str {
        "NDJSON on standard input (eddy run only), read until it closes"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        (role == Role::Source).then_some(OPTIONS)
    }

    fn check(&self, config: &ConnectorConfig, spec: &ConnectorSpec, _role: Role) -> Result<()> {
        if config.roots.is_some() {
            return Err(ConnectorError::bad_option(
                "connector",
                "a submitted job cannot read stdin",
            ));
        }
        source::check_format(spec)
    }

    fn open_source(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        self.check(config, spec, Role::Source)?;
        source::open(config, spec, "-", resume)
    }
}
