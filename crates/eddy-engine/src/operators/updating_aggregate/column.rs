//! One aggregate's state over every group, as the updating aggregate keeps
//! it: the [`AggregateColumn`] trait and the rows of a batch it folds in.
//!
//! In: a batch's argument columns with each row's group and whether it is
//! taken back out. Out: the aggregate's value for any list of groups, as
//! one Arrow array, and its state as checkpoint columns.
//!
//! Two kinds implement it: [`super::columnar`] keeps the everyday
//! aggregates (count, sum, avg, min, max over 64-bit numbers) as one vector
//! a field over all groups, folded in a single pass over the batch;
//! [`super::rows`] keeps any other aggregate as one DataFusion accumulator
//! (or argument multiset) per group.

use std::ops::Range;

use datafusion::arrow::array::{ArrayRef, BooleanArray, RecordBatch, UInt32Array};
use datafusion::arrow::datatypes::Field;

use crate::error::Result;

/// The rows of one input batch, by group.
pub struct BatchRows<'a> {
    /// Each row's group.
    pub groups: &'a [usize],
    /// Whether each row is taken back out (`None`: every row is an insert).
    pub retracts: Option<&'a [bool]>,
    /// The groups the batch touches, in the order it first touches them.
    pub touched: &'a [usize],
    /// The batch's rows grouped by touched group: each group's inserted
    /// rows, then its retracted ones (only built when a column asks for
    /// it, see [`AggregateColumn::needs_order`]).
    pub order: Option<&'a UInt32Array>,
    /// Per touched group, where its inserted and its retracted rows lie in
    /// `order`.
    pub spans: &'a [(Range<usize>, Range<usize>)],
}

impl BatchRows<'_> {
    /// Whether `row` is taken back out.
    pub fn retracts(&self, row: usize) -> bool {
        self.retracts.is_some_and(|r| r[row])
    }
}

/// Whether `filter` (a FILTER clause's mask, nulls already false) lets
/// `row` into the aggregate.
pub fn passes(filter: Option<&BooleanArray>, row: usize) -> bool {
    filter.is_none_or(|m| m.value(row))
}

/// One aggregate's state over all groups.
pub trait AggregateColumn: Send {
    /// Makes room for groups `0..groups`, each starting empty.
    fn resize(&mut self, groups: usize) -> Result<()>;

    /// Whether [`BatchRows::order`] is needed by [`Self::update`].
    fn needs_order(&self) -> bool {
        false
    }

    /// Folds a batch in: `args` are the aggregate's argument columns,
    /// `filter` its FILTER mask.
    fn update(
        &mut self,
        rows: &BatchRows<'_>,
        args: &[ArrayRef],
        filter: Option<&BooleanArray>,
    ) -> Result<()>;

    /// The aggregate's value for each of `groups`.
    fn evaluate(&mut self, groups: &[usize]) -> Result<ArrayRef>;

    /// Empties group `g` (every row of it has left).
    fn reset(&mut self, g: usize) -> Result<()>;

    /// Keeps the groups `keep` marks, numbered again in their order.
    fn retain(&mut self, keep: &[bool]) -> Result<()>;

    /// The fields of this aggregate's columns in the checkpoint's groups
    /// table (none: it keeps a table of its own, [`Self::state_table`]).
    fn state_fields(&self) -> Result<Vec<Field>>;

    /// Its columns in the groups table, one row per group.
    fn state_columns(&mut self) -> Result<Vec<ArrayRef>>;

    /// Its own checkpoint table, if it keeps one.
    fn state_table(&self) -> Result<Option<RecordBatch>> {
        Ok(None)
    }

    /// Its own table's state per group, packed into one binary value a
    /// group (`None`: it keeps no table of its own). A spilled group
    /// carries it in its entry, so it comes back whole.
    fn packed_state(&self) -> Result<Option<ArrayRef>> {
        Ok(None)
    }

    /// Sets each of `groups` from its row of `packed` (a column
    /// [`Self::packed_state`] gave).
    fn load_packed(&mut self, _groups: &[usize], _packed: &ArrayRef) -> Result<()> {
        Err(crate::error::EngineError::State(
            "updating_aggregate: an aggregate without a table of its own has no packed state"
                .into(),
        ))
    }

    /// Restores `groups` groups from its groups-table columns and its own
    /// table.
    fn restore(
        &mut self,
        groups: usize,
        columns: &[ArrayRef],
        table: Option<RecordBatch>,
    ) -> Result<()>;

    /// Sets each of `groups` from its row of `columns` (its groups-table
    /// columns): group `groups[i]` from row `i`. Spilled groups come back
    /// this way.
    fn load(&mut self, groups: &[usize], columns: &[ArrayRef]) -> Result<()>;

    /// Bytes held.
    fn size(&self) -> usize;

    /// Whether [`Self::size`] is kept as groups come and go (cheap to ask).
    fn size_is_counted(&self) -> bool {
        true
    }
}

/// Keeps `keep`'s entries of `values`, in order.
pub fn retain_marked<T>(values: &mut Vec<T>, keep: &[bool]) {
    let mut index = 0;
    values.retain(|_| {
        let kept = keep.get(index).copied().unwrap_or(false);
        index += 1;
        kept
    });
}
