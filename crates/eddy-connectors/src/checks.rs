//! The checks a job's graph passes before anything runs: every table's
//! connector and options (as this run binds it: `--input` rebinds a
//! source, `--output` replaces every sink's connector), the connectors'
//! own checks (paths inside a server's roots, options that go together),
//! the tables lookup joins read by key,
//! `--input` naming a source, and every sink of an updating query taking
//! a changelog.
//!
//! In: the job graph and the run's overrides. Out: `Ok`, or the first
//! problem as an [`EngineError::Table`] naming the table and where it is
//! declared.

use eddy_engine::graph::{ConnectorSpec, JobGraph, NodeKind};
use eddy_engine::{EngineError, Result as EngineResult};

use crate::config::OutputFormat;
use crate::connector::Role;
use crate::error::{ConnectorError, Result};
use crate::{sinks, Connectors};

impl Connectors {
    /// See the module docs.
    pub(crate) fn check_graph(&self, graph: &JobGraph) -> EngineResult<()> {
        for node in &graph.nodes {
            let (spec, checked) = match &node.kind {
                NodeKind::Source { spec, .. } => (spec, self.check_source(spec)),
                NodeKind::Sink { spec } => (spec, self.check_sink(spec)),
                NodeKind::Operator(plan) => match plan.lookup_table() {
                    Some(table) => (
                        &table.spec,
                        self.registry.check(&self.config, &table.spec, Role::Lookup),
                    ),
                    None => continue,
                },
            };
            if let Err(e) = checked {
                return Err(config_error(spec, e));
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

    /// The table as this run reads it; a rebound one's declared options
    /// are checked too (they are the declared connector's).
    fn check_source(&self, spec: &ConnectorSpec) -> Result<()> {
        let bound = self.bound_source(spec)?;
        if matches!(bound, std::borrow::Cow::Owned(_)) {
            self.registry.validate(spec, Role::Source)?;
        }
        self.registry.check(&self.config, &bound, Role::Source)
    }

    /// The declared table's options; its connector's checks unless
    /// `--output` writes it instead.
    fn check_sink(&self, spec: &ConnectorSpec) -> Result<()> {
        if self.config.output_dir.is_some() {
            self.registry.validate(spec, Role::Sink)?;
            return sinks::file_options::check(
                spec,
                self.config.output_format == OutputFormat::Parquet,
            );
        }
        self.registry.check(&self.config, spec, Role::Sink)
    }

    /// Refuses a sink that cannot take an updating query's changelog,
    /// saying what made the query updating (`origin`) and what to use.
    pub(crate) fn check_takes_changelog(
        &self,
        spec: &ConnectorSpec,
        origin: Option<&str>,
    ) -> EngineResult<()> {
        let takes = match &self.config.output_dir {
            // --output: NDJSON files write the changelog as Debezium events.
            Some(_) => self.config.output_format == OutputFormat::Ndjson,
            None => self
                .registry
                .get(&spec.connector)
                .is_some_and(|c| c.takes_changelog(spec)),
        };
        if takes {
            return Ok(());
        }
        let format = spec.options.get("format").map(String::as_str);
        let written = match (&self.config.output_dir, format) {
            (Some(_), _) => "Parquet from --output".to_string(),
            (None, Some(format)) => format!("connector '{}', format '{format}'", spec.connector),
            (None, None) => format!("connector '{}'", spec.connector),
        };
        let why = origin
            .map(|o| format!(": {o} makes it so"))
            .unwrap_or_default();
        if spec.connector == "delta" && self.config.output_dir.is_none() {
            return Err(EngineError::Table {
                at: spec.declared_at.clone(),
                table: spec.table.clone(),
                message: format!(
                    "the query writing this Delta table is updating (its rows change{why}); \
                     declare the table's key, PRIMARY KEY (...) NOT ENFORCED, and each checkpoint's changes are merged into the table by it"
                ),
            });
        }
        Err(EngineError::Table {
            at: spec.declared_at.clone(),
            table: spec.table.clone(),
            message: format!(
                "{written} takes only appends, but the query writing it is updating (its rows change{why}); \
                 write it to a changelog sink: format = '{}' on an ndjson, file or kafka sink, format = 'upsert-json' on a kafka sink, connector = 'delta' with a PRIMARY KEY, or connector = 'stdout'",
                sinks::changelog::DEBEZIUM_JSON
            ),
        })
    }
}

fn config_error(spec: &ConnectorSpec, e: ConnectorError) -> EngineError {
    EngineError::Table {
        at: spec.declared_at.clone(),
        table: spec.table.clone(),
        message: e.to_string(),
    }
}
