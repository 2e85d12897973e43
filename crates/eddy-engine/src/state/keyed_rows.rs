//! The current row of each key, both as Arrow row-format bytes, kept so
//! that a checkpoint can hand over the keys that changed since the last.
//!
//! In: upserts and removals by key, as an operator or source applies its
//! input (an upsert source's `changelog_normalize`, a Debezium feed's
//! table). Out: the rows held, and at a checkpoint a (key, row) bytes
//! table, whole or only the keys changed since the previous checkpoint
//! with the keys removed ([`KeyedRows::snapshot_incremental`]).
//!
//! Each row carries the checkpoint epoch that last changed it (rewriting
//! a row with the same bytes is no change); removed keys are kept, by
//! moving the owned key, only once a checkpoint was taken, so a job
//! without checkpoints keeps nothing extra. Nothing here allocates but
//! the boxes of a new key and a new row.
//!
//! ```
//! use eddy_engine::state::keyed_rows::KeyedRows;
//!
//! let mut rows = KeyedRows::default();
//! for key in b"abcdefgh" {
//!     assert!(rows.upsert(&[*key], b"1").is_none());
//! }
//! let (whole, first) = rows.snapshot_incremental("current").unwrap();
//! assert!(first.change.is_none() && whole.num_rows() == 8);
//! assert_eq!(rows.upsert(b"a", b"2").as_deref(), Some(&b"1"[..]));
//! rows.remove(b"b");
//! let (changed, second) = rows.snapshot_incremental("current").unwrap();
//! let change = second.change.unwrap();
//! assert_eq!(change.base, first.serial);
//! assert_eq!((changed.num_rows(), change.removed.num_rows()), (1, 1)); // a; b
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{Array, BinaryArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use hashbrown::HashMap;

use super::changed_keys::SnapshotChain;
use super::{KeyedChange, KeyedTable};
use crate::error::{EngineError, Result};

/// Each key's current row, with what changed since the last checkpoint.
#[derive(Debug, Default)]
pub struct KeyedRows {
    held: HashMap<Box<[u8]>, Held>,
    /// Checkpoints taken since the start: rows changed since the last one
    /// carry this epoch.
    epoch: u64,
    /// Keys held whose row changed in this epoch.
    changed: usize,
    /// Keys removed in this epoch (one may be held again since); kept
    /// only once a checkpoint was taken ([`SnapshotChain::tracking`]).
    removed: Vec<Box<[u8]>>,
    chain: SnapshotChain,
}

/// A key's current row.
#[derive(Debug)]
struct Held {
    row: Box<[u8]>,
    /// The epoch that last changed it.
    epoch: u64,
}

impl KeyedRows {
    /// Keys held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The row of `key`, if held.
    pub fn get(&self, key: &[u8]) -> Option<&[u8]> {
        self.held.get(key).map(|held| held.row.as_ref())
    }

    /// Whether `key` is held.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.held.contains_key(key)
    }

    /// Every key and row held.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.held.iter().map(|(k, h)| (k.as_ref(), h.row.as_ref()))
    }

    /// Holds `row` for `key`; the row it replaces, if any.
    pub fn upsert(&mut self, key: &[u8], row: &[u8]) -> Option<Box<[u8]>> {
        if let Some(held) = self.held.get_mut(key) {
            if held.row.as_ref() != row && held.epoch != self.epoch {
                held.epoch = self.epoch;
                self.changed += 1;
            }
            return Some(std::mem::replace(&mut held.row, row.into()));
        }
        self.changed += 1;
        let held = Held {
            row: row.into(),
            epoch: self.epoch,
        };
        self.held.insert(key.into(), held);
        None
    }

    /// Removes `key`; its row, if it was held.
    pub fn remove(&mut self, key: &[u8]) -> Option<Box<[u8]>> {
        let (key, held) = self.held.remove_entry(key)?;
        if held.epoch == self.epoch {
            self.changed -= 1;
        }
        if self.chain.tracking() {
            self.removed.push(key);
        }
        Some(held.row)
    }

    /// The rows as a checkpoint table: (key, row) bytes.
    pub fn table(&self) -> Result<RecordBatch> {
        self.table_of(|_| true)
    }

    /// The rows as a checkpoint table named `name`: whole, or only the
    /// keys changed since the previous call with the keys removed; and
    /// its description.
    pub fn snapshot_incremental(&mut self, name: &str) -> Result<(RecordBatch, KeyedTable)> {
        let (serial, base) = self
            .chain
            .next(self.changed + self.removed.len(), self.held.len());
        let epoch = self.epoch;
        let (table, change) = match base {
            None => (self.table()?, None),
            Some(base) => {
                let keys: Vec<&[u8]> = self.removed.iter().map(|k| k.as_ref()).collect();
                let removed = RecordBatch::try_new(
                    Arc::new(table_schema().project(&[0])?),
                    vec![Arc::new(BinaryArray::from(keys))],
                )?;
                let changed = self.table_of(|held| held.epoch == epoch)?;
                (changed, Some(KeyedChange { base, removed }))
            }
        };
        self.epoch += 1;
        self.changed = 0;
        self.removed.clear();
        let keyed = KeyedTable {
            table: name.to_string(),
            key_columns: 1,
            serial,
            change,
        };
        Ok((table, keyed))
    }

    /// Holds the rows of a checkpoint table (as [`KeyedRows::table`] makes
    /// it) instead of its own; the next checkpoint is whole. `what` names
    /// the holder in errors.
    pub fn restore(&mut self, table: &RecordBatch, what: &str) -> Result<()> {
        let binary = |i: usize| {
            table
                .columns()
                .get(i)
                .and_then(|c| c.as_any().downcast_ref::<BinaryArray>())
                .ok_or_else(|| EngineError::State(format!("{what}: bad table of held rows")))
        };
        let (keys, rows) = (binary(0)?, binary(1)?);
        *self = Self {
            epoch: self.epoch + 1,
            ..Self::default()
        };
        self.held.reserve(table.num_rows());
        for r in 0..table.num_rows() {
            let held = Held {
                row: rows.value(r).into(),
                epoch: 0,
            };
            self.held.insert(keys.value(r).into(), held);
        }
        Ok(())
    }

    /// The (key, row) table of the rows `keep` picks.
    fn table_of(&self, keep: impl Fn(&Held) -> bool) -> Result<RecordBatch> {
        let (keys, rows): (Vec<&[u8]>, Vec<&[u8]>) = self
            .held
            .iter()
            .filter(|(_, held)| keep(held))
            .map(|(k, held)| (k.as_ref(), held.row.as_ref()))
            .unzip();
        Ok(RecordBatch::try_new(
            table_schema(),
            vec![
                Arc::new(BinaryArray::from(keys)),
                Arc::new(BinaryArray::from(rows)),
            ],
        )?)
    }
}

/// The schema of the checkpoint table: (key, row) bytes, both
/// row-encoded; a state table of this layout is declared with it.
pub fn table_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Binary, false),
        Field::new("row", DataType::Binary, false),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::testing::{binary_pairs as pairs, with_change};

    #[test]
    fn a_change_holds_the_keys_upserted_and_removed_since_the_last_and_reads_back_whole() {
        let mut rows = KeyedRows::default();
        for k in 0..12u8 {
            rows.upsert(&[k], b"a");
        }
        // Before any checkpoint nothing is kept of removals.
        rows.remove(&[11]);
        assert!(rows.removed.is_empty());
        let (whole, first) = rows.snapshot_incremental("t").unwrap();
        assert!(first.change.is_none());
        // 1 changes; 2 goes; 3 is rewritten with its row; 20 comes, goes
        // and comes back.
        rows.upsert(&[1], b"b");
        rows.remove(&[2]);
        rows.upsert(&[3], b"a");
        rows.upsert(&[20], b"x");
        rows.remove(&[20]);
        rows.upsert(&[20], b"y");
        let (changed, second) = rows.snapshot_incremental("t").unwrap();
        let change = second.change.clone().expect("a change");
        assert_eq!(change.base, first.serial);
        assert_eq!(changed.num_rows(), 2, "1 and 20");
        assert_eq!(change.removed.num_rows(), 2, "2 and 20");
        let read_back = with_change(whole, changed, &second);
        assert_eq!(pairs(&read_back), pairs(&rows.table().unwrap()));
        // Restored, it holds the same and checkpoints whole first.
        let mut restored = KeyedRows::default();
        restored.restore(&read_back, "test").unwrap();
        assert_eq!(restored.get(&[20]), Some(&b"y"[..]));
        assert_eq!(restored.len(), rows.len());
        assert!(restored
            .snapshot_incremental("t")
            .unwrap()
            .1
            .change
            .is_none());
        let (nothing, third) = rows.snapshot_incremental("t").unwrap();
        assert_eq!(
            (nothing.num_rows(), third.change.unwrap().removed.num_rows()),
            (0, 0)
        );
    }
}
