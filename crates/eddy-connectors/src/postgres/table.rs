//! The PostgreSQL side of a `postgres-cdc` table, checked before anything
//! is read: the table, its primary key and columns against the eddy
//! table's, the publication and the replication slot (made when missing).
//!
//! In: a query connection, the [`CdcConfig`] and the eddy table's physical
//! columns and primary key. Out: a [`PgTable`] (each declared column's
//! PostgreSQL name and type, the key, whether key order can be compared
//! outside PostgreSQL) and the slot's confirmed position; or an error that
//! names what does not match and how to fix it.

use datafusion::arrow::datatypes::{DataType, Field, SchemaRef};
use postgres::Client;

use super::config::{quote_ident, CdcConfig};
use crate::error::{ConnectorError, Result};

/// A declared column as the PostgreSQL table has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgColumn {
    /// Its name in PostgreSQL.
    pub name: String,
    /// Its type, as `format_type` prints it (for casts in SQL).
    pub type_name: String,
}

/// What the connector knows of the PostgreSQL table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgTable {
    /// The eddy table's physical columns, in order, as PostgreSQL has them.
    pub columns: Vec<PgColumn>,
    /// The primary key, as indices into `columns`, in key order.
    pub key: Vec<usize>,
    /// Whether PostgreSQL orders the key as Arrow's row format orders the
    /// declared key columns (integers, dates, timestamps, uuids, `numeric`
    /// read as DECIMAL, text in the C collation): then the snapshot is read
    /// in chunks by key. Otherwise it is read in one.
    pub key_order_comparable: bool,
    /// `REPLICA IDENTITY FULL`: updates and deletes carry the whole old row.
    pub replica_identity_full: bool,
}

/// Checks the table against the declared columns (`schema`: the physical
/// columns, then the row kind) and primary key.
pub fn describe(
    client: &mut Client,
    config: &CdcConfig,
    schema: &SchemaRef,
    primary_key: &[String],
) -> Result<PgTable> {
    let context = || format!("table {}", config.qualified());
    let found = client
        .query_opt(
            "SELECT c.oid, c.relreplident::text FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
            &[&config.schema, &config.pg_table],
        )
        .map_err(|e| ConnectorError::postgres(context(), message(&e)))?;
    let Some(row) = found else {
        return Err(ConnectorError::postgres(
            context(),
            format!(
                "no such table in database '{}' (schema-name '{}', table-name '{}'; names are case-sensitive)",
                config.database, config.schema, config.pg_table
            ),
        ));
    };
    let oid: u32 = row.get(0);
    let replica_identity: String = row.get(1);
    let collation: String = client
        .query_one(
            "SELECT datcollate::text FROM pg_database WHERE datname = current_database()",
            &[],
        )
        .map_err(|e| ConnectorError::postgres(context(), message(&e)))?
        .get(0);
    let c_order = |collation_name: &str| {
        let name = if collation_name == "default" {
            collation.as_str()
        } else {
            collation_name
        };
        matches!(name, "C" | "POSIX" | "C.UTF-8" | "C.utf8" | "ucs_basic")
    };
    let attributes =
        attributes(client, oid).map_err(|e| ConnectorError::postgres(context(), message(&e)))?;
    let pg_key: Vec<String> = client
        .query(
            "SELECT a.attname::text FROM pg_index i \
             CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum \
             WHERE i.indrelid = $1 AND i.indisprimary ORDER BY k.ord",
            &[&oid],
        )
        .map_err(|e| ConnectorError::postgres(context(), message(&e)))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if pg_key.is_empty() {
        return Err(ConnectorError::postgres(
            context(),
            "it has no primary key: change capture keys its changes by the primary key; add one (ALTER TABLE ... ADD PRIMARY KEY (...))",
        ));
    }
    let width = schema.fields().len().saturating_sub(1);
    let mut columns = Vec::with_capacity(width);
    let mut comparable = Vec::with_capacity(width);
    for field in schema.fields().iter().take(width) {
        let attribute =
            read_as(&attributes, field).map_err(|e| ConnectorError::postgres(context(), e))?;
        let (name, type_name) = (attribute.name.clone(), attribute.type_name.clone());
        comparable.push(key_order_matches(
            field.data_type(),
            &attribute.base,
            c_order(&attribute.collation),
        ));
        columns.push(PgColumn { name, type_name });
    }
    let mut key = Vec::with_capacity(pg_key.len());
    for k in &pg_key {
        match columns.iter().position(|c| &c.name == k) {
            Some(i) => key.push(i),
            None => {
                return Err(ConnectorError::postgres(
                    context(),
                    format!(
                    "its primary key column '{k}' is not a column of the eddy table: declare it"
                ),
                ))
            }
        }
    }
    let declared: Vec<String> = primary_key.iter().map(|k| k.to_lowercase()).collect();
    let mut found_key: Vec<String> = pg_key.iter().map(|k| k.to_lowercase()).collect();
    let mut sorted = declared.clone();
    sorted.sort();
    found_key.sort();
    if sorted != found_key {
        return Err(ConnectorError::postgres(
            context(),
            format!(
                "its primary key is ({}) and the eddy table declares PRIMARY KEY ({}): declare the same key",
                pg_key.join(", "),
                primary_key.join(", ")
            ),
        ));
    }
    Ok(PgTable {
        key_order_comparable: key.iter().all(|&i| comparable[i]),
        columns,
        key,
        replica_identity_full: replica_identity == "f",
    })
}

/// A table's column as the catalog has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// Its name.
    pub name: String,
    /// Its type, as `format_type` prints it.
    pub type_name: String,
    /// The type's `typname` (`int8`, `text`).
    pub base: String,
    /// The type's `typcategory` (`N` numeric, `S` string, ...).
    pub category: String,
    /// Its collation's name (`default`, `C`), empty when it has none.
    pub collation: String,
}

/// The OID of table `schema.name` (a table or a partitioned one).
pub fn table_oid(
    client: &mut Client,
    schema: &str,
    name: &str,
) -> std::result::Result<Option<u32>, postgres::Error> {
    Ok(client
        .query_opt(
            "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')",
            &[&schema, &name],
        )?
        .map(|r| r.get(0)))
}

/// A table's columns, in order.
pub fn attributes(
    client: &mut Client,
    oid: u32,
) -> std::result::Result<Vec<Attribute>, postgres::Error> {
    Ok(client
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), t.typname::text, \
                    t.typcategory::text, coalesce(co.collname::text, '') \
             FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
             LEFT JOIN pg_collation co ON co.oid = a.attcollation \
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&oid],
        )?
        .iter()
        .map(|r| Attribute {
            name: r.get(0),
            type_name: r.get(1),
            base: r.get(2),
            category: r.get(3),
            collation: r.get(4),
        })
        .collect())
}

/// Why an eddy column does not read a PostgreSQL table's column.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ColumnMismatch {
    /// No column of that name.
    #[error("it has no column '{name}' (its columns: {})", columns.join(", "))]
    Missing { name: String, columns: Vec<String> },
    /// A column whose type does not read into the declared one.
    #[error("column '{column}' is {postgres_type} in PostgreSQL and {declared} in the eddy table: declare a type that holds it (STRING takes any)")]
    Type {
        column: String,
        postgres_type: String,
        declared: DataType,
    },
}

/// The column an eddy column `name` is (same name, or same but for case);
/// why not, naming the table's columns, when there is none.
pub fn column<'a>(
    attributes: &'a [Attribute],
    name: &str,
) -> std::result::Result<&'a Attribute, ColumnMismatch> {
    attributes
        .iter()
        .find(|a| a.name == name || a.name.to_lowercase() == name.to_lowercase())
        .ok_or_else(|| ColumnMismatch::Missing {
            name: name.to_string(),
            columns: attributes.iter().map(|a| a.name.clone()).collect(),
        })
}

/// The column an eddy column `field` reads, checked to read into its type;
/// why not, naming both types or the table's columns, when it does not.
pub fn read_as<'a>(
    attributes: &'a [Attribute],
    field: &Field,
) -> std::result::Result<&'a Attribute, ColumnMismatch> {
    let attribute = column(attributes, field.name())?;
    if !type_fits(field.data_type(), &attribute.base, &attribute.category) {
        return Err(ColumnMismatch::Type {
            column: attribute.name.clone(),
            postgres_type: attribute.type_name.clone(),
            declared: field.data_type().clone(),
        });
    }
    Ok(attribute)
}

/// Whether a PostgreSQL type (its `typname` and `typcategory`) reads into
/// a declared Arrow type; STRING takes any.
fn type_fits(data_type: &DataType, base: &str, category: &str) -> bool {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Boolean => category == "B",
        t if t.is_numeric() => category == "N",
        DataType::Date32
        | DataType::Date64
        | DataType::Timestamp(_, _)
        | DataType::Time64(_)
        | DataType::Time32(_) => category == "D",
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => base == "bytea",
        DataType::List(_) | DataType::LargeList(_) => category == "A",
        _ => false,
    }
}

/// Whether PostgreSQL's order of a key column equals Arrow's order of its
/// declared type.
fn key_order_matches(data_type: &DataType, base: &str, c_collation: bool) -> bool {
    match base {
        "int2" | "int4" | "int8" => data_type.is_integer(),
        "numeric" => matches!(
            data_type,
            DataType::Decimal128(_, _) | DataType::Decimal256(_, _)
        ),
        "date" | "timestamp" | "timestamptz" => {
            matches!(
                data_type,
                DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, _)
            )
        }
        "uuid" => matches!(
            data_type,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ),
        "text" | "varchar" => {
            c_collation
                && matches!(
                    data_type,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                )
        }
        _ => false,
    }
}

/// Makes sure the publication exists and publishes the table.
pub fn ensure_publication(client: &mut Client, config: &CdcConfig) -> Result<()> {
    let context = || format!("publication '{}'", config.publication);
    let exists = client
        .query_opt(
            "SELECT 1 FROM pg_publication WHERE pubname = $1",
            &[&config.publication],
        )
        .map_err(|e| ConnectorError::postgres(context(), message(&e)))?
        .is_some();
    if !exists {
        let sql = format!(
            "CREATE PUBLICATION {} FOR TABLE {}",
            quote_ident(&config.publication),
            config.qualified()
        );
        return client
            .batch_execute(&sql)
            .map_err(|e| ConnectorError::postgres(format!("creating {}", context()), message(&e)));
    }
    let publishes = client
        .query_opt(
            "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
            &[&config.publication, &config.schema, &config.pg_table],
        )
        .map_err(|e| ConnectorError::postgres(context(), message(&e)))?
        .is_some();
    if !publishes {
        let sql = format!(
            "ALTER PUBLICATION {} ADD TABLE {}",
            quote_ident(&config.publication),
            config.qualified()
        );
        client.batch_execute(&sql).map_err(|e| {
            ConnectorError::postgres(
                format!("adding table {} to {}", config.qualified(), context()),
                message(&e),
            )
        })?;
    }
    Ok(())
}

/// The slot's state: its confirmed position, or that it was just made
/// (at the returned position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Changes before it are confirmed (and gone).
    pub confirmed: u64,
    /// Whether this call created it.
    pub created: bool,
}

/// The slot, made if missing (unless `must_exist`: a job resuming from a
/// checkpoint needs the slot it read from).
pub fn ensure_slot(client: &mut Client, config: &CdcConfig, must_exist: bool) -> Result<Slot> {
    let context = || format!("replication slot '{}'", config.slot);
    let found = client
        .query_opt(
            "SELECT coalesce(confirmed_flush_lsn, restart_lsn)::text, plugin::text, database::text \
             FROM pg_replication_slots WHERE slot_name = $1",
            &[&config.slot],
        )
        .map_err(|e| ConnectorError::postgres(context(), message(&e)))?;
    if let Some(row) = found {
        let lsn: Option<String> = row.get(0);
        let plugin: Option<String> = row.get(1);
        let database: Option<String> = row.get(2);
        if plugin.as_deref() != Some("pgoutput") || database.as_deref() != Some(&config.database) {
            return Err(ConnectorError::postgres(
                context(),
                format!(
                    "it exists for plugin {} in database {}: a postgres-cdc table needs a pgoutput slot of database '{}'; name another slot.name",
                    plugin.unwrap_or_else(|| "none (a physical slot)".into()),
                    database.unwrap_or_else(|| "none".into()),
                    config.database
                ),
            ));
        }
        return Ok(Slot {
            confirmed: parse_lsn(lsn.as_deref().unwrap_or("0/0"))?,
            created: false,
        });
    }
    if must_exist {
        return Err(ConnectorError::postgres(
            context(),
            "it no longer exists, so the changes since the job's last checkpoint are lost: \
             start the job without its state (a new snapshot), or restore the slot",
        ));
    }
    let lsn: String = client
        .query_one(
            "SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')",
            &[&config.slot],
        )
        .map_err(|e| ConnectorError::postgres(format!("creating {}", context()), message(&e)))?
        .get(0);
    Ok(Slot {
        confirmed: parse_lsn(&lsn)?,
        created: true,
    })
}

/// An LSN's number from its text (`16/B374D848`).
pub fn parse_lsn(text: &str) -> Result<u64> {
    pgwire_replication::Lsn::parse(text)
        .map(|l| l.0)
        .map_err(|e| ConnectorError::postgres("reading a position", e.to_string()))
}

/// An LSN's text.
pub fn lsn_text(lsn: u64) -> String {
    pgwire_replication::Lsn(lsn).to_string()
}

/// A driver error's text: the server's message, detail and hint.
pub fn message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut text = db.message().to_string();
            if let Some(detail) = db.detail() {
                text.push_str(&format!(" ({detail})"));
            }
            if let Some(hint) = db.hint() {
                text.push_str(&format!("; hint: {hint}"));
            }
            text
        }
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_fit_by_category_and_key_order_is_compared_only_where_it_agrees() {
        assert!(type_fits(&DataType::Int64, "int8", "N"));
        assert!(type_fits(&DataType::Utf8, "jsonb", "U"));
        assert!(!type_fits(&DataType::Int64, "text", "S"));
        assert!(type_fits(&DataType::Binary, "bytea", "U"));
        assert!(key_order_matches(&DataType::Int32, "int4", false));
        assert!(!key_order_matches(&DataType::Utf8, "int4", true));
        assert!(!key_order_matches(&DataType::Utf8, "text", false));
        assert!(key_order_matches(&DataType::Utf8, "text", true));
        assert_eq!(lsn_text(parse_lsn("16/B374D848").unwrap()), "16/B374D848");
    }
}
