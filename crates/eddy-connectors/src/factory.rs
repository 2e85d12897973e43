//! [`Connectors`]: the engine's [`ConnectorFactory`] for `eddy run` and
//! `eddy serve`. It applies the run's overrides and hands every table to
//! its connector in the [`Registry`]:
//!
//! - `--input TABLE=PATH` rebinds a source to an NDJSON file (`-`: stdin),
//!   `--input TABLE=kafka://HOST:PORT/TOPIC?...` to a Kafka topic: the
//!   table is then read by that connector, with the options it takes;
//! - `--output DIR` sends every sink to `DIR/<sink>.ndjson` (rolled or
//!   partitioned: `DIR/<sink>/`), or Parquet under `DIR/<sink>/`.
//!
//! In: a table's [`ConnectorSpec`]. Out: its reader or writer; errors
//! name the table and where it is declared.

use std::borrow::Cow;

use eddy_engine::graph::{ConnectorFactory, ConnectorSpec, JobGraph, NodeKind};
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::source::layout::TABLE_OPTIONS;
use eddy_engine::source::SourceReader;
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result as EngineResult;

use crate::config::{ConnectorConfig, OutputFormat};
use crate::connector::Role;
use crate::error::Result;
use crate::kafka::{self, KafkaTopicRef};
use crate::registry::Registry;
use crate::sinks::file_options::{self as files, json_lines, rolled};
use crate::sinks::{self, NdjsonSink};
use crate::storage::Location;

/// See the module docs.
#[derive(Debug, Clone, Default)]
pub struct Connectors {
    pub(crate) config: ConnectorConfig,
    pub(crate) registry: Registry,
}

impl Connectors {
    /// eddy's connectors with the run's overrides.
    pub fn new(config: ConnectorConfig) -> Self {
        Self {
            config,
            registry: Registry::standard(),
        }
    }

    /// The connectors tables can name.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The source as this run reads it: rebound by `--input`, else as
    /// declared.
    pub(crate) fn bound_source<'a>(
        &self,
        spec: &'a ConnectorSpec,
    ) -> Result<Cow<'a, ConnectorSpec>> {
        let Some(input) = self.config.inputs.get(&spec.table) else {
            return Ok(Cow::Borrowed(spec));
        };
        let mut bound = spec.clone();
        match input.strip_prefix(kafka::SCHEME) {
            Some(address) => {
                bound.connector = "kafka".into();
                bound.options = kafka::address_options(address)?;
            }
            None => {
                // The file connector's reading options carry over (the
                // feed's format, batch size, line limit); the rest were
                // the declared connector's.
                bound.connector = if input == "-" { "stdin" } else { "file" }.into();
                let keep = self
                    .registry
                    .get(&bound.connector)
                    .and_then(|c| c.options(Role::Source))
                    .unwrap_or_default();
                bound.options.retain(|name, _| {
                    keep.iter().any(|o| o.name == name) || TABLE_OPTIONS.contains(&name.as_str())
                });
                if input != "-" {
                    bound.options.insert("path".into(), input.clone());
                }
            }
        }
        Ok(Cow::Owned(bound))
    }

    /// These connectors for running `graph`: the run's decode threads
    /// ([`ConnectorConfig::decode_threads`], one per core) are shared among
    /// the graph's NDJSON sources (the file and stdin connectors, after
    /// `--input` rebinding) instead of each source starting that many. On
    /// two cores a join of two files decodes each on its reader's own
    /// thread rather than on four decode threads beside the two readers:
    /// more threads than cores only took turns.
    ///
    /// ```
    /// # use eddy_connectors::{ConnectorConfig, Connectors};
    /// # use eddy_engine::graph::JobGraph;
    /// let config = ConnectorConfig { decode_threads: 4, ..ConnectorConfig::default() };
    /// let connectors = Connectors::new(config).sharing_decode_threads(&JobGraph::default());
    /// assert_eq!(connectors.config().decode_threads, 4); // no NDJSON source: unchanged
    /// ```
    pub fn sharing_decode_threads(mut self, graph: &JobGraph) -> Self {
        let ndjson_sources = graph
            .nodes
            .iter()
            .filter(|node| match &node.kind {
                NodeKind::Source { spec, .. } => self
                    .bound_source(spec)
                    .is_ok_and(|bound| matches!(bound.connector.as_str(), "file" | "stdin")),
                _ => false,
            })
            .count();
        if ndjson_sources > 1 {
            self.config.decode_threads = (self.config.decode_threads / ndjson_sources).max(1);
        }
        self
    }

    /// The run's settings.
    pub fn config(&self) -> &ConnectorConfig {
        &self.config
    }

    /// The Kafka topics a graph's sources read (after `--input
    /// TABLE=kafka://...` rebinding).
    pub fn kafka_sources(&self, graph: &JobGraph) -> Result<Vec<KafkaTopicRef>> {
        let mut found = Vec::new();
        for node in &graph.nodes {
            if let NodeKind::Source { spec, .. } = &node.kind {
                let bound = self.bound_source(spec)?;
                if bound.connector == "kafka" {
                    found.push(KafkaTopicRef::of(&bound));
                }
            }
        }
        Ok(found)
    }

    fn source(
        &self,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        let bound = self.bound_source(spec)?;
        let connector = self.registry.connector(&bound, Role::Source)?;
        connector.open_source(&self.config, &bound, resume)
    }

    fn sink(&self, spec: &ConnectorSpec, mode: SinkMode<'_>) -> Result<Box<dyn SinkWriter>> {
        if self.config.output_dir.is_some() {
            return self.output_file(spec, mode);
        }
        let connector = self.registry.connector(spec, Role::Sink)?;
        connector.open_sink(&self.config, spec, mode)
    }

    /// `--output DIR`: the sink as a file (set) under `DIR` (a bucket
    /// prefix's sinks are always file sets).
    fn output_file(&self, spec: &ConnectorSpec, mode: SinkMode<'_>) -> Result<Box<dyn SinkWriter>> {
        let dir = self
            .config
            .output_location()?
            .unwrap_or_else(|| Location::local(""));
        let dir = self.config.task_location(dir, true);
        match (self.config.output_format, &dir) {
            (OutputFormat::Ndjson, Location::Local(local)) if !rolled(spec) => {
                Ok(Box::new(NdjsonSink::open(
                    &spec.table,
                    local.join(format!("{}.ndjson", spec.table)),
                    json_lines(spec)?,
                    mode,
                )?))
            }
            (OutputFormat::Ndjson, _) => files::file_set(
                spec,
                &dir.join(&spec.table),
                files::ndjson_files(spec)?,
                mode,
            ),
            (OutputFormat::Parquet, _) => files::file_set(
                spec,
                &dir.join(&spec.table),
                files::parquet_files(spec)?,
                mode,
            ),
        }
    }
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

    fn open_lookup(
        &self,
        table: &eddy_engine::lookup::LookupTable,
    ) -> EngineResult<Box<dyn eddy_engine::lookup::LookupSource>> {
        let spec = &table.spec;
        self.registry
            .connector(spec, Role::Lookup)
            .and_then(|c| c.open_lookup(&self.config, table))
            .map_err(|e| e.declared_at(spec).for_table(&spec.table))
    }

    fn source_checkpointed(&self, spec: &ConnectorSpec, position: &serde_json::Value) {
        let done = self.bound_source(spec).and_then(|bound| {
            let connector = self.registry.connector(&bound, Role::Source)?;
            connector.source_checkpointed(&self.config, &bound, position)
        });
        if let Err(e) = done {
            tracing::warn!(source = %spec.table, "{e}");
        }
    }

    fn commit_sink(&self, spec: &ConnectorSpec, state: &StateSnapshot) -> EngineResult<()> {
        let commit = || -> Result<()> {
            // Files (any connector's, or --output's) publish themselves.
            if sinks::commit::commit(state)? {
                return Ok(());
            }
            let connector = self.registry.connector(spec, Role::Sink)?;
            connector.commit_sink(&self.config, spec, state)
        };
        commit().map_err(|e| e.for_table(&spec.table))
    }

    fn report(&self) -> Vec<String> {
        self.registry.report()
    }
}
