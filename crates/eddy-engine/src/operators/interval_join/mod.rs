//! Interval join of two streams, Flink style:
//! `l [LEFT|RIGHT|FULL] JOIN r ON l.k = r.k AND r.t BETWEEN l.t + lower AND l.t + upper`.
//!
//! In: batches on input 0 (left) and input 1 (right), each with an
//! event-time column. Out: joined rows in the join schema (left columns then
//! right columns), and for outer joins the null-padded rows of the preserved
//! side(s), each exactly once.
//!
//! Every pair is produced when its later row arrives: an arriving batch
//! probes the other side's buffered rows (hash on the equi-keys in Arrow row
//! format, then the time bound, then any residual predicate evaluated on the
//! joined batch), then joins its own side's buffer. Watermark W (minimum of
//! both inputs) and the larger allowed lateness L bound every future row's
//! time from below by `W - L`, so:
//!
//! ```text
//!   left row  tl is evicted when tl + upper < W - L   (no future right row can match)
//!   right row tr is evicted when tr - lower < W - L   (no future left row can match)
//!   evicted and never matched + side preserved by the join -> emitted null-padded
//! ```
//!
//! Output rows carry the left row's event time. Rows emitted later can be up
//! to `upper` older than `W - L`, so the operator forwards `W - max(upper, 0)`
//! as its watermark: no output row of on-time rows is ever late downstream.
//!
//! Late rows (behind their source's watermark `M`, kept: `LateBatch`) are
//! judged at `H = M - L`, the horizon at their position in their source,
//! never at the operator's own watermark:
//!
//! ```text
//!   a left row at tl pairs only with right rows tr >= H + lower (still held at H)
//!   a right row at tr pairs only with left rows tl >= H - upper
//!   a late row no partner held at H could pair with is dropped (counted);
//!     on a side the join preserves it comes out null-padded at once (Flink's rule)
//! ```
//!
//! Both conditions hold for any pair of on-time rows, so only pairs with a
//! late row are ever refused, and each pair is decided the same whichever
//! row comes first (a late row waits in state with its mark). Output rows
//! of a late row go on late, marked `M - max(upper, 0)` (the larger mark
//! when both rows came late), as the join's output watermark would be.
//!
//! A regular join ([`JoinBound::Unbounded`], an inner join without a time
//! bound) keeps every row for the life of the job: each pair is still
//! produced when its later row arrives, nothing is evicted, and since a row
//! can pair with one arbitrarily later, its output has no event time (the
//! operator forwards no watermark until both inputs end).
//!
//! Checkpoints: tables `left` and `right` hold each side's buffered rows in
//! the input's columns plus a `__matched` flag; a restore inserts them as
//! if they had just arrived, without probing.
//!
//! Past the memory budget ([`Operator::spill`]) every buffered row goes to
//! disk, in runs by time ([`spilled`]), and memory starts afresh. A batch
//! first brings back the other side's rows it could pair with (from the
//! runs its intervals meet whose key filters may hold its keys), then
//! probes as ever; a watermark first brings back the runs whose first row
//! it evicts, so eviction, and the null-padded rows of outer joins, happen
//! as they would in memory.

pub mod spilled;

use std::sync::Arc;

use datafusion::arrow::array::{
    new_null_array, Array, ArrayRef, BooleanArray, Int64Array, UInt32Array,
};
use datafusion::arrow::compute::{filter_record_batch, interleave, take};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::row::RowConverter;
use datafusion::physical_expr::PhysicalExpr;

use self::spilled::{SpilledRows, RUN_ROWS};
use super::join_state::{KeyedRows, Lonely, RowRef, SideState, MAX_BATCH_ROWS};
use hashbrown::HashMap;

use crate::error::{EngineError, Result};
use crate::message::LateBatch;
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::state::declared::{TableKey, TableSpec};
use crate::state::StateSnapshot;
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MAX, WATERMARK_MIN};

/// Which rows without a partner are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// Only pairs.
    Inner,
    /// Pairs, and left rows without a partner.
    Left,
    /// Pairs, and right rows without a partner.
    Right,
    /// Pairs, and rows of either side without a partner.
    Full,
    /// Left rows with a partner, once each, left columns only (`EXISTS`).
    Semi,
    /// Left rows without a partner, left columns only (`NOT EXISTS`).
    Anti,
}

impl JoinKind {
    /// The SQL keyword: `INNER`, `LEFT`, `RIGHT`, `FULL`, `SEMI` or `ANTI`.
    pub fn name(self) -> &'static str {
        match self {
            JoinKind::Inner => "INNER",
            JoinKind::Left => "LEFT",
            JoinKind::Right => "RIGHT",
            JoinKind::Full => "FULL",
            JoinKind::Semi => "SEMI",
            JoinKind::Anti => "ANTI",
        }
    }
    /// Whether the output is the left rows alone (semi and anti joins).
    pub fn left_only(self) -> bool {
        matches!(self, JoinKind::Semi | JoinKind::Anti)
    }
    /// Whether rows of this side without a partner are kept (padded, or
    /// alone for an anti join).
    pub fn keeps_left(self) -> bool {
        matches!(self, JoinKind::Left | JoinKind::Full | JoinKind::Anti)
    }
    /// Whether rows of this side without a partner are kept (padded).
    pub fn keeps_right(self) -> bool {
        matches!(self, JoinKind::Right | JoinKind::Full)
    }
}

/// The time condition on `d = right time - left time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBound {
    /// Smallest allowed `d`.
    pub lower_ms: i64,
    /// Whether `d == lower_ms` matches.
    pub lower_inclusive: bool,
    /// Largest allowed `d`.
    pub upper_ms: i64,
    /// Whether `d == upper_ms` matches.
    pub upper_inclusive: bool,
}

impl TimeBound {
    /// Every pair of times.
    pub const ANY: TimeBound = TimeBound {
        lower_ms: i64::MIN,
        lower_inclusive: true,
        upper_ms: i64::MAX,
        upper_inclusive: true,
    };

    /// Whether a left row at `left` and a right row at `right` are close enough.
    pub fn holds(&self, left: Timestamp, right: Timestamp) -> bool {
        let d = right.saturating_sub(left);
        let above = if self.lower_inclusive {
            d >= self.lower_ms
        } else {
            d > self.lower_ms
        };
        let below = if self.upper_inclusive {
            d <= self.upper_ms
        } else {
            d < self.upper_ms
        };
        above && below
    }
}

impl std::fmt::Display for TimeBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lo = if self.lower_inclusive { "<=" } else { "<" };
        let hi = if self.upper_inclusive { "<=" } else { "<" };
        write!(
            f,
            "{}ms {lo} right.t - left.t {hi} {}ms",
            self.lower_ms, self.upper_ms
        )
    }
}

/// What the join does to a batch of one input as it arrives, before
/// anything else: keep the rows its own conditions pass (a condition on
/// that side only, where the join does not preserve the side), then keep
/// only the columns the join and its readers use. Its state then holds no
/// more than it needs, without an operator in between.
#[derive(Debug, Clone, Default)]
pub struct JoinInput {
    /// Rows failing it are dropped (over the input's own columns).
    pub filter: Option<Arc<dyn PhysicalExpr>>,
    /// The input's columns kept, in order (`None`: all); the side's schema,
    /// keys and time column refer to the kept columns.
    pub columns: Option<Vec<usize>>,
}

impl JoinInput {
    /// `expr`, over the kept columns, as the same expression over the
    /// input's own columns.
    pub fn over_input(&self, expr: &Arc<dyn PhysicalExpr>) -> Arc<dyn PhysicalExpr> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        let Some(columns) = &self.columns else {
            return Arc::clone(expr);
        };
        Arc::clone(expr)
            .transform(|e| {
                Ok(
                    match e.downcast_ref::<datafusion::physical_expr::expressions::Column>() {
                        Some(c) => Transformed::yes(Arc::new(
                            datafusion::physical_expr::expressions::Column::new(
                                c.name(),
                                columns.get(c.index()).copied().unwrap_or(c.index()),
                            ),
                        )
                            as Arc<dyn PhysicalExpr>),
                        None => Transformed::no(e),
                    },
                )
            })
            .map_or_else(|_| Arc::clone(expr), |t| t.data)
    }

    /// `batch` filtered and projected.
    pub fn prepare(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let batch = match &self.filter {
            Some(filter) => {
                let mask = super::predicate_mask(filter, &batch, "interval_join")?;
                filter_record_batch(&batch, &mask)?
            }
            None => batch,
        };
        Ok(match &self.columns {
            Some(columns) => batch.project(columns)?,
            None => batch,
        })
    }

    /// Late rows filtered and projected, with the marks of the rows kept.
    pub fn prepare_late(&self, late: LateBatch) -> Result<LateBatch> {
        let late = match &self.filter {
            Some(filter) => {
                let mask = super::predicate_mask(filter, late.rows(), "interval_join")?;
                late.filter(&mask)?
            }
            None => late,
        };
        match &self.columns {
            Some(columns) => {
                let projected = late.rows().project(columns)?;
                late.with_rows(projected)
            }
            None => Ok(late),
        }
    }

    fn describe(&self, side: &str) -> String {
        let filter = self
            .filter
            .as_ref()
            .map(|f| format!(" filter({f})"))
            .unwrap_or_default();
        let columns = self
            .columns
            .as_ref()
            .map(|c| format!(" columns{c:?}"))
            .unwrap_or_default();
        if filter.is_empty() && columns.is_empty() {
            String::new()
        } else {
            format!("; {side} input:{filter}{columns}")
        }
    }
}

/// How event time limits the rows that pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinBound {
    /// An interval join: rows pair only within `bound`, and a row is
    /// dropped once the watermark rules out further partners.
    Interval {
        /// Event-time column of the left input.
        left_time: usize,
        /// Event-time column of the right input.
        right_time: usize,
        /// The time condition.
        bound: TimeBound,
    },
    /// A regular (inner) join: every row is kept for the life of the job
    /// and pairs with every row of its key on the other side.
    Unbounded,
}

/// Plan of an interval join (or, with [`JoinBound::Unbounded`], a regular
/// inner join).
///
/// ```
/// use std::sync::Arc;
/// use datafusion::arrow::datatypes::{DataType, Field, Schema};
/// use datafusion::physical_expr::expressions::Column;
/// use eddy_engine::operator::OperatorPlan;
/// use eddy_engine::operators::interval_join::{IntervalJoinPlan, JoinBound, JoinKind};
///
/// let side = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
/// let plan = IntervalJoinPlan {
///     kind: JoinKind::Inner,
///     left_schema: side.clone(),
///     right_schema: side.clone(),
///     output_schema: Arc::new(Schema::new(vec![
///         Field::new("k", DataType::Int64, true),
///         Field::new("k", DataType::Int64, true),
///     ])),
///     left_keys: vec![Arc::new(Column::new("k", 0))],
///     right_keys: vec![Arc::new(Column::new("k", 0))],
///     time: JoinBound::Unbounded,
///     allowed_lateness_ms: 0,
///     residual: None,
///     inputs: Default::default(),
///     windows: [None, None],
/// };
/// assert_eq!(plan.kind(), "regular_join");
/// ```
#[derive(Debug, Clone)]
pub struct IntervalJoinPlan {
    /// Inner or outer.
    pub kind: JoinKind,
    /// Schema of input 0.
    pub left_schema: SchemaRef,
    /// Schema of input 1.
    pub right_schema: SchemaRef,
    /// Left columns then right columns.
    pub output_schema: SchemaRef,
    /// Equi-join keys over the left input.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Equi-join keys over the right input (same types, same order).
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The time columns and bound, or none (a regular join).
    pub time: JoinBound,
    /// The larger allowed lateness of the two inputs.
    pub allowed_lateness_ms: i64,
    /// Further conditions, over the output schema.
    pub residual: Option<Arc<dyn PhysicalExpr>>,
    /// What each input's batches go through on arrival: [left, right].
    /// `left_schema` and `right_schema` are the schemas after it.
    pub inputs: [JoinInput; 2],
    /// A window join of window table functions' rows: each side's window
    /// (`None` otherwise). A late row whose window had fired at its
    /// source's watermark is dropped, as Flink's window join drops it.
    pub windows: [Option<JoinWindow>; 2],
}

/// The window of one side of a window join: a column holding a bound of
/// the row's window, and how far that bound is from the window's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinWindow {
    /// The column (of the side's schema), a timestamp.
    pub column: usize,
    /// Its value plus this is the window's end.
    pub to_end_ms: i64,
}

impl OperatorPlan for IntervalJoinPlan {
    fn kind(&self) -> &'static str {
        match self.time {
            JoinBound::Interval { .. } => "interval_join",
            JoinBound::Unbounded => "regular_join",
        }
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        let side = |input: &JoinInput| {
            format!(
                "filter {} columns {:?}",
                input
                    .filter
                    .as_ref()
                    .map_or("-".to_string(), |f| f.to_string()),
                input.columns
            )
        };
        P::new()
            .debug("kind", self.kind)
            .exprs("left_keys", &self.left_keys)
            .exprs("right_keys", &self.right_keys)
            .debug("time", self.time)
            .value("allowed_lateness_ms", self.allowed_lateness_ms)
            .expr("residual", self.residual.as_ref())
            .value("left_input", side(&self.inputs[0]))
            .value("right_input", side(&self.inputs[1]))
            .debug("windows", self.windows)
    }

    fn describe(&self) -> String {
        let keys = |k: &[Arc<dyn PhysicalExpr>]| {
            k.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let residual = self
            .residual
            .as_ref()
            .map(|r| format!(" and {r}"))
            .unwrap_or_default();
        let bound = match self.time {
            JoinBound::Interval { bound, .. } => bound.to_string(),
            JoinBound::Unbounded => "no time bound (every row kept)".to_string(),
        };
        format!(
            "{:?} on [{}] = [{}], {bound}{residual}{}{}",
            self.kind,
            keys(&self.left_keys),
            keys(&self.right_keys),
            self.inputs[0].describe("left"),
            self.inputs[1].describe("right"),
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    /// Each side by its own keys, as expressions over the side's input
    /// rows (the keys the join keeps refer to the columns it keeps).
    fn required_input_distribution(&self, input: usize) -> crate::operator::Distribution {
        let (keys, side) = match input {
            0 => (&self.left_keys, &self.inputs[0]),
            _ => (&self.right_keys, &self.inputs[1]),
        };
        crate::operator::Distribution::hash(keys.iter().map(|key| side.over_input(key)).collect())
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        // Pairs are built as both sides' columns; a semi or anti join's
        // output is the left's alone.
        let pair_schema = if self.kind.left_only() {
            Arc::new(datafusion::arrow::datatypes::Schema::new(
                self.left_schema
                    .fields()
                    .iter()
                    .chain(self.right_schema.fields())
                    .map(|f| f.as_ref().clone().with_nullable(true))
                    .collect::<Vec<_>>(),
            ))
        } else {
            self.output_schema.clone()
        };
        Ok(Box::new(IntervalJoinOperator {
            pair_schema,
            tables: self.state_tables()?,
            plan: self.clone(),
            converter: super::key_converter(&self.left_keys, &self.left_schema)?,
            sides: [SideState::default(), SideState::default()],
            hasher: hashbrown::DefaultHashBuilder::default(),
            watermark: WATERMARK_MIN,
            late_rows: 0,
            spilled: None,
        }))
    }

    /// Each side's table, `left` and `right`: its buffered rows as they
    /// came, whether each found a match and the watermark a late row came
    /// with; keyed by that side's join keys over the rows. (Checkpoints
    /// written before late rows were kept lack the marks.)
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        Ok([
            (&self.left_schema, &self.left_keys),
            (&self.right_schema, &self.right_keys),
        ]
        .into_iter()
        .zip(SIDE_TABLES)
        .map(|((schema, keys), name)| {
            let mut fields: Vec<Field> =
                schema.fields().iter().map(|f| f.as_ref().clone()).collect();
            fields.push(Field::new(MATCHED, DataType::Boolean, false));
            let unmarked = Arc::new(Schema::new(fields.clone()));
            fields.push(Field::new(MARK, DataType::Int64, true));
            TableSpec::new(name, Arc::new(Schema::new(fields)))
                .keyed(TableKey::Exprs(keys.clone()))
                .or_earlier(unmarked)
        })
        .collect())
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
            |metas: &[(JoinMeta, bool)]| JoinMeta::Counted {
                watermark: crate::rescale::least(metas, JoinMeta::watermark),
                late_rows: crate::rescale::counted_sum(metas, JoinMeta::late_rows),
            },
        )
    }
}

struct IntervalJoinOperator {
    plan: IntervalJoinPlan,
    /// The plan's state tables: the left side's, the right side's.
    tables: Vec<TableSpec>,
    /// The schema of joined pairs (both sides' columns): the output's,
    /// except for semi and anti joins.
    pair_schema: SchemaRef,
    converter: RowConverter,
    /// Buffered rows: [left, right].
    sides: [SideState; 2],
    /// Hashes both sides' key rows (one hasher, so a probe's hash finds
    /// the other side's rows).
    hasher: hashbrown::DefaultHashBuilder,
    watermark: Timestamp,
    /// Late rows dropped: no partner held at their horizon could pair.
    late_rows: u64,
    /// Rows moved to disk when the memory budget refused more
    /// ([`Operator::spill`]).
    spilled: Option<SpilledRows>,
}

/// One candidate pair: the arriving row and a buffered row of the other side.
struct Pairs {
    arriving: Vec<u32>,
    buffered: Vec<RowRef>,
}

impl IntervalJoinOperator {
    fn keys(&self, input: usize) -> &[Arc<dyn PhysicalExpr>] {
        if input == 0 {
            &self.plan.left_keys
        } else {
            &self.plan.right_keys
        }
    }

    /// Builds the joined batch for `pairs` (arriving rows on side `input`).
    fn joined(&self, input: usize, batch: &RecordBatch, pairs: &Pairs) -> Result<RecordBatch> {
        let other = &self.sides[1 - input];
        let arriving_idx = UInt32Array::from(pairs.arriving.clone());
        let arriving: Vec<ArrayRef> = batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &arriving_idx, None))
            .collect::<Result<_, _>>()?;
        // Gather buffered rows across their stored batches (each batch's
        // slot found by its id, not by a scan of the batches seen).
        let mut slots: HashMap<u64, usize> = HashMap::new();
        let mut batches: Vec<&RecordBatch> = Vec::new();
        let mut positions = Vec::with_capacity(pairs.buffered.len());
        for r in &pairs.buffered {
            let slot = match slots.get(&r.batch) {
                Some(&slot) => slot,
                None => {
                    let batch = other.batch(r.batch).ok_or_else(|| {
                        EngineError::operator("interval_join", "buffered batch missing")
                    })?;
                    batches.push(batch);
                    slots.insert(r.batch, batches.len() - 1);
                    batches.len() - 1
                }
            };
            positions.push((slot, r.row as usize));
        }
        let gathered = interleave_columns(&batches, &positions)?;
        let columns = if input == 0 {
            [arriving, gathered].concat()
        } else {
            [gathered, arriving].concat()
        };
        Ok(RecordBatch::try_new_with_options(
            self.pair_schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(pairs.arriving.len())),
        )?)
    }

    fn output(&self, columns: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch> {
        Ok(RecordBatch::try_new_with_options(
            self.plan.output_schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }

    /// The never-matched rows of `side` (batch by batch), padded with NULLs
    /// for the other side's columns.
    fn padded(&self, side: usize, rows: &[(RecordBatch, Vec<u32>)]) -> Result<Option<RecordBatch>> {
        let count: usize = rows.iter().map(|(_, r)| r.len()).sum();
        if count == 0 {
            return Ok(None);
        }
        let own = gather_grouped(rows)?;
        if self.plan.kind.left_only() {
            // An anti join's rows without a partner are its output as they are.
            return self.output(own, count).map(Some);
        }
        let other_schema = if side == 0 {
            &self.plan.right_schema
        } else {
            &self.plan.left_schema
        };
        let nulls: Vec<ArrayRef> = other_schema
            .fields()
            .iter()
            .map(|f| new_null_array(f.data_type(), count))
            .collect();
        let columns = if side == 0 {
            [own, nulls].concat()
        } else {
            [nulls, own].concat()
        };
        self.output(columns, count).map(Some)
    }

    /// Emits evicted rows that never matched, null-padded: those that came
    /// late go on late, with their output marks.
    fn emit_lonely(&self, side: usize, lonely: Vec<Lonely>, out: &mut Collector) -> Result<()> {
        let mut on_time = Vec::new();
        let mut late = Vec::new();
        let mut marks = Vec::new();
        for part in lonely {
            match part.marks {
                None => on_time.push((part.batch, part.rows)),
                Some(m) => {
                    marks.extend(m.into_iter().map(|m| self.output_watermark(m)));
                    late.push((part.batch, part.rows));
                }
            }
        }
        if let Some(padded) = self.padded(side, &on_time)? {
            out.emit(padded);
        }
        if let Some(padded) = self.padded(side, &late)? {
            out.emit_late(LateBatch::new(padded, Int64Array::from(marks))?);
        }
        Ok(())
    }

    /// The earliest time a row of side `side` must have to be still held
    /// at `horizon` (rows before it are evicted, or would be).
    fn held_from(&self, side: usize, horizon: Timestamp) -> Timestamp {
        match self.plan.time {
            JoinBound::Interval { bound, .. } if side == 0 => {
                horizon.saturating_sub(bound.upper_ms)
            }
            JoinBound::Interval { bound, .. } => horizon.saturating_add(bound.lower_ms),
            JoinBound::Unbounded => Timestamp::MIN,
        }
    }

    /// Whether a late row of side `side` at `t`, judged at `horizon`, can
    /// pair with any row of the other side still held there.
    fn may_pair(&self, side: usize, t: Timestamp, horizon: Timestamp) -> bool {
        let JoinBound::Interval { bound, .. } = self.plan.time else {
            return true;
        };
        // The latest partner time the bound allows.
        let latest = if side == 0 {
            t.saturating_add(bound.upper_ms) - i64::from(!bound.upper_inclusive)
        } else {
            t.saturating_sub(bound.lower_ms) - i64::from(!bound.lower_inclusive)
        };
        latest >= self.held_from(1 - side, horizon)
    }

    fn keeps(&self, side: usize) -> bool {
        if side == 0 {
            self.plan.kind.keeps_left()
        } else {
            self.plan.kind.keeps_right()
        }
    }

    fn side_schema(&self, side: usize) -> &SchemaRef {
        if side == 0 {
            &self.plan.left_schema
        } else {
            &self.plan.right_schema
        }
    }

    /// Evaluates keys and times of `batch` for side `side`.
    #[allow(clippy::type_complexity)]
    fn keys_and_times(&self, side: usize, batch: &RecordBatch) -> Result<KeyedRows> {
        use std::hash::BuildHasher;
        let rows = batch.num_rows();
        let (keys, key_columns) = super::key_rows(&self.converter, self.keys(side), batch)?;
        let valid: Vec<bool> = (0..rows)
            .map(|i| key_columns.iter().all(|c| c.is_valid(i)))
            .collect();
        let hashes = keys
            .iter()
            .map(|key| self.hasher.hash_one(key.as_ref()))
            .collect();
        let times = match self.plan.time {
            JoinBound::Interval {
                left_time,
                right_time,
                ..
            } => {
                let column = if side == 0 { left_time } else { right_time };
                let times: Int64Array = to_epoch_millis(batch.column(column))?;
                (0..rows)
                    .map(|i| times.is_valid(i).then(|| times.value(i)))
                    .collect()
            }
            // A regular join ignores time: every row is kept, all at one
            // time, so the index orders a key's rows by arrival.
            JoinBound::Unbounded => vec![Some(0); rows],
        };
        Ok(KeyedRows {
            keys,
            hashes,
            valid,
            times,
        })
    }

    /// Puts side `side`'s checkpoint table into `snapshot`: memory's rows,
    /// then, once spilled, the stored rows, streamed to a file a batch at
    /// a time rather than gathered in memory.
    fn put_side(&mut self, side: usize, snapshot: &mut StateSnapshot) -> Result<()> {
        let spec = &self.tables[side];
        let Some(spilled) = self.spilled.as_mut() else {
            let mut chunks = Vec::new();
            Self::each_memory_chunk(&self.sides[side], spec.schema(), |chunk| {
                chunks.push(chunk);
                Ok(())
            })?;
            return snapshot.put_batches(spec, chunks);
        };
        let mut file = spilled.snapshot_file(spec.name(), spec.schema())?;
        Self::each_memory_chunk(&self.sides[side], spec.schema(), |chunk| file.write(&chunk))?;
        spilled.each_side_batch(side, |batch| file.write(&batch))?;
        snapshot.put_file(spec, file.finish()?)
    }

    /// One side's rows in memory, in time order, with their `__matched`
    /// flags and `__watermark` marks (`table`: its checkpoint table's
    /// schema), [`RUN_ROWS`] rows at a time: a checkpoint or a spill never
    /// copies the side whole.
    fn each_memory_chunk(
        state: &SideState,
        table: &SchemaRef,
        mut each: impl FnMut(RecordBatch) -> Result<()>,
    ) -> Result<()> {
        state.each_live_chunk(RUN_ROWS, |held| {
            let mut columns = held.rows.columns().to_vec();
            columns.push(Arc::new(BooleanArray::from(held.matched)));
            columns.push(Arc::new(Int64Array::from(held.marks)));
            each(RecordBatch::try_new(table.clone(), columns)?)
        })
    }

    /// Moves every row in memory to disk ([`Operator::spill`]); `false`
    /// when nothing is held or a column cannot be spilled.
    fn spill_rows(&mut self, space: &Arc<crate::spill::SpillSpace>) -> Result<bool> {
        if self.sides.iter().all(SideState::is_empty) {
            // Nothing to write; what memory still holds is the key
            // indexes' tables, kept for the rows to come.
            let held = self.state_bytes() > 0;
            crate::runtime::drop_later::drop_later(std::mem::take(&mut self.sides));
            return Ok(held);
        }
        if self.spilled.is_none() {
            let schemas = [0, 1].map(|side| self.tables[side].schema().clone());
            self.spilled = SpilledRows::open(space, schemas)?;
        }
        let Some(mut spilled) = self.spilled.take() else {
            return Ok(false);
        };
        // A run at a time, in time order, so each chunk is one run on disk.
        let written = (0..2).try_for_each(|side| {
            Self::each_memory_chunk(&self.sides[side], self.tables[side].schema(), |run| {
                // The table's first columns are the side's, so its keys
                // and times are worked out over it as over the side's rows.
                let keyed = self.keys_and_times(side, &run)?;
                let times: Vec<Timestamp> = keyed
                    .times
                    .iter()
                    .map(|t| t.unwrap_or(Timestamp::MIN))
                    .collect();
                spilled.write(side, &run, &keyed.hashes, &times)
            })
        });
        self.spilled = Some(spilled);
        written?;
        crate::runtime::drop_later::drop_later(std::mem::take(&mut self.sides));
        Ok(true)
    }

    /// Brings back from disk the rows of side `side` that rows arriving
    /// on the other side could pair with: keys `keyed`, arriving rows
    /// without a time or a key left out.
    fn read_partners(&mut self, side: usize, keyed: &KeyedRows) -> Result<()> {
        let Some(spilled) = self.spilled.as_mut() else {
            return Ok(());
        };
        let bound = match self.plan.time {
            JoinBound::Interval { bound, .. } => bound,
            JoinBound::Unbounded => TimeBound::ANY,
        };
        let probes: Vec<(u64, Timestamp, Timestamp)> = (0..keyed.hashes.len())
            .filter(|&row| keyed.valid[row])
            .filter_map(|row| {
                let t = keyed.times[row]?;
                // The partner times the bound allows (side 0's rows are
                // the left ones).
                Some(if side == 1 {
                    (
                        keyed.hashes[row],
                        t.saturating_add(bound.lower_ms),
                        t.saturating_add(bound.upper_ms),
                    )
                } else {
                    (
                        keyed.hashes[row],
                        t.saturating_sub(bound.upper_ms),
                        t.saturating_sub(bound.lower_ms),
                    )
                })
            })
            .collect();
        if let Some(rows) = spilled.read_partners(side, &probes)? {
            self.load_side(side, rows)?;
        }
        Ok(())
    }

    /// Evicts the rows of each side before its threshold, in memory and
    /// on disk, emitting those a preserved side never matched.
    fn evict_before(&mut self, thresholds: [Timestamp; 2], out: &mut Collector) -> Result<()> {
        loop {
            self.evict_in_memory(thresholds, out)?;
            let due = match self.spilled.as_mut() {
                Some(spilled) => spilled.next_due(thresholds)?,
                None => None,
            };
            let Some((side, rows)) = due else {
                return Ok(());
            };
            self.load_side(side, rows)?;
        }
    }

    fn evict_in_memory(&mut self, thresholds: [Timestamp; 2], out: &mut Collector) -> Result<()> {
        for (side, threshold) in thresholds.into_iter().enumerate() {
            let mut unmatched = Vec::new();
            let keeps = self.keeps(side);
            self.sides[side].evict_before(threshold, keeps.then_some(&mut unmatched));
            self.emit_lonely(side, unmatched, out)?;
        }
        Ok(())
    }

    /// Buffers a side's checkpointed rows again.
    fn load_side(&mut self, side: usize, table: RecordBatch) -> Result<()> {
        let width = self.side_schema(side).fields().len();
        // Checkpoints written before late rows were kept have no marks.
        if table.num_columns() != width + 1 && table.num_columns() != width + 2 {
            return Err(EngineError::State(
                "interval_join: checkpoint table has the wrong columns".into(),
            ));
        }
        let marks = match table.columns().get(width + 1) {
            Some(column) => Some(
                column
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .cloned()
                    .ok_or_else(|| {
                        EngineError::State("interval_join: __watermark is not BIGINT".into())
                    })?,
            ),
            None => None,
        };
        let matched: Vec<bool> = table
            .column(width)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| EngineError::State("interval_join: __matched is not BOOLEAN".into()))?
            .iter()
            .map(|m| m.unwrap_or(false))
            .collect();
        let batch = RecordBatch::try_new(
            self.side_schema(side).clone(),
            table.columns()[..width].to_vec(),
        )?;
        // Stored batches are cut to what the key index can number; rows
        // that came on time and late are stored apart.
        for (start, len) in parts(batch.num_rows()) {
            let part = batch.slice(start, len);
            let part_marks = marks.as_ref().map(|m| m.slice(start, len));
            let late = part_marks.as_ref().map_or(0, |m| m.len() - m.null_count());
            if late == 0 || late == len {
                let keyed = self.keys_and_times(side, &part)?;
                let marks = part_marks
                    .filter(|_| late == len)
                    .map(|m| m.values().to_vec());
                self.sides[side].insert(
                    part,
                    keyed,
                    matched[start..start + len].to_vec(),
                    marks,
                )?;
                continue;
            }
            for came_late in [false, true] {
                let rows: Vec<u32> = (0..len)
                    .filter(|&i| part_marks.as_ref().is_some_and(|m| m.is_valid(i)) == came_late)
                    .map(|i| i as u32)
                    .collect();
                let indices = UInt32Array::from(rows.clone());
                let some = datafusion::arrow::compute::take_record_batch(&part, &indices)?;
                let keyed = self.keys_and_times(side, &some)?;
                let flags = rows.iter().map(|&i| matched[start + i as usize]).collect();
                let marks = came_late.then(|| {
                    rows.iter()
                        .map(|&i| part_marks.as_ref().map_or(0, |m| m.value(i as usize)))
                        .collect()
                });
                self.sides[side].insert(some, keyed, flags, marks)?;
            }
        }
        Ok(())
    }
}

/// (offset, length) of the parts `rows` rows are cut into so that each
/// fits a stored batch of the key index.
fn parts(rows: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..rows)
        .step_by(MAX_BATCH_ROWS)
        .map(move |start| (start, MAX_BATCH_ROWS.min(rows - start)))
}

/// What an interval join checkpoints besides its sides' rows.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum JoinMeta {
    /// The watermark and the late rows dropped.
    Counted {
        watermark: Timestamp,
        late_rows: u64,
    },
    /// The watermark alone (checkpoints written before late rows were
    /// kept).
    Watermark(Timestamp),
}

impl JoinMeta {
    fn watermark(&self) -> Timestamp {
        match *self {
            JoinMeta::Counted { watermark, .. } | JoinMeta::Watermark(watermark) => watermark,
        }
    }

    fn late_rows(&self) -> u64 {
        match *self {
            JoinMeta::Counted { late_rows, .. } => late_rows,
            JoinMeta::Watermark(_) => 0,
        }
    }
}

/// Name of the matched-flag column in checkpoint tables.
const MATCHED: &str = "__matched";
/// Name of the column of late rows' marks in checkpoint tables (NULL for
/// rows that came on time).
const MARK: &str = "__watermark";
const SIDE_TABLES: [&str; 2] = ["left", "right"];

/// Gathers rows spread over several batches (of one schema) into columns,
/// in the given order, with Arrow's `interleave`.
/// Columns of the rows `rows` names, batch by batch (each batch given once).
fn gather_grouped(rows: &[(RecordBatch, Vec<u32>)]) -> Result<Vec<ArrayRef>> {
    let positions: Vec<(usize, usize)> = rows
        .iter()
        .enumerate()
        .flat_map(|(slot, (_, rows))| rows.iter().map(move |&row| (slot, row as usize)))
        .collect();
    let batches: Vec<&RecordBatch> = rows.iter().map(|(batch, _)| batch).collect();
    interleave_columns(&batches, &positions)
}

/// The columns of rows at `positions` (batch slot, row) of `batches`, all of
/// one schema (none when there are no batches).
fn interleave_columns(
    batches: &[&RecordBatch],
    positions: &[(usize, usize)],
) -> Result<Vec<ArrayRef>> {
    let Some(first) = batches.first() else {
        return Ok(Vec::new());
    };
    (0..first.num_columns())
        .map(|c| {
            let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            Ok(interleave(&arrays, positions)?)
        })
        .collect()
}

impl IntervalJoinOperator {
    /// One batch of side `input`: rows that came on time (`marks` `None`)
    /// or late, each with its mark.
    fn on_rows(
        &mut self,
        input: usize,
        batch: RecordBatch,
        marks: Option<Int64Array>,
        out: &mut Collector,
    ) -> Result<()> {
        let input = input.min(1);
        let rows = batch.num_rows();
        if rows > MAX_BATCH_ROWS {
            // Stored batches are cut to what the key index can number; rows
            // of one side never pair with each other, so the parts give the
            // rows the whole would.
            for (start, len) in parts(rows) {
                let part_marks = marks.as_ref().map(|m| m.slice(start, len));
                self.on_rows(input, batch.slice(start, len), part_marks, out)?;
            }
            return Ok(());
        }
        let (batch, marks) = match marks {
            None => (self.plan.inputs[input].prepare(batch)?, None),
            Some(marks) => {
                let late = self.plan.inputs[input].prepare_late(LateBatch::new(batch, marks)?)?;
                let late = self.drop_unpairable(input, late, out)?;
                let (rows, marks) = late.into_parts();
                (rows, Some(marks))
            }
        };
        let rows = batch.num_rows();
        if rows == 0 {
            return Ok(());
        }
        let keyed = self.keys_and_times(input, &batch)?;
        self.read_partners(1 - input, &keyed)?;
        let (keys, times) = (&keyed.keys, &keyed.times);
        let lateness = self.plan.allowed_lateness_ms;
        // Where a partner must be for a late arriving row to pair with it.
        let partner_from: Option<Vec<Timestamp>> = marks.as_ref().map(|m| {
            m.values()
                .iter()
                .map(|&m| self.held_from(1 - input, m.saturating_sub(lateness)))
                .collect()
        });

        // Probe the other side.
        let mut pairs = Pairs {
            arriving: Vec::new(),
            buffered: Vec::new(),
        };
        let other = &self.sides[1 - input];
        let other_late = other.has_late();
        other.touch(
            (0..rows)
                .filter(|&row| keyed.valid[row])
                .map(|row| keyed.hashes[row]),
        );
        for row in 0..rows {
            let (Some(t), true) = (times[row], keyed.valid[row]) else {
                continue;
            };
            let bound = match self.plan.time {
                JoinBound::Interval { bound, .. } => bound,
                JoinBound::Unbounded => TimeBound::ANY,
            };
            // The other side's times that can pair with t (the bound decides
            // exactly; this range only narrows the search).
            let mut times = if input == 0 {
                t.saturating_add(bound.lower_ms)..=t.saturating_add(bound.upper_ms)
            } else {
                t.saturating_sub(bound.upper_ms)..=t.saturating_sub(bound.lower_ms)
            };
            if let Some(from) = &partner_from {
                times = (*times.start()).max(from[row])..=*times.end();
            }
            other.for_each_candidate(
                keyed.hashes[row],
                keys.row(row).as_ref(),
                times,
                |candidate| {
                    let holds = if input == 0 {
                        bound.holds(t, candidate.time)
                    } else {
                        bound.holds(candidate.time, t)
                    };
                    // A buffered late row pairs only with rows it could
                    // still meet at its own horizon.
                    let held = !other_late
                        || other.mark(candidate).is_none_or(|m| {
                            let horizon = m.saturating_sub(lateness);
                            t >= self.held_from(input, horizon)
                        });
                    if holds && held {
                        pairs.arriving.push(row as u32);
                        pairs.buffered.push(candidate);
                    }
                },
            );
        }
        let mut matched = vec![false; rows];
        if !pairs.arriving.is_empty() {
            let mut joined = self.joined(input, &batch, &pairs)?;
            // The output marks of pairs with a late row.
            let mut out_marks: Option<Vec<Option<Timestamp>>> = (marks.is_some() || other_late)
                .then(|| {
                    pairs
                        .arriving
                        .iter()
                        .zip(&pairs.buffered)
                        .map(|(&a, &b)| {
                            let own = marks.as_ref().map(|m| m.value(a as usize));
                            let theirs = if other_late {
                                self.sides[1 - input].mark(b)
                            } else {
                                None
                            };
                            own.max(theirs).map(|m| self.output_watermark(m))
                        })
                        .collect()
                });
            let mask = match &self.plan.residual {
                Some(residual) => Some(super::predicate_mask(residual, &joined, "interval_join")?),
                None => None,
            };
            let holds = |i: usize| mask.as_ref().is_none_or(|m| m.is_valid(i) && m.value(i));
            // A semi join emits a left row at its first pair: the pairs
            // whose left row had none before (rows arriving on the left have
            // none; buffered ones say), once each.
            let firsts: Option<Vec<u32>> = (self.plan.kind == JoinKind::Semi).then(|| {
                let mut seen = hashbrown::HashSet::new();
                (0..pairs.arriving.len())
                    .filter(|&i| holds(i))
                    .filter(|&i| {
                        if input == 0 {
                            seen.insert((u64::MAX, pairs.arriving[i]))
                        } else {
                            let left = pairs.buffered[i];
                            !self.sides[0].is_matched(left) && seen.insert((left.batch, left.row))
                        }
                    })
                    .map(|i| i as u32)
                    .collect()
            });
            for i in (0..pairs.arriving.len()).filter(|&i| holds(i)) {
                matched[pairs.arriving[i] as usize] = true;
                self.sides[1 - input].mark_matched(pairs.buffered[i]);
            }
            match (self.plan.kind, firsts) {
                (JoinKind::Anti, _) => {}
                (JoinKind::Semi, Some(firsts)) => {
                    let firsts = UInt32Array::from(firsts);
                    let left_columns: Vec<usize> =
                        (0..self.plan.left_schema.fields().len()).collect();
                    let rows = datafusion::arrow::compute::take_record_batch(&joined, &firsts)?
                        .project(&left_columns)?;
                    let rows = self.output(rows.columns().to_vec(), rows.num_rows())?;
                    let marks =
                        out_marks.map(|m| firsts.values().iter().map(|&i| m[i as usize]).collect());
                    emit_marked(rows, marks, out)?;
                }
                _ => {
                    if let Some(mask) = &mask {
                        joined = filter_record_batch(&joined, mask)?;
                        if let Some(m) = out_marks.as_mut() {
                            let mut kept = mask.iter();
                            m.retain(|_| kept.next().flatten() == Some(true));
                        }
                    }
                    emit_marked(joined, out_marks, out)?;
                }
            }
        }
        // Rows without a time can never match: an outer join emits them now.
        if self.keeps(input) {
            let timeless: Vec<u32> = (0..rows)
                .filter(|&i| times[i].is_none())
                .map(|i| i as u32)
                .collect();
            if let Some(padded) = self.padded(input, &[(batch.clone(), timeless)])? {
                out.emit(padded);
            }
        }
        let marks = marks.map(|m| m.values().to_vec());
        self.sides[input].insert(batch, keyed, matched, marks)?;
        Ok(())
    }

    /// Takes out the late rows no partner held at their horizon could pair
    /// with: counted as dropped, or, on a side the join preserves, emitted
    /// null-padded at once (Flink's interval join). A window join's row
    /// whose window had fired is dropped either way (Flink's window join).
    /// The rest go on.
    fn drop_unpairable(
        &mut self,
        input: usize,
        late: LateBatch,
        out: &mut Collector,
    ) -> Result<LateBatch> {
        let JoinBound::Interval {
            left_time,
            right_time,
            ..
        } = self.plan.time
        else {
            return Ok(late);
        };
        let column = if input == 0 { left_time } else { right_time };
        let times = to_epoch_millis(late.rows().column(column))?;
        let lateness = self.plan.allowed_lateness_ms;
        // A window join's row is late once its window has fired.
        let window_ends = match self.plan.windows[input] {
            Some(window) => Some((
                to_epoch_millis(late.rows().column(window.column))?,
                window.to_end_ms,
            )),
            None => None,
        };
        // Per row: go on, pad (no partner can be held; a preserved side),
        // or drop.
        let mut keep = Vec::with_capacity(late.num_rows());
        let mut pad = Vec::with_capacity(late.num_rows());
        for row in 0..late.num_rows() {
            let horizon = late.horizon(row, lateness);
            let window_open = window_ends.as_ref().is_none_or(|(bounds, to_end)| {
                bounds.is_null(row) || bounds.value(row).saturating_add(*to_end) > horizon
            });
            let pairable = times.is_null(row) || self.may_pair(input, times.value(row), horizon);
            keep.push(Some(window_open && pairable));
            pad.push(Some(window_open && !pairable && self.keeps(input)));
        }
        let keep = BooleanArray::from(keep);
        let pad = BooleanArray::from(pad);
        let gone = keep.len() - keep.true_count();
        if gone == 0 {
            return Ok(late);
        }
        let padded_rows = pad.true_count();
        self.late_rows += (gone - padded_rows) as u64;
        if padded_rows > 0 {
            let lonely = late.filter(&pad)?;
            let rows: Vec<u32> = (0..lonely.num_rows() as u32).collect();
            let marks: Int64Array = lonely
                .watermarks()
                .values()
                .iter()
                .map(|&m| self.output_watermark(m))
                .collect();
            if let Some(padded) = self.padded(input, &[(lonely.rows().clone(), rows)])? {
                out.emit_late(LateBatch::new(padded, marks)?);
            }
        }
        late.filter(&keep)
    }
}

/// Emits joined rows: those of pairs with a late row (a mark in `marks`)
/// go on late.
fn emit_marked(
    joined: RecordBatch,
    marks: Option<Vec<Option<Timestamp>>>,
    out: &mut Collector,
) -> Result<()> {
    let Some(marks) = marks.filter(|m| m.iter().any(Option::is_some)) else {
        out.emit(joined);
        return Ok(());
    };
    if marks.iter().all(Option::is_some) {
        let marks: Int64Array = marks.into_iter().collect();
        out.emit_late(LateBatch::new(joined, marks)?);
        return Ok(());
    }
    let came_late: BooleanArray = marks.iter().map(|m| Some(m.is_some())).collect();
    out.emit(filter_record_batch(
        &joined,
        &datafusion::arrow::compute::not(&came_late)?,
    )?);
    let late_marks: Int64Array = marks.into_iter().flatten().map(Some).collect();
    out.emit_late(LateBatch::new(
        filter_record_batch(&joined, &came_late)?,
        late_marks,
    )?);
    Ok(())
}

impl Operator for IntervalJoinOperator {
    fn on_batch(&mut self, input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        self.on_rows(input, batch, None, out)
    }

    fn on_late_batch(&mut self, input: usize, late: LateBatch, out: &mut Collector) -> Result<()> {
        match self.plan.time {
            // A regular join pairs rows whatever their times: nothing is
            // final, nothing is dropped, and its output has no event time.
            JoinBound::Unbounded => self.on_rows(input, late.into_rows(), None, out),
            JoinBound::Interval { .. } => {
                let (rows, marks) = late.into_parts();
                self.on_rows(input, rows, Some(marks), out)
            }
        }
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        self.watermark = watermark;
        let horizon = if watermark == WATERMARK_MAX {
            WATERMARK_MAX
        } else {
            watermark.saturating_sub(self.plan.allowed_lateness_ms)
        };
        // Left rows: evict when tl + upper < horizon, i.e. tl < horizon - upper.
        // Right rows: evict when tr - lower < horizon, i.e. tr < horizon + lower.
        let thresholds = match self.plan.time {
            _ if horizon == WATERMARK_MAX => [WATERMARK_MAX, WATERMARK_MAX],
            JoinBound::Interval { bound, .. } => [
                horizon.saturating_sub(bound.upper_ms),
                horizon.saturating_add(bound.lower_ms),
            ],
            // A regular join's rows can pair with any later row.
            JoinBound::Unbounded => return Ok(()),
        };
        self.evict_before(thresholds, out)
    }

    fn state_rows(&self) -> usize {
        self.sides[0].len()
            + self.sides[1].len()
            + self.spilled.as_ref().map_or(0, SpilledRows::rows)
    }

    /// The rows in memory. The key filters of the runs on disk are left
    /// out, as the store's own pinned filters are for every spilling
    /// operator: a spill cannot free them, so counting them failed jobs
    /// whose small limit made many small runs.
    fn state_bytes(&self) -> usize {
        self.sides[0].size_bytes() + self.sides[1].size_bytes()
    }

    /// Counted as rows come and go.
    fn state_bytes_are_counted(&self) -> bool {
        true
    }

    /// Every row in memory goes to disk, in runs by time, and memory
    /// starts afresh: it then holds the rows that came since, and those
    /// read back for a probe that could pair with them or for the
    /// watermark to evict them.
    fn spill(&mut self, space: &Arc<crate::spill::SpillSpace>) -> Result<bool> {
        self.spill_rows(space)
    }

    fn spill_stats(&self) -> crate::spill::SpillStats {
        self.spilled
            .as_ref()
            .map(SpilledRows::stats)
            .unwrap_or_default()
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&JoinMeta::Counted {
            watermark: self.watermark,
            late_rows: self.late_rows,
        })?;
        for side in 0..2 {
            self.put_side(side, &mut snapshot)?;
        }
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        let meta: JoinMeta = state.meta()?;
        self.watermark = meta.watermark();
        self.late_rows = meta.late_rows();
        for side in 0..2 {
            let table = state.take(&self.tables[side])?;
            self.load_side(side, table)?;
        }
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.late_rows
    }

    fn output_watermark(&self, input: Timestamp) -> Timestamp {
        match self.plan.time {
            _ if input == WATERMARK_MAX || input == WATERMARK_MIN => input,
            JoinBound::Interval { bound, .. } => input.saturating_sub(bound.upper_ms.max(0)),
            // Output rows have no event time to bound before the end.
            JoinBound::Unbounded => WATERMARK_MIN,
        }
    }
}

#[cfg(test)]
mod tests;
