//! The table a Debezium change feed describes, held by its source so that
//! every change is checked against it: the current row of each primary
//! key.
//!
//! In: changelog rows as the Debezium decoder makes them (`c`/`r` an
//! `+I`, `u` a `-U` of `before` directly followed by a `+U` of `after`,
//! `d` a `-D` of `before`). Out: the changelog the feed means, consistent
//! with what was passed on before it, and the rows that cannot be applied
//! (bad rows, with why):
//!
//! ```text
//!   +I  key not held        +I after                  (held: after)
//!   +I  key held            -U held, +U after          (a replayed create; nothing if equal)
//!   -U/+U  key held         -U held, +U after          (the held row, not `before`)
//!   -U/+U  key not held     bad row: an update of a key never created (or deleted)
//!   -D  key held            -D held                    (held: none)
//!   -D  key not held        bad row: a delete of a key never created (or deleted)
//! ```
//!
//! Retracting the held row rather than the envelope's `before` keeps the
//! changelog consistent whatever the database logged: a delete whose
//! `before` holds only the key (PostgreSQL's default replica identity),
//! or a `before` that lags a missed event, still takes out exactly the row
//! downstream operators hold. Metadata columns (`METADATA FROM
//! 'value.source.timestamp'`) are the exception: they hold the value of
//! the change that made each row, on `-U` and `-D` rows too (as in Flink),
//! so a delete carries when it happened.
//!
//! State: key and row, both Arrow row-encoded ([`KeyedRows`]);
//! checkpointed as one table with the source's position, so a resumed
//! source checks exactly as the uninterrupted one would. A checkpoint
//! hands over only the keys changed or deleted since the previous one
//! where it can ([`FeedTable::snapshot_incremental`]): a feed mirroring a
//! large table changes few of its keys per interval.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int8Array, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::interleave;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;

use crate::changelog::{self, RowKind};
use crate::error::{EngineError, Result};
use crate::state::keyed_rows::KeyedRows;
use crate::state::KeyedTable;

/// Bytes a held key costs besides its key and row bytes (two boxes and
/// the map's slot).
const ENTRY_COST: usize = 48;

/// What a batch of changes comes to: the rows to pass on and the rows
/// that could not be applied.
#[derive(Debug)]
pub struct Applied {
    /// The changelog to pass on (the source's output schema).
    pub rows: RecordBatch,
    /// Rows of the input batch that could not be applied, with why.
    pub bad: Vec<(usize, String)>,
}

/// The current row of every key of a change feed.
#[derive(Debug)]
pub struct FeedTable {
    schema: SchemaRef,
    key_columns: Vec<usize>,
    /// Columns read from the change's metadata: taken from the change on
    /// every row it makes.
    metadata_columns: Vec<bool>,
    keys: RowConverter,
    rows: RowConverter,
    held: KeyedRows,
    bytes: usize,
}

/// Where an output row's values come from.
#[derive(Clone, Copy)]
enum From {
    /// Row of the input batch.
    Batch(usize),
    /// Row of the held rows taken out by this batch.
    Held(usize),
}

impl FeedTable {
    /// The table of a feed whose rows are `schema` (its columns, then the
    /// row kind), keyed by `key_columns`.
    pub fn new(schema: SchemaRef, key_columns: Vec<usize>) -> Result<Self> {
        let width = schema.fields().len().saturating_sub(1);
        let sort = |i: usize| SortField::new(schema.field(i).data_type().clone());
        let keys = RowConverter::new(key_columns.iter().map(|&i| sort(i)).collect())?;
        let rows = RowConverter::new((0..width).map(sort).collect())?;
        let metadata_columns = (0..width)
            .map(|c| crate::source::metadata_key(schema.field(c)).is_some())
            .collect();
        Ok(Self {
            schema,
            key_columns,
            metadata_columns,
            keys,
            rows,
            held: KeyedRows::default(),
            bytes: 0,
        })
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Bytes held.
    pub fn size(&self) -> usize {
        self.bytes
    }

    /// `id=7, region='eu'`: the key of `row`, for messages.
    fn describe_key(&self, batch: &RecordBatch, row: usize) -> String {
        self.key_columns
            .iter()
            .map(|&c| {
                let value = ScalarValue::try_from_array(batch.column(c), row)
                    .map_or_else(|_| "?".to_string(), |v| v.to_string());
                format!("{}={value}", self.schema.field(c).name())
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Holds `row` for `key`; the row it replaces, if any.
    fn insert(&mut self, key: &[u8], row: &[u8]) -> Option<Box<[u8]>> {
        let old = self.held.upsert(key, row);
        match &old {
            Some(old) => self.bytes = self.bytes - old.len() + row.len(),
            None => self.bytes += key.len() + row.len() + ENTRY_COST,
        }
        old
    }

    fn remove(&mut self, key: &[u8]) -> Option<Box<[u8]>> {
        let row = self.held.remove(key)?;
        self.bytes -= key.len() + row.len() + ENTRY_COST;
        Some(row)
    }

    /// Applies a batch of changes (see the module docs).
    pub fn apply(&mut self, batch: &RecordBatch) -> Result<Applied> {
        let n = batch.num_rows();
        let kinds = changelog::row_kinds(batch)
            .cloned()
            .ok_or_else(|| EngineError::operator("change feed", "rows without a row kind"))?;
        let data = changelog::data_columns(batch)?;
        let key_columns: Vec<ArrayRef> = self
            .key_columns
            .iter()
            .map(|&c| Arc::clone(data.column(c)))
            .collect();
        let keys = self.keys.convert_columns(&key_columns)?;
        let rows = self.rows.convert_columns(data.columns())?;
        let mut out: Vec<(From, RowKind, usize)> = Vec::with_capacity(n);
        let mut taken: Vec<Box<[u8]>> = Vec::new();
        let mut bad = Vec::new();
        let mut r = 0;
        while r < n {
            let key = keys.row(r);
            let row = rows.row(r);
            match RowKind::of(kinds.value(r)) {
                Some(RowKind::Insert) | Some(RowKind::UpdateAfter) => {
                    match self.insert(key.data(), row.data()) {
                        None => out.push((From::Batch(r), RowKind::Insert, r)),
                        Some(held) if held.as_ref() == row.data() => {} // a replay
                        Some(held) => {
                            taken.push(held);
                            out.push((From::Held(taken.len() - 1), RowKind::UpdateBefore, r));
                            out.push((From::Batch(r), RowKind::UpdateAfter, r));
                        }
                    }
                    r += 1;
                }
                Some(RowKind::UpdateBefore) => {
                    // Its `+U` follows it (one `u` envelope).
                    let after = (r + 1 < n
                        && RowKind::of(kinds.value(r + 1)) == Some(RowKind::UpdateAfter))
                    .then_some(r + 1);
                    let Some(a) = after else {
                        bad.push((r, "an update's old row without its new one".to_string()));
                        r += 1;
                        continue;
                    };
                    let new_key = keys.row(a);
                    if !self.held.contains(key.data()) {
                        bad.push((
                            r,
                            format!(
                                "op \"u\" of key ({}), which the feed never created (or already deleted)",
                                self.describe_key(&data, r)
                            ),
                        ));
                    } else if new_key != key && self.held.contains(new_key.data()) {
                        bad.push((
                            r,
                            format!(
                                "op \"u\" moves key ({}) to ({}), which the feed already holds",
                                self.describe_key(&data, r),
                                self.describe_key(&data, a)
                            ),
                        ));
                    } else {
                        let after = rows.row(a);
                        let old = if new_key == key {
                            self.insert(key.data(), after.data())
                        } else {
                            let old = self.remove(key.data());
                            self.insert(new_key.data(), after.data());
                            old
                        };
                        if let Some(old) = old {
                            if old.as_ref() != after.data() || new_key != key {
                                taken.push(old);
                                out.push((From::Held(taken.len() - 1), RowKind::UpdateBefore, a));
                                out.push((From::Batch(a), RowKind::UpdateAfter, a));
                            }
                        }
                    }
                    r = a + 1;
                }
                Some(RowKind::Delete) => {
                    match self.remove(key.data()) {
                        Some(old) => {
                            taken.push(old);
                            out.push((From::Held(taken.len() - 1), RowKind::Delete, r));
                        }
                        None => bad.push((
                            r,
                            format!(
                                "op \"d\" of key ({}), which the feed never created (or already deleted)",
                                self.describe_key(&data, r)
                            ),
                        )),
                    }
                    r += 1;
                }
                None => {
                    bad.push((r, format!("unknown row kind {}", kinds.value(r))));
                    r += 1;
                }
            }
        }
        Ok(Applied {
            rows: self.output(&data, &taken, &out)?,
            bad,
        })
    }

    /// The output rows: values from the batch or the taken held rows.
    fn output(
        &self,
        data: &RecordBatch,
        taken: &[Box<[u8]>],
        out: &[(From, RowKind, usize)],
    ) -> Result<RecordBatch> {
        let parser = self.rows.parser();
        let held = self
            .rows
            .convert_rows(taken.iter().map(|row| parser.parse(row)))?;
        let picks: Vec<(usize, usize)> = out
            .iter()
            .map(|(from, _, _)| match *from {
                From::Batch(r) => (0, r),
                From::Held(i) => (1, i),
            })
            .collect();
        let changes: Vec<(usize, usize)> = out.iter().map(|&(_, _, r)| (0, r)).collect();
        let mut columns = Vec::with_capacity(self.schema.fields().len());
        for (c, own) in data.columns().iter().enumerate() {
            let sources: [&dyn Array; 2] = [own.as_ref(), held[c].as_ref()];
            let picks = if self.metadata_columns[c] {
                &changes
            } else {
                &picks
            };
            columns.push(interleave(&sources, picks)?);
        }
        columns.push(Arc::new(Int8Array::from_iter_values(
            out.iter().map(|(_, kind, _)| kind.byte()),
        )) as ArrayRef);
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(out.len())),
        )?)
    }

    /// The held rows as a checkpoint table: (key, row) bytes.
    pub fn snapshot(&self) -> Result<RecordBatch> {
        self.held.table()
    }

    /// The held rows as a checkpoint table named `name`, whole or only the
    /// keys changed since the previous call with the keys deleted, and its
    /// description.
    pub fn snapshot_incremental(&mut self, name: &str) -> Result<(RecordBatch, KeyedTable)> {
        self.held.snapshot_incremental(name)
    }

    /// Holds the rows of a checkpoint table.
    pub fn restore(&mut self, table: &RecordBatch) -> Result<()> {
        self.held.restore(table, "change feed")?;
        self.bytes = self
            .held
            .iter()
            .map(|(k, row)| k.len() + row.len() + ENTRY_COST)
            .sum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        changelog::updating_schema(
            &Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("name", DataType::Utf8, true),
            ]),
            &["id".to_string()],
        )
    }

    fn changes(rows: &[(i64, Option<&str>, RowKind)]) -> RecordBatch {
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1))),
                Arc::new(Int8Array::from_iter_values(rows.iter().map(|r| r.2.byte()))),
            ],
        )
        .unwrap()
    }

    fn lines(batch: &RecordBatch) -> Vec<String> {
        let kinds = changelog::row_kinds(batch).unwrap();
        (0..batch.num_rows())
            .map(|r| {
                format!(
                    "{} {} {}",
                    RowKind::of(kinds.value(r)).unwrap().short(),
                    ScalarValue::try_from_array(batch.column(0), r).unwrap(),
                    ScalarValue::try_from_array(batch.column(1), r).unwrap()
                )
            })
            .collect()
    }

    use RowKind::{Delete as D, Insert as I, UpdateAfter as UA, UpdateBefore as UB};

    #[test]
    fn changes_apply_to_the_held_rows_and_unknown_keys_are_bad() {
        let mut table = FeedTable::new(schema(), vec![0]).unwrap();
        let applied = table
            .apply(&changes(&[
                (1, Some("a"), I),
                // The database's old row lags: the held one is taken out.
                (1, Some("stale"), UB),
                (1, Some("b"), UA),
                // An update and a delete of keys never created.
                (2, Some("x"), UB),
                (2, Some("y"), UA),
                (3, None, D),
                // A delete whose old row holds only the key.
                (1, None, D),
                (4, Some("d"), I),
                // A create replayed: nothing changes.
                (4, Some("d"), I),
            ]))
            .unwrap();
        assert_eq!(
            lines(&applied.rows),
            ["+I 1 a", "-U 1 a", "+U 1 b", "-D 1 b", "+I 4 d"]
        );
        let bad: Vec<usize> = applied.bad.iter().map(|(r, _)| *r).collect();
        assert_eq!(bad, [3, 5]);
        assert!(
            applied.bad[0].1.contains("op \"u\" of key (id=2)"),
            "{:?}",
            applied.bad
        );
        assert!(
            applied.bad[1].1.contains("op \"d\" of key (id=3)"),
            "{:?}",
            applied.bad
        );
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn a_restored_table_checks_as_the_first_would() {
        let mut table = FeedTable::new(schema(), vec![0]).unwrap();
        table
            .apply(&changes(&[(1, Some("a"), I), (2, Some("b"), I)]))
            .unwrap();
        let mut restored = FeedTable::new(schema(), vec![0]).unwrap();
        restored.restore(&table.snapshot().unwrap()).unwrap();
        assert_eq!(restored.size(), table.size());
        for table in [&mut table, &mut restored] {
            let applied = table
                .apply(&changes(&[(2, None, D), (2, None, D)]))
                .unwrap();
            assert_eq!(lines(&applied.rows), ["-D 2 b"]);
            assert_eq!(applied.bad.len(), 1);
        }
    }

    #[test]
    fn a_checkpoint_hands_over_the_keys_changed_and_deleted_since_the_last() {
        use crate::operators::testing::{binary_pairs, with_change};
        let mut table = FeedTable::new(schema(), vec![0]).unwrap();
        let creates: Vec<(i64, Option<&str>, RowKind)> =
            (0..10).map(|id| (id, Some("a"), I)).collect();
        table.apply(&changes(&creates)).unwrap();
        let (whole, first) = table.snapshot_incremental("feed").unwrap();
        assert!(first.change.is_none(), "the first is whole");
        assert_eq!(whole.num_rows(), 10);
        table
            .apply(&changes(&[
                // 1 updated in place, 2 moved to 12, 3 deleted, 4 a replay.
                (1, Some("a"), UB),
                (1, Some("b"), UA),
                (2, Some("a"), UB),
                (12, Some("a"), UA),
                (3, None, D),
                (4, Some("a"), I),
            ]))
            .unwrap();
        let (changed, second) = table.snapshot_incremental("feed").unwrap();
        let change = second.change.clone().expect("a change");
        assert_eq!(change.base, first.serial);
        assert_eq!(changed.num_rows(), 2, "1 and 12");
        assert_eq!(change.removed.num_rows(), 2, "2 and 3");
        let read_back = with_change(whole, changed, &second);
        assert_eq!(
            binary_pairs(&read_back),
            binary_pairs(&table.snapshot().unwrap())
        );
        let mut restored = FeedTable::new(schema(), vec![0]).unwrap();
        restored.restore(&read_back).unwrap();
        assert_eq!(restored.size(), table.size());
        assert!(restored
            .snapshot_incremental("feed")
            .unwrap()
            .1
            .change
            .is_none());
    }
}
