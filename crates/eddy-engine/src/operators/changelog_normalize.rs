//! Turns an upsert stream (each row the new value of its key, or a delete
//! of its key) into a changelog with the old rows: what an upsert Kafka
//! topic (a compacted topic, records keyed by the primary key, a tombstone
//! per delete) needs before any operator can use it.
//!
//! In: an updating stream whose `+I`/`+U` rows are upserts and whose
//! `-U`/`-D` rows are deletes (only their key columns count). Out: a
//! changelog: a key's first row `+I`, a new value `-U` old then `+U` new
//! (nothing when the value did not change), a delete `-D` old. A delete of
//! a key not held is counted and dropped (an upsert topic read from the
//! middle, or a tombstone repeated by compaction).
//!
//! State: per key its current row, encoded ([`KeyedRows`]). Checkpoints: a
//! table of (key, row) bytes, handed over as the keys upserted or deleted
//! since the previous checkpoint where it can be.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, Int8Array, StringArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use datafusion::physical_expr::expressions::col;
//! use eddy_engine::changelog;
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::changelog_normalize::ChangelogNormalizePlan;
//!
//! let data = Schema::new(vec![Field::new("k", DataType::Utf8, false), Field::new("v", DataType::Int64, true)]);
//! let schema = changelog::updating_schema(&data, &["k".to_string()]);
//! let plan = ChangelogNormalizePlan {
//!     schema: schema.clone(),
//!     keys: vec![col("k", &schema).unwrap()],
//! };
//! let mut op = plan.create().unwrap();
//! let mut out = Collector::default();
//! let upserts = RecordBatch::try_new(schema, vec![
//!     Arc::new(StringArray::from(vec!["a", "a"])),
//!     Arc::new(Int64Array::from(vec![1, 2])),
//!     Arc::new(Int8Array::from(vec![2, 2])),
//! ]).unwrap();
//! op.on_batch(0, upserts, &mut out).unwrap();
//! let kinds: Vec<i8> = out
//!     .drain()
//!     .flat_map(|(_, b)| changelog::row_kinds(&b).unwrap().values().to_vec())
//!     .collect();
//! assert_eq!(kinds, vec![0, 1, 2]); // +I (a, 1), -U (a, 1), +U (a, 2)
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int8Array};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::PhysicalExpr;

use crate::changelog::{self, RowKind};
use crate::error::{EngineError, Result};
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::state::declared::TableSpec;
use crate::state::keyed_rows::KeyedRows;
use crate::state::StateSnapshot;

const KIND: &str = "changelog_normalize";
/// The state table: each key's current row.
const CURRENT: &str = "current";

/// Plan of the upsert-to-changelog step.
#[derive(Debug, Clone)]
pub struct ChangelogNormalizePlan {
    /// The rows' schema, the row kind last (input and output alike).
    pub schema: SchemaRef,
    /// The primary key's expressions.
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
}

impl OperatorPlan for ChangelogNormalizePlan {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        P::new().exprs("keys", &self.keys)
    }

    fn describe(&self) -> String {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        format!(
            "upserts by ({}) into a changelog with the old rows",
            keys.join(", ")
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        crate::operator::Distribution::hash(self.keys.clone())
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        let width = self.schema.fields().len().saturating_sub(1);
        let rows = RowConverter::new(
            self.schema.fields()[..width]
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        Ok(Box::new(ChangelogNormalize {
            current_table: self.state_tables()?.remove(0),
            keys: super::key_converter(&self.keys, &self.schema)?,
            rows,
            plan: self.clone(),
            current: KeyedRows::default(),
            unmatched_deletes: 0,
        }))
    }

    /// `current` holds each key's row: the key and the row, row-encoded.
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        Ok(vec![TableSpec::new(
            CURRENT,
            crate::state::keyed_rows::table_schema(),
        )
        .keyed(super::encoded_key(&self.keys, &self.schema)?)])
    }

    /// The unmatched deletes are the parts' sum.
    fn rescale_state(
        &self,
        parts: Vec<crate::rescale::InstanceState>,
        keys: &crate::rescale::KeyRange,
    ) -> Result<StateSnapshot> {
        crate::rescale::rescaled(
            parts,
            &self.state_tables()?,
            keys,
            |metas: &[(u64, bool)]| crate::rescale::counted_sum(metas, |m| *m),
        )
    }
}

struct ChangelogNormalize {
    plan: ChangelogNormalizePlan,
    /// The plan's one state table.
    current_table: TableSpec,
    keys: RowConverter,
    rows: RowConverter,
    /// Each key's current row.
    current: KeyedRows,
    unmatched_deletes: u64,
}

impl Operator for ChangelogNormalize {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let kinds = changelog::row_kinds(&batch)
            .ok_or_else(|| {
                EngineError::operator(KIND, "an append-only batch reached the upsert step")
            })?
            .clone();
        changelog::check_kinds(&kinds)?;
        let data = changelog::data_columns(&batch)?;
        let (keys, _) = super::key_rows(&self.keys, &self.plan.keys, &batch)?;
        let rows = self.rows.convert_columns(data.columns())?;
        let mut changes: Vec<(RowKind, Box<[u8]>)> = Vec::new();
        for r in 0..batch.num_rows() {
            let key = keys.row(r);
            if changelog::is_retraction_byte(kinds.value(r)) {
                match self.current.remove(key.data()) {
                    Some(old) => changes.push((RowKind::Delete, old)),
                    None => self.unmatched_deletes += 1,
                }
                continue;
            }
            let row = rows.row(r);
            match self.current.upsert(key.data(), row.data()) {
                None => changes.push((RowKind::Insert, row.data().into())),
                Some(old) if old.as_ref() == row.data() => {}
                Some(old) => {
                    changes.push((RowKind::UpdateBefore, old));
                    changes.push((RowKind::UpdateAfter, row.data().into()));
                }
            }
        }
        if changes.is_empty() {
            return Ok(());
        }
        let parser = self.rows.parser();
        let mut columns: Vec<ArrayRef> = self
            .rows
            .convert_rows(changes.iter().map(|(_, row)| parser.parse(row)))?;
        columns.push(Arc::new(Int8Array::from(
            changes.iter().map(|(k, _)| k.byte()).collect::<Vec<_>>(),
        )));
        out.emit(super::batch_of(&self.plan.schema, columns)?);
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.current.len()
    }

    fn state_bytes(&self) -> usize {
        self.current
            .iter()
            .map(|(k, row)| k.len() + row.len() + 40)
            .sum()
    }

    fn late_rows(&self) -> u64 {
        self.unmatched_deletes
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&self.unmatched_deletes)?;
        snapshot.put(&self.current_table, self.current.table()?)?;
        Ok(snapshot)
    }

    /// `current` whole, or only the keys upserted since the previous
    /// checkpoint and those deleted.
    fn snapshot_incremental(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&self.unmatched_deletes)?;
        let (table, keyed) = self.current.snapshot_incremental(CURRENT)?;
        snapshot.put(&self.current_table, table)?;
        snapshot.keyed.push(keyed);
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        if state.is_empty() {
            return Ok(());
        }
        self.unmatched_deletes = state.meta()?;
        let table = state.take(&self.current_table)?;
        self.current.restore(&table, KIND)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::physical_expr::expressions::col;

    use super::*;
    use crate::operators::testing::{changes, keyed, kv_schema};

    fn plan() -> ChangelogNormalizePlan {
        let schema = changelog::updating_schema(&kv_schema(), &["k".to_string()]);
        ChangelogNormalizePlan {
            keys: vec![col("k", &schema).unwrap()],
            schema,
        }
    }

    #[test]
    fn upserts_and_deletes_become_a_changelog_with_the_old_rows() {
        let mut op = plan().create().unwrap();
        let mut out = Collector::default();
        // upsert a=1, b=5, a=2, a=2 again; delete b; delete c (never held).
        op.on_batch(
            0,
            keyed(
                &["a", "b", "a", "a", "b", "c"],
                &[1, 5, 2, 2, 0, 0],
                Some(&[2, 2, 2, 2, 3, 3]),
            ),
            &mut out,
        )
        .unwrap();
        assert_eq!(
            changes(&mut out),
            ["+I a 1", "+I b 5", "-U a 1", "+U a 2", "-D b 5"]
        );
        assert_eq!(op.late_rows(), 1, "the delete of c");
        let mut restored = crate::operators::testing::restored(&plan(), op.as_mut());
        restored
            .on_batch(0, keyed(&["a"], &[0], Some(&[3])), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["-D a 2"]);
    }

    #[test]
    fn its_keys_move_to_the_instance_that_owns_them_at_another_parallelism() {
        use crate::key_groups::KeyGroups;
        use crate::operators::testing::rescaled_instance;
        use crate::rescale::KeyRange;
        let groups = KeyGroups::default();
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let values: Vec<i64> = (1..=8).collect();
        // Two instances, each upserting the keys routed to it.
        let batch = keyed(&keys, &values, Some(&[2; 8]));
        let column = batch.column(0).clone();
        let owners = crate::partition::instance_rows(&[column], 8, 2, groups).unwrap();
        let mut parts = Vec::new();
        for instance in 0..2u32 {
            let mask: datafusion::arrow::array::BooleanArray =
                owners.iter().map(|&o| Some(o == instance)).collect();
            let mut op = plan().create().unwrap();
            let mut out = Collector::default();
            let mine = datafusion::arrow::compute::filter_record_batch(&batch, &mask).unwrap();
            op.on_batch(0, mine, &mut out).unwrap();
            // One unmatched delete each, counted once after the move.
            op.on_batch(0, keyed(&["zz"], &[0], Some(&[3])), &mut out)
                .unwrap();
            parts.push(op.snapshot().unwrap());
        }
        // Three instances now: deleting every key gives its row back once.
        let mut deleted = Vec::new();
        let mut unmatched = 0;
        for instance in 0..3u32 {
            let range = KeyRange::of_instance(groups, instance, 3);
            // The old instances' state a resumed job hands over to this one.
            let mut op = rescaled_instance(&plan(), &parts, groups, instance, 3, 2);
            unmatched += op.late_rows();
            let mut out = Collector::default();
            let column = batch.column(0).clone();
            let mine: datafusion::arrow::array::BooleanArray =
                range.mask(&[column], 8).unwrap().iter().collect();
            let deletes = keyed(&keys, &[0; 8], Some(&[3; 8]));
            op.on_batch(
                0,
                datafusion::arrow::compute::filter_record_batch(&deletes, &mine).unwrap(),
                &mut out,
            )
            .unwrap();
            deleted.extend(changes(&mut out));
        }
        deleted.sort();
        let expected: Vec<String> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| format!("-D {k} {v}"))
            .collect();
        assert_eq!(deleted, expected);
        assert_eq!(unmatched, 2, "each old instance's count, carried once");
    }

    #[test]
    fn a_checkpoint_hands_over_the_keys_upserted_and_deleted_since_the_last() {
        use crate::operators::testing::{binary_pairs as pairs, with_change};
        use crate::state::StateTable;
        let mut op = plan().create().unwrap();
        let mut out = Collector::default();
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"];
        op.on_batch(0, keyed(&keys, &[1; 12], Some(&[2; 12])), &mut out)
            .unwrap();
        let mut first = op.snapshot_incremental().unwrap();
        assert!(first.keyed[0].change.is_none(), "the first is whole");
        let whole = first.take_table("current").unwrap();
        // a changes, b goes, z comes and goes and comes back, c is
        // upserted with the row it has.
        op.on_batch(
            0,
            keyed(
                &["a", "b", "z", "z", "z", "c"],
                &[9, 0, 1, 0, 2, 1],
                Some(&[2, 3, 2, 3, 2, 2]),
            ),
            &mut out,
        )
        .unwrap();
        let mut second = op.snapshot_incremental().unwrap();
        let change = second.keyed[0].change.clone().expect("a change");
        assert_eq!(change.base, first.keyed[0].serial);
        let changed = second.take_table("current").unwrap();
        assert_eq!(changed.num_rows(), 2, "a and z (c's row is the one it had)");
        assert_eq!(change.removed.num_rows(), 2, "b and z");
        let read_back = with_change(whole, changed, &second.keyed[0]);
        let now = op.snapshot().unwrap().take_table("current").unwrap();
        assert_eq!(pairs(&read_back), pairs(&now));
        assert_eq!(read_back.num_rows(), 12);

        // Nothing since: an empty change; restored from what was read
        // back, it goes on as the original.
        let third = op.snapshot_incremental().unwrap();
        assert_eq!(third.tables[0].batch.num_rows(), 0);
        changes(&mut out);
        let mut restored = plan().create().unwrap();
        restored
            .restore(StateSnapshot {
                meta: second.meta.clone(),
                tables: vec![StateTable {
                    name: "current".into(),
                    batch: read_back,
                }],
                keyed: Vec::new(),
            })
            .unwrap();
        for op in [&mut op, &mut restored] {
            op.on_batch(0, keyed(&["z", "b"], &[0, 0], Some(&[3, 3])), &mut out)
                .unwrap();
            assert_eq!(changes(&mut out), ["-D z 2"]);
        }
        assert!(restored.snapshot_incremental().unwrap().keyed[0]
            .change
            .is_none());
    }
}
