//! The connector factory of server jobs: eddy's connectors with paths kept
//! inside the server's roots ([`eddy_connectors::PathRoots`]), stdout sinks
//! that print nowhere (their rows are read through the tail), and every
//! sink wrapped so that tail readers see what it writes.

use std::sync::Arc;

use eddy_connectors::Connectors;
use eddy_engine::graph::{ConnectorFactory, ConnectorSpec, JobGraph};
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::source::SourceReader;
use eddy_engine::state::StateSnapshot;
use eddy_engine::Result;

use crate::tail::{Taps, TeeSink};

/// See the module docs.
pub struct ServerConnectors {
    /// eddy's connectors, configured with the server's roots.
    pub inner: Connectors,
    /// The job's tail channels.
    pub taps: Arc<Taps>,
}

impl ConnectorFactory for ServerConnectors {
    fn check(&self, graph: &JobGraph) -> Result<()> {
        self.inner.check(graph)
    }

    fn open_source(
        &self,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        self.inner.open_source(spec, resume)
    }

    fn open_sink(&self, spec: &ConnectorSpec, mode: SinkMode<'_>) -> Result<Box<dyn SinkWriter>> {
        let writer = self.inner.open_sink(spec, mode)?;
        Ok(match self.taps.tap(&spec.table) {
            Some(tap) => Box::new(TeeSink::new(writer, tap)),
            None => writer,
        })
    }

    fn report(&self) -> Vec<String> {
        self.inner.report()
    }

    fn commit_sink(&self, spec: &ConnectorSpec, state: &StateSnapshot) -> Result<()> {
        self.inner.commit_sink(spec, state)
    }

    fn source_checkpointed(&self, spec: &ConnectorSpec, position: &serde_json::Value) {
        self.inner.source_checkpointed(spec, position)
    }
}
