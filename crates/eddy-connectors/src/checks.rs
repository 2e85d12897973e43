//! The checks a job's graph passes before anything runs: every table's
//! options, the paths a submitted job may use, `--input` naming a source,
//! and every sink of an updating query taking a changelog.
//!
//! In: the job graph and the run's overrides. Out: `Ok`, or the first
//! problem as an [`EngineError::Config`] naming the table.

use eddy_engine::graph::{ConnectorSpec, JobGraph, NodeKind};
use eddy_engine::{EngineError, Result as EngineResult};

use crate::error::ConnectorError;
use crate::sinks::changelog::Envelope;
use crate::{kafka, options, sinks, Connectors, OutputFormat};

impl Connectors {
    /// See the module docs.
    pub(crate) fn check_graph(&self, graph: &JobGraph) -> EngineResult<()> {
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

    /// Refuses a sink that cannot take an updating query's changelog,
    /// saying what made the query updating (`origin`) and what to use.
    pub(crate) fn check_takes_changelog(
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
}
