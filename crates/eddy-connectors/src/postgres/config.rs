//! A `postgres-cdc` table's options, in Flink CDC's names, read once.
//!
//! In: a table's [`ConnectorSpec`]. Out: a [`CdcConfig`]: where the
//! database is, which table, the replication slot and publication, how
//! the snapshot is read; and the two connections made from it (queries,
//! and the replication stream). A `password` of `env:NAME` is read from the
//! environment variable `NAME`, so no secret need be written into the SQL;
//! the password is never shown (`eddy explain` and the API print `***`).

use std::collections::BTreeMap;
use std::time::Duration;

use eddy_engine::graph::ConnectorSpec;

use crate::error::{ConnectorError, Result};
use crate::options::{OptionDecl, OptionKind, OptionValues};

/// Debezium's (and so Flink CDC's) default publication name.
pub const DEFAULT_PUBLICATION: &str = "dbz_publication";

/// Flink CDC's default number of rows a snapshot chunk reads.
pub const DEFAULT_CHUNK_ROWS: u64 = 8096;

/// Session settings every connection runs with, so values print the same
/// way from a query and from the replication stream.
pub const SESSION_OPTIONS: &str = "-c TimeZone=UTC -c DateStyle=ISO -c extra_float_digits=3 \
     -c bytea_output=hex -c IntervalStyle=iso_8601";

/// The `password` option of the PostgreSQL connectors.
pub const PASSWORD_OPTION: OptionDecl = OptionDecl::new(
    "password",
    OptionKind::Text,
    "its password; env:NAME reads variable NAME (never shown)",
);

/// The options a `postgres-cdc` source takes.
pub const OPTIONS: &[OptionDecl] = &[
    OptionDecl::new("hostname", OptionKind::Text, "the PostgreSQL server's host name or address"),
    OptionDecl::new("port", OptionKind::Count, "its port (5432)"),
    OptionDecl::new("username", OptionKind::Text, "a role with REPLICATION (or superuser) and SELECT on the table"),
    PASSWORD_OPTION,
    OptionDecl::new("database-name", OptionKind::Text, "the database"),
    OptionDecl::new("schema-name", OptionKind::Text, "the table's schema (public)"),
    OptionDecl::new("table-name", OptionKind::Text, "the table, which must have a primary key"),
    OptionDecl::new("slot.name", OptionKind::Text, "the logical replication slot (pgoutput), created if missing; one per job and table"),
    OptionDecl::new("decoding.plugin.name", OptionKind::OneOf(&["pgoutput"]), "the logical decoding plugin: pgoutput"),
    OptionDecl::new("debezium.publication.name", OptionKind::Text, "the publication the slot reads (dbz_publication), created for the table if missing"),
    OptionDecl::new("scan.startup.mode", OptionKind::OneOf(&["initial", "latest-offset", "snapshot"]), "initial: the table's rows, then its changes (default); latest-offset: changes from the slot's position only; snapshot: the table's rows, then the source ends (no slot)"),
    OptionDecl::new("scan.incremental.snapshot.enabled", OptionKind::Flag, "read the snapshot in chunks by primary key, each in a short transaction (true); false: in one transaction"),
    OptionDecl::new("scan.incremental.snapshot.chunk.size", OptionKind::Count, "rows a snapshot chunk reads (8096)"),
    OptionDecl::new("changelog-mode", OptionKind::OneOf(&["all", "upsert"]), "taken for Flink compatibility: eddy keeps each key's row and emits the full changelog either way"),
];

/// One `postgres-cdc` table's settings.
#[derive(Clone)]
pub struct CdcConfig {
    /// The eddy table.
    pub table: String,
    /// Server host.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// Role.
    pub user: String,
    /// Its password (resolved from `env:` when given so).
    pub password: String,
    /// Database.
    pub database: String,
    /// The PostgreSQL table's schema.
    pub schema: String,
    /// The PostgreSQL table.
    pub pg_table: String,
    /// Replication slot.
    pub slot: String,
    /// Publication.
    pub publication: String,
    /// Whether the table's rows are read before its changes.
    pub snapshot: bool,
    /// `scan.startup.mode = 'snapshot'`: the rows, then the end; no slot
    /// or publication is made.
    pub snapshot_only: bool,
    /// Rows a snapshot chunk reads (`u64::MAX`: the whole table at once).
    pub chunk_rows: u64,
    /// How long a read waits for a change before it checks in.
    pub poll: Duration,
}

impl std::fmt::Debug for CdcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CdcConfig")
            .field("table", &self.table)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &"***")
            .field("database", &self.database)
            .field("pg_table", &self.qualified())
            .field("slot", &self.slot)
            .field("publication", &self.publication)
            .finish()
    }
}

impl CdcConfig {
    /// Whether a table's options read its rows and then end (`scan.startup.mode
    /// = 'snapshot'`): each row an insert, no changes.
    pub fn snapshot_only(options: &BTreeMap<String, String>) -> bool {
        OptionValues::new(options)
            .word("scan.startup.mode")
            .as_deref()
            == Some("snapshot")
    }

    /// Reads a table's options (already checked by kind), the password
    /// resolved.
    pub fn of(spec: &ConnectorSpec) -> Result<Self> {
        Self::read(spec, true)
    }

    /// Checks a table's options without resolving the password (`eddy
    /// explain` needs no secret; `eddy run` reads it when it connects).
    pub fn check(spec: &ConnectorSpec) -> Result<()> {
        Self::read(spec, false).map(|_| ())
    }

    pub(super) fn read(spec: &ConnectorSpec, resolve: bool) -> Result<Self> {
        let o = OptionValues::new(&spec.options);
        let need = |name: &str| {
            o.required(name, "a postgres-cdc table names it")
                .map(str::to_string)
        };
        let password = need("password")?;
        let password = if resolve {
            resolve_secret(&password)?
        } else {
            password
        };
        let incremental = o.flag("scan.incremental.snapshot.enabled", true)?;
        let chunk_rows = o
            .count::<u64>("scan.incremental.snapshot.chunk.size")?
            .unwrap_or(DEFAULT_CHUNK_ROWS);
        if chunk_rows == 0 {
            return Err(ConnectorError::bad_option(
                "scan.incremental.snapshot.chunk.size",
                "a chunk reads at least one row",
            ));
        }
        let slot = need("slot.name")?;
        if !slot
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(ConnectorError::bad_option(
                "slot.name",
                format!(
                    "'{slot}': PostgreSQL names slots with lower-case letters, digits and '_' only"
                ),
            ));
        }
        Ok(Self {
            table: spec.table.clone(),
            host: need("hostname")?,
            port: o.count::<u16>("port")?.unwrap_or(5432),
            user: need("username")?,
            password,
            database: need("database-name")?,
            schema: o.text("schema-name").unwrap_or("public").to_string(),
            pg_table: need("table-name")?,
            slot,
            publication: o
                .text("debezium.publication.name")
                .unwrap_or(DEFAULT_PUBLICATION)
                .to_string(),
            snapshot: o.word("scan.startup.mode").as_deref() != Some("latest-offset"),
            snapshot_only: Self::snapshot_only(&spec.options),
            chunk_rows: if incremental { chunk_rows } else { u64::MAX },
            poll: Duration::from_millis(50),
        })
    }

    /// `"schema"."table"`, quoted for SQL.
    pub fn qualified(&self) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.schema),
            quote_ident(&self.pg_table)
        )
    }

    /// A query connection's settings.
    pub fn query_config(&self) -> postgres::Config {
        let mut config = postgres::Config::new();
        config
            .host(&self.host)
            .port(self.port)
            .user(&self.user)
            .password(&self.password)
            .dbname(&self.database)
            .application_name("eddy")
            .options(SESSION_OPTIONS)
            .connect_timeout(Duration::from_secs(10));
        config
    }

    /// The replication stream's settings, from `start` (the slot's own
    /// position when zero), acknowledging `confirmed` until told more.
    pub fn replication_config(
        &self,
        start: u64,
        confirmed: u64,
    ) -> pgwire_replication::ReplicationConfig {
        let mut config = pgwire_replication::ReplicationConfig::new(
            self.host.clone(),
            self.user.clone(),
            self.password.clone(),
            self.database.clone(),
            self.slot.clone(),
            self.publication.clone(),
        )
        .with_port(self.port)
        .with_start_lsn(pgwire_replication::Lsn(start))
        .with_ack_lsn(pgwire_replication::Lsn(confirmed))
        .with_status_interval(Duration::from_secs(1))
        .with_wakeup_interval(Duration::from_secs(1))
        .with_options(SESSION_OPTIONS)
        .with_application_name("eddy");
        config.tls = pgwire_replication::TlsConfig::disabled();
        config
    }
}

/// A secret option's value: `env:NAME` reads the variable.
pub(super) fn resolve_secret(value: &str) -> Result<String> {
    match value.strip_prefix("env:") {
        Some(name) => std::env::var(name).map_err(|_| {
            ConnectorError::bad_option(
                "password",
                format!("env:{name}: the environment variable '{name}' is not set"),
            )
        }),
        None => Ok(value.to_string()),
    }
}

/// An identifier quoted for SQL.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A string literal quoted for SQL.
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn spec(options: &[(&str, &str)]) -> ConnectorSpec {
        ConnectorSpec {
            table: "orders".into(),
            connector: "postgres-cdc".into(),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            schema: Arc::new(datafusion::arrow::datatypes::Schema::empty()),
            declared_at: None,
            primary_key: vec![],
            filter: None,
            unread_columns: vec![],
            explain: None,
        }
    }

    const BASE: &[(&str, &str)] = &[
        ("hostname", "db"),
        ("username", "eddy"),
        ("password", "pw"),
        ("database-name", "shop"),
        ("table-name", "Orders"),
        ("slot.name", "orders_slot"),
    ];

    #[test]
    fn flink_cdc_defaults_apply_and_the_password_is_never_printed() {
        let c = CdcConfig::of(&spec(BASE)).unwrap();
        assert_eq!((c.port, c.schema.as_str()), (5432, "public"));
        assert_eq!(c.publication, DEFAULT_PUBLICATION);
        assert_eq!(c.chunk_rows, DEFAULT_CHUNK_ROWS);
        assert_eq!(c.qualified(), "\"public\".\"Orders\"");
        assert!(!format!("{c:?}").contains("pw"));
    }

    #[test]
    fn passwords_come_from_the_environment_and_bad_slots_are_refused() {
        let mut o = BASE.to_vec();
        o[2] = ("password", "env:EDDY_TEST_PG_PASSWORD_UNSET");
        let e = CdcConfig::of(&spec(&o)).unwrap_err().to_string();
        assert!(e.contains("EDDY_TEST_PG_PASSWORD_UNSET"), "{e}");
        let mut o = BASE.to_vec();
        o[5] = ("slot.name", "Orders-Slot");
        assert!(CdcConfig::of(&spec(&o)).is_err());
        let mut o = BASE.to_vec();
        o.push(("scan.incremental.snapshot.enabled", "false"));
        assert_eq!(CdcConfig::of(&spec(&o)).unwrap().chunk_rows, u64::MAX);
    }
}
