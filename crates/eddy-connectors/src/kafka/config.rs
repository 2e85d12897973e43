//! The options of Kafka tables, read once into typed settings.
//!
//! In: a table's [`ConnectorSpec`] options. Out: [`KafkaSourceConfig`] or
//! [`KafkaSinkConfig`], and the librdkafka client configuration they
//! imply. Options named `properties.<name>` go to the client as `<name>`
//! (Flink's convention), after eddy's own settings, so they can override
//! them; Flink's other option names are read as eddy's
//! ([`super::flink_names`]).

use std::collections::BTreeMap;

use eddy_engine::graph::ConnectorSpec;
use rdkafka::ClientConfig;

use crate::error::{ConnectorError, Result};

/// Prefix of options handed to the Kafka client.
pub const PROPERTIES_PREFIX: &str = "properties.";

/// Where a source starts reading a partition it has no checkpoint for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// The oldest record the topic keeps (the default).
    Earliest,
    /// Only records written after the job starts.
    Latest,
    /// The first record whose Kafka timestamp is at or after this instant
    /// (epoch ms); earlier records are skipped.
    Timestamp(i64),
}

/// Where a source stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopAt {
    /// Never: the source follows the topic.
    Never,
    /// At the end of each partition, when reading first reaches it: the
    /// source then ends, and the job finishes (a backfill, a test).
    Latest,
}

/// A Kafka source's settings.
#[derive(Debug, Clone)]
pub struct KafkaSourceConfig {
    /// The table.
    pub table: String,
    /// The topic read.
    pub topic: String,
    /// The client configuration.
    pub client: ClientConfig,
    /// `start`.
    pub start: StartAt,
    /// `stop`.
    pub stop: StopAt,
    /// Rows per batch.
    pub batch_size: usize,
    /// Read only these partitions (a task of a scaled-out job); `None`
    /// reads every partition.
    pub partitions: Option<Vec<i32>>,
    /// Threads decoding records (the reader polls on meanwhile).
    pub decode_threads: usize,
    /// `format = 'arrow'`: an exchange written by this many tasks (option
    /// `producers`), read with the watermark its markers carry.
    pub exchange_producers: Option<usize>,
    /// `format = 'upsert-json'`: the column the record key fills (a
    /// record is the new value of its key, a tombstone deletes the key).
    pub upsert_key: Option<String>,
}

/// What a sink promises about its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// With checkpoints: each checkpoint's records are written in one Kafka
    /// transaction once the checkpoint is complete; a resumed job writes
    /// only what is not already in the topic. Readers must use
    /// `isolation.level = read_committed`.
    ExactlyOnce,
    /// Records are written as they come and flushed at each checkpoint: a
    /// job resumed from a checkpoint writes again what it wrote after it.
    AtLeastOnce,
}

impl Delivery {
    /// The name used in options and plans.
    pub fn name(self) -> &'static str {
        match self {
            Self::ExactlyOnce => "exactly_once",
            Self::AtLeastOnce => "at_least_once",
        }
    }
}

/// A Kafka sink's settings.
/// How an exchange sink routes rows (see [`super::exchange`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeSinkOptions {
    /// Columns hashed to pick a row's partition (option
    /// `partition_columns`, comma-separated; none: every row to partition 0).
    pub keys: Vec<String>,
    /// The topic's partition count (option `partitions`).
    pub partitions: u32,
    /// The writing task's number: its markers carry it.
    pub producer: u32,
}

#[derive(Debug, Clone)]
pub struct KafkaSinkConfig {
    /// The table.
    pub table: String,
    /// The topic written.
    pub topic: String,
    /// The client configuration.
    pub client: ClientConfig,
    /// The column whose value is each record's key.
    pub key_column: Option<usize>,
    /// `delivery`.
    pub delivery: Delivery,
    /// The transactional id (exactly-once).
    pub transactional_id: String,
    /// How rows become record values: JSON objects (NULL fields written
    /// unless `omit_nulls`), or Debezium change events (`format =
    /// 'debezium-json'`).
    pub lines: crate::sinks::changelog::JsonLines,
    /// `format = 'upsert-json'`: each record holds its key's current row,
    /// a delete is a tombstone (a compacted topic keeps the current table).
    pub upsert: bool,
    /// The columns the sink receives.
    pub schema: datafusion::arrow::datatypes::SchemaRef,
    /// `format = 'arrow'`: an exchange of a job scaled out over a group.
    pub exchange: Option<ExchangeSinkOptions>,
}

fn required<'a>(options: &'a BTreeMap<String, String>, name: &str, what: &str) -> Result<&'a str> {
    options
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| ConnectorError::bad_option(name, format!("a kafka {what} needs a {name}")))
}

/// The `format` of an upsert sink: records keyed by `key_column` holding
/// the key's current row, deletes as tombstones.
pub const UPSERT_JSON: &str = "upsert-json";

/// The client configuration shared by sources and sinks.
fn client_config(
    spec: &ConnectorSpec,
    options: &BTreeMap<String, String>,
    what: &str,
) -> Result<ClientConfig> {
    if let Some(format) = options.get("format") {
        if !matches!(
            format.as_str(),
            "json"
                | "ndjson"
                | crate::ndjson::debezium::FORMAT
                | UPSERT_JSON
                | super::exchange::FORMAT
        ) {
            return Err(ConnectorError::bad_option(
                "format",
                format!(
                    "'{format}' is not supported (use 'json', or '{}' or '{UPSERT_JSON}' for a changelog)",
                    crate::ndjson::debezium::FORMAT
                ),
            ));
        }
    }
    let servers = match options.get("bootstrap_servers") {
        Some(v) => v.as_str(),
        None => options
            .get("properties.bootstrap.servers")
            .map(String::as_str)
            .ok_or_else(|| {
                ConnectorError::bad_option(
                    "bootstrap_servers",
                    format!("a kafka {what} needs bootstrap_servers (host:port, comma-separated)"),
                )
            })?,
    };
    let mut client = ClientConfig::new();
    client.set("bootstrap.servers", servers);
    client.set("client.id", format!("eddy-{}", spec.table));
    for (name, value) in options {
        if let Some(property) = name.strip_prefix(PROPERTIES_PREFIX) {
            client.set(property, value);
        }
    }
    Ok(client)
}

impl KafkaSourceConfig {
    /// Reads a source table's options.
    pub fn from_spec(spec: &ConnectorSpec, default_batch_size: usize) -> Result<Self> {
        let options = &super::flink_names::as_eddy_names(&spec.options)?;
        let topic = required(options, "topic", "source")?.to_string();
        if let Some(key) = options.get("key_column") {
            if spec.schema.index_of(key).is_err() {
                return Err(ConnectorError::bad_option(
                    "key_column",
                    format!("no column '{key}' in table '{}'", spec.table),
                ));
            }
        }
        let mut client = client_config(spec, options, "source")?;
        let isolation = match options.get("isolation").map(|v| v.to_ascii_lowercase()) {
            None => "read_committed",
            Some(v) if v == "read_committed" => "read_committed",
            Some(v) if v == "read_uncommitted" => "read_uncommitted",
            Some(v) => {
                return Err(ConnectorError::bad_option(
                    "isolation",
                    format!("'{v}' is not read_committed or read_uncommitted"),
                ))
            }
        };
        let group = options
            .get("group_id")
            .cloned()
            .unwrap_or_else(|| format!("eddy-{}", spec.table));
        let mut defaults = ClientConfig::new();
        defaults
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set("auto.offset.reset", "earliest")
            .set("isolation.level", isolation)
            // When its local queue is full the client waits this long before
            // fetching again (1 s by default): eddy drains the queue in
            // batches, so a full queue is a moment, not a reason to stall.
            .set("fetch.queue.backoff.ms", "5");
        for (k, v) in defaults.config_map() {
            if client.get(k).is_none() {
                client.set(k, v);
            }
        }
        let start = match options.get("start") {
            None => StartAt::Earliest,
            Some(v) => parse_start(v)?,
        };
        let stop = match options.get("stop").map(|v| v.to_ascii_lowercase()) {
            None => StopAt::Never,
            Some(v) if v == "never" => StopAt::Never,
            Some(v) if v == "latest" => StopAt::Latest,
            Some(v) => {
                return Err(ConnectorError::bad_option(
                    "stop",
                    format!("'{v}' is not 'never' or 'latest'"),
                ))
            }
        };
        if stop == StopAt::Latest && client.get("fetch.wait.max.ms").is_none() {
            // The end of a partition is known when a fetch comes back empty:
            // do not let the broker hold that answer back.
            client.set("fetch.wait.max.ms", "10");
        }
        let exchange_producers =
            if options.get("format").map(String::as_str) == Some(super::exchange::FORMAT) {
                Some(
                    required(options, "producers", "exchange")?
                        .trim()
                        .parse()
                        .map_err(|_| ConnectorError::bad_option("producers", "not a number"))?,
                )
            } else {
                None
            };
        let batch_size = match options.get("batch_size") {
            Some(v) => v.trim().parse().map_err(|_| {
                ConnectorError::bad_option("batch_size", format!("'{v}' is not a valid number"))
            })?,
            None => default_batch_size,
        };
        let upsert_key = if options.get("format").map(String::as_str) == Some(UPSERT_JSON) {
            Some(
                options
                    .get("key_column")
                    .cloned()
                    .ok_or_else(|| {
                        ConnectorError::bad_option(
                            "key_column",
                            "an upsert source (format = 'upsert-json') needs key_column: the primary key column the record key holds",
                        )
                    })?,
            )
        } else {
            None
        };
        Ok(Self {
            table: spec.table.clone(),
            topic,
            client,
            start,
            stop,
            batch_size: batch_size.max(1),
            partitions: None,
            decode_threads: 1,
            exchange_producers,
            upsert_key,
        })
    }
}

/// `earliest`, `latest`, or an instant: epoch milliseconds or an RFC 3339
/// timestamp (`2023-11-14T22:13:20Z`).
fn parse_start(value: &str) -> Result<StartAt> {
    let text = value.trim();
    match text.to_ascii_lowercase().as_str() {
        "earliest" => return Ok(StartAt::Earliest),
        "latest" => return Ok(StartAt::Latest),
        _ => {}
    }
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(StartAt::Timestamp(ms));
    }
    datafusion::arrow::compute::kernels::cast_utils::string_to_timestamp_nanos(text)
        .map(|ns| StartAt::Timestamp(ns.div_euclid(1_000_000)))
        .map_err(|_| {
            ConnectorError::bad_option(
                "start",
                format!(
                    "'{text}' is not 'earliest', 'latest', epoch milliseconds or a timestamp such as '2023-11-14T22:13:20Z'"
                ),
            )
        })
}

impl KafkaSinkConfig {
    /// Reads a sink table's options.
    pub fn from_spec(spec: &ConnectorSpec) -> Result<Self> {
        let options = &super::flink_names::as_eddy_names(&spec.options)?;
        let topic = required(options, "topic", "sink")?.to_string();
        let client = client_config(spec, options, "sink")?;
        let key_column = options
            .get("key_column")
            .map(|name| {
                spec.schema.index_of(name).map_err(|_| {
                    let columns: Vec<&str> = spec
                        .schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect();
                    ConnectorError::bad_option(
                        "key_column",
                        format!("no column '{name}' (columns: {})", columns.join(", ")),
                    )
                })
            })
            .transpose()?;
        let delivery = match options.get("delivery").map(|v| v.to_ascii_lowercase()) {
            None => Delivery::ExactlyOnce,
            Some(v) if v == "exactly_once" => Delivery::ExactlyOnce,
            Some(v) if v == "at_least_once" => Delivery::AtLeastOnce,
            Some(v) => {
                return Err(ConnectorError::bad_option(
                    "delivery",
                    format!("'{v}' is not 'exactly_once' or 'at_least_once'"),
                ))
            }
        };
        let format = options.get("format").map(String::as_str);
        let upsert = format == Some(UPSERT_JSON);
        if upsert && key_column.is_none() {
            return Err(ConnectorError::bad_option(
                "key_column",
                "an upsert sink (format = 'upsert-json') needs key_column: the column whose value keys each record (a delete is a tombstone of that key)",
            ));
        }
        let lines = crate::sinks::changelog::JsonLines {
            explicit_nulls: !crate::options::flag(options, "omit_nulls", false)?,
            envelope: crate::sinks::changelog::Envelope::from_format(
                format.filter(|f| *f != super::exchange::FORMAT && *f != UPSERT_JSON),
            )?,
        };
        let transactional_id = options
            .get("transactional_id")
            .cloned()
            .unwrap_or_else(|| format!("eddy-{}-{}", spec.table, topic));
        let exchange = if options.get("format").map(String::as_str) == Some(super::exchange::FORMAT)
        {
            let keys = options
                .get("partition_columns")
                .map(|v| {
                    v.split(',')
                        .map(|k| k.trim().to_string())
                        .filter(|k| !k.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            let partitions = required(options, "partitions", "exchange")?
                .trim()
                .parse()
                .map_err(|_| ConnectorError::bad_option("partitions", "not a number"))?;
            Some(ExchangeSinkOptions {
                keys,
                partitions,
                producer: 0,
            })
        } else {
            None
        };
        Ok(Self {
            table: spec.table.clone(),
            topic,
            client,
            key_column,
            delivery,
            transactional_id,
            lines,
            upsert,
            schema: spec.schema.clone(),
            exchange,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_takes_names_epoch_millis_and_timestamps() {
        assert_eq!(parse_start("earliest").unwrap(), StartAt::Earliest);
        assert_eq!(parse_start("LATEST").unwrap(), StartAt::Latest);
        assert_eq!(
            parse_start("1700000000000").unwrap(),
            StartAt::Timestamp(1_700_000_000_000)
        );
        assert_eq!(
            parse_start("2023-11-14T22:13:20Z").unwrap(),
            StartAt::Timestamp(1_700_000_000_000)
        );
        let err = parse_start("yesterday").unwrap_err().to_string();
        assert!(err.contains("'yesterday' is not 'earliest'"), "{err}");
    }
}
