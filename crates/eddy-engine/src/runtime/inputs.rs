//! The receiving side of a node: one channel per input, the input
//! watermarks, and barrier alignment.
//!
//! ```text
//!  input i: ... Batch  Watermark  Barrier(n) | (not read until aligned) ...
//!  input j: ... Batch  Batch  Batch  Barrier(n)
//!                                        └─ aligned: every input ended or at Barrier(n)
//! ```
//!
//! Once the barrier of checkpoint `n` has arrived on an input, that input is
//! not read again until it has arrived on every other input that has not
//! ended: the node's state then reflects exactly the messages before the
//! barrier on every input.

use std::task::{Context, Poll};
use std::time::Instant;

use tokio::sync::mpsc::Receiver;

use super::control::{Control, Wakes};
use crate::checkpoint::ClockState;
use crate::error::{EngineError, Result};
use crate::message::{Barrier, Message};
use crate::time::{Timestamp, WATERMARK_MAX, WATERMARK_MIN};

/// Per-input watermark bookkeeping shared by operators and sinks.
///
/// The node's watermark is the minimum over its inputs that are not idle;
/// it never goes back. An idle input rejoins the minimum with its next
/// message; its rows may then be behind, and operators count them as late.
#[derive(Debug, Clone)]
pub(crate) struct InputClock {
    watermarks: Vec<Timestamp>,
    ended: Vec<bool>,
    idle: Vec<bool>,
    current: Timestamp,
}

impl InputClock {
    pub fn new(inputs: usize) -> Self {
        Self {
            watermarks: vec![WATERMARK_MIN; inputs],
            ended: vec![false; inputs],
            idle: vec![false; inputs],
            current: WATERMARK_MIN,
        }
    }

    /// A clock as checkpointed; `None` when it does not fit `inputs`.
    pub fn restored(state: &ClockState, inputs: usize) -> Option<Self> {
        let fits = state.watermarks.len() == inputs
            && state.ended.len() == inputs
            && state.idle.len() == inputs;
        fits.then(|| Self {
            watermarks: state.watermarks.clone(),
            ended: state.ended.clone(),
            idle: state.idle.clone(),
            current: state.current,
        })
    }

    pub fn state(&self) -> ClockState {
        ClockState {
            watermarks: self.watermarks.clone(),
            ended: self.ended.clone(),
            idle: self.idle.clone(),
            current: self.current,
        }
    }

    fn recompute(&mut self) -> Option<Timestamp> {
        let min = (0..self.watermarks.len())
            .filter(|&i| !self.idle[i])
            .map(|i| self.watermarks[i])
            .min()?;
        (min > self.current).then(|| {
            self.current = min;
            min
        })
    }

    /// Returns the new minimum if it advanced.
    pub fn advance(&mut self, input: usize, watermark: Timestamp) -> Option<Timestamp> {
        self.active(input);
        if let Some(w) = self.watermarks.get_mut(input) {
            *w = (*w).max(watermark);
        }
        self.recompute()
    }

    /// An input sent data: it is no longer idle.
    pub fn active(&mut self, input: usize) {
        if let Some(idle) = self.idle.get_mut(input) {
            *idle = false;
        }
    }

    /// An input went idle; returns the new minimum if it advanced.
    pub fn go_idle(&mut self, input: usize) -> Option<Timestamp> {
        if let Some(idle) = self.idle.get_mut(input) {
            *idle = true;
        }
        self.recompute()
    }

    /// Whether every input that has not ended is idle (and one is).
    pub fn all_idle(&self) -> bool {
        let mut any = false;
        for i in 0..self.idle.len() {
            if !self.ended[i] {
                if !self.idle[i] {
                    return false;
                }
                any = true;
            }
        }
        any
    }

    /// Marks an input ended; returns the new minimum if it advanced.
    pub fn end(&mut self, input: usize) -> Option<Timestamp> {
        if let Some(e) = self.ended.get_mut(input) {
            *e = true;
        }
        self.advance(input, WATERMARK_MAX)
    }

    pub fn ended(&self, input: usize) -> bool {
        self.ended.get(input).copied().unwrap_or(true)
    }

    pub fn all_ended(&self) -> bool {
        self.ended.iter().all(|e| *e)
    }
}

/// A node's input channels with their clock and barrier alignment.
pub(crate) struct Inputs {
    receivers: Vec<Receiver<Message>>,
    pub clock: InputClock,
    /// Inputs whose barrier arrived, not read until the others catch up.
    blocked: Vec<bool>,
    pending: Option<Barrier>,
    /// The input looked at first next time: inputs take turns, so a busy
    /// one cannot keep another from being read.
    turn: usize,
}

impl Inputs {
    pub fn new(receivers: Vec<Receiver<Message>>, clock: InputClock) -> Self {
        let blocked = vec![false; receivers.len()];
        Self {
            receivers,
            clock,
            blocked,
            pending: None,
            turn: 0,
        }
    }

    fn readable(&self, input: usize) -> bool {
        !self.blocked[input] && !self.clock.ended(input)
    }

    /// Whether nothing more can arrive: every input ended and no barrier is
    /// waiting to be aligned.
    pub fn done(&self) -> bool {
        self.pending.is_none() && self.clock.all_ended()
    }

    /// The next message of any readable input (inputs at a barrier are not
    /// read), or `None` once `deadline` passes with nothing read, or when
    /// `wakes` fires (a flag of `control` changed). Waits without holding
    /// a worker; fails once the job is cancelled.
    pub async fn next_before(
        &mut self,
        control: &Control,
        wakes: &mut Wakes,
        deadline: Option<Instant>,
    ) -> Result<Option<(usize, Message)>> {
        if control.cancelled() {
            return Err(EngineError::Aborted);
        }
        if !(0..self.receivers.len()).any(|i| self.readable(i)) {
            return Err(EngineError::Graph(
                "a node waited on no readable input".into(),
            ));
        }
        tokio::select! {
            biased;
            next = std::future::poll_fn(|cx| self.poll_next(cx)) => next.map(Some),
            changed = wakes.changed() => {
                changed.map_err(|_| EngineError::Aborted)?;
                if control.cancelled() {
                    return Err(EngineError::Aborted);
                }
                Ok(None)
            }
            () = super::pool::until(deadline) => Ok(None),
        }
    }

    /// The first readable input with a message, taking turns.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Result<(usize, Message)>> {
        let n = self.receivers.len();
        for k in 0..n {
            let input = (self.turn + k) % n;
            if !self.readable(input) {
                continue;
            }
            match self.receivers[input].poll_recv(cx) {
                Poll::Ready(Some(message)) => {
                    self.turn = (input + 1) % n;
                    return Poll::Ready(Ok((input, message)));
                }
                // Every sender gone without an `End`: the job is ending.
                Poll::Ready(None) => return Poll::Ready(Err(EngineError::Aborted)),
                Poll::Pending => {}
            }
        }
        Poll::Pending
    }

    /// A barrier arrived on `input`: stop reading it until aligned.
    pub fn barrier(&mut self, input: usize, barrier: Barrier) -> Result<()> {
        match self.pending {
            Some(pending) if pending != barrier => {
                return Err(EngineError::Graph(format!(
                    "barrier {} arrived while aligning barrier {}",
                    barrier.checkpoint, pending.checkpoint
                )))
            }
            _ => self.pending = Some(barrier),
        }
        self.blocked[input] = true;
        Ok(())
    }

    /// The pending barrier once it has arrived on every input that has not
    /// ended; reading resumes on all inputs.
    pub fn take_aligned(&mut self) -> Option<Barrier> {
        let pending = self.pending?;
        let aligned = (0..self.receivers.len()).all(|i| self.blocked[i] || self.clock.ended(i));
        if !aligned {
            return None;
        }
        self.blocked.iter_mut().for_each(|b| *b = false);
        self.pending = None;
        Some(pending)
    }
}
