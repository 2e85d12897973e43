//! A `jdbc` table read by key: the PostgreSQL table a lookup join asks for
//! each probe batch's keys (`JOIN customers FOR SYSTEM_TIME AS OF
//! o.proc_time ON o.customer = customers.id`), with Flink JDBC's lookup
//! options.
//!
//! In: the keys of one batch (columns, distinct, no NULLs). Out: the
//! table's rows with those keys, in the declared columns. One statement a
//! batch: `SELECT cols FROM t WHERE (k...) IN (SELECT ... FROM unnest($1::text[], ...))`,
//! each key cast to its column's type by PostgreSQL, so an index on the
//! key columns is used. A failed statement is tried again
//! `lookup.max-retries` times on a new connection, a second apart times the
//! try (Flink's back-off), then fails the job naming the table.
//!
//! The cache (`lookup.cache.max-rows`, `lookup.cache.ttl`,
//! `lookup.cache.caching-missing-key`; Flink 1.16's
//! `lookup.partial-cache.*` names too) is the join's
//! ([`eddy_engine::operators::key_lookup_join`]); this says its policy.
//!
//! ```sql
//! CREATE TABLE customers (id BIGINT, name STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED)
//! WITH (
//!   connector = 'jdbc', url = 'jdbc:postgresql://db.internal:5432/shop',
//!   'table-name' = 'customers', username = 'eddy', password = 'env:PG_PASSWORD',
//!   'lookup.cache.max-rows' = '10000', 'lookup.cache.ttl' = '1 min'
//! );
//! ```

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Array, ArrayRef, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::changelog::{row_kind_field, RowKind};
use eddy_engine::lookup::{CachePolicy, LookupSource, LookupTable};
use eddy_engine::EngineError;
use postgres::Client;

use super::config::quote_ident;
use super::sink_config::JdbcConfig;
use super::table::{attributes, column, message, read_as, table_oid};
use super::text_columns::TextRows;
use crate::error::{ConnectorError, Result};
use crate::options::{OptionDecl, OptionKind, OptionValues};

/// The options a `jdbc` table read by key takes.
pub const OPTIONS: &[OptionDecl] = &[
    OptionDecl::new("url", OptionKind::Text, "jdbc:postgresql://host:port/database"),
    OptionDecl::new("table-name", OptionKind::Text, "the PostgreSQL table read (schema.table, or table in public); it must exist"),
    OptionDecl::new("username", OptionKind::Text, "a role that may read the table"),
    super::config::PASSWORD_OPTION,
    OptionDecl::new("driver", OptionKind::Text, "taken for Flink compatibility (org.postgresql.Driver); eddy speaks PostgreSQL's protocol itself"),
    OptionDecl::new("lookup.cache.max-rows", OptionKind::Count, "keys whose rows are kept at most, the oldest evicted first (unset: no cache, every batch asks)"),
    OptionDecl::new("lookup.cache.ttl", OptionKind::Duration, "how long a key's rows are kept after they were read (unset: until evicted)"),
    OptionDecl::new("lookup.cache.caching-missing-key", OptionKind::Flag, "whether a key without rows is kept too (true)"),
    OptionDecl::new("lookup.cache", OptionKind::OneOf(&["NONE", "PARTIAL"]), "Flink 1.16's switch: PARTIAL caches by the lookup.partial-cache.* options"),
    OptionDecl::new("lookup.partial-cache.max-rows", OptionKind::Count, "as lookup.cache.max-rows"),
    OptionDecl::new("lookup.partial-cache.expire-after-write", OptionKind::Duration, "as lookup.cache.ttl"),
    OptionDecl::new("lookup.partial-cache.cache-missing-key", OptionKind::Flag, "as lookup.cache.caching-missing-key"),
    OptionDecl::new("lookup.max-retries", OptionKind::Count, "times a failed lookup is tried again on a new connection (3)"),
];

/// How a table read by key is cached and retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupOptions {
    /// The join's cache.
    pub cache: CachePolicy,
    /// Tries after the first.
    pub max_retries: u32,
}

impl LookupOptions {
    /// Reads the `lookup.*` options (either Flink's older or its 1.16
    /// names; `lookup.cache = 'NONE'` turns the cache off).
    pub fn of(options: &std::collections::BTreeMap<String, String>) -> Result<Self> {
        let o = OptionValues::new(options);
        // One setting, two names: taking one while the other is given
        // too would leave a setting silently unused.
        fn either<'n>(o: &OptionValues<'_>, old: &'n str, new: &'n str) -> Result<&'n str> {
            match (o.text(old), o.text(new)) {
                (Some(_), Some(_)) => Err(ConnectorError::bad_option(
                    new,
                    format!("'{old}' says the same: give one of the two"),
                )),
                (Some(_), None) => Ok(old),
                _ => Ok(new),
            }
        }
        let max_rows = o.count::<usize>(either(
            &o,
            "lookup.cache.max-rows",
            "lookup.partial-cache.max-rows",
        )?)?;
        let ttl = o.duration(either(
            &o,
            "lookup.cache.ttl",
            "lookup.partial-cache.expire-after-write",
        )?)?;
        let cache_missing = o.flag(
            either(
                &o,
                "lookup.cache.caching-missing-key",
                "lookup.partial-cache.cache-missing-key",
            )?,
            true,
        )?;
        let off = o.word("lookup.cache").as_deref() == Some("none");
        if o.word("lookup.cache").as_deref() == Some("partial") && max_rows.is_none() {
            return Err(ConnectorError::bad_option(
                "lookup.cache",
                "PARTIAL caches at most lookup.partial-cache.max-rows keys: set it",
            ));
        }
        Ok(Self {
            cache: CachePolicy {
                max_rows: if off { None } else { max_rows },
                ttl,
                cache_missing,
            },
            max_retries: o.count::<u32>("lookup.max-retries")?.unwrap_or(3),
        })
    }
}

/// One open lookup table. See the module docs.
pub struct JdbcLookup {
    config: JdbcConfig,
    options: LookupOptions,
    client: Option<Client>,
    sql: String,
    /// The declared columns, then a row kind (what [`TextRows`] fills).
    text_schema: SchemaRef,
}

impl JdbcLookup {
    /// Connects, checks the table's columns and types against the declared
    /// ones, and prepares the statement.
    pub fn open(table: &LookupTable) -> Result<Self> {
        let spec = &table.spec;
        let config = JdbcConfig::of(spec, None)?;
        let options = LookupOptions::of(&spec.options)?;
        let mut client = config.connect()?;
        let sql = statement(&mut client, &config, &spec.schema, &table.key_columns)?;
        let mut fields: Vec<_> = spec.schema.fields().iter().cloned().collect();
        fields.push(Arc::new(row_kind_field(&[])));
        Ok(Self {
            config,
            options,
            client: Some(client),
            sql,
            text_schema: Arc::new(Schema::new(fields)),
        })
    }

    /// One try of the statement.
    fn query(&mut self, keys: &[Vec<Option<String>>]) -> Result<Vec<postgres::Row>> {
        if self.client.is_none() {
            self.client = Some(self.config.connect()?);
        }
        let Some(client) = self.client.as_mut() else {
            unreachable!("connected above");
        };
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> = keys
            .iter()
            .map(|k| k as &(dyn postgres::types::ToSql + Sync))
            .collect();
        client.query(self.sql.as_str(), &params).map_err(|e| {
            ConnectorError::postgres(
                format!("looking up keys in {}", self.config.qualified()),
                message(&e),
            )
        })
    }
}

impl Drop for JdbcLookup {
    fn drop(&mut self) {
        // Closing a blocking client blocks on its own runtime.
        let client = self.client.take();
        super::outside_runtime(move || drop(client));
    }
}

/// `SELECT` the declared columns (as text) of the rows whose key columns
/// equal one of the keys sent as text arrays.
fn statement(
    client: &mut Client,
    config: &JdbcConfig,
    schema: &SchemaRef,
    key_columns: &[String],
) -> Result<String> {
    let context = || format!("table {}", config.qualified());
    let fail = |e: postgres::Error| ConnectorError::postgres(context(), message(&e));
    let oid = table_oid(client, &config.schema, &config.pg_table)
        .map_err(fail)?
        .ok_or_else(|| {
            ConnectorError::postgres(
                context(),
                format!(
                    "no such table in database '{}' (table-name '{}'; names are case-sensitive)",
                    config.database, config.pg_table
                ),
            )
        })?;
    let attributes = attributes(client, oid).map_err(fail)?;
    let mut select = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let attribute =
            read_as(&attributes, field).map_err(|e| ConnectorError::postgres(context(), e))?;
        select.push(format!("{}::text", quote_ident(&attribute.name)));
    }
    let mut keys = Vec::with_capacity(key_columns.len());
    let mut casts = Vec::with_capacity(key_columns.len());
    for (i, name) in key_columns.iter().enumerate() {
        let attribute =
            column(&attributes, name).map_err(|e| ConnectorError::postgres(context(), e))?;
        keys.push(quote_ident(&attribute.name));
        casts.push(format!("k.c{i}::{}", attribute.type_name));
    }
    let arrays: Vec<String> = (1..=key_columns.len())
        .map(|i| format!("${i}::text[]"))
        .collect();
    let aliases: Vec<String> = (0..key_columns.len()).map(|i| format!("c{i}")).collect();
    Ok(format!(
        "SELECT {} FROM {} WHERE ({}) IN (SELECT {} FROM unnest({}) AS k({}))",
        select.join(", "),
        config.qualified(),
        keys.join(", "),
        casts.join(", "),
        arrays.join(", "),
        aliases.join(", ")
    ))
}

/// Each key column's values as text, as PostgreSQL reads them.
fn key_texts(keys: &[ArrayRef]) -> Result<Vec<Vec<Option<String>>>> {
    keys.iter()
        .map(|k| {
            let text = cast(k, &DataType::Utf8)?;
            let text = text.as_any().downcast_ref::<StringArray>().ok_or_else(|| {
                ConnectorError::bad_option("table-name", "a key does not print as text")
            })?;
            Ok((0..text.len())
                .map(|r| text.is_valid(r).then(|| text.value(r).to_string()))
                .collect())
        })
        .collect()
}

impl LookupSource for JdbcLookup {
    fn lookup(&mut self, keys: &[ArrayRef]) -> eddy_engine::Result<RecordBatch> {
        let table = self.config.table.clone();
        let engine = |e: ConnectorError| EngineError::Config(format!("table '{table}': {e}"));
        let texts = key_texts(keys).map_err(engine)?;
        let mut tried = 0;
        let found = loop {
            match super::outside_runtime(|| self.query(&texts)) {
                Ok(rows) => break rows,
                Err(e) if tried < self.options.max_retries => {
                    tried += 1;
                    tracing::warn!(table = %self.config.table, "{e}; trying again ({tried} of {})", self.options.max_retries);
                    let broken = self.client.take();
                    super::outside_runtime(move || drop(broken));
                    std::thread::sleep(Duration::from_secs(u64::from(tried)));
                }
                Err(e) => return Err(engine(e)),
            }
        };
        let width = self.text_schema.fields().len() - 1;
        let mut rows = TextRows::new(self.text_schema.clone());
        for row in &found {
            let values: Vec<Option<&str>> = (0..width).map(|c| row.get(c)).collect();
            rows.push(
                RowKind::Insert,
                values.into_iter().map(|v| v.map(str::as_bytes)),
            );
        }
        let (batch, bad) = rows.finish().map_err(engine)?;
        if let Some(bad) = bad.first() {
            return Err(EngineError::Config(format!(
                "table '{table}': {} holds '{}' in column '{}', which its declared type does not hold: declare a type that does (STRING takes any)",
                self.config.qualified(),
                bad.text,
                bad.column
            )));
        }
        let data: Vec<ArrayRef> = batch.columns()[..width].to_vec();
        let declared = Arc::new(Schema::new(self.text_schema.fields()[..width].to_vec()));
        Ok(RecordBatch::try_new(declared, data)?)
    }

    fn cache(&self) -> CachePolicy {
        self.options.cache
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn options(given: &[(&str, &str)]) -> Result<LookupOptions> {
        let given: BTreeMap<String, String> = given
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        LookupOptions::of(&given)
    }

    #[test]
    fn flinks_older_and_newer_cache_options_read_alike() {
        let none = options(&[]).unwrap();
        assert_eq!(none.cache.max_rows, None);
        assert_eq!(none.max_retries, 3);
        let old = options(&[
            ("lookup.cache.max-rows", "500"),
            ("lookup.cache.ttl", "10s"),
            ("lookup.cache.caching-missing-key", "false"),
            ("lookup.max-retries", "1"),
        ])
        .unwrap();
        let new = options(&[
            ("lookup.cache", "PARTIAL"),
            ("lookup.partial-cache.max-rows", "500"),
            ("lookup.partial-cache.expire-after-write", "10s"),
            ("lookup.partial-cache.cache-missing-key", "false"),
            ("lookup.max-retries", "1"),
        ])
        .unwrap();
        assert_eq!(old, new);
        assert_eq!(old.cache.max_rows, Some(500));
        assert_eq!(old.cache.ttl, Some(Duration::from_secs(10)));
        assert!(!old.cache.cache_missing);
        let off = options(&[
            ("lookup.cache", "NONE"),
            ("lookup.partial-cache.max-rows", "5"),
        ])
        .unwrap();
        assert_eq!(off.cache.max_rows, None);
        let err = options(&[("lookup.cache", "PARTIAL")]).unwrap_err();
        assert!(
            err.to_string().contains("lookup.partial-cache.max-rows"),
            "{err}"
        );
    }

    #[test]
    fn keys_print_as_postgresql_reads_them() {
        let keys: Vec<ArrayRef> = vec![
            Arc::new(datafusion::arrow::array::Int64Array::from(vec![7, -1])),
            Arc::new(StringArray::from(vec!["a b", "é"])),
        ];
        assert_eq!(
            key_texts(&keys).unwrap(),
            vec![
                vec![Some("7".to_string()), Some("-1".to_string())],
                vec![Some("a b".to_string()), Some("é".to_string())],
            ]
        );
    }
}
