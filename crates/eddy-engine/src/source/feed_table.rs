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
//! State: key and row, both Arrow row-encoded, and the checkpoint epoch
//! that last changed the key; checkpointed as one table with the source's
//! position, so a resumed source checks exactly as the uninterrupted one
//! would. A checkpoint hands over only the keys changed or deleted since
//! the previous one where it can ([`FeedTable::snapshot_incremental`]): a
//! feed mirroring a large table changes few of its keys per interval.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryArray, Int8Array, RecordBatch, RecordBatchOptions,
};
use datafusion::arrow::compute::interleave;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::common::ScalarValue;
use hashbrown::HashMap;

use crate::changelog::{self, RowKind};
use crate::error::{EngineError, Result};
use crate::operators::changed_keys::SnapshotChain;
use crate::state::{KeyedChange, KeyedTable};

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
    held: HashMap<Box<[u8]>, Held>,
    bytes: usize,
    /// Checkpoints taken since the start: rows changed since the last one
    /// carry this epoch.
    epoch: u64,
    /// Keys held whose row changed in this epoch.
    changed: usize,
    /// Keys deleted in this epoch, kept once a checkpoint was taken.
    deleted: Vec<Box<[u8]>>,
    chain: SnapshotChain,
}

/// A key's current row.
#[derive(Debug)]
struct Held {
    row: Box<[u8]>,
    /// The epoch that last changed it.
    epoch: u64,
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
            held: HashMap::new(),
            bytes: 0,
            epoch: 0,
            changed: 0,
            deleted: Vec::new(),
            chain: SnapshotChain::default(),
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

    fn insert(&mut self, key: &[u8], row: &[u8]) {
        if self.replace(key, row).is_none() {
            self.bytes += key.len() + row.len() + ENTRY_COST;
            self.changed += 1;
            let held = Held {
                row: row.into(),
                epoch: self.epoch,
            };
            self.held.insert(key.into(), held);
        }
    }

    /// Replaces the row of a held key; its old row, `None` if not held.
    fn replace(&mut self, key: &[u8], row: &[u8]) -> Option<Box<[u8]>> {
        let held = self.held.get_mut(key)?;
        if held.epoch != self.epoch && held.row.as_ref() != row {
            held.epoch = self.epoch;
            self.changed += 1;
        }
        self.bytes = self.bytes - held.row.len() + row.len();
        Some(std::mem::replace(&mut held.row, row.into()))
    }

    fn remove(&mut self, key: &[u8]) -> Option<Box<[u8]>> {
        let (key, held) = self.held.remove_entry(key)?;
        self.bytes -= key.len() + held.row.len() + ENTRY_COST;
        if held.epoch == self.epoch {
            self.changed -= 1;
        }
        if self.chain.tracking() {
            self.deleted.push(key);
        }
        Some(held.row)
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
                    match self.held.get(key.data()) {
                        None => out.push((From::Batch(r), RowKind::Insert, r)),
                        Some(held) if held.row.as_ref() == row.data() => {} // a replay
                        Some(held) => {
                            taken.push(held.row.clone());
                            out.push((From::Held(taken.len() - 1), RowKind::UpdateBefore, r));
                            out.push((From::Batch(r), RowKind::UpdateAfter, r));
                        }
                    }
                    self.insert(key.data(), row.data());
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
                    if !self.held.contains_key(key.data()) {
                        bad.push((
                            r,
                            format!(
                                "op \"u\" of key ({}), which the feed never created (or already deleted)",
                                self.describe_key(&data, r)
                            ),
                        ));
                    } else if new_key != key && self.held.contains_key(new_key.data()) {
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
                            self.replace(key.data(), after.data())
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
        self.table(|_| true)
    }

    /// The held rows as a checkpoint table named `name`, whole or only the
    /// keys changed since the previous call with the keys deleted, and its
    /// description.
    pub fn snapshot_incremental(&mut self, name: &str) -> Result<(RecordBatch, KeyedTable)> {
        let (serial, base) = self
            .chain
            .next(self.changed + self.deleted.len(), self.held.len());
        let epoch = self.epoch;
        let (table, change) = match base {
            None => (self.table(|_| true)?, None),
            Some(base) => {
                let keys: Vec<&[u8]> = self.deleted.iter().map(|k| k.as_ref()).collect();
                let removed = RecordBatch::try_new(
                    Arc::new(state_schema().project(&[0])?),
                    vec![Arc::new(BinaryArray::from(keys))],
                )?;
                let changed = self.table(|held| held.epoch == epoch)?;
                (changed, Some(KeyedChange { base, removed }))
            }
        };
        self.epoch += 1;
        self.changed = 0;
        self.deleted.clear();
        let keyed = KeyedTable {
            table: name.to_string(),
            key_columns: 1,
            serial,
            change,
        };
        Ok((table, keyed))
    }

    /// The (key, row) table of the keys `keep` picks.
    fn table(&self, keep: impl Fn(&Held) -> bool) -> Result<RecordBatch> {
        let (keys, rows): (Vec<&[u8]>, Vec<&[u8]>) = self
            .held
            .iter()
            .filter(|(_, held)| keep(held))
            .map(|(k, held)| (k.as_ref(), held.row.as_ref()))
            .unzip();
        Ok(RecordBatch::try_new(
            state_schema(),
            vec![
                Arc::new(BinaryArray::from(keys)),
                Arc::new(BinaryArray::from(rows)),
            ],
        )?)
    }

    /// Holds the rows of a checkpoint table.
    pub fn restore(&mut self, table: &RecordBatch) -> Result<()> {
        let binary = |i: usize| {
            table
                .columns()
                .get(i)
                .and_then(|c| c.as_any().downcast_ref::<BinaryArray>())
                .ok_or_else(|| EngineError::State("change feed: bad table of held rows".into()))
        };
        let (keys, rows) = (binary(0)?, binary(1)?);
        self.held.clear();
        self.bytes = 0;
        self.chain.restart();
        self.deleted.clear();
        for r in 0..table.num_rows() {
            self.insert(keys.value(r), rows.value(r));
        }
        // What was restored is what the next (whole) checkpoint starts from.
        self.epoch += 1;
        self.changed = 0;
        Ok(())
    }
}

/// The schema of a feed table's checkpoint table.
fn state_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Binary, false),
        Field::new("row", DataType::Binary, false),
    ]))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int64Array, StringArray};

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
        use crate::checkpoint::changes::{apply, Change};
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
        let change = second.change.expect("a change");
        assert_eq!(change.base, first.serial);
        assert_eq!(changed.num_rows(), 2, "1 and 12");
        assert_eq!(change.removed.num_rows(), 2, "2 and 3");
        let read_back = apply(
            whole,
            vec![Change {
                changed,
                removed: Some(change.removed),
            }],
            1,
        )
        .unwrap();
        let sorted = |batch: &RecordBatch| {
            let column = |i: usize| {
                let values = batch
                    .column(i)
                    .as_any()
                    .downcast_ref::<BinaryArray>()
                    .unwrap();
                values
                    .iter()
                    .map(|v| v.unwrap().to_vec())
                    .collect::<Vec<_>>()
            };
            let mut pairs: Vec<_> = column(0).into_iter().zip(column(1)).collect();
            pairs.sort();
            pairs
        };
        assert_eq!(sorted(&read_back), sorted(&table.snapshot().unwrap()));
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
