//! The event-time temporal join: `probe JOIN versioned FOR SYSTEM_TIME AS
//! OF probe.t ON probe.k = versioned.k`. Each probe row meets the version of
//! its key valid at its event time: the versioned row with the latest event
//! time at or before it (as in Flink).
//!
//! In: probe rows (input 0, append-only) and versions (input 1), both with
//! event time. The versioned side is append-only (each row a new version
//! of its key from its time) or a changelog, a change feed's: `+I`/`+U` a
//! version from its time, `-D` the key deleted from its time (a probe row
//! after it meets no version), `-U` nothing (its `+U` follows). Out: append-only joined rows (probe columns, version
//! columns), each once the watermark (the least over both inputs) has
//! reached its probe time, when no version that could still be valid for
//! it can come; a LEFT join pads a probe row without a version with NULLs.
//! The output keeps the probe's event time.
//!
//! State: the probe rows waiting for the watermark (their batches), and per
//! key the versions still needed: the latest at or before the watermark
//! (what a probe row arriving now may meet) and every later one. Older
//! versions are dropped as the watermark passes their successors.
//! Checkpoints: the waiting probe rows as one table, the versions as
//! (key, time, row) bytes.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, StringArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use datafusion::physical_expr::expressions::col;
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::probe_join::ProbeJoin;
//! use eddy_engine::operators::temporal_join::TemporalJoinPlan;
//!
//! let side = Arc::new(Schema::new(vec![
//!     Field::new("k", DataType::Utf8, true),
//!     Field::new("t", DataType::Int64, true),
//! ]));
//! let plan = TemporalJoinPlan {
//!     join: ProbeJoin {
//!         left_outer: false,
//!         left_schema: side.clone(),
//!         right_schema: side.clone(),
//!         output_schema: Arc::new(Schema::new(
//!             [side.fields().to_vec(), side.fields().to_vec()].concat(),
//!         )),
//!         left_keys: vec![col("k", &side).unwrap()],
//!         right_keys: vec![col("k", &side).unwrap()],
//!         residual: None,
//!     },
//!     left_time: 1,
//!     right_time: 1,
//!     allowed_lateness_ms: 0,
//! };
//! let mut op = plan.create().unwrap();
//! let mut out = Collector::default();
//! let rows = |t: i64| {
//!     RecordBatch::try_new(side.clone(), vec![
//!         Arc::new(StringArray::from(vec!["a"])),
//!         Arc::new(Int64Array::from(vec![t])),
//!     ])
//!     .unwrap()
//! };
//! op.on_batch(1, rows(10), &mut out).unwrap(); // version at 10
//! op.on_batch(1, rows(20), &mut out).unwrap(); // version at 20
//! op.on_batch(0, rows(15), &mut out).unwrap(); // a probe at 15 waits
//! op.on_watermark(15, &mut out).unwrap(); // ... and meets the version at 10
//! let joined: Vec<RecordBatch> = out.drain().map(|(_, b)| b).collect();
//! let version_time = joined[0].column(3).as_any().downcast_ref::<Int64Array>().unwrap().value(0);
//! assert_eq!(version_time, 10);
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, BinaryArray, Int64Array};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::RowConverter;
use datafusion::physical_expr::PhysicalExpr;
use hashbrown::HashMap;

use super::probe_join::{ProbeJoin, WaitingProbes};
use crate::changelog::{self, RowKind};
use crate::error::Result;
use crate::operator::{Collector, Distribution, Operator, OperatorPlan};
use crate::state::declared::TableSpec;
use crate::state::StateSnapshot;
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MIN};

const KIND: &str = "temporal_join";
/// The state tables: probe rows waiting, versions held.
const PROBES: &str = "probes";
const VERSIONS: &str = "versions";

/// Plan of an event-time temporal join.
#[derive(Debug, Clone)]
pub struct TemporalJoinPlan {
    /// The probe, the versioned table, the keys, the residual condition (a
    /// LEFT join pads a probe row without a version).
    pub join: ProbeJoin,
    /// The probe rows' event-time column (what `AS OF` names).
    pub left_time: usize,
    /// The versions' event-time column (when each version starts).
    pub right_time: usize,
    /// Lateness the sources allow: a version up to this far behind the
    /// watermark may still come, so a probe row waits this much longer.
    pub allowed_lateness_ms: i64,
}

impl OperatorPlan for TemporalJoinPlan {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn parameters(&self) -> crate::shape::Parameters {
        let join = &self.join;
        join.residual_parameter(
            join.parameters()
                .column("left_time", &join.left_schema, self.left_time)
                .column("right_time", &join.right_schema, self.right_time),
        )
        .value("allowed_lateness_ms", self.allowed_lateness_ms)
    }

    fn describe(&self) -> String {
        format!(
            "{}, the version valid at {} (versions by {}), each row once the watermark passes it",
            self.join.describe(),
            self.join.left_schema.field(self.left_time).name(),
            self.join.right_schema.field(self.right_time).name(),
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.join.output_schema.clone()
    }

    fn required_input_distribution(&self, input: usize) -> Distribution {
        self.join.hashed_by_keys(input)
    }

    /// The watermark is the least of the parts', the late rows their sum.
    fn rescale_state(
        &self,
        parts: Vec<crate::rescale::InstanceState>,
        keys: &crate::rescale::KeyRange,
    ) -> Result<StateSnapshot> {
        crate::rescale::rescaled(
            parts,
            &self.state_tables()?,
            keys,
            |metas: &[(Meta, bool)]| Meta {
                watermark: crate::rescale::least(metas, |m| m.watermark),
                late_rows: crate::rescale::counted_sum(metas, |m| m.late_rows),
            },
        )
    }

    /// `probes` holds the probe rows waiting for the watermark, keyed by
    /// the probe side's join keys; `versions` every version held: the
    /// join key row-encoded, its time, the row (row-encoded; NULL where
    /// the version is a deletion).
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        Ok(vec![
            self.join.waiting_probes(PROBES),
            TableSpec::new(
                VERSIONS,
                Arc::new(Schema::new(vec![
                    Field::new("key", DataType::Binary, false),
                    Field::new("time", DataType::Int64, false),
                    Field::new("row", DataType::Binary, true),
                ])),
            )
            .keyed(self.join.encoded_key()?),
        ])
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(TemporalJoin {
            tables: self.state_tables()?,
            keys: self.join.key_converter()?,
            rows: self.join.row_converter()?,
            plan: self.clone(),
            pending: WaitingProbes::default(),
            versions: HashMap::new(),
            watermark: WATERMARK_MIN,
            held_versions: 0,
            late_rows: 0,
        }))
    }
}

/// One key's versions: event time -> encoded row, or `None` where the key
/// was deleted (a later change of the same time replaces an earlier one).
type Versions = BTreeMap<i64, Option<Box<[u8]>>>;

struct TemporalJoin {
    plan: TemporalJoinPlan,
    /// The plan's state tables: [`PROBES`], then [`VERSIONS`].
    tables: Vec<TableSpec>,
    keys: RowConverter,
    rows: RowConverter,
    /// Probe rows waiting for the watermark, as they arrived.
    pending: WaitingProbes,
    versions: HashMap<Box<[u8]>, Versions>,
    watermark: Timestamp,
    held_versions: usize,
    /// Late probe rows dropped: their time had been joined past.
    late_rows: u64,
}

impl TemporalJoin {
    /// Key rows of `batch` (`None` for a row with a NULL key).
    fn key_rows(
        &self,
        keys: &[Arc<dyn PhysicalExpr>],
        batch: &RecordBatch,
    ) -> Result<Vec<Option<Box<[u8]>>>> {
        super::nullable_key_rows(&self.keys, keys, batch)
    }

    /// Joins the waiting probe rows at or before `watermark` and keeps the
    /// rest waiting.
    fn release(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let waiting = self.pending.take_all(&self.plan.join.left_schema)?;
        let times = to_epoch_millis(waiting.column(self.plan.left_time))?;
        let due: datafusion::arrow::array::BooleanArray = (0..times.len())
            .map(|i| Some(times.is_null(i) || times.value(i) <= watermark))
            .collect();
        let later = datafusion::arrow::compute::not(&due)?;
        self.pending.push(filter_record_batch(&waiting, &later)?);
        let probes = filter_record_batch(&waiting, &due)?;
        if probes.num_rows() == 0 {
            return Ok(());
        }
        let times = to_epoch_millis(probes.column(self.plan.left_time))?;
        let keys = self.key_rows(&self.plan.join.left_keys, &probes)?;
        // Each probe row's version, if any.
        let versions = &self.versions;
        self.plan.join.emit(
            &probes,
            |r| {
                let t = (!times.is_null(r)).then(|| times.value(r))?;
                versions
                    .get(keys[r].as_ref()?)?
                    .range(..=t)
                    .next_back()
                    .and_then(|(_, row)| row.as_ref())
                    .map(std::slice::from_ref)
            },
            &self.rows,
            KIND,
            out,
        )
    }

    /// Drops versions no probe row can meet any more: per key, all but the
    /// latest at or before the watermark, and later ones.
    fn forget(&mut self, watermark: Timestamp) {
        let mut dropped = 0;
        for versions in self.versions.values_mut() {
            let Some((&current, row)) = versions.range(..=watermark).next_back() else {
                continue;
            };
            // A deletion valid now means what no version means: it goes too.
            let deleted = row.is_none();
            let older: Vec<i64> = versions
                .range(..=current)
                .map(|(&t, _)| t)
                .filter(|&t| t < current || deleted)
                .collect();
            dropped += older.len();
            for t in older {
                versions.remove(&t);
            }
        }
        self.versions.retain(|_, versions| !versions.is_empty());
        self.held_versions -= dropped;
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Meta {
    watermark: Timestamp,
    /// Late probe rows dropped (absent from checkpoints written before
    /// late rows were kept).
    #[serde(default)]
    late_rows: u64,
}

impl Operator for TemporalJoin {
    fn on_batch(&mut self, input: usize, batch: RecordBatch, _out: &mut Collector) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if input == 0 {
            self.pending.push(batch);
            return Ok(());
        }
        let kinds = changelog::row_kinds(&batch).cloned();
        let batch = changelog::data_columns(&batch)?;
        let keys = self.key_rows(&self.plan.join.right_keys.clone(), &batch)?;
        let times = to_epoch_millis(batch.column(self.plan.right_time))?;
        let rows = self.rows.convert_columns(batch.columns())?;
        for (r, key) in keys.into_iter().enumerate() {
            let (Some(key), false) = (key, times.is_null(r)) else {
                continue; // a NULL key or time is no version of anything
            };
            let row = match kinds.as_ref().and_then(|k| RowKind::of(k.value(r))) {
                Some(RowKind::UpdateBefore) => continue, // its +U follows
                Some(RowKind::Delete) => None,
                _ => Some(rows.row(r).as_ref().into()),
            };
            let versions = self.versions.entry(key).or_default();
            if versions.insert(times.value(r), row).is_none() {
                self.held_versions += 1;
            }
        }
        Ok(())
    }

    /// A late probe row whose time had been joined past at its source's
    /// watermark is dropped (counted). Late versions are versions like any
    /// (the versioned side is a table: nothing of it is dropped), and
    /// meet the probe rows not yet joined.
    fn on_late_batch(
        &mut self,
        input: usize,
        late: crate::message::LateBatch,
        out: &mut Collector,
    ) -> Result<()> {
        if input != 0 {
            return self.on_batch(input, late.into_rows(), out);
        }
        let (kept, dropped) = crate::operators::late_rows_in_order(
            late,
            self.plan.left_time,
            self.plan.allowed_lateness_ms,
        )?;
        self.late_rows += dropped;
        self.on_batch(input, kept, out)
    }

    fn late_rows(&self) -> u64 {
        self.late_rows
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        self.watermark = watermark;
        // Versions up to the allowed lateness behind the watermark may
        // still come: only what is past that is final.
        let final_before = watermark.saturating_sub(self.plan.allowed_lateness_ms);
        self.release(final_before, out)?;
        self.forget(final_before);
        Ok(())
    }

    fn on_end(&mut self, out: &mut Collector) -> Result<()> {
        self.release(Timestamp::MAX, out)
    }

    fn state_rows(&self) -> usize {
        self.pending.rows() + self.held_versions
    }

    fn state_bytes(&self) -> usize {
        self.pending.bytes()
            + self
                .versions
                .iter()
                .map(|(k, v)| {
                    k.len()
                        + v.values()
                            .map(|r| r.as_ref().map_or(0, |r| r.len()) + 32)
                            .sum::<usize>()
                })
                .sum::<usize>()
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&Meta {
            watermark: self.watermark,
            late_rows: self.late_rows,
        })?;
        self.pending.snapshot(&mut snapshot, &self.tables[0])?;
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut times = Vec::new();
        let mut rows: Vec<Option<&[u8]>> = Vec::new();
        for (key, versions) in &self.versions {
            for (&t, row) in versions {
                keys.push(key);
                times.push(t);
                rows.push(row.as_deref());
            }
        }
        snapshot.put(
            &self.tables[1],
            RecordBatch::try_new(
                self.tables[1].schema().clone(),
                vec![
                    Arc::new(BinaryArray::from(keys)),
                    Arc::new(Int64Array::from(times)),
                    Arc::new(BinaryArray::from(rows)),
                ],
            )?,
        )?;
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        if state.is_empty() {
            return Ok(());
        }
        let meta: Meta = state.meta()?;
        self.watermark = meta.watermark;
        self.late_rows = meta.late_rows;
        self.pending.restore(&mut state, &self.tables[0])?;
        let table = state.take(&self.tables[1])?;
        let keys = self.tables[1].column::<BinaryArray>(&table, 0)?;
        let times = self.tables[1].column::<Int64Array>(&table, 1)?;
        let rows = self.tables[1].column::<BinaryArray>(&table, 2)?;
        self.versions.clear();
        self.held_versions = table.num_rows();
        for r in 0..table.num_rows() {
            self.versions
                .entry(keys.value(r).into())
                .or_default()
                .insert(
                    times.value(r),
                    rows.is_valid(r).then(|| rows.value(r).into()),
                );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::physical_expr::expressions::col;

    use super::*;
    use crate::operators::testing::{kv_rows, kv_schema};

    /// `probe(k, v) JOIN versions(k, v)`, both timed by `v`.
    fn plan(left_outer: bool) -> TemporalJoinPlan {
        let side = kv_schema();
        let fields: Vec<Field> = side
            .fields()
            .iter()
            .chain(side.fields().iter())
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        TemporalJoinPlan {
            join: ProbeJoin {
                left_outer,
                left_schema: side.clone(),
                right_schema: side.clone(),
                output_schema: Arc::new(Schema::new(fields)),
                left_keys: vec![col("k", &side).unwrap()],
                right_keys: vec![col("k", &side).unwrap()],
                residual: None,
            },
            left_time: 1,
            right_time: 1,
            allowed_lateness_ms: 0,
        }
    }

    fn pairs(out: &mut Collector) -> Vec<String> {
        let mut lines = Vec::new();
        for (_, batch) in out.drain() {
            for r in 0..batch.num_rows() {
                let cell = |c: usize| {
                    datafusion::common::ScalarValue::try_from_array(batch.column(c), r)
                        .unwrap()
                        .to_string()
                };
                lines.push(format!("{} {} {} {}", cell(0), cell(1), cell(2), cell(3)));
            }
        }
        lines.sort();
        lines
    }

    #[test]
    fn each_probe_meets_the_version_valid_at_its_time() {
        let mut op = plan(true).create().unwrap();
        let mut out = Collector::default();
        op.on_batch(
            1,
            kv_rows(&[Some("a"), Some("a"), Some("b")], &[10, 20, 30], None),
            &mut out,
        )
        .unwrap();
        op.on_batch(
            0,
            kv_rows(
                &[Some("a"), Some("a"), Some("b"), Some("a")],
                &[5, 15, 25, 40],
                None,
            ),
            &mut out,
        )
        .unwrap();
        op.on_watermark(25, &mut out).unwrap();
        assert_eq!(
            pairs(&mut out),
            ["a 15 a 10", "a 5 NULL NULL", "b 25 NULL NULL"],
            "b's version starts at 30, after the probe at 25"
        );
        assert_eq!(
            op.state_rows(),
            1 + 2,
            "the probe at 40 waits; a@20 (current) and b@30 (to come) stay, a@10 is gone"
        );
        // A version arriving late for a waiting probe still counts.
        op.on_batch(1, kv_rows(&[Some("a")], &[35], None), &mut out)
            .unwrap();
        let snapshot = op.snapshot().unwrap();
        let mut restored = plan(true).create().unwrap();
        restored.restore(snapshot).unwrap();
        for op in [&mut op, &mut restored] {
            op.on_watermark(45, &mut out).unwrap();
            assert_eq!(pairs(&mut out), ["a 40 a 35"]);
        }
        // The watermark at 45 leaves a's current version (35) and b's (30).
        assert_eq!(restored.state_rows(), 2);
    }

    #[test]
    fn a_change_feed_versions_from_inserts_and_updates_and_deletes_end_them() {
        let mut op = plan(true).create().unwrap();
        let mut out = Collector::default();
        let (i, ub, ua, d) = (0, 1, 2, 3);
        op.on_batch(
            1,
            kv_rows(
                &[Some("a"), Some("a"), Some("a"), Some("a")],
                &[10, 20, 25, 25],
                Some(&[i, d, ub, ua]),
            ),
            &mut out,
        )
        .unwrap();
        op.on_batch(
            0,
            kv_rows(&[Some("a"), Some("a"), Some("a")], &[15, 22, 27], None),
            &mut out,
        )
        .unwrap();
        op.on_watermark(30, &mut out).unwrap();
        assert_eq!(
            pairs(&mut out),
            ["a 15 a 10", "a 22 NULL NULL", "a 27 a 25"],
            "deleted at 20, back at 25"
        );
        assert_eq!(
            op.state_rows(),
            1,
            "only the version at 25 can still be met"
        );
        op.on_batch(1, kv_rows(&[Some("a")], &[35], Some(&[d])), &mut out)
            .unwrap();
        let mut restored = crate::operators::testing::restored(&plan(true), op.as_mut());
        for op in [&mut op, &mut restored] {
            op.on_batch(0, kv_rows(&[Some("a")], &[36], None), &mut out)
                .unwrap();
            op.on_watermark(40, &mut out).unwrap();
            assert_eq!(pairs(&mut out), ["a 36 NULL NULL"]);
            assert_eq!(op.state_rows(), 0, "a deleted key holds nothing");
        }
    }
}
