//! The processing-time lookup join: `probe JOIN t FOR SYSTEM_TIME AS OF
//! probe.proc ON probe.k = t.k`, where `proc` is a `PROCTIME()` column
//! (Flink's lookup join; Nexmark q13's enrichment by a side input). Each
//! probe row meets the rows of `t` with its key as `t` stands when the row
//! is joined: no event time on either side, no waiting for watermarks.
//!
//! In: probe rows (input 0, append-only) and the table's rows (input 1:
//! append-only, every row a row of the table; or a changelog, `+I`/`+U`
//! adding a row, `-U`/`-D` taking one away). Out: append-only joined rows
//! (probe columns, table columns), one per matching table row; a LEFT join
//! pads a probe row without a match with NULLs.
//!
//! A bounded table (a file, `VALUES`; the planner says which) is read whole
//! before any probe row is joined, as Flink's filesystem lookup loads its
//! file: probe rows wait until the table's input ends, so the answer does
//! not depend on which input was read first. An unbounded one (Kafka) is
//! joined as it stands when each probe row comes, which depends on timing
//! (documented as such). While probe rows wait the output watermark is held
//! where it was when the first of them came.
//!
//! State: the table's rows by key (encoded), the waiting probe rows.
//! Checkpoints: both as tables, and whether the table was read whole.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, StringArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use datafusion::physical_expr::expressions::col;
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::lookup_join::LookupJoinPlan;
//! use eddy_engine::operators::probe_join::ProbeJoin;
//!
//! let probe = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
//! let table = Arc::new(Schema::new(vec![
//!     Field::new("k", DataType::Int64, true),
//!     Field::new("v", DataType::Utf8, true),
//! ]));
//! let plan = LookupJoinPlan {
//!     join: ProbeJoin {
//!         left_outer: false,
//!         left_schema: probe.clone(),
//!         right_schema: table.clone(),
//!         output_schema: Arc::new(Schema::new(
//!             [probe.fields().to_vec(), table.fields().to_vec()].concat(),
//!         )),
//!         left_keys: vec![col("k", &probe).unwrap()],
//!         right_keys: vec![col("k", &table).unwrap()],
//!         residual: None,
//!     },
//! };
//! let mut op = plan.create().unwrap();
//! op.inputs_bounded(&[true, true]); // the table is a file: it ends
//! let mut out = Collector::default();
//! let probes = RecordBatch::try_new(probe, vec![Arc::new(Int64Array::from(vec![1, 2]))]).unwrap();
//! op.on_batch(0, probes, &mut out).unwrap(); // waits for the table
//! let rows = RecordBatch::try_new(table, vec![
//!     Arc::new(Int64Array::from(vec![1])),
//!     Arc::new(StringArray::from(vec!["one"])),
//! ]).unwrap();
//! op.on_batch(1, rows, &mut out).unwrap();
//! assert_eq!(out.drain().count(), 0);
//! op.on_input_end(1, &mut out).unwrap(); // the table is whole: probes join
//! let joined: Vec<RecordBatch> = out.drain().map(|(_, b)| b).collect();
//! assert_eq!(joined.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
//! ```

use std::sync::Arc;

use datafusion::arrow::array::BinaryArray;
use datafusion::arrow::datatypes::SchemaRef;
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
use crate::time::{Timestamp, WATERMARK_MIN};

const KIND: &str = "lookup_join";
/// The state tables: probe rows waiting, the table's rows.
const PROBES: &str = "probes";
const TABLE: &str = "table";

/// Plan of a processing-time lookup join.
#[derive(Debug, Clone)]
pub struct LookupJoinPlan {
    /// The probe, the table (its columns without a changelog's row kind),
    /// the keys, the residual condition.
    pub join: ProbeJoin,
}

impl OperatorPlan for LookupJoinPlan {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn parameters(&self) -> crate::shape::Parameters {
        self.join.residual_parameter(self.join.parameters())
    }

    fn describe(&self) -> String {
        format!(
            "{}, the table as it stands when each row is joined (a table that ends is read whole first)",
            self.join.describe(),
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.join.output_schema.clone()
    }

    fn required_input_distribution(&self, input: usize) -> Distribution {
        self.join.hashed_by_keys(input)
    }

    /// The table was read whole where every part had read it (they all saw
    /// the same end); the watermark is the least of the parts', and held
    /// at the earliest any part held it.
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
                loaded: metas.iter().all(|(m, _)| m.loaded),
                held: metas.iter().filter_map(|(m, _)| m.held).min(),
                watermark: crate::rescale::least(metas, |m| m.watermark),
            },
        )
    }

    /// `probes` holds the probe rows waiting for the table to be read
    /// whole, keyed by the probe side's join keys; `table` the table's
    /// rows: the join key row-encoded, the row (row-encoded).
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        Ok(vec![
            self.join.waiting_probes(PROBES),
            TableSpec::new(TABLE, crate::state::keyed_rows::table_schema())
                .keyed(self.join.encoded_key()?),
        ])
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(LookupJoin {
            tables: self.state_tables()?,
            keys: self.join.key_converter()?,
            rows: self.join.row_converter()?,
            plan: self.clone(),
            table: HashMap::new(),
            table_rows: 0,
            // Until the runtime says whether the table ends, it is waited
            // for ([`Operator::inputs_bounded`]).
            loaded: false,
            pending: WaitingProbes::default(),
            held: None,
            watermark: WATERMARK_MIN,
        }))
    }
}

struct LookupJoin {
    plan: LookupJoinPlan,
    /// The plan's state tables: [`PROBES`], then [`TABLE`].
    tables: Vec<TableSpec>,
    keys: RowConverter,
    rows: RowConverter,
    /// The table's rows by key, encoded.
    table: HashMap<Box<[u8]>, Vec<Box<[u8]>>>,
    table_rows: usize,
    /// Whether probe rows are joined as they come (the table was read
    /// whole, or never ends and is not waited for).
    loaded: bool,
    /// Probe rows waiting for the table.
    pending: WaitingProbes,
    /// The output watermark while probe rows wait.
    held: Option<Timestamp>,
    watermark: Timestamp,
}

impl LookupJoin {
    /// Key rows of `batch` (`None` for a row with a NULL key).
    fn key_rows(
        &self,
        keys: &[Arc<dyn PhysicalExpr>],
        batch: &RecordBatch,
    ) -> Result<Vec<Option<Box<[u8]>>>> {
        super::nullable_key_rows(&self.keys, keys, batch)
    }

    /// Adds (or, for a retraction, takes away) the table rows of `batch`.
    fn update_table(&mut self, batch: &RecordBatch) -> Result<()> {
        let kinds = changelog::row_kinds(batch).cloned();
        let batch = changelog::data_columns(batch)?;
        let keys = self.key_rows(&self.plan.join.right_keys.clone(), &batch)?;
        let rows = self.rows.convert_columns(batch.columns())?;
        for (r, key) in keys.into_iter().enumerate() {
            let Some(key) = key else {
                continue; // a NULL key meets no probe row
            };
            let row: &[u8] = rows.row(r).data();
            let retract = kinds
                .as_ref()
                .and_then(|k| RowKind::of(k.value(r)))
                .is_some_and(RowKind::is_retraction);
            if retract {
                if let Some(held) = self.table.get_mut(&key) {
                    if let Some(i) = held.iter().position(|h| h.as_ref() == row) {
                        held.swap_remove(i);
                        self.table_rows -= 1;
                    }
                    if held.is_empty() {
                        self.table.remove(&key);
                    }
                }
            } else {
                self.table.entry(key).or_default().push(row.into());
                self.table_rows += 1;
            }
        }
        Ok(())
    }

    /// Joins `probes` with the table as it stands.
    fn join(&self, probes: &RecordBatch, out: &mut Collector) -> Result<()> {
        let keys = self.key_rows(&self.plan.join.left_keys, probes)?;
        self.plan.join.emit(
            probes,
            |r| {
                keys[r]
                    .as_ref()
                    .and_then(|k| self.table.get(k))
                    .map(Vec::as_slice)
            },
            &self.rows,
            KIND,
            out,
        )
    }

    /// The table is whole: the waiting probe rows are joined.
    fn release(&mut self, out: &mut Collector) -> Result<()> {
        self.loaded = true;
        self.held = None;
        if self.pending.is_empty() {
            return Ok(());
        }
        let waiting = self.pending.take_all(&self.plan.join.left_schema)?;
        self.join(&waiting, out)
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Meta {
    loaded: bool,
    held: Option<Timestamp>,
    watermark: Timestamp,
}

impl Operator for LookupJoin {
    fn on_batch(&mut self, input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if input == 1 {
            return self.update_table(&batch);
        }
        if self.loaded {
            // Rows that waited for a table found not to end (restored).
            self.release(out)?;
            return self.join(&batch, out);
        }
        if self.pending.is_empty() {
            self.held = Some(self.watermark);
        }
        self.pending.push(batch);
        Ok(())
    }

    fn on_input_end(&mut self, input: usize, out: &mut Collector) -> Result<()> {
        if input == 1 {
            self.release(out)?;
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        self.watermark = watermark;
        if self.loaded && !self.pending.is_empty() {
            self.release(out)?;
        }
        Ok(())
    }

    /// A table that never ends (Kafka, a paced generator) is joined as it
    /// stands; one that ends is read whole before probe rows are joined.
    fn inputs_bounded(&mut self, bounded: &[bool]) {
        if bounded.get(1) == Some(&false) {
            self.loaded = true;
        }
    }

    fn on_end(&mut self, out: &mut Collector) -> Result<()> {
        self.release(out)
    }

    fn output_watermark(&self, input: Timestamp) -> Timestamp {
        match self.held {
            Some(held) => held.min(input),
            None => input,
        }
    }

    fn state_rows(&self) -> usize {
        self.table_rows + self.pending.rows()
    }

    fn state_bytes(&self) -> usize {
        self.pending.bytes()
            + self
                .table
                .iter()
                .map(|(k, rows)| k.len() + rows.iter().map(|r| r.len()).sum::<usize>())
                .sum::<usize>()
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&Meta {
            loaded: self.loaded,
            held: self.held,
            watermark: self.watermark,
        })?;
        self.pending.snapshot(&mut snapshot, &self.tables[0])?;
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut rows: Vec<&[u8]> = Vec::new();
        for (key, held) in &self.table {
            for row in held {
                keys.push(key);
                rows.push(row);
            }
        }
        snapshot.put(
            &self.tables[1],
            RecordBatch::try_new(
                self.tables[1].schema().clone(),
                vec![
                    Arc::new(BinaryArray::from(keys)),
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
        self.loaded = meta.loaded;
        self.held = meta.held;
        self.watermark = meta.watermark;
        self.pending.restore(&mut state, &self.tables[0])?;
        let table = state.take(&self.tables[1])?;
        let keys = self.tables[1].column::<BinaryArray>(&table, 0)?;
        let rows = self.tables[1].column::<BinaryArray>(&table, 1)?;
        self.table.clear();
        self.table_rows = table.num_rows();
        for r in 0..table.num_rows() {
            self.table
                .entry(keys.value(r).into())
                .or_default()
                .push(rows.value(r).into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, ArrayRef, Int64Array, Int8Array, StringArray};
    use datafusion::physical_expr::expressions::col;

    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn plan(left_outer: bool) -> LookupJoinPlan {
        let probe = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("k", DataType::Int64, true),
        ]));
        let table = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("v", DataType::Utf8, true),
        ]));
        LookupJoinPlan {
            join: ProbeJoin {
                left_outer,
                output_schema: Arc::new(Schema::new(
                    [probe.fields().to_vec(), table.fields().to_vec()]
                        .concat()
                        .into_iter()
                        .map(|f| f.as_ref().clone().with_nullable(true))
                        .collect::<Vec<_>>(),
                )),
                left_keys: vec![col("k", &probe).unwrap()],
                right_keys: vec![col("k", &table).unwrap()],
                left_schema: probe,
                right_schema: table,
                residual: None,
            },
        }
    }

    /// The operator, told whether its table ends.
    fn created(plan: &LookupJoinPlan, table_ends: bool) -> Box<dyn Operator> {
        let mut op = plan.create().unwrap();
        op.inputs_bounded(&[true, table_ends]);
        op
    }

    fn probes(plan: &LookupJoinPlan, rows: &[(i64, Option<i64>)]) -> RecordBatch {
        RecordBatch::try_new(
            plan.join.left_schema.clone(),
            vec![
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.0).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(
                    rows.iter().map(|r| r.1).collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap()
    }

    fn table_rows(
        plan: &LookupJoinPlan,
        rows: &[(i64, &str)],
        kinds: Option<Vec<i8>>,
    ) -> RecordBatch {
        let mut fields = plan.join.right_schema.fields().to_vec();
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            )),
        ];
        if let Some(kinds) = kinds {
            fields.push(Arc::new(changelog::row_kind_field(&[])));
            columns.push(Arc::new(Int8Array::from(kinds)));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
    }

    /// (probe id, table value) of every joined row, sorted.
    fn joined(out: &mut Collector) -> Vec<(i64, Option<String>)> {
        let mut rows = Vec::new();
        for (_, batch) in out.drain() {
            let ids = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let values = batch
                .column(3)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            for r in 0..batch.num_rows() {
                rows.push((
                    ids.value(r),
                    values.is_valid(r).then(|| values.value(r).to_string()),
                ));
            }
        }
        rows.sort();
        rows
    }

    #[test]
    fn probe_rows_wait_for_a_bounded_table_and_meet_every_matching_row() {
        let plan = plan(false);
        let mut op = created(&plan, true);
        let mut out = Collector::default();
        op.on_watermark(7, &mut out).unwrap();
        op.on_batch(
            0,
            probes(&plan, &[(1, Some(10)), (2, Some(20)), (3, None)]),
            &mut out,
        )
        .unwrap();
        assert_eq!(op.output_watermark(50), 7, "held while rows wait");
        op.on_batch(
            1,
            table_rows(&plan, &[(10, "a"), (10, "b"), (30, "c")], None),
            &mut out,
        )
        .unwrap();
        assert!(joined(&mut out).is_empty());
        op.on_input_end(1, &mut out).unwrap();
        assert_eq!(
            joined(&mut out),
            vec![(1, Some("a".into())), (1, Some("b".into()))]
        );
        assert_eq!(op.output_watermark(50), 50);
        // Later probe rows are joined as they come.
        op.on_batch(0, probes(&plan, &[(4, Some(30))]), &mut out)
            .unwrap();
        assert_eq!(joined(&mut out), vec![(4, Some("c".into()))]);
    }

    #[test]
    fn an_unbounded_changelog_table_is_met_as_it_stands_and_left_rows_are_padded() {
        let plan = plan(true);
        let mut op = created(&plan, false);
        let mut out = Collector::default();
        op.on_batch(
            1,
            table_rows(&plan, &[(10, "a"), (20, "b")], Some(vec![0, 0])),
            &mut out,
        )
        .unwrap();
        op.on_batch(0, probes(&plan, &[(1, Some(10)), (2, Some(20))]), &mut out)
            .unwrap();
        assert_eq!(
            joined(&mut out),
            vec![(1, Some("a".into())), (2, Some("b".into()))]
        );
        // 10 is updated to "a2", 20 deleted.
        op.on_batch(
            1,
            table_rows(
                &plan,
                &[(10, "a"), (10, "a2"), (20, "b")],
                Some(vec![1, 2, 3]),
            ),
            &mut out,
        )
        .unwrap();
        op.on_batch(0, probes(&plan, &[(3, Some(10)), (4, Some(20))]), &mut out)
            .unwrap();
        assert_eq!(joined(&mut out), vec![(3, Some("a2".into())), (4, None)]);
    }

    #[test]
    fn the_table_and_waiting_rows_survive_a_checkpoint() {
        let plan = plan(false);
        let mut op = created(&plan, true);
        let mut out = Collector::default();
        op.on_batch(1, table_rows(&plan, &[(10, "a")], None), &mut out)
            .unwrap();
        op.on_batch(0, probes(&plan, &[(1, Some(10))]), &mut out)
            .unwrap();
        let snapshot = op.snapshot().unwrap();
        let mut resumed = plan.create().unwrap();
        resumed.restore(snapshot.clone()).unwrap();
        resumed.inputs_bounded(&[true, true]);
        assert_eq!(resumed.state_rows(), 2);
        resumed.on_input_end(1, &mut out).unwrap();
        assert_eq!(joined(&mut out), vec![(1, Some("a".into()))]);
        // Resumed where the table no longer ends (read from Kafka now): the
        // rows that waited are joined at the next watermark, not held.
        let mut live = plan.create().unwrap();
        live.restore(snapshot).unwrap();
        live.inputs_bounded(&[true, false]);
        live.on_watermark(5, &mut out).unwrap();
        assert_eq!(joined(&mut out), vec![(1, Some("a".into()))]);
        assert_eq!(live.output_watermark(9), 9);
    }

    #[test]
    fn until_told_whether_the_table_ends_probe_rows_wait() {
        let plan = plan(false);
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(1, table_rows(&plan, &[(10, "a")], None), &mut out)
            .unwrap();
        op.on_batch(0, probes(&plan, &[(1, Some(10))]), &mut out)
            .unwrap();
        assert!(joined(&mut out).is_empty());
        op.on_end(&mut out).unwrap();
        assert_eq!(joined(&mut out), vec![(1, Some("a".into()))]);
    }
}
