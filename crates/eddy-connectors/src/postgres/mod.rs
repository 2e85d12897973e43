//! PostgreSQL change capture: `connector = 'postgres-cdc'`, without
//! Debezium or Kafka between.
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
//! - [`reader`]: the source's state machine and checkpointed position.
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

pub mod config;
pub mod pgoutput;
pub mod reader;
pub mod snapshot;
pub mod table;
pub mod text_columns;

use std::sync::Arc;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::SourceReader;

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::{ConnectorError, Result};
use crate::options::OptionDecl;
use config::CdcConfig;
use reader::{slot_key, CdcPosition, CdcReader, Confirmations};

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
        CdcConfig::of(spec).map(|_| ())
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
        let cdc = CdcConfig::of(spec)?;
        self.confirmations
            .confirm(&slot_key(&cdc), table::parse_lsn(&position.lsn)?);
        Ok(())
    }
}
