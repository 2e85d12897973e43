//! The immutable description of how a source's rows become a stream:
//! physical and computed columns, event time and lateness, idleness, and
//! what happens to bad rows.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::physical_expr::PhysicalExpr;

use super::bad_rows::BadRowPolicy;

/// Options of a source table that the engine reads (the rest belong to the
/// connector).
pub const TABLE_OPTIONS: [&str; 5] = [
    "allowed_lateness",
    "bad_rows",
    "idle_timeout",
    "late_rows",
    "max_future_skew",
];

/// A column computed from the physical columns when a row is read.
#[derive(Debug, Clone)]
pub struct ComputedColumn {
    /// The column as declared.
    pub field: Field,
    /// Expression over the physical columns.
    pub expr: Arc<dyn PhysicalExpr>,
}

/// How a source derives event time and judges lateness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTimeSpec {
    /// Index of the event-time column in the source's output schema.
    pub column: usize,
    /// Out-of-orderness bound: watermark = max event time - bound.
    pub bound_ms: i64,
    /// Extra lateness tolerated on top of the watermark.
    pub allowed_lateness_ms: i64,
    /// A row more than this far ahead of the largest event time seen is a
    /// bad row instead of moving the watermark (option `max_future_skew`).
    pub max_future_skew_ms: Option<i64>,
    /// What happens to rows behind the watermark (option `late_rows`).
    pub late_rows: LatePolicy,
}

/// What a source does with a row whose event time is behind its watermark
/// less the allowed lateness (table option `late_rows`). Either way the
/// row appears once in `late_rows(table)`, with the watermark that judged
/// it and its lag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LatePolicy {
    /// The row goes on to the queries, marked with the watermark at its
    /// position ([`crate::message::LateBatch`]); an operator leaves it out
    /// only of state that was already final at that watermark (a fired
    /// window, an evicted join side, an ordered operator's released rows),
    /// counting what it drops. Projections, filters, updating operators and
    /// sinks keep it. Flink SQL's and Arroyo's behaviour (the default).
    #[default]
    Keep,
    /// The row goes to `late_rows(table)` only, and to no query: a late
    /// router (the seed pipeline's device stream).
    Divert,
}

impl LatePolicy {
    /// The option values, as users write them.
    pub const NAMES: [&'static str; 2] = ["keep", "divert"];
}

impl std::str::FromStr for LatePolicy {
    type Err = super::choice::NotOneOf;

    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "keep" => Ok(Self::Keep),
            "divert" => Ok(Self::Divert),
            other => Err(super::choice::NotOneOf {
                given: other.to_string(),
                choices: &Self::NAMES,
            }),
        }
    }
}

/// Layout of one output column of a source: read or computed.
#[derive(Debug, Clone)]
pub enum SourceColumn {
    /// Column `i` of the raw batch.
    Physical(usize),
    /// Computed from the raw batch.
    Computed(ComputedColumn),
}

/// Immutable description of how a source's rows become a stream.
#[derive(Debug, Clone)]
pub struct SourceLayout {
    /// The raw (physical) columns a connector must produce.
    pub physical_schema: SchemaRef,
    /// The stream's schema, columns in declared order.
    pub output_schema: SchemaRef,
    /// Where each output column comes from.
    pub columns: Vec<SourceColumn>,
    /// Event time and lateness, if the table declares a watermark.
    pub event_time: Option<EventTimeSpec>,
    /// After this long without input the source is idle: its watermark no
    /// longer holds back the job (option `idle_timeout`).
    pub idle_timeout: Option<std::time::Duration>,
    /// What happens to bad rows (option `bad_rows`).
    pub bad_rows: BadRowPolicy,
    /// A Debezium change feed's primary key (output columns): the source
    /// holds each key's current row and checks every change against it
    /// (see [`super::feed_table`]).
    pub change_feed_key: Option<Vec<usize>>,
}

impl SourceLayout {
    /// The schema of the late-row port: the output schema plus `watermark_ms`
    /// and `lag_ms`.
    pub fn late_schema(&self) -> SchemaRef {
        let mut fields: Vec<Field> = self
            .output_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(Field::new("watermark_ms", DataType::Int64, false));
        fields.push(Field::new("lag_ms", DataType::Int64, false));
        Arc::new(Schema::new(fields))
    }
}

/// Field metadata key marking a column declared `JSON`: a text column that a
/// connector fills with each value's JSON text (an object or array as
/// written, a string as itself, a number as its digits).
pub const JSON_COLUMN_KEY: &str = "eddy.json";

/// Field metadata key marking the one column of a table read as
/// unstructured JSON (Arroyo's `'json.unstructured' = 'true'`): each input
/// line, whole, is that column's JSON text.
pub const UNSTRUCTURED_COLUMN_KEY: &str = "eddy.unstructured";

/// Whether `schema` is a table read as unstructured JSON (see
/// [`UNSTRUCTURED_COLUMN_KEY`]).
pub fn is_unstructured(schema: &Schema) -> bool {
    schema.fields().len() == 1
        && schema
            .field(0)
            .metadata()
            .contains_key(UNSTRUCTURED_COLUMN_KEY)
}

/// Field metadata key marking a metadata column (`col TIMESTAMP(3) METADATA
/// FROM 'value.source.timestamp'`): its value is the key's, which the
/// connector reads from the record around the row (a Debezium envelope's
/// `ts_ms`, `source.ts_ms`) rather than from the row.
pub const METADATA_COLUMN_KEY: &str = "eddy.metadata_from";

/// What a change record's metadata column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeMetadata {
    /// When the database made the change (Debezium's `source.ts_ms`).
    DatabaseTime,
    /// When the change was read from the database (the envelope's `ts_ms`).
    IngestionTime,
    /// The database's name.
    DatabaseName,
    /// The table's schema's name.
    SchemaName,
    /// The table's name in the database.
    TableName,
}

impl ChangeMetadata {
    /// The keys a Debezium feed's metadata column may name (Flink's), what
    /// each holds.
    pub const KEYS: [(&'static str, ChangeMetadata); 4] = [
        ("value.source.timestamp", ChangeMetadata::DatabaseTime),
        ("source.timestamp", ChangeMetadata::DatabaseTime),
        ("value.ingestion-timestamp", ChangeMetadata::IngestionTime),
        ("ingestion-timestamp", ChangeMetadata::IngestionTime),
    ];

    /// The keys a `postgres-cdc` table's metadata column may name (Flink
    /// CDC's), what each holds.
    pub const POSTGRES_CDC_KEYS: [(&'static str, ChangeMetadata); 4] = [
        ("op_ts", ChangeMetadata::DatabaseTime),
        ("database_name", ChangeMetadata::DatabaseName),
        ("schema_name", ChangeMetadata::SchemaName),
        ("table_name", ChangeMetadata::TableName),
    ];

    /// The Debezium metadata `key` names (any case), if it is one.
    pub fn of_key(key: &str) -> Option<Self> {
        Self::in_keys(&Self::KEYS, key)
    }

    /// What `key` names among `keys` (any case), if it is one.
    pub fn in_keys(keys: &[(&'static str, ChangeMetadata)], key: &str) -> Option<Self> {
        keys.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|&(_, m)| m)
    }

    /// Whether it is a time (else a name).
    pub fn is_time(self) -> bool {
        matches!(self, Self::DatabaseTime | Self::IngestionTime)
    }

    /// What it holds, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            ChangeMetadata::DatabaseTime => "when the database made the change",
            ChangeMetadata::IngestionTime => "when the change was read",
            ChangeMetadata::DatabaseName => "the database's name",
            ChangeMetadata::SchemaName => "the schema's name",
            ChangeMetadata::TableName => "the table's name",
        }
    }
}

/// The metadata key `field` is read from, if it is a metadata column.
pub fn metadata_key(field: &datafusion::arrow::datatypes::Field) -> Option<&str> {
    field
        .metadata()
        .get(METADATA_COLUMN_KEY)
        .map(String::as_str)
}

/// Whether `field` was declared `JSON`.
pub fn is_json_column(field: &datafusion::arrow::datatypes::Field) -> bool {
    field.metadata().contains_key(JSON_COLUMN_KEY)
}
