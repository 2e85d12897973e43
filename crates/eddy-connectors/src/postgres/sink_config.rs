//! A `jdbc` sink's options (Flink JDBC's names) and the PostgreSQL table
//! it writes, checked against the sink's columns before anything runs.
//!
//! In: a sink table's [`ConnectorSpec`]. Out: a [`JdbcConfig`] (the server
//! from `url = 'jdbc:postgresql://host:port/db'`, the target table, the
//! role), and, once connected, the [`Target`]: each sink column's
//! PostgreSQL name and type and the key upserts and deletes go by. The
//! progress table (`eddy_sink_progress`, in the target's schema) records
//! the last checkpoint each sink published.

use std::time::Duration;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use eddy_engine::graph::ConnectorSpec;
use postgres::Client;

use super::config::{quote_ident, SESSION_OPTIONS};
use super::table::{attributes, column, message, table_oid};
use crate::error::{ConnectorError, Result};
use crate::options::{OptionDecl, OptionKind, OptionValues};

/// The options a `jdbc` sink takes.
pub const OPTIONS: &[OptionDecl] = &[
    OptionDecl::new("url", OptionKind::Text, "jdbc:postgresql://host:port/database"),
    OptionDecl::new("table-name", OptionKind::Text, "the PostgreSQL table written (schema.table, or table in public); it must exist"),
    OptionDecl::new("username", OptionKind::Text, "a role that may write the table (and create eddy_sink_progress in its schema)"),
    super::config::PASSWORD_OPTION,
    OptionDecl::new("driver", OptionKind::Text, "taken for Flink compatibility (org.postgresql.Driver); eddy speaks PostgreSQL's protocol itself"),
    OptionDecl::new("sink.buffer-flush.max-rows", OptionKind::Count, "rows a statement writes at most (5000)"),
    OptionDecl::new("sink.max-retries", OptionKind::Count, "times a failed write is tried again after a new connection (3)"),
];

/// The progress table's name.
pub const PROGRESS_TABLE: &str = "eddy_sink_progress";

/// One `jdbc` sink's settings.
#[derive(Clone)]
pub struct JdbcConfig {
    /// The eddy table.
    pub table: String,
    /// Server host.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// Database.
    pub database: String,
    /// The target table's schema.
    pub schema: String,
    /// The target table.
    pub pg_table: String,
    /// Role.
    pub user: String,
    /// Its password (resolved from `env:`).
    pub password: String,
    /// Rows one statement writes at most.
    pub flush_rows: usize,
    /// Retries of a failed write.
    pub max_retries: u32,
    /// The sink's name in the progress table.
    pub progress_id: String,
}

impl std::fmt::Debug for JdbcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JdbcConfig")
            .field("table", &self.table)
            .field(
                "server",
                &format!("{}:{}/{}", self.host, self.port, self.database),
            )
            .field("target", &self.qualified())
            .field("user", &self.user)
            .field("password", &"***")
            .finish()
    }
}

impl JdbcConfig {
    /// Reads a sink's options; `task` (a group job's task) names its
    /// progress apart.
    pub fn of(spec: &ConnectorSpec, task: Option<u32>) -> Result<Self> {
        Self::read(spec, task, true)
    }

    /// Checks a sink's options without resolving the password (`eddy
    /// explain` needs no secret; `eddy run` reads it when it connects).
    pub fn check(spec: &ConnectorSpec) -> Result<()> {
        Self::read(spec, None, false).map(|_| ())
    }

    fn read(spec: &ConnectorSpec, task: Option<u32>, resolve: bool) -> Result<Self> {
        let o = OptionValues::new(&spec.options);
        let need = |name: &str| {
            o.required(name, "a jdbc table names it")
                .map(str::to_string)
        };
        let url = need("url")?;
        let bad_url = || {
            ConnectorError::bad_option(
                "url",
                format!("'{url}' is not jdbc:postgresql://host[:port]/database (eddy writes PostgreSQL)"),
            )
        };
        let rest = url.strip_prefix("jdbc:postgresql://").ok_or_else(bad_url)?;
        let rest = rest.split('?').next().unwrap_or_default();
        let (server, database) = rest.split_once('/').ok_or_else(bad_url)?;
        let (host, port) = match server.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse::<u16>().map_err(|_| bad_url())?),
            None => (server.to_string(), 5432),
        };
        if host.is_empty() || database.is_empty() {
            return Err(bad_url());
        }
        let target = need("table-name")?;
        let (schema, pg_table) = match target.split_once('.') {
            Some((s, t)) => (s.to_string(), t.to_string()),
            None => ("public".to_string(), target.clone()),
        };
        let password = need("password")?;
        let password = if resolve {
            super::config::resolve_secret(&password)?
        } else {
            password
        };
        Ok(Self {
            table: spec.table.clone(),
            host,
            port,
            database: database.to_string(),
            progress_id: match task {
                Some(t) => format!("{}/{schema}.{pg_table}/task-{t}", spec.table),
                None => format!("{}/{schema}.{pg_table}", spec.table),
            },
            schema,
            pg_table,
            user: need("username")?,
            password,
            flush_rows: o
                .count::<usize>("sink.buffer-flush.max-rows")?
                .unwrap_or(5000)
                .max(1),
            max_retries: o.count::<u32>("sink.max-retries")?.unwrap_or(3),
        })
    }

    /// `"schema"."table"`.
    pub fn qualified(&self) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.schema),
            quote_ident(&self.pg_table)
        )
    }

    /// The progress table, qualified.
    pub fn progress_table(&self) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.schema),
            quote_ident(PROGRESS_TABLE)
        )
    }

    /// A connection.
    pub fn connect(&self) -> Result<Client> {
        postgres::Config::new()
            .host(&self.host)
            .port(self.port)
            .user(&self.user)
            .password(&self.password)
            .dbname(&self.database)
            .application_name("eddy")
            .options(SESSION_OPTIONS)
            .connect_timeout(Duration::from_secs(10))
            .connect(postgres::NoTls)
            .map_err(|e| {
                ConnectorError::postgres(
                    format!(
                        "connecting to {}:{} database '{}' as '{}'",
                        self.host, self.port, self.database, self.user
                    ),
                    message(&e),
                )
            })
    }
}

/// The table a sink writes, as PostgreSQL has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Each sink column's PostgreSQL name, in the sink's order.
    pub columns: Vec<String>,
    /// Each one's type, as `format_type` prints it.
    pub types: Vec<String>,
    /// The key upserts and deletes go by (indices into `columns`); empty
    /// for an append-only sink.
    pub key: Vec<usize>,
}

/// Checks the target table against the sink's columns (`schema`) and
/// primary key, and makes the progress table.
pub fn check_target(
    client: &mut Client,
    config: &JdbcConfig,
    schema: &SchemaRef,
    primary_key: &[String],
) -> Result<Target> {
    let context = || format!("sink table {}", config.qualified());
    let fail = |e: postgres::Error| ConnectorError::postgres(context(), message(&e));
    let oid = table_oid(client, &config.schema, &config.pg_table).map_err(fail)?;
    let Some(oid) = oid else {
        return Err(ConnectorError::postgres(
            context(),
            format!(
                "no such table in database '{}': create it first (a jdbc sink writes an existing table)",
                config.database
            ),
        ));
    };
    let attributes = attributes(client, oid).map_err(fail)?;
    let mut columns = Vec::new();
    let mut types = Vec::new();
    for field in schema
        .fields()
        .iter()
        .filter(|f| !eddy_engine::changelog::is_row_kind_field(f))
    {
        let a = column(&attributes, field.name())
            .map_err(|e| ConnectorError::postgres(context(), e))?;
        let (name, type_name) = (a.name.clone(), a.type_name.clone());
        if let Err(why) = writable(field.data_type(), &a.base, &a.category) {
            return Err(ConnectorError::postgres(
                context(),
                format!(
                    "column '{name}' is {type_name} and the sink's is {}: {why}",
                    field.data_type()
                ),
            ));
        }
        columns.push(name);
        types.push(type_name);
    }
    let mut key = Vec::new();
    for k in primary_key {
        match columns
            .iter()
            .position(|c| c.to_lowercase() == k.to_lowercase())
        {
            Some(i) => key.push(i),
            None => {
                return Err(ConnectorError::postgres(
                    context(),
                    format!("the sink's PRIMARY KEY column '{k}' is not one of its columns"),
                ))
            }
        }
    }
    if !key.is_empty() {
        // Upserts need a unique index on exactly the key.
        let key_names: Vec<&str> = key.iter().map(|&k| columns[k].as_str()).collect();
        let unique: Vec<Vec<String>> = client
            .query(
                "SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_index i \
                 CROSS JOIN LATERAL unnest(i.indkey) AS k(attnum) \
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
                 WHERE i.indrelid = $1 AND i.indisunique AND i.indpred IS NULL GROUP BY i.indexrelid",
                &[&oid],
            )
            .map_err(fail)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let mut wanted: Vec<String> = key_names.iter().map(|s| s.to_string()).collect();
        wanted.sort();
        if !unique.contains(&wanted) {
            return Err(ConnectorError::postgres(
                context(),
                format!(
                    "the sink upserts by ({}), which is neither the table's primary key nor a unique index: add one (ALTER TABLE {} ADD PRIMARY KEY ({}))",
                    key_names.join(", "),
                    config.qualified(),
                    key_names.join(", ")
                ),
            ));
        }
    }
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {} (sink text PRIMARY KEY, epoch bigint NOT NULL, committed_at timestamptz NOT NULL DEFAULT now())",
            config.progress_table()
        ))
        .map_err(|e| ConnectorError::postgres(format!("creating {}", config.progress_table()), message(&e)))?;
    Ok(Target {
        columns,
        types,
        key,
    })
}

/// Whether values of a sink's Arrow type write into a PostgreSQL type.
fn writable(
    data_type: &DataType,
    base: &str,
    category: &str,
) -> std::result::Result<(), &'static str> {
    let ok = match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            matches!(category, "S" | "U" | "D" | "N" | "B" | "E")
        }
        DataType::Boolean => category == "B",
        t if t.is_numeric() => category == "N",
        DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(_, _)
        | DataType::Time64(_)
        | DataType::Time32(_) => category == "D",
        _ => false,
    };
    if ok {
        Ok(())
    } else if base == "bytea"
        || matches!(
            data_type,
            DataType::List(_) | DataType::Struct(_) | DataType::Map(_, _) | DataType::Binary
        )
    {
        Err("a jdbc sink writes scalar columns (numbers, text, booleans, dates, times, timestamps) only")
    } else {
        Err("the types do not agree; cast the column in the query, or declare the sink column as the table's")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn spec(url: &str, table: &str) -> ConnectorSpec {
        let options: BTreeMap<String, String> = [
            ("url", url),
            ("table-name", table),
            ("username", "eddy"),
            ("password", "pw"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        ConnectorSpec {
            table: "totals".into(),
            connector: "jdbc".into(),
            options,
            schema: Arc::new(datafusion::arrow::datatypes::Schema::empty()),
            declared_at: None,
            primary_key: vec![],
            filter: None,
            unread_columns: vec![],
            explain: None,
        }
    }

    #[test]
    fn flink_jdbc_urls_and_table_names_read() {
        let c = JdbcConfig::of(
            &spec(
                "jdbc:postgresql://db:6543/shop?sslmode=disable",
                "sales.totals",
            ),
            Some(2),
        )
        .unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.database.as_str()),
            ("db", 6543, "shop")
        );
        assert_eq!(c.qualified(), "\"sales\".\"totals\"");
        assert_eq!(c.progress_id, "totals/sales.totals/task-2");
        assert!(!format!("{c:?}").contains("pw"));
        let c = JdbcConfig::of(&spec("jdbc:postgresql://db/shop", "totals"), None).unwrap();
        assert_eq!((c.port, c.schema.as_str()), (5432, "public"));
        let e = JdbcConfig::of(&spec("jdbc:mysql://db/shop", "t"), None).unwrap_err();
        assert!(e.to_string().contains("jdbc:postgresql://"), "{e}");
    }

    #[test]
    fn scalar_types_write_and_nested_ones_are_refused() {
        assert!(writable(&DataType::Int64, "int8", "N").is_ok());
        assert!(writable(&DataType::Utf8, "uuid", "U").is_ok());
        assert!(writable(&DataType::Utf8, "int4", "N").is_ok());
        assert!(writable(&DataType::Int64, "text", "S").is_err());
        assert!(writable(&DataType::Binary, "bytea", "U")
            .unwrap_err()
            .contains("scalar"));
    }
}
