//! The `nexmark` connector: the Nexmark benchmark's person, auction and
//! bid streams generated in process ([`super::NexmarkSource`]).
//!
//! In: the table's options (`stream`, `events`, `rate`, `batch_size`).
//! Out: a [`NexmarkSource`].

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::SourceReader;

use super::{NexmarkConfig, NexmarkSource, NexmarkStream};
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
        "person, auction, bid, or all (every event: an event_type column and person, auction and bid ROW columns, as the Nexmark suite's own DDL declares them); default the table's name, or all for a table with an event_type column",
    ),
    OptionDecl::new(
        "events",
        OptionKind::Count,
        "events of all three kinds the stream is cut from (default 10,000,000; Nexmark's name: events.num)",
    ),
    OptionDecl::new("events.num", OptionKind::Count, "the same as events"),
    OptionDecl::new(
        "rate",
        OptionKind::Count,
        "events a second of event time (default 10,000; Nexmark's name: first-event.rate)",
    ),
    OptionDecl::new("first-event.rate", OptionKind::Count, "the same as rate"),
    OptionDecl::new(
        "next-event.rate",
        OptionKind::Count,
        "events a second of event time after the first period (default: rate)",
    ),
    OptionDecl::new(
        "person.proportion",
        OptionKind::Count,
        "people among every person + auction + bid proportion events (default 1)",
    ),
    OptionDecl::new(
        "auction.proportion",
        OptionKind::Count,
        "auctions among them (default 3)",
    ),
    OptionDecl::new("bid.proportion", OptionKind::Count, "bids among them (default 46)"),
    BATCH_SIZE,
];

/// The first of `names` given (an option and its Nexmark spelling).
fn either<T: std::str::FromStr>(values: &OptionValues, names: [&str; 2]) -> Result<Option<T>> {
    match values.count(names[0])? {
        Some(value) => Ok(Some(value)),
        None => values.count(names[1]),
    }
}

fn settings(config: &ConnectorConfig, spec: &ConnectorSpec) -> Result<NexmarkConfig> {
    let values = OptionValues::new(&spec.options);
    let defaults = NexmarkConfig::default();
    let stream = match values.text("stream") {
        Some(stream) => stream.parse()?,
        None => NexmarkStream::for_table(&spec.table, &spec.schema)?,
    };
    let mix = [
        values
            .count("person.proportion")?
            .unwrap_or(defaults.mix[0]),
        values
            .count("auction.proportion")?
            .unwrap_or(defaults.mix[1]),
        values.count("bid.proportion")?.unwrap_or(defaults.mix[2]),
    ];
    Ok(NexmarkConfig {
        stream,
        events: either(&values, ["events", "events.num"])?.unwrap_or(defaults.events),
        rate: either(&values, ["rate", "first-event.rate"])?.unwrap_or(defaults.rate),
        next_rate: values.count("next-event.rate")?,
        mix,
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
