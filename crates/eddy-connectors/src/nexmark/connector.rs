//! The `nexmark` connector: the Nexmark benchmark's person, auction and
//! bid streams generated in process ([`super::NexmarkSource`]).
//!
//! In: the table's options (`stream`, `events`, `rate`, `batch_size`).
//! Out: a [`NexmarkSource`].

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::SourceReader;

use super::{NexmarkConfig, NexmarkSource};
use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::Result;
use crate::file::source::BATCH_SIZE;
use crate::options::{OptionDecl, OptionKind, OptionValues};

/// See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct NexmarkConnector;

const OPTIONS: &[OptionDecl] = &[
    OptionDecl::new(
        "stream",
        OptionKind::Text,
        "person, auction or bid (default the table's name)",
    ),
    OptionDecl::new(
        "events",
        OptionKind::Count,
        "events of all three kinds the stream is cut from (default 10,000,000)",
    ),
    OptionDecl::new(
        "rate",
        OptionKind::Count,
        "events a second of event time (default 10,000)",
    ),
    BATCH_SIZE,
];

fn settings(config: &ConnectorConfig, spec: &ConnectorSpec) -> Result<NexmarkConfig> {
    let values = OptionValues::new(&spec.options);
    Ok(NexmarkConfig {
        stream: values.text("stream").unwrap_or(&spec.table).parse()?,
        events: values.count("events")?.unwrap_or(10_000_000),
        rate: values.count("rate")?.unwrap_or(10_000),
        batch_size: config.batch_size(spec)?,
    })
}

impl Connector for NexmarkConnector {
    fn name(&self) -> &'static str {
        "nexmark"
    }

    fn summary(&self) -> &'static str {
        "the Nexmark benchmark's online auction (person, auction, bid), generated as Nexmark's \
         reference generator does"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        (role == Role::Source).then_some(OPTIONS)
    }

    fn check(&self, config: &ConnectorConfig, spec: &ConnectorSpec, _role: Role) -> Result<()> {
        settings(config, spec).map(|_| ())
    }

    fn open_source(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(NexmarkSource::new(
            settings(config, spec)?,
            spec.schema.clone(),
            resume,
        )?))
    }
}
