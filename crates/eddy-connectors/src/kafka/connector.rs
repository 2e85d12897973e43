//! The `kafka` connector: topics read as sources (JSON rows, Debezium
//! change events, upserts, or a scaled-out job's exchange) and written as
//! sinks, exactly once through transactions tied to checkpoints.
//!
//! In: the table's options ([`super::config`] reads them typed), or a
//! `kafka://HOST:PORT/TOPIC?...` address given to `--input`. Out: a
//! [`super::KafkaSource`], an [`super::exchange::ExchangeSource`] or a
//! [`super::KafkaSink`]; offsets committed to the group when a checkpoint
//! completes; a checkpoint's transactions committed.

use std::collections::BTreeMap;
use std::sync::Arc;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::source::SourceReader;
use eddy_engine::state::StateSnapshot;

use super::config::{PROPERTIES_PREFIX, UPSERT_JSON};
use super::flink_names;
use super::{
    exchange, offsets, sink, KafkaCommits, KafkaSinkConfig, KafkaSinkState, KafkaSourceConfig,
};
use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::{ConnectorError, Result};
use crate::file::source::BATCH_SIZE;
use crate::ndjson::debezium;
use crate::options::{OptionDecl, OptionKind, OptionValues};

/// See the module docs. Holds what the job's Kafka tables share: what
/// this process knows of its sinks' transactions, and the clients that
/// commit sources' offsets.
#[derive(Debug, Default)]
pub struct KafkaConnector {
    commits: Arc<KafkaCommits>,
    offsets: Arc<offsets::GroupOffsets>,
}

const SERVERS: OptionDecl = OptionDecl::new(
    "bootstrap_servers",
    OptionKind::Text,
    "brokers, host:port comma-separated",
);
const TOPIC: OptionDecl = OptionDecl::new("topic", OptionKind::Text, "the topic");
const PROPERTIES: OptionDecl = OptionDecl::new(
    PROPERTIES_PREFIX,
    OptionKind::Prefix,
    "properties.NAME: a librdkafka setting, after eddy's own (so it overrides them)",
);
/// Options of the topics a scaled-out job moves rows through; only with
/// `format = 'arrow'`.
const EXCHANGE: [OptionDecl; 3] = [
    OptionDecl::new(
        "partition_columns",
        OptionKind::Text,
        "exchange topics only (format = 'arrow'): the key columns routing rows",
    ),
    OptionDecl::new(
        "partitions",
        OptionKind::Count,
        "exchange topics only: the topic's partitions",
    ),
    OptionDecl::new(
        "producers",
        OptionKind::Count,
        "exchange topics only: the tasks writing it",
    ),
];

const SOURCE_OPTIONS: &[OptionDecl] = &[
    SERVERS,
    TOPIC,
    OptionDecl::new(
        "format",
        OptionKind::Text,
        "json (default), debezium-json (a change feed), upsert-json (key = row, tombstone = delete)",
    ),
    OptionDecl::new(
        "key_column",
        OptionKind::Text,
        "the column records are keyed (so partitioned) by; an upsert topic's key",
    ),
    OptionDecl::new(
        "group_id",
        OptionKind::Text,
        "the consumer group offsets are committed to, for monitoring (default eddy-TABLE)",
    ),
    OptionDecl::new(
        "start",
        OptionKind::Text,
        "earliest (default), latest, or a timestamp: where a partition without a checkpoint starts",
    ),
    OptionDecl::new(
        "stop",
        OptionKind::OneOf(&["never", "latest"]),
        "never (default: follow the topic) or latest (end at each partition's end when reading reaches it)",
    ),
    OptionDecl::new(
        flink_names::STARTUP_MODE,
        OptionKind::OneOf(flink_names::STARTUP_MODES),
        "Flink's name for start: earliest-offset, latest-offset, or timestamp (with scan.startup.timestamp-millis)",
    ),
    OptionDecl::new(
        flink_names::STARTUP_TIMESTAMP,
        OptionKind::Count,
        "epoch milliseconds, with scan.startup.mode = 'timestamp'",
    ),
    OptionDecl::new(
        flink_names::BOUNDED_MODE,
        OptionKind::OneOf(flink_names::BOUNDED_MODES),
        "Flink's name for stop: unbounded (never) or latest-offset (latest)",
    ),
    BATCH_SIZE,
    OptionDecl::new(
        "isolation",
        OptionKind::OneOf(&["read_committed", "read_uncommitted"]),
        "which records are read (default read_committed)",
    ),
    PROPERTIES,
    EXCHANGE[0],
    EXCHANGE[1],
    EXCHANGE[2],
];

const SINK_OPTIONS: &[OptionDecl] = &[
    SERVERS,
    TOPIC,
    OptionDecl::new(
        "format",
        OptionKind::Text,
        "json (default), debezium-json or upsert-json for an updating query",
    ),
    OptionDecl::new(
        "key_column",
        OptionKind::Text,
        "the column whose value keys each record",
    ),
    OptionDecl::new(
        "delivery",
        OptionKind::OneOf(&["exactly_once", "at_least_once"]),
        "exactly_once (default; a transaction per checkpoint) or at_least_once",
    ),
    OptionDecl::new(
        "transactional_id",
        OptionKind::Text,
        "the producer's transactional id (default eddy-TABLE)",
    ),
    OptionDecl::new(
        flink_names::DELIVERY_GUARANTEE,
        OptionKind::OneOf(flink_names::DELIVERY_GUARANTEES),
        "Flink's name for delivery: exactly-once, at-least-once, or none (written at least once)",
    ),
    OptionDecl::new(
        flink_names::TRANSACTIONAL_ID_PREFIX,
        OptionKind::Text,
        "Flink's name for transactional_id",
    ),
    crate::sinks::file_options::OMIT_NULLS,
    PROPERTIES,
    EXCHANGE[0],
    EXCHANGE[1],
    EXCHANGE[2],
];

impl KafkaConnector {
    /// A sink's settings; a scaled-out task's transactional id names the
    /// task, and its exchange markers carry the task's number.
    fn sink_config(config: &ConnectorConfig, spec: &ConnectorSpec) -> Result<KafkaSinkConfig> {
        let mut sink = KafkaSinkConfig::from_spec(spec)?;
        if let Some(task) = config.task {
            sink.transactional_id = format!("{}-task-{task}", sink.transactional_id);
        }
        if let Some(exchange) = &mut sink.exchange {
            exchange.producer = config.task.unwrap_or(0);
        }
        Ok(sink)
    }
}

impl Connector for KafkaConnector {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn summary(&self) -> &'static str {
        "Kafka topics: partitions read as splits with their own watermarks, offsets in \
         checkpoints; written exactly once through a transaction per checkpoint"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        Some(match role {
            Role::Source => SOURCE_OPTIONS,
            Role::Sink => SINK_OPTIONS,
            Role::Lookup => return None,
        })
    }

    fn records_have_keys(&self) -> bool {
        true
    }

    fn explain_sink(&self, spec: &ConnectorSpec) -> Option<String> {
        Some(explain_sink(spec))
    }

    fn check(&self, config: &ConnectorConfig, spec: &ConnectorSpec, role: Role) -> Result<()> {
        let values = OptionValues::new(&spec.options);
        if values.text("format") != Some(exchange::FORMAT) {
            if let Some(option) = EXCHANGE.iter().find(|o| values.text(o.name).is_some()) {
                return Err(ConnectorError::bad_option(
                    option.name,
                    format!(
                        "only an exchange topic (format = '{}') takes it",
                        exchange::FORMAT
                    ),
                ));
            }
        }
        match role {
            Role::Source => KafkaSourceConfig::from_spec(spec, config.batch_size).map(|_| ()),
            Role::Sink => Self::sink_config(config, spec).map(|_| ()),
            Role::Lookup => Ok(()),
        }
    }

    fn open_source(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        let mut source = KafkaSourceConfig::from_spec(spec, config.batch_size(spec)?)?;
        source.partitions = config.settings.get::<TaskPartitions>().map(|p| p.0.clone());
        source.decode_threads = config.decode_threads;
        if let Some(producers) = source.exchange_producers {
            let resume: Option<exchange::ExchangePosition> = position(resume)?;
            return Ok(Box::new(exchange::ExchangeSource::open(
                &source.client,
                &source.topic,
                spec.schema.clone(),
                producers,
                source.partitions.as_deref(),
                source.batch_size,
                resume.as_ref(),
            )?));
        }
        let resume: Option<super::KafkaPosition> = position(resume)?;
        Ok(Box::new(super::KafkaSource::open(
            source,
            spec.schema.clone(),
            resume.as_ref(),
        )?))
    }

    fn open_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        Ok(Box::new(super::KafkaSink::open(
            Self::sink_config(config, spec)?,
            mode,
            self.commits.clone(),
        )?))
    }

    fn takes_changelog(&self, spec: &ConnectorSpec) -> bool {
        // An exchange topic carries whole batches, row kinds included.
        matches!(
            OptionValues::new(&spec.options).word("format").as_deref(),
            Some(debezium::FORMAT | UPSERT_JSON | exchange::FORMAT)
        )
    }

    fn source_checkpointed(
        &self,
        _config: &ConnectorConfig,
        spec: &ConnectorSpec,
        position: &serde_json::Value,
    ) -> Result<()> {
        let source = KafkaSourceConfig::from_spec(spec, 1)?;
        if source.exchange_producers.is_some() {
            // An exchange is internal to the job: nobody watches its lag.
            return Ok(());
        }
        let position: super::KafkaPosition =
            serde_json::from_value(position.clone()).map_err(|e| {
                ConnectorError::bad_option("topic", format!("checkpointed position: {e}"))
            })?;
        self.offsets.commit(&source, &position)
    }

    fn commit_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        state: &StateSnapshot,
    ) -> Result<()> {
        let Some(state) = KafkaSinkState::from_checkpoint(state)? else {
            return Ok(());
        };
        let sink = Self::sink_config(config, spec)?;
        sink::commit(&sink.client, &state, &self.commits)
    }
}

/// A Kafka topic a job reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaTopicRef {
    /// The source table.
    pub table: String,
    /// `bootstrap_servers`.
    pub servers: String,
    /// The topic.
    pub topic: String,
    /// The column the topic is keyed (so partitioned) by, as the table
    /// declares it (`key_column`).
    pub key_column: Option<String>,
}

impl KafkaTopicRef {
    /// The topic a Kafka source table reads.
    pub fn of(spec: &ConnectorSpec) -> Self {
        let values = OptionValues::new(&spec.options);
        Self {
            table: spec.table.clone(),
            servers: values
                .text("bootstrap_servers")
                .or_else(|| values.text("properties.bootstrap.servers"))
                .unwrap_or_default()
                .to_string(),
            topic: values.text("topic").unwrap_or_default().to_string(),
            key_column: values.text("key_column").map(str::to_string),
        }
    }
}

/// A Kafka reader's checkpointed position (`None` when it has none).
fn position<T: serde::de::DeserializeOwned>(
    resume: Option<&serde_json::Value>,
) -> Result<Option<T>> {
    resume
        .filter(|r| !r.is_null())
        .map(|r| serde_json::from_value(r.clone()))
        .transpose()
        .map_err(|e| ConnectorError::bad_option("topic", format!("checkpointed position: {e}")))
}

/// `--input TABLE=kafka://HOST:PORT/TOPIC?option=value&...` binds a
/// source to a Kafka topic.
pub const SCHEME: &str = "kafka://";

/// The Kafka source options of `HOST:PORT[,HOST:PORT]/TOPIC[?name=value&...]`
/// (an `--input` address less its [`SCHEME`]).
pub fn address_options(address: &str) -> Result<BTreeMap<String, String>> {
    let bad = |why: &str| {
        ConnectorError::bad_option(
            "--input",
            format!("kafka://{address}: {why} (write kafka://HOST:PORT/TOPIC?stop=latest)"),
        )
    };
    let (location, query) = address.split_once('?').unwrap_or((address, ""));
    let (servers, topic) = location.split_once('/').ok_or_else(|| bad("no topic"))?;
    if servers.is_empty() || topic.is_empty() {
        return Err(bad("no broker or no topic"));
    }
    let mut options = BTreeMap::new();
    options.insert("bootstrap_servers".to_string(), servers.to_string());
    options.insert("topic".to_string(), topic.to_string());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| bad("an option without '='"))?;
        options.insert(name.to_ascii_lowercase(), value.to_string());
    }
    Ok(options)
}

/// Scale-out: the partitions every Kafka source of the run reads (the job
/// is one task of a consumer group), set in the run's
/// [`crate::ConnectorConfig::settings`]; unset, sources read every partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPartitions(pub Vec<i32>);

/// A Kafka sink's topic and delivery guarantee for `eddy explain`: the
/// guarantee depends on the option and on whether the job checkpoints, so
/// the line says which.
pub(crate) fn explain_sink(spec: &ConnectorSpec) -> String {
    let delivery = match spec.options.get("delivery").map(String::as_str) {
        Some("at_least_once") => "at least once",
        _ => "exactly once with checkpoints (--state-dir: a transaction per checkpoint; readers use read_committed), at least once without",
    };
    format!(
        "topic={}, delivery: {delivery}",
        spec.options.get("topic").map(String::as_str).unwrap_or("?")
    )
}
