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
//!
//! A task's loop is a future on the worker pool ([`super::pool`]): it
//! waits for input, a timer or a control change without a worker, hands
//! each message to its stages by plain calls, then delivers what they hold
//! for full channels ([`super::outputs::deliver`]) before it reads on, and
//! yields its worker when its [`Budget`] is spent.

use std::sync::Arc;
use std::time::Instant;

use super::control::{Control, Wakes};
use super::inputs::{InputClock, Inputs};
use super::outputs::{deliver_taken, Held};
use super::pool::Budget;
use crate::error::Result;
use crate::message::{Barrier, Message};

/// One node's lifecycle over its inputs.
pub(crate) trait Stage: Send {
    /// The node's name, for errors.
    fn name(&self) -> &str;

    /// The job's control flags.
    fn control(&self) -> &Arc<Control>;

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

    /// Takes out what this node, and the nodes chained after it, hold for
    /// full channels ([`super::outputs`]).
    fn take_held(&mut self, _into: &mut Vec<Held>) {}
}

/// Delivers what the nodes of `stage`'s chain hold for full channels.
async fn deliver_held(stage: &mut dyn Stage, control: &Control, wakes: &mut Wakes) -> Result<()> {
    deliver_taken(|held| stage.take_held(held), control, wakes).await
}

/// Runs a task headed by `stage` until every input ended, the job stops,
/// or it fails.
pub(crate) async fn run_task(stage: &mut dyn Stage, mut inputs: Inputs) -> Result<()> {
    let control = stage.control().clone();
    let mut wakes = control.wakes();
    let mut budget = Budget::new();
    while !inputs.done() {
        stage.tick()?;
        deliver_held(stage, &control, &mut wakes).await?;
        let deadline = stage.next_tick();
        let Some((input, message)) = inputs.next_before(&control, &mut wakes, deadline).await?
        else {
            continue;
        };
        match message {
            Message::Barrier(barrier) => inputs.barrier(input, barrier)?,
            message => stage.on_message(&mut inputs.clock, input, message)?,
        }
        if let Some(barrier) = inputs.take_aligned() {
            let stopped = stage.checkpoint(&inputs.clock, barrier)?;
            deliver_held(stage, &control, &mut wakes).await?;
            if stopped {
                return Ok(());
            }
        }
        deliver_held(stage, &control, &mut wakes).await?;
        budget.spend().await;
    }
    stage.finish(&inputs.clock)?;
    deliver_held(stage, &control, &mut wakes).await
}
