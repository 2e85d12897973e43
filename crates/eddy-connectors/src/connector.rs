//! The [`Connector`] trait: everything eddy knows of one `connector =
//! '...'` name — the options it takes as a source and as a sink (declared
//! once, [`crate::options`]), the checks a table passes before the job
//! runs, opening readers and writers, whether a sink takes a changelog,
//! and what happens when a checkpoint holding its state completes.
//!
//! In: a table's [`ConnectorSpec`] and the run's [`ConnectorConfig`]. Out:
//! a [`SourceReader`] or [`SinkWriter`]. The [`crate::registry`] lists the
//! connectors; [`crate::Connectors`] applies the run's overrides and hands
//! each table to its connector.
//!
//! A connector is a unit struct (or holds what its tables share, like
//! Kafka's transaction bookkeeping) in its own module:
//!
//! ```
//! use eddy_connectors::options::{OptionDecl, OptionKind};
//! use eddy_connectors::{Connector, ConnectorConfig, Role, Result};
//! use eddy_connectors::blackhole::BlackholeSink;
//! use eddy_engine::graph::ConnectorSpec;
//! use eddy_engine::sink::{SinkMode, SinkWriter};
//!
//! /// Drops rows on the floor.
//! #[derive(Debug)]
//! struct Void;
//!
//! impl Connector for Void {
//!     fn name(&self) -> &'static str { "void" }
//!     fn summary(&self) -> &'static str { "discards every row" }
//!     fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
//!         (role == Role::Sink).then_some(&[])
//!     }
//!     fn open_sink(&self, _: &ConnectorConfig, _: &ConnectorSpec, _: SinkMode<'_>)
//!         -> Result<Box<dyn SinkWriter>> {
//!         Ok(Box::new(BlackholeSink))
//!     }
//!     fn takes_changelog(&self, _: &ConnectorSpec) -> bool { true }
//! }
//! assert!(Void.options(Role::Source).is_none());
//! ```

use std::collections::BTreeMap;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::lookup::{LookupSource, LookupTable};
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::source::{ChangeMetadata, SourceReader};
use eddy_engine::state::StateSnapshot;

use crate::config::ConnectorConfig;
use crate::error::{ConnectorError, Result};
use crate::options::OptionDecl;

/// Whether a table is read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Read by a query.
    Source,
    /// Written by an INSERT (or a query's result).
    Sink,
    /// Read by key as a lookup join's probe rows come (`JOIN t FOR
    /// SYSTEM_TIME AS OF s.proc_time`): a database table.
    Lookup,
}

impl Role {
    /// Every role, in the reference's order.
    pub const ALL: [Role; 3] = [Role::Source, Role::Sink, Role::Lookup];

    /// `source`, `sink` or `lookup table`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Sink => "sink",
            Self::Lookup => "lookup table",
        }
    }
}

/// One connector. See the module docs.
pub trait Connector: Send + Sync + std::fmt::Debug {
    /// The name tables give (`connector = 'kafka'`).
    fn name(&self) -> &'static str;

    /// Other names for it (`print` for `stdout`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// One line for the reference.
    fn summary(&self) -> &'static str;

    /// The options it takes in `role`; `None` when it cannot play that
    /// role (a generator is never written).
    fn options(&self, role: Role) -> Option<&'static [OptionDecl]>;

    /// Checks beyond each option's kind, before anything runs: options
    /// that go together, paths inside a server's roots. Called after the
    /// declared options passed.
    fn check(&self, _config: &ConnectorConfig, _spec: &ConnectorSpec, _role: Role) -> Result<()> {
        Ok(())
    }

    /// Opens a reader, resumed at a checkpointed position when given.
    fn open_source(
        &self,
        _config: &ConnectorConfig,
        spec: &ConnectorSpec,
        _resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        Err(not_a(self.name(), spec, Role::Source))
    }

    /// Opens a table read by key (a connector with options for
    /// [`Role::Lookup`]).
    fn open_lookup(
        &self,
        _config: &ConnectorConfig,
        table: &LookupTable,
    ) -> Result<Box<dyn LookupSource>> {
        Err(not_a(self.name(), &table.spec, Role::Lookup))
    }

    /// Opens a writer.
    fn open_sink(
        &self,
        _config: &ConnectorConfig,
        spec: &ConnectorSpec,
        _mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        Err(not_a(self.name(), spec, Role::Sink))
    }

    /// Whether the source skips stored data by the table's pushed-down
    /// filter ([`ConnectorSpec::filter`]); the registry drops the filter
    /// from the plan of a source that does not, so `eddy explain` shows it
    /// only where it acts.
    fn uses_filter(&self) -> bool {
        false
    }

    /// Whether a source table with `options` reads a table's changes
    /// keyed by its primary key (upserts and deletes by key); see
    /// [`eddy_engine::graph::ConnectorFacts::reads_changes_by_key`].
    fn reads_changes_by_key(&self, _options: &BTreeMap<String, String>) -> bool {
        false
    }

    /// Whether its records carry a key beside the value (an upsert
    /// format reads it as the row's primary key).
    fn records_have_keys(&self) -> bool {
        false
    }

    /// The metadata its tables can declare as columns, by key, beyond
    /// their format's.
    fn metadata_keys(&self) -> &'static [(&'static str, ChangeMetadata)] {
        &[]
    }

    /// What it adds about a sink table to `eddy explain`'s line (a Kafka
    /// sink's topic and delivery guarantee); none by default.
    fn explain_sink(&self, _spec: &ConnectorSpec) -> Option<String> {
        None
    }

    /// Whether the sink writes an updating query's changes (row kinds,
    /// Debezium events, upserts) rather than only appends.
    fn takes_changelog(&self, _spec: &ConnectorSpec) -> bool {
        false
    }

    /// A checkpoint holding a reader at `position` is complete (a Kafka
    /// source commits its offsets to its group, for monitoring).
    fn source_checkpointed(
        &self,
        _config: &ConnectorConfig,
        _spec: &ConnectorSpec,
        _position: &serde_json::Value,
    ) -> Result<()> {
        Ok(())
    }

    /// Publishes what the sink pre-committed into a now complete
    /// checkpoint; idempotent (a resumed job commits its checkpoint again).
    /// File states are published by [`crate::sinks::commit`] whatever the
    /// connector (so `--output` files are too); this is for the rest.
    fn commit_sink(
        &self,
        _config: &ConnectorConfig,
        _spec: &ConnectorSpec,
        _state: &StateSnapshot,
    ) -> Result<()> {
        Ok(())
    }

    /// What the connector did in this run beyond rows, as summary lines
    /// (a Delta sink's commits); none by default.
    fn report(&self) -> Vec<String> {
        Vec::new()
    }
}

pub(crate) fn not_a(name: &str, spec: &ConnectorSpec, role: Role) -> ConnectorError {
    ConnectorError::bad_option(
        "connector",
        format!(
            "'{name}' cannot be a {} (table '{}')",
            role.name(),
            spec.table
        ),
    )
}
