//! A Python aggregate (a class with `accumulate`, `merge`, `finish` and,
//! optionally, `retract`) as a DataFusion UDAF.
//!
//! In: argument columns with each row's group. Out: one value per group.
//!
//! Each group's state is the pickled instance, held here as bytes, not in
//! a worker: a batch sends the states of the groups it touches, the worker
//! unpickles them (or makes fresh instances), calls `accumulate` (or
//! `retract`) per row, and sends the states back. So one request serves a
//! whole batch, any worker serves any call, and the state is ordinary
//! Arrow (one `Binary` column) that eddy's checkpoints hold like any other
//! aggregate's: a job killed and restored goes on from the same states.
//! `finish` runs on the states of the groups a window or an update emits.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Int32Array, UInt32Array,
};
use datafusion::arrow::compute::{filter, take};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, EmitTo, GroupsAccumulator, Signature, Volatility,
};

use crate::definition::FunctionDefinition;
use crate::error::PythonError;
use crate::runtime::PythonRuntime;
use crate::scalar::read_errors;
use crate::wire::{
    self, Frame, FrameError, Reply, AGG_FINISH, AGG_MERGE, AGG_STEPS, AGG_UPDATE, RESULT, STATES,
};

/// A Python aggregate function.
#[derive(Debug)]
pub struct PythonAggregateFunction {
    caller: Caller,
    retracts: bool,
    signature: Signature,
}

impl PythonAggregateFunction {
    /// Declares `definition` in `runtime`. `retracts`: whether the class
    /// defines `retract` ([`FunctionDefinition::retracts`]).
    pub fn new(
        definition: FunctionDefinition,
        retracts: bool,
        runtime: &Arc<PythonRuntime>,
    ) -> Self {
        let definition = Arc::new(definition);
        let index = runtime.define(Arc::clone(&definition));
        let signature = Signature::exact(definition.args.clone(), Volatility::Volatile);
        Self {
            caller: Caller {
                definition,
                index,
                runtime: Arc::clone(runtime),
            },
            retracts,
            signature,
        }
    }
}

impl PartialEq for PythonAggregateFunction {
    fn eq(&self, other: &Self) -> bool {
        self.caller.definition == other.caller.definition
            && self.caller.index == other.caller.index
            && Arc::ptr_eq(&self.caller.runtime, &other.caller.runtime)
    }
}

impl Eq for PythonAggregateFunction {}

impl Hash for PythonAggregateFunction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.caller.definition.hash(state);
        self.caller.index.hash(state);
    }
}

impl AggregateUDFImpl for PythonAggregateFunction {
    fn name(&self) -> &str {
        &self.caller.definition.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(self.caller.definition.returns.clone())
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(PythonAccumulator::new(
            self.caller.clone(),
            self.retracts,
        )))
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.accumulator(args)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(
            format!("{}[state]", args.name),
            DataType::Binary,
            true,
        ))])
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        _args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(PythonGroupsAccumulator {
            caller: self.caller.clone(),
            states: Vec::new(),
            bytes: 0,
            local: Vec::new(),
        }))
    }
}

/// Sends a function's aggregate requests.
#[derive(Debug, Clone)]
struct Caller {
    definition: Arc<FunctionDefinition>,
    index: usize,
    runtime: Arc<PythonRuntime>,
}

impl Caller {
    fn protocol(&self, problem: FrameError) -> datafusion::error::DataFusionError {
        PythonError::Protocol {
            function: self.definition.name.clone(),
            problem,
        }
        .into()
    }

    fn column(&self, frame: &mut Frame, array: &dyn Array) -> Result<()> {
        frame.column(array).map_err(|m| self.protocol(m))
    }

    /// Writes argument columns, each cast to its declared type.
    fn arguments(&self, frame: &mut Frame, columns: &[ArrayRef]) -> Result<()> {
        for (column, declared) in columns.iter().zip(&self.definition.args) {
            let column = wire::as_type(Arc::clone(column), declared)?;
            self.column(frame, column.as_ref())?;
        }
        Ok(())
    }

    /// `accumulate` (or `retract`) each row of `columns` into the group
    /// `groups[row]` indexes in `states`; returns the new states.
    fn update(
        &self,
        states: &BinaryArray,
        groups: &Int32Array,
        columns: &[ArrayRef],
        retract: bool,
    ) -> Result<BinaryArray> {
        let mut frame = Frame::new(AGG_UPDATE);
        frame.u32(self.index as u32);
        frame.u8(u8::from(retract));
        frame.u32(columns.len() as u32);
        self.column(&mut frame, states)?;
        self.column(&mut frame, groups)?;
        self.arguments(&mut frame, columns)?;
        let reply = self
            .runtime
            .request(self.index, groups.len(), frame.finish())?;
        self.states(reply, states.len())
    }

    /// `merge` each incoming state into the group `groups[row]` indexes.
    fn merge(
        &self,
        states: &BinaryArray,
        groups: &Int32Array,
        incoming: &ArrayRef,
    ) -> Result<BinaryArray> {
        let mut frame = Frame::new(AGG_MERGE);
        frame.u32(self.index as u32);
        self.column(&mut frame, states)?;
        self.column(&mut frame, groups)?;
        let incoming = wire::as_type(Arc::clone(incoming), &DataType::Binary)?;
        self.column(&mut frame, incoming.as_ref())?;
        let reply = self
            .runtime
            .request(self.index, groups.len(), frame.finish())?;
        self.states(reply, states.len())
    }

    /// One group's `state` through `steps` (accumulate, or retract, the
    /// rows of each) and, when `finish`, its value.
    fn steps(
        &self,
        state: &State,
        steps: &[(bool, Vec<ArrayRef>)],
        finish: bool,
    ) -> Result<(State, Option<ScalarValue>)> {
        let mut frame = Frame::new(AGG_STEPS);
        frame.u32(self.index as u32);
        frame.u8(u8::from(finish));
        frame.u32(steps.len() as u32);
        self.column(&mut frame, &states_array(std::iter::once(state)))?;
        let mut rows = 0;
        for (retract, columns) in steps {
            let n = columns.first().map_or(0, |c| c.len());
            rows += n;
            frame.u8(u8::from(*retract));
            frame.u64(n as u64);
            frame.u32(columns.len() as u32);
            self.arguments(&mut frame, columns)?;
        }
        let mut reply = self.runtime.request(self.index, rows, frame.finish())?;
        if reply.op() != STATES {
            return Err(self.protocol(FrameError::UnexpectedReply(reply.op())));
        }
        let states = reply
            .column(&DataType::Binary)
            .map_err(|m| self.protocol(m))?;
        let states = states.as_binary::<i32>();
        let state = (states.len() == 1 && states.is_valid(0)).then(|| states.value(0).to_vec());
        let value = if finish {
            let values = reply
                .column(&self.definition.returns)
                .map_err(|m| self.protocol(m))?;
            Some(ScalarValue::try_from_array(&values, 0)?)
        } else {
            None
        };
        let errors = read_errors(&mut reply).map_err(|m| self.protocol(m))?;
        self.runtime.raised(self.index, &errors);
        Ok((state, value))
    }

    /// `finish` on each state.
    fn finish(&self, states: &BinaryArray) -> Result<ArrayRef> {
        if states.is_empty() {
            return Ok(wire::empty(&self.definition.returns));
        }
        let mut frame = Frame::new(AGG_FINISH);
        frame.u32(self.index as u32);
        self.column(&mut frame, states)?;
        let mut reply = self
            .runtime
            .request(self.index, states.len(), frame.finish())?;
        if reply.op() != RESULT {
            return Err(self.protocol(FrameError::UnexpectedReply(reply.op())));
        }
        let column = reply
            .column(&self.definition.returns)
            .map_err(|m| self.protocol(m))?;
        if column.len() != states.len() {
            return Err(self.protocol(FrameError::Count {
                found: column.len(),
                what: "values",
                expected: states.len(),
                of: "groups",
            }));
        }
        Ok(column)
    }

    fn states(&self, mut reply: Reply, expected: usize) -> Result<BinaryArray> {
        if reply.op() != STATES {
            return Err(self.protocol(FrameError::UnexpectedReply(reply.op())));
        }
        let column = reply
            .column(&DataType::Binary)
            .map_err(|m| self.protocol(m))?;
        let errors = read_errors(&mut reply).map_err(|m| self.protocol(m))?;
        self.runtime.raised(self.index, &errors);
        let states = column.as_binary::<i32>().clone();
        if states.len() != expected {
            return Err(self.protocol(FrameError::Count {
                found: states.len(),
                what: "states",
                expected,
                of: "groups",
            }));
        }
        Ok(states)
    }
}

/// One group's state (the pickled instance; `None` before any row).
type State = Option<Vec<u8>>;

fn states_array<'a>(states: impl Iterator<Item = &'a State>) -> BinaryArray {
    states.map(|s| s.as_deref()).collect()
}

/// The groups accumulator: windows and grouped aggregates.
#[derive(Debug)]
struct PythonGroupsAccumulator {
    caller: Caller,
    states: Vec<State>,
    /// Bytes the states hold.
    bytes: usize,
    /// Scratch: each group's position among a batch's touched groups
    /// (`-1` for untouched), reset after each batch.
    local: Vec<i32>,
}

impl PythonGroupsAccumulator {
    /// Rows the filter keeps, as indices (`None`: all).
    fn kept(filter: Option<&BooleanArray>) -> Option<UInt32Array> {
        let filter = filter?;
        Some(
            (0..filter.len())
                .filter(|&i| filter.is_valid(i) && filter.value(i))
                .map(|i| i as u32)
                .collect(),
        )
    }

    /// The touched groups in first-seen order, and each row's position
    /// among them.
    fn touched(
        &mut self,
        group_indices: &[usize],
        kept: Option<&UInt32Array>,
        total: usize,
    ) -> (Vec<usize>, Int32Array) {
        if self.states.len() < total {
            self.states.resize(total, None);
        }
        if self.local.len() < total {
            self.local.resize(total, -1);
        }
        let mut touched = Vec::new();
        let mut rows = Vec::with_capacity(kept.map_or(group_indices.len(), |k| k.len()));
        let mut visit = |g: usize| {
            if self.local[g] < 0 {
                self.local[g] = touched.len() as i32;
                touched.push(g);
            }
            rows.push(self.local[g]);
        };
        match kept {
            Some(kept) => kept
                .values()
                .iter()
                .for_each(|&i| visit(group_indices[i as usize])),
            None => group_indices.iter().for_each(|&g| visit(g)),
        }
        for &g in &touched {
            self.local[g] = -1;
        }
        (touched, Int32Array::from(rows))
    }

    fn store(&mut self, touched: &[usize], states: &BinaryArray) {
        for (j, &g) in touched.iter().enumerate() {
            let new = states.is_valid(j).then(|| states.value(j).to_vec());
            self.bytes += new.as_ref().map_or(0, Vec::len);
            let old = std::mem::replace(&mut self.states[g], new);
            self.bytes -= old.as_ref().map_or(0, Vec::len);
        }
    }

    fn emit(&mut self, emit_to: EmitTo) -> Vec<State> {
        let emitted = emit_to.take_needed(&mut self.states);
        self.bytes -= emitted
            .iter()
            .map(|s| s.as_ref().map_or(0, Vec::len))
            .sum::<usize>();
        emitted
    }
}

fn pick(columns: &[ArrayRef], kept: Option<&UInt32Array>) -> Result<Vec<ArrayRef>> {
    match kept {
        None => Ok(columns.to_vec()),
        Some(kept) => Ok(columns
            .iter()
            .map(|c| take(c.as_ref(), kept, None))
            .collect::<Result<_, _>>()?),
    }
}

impl GroupsAccumulator for PythonGroupsAccumulator {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        let kept = Self::kept(opt_filter);
        let (touched, rows) = self.touched(group_indices, kept.as_ref(), total_num_groups);
        if rows.is_empty() {
            return Ok(());
        }
        let values = pick(values, kept.as_ref())?;
        let states = states_array(touched.iter().map(|&g| &self.states[g]));
        let updated = self.caller.update(&states, &rows, &values, false)?;
        self.store(&touched, &updated);
        Ok(())
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let states = self.emit(emit_to);
        self.caller.finish(&states_array(states.iter()))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let states = self.emit(emit_to);
        Ok(vec![Arc::new(states_array(states.iter()))])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        let (touched, rows) = self.touched(group_indices, None, total_num_groups);
        if rows.is_empty() {
            return Ok(());
        }
        let Some(incoming) = values.first() else {
            return Err(self
                .caller
                .protocol(FrameError::Missing("no state column to merge")));
        };
        let states = states_array(touched.iter().map(|&g| &self.states[g]));
        let merged = self.caller.merge(&states, &rows, incoming)?;
        self.store(&touched, &merged);
        Ok(())
    }

    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        // Each row its own group.
        let rows = values.first().map_or(0, |v| v.len());
        let kept = Self::kept(opt_filter);
        let values = pick(values, kept.as_ref())?;
        let n = kept.as_ref().map_or(rows, |k| k.len());
        let fresh: BinaryArray = std::iter::repeat_n(None::<&[u8]>, n).collect();
        let groups = Int32Array::from_iter_values(0..n as i32);
        let states = if n == 0 {
            fresh
        } else {
            self.caller.update(&fresh, &groups, &values, false)?
        };
        let Some(kept) = kept else {
            return Ok(vec![Arc::new(states)]);
        };
        let mut out: Vec<Option<&[u8]>> = vec![None; rows];
        for (j, &i) in kept.values().iter().enumerate() {
            out[i as usize] = states.is_valid(j).then(|| states.value(j));
        }
        Ok(vec![Arc::new(out.into_iter().collect::<BinaryArray>())])
    }

    fn size(&self) -> usize {
        self.bytes
            + self.states.capacity() * std::mem::size_of::<State>()
            + self.local.capacity() * std::mem::size_of::<i32>()
    }
}

/// The single-group accumulator: OVER frames and updating aggregates.
///
/// Its callers fold a row or a batch, take some back, and read the value,
/// over and over (OVER reads after every row). The rows folded and taken
/// back are kept here until the value (or the state) is asked for, then
/// sent with it in one `AGG_STEPS` request: one round trip per read, not
/// one per call.
#[derive(Debug)]
struct PythonAccumulator {
    caller: Caller,
    state: State,
    retracts: bool,
    /// Steps not yet applied: retract?, the rows' argument columns.
    pending: Vec<(bool, Vec<ArrayRef>)>,
    pending_rows: usize,
    /// The value of `state` when no step is pending (read again for free).
    value: Option<ScalarValue>,
}

impl PythonAccumulator {
    fn new(caller: Caller, retracts: bool) -> Self {
        Self {
            caller,
            state: None,
            retracts,
            pending: Vec::new(),
            pending_rows: 0,
            value: None,
        }
    }

    fn push(&mut self, values: &[ArrayRef], retract: bool) {
        let rows = values.first().map_or(0, |v| v.len());
        if rows > 0 {
            self.pending.push((retract, values.to_vec()));
            self.pending_rows += rows;
            self.value = None;
        }
    }

    /// Applies the pending steps, and reads the value when `finish`.
    fn apply(&mut self, finish: bool) -> Result<()> {
        if self.pending.is_empty() && (!finish || self.value.is_some()) {
            return Ok(());
        }
        let steps = std::mem::take(&mut self.pending);
        self.pending_rows = 0;
        let (state, value) = self.caller.steps(&self.state, &steps, finish)?;
        self.state = state;
        self.value = value;
        Ok(())
    }
}

impl Accumulator for PythonAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.push(values, false);
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.push(values, true);
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        self.retracts
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.apply(true)?;
        match &self.value {
            Some(value) => Ok(value.clone()),
            None => Err(self
                .caller
                .protocol(FrameError::Missing("no value came back"))),
        }
    }

    fn size(&self) -> usize {
        // Pending rows: their columns are slices of batches held anyway;
        // counted at a few bytes a value.
        std::mem::size_of_val(self)
            + self.state.as_ref().map_or(0, Vec::capacity)
            + self.pending_rows * 16
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.apply(false)?;
        Ok(vec![ScalarValue::Binary(self.state.clone())])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let Some(incoming) = states.first() else {
            return Ok(());
        };
        let incoming = filter(
            incoming.as_ref(),
            &datafusion::arrow::compute::is_not_null(incoming.as_ref())?,
        )?;
        if incoming.is_empty() {
            return Ok(());
        }
        self.apply(false)?;
        let states = states_array(std::iter::once(&self.state));
        let groups = Int32Array::from(vec![0; incoming.len()]);
        let merged = self.caller.merge(&states, &groups, &incoming)?;
        self.state = merged.is_valid(0).then(|| merged.value(0).to_vec());
        self.value = None;
        Ok(())
    }
}
