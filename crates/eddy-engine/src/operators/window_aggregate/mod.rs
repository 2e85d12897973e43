//! Windowed GROUP BY: `GROUP BY tumble(..)|hop(..)|cumulate(..), keys...`
//! with any DataFusion aggregate function.
//!
//! In: batches carrying an event-time column. Out: one row per (window, key)
//! when the window fires, columns laid out as DataFusion's `Aggregate` node
//! lays them out (group columns, the window struct among them, then the
//! aggregates), so the planner's HAVING and SELECT steps downstream apply
//! unchanged.
//!
//! State is incremental and columnar: per open window a DataFusion
//! `GroupValues` interns the key columns to group indices and one
//! `GroupsAccumulator` per aggregate folds each batch in. A window holds one
//! accumulator slot per key, never the rows.
//!
//! ```text
//!            rows for [s, e)                  watermark >= e + allowed_lateness
//!  (absent) ─────────────────> Open(groups, accumulators) ───────────────────────> Fired (emitted, dropped)
//!                                 ▲        │ more rows
//!                                 └────────┘
//! ```
//!
//! Late rows (rows behind their source's watermark, kept: `LateBatch`) count
//! in every window holding them that had not fired at the watermark of
//! their position in their source (`end + allowed_lateness > that
//! watermark`); a row no such window holds is dropped and counted. So an
//! hourly window counts a row a second behind the watermark as long as its
//! hour is open, and a hop row can miss its oldest windows and count in the
//! newer ones, whatever the batch sizes. Sliced, such a row counts in its
//! slice while the slice is open at that watermark; otherwise it becomes a
//! late part of the slice that the windows from the first open one on
//! merge. An unmarked row for a window that already fired at the
//! operator's own watermark (from a formerly idle input) is counted as
//! late and skipped.
//!
//! Open windows are kept by their end (cumulate windows share starts, no two
//! windows share an end).
//!
//! Overlapping windows (hop, cumulate) are sliced, as Flink's slicing window
//! aggregates are: a row is folded once, into the slice holding it (width:
//! the greatest common divisor of slide and width, or the cumulate step);
//! a slice whose end the watermark has passed is frozen into its
//! intermediate state (keys and accumulator state columns); a window fires
//! by merging the frozen slices it spans (`GroupsAccumulator::merge_batch`,
//! the same merge DataFusion's multi-phase aggregation uses), and a slice is
//! dropped when no window left to fire spans it. A hop of width W and slide
//! S costs one update per row instead of W / S.
//!
//! ```text
//!   row at t ──> open slice [floor(t, g), +g)
//!   watermark - lateness >= slice end ──> frozen slice (state table)
//!   watermark - lateness >= window end ──> merge the frozen slices in (start, end] ──> emit
//! ```
//!
//! Checkpoints: one table `windows` with a row per (window, key): the
//! window end, the key columns, then every accumulator's intermediate
//! state columns (DataFusion's `GroupsAccumulator::state`, the same state
//! its multi-phase aggregation merges). DataFusion hands state over only by
//! draining it, so a snapshot rebuilds the open windows from the table it
//! returns, through the very code a restore runs. A checkpoint taken
//! before aggregates were appended to the query's list restores with the
//! new aggregates' initial states, and the new aggregates are NULL in
//! every window begun before the change (`Appended`, in the meta).

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, UInt32Array};
use datafusion::arrow::compute::{concat, is_not_null, take};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::{GroupsAccumulatorAdapter, PhysicalExpr};
use datafusion::physical_plan::aggregates::group_values::{new_group_values, GroupValues};
use datafusion::physical_plan::aggregates::order::GroupOrdering;
use hashbrown::HashMap;

use serde::{Deserialize, Serialize};

mod frozen;
mod spilled;

use super::windowed_group_by::WindowedGroupBy;
use crate::error::{EngineError, Result};
use crate::message::LateBatch;
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::rescale::{self, InstanceState, KeyRange};
use crate::state::declared::{TableKey, TableSpec};
use crate::state::StateSnapshot;
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MIN};
use crate::window::{window_struct_array, WindowSpec};

/// The checkpoint table's window column.
const WINDOW_END: &str = "window_end";
/// The checkpoint table of late rows that count in their slice's later
/// windows only: a state table with the first such window's end last.
const LATE_PARTS: &str = "late_parts";
/// That table's last column.
const FROM_END: &str = "from_window_end";

/// The state tables' places in [`OperatorPlan::state_tables`]: open
/// windows; a sliced window's closed slices and late parts.
const WINDOWS: usize = 0;
const FROZEN: usize = 1;
const LATE: usize = 2;

/// One aggregate of the GROUP BY.
pub type WindowAggregate = super::AggregateCall;

/// Plan of a window aggregation.
#[derive(Debug, Clone)]
pub struct WindowAggregatePlan {
    /// Tumble, hop or cumulate.
    pub window: WindowSpec,
    /// The keys, the aggregates, the event time; a window waits the
    /// lateness after its end before it fires.
    pub group_by: WindowedGroupBy,
}

impl OperatorPlan for WindowAggregatePlan {
    fn kind(&self) -> &'static str {
        "window_aggregate"
    }

    fn parameters(&self) -> crate::shape::Parameters {
        self.group_by
            .parameters(crate::shape::Parameters::new().value("window", self.window))
    }

    fn describe(&self) -> String {
        let sliced = self
            .window
            .slice_ms()
            .map(|g| format!(", in slices of {g}ms"))
            .unwrap_or_default();
        self.group_by.describe(
            self.window,
            format!(
                "fires at watermark >= end + {}ms{sliced}",
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
        let group_by = &self.group_by;
        let key_fields = super::key_fields(&group_by.keys, &group_by.input_schema)?;
        let state_widths = group_by
            .aggregates
            .iter()
            .map(|a| Ok(a.expr.state_fields()?.len()))
            .collect::<Result<Vec<_>>>()?;
        let tables = crate::state::declared::of_plan(self)?;
        Ok(Box::new(WindowAggregateOperator {
            plan: self.clone(),
            state_schema: tables[WINDOWS].schema().clone(),
            tables,
            state_widths,
            key_schema: Arc::new(Schema::new(key_fields)),
            windows: BTreeMap::new(),
            slice_ms: self.window.slice_ms(),
            frozen: frozen::FrozenSlices::default(),
            late_parts: BTreeMap::new(),
            next_end: None,
            watermark: WATERMARK_MIN,
            group_indices: Vec::new(),
            late_rows: 0,
            appended: None,
            spilled: None,
        }))
    }

    /// `windows` holds a row per open window and key: the window's end,
    /// the keys, each aggregate's state; a sliced window's `frozen` holds
    /// closed slices in the same layout, and its `late_parts` the parts of
    /// late rows kept for windows still open (their first open window's
    /// end last). Each keyed by the keys right after the window end.
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        let group_by = &self.group_by;
        let mut fields = vec![Field::new(WINDOW_END, DataType::Int64, false)];
        fields.extend(super::key_fields(&group_by.keys, &group_by.input_schema)?);
        let mut fields = group_by.with_state_fields(fields)?;
        let key = TableKey::Columns(1..1 + group_by.keys.len());
        let windows = Arc::new(Schema::new(fields.clone()));
        let mut tables = vec![TableSpec::new("windows", windows.clone()).keyed(key.clone())];
        if self.window.slice_ms().is_some() {
            fields.push(Field::new(FROM_END, DataType::Int64, false));
            tables.push(TableSpec::new("frozen", windows).keyed(key.clone()));
            tables.push(
                TableSpec::new(LATE_PARTS, Arc::new(Schema::new(fields)))
                    .keyed(key)
                    // Checkpoints written before late rows were kept.
                    .optional(),
            );
        }
        Ok(tables)
    }

    /// The watermark is the least of the parts', the late rows their sum.
    fn rescale_state(&self, parts: Vec<InstanceState>, keys: &KeyRange) -> Result<StateSnapshot> {
        let tables = crate::state::declared::of_plan(self)?;
        rescale::rescaled(parts, &tables, keys, |metas: &[(WindowMeta, bool)]| {
            WindowMeta {
                watermark: crate::rescale::least(metas, |m| m.watermark),
                late_rows: rescale::counted_sum(metas, |m| m.late_rows),
                // Every window before an instance's next end has fired
                // wherever it had rows: the furthest is where all stand.
                next_end: metas.iter().filter_map(|(m, _)| m.next_end).max(),
                appended: metas
                    .iter()
                    .fold(None, |all, (m, _)| Appended::merge(all, m.appended)),
            }
        })
    }

    /// The plan with its first k aggregates, for each k whose appended
    /// aggregates may be NULL: state taken before aggregates were appended
    /// resumes, the new ones NULL in windows that had begun by then (they
    /// missed those windows' earlier rows) and exact after.
    fn earlier_layouts(&self) -> Vec<Arc<dyn OperatorPlan>> {
        let group_by = &self.group_by;
        let fields = group_by.output_schema.fields();
        let first_aggregate = fields.len().saturating_sub(group_by.aggregates.len());
        (0..group_by.aggregates.len())
            .rev()
            .take_while(|&k| fields[first_aggregate + k].is_nullable())
            .map(|k| {
                let schema = Schema::new_with_metadata(
                    fields[..first_aggregate + k].to_vec(),
                    group_by.output_schema.metadata().clone(),
                );
                Arc::new(WindowAggregatePlan {
                    window: self.window,
                    group_by: WindowedGroupBy {
                        output_schema: Arc::new(schema),
                        aggregates: group_by.aggregates[..k].to_vec(),
                        ..group_by.clone()
                    },
                }) as Arc<dyn OperatorPlan>
            })
            .collect()
    }
}

/// Accumulated state of one open window.
struct OpenWindow {
    /// Interns key rows to group indices; `None` when there are no keys (one group).
    groups: Option<Box<dyn GroupValues>>,
    accumulators: Vec<Box<dyn GroupsAccumulator>>,
    num_groups: usize,
}

struct WindowAggregateOperator {
    plan: WindowAggregatePlan,
    key_schema: SchemaRef,
    /// Layout of the checkpoint table: window end, keys, accumulator states.
    state_schema: SchemaRef,
    /// The plan's state tables ([`WINDOWS`], then a sliced window's
    /// [`FROZEN`] and [`LATE`]).
    tables: Vec<TableSpec>,
    /// Number of state columns of each aggregate.
    state_widths: Vec<usize>,
    /// Open windows by their end (open slices, when sliced).
    windows: BTreeMap<i64, OpenWindow>,
    /// The slice width, when windows overlap.
    slice_ms: Option<i64>,
    /// Complete slices by their end: state tables (end, keys, states).
    frozen: frozen::FrozenSlices,
    /// Late rows that count only in the later windows of their slice (the
    /// earlier ones had fired at their source's watermark), by slice end:
    /// the first window end they count in, and their state table.
    late_parts: BTreeMap<i64, Vec<(i64, RecordBatch)>>,
    /// Sliced: the first window end not fired yet.
    next_end: Option<i64>,
    watermark: Timestamp,
    group_indices: Vec<usize>,
    late_rows: u64,
    /// Aggregates appended since the state was first taken, if any.
    appended: Option<Appended>,
    /// Windows and slices moved to disk when memory ran short.
    spilled: Option<super::spilled_windows::SpilledWindows>,
}

fn create_accumulator(expr: &Arc<AggregateFunctionExpr>) -> Result<Box<dyn GroupsAccumulator>> {
    if expr.groups_accumulator_supported() {
        Ok(expr.create_groups_accumulator()?)
    } else {
        let captured = Arc::clone(expr);
        Ok(Box::new(GroupsAccumulatorAdapter::new(move || {
            captured.create_accumulator()
        })))
    }
}

/// The columns of one batch an aggregation needs, evaluated once per batch.
struct Evaluated {
    keys: Vec<ArrayRef>,
    args: Vec<Vec<ArrayRef>>,
    filters: Vec<Option<ArrayRef>>,
}

impl Evaluated {
    fn take(&self, indices: &UInt32Array) -> Result<Evaluated> {
        let pick = |a: &ArrayRef| take(a.as_ref(), indices, None);
        Ok(Evaluated {
            keys: self.keys.iter().map(pick).collect::<Result<_, _>>()?,
            args: self
                .args
                .iter()
                .map(|cols| cols.iter().map(pick).collect::<Result<Vec<_>, _>>())
                .collect::<Result<_, _>>()?,
            filters: self
                .filters
                .iter()
                .map(|f| f.as_ref().map(pick).transpose())
                .collect::<Result<_, _>>()?,
        })
    }
}

impl WindowAggregateOperator {
    fn open_window(&self) -> Result<OpenWindow> {
        let groups = if self.plan.group_by.keys.is_empty() {
            None
        } else {
            Some(new_group_values(
                self.key_schema.clone(),
                &GroupOrdering::None,
            )?)
        };
        let accumulators = self
            .plan
            .group_by
            .aggregates
            .iter()
            .map(|a| create_accumulator(&a.expr))
            .collect::<Result<Vec<_>>>()?;
        Ok(OpenWindow {
            groups,
            accumulators,
            num_groups: 0,
        })
    }

    fn evaluate(&self, batch: &RecordBatch) -> Result<Evaluated> {
        let rows = batch.num_rows();
        let eval = |e: &Arc<dyn PhysicalExpr>| -> Result<ArrayRef> {
            Ok(e.evaluate(batch)?.into_array(rows)?)
        };
        Ok(Evaluated {
            keys: self
                .plan
                .group_by
                .keys
                .iter()
                .map(|(e, _)| eval(e))
                .collect::<Result<_>>()?,
            args: self
                .plan
                .group_by
                .aggregates
                .iter()
                .map(|a| {
                    a.expr
                        .expressions()
                        .iter()
                        .map(eval)
                        .collect::<Result<Vec<_>>>()
                })
                .collect::<Result<_>>()?,
            filters: self
                .plan
                .group_by
                .aggregates
                .iter()
                .map(|a| a.filter.as_ref().map(eval).transpose())
                .collect::<Result<_>>()?,
        })
    }

    fn accumulate(&mut self, end: i64, columns: &Evaluated, rows: usize) -> Result<()> {
        if !self.windows.contains_key(&end) {
            let window = self.open_window()?;
            self.windows.insert(end, window);
        }
        let window = self
            .windows
            .get_mut(&end)
            .ok_or_else(|| EngineError::operator("window_aggregate", "window vanished"))?;
        fold_rows(window, &mut self.group_indices, columns, rows)
    }

    fn fires_at(&self, end: i64) -> i64 {
        end.saturating_add(self.plan.group_by.allowed_lateness_ms)
    }

    fn emit(&self, end: i64, mut window: OpenWindow) -> Result<RecordBatch> {
        let n = window.num_groups;
        let keys = match window.groups.as_mut() {
            Some(groups) => groups.emit(EmitTo::All)?,
            None => Vec::new(),
        };
        let start = self.plan.window.start_of(end);
        let mut columns = self.plan.group_by.group_by_columns(
            &window_struct_array(start, end, n),
            &keys,
            "window_aggregate",
        )?;
        // Aggregates appended since this window began missed its earlier rows.
        let missed_from = self
            .appended
            .filter(|a| start < a.cutoff)
            .map_or(usize::MAX, |a| a.from);
        let first_aggregate = columns.len();
        for (k, acc) in window.accumulators.iter_mut().enumerate() {
            let value = acc.evaluate(EmitTo::All)?;
            columns.push(if k >= missed_from {
                let field = self.plan.group_by.output_schema.field(first_aggregate + k);
                datafusion::arrow::array::new_null_array(field.data_type(), n)
            } else {
                value
            });
        }
        super::batch_of_rows(&self.plan.group_by.output_schema, columns, n)
    }
}

/// Folds `rows` rows of `columns` into `window`'s groups and accumulators.
fn fold_rows(
    window: &mut OpenWindow,
    group_indices: &mut Vec<usize>,
    columns: &Evaluated,
    rows: usize,
) -> Result<()> {
    match window.groups.as_mut() {
        Some(groups) => {
            groups.intern(&columns.keys, group_indices)?;
            window.num_groups = groups.len();
        }
        None => {
            group_indices.clear();
            group_indices.resize(rows, 0);
            window.num_groups = 1;
        }
    }
    for (i, acc) in window.accumulators.iter_mut().enumerate() {
        let filter = columns.filters[i]
            .as_ref()
            .map(|f| {
                f.as_any()
                    .downcast_ref::<BooleanArray>()
                    .cloned()
                    .ok_or_else(|| {
                        EngineError::operator("window_aggregate", "FILTER clause is not boolean")
                    })
            })
            .transpose()?;
        acc.update_batch(
            &columns.args[i],
            group_indices,
            filter.as_ref(),
            window.num_groups,
        )?;
    }
    Ok(())
}

/// Where the rows of a late batch go.
#[derive(Default)]
struct LateTargets {
    /// Open windows (or open slices) by end, and their rows.
    open: BTreeMap<i64, Vec<u32>>,
    /// Slices whose earlier windows had fired: (slice end, first window
    /// end the rows count in), and their rows.
    parts: BTreeMap<(i64, i64), Vec<u32>>,
    /// Rows no window takes.
    dropped: u64,
}

impl WindowAggregateOperator {
    /// Where each late row goes: into every window holding it that had
    /// not fired at its source's watermark (`horizon`: that watermark less
    /// the lateness, or the operator's own when that is further).
    fn late_targets(&self, late: &LateBatch) -> Result<LateTargets> {
        let times = to_epoch_millis(late.rows().column(self.plan.group_by.time_column))?;
        let lateness = self.plan.group_by.allowed_lateness_ms;
        let own = self.watermark.saturating_sub(lateness);
        let spec = self.plan.window;
        let mut targets = LateTargets::default();
        for row in 0..late.num_rows() {
            if times.is_null(row) {
                continue;
            }
            let t = times.value(row);
            let horizon = late.horizon(row, lateness).max(own);
            let later_ends = || {
                (0..spec.windows_per_row())
                    .filter_map(move |k| spec.end_for(t, k))
                    .filter(move |&end| end > horizon)
            };
            match spec.slices() {
                None => {
                    let mut taken = false;
                    for end in later_ends() {
                        targets.open.entry(end).or_default().push(row as u32);
                        taken = true;
                    }
                    targets.dropped += u64::from(!taken);
                }
                Some(slices) => {
                    let slice_end = slices.end_for(t, 0).unwrap_or(t);
                    if slice_end > horizon {
                        // Every window holding the slice ends after the
                        // horizon, and the slice is still open.
                        targets.open.entry(slice_end).or_default().push(row as u32);
                    } else if let Some(from) = later_ends().min() {
                        targets
                            .parts
                            .entry((slice_end, from))
                            .or_default()
                            .push(row as u32);
                    } else {
                        targets.dropped += 1;
                    }
                }
            }
        }
        Ok(targets)
    }

    /// The end of the first slice held, frozen or late.
    fn first_held_slice(&self) -> Option<i64> {
        let frozen = self.frozen.first_end();
        let late = self.late_parts.first_key_value().map(|(&end, _)| end);
        let spilled = self.spilled.as_ref().and_then(|s| s.first_end());
        [frozen, late, spilled].into_iter().flatten().min()
    }

    /// Sliced windows at watermark `watermark`: complete slices are frozen,
    /// then every window whose end the watermark (less the lateness) has
    /// reached is fired from the frozen slices it spans, in end order.
    fn fire_sliced(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        let spec = self.plan.window;
        let horizon = watermark.saturating_sub(self.plan.group_by.allowed_lateness_ms);
        while let Some((&end, _)) = self.windows.first_key_value() {
            if end > horizon {
                break;
            }
            if let Some((end, window)) = self.windows.pop_first() {
                let table = self.state_table(vec![self.window_columns(end, window)?])?;
                self.frozen.push(end, table);
            }
        }
        while let Some(first_slice) = self.first_held_slice() {
            let mut end = spec.first_end_at_or_after(first_slice);
            if let Some(next) = self.next_end {
                end = end.max(next);
            }
            if end > horizon {
                break;
            }
            let slices = spec.start_of(end).saturating_add(1)..=end;
            let mut tables: Vec<RecordBatch> = Vec::new();
            for (_, frozen) in self.frozen.range(slices.clone()) {
                tables.extend(frozen.iter().cloned());
            }
            for (_, parts) in self.late_parts.range(slices.clone()) {
                for (from, table) in parts {
                    if *from <= end {
                        tables.push(table.clone());
                    }
                }
            }
            if self.spilled_in(slices.clone()) {
                self.fire_spilled(end, &tables, slices, out)?;
            } else if !tables.is_empty() {
                let mut window = self.open_window()?;
                for table in &tables {
                    self.merge_table(&mut window, table)?;
                }
                out.emit(self.emit(end, window)?);
            }
            let next = end.saturating_add(spec.end_step_ms());
            self.next_end = Some(next);
            // Slices no window left to fire spans.
            let keep_after = spec.start_of(next);
            self.frozen.remove_through(keep_after);
            while self
                .late_parts
                .first_key_value()
                .is_some_and(|(&slice_end, _)| slice_end <= keep_after)
            {
                self.late_parts.pop_first();
            }
            if let Some(spilled) = self.spilled.as_mut() {
                spilled.remove_through(keep_after)?;
            }
        }
        Ok(())
    }
}

/// What a window aggregation checkpoints besides its `windows` table.
#[derive(Debug, Serialize, Deserialize)]
struct WindowMeta {
    watermark: Timestamp,
    late_rows: u64,
    /// Sliced windows: the first window end not fired yet.
    #[serde(default)]
    next_end: Option<i64>,
    /// Aggregates appended to the query since state was first taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    appended: Option<Appended>,
}

/// Aggregates appended to a running query's list (see
/// [`WindowAggregatePlan::earlier_layouts`]): the aggregates from index
/// `from` on are NULL in every window that begins before `cutoff` (the
/// greatest window or slice end the state held when they were appended:
/// such a window may have had rows they never saw).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Appended {
    from: usize,
    cutoff: i64,
}

impl Appended {
    /// Both at once: the earlier aggregates and the later cutoff.
    fn merge(a: Option<Appended>, b: Option<Appended>) -> Option<Appended> {
        match (a, b) {
            (Some(a), Some(b)) => Some(Appended {
                from: a.from.min(b.from),
                cutoff: a.cutoff.max(b.cutoff),
            }),
            (a, b) => a.or(b),
        }
    }
}

impl WindowAggregateOperator {
    /// A window's (or slice's) rows of the state table: its end, the keys,
    /// every accumulator's intermediate state. Drains the window.
    fn window_columns(&self, end: i64, mut window: OpenWindow) -> Result<Vec<ArrayRef>> {
        let n = window.num_groups;
        let mut columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(vec![end; n]))];
        if let Some(groups) = window.groups.as_mut() {
            columns.extend(groups.emit(EmitTo::All)?);
        }
        for acc in window.accumulators.iter_mut() {
            columns.extend(acc.state(EmitTo::All)?);
        }
        if columns.len() != self.state_schema.fields().len() {
            return Err(EngineError::State(
                "window_aggregate: accumulator state has an unexpected shape".into(),
            ));
        }
        Ok(columns)
    }

    /// One state table of several windows' columns.
    fn state_table(&self, windows: Vec<Vec<ArrayRef>>) -> Result<RecordBatch> {
        let mut parts: Vec<Vec<ArrayRef>> = vec![Vec::new(); self.state_schema.fields().len()];
        for columns in windows {
            for (part, column) in parts.iter_mut().zip(columns) {
                part.push(column);
            }
        }
        let columns = parts
            .into_iter()
            .zip(self.state_schema.fields())
            .map(|(part, field)| {
                let refs: Vec<&dyn Array> = part.iter().map(|a| a.as_ref()).collect();
                if refs.is_empty() {
                    Ok(datafusion::arrow::array::new_empty_array(field.data_type()))
                } else {
                    concat(&refs)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        super::batch_of(&self.state_schema, columns)
    }

    /// Drains every open window into the checkpoint table.
    fn drain_windows(&mut self) -> Result<RecordBatch> {
        let windows = std::mem::take(&mut self.windows)
            .into_iter()
            .map(|(end, window)| self.window_columns(end, window))
            .collect::<Result<Vec<_>>>()?;
        self.state_table(windows)
    }

    /// Merges the rows of a state table (keys and intermediate states) into
    /// `window`.
    fn merge_table(&self, window: &mut OpenWindow, table: &RecordBatch) -> Result<()> {
        let keys = self.plan.group_by.keys.len();
        let n = table.num_rows();
        let mut indices = Vec::with_capacity(n);
        let total = match window.groups.as_mut() {
            Some(groups) => {
                groups.intern(&table.columns()[1..1 + keys], &mut indices)?;
                groups.len()
            }
            None => {
                indices.resize(n, 0);
                usize::from(n > 0).max(window.num_groups)
            }
        };
        let mut column = 1 + keys;
        for (acc, &width) in window.accumulators.iter_mut().zip(&self.state_widths) {
            acc.merge_batch(&table.columns()[column..column + width], &indices, total)?;
            column += width;
        }
        window.num_groups = total;
        Ok(())
    }

    /// A checkpoint table taken before aggregates were appended to the
    /// query (fewer state columns than the plan's), with the appended
    /// aggregates' initial states added, and [`Appended`] recorded; any
    /// other table as it is.
    fn widened(&mut self, table: RecordBatch) -> Result<RecordBatch> {
        let have = table.num_columns();
        if have >= self.state_schema.fields().len() {
            return Ok(table);
        }
        let mut width = 1 + self.plan.group_by.keys.len();
        let present = self
            .state_widths
            .iter()
            .take_while(|&&w| {
                width += w;
                width <= have
            })
            .count();
        let expected: usize =
            1 + self.plan.group_by.keys.len() + self.state_widths[..present].iter().sum::<usize>();
        if expected != have {
            return Err(EngineError::State(
                "window_aggregate: checkpoint table has the wrong columns".into(),
            ));
        }
        let n = table.num_rows();
        let empty = RecordBatch::new_empty(self.plan.group_by.input_schema.clone());
        let mut columns = table.columns().to_vec();
        for aggregate in &self.plan.group_by.aggregates[present..] {
            // Each group's initial state: no rows folded in.
            let mut accumulator = create_accumulator(&aggregate.expr)?;
            let args = aggregate
                .expr
                .expressions()
                .iter()
                .map(|e| Ok(e.evaluate(&empty)?.into_array(0)?))
                .collect::<Result<Vec<_>>>()?;
            accumulator.update_batch(&args, &[], None, n)?;
            columns.extend(accumulator.state(EmitTo::All)?);
        }
        let ends = table
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .and_then(datafusion::arrow::compute::max);
        if let Some(cutoff) = ends {
            self.appended = Appended::merge(
                self.appended,
                Some(Appended {
                    from: present,
                    cutoff,
                }),
            );
        }
        super::batch_of(&self.state_schema, columns)
    }

    /// Opens the windows of a checkpoint table.
    fn load_windows(&mut self, table: &RecordBatch) -> Result<()> {
        if table.num_columns() != self.state_schema.fields().len() {
            return Err(EngineError::State(
                "window_aggregate: checkpoint table has the wrong columns".into(),
            ));
        }
        let mut ends = table
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| {
                EngineError::State("window_aggregate: the window column is not BIGINT".into())
            })?
            .clone();
        // Checkpoints of earlier versions keyed tumble and hop windows by start.
        if table.schema().field(0).name() == "window_start" {
            let width = self.plan.window.width_ms().ok_or_else(|| {
                EngineError::State("window_aggregate: a checkpoint keyed by window start".into())
            })?;
            ends = ends
                .iter()
                .map(|s| s.map(|s| s.saturating_add(width)))
                .collect();
        }
        let mut row = 0;
        while row < table.num_rows() {
            let window_end = ends.value(row);
            let mut end = row + 1;
            while end < table.num_rows() && ends.value(end) == window_end {
                end += 1;
            }
            // A window's rows may come in several runs (the tables of
            // several instances, when a job resumes at another parallelism).
            let mut window = match self.windows.remove(&window_end) {
                Some(window) => window,
                None => self.open_window()?,
            };
            self.merge_table(&mut window, &table.slice(row, end - row))?;
            self.windows.insert(window_end, window);
            row = end;
        }
        Ok(())
    }
}

impl WindowAggregateOperator {
    /// The late parts as one checkpoint table: the state table's columns,
    /// then the first window end each row counts in.
    fn late_parts_table(&self) -> Result<RecordBatch> {
        let schema = self.tables[LATE].schema().clone();
        let mut batches = Vec::new();
        for (from, table) in self.late_parts.values().flatten() {
            let mut columns = table.columns().to_vec();
            columns.push(Arc::new(Int64Array::from(vec![*from; table.num_rows()])));
            batches.push(RecordBatch::try_new(schema.clone(), columns)?);
        }
        Ok(datafusion::arrow::compute::concat_batches(
            &schema, &batches,
        )?)
    }

    /// Holds the late parts of a checkpoint table again.
    fn load_late_parts(&mut self, table: RecordBatch) -> Result<()> {
        let width = table.num_columns();
        if width < 2 {
            return Err(EngineError::State(
                "window_aggregate: the late parts table has the wrong columns".into(),
            ));
        }
        let from = table
            .column(width - 1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .cloned()
            .ok_or_else(|| {
                EngineError::State("window_aggregate: from_window_end is not BIGINT".into())
            })?;
        let state = RecordBatch::try_new(
            Arc::new(Schema::new(
                table.schema().fields()[..width - 1]
                    .iter()
                    .map(|f| f.as_ref().clone())
                    .collect::<Vec<_>>(),
            )),
            table.columns()[..width - 1].to_vec(),
        )?;
        let state = self.widened(state)?;
        let ends = state
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .cloned()
            .ok_or_else(|| {
                EngineError::State("window_aggregate: the slice column is not BIGINT".into())
            })?;
        let mut row = 0;
        while row < state.num_rows() {
            let (slice_end, first) = (ends.value(row), from.value(row));
            let mut end = row + 1;
            while end < state.num_rows() && ends.value(end) == slice_end && from.value(end) == first
            {
                end += 1;
            }
            self.late_parts
                .entry(slice_end)
                .or_default()
                .push((first, state.slice(row, end - row)));
            row = end;
        }
        Ok(())
    }
}

impl Operator for WindowAggregateOperator {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, _out: &mut Collector) -> Result<()> {
        let time_column = batch.column(self.plan.group_by.time_column);
        let batch = if time_column.null_count() > 0 {
            let mask = is_not_null(time_column.as_ref())?;
            datafusion::arrow::compute::filter_record_batch(&batch, &mask)?
        } else {
            batch
        };
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(());
        }
        let times = to_epoch_millis(batch.column(self.plan.group_by.time_column))?;
        let columns = self.evaluate(&batch)?;
        // Sliced, a row goes to the one slice holding it.
        let (spec, per_row) = match self.plan.window.slices() {
            Some(slices) => (slices, 1),
            None => (self.plan.window, self.plan.window.windows_per_row()),
        };
        for k in 0..per_row {
            // Fast path: every row falls into the same k-th window.
            let first = spec.end_for(times.value(0), k);
            let uniform =
                first.is_some() && times.values().iter().all(|&t| spec.end_for(t, k) == first);
            let buckets: Vec<(i64, Option<UInt32Array>)> =
                if let (true, Some(end)) = (uniform, first) {
                    vec![(end, None)]
                } else {
                    let mut by_end: HashMap<i64, Vec<u32>> = HashMap::new();
                    for (row, &t) in times.values().iter().enumerate() {
                        if let Some(end) = spec.end_for(t, k) {
                            by_end.entry(end).or_default().push(row as u32);
                        }
                    }
                    let mut buckets: Vec<_> = by_end
                        .into_iter()
                        .map(|(s, rows)| (s, Some(UInt32Array::from(rows))))
                        .collect();
                    buckets.sort_by_key(|(s, _)| *s);
                    buckets
                };
            for (end, indices) in buckets {
                // The row's last window (for a slice: the last window of any
                // of its rows, all the same, as slices divide the slide).
                let last_end = match self.slice_ms {
                    Some(width) => self
                        .plan
                        .window
                        .end_for(end.saturating_sub(width), 0)
                        .unwrap_or(end),
                    None => end,
                };
                if self.fires_at(last_end) <= self.watermark {
                    // The window already fired: only rows of a formerly idle
                    // input or of a late-row stream get here. Counted, skipped.
                    let n = indices.as_ref().map(|i| i.len()).unwrap_or(rows);
                    if k == 0 {
                        self.late_rows += n as u64;
                    }
                    tracing::debug!(
                        window_end = end,
                        rows = n,
                        "rows for a window that already fired; skipped"
                    );
                    continue;
                }
                match indices {
                    None => self.accumulate(end, &columns, rows)?,
                    Some(indices) => {
                        let n = indices.len();
                        let subset = columns.take(&indices)?;
                        self.accumulate(end, &subset, n)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A late row counts in each window holding it that had not fired at
    /// its source's watermark, and is dropped (counted) when none had not.
    fn on_late_batch(
        &mut self,
        _input: usize,
        late: LateBatch,
        _out: &mut Collector,
    ) -> Result<()> {
        let targets = self.late_targets(&late)?;
        self.late_rows += targets.dropped;
        if targets.open.is_empty() && targets.parts.is_empty() {
            return Ok(());
        }
        let columns = self.evaluate(late.rows())?;
        for (end, rows) in targets.open {
            let indices = UInt32Array::from(rows);
            let subset = columns.take(&indices)?;
            self.accumulate(end, &subset, indices.len())?;
        }
        for ((slice_end, from), rows) in targets.parts {
            let indices = UInt32Array::from(rows);
            let subset = columns.take(&indices)?;
            let mut part = self.open_window()?;
            fold_rows(&mut part, &mut self.group_indices, &subset, indices.len())?;
            let table = self.state_table(vec![self.window_columns(slice_end, part)?])?;
            self.late_parts
                .entry(slice_end)
                .or_default()
                .push((from, table));
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        self.watermark = watermark;
        if self.slice_ms.is_some() {
            return self.fire_sliced(watermark, out);
        }
        loop {
            let in_memory = self.windows.first_key_value().map(|(&end, _)| end);
            let on_disk = self.spilled.as_ref().and_then(|s| s.first_end());
            let Some(end) = [in_memory, on_disk].into_iter().flatten().min() else {
                break;
            };
            if self.fires_at(end) > watermark {
                break;
            }
            let window = self.windows.remove(&end);
            if on_disk == Some(end) {
                let memory = window
                    .map(|w| self.state_table(vec![self.window_columns(end, w)?]))
                    .transpose()?;
                self.fire_spilled(end, memory.as_slice(), end..=end, out)?;
                if let Some(spilled) = self.spilled.as_mut() {
                    spilled.remove(end)?;
                }
            } else if let Some(window) = window {
                out.emit(self.emit(end, window)?);
            }
        }
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.spilled.as_ref().map_or(0, |s| s.rows())
            + self.windows.values().map(|w| w.num_groups).sum::<usize>()
            + self.frozen.rows()
            + self
                .late_parts
                .values()
                .flatten()
                .map(|(_, t)| t.num_rows())
                .sum::<usize>()
    }

    fn state_bytes(&self) -> usize {
        self.windows
            .values()
            .map(|w| {
                w.groups.as_ref().map_or(0, |g| g.size())
                    + w.accumulators.iter().map(|a| a.size()).sum::<usize>()
            })
            .sum::<usize>()
            + self.frozen.bytes()
            + self
                .late_parts
                .values()
                .flatten()
                .map(|(_, t)| t.get_array_memory_size())
                .sum::<usize>()
    }

    /// Sized after every message: the open windows (each accumulator
    /// keeps its size) and the late parts are few; the frozen slices'
    /// bytes are counted as they come and go.
    fn state_bytes_are_counted(&self) -> bool {
        true
    }

    /// Every open window and frozen slice moves to disk (late parts stay);
    /// a window fires from both, a part of its keys at a time.
    fn spill(&mut self, space: &Arc<crate::spill::SpillSpace>) -> Result<bool> {
        self.spill_windows(space)
    }

    fn spill_stats(&self) -> crate::spill::SpillStats {
        self.spilled.as_ref().map(|s| s.stats()).unwrap_or_default()
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&WindowMeta {
            watermark: self.watermark,
            late_rows: self.late_rows,
            next_end: self.next_end,
            appended: self.appended,
        })?;
        let sliced = self.slice_ms.is_some();
        let Some(spilled) = self.spilled.as_ref() else {
            let table = self.drain_windows()?;
            self.load_windows(&table)?;
            snapshot.put(&self.tables[WINDOWS], table)?;
            if sliced {
                let frozen = datafusion::arrow::compute::concat_batches(
                    &self.state_schema,
                    self.frozen.tables(),
                )?;
                snapshot.put(&self.tables[FROZEN], frozen)?;
                snapshot.put(&self.tables[LATE], self.late_parts_table()?)?;
            }
            return Ok(snapshot);
        };
        // Once spilled, the windows and frozen slices are streamed to
        // files part by part (disk's merged with memory's, then the rest
        // of memory's) rather than gathered in memory.
        let windows = self.tables[WINDOWS].clone();
        let frozen = if sliced {
            self.tables.get(FROZEN).cloned()
        } else {
            None
        };
        let mut open_file = spilled.snapshot_file(windows.name(), windows.schema())?;
        let mut frozen_file = match &frozen {
            Some(spec) => Some((spec, spilled.snapshot_file(spec.name(), spec.schema())?)),
            None => None,
        };
        self.compact_spilled(|is_frozen, table| match frozen_file.as_mut() {
            Some((_, file)) if is_frozen => file.write(&table),
            _ => open_file.write(&table),
        })?;
        let table = self.drain_windows()?;
        self.load_windows(&table)?;
        open_file.write(&table)?;
        snapshot.put_file(&windows, open_file.finish()?)?;
        if let Some((spec, mut file)) = frozen_file {
            for table in self.frozen.tables() {
                file.write(table)?;
            }
            snapshot.put_file(spec, file.finish()?)?;
            snapshot.put(&self.tables[LATE], self.late_parts_table()?)?;
        }
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        if let Some(spilled) = self.spilled.as_mut() {
            spilled.clear()?;
        }
        let meta: WindowMeta = state.meta()?;
        self.watermark = meta.watermark;
        self.late_rows = meta.late_rows;
        self.next_end = meta.next_end;
        self.appended = meta.appended;
        let table = self.widened(state.take(&self.tables[WINDOWS])?)?;
        self.load_windows(&table)?;
        if self.slice_ms.is_some() {
            let frozen = self.widened(state.take(&self.tables[FROZEN])?)?;
            let ends = frozen
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| {
                    EngineError::State("window_aggregate: the slice column is not BIGINT".into())
                })?
                .clone();
            let mut row = 0;
            while row < frozen.num_rows() {
                let slice_end = ends.value(row);
                let mut end = row + 1;
                while end < frozen.num_rows() && ends.value(end) == slice_end {
                    end += 1;
                }
                self.frozen.push(slice_end, frozen.slice(row, end - row));
                row = end;
            }
            // Checkpoints written before late rows were kept have none.
            if let Some(table) = state.take_if_present(&self.tables[LATE])? {
                self.load_late_parts(table)?;
            }
        }
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.late_rows
    }
}

#[cfg(test)]
mod tests;
