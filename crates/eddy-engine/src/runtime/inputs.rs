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

use crossbeam_channel::{Receiver, RecvTimeoutError, Select};

use super::control::Control;
use super::outputs::POLL;
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
}

impl Inputs {
    pub fn new(receivers: Vec<Receiver<Message>>, clock: InputClock) -> Self {
        let blocked = vec![false; receivers.len()];
        Self {
            receivers,
            clock,
            blocked,
            pending: None,
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
    /// read), or `None` once `deadline` passes with nothing read. Polls
    /// `control` while waiting.
    pub fn next_before(
        &mut self,
        control: &Control,
        deadline: Option<std::time::Instant>,
    ) -> Result<Option<(usize, Message)>> {
        let readable: Vec<usize> = (0..self.receivers.len())
            .filter(|&i| self.readable(i))
            .collect();
        if readable.is_empty() {
            return Err(EngineError::Graph(
                "a node waited on no readable input".into(),
            ));
        }
        loop {
            if control.cancelled() {
                return Err(EngineError::Aborted);
            }
            let wait = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    left.min(POLL)
                }
                None => POLL,
            };
            if let [only] = readable[..] {
                match self.receivers[only].recv_timeout(wait) {
                    Ok(message) => return Ok(Some((only, message))),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return Err(EngineError::Aborted),
                }
            }
            let mut select = Select::new();
            for &i in &readable {
                select.recv(&self.receivers[i]);
            }
            match select.select_timeout(wait) {
                Ok(operation) => {
                    let input = readable[operation.index()];
                    return match operation.recv(&self.receivers[input]) {
                        Ok(message) => Ok(Some((input, message))),
                        Err(_) => Err(EngineError::Aborted),
                    };
                }
                Err(_) => continue,
            }
        }
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
