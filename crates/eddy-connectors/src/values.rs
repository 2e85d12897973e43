//! The `values` connector: rows written into the job itself, read once
//! (a bounded source). A query's `VALUES (1, 'a'), (2, 'b')` becomes a
//! source of this connector, the rows as NDJSON in its `rows` option; a
//! table may also declare them (`WITH (connector = 'values', rows =
//! '{"k": "a"}\n{"k": "b"}')`), as Flink's test connector of that name.
//!
//! In: the `rows` option, one JSON object per line. Out: an
//! [`crate::ndjson::NdjsonSource`] over that text, checkpointed by offset
//! like a file.
//!
//! ```
//! use eddy_connectors::{Registry, Role};
//!
//! let registry = Registry::standard();
//! let values = registry.get("values").unwrap();
//! assert!(values.options(Role::Source).is_some());
//! assert!(values.options(Role::Sink).is_none());
//! ```

use std::io::{BufReader, Cursor, Read};

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::SourceReader;

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::{ConnectorError, Result};
use crate::ndjson::source::{NdjsonPosition, NdjsonSource};
use crate::options::{OptionDecl, OptionKind, OptionValues};

/// The connector's name.
pub const NAME: &str = "values";

/// `rows`: the rows, one JSON object per line.
pub const ROWS: OptionDecl = OptionDecl::new(
    "rows",
    OptionKind::Text,
    "the rows, one JSON object per line (what a query's VALUES list becomes)",
);

const OPTIONS: &[OptionDecl] = &[ROWS, crate::file::source::BATCH_SIZE];

/// See the module docs.
#[derive(Debug, Default, Clone, Copy)]
pub struct ValuesConnector;

impl Connector for ValuesConnector {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "rows written into the job (a query's VALUES list), read once"
    }

    fn options(&self, role: Role) -> Option<&'static [OptionDecl]> {
        (role == Role::Source).then_some(OPTIONS)
    }

    fn check(&self, _config: &ConnectorConfig, spec: &ConnectorSpec, _role: Role) -> Result<()> {
        OptionValues::new(&spec.options)
            .required(
                ROWS.name,
                "a values table needs its rows (one JSON object per line)",
            )
            .map(|_| ())
    }

    fn open_source(
        &self,
        config: &ConnectorConfig,
        spec: &ConnectorSpec,
        resume: Option<&serde_json::Value>,
    ) -> Result<Box<dyn SourceReader>> {
        let rows = OptionValues::new(&spec.options)
            .required(
                ROWS.name,
                "a values table needs its rows (one JSON object per line)",
            )?
            .as_bytes()
            .to_vec();
        let resume: Option<NdjsonPosition> = resume
            .map(|r| serde_json::from_value(r.clone()))
            .transpose()
            .map_err(|e| {
                ConnectorError::bad_option(ROWS.name, format!("checkpointed position: {e}"))
            })?;
        let mut cursor = Cursor::new(rows);
        if let Some(position) = &resume {
            cursor.set_position(position.offset);
        }
        let reader: Box<dyn Read + Send> = Box::new(cursor);
        let source = NdjsonSource::new(
            BufReader::new(reader),
            format!("values:{}", spec.table),
            spec.schema.clone(),
            config.batch_size(spec)?,
            1,
            false,
            &[],
        );
        Ok(Box::new(match &resume {
            Some(position) => source.starting_at(position),
            None => source,
        }))
    }
}
