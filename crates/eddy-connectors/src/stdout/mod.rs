//! The `stdout` connector (also named `print`): one `TAG> {json}` line per
//! row on standard output ([`sink`]); an updating query's lines carry
//! their row kind (`TAG> +U {json}`) or are Debezium events.
//!
//! In: the table's options (`tag`, `format`, `omit_nulls`). Out: a
//! [`StdoutSink`] printing where the run's [`StdoutTarget`] says.

pub mod sink;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};

pub use sink::{StdoutSink, StdoutTarget};

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::Result;
use crate::options::{OptionDecl, OptionKind};
use crate::sinks::file_options::{json_lines, OMIT_NULLS, TEXT_FORMAT};

/// See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdoutConnector;

const OPTIONS: &[OptionDecl] = &[
    OptionDecl::new(
        "tag",
        OptionKind::Text,
        "the prefix of each line (default the table's name, upper-cased)",
    ),
    OMIT_NULLS,
    TEXT_FORMAT,
];

impl Connector for StdoutConnector {
    fn name(&self) -> &'static str {
        "stdout"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["print"]
    }

    fn summary(&self) -> &'static str {
        "tagged JSON lines on standard output (at least once: a resumed job prints again \
         what it printed after its last checkpoint)"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        (role == Role::Sink).then_some(OPTIONS)
    }

    fn check(&self, _config: &ConnectorConfig, spec: &ConnectorSpec, _role: Role) -> Result<()> {
        json_lines(spec).map(|_| ())
    }

    fn open_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        _mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        let tag = spec
            .options
            .get("tag")
            .cloned()
            .unwrap_or_else(|| spec.table.to_uppercase());
        Ok(Box::new(StdoutSink::new(
            &spec.table,
            tag,
            json_lines(spec)?,
            config
                .settings
                .get::<StdoutTarget>()
                .cloned()
                .unwrap_or_default(),
        )))
    }

    fn takes_changelog(&self, _spec: &ConnectorSpec) -> bool {
        true
    }
}
