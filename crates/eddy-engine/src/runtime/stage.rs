//! A node that reads inputs (an operator or a sink), as the task it runs
//! in drives it: the [`Stage`] trait, and the loop of a task headed by one.
//!
//! ```text
//!  task headed by the stage:  channels ─> Inputs (alignment, clock) ─> Stage::{on_message, checkpoint, finish}
//!  stage chained after another node (chain_link):
//!                             Link::push(message) ─> Stage::{on_message, checkpoint, finish}
//! ```
//!
//! The stage does the same either way; only who hands it messages, and
//! whether a barrier needs aligning over several inputs, differ.

use std::time::Instant;

use super::control::Control;
use super::inputs::{InputClock, Inputs};
use crate::error::Result;
use crate::message::{Barrier, Message};

/// One node's lifecycle over its inputs.
pub(crate) trait Stage: Send {
    /// The node's name, for errors.
    fn name(&self) -> &str;

    /// The job's control flags.
    fn control(&self) -> &Control;

    /// A message other than a barrier on `input`.
    fn on_message(&mut self, clock: &mut InputClock, input: usize, message: Message) -> Result<()>;

    /// `barrier` is aligned on every input. Returns whether it was a stop
    /// (the node then stopped).
    fn checkpoint(&mut self, clock: &InputClock, barrier: Barrier) -> Result<bool>;

    /// Every input ended: the node's last work and its final state.
    fn finish(&mut self, clock: &InputClock) -> Result<()>;

    /// When a processing-time clock of this node, or of a node chained
    /// after it, is next due.
    fn next_tick(&self) -> Option<Instant> {
        None
    }

    /// Runs the processing-time clocks that are due.
    fn tick(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Runs a task headed by `stage` until every input ended, the job stops,
/// or it fails.
pub(crate) fn run_task(stage: &mut dyn Stage, mut inputs: Inputs) -> Result<()> {
    while !inputs.done() {
        stage.tick()?;
        let deadline = stage.next_tick();
        let Some((input, message)) = inputs.next_before(stage.control(), deadline)? else {
            continue;
        };
        match message {
            Message::Barrier(barrier) => inputs.barrier(input, barrier)?,
            message => stage.on_message(&mut inputs.clock, input, message)?,
        }
        if let Some(barrier) = inputs.take_aligned() {
            if stage.checkpoint(&inputs.clock, barrier)? {
                return Ok(());
            }
        }
    }
    stage.finish(&inputs.clock)
}
