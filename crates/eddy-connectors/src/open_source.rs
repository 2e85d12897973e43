//! Opening sources: a table's connector (file, stdin, generator, Nexmark,
//! Kafka) or the run's override (`--input TABLE=PATH`, `kafka://...`),
//! resumed at a checkpointed position; committing Kafka sources' offsets.
//!
//! In: a source's [`ConnectorSpec`] and its checkpointed position. Out: a
//! [`SourceReader`].

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};

use eddy_engine::graph::{ConnectorSpec, JobGraph, NodeKind};
use eddy_engine::source::SourceReader;

use crate::error::{ConnectorError, Result};
use crate::generator::{GeneratedStream, GeneratorConfig, GeneratorSource};
use crate::ndjson::source::NdjsonPosition;
use crate::ndjson::NdjsonSource;
use crate::{kafka, ndjson, nexmark, options, parse_option, Connectors};

impl Connectors {
    pub(crate) fn open_ndjson(
        &self,
        spec: &ConnectorSpec,
        path: &str,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        let batch_size = self.batch_size(spec)?;
        let resume: Option<NdjsonPosition> = resume
            .map(|r| serde_json::from_value(r.clone()))
            .transpose()
            .map_err(|e| {
                ConnectorError::bad_option("path", format!("checkpointed position: {e}"))
            })?;
        let location = if path == "-" {
            "stdin".to_string()
        } else {
            path.to_string()
        };
        if let Some(resume) = &resume {
            if resume.path != location {
                return Err(ConnectorError::bad_option(
                    "path",
                    format!(
                        "the checkpoint was reading {}, the job now reads {} (use --ignore-state to start afresh)",
                        resume.path, location
                    ),
                ));
            }
        }
        let (reader, live): (Box<dyn std::io::Read + Send>, bool) = if path == "-" {
            (Box::new(std::io::stdin()), true)
        } else {
            let file = File::open(path).map_err(|source| ConnectorError::Io {
                path: path.to_string(),
                source,
            })?;
            let live = !file.metadata().map(|m| m.is_file()).unwrap_or(false);
            (Box::new(file), live)
        };
        let mut reader = reader;
        if let Some(resume) = &resume {
            if live {
                tracing::warn!(
                    source = %spec.table,
                    "{location} cannot be read again: the resumed job reads what it gives from now on (rows sent since the checkpoint are not replayed)"
                );
            } else {
                let mut file = File::open(path).map_err(|source| ConnectorError::Io {
                    path: path.to_string(),
                    source,
                })?;
                let size = file.metadata().map(|m| m.len()).unwrap_or(0);
                if size < resume.offset {
                    return Err(ConnectorError::bad_option(
                        "path",
                        format!(
                            "{path} has {size} bytes, but the checkpoint had read {} of it",
                            resume.offset
                        ),
                    ));
                }
                file.seek(SeekFrom::Start(resume.offset))
                    .map_err(|source| ConnectorError::Io {
                        path: path.to_string(),
                        source,
                    })?;
                reader = Box::new(file);
            }
        }
        let capacity = if live { 1 << 16 } else { 1 << 20 };
        let max_line_bytes = match spec.options.get("max_line_bytes") {
            Some(v) => parse_option(v, "max_line_bytes")?,
            None => ndjson::source::DEFAULT_MAX_LINE_BYTES,
        };
        let source = NdjsonSource::new(
            BufReader::with_capacity(capacity, reader),
            location,
            spec.schema.clone(),
            batch_size,
            self.config.decode_threads,
            live,
        )
        .with_max_line_bytes(max_line_bytes);
        Ok(Box::new(match &resume {
            Some(position) => source.starting_at(position),
            None => source,
        }))
    }

    /// `spec` as a Kafka source when `--input TABLE=kafka://...` rebinds it.
    pub(crate) fn rebound_to_kafka(&self, spec: &ConnectorSpec) -> Result<Option<ConnectorSpec>> {
        let Some(address) = self
            .config
            .inputs
            .get(&spec.table)
            .and_then(|path| path.strip_prefix(KAFKA_SCHEME))
        else {
            return Ok(None);
        };
        let mut rebound = spec.clone();
        rebound.connector = "kafka".into();
        rebound.options = kafka_input_options(address)?;
        options::check(&rebound, options::Role::Source)?;
        Ok(Some(rebound))
    }

    /// Commits a Kafka source's checkpointed offsets to its group.
    pub(crate) fn commit_kafka_offsets(
        &self,
        spec: &ConnectorSpec,
        position: &serde_json::Value,
    ) -> Result<()> {
        let spec = match self.rebound_to_kafka(spec)? {
            Some(rebound) => rebound,
            None if spec.connector == "kafka" && !self.config.inputs.contains_key(&spec.table) => {
                spec.clone()
            }
            None => return Ok(()),
        };
        let config = kafka::KafkaSourceConfig::from_spec(&spec, 1)?;
        if config.exchange_producers.is_some() {
            // An exchange is internal to the job: nobody watches its lag.
            return Ok(());
        }
        let position: kafka::KafkaPosition =
            serde_json::from_value(position.clone()).map_err(|e| {
                ConnectorError::bad_option("topic", format!("checkpointed position: {e}"))
            })?;
        self.kafka_offsets.commit(&config, &position)
    }

    pub(crate) fn open_kafka(
        &self,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        let mut config = kafka::KafkaSourceConfig::from_spec(spec, self.batch_size(spec)?)?;
        config.partitions = self.config.kafka_partitions.clone();
        config.decode_threads = self.config.decode_threads;
        if let Some(producers) = config.exchange_producers {
            let resume: Option<kafka::exchange::ExchangePosition> = kafka_position(resume)?;
            return Ok(Box::new(kafka::exchange::ExchangeSource::open(
                &config.client,
                &config.topic,
                spec.schema.clone(),
                producers,
                config.partitions.as_deref(),
                config.batch_size,
                resume.as_ref(),
            )?));
        }
        let resume: Option<kafka::KafkaPosition> = kafka_position(resume)?;
        Ok(Box::new(kafka::KafkaSource::open(
            config,
            spec.schema.clone(),
            resume.as_ref(),
        )?))
    }

    /// The Kafka topics a graph's sources read (after `--input
    /// TABLE=kafka://...` rebinding).
    pub fn kafka_sources(&self, graph: &JobGraph) -> Result<Vec<KafkaTopicRef>> {
        let mut found = Vec::new();
        for node in &graph.nodes {
            let NodeKind::Source { spec, .. } = &node.kind else {
                continue;
            };
            let options = match self.config.inputs.get(&spec.table) {
                Some(path) => match path.strip_prefix(KAFKA_SCHEME) {
                    Some(address) => kafka_input_options(address)?,
                    None => continue,
                },
                None if spec.connector == "kafka" => spec.options.clone(),
                None => continue,
            };
            let servers = options
                .get("bootstrap_servers")
                .or_else(|| options.get("properties.bootstrap.servers"))
                .cloned()
                .unwrap_or_default();
            found.push(KafkaTopicRef {
                table: spec.table.clone(),
                servers,
                topic: options.get("topic").cloned().unwrap_or_default(),
                key_column: options.get("key_column").cloned(),
            });
        }
        Ok(found)
    }

    pub(crate) fn source(
        &self,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        let change_feed = eddy_engine::changelog::is_updating(&spec.schema);
        if let Some(kafka) = self.rebound_to_kafka(spec)? {
            return self.open_kafka(&kafka, resume);
        }
        if matches!(spec.connector.as_str(), "file" | "ndjson" | "stdin") {
            let format = spec.options.get("format").map(|f| f.to_ascii_lowercase());
            match format.as_deref() {
                None | Some("json" | "ndjson") if !change_feed => {}
                Some(ndjson::debezium::FORMAT) if change_feed => {}
                Some(other) => {
                    return Err(ConnectorError::bad_option(
                        "format",
                        format!(
                            "'{other}' is not supported (use 'json', or '{}' for a change feed)",
                            ndjson::debezium::FORMAT
                        ),
                    ))
                }
                None => {
                    return Err(ConnectorError::bad_option(
                        "format",
                        "the table was planned as a change feed without format = 'debezium-json'",
                    ))
                }
            }
        }
        if let Some(path) = self.config.inputs.get(&spec.table) {
            return self.open_ndjson(spec, path, resume);
        }
        match spec.connector.as_str() {
            "file" | "ndjson" => {
                let path = self.source_path(spec)?;
                self.open_ndjson(spec, &path, resume)
            }
            "stdin" if self.config.roots.is_some() => Err(ConnectorError::bad_option(
                "connector",
                "a submitted job cannot read stdin",
            )),
            "stdin" => self.open_ndjson(spec, "-", resume),
            "kafka" => self.open_kafka(spec, resume),
            "nexmark" => {
                let option = |name: &str, default: u64| -> Result<u64> {
                    spec.options
                        .get(name)
                        .map(|v| parse_option(v, name))
                        .transpose()
                        .map(|v| v.unwrap_or(default))
                };
                let config = nexmark::NexmarkConfig {
                    stream: spec.options.get("stream").unwrap_or(&spec.table).parse()?,
                    events: option("events", 10_000_000)?,
                    rate: option("rate", 10_000)?,
                    batch_size: self.batch_size(spec)?,
                };
                Ok(Box::new(nexmark::NexmarkSource::new(
                    config,
                    spec.schema.clone(),
                    resume,
                )?))
            }
            "generator" => {
                let stream: GeneratedStream =
                    spec.options.get("stream").unwrap_or(&spec.table).parse()?;
                let realtime = options::flag(&spec.options, "realtime", false)?;
                let rate: u32 = spec
                    .options
                    .get("rate")
                    .map(|v| parse_option(v, "rate"))
                    .transpose()?
                    .unwrap_or(2);
                let config = GeneratorConfig {
                    stream,
                    seed: spec
                        .options
                        .get("seed")
                        .map(|v| parse_option(v, "seed"))
                        .transpose()?
                        .unwrap_or(7),
                    rate,
                    count: spec
                        .options
                        .get("count")
                        .map(|v| parse_option(v, "count"))
                        .transpose()?,
                    batch_size: match (realtime, spec.options.contains_key("batch_size")) {
                        // Paced rows go in small batches, about 20 a second.
                        (true, false) => (rate as usize / 20).max(1),
                        _ => self.batch_size(spec)?,
                    },
                };
                Ok(Box::new(GeneratorSource::new(
                    config,
                    spec.schema.clone(),
                    resume,
                    realtime,
                )?))
            }
            other => Err(ConnectorError::UnknownConnector {
                connector: other.to_string(),
                hint: String::new(),
            }),
        }
    }

    /// A file source's path, inside the data root when there is one.
    pub(crate) fn source_path(&self, spec: &ConnectorSpec) -> Result<String> {
        let path = spec
            .options
            .get("path")
            .ok_or_else(|| ConnectorError::bad_option("path", "a file source needs a path"))?;
        match &self.config.roots {
            Some(roots) => Ok(roots.source(path)?.display().to_string()),
            None => Ok(path.clone()),
        }
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

/// A Kafka reader's checkpointed position (`None` when it has none).
fn kafka_position<T: serde::de::DeserializeOwned>(
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
const KAFKA_SCHEME: &str = "kafka://";

/// The Kafka source options of `HOST:PORT[,HOST:PORT]/TOPIC[?name=value&...]`.
fn kafka_input_options(address: &str) -> Result<BTreeMap<String, String>> {
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
