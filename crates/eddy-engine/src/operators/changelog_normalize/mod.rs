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
//! Past the memory limit every key and row moves to disk
//! ([`super::spilled_rows`]);
//! a batch first brings back, off disk, the rows of its keys that memory
//! does not hold, so each change is the one an unspilled run makes. Once
//! it spilled, its checkpoints are whole: the stored rows and memory's.
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

use super::spilled_rows::SpilledRows;
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
            bytes: 0,
            spilled: None,
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
    /// What `current` takes ([`held_bytes`]), kept as rows come and go.
    bytes: usize,
    /// Keys moved to disk ([`Operator::spill`]); a key is there or in
    /// `current`, never both.
    spilled: Option<SpilledRows>,
    unmatched_deletes: u64,
}

/// What a key and its row take in memory (with the map's entry).
fn held_bytes(key: &[u8], row: &[u8]) -> usize {
    key.len() + row.len() + 40
}

impl ChangelogNormalize {
    /// Brings back from disk the rows of the keys among `keys` that memory
    /// does not hold.
    fn read_back(&mut self, keys: &datafusion::arrow::row::Rows) -> Result<()> {
        let Some(spilled) = self.spilled.as_mut().filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        let mut asked = hashbrown::HashSet::new();
        let missing: Vec<&[u8]> = keys
            .iter()
            .map(|k| k.data())
            .filter(|k| !self.current.contains(k) && asked.insert(*k))
            .collect();
        for (key, row) in spilled.take(&missing)? {
            self.bytes += held_bytes(&key, &row);
            self.current.upsert(&key, &row);
        }
        Ok(())
    }

    /// The whole `current` table: the rows on disk, then memory's.
    fn whole_table(&self) -> Result<RecordBatch> {
        let in_memory = self.current.table()?;
        let Some(spilled) = self.spilled.as_ref().filter(|s| !s.is_empty()) else {
            return Ok(in_memory);
        };
        let stored = spilled.all()?;
        let (keys, rows): (Vec<&[u8]>, Vec<&[u8]>) =
            stored.iter().map(|(k, r)| (&k[..], &r[..])).unzip();
        let stored = RecordBatch::try_new(
            in_memory.schema(),
            vec![
                Arc::new(datafusion::arrow::array::BinaryArray::from(keys)),
                Arc::new(datafusion::arrow::array::BinaryArray::from(rows)),
            ],
        )?;
        Ok(datafusion::arrow::compute::concat_batches(
            &in_memory.schema(),
            [&stored, &in_memory],
        )?)
    }
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
        self.read_back(&keys)?;
        let mut changes: Vec<(RowKind, Box<[u8]>)> = Vec::new();
        for r in 0..batch.num_rows() {
            let key = keys.row(r);
            if changelog::is_retraction_byte(kinds.value(r)) {
                match self.current.remove(key.data()) {
                    Some(old) => {
                        self.bytes = self.bytes.saturating_sub(held_bytes(key.data(), &old));
                        changes.push((RowKind::Delete, old));
                    }
                    None => self.unmatched_deletes += 1,
                }
                continue;
            }
            let row = rows.row(r);
            let upserted = self.current.upsert(key.data(), row.data());
            match &upserted {
                None => self.bytes += held_bytes(key.data(), row.data()),
                Some(old) => {
                    self.bytes = (self.bytes + row.data().len()).saturating_sub(old.len());
                }
            }
            match upserted {
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
        self.current.len() + self.spilled.as_ref().map_or(0, SpilledRows::len)
    }

    fn state_bytes(&self) -> usize {
        self.bytes
    }

    /// Rows are counted as they come and go.
    fn state_bytes_are_counted(&self) -> bool {
        true
    }

    /// Every key and its row moves to disk.
    fn spill(&mut self, space: &Arc<crate::spill::SpillSpace>) -> Result<bool> {
        if self.current.is_empty() {
            return Ok(false);
        }
        if self.spilled.is_none() {
            self.spilled = Some(SpilledRows::open(space, KIND)?);
        }
        if let Some(spilled) = self.spilled.as_mut() {
            spilled.write(self.current.iter())?;
        }
        self.current = KeyedRows::default();
        self.bytes = 0;
        Ok(true)
    }

    fn spill_stats(&self) -> crate::spill::SpillStats {
        self.spilled
            .as_ref()
            .map(SpilledRows::stats)
            .unwrap_or_default()
    }

    fn late_rows(&self) -> u64 {
        self.unmatched_deletes
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&self.unmatched_deletes)?;
        snapshot.put(&self.current_table, self.whole_table()?)?;
        Ok(snapshot)
    }

    /// `current` whole, or only the keys upserted since the previous
    /// checkpoint and those deleted (whole once it spilled).
    fn snapshot_incremental(&mut self) -> Result<StateSnapshot> {
        if self.spilled.is_some() {
            // What changed on disk is not tracked: whole each time.
            return self.snapshot();
        }
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
        if let Some(spilled) = self.spilled.as_mut() {
            spilled.clear()?;
        }
        self.current.restore(&table, KIND)?;
        self.bytes = self.current.iter().map(|(k, r)| held_bytes(k, r)).sum();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
