//! OVER aggregates per key in event-time order:
//! `f(...) OVER (PARTITION BY k ORDER BY <event time> <frame>)`.
//!
//! In: batches with an event-time column. Out: the same rows, released in
//! event-time order once the watermark guarantees no earlier row can still
//! arrive, each with one column per window function appended.
//!
//! ```text
//!   on_batch:      rows wait in `pending`
//!   on_watermark:  rows with t < W - allowed_lateness are released, sorted by
//!                  (t, arrival), and run through per-key state
//! ```
//!
//! State per key is what the functions need, never the history: one
//! DataFusion `Accumulator` per aggregate (running frames only), a counter
//! for `row_number`, the last `n` values for `lag(x, n)`; for `lead(x, n)`,
//! the released rows still waiting for `n` successors.
//!
//! State time-to-live (`SET 'table.exec.state.ttl'`): a key whose last row is
//! more than the TTL of event time before its next one starts that row from
//! empty state, exactly as if it had never been seen; keys idle that long
//! are dropped from memory as the watermark passes them (a sweep every half
//! TTL of event time), so state stays bounded by the keys active within
//! the TTL.
//!
//! Checkpoints: table `pending` (rows waiting for the watermark), table
//! `keys` (per key: its key bytes, last event time, row count, and per
//! function the rows seen and the accumulator's intermediate state), and a
//! table `lag<f>` per `lag` function with each key's remembered values.
//!
//! Sliding frames, `RANGE BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW`
//! and `ROWS BETWEEN n PRECEDING AND CURRENT ROW`, use DataFusion's sliding
//! accumulators: each key keeps the rows in its frame (time and argument
//! values) and takes them back out (`retract_batch`) as they leave. A
//! checkpoint keeps those rows (table `frame<f>`) and, for sums, counts,
//! averages and variances, the accumulator's state (table `slide<f>`), so a
//! restore continues bit for bit; min and max are rebuilt from the rows.
//!
//! Frames: `ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW` (the row is
//! folded in, then the value read), `... AND 1 PRECEDING` (read, then fold:
//! the value over earlier rows only; a key's first row has an empty frame
//! and gets the aggregate's default value, NULL for most, 0 for `count`,
//! exactly as DataFusion's batch window functions) and `RANGE BETWEEN UNBOUNDED PRECEDING
//! AND CURRENT ROW` (SQL's default with ORDER BY: rows with equal event time
//! are peers and see each other).

//!
//! Running frames of `count`, `sum`, `avg` and eddy's Welford functions run
//! natively ([`RunningAggregate`]: per key a few numbers fed straight from
//! the argument column); other aggregates and sliding frames call
//! DataFusion's accumulators row by row. Both give the same values and
//! write the same checkpoint tables.
//!
//! `lead(x, n)` looks ahead: a released row waits until `n` later rows of
//! its key are released, then goes out once with its final value (`lead`).
//!
//! Files: here the plan (frames, functions, [`OverPlan`]); `operator` the
//! operator (pending rows, per-key state, release in event-time order,
//! time-to-live sweeps); `lead` rows waiting for their leads; `running` the native running aggregates; `output`
//! the appended columns as they fill; `checkpoint` its state as tables;
//! `spilled` keys on disk past the memory limit; `tests` the operator
//! driven through the `Operator` trait.
//!
//! Past the memory limit, a plan of running aggregates and `row_number`
//! moves every key's state to disk (its `keys` row), and released rows
//! bring their keys back before they are folded. `lag`, `lead` and
//! sliding frames do not spill yet.

mod checkpoint;
mod lead;
mod operator;
mod output;
mod running;
mod spilled;
#[cfg(test)]
mod tests;

pub use self::running::RunningAggregate;

use self::operator::OverOperator;

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::ScalarValue;
use datafusion::physical_expr::aggregate::AggregateFunctionExpr;
use datafusion::physical_expr::PhysicalExpr;
use hashbrown::HashMap;

use crate::error::Result;
use crate::operator::{Operator, OperatorPlan};
use crate::time::WATERMARK_MIN;

/// Which rows an aggregate sees for the current row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// All earlier rows and this one (`ROWS ... AND CURRENT ROW`).
    UpToCurrentRow,
    /// All earlier rows (`ROWS ... AND 1 PRECEDING`).
    BeforeCurrentRow,
    /// All earlier rows and every row with the same event time (`RANGE ... AND CURRENT ROW`).
    UpToPeers,
    /// Rows of the last `range_ms` of event time, peers included (`RANGE
    /// BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW`): rows leave the
    /// accumulator (`retract_batch`) as they fall out of the range.
    RangePreceding {
        /// How far back the frame reaches.
        range_ms: i64,
    },
    /// This row and the `rows` before it (`ROWS BETWEEN n PRECEDING AND
    /// CURRENT ROW`).
    RowsPreceding {
        /// How many earlier rows.
        rows: usize,
    },
}

impl Frame {
    /// Whether rows leave the frame again (the accumulator must retract).
    pub fn slides(&self) -> bool {
        matches!(
            self,
            Frame::RangePreceding { .. } | Frame::RowsPreceding { .. }
        )
    }

    /// Whether the row's value is read only once all its peers are in.
    fn reads_after_peers(&self) -> bool {
        matches!(self, Frame::UpToPeers | Frame::RangePreceding { .. })
    }
}

/// One window function of an OVER node.
#[derive(Debug, Clone)]
pub enum OverFunction {
    /// A running aggregate.
    Aggregate {
        /// The DataFusion aggregate.
        expr: Arc<AggregateFunctionExpr>,
        /// Its `FILTER (WHERE ...)`.
        filter: Option<Arc<dyn PhysicalExpr>>,
        /// Its frame.
        frame: Frame,
        /// Its native form, used on running (not sliding) frames: the same
        /// values without a DataFusion accumulator call per row.
        running: Option<RunningAggregate>,
    },
    /// `row_number()`.
    RowNumber,
    /// `lag(value, offset, default)`.
    Lag {
        /// The value expression.
        value: Arc<dyn PhysicalExpr>,
        /// How many rows back.
        offset: usize,
        /// Value while fewer rows precede.
        default: ScalarValue,
    },
    /// `lead(value, offset, default)`: the row waits until `offset` later
    /// rows of its key are released (see `lead`).
    Lead {
        /// The value expression.
        value: Arc<dyn PhysicalExpr>,
        /// How many rows ahead.
        offset: usize,
        /// Value where fewer rows follow.
        default: ScalarValue,
    },
}

/// Plan of an OVER node.
#[derive(Debug, Clone)]
pub struct OverPlan {
    /// Input schema.
    pub input_schema: SchemaRef,
    /// Input columns then one column per function.
    pub output_schema: SchemaRef,
    /// PARTITION BY expressions.
    pub partition_by: Vec<Arc<dyn PhysicalExpr>>,
    /// The event-time column (ORDER BY).
    pub time_column: usize,
    /// Allowed lateness of the input's event time.
    pub allowed_lateness_ms: i64,
    /// The window functions.
    pub functions: Vec<OverFunction>,
    /// Drop a key's state after this much event time without a row.
    pub state_ttl_ms: Option<i64>,
}

impl OverPlan {
    /// Whether the node has a `lead` (rows then wait for their leads).
    fn has_leads(&self) -> bool {
        self.functions
            .iter()
            .any(|f| matches!(f, OverFunction::Lead { .. }))
    }
}

impl OperatorPlan for OverPlan {
    fn kind(&self) -> &'static str {
        "over"
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        let functions: Vec<String> = self
            .functions
            .iter()
            .map(|f| match f {
                OverFunction::Aggregate {
                    expr,
                    filter,
                    frame,
                    ..
                } => {
                    let filter = filter
                        .as_ref()
                        .map(|f| format!(" filter {f}"))
                        .unwrap_or_default();
                    format!("{} {frame:?}{filter}", expr.name())
                }
                OverFunction::RowNumber => "row_number()".to_string(),
                OverFunction::Lag {
                    value,
                    offset,
                    default,
                } => format!("lag({value}, {offset}, {default:?})"),
                OverFunction::Lead {
                    value,
                    offset,
                    default,
                } => format!("lead({value}, {offset}, {default:?})"),
            })
            .collect();
        P::new()
            .exprs("partition_by", &self.partition_by)
            .column("time", &self.input_schema, self.time_column)
            .value("allowed_lateness_ms", self.allowed_lateness_ms)
            .list("functions", functions)
            .debug("state_ttl_ms", self.state_ttl_ms)
    }

    fn describe(&self) -> String {
        let functions: Vec<String> = self
            .functions
            .iter()
            .map(|f| match f {
                OverFunction::Aggregate {
                    expr,
                    frame,
                    running,
                    ..
                } => {
                    let native = if running.is_some() && !frame.slides() {
                        " native"
                    } else {
                        ""
                    };
                    format!("{} {frame:?}{native}", expr.name())
                }
                OverFunction::RowNumber => "row_number()".to_string(),
                OverFunction::Lag { value, offset, .. } => format!("lag({value}, {offset})"),
                OverFunction::Lead { value, offset, .. } => format!("lead({value}, {offset})"),
            })
            .collect();
        let ttl = self
            .state_ttl_ms
            .map(|t| format!(", state ttl {t}ms"))
            .unwrap_or_default();
        format!(
            "ordered by {} (released at watermark > t + {}ms{ttl}): [{}]",
            self.input_schema.field(self.time_column).name(),
            self.allowed_lateness_ms,
            functions.join(", ")
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        crate::operator::Distribution::hash(self.partition_by.clone())
    }

    fn state_tables(&self) -> Result<Vec<crate::state::declared::TableSpec>> {
        checkpoint::state_tables(self)
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(OverOperator {
            tables: self.state_tables()?,
            plan: self.clone(),
            converter: super::key_converter(&self.partition_by, &self.input_schema)?,
            pending: Vec::new(),
            pending_rows: 0,
            keys: HashMap::new(),
            last_sweep: WATERMARK_MIN,
            batches: 0,
            late_rows: 0,
            waiting: lead::Waiting::default(),
            spilled: None,
        }))
    }

    fn rescale_state(
        &self,
        parts: Vec<crate::rescale::InstanceState>,
        keys: &crate::rescale::KeyRange,
    ) -> Result<crate::state::StateSnapshot> {
        checkpoint::rescale_over(self, parts, keys)
    }
}
