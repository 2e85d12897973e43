//! A sink node's lifecycle ([`SinkStage`]), driven by its task
//! ([`super::stage`]).
//!
//! ```text
//!  inputs ─> Batch:      SinkWriter::write
//!            Barrier(n): aligned ─> precommit (checkpoints on) or flush ─> coordinator
//!                        a stop barrier without checkpoints: finish
//!            End:        every input ended ─> precommit of the rest (checkpoints on) or finish
//! ```
//!
//! A sink chained after another node ([`crate::chains`]) goes through the
//! same stage, called with each message of its one input.

use std::sync::Arc;

use super::control::{Control, NodeContext, NodeEvent};
use super::inputs::InputClock;
use super::stage::Stage;
use crate::checkpoint::NodeCheckpoint;
use crate::error::{EngineError, Result};
use crate::message::{Barrier, CheckpointId, Message};
use crate::sink::SinkWriter;
use crate::time::{WATERMARK_MAX, WATERMARK_MIN};

/// The checkpoint id a sink's last precommit is made for: the final
/// checkpoint of a finished job, whatever its number turns out to be.
pub(crate) const FINAL_CHECKPOINT: CheckpointId = CheckpointId::MAX;

/// One sink's lifecycle, whichever way its messages come.
pub(crate) struct SinkStage {
    ctx: NodeContext,
    writer: Box<dyn SinkWriter>,
}

impl SinkStage {
    pub fn new(ctx: NodeContext, writer: Box<dyn SinkWriter>) -> Self {
        Self { ctx, writer }
    }

    /// The writer's own figures into the node's metrics.
    fn show_figures(&self) {
        for (name, value) in self.writer.figures() {
            self.ctx.metrics.set_connector_metric(name, value);
        }
    }
}

impl Stage for SinkStage {
    fn name(&self) -> &str {
        &self.ctx.name
    }

    fn control(&self) -> &Arc<Control> {
        &self.ctx.control
    }

    fn on_message(&mut self, clock: &mut InputClock, input: usize, message: Message) -> Result<()> {
        let metrics = &self.ctx.metrics;
        match message {
            Message::Batch(batch) => {
                metrics.add_input_rows(input, batch.num_rows());
                self.writer.write(&batch)?;
                metrics.add_rows_out(batch.num_rows());
            }
            Message::Late(late) => {
                // A sink never drops a row for lateness.
                metrics.add_input_rows(input, late.num_rows());
                self.writer.write_late(&late)?;
                metrics.add_rows_out(late.num_rows());
            }
            Message::Watermark(wm) => {
                if let Some(wm) = clock.advance(input, wm) {
                    metrics.set_watermark(wm);
                    self.writer.watermark(wm)?;
                }
            }
            Message::Idle => {
                clock.go_idle(input);
            }
            Message::Barrier(_) => {
                return Err(EngineError::Graph(
                    "a barrier was handled as a message".into(),
                ))
            }
            Message::End => {
                clock.end(input);
            }
        }
        self.show_figures();
        Ok(())
    }

    /// Precommit (checkpoints on) or flush.
    fn checkpoint(&mut self, clock: &InputClock, barrier: Barrier) -> Result<bool> {
        let control = &self.ctx.control;
        if control.checkpointing {
            let state = self
                .writer
                .precommit(barrier.checkpoint, control.completed())?;
            let data = NodeCheckpoint {
                runtime: self.ctx.runtime_state(clock, WATERMARK_MIN, false),
                state,
            };
            self.ctx.report(NodeEvent::Snapshot {
                node: self.ctx.id,
                checkpoint: barrier.checkpoint,
                data,
            })?;
        } else if barrier.stop {
            self.writer.finish()?;
        } else {
            self.writer.flush()?;
        }
        self.show_figures();
        if barrier.stop {
            self.ctx.report(NodeEvent::Stopped)?;
        }
        Ok(barrier.stop)
    }

    /// The last precommit (checkpoints on) or finish, and the node's final
    /// state to the coordinator.
    fn finish(&mut self, clock: &InputClock) -> Result<()> {
        self.writer.watermark(WATERMARK_MAX)?;
        let data = if self.ctx.control.checkpointing {
            let state = self
                .writer
                .precommit(FINAL_CHECKPOINT, self.ctx.control.completed())?;
            NodeCheckpoint {
                runtime: self.ctx.runtime_state(clock, WATERMARK_MIN, true),
                state,
            }
        } else {
            self.writer.finish()?;
            NodeCheckpoint::default()
        };
        self.show_figures();
        self.ctx.report(NodeEvent::Finished {
            node: self.ctx.id,
            data,
        })
    }
}
