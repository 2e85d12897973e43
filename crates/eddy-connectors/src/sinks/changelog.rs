//! Text forms of a changelog (an updating stream's rows, see
//! `eddy_engine::changelog`) for the text sinks.
//!
//! In: batches, append-only or updating (row kind in the last column).
//! Out: JSON lines, in one of two envelopes:
//!
//! - [`JsonLines`] with [`Envelope::Plain`]: one object per row, as
//!   append-only sinks have always written;
//! - [`Envelope::Debezium`] (`format = 'debezium-json'`): Debezium's change
//!   event, `{"before": {...} | null, "after": {...} | null, "op": ...}`.
//!   `+I` is `c`; a `-U` directly followed by its `+U` is one `u` with both
//!   images (Flink writes two events there, a `d` and a `c`); a lone `-U` or
//!   a `-D` is `d`, a lone `+U` (its `-U` filtered out, by a HAVING say) is
//!   `c`. Rows of an append-only stream are all `c`.
//!
//! [`kind_prefixes`] gives the stdout sink Flink's print-connector kinds
//! (`+I`, `-U`, `+U`, `-D`), one per row, for lines of updating results.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, Int8Array};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_connectors::sinks::changelog::{Envelope, JsonLines};
//! use eddy_engine::changelog::updating_schema;
//!
//! let schema = updating_schema(&Schema::new(vec![Field::new("n", DataType::Int64, false)]), &[]);
//! let batch = RecordBatch::try_new(
//!     schema,
//!     vec![Arc::new(Int64Array::from(vec![1, 1, 2])), Arc::new(Int8Array::from(vec![0, 1, 2]))],
//! )
//! .unwrap();
//! let mut out = Vec::new();
//! JsonLines { explicit_nulls: true, envelope: Envelope::Debezium }.encode(&batch, &mut out).unwrap();
//! assert_eq!(
//!     String::from_utf8(out).unwrap(),
//!     "{\"before\":null,\"after\":{\"n\":1},\"op\":\"c\"}\n\
//!      {\"before\":{\"n\":1},\"after\":{\"n\":2},\"op\":\"u\"}\n"
//! );
//! ```

use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::changelog::{self, RowKind};

use crate::error::{ConnectorError, Result};
use crate::json_lines::encode_json_lines_with;

/// The envelope of each JSON line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    /// The row itself.
    Plain,
    /// A Debezium change event.
    Debezium,
}

/// The `format` option value of Debezium change events.
pub const DEBEZIUM_JSON: &str = "debezium-json";

impl Envelope {
    /// The envelope a text sink's `format` option names (none: plain).
    pub fn from_format(format: Option<&str>) -> Result<Envelope> {
        match format.map(|f| f.trim().to_ascii_lowercase()).as_deref() {
            None | Some("json" | "ndjson") => Ok(Envelope::Plain),
            Some(DEBEZIUM_JSON) => Ok(Envelope::Debezium),
            Some(other) => Err(ConnectorError::bad_option(
                "format",
                format!(
                    "'{other}' is not supported (use 'json', or '{DEBEZIUM_JSON}' for a changelog)"
                ),
            )),
        }
    }
}

/// How a text sink writes rows as JSON lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonLines {
    /// Write NULL fields as `null` (false: leave them out).
    pub explicit_nulls: bool,
    /// The envelope of each line.
    pub envelope: Envelope,
}

impl JsonLines {
    /// Plain rows.
    pub fn plain(explicit_nulls: bool) -> Self {
        Self {
            explicit_nulls,
            envelope: Envelope::Plain,
        }
    }

    /// Appends `batch`'s lines to `out`, each ending in `\n`. An updating
    /// batch reaching a plain sink (one whose output was overridden, say
    /// `--output`) is written as Debezium events: plain rows would lose
    /// the retractions.
    pub fn encode(&self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        self.encode_lines(batch, out).map(|_| ())
    }

    /// [`JsonLines::encode`], returning for each line written the batch
    /// row it stands for (a `u` event: its `-U` row).
    pub fn encode_lines(&self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<Vec<usize>> {
        let kinds = changelog::row_kinds(batch);
        if self.envelope == Envelope::Plain && kinds.is_none() {
            encode_json_lines_with(batch, out, self.explicit_nulls)?;
            return Ok((0..batch.num_rows()).collect());
        }
        let data = changelog::data_columns(batch)?;
        let mut lines = Vec::with_capacity(batch.num_rows() * 64);
        encode_json_lines_with(&data, &mut lines, self.explicit_nulls)?;
        let rows: Vec<&[u8]> = lines
            .split(|&b| b == b'\n')
            .take(batch.num_rows())
            .collect();
        let kind = |r: usize| {
            kinds
                .and_then(|k| RowKind::of(k.value(r)))
                .unwrap_or(RowKind::Insert)
        };
        let mut r = 0;
        let mut line_rows = Vec::with_capacity(rows.len());
        while r < rows.len() {
            line_rows.push(r);
            let (before, after, op, used) = match kind(r) {
                RowKind::UpdateBefore
                    if r + 1 < rows.len() && kind(r + 1) == RowKind::UpdateAfter =>
                {
                    (Some(rows[r]), Some(rows[r + 1]), "u", 2)
                }
                RowKind::Insert | RowKind::UpdateAfter => (None, Some(rows[r]), "c", 1),
                RowKind::UpdateBefore | RowKind::Delete => (Some(rows[r]), None, "d", 1),
            };
            out.extend_from_slice(b"{\"before\":");
            out.extend_from_slice(before.unwrap_or(b"null"));
            out.extend_from_slice(b",\"after\":");
            out.extend_from_slice(after.unwrap_or(b"null"));
            out.extend_from_slice(b",\"op\":\"");
            out.extend_from_slice(op.as_bytes());
            out.extend_from_slice(b"\"}\n");
            r += used;
        }
        Ok(line_rows)
    }
}

/// The row kinds of an updating batch as Flink's print connector shows
/// them (`+I`, `-U`, `+U`, `-D`), one per row; `None` for an append-only
/// batch.
pub fn kind_prefixes(batch: &RecordBatch) -> Option<Vec<&'static str>> {
    let kinds = changelog::row_kinds(batch)?;
    Some(
        kinds
            .values()
            .iter()
            .map(|&k| RowKind::of(k).map_or("?", RowKind::short))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Int8Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn batch(keys: &[&str], kinds: &[i8]) -> RecordBatch {
        let schema = changelog::updating_schema(
            &Schema::new(vec![Field::new("k", DataType::Utf8, true)]),
            &[],
        );
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(keys.to_vec())),
                Arc::new(Int8Array::from(kinds.to_vec())),
            ],
        )
        .unwrap()
    }

    fn debezium(batch: &RecordBatch) -> Vec<String> {
        let mut out = Vec::new();
        JsonLines {
            explicit_nulls: true,
            envelope: Envelope::Debezium,
        }
        .encode(batch, &mut out)
        .unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn lone_halves_of_an_update_are_deletes_and_creates() {
        let lines = debezium(&batch(&["a", "b", "c", "d"], &[1, 3, 2, 0]));
        assert_eq!(
            lines,
            [
                r#"{"before":{"k":"a"},"after":null,"op":"d"}"#,
                r#"{"before":{"k":"b"},"after":null,"op":"d"}"#,
                r#"{"before":null,"after":{"k":"c"},"op":"c"}"#,
                r#"{"before":null,"after":{"k":"d"},"op":"c"}"#,
            ]
        );
    }

    #[test]
    fn append_only_rows_are_creates_and_plain_stays_plain() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)]));
        let rows =
            RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(vec!["x"]))]).unwrap();
        assert_eq!(
            debezium(&rows),
            [r#"{"before":null,"after":{"k":"x"},"op":"c"}"#]
        );
        let mut out = Vec::new();
        JsonLines::plain(true).encode(&rows, &mut out).unwrap();
        assert_eq!(out, b"{\"k\":\"x\"}\n");
        assert_eq!(
            kind_prefixes(&batch(&["a", "a"], &[1, 2])),
            Some(vec!["-U", "+U"])
        );
        assert_eq!(kind_prefixes(&rows), None);
    }

    #[test]
    fn formats_are_checked() {
        assert_eq!(
            Envelope::from_format(Some("Debezium-JSON")).unwrap(),
            Envelope::Debezium
        );
        assert_eq!(Envelope::from_format(None).unwrap(), Envelope::Plain);
        let err = Envelope::from_format(Some("avro-confluent"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("'avro-confluent' is not supported"), "{err}");
    }
}
