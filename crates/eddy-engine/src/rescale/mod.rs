//! Rescaling: resuming a checkpoint with another number of instances of
//! each keyed operator.
//!
//! In: a checkpoint of a job run at N instances, and the job's graph at M.
//! Out: the same checkpoint laid out for M ([`checkpoint::rescale`]): every
//! node that runs once keeps its state; each of the M instances of a keyed
//! operator gets the rows of its key groups ([`crate::key_groups`]) from
//! the old instances that held them, through the operator's
//! [`OperatorPlan::rescale_state`], which knows where its state tables
//! keep their keys. What the operator counted (late rows, say) goes to
//! one new instance only, so totals stay as they were.
//!
//! eddy's keyed state is Arrow tables whose rows carry their keys, so a
//! new instance re-derives each row's group from the row itself: nothing
//! is stored per group, and a checkpoint is free to be taken at any N.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::key_groups::KeyGroups;
//! use eddy_engine::rescale::KeyRange;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("k", DataType::Utf8, true),
//!     Field::new("n", DataType::Int64, false),
//! ]));
//! let keys: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c", "d"]));
//! let rows = RecordBatch::try_new(schema, vec![keys.clone(), Arc::new(Int64Array::from(vec![1, 2, 3, 4]))]).unwrap();
//! // Two instances between them keep every row exactly once.
//! let groups = KeyGroups::default();
//! let kept: usize = (0..2)
//!     .map(|i| KeyRange::of_instance(groups, i, 2).keep(&rows, &[keys.clone()]).unwrap().num_rows())
//!     .sum();
//! assert_eq!(kept, 4);
//! ```
//!
//! [`OperatorPlan::rescale_state`]: crate::operator::OperatorPlan::rescale_state

pub mod checkpoint;

use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::compute::{concat_batches, filter_record_batch};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::PhysicalExpr;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{EngineError, Result};
use crate::key_groups::KeyGroups;
use crate::partition::key_group_rows;
use crate::state::declared::{TableKey, TableSpec};
use crate::state::StateSnapshot;

/// The key groups one new instance owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    groups: KeyGroups,
    owned: Range<u32>,
}

impl KeyRange {
    /// The groups instance `index` of `instances` owns.
    pub fn of_instance(groups: KeyGroups, index: u32, instances: u32) -> Self {
        Self {
            groups,
            owned: groups.range_of(index, instances),
        }
    }

    /// Whether `group` is owned.
    pub fn owns(&self, group: u32) -> bool {
        self.owned.contains(&group)
    }

    /// Which of `rows` rows with key columns `keys` are owned.
    pub fn mask(&self, keys: &[ArrayRef], rows: usize) -> Result<BooleanArray> {
        let groups = key_group_rows(keys, rows, self.groups)?;
        Ok(groups.into_iter().map(|g| Some(self.owns(g))).collect())
    }

    /// The rows of `batch` whose keys (`keys`, one entry per row of
    /// `batch`) are owned.
    pub fn keep(&self, batch: &RecordBatch, keys: &[ArrayRef]) -> Result<RecordBatch> {
        let mask = self.mask(keys, batch.num_rows())?;
        Ok(filter_record_batch(batch, &mask)?)
    }

    /// The rows of `batch` whose keys, `exprs` evaluated over the rows,
    /// are owned (state that holds input rows: the operator's partition
    /// keys over them).
    pub fn keep_by(
        &self,
        batch: &RecordBatch,
        exprs: &[Arc<dyn PhysicalExpr>],
    ) -> Result<RecordBatch> {
        self.keep(batch, &evaluated(exprs, batch)?)
    }
}

/// `exprs` evaluated over `batch`'s rows.
fn evaluated(exprs: &[Arc<dyn PhysicalExpr>], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    let rows = batch.num_rows();
    Ok(exprs
        .iter()
        .map(|e| e.evaluate(batch)?.into_array(rows))
        .collect::<datafusion::error::Result<Vec<_>>>()?)
}

/// The checkpointed state of one old instance, handed to
/// [`crate::operator::OperatorPlan::rescale_state`].
#[derive(Debug, Clone)]
pub struct InstanceState {
    /// What the instance checkpointed.
    pub state: StateSnapshot,
    /// Whether the new instance carries this old instance's counters
    /// (late rows and the like): exactly one new instance does.
    pub counted: bool,
}

/// Each part's meta, decoded, with whether its counters are carried.
pub fn metas<T: DeserializeOwned>(parts: &[InstanceState]) -> Result<Vec<(T, bool)>> {
    parts
        .iter()
        .map(|p| Ok((p.state.meta::<T>()?, p.counted)))
        .collect()
}

/// The least of a time (a watermark) over the parts: all instances saw the
/// same markers, and the least is the one none has gone past
/// ([`crate::time::WATERMARK_MIN`] without parts).
pub fn least<T>(
    metas: &[(T, bool)],
    time: impl Fn(&T) -> crate::time::Timestamp,
) -> crate::time::Timestamp {
    metas
        .iter()
        .map(|(m, _)| time(m))
        .min()
        .unwrap_or(crate::time::WATERMARK_MIN)
}

/// The sum of a counter over the parts whose counters are carried.
pub fn counted_sum<T>(metas: &[(T, bool)], counter: impl Fn(&T) -> u64) -> u64 {
    metas
        .iter()
        .filter(|(_, counted)| *counted)
        .map(|(m, _)| counter(m))
        .sum()
}

/// The owned rows of table `name` of every part, as one batch; `keys_of`
/// gives a table's key columns.
pub fn kept_table(
    parts: &mut [InstanceState],
    name: &str,
    range: &KeyRange,
    keys_of: impl Fn(&RecordBatch) -> Result<Vec<ArrayRef>>,
) -> Result<RecordBatch> {
    let mut kept = Vec::with_capacity(parts.len());
    for part in parts.iter_mut() {
        let table = part.state.take_table(name)?;
        let keys = keys_of(&table)?;
        kept.push(range.keep(&table, &keys)?);
    }
    let schema = kept
        .first()
        .map(RecordBatch::schema)
        .ok_or_else(|| EngineError::State(format!("no instance's '{name}' table to rescale")))?;
    Ok(concat_batches(&schema, &kept)?)
}

/// The owned rows of table `name` of every part, its keys being `exprs`
/// over its rows (see [`KeyRange::keep_by`]).
pub fn kept_rows(
    parts: &mut [InstanceState],
    name: &str,
    range: &KeyRange,
    exprs: &[Arc<dyn PhysicalExpr>],
) -> Result<RecordBatch> {
    kept_table(parts, name, range, |table| evaluated(exprs, table))
}

/// The key columns `columns` of a table, for [`kept_table`].
pub fn columns(table: &RecordBatch, columns: Range<usize>) -> Result<Vec<ArrayRef>> {
    if columns.end > table.num_columns() {
        return Err(EngineError::State(format!(
            "a state table of {} columns has no key columns {columns:?}",
            table.num_columns()
        )));
    }
    Ok(table.columns()[columns].to_vec())
}

/// How a table of a snapshot hangs off a table with a row per key (see
/// [`kept_by_key_table`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyedBy {
    /// Row `i` belongs to the key of the key table's row `i`.
    Aligned,
    /// Its first column (`UInt64`) is the row of the key table its row
    /// belongs to.
    Index,
}

/// For state kept as a table with a row per key (`key_table`, whose key
/// columns `keys_of` gives) and tables that hang off it (`dependent` says
/// how, by name; `None`: not one of them, left in the part): the owned
/// keys' rows of each, from every part, with the index columns renumbered
/// to the rows of the key table returned. The key table comes first.
pub fn kept_by_key_table(
    parts: &mut [InstanceState],
    key_table: &str,
    range: &KeyRange,
    keys_of: impl Fn(&RecordBatch) -> Result<Vec<ArrayRef>>,
    dependent: impl Fn(&str) -> Option<KeyedBy>,
) -> Result<Vec<(String, RecordBatch)>> {
    let mut kept: Vec<(String, Vec<RecordBatch>)> = Vec::new();
    let mut push = |name: &str, batch: RecordBatch| match kept.iter_mut().find(|(n, _)| n == name) {
        Some((_, batches)) => batches.push(batch),
        None => kept.push((name.to_string(), vec![batch])),
    };
    let mut offset = 0u64;
    for part in parts.iter_mut() {
        part.state.read_files()?;
        let keys = part.state.take_table(key_table)?;
        let mask = range.mask(&keys_of(&keys)?, keys.num_rows())?;
        // Each old row's new one (None: the key went to another instance).
        let mut renumbered = Vec::with_capacity(keys.num_rows());
        for owned in mask.values().iter() {
            renumbered.push(owned.then(|| {
                offset += 1;
                offset - 1
            }));
        }
        push(key_table, filter_record_batch(&keys, &mask)?);
        let mut others = Vec::new();
        for table in std::mem::take(&mut part.state.tables) {
            match dependent(&table.name) {
                Some(KeyedBy::Aligned) => {
                    push(&table.name, filter_record_batch(&table.batch, &mask)?)
                }
                Some(KeyedBy::Index) => {
                    let rows = table
                        .batch
                        .column(0)
                        .as_any()
                        .downcast_ref::<UInt64Array>()
                        .ok_or_else(|| {
                            EngineError::State(format!(
                                "the first column of state table '{}' is not a row number",
                                table.name
                            ))
                        })?;
                    let moved: Vec<Option<u64>> = rows
                        .values()
                        .iter()
                        .map(|&i| renumbered.get(i as usize).copied().flatten())
                        .collect();
                    let owned: BooleanArray = moved.iter().map(|i| Some(i.is_some())).collect();
                    let batch = filter_record_batch(&table.batch, &owned)?;
                    let mut columns = batch.columns().to_vec();
                    columns[0] =
                        Arc::new(UInt64Array::from_iter_values(moved.into_iter().flatten()));
                    push(&table.name, RecordBatch::try_new(batch.schema(), columns)?);
                }
                None => others.push(table),
            }
        }
        part.state.tables = others;
    }
    kept.into_iter()
        .map(|(name, batches)| {
            let schema = batches[0].schema();
            Ok((name, concat_batches(&schema, &batches)?))
        })
        .collect()
}

/// A keyed operator's state for one new instance from the old instances'
/// `parts` ([`crate::operator::OperatorPlan::rescale_state`]): its small
/// values merged by `merge` (each part's decoded, with whether its
/// counters are carried: take the least watermark, sum the counted
/// counters), every declared table (`specs`) kept by key
/// ([`kept_tables`]). Parts without state (an instance that had finished)
/// hand over nothing; without any, the instance starts empty.
pub fn rescaled<M: Serialize + DeserializeOwned>(
    parts: Vec<InstanceState>,
    specs: &[TableSpec],
    range: &KeyRange,
    merge: impl FnOnce(&[(M, bool)]) -> M,
) -> Result<StateSnapshot> {
    let mut parts: Vec<InstanceState> = parts.into_iter().filter(|p| !p.state.is_empty()).collect();
    if parts.is_empty() {
        return Ok(StateSnapshot::default());
    }
    let metas = metas::<M>(&parts)?;
    let mut state = StateSnapshot::with_meta(&merge(&metas))?;
    kept_tables(&mut parts, specs, range, &mut state)?;
    Ok(state)
}

/// A table's key columns, worked out from its rows.
type KeysOf<'a> = dyn Fn(&RecordBatch) -> Result<Vec<ArrayRef>> + 'a;

/// The owned rows of every declared table (`specs`) of every part, put
/// into `state`: each table kept as its declaration says its rows are
/// keyed ([`TableKey`]), tables that hang off another kept with it. A
/// table added after the parts were written ([`TableSpec::optional`])
/// and absent from them is left out. An operator's
/// [`crate::operator::OperatorPlan::rescale_state`] merges its meta and
/// calls this for its tables.
pub fn kept_tables(
    parts: &mut [InstanceState],
    specs: &[TableSpec],
    range: &KeyRange,
    state: &mut StateSnapshot,
) -> Result<()> {
    for spec in specs {
        let name = spec.name();
        if spec.is_optional()
            && parts
                .iter()
                .all(|p| !p.state.tables.iter().any(|t| t.name == name))
        {
            continue;
        }
        let keys_of: Box<KeysOf<'_>> = match spec.key() {
            TableKey::Whole => {
                return Err(EngineError::Checkpoint(format!(
                    "state table '{name}' is not keyed and cannot be spread over another number of instances"
                )))
            }
            // Kept with the table they hang off.
            TableKey::Dependent { .. } => continue,
            TableKey::Columns(key) => {
                let key = key.clone();
                Box::new(move |t| columns(t, key.clone()))
            }
            TableKey::Encoded(types) => {
                let converter = datafusion::arrow::row::RowConverter::new(
                    types
                        .iter()
                        .map(|t| datafusion::arrow::row::SortField::new(t.clone()))
                        .collect(),
                )?;
                Box::new(move |t| crate::operators::decoded_keys(&converter, t.column(0)))
            }
            TableKey::Exprs(exprs) => Box::new(|t| evaluated(exprs, t)),
        };
        let dependents: Vec<(&str, KeyedBy)> = specs
            .iter()
            .filter_map(|d| match d.key() {
                TableKey::Dependent { on, by } if on == name => Some((d.name(), *by)),
                _ => None,
            })
            .collect();
        let tables = if dependents.is_empty() {
            vec![(name.to_string(), kept_table(parts, name, range, keys_of)?)]
        } else {
            kept_by_key_table(parts, name, range, keys_of, |table| {
                dependents
                    .iter()
                    .find(|(d, _)| *d == table)
                    .map(|(_, by)| *by)
            })?
        };
        for (table, rows) in tables {
            let spec = crate::state::declared::find(specs, &table).ok_or_else(|| {
                EngineError::State(format!("state table '{table}' is not declared"))
            })?;
            state.put(spec, rows)?;
        }
    }
    Ok(())
}
