//! Source tables that are change feeds: `format = 'debezium-json'`,
//! upsert topics (`format = 'upsert-json'` on a connector whose records
//! have keys), and tables of a connector that reads a table's changes by
//! key (`postgres-cdc`, whose reader sends upserts and deletes by the
//! primary key, as an upsert topic's records are). The connectors say
//! which they are ([`ConnectorFacts`]); without them every table is read
//! as its format says.
//!
//! In: a declared table. Out, for a change feed: the layout its source node
//! runs (the row-kind column appended to its physical and output columns,
//! so the connector decodes change events into changelog rows) and what
//! the planner knows of its stream (updating; upsert key: the `PRIMARY
//! KEY`). A Debezium feed with a primary key is checked at its source
//! against the table it describes (`eddy_engine::source::feed_table`: a
//! change to a key never created is a bad row, a delete takes out the row
//! held). An upsert topic's rows are upserts and deletes by key: the
//! planner puts a `changelog_normalize` step keyed by the primary key
//! behind its source. Other tables are read as they are.
//!
//! A change feed's changes apply in arrival order. A Debezium feed may
//! declare a WATERMARK (its event time, best the change's own time: a
//! `METADATA FROM 'value.source.timestamp'` column): then it can be the
//! versioned side of a temporal join. Its rows are never dropped as late (a
//! late `-U` dropped would leave its old row behind).

use eddy_engine::changelog;
use eddy_engine::graph::ConnectorFacts;
use eddy_engine::source::{SourceColumn, SourceLayout};

use super::stream::Changelog;
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};

/// The `format` option value of a Debezium change feed.
const DEBEZIUM_JSON: &str = "debezium-json";

/// The `format` option value of an upsert topic (records keyed by the
/// primary key, each the key's new value, a tombstone a delete).
const UPSERT_JSON: &str = "upsert-json";

/// A change feed's source layout and stream facts.
pub(super) struct ChangeFeed {
    pub layout: SourceLayout,
    pub changelog: Changelog,
    /// An upsert feed: its rows are upserts and deletes by key, which a
    /// `changelog_normalize` step turns into a changelog.
    pub upsert: bool,
}

/// The change feed `def` declares, if it is one; `facts`: what its
/// connector says of itself (`None`: nothing, every table read as its
/// format says).
pub(super) fn of(def: &TableDef, facts: Option<&dyn ConnectorFacts>) -> Result<Option<ChangeFeed>> {
    let format = def
        .options
        .get("format")
        .map(|f| f.trim().to_ascii_lowercase());
    // A table read once (a snapshot-only database table) is not one: each
    // row an insert, a plain (append-only, bounded) table.
    let by_key = facts.is_some_and(|f| f.reads_changes_by_key(&def.connector, &def.options));
    if by_key && def.primary_key.is_empty() {
        return Err(SqlError::at(
            &def.position,
            format!(
                "table '{}' reads a table's changes (connector '{}'), which are keyed by the table's primary key: declare it, PRIMARY KEY (...) NOT ENFORCED",
                def.name, def.connector
            ),
        ));
    }
    let upsert = format.as_deref() == Some(UPSERT_JSON) || by_key;
    if format.as_deref() != Some(DEBEZIUM_JSON) && !upsert {
        return Ok(None);
    }
    if upsert && !by_key {
        if !facts.is_some_and(|f| f.records_have_keys(&def.connector)) {
            return Err(SqlError::at(
                &def.position,
                format!("format '{UPSERT_JSON}' reads an upsert topic, whose records have keys: use it with connector = 'kafka'"),
            ));
        }
        let key = def.options.get("key_column").map(|k| k.to_lowercase());
        if def.primary_key.len() != 1
            || key.as_deref() != def.primary_key.first().map(String::as_str)
        {
            return Err(SqlError::at(
                &def.position,
                format!(
                    "table '{}' reads an upsert topic (format '{UPSERT_JSON}'): declare its key as PRIMARY KEY (k) NOT ENFORCED, one column, and name it as key_column = 'k' (the column each record's key holds)",
                    def.name
                ),
            ));
        }
    }
    if upsert && !by_key && def.layout.event_time.is_some() {
        return Err(SqlError::at(
            &def.position,
            format!(
                "table '{}' reads an upsert topic (format '{UPSERT_JSON}'): a WATERMARK on it is not supported yet; leave the WATERMARK out",
                def.name
            ),
        ));
    }
    let read_as = if by_key {
        format!("connector '{}'", def.connector)
    } else if upsert {
        format!("format '{UPSERT_JSON}'")
    } else {
        format!("format '{DEBEZIUM_JSON}'")
    };
    let origin = format!(
        "the change feed '{}' ({read_as}, declared at {})",
        def.name, def.position
    );
    let output = &def.layout.output_schema;
    let upsert_key: Option<Vec<usize>> = (!def.primary_key.is_empty())
        .then(|| {
            def.primary_key
                .iter()
                .map(|k| output.index_of(k).ok())
                .collect()
        })
        .flatten();
    let key_names: Vec<String> = upsert_key
        .iter()
        .flatten()
        .map(|&i| output.field(i).name().clone())
        .collect();
    let mut layout = def.layout.clone();
    // A Debezium feed with a key is checked against the table it
    // describes, at its source; an upsert feed's normalize step does that.
    layout.change_feed_key = if upsert { None } else { upsert_key.clone() };
    layout.physical_schema = changelog::updating_schema(&layout.physical_schema, &[]);
    layout.output_schema =
        changelog::with_origin(&changelog::updating_schema(output, &key_names), &origin);
    layout.columns.push(SourceColumn::Physical(
        def.layout.physical_schema.fields().len(),
    ));
    Ok(Some(ChangeFeed {
        layout,
        changelog: Changelog { origin, upsert_key },
        upsert,
    }))
}
