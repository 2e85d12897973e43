//! The OVER operator's checkpoint: waiting rows, and per key its row
//! count, last event time, accumulator states, sliding frames and `lag`
//! values, as Arrow tables (see the module docs of `over`).
//!
//! In: the operator's state. Out: a [`StateSnapshot`]; and back.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Int64Array, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Accumulator;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;

use super::operator::{LagValue, OverOperator};
use super::running::Aggregator;
use super::OverFunction;
use crate::error::{EngineError, Result};
use crate::rescale::{InstanceState, KeyRange, KeyedBy};
use crate::state::declared::{TableKey, TableSpec};
use crate::state::{scalars_to_array, StateSnapshot};
use crate::time::Timestamp;

/// The state table with a row per key.
pub(super) const KEYS: &str = "keys";

/// Whether a sliding aggregate's state is restored as saved (its state is
/// all retraction needs: sums, counts, averages, variances), rather than
/// rebuilt by adding the frame's rows again (min and max need the rows).
pub(super) fn state_restores_sliding(expr: &AggregateFunctionExpr) -> bool {
    super::super::retracts_in_any_order(expr)
}

/// Sliding accumulators' states (one row per key) as a table.
pub(super) fn sliding_state_table(states: Vec<Vec<ScalarValue>>) -> Result<RecordBatch> {
    let width = states.first().map_or(0, Vec::len);
    let mut columns: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(states.len()); width];
    for row in states {
        for (column, value) in columns.iter_mut().zip(row) {
            column.push(value);
        }
    }
    let arrays = columns
        .into_iter()
        .map(ScalarValue::iter_to_array)
        .collect::<datafusion::error::Result<Vec<ArrayRef>>>()?;
    let fields: Vec<Field> = arrays
        .iter()
        .enumerate()
        .map(|(i, a)| Field::new(format!("state_{i}"), a.data_type().clone(), true))
        .collect();
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

/// A sliding frame's row in a checkpoint: the key's index, its time, and its
/// argument values (`None`: its FILTER left it out).
pub(super) type FrameRow = (u64, Timestamp, Option<Vec<ScalarValue>>);

/// Rows' argument values (one `Vec` per row) as one array per argument.
pub(super) fn retracted(rows: Vec<Vec<ScalarValue>>, width: usize) -> Result<Vec<ArrayRef>> {
    let mut columns: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(rows.len()); width];
    for row in rows {
        for (column, value) in columns.iter_mut().zip(row) {
            column.push(value);
        }
    }
    columns
        .into_iter()
        .map(|c| Ok(ScalarValue::iter_to_array(c)?))
        .collect()
}

/// What an OVER node checkpoints besides its tables.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct OverMeta {
    pub(super) last_sweep: Timestamp,
    /// Late rows dropped (absent from checkpoints written before late rows
    /// were kept).
    #[serde(default)]
    pub(super) late_rows: u64,
}

impl OverOperator {
    /// A sliding frame's rows as a checkpoint table: key index, time,
    /// whether the aggregate took the row, its argument values.
    pub(super) fn frame_table(
        &self,
        f: usize,
        expr: &AggregateFunctionExpr,
        rows: Vec<FrameRow>,
    ) -> Result<RecordBatch> {
        let arg_types = expr
            .expressions()
            .iter()
            .map(|e| e.data_type(&self.plan.input_schema))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let mut owners = Vec::with_capacity(rows.len());
        let mut times = Vec::with_capacity(rows.len());
        let mut included = Vec::with_capacity(rows.len());
        let mut args: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(rows.len()); arg_types.len()];
        for (owner, time, values) in rows {
            owners.push(owner);
            times.push(time);
            included.push(values.is_some());
            match values {
                Some(values) => {
                    for (column, value) in args.iter_mut().zip(values) {
                        column.push(value);
                    }
                }
                None => {
                    for (column, data_type) in args.iter_mut().zip(&arg_types) {
                        column.push(ScalarValue::try_from(data_type)?);
                    }
                }
            }
        }
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(owners)),
            Arc::new(Int64Array::from(times)),
            Arc::new(BooleanArray::from(included)),
        ];
        for (values, data_type) in args.into_iter().zip(&arg_types) {
            columns.push(scalars_to_array(values, data_type)?);
        }
        Ok(RecordBatch::try_new(
            self.table(&format!("frame{f}"))?.schema().clone(),
            columns,
        )?)
    }

    /// The declared state table `name`.
    pub(super) fn table(&self, name: &str) -> Result<&TableSpec> {
        crate::state::declared::find(&self.tables, name)
            .ok_or_else(|| EngineError::State(format!("over: no state table '{name}' declared")))
    }

    /// The per-key state as checkpoint tables. Accumulators hand their state
    /// over by draining it, so each is replaced by a fresh one holding the
    /// same state.
    pub(super) fn key_tables(&mut self) -> Result<Vec<(String, RecordBatch)>> {
        let schema = self.table(KEYS)?.schema().clone();
        let functions = self.plan.functions.clone();
        let count = self.keys.len();
        let mut key_bytes: Vec<&[u8]> = Vec::with_capacity(count);
        let mut last_times = Vec::with_capacity(count);
        let mut rows = Vec::with_capacity(count);
        let mut seen: Vec<Vec<u64>> = vec![Vec::with_capacity(count); functions.len()];
        let mut states: Vec<Vec<Vec<ScalarValue>>> = functions
            .iter()
            .map(|f| match f {
                OverFunction::Aggregate { expr, .. } => {
                    Ok(vec![Vec::with_capacity(count); expr.state_fields()?.len()])
                }
                _ => Ok(Vec::new()),
            })
            .collect::<Result<_>>()?;
        let mut lag_keys: Vec<Vec<u64>> = vec![Vec::new(); functions.len()];
        let mut lag_values: Vec<Vec<ScalarValue>> = vec![Vec::new(); functions.len()];
        // Sliding frames: (key index, time, included, argument values) per row held.
        let mut frame_rows: Vec<Vec<FrameRow>> = vec![Vec::new(); functions.len()];
        // Sliding accumulators' own state, by key (its shape is theirs, not
        // the aggregate's `state_fields`).
        let mut slide_states: Vec<Vec<Vec<ScalarValue>>> = vec![Vec::new(); functions.len()];
        for (index, (key, state)) in self.keys.iter_mut().enumerate() {
            key_bytes.push(key.as_slice());
            last_times.push(state.last_time);
            rows.push(state.rows);
            for (f, function) in functions.iter().enumerate() {
                seen[f].push(state.seen[f]);
                match function {
                    // A sliding frame keeps its rows (to take them out later).
                    // Sums, counts, averages and variances also keep their
                    // state, restored exactly (replaying the rows would add
                    // them in another order than they were added and taken
                    // out); min, max and the rest are rebuilt from the rows,
                    // their state columns left NULL.
                    OverFunction::Aggregate { frame, expr, .. } if frame.slides() => {
                        if let Some(acc) = state.accumulators[f].as_mut() {
                            if state_restores_sliding(expr) {
                                slide_states[f].push(acc.accumulator().state()?);
                            }
                        }
                        for column in states[f].iter_mut() {
                            column.push(ScalarValue::Null);
                        }
                        for (time, values) in &state.frames[f] {
                            frame_rows[f].push((index as u64, *time, values.clone()));
                        }
                    }
                    OverFunction::Aggregate { expr, .. } => {
                        let values = match state.accumulators[f].as_mut() {
                            // A native state is read, not drained.
                            Some(Aggregator::Running(running)) => running.state()?,
                            Some(Aggregator::DataFusion(acc)) => {
                                let values = acc.state()?;
                                let arrays = values
                                    .iter()
                                    .map(|v| v.to_array())
                                    .collect::<datafusion::error::Result<Vec<_>>>()?;
                                let mut fresh = expr.create_accumulator()?;
                                fresh.merge_batch(&arrays)?;
                                *acc = fresh;
                                values
                            }
                            None => {
                                return Err(EngineError::operator("over", "missing accumulator"))
                            }
                        };
                        for (column, value) in states[f].iter_mut().zip(values) {
                            column.push(value);
                        }
                    }
                    OverFunction::Lag { .. } => {
                        for value in &state.lags[f] {
                            let LagValue::Held(value) = value else {
                                return Err(EngineError::operator(
                                    "over",
                                    "a lag value points into a finished batch",
                                ));
                            };
                            lag_keys[f].push(index as u64);
                            lag_values[f].push(value.clone());
                        }
                    }
                    OverFunction::RowNumber | OverFunction::Lead { .. } => {}
                }
            }
        }
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(BinaryArray::from(key_bytes)),
            Arc::new(Int64Array::from(last_times)),
            Arc::new(Int64Array::from(rows)),
        ];
        for (f, values) in seen.into_iter().enumerate() {
            columns.push(Arc::new(UInt64Array::from(values)));
            for column in std::mem::take(&mut states[f]) {
                let field = schema.field(columns.len());
                columns.push(scalars_to_array(column, field.data_type())?);
            }
        }
        let mut tables = vec![(KEYS.to_string(), RecordBatch::try_new(schema, columns)?)];
        for (f, function) in functions.iter().enumerate() {
            if let OverFunction::Aggregate { expr, frame, .. } = function {
                if frame.slides() {
                    let rows = std::mem::take(&mut frame_rows[f]);
                    tables.push((format!("frame{f}"), self.frame_table(f, expr, rows)?));
                    let kept = std::mem::take(&mut slide_states[f]);
                    if !kept.is_empty() {
                        tables.push((format!("slide{f}"), sliding_state_table(kept)?));
                    }
                }
            }
            if let OverFunction::Lag { .. } = function {
                let schema = self.table(&format!("lag{f}"))?.schema().clone();
                let data_type = schema.field(1).data_type().clone();
                let keys: ArrayRef = Arc::new(UInt64Array::from(std::mem::take(&mut lag_keys[f])));
                let values = scalars_to_array(std::mem::take(&mut lag_values[f]), &data_type)?;
                tables.push((
                    format!("lag{f}"),
                    RecordBatch::try_new(schema, vec![keys, values])?,
                ));
            }
        }
        Ok(tables)
    }

    pub(super) fn load_keys(&mut self, state: &mut StateSnapshot) -> Result<()> {
        let table = state.take(self.table(KEYS)?)?;
        let bad = |what: &str| {
            EngineError::State(format!("over: checkpoint column {what} has the wrong type"))
        };
        let keys = table
            .column(0)
            .as_any()
            .downcast_ref::<BinaryArray>()
            .ok_or_else(|| bad("key"))?;
        let last_times = table
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| bad("last_time"))?;
        let rows = table
            .column(2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| bad("rows"))?;
        let mut states = Vec::with_capacity(table.num_rows());
        for i in 0..table.num_rows() {
            let mut key_state = self.new_key_state()?;
            key_state.last_time = last_times.value(i);
            key_state.rows = rows.value(i);
            states.push(key_state);
        }
        let mut column = 3;
        for (f, function) in self.plan.functions.clone().iter().enumerate() {
            let seen = table
                .column(column)
                .as_any()
                .downcast_ref::<UInt64Array>()
                .ok_or_else(|| bad("seen"))?;
            column += 1;
            for (i, key_state) in states.iter_mut().enumerate() {
                key_state.seen[f] = seen.value(i);
            }
            match function {
                OverFunction::Aggregate { expr, frame, .. } if frame.slides() => {
                    let kept = state_restores_sliding(expr);
                    if kept && !states.is_empty() {
                        let saved = state.take(self.table(&format!("slide{f}"))?)?;
                        for (i, key_state) in states.iter_mut().enumerate() {
                            if let Some(acc) = key_state.accumulators[f].as_mut() {
                                let slice: Vec<ArrayRef> =
                                    saved.columns().iter().map(|c| c.slice(i, 1)).collect();
                                acc.accumulator().merge_batch(&slice)?;
                            }
                        }
                    }
                    column += expr.state_fields()?.len();
                    let rows = state.take(self.table(&format!("frame{f}"))?)?;
                    let owners = rows
                        .column(0)
                        .as_any()
                        .downcast_ref::<UInt64Array>()
                        .ok_or_else(|| bad("key_index"))?;
                    let times = rows
                        .column(1)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .ok_or_else(|| bad("time"))?;
                    let included = rows
                        .column(2)
                        .as_any()
                        .downcast_ref::<BooleanArray>()
                        .ok_or_else(|| bad("included"))?;
                    for j in 0..rows.num_rows() {
                        let owner = states.get_mut(owners.value(j) as usize).ok_or_else(|| {
                            EngineError::State("over: frame row of an unknown key".into())
                        })?;
                        let values = if included.value(j) {
                            if !kept {
                                let args: Vec<ArrayRef> =
                                    rows.columns()[3..].iter().map(|c| c.slice(j, 1)).collect();
                                if let Some(acc) = owner.accumulators[f].as_mut() {
                                    acc.accumulator().update_batch(&args)?;
                                }
                            }
                            Some(
                                rows.columns()[3..]
                                    .iter()
                                    .map(|c| ScalarValue::try_from_array(c.as_ref(), j))
                                    .collect::<datafusion::error::Result<Vec<_>>>()?,
                            )
                        } else {
                            None
                        };
                        owner.frames[f].push_back((times.value(j), values));
                    }
                }
                OverFunction::Aggregate { expr, .. } => {
                    let width = expr.state_fields()?.len();
                    let columns = &table.columns()[column..column + width];
                    column += width;
                    for (i, key_state) in states.iter_mut().enumerate() {
                        if let Some(acc) = key_state.accumulators[f].as_mut() {
                            let slice: Vec<ArrayRef> =
                                columns.iter().map(|c| c.slice(i, 1)).collect();
                            acc.accumulator().merge_batch(&slice)?;
                        }
                    }
                }
                OverFunction::Lag { .. } => {
                    let lags = state.take(self.table(&format!("lag{f}"))?)?;
                    let owners = lags
                        .column(0)
                        .as_any()
                        .downcast_ref::<UInt64Array>()
                        .ok_or_else(|| bad("key_index"))?;
                    for j in 0..lags.num_rows() {
                        let owner = states.get_mut(owners.value(j) as usize).ok_or_else(|| {
                            EngineError::State("over: lag value of an unknown key".into())
                        })?;
                        owner.lags[f].push_back(LagValue::Held(ScalarValue::try_from_array(
                            lags.column(1).as_ref(),
                            j,
                        )?));
                    }
                }
                OverFunction::RowNumber | OverFunction::Lead { .. } => {}
            }
        }
        self.keys = (0..table.num_rows())
            .map(|i| keys.value(i).to_vec())
            .zip(states)
            .collect();
        Ok(())
    }
}

/// The state tables of an OVER node: `pending` holds input rows and
/// `waiting` (with `lead`) rows waiting for their leads, output columns
/// (both keyed by the partition columns); `keys` a row per key, its key
/// row-encoded, its last time, its row count, per function the rows it
/// saw and an aggregate's state; `slide{f}` a sliding aggregate's own state
/// aligned to `keys`; `frame{f}` a sliding frame's rows and `lag{f}` the
/// values `lag` holds, pointing into `keys` by `key_index`.
pub(super) fn state_tables(plan: &super::OverPlan) -> Result<Vec<TableSpec>> {
    let partition = TableKey::Exprs(plan.partition_by.clone());
    let mut tables =
        vec![TableSpec::new("pending", plan.input_schema.clone()).keyed(partition.clone())];
    if plan.has_leads() {
        // Checkpoints written before LEAD waited for its rows lack it.
        tables.push(
            TableSpec::new("waiting", plan.output_schema.clone())
                .keyed(partition)
                .optional(),
        );
    }
    let mut fields = vec![
        Field::new("key", DataType::Binary, false),
        Field::new("last_time", DataType::Int64, false),
        Field::new("rows", DataType::Int64, false),
    ];
    let mut per_function = Vec::new();
    let under = |by| TableKey::Dependent {
        on: KEYS.to_string(),
        by,
    };
    for (f, function) in plan.functions.iter().enumerate() {
        fields.push(Field::new(format!("seen_{f}"), DataType::UInt64, false));
        match function {
            OverFunction::Aggregate { expr, frame, .. } => {
                for (i, field) in expr.state_fields()?.iter().enumerate() {
                    fields.push(Field::new(
                        format!("state_{f}_{i}"),
                        field.data_type().clone(),
                        true,
                    ));
                }
                if frame.slides() {
                    let mut frame_fields = vec![
                        Field::new("key_index", DataType::UInt64, false),
                        Field::new("time", DataType::Int64, false),
                        Field::new("included", DataType::Boolean, false),
                    ];
                    for (i, arg) in expr.expressions().iter().enumerate() {
                        frame_fields.push(Field::new(
                            format!("arg_{i}"),
                            arg.data_type(&plan.input_schema)?,
                            true,
                        ));
                    }
                    per_function.push(
                        TableSpec::new(format!("frame{f}"), Arc::new(Schema::new(frame_fields)))
                            .keyed(under(KeyedBy::Index)),
                    );
                    // Written for keys that have a sliding state of their own.
                    per_function.push(
                        TableSpec::new(format!("slide{f}"), Arc::new(Schema::empty()))
                            .keyed(under(KeyedBy::Aligned))
                            .run_time_columns()
                            .optional(),
                    );
                }
            }
            OverFunction::Lag { value, .. } => per_function.push(
                TableSpec::new(
                    format!("lag{f}"),
                    Arc::new(Schema::new(vec![
                        Field::new("key_index", DataType::UInt64, false),
                        Field::new("value", value.data_type(&plan.input_schema)?, true),
                    ])),
                )
                .keyed(under(KeyedBy::Index)),
            ),
            OverFunction::RowNumber | OverFunction::Lead { .. } => {}
        }
    }
    tables.push(TableSpec::new(KEYS, Arc::new(Schema::new(fields))).keyed(
        super::super::encoded_key(&plan.partition_by, &plan.input_schema)?,
    ));
    tables.extend(per_function);
    Ok(tables)
}

/// The state of one instance of an OVER node resumed at another
/// parallelism ([`crate::rescale`]): its tables kept by their declared keys
/// (`frame{f}` and `lag{f}` renumbered to the kept keys), the sweeps at
/// the least, the late rows summed.
pub(super) fn rescale_over(
    plan: &super::OverPlan,
    parts: Vec<InstanceState>,
    range: &KeyRange,
) -> Result<StateSnapshot> {
    crate::rescale::rescaled(
        parts,
        &state_tables(plan)?,
        range,
        |metas: &[(OverMeta, bool)]| OverMeta {
            last_sweep: crate::rescale::least(metas, |m| m.last_sweep),
            late_rows: crate::rescale::counted_sum(metas, |m| m.late_rows),
        },
    )
}
