//! The thread of a sink node.
//!
//! ```text
//!  inputs ─> Batch:      SinkWriter::write
//!            Barrier(n): aligned ─> precommit (checkpoints on) or flush ─> coordinator
//!                        a stop barrier without checkpoints: finish
//!            End:        every input ended ─> precommit of the rest (checkpoints on) or finish
//! ```

use super::control::{NodeContext, NodeEvent};
use super::inputs::Inputs;
use crate::checkpoint::{NodeCheckpoint, NodeRuntimeState};
use crate::error::Result;
use crate::message::{CheckpointId, Message};
use crate::sink::SinkWriter;
use crate::time::{WATERMARK_MAX, WATERMARK_MIN};

/// The checkpoint id a sink's last precommit is made for: the final
/// checkpoint of a finished job, whatever its number turns out to be.
pub(crate) const FINAL_CHECKPOINT: CheckpointId = CheckpointId::MAX;

fn runtime_state(ctx: &NodeContext, inputs: &Inputs, finished: bool) -> NodeRuntimeState {
    NodeRuntimeState {
        finished,
        metrics: ctx.metrics.snapshot(),
        clock: Some(inputs.clock.state()),
        forwarded: WATERMARK_MIN,
    }
}

/// Runs a sink until every input ended, the job stops, or it fails.
pub(crate) fn run_sink(
    ctx: &NodeContext,
    mut writer: Box<dyn SinkWriter>,
    mut inputs: Inputs,
) -> Result<()> {
    let metrics = &ctx.metrics;
    let control = &ctx.control;
    while !inputs.done() {
        let (input, message) = inputs.next(control)?;
        match message {
            Message::Batch(batch) => {
                metrics.add_input_rows(input, batch.num_rows());
                writer.write(&batch)?;
                metrics.add_rows_out(batch.num_rows());
            }
            Message::Watermark(wm) => {
                if let Some(wm) = inputs.clock.advance(input, wm) {
                    metrics.set_watermark(wm);
                    writer.watermark(wm)?;
                }
            }
            Message::Idle => {
                inputs.clock.go_idle(input);
            }
            Message::Barrier(barrier) => inputs.barrier(input, barrier)?,
            Message::End => {
                inputs.clock.end(input);
            }
        }
        if let Some(barrier) = inputs.take_aligned() {
            if control.checkpointing {
                let state = writer.precommit(barrier.checkpoint, control.completed())?;
                let data = NodeCheckpoint {
                    runtime: runtime_state(ctx, &inputs, false),
                    state,
                };
                ctx.report(NodeEvent::Snapshot {
                    node: ctx.id,
                    checkpoint: barrier.checkpoint,
                    data,
                })?;
            } else if barrier.stop {
                writer.finish()?;
            } else {
                writer.flush()?;
            }
            if barrier.stop {
                return ctx.report(NodeEvent::Stopped);
            }
        }
    }
    writer.watermark(WATERMARK_MAX)?;
    let data = if control.checkpointing {
        let state = writer.precommit(FINAL_CHECKPOINT, control.completed())?;
        NodeCheckpoint {
            runtime: runtime_state(ctx, &inputs, true),
            state,
        }
    } else {
        writer.finish()?;
        NodeCheckpoint::default()
    };
    ctx.report(NodeEvent::Finished { node: ctx.id, data })
}
