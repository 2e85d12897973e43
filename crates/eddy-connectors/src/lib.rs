//! # eddy-connectors
//!
//! Sources and sinks behind `CREATE TABLE ... WITH (connector = '...')`.
//!
//! Sources: `file` (NDJSON; `path`, `format = 'json'`), stdin (`path = '-'`
//! or `--input TABLE=-`), and `generator` (the seed pipeline's streams;
//! `stream`, `seed`, `rate`, `count`). Sinks: `stdout` (`tag`), `ndjson`
//! (`path`), `parquet` (`path`, a directory), `blackhole`; text sinks take
//! `omit_nulls`.
//!
//! [`Connectors`] implements the engine's
//! [`eddy_engine::graph::ConnectorFactory`] and applies the run's overrides
//! ([`ConnectorConfig`]): `--input TABLE=PATH` rebinds a source to an NDJSON
//! file, `--output DIR` sends every sink to `DIR/<sink>.ndjson` (or Parquet
//! under `DIR/<sink>/`).

pub mod error;
pub mod generator;
pub mod json_lines;
pub mod ndjson_source;
pub mod sinks;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use eddy_engine::graph::{ConnectorFactory, ConnectorSpec};
use eddy_engine::sink::SinkWriter;
use eddy_engine::source::SourceReader;
use eddy_engine::Result as EngineResult;

pub use error::{ConnectorError, Result};
use generator::{GeneratedStream, GeneratorConfig, GeneratorSource};
use ndjson_source::NdjsonSource;
use sinks::{BlackholeSink, NdjsonSink, ParquetSink, StdoutSink, StdoutTarget};

/// File format of `--output`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// `DIR/<sink>.ndjson`.
    #[default]
    Ndjson,
    /// `DIR/<sink>/part-00000.parquet`.
    Parquet,
}

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
}

impl Default for ConnectorConfig {
    fn default() -> Self {
        Self {
            inputs: BTreeMap::new(),
            output_dir: None,
            output_format: OutputFormat::Ndjson,
            batch_size: 8192,
            decode_threads: std::thread::available_parallelism().map(|n| n.get().min(4)).unwrap_or(1),
            stdout: StdoutTarget::Process,
        }
    }
}

/// The connector factory used by `eddy run` and `eddy serve`.
#[derive(Debug, Clone, Default)]
pub struct Connectors {
    config: ConnectorConfig,
}

impl Connectors {
    /// A factory with the given overrides.
    pub fn new(config: ConnectorConfig) -> Self {
        Self { config }
    }

    fn open_ndjson(&self, spec: &ConnectorSpec, path: &str) -> Result<Box<dyn SourceReader>> {
        let batch_size = self.batch_size(spec)?;
        if path == "-" {
            let reader = BufReader::new(Box::new(std::io::stdin()) as Box<dyn std::io::Read + Send>);
            return Ok(Box::new(NdjsonSource::new(
                reader,
                "stdin".into(),
                spec.schema.clone(),
                batch_size,
                self.config.decode_threads,
                true,
            )));
        }
        let file = File::open(path).map_err(|source| ConnectorError::Io { path: path.to_string(), source })?;
        let live = !file.metadata().map(|m| m.is_file()).unwrap_or(false);
        let reader = BufReader::with_capacity(1 << 20, Box::new(file) as Box<dyn std::io::Read + Send>);
        Ok(Box::new(NdjsonSource::new(
            reader,
            path.to_string(),
            spec.schema.clone(),
            batch_size,
            self.config.decode_threads,
            live,
        )))
    }

    fn batch_size(&self, spec: &ConnectorSpec) -> Result<usize> {
        match spec.options.get("batch_size") {
            Some(v) => parse_option(v, "batch_size"),
            None => Ok(self.config.batch_size),
        }
    }

    fn source(&self, spec: &ConnectorSpec) -> Result<Box<dyn SourceReader>> {
        if let Some(path) = self.config.inputs.get(&spec.table) {
            return self.open_ndjson(spec, path);
        }
        match spec.connector.as_str() {
            "file" | "ndjson" => {
                if let Some(format) = spec.options.get("format") {
                    if !matches!(format.as_str(), "json" | "ndjson") {
                        return Err(ConnectorError::bad_option("format", format!("'{format}' is not supported (use 'json')")));
                    }
                }
                let path = spec
                    .options
                    .get("path")
                    .ok_or_else(|| ConnectorError::bad_option("path", "a file source needs a path"))?;
                self.open_ndjson(spec, path)
            }
            "stdin" => self.open_ndjson(spec, "-"),
            "generator" => {
                let stream: GeneratedStream = spec.options.get("stream").unwrap_or(&spec.table).parse()?;
                let config = GeneratorConfig {
                    stream,
                    seed: spec.options.get("seed").map(|v| parse_option(v, "seed")).transpose()?.unwrap_or(7),
                    rate: spec.options.get("rate").map(|v| parse_option(v, "rate")).transpose()?.unwrap_or(2),
                    count: spec.options.get("count").map(|v| parse_option(v, "count")).transpose()?,
                    batch_size: self.batch_size(spec)?,
                };
                Ok(Box::new(GeneratorSource::new(config, spec.schema.clone())?))
            }
            other => Err(ConnectorError::UnknownConnector { connector: other.to_string() }),
        }
    }

    fn sink(&self, spec: &ConnectorSpec) -> Result<Box<dyn SinkWriter>> {
        let explicit_nulls = match spec.options.get("omit_nulls").map(|v| v.to_ascii_lowercase()) {
            None => true,
            Some(v) if v == "true" => false,
            Some(v) if v == "false" => true,
            Some(v) => return Err(ConnectorError::bad_option("omit_nulls", format!("'{v}' is not true or false"))),
        };
        if let Some(dir) = &self.config.output_dir {
            return match self.config.output_format {
                OutputFormat::Ndjson => Ok(Box::new(NdjsonSink::create(
                    &spec.table,
                    dir.join(format!("{}.ndjson", spec.table)),
                    explicit_nulls,
                )?)),
                OutputFormat::Parquet => {
                    Ok(Box::new(ParquetSink::create(&spec.table, &dir.join(&spec.table), spec.schema.clone())?))
                }
            };
        }
        let path = || {
            spec.options
                .get("path")
                .map(PathBuf::from)
                .ok_or_else(|| ConnectorError::bad_option("path", format!("a {} sink needs a path", spec.connector)))
        };
        match spec.connector.as_str() {
            "stdout" | "print" => {
                let tag = spec.options.get("tag").cloned().unwrap_or_else(|| spec.table.to_uppercase());
                Ok(Box::new(StdoutSink::new(&spec.table, tag, explicit_nulls, self.config.stdout.clone())))
            }
            "ndjson" | "file" => Ok(Box::new(NdjsonSink::create(&spec.table, path()?, explicit_nulls)?)),
            "parquet" => Ok(Box::new(ParquetSink::create(&spec.table, &path()?, spec.schema.clone())?)),
            "blackhole" => Ok(Box::new(BlackholeSink)),
            other => Err(ConnectorError::UnknownConnector { connector: other.to_string() }),
        }
    }
}

fn parse_option<T: std::str::FromStr>(value: &str, option: &str) -> Result<T> {
    value
        .trim()
        .parse()
        .map_err(|_| ConnectorError::bad_option(option, format!("'{value}' is not a valid number")))
}

impl ConnectorFactory for Connectors {
    fn open_source(&self, spec: &ConnectorSpec) -> EngineResult<Box<dyn SourceReader>> {
        self.source(spec).map_err(|e| e.for_table(&spec.table))
    }

    fn open_sink(&self, spec: &ConnectorSpec) -> EngineResult<Box<dyn SinkWriter>> {
        self.sink(spec).map_err(|e| e.for_table(&spec.table))
    }
}
