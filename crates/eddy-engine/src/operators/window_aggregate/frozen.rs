//! A sliced window aggregation's complete slices: state tables (end, keys,
//! each accumulator's state) by slice end, with their bytes counted as
//! they come and go, so the operator is sized after every message without
//! walking them (a day-wide hop with a one-second slide holds 86,400).

use std::collections::BTreeMap;
use std::ops::RangeBounds;

use datafusion::arrow::record_batch::RecordBatch;

/// Complete slices by their end.
#[derive(Default)]
pub(super) struct FrozenSlices {
    by_end: BTreeMap<i64, Vec<RecordBatch>>,
    /// `get_array_memory_size` of every table held.
    bytes: usize,
    rows: usize,
}

impl FrozenSlices {
    /// Holds `table` as (part of) the slice ending at `end`.
    pub(super) fn push(&mut self, end: i64, table: RecordBatch) {
        self.bytes += table.get_array_memory_size();
        self.rows += table.num_rows();
        self.by_end.entry(end).or_default().push(table);
    }

    /// Forgets the slice ending at `end`; its tables.
    pub(super) fn remove(&mut self, end: i64) -> Vec<RecordBatch> {
        let tables = self.by_end.remove(&end).unwrap_or_default();
        for table in &tables {
            self.bytes -= table.get_array_memory_size();
            self.rows -= table.num_rows();
        }
        tables
    }

    /// Forgets every slice ending at or before `last`.
    pub(super) fn remove_through(&mut self, last: i64) {
        while let Some(end) = self.first_end().filter(|&end| end <= last) {
            self.remove(end);
        }
    }

    /// Every slice, leaving none.
    pub(super) fn take(&mut self) -> BTreeMap<i64, Vec<RecordBatch>> {
        self.bytes = 0;
        self.rows = 0;
        std::mem::take(&mut self.by_end)
    }

    pub(super) fn first_end(&self) -> Option<i64> {
        self.by_end.first_key_value().map(|(&end, _)| end)
    }

    /// The slices ending in `ends`, by end.
    pub(super) fn range(
        &self,
        ends: impl RangeBounds<i64>,
    ) -> impl Iterator<Item = (&i64, &Vec<RecordBatch>)> {
        self.by_end.range(ends)
    }

    /// Every table held, in end order.
    pub(super) fn tables(&self) -> impl Iterator<Item = &RecordBatch> {
        self.by_end.values().flatten()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.by_end.is_empty()
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(super) fn rows(&self) -> usize {
        self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operators::testing::timed_rows;

    #[test]
    fn the_counted_bytes_and_rows_follow_the_slices_held() {
        let walk = |f: &FrozenSlices| {
            let tables: Vec<&RecordBatch> = f.tables().collect();
            (
                tables
                    .iter()
                    .map(|t| t.get_array_memory_size())
                    .sum::<usize>(),
                tables.iter().map(|t| t.num_rows()).sum::<usize>(),
            )
        };
        let mut frozen = FrozenSlices::default();
        for end in [4, 2, 6, 4] {
            frozen.push(end, timed_rows(&["a", "b"], &[1, 2], &[end - 1, end - 1]));
            assert_eq!(walk(&frozen), (frozen.bytes(), frozen.rows()));
        }
        assert_eq!(frozen.remove(4).len(), 2);
        assert_eq!(walk(&frozen), (frozen.bytes(), frozen.rows()));
        frozen.remove_through(2);
        assert_eq!(frozen.first_end(), Some(6));
        assert_eq!(walk(&frozen), (frozen.bytes(), frozen.rows()));
        assert_eq!(frozen.take().len(), 1);
        assert!(frozen.is_empty());
        assert_eq!((frozen.bytes(), frozen.rows()), (0, 0));
    }
}
