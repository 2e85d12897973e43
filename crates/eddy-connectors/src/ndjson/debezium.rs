//! Debezium change events read from NDJSON (`format = 'debezium-json'`):
//! a change feed of a database table.
//!
//! In: lines `{"before": {...} | null, "after": {...} | null, "op": "c" |
//! "r" | "u" | "d", ...}` (the envelope's other fields, `ts_ms`, `source`,
//! `transaction`, are ignored), decoded by the NDJSON decoder into the
//! envelope's schema. Out: changelog rows (see `eddy_engine::changelog`):
//! the table's columns and the row kind. `c` (create) and `r` (a snapshot
//! read) are `+I` of `after`; `u` is `-U` of `before` then `+U` of
//! `after`; `d` is `-D` of `before`.
//!
//! A bad envelope is a bad row naming its line: no `op` or an unknown one,
//! an update or delete without `before`, a create or update without
//! `after`, a NULL in a NOT NULL column of the image used.

use std::sync::Arc;

use datafusion::arrow::array::new_null_array;
use datafusion::arrow::array::{Array, ArrayRef, Int8Array, StringArray, StructArray};
use datafusion::arrow::compute::{cast, interleave, take};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::changelog::RowKind;
use eddy_engine::source::{BadRow, ChangeMetadata, RowOrigins};

use super::decode::NdjsonOrigins;
use crate::error::Result;

/// The `format` option value of a Debezium change feed.
pub const FORMAT: &str = "debezium-json";

/// Where an output column comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// Column `i` of the before/after images.
    Image(usize),
    /// The envelope's `ts_ms` (when Debezium read the change).
    IngestionTime,
    /// The envelope's `source.ts_ms` (when the database made it).
    DatabaseTime,
}

/// Turns decoded Debezium envelopes into changelog rows.
#[derive(Debug, Clone)]
pub struct DebeziumEnvelope {
    /// The table's columns and the row kind (what the source yields).
    output: SchemaRef,
    /// What lines are decoded into.
    envelope: SchemaRef,
    /// Per output column (the row kind aside), where it comes from.
    sources: Vec<Source>,
}

impl DebeziumEnvelope {
    /// Envelopes of rows of `output` (the table's columns, then the
    /// row-kind field). A column marked as a metadata column
    /// (`eddy_engine::source::METADATA_COLUMN_KEY`) is read from the
    /// envelope: `value.ingestion-timestamp` its `ts_ms`,
    /// `value.source.timestamp` its `source.ts_ms`.
    pub fn new(output: SchemaRef) -> Self {
        let width = output.fields().len().saturating_sub(1);
        let mut image = Vec::new();
        let mut sources = Vec::with_capacity(width);
        for field in &output.fields()[..width] {
            let metadata =
                eddy_engine::source::metadata_key(field).and_then(ChangeMetadata::of_key);
            sources.push(match metadata {
                Some(ChangeMetadata::IngestionTime) => Source::IngestionTime,
                Some(ChangeMetadata::DatabaseTime) => Source::DatabaseTime,
                // Not a Debezium key: the planner lets none through.
                Some(_) | None => {
                    image.push(field.as_ref().clone().with_nullable(true));
                    Source::Image(image.len() - 1)
                }
            });
        }
        let image = Fields::from(image);
        let mut fields = vec![
            Field::new("before", DataType::Struct(image.clone()), true),
            Field::new("after", DataType::Struct(image), true),
            Field::new("op", DataType::Utf8, true),
        ];
        if sources.iter().any(|s| matches!(s, Source::IngestionTime)) {
            fields.push(Field::new("ts_ms", DataType::Int64, true));
        }
        if sources.iter().any(|s| matches!(s, Source::DatabaseTime)) {
            fields.push(Field::new(
                "source",
                DataType::Struct(Fields::from(vec![Field::new(
                    "ts_ms",
                    DataType::Int64,
                    true,
                )])),
                true,
            ));
        }
        let envelope = Arc::new(Schema::new(fields));
        Self {
            output,
            envelope,
            sources,
        }
    }

    /// The schema lines are decoded into.
    pub fn envelope_schema(&self) -> SchemaRef {
        self.envelope.clone()
    }

    /// The changelog rows of decoded envelopes, with where each came from;
    /// bad envelopes go to `bad`.
    pub fn unwrap(
        &self,
        envelopes: &RecordBatch,
        origins: NdjsonOrigins,
        bad: &mut Vec<BadRow>,
    ) -> Result<(Option<RecordBatch>, NdjsonOrigins)> {
        let column = |i: usize| envelopes.column(i);
        let (Some(before), Some(after), Some(op)) = (
            column(0).as_any().downcast_ref::<StructArray>(),
            column(1).as_any().downcast_ref::<StructArray>(),
            column(2).as_any().downcast_ref::<StringArray>(),
        ) else {
            return Ok((None, origins.select(&[])));
        };
        let width = self.output.fields().len() - 1;
        // (image: 0 before, 1 after; row), the kind, and the envelope row.
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(envelopes.num_rows());
        let mut kinds: Vec<i8> = Vec::with_capacity(envelopes.num_rows());
        let mut rows: Vec<usize> = Vec::with_capacity(envelopes.num_rows());
        // (image column, output column) of the NOT NULL columns.
        let not_null: Vec<(usize, usize)> = (0..width)
            .filter(|&c| !self.output.field(c).is_nullable())
            .filter_map(|c| match self.sources[c] {
                Source::Image(i) => Some((i, c)),
                _ => None,
            })
            .collect();
        let null_column = |image: &StructArray, r: usize| {
            not_null
                .iter()
                .find(|&&(i, _)| image.column(i).is_null(r))
                .map(|&(_, c)| self.output.field(c).name().clone())
        };
        for r in 0..envelopes.num_rows() {
            let op_value = (!op.is_null(r)).then(|| op.value(r));
            let has_before = before.is_valid(r);
            let has_after = after.is_valid(r);
            let wanted: &[(usize, RowKind)] = match op_value {
                Some("c" | "r") if has_after => &[(1, RowKind::Insert)],
                // An upsert topic's records (made by the Kafka source): a
                // key's new value, and a tombstone, whose image holds only
                // the key (the changelog's upsert step adds the old rows).
                Some("upsert") if has_after => &[(1, RowKind::UpdateAfter)],
                Some("tombstone") if has_before => &[(0, RowKind::Delete)],
                Some("u") if has_before && has_after => {
                    &[(0, RowKind::UpdateBefore), (1, RowKind::UpdateAfter)]
                }
                Some("d") if has_before => &[(0, RowKind::Delete)],
                other => {
                    let reason = match other {
                        None => "a Debezium event without \"op\"".to_string(),
                        Some("c" | "r") => format!("op \"{}\" without \"after\"", other.unwrap_or_default()),
                        Some("u") if !has_before => "op \"u\" without \"before\" (the old row; the source database must log full rows)".to_string(),
                        Some("u") => "op \"u\" without \"after\"".to_string(),
                        Some("d") => "op \"d\" without \"before\" (the deleted row)".to_string(),
                        Some(o) => format!("unknown op \"{o}\" (Debezium's are c, r, u and d)"),
                    };
                    let mut row = origins.origin(r);
                    row.reason = reason;
                    row.column = Some("op".into());
                    bad.push(row);
                    continue;
                }
            };
            let tombstone = op_value == Some("tombstone");
            let missing = wanted
                .iter()
                .filter(|_| !tombstone)
                .find_map(|&(image, _)| {
                    null_column(if image == 0 { before } else { after }, r)
                        .map(|c| (c, if image == 0 { "before" } else { "after" }))
                });
            if let Some((column, image)) = missing {
                let mut row = origins.origin(r);
                row.reason =
                    format!("column '{column}' of \"{image}\" is NULL but declared NOT NULL");
                row.column = Some(column);
                bad.push(row);
                continue;
            }
            for &(image, kind) in wanted {
                picks.push((image, r));
                kinds.push(kind.byte());
                rows.push(r);
            }
        }
        if picks.is_empty() {
            return Ok((None, origins.select(&[])));
        }
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(width + 1);
        let envelope_rows =
            datafusion::arrow::array::UInt32Array::from_iter_values(rows.iter().map(|&r| r as u32));
        for c in 0..width {
            let values = match self.sources[c] {
                Source::Image(i) => {
                    let sources: [&dyn Array; 2] =
                        [before.column(i).as_ref(), after.column(i).as_ref()];
                    interleave(&sources, &picks)?
                }
                Source::IngestionTime => {
                    let ts = envelopes
                        .column_by_name("ts_ms")
                        .cloned()
                        .unwrap_or_else(|| new_null_array(&DataType::Int64, envelopes.num_rows()));
                    take(ts.as_ref(), &envelope_rows, None)?
                }
                Source::DatabaseTime => {
                    // `source.ts_ms`, NULL where `source` is.
                    let source = envelopes
                        .column_by_name("source")
                        .and_then(|s| s.as_any().downcast_ref::<StructArray>());
                    let ts = source.and_then(|s| {
                        s.column_by_name("ts_ms")?
                            .as_any()
                            .downcast_ref::<datafusion::arrow::array::Int64Array>()
                            .map(|ts| (s, ts))
                    });
                    let values: datafusion::arrow::array::Int64Array = rows
                        .iter()
                        .map(|&r| {
                            ts.and_then(|(s, ts)| {
                                (s.is_valid(r) && ts.is_valid(r)).then(|| ts.value(r))
                            })
                        })
                        .collect();
                    Arc::new(values) as ArrayRef
                }
            };
            let field = self.output.field(c);
            columns.push(if values.data_type() == field.data_type() {
                values
            } else {
                cast(&values, field.data_type())?
            });
        }
        columns.push(Arc::new(Int8Array::from(kinds)));
        let batch = RecordBatch::try_new(self.output.clone(), columns)?;
        Ok((Some(batch), origins.select(&rows)))
    }
}

#[cfg(test)]
mod tests {
    use eddy_engine::changelog;

    use super::*;
    use crate::ndjson::decode::{decode, Chunk, LinePosition, LineSpan};

    fn envelope() -> DebeziumEnvelope {
        DebeziumEnvelope::new(changelog::updating_schema(
            &Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("name", DataType::Utf8, true),
            ]),
            &[],
        ))
    }

    fn chunk(text: &str) -> Chunk {
        let bytes = text.as_bytes().to_vec();
        let mut lines = Vec::new();
        let mut start = 0;
        for (i, line) in text.split_inclusive('\n').enumerate() {
            lines.push(LineSpan {
                number: i as u64 + 1,
                offset: start as u64,
                start,
                end: start + line.len(),
            });
            start += line.len();
        }
        Chunk {
            bytes,
            lines,
            blocks: Vec::new(),
            line_ends: Vec::new(),
            max_line_bytes: 1 << 20,
            bad: Vec::new(),
            end: LinePosition::default(),
        }
    }

    #[test]
    fn operations_become_row_kinds_and_bad_envelopes_bad_rows() {
        let text = concat!(
            "{\"before\":null,\"after\":{\"id\":1,\"name\":\"a\"},\"op\":\"c\",\"ts_ms\":1,\"source\":{\"db\":\"x\"}}\n",
            "{\"before\":{\"id\":1,\"name\":\"a\"},\"after\":{\"id\":1,\"name\":\"b\"},\"op\":\"u\"}\n",
            "{\"before\":null,\"after\":{\"id\":1,\"name\":\"b\"},\"op\":\"u\"}\n",
            "{\"before\":{\"id\":1,\"name\":\"b\"},\"after\":null,\"op\":\"d\"}\n",
            "{\"before\":null,\"after\":{\"id\":2},\"op\":\"r\"}\n",
            "{\"after\":{\"id\":3},\"op\":\"x\"}\n",
            "{\"after\":{\"name\":\"no id\"},\"op\":\"c\"}\n",
        );
        let envelope = envelope();
        let decoded = decode(&envelope.envelope_schema(), "feed.ndjson", chunk(text));
        let batch = decoded.batch.unwrap().unwrap();
        let mut bad = Vec::new();
        let (rows, origins) = envelope.unwrap(&batch, decoded.origins, &mut bad).unwrap();
        let rows = rows.unwrap();
        let kinds = changelog::row_kinds(&rows).unwrap().values().to_vec();
        assert_eq!(kinds, vec![0, 1, 2, 3, 0]);
        let lines: Vec<u64> = origins.spans().iter().map(|s| s.number).collect();
        assert_eq!(lines, vec![1, 2, 2, 4, 5], "each row knows its line");
        let reasons: Vec<(Option<u64>, String)> =
            bad.into_iter().map(|b| (b.line, b.reason)).collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert_eq!(reasons[0].0, Some(3));
        assert!(reasons[0].1.contains("without \"before\""), "{reasons:?}");
        assert!(reasons[1].1.contains("unknown op \"x\""), "{reasons:?}");
        assert!(
            reasons[2].1.contains("column 'id' of \"after\" is NULL"),
            "{reasons:?}"
        );
    }
}
