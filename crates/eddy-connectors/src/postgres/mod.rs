//! PostgreSQL in and out: change capture, `connector = 'postgres-cdc'`
//! (without Debezium or Kafka between), and the `jdbc` sink.
//!
//! In: a table declared with Flink CDC's options ([`config`]) and a
//! `PRIMARY KEY` equal to the PostgreSQL table's. Out: the table's rows,
//! then every committed change, read through a logical replication slot
//! (`pgoutput`) and a publication, both made when missing ([`table`]).
//! The reader ([`reader`]) sends upserts and deletes by key; the planner
//! puts a `changelog_normalize` step behind the source, so queries see a
//! changelog (`+I`, `-U`/`+U`, `-D`) keyed by the primary key.
//!
//! - [`pgoutput`]: the replication stream's messages;
//! - [`text_columns`]: PostgreSQL's text values into Arrow columns;
//! - [`snapshot`]: the table read in chunks, and how chunks and changes
//!   agree exactly;
//! - [`changes`]: a decoded change taken into rows;
//! - [`metadata`]: the metadata columns (`op_ts`, `table_name`, ...);
//! - [`reader`]: the source's state machine and checkpointed position;
//! - [`sink_config`], [`sink`]: the `jdbc` sink (Flink JDBC's options):
//!   appends, or upserts and deletes by the sink's `PRIMARY KEY`, exactly
//!   once through a progress table written in each checkpoint's
//!   transaction;
//! - [`lookup`]: a `jdbc` table read by key for a lookup join.
//!
//! Exactly once: a checkpoint records the end of the last transaction
//! read; the slot is confirmed to a position only once a checkpoint
//! holding it completes ([`Connector::source_checkpointed`]), so a job
//! resumed after a kill reads each change once.
//!
//! ```sql
//! CREATE TABLE accounts (
//!   id BIGINT, owner STRING, balance DECIMAL(12, 2),
//!   PRIMARY KEY (id) NOT ENFORCED
//! ) WITH (
//!   connector = 'postgres-cdc', hostname = 'db.internal', port = '5432',
//!   username = 'eddy', password = 'env:PG_PASSWORD', 'database-name' = 'bank',
//!   'schema-name' = 'public', 'table-name' = 'accounts', 'slot.name' = 'eddy_accounts'
//! );
//! ```

pub mod changes;
pub mod config;
pub mod lookup;
pub mod metadata;
pub mod pgoutput;
pub mod reader;
pub mod sink;
pub mod sink_config;
pub mod snapshot;
pub mod table;
pub mod text_columns;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::lookup::{LookupSource, LookupTable};
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::source::{ChangeMetadata, SourceReader};
use eddy_engine::state::StateSnapshot;

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::{ConnectorError, Result};
use crate::options::OptionDecl;
use config::CdcConfig;
use reader::{slot_key, CdcPosition, CdcReader, Confirmations};

/// Runs `work` where a blocking PostgreSQL client may: off any Tokio
/// runtime's threads (the client runs one of its own).
pub fn outside_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return work();
    }
    std::thread::scope(|s| match s.spawn(work).join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// The connector's name.
pub const NAME: &str = "postgres-cdc";

/// `connector = 'postgres-cdc'`. Holds the slots' confirmed positions,
/// which completed checkpoints raise and the readers send on.
#[derive(Debug, Default)]
pub struct PostgresCdcConnector {
    confirmations: Arc<Confirmations>,
}

impl Connector for PostgresCdcConnector {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "a PostgreSQL table's rows, then its changes (logical replication, pgoutput), as a changelog keyed by its primary key"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        (role == Role::Source).then_some(config::OPTIONS)
    }

    /// Changes by primary key, unless the table is only read once.
    fn reads_changes_by_key(&self, options: &BTreeMap<String, String>) -> bool {
        !CdcConfig::snapshot_only(options)
    }

    fn metadata_keys(&self) -> &'static [(&'static str, ChangeMetadata)] {
        &ChangeMetadata::POSTGRES_CDC_KEYS
    }

    fn check(&self, _config: &ConnectorConfig, spec: &ConnectorSpec, _role: Role) -> Result<()> {
        if spec.primary_key.is_empty() {
            return Err(ConnectorError::bad_option(
                "connector",
                format!(
                    "table '{}' reads PostgreSQL changes by key: declare the PostgreSQL table's primary key, PRIMARY KEY (...) NOT ENFORCED",
                    spec.table
                ),
            ));
        }
        CdcConfig::check(spec)
    }

    fn open_source(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        let cdc = CdcConfig::of(spec)?;
        let resume = match resume {
            Some(value) if !value.is_null() => Some(
                serde_json::from_value::<CdcPosition>(value.clone()).map_err(|e| {
                    ConnectorError::postgres("reading the checkpointed position", e)
                })?,
            ),
            _ => None,
        };
        let confirmed = self.confirmations.of(&slot_key(&cdc));
        Ok(Box::new(CdcReader::new(
            cdc,
            spec.schema.clone(),
            spec.primary_key.clone(),
            config.batch_size(spec)?,
            resume,
            confirmed,
        )))
    }

    fn source_checkpointed(
        &self,
        _config: &ConnectorConfig,
        spec: &ConnectorSpec,
        position: &serde_json::Value,
    ) -> Result<()> {
        let Ok(position) = serde_json::from_value::<CdcPosition>(position.clone()) else {
            return Ok(());
        };
        let cdc = CdcConfig::read(spec, false)?;
        self.confirmations
            .confirm(&slot_key(&cdc), table::parse_lsn(&position.lsn)?);
        Ok(())
    }
}

/// `connector = 'jdbc'` (PostgreSQL). Holds a connection and the checked
/// target per sink, for publishing completed checkpoints.
#[derive(Default)]
pub struct JdbcConnector {
    committers: Mutex<HashMap<String, (Option<postgres::Client>, sink_config::Target)>>,
    /// What each sink (by progress id) wrote, and where.
    written: Mutex<std::collections::BTreeMap<String, (String, Arc<sink::Written>)>>,
}

impl std::fmt::Debug for JdbcConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JdbcConnector").finish_non_exhaustive()
    }
}

impl Drop for JdbcConnector {
    fn drop(&mut self) {
        // Closing a blocking client blocks on its own runtime.
        let committers =
            std::mem::take(self.committers.get_mut().unwrap_or_else(|e| e.into_inner()));
        outside_runtime(move || drop(committers));
    }
}

impl JdbcConnector {
    /// The counts of the sink `jdbc` configures.
    fn written(&self, jdbc: &sink_config::JdbcConfig) -> Arc<sink::Written> {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written
            .entry(jdbc.progress_id.clone())
            .or_insert_with(|| {
                (
                    format!("jdbc sink {} -> {}", jdbc.table, jdbc.qualified()),
                    Arc::default(),
                )
            })
            .1
            .clone()
    }

    /// Connects and checks the target table of `spec`.
    fn connect(
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
    ) -> Result<(
        sink_config::JdbcConfig,
        postgres::Client,
        sink_config::Target,
    )> {
        let jdbc = sink_config::JdbcConfig::of(spec, config.task)?;
        outside_runtime(|| {
            let mut client = jdbc.connect()?;
            let target =
                sink_config::check_target(&mut client, &jdbc, &spec.schema, &spec.primary_key)?;
            Ok((jdbc.clone(), client, target))
        })
    }
}

impl Connector for JdbcConnector {
    fn name(&self) -> &'static str {
        "jdbc"
    }

    fn summary(&self) -> &'static str {
        "writes a PostgreSQL table (appends, or upserts and deletes by the sink's PRIMARY KEY, exactly once with checkpoints), or reads one by key for a lookup join, with a cache"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        match role {
            Role::Sink => Some(sink_config::OPTIONS),
            Role::Lookup => Some(lookup::OPTIONS),
            Role::Source => None,
        }
    }

    fn check(&self, _config: &ConnectorConfig, spec: &ConnectorSpec, role: Role) -> Result<()> {
        if role == Role::Lookup {
            lookup::LookupOptions::of(&spec.options)?;
        }
        sink_config::JdbcConfig::check(spec)
    }

    fn open_lookup(
        &self,
        _config: &ConnectorConfig,
        table: &LookupTable,
    ) -> Result<Box<dyn LookupSource>> {
        Ok(Box::new(outside_runtime(|| {
            lookup::JdbcLookup::open(table)
        })?))
    }

    fn open_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        mode: SinkMode<'_>,
    ) -> Result<Box<dyn SinkWriter>> {
        let (jdbc, client, target) = Self::connect(config, spec)?;
        let delivery = match mode {
            SinkMode::Direct => sink::Delivery::Direct,
            SinkMode::Transactional { resume } => sink::Delivery::Checkpointed {
                fresh: resume.is_none(),
                resumed: resume.and_then(sink::snapshot_epoch).unwrap_or(0),
            },
        };
        let written = self.written(&jdbc);
        Ok(Box::new(sink::JdbcSink::open(
            jdbc,
            target,
            spec.schema.clone(),
            delivery,
            client,
            written,
        )?))
    }

    fn takes_changelog(&self, spec: &ConnectorSpec) -> bool {
        !spec.primary_key.is_empty()
    }

    fn commit_sink(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        state: &StateSnapshot,
    ) -> Result<()> {
        if sink::snapshot_epoch(state).is_none() {
            return Ok(());
        }
        let jdbc = sink_config::JdbcConfig::of(spec, config.task)?;
        let mut committers = self.committers.lock().unwrap_or_else(|e| e.into_inner());
        if !committers.contains_key(&jdbc.progress_id) {
            let (_, client, target) = Self::connect(config, spec)?;
            committers.insert(jdbc.progress_id.clone(), (Some(client), target));
        }
        let Some((client, target)) = committers.get_mut(&jdbc.progress_id) else {
            return Ok(());
        };
        sink::commit(client, &jdbc, target, state, &self.written(&jdbc))
    }

    fn report(&self) -> Vec<String> {
        let written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written
            .values()
            .map(|(what, w)| {
                let mut line = format!(
                    "{what}: {} rows in {} transactions",
                    w.rows.load(std::sync::atomic::Ordering::Relaxed),
                    w.transactions.load(std::sync::atomic::Ordering::Relaxed)
                );
                let skipped = w.skipped.load(std::sync::atomic::Ordering::Relaxed);
                if skipped > 0 {
                    line.push_str(&format!(
                        "; {skipped} checkpoint(s) published before, not written again"
                    ));
                }
                line
            })
            .collect()
    }
}
