//! The operator lifecycle: one trait every stateful or stateless operator
//! implements, and the [`Collector`] it emits through.
//!
//! A node in the job graph holds an immutable [`OperatorPlan`] (what to
//! compute, shareable, printable by `eddy explain`). When a job starts, the
//! runtime asks the plan for a fresh [`Operator`] that owns the per-run state,
//! then feeds it:
//!
//! ```text
//!   on_batch(input, batch)*  interleaved with  on_watermark(min over inputs)
//!   ... on_watermark(+inf) ... on_end()
//! ```
//!
//! Everything an operator emits goes into the [`Collector`]; the runtime
//! forwards it downstream after each call and counts the rows. Watermarks are
//! forwarded by the runtime after `on_watermark` returns, so an operator never
//! emits them itself and rows it emits in `on_watermark` precede the watermark
//! that caused them.
//!
//! Checkpoints: once a barrier has arrived on every input the runtime calls
//! [`Operator::snapshot`]; a resumed job creates the operator afresh and
//! calls [`Operator::restore`] with that snapshot before any input. The
//! runtime itself keeps the input watermarks and counters; an operator
//! snapshots only its own state. Stateless operators keep the defaults.

use std::fmt::Debug;
use std::sync::Arc;

use datafusion::physical_expr::PhysicalExpr;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{EngineError, Result};
use crate::message::LateBatch;
use crate::state::StateSnapshot;
use crate::time::Timestamp;

/// Output port a source uses for rows it judged late.
pub const LATE_PORT: usize = 1;

/// Output port a source uses for its bad rows (`bad_rows(table)`).
pub const BAD_PORT: usize = 2;

/// Collects the batches an operator emits during one lifecycle call.
#[derive(Debug, Default)]
pub struct Collector {
    pending: Vec<(usize, Emitted)>,
}

/// One emission: rows, or rows that go on late with their marks.
#[derive(Debug)]
pub enum Emitted {
    /// Rows.
    Rows(RecordBatch),
    /// Rows behind the watermark of their source, with its value at each
    /// ([`LateBatch`]).
    Late(LateBatch),
}

impl Emitted {
    /// The rows, late or not.
    pub fn rows(&self) -> &RecordBatch {
        match self {
            Emitted::Rows(rows) => rows,
            Emitted::Late(late) => late.rows(),
        }
    }
}

impl Collector {
    /// Emits a batch on the main output (port 0). Empty batches are dropped.
    pub fn emit(&mut self, batch: RecordBatch) {
        self.emit_to(0, batch);
    }

    /// Emits a batch on a given output port. Empty batches are dropped.
    pub fn emit_to(&mut self, port: usize, batch: RecordBatch) {
        if batch.num_rows() > 0 {
            self.pending.push((port, Emitted::Rows(batch)));
        }
    }

    /// Emits late rows with their marks on the main output (port 0).
    pub fn emit_late(&mut self, late: LateBatch) {
        self.emit_late_to(0, late);
    }

    /// Emits late rows with their marks on a given output port. Empty
    /// batches are dropped.
    pub fn emit_late_to(&mut self, port: usize, late: LateBatch) {
        if late.num_rows() > 0 {
            self.pending.push((port, Emitted::Late(late)));
        }
    }

    /// Takes the rows emitted so far (late rows without their marks).
    pub fn drain(&mut self) -> impl ExactSizeIterator<Item = (usize, RecordBatch)> + '_ {
        self.pending.drain(..).map(|(port, emitted)| match emitted {
            Emitted::Rows(rows) => (port, rows),
            Emitted::Late(late) => (port, late.into_rows()),
        })
    }

    /// Takes what was emitted so far, late rows with their marks.
    pub fn drain_emitted(&mut self) -> std::vec::Drain<'_, (usize, Emitted)> {
        self.pending.drain(..)
    }
}

/// Per-run state of a node. See the module docs for the call sequence.
///
/// An operator that holds rows back until the watermark passes their time,
/// with its state checkpointed (eddy's operators are built the same way, on
/// columnar state):
///
/// ```
/// use datafusion::arrow::array::{Array, Int64Array};
/// use datafusion::arrow::compute::concat_batches;
/// use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
/// use datafusion::arrow::record_batch::RecordBatch;
/// use eddy_engine::operator::{Collector, Operator};
/// use eddy_engine::state::StateSnapshot;
/// use eddy_engine::time::Timestamp;
/// use std::sync::Arc;
///
/// /// Emits rows (`t BIGINT`, epoch ms) once the watermark reaches them.
/// struct Hold { schema: SchemaRef, held: Vec<RecordBatch> }
///
/// impl Operator for Hold {
///     fn on_batch(&mut self, _input: usize, batch: RecordBatch, _out: &mut Collector) -> eddy_engine::Result<()> {
///         self.held.push(batch);
///         Ok(())
///     }
///     fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> eddy_engine::Result<()> {
///         let all = concat_batches(&self.schema, &self.held)?;
///         let t = all.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
///         let due = datafusion::arrow::compute::kernels::cmp::lt_eq(t, &Int64Array::new_scalar(watermark))?;
///         out.emit(datafusion::arrow::compute::filter_record_batch(&all, &due)?);
///         let later = datafusion::arrow::compute::not(&due)?;
///         self.held = vec![datafusion::arrow::compute::filter_record_batch(&all, &later)?];
///         Ok(())
///     }
///     fn snapshot(&mut self) -> eddy_engine::Result<StateSnapshot> {
///         let mut state = StateSnapshot::default();
///         state.push_table("held", concat_batches(&self.schema, &self.held)?);
///         Ok(state)
///     }
///     fn restore(&mut self, state: StateSnapshot) -> eddy_engine::Result<()> {
///         self.held = state.tables.into_iter().map(|t| t.batch).collect();
///         Ok(())
///     }
/// }
///
/// let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, false)]));
/// let rows = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![5, 1, 9]))]).unwrap();
/// let mut op = Hold { schema: schema.clone(), held: vec![] };
/// let mut out = Collector::default();
/// op.on_batch(0, rows, &mut out).unwrap();
/// // A checkpoint, and a fresh operator restored from it, as a resumed job does.
/// let mut resumed = Hold { schema, held: vec![] };
/// resumed.restore(op.snapshot().unwrap()).unwrap();
/// resumed.on_watermark(5, &mut out).unwrap();
/// let emitted: Vec<_> = out.drain().map(|(_, b)| b.num_rows()).collect();
/// assert_eq!(emitted, vec![2]); // 5 and 1; 9 waits
/// ```
pub trait Operator: Send {
    /// Processes a batch that arrived on input `input` (0-based).
    fn on_batch(&mut self, input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()>;

    /// Processes rows that arrived behind their source's watermark, each
    /// with the watermark at its position ([`LateBatch`]). An operator
    /// whose state for a row may already be final judges the row against
    /// its mark (it may drop it, counted in [`Operator::late_rows`]); a
    /// stateless one passes the marks on with the rows
    /// ([`Collector::emit_late`]). By default the rows are taken as any
    /// others: what operators that never drop a row for lateness do
    /// (updating operators, sinks).
    fn on_late_batch(&mut self, input: usize, late: LateBatch, out: &mut Collector) -> Result<()> {
        self.on_batch(input, late.into_rows(), out)
    }

    /// The minimum watermark over all inputs advanced to `watermark`.
    fn on_watermark(&mut self, _watermark: Timestamp, _out: &mut Collector) -> Result<()> {
        Ok(())
    }

    /// Input `input` ended (others may go on); before the watermark its
    /// end moves is handled.
    fn on_input_end(&mut self, _input: usize, _out: &mut Collector) -> Result<()> {
        Ok(())
    }

    /// Which of the operator's inputs end: `bounded[i]` when every source
    /// input `i` reads from is stored data that ends (a file, a Parquet
    /// table, a generator that is not paced; not Kafka, stdin or a paced
    /// generator: [`crate::source::SourceReader::bounded`]). The runtime
    /// says it once, after a restore and before the first message; an
    /// operator that would wait for an input to end (a lookup join's
    /// table) waits only for one that does.
    fn inputs_bounded(&mut self, _bounded: &[bool]) {}

    /// The table the operator reads by key, opened
    /// ([`OperatorPlan::lookup_table`]); the runtime gives it once, after
    /// a restore and before the first message.
    fn lookup_opened(&mut self, _source: Box<dyn crate::lookup::LookupSource>) {}

    /// All inputs ended (after a final `on_watermark(+inf)`).
    fn on_end(&mut self, _out: &mut Collector) -> Result<()> {
        Ok(())
    }

    /// Rows or groups currently held in state, for metrics.
    fn state_rows(&self) -> usize {
        0
    }

    /// Approximate bytes of memory held in state: the gauge, and what the
    /// node reserves from the job's memory budget ([`crate::memory`]).
    fn state_bytes(&self) -> usize {
        0
    }

    /// Whether [`Operator::state_bytes`] is a count kept as state comes
    /// and goes (cheap to ask): the node then reserves memory after every
    /// message; otherwise, since sizing may walk the state, about every
    /// 200 ms.
    fn state_bytes_are_counted(&self) -> bool {
        false
    }

    /// The memory budget refused the operator more: move state out of
    /// memory into a table of `space` ([`crate::spill`]) and go on reading
    /// it back by key as rows need it. Returns whether anything moved; an
    /// operator that keeps all its state in memory (the default) returns
    /// `false`, and the job fails for memory.
    fn spill(&mut self, _space: &std::sync::Arc<crate::spill::SpillSpace>) -> Result<bool> {
        Ok(false)
    }

    /// What its spilled state has cost so far ([`Operator::spill`]).
    fn spill_stats(&self) -> crate::spill::SpillStats {
        crate::spill::SpillStats::default()
    }

    /// The operator's state at a checkpoint barrier. Must leave the
    /// operator able to go on exactly as if nothing had happened (some
    /// DataFusion accumulators hand over their state only by draining it;
    /// such operators rebuild themselves from the snapshot they return).
    fn snapshot(&mut self) -> Result<StateSnapshot> {
        Ok(StateSnapshot::default())
    }

    /// The operator's state at a checkpoint barrier, for the checkpoint
    /// store: like [`Operator::snapshot`], but a table of rows by key may
    /// hold only the keys that changed since the previous call
    /// ([`crate::state::KeyedTable`]). Only the runtime calls it, and only
    /// the store reads what it returns (which hands back full tables).
    /// Operators without keyed state keep this default.
    fn snapshot_incremental(&mut self) -> Result<StateSnapshot> {
        self.snapshot()
    }

    /// Restores a freshly created operator from [`Operator::snapshot`]'s output.
    fn restore(&mut self, state: StateSnapshot) -> Result<()> {
        if state.is_empty() {
            Ok(())
        } else {
            Err(EngineError::State(
                "a stateless operator was given state".into(),
            ))
        }
    }

    /// Rows dropped so far for lateness: late rows ([`LateBatch`]) whose
    /// place in the operator's state was already final at their source's
    /// watermark, and rows that arrived behind the operator's own
    /// watermark (from an input that was idle).
    fn late_rows(&self) -> u64 {
        0
    }

    /// The watermark to forward downstream once the input watermark is
    /// `input`. Operators that may still emit rows older than their input
    /// watermark (a join's outer rows, say) hold it back.
    fn output_watermark(&self, input: Timestamp) -> Timestamp {
        input
    }

    /// How often the operator wants [`Operator::on_processing_time`]
    /// called, if it keeps a processing-time clock (`None`: never).
    fn processing_time_interval(&self) -> Option<std::time::Duration> {
        None
    }

    /// The wall clock read `now_ms` (epoch milliseconds): called about
    /// every [`Operator::processing_time_interval`], whether rows come or
    /// not. The runtime then forwards [`Operator::output_watermark`] if it
    /// went up.
    fn on_processing_time(&mut self, _now_ms: Timestamp, _out: &mut Collector) -> Result<()> {
        Ok(())
    }
}

/// The wall clock in epoch milliseconds (the processing time).
pub fn wall_clock_ms() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as Timestamp)
        .unwrap_or_default()
}

/// Where an operator needs the rows of one of its inputs when the job runs
/// spread over parallel instances or scaled-out tasks
/// ([`crate::distribute`]): DataFusion's `Distribution` for a stream. Each
/// operator declares it once per input
/// ([`OperatorPlan::required_input_distribution`]); the distribution pass
/// derives every edge's routing from it, so what an operator's state is
/// keyed by and how its rows reach it cannot disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Distribution {
    /// Any instance may take any row: the operator keeps no state across
    /// rows (a calc, a union, a key split). It runs where its input is.
    Any,
    /// The rows whose expressions (over this input's rows) are equal must
    /// meet in one instance; keys may be spread over many. Never empty
    /// ([`Distribution::hash`] says [`Distribution::Single`] for no keys).
    Hash(Vec<Arc<dyn PhysicalExpr>>),
    /// Every row must meet in one instance (a global aggregate, anything
    /// whose state is not keyed).
    Single,
}

impl Distribution {
    /// Rows hashed by `keys`, or [`Distribution::Single`] without keys (a
    /// keyed operator with nothing to key by keeps one state).
    pub fn hash(keys: Vec<Arc<dyn PhysicalExpr>>) -> Self {
        if keys.is_empty() {
            Self::Single
        } else {
            Self::Hash(keys)
        }
    }

    /// Whether any instance may take any row (a stateless operator).
    pub fn is_any(&self) -> bool {
        matches!(self, Self::Any)
    }

    /// Whether rows are spread by a key (the operator may run as many
    /// instances).
    pub fn is_hash(&self) -> bool {
        matches!(self, Self::Hash(_))
    }

    /// The expressions rows are hashed by (none unless hashed).
    pub fn keys(&self) -> &[Arc<dyn PhysicalExpr>] {
        match self {
            Self::Hash(keys) => keys,
            Self::Any | Self::Single => &[],
        }
    }
}

/// The immutable description of an operator node; creates its per-run state.
pub trait OperatorPlan: Send + Sync + Debug {
    /// Short kind name, e.g. `calc`, `window_aggregate`.
    fn kind(&self) -> &'static str;
    /// One-line description for `eddy explain`: free text, reworded at
    /// will (checkpoints do not record it).
    fn describe(&self) -> String;
    /// What, besides its declared tables and its schemas, makes the
    /// operator's state mean what it does: its keys, window, bounds,
    /// functions, each by name. A checkpoint records it in the node's
    /// shape ([`crate::shape`]); a resumed job whose operator's parameters
    /// differ does not restore that state into it.
    fn parameters(&self) -> crate::shape::Parameters;
    /// The schema of the rows this operator emits on port 0.
    fn output_schema(&self) -> SchemaRef;
    /// Where the operator needs the rows of input `input` (0 for an
    /// operator with one): hashed by expressions over that input's rows
    /// when its state is keyed (a join says each side's own keys), one
    /// instance when its state is not keyed (the default), any when it
    /// keeps no state. The only declaration of an operator's distribution:
    /// the pass that runs keyed operators as N instances or cuts a job over
    /// tasks ([`crate::distribute`]) hashes each edge by it, and every input
    /// of an operator is spread alike (all hashed, all single or all any).
    fn required_input_distribution(&self, _input: usize) -> Distribution {
        Distribution::Single
    }
    /// How the operator as a whole runs spread out: its first input's
    /// [`OperatorPlan::required_input_distribution`] (every input is
    /// spread alike).
    fn distribution(&self) -> Distribution {
        self.required_input_distribution(0)
    }
    /// Output ports the operator emits on ([`Collector::emit_to`]); all
    /// carry [`OperatorPlan::output_schema`]'s rows, and watermarks and
    /// other markers go to every one.
    fn output_ports(&self) -> usize {
        1
    }
    /// Creates the per-run operator state.
    fn create(&self) -> Result<Box<dyn Operator>>;
    /// A table the operator reads by key ([`crate::lookup`]): the runtime
    /// opens it through the job's connectors and hands it over
    /// ([`Operator::lookup_opened`]); the connectors check its options
    /// with the job's tables. None by default.
    fn lookup_table(&self) -> Option<&crate::lookup::LookupTable> {
        None
    }
    /// The tables of state the operator checkpoints, each declared once
    /// here ([`crate::state::declared`]): its name, schema, how its rows
    /// are keyed and how long they live. The operator's
    /// [`Operator::snapshot`] puts its rows through these declarations and
    /// [`Operator::restore`] takes them back the same way; the runtime
    /// checks a checkpoint against them before a restore and rescales
    /// keyed tables by them ([`crate::rescale::kept_tables`]). Empty for
    /// an operator without tables (small values go in the snapshot's
    /// meta).
    fn state_tables(&self) -> Result<Vec<crate::state::declared::TableSpec>> {
        Ok(Vec::new())
    }
    /// A keyed operator's state for one instance of a job resumed with
    /// another number of instances ([`crate::rescale`]): `parts` are the
    /// checkpointed states ([`Operator::snapshot`]) of the old instances
    /// that held keys of `keys`, the new instance's key groups; the result
    /// is what [`Operator::restore`] of the new instance gets. Keep the
    /// rows of each state table whose keys `keys` owns
    /// ([`crate::rescale::kept_rows`]), merge the small values (a
    /// watermark: the least; a counter: the sum over the parts marked
    /// `counted`). By default the state cannot be moved and the resume is
    /// refused.
    fn rescale_state(
        &self,
        _parts: Vec<crate::rescale::InstanceState>,
        _keys: &crate::rescale::KeyRange,
    ) -> Result<StateSnapshot> {
        Err(crate::error::EngineError::Checkpoint(format!(
            "{} keeps state that cannot be spread over another number of instances",
            self.kind()
        )))
    }
    /// This plan as it was before aggregates were appended to its list,
    /// for each earlier list its state can grow from (its first k
    /// aggregates): a changed query that appends aggregates to a named
    /// operator keeps its state when the old plan is among these
    /// ([`crate::identity`]). Empty by default: only an operator that can
    /// restore state lacking the new aggregates' columns offers any.
    fn earlier_layouts(&self) -> Vec<Arc<dyn OperatorPlan>> {
        Vec::new()
    }
}
