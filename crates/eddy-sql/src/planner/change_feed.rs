//! Source tables that are change feeds: `format = 'debezium-json'`.
//!
//! In: a declared table. Out, for a change feed: the layout its source node
//! runs (the row-kind column appended to its physical and output columns,
//! so the connector decodes change events into changelog rows) and what
//! the planner knows of its stream (updating; upsert key: the `PRIMARY
//! KEY`). Other tables are read as they are.
//!
//! A change feed declares no WATERMARK: its changes are applied in arrival
//! order (a late `-U` cannot be dropped without leaving its old row behind).

use eddy_engine::changelog;
use eddy_engine::source::{SourceColumn, SourceLayout};

use super::stream::Changelog;
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};

/// The `format` option value of a Debezium change feed.
const DEBEZIUM_JSON: &str = "debezium-json";

/// A change feed's source layout and stream facts.
pub(super) struct ChangeFeed {
    pub layout: SourceLayout,
    pub changelog: Changelog,
}

/// The change feed `def` declares, if it is one.
pub(super) fn of(def: &TableDef) -> Result<Option<ChangeFeed>> {
    let is_feed = def
        .options
        .get("format")
        .is_some_and(|f| f.trim().eq_ignore_ascii_case(DEBEZIUM_JSON));
    if !is_feed {
        return Ok(None);
    }
    if def.layout.event_time.is_some() {
        return Err(SqlError::at(
            &def.position,
            format!(
                "table '{}' is a change feed (format '{DEBEZIUM_JSON}'): its changes apply in arrival order, and a WATERMARK on it is not supported yet; leave the WATERMARK out",
                def.name
            ),
        ));
    }
    let origin = format!(
        "the change feed '{}' (format '{DEBEZIUM_JSON}', declared at {})",
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
    layout.physical_schema = changelog::updating_schema(&layout.physical_schema, &[]);
    layout.output_schema =
        changelog::with_origin(&changelog::updating_schema(output, &key_names), &origin);
    layout.columns.push(SourceColumn::Physical(
        def.layout.physical_schema.fields().len(),
    ));
    Ok(Some(ChangeFeed {
        layout,
        changelog: Changelog { origin, upsert_key },
    }))
}
