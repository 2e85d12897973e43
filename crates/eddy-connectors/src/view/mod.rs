//! The `view` connector: a sink that keeps its query's current result for
//! readers, a materialized view. `eddy serve --pg-addr` creates one for
//! every `CREATE MATERIALIZED VIEW`; a job submitted over HTTP may declare
//! one itself (`CREATE TABLE totals WITH (connector = 'view') ...`).
//!
//! In: the rows (or changelog) written to the table. Out: the view, named
//! as the table, in the run's [`ViewCatalog`], readable as of each
//! completed checkpoint ([`catalog`]); the rows it holds ([`sink`]).

pub mod catalog;
pub mod rows;
pub mod sink;

pub use catalog::{ViewCatalog, ViewSnapshot};
pub use sink::ViewSink;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::state::StateSnapshot;

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::{ConnectorError, Result};
use crate::options::OptionDecl;

/// Gives each `view` sink of `graph` declared without a primary key its
/// query's upsert key (the group keys of a GROUP BY, a Top-N's partition
/// and rank, a change feed's key): the view then holds one row per key and
/// finds a key's row without a scan.
pub fn key_by_upsert_key(graph: &mut eddy_engine::graph::JobGraph) {
    for i in 0..graph.nodes.len() {
        let node = &graph.nodes[i];
        let eddy_engine::graph::NodeKind::Sink { spec } = &node.kind else {
            continue;
        };
        if spec.connector != NAME || !spec.primary_key.is_empty() || node.inputs.len() != 1 {
            continue;
        }
        let key = eddy_engine::changelog::upsert_key(&graph.nodes[node.inputs[0].from].schema);
        if let eddy_engine::graph::NodeKind::Sink { spec } = &mut graph.nodes[i].kind {
            spec.primary_key = key;
        }
    }
}

/// The connector's name (`connector = 'view'`).
pub const NAME: &str = "view";

/// See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct ViewConnector;

impl ViewConnector {
    fn catalog(config: &ConnectorConfig) -> Result<&ViewCatalog> {
        config.views.as_ref().ok_or_else(|| {
            ConnectorError::bad_option(
                "connector",
                "'view' keeps a materialized view that eddy serve answers queries on; \
                 run the job on a server (CREATE MATERIALIZED VIEW over its --pg-addr, \
                 or submit it), or write the result to a file or topic here",
            )
        })
    }
}

impl Connector for ViewConnector {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "keeps the query's current result for SELECTs over eddy serve's PostgreSQL port (a materialized view)"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        (role == Role::Sink).then_some(&[])
    }

    fn check(&self, config: &ConnectorConfig, _spec: &ConnectorSpec, _role: Role) -> Result<()> {
        Self::catalog(config)?;
        if config.task.is_some() {
            return Err(ConnectorError::bad_option(
                "connector",
                "a view is held by one job: a group job's tasks would each hold a part; run it without a group",
            ));
        }
        Ok(())
    }

    fn open_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        let catalog = Self::catalog(config)?.clone();
        let resume = match mode {
            SinkMode::Direct => None,
            SinkMode::Transactional { resume } => resume,
        };
        Ok(Box::new(ViewSink::open(
            &spec.table,
            &spec.schema,
            &spec.primary_key,
            catalog,
            resume,
        )?))
    }

    fn takes_changelog(&self, _spec: &ConnectorSpec) -> bool {
        true
    }

    fn commit_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        state: &StateSnapshot,
    ) -> Result<()> {
        if state.is_empty() {
            return Ok(());
        }
        let meta: sink::ViewMeta = state.meta()?;
        let catalog = Self::catalog(config)?;
        // A job that ended is resumed without running: its last checkpoint,
        // committed again, is its view.
        ViewSink::restore_ended(&meta.view, &spec.schema, &spec.primary_key, catalog, state)?;
        catalog.commit(&meta.view, meta.epoch);
        Ok(())
    }
}
