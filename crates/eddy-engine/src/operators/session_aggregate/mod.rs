//! Session windows: `GROUP BY session(gap), keys...` with any DataFusion
//! aggregate function.
//!
//! In: batches carrying an event-time column. Out: one row per (session, key)
//! once the session is over, laid out like a window aggregate's output (the
//! window struct `{start, end}` among the group columns, then the
//! aggregates). A key's session holds rows whose event times are each at
//! most `gap` after the previous one; it is `[first row, last row + gap)`,
//! as in Flink (whose per-row windows `[t, t + gap)` merge when they touch).
//! A session fires at watermark > end + allowed lateness: until then a row
//! at exactly its end could still extend it.
//!
//! Rows wait until the watermark guarantees no earlier row can come (t <
//! W - allowed lateness), and are then folded in event-time order, key by
//! key. A late row (behind its source's watermark, kept) whose time is
//! behind that horizon at its own position had its place in the order
//! passed: it is dropped and counted, whatever the operator's own
//! watermark. So a row that arrives out of order, within the watermark bound or
//! the allowed lateness, and bridges two sessions merges them: they were
//! never split.
//!
//! ```text
//!   on_batch:      rows wait in `pending`
//!   on_watermark:  rows with t < W - lateness: sorted by (key, t); each key's
//!                  rows extend its open session or close it and open another;
//!                  sessions with end + lateness <= W are emitted
//! ```
//!
//! State per key is its open session: start, last event time, and one
//! DataFusion `Accumulator` per aggregate, never the rows.
//!
//! Checkpoints: table `pending` (rows waiting for the watermark) and table
//! `sessions` (key bytes, start, last time, each aggregate's intermediate
//! state columns).
//!
//! Past the memory limit, every open session moves to disk ([`spilled`]):
//! released rows bring their key's session back before they fold into
//! it, and a watermark fires the stored sessions it passes with those in
//! memory, in end order, so the output is the same as without spilling.
//! Rows waiting for the watermark spill too, sorted by time, and come
//! back when a watermark's horizon reaches them. A checkpoint holds the
//! stored sessions and rows with memory's.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
//! use eddy_engine::operator::OperatorPlan;
//! use eddy_engine::operators::session_aggregate::SessionAggregatePlan;
//! use eddy_engine::operators::windowed_group_by::{GroupColumn, WindowedGroupBy};
//! use eddy_engine::window::window_struct_type;
//!
//! let input = Arc::new(Schema::new(vec![
//!     Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
//! ]));
//! let output = Arc::new(Schema::new(vec![Field::new("w", window_struct_type(), true)]));
//! let plan = SessionAggregatePlan {
//!     gap_ms: 30_000,
//!     group_by: WindowedGroupBy {
//!         input_schema: input,
//!         output_schema: output,
//!         time_column: 0,
//!         allowed_lateness_ms: 0,
//!         group_columns: vec![GroupColumn::Window],
//!         keys: Vec::new(),
//!         aggregates: Vec::new(),
//!     },
//! };
//! assert!(plan.describe().starts_with("session(gap 30000ms)"));
//! ```

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Int64Array, RecordBatch,
};
use datafusion::arrow::compute::{
    concat_batches, filter, filter_record_batch, lexsort_to_indices, not, take_record_batch,
    SortColumn,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatchOptions;
use datafusion::arrow::row::RowConverter;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use datafusion::physical_expr::PhysicalExpr;
use hashbrown::HashMap;
use serde::{Deserialize, Serialize};

use super::windowed_group_by::WindowedGroupBy;
use super::{key_converter, key_rows};
use crate::error::{EngineError, Result};
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::rescale::{self, InstanceState, KeyRange};
use crate::state::declared::{TableKey, TableSpec};
use crate::state::{scalars_to_array, StateSnapshot};
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MIN};
use crate::window::window_struct_column;

pub mod spilled;

/// Plan of a session-window aggregation.
#[derive(Debug, Clone)]
pub struct SessionAggregatePlan {
    /// A session ends when no row of its key comes for this long.
    pub gap_ms: i64,
    /// The keys (sessions are per key), the aggregates, the event time;
    /// a session waits the lateness after its gap before it fires.
    pub group_by: WindowedGroupBy,
}

impl OperatorPlan for SessionAggregatePlan {
    fn kind(&self) -> &'static str {
        "session_aggregate"
    }

    fn parameters(&self) -> crate::shape::Parameters {
        self.group_by
            .parameters(crate::shape::Parameters::new().value("gap_ms", self.gap_ms))
    }

    fn describe(&self) -> String {
        self.group_by.describe(
            format_args!("session(gap {}ms)", self.gap_ms),
            format_args!(
                "fires at watermark > last row + gap + {}ms",
                self.group_by.allowed_lateness_ms
            ),
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.group_by.output_schema.clone()
    }

    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        self.group_by.distribution()
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        let keys: Vec<Arc<dyn PhysicalExpr>> = self.group_by.key_exprs();
        let converter = key_converter(&keys, &self.group_by.input_schema)?;
        let tables = self.state_tables()?;
        Ok(Box::new(SessionAggregateOperator {
            plan: self.clone(),
            keys,
            converter,
            state_schema: tables[SESSIONS].schema().clone(),
            tables,
            pending: Vec::new(),
            sessions: HashMap::new(),
            ends: BTreeSet::new(),
            spilled: None,
            session_bytes: 0,
            pending_bytes: 0,
            watermark: WATERMARK_MIN,
            late_rows: 0,
        }))
    }

    /// `pending` holds input rows not yet in order, keyed by the partition
    /// keys over them; `sessions` a row per open session: its key
    /// row-encoded, its start, its last row's time, each aggregate's state.
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        let group_by = &self.group_by;
        let keys = group_by.key_exprs();
        let fields = group_by.with_state_fields(vec![
            Field::new("key", DataType::Binary, false),
            Field::new("start", DataType::Int64, false),
            Field::new("last", DataType::Int64, false),
        ])?;
        Ok(vec![
            TableSpec::new("pending", group_by.input_schema.clone())
                .keyed(TableKey::Exprs(keys.clone())),
            TableSpec::new("sessions", Arc::new(Schema::new(fields)))
                .keyed(super::encoded_key(&keys, &group_by.input_schema)?),
        ])
    }

    /// The watermark is the least of the parts', the late rows their sum.
    fn rescale_state(&self, parts: Vec<InstanceState>, keys: &KeyRange) -> Result<StateSnapshot> {
        crate::rescale::rescaled(
            parts,
            &self.state_tables()?,
            keys,
            |metas: &[(SessionMeta, bool)]| SessionMeta {
                watermark: crate::rescale::least(metas, |m| m.watermark),
                late_rows: rescale::counted_sum(metas, |m| m.late_rows),
            },
        )
    }
}

/// A key's open session.
struct Session {
    start: Timestamp,
    last: Timestamp,
    accumulators: Vec<Box<dyn Accumulator>>,
}

/// The state tables' places in [`OperatorPlan::state_tables`].
const PENDING: usize = 0;
const SESSIONS: usize = 1;

struct SessionAggregateOperator {
    plan: SessionAggregatePlan,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    converter: RowConverter,
    state_schema: SchemaRef,
    /// The plan's state tables: [`PENDING`], [`SESSIONS`].
    tables: Vec<TableSpec>,
    /// Rows not yet folded (t >= W - lateness when they came).
    pending: Vec<RecordBatch>,
    /// Open sessions by key bytes (Arrow row format).
    sessions: HashMap<Box<[u8]>, Session>,
    /// (end, key) of every open session, to find those that are over.
    ends: BTreeSet<(Timestamp, Box<[u8]>)>,
    /// Sessions moved to disk ([`Operator::spill`]); a key's session is
    /// here or in `sessions`, never both.
    spilled: Option<spilled::SpilledSessions>,
    /// Bytes of the sessions in memory ([`session_bytes`]) and of the
    /// pending rows, kept as they come and go.
    session_bytes: usize,
    pending_bytes: usize,
    watermark: Timestamp,
    late_rows: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct SessionMeta {
    watermark: Timestamp,
    late_rows: u64,
}

impl SessionAggregateOperator {
    /// Rows before this time are final: none earlier can still come.
    fn horizon(&self, watermark: Timestamp) -> Timestamp {
        watermark.saturating_sub(self.plan.group_by.allowed_lateness_ms)
    }

    fn new_accumulators(&self) -> Result<Vec<Box<dyn Accumulator>>> {
        self.plan
            .group_by
            .aggregates
            .iter()
            .map(|a| Ok(a.expr.create_accumulator()?))
            .collect()
    }

    /// Takes the pending rows before `horizon`, sorted by (key, time).
    fn release(&mut self, horizon: Timestamp) -> Result<Option<RecordBatch>> {
        if let Some(spilled) = self.spilled.as_mut() {
            self.pending.extend(spilled.take_waiting_before(horizon)?);
        }
        let mut released = Vec::new();
        let mut kept = Vec::new();
        for batch in std::mem::take(&mut self.pending) {
            let times = to_epoch_millis(batch.column(self.plan.group_by.time_column))?;
            let ready: BooleanArray = times.iter().map(|t| t.map(|t| t < horizon)).collect();
            if ready.true_count() == batch.num_rows() {
                released.push(batch);
            } else if ready.true_count() == 0 {
                kept.push(batch);
            } else {
                released.push(filter_record_batch(&batch, &ready)?);
                kept.push(crate::state::owned_batch::owned(filter_record_batch(
                    &batch,
                    &not(&ready)?,
                )?));
            }
        }
        self.pending_bytes = kept.iter().map(RecordBatch::get_array_memory_size).sum();
        self.pending = kept;
        if released.is_empty() {
            return Ok(None);
        }
        let rows = concat_batches(&self.plan.group_by.input_schema, released.iter())?;
        let n = rows.num_rows();
        let mut columns: Vec<SortColumn> = self
            .keys
            .iter()
            .map(|k| {
                Ok(SortColumn {
                    values: k.evaluate(&rows)?.into_array(n)?,
                    options: None,
                })
            })
            .collect::<Result<_>>()?;
        columns.push(SortColumn {
            values: Arc::new(to_epoch_millis(
                rows.column(self.plan.group_by.time_column),
            )?),
            options: None,
        });
        let order = lexsort_to_indices(&columns, None)?;
        Ok(Some(take_record_batch(&rows, &order)?))
    }

    /// Folds `rows` (sorted by key, then time) into sessions; sessions they
    /// close are emitted.
    fn fold(&mut self, rows: &RecordBatch, out: &mut Collector) -> Result<()> {
        let n = rows.num_rows();
        let times = to_epoch_millis(rows.column(self.plan.group_by.time_column))?;
        let (key_rows, _) = key_rows(&self.converter, &self.keys, rows)?;
        let args: Vec<Vec<ArrayRef>> = self
            .plan
            .group_by
            .aggregates
            .iter()
            .map(|a| {
                a.expr
                    .expressions()
                    .iter()
                    .map(|e| Ok(e.evaluate(rows)?.into_array(n)?))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<_>>()?;
        let filters: Vec<Option<BooleanArray>> = self
            .plan
            .group_by
            .aggregates
            .iter()
            .map(|a| {
                a.filter
                    .as_ref()
                    .map(|f| super::predicate_mask(f, rows, "session_aggregate"))
                    .transpose()
            })
            .collect::<Result<_>>()?;
        self.read_back(&key_rows)?;
        let mut closed: Vec<(Box<[u8]>, Session)> = Vec::new();
        let mut i = 0;
        while i < n {
            let key = key_rows.row(i);
            let mut run_end = i + 1;
            while run_end < n && key_rows.row(run_end) == key {
                run_end += 1;
            }
            let key: Box<[u8]> = key.as_ref().into();
            let mut session = match self.sessions.remove(&key) {
                Some(session) => {
                    self.session_bytes = self
                        .session_bytes
                        .saturating_sub(session_bytes(&key, &session));
                    self.ends
                        .remove(&(session.last.saturating_add(self.plan.gap_ms), key.clone()));
                    Some(session)
                }
                None => None,
            };
            // Segments of the run that fall into one session.
            let mut segment = i;
            for row in i..=run_end {
                let boundary = row == run_end || {
                    let previous = if row > segment {
                        Some(times.value(row - 1))
                    } else {
                        session.as_ref().map(|s| s.last)
                    };
                    previous.is_none_or(|p| times.value(row) > p.saturating_add(self.plan.gap_ms))
                };
                if !boundary {
                    continue;
                }
                if row > segment {
                    if let Some(s) = session.as_mut() {
                        self.update(s, &args, &filters, segment, row - segment)?;
                        s.last = times.value(row - 1);
                    }
                }
                if row == run_end {
                    break;
                }
                if let Some(done) = session.take() {
                    closed.push((key.clone(), done));
                }
                session = Some(Session {
                    start: times.value(row),
                    last: times.value(row),
                    accumulators: self.new_accumulators()?,
                });
                segment = row;
            }
            if let Some(session) = session {
                self.ends
                    .insert((session.last.saturating_add(self.plan.gap_ms), key.clone()));
                self.session_bytes += session_bytes(&key, &session);
                self.sessions.insert(key, session);
            }
            i = run_end;
        }
        if !closed.is_empty() {
            out.emit(self.emit(closed)?);
        }
        Ok(())
    }

    fn update(
        &self,
        session: &mut Session,
        args: &[Vec<ArrayRef>],
        filters: &[Option<BooleanArray>],
        offset: usize,
        len: usize,
    ) -> Result<()> {
        for (a, acc) in session.accumulators.iter_mut().enumerate() {
            let mut values: Vec<ArrayRef> = args[a].iter().map(|c| c.slice(offset, len)).collect();
            if let Some(mask) = &filters[a] {
                let mask = mask.slice(offset, len);
                values = values
                    .iter()
                    .map(|v| filter(v.as_ref(), &mask))
                    .collect::<Result<_, _>>()?;
            }
            acc.update_batch(&values)?;
        }
        Ok(())
    }

    fn emit(&self, sessions: Vec<(Box<[u8]>, Session)>) -> Result<RecordBatch> {
        let n = sessions.len();
        let parser = self.converter.parser();
        let keys = if self.keys.is_empty() {
            Vec::new()
        } else {
            self.converter
                .convert_rows(sessions.iter().map(|(k, _)| parser.parse(k)))?
        };
        let mut starts = Vec::with_capacity(n);
        let mut ends = Vec::with_capacity(n);
        let mut values: Vec<Vec<ScalarValue>> =
            vec![Vec::with_capacity(n); self.plan.group_by.aggregates.len()];
        for (_, mut session) in sessions {
            starts.push(session.start);
            ends.push(session.last.saturating_add(self.plan.gap_ms));
            for (a, acc) in session.accumulators.iter_mut().enumerate() {
                values[a].push(acc.evaluate()?);
            }
        }
        let mut columns = self.plan.group_by.group_by_columns(
            &window_struct_column(starts, ends),
            &keys,
            "session_aggregate",
        )?;
        let first_aggregate = columns.len();
        for (a, values) in values.into_iter().enumerate() {
            let field = self.plan.group_by.output_schema.field(first_aggregate + a);
            columns.push(scalars_to_array(values, field.data_type())?);
        }
        super::batch_of_rows(&self.plan.group_by.output_schema, columns, n)
    }

    /// The open sessions as a table (accumulators are rebuilt from the state
    /// they hand over, which some of them give only once).
    fn session_table(&mut self) -> Result<RecordBatch> {
        let n = self.sessions.len();
        sessions_table(
            &self.plan.group_by,
            &self.state_schema,
            n,
            self.sessions.iter_mut().map(|(k, s)| (&k[..], s)),
        )
    }

    /// Brings back from disk the sessions of the keys among `key_rows`
    /// that memory does not hold.
    fn read_back(&mut self, key_rows: &datafusion::arrow::row::Rows) -> Result<()> {
        let Some(spilled) = self.spilled.as_mut().filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        let mut missing: Vec<&[u8]> = Vec::new();
        for row in key_rows.iter() {
            let key = row.data();
            // Rows come sorted by key: a key's run asks once.
            if missing.last() != Some(&key) && !self.sessions.contains_key(key) {
                missing.push(key);
            }
        }
        if let Some(table) = spilled.take(&missing)? {
            self.load_sessions(&table)?;
        }
        Ok(())
    }

    /// The sessions of a sessions table, as memory holds them.
    fn sessions_of(&self, table: &RecordBatch) -> Result<Vec<(Box<[u8]>, Session)>> {
        let state_error = || EngineError::State("session_aggregate: bad sessions table".into());
        let keys = table
            .column(0)
            .as_any()
            .downcast_ref::<BinaryArray>()
            .ok_or_else(state_error)?;
        let starts = table
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(state_error)?;
        let lasts = table
            .column(2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(state_error)?;
        let mut sessions = Vec::with_capacity(table.num_rows());
        for row in 0..table.num_rows() {
            let mut accumulators = self.new_accumulators()?;
            let mut column = 3;
            for (a, acc) in accumulators.iter_mut().enumerate() {
                let width = self.plan.group_by.aggregates[a].expr.state_fields()?.len();
                let slice: Vec<ArrayRef> = table.columns()[column..column + width]
                    .iter()
                    .map(|c| c.slice(row, 1))
                    .collect();
                acc.merge_batch(&slice)?;
                column += width;
            }
            sessions.push((
                keys.value(row).into(),
                Session {
                    start: starts.value(row),
                    last: lasts.value(row),
                    accumulators,
                },
            ));
        }
        Ok(sessions)
    }

    /// Puts a sessions table's sessions in memory.
    fn load_sessions(&mut self, table: &RecordBatch) -> Result<()> {
        for (key, session) in self.sessions_of(table)? {
            self.ends
                .insert((session.last.saturating_add(self.plan.gap_ms), key.clone()));
            self.session_bytes += session_bytes(&key, &session);
            self.sessions.insert(key, session);
        }
        Ok(())
    }

    /// Moves every open session to disk, a chunk at a time, so that the
    /// move never holds a second copy of them whole, and the rows waiting
    /// for the watermark.
    fn spill_sessions(&mut self, space: &Arc<crate::spill::SpillSpace>) -> Result<bool> {
        if self.sessions.is_empty() && self.pending.is_empty() {
            return Ok(false);
        }
        if self.spilled.is_none() {
            self.spilled = spilled::SpilledSessions::open(
                space,
                self.state_schema.clone(),
                self.plan.group_by.input_schema.clone(),
                self.plan.group_by.time_column,
                self.plan.gap_ms,
            )?;
        }
        let Some(spilled) = self.spilled.as_mut() else {
            return Ok(false);
        };
        let waiting = std::mem::take(&mut self.pending);
        if !waiting.is_empty() {
            let rows = concat_batches(&self.plan.group_by.input_schema, &waiting)?;
            drop(waiting);
            spilled.write_waiting(&rows)?;
        }
        self.ends.clear();
        let mut sessions: Vec<(Box<[u8]>, Session)> = self.sessions.drain().collect();
        self.session_bytes = 0;
        self.pending_bytes = 0;
        self.sessions.shrink_to_fit();
        while !sessions.is_empty() {
            let at = sessions.len().saturating_sub(SPILL_CHUNK);
            let mut chunk = sessions.split_off(at);
            let table = sessions_table(
                &self.plan.group_by,
                &self.state_schema,
                chunk.len(),
                chunk.iter_mut().map(|(k, s)| (&k[..], s)),
            )?;
            spilled.write(&table)?;
        }
        Ok(true)
    }

    /// Fires the sessions on disk whose end + lateness the watermark
    /// passed, with `over` (memory's), in end order.
    fn fire_spilled(
        &mut self,
        watermark: Timestamp,
        over: &mut Vec<(Box<[u8]>, Session)>,
    ) -> Result<()> {
        let Some(spilled) = self.spilled.as_mut().filter(|s| !s.is_empty()) else {
            return Ok(());
        };
        // end + lateness < watermark.
        let Some(before) = watermark.checked_sub(self.plan.group_by.allowed_lateness_ms) else {
            return Ok(());
        };
        let Some(table) = spilled.take_ended_before(before)? else {
            return Ok(());
        };
        over.extend(self.sessions_of(&table)?);
        let gap = self.plan.gap_ms;
        over.sort_unstable_by(|(a, x), (b, y)| {
            (x.last.saturating_add(gap), a).cmp(&(y.last.saturating_add(gap), b))
        });
        Ok(())
    }
}

/// What a session in memory takes: its key, itself and its accumulators.
fn session_bytes(key: &[u8], session: &Session) -> usize {
    key.len()
        + std::mem::size_of::<Session>()
        + session.accumulators.iter().map(|a| a.size()).sum::<usize>()
}

/// Sessions a spill turns into a table and writes at a time.
const SPILL_CHUNK: usize = 16 * 1024;

/// `n` sessions as a sessions table (`schema`); each one's accumulators
/// are rebuilt from the state they hand over, which some give only once.
fn sessions_table<'a>(
    group_by: &WindowedGroupBy,
    schema: &SchemaRef,
    n: usize,
    sessions: impl Iterator<Item = (&'a [u8], &'a mut Session)>,
) -> Result<RecordBatch> {
    let mut keys: Vec<&[u8]> = Vec::with_capacity(n);
    let mut starts = Vec::with_capacity(n);
    let mut lasts = Vec::with_capacity(n);
    let widths: Vec<usize> = group_by
        .aggregates
        .iter()
        .map(|a| Ok(a.expr.state_fields()?.len()))
        .collect::<Result<_>>()?;
    let mut states: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(n); widths.iter().sum()];
    for (key, session) in sessions {
        keys.push(key);
        starts.push(session.start);
        lasts.push(session.last);
        let mut column = 0;
        for (a, acc) in session.accumulators.iter_mut().enumerate() {
            let values = acc.state()?;
            let arrays = values
                .iter()
                .map(|v| v.to_array())
                .collect::<datafusion::error::Result<Vec<_>>>()?;
            let mut fresh = group_by.aggregates[a].expr.create_accumulator()?;
            fresh.merge_batch(&arrays)?;
            *acc = fresh;
            for value in values {
                states[column].push(value);
                column += 1;
            }
        }
    }
    let rows = keys.len();
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(BinaryArray::from(keys)),
        Arc::new(Int64Array::from(starts)),
        Arc::new(Int64Array::from(lasts)),
    ];
    for (values, field) in states.into_iter().zip(schema.fields().iter().skip(3)) {
        columns.push(scalars_to_array(values, field.data_type())?);
    }
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

impl Operator for SessionAggregateOperator {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, _out: &mut Collector) -> Result<()> {
        let times = to_epoch_millis(batch.column(self.plan.group_by.time_column))?;
        let horizon = self.horizon(self.watermark);
        // Rows before the horizon (from a formerly idle input) come after
        // their sessions were folded: counted, skipped.
        let on_time: BooleanArray = times
            .iter()
            .map(|t| Some(t.is_some_and(|t| t >= horizon)))
            .collect();
        let kept = on_time.true_count();
        self.late_rows += (times.len() - times.null_count() - kept) as u64;
        let kept = if kept == batch.num_rows() {
            batch
        } else if kept > 0 {
            filter_record_batch(&batch, &on_time)?
        } else {
            return Ok(());
        };
        let kept = crate::state::owned_batch::owned(kept);
        self.pending_bytes += kept.get_array_memory_size();
        self.pending.push(kept);
        Ok(())
    }

    /// Sessions fold rows in event-time order: a late row whose place in
    /// that order had passed at its source's watermark is dropped
    /// (counted); the rest wait as any row.
    fn on_late_batch(
        &mut self,
        input: usize,
        late: crate::message::LateBatch,
        out: &mut Collector,
    ) -> Result<()> {
        let (kept, dropped) = crate::operators::late_rows_in_order(
            late,
            self.plan.group_by.time_column,
            self.plan.group_by.allowed_lateness_ms,
        )?;
        self.late_rows += dropped;
        if kept.num_rows() == 0 {
            return Ok(());
        }
        self.on_batch(input, kept, out)
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        self.watermark = watermark;
        let horizon = self.horizon(watermark);
        if let Some(rows) = self.release(horizon)? {
            self.fold(&rows, out)?;
        }
        let mut over = Vec::new();
        while let Some((end, _)) = self.ends.first() {
            if end.saturating_add(self.plan.group_by.allowed_lateness_ms) >= watermark {
                break;
            }
            if let Some((_, key)) = self.ends.pop_first() {
                if let Some(session) = self.sessions.remove(&key) {
                    self.session_bytes = self
                        .session_bytes
                        .saturating_sub(session_bytes(&key, &session));
                    over.push((key, session));
                }
            }
        }
        self.fire_spilled(watermark, &mut over)?;
        if !over.is_empty() {
            out.emit(self.emit(over)?);
        }
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.sessions.len()
            + self
                .spilled
                .as_ref()
                .map_or(0, |s| s.len() + s.waiting_rows())
            + self
                .pending
                .iter()
                .map(RecordBatch::num_rows)
                .sum::<usize>()
    }

    fn state_bytes(&self) -> usize {
        self.session_bytes + self.pending_bytes
    }

    /// Sessions and pending rows are counted as they come and go.
    fn state_bytes_are_counted(&self) -> bool {
        true
    }

    /// Every open session moves to disk, and every row waiting for the
    /// watermark. Sessions whose state has a type Arrow's row format does
    /// not take do not spill.
    fn spill(&mut self, space: &Arc<crate::spill::SpillSpace>) -> Result<bool> {
        self.spill_sessions(space)
    }

    fn spill_stats(&self) -> crate::spill::SpillStats {
        self.spilled
            .as_ref()
            .map(spilled::SpilledSessions::stats)
            .unwrap_or_default()
    }

    /// The stored sessions and memory's, as one `sessions` table.
    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&SessionMeta {
            watermark: self.watermark,
            late_rows: self.late_rows,
        })?;
        let sessions = self.session_table()?;
        // Accumulators rebuilt from their state may size differently.
        self.session_bytes = self
            .sessions
            .iter()
            .map(|(key, session)| session_bytes(key, session))
            .sum();
        let Some(spilled) = self.spilled.as_ref() else {
            snapshot.put_batches(&self.tables[PENDING], self.pending.iter().cloned())?;
            snapshot.put(&self.tables[SESSIONS], sessions)?;
            return Ok(snapshot);
        };
        // Once spilled, both tables are streamed to files (what is on disk,
        // then memory's) rather than gathered in memory.
        let (pending, stored) = (&self.tables[PENDING], &self.tables[SESSIONS]);
        let mut file = spilled.snapshot_file(pending.name(), pending.schema())?;
        spilled.each_waiting(|rows| file.write(&rows))?;
        for rows in &self.pending {
            file.write(rows)?;
        }
        snapshot.put_file(pending, file.finish()?)?;
        let mut file = spilled.snapshot_file(stored.name(), stored.schema())?;
        spilled.each_stored(|chunk| file.write(&chunk))?;
        file.write(&sessions)?;
        snapshot.put_file(stored, file.finish()?)?;
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        let meta: SessionMeta = state.meta()?;
        self.watermark = meta.watermark;
        self.late_rows = meta.late_rows;
        let pending = state.take(&self.tables[PENDING])?;
        if pending.num_rows() > 0 {
            self.pending.push(pending);
        }
        let sessions = state.take(&self.tables[SESSIONS])?;
        if let Some(spilled) = self.spilled.as_mut() {
            spilled.clear()?;
        }
        self.sessions.clear();
        self.ends.clear();
        self.session_bytes = 0;
        self.pending_bytes = self
            .pending
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum();
        self.load_sessions(&sessions)
    }

    fn late_rows(&self) -> u64 {
        self.late_rows
    }
}

#[cfg(test)]
mod tests;
