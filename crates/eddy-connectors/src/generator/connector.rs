//! The `generator` connector: the seed pipeline's streams generated in
//! process, deterministic from a seed, at full speed or paced on the wall
//! clock.
//!
//! In: the table's options (`stream`, `seed`, `rate`, `count`,
//! `realtime`, `batch_size`). Out: a [`GeneratorSource`].

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::SourceReader;

use super::{GeneratedStream, GeneratorConfig, GeneratorSource, PacedStarts};
use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::Result;
use crate::file::source::BATCH_SIZE;
use crate::options::{OptionDecl, OptionKind, OptionValues};

/// See the module docs.
#[derive(Debug, Default, Clone)]
pub struct GeneratorConnector {
    /// Where the job's paced tables started, for [`Connector::report`].
    paced: PacedStarts,
}

const OPTIONS: &[OptionDecl] = &[
    OptionDecl::new(
        "stream",
        OptionKind::Text,
        "orders, payments or devices (default the table's name)",
    ),
    OptionDecl::new("seed", OptionKind::Count, "random seed (default 7)"),
    OptionDecl::new(
        "rate",
        OptionKind::Count,
        "background events a second of event time (default 2)",
    ),
    OptionDecl::new(
        "count",
        OptionKind::Count,
        "rows in all (default: the 60-second reference scenario)",
    ),
    OptionDecl::new(
        "realtime",
        OptionKind::Flag,
        "pace rows on the wall clock at their event time (default false)",
    ),
    BATCH_SIZE,
];

/// The generator settings of a table; `realtime` besides.
fn settings(config: &ConnectorConfig, spec: &ConnectorSpec) -> Result<(GeneratorConfig, bool)> {
    let values = OptionValues::new(&spec.options);
    let stream: GeneratedStream = values.text("stream").unwrap_or(&spec.table).parse()?;
    let realtime = values.flag("realtime", false)?;
    let rate: u32 = values.count("rate")?.unwrap_or(2);
    let batch_size = match (realtime, values.text(BATCH_SIZE.name)) {
        // Paced rows go in small batches, about 20 a second.
        (true, None) => (rate as usize / 20).max(1),
        _ => config.batch_size(spec)?,
    };
    let config = GeneratorConfig {
        stream,
        seed: values.count("seed")?.unwrap_or(7),
        rate,
        count: values.count("count")?,
        batch_size,
    };
    Ok((config, realtime))
}

impl Connector for GeneratorConnector {
    fn name(&self) -> &'static str {
        "generator"
    }

    fn summary(&self) -> &'static str {
        "the reference pipeline's orders, payments and device events, generated from a seed \
         (the same rows every run, with the scenario's planted fraud and faults)"
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
        let (generator, realtime) = settings(config, spec)?;
        let source = GeneratorSource::new(generator, spec.schema.clone(), resume, realtime)?;
        Ok(Box::new(source.reporting_to(self.paced.clone())))
    }

    /// A line per paced table once its first batch went out: the event
    /// time its pacer maps to which wall-clock time, so that a row's
    /// latency can be told from its event time.
    fn report(&self) -> Vec<String> {
        let Ok(paced) = self.paced.lock() else {
            return Vec::new();
        };
        paced
            .iter()
            .map(|(table, (origin, wall))| {
                format!("generator {table}: paced from event time {origin} at wall clock {wall} (epoch ms)")
            })
            .collect()
    }
}
