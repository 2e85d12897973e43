//! The thread of an operator node.
//!
//! ```text
//!  inputs ─> Batch:      Operator::on_batch ─> Collector ─> outputs
//!            Watermark:  clock (minimum over inputs) ─> on_watermark ─> output watermark
//!            Idle:       clock; forwarded once every input is idle
//!            Barrier(n): aligned ─> Operator::snapshot ─> coordinator; Barrier(n) forwarded
//!            End:        clock; once every input ended: on_end, End forwarded
//!  wall clock (operators with a processing-time interval):
//!                        Operator::on_processing_time ─> output watermark
//! ```

use std::time::{Duration, Instant};

use super::control::{NodeContext, NodeEvent};
use super::inputs::Inputs;
use super::outputs::Outputs;
use crate::checkpoint::{NodeCheckpoint, NodeRuntimeState};
use crate::error::Result;
use crate::message::Message;
use crate::operator::{Collector, Operator};
use crate::time::Timestamp;

/// How often the state-memory gauge is refreshed.
const STATE_SIZE_EVERY: Duration = Duration::from_millis(200);

/// An operator node ready to run.
pub(crate) struct OperatorWork {
    pub operator: Box<dyn Operator>,
    pub inputs: Inputs,
    /// The watermark last forwarded (restored from a checkpoint).
    pub forwarded: Timestamp,
}

fn runtime_state(
    ctx: &NodeContext,
    inputs: &Inputs,
    forwarded: Timestamp,
    finished: bool,
) -> NodeRuntimeState {
    NodeRuntimeState {
        finished,
        metrics: ctx.metrics.snapshot(),
        clock: Some(inputs.clock.state()),
        forwarded,
    }
}

/// Runs an operator until every input ended, the job stops, or it fails.
pub(crate) fn run_operator(ctx: &NodeContext, work: OperatorWork, outputs: &Outputs) -> Result<()> {
    let OperatorWork {
        operator: mut op,
        mut inputs,
        mut forwarded,
    } = work;
    let metrics = &ctx.metrics;
    let mut collector = Collector::default();
    let mut sized = Instant::now();
    // A processing-time clock: `on_processing_time` about every `every`,
    // whether rows come or not.
    let every = op.processing_time_interval();
    let mut ticked = Instant::now();
    let mut input_watermark = forwarded;
    while !inputs.done() {
        if let Some(every) = every {
            if ticked.elapsed() >= every {
                ticked = Instant::now();
                op.on_processing_time(crate::operator::wall_clock_ms(), &mut collector)?;
                outputs.flush(&mut collector)?;
                let out = op.output_watermark(input_watermark);
                if out > forwarded {
                    forwarded = out;
                    metrics.set_watermark(out);
                    outputs.send_all(Message::Watermark(out))?;
                }
            }
        }
        let deadline = every.map(|every| ticked + every);
        let Some((input, message)) = inputs.next_before(&ctx.control, deadline)? else {
            continue;
        };
        let advanced = match message {
            Message::Batch(batch) => {
                inputs.clock.active(input);
                metrics.add_input_rows(input, batch.num_rows());
                op.on_batch(input, batch, &mut collector)?;
                outputs.flush(&mut collector)?;
                None
            }
            Message::Watermark(wm) => inputs.clock.advance(input, wm),
            Message::Idle => {
                let advanced = inputs.clock.go_idle(input);
                if inputs.clock.all_idle() {
                    outputs.send_all(Message::Idle)?;
                }
                advanced
            }
            Message::Barrier(barrier) => {
                inputs.barrier(input, barrier)?;
                None
            }
            Message::End => {
                op.on_input_end(input, &mut collector)?;
                outputs.flush(&mut collector)?;
                inputs.clock.end(input)
            }
        };
        if let Some(wm) = advanced {
            input_watermark = wm;
            metrics.set_watermark(wm);
            op.on_watermark(wm, &mut collector)?;
            outputs.flush(&mut collector)?;
            let out = op.output_watermark(wm);
            if out > forwarded {
                forwarded = out;
                outputs.send_all(Message::Watermark(out))?;
            }
        }
        metrics.set_state_rows(op.state_rows());
        metrics.set_late_rows(op.late_rows());
        if sized.elapsed() >= STATE_SIZE_EVERY {
            // Sizing can walk the whole state, so it is not done per message.
            ctx.set_state_bytes(op.state_bytes())?;
            sized = Instant::now();
        }
        if let Some(barrier) = inputs.take_aligned() {
            if ctx.control.checkpointing {
                let state = if ctx.control.incremental {
                    op.snapshot_incremental()?
                } else {
                    op.snapshot()?
                };
                ctx.set_state_bytes(op.state_bytes())?;
                let data = NodeCheckpoint {
                    runtime: runtime_state(ctx, &inputs, forwarded, false),
                    state,
                };
                ctx.report(NodeEvent::Snapshot {
                    node: ctx.id,
                    checkpoint: barrier.checkpoint,
                    data,
                })?;
            }
            outputs.send_all(Message::Barrier(barrier))?;
            if barrier.stop {
                return ctx.report(NodeEvent::Stopped);
            }
        }
    }
    op.on_end(&mut collector)?;
    outputs.flush(&mut collector)?;
    metrics.set_state_rows(op.state_rows());
    ctx.set_state_bytes(op.state_bytes())?;
    outputs.send_all(Message::End)?;
    let data = NodeCheckpoint {
        runtime: runtime_state(ctx, &inputs, forwarded, true),
        state: Default::default(),
    };
    ctx.report(NodeEvent::Finished { node: ctx.id, data })
}
