//! Which groups of an operator's keyed state changed since its previous
//! checkpoint, so that a checkpoint writes those rather than every group.
//!
//! In: the operator's group indices as it touches, renumbers and forgets
//! groups, and at a checkpoint its keyed table (a row per group, in group
//! order, its key columns first). Out: the table to hand over, whole or
//! only the changed groups' rows and the keys that went, with its
//! [`KeyedTable`] description ([`crate::checkpoint::changes`] applies the
//! changes when the checkpoint is read back).
//!
//! A table is whole at the first checkpoint of a run (after a start or a
//! restore), every [`FULL_SNAPSHOT_EVERY`] checkpoints, and whenever more
//! than half of its groups changed (the changes would cost about as much).
//! Bookkeeping is a flag per group, set once per touched group and batch.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, StringArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::state::changed_keys::ChangedKeys;
//! use eddy_engine::state::declared::{TableKey, TableSpec};
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("k", DataType::Utf8, false),
//!     Field::new("n", DataType::Int64, false),
//! ]));
//! let table = |n: Vec<i64>| {
//!     RecordBatch::try_new(
//!         schema.clone(),
//!         vec![
//!             Arc::new(StringArray::from(vec!["a", "b", "c"])),
//!             Arc::new(Int64Array::from(n)),
//!         ],
//!     )
//!     .unwrap()
//! };
//! let groups = TableSpec::new("groups", schema.clone()).keyed(TableKey::Columns(0..1));
//! let mut changed = ChangedKeys::default();
//! changed.resize(3);
//! let (whole, first) = changed.snapshot(&groups, table(vec![1, 1, 1])).unwrap();
//! assert!(first.change.is_none() && whole.num_rows() == 3);
//! changed.touch(1);
//! let (rows, second) = changed.snapshot(&groups, table(vec![1, 2, 1])).unwrap();
//! assert_eq!(second.change.unwrap().base, first.serial);
//! assert_eq!(rows.num_rows(), 1); // only b
//! ```

use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::compute::{concat_batches, filter_record_batch};
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{EngineError, Result};
use crate::state::declared::TableSpec;
use crate::state::{KeyedChange, KeyedTable, FULL_SNAPSHOT_EVERY};

/// Numbers an operator's snapshots of one keyed table and decides which
/// are whole: for operators that keep their state by key rather than by
/// group index (and so track their changes themselves); [`ChangedKeys`]
/// uses it too.
#[derive(Debug, Default)]
pub struct SnapshotChain {
    /// The previous snapshot: its serial and the snapshots since the last
    /// whole one; `None` until the first in this run.
    previous: Option<(u64, u32)>,
    next_serial: u64,
}

impl SnapshotChain {
    /// The next snapshot of a table of `keys` keys of which `changed`
    /// changed: its serial, and the serial of the snapshot it is a change
    /// to (`None`: it is whole).
    pub fn next(&mut self, changed: usize, keys: usize) -> (u64, Option<u64>) {
        let serial = self.next_serial;
        self.next_serial += 1;
        let base = match self.previous {
            Some((base, since_whole))
                if since_whole + 1 < FULL_SNAPSHOT_EVERY && changed * 2 <= keys =>
            {
                self.previous = Some((serial, since_whole + 1));
                Some(base)
            }
            _ => {
                self.previous = Some((serial, 0));
                None
            }
        };
        (serial, base)
    }

    /// Forgets the previous snapshot: the next one is whole (after a
    /// restore, whose state no file of this run holds).
    pub fn restart(&mut self) {
        self.previous = None;
    }

    /// Whether a snapshot was taken since the start or restore: only then
    /// is there something for changes to apply to, so an operator keeps
    /// what it must hand over (the keys that went) only then. A job
    /// without checkpoints never takes one and keeps nothing.
    pub fn tracking(&self) -> bool {
        self.previous.is_some()
    }
}

/// The changed groups of one keyed table since its previous snapshot.
#[derive(Debug, Default)]
pub struct ChangedKeys {
    /// Per group, whether it changed.
    changed: Vec<bool>,
    changed_count: usize,
    /// Keys forgotten since (key columns only).
    removed: Vec<RecordBatch>,
    chain: SnapshotChain,
}

impl ChangedKeys {
    /// Makes room for `groups` groups (new ones unchanged until touched).
    pub fn resize(&mut self, groups: usize) {
        if self.changed.len() < groups {
            self.changed.resize(groups, false);
        }
    }

    /// Group `group` changed.
    pub fn touch(&mut self, group: usize) {
        if group >= self.changed.len() {
            self.changed.resize(group + 1, false);
        }
        if !self.changed[group] {
            self.changed[group] = true;
            self.changed_count += 1;
        }
    }

    /// Groups were renumbered keeping those marked in `keep`, in order;
    /// `gone` are the keys of the others (key columns only).
    pub fn retain(&mut self, keep: &[bool], gone: RecordBatch) {
        self.resize(keep.len());
        let mut kept = 0;
        for (g, &k) in keep.iter().enumerate() {
            let changed = self.changed.get(g).copied().unwrap_or(false);
            if k {
                self.changed[kept] = changed;
                kept += 1;
            } else if changed {
                self.changed_count -= 1;
            }
        }
        self.changed.truncate(kept);
        if gone.num_rows() > 0 && self.chain.tracking() {
            self.removed.push(gone);
        }
    }

    /// Forgets the previous snapshot: the next one is whole (after a
    /// restore, whose state no file of this run holds).
    pub fn restart(&mut self) {
        self.chain.restart();
        self.clear();
    }

    fn clear(&mut self) {
        self.changed.iter_mut().for_each(|c| *c = false);
        self.changed_count = 0;
        self.removed.clear();
    }

    /// The table to hand over at a checkpoint for `whole`, the rows of the
    /// declared table `spec` (a row per group in group order, keyed by its
    /// first columns), and its description; starts counting changes
    /// afresh.
    pub fn snapshot(
        &mut self,
        spec: &TableSpec,
        whole: RecordBatch,
    ) -> Result<(RecordBatch, KeyedTable)> {
        let name = spec.name();
        let key_columns = spec.leading_key_columns().ok_or_else(|| {
            EngineError::State(format!(
                "state table '{name}' is not keyed by its first columns: it cannot be written as its changes"
            ))
        })?;
        let groups = whole.num_rows();
        let (serial, base) = self.chain.next(self.changed_count, groups);
        let (table, change) = match base {
            Some(base) => {
                let mut mask = self.changed.clone();
                mask.resize(groups, false);
                let rows = filter_record_batch(&whole, &BooleanArray::from(mask))?;
                let key_schema = std::sync::Arc::new(
                    whole
                        .schema()
                        .project(&(0..key_columns).collect::<Vec<_>>())?,
                );
                // Taken column by column: the keys' field names may differ.
                let removed = concat_batches(&key_schema, &self.removed)?;
                (rows, Some(KeyedChange { base, removed }))
            }
            None => (whole, None),
        };
        self.clear();
        Ok((
            table,
            KeyedTable {
                table: name.to_string(),
                key_columns,
                serial,
                change,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("n", DataType::Int64, false),
        ]))
    }

    fn table(keys: Vec<i64>) -> RecordBatch {
        let n = vec![0; keys.len()];
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from(keys)),
                Arc::new(Int64Array::from(n)),
            ],
        )
        .unwrap()
    }

    fn spec() -> TableSpec {
        TableSpec::new("t", schema()).keyed(crate::state::declared::TableKey::Columns(0..1))
    }

    fn keys(batch: &RecordBatch) -> Vec<i64> {
        batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .values()
            .to_vec()
    }

    #[test]
    fn renumbered_groups_keep_their_marks_and_forgotten_keys_are_handed_over() {
        let mut changed = ChangedKeys::default();
        changed.resize(5);
        changed
            .snapshot(&spec(), table(vec![10, 11, 12, 13, 14]))
            .unwrap();
        changed.touch(2);
        changed.touch(3);
        // Group 1 forgotten: 2 and 3 become 1 and 2.
        let gone = table(vec![11]).project(&[0]).unwrap();
        changed.retain(&[true, false, true, true, true], gone);
        let now = table(vec![10, 12, 13, 14]);
        let (rows, keyed) = changed.snapshot(&spec(), now.clone()).unwrap();
        assert_eq!(keys(&rows), vec![12, 13]);
        let change = keyed.change.unwrap();
        assert_eq!(keys(&change.removed), vec![11]);
        // Nothing since: an empty change.
        let (rows, keyed) = changed.snapshot(&spec(), now).unwrap();
        assert_eq!(rows.num_rows(), 0);
        assert_eq!(keyed.change.unwrap().removed.num_rows(), 0);
    }

    #[test]
    fn a_table_is_whole_first_after_a_restart_every_so_often_and_when_most_changed() {
        let mut changed = ChangedKeys::default();
        changed.resize(4);
        let whole = |changed: &mut ChangedKeys| {
            changed
                .snapshot(&spec(), table(vec![1, 2, 3, 4]))
                .unwrap()
                .1
                .change
                .is_none()
        };
        assert!(whole(&mut changed), "the first");
        for _ in 1..FULL_SNAPSHOT_EVERY {
            assert!(!whole(&mut changed));
        }
        assert!(whole(&mut changed), "every FULL_SNAPSHOT_EVERY");
        changed.touch(0);
        changed.touch(1);
        assert!(!whole(&mut changed), "half changed");
        changed.touch(0);
        changed.touch(1);
        changed.touch(2);
        assert!(whole(&mut changed), "most changed");
        changed.restart();
        assert!(whole(&mut changed), "after a restore");
    }
}
