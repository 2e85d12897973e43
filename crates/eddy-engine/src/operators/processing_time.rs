//! The processing-time clock: makes a `PROCTIME()` column a time attribute
//! that windows (and whatever else reads event time) can run on.
//!
//! In: batches with a processing-time column, input watermarks (ignored but
//! for the end of input). Out: the same rows, the column stamped with the
//! wall clock as the rows pass this node, and a watermark that follows the
//! wall clock: just below the last stamp, so every later row is stamped at
//! or after it and no row is ever late.
//!
//! ```text
//!   on_batch:            now = max(wall clock, last stamp); column := now
//!   on_processing_time:  (about every 100 ms, rows or not) last := max(last, wall clock)
//!   output watermark:    last - 1 (+inf once the input ended)
//! ```
//!
//! Stamping here rather than where `PROCTIME()` was evaluated keeps the
//! stamps and the watermark from one clock: a row stamped upstream could
//! reach this node after the watermark passed its stamp. Results over
//! processing time depend on when rows are read and are not repeatable;
//! at the end of a bounded input every window closes. Stateless: a
//! restored job goes on from the wall clock.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Array, Int64Array, TimestampMillisecondArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::processing_time::ProcessingTimeClockPlan;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("v", DataType::Int64, false),
//!     Field::new("proc", DataType::Timestamp(TimeUnit::Millisecond, None), true),
//! ]));
//! let plan = ProcessingTimeClockPlan { schema: schema.clone(), column: 1 };
//! let mut op = plan.create().unwrap();
//! let mut out = Collector::default();
//! let rows = RecordBatch::try_new(schema, vec![
//!     Arc::new(Int64Array::from(vec![1, 2])),
//!     Arc::new(TimestampMillisecondArray::from(vec![0, 0])),
//! ]).unwrap();
//! op.on_batch(0, rows, &mut out).unwrap();
//! let (_, stamped) = out.drain().next().unwrap();
//! let stamp = stamped.column(1).as_any().downcast_ref::<TimestampMillisecondArray>().unwrap().value(0);
//! assert!(stamp > 1_700_000_000_000); // the wall clock
//! assert_eq!(op.output_watermark(0), stamp - 1);
//! ```

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Array, ArrayRef, TimestampMillisecondArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::Result;
use crate::operator::{wall_clock_ms, Collector, Operator, OperatorPlan};
use crate::time::{Timestamp, WATERMARK_MAX, WATERMARK_MIN};

/// How often the clock advances while no rows come.
pub const TICK: Duration = Duration::from_millis(100);

/// Plan of a `processing_time` node.
#[derive(Debug, Clone)]
pub struct ProcessingTimeClockPlan {
    /// Input (and output) schema.
    pub schema: SchemaRef,
    /// The processing-time column, stamped here.
    pub column: usize,
}

impl OperatorPlan for ProcessingTimeClockPlan {
    /// Stateless: each instance stamps the rows it is given; the window
    /// after it takes the least of their watermarks.
    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        crate::operator::Distribution::Any
    }

    fn kind(&self) -> &'static str {
        "processing_time"
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        P::new().column("column", &self.schema, self.column)
    }

    fn describe(&self) -> String {
        format!(
            "{} := the wall clock; watermark follows it",
            self.schema.field(self.column).name()
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(ProcessingTimeClock {
            plan: self.clone(),
            last: WATERMARK_MIN,
        }))
    }
}

struct ProcessingTimeClock {
    plan: ProcessingTimeClockPlan,
    /// The latest stamp given (or clock reading), epoch ms.
    last: Timestamp,
}

impl ProcessingTimeClock {
    fn advance(&mut self, now: Timestamp) -> Timestamp {
        self.last = self.last.max(now);
        self.last
    }
}

impl Operator for ProcessingTimeClock {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        let now = self.advance(wall_clock_ms());
        let rows = batch.num_rows();
        let target = self.plan.schema.field(self.plan.column).data_type();
        let stamps: ArrayRef = Arc::new(TimestampMillisecondArray::from(vec![now; rows]));
        let stamps = if stamps.data_type() == target {
            stamps
        } else {
            cast(&stamps, target)?
        };
        let mut columns = batch.columns().to_vec();
        columns[self.plan.column] = stamps;
        out.emit(RecordBatch::try_new(self.plan.schema.clone(), columns)?);
        Ok(())
    }

    fn output_watermark(&self, input: Timestamp) -> Timestamp {
        if input == WATERMARK_MAX {
            WATERMARK_MAX
        } else if self.last == WATERMARK_MIN {
            WATERMARK_MIN
        } else {
            self.last - 1
        }
    }

    fn processing_time_interval(&self) -> Option<Duration> {
        Some(TICK)
    }

    fn on_processing_time(&mut self, now_ms: Timestamp, _out: &mut Collector) -> Result<()> {
        self.advance(now_ms);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    use super::*;

    fn plan() -> ProcessingTimeClockPlan {
        ProcessingTimeClockPlan {
            schema: Arc::new(Schema::new(vec![
                Field::new("v", DataType::Int64, false),
                Field::new(
                    "proc",
                    DataType::Timestamp(TimeUnit::Millisecond, None),
                    true,
                ),
            ])),
            column: 1,
        }
    }

    fn rows(plan: &ProcessingTimeClockPlan, n: i64) -> RecordBatch {
        RecordBatch::try_new(
            plan.schema.clone(),
            vec![
                Arc::new(Int64Array::from((0..n).collect::<Vec<_>>())),
                Arc::new(TimestampMillisecondArray::from(vec![0; n as usize])),
            ],
        )
        .unwrap()
    }

    fn stamps(batch: &RecordBatch) -> Vec<i64> {
        batch
            .column(1)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .unwrap()
            .values()
            .to_vec()
    }

    #[test]
    fn rows_are_stamped_at_or_after_the_watermark_and_stamps_never_go_back() {
        let plan = plan();
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        assert_eq!(op.output_watermark(5), WATERMARK_MIN, "no clock read yet");
        // A clock reading in the future (another clock's): stamps hold to it.
        let ahead = wall_clock_ms() + 60_000;
        op.on_processing_time(ahead, &mut out).unwrap();
        let watermark = op.output_watermark(5);
        assert_eq!(watermark, ahead - 1);
        op.on_batch(0, rows(&plan, 3), &mut out).unwrap();
        let (_, batch) = out.drain().next().unwrap();
        assert_eq!(batch.column(0).len(), 3);
        assert!(stamps(&batch).iter().all(|&s| s == ahead && s > watermark));
        assert_eq!(op.output_watermark(5), ahead - 1);
    }

    #[test]
    fn the_clock_moves_without_rows_and_the_end_of_input_ends_it() {
        let plan = plan();
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        assert_eq!(op.processing_time_interval(), Some(TICK));
        op.on_processing_time(1_000, &mut out).unwrap();
        op.on_processing_time(2_000, &mut out).unwrap();
        assert_eq!(op.output_watermark(0), 1_999);
        assert_eq!(op.output_watermark(WATERMARK_MAX), WATERMARK_MAX);
        assert_eq!(out.drain().count(), 0);
    }
}
