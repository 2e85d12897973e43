//! An operator node's lifecycle ([`OperatorStage`]), driven by its task
//! ([`super::stage`]).
//!
//! ```text
//!  inputs ─> Batch:      Operator::on_batch ─> Collector ─> outputs
//!            Late:       Operator::on_late_batch ─> Collector ─> outputs
//!            Watermark:  clock (minimum over inputs) ─> on_watermark ─> output watermark
//!            Idle:       clock; forwarded once every input is idle
//!            Barrier(n): aligned ─> Operator::snapshot ─> coordinator; Barrier(n) forwarded
//!            End:        clock; once every input ended: on_end, End forwarded
//!  wall clock (operators with a processing-time interval):
//!                        Operator::on_processing_time ─> output watermark
//! ```
//!
//! A node chained after another ([`crate::chains`]) goes through the same
//! stage, called by the node before it with each message of its one input
//! ([`super::chain_link`]); a barrier is then aligned on arrival.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::control::{Control, NodeContext, NodeEvent};
use super::inputs::{InputClock, Inputs};
use super::outputs::Outputs;
use super::stage::Stage;
use crate::checkpoint::NodeCheckpoint;
use crate::error::{EngineError, Result};
use crate::message::{Barrier, Message};
use crate::operator::{Collector, Operator};
use crate::state::declared::{check_snapshot, TableSpec};
use crate::time::Timestamp;

/// How often the state of an operator that does not count its bytes is
/// sized (and the spill figures refreshed).
const STATE_SIZE_EVERY: Duration = Duration::from_millis(200);

/// An operator node ready to run.
pub(crate) struct OperatorWork {
    pub operator: Box<dyn Operator>,
    /// The state tables its plan declares.
    pub tables: Vec<TableSpec>,
    pub inputs: Inputs,
    /// The watermark last forwarded (restored from a checkpoint).
    pub forwarded: Timestamp,
}

/// One operator's lifecycle, whichever way its messages come: from the
/// channels its task reads, or by call from the node chained before it.
pub(crate) struct OperatorStage {
    ctx: NodeContext,
    op: Box<dyn Operator>,
    /// The state tables its plan declares: each snapshot holds only these.
    tables: Vec<TableSpec>,
    outputs: Outputs,
    /// The watermark last forwarded.
    forwarded: Timestamp,
    /// The minimum over the inputs, last acted on.
    input_watermark: Timestamp,
    collector: Collector,
    /// When the state-memory gauge was last refreshed.
    sized: Instant,
    /// A processing-time clock: `on_processing_time` about every `every`,
    /// whether rows come or not.
    every: Option<Duration>,
    ticked: Instant,
}

impl OperatorStage {
    pub fn new(
        ctx: NodeContext,
        operator: Box<dyn Operator>,
        tables: Vec<TableSpec>,
        forwarded: Timestamp,
        outputs: Outputs,
    ) -> Self {
        let every = operator.processing_time_interval();
        Self {
            ctx,
            op: operator,
            tables,
            outputs,
            forwarded,
            input_watermark: forwarded,
            collector: Collector::default(),
            sized: Instant::now(),
            every,
            ticked: Instant::now(),
        }
    }
}

impl OperatorStage {
    /// Reserves the operator's state from the job's memory budgets; when
    /// they refuse, the operator spills state to disk and the node asks
    /// for what it holds then. Fails when the operator cannot spill, or
    /// still holds more than the budgets grant after it did.
    fn reserve_state(&mut self) -> Result<()> {
        let bytes = self.op.state_bytes();
        let Err(refused) = self.ctx.set_state_bytes(bytes) else {
            return Ok(());
        };
        if !self.op.spill(&self.ctx.spill)? {
            return Err(refused);
        }
        self.ctx.metrics.set_spill(self.op.spill_stats());
        self.ctx.set_state_bytes(self.op.state_bytes())
    }
}

impl Stage for OperatorStage {
    fn name(&self) -> &str {
        &self.ctx.name
    }

    fn control(&self) -> &Arc<Control> {
        &self.ctx.control
    }

    fn take_held(&mut self, into: &mut Vec<super::outputs::Held>) {
        self.outputs.take_held(into);
    }

    fn next_tick(&self) -> Option<Instant> {
        let own = self.every.map(|every| self.ticked + every);
        match (own, self.outputs.next_tick()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn tick(&mut self) -> Result<()> {
        if let Some(every) = self.every {
            if self.ticked.elapsed() >= every {
                self.ticked = Instant::now();
                self.op
                    .on_processing_time(crate::operator::wall_clock_ms(), &mut self.collector)?;
                self.outputs.flush(&mut self.collector)?;
                let out = self.op.output_watermark(self.input_watermark);
                if out > self.forwarded {
                    self.forwarded = out;
                    self.ctx.metrics.set_watermark(out);
                    self.outputs.send_all(Message::Watermark(out))?;
                }
            }
        }
        self.outputs.tick()
    }

    fn on_message(&mut self, clock: &mut InputClock, input: usize, message: Message) -> Result<()> {
        let advanced = match message {
            Message::Batch(batch) => {
                clock.active(input);
                self.ctx.metrics.add_input_rows(input, batch.num_rows());
                self.op.on_batch(input, batch, &mut self.collector)?;
                self.outputs.flush(&mut self.collector)?;
                None
            }
            Message::Late(late) => {
                clock.active(input);
                self.ctx.metrics.add_input_rows(input, late.num_rows());
                self.op.on_late_batch(input, late, &mut self.collector)?;
                self.outputs.flush(&mut self.collector)?;
                None
            }
            Message::Watermark(wm) => clock.advance(input, wm),
            Message::Idle => {
                let advanced = clock.go_idle(input);
                if clock.all_idle() {
                    self.outputs.send_all(Message::Idle)?;
                }
                advanced
            }
            Message::Barrier(_) => {
                return Err(EngineError::Graph(
                    "a barrier was handled as a message".into(),
                ))
            }
            Message::End => {
                self.op.on_input_end(input, &mut self.collector)?;
                self.outputs.flush(&mut self.collector)?;
                clock.end(input)
            }
        };
        if let Some(wm) = advanced {
            self.input_watermark = wm;
            self.ctx.metrics.set_watermark(wm);
            self.op.on_watermark(wm, &mut self.collector)?;
            self.outputs.flush(&mut self.collector)?;
            let out = self.op.output_watermark(wm);
            if out > self.forwarded {
                self.forwarded = out;
                self.outputs.send_all(Message::Watermark(out))?;
            }
        }
        self.ctx.metrics.set_state_rows(self.op.state_rows());
        self.ctx.metrics.set_late_rows(self.op.late_rows());
        // Sizing can walk the whole state, so an operator that does not
        // count its bytes is sized on a clock, not per message.
        let due = self.sized.elapsed() >= STATE_SIZE_EVERY;
        if due || self.op.state_bytes_are_counted() {
            self.reserve_state()?;
        }
        if due {
            self.ctx.metrics.set_spill(self.op.spill_stats());
            self.sized = Instant::now();
        }
        Ok(())
    }

    /// The operator's state goes to the coordinator and the barrier on.
    fn checkpoint(&mut self, clock: &InputClock, barrier: Barrier) -> Result<bool> {
        if self.ctx.control.checkpointing {
            let state = if self.ctx.control.incremental {
                self.op.snapshot_incremental()?
            } else {
                self.op.snapshot()?
            };
            check_snapshot(&self.tables, &state)?;
            self.reserve_state()?;
            let data = NodeCheckpoint {
                runtime: self.ctx.runtime_state(clock, self.forwarded, false),
                state,
            };
            self.ctx.report(NodeEvent::Snapshot {
                node: self.ctx.id,
                checkpoint: barrier.checkpoint,
                data,
            })?;
        }
        self.outputs.send_all(Message::Barrier(barrier))?;
        if barrier.stop {
            self.ctx.report(NodeEvent::Stopped)?;
        }
        Ok(barrier.stop)
    }

    /// The operator's last output, the end downstream, and the node's
    /// final state to the coordinator.
    fn finish(&mut self, clock: &InputClock) -> Result<()> {
        self.op.on_end(&mut self.collector)?;
        self.outputs.flush(&mut self.collector)?;
        self.ctx.metrics.set_state_rows(self.op.state_rows());
        self.reserve_state()?;
        self.ctx.metrics.set_spill(self.op.spill_stats());
        self.outputs.send_all(Message::End)?;
        let data = NodeCheckpoint {
            runtime: self.ctx.runtime_state(clock, self.forwarded, true),
            state: Default::default(),
        };
        self.ctx.report(NodeEvent::Finished {
            node: self.ctx.id,
            data,
        })
    }
}
