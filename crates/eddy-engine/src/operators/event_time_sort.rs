//! `ORDER BY <event time> [, more keys]` on a stream (as Flink allows): rows
//! come out in event-time order.
//!
//! In: batches with an event-time column, and watermarks. Out: the same
//! rows, each released once the watermark guarantees no earlier row can
//! still arrive, sorted by (event time, the further keys, arrival).
//!
//! ```text
//!   on_batch:      rows wait in `pending` (rows behind the released
//!                  horizon are late: counted, dropped, as they would
//!                  break the order)
//!   on_watermark:  rows with t < W - allowed_lateness are released, sorted
//! ```
//!
//! The order is global, so the node runs as one instance. Checkpoints:
//! table `pending`, and the released horizon and late count as meta.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, TimestampMillisecondArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::event_time_sort::EventTimeSortPlan;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("v", DataType::Int64, false),
//!     Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), false),
//! ]));
//! let plan = EventTimeSortPlan { schema: schema.clone(), time_column: 1, order_by: vec![], allowed_lateness_ms: 0 };
//! let mut op = plan.create().unwrap();
//! let mut out = Collector::default();
//! let rows = RecordBatch::try_new(schema, vec![
//!     Arc::new(Int64Array::from(vec![1, 2, 3])),
//!     Arc::new(TimestampMillisecondArray::from(vec![30, 10, 20])),
//! ]).unwrap();
//! op.on_batch(0, rows, &mut out).unwrap();
//! op.on_watermark(25, &mut out).unwrap();
//! let (_, sorted) = out.drain().next().unwrap();
//! assert_eq!(sorted.column(0).as_ref(), &Int64Array::from(vec![2, 3]) as &dyn datafusion::arrow::array::Array);
//! ```

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::PhysicalExpr;
use serde::{Deserialize, Serialize};

use super::event_order::EventOrder;
use crate::error::Result;
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::state::declared::TableSpec;
use crate::state::StateSnapshot;
use crate::time::{Timestamp, WATERMARK_MAX};

/// Plan of an `event_time_sort` node.
#[derive(Debug, Clone)]
pub struct EventTimeSortPlan {
    /// Input (and output) schema.
    pub schema: SchemaRef,
    /// The event-time column (the first sort key, ascending).
    pub time_column: usize,
    /// Further sort keys (expression, descending).
    pub order_by: Vec<(Arc<dyn PhysicalExpr>, bool)>,
    /// Allowed lateness of the input's event time.
    pub allowed_lateness_ms: i64,
}

impl OperatorPlan for EventTimeSortPlan {
    fn kind(&self) -> &'static str {
        "event_time_sort"
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        P::new()
            .column("time", &self.schema, self.time_column)
            .sort_keys("order_by", &self.order_by)
            .value("allowed_lateness_ms", self.allowed_lateness_ms)
    }

    fn describe(&self) -> String {
        let mut keys = vec![self.schema.field(self.time_column).name().clone()];
        keys.extend(
            self.order_by
                .iter()
                .map(|(e, desc)| format!("{e}{}", if *desc { " DESC" } else { "" })),
        );
        format!(
            "order by {} (released at watermark > t + {}ms)",
            keys.join(", "),
            self.allowed_lateness_ms
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// `pending` holds the rows not yet released, as they came: one
    /// instance sorts the whole stream, so the table is not keyed.
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        Ok(vec![TableSpec::new("pending", self.schema.clone())])
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(EventTimeSort {
            pending_table: self.state_tables()?.remove(0),
            plan: self.clone(),
            order: EventOrder::new(self.schema.clone(), self.time_column, self.order_by.clone()),
        }))
    }
}

#[derive(Serialize, Deserialize)]
struct Meta {
    released: Timestamp,
    late: u64,
}

struct EventTimeSort {
    plan: EventTimeSortPlan,
    /// The plan's one state table.
    pending_table: TableSpec,
    order: EventOrder,
}

impl Operator for EventTimeSort {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, _out: &mut Collector) -> Result<()> {
        self.order.push(batch)
    }

    /// A late row whose place in event-time order had passed at its
    /// source's watermark is dropped (counted); the rest wait as any row.
    fn on_late_batch(
        &mut self,
        _input: usize,
        late: crate::message::LateBatch,
        _out: &mut Collector,
    ) -> Result<()> {
        let (kept, dropped) = crate::operators::late_rows_in_order(
            late,
            self.plan.time_column,
            self.plan.allowed_lateness_ms,
        )?;
        self.order.count_late(dropped);
        self.order.push(kept)
    }

    fn on_watermark(&mut self, watermark: Timestamp, out: &mut Collector) -> Result<()> {
        let horizon = if watermark == WATERMARK_MAX {
            WATERMARK_MAX
        } else {
            watermark.saturating_sub(self.plan.allowed_lateness_ms)
        };
        if let Some(sorted) = self.order.release(horizon)? {
            out.emit(sorted);
        }
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.order.pending_rows()
    }

    fn state_bytes(&self) -> usize {
        self.order.pending_bytes()
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta(&Meta {
            released: self.order.released(),
            late: self.order.late(),
        })?;
        snapshot.put_batches(&self.pending_table, self.order.pending().iter().cloned())?;
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        let meta: Meta = state.meta()?;
        let pending = state.take(&self.pending_table)?;
        self.order.restore(pending, meta.released, meta.late);
        Ok(())
    }

    fn late_rows(&self) -> u64 {
        self.order.late()
    }

    fn output_watermark(&self, input: Timestamp) -> Timestamp {
        if input == WATERMARK_MAX {
            input
        } else {
            input.saturating_sub(self.plan.allowed_lateness_ms)
        }
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int64Array, StringArray, TimestampMillisecondArray};
    use datafusion::physical_expr::expressions::col;

    use super::*;
    use crate::operators::testing::{timed_rows, timed_schema};

    fn plan() -> EventTimeSortPlan {
        let schema = timed_schema();
        EventTimeSortPlan {
            order_by: vec![(col("k", &schema).unwrap(), true)],
            schema,
            time_column: 2,
            allowed_lateness_ms: 0,
        }
    }

    fn lines(out: &mut Collector) -> Vec<String> {
        let mut lines = Vec::new();
        for (_, batch) in out.drain() {
            let k = batch
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            let v = batch
                .column(1)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let t = batch
                .column(2)
                .as_any()
                .downcast_ref::<TimestampMillisecondArray>()
                .unwrap();
            lines.extend(
                (0..batch.num_rows())
                    .map(|i| format!("{}{} {}", k.value(i), v.value(i), t.value(i))),
            );
        }
        lines
    }

    #[test]
    fn rows_come_out_in_event_time_then_key_order_as_the_watermark_passes() {
        let mut op = plan().create().unwrap();
        let mut out = Collector::default();
        op.on_batch(
            0,
            timed_rows(&["a", "b", "a"], &[1, 2, 3], &[20, 10, 10]),
            &mut out,
        )
        .unwrap();
        op.on_batch(0, timed_rows(&["c", "a"], &[4, 5], &[15, 30]), &mut out)
            .unwrap();
        op.on_watermark(20, &mut out).unwrap();
        // Ties on time by k descending.
        assert_eq!(lines(&mut out), vec!["b2 10", "a3 10", "c4 15"]);
        assert_eq!(op.output_watermark(20), 20);
        // A row behind what was released is late: counted, never out of order.
        op.on_batch(0, timed_rows(&["z"], &[6], &[12]), &mut out)
            .unwrap();
        assert_eq!(op.late_rows(), 1);
        let state = op.snapshot().unwrap();
        let mut resumed = plan().create().unwrap();
        resumed.restore(state).unwrap();
        resumed.on_watermark(WATERMARK_MAX, &mut out).unwrap();
        assert_eq!(lines(&mut out), vec!["a1 20", "a5 30"]);
        assert_eq!(resumed.late_rows(), 1);
    }
}
