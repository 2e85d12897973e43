//! Opening sinks: a table's connector (stdout, NDJSON, Parquet, Kafka,
//! blackhole) or the run's override (`--output DIR`), each writing JSON
//! lines, Debezium change events or upserts as its `format` says.
//!
//! In: a sink's [`ConnectorSpec`] and [`SinkMode`]. Out: a [`SinkWriter`].

use std::path::PathBuf;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};

use crate::error::{ConnectorError, Result};
use crate::sinks::changelog::{Envelope, JsonLines};
use crate::sinks::format::{parse_compression, FileFormat, NdjsonFormat, ParquetFormat};
use crate::sinks::partition::PartitionBy;
use crate::sinks::rolling::RollingPolicy;
use crate::sinks::{BlackholeSink, NdjsonSink, RollingFileSink, StdoutSink};
use crate::{kafka, options, parse_option, parse_size, Connectors, OutputFormat};

impl Connectors {
    pub(crate) fn sink(
        &self,
        spec: &ConnectorSpec,
        mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
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

    /// A file sink's path, inside the output root when there is one.
    pub(crate) fn sink_path(&self, spec: &ConnectorSpec) -> Result<PathBuf> {
        let path = spec.options.get("path").ok_or_else(|| {
            ConnectorError::bad_option("path", format!("a {} sink needs a path", spec.connector))
        })?;
        match &self.config.roots {
            Some(roots) => roots.sink(path),
            None => Ok(PathBuf::from(path)),
        }
    }

    /// A Kafka sink's settings; a task's transactional id names the task.
    pub(crate) fn kafka_sink_config(&self, spec: &ConnectorSpec) -> Result<kafka::KafkaSinkConfig> {
        let mut config = kafka::KafkaSinkConfig::from_spec(spec)?;
        if let Some(task) = self.config.task {
            config.transactional_id = format!("{}-task-{task}", config.transactional_id);
        }
        if let Some(exchange) = &mut config.exchange {
            exchange.producer = self.config.task.unwrap_or(0);
        }
        Ok(config)
    }

    /// The Parquet format a sink's options ask for.
    pub(crate) fn parquet_files(&self, spec: &ConnectorSpec) -> Result<Box<dyn FileFormat>> {
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
    pub(crate) fn file_set(
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
