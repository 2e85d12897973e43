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
//! under `DIR/<sink>/`). Opening sources is `open_source.rs`, opening sinks
//! `open_sink.rs`, the checks a graph passes first `checks.rs`.
//!
//! Change feeds: `format = 'debezium-json'` sources (file, stdin, Kafka)
//! and `format = 'upsert-json'` Kafka sources read changelogs; text and
//! Kafka sinks write updating queries as Debezium events or upserts
//! ([`sinks::changelog`]).

pub mod error;
pub mod generator;
pub mod json_lines;
pub mod kafka;
pub mod ndjson;
pub mod nexmark;
pub mod options;
pub mod roots;
pub mod sinks;

mod checks;
mod open_sink;
mod open_source;

pub use open_source::KafkaTopicRef;

use std::collections::BTreeMap;
use std::path::PathBuf;

use eddy_engine::graph::{ConnectorFactory, ConnectorSpec, JobGraph};
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::source::SourceReader;
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result as EngineResult;

pub use error::{ConnectorError, Result};
pub use roots::PathRoots;
use sinks::StdoutTarget;

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
}

impl Connectors {}

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
        self.check_graph(graph)
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
