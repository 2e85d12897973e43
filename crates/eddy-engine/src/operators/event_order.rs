//! Rows held until the watermark has passed them, then released in
//! event-time order: what `ORDER BY` the event time and `MATCH_RECOGNIZE`
//! share.
//!
//! In: input batches (`push`) and horizons (`release`). Out: the rows
//! earlier than each horizon, sorted by (event time, further keys,
//! arrival). A row arriving behind what was already released cannot be put
//! in order any more: it is counted late and dropped. Each waiting batch
//! is split on its own when a horizon cuts it, so what waits keeps only its
//! own batch's buffers (a string-view column filtered out of a
//! concatenation would keep every earlier batch's data alive, and every
//! checkpoint would write it again).

use std::sync::Arc;

use datafusion::arrow::array::{BooleanArray, UInt32Array};
use datafusion::arrow::compute::{
    concat_batches, filter_record_batch, lexsort_to_indices, not, take_record_batch, SortColumn,
    SortOptions,
};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::Result;
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MIN};

/// Waiting rows and how far they were released.
#[derive(Debug)]
pub(crate) struct EventOrder {
    schema: SchemaRef,
    time_column: usize,
    /// Sort keys after the event time (expression, descending).
    order_by: Vec<(Arc<dyn PhysicalExpr>, bool)>,
    pending: Vec<RecordBatch>,
    /// Rows earlier than this were released.
    released: Timestamp,
    late: u64,
}

impl EventOrder {
    pub(crate) fn new(
        schema: SchemaRef,
        time_column: usize,
        order_by: Vec<(Arc<dyn PhysicalExpr>, bool)>,
    ) -> Self {
        Self {
            schema,
            time_column,
            order_by,
            pending: Vec::new(),
            released: WATERMARK_MIN,
            late: 0,
        }
    }

    /// Takes a batch to hold. Rows behind the released horizon are counted
    /// late; rows without an event time (the source counted them bad) are
    /// left out.
    pub(crate) fn push(&mut self, batch: RecordBatch) -> Result<()> {
        let times = to_epoch_millis(batch.column(self.time_column))?;
        let released = self.released;
        let on_time: BooleanArray = times
            .iter()
            .map(|t| Some(t.is_some_and(|t| t >= released)))
            .collect();
        self.late += times
            .iter()
            .filter(|t| t.is_some_and(|t| t < released))
            .count() as u64;
        let batch = if on_time.true_count() == batch.num_rows() {
            batch
        } else {
            filter_record_batch(&batch, &on_time)?
        };
        if batch.num_rows() > 0 {
            self.pending.push(crate::state::owned_batch::owned(batch));
        }
        Ok(())
    }

    /// The rows earlier than `horizon`, sorted; `None` when there are none
    /// (or the horizon does not move).
    pub(crate) fn release(&mut self, horizon: Timestamp) -> Result<Option<RecordBatch>> {
        if horizon <= self.released {
            return Ok(None);
        }
        self.released = horizon;
        let mut due_parts = Vec::new();
        let mut kept = Vec::new();
        for batch in std::mem::take(&mut self.pending) {
            let times = to_epoch_millis(batch.column(self.time_column))?;
            let due: BooleanArray = times
                .iter()
                .map(|t| Some(t.is_some_and(|t| t < horizon)))
                .collect();
            match due.true_count() {
                0 => kept.push(batch),
                n if n == batch.num_rows() => due_parts.push(batch),
                _ => {
                    due_parts.push(filter_record_batch(&batch, &due)?);
                    kept.push(crate::state::owned_batch::owned(filter_record_batch(
                        &batch,
                        &not(&due)?,
                    )?));
                }
            }
        }
        self.pending = kept;
        if due_parts.is_empty() {
            return Ok(None);
        }
        let due = concat_batches(&self.schema, &due_parts)?;
        let n = due.num_rows();
        let mut columns = vec![SortColumn {
            values: due.column(self.time_column).clone(),
            options: None,
        }];
        for (expr, descending) in &self.order_by {
            columns.push(SortColumn {
                values: expr.evaluate(&due)?.into_array(n)?,
                options: Some(SortOptions {
                    descending: *descending,
                    nulls_first: !*descending,
                }),
            });
        }
        columns.push(SortColumn {
            values: Arc::new(UInt32Array::from_iter_values(0..n as u32)),
            options: None,
        });
        let order = lexsort_to_indices(&columns, None)?;
        Ok(Some(take_record_batch(&due, &order)?))
    }

    /// Rows earlier than this were released.
    pub(crate) fn released(&self) -> Timestamp {
        self.released
    }

    /// Counts `rows` more late rows (dropped before they were pushed).
    pub(crate) fn count_late(&mut self, rows: u64) {
        self.late += rows;
    }

    /// Rows counted late so far.
    pub(crate) fn late(&self) -> u64 {
        self.late
    }

    /// The waiting batches (for a checkpoint: shared, not copied).
    pub(crate) fn pending(&self) -> &[RecordBatch] {
        &self.pending
    }

    /// Rows waiting.
    pub(crate) fn pending_rows(&self) -> usize {
        self.pending.iter().map(RecordBatch::num_rows).sum()
    }

    /// Bytes of the waiting rows.
    pub(crate) fn pending_bytes(&self) -> usize {
        self.pending
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum()
    }

    /// Back to a checkpoint's state.
    pub(crate) fn restore(&mut self, pending: RecordBatch, released: Timestamp, late: u64) {
        self.pending = if pending.num_rows() > 0 {
            vec![pending]
        } else {
            Vec::new()
        };
        self.released = released;
        self.late = late;
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, TimestampMillisecondArray};

    use super::*;
    use crate::operators::testing::{timed_rows, timed_schema};

    fn times(batch: &RecordBatch) -> Vec<i64> {
        let t = batch
            .column(2)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .unwrap();
        (0..t.len()).map(|i| t.value(i)).collect()
    }

    #[test]
    fn rows_come_out_sorted_once_the_horizon_passes_and_late_ones_are_counted() {
        let mut order = EventOrder::new(timed_schema(), 2, Vec::new());
        order
            .push(timed_rows(&["a", "b", "c"], &[1, 2, 3], &[30, 10, 20]))
            .unwrap();
        assert_eq!(times(&order.release(25).unwrap().unwrap()), vec![10, 20]);
        assert_eq!(order.pending_rows(), 1);
        assert!(
            order.release(25).unwrap().is_none(),
            "the horizon did not move"
        );
        order
            .push(timed_rows(&["d", "e"], &[4, 5], &[24, 40]))
            .unwrap();
        assert_eq!(order.late(), 1);
        assert_eq!(
            times(&order.release(i64::MAX).unwrap().unwrap()),
            vec![30, 40]
        );
    }
}
