//! # eddy-connectors
//!
//! Sources and sinks behind `CREATE TABLE ... WITH (connector = '...')`.
//!
//! Sources: `file` (NDJSON; `path`, `format = 'json'`), stdin (`path = '-'`
//! or `--input TABLE=-`), `generator` (the seed pipeline's streams;
//! `stream`, `seed`, `rate`, `count`, `realtime`) and `kafka` ([`kafka`]).
//! Sinks: `stdout` (`tag`), `ndjson` (`path`), `parquet` (`path`, a
//! directory), `kafka`, `blackhole`; text sinks take `omit_nulls`.
//!
//! [`Connectors`] implements the engine's
//! [`eddy_engine::graph::ConnectorFactory`] and applies the run's overrides
//! ([`ConnectorConfig`]): `--input TABLE=PATH` rebinds a source to an NDJSON
//! file, `--output DIR` sends every sink to `DIR/<sink>.ndjson` (or Parquet
//! under `DIR/<sink>/`).

pub mod error;
pub mod generator;
pub mod json_lines;
pub mod kafka;
pub mod ndjson;
pub mod nexmark;
pub mod options;
pub mod roots;
pub mod sinks;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::PathBuf;

use eddy_engine::graph::{ConnectorFactory, ConnectorSpec, JobGraph, NodeKind};
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::source::SourceReader;
use eddy_engine::state::StateSnapshot;
use eddy_engine::{EngineError, Result as EngineResult};

pub use error::{ConnectorError, Result};
use generator::{GeneratedStream, GeneratorConfig, GeneratorSource};
use ndjson::source::NdjsonPosition;
use ndjson::NdjsonSource;
pub use roots::PathRoots;
use sinks::changelog::{Envelope, JsonLines};
use sinks::format::{parse_compression, FileFormat, NdjsonFormat, ParquetFormat};
use sinks::partition::PartitionBy;
use sinks::rolling::RollingPolicy;
use sinks::{BlackholeSink, NdjsonSink, RollingFileSink, StdoutSink, StdoutTarget};

/// File format of `--output`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// `DIR/<sink>.ndjson`.
    #[default]
    Ndjson,
    /// `DIR/<sink>/part-00000.parquet`.
    Parquet,
}

/// Rows per source batch unless configured: small enough that a batch's
/// columns stay in the CPU's caches from one operator to the next and that
/// batches in flight between threads hold little memory (measured on the
/// window and join benchmarks against 8192: 10-30% faster, 15-40% less
/// peak memory; the whole reference pipeline a few percent slower at half
/// the memory), large enough that per-batch costs vanish.
pub const DEFAULT_BATCH_SIZE: usize = 2048;

/// Per-run connector settings (the CLI's flags).
#[derive(Debug, Clone)]
pub struct ConnectorConfig {
    /// `--input TABLE=PATH`: table name to NDJSON path (`-` = stdin).
    pub inputs: BTreeMap<String, String>,
    /// `--output DIR`.
    pub output_dir: Option<PathBuf>,
    /// `--format`.
    pub output_format: OutputFormat,
    /// Rows per source batch.
    pub batch_size: usize,
    /// Threads decoding each NDJSON source (1 = decode on the source's own thread).
    pub decode_threads: usize,
    /// Where stdout sinks print.
    pub stdout: StdoutTarget,
    /// Keeps file paths inside these directories (jobs submitted to a
    /// server); `None` lets a job use any path.
    pub roots: Option<PathRoots>,
    /// Scale-out: every Kafka source reads only these partitions (the job
    /// is one task of a consumer group); `None` reads every partition.
    pub kafka_partitions: Option<Vec<i32>>,
    /// Scale-out: the number of the task this job is (`3` for `task-3`).
    /// Kafka sinks' transactional ids and file sinks' names carry it, so
    /// tasks never write over one another; exchange markers name it.
    pub task: Option<u32>,
}

impl Default for ConnectorConfig {
    fn default() -> Self {
        Self {
            inputs: BTreeMap::new(),
            output_dir: None,
            output_format: OutputFormat::Ndjson,
            batch_size: DEFAULT_BATCH_SIZE,
            decode_threads: std::thread::available_parallelism()
                .map(|n| n.get().min(4))
                .unwrap_or(1),
            stdout: StdoutTarget::Process,
            roots: None,
            kafka_partitions: None,
            task: None,
        }
    }
}

/// The connector factory used by `eddy run` and `eddy serve`.
#[derive(Debug, Clone, Default)]
pub struct Connectors {
    config: ConnectorConfig,
    /// What this process knows of its Kafka sinks' transactions.
    kafka_commits: std::sync::Arc<kafka::KafkaCommits>,
    /// Clients committing Kafka sources' checkpointed offsets.
    kafka_offsets: std::sync::Arc<kafka::offsets::GroupOffsets>,
}

impl Connectors {
    /// A factory with the given overrides.
    pub fn new(config: ConnectorConfig) -> Self {
        Self {
            config,
            kafka_commits: Default::default(),
            kafka_offsets: Default::default(),
        }
    }

    fn open_ndjson(
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
    fn rebound_to_kafka(&self, spec: &ConnectorSpec) -> Result<Option<ConnectorSpec>> {
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
    fn commit_kafka_offsets(
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

    fn open_kafka(
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

    /// A Kafka sink's settings; a task's transactional id names the task.
    fn kafka_sink_config(&self, spec: &ConnectorSpec) -> Result<kafka::KafkaSinkConfig> {
        let mut config = kafka::KafkaSinkConfig::from_spec(spec)?;
        if let Some(task) = self.config.task {
            config.transactional_id = format!("{}-task-{task}", config.transactional_id);
        }
        if let Some(exchange) = &mut config.exchange {
            exchange.producer = self.config.task.unwrap_or(0);
        }
        Ok(config)
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

    /// A file sink's path for this job: a task's own name beside the
    /// table's (`out.task-3.ndjson`, `dir/task-3/`).
    fn task_path(&self, path: PathBuf, directory: bool) -> PathBuf {
        let Some(task) = self.config.task.map(|t| format!("task-{t}")) else {
            return path;
        };
        if directory {
            return path.join(task);
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = match path.extension() {
            Some(ext) => format!("{stem}.{task}.{}", ext.to_string_lossy()),
            None => format!("{stem}.{task}"),
        };
        path.with_file_name(name)
    }

    fn batch_size(&self, spec: &ConnectorSpec) -> Result<usize> {
        match spec.options.get("batch_size") {
            Some(v) => parse_option(v, "batch_size"),
            None => Ok(self.config.batch_size),
        }
    }

    fn source(
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
    fn source_path(&self, spec: &ConnectorSpec) -> Result<String> {
        let path = spec
            .options
            .get("path")
            .ok_or_else(|| ConnectorError::bad_option("path", "a file source needs a path"))?;
        match &self.config.roots {
            Some(roots) => Ok(roots.source(path)?.display().to_string()),
            None => Ok(path.clone()),
        }
    }

    /// A file sink's path, inside the output root when there is one.
    fn sink_path(&self, spec: &ConnectorSpec) -> Result<PathBuf> {
        let path = spec.options.get("path").ok_or_else(|| {
            ConnectorError::bad_option("path", format!("a {} sink needs a path", spec.connector))
        })?;
        match &self.config.roots {
            Some(roots) => roots.sink(path),
            None => Ok(PathBuf::from(path)),
        }
    }

    fn sink(&self, spec: &ConnectorSpec, mode: SinkMode<'_>) -> Result<Box<dyn SinkWriter>> {
        let explicit_nulls = !options::flag(&spec.options, "omit_nulls", false)?;
        // Text sinks' lines (Kafka sinks read their own format option).
        let lines = || -> Result<JsonLines> {
            Ok(JsonLines {
                explicit_nulls,
                envelope: Envelope::from_format(spec.options.get("format").map(String::as_str))?,
            })
        };
        let rolled = [
            "rolling_rows",
            "rolling_bytes",
            "rolling_interval",
            "partition_by",
        ]
        .iter()
        .any(|o| spec.options.contains_key(*o));
        let ndjson_files =
            || -> Result<Box<dyn FileFormat>> { Ok(Box::new(NdjsonFormat { lines: lines()? })) };
        if let Some(dir) = &self.config.output_dir {
            let dir = &self.task_path(dir.clone(), true);
            return match self.config.output_format {
                OutputFormat::Ndjson if rolled => {
                    self.file_set(spec, &dir.join(&spec.table), ndjson_files()?, mode)
                }
                OutputFormat::Ndjson => Ok(Box::new(NdjsonSink::open(
                    &spec.table,
                    dir.join(format!("{}.ndjson", spec.table)),
                    lines()?,
                    mode,
                )?)),
                OutputFormat::Parquet => self.file_set(
                    spec,
                    &dir.join(&spec.table),
                    self.parquet_files(spec)?,
                    mode,
                ),
            };
        }
        let path = || self.sink_path(spec);
        match spec.connector.as_str() {
            "stdout" | "print" => {
                let tag = spec
                    .options
                    .get("tag")
                    .cloned()
                    .unwrap_or_else(|| spec.table.to_uppercase());
                Ok(Box::new(StdoutSink::new(
                    &spec.table,
                    tag,
                    lines()?,
                    self.config.stdout.clone(),
                )))
            }
            "ndjson" | "file" if rolled => {
                self.file_set(spec, &self.task_path(path()?, true), ndjson_files()?, mode)
            }
            "ndjson" | "file" => Ok(Box::new(NdjsonSink::open(
                &spec.table,
                self.task_path(path()?, false),
                lines()?,
                mode,
            )?)),
            "parquet" => self.file_set(
                spec,
                &self.task_path(path()?, true),
                self.parquet_files(spec)?,
                mode,
            ),
            "kafka" => Ok(Box::new(kafka::KafkaSink::open(
                self.kafka_sink_config(spec)?,
                mode,
                self.kafka_commits.clone(),
            )?)),
            "blackhole" => Ok(Box::new(BlackholeSink)),
            other => Err(ConnectorError::UnknownConnector {
                connector: other.to_string(),
                hint: String::new(),
            }),
        }
    }
}

impl Connectors {
    /// Refuses a sink that cannot take an updating query's changelog,
    /// saying what made the query updating (`origin`) and what to use.
    fn check_takes_changelog(
        &self,
        spec: &ConnectorSpec,
        origin: Option<&str>,
    ) -> EngineResult<()> {
        let format = spec.options.get("format").map(String::as_str);
        let debezium = Envelope::from_format(format).ok() == Some(Envelope::Debezium);
        let takes = match &self.config.output_dir {
            // --output: NDJSON files write the changelog as Debezium events.
            Some(_) => self.config.output_format == OutputFormat::Ndjson,
            None => match spec.connector.as_str() {
                "stdout" | "print" | "blackhole" => true,
                "ndjson" | "file" => debezium,
                // An exchange topic carries whole batches, row kinds included.
                "kafka" => {
                    debezium
                        || format == Some(kafka::exchange::FORMAT)
                        || format == Some(kafka::config::UPSERT_JSON)
                }
                _ => false,
            },
        };
        if takes {
            return Ok(());
        }
        let at = if spec.declared_at.is_empty() {
            String::new()
        } else {
            format!("{}: ", spec.declared_at)
        };
        let written = match (&self.config.output_dir, format) {
            (Some(_), _) => "--output writes Parquet".to_string(),
            (None, Some(format)) => format!("connector '{}', format '{format}'", spec.connector),
            (None, None) => format!("connector '{}'", spec.connector),
        };
        let why = origin
            .map(|o| format!(": {o} makes it so"))
            .unwrap_or_default();
        Err(EngineError::Config(format!(
            "{at}table '{}' ({written}) takes only appends, but the query writing it is updating (its rows change{why}); \
             write it to a changelog sink: format = '{}' on an ndjson, file or kafka sink, format = 'upsert-json' on a kafka sink, or connector = 'stdout'",
            spec.table,
            sinks::changelog::DEBEZIUM_JSON
        )))
    }

    /// The Parquet format a sink's options ask for.
    fn parquet_files(&self, spec: &ConnectorSpec) -> Result<Box<dyn FileFormat>> {
        let partition = PartitionBy::parse(
            spec.options.get("partition_by").map(String::as_str),
            &spec.schema,
        )?;
        let row_group_size = spec
            .options
            .get("row_group_size")
            .map(|v| parse_option::<usize>(v, "row_group_size"))
            .transpose()?;
        Ok(Box::new(ParquetFormat::new(
            &partition.file_schema(&spec.schema),
            parse_compression(spec.options.get("compression").map(String::as_str))?,
            row_group_size,
        )))
    }

    /// A rolling (and maybe partitioned) set of `format` files in `dir`.
    fn file_set(
        &self,
        spec: &ConnectorSpec,
        dir: &std::path::Path,
        format: Box<dyn FileFormat>,
        mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        let partition = PartitionBy::parse(
            spec.options.get("partition_by").map(String::as_str),
            &spec.schema,
        )?;
        let policy = RollingPolicy {
            rows: spec
                .options
                .get("rolling_rows")
                .map(|v| parse_option::<u64>(v, "rolling_rows"))
                .transpose()?
                .filter(|&n| n > 0),
            bytes: spec
                .options
                .get("rolling_bytes")
                .map(|v| parse_size(v, "rolling_bytes"))
                .transpose()?
                .filter(|&n| n > 0),
            interval: spec
                .options
                .get("rolling_interval")
                .map(|v| {
                    eddy_engine::time::parse_duration(v)
                        .map_err(|e| ConnectorError::bad_option("rolling_interval", e))
                })
                .transpose()?
                .filter(|d| !d.is_zero()),
        };
        Ok(Box::new(RollingFileSink::open(
            &spec.table,
            dir,
            format,
            partition,
            policy,
            mode,
        )?))
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

/// A byte size: a number with an optional unit (`64MB`, `1 GiB`, `500k`).
fn parse_size(value: &str, option: &str) -> Result<u64> {
    let text = value.trim().to_ascii_lowercase();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale: f64 = match unit.trim() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(ConnectorError::bad_option(
                option,
                format!("'{other}' is not a size unit (use B, KB, KiB, MB, MiB, GB, GiB)"),
            ))
        }
    };
    let number: f64 = number
        .parse()
        .map_err(|_| ConnectorError::bad_option(option, format!("'{value}' is not a size")))?;
    Ok((number * scale) as u64)
}

fn parse_option<T: std::str::FromStr>(value: &str, option: &str) -> Result<T> {
    value
        .trim()
        .parse()
        .map_err(|_| ConnectorError::bad_option(option, format!("'{value}' is not a valid number")))
}

impl ConnectorFactory for Connectors {
    fn check(&self, graph: &JobGraph) -> EngineResult<()> {
        for node in &graph.nodes {
            let (spec, role) = match &node.kind {
                NodeKind::Source { spec, .. } => (spec, options::Role::Source),
                NodeKind::Sink { spec } => (spec, options::Role::Sink),
                NodeKind::Operator(_) => continue,
            };
            if let Err(e) = options::check(spec, role) {
                let at = if spec.declared_at.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", spec.declared_at)
                };
                return Err(EngineError::Config(format!(
                    "{at}table '{}': {e}",
                    spec.table
                )));
            }
        }
        for node in &graph.nodes {
            if let NodeKind::Sink { spec } = &node.kind {
                let updating = node
                    .inputs
                    .iter()
                    .find(|e| eddy_engine::changelog::is_updating(&graph.nodes[e.from].schema));
                if let Some(edge) = updating {
                    let origin = eddy_engine::changelog::origin(&graph.nodes[edge.from].schema);
                    self.check_takes_changelog(spec, origin.as_deref())?;
                }
            }
        }
        if self.config.roots.is_some() {
            for node in &graph.nodes {
                let checked = match &node.kind {
                    NodeKind::Source { spec, .. }
                        if matches!(spec.connector.as_str(), "file" | "ndjson") =>
                    {
                        self.source_path(spec).map(|_| ())
                    }
                    NodeKind::Source { spec, .. } if spec.connector == "stdin" => {
                        Err(ConnectorError::bad_option(
                            "connector",
                            "a submitted job cannot read stdin",
                        ))
                    }
                    NodeKind::Sink { spec }
                        if matches!(spec.connector.as_str(), "ndjson" | "file" | "parquet") =>
                    {
                        self.sink_path(spec).map(|_| ())
                    }
                    _ => Ok(()),
                };
                if let Err(e) = checked {
                    return Err(EngineError::Config(format!("{}: {e}", node.name)));
                }
            }
        }
        for table in self.config.inputs.keys() {
            let is_source = graph
                .nodes
                .iter()
                .any(|n| matches!(&n.kind, NodeKind::Source { spec, .. } if &spec.table == table));
            if !is_source {
                return Err(EngineError::Config(format!(
                    "--input {table}=...: no query reads a source table named '{table}'"
                )));
            }
        }
        Ok(())
    }

    fn open_source(
        &self,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> EngineResult<Box<dyn SourceReader>> {
        self.source(spec, resume)
            .map_err(|e| e.declared_at(spec).for_table(&spec.table))
    }

    fn open_sink(
        &self,
        spec: &ConnectorSpec,
        mode: SinkMode<'_>,
    ) -> EngineResult<Box<dyn SinkWriter>> {
        self.sink(spec, mode)
            .map_err(|e| e.declared_at(spec).for_table(&spec.table))
    }

    fn source_checkpointed(&self, spec: &ConnectorSpec, position: &serde_json::Value) {
        if let Err(e) = self.commit_kafka_offsets(spec, position) {
            tracing::warn!(source = %spec.table, "{e}");
        }
    }

    fn commit_sink(&self, spec: &ConnectorSpec, state: &StateSnapshot) -> EngineResult<()> {
        let commit = || -> Result<()> {
            if let Some(kafka_state) = sinks::commit::commit(state)? {
                let config = self.kafka_sink_config(spec)?;
                kafka::sink::commit(&config.client, &kafka_state, &self.kafka_commits)?;
            }
            Ok(())
        };
        commit().map_err(|e| e.for_table(&spec.table))
    }
}
