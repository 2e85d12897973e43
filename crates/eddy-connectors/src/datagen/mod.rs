//! The `datagen` connector: Flink's generator of rows from each column's
//! declared kind, so a table Flink SQL declares with `'connector' =
//! 'datagen'` runs on eddy as it is.
//!
//! In: the table's options: `rows-per-second` (the pace on the wall clock,
//! default 10,000 as in Flink), `number-of-rows`, and per column
//! `fields.NAME.kind` (`sequence` with `start` and `end`, or `random` with
//! `min`/`max`, `length`, `max-past`, `null-rate`; see [`fields`]). Out: a
//! [`DatagenSource`], checkpointed by row number.
//!
//! A sequence column's values are exactly Flink's (`start`, `start + 1`, ...,
//! `end`; the table ends with its shortest sequence), so a table whose
//! other columns are computed from a sequence (`CONCAT('order-',
//! CAST(seq AS STRING))`) has the same rows on both engines: what the
//! side-by-side benchmarks run to time operators with no decoding in either.
//! Random values are eddy's own draws (uniform, from `seed`), the same every
//! run, not Flink's.
//!
//! ```
//! use eddy_connectors::{Registry, Role};
//!
//! let datagen = Registry::standard();
//! let datagen = datagen.get("datagen").unwrap();
//! assert!(datagen.options(Role::Source).is_some());
//! assert!(datagen.options(Role::Sink).is_none());
//! ```

pub mod fields;
mod source;

use std::collections::BTreeMap;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::SourceReader;

pub use self::fields::FieldGen;
pub use self::source::DatagenSource;
use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::{ConnectorError, Result};
use crate::file::source::BATCH_SIZE;
use crate::options::{OptionDecl, OptionKind, OptionValues};

/// The connector's name.
pub const NAME: &str = "datagen";

/// Flink's default pace.
const DEFAULT_ROWS_PER_SECOND: u64 = 10_000;

const OPTIONS: &[OptionDecl] = &[
    OptionDecl::new(
        "rows-per-second",
        OptionKind::Count,
        "rows a second on the wall clock (default 10000, as Flink)",
    ),
    OptionDecl::new(
        "number-of-rows",
        OptionKind::Count,
        "rows in all (default: unbounded, or the shortest sequence's length)",
    ),
    OptionDecl::new(
        "fields.",
        OptionKind::Prefix,
        "fields.COLUMN.kind: sequence (with .start and .end) or random (default; with .min and .max for numbers, .length for text (default 100), .max-past for timestamps, .null-rate)",
    ),
    OptionDecl::new(
        "seed",
        OptionKind::Count,
        "random columns' seed (default 0): the same seed, the same rows",
    ),
    BATCH_SIZE,
];

/// See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct DatagenConnector;

/// What a table's options ask the source to make.
#[derive(Debug, Clone)]
pub struct DatagenPlan {
    /// One generator per physical column, in order.
    pub fields: Vec<FieldGen>,
    /// Rows in all (`None`: unbounded).
    pub rows: Option<u64>,
    /// The pace on the wall clock.
    pub rows_per_second: u64,
    /// Rows per batch at most.
    pub batch_size: usize,
}

/// The plan of a table's options (every `fields.` option checked against
/// the table's columns).
pub fn plan(config: &ConnectorConfig, spec: &ConnectorSpec) -> Result<DatagenPlan> {
    let values = OptionValues::new(&spec.options);
    let seed = values.count::<u64>("seed")?.unwrap_or(0);
    let rows_per_second = values
        .count::<u64>("rows-per-second")?
        .unwrap_or(DEFAULT_ROWS_PER_SECOND);
    if rows_per_second == 0 {
        return Err(ConnectorError::bad_option(
            "rows-per-second",
            "0 rows a second would make nothing (leave it out for Flink's 10000)",
        ));
    }
    // fields.NAME.OPTION, by column (option keys are lower-cased, so
    // columns match whatever their case).
    let mut by_column: BTreeMap<String, BTreeMap<&str, &str>> = BTreeMap::new();
    for (key, value) in &spec.options {
        let Some(rest) = key.strip_prefix("fields.") else {
            continue;
        };
        let Some((column, option)) = rest.rsplit_once('.') else {
            return Err(ConnectorError::bad_option(
                key,
                "a field option is fields.COLUMN.OPTION",
            ));
        };
        if !fields::FIELD_OPTIONS.contains(&option) {
            return Err(ConnectorError::bad_option(
                key,
                format!(
                    "'{option}' is not a field option ({})",
                    fields::FIELD_OPTIONS.join(", ")
                ),
            ));
        }
        by_column
            .entry(column.to_string())
            .or_default()
            .insert(option, value.as_str());
    }
    let mut gens = Vec::new();
    let mut rows = values.count::<u64>("number-of-rows")?;
    for (column, field) in spec.schema.fields().iter().enumerate() {
        let options = by_column
            .remove(&field.name().to_lowercase())
            .unwrap_or_default();
        let (field_gen, sequence_rows) = FieldGen::new(field, column, &options, seed)?;
        if let Some(n) = sequence_rows {
            rows = Some(rows.map_or(n, |r| r.min(n)));
        }
        gens.push(field_gen);
    }
    if let Some(column) = by_column.keys().next() {
        let names: Vec<&str> = spec
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        return Err(ConnectorError::bad_option(
            &format!("fields.{column}."),
            format!(
                "the table has no physical column '{column}' (it has {})",
                names.join(", ")
            ),
        ));
    }
    Ok(DatagenPlan {
        fields: gens,
        rows,
        rows_per_second,
        batch_size: config.batch_size(spec)?,
    })
}

impl Connector for DatagenConnector {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "rows made from each column's kind, as Flink's datagen: sequences (the same as Flink's) \
         and random values, paced by rows-per-second"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        (role == Role::Source).then_some(OPTIONS)
    }

    fn check(&self, config: &ConnectorConfig, spec: &ConnectorSpec, _role: Role) -> Result<()> {
        plan(config, spec).map(|_| ())
    }

    fn open_source(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(DatagenSource::new(
            plan(config, spec)?,
            spec.schema.clone(),
            resume,
        )?))
    }
}

#[cfg(test)]
mod tests;
